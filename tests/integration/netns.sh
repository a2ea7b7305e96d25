# Two network namespaces joined by a veth pair, for the tests that run a server in one and a
# client in the other. Source after lib.sh; netns_setup TAG [ipv6] creates them (names and
# addresses unique per run, existing only inside the namespaces), removes them at exit, and
# sets ns_srv ns_cli veth_srv veth_cli ip_srv ip_cli (ip6_srv ip6_cli with ipv6) and
# pairs.sh's srv_in cli_in (which attach the device to the side's veth: SOFTRDMA_NETDEVS)
# where_srv where_cli. Without root the test is skipped.
if [ "$(id -u)" -ne 0 ]; then
	echo "skipped: needs root for network namespaces"
	exit 0
fi

netns_setup() {
	local tag=$1 v6=${2:-} net err
	ns_srv=softrdma-$tag-$$-srv ns_cli=softrdma-$tag-$$-cli
	veth_srv=sr$tag$$s veth_cli=sr$tag$$c
	net=10.$((128 + $$ / 256 % 128)).$(($$ % 256))
	ip_srv=$net.1 ip_cli=$net.2
	ip6_srv="" ip6_cli=""
	if [ -n "$v6" ]; then
		local net6=fd53:$(printf %x $(($$ % 65536)))::
		ip6_srv=${net6}1 ip6_cli=${net6}2
	fi
	at_exit 'ip netns del "$ns_srv" 2>/dev/null; ip netns del "$ns_cli" 2>/dev/null; ip link del "$veth_srv" 2>/dev/null'
	if ! err=$(netns_create 2>&1); then
		fail "cannot set up the namespaces $ns_srv and $ns_cli with a veth pair as root: $err"
		finish
	fi
	pass "namespaces $ns_srv ($ip_srv${ip6_srv:+, $ip6_srv}) and $ns_cli ($ip_cli${ip6_cli:+, $ip6_cli}) joined by $veth_srv-$veth_cli"
	# Each side's device attached to its veth, as rxe would be (loopback only otherwise).
	srv_in=(ip netns exec "$ns_srv" env SOFTRDMA_NETDEVS="$veth_srv")
	cli_in=(ip netns exec "$ns_cli" env SOFTRDMA_NETDEVS="$veth_cli")
	where_srv=" (in $ns_srv)" where_cli=" (in $ns_cli)"
}

netns_create() {
	ip netns add "$ns_srv" &&
	ip netns add "$ns_cli" &&
	ip link add "$veth_srv" type veth peer name "$veth_cli" &&
	ip link set "$veth_srv" netns "$ns_srv" &&
	ip link set "$veth_cli" netns "$ns_cli" &&
	ip -n "$ns_srv" addr add "$ip_srv/24" dev "$veth_srv" &&
	ip -n "$ns_cli" addr add "$ip_cli/24" dev "$veth_cli" &&
	{ [ -z "$ip6_srv" ] || {
		ip -n "$ns_srv" addr add "$ip6_srv/64" dev "$veth_srv" nodad &&
		ip -n "$ns_cli" addr add "$ip6_cli/64" dev "$veth_cli" nodad; }; } &&
	ip -n "$ns_srv" link set lo up && ip -n "$ns_srv" link set "$veth_srv" up &&
	ip -n "$ns_cli" link set lo up && ip -n "$ns_cli" link set "$veth_cli" up
}
