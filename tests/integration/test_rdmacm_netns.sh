# Debian's unmodified rdma_cm programs between two network namespaces joined by a veth pair,
# through the drop-in librdmacm: the client in one namespace dials the server's veth address
# in the other. rping (IPv4 and IPv6), ucmatose, rdma_server/rdma_client,
# rdma_xserver/rdma_xclient (RC and XRC), udaddy (UD), rstream and riostream (rsockets), cmtime, and
# perftest's rdma_cm mode (-R). Everything on the io_uring engine, the quick ones on epoll too.
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/netns.sh"
netns_setup cm ipv6
. "$(dirname "$0")/pairs.sh"
. "$(dirname "$0")/rdmacm_cases.sh"

for engine in uring epoll; do
	export SOFTRDMA_ENGINE=$engine
	case_rping "$engine netns rping $ip_srv" "$ip_srv"
	case_rping "$engine netns rping $ip6_srv" "$ip6_srv"
	case_ucmatose "$ip_srv"
	case_rdma_server rdma_server rdma_client "$ip_srv"
	case_rdma_server rdma_xserver rdma_xclient "$ip_srv"
	case_rdma_server rdma_xserver rdma_xclient "$ip_srv" -c x
	case_udaddy "$ip_srv"
	case_cmtime "$ip_srv"
	case_rsocket rstream "$ip_srv" lat
	case_rsocket rstream "$ip_srv" bw
	[ $engine = uring ] || continue
	# Once: no engine carries rsockets, and perftest runs on both engines in test_netns.
	case_rsocket riostream "$ip_srv" lat
	case_rsocket riostream "$ip_srv" bw
	all_perf "$ip_srv"
done
finish
