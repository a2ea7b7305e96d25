# Debian's unmodified ibv_rc_pingpong between two processes on loopback, on both engines:
# polling and -e (CQ events), 4096 (default), 1, 65536 and 1048576 bytes; then on-demand
# paging: -o (ODP regions), -o -O (the implicit region), -P (ibv_advise_mr prefetch), -c
# (each received buffer checked).
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/pairs.sh"

for engine in uring epoll; do
	export SOFTRDMA_ENGINE=$engine
	for mode in poll events; do
		ev=()
		[ $mode = events ] && ev=(-e)
		for case in 4096:300 1:300 65536:300 1048576:20; do
			size=${case%:*} iters=${case#*:}
			sz=(-s "$size")
			[ "$size" = 4096 ] && sz=()	# the default
			label="$engine $mode size $size"
			next_port || continue
			args=(ibv_rc_pingpong -g 0 -p "$port" -n "$iters" "${sz[@]}" "${ev[@]}")
			run_pair "$label" "${args[@]}" -- "${args[@]}" localhost || continue
			bytes=$((2 * iters * size))
			for side in server client; do
				out=$srv_out
				[ $side = client ] && out=$cli_out
				expect_contains "$label: $side: $iters iters" "$out" \
					"^$iters iters in [0-9.]+ seconds = [0-9.]+ usec/iter\$"
				expect_contains "$label: $side: $bytes bytes" "$out" \
					"^$bytes bytes in [0-9.]+ seconds = [0-9.]+ Mbit/sec\$"
				expect_contains "$label: $side: loopback GIDs" "$out" \
					'^  remote address: .*GID ::ffff:127\.0\.0\.1$'
			done
		done
	done
done
for engine in uring epoll; do
	export SOFTRDMA_ENGINE=$engine
	for odp in "-o" "-o -O" "-o -P" "-o -O -P"; do
		for size in 4096 65536; do
			label="$engine odp '$odp' size $size"
			next_port || continue
			# shellcheck disable=SC2206	# the flags are words
			args=(ibv_rc_pingpong -g 0 -p "$port" -n 200 -s "$size" -c $odp)
			run_pair "$label" "${args[@]}" -- "${args[@]}" localhost || continue
			for side in server client; do
				out=$srv_out
				[ $side = client ] && out=$cli_out
				expect_contains "$label: $side: 200 iters" "$out" \
					"^200 iters in [0-9.]+ seconds = [0-9.]+ usec/iter\$"
				expect_contains "$label: $side: $((400 * size)) bytes" "$out" \
					"^$((400 * size)) bytes in [0-9.]+ seconds = [0-9.]+ Mbit/sec\$"
			done
		done
	done
done
finish
