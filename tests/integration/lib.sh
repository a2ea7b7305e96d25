# Shared by the integration tests: assertions that say what went wrong, and cleanup.
set -uo pipefail
: "${SOFTRDMA_BUILD:?run through ctest}"
SOFTRDMA="$SOFTRDMA_BUILD/bin/softrdma"
. "$SOFTRDMA_BUILD/lib/softrdma/free_port.sh"	# free_port
failures=0
cleanup_dirs=()
at_exit_cmds=()
# at_exit COMMAND: runs COMMAND (a string, eval'd) at exit, the last registered first; then
# the scratch directories go. A COMMAND that calls `fail` fails the test, even one whose
# checks all passed: what a test cannot clean up (a user, a namespace) outlives it.
at_exit() { at_exit_cmds=("$1" "${at_exit_cmds[@]}"); }
run_at_exit() {
	local c rc=$? before=$failures
	for c in "${at_exit_cmds[@]}"; do eval "$c"; done
	rm -rf "${cleanup_dirs[@]}"
	if [ "$failures" -gt "$before" ] && [ "$rc" -eq 0 ]; then
		echo "the test's cleanup failed" >&2
		exit 1
	fi
}
trap run_at_exit EXIT
trap 'exit 130' INT TERM

# scratch_dir VAR: a new directory, removed at exit, in VAR (no subshell, so the list of
# directories to remove is this shell's own).
scratch_dir() {
	local d
	d=$(mktemp -d "${TMPDIR:-/tmp}/softrdma-test.XXXXXX") || { fail "mktemp"; exit 1; }
	cleanup_dirs+=("$d")
	printf -v "$1" '%s' "$d"
}

fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# expect_contains NAME TEXT PATTERN: extended regex PATTERN must match a line of TEXT.
expect_contains() {
	if grep -Eq -- "$3" <<<"$2"; then pass "$1"; else fail "$1: no line matches /$3/ in:"; echo "$2" >&2; fi
}

expect_absent() {
	if grep -Eq -- "$3" <<<"$2"; then fail "$1: unexpected /$3/ in:"; echo "$2" >&2; else pass "$1"; fi
}

# perftest's result lines: "#bytes #iterations peak average msgrate" with a non-zero
# average (bw_line BYTES ITERS), "#bytes #iterations t_min t_max t_typical t_avg ..." with
# non-zero typical and average (lat_line BYTES ITERS).
nz='([1-9][0-9]*\.[0-9]+|0\.[0-9]*[1-9][0-9]*)'	# a non-zero decimal
sp='[[:space:]]+'	# perftest separates its columns with spaces and tabs
bw_line() { echo "^ *$1$sp$2$sp[0-9.]+$sp$nz$sp[0-9.]+"; }
lat_line() { echo "^ *$1$sp$2$sp[0-9.]+$sp[0-9.]+$sp$nz$sp$nz"; }

finish() {
	if [ "$failures" -eq 0 ]; then echo "all checks passed"; exit 0; fi
	echo "$failures check(s) failed" >&2
	exit 1
}
