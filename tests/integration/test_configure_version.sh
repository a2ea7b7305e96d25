# Configuring against an rdma-core outside 36-58 stops with a message naming the range.
. "$(dirname "$0")/lib.sh"
: "${SOFTRDMA_SOURCE:?}"
real_pc=$(pkg-config --variable=pcfiledir libibverbs)/libibverbs.pc
scratch_dir work

configure_with_version() { # VERSION -> prints cmake's output, returns its status
	local dir="$work/$1" pcdir="$work/$1/pc"

	mkdir -p "$pcdir"
	sed -E "s/^Version:.*/Version: $1/" "$real_pc" >"$pcdir/libibverbs.pc"
	PKG_CONFIG_PATH="$pcdir" cmake -S "$SOFTRDMA_SOURCE" -B "$dir/build" 2>&1
}

for v in 1.14.65.0 1.14.35.0 1.14.59.0; do
	out=$(configure_with_version $v); rc=$?
	[ $rc -ne 0 ] && pass "rdma-core $v refused" || fail "rdma-core $v accepted"
	expect_contains "message for $v" "$out" 'supports rdma-core 36-58'
done

out=$(configure_with_version 1.14.57.0); rc=$?
[ $rc -eq 0 ] && pass "rdma-core 57 accepted" || fail "rdma-core 57 refused"
expect_contains "57 uses IBVERBS_PRIVATE_57" "$out" 'provider ABI IBVERBS_PRIVATE_57'

out=$(configure_with_version garbage); rc=$?
[ $rc -ne 0 ] && pass "unreadable version refused" || fail "unreadable version accepted"
finish
