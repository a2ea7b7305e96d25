# `softrdma demo`, as README.md describes it: the device through ibv_devinfo, the
# rdma_reg_write(3) contract between two rdma_cm processes (the write into the buffer
# registered for remote writes lands byte for byte, the one into the buffer registered
# without is refused with IBV_WC_REM_ACCESS_ERR and leaves it untouched), then
# ibv_rc_pingpong, ib_write_bw, ib_read_lat and ib_atomic_bw, all ending in exit status 0.
. "$(dirname "$0")/lib.sh"

scratch_dir logs
export TMPDIR=$logs	# the demo's own scratch directory and `softrdma run` trees go here
pid=""
at_exit '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait'

timeout -k 5 240 "$SOFTRDMA" demo >"$logs/demo.out" 2>&1 &
pid=$!
wait "$pid"; rc=$?
pid=""
out=$(<"$logs/demo.out")
if [ $rc -eq 0 ]; then
	pass "softrdma demo exits 0"
else
	fail "softrdma demo exited $rc (124: timed out):"
	sed 's/^/  demo| /' "$logs/demo.out" >&2
fi

expect_contains "ibv_devinfo shows softrdma0" "$out" $'^hca_id:\tsoftrdma0$'
expect_contains "ibv_devinfo: port active" "$out" '^[[:space:]]+state:[[:space:]]+PORT_ACTIVE \(4\)$'
expect_contains "the server registers A with rdma_reg_write" "$out" \
	'^server: registered buffer A with rdma_reg_write: the peer may RDMA-write it'
expect_contains "the server registers B with rdma_reg_msgs" "$out" \
	'^server: registered buffer B with rdma_reg_msgs: +local use only, no remote access'
expect_contains "the write into A succeeds" "$out" \
	'^client: rdma_post_write of 4096 bytes into A: success$'
expect_contains "the write into B is refused with IBV_WC_REM_ACCESS_ERR" "$out" \
	'^client: rdma_post_write into B \(registered without remote write\): IBV_WC_REM_ACCESS_ERR'
expect_contains "buffer A holds exactly what was written" "$out" \
	'^server: buffer A holds exactly the 4096 bytes the client wrote'
expect_contains "buffer B is untouched" "$out" '^server: buffer B is untouched: every byte still 0'
expect_absent "no step failed" "$out" '^softrdma: demo step'
expect_contains "ibv_rc_pingpong: 100 iterations" "$out" '^100 iters in [0-9.]+ seconds = [0-9.]+ usec/iter$'
expect_contains "ib_write_bw: a non-zero bandwidth" "$out" "^ *65536${sp}2000${sp}[0-9.]+${sp}${nz}${sp}"
expect_contains "ib_read_lat: a non-zero latency" "$out" "^ *2${sp}1000${sp}[0-9.]+${sp}[0-9.]+${sp}${nz}${sp}${nz}"
expect_contains "ib_atomic_bw: a non-zero bandwidth" "$out" "^ *8${sp}1000${sp}[0-9.]+${sp}${nz}${sp}"
expect_contains "the closing line" "$out" '^All unmodified Debian binaries; no RDMA hardware'
left=$(find "$logs" -mindepth 1 -maxdepth 1 ! -name demo.out)
if [ -z "$left" ]; then pass "the demo removed its temporary directories"; else fail "the demo left behind: $left"; fi
finish
