# SOFTRDMA_FAULTS on Debian's unmodified perftest (docs/softrdma-faults.7): lost frames and
# delays on both sides are survived (retransmission), and a variable that does not parse
# stops the device from opening, with a message naming what is wrong. (Not ibv_rc_pingpong:
# it exits as soon as its last message arrives, so the ACK of the peer's last one, if lost,
# is resent to a process that is gone and ends in IBV_WC_RETRY_EXC_ERR, as it would on a
# lossy fabric. perftest's peers wait for each other before they exit.)
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/pairs.sh"

export SOFTRDMA_ENGINE=uring engine=uring
for spec in "all:drop=1/20" "seed=9;all:drop=3%,delay=1ms"; do
	SOFTRDMA_FAULTS=$spec perftest_pair "$spec" ib_write_bw -s 4096 -n 300 || continue
	perftest_result "$spec" "server client" "$(bw_line 4096 300)"
	for side in server client; do
		expect_contains "$spec: $side: announced" "$(side_out $side)" \
			"^softrdma: injecting faults: SOFTRDMA_FAULTS=\"$spec\"\$"
	done
done

out=$(SOFTRDMA_FAULTS="all:drop=often" timeout 30 "$SOFTRDMA" run -- ibv_devinfo -d softrdma0 2>&1)
rc=$?
if [ $rc -ne 0 ]; then pass "bad spec: ibv_devinfo fails ($rc)"; else fail "bad spec: ibv_devinfo exit 0"; fi
expect_contains "bad spec: the message names the part" "$out" \
	'^softrdma: SOFTRDMA_FAULTS="all:drop=often": at "often": .*the device will not open$'
finish
