# Debian's unmodified rdma_cm programs between two processes on loopback, through the drop-in
# librdmacm: rping (IPv4 and IPv6), ucmatose, rdma_server/rdma_client,
# rdma_xserver/rdma_xclient (RC and XRC), udaddy (UD), rstream and riostream (rsockets),
# cmtime, and perftest's rdma_cm mode (-R). Everything on the io_uring engine, the quick
# ones on epoll too. XRC runs in the test's own device tree, whose port counters show that
# its message crossed softrdma0.
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/pairs.sh"
. "$(dirname "$0")/rdmacm_cases.sh"
. "$(dirname "$0")/env_counters.sh"
export SOFTRDMA_VERBOSE=1	# each side says which engine it started (env_counters unsets it)

for engine in uring epoll; do
	export SOFTRDMA_ENGINE=$engine
	case_rping "$engine rping 127.0.0.1" 127.0.0.1
	case_rping "$engine rping ::1" ::1
	case_ucmatose 127.0.0.1
	case_rdma_server rdma_server rdma_client 127.0.0.1
	case_rdma_server rdma_xserver rdma_xclient 127.0.0.1
	before=$(bytes_sent)
	in_env=1 case_rdma_server rdma_xserver rdma_xclient 127.0.0.1 -c x &&
		crossed_device "$engine rdma_xserver/rdma_xclient -c x" "$before" 16	# its message
	case_udaddy 127.0.0.1
	case_cmtime 127.0.0.1
	case_rsocket rstream 127.0.0.1 lat
	case_rsocket rstream 127.0.0.1 bw
	[ $engine = uring ] || continue
	# Once: no engine carries rsockets, and perftest runs on both engines in test_perftest.
	case_rsocket riostream 127.0.0.1 lat
	case_rsocket riostream 127.0.0.1 bw
	all_perf 127.0.0.1
done
finish
