# Debian's unmodified ibv_ud_pingpong, ibv_uc_pingpong and ibv_srq_pingpong between two
# processes, polling and with -e, on both engines.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pairs.sh"

for engine in uring epoll; do
	export SOFTRDMA_ENGINE=$engine
	for prog in ibv_ud_pingpong ibv_uc_pingpong ibv_srq_pingpong; do
		for ev in "" -e; do
			label="$engine $prog ${ev:-poll}"
			next_port || continue
			args=(ibv_"${prog#ibv_}" -g 0 -p "$port" -n 200 $ev)
			run_pair "$label" "${args[@]}" -- "${args[@]}" localhost || continue
			expect_contains "$label: server: 200 iters" "$srv_out" '^200 iters in [0-9.]+ seconds'
			expect_contains "$label: client: 200 iters" "$cli_out" '^200 iters in [0-9.]+ seconds'
		done
	done
done

finish
