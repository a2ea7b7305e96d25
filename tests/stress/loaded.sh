#!/usr/bin/env bash
# Integration tests on a busy machine (issue 18, "Faithful when the machine is busy"), not
# part of ctest's default set: a NIC's transport does not slow down with its host's CPU, and
# softrdma's must not fail where a NIC would not. Each round runs the chosen ctest tests of
# an existing build while 2 x nproc busy loops (stress-ng if installed, else one shell loop
# each) compete for every CPU; test_stop_cont adds its SIGSTOP/SIGCONT and SIGKILL of a
# peer on top.
#
#   tests/stress/loaded.sh [--rounds N] [--build DIR] [--tests REGEX]
#
# Defaults: 3 rounds, build/, the tests that time a peer (test_stop_cont, test_link_cut as
# root, the fault injection's perftest run, ibv_rc_pingpong). Prints each failure with its
# round and the test's output, then "loaded: N passed, M failed"; exits 0 only when nothing
# failed.
set -uo pipefail
repo=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
rounds=3 build=$repo/build tests='^(test_stop_cont|test_link_cut|test_faults_perftest|test_rc_pingpong)$'

usage() { echo "usage: $0 [--rounds N] [--build DIR] [--tests REGEX]" >&2; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) [ $# -ge 2 ] || usage; rounds=$2; shift 2 ;;
	--build) [ $# -ge 2 ] || usage; build=$2; shift 2 ;;
	--tests) [ $# -ge 2 ] || usage; tests=$2; shift 2 ;;
	*) usage ;;
	esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || usage
[ -f "$build/CTestTestfile.cmake" ] || { echo "loaded.sh: no ctest build in $build" >&2; exit 2; }
build=$(cd "$build" && pwd)
mapfile -t names < <(cd "$build" && ctest -N -R "$tests" | sed -En 's/^ *Test +#[0-9]+: +([^ ]+)$/\1/p')
[ ${#names[@]} -gt 0 ] || { echo "loaded.sh: no test matches /$tests/ in $build" >&2; exit 2; }

logs=$(mktemp -d "${TMPDIR:-/tmp}/softrdma-loaded.XXXXXX")
# shellcheck source=tests/stress/hogs.sh
. "$repo/tests/stress/hogs.sh"
trap 'stop_hogs; rm -rf "$logs"' EXIT
trap 'exit 130' INT TERM

passed=0 failed=0
start_hogs
echo "loaded: ${#names[@]} test(s) x $rounds round(s) beside $hog_count busy loops: ${names[*]}"
for ((r = 1; r <= rounds; r++)); do
	round_failed=0
	for t in "${names[@]}"; do
		t0=$(date +%s)
		if (cd "$build" && ctest -R "^$t\$" --output-on-failure) >"$logs/$t" 2>&1; then
			passed=$((passed + 1))
			echo "round $r: ok: $t ($(($(date +%s) - t0)) s)"
		else
			failed=$((failed + 1)) round_failed=$((round_failed + 1))
			echo "round $r: FAIL: $t ($(($(date +%s) - t0)) s):"
			sed 's/^/  | /' "$logs/$t"
		fi
	done
	echo "round $r: $round_failed failure(s)"
done
stop_hogs
echo "loaded: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
