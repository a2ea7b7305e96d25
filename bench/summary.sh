# shellcheck shell=bash disable=SC2154 # raw is the caller's
# Sourced by the benchmark scripts (bench/run.sh, bench/guest.sh): the figures of their
# summaries, from $raw, one run a line, tab-separated:
#   TEST SIZE ROUND OK(1/0) V1 V2 V3 V4 SECONDS ERROR COMMAND
# (a value not measured is "-").
# med TEST SIZE [COL]: median of column COL (5 = the first value) over the rounds that worked.
med() {
	awk -F'\t' -v t="$1" -v s="$2" -v c="${3:-5}" '$1 == t && $2 == s && $4 == 1 { print $c }' "$raw" |
		sort -g | awk '{ a[NR] = $1 } END { if (NR) print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'
}
# rng TEST SIZE [COL]: "min-max" of the same runs.
rng() {
	awk -F'\t' -v t="$1" -v s="$2" -v c="${3:-5}" '$1 == t && $2 == s && $4 == 1 { print $c }' "$raw" |
		sort -g | awk 'function f(v) { return sprintf(v >= 100 ? "%.0f" : v >= 1 ? "%.1f" : "%.3f", v) }
			{ a[NR] = $1 } END { if (NR > 1) printf "%s-%s", f(a[1]), f(a[NR]) }'
}
oks() { awk -F'\t' -v t="$1" -v s="$2" '$1 == t && $2 == s { n++; ok += $4 } END { printf "%d/%d", ok, n }' "$raw"; }
fmt() { # VALUE UNIT [RANGE]
	if [ -n "$1" ]; then
		awk -v v="$1" -v u="$2" -v r="${3:-}" 'BEGIN {
			printf (v >= 100 ? "%.0f %s" : v >= 1 ? "%.1f %s" : "%.3f %s"), v, u
			if (r != "") printf " (%s)", r }'
	else
		echo "FAIL"
	fi
}
ratio() { [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN { printf (a / b >= 0.1 ? "%.2f" : "%.3f"), a / b }' || echo -; }
human() { case $1 in 4096) echo "4 KiB" ;; 65536) echo "64 KiB" ;; 1048576) echo "1 MiB" ;; *) echo "$1 B" ;; esac; }
jnum() { [ -n "$1" ] && [ "$1" != - ] && echo "$1" || echo null; }
# runs_json: every run of $raw as a JSON object, one a line, each after a comma but the first.
runs_json() {
	awk -F'\t' 'function n(v) { return v == "-" ? "null" : v } BEGIN { sep = "" } {
		printf "%s\n    {\"test\": \"%s\", \"size\": %s, \"round\": %s, \"ok\": %s, \"values\": [%s, %s, %s, %s], \"client_s\": %s, \"error\": \"%s\", \"command\": \"%s\"}",
		       sep, $1, $2, $3, $4 ? "true" : "false", n($5), n($6), n($7), n($8), $9, $10, $11; sep = "," }' "$raw"
}
