#!/usr/bin/env bash
# Runs one libFuzzer harness of tests/fuzz for a bounded time, from its checked-in seed
# corpus (corpus/NAME/, left untouched: new inputs go to a scratch directory), and prints
# the figures: executions, coverage (edges), features, new corpus size.
#   run.sh SECONDS HARNESS        fuzz for SECONDS
#   run.sh regressions HARNESS    run every input in regressions/NAME/ once
# A crash leaves its input in $FUZZ_ARTIFACTS (default: a scratch directory, printed) and
# fails. Longer runs: docs/fuzzing.md.
set -uo pipefail
here=$(dirname "$(readlink -f "$0")")
seconds=$1 harness=$2
name=$(basename "$harness")
work=$(mktemp -d "${TMPDIR:-/tmp}/softrdma-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
# Inputs stay below a socketpair's buffer (fuzz_stream writes them whole).
opts=(-max_len=32768 -timeout=20 -rss_limit_mb=2048 -print_final_stats=1)

if [ "$seconds" = regressions ]; then
	shopt -s nullglob
	inputs=("$here/regressions/$name"/*)
	[ ${#inputs[@]} -eq 0 ] && { echo "$name: no regression inputs"; exit 0; }
	exec "$harness" "${opts[@]}" "${inputs[@]}"
fi

artifacts=${FUZZ_ARTIFACTS:-$work/artifacts}
mkdir -p "$work/corpus" "$artifacts"
"$harness" "${opts[@]}" -max_total_time="$seconds" -artifact_prefix="$artifacts/" \
	"$work/corpus" "$here/corpus/$name" >"$work/log" 2>&1
rc=$?
grep -E '^#[0-9]+[[:space:]]+DONE|^stat::|ERROR|SUMMARY' "$work/log"
echo "$name: $(find "$work/corpus" -type f | wc -l) new corpus inputs"
if [ $rc -ne 0 ]; then
	tail -n 60 "$work/log"
	echo "$name: FAILED (exit $rc); crashing input(s):" >&2
	ls -l "$artifacts" >&2
	[ -z "${FUZZ_ARTIFACTS:-}" ] && cp -r "$artifacts" "${TMPDIR:-/tmp}/softrdma-fuzz-$name-crash" &&
		echo "copied to ${TMPDIR:-/tmp}/softrdma-fuzz-$name-crash" >&2
	exit 1
fi
