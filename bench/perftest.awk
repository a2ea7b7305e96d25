# The figures the benchmarks record from a perftest client's output, for the row of one size:
#   awk -v kind=bw|lat -v size=BYTES -f bench/perftest.awk CLIENT_LOG
# bw: MB/s (10^6 B/s; perftest prints MiB/s) and Mmsg/s, then "- -";
# lat: t_avg, t_typical, t_min and the 99th percentile in µs.
# Nothing (a failed run) for a bandwidth of 0 or a latency that is not a number ("inf"):
# perftest's clock went wrong (seen under QEMU TCG, even with -F).
/#bytes/ { h = 1; next }
h && $1 == size && kind == "lat" && NF >= 8 && ($3 $5 $6 $8) ~ /^[0-9.]+$/ { print $6, $5, $3, $8; exit }
h && $1 == size && kind == "bw" && NF >= 5 && $4 > 0 { printf "%.3f %.6f - -\n", $4 * 1.048576, $5; exit }
