# Debian's unmodified ibv_devices and ibv_devinfo see softrdma0 through the system libibverbs.
. "$(dirname "$0")/lib.sh"

out=$("$SOFTRDMA" run -- ibv_devices 2>&1)
expect_contains "ibv_devices lists softrdma0" "$out" '^[[:space:]]+softrdma0[[:space:]]+[0-9a-f]{16}$'

out=$("$SOFTRDMA" run -- ibv_devinfo -v 2>&1)
rc=$?
[ $rc -eq 0 ] && pass "ibv_devinfo -v exits 0" || fail "ibv_devinfo -v exited $rc"
expect_contains "hca_id" "$out" 'hca_id:[[:space:]]+softrdma0'
expect_contains "port active" "$out" 'state:[[:space:]]+PORT_ACTIVE \(4\)'
expect_contains "link layer" "$out" 'link_layer:[[:space:]]+Ethernet'
expect_contains "GID 0 is IPv4 loopback" "$out" 'GID\[  0\]:[[:space:]]+::ffff:127\.0\.0\.1, RoCE v2'
expect_contains "limits are reported" "$out" 'max_qp:[[:space:]]+[1-9][0-9]*'
expect_contains "max_mr_size" "$out" 'max_mr_size:[[:space:]]+0x[0-9a-f]+'

# Attached to loopback only, unless told otherwise: no other address of the host has a GID
# (test_netdevs attaches others).
for addr in $(ip -o -4 addr show 2>/dev/null | awk '$2 != "lo" {print $4}' | cut -d/ -f1); do
	expect_absent "no GID for $addr (not attached)" "$out" "::ffff:${addr//./\\.}, RoCE v2"
done

# Unless asked, libibverbs is silent: no warnings about our tree or provider.
expect_absent "no libibverbs warnings" "$out" 'Warning|couldn.t'

# Programs that do not use RDMA run as usual under softrdma.
out=$("$SOFTRDMA" run -- sh -c 'echo hello; ls /dev/null' 2>&1)
expect_contains "non-RDMA program unaffected" "$out" '^/dev/null$'
"$SOFTRDMA" run -- sh -c 'exit 7'; rc=$?
[ $rc -eq 7 ] && pass "exit status passed through" || fail "exit status $rc, expected 7"

# `softrdma env` gives the same device to a plain shell.
out=$(bash -c "eval \"\$('$SOFTRDMA' env)\" && ibv_devices && echo \"netdevs=[\$SOFTRDMA_NETDEVS]\" &&
	rm -rf \"\$SYSFS_PATH\"" 2>&1)
expect_contains "softrdma env" "$out" 'softrdma0'
expect_contains "softrdma env exports SOFTRDMA_NETDEVS" "$out" '^netdevs=\[\]$'

out=$("$SOFTRDMA" devices 2>&1)
expect_contains "softrdma devices" "$out" '^ +0  0000:0000:0000:0000:0000:ffff:7f00:0001  lo$'
expect_contains "softrdma devices: the netdevs" "$out" '^netdevs: +loopback \(attach others'
expect_absent "softrdma devices: nothing but lo" "$out" '^ +[0-9]+  [0-9a-f:]+  [^l]'

out=$("$SOFTRDMA" devices --netdev no-such-if0 2>&1); rc=$?
[ $rc -ne 0 ] && pass "a netdev that does not exist is an error" || fail "--netdev no-such-if0 exited 0"
expect_contains "the error names it" "$out" "no network interface 'no-such-if0'"
out=$(SOFTRDMA_NETDEVS=no-such-if0 "$SOFTRDMA" run -- true 2>&1); rc=$?
[ $rc -ne 0 ] && pass "SOFTRDMA_NETDEVS naming no interface: run fails" || fail "run exited 0"
expect_contains "run names it" "$out" "no network interface 'no-such-if0'"

out=$("$SOFTRDMA" run 2>&1); rc=$?
[ $rc -ne 0 ] && pass "run without command fails" || fail "run without command succeeded"
expect_contains "run without command says what to do" "$out" 'no command given'
finish
