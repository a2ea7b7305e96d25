# Debian's unmodified perftest between two processes on loopback, on both engines: every
# RC benchmark, several QPs, 1 MiB messages and the -a size sweep. Each must finish and
# report a non-zero bandwidth or latency.
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/pairs.sh"

n=200
for engine in uring epoll; do
	export SOFTRDMA_ENGINE=$engine
	for t in ib_write_bw ib_read_bw ib_send_bw; do
		perftest_pair "$engine $t" $t -n $n && perftest_result "$engine $t" "server client" "$(bw_line 65536 $n)"
	done
	perftest_pair "$engine ib_atomic_bw" ib_atomic_bw -n $n &&
		perftest_result "$engine ib_atomic_bw" "server client" "$(bw_line 8 $n)"
	for t in ib_write_lat ib_send_lat; do
		perftest_pair "$engine $t" $t -n $n && perftest_result "$engine $t" "server client" "$(lat_line 2 $n)"
	done
	# With -e each side sleeps on its completion channel and takes one completion per
	# event; a peer's answer that overtook the ACK of the message it answers left a send
	# completion behind and overran perftest's one-entry send CQ.
	perftest_pair "$engine ib_send_lat -e" ib_send_lat -e -n $n &&
		perftest_result "$engine ib_send_lat -e" "server client" "$(lat_line 2 $n)"
	# The server of ib_read_lat is passive and prints no result.
	perftest_pair "$engine ib_read_lat" ib_read_lat -n $n && perftest_result "$engine ib_read_lat" client "$(lat_line 2 $n)"

	# Four QPs: the iterations column counts all of them.
	perftest_pair "$engine ib_write_bw -q 4" ib_write_bw -n 100 -q 4 &&
		perftest_result "$engine ib_write_bw -q 4" "server client" "$(bw_line 65536 400)"
	perftest_pair "$engine ib_write_bw 1 MiB" ib_write_bw -n 50 -s 1048576 &&
		perftest_result "$engine ib_write_bw 1 MiB" "server client" "$(bw_line 1048576 50)"

	# -a: every size from 2 to 2^23 bytes on the client; the server prints the last one.
	# Each size must report a non-zero message rate: 20 tiny messages are few enough for
	# one scheduling delay on a busy machine to round their MB/s down to 0.00.
	label="$engine ib_write_bw -a"
	if perftest_pair "$label" ib_write_bw -n 20 -a; then
		missing=""
		for ((b = 2; b <= 8388608; b *= 2)); do
			grep -Eq -- "^ *$b${sp}20$sp[0-9.]+$sp[0-9.]+$sp$nz" <<<"$cli_out" || missing+=" $b"
		done
		[ -z "$missing" ] && pass "$label: client results for all 23 sizes" ||
			{ fail "$label: no result with a non-zero message rate for sizes$missing in:"; echo "$cli_out" >&2; }
		perftest_result "$label" server "$(bw_line 8388608 20)"
	fi
done
finish
