# SOFTRDMA_FAULTS on Debian's unmodified ibv_rc_pingpong (docs/softrdma-faults.7): lost
# frames and delays on both sides are survived (retransmission), and a variable that does
# not parse stops the device from opening, with a message naming what is wrong.
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/pairs.sh"

export SOFTRDMA_ENGINE=uring engine=uring
for spec in "all:drop=1/20" "seed=9;all:drop=3%,delay=1ms"; do
	next_port || continue
	args=(ibv_rc_pingpong -g 0 -p "$port" -n 100)
	SOFTRDMA_FAULTS=$spec run_pair "$spec" "${args[@]}" -- "${args[@]}" localhost || continue
	for side in server client; do
		out=$srv_out
		[ $side = client ] && out=$cli_out
		expect_contains "$spec: $side: 100 iters" "$out" '^100 iters in [0-9.]+ seconds'
		expect_contains "$spec: $side: announced" "$out" \
			"^softrdma: injecting faults: SOFTRDMA_FAULTS=\"$spec\"\$"
	done
done

out=$(SOFTRDMA_FAULTS="all:drop=often" timeout 30 "$SOFTRDMA" run -- ibv_devinfo -d softrdma0 2>&1)
rc=$?
if [ $rc -ne 0 ]; then pass "bad spec: ibv_devinfo fails ($rc)"; else fail "bad spec: ibv_devinfo exit 0"; fi
expect_contains "bad spec: the message names the part" "$out" \
	'^softrdma: SOFTRDMA_FAULTS="all:drop=often": at "often": .*the device will not open$'
finish
