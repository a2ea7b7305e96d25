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
finish
