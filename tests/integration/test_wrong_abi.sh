# A provider built for another libibverbs, loaded into this one, stays out and says why:
# one asking for a private ABI this libibverbs does not export (a provider built for 59
# meeting 44), and one with the right symbol version built for other releases (a provider
# built against 61 meeting 62: both IBVERBS_PRIVATE_59, different ops tables).
. "$(dirname "$0")/lib.sh"
lib="$SOFTRDMA_BUILD/lib/softrdma"

check_refused() { # NAME PROVIDER-PREFIX REFUSAL-PATTERN
	local out rc

	out=$("$SOFTRDMA" run -- env RDMAV_DRIVERS="$2" ibv_devices 2>&1); rc=$?
	[ $rc -eq 0 ] && pass "$1: ibv_devices survives it" || fail "$1: ibv_devices exited $rc"
	expect_contains "$1: the refusal names the problem" "$out" \
		"softrdma: provider not registered: $3.*rebuild softrdma"
	expect_absent "$1: device not offered" "$out" 'softrdma0'

	out=$("$SOFTRDMA" run -- env RDMAV_DRIVERS="$2" ibv_devinfo 2>&1); rc=$?
	[ $rc -ne 0 ] && pass "$1: ibv_devinfo reports no device" || fail "$1: ibv_devinfo found a device"
	expect_absent "$1: no crash" "$out" 'Segmentation|Aborted|core dumped'
}

check_refused "other private ABI" "$lib/libsoftrdma-wrongabi" \
	'the loaded libibverbs does not export verbs_register_driver_[0-9]+@IBVERBS_PRIVATE_[0-9]+'
check_refused "other release" "$lib/libsoftrdma-wrongrelease" \
	'the loaded libibverbs is rdma-core [0-9]+\. This build supports rdma-core [0-9]+-[0-9]+'

# The real one, by the same route, is taken.
out=$("$SOFTRDMA" run -- env RDMAV_DRIVERS="$lib/libsoftrdma" ibv_devices 2>&1)
expect_contains "the provider built for this libibverbs registers" "$out" 'softrdma0'
finish
