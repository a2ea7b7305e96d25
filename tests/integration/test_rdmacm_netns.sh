# Debian's unmodified rdma_cm programs between two network namespaces joined by a veth pair,
# through the drop-in librdmacm: the client in one namespace dials the server's veth address
# in the other. rping (IPv4 and IPv6), ucmatose, rdma_server/rdma_client,
# rdma_xserver/rdma_xclient, udaddy (UD), rstream and riostream (rsockets), cmtime, and
# perftest's rdma_cm mode (-R). Everything on the io_uring engine, the quick ones on epoll too.
. "$(dirname "$0")/lib.sh"

if [ "$(id -u)" -ne 0 ]; then
	echo "skipped: needs root for network namespaces"
	exit 0
fi

scratch_dir logs
export TMPDIR=$logs	# `softrdma run` trees of a killed run go with the scratch dir
export SOFTRDMA_VERBOSE=1	# each side says which engine it started
bg_pids=()
# Names and addresses unique per run; the addresses exist only inside the two namespaces.
ns_srv=softrdma-cm-$$-srv ns_cli=softrdma-cm-$$-cli
veth_srv=srdmcm$$s veth_cli=srdmcm$$c
net=10.$((128 + $$ / 256 % 128)).$(($$ % 256))
ip_srv=$net.1 ip_cli=$net.2
net6=fd53:$(printf %x $(($$ % 65536)))::
ip6_srv=${net6}1 ip6_cli=${net6}2
cleanup() {
	local p
	for p in "${bg_pids[@]}"; do kill "$p" 2>/dev/null; done
	wait
	ip netns del "$ns_srv" 2>/dev/null
	ip netns del "$ns_cli" 2>/dev/null
	ip link del "$veth_srv" 2>/dev/null	# only if it never left this namespace
	rm -rf "${cleanup_dirs[@]}"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

setup_netns() {
	ip netns add "$ns_srv" &&
	ip netns add "$ns_cli" &&
	ip link add "$veth_srv" type veth peer name "$veth_cli" &&
	ip link set "$veth_srv" netns "$ns_srv" &&
	ip link set "$veth_cli" netns "$ns_cli" &&
	ip -n "$ns_srv" addr add "$ip_srv/24" dev "$veth_srv" &&
	ip -n "$ns_cli" addr add "$ip_cli/24" dev "$veth_cli" &&
	ip -n "$ns_srv" addr add "$ip6_srv/64" dev "$veth_srv" nodad &&
	ip -n "$ns_cli" addr add "$ip6_cli/64" dev "$veth_cli" nodad &&
	ip -n "$ns_srv" link set lo up && ip -n "$ns_srv" link set "$veth_srv" up &&
	ip -n "$ns_cli" link set lo up && ip -n "$ns_cli" link set "$veth_cli" up
}
if ! err=$(setup_netns 2>&1); then
	fail "cannot set up the namespaces $ns_srv and $ns_cli with a veth pair as root: $err"
	finish
fi
pass "namespaces $ns_srv ($ip_srv, $ip6_srv) and $ns_cli ($ip_cli, $ip6_cli) joined by $veth_srv-$veth_cli"
srv_in=(ip netns exec "$ns_srv") cli_in=(ip netns exec "$ns_cli")
where_srv=" (in $ns_srv)" where_cli=" (in $ns_cli)"
. "$(dirname "$0")/rdmacm_cases.sh"

for engine in uring epoll; do
	export SOFTRDMA_ENGINE=$engine
	case_rping "$engine netns rping $ip_srv" "$ip_srv"
	case_rping "$engine netns rping $ip6_srv" "$ip6_srv"
	case_ucmatose "$ip_srv"
	case_rdma_server rdma_server rdma_client "$ip_srv"
	case_rdma_server rdma_xserver rdma_xclient "$ip_srv"
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
