# Debian's unmodified ibv_ud_pingpong, ibv_uc_pingpong and ibv_srq_pingpong between two
# processes, polling and with -e, on both engines; perftest over UD and UC.
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

	# perftest counts every message on both sides: a UD datagram dropped on the way (no
	# receive posted, a full socket buffer) would leave the server waiting until timeout.
	n=2000
	for size in 8 4096; do
		label="$engine ib_send_bw -c UD -s $size"
		perftest_pair "$label" ib_send_bw -c UD -s $size -n $n &&
			perftest_result "$label" "server client" "$(bw_line $size $n)"
	done
	label="$engine ib_send_lat -c UD"
	perftest_pair "$label" ib_send_lat -c UD -n $n &&
		perftest_result "$label" "server client" "$(lat_line 2 $n)"
	for t in ib_write_bw ib_send_bw; do
		perftest_pair "$engine $t -c UC" $t -c UC -n $n &&
			perftest_result "$engine $t -c UC" "server client" "$(bw_line 65536 $n)"
	done
	perftest_pair "$engine ib_write_lat -c UC" ib_write_lat -c UC -n $n &&
		perftest_result "$engine ib_write_lat -c UC" "server client" "$(lat_line 2 $n)"
done

finish
