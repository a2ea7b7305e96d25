# Packet capture (docs/observability.md): unmodified programs under `softrdma run` with
# SOFTRDMA_PCAP (as --pcap exports it); each process writes its own pcapng file,
# `softrdma pcap-merge` merges them, and Wireshark's InfiniBand dissector (tshark) must
# decode what the device did: the opcodes of RDMA WRITE, READ, atomics, SEND, UD SEND and
# XRC SEND, the RETH of a refused write with its rkey, and the NAK's syndrome.
. "$(dirname "$0")/lib.sh"

command -v tshark >/dev/null || { fail "tshark is not installed (build.sh installs it)"; finish; }
. "$(dirname "$0")/pairs.sh"

# Wireshark offers an InfiniBand payload to the upper-layer protocols' heuristics (SMC-R,
# SMB Direct, RPC-over-RDMA, NVMe-oF, iSER, ...). perftest's payload is random bytes, and
# some of them look enough like an SMC-R message to be decoded as a malformed one (a 2-byte
# READ response beginning 0x21-0x29 does). That is the application's data, not our framing:
# the checks decode with those heuristics off, as docs/observability.md tells users to.
ulps_off=()
for p in $(tshark -G heuristic-decodes 2>/dev/null | awk '$1 == "infiniband.payload" && $2 != "ethertype" { print $2 }'); do
	ulps_off+=(--disable-protocol "$p")
done
decode() { tshark "${ulps_off[@]}" "$@"; }

engine=uring
export SOFTRDMA_ENGINE=$engine
demo="$SOFTRDMA_BUILD/lib/softrdma/softrdma-cm-demo"

# capture NAME: the per-process captures of the next pair go to $logs/NAME.pcapng.
capture() {
	cap_name=$1 cap="$logs/$1.pcapng"
	export SOFTRDMA_PCAP=$cap
}

# merged LABEL: merges the last pair's captures into $cap; fails unless two processes wrote.
merged() {
	local parts
	parts=$(ls "$logs/${cap_name}".*.pcapng 2>/dev/null | wc -l)
	[ "$parts" -eq 2 ] && pass "$1: one capture per process ($parts)" ||
		fail "$1: $parts capture files, expected 2 (one per process): $(ls "$logs")"
	"$SOFTRDMA" pcap-merge "$cap" >/dev/null || fail "$1: softrdma pcap-merge failed"
}

# fields FILTER FIELD...: one line per packet matching the display filter.
fields() {
	local filter=$1 args=() f
	shift
	for f in "$@"; do args+=(-e "$f"); done
	decode -r "$cap" -Y "$filter" -T fields -E separator=' ' "${args[@]}" 2>/dev/null
}

count() { fields "$1" frame.number | wc -l; }

# expect_none LABEL FILTER: no packet matches FILTER.
expect_none() {
	local n
	n=$(count "$2")
	[ "$n" -eq 0 ] && pass "$1: no packet matches '$2'" || fail "$1: $n packets match '$2'"
}

# expect_count LABEL FILTER MIN: at least MIN packets match FILTER.
expect_count() {
	local n
	n=$(count "$2")
	[ "$n" -ge "$3" ] && pass "$1: $n packets match '$2'" ||
		{ fail "$1: $n packets match '$2', expected at least $3; the capture:"; decode -r "$cap" 2>/dev/null | head -20 >&2; }
}

# Nothing the dissector finds malformed or wrong, and every packet is RoCE v2 (UDP 4791).
expect_clean() {
	local all bad
	all=$(count "frame")
	bad=$(count "_ws.malformed || _ws.expert.severity >= error || !(udp.dstport == 4791) || !infiniband")
	[ "$all" -gt 0 ] && [ "$bad" -eq 0 ] && pass "$1: all $all packets decode as RoCE v2, none malformed" ||
		{ fail "$1: $bad of $all packets malformed or not RoCE v2:"; decode -r "$cap" -Y "_ws.malformed || _ws.expert.severity >= error || !infiniband" 2>/dev/null | head >&2; }
}

n=20
capture write
if perftest_pair "ib_write_bw" ib_write_bw -s 64 -n $n; then
	merged "ib_write_bw"
	expect_clean "ib_write_bw"
	# Every WRITE twice: sent by the client's engine, received by the server's.
	expect_count "ib_write_bw" "infiniband.bth.opcode == 10 && infiniband.reth.dmalen == 64 && frame.packet_flags_direction == 2" $n
	expect_count "ib_write_bw" "infiniband.bth.opcode == 10 && infiniband.reth.dmalen == 64 && frame.packet_flags_direction == 1" $n
	expect_count "ib_write_bw ACKs" "infiniband.bth.opcode == 17 && infiniband.aeth.syndrome == 0x1f" 2
	# The ACKETH piggyback is cut out of the copy: the payload is exactly the 64 bytes.
	expect_count "ib_write_bw payload" "infiniband.bth.opcode == 10 && data.len == 64" $((2 * n))
	expect_count "ib_write_bw comments" "frame.comment contains \"sent stream qp 0x\"" $n
	names=$(decode -r "$cap" -T fields -e frame.interface_name 2>/dev/null | sort -u)
	expect_contains "ib_write_bw: interfaces name the processes" "$names" "^softrdma0 pid [0-9]+$"
fi

capture read
if perftest_pair "ib_read_lat" ib_read_lat -n $n; then
	merged "ib_read_lat"
	expect_clean "ib_read_lat"
	expect_count "ib_read_lat requests" "infiniband.bth.opcode == 12 && infiniband.reth.dmalen == 2" $n
	expect_count "ib_read_lat responses" "infiniband.bth.opcode == 16 && data.len == 2" $n
