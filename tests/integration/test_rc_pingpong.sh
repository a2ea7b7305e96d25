# Debian's unmodified ibv_rc_pingpong between two processes on loopback, on both engines:
# polling and -e (CQ events), 4096 (default), 1, 65536 and 1048576 bytes; then on-demand
# paging: -o (ODP regions), -o -O (the implicit region), -P (ibv_advise_mr prefetch), -c
# (each received buffer checked).
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/pairs.sh"

# pingpong LABEL ITERS SIZE [FLAGS...]: one pair, both sides' reports checked.
pingpong() {
	local label=$1 iters=$2 size=$3 side out args sz=(-s "$3")
	shift 3
	[ "$size" = 4096 ] && sz=()	# the default
	next_port || return
	args=(ibv_rc_pingpong -g 0 -p "$port" -n "$iters" "${sz[@]}" "$@")
	run_pair "$label" "${args[@]}" -- "${args[@]}" localhost || return
	for side in server client; do
		out=$srv_out
		[ $side = client ] && out=$cli_out
		expect_contains "$label: $side: $iters iters" "$out" \
			"^$iters iters in [0-9.]+ seconds = [0-9.]+ usec/iter\$"
		expect_contains "$label: $side: $((2 * iters * size)) bytes" "$out" \
			"^$((2 * iters * size)) bytes in [0-9.]+ seconds = [0-9.]+ Mbit/sec\$"
		expect_contains "$label: $side: loopback GIDs" "$out" \
			'^  remote address: .*GID ::ffff:127\.0\.0\.1$'
	done
}

for engine in uring epoll; do
	export SOFTRDMA_ENGINE=$engine
	for mode in poll events; do
		ev=()
		[ $mode = events ] && ev=(-e)
		for case in 4096:300 1:300 65536:300 1048576:20; do
			size=${case%:*} iters=${case#*:}
			pingpong "$engine $mode size $size" "$iters" "$size" "${ev[@]}"
		done
	done
	for odp in "-o" "-o -O" "-o -P" "-o -O -P"; do
		for size in 4096 65536; do
			# shellcheck disable=SC2086	# the flags are words
			pingpong "$engine odp '$odp' size $size" 200 "$size" -c $odp
		done
	done
done
finish
