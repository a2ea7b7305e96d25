# The device is attached to loopback and to the interfaces named by --netdev or
# SOFTRDMA_NETDEVS, as rxe is to its netdev: only their addresses are in the GID table.
# In a network namespace with a veth pair (netns.sh); without root, skipped.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/netns.sh"
netns_setup nd
in_srv=(ip netns exec "$ns_srv")
gid_of() { printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' ${1//./ }; }
veth_gid="^ +[0-9]+  $(gid_of "$ip_srv")  $veth_srv\$"

out=$("${in_srv[@]}" env -u SOFTRDMA_NETDEVS "$SOFTRDMA" devices 2>&1)
expect_contains "default: loopback's GID" "$out" '^ +0  0000:0000:0000:0000:0000:ffff:7f00:0001  lo$'
expect_absent "default: no GID of $veth_srv" "$out" "$veth_srv"

out=$("${in_srv[@]}" "$SOFTRDMA" devices --netdev "$veth_srv" 2>&1)
expect_contains "--netdev $veth_srv: its GID" "$out" "$veth_gid"
expect_contains "--netdev: loopback stays" "$out" '^ +0  0000:0000:0000:0000:0000:ffff:7f00:0001  lo$'
expect_contains "--netdev: devices names the netdevs" "$out" "^netdevs: +loopback, $veth_srv "

out=$("${in_srv[@]}" env SOFTRDMA_NETDEVS="lo,$veth_srv" "$SOFTRDMA" devices 2>&1)
expect_contains "SOFTRDMA_NETDEVS=lo,$veth_srv" "$out" "$veth_gid"

out=$("${in_srv[@]}" "$SOFTRDMA" run --netdev "$veth_srv" -- sh -c \
	'ibv_devinfo -v; echo "netdevs=$SOFTRDMA_NETDEVS"' 2>&1)
expect_contains "run --netdev: ibv_devinfo shows $ip_srv" "$out" \
	"GID\\[ *[0-9]+\\]:[[:space:]]+::ffff:${ip_srv//./\\.}, RoCE v2"
expect_contains "run --netdev exports SOFTRDMA_NETDEVS" "$out" "^netdevs=$veth_srv\$"

out=$("${in_srv[@]}" bash -c "eval \"\$('$SOFTRDMA' env --netdev $veth_srv)\" &&
	echo \"netdevs=\$SOFTRDMA_NETDEVS\" && ibv_devinfo -v; rm -rf \"\$SYSFS_PATH\"" 2>&1)
expect_contains "env --netdev exports SOFTRDMA_NETDEVS" "$out" "^netdevs=$veth_srv\$"
expect_contains "env --netdev: the shell's device has $ip_srv" "$out" "::ffff:${ip_srv//./\\.}, RoCE v2"

# The client's veth is in the other namespace: not an interface here.
out=$("${in_srv[@]}" "$SOFTRDMA" run --netdev "$veth_cli" -- true 2>&1); rc=$?
[ $rc -ne 0 ] && pass "an interface of another namespace is refused" || fail "--netdev $veth_cli exited 0"
expect_contains "the refusal names it" "$out" "no network interface '$veth_cli'"
for bad in "" "," "$veth_srv,"; do
	out=$("${in_srv[@]}" "$SOFTRDMA" run --netdev "$bad" -- true 2>&1); rc=$?
	if [ -z "$bad" ]; then
		[ $rc -eq 0 ] && pass "--netdev '': loopback only" || fail "--netdev '' exited $rc: $out"
	else
		[ $rc -ne 0 ] && expect_contains "--netdev '$bad' is refused" "$out" 'an empty name' ||
			fail "--netdev '$bad' exited 0"
	fi
done
# A peer on the LAN (the client's namespace) and a QP whose device is attached to loopback
# only: the QP's listener takes nothing from there, as rxe hears only its netdev. Attached
# to the veth, the same QP's listener answers there (the control that the probe can pass).
# ibv_rc_pingpong's server has its QP, and so its listener, before it waits for a client.
qp_listener_answers_lan() { # NETDEVS: whether the LAN reaches the server QP's listener
	local port qport="" rc=1 spid i
	port=$(free_port "${in_srv[@]}") || { fail "no free port in $ns_srv"; return 2; }
	"${in_srv[@]}" env SOFTRDMA_NETDEVS="$1" "$SOFTRDMA" run -- \
		timeout 20 ibv_rc_pingpong -g 0 -p "$port" >/dev/null 2>&1 &
	spid=$!
	for ((i = 0; i < 100; i++)); do
		qport=$("${in_srv[@]}" ss -ltnpH | awk -v p=":$port" '$4 !~ p"$" && /ibv_rc_pingpong/ {
			n = split($4, a, ":"); print a[n]; exit }')
		[ -n "$qport" ] && break
		sleep 0.1
	done
	if [ -z "$qport" ]; then
		fail "ibv_rc_pingpong's QP listener never showed in $ns_srv"
	else
		ip netns exec "$ns_cli" timeout 3 bash -c "exec 3<>/dev/tcp/$ip_srv/$qport" 2>/dev/null
		rc=$?
	fi
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	return $rc
}
if qp_listener_answers_lan ""; then
	fail "loopback only: a QP listener took a connection from the LAN ($ip_cli)"
else
	pass "loopback only: a QP listener takes nothing from the LAN ($ip_cli)"
fi
if qp_listener_answers_lan "$veth_srv"; then
	pass "attached to $veth_srv: the QP listener answers the LAN"
else
	fail "attached to $veth_srv: the QP listener did not answer the LAN"
fi
finish
