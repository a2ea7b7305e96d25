# libfabric's verbs provider on the soft device: Debian's fi_pingpong between two
# processes, over an RDM endpoint (verbs;ofi_rxm: reliable datagrams made of rdma_cm
# connections) and over a MSG endpoint (verbs alone, one rdma_cm connection), with
# fi_pingpong's data check (-c: every message filled from its sequence number and compared
# byte for byte by the receiver, which prints "Error at iteration" and fails on a
# difference). rdm wants -e rdm: fi_pingpong's default endpoint type is dgram, which
# ofi_rxm does not offer. The server listens on its control port (-B).
# Both sides run in one network namespace the test creates, over loopback, with the
# device attached to that namespace's veth as well: the verbs provider offers MSG
# endpoints only where a non-loopback interface has an address on the device
# (vrb_getifaddrs skips IFF_LOOPBACK), as on rxe, which is never attached to lo. Its
# server then binds "localhost", which softrdma0's GID table has (loopback is always
# attached; a RoCE NIC's has not, and libfabric falls back to the interface's address),
# and names 127.0.0.1 to its client: so the client runs beside it. Both run in one device
# tree made in that namespace (env_counters.sh), whose port counters show the bytes crossed
# softrdma0.
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/netns.sh"
netns_setup fab
cli_in=("${srv_in[@]}") where_cli=$where_srv
. "$(dirname "$0")/pairs.sh"
env_in=("${srv_in[@]}")
. "$(dirname "$0")/env_counters.sh"
export SOFTRDMA_VERBOSE=1	# each side says which engine it started (env_counters unsets it)
in_env=1

iters=100
# Every size of the table below once per iteration, each way (a ping-pong): the payload
# alone, the least that must cross.
min_bytes=$((2 * iters * (64 + 256 + 1024 + 4096 + 65536 + 1048576)))
case_pingpong() {
	local label=$1 size side row before
	shift
	next_port || return 1
	before=$(bytes_sent)
	run_pair "$label" fi_pingpong "$@" -c -I $iters -B "$port" -- \
		fi_pingpong "$@" -c -I $iters -P "$port" 127.0.0.1 || return 1
	crossed_device "$label" "$before" $min_bytes
	for side in server client; do
		expect_contains "$label: $side: table" "$(side_out $side)" \
			'^bytes +#sent +#ack +total +time +MB/sec +usec/xfer +Mxfers/sec$'
		# Every size of -S all, each with all its messages sent and acknowledged.
		for size in 64 256 1k 4k 64k 1m; do
			row="^$size +$iters +=$iters +[0-9.]+[kmg]? +[0-9.]+s +[0-9.]+ +$nz +[0-9.]+\$"
			expect_contains "$label: $side: $size" "$(side_out $side)" "$row"
		done
		expect_absent "$label: $side: data checked, no difference" "$(side_out $side)" \
			'Error at iteration'
	done
}

for engine in uring epoll; do
	export SOFTRDMA_ENGINE=$engine
	case_pingpong "$engine fi_pingpong verbs;ofi_rxm rdm" -e rdm -p 'verbs;ofi_rxm'
	case_pingpong "$engine fi_pingpong verbs msg" -e msg -p verbs
done
finish