fi

capture atomic
if perftest_pair "ib_atomic_bw" ib_atomic_bw -n $n; then
	merged "ib_atomic_bw"
	expect_clean "ib_atomic_bw"
	expect_count "ib_atomic_bw requests" "infiniband.bth.opcode == 20 && infiniband.atomiceth" $n
	expect_count "ib_atomic_bw answers" "infiniband.bth.opcode == 18 && infiniband.aeth.syndrome == 0x1f" $n
fi

capture send
if perftest_pair "ib_send_bw" ib_send_bw -s 64 -n $n; then
	merged "ib_send_bw"
	expect_clean "ib_send_bw"
	expect_count "ib_send_bw" "infiniband.bth.opcode == 4 && data.len == 64" $n
fi

capture ud
if perftest_pair "ib_send_bw -c UD" ib_send_bw -c UD -s 64 -n $n; then
	merged "ib_send_bw -c UD"
	expect_clean "ib_send_bw -c UD"
	expect_count "ib_send_bw -c UD" "infiniband.bth.opcode == 100 && infiniband.deth.srcqp && data.len == 64" $n
	expect_count "ib_send_bw -c UD comments" "frame.comment contains \"datagram\"" $n
fi

# XRC: ibv_xsrq_pingpong's SENDs carry an XRCETH (opcode 0xa4) and are acknowledged with
# XRC ACKs (0xb1). bookworm's Wireshark names no XRC opcode ("Unknown OpCode") and so does
# not decode the XRCETH, but the BTH and the frames must still be whole RoCE v2 packets.
[ -e /tmp/xrc_domain ] || at_exit 'rm -f /tmp/xrc_domain'
capture xrc
next_port
if run_pair "ibv_xsrq_pingpong" ibv_xsrq_pingpong -g 0 -p "$port" -n $n -- \
	ibv_xsrq_pingpong -g 0 -p "$port" -n $n localhost; then
	merged "ibv_xsrq_pingpong"
	expect_clean "ibv_xsrq_pingpong"
	# Each side's n SENDs of 4096 bytes, seen by the sender and the receiver.
	expect_count "ibv_xsrq_pingpong SENDs" "infiniband.bth.opcode == 164 && udp.length == 4124" $((4 * n))
	expect_count "ibv_xsrq_pingpong ACKs" "infiniband.bth.opcode == 177" 2
fi

# A refused write: the rdma_reg_write demo's client writes into buffer B, which the server
# registered without remote write; the capture shows its RETH (B's rkey) and the NAK.
capture refused
next_port
if run_pair "refused write" "$demo" server "$port" -- "$demo" client 127.0.0.1 "$port"; then
	merged "refused write"
	expect_clean "refused write"
	rkey=$(grep -Eo 'and B at 0x[0-9a-f]+ \(rkey 0x[0-9a-f]+\)' <<<"$cli_out" | grep -Eo 'rkey 0x[0-9a-f]+' | cut -d' ' -f2)
	if [ -n "$rkey" ]; then
		expect_count "refused write: the WRITE into B, its RETH rkey $rkey" \
			"infiniband.bth.opcode == 10 && infiniband.reth.r_key == $rkey && infiniband.reth.dmalen == 4096" 2
		nak=$(fields "infiniband.bth.opcode == 17 && infiniband.aeth.syndrome != 0x1f" \
			infiniband.aeth.syndrome infiniband.aeth.syndrome.error_code | sort -u)
		expect_contains "refused write: NAK remote access error (syndrome 0x62, code 2)" "$nak" "^98 2$"
	else
		fail "refused write: the demo client did not say B's rkey: $cli_out"
	fi
fi

# --pcap-snaplen: long frames are cut, their length still says what went on the wire.
capture snap
export SOFTRDMA_PCAP_SNAPLEN=96
if perftest_pair "snap length" ib_write_bw -s 4096 -n $n; then
	merged "snap length"
	expect_count "snap length: 96 of 4162+ bytes recorded" \
		"infiniband.bth.opcode == 10 && frame.cap_len == 96 && frame.len > 4096" $((2 * n))
	expect_none "snap length: nothing longer" "frame.cap_len > 96"
fi
unset SOFTRDMA_PCAP_SNAPLEN SOFTRDMA_PCAP

# A write that fails turns the capture off with one message, and the program goes on: files
# are limited to 16 KiB here (RLIMIT_FSIZE, SIGXFSZ ignored, so write(2) fails with EFBIG).
capture full
ulimit -S -f 16
trap '' XFSZ
if perftest_pair "write error" ib_write_bw -s 64 -n 2000; then
	for side in server client; do
		msgs=$(grep -c '^softrdma: packet capture to .* stopped: File too large$' "$logs/$side")
		[ "$msgs" -eq 1 ] && pass "write error: the $side says once that its capture stopped" ||
			{ fail "write error: the $side said it $msgs times:"; cat "$logs/$side" >&2; }
	done
	perftest_result "write error" "server client" "$(bw_line 64 2000)"
fi
trap - XFSZ
ulimit -S -f unlimited
unset SOFTRDMA_PCAP

# Capture off: nothing is written.
before=$(ls "$logs" | grep -c pcapng)
perftest_pair "capture off" ib_write_bw -s 64 -n $n
after=$(ls "$logs" | grep -c pcapng)
[ "$after" -eq "$before" ] && pass "capture off: no capture file ($after before and after)" ||
	fail "capture off: $((after - before)) capture files appeared"
finish
