# Debian's unmodified ibv_xsrq_pingpong (XRC: a target QP per client delivering into one XRC
# SRQ, an initiator QP per client sending with the SRQ's number) between two processes on
# loopback, on both engines, polling and with -e (CQ events), 4096 (default) and 1 bytes;
# softrdma0's port counters (one device tree for the whole test) show the bytes crossed it.
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/pairs.sh"
. "$(dirname "$0")/env_counters.sh"
export SOFTRDMA_VERBOSE=1	# each side says which engine it started (env_counters unsets it)
in_env=1
iters=50

# The program opens /tmp/xrc_domain (O_CREAT) for its XRC domain: removed after the test
# only if the test made it, and if another user's is there the program falls back to a
# domain of its own.
[ -e /tmp/xrc_domain ] || at_exit 'rm -f /tmp/xrc_domain'

for engine in uring epoll; do
	export SOFTRDMA_ENGINE=$engine
	for mode in poll events; do
		ev=()
		[ $mode = events ] && ev=(-e)
		for size in 4096 1; do
			sz=(-s "$size")
			[ "$size" = 4096 ] && sz=()	# the default
			label="$engine $mode size $size"
			next_port || continue
			args=(ibv_xsrq_pingpong -g 0 -p "$port" -n $iters "${sz[@]}" "${ev[@]}")
			before=$(bytes_sent)
			run_pair "$label" "${args[@]}" -- "${args[@]}" localhost || continue
			# Each side sends its iters messages of size bytes through its initiator.
			crossed_device "$label" "$before" $((2 * iters * size))
			for side in server client; do
				out=$(side_out $side)
				expect_contains "$label: $side: success" "$out" '^success$'
				expect_contains "$label: $side: the peer's SRQ number" "$out" \
					'^  remote: LID 0000, QPN RECV [0-9a-f]{6} SEND [0-9a-f]{6}, PSN [0-9a-f]{6}, SRQN [0-9a-f]{6}, GID ::ffff:127\.0\.0\.1$'
			done
		done
	done
done
finish
