# Configuring picks the private ABI of the rdma-core libibverbs.pc names, and stops with a
# message naming the supported range for one outside 36-65. (Faked .pc files: only the
# version changes, so only the choice is tested here; tests/compat/matrix.sh builds and
# runs against the real releases.)
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

expect_refused() { # VERSION PATTERN (on the message as one line: cmake wraps it)
	local out rc
	out=$(configure_with_version "$1"); rc=$?
	[ $rc -ne 0 ] && pass "$1 refused" || fail "$1 accepted"
	expect_contains "message for $1" "$(tr -s '\n ' '  ' <<<"$out")" "$2"
}

expect_refused 1.14.35.0 'version 35 .*softrdma supports rdma-core 36-65'
expect_refused 1.14.66.0 'version 66 .*newer than any softrdma knows: it supports rdma-core 36-65'
expect_refused 1.14.66.0 'port kernel-abi/provider_abi.h'
expect_refused garbage 'cannot read the rdma-core version from libibverbs.pc'

# VERSION -> IBVERBS_PRIVATE_, and the releases the provider then accepts at load time.
for row in 36:34:36-56 44:34:44-56 56:34:56-56 57:57:57-58 58:57:58-58 59:59:59-61 \
	61:59:61-61 62:59:62-63 63:59:63-63 64:64:64-64 65:65:65-65; do
	IFS=: read -r v pabi range <<<"$row"
	out=$(configure_with_version "1.14.$v.0"); rc=$?
	[ $rc -eq 0 ] && pass "rdma-core $v accepted" || fail "rdma-core $v refused: $out"
	expect_contains "$v: IBVERBS_PRIVATE_$pabi, rdma-core $range" "$out" \
		"provider ABI IBVERBS_PRIVATE_$pabi, libsoftrdma-rdmav$pabi.so for rdma-core $range\$"
done
finish
