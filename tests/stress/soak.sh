#!/usr/bin/env bash
# The busy-machine soak of issue 18: the README's test command, round after round, on a
# machine with more work than CPUs. Not a ctest test (a round takes ~15 min on 2 vCPUs).
# Each round runs two lanes at the same time, beside 2 x nproc busy loops:
#   normal: the normal build's whole suite (ctest -j 2), then (whatever that gave)
#           loaded.sh --rounds 1 on it
#           (which adds its own busy loops and the SIGSTOP/SIGCONT of a peer);
#   asan:   the sanitizer build's whole suite (ctest -j 2).
# That is stricter than the two builds one after the other beside a hog.
#
#   tests/stress/soak.sh [--rounds N] [--until HH:MM] [--normal DIR] [--asan DIR]
#
# Defaults: 10 rounds, build/ and build-sanitize/ (build.sh's names). With --until, no
# round starts that the last round's time says would end after it. One line per round;
# the logs of a failed round are kept (the path is printed), a passed round's removed.
# Ends with "soak: R rounds, F failed, the last C in a row passed"; exits 0 only when no
# round failed.
set -uo pipefail
repo=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
rounds=10 until_s="" normal=$repo/build asan=$repo/build-sanitize

usage() {
	echo "usage: $0 [--rounds N] [--until HH:MM] [--normal DIR] [--asan DIR]" >&2
	exit 2
}
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) [ $# -ge 2 ] || usage; rounds=$2; shift 2 ;;
	--until) [ $# -ge 2 ] || usage
		until_s=$(date -d "$2" +%s) || { echo "soak.sh: --until $2 is not a time" >&2; exit 2; }
		shift 2 ;;
	--normal) [ $# -ge 2 ] || usage; normal=$2; shift 2 ;;
	--asan) [ $# -ge 2 ] || usage; asan=$2; shift 2 ;;
	*) usage ;;
	esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || usage
for d in "$normal" "$asan"; do
	[ -f "$d/CTestTestfile.cmake" ] ||
		{ echo "soak.sh: no ctest build in $d (build.sh test makes both)" >&2; exit 2; }
done
normal=$(cd "$normal" && pwd) asan=$(cd "$asan" && pwd)

logs=$(mktemp -d "${TMPDIR:-/tmp}/softrdma-soak.XXXXXX")
# shellcheck source=tests/stress/hogs.sh
. "$repo/tests/stress/hogs.sh"
lanes=()
stop_all() {
	local p
	for p in "${lanes[@]}"; do kill -- -"$p" 2>/dev/null; done
	stop_hogs
}
trap stop_all EXIT
trap 'exit 130' INT TERM

# lane NAME COMMAND...: runs COMMAND in its own process group, output in $dir/NAME, its
# exit status and seconds in $dir/NAME.rc.
lane() {
	local name=$1 t0
	shift
	t0=$(date +%s)
	"$@" >"$dir/$name" 2>&1
	echo "$? $(($(date +%s) - t0))" >"$dir/$name.rc"
}
# loaded.sh runs even after a failed suite: a soak wants both answers every round.
normal_lane() {
	local rc=0
	(cd "$normal" && ctest -j 2 --output-on-failure) || rc=$?
	"$repo/tests/stress/loaded.sh" --rounds 1 --build "$normal" || rc=$?
	return "$rc"
}
asan_lane() { cd "$asan" && ctest -j 2 --output-on-failure; }
export normal asan repo
export -f lane normal_lane asan_lane
# What a lane's log says in one line: ctest's verdicts and loaded.sh's.
summary() { grep -hE 'tests passed|^loaded: [0-9]+ passed' "$@" | tr '\n' ' '; }

start_hogs
echo "soak: up to $rounds round(s) beside $hog_count busy loops; logs in $logs"
failed=0 in_row=0 round_s=0 r=0
while [ $r -lt "$rounds" ]; do
	if [ -n "$until_s" ] && [ $(($(date +%s) + round_s)) -gt "$until_s" ]; then
		echo "soak: no time for another round before --until"
		break
	fi
	r=$((r + 1)) dir=$logs/round$r t0=$(date +%s)
	mkdir -p "$dir"
	lanes=()
	export dir
	# Each lane leads a process group of its own, which stop_all can end whole.
	setsid bash -c 'lane normal normal_lane' &
	lanes+=($!)
	setsid bash -c 'lane asan asan_lane' &
	lanes+=($!)
	wait "${lanes[@]}"
	lanes=()
	round_s=$(($(date +%s) - t0))
	read -r nrc ns <"$dir/normal.rc"
	read -r arc as <"$dir/asan.rc"
	line="round $r: $round_s s; normal+loaded exit $nrc ($ns s), asan exit $arc ($as s);"
	line+=" normal: $(summary "$dir/normal")asan: $(summary "$dir/asan")"
	line+="load $(cut -d' ' -f1-3 /proc/loadavg)"
	if [ "$nrc" = 0 ] && [ "$arc" = 0 ]; then
		in_row=$((in_row + 1))
		rm -rf "$dir"
		echo "$line"
	else
		failed=$((failed + 1)) in_row=0
		echo "$line: FAILED (logs kept in $dir)"
		grep -hE '\*\*\*Failed|\*\*\*Timeout|^round [0-9]+: FAIL' "$dir/normal" "$dir/asan" |
			sed 's/^/  | /'
	fi
done
stop_all
trap - EXIT
[ "$failed" -eq 0 ] && rm -rf "$logs"
echo "soak: $r rounds, $failed failed, the last $in_row in a row passed"
[ "$failed" -eq 0 ]
