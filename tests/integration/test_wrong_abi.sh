# A provider built for another private ABI, loaded into this libibverbs, stays out and says why.
. "$(dirname "$0")/lib.sh"
wrong="$SOFTRDMA_BUILD/lib/softrdma/libsoftrdma-wrongabi"

out=$("$SOFTRDMA" run -- env RDMAV_DRIVERS="$wrong" ibv_devices 2>&1); rc=$?
[ $rc -eq 0 ] && pass "ibv_devices survives a mismatched provider" || fail "ibv_devices exited $rc"
expect_contains "refusal names the problem" "$out" \
	'softrdma: provider not registered: .*IBVERBS_PRIVATE_59.*rebuild softrdma'
expect_absent "device not offered by the mismatched provider" "$out" 'softrdma0'

out=$("$SOFTRDMA" run -- env RDMAV_DRIVERS="$wrong" ibv_devinfo 2>&1); rc=$?
[ $rc -ne 0 ] && pass "ibv_devinfo reports no device" || fail "ibv_devinfo found a device"
expect_absent "no crash" "$out" 'Segmentation|Aborted|core dumped'
finish
