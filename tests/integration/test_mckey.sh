# Debian's unmodified mckey (rdmacm-utils): UD multicast through the drop-in librdmacm. On
# one host, two receivers in two processes (the second with two QPs) and a sender in a third; then between two
# network namespaces joined by a veth pair (the receiver in one, the sender in the other).
# Each receiver must get every message (mckey -C: it waits for exactly that many), and the
# port counters of each run's device must show the bytes sent and received on softrdma0.
# The group is 239.x.y.z from this test's pid, shared with no other run.
. "$(dirname "$0")/lib.sh"

count=20 size=200
group=239.$((100 + $$ % 100)).$(($$ / 256 % 256)).$(($$ % 256))
scratch_dir logs
export TMPDIR=$logs
bg_pids=()
at_exit 'for p in "${bg_pids[@]}"; do kill "$p" 2>/dev/null; done; wait'

# device_env NAME [PREFIX...]: a device tree of its own for one side (`softrdma env`, run
# with PREFIX: in a namespace, attached to its veth); its exports in NAME_env, its port
# counters' directory in NAME_counters.
device_env() {
	local name=$1 out sysfs
	shift
	out=$("$@" "$SOFTRDMA" env) || { fail "softrdma env for $name"; finish; }
	sysfs=$(sed -n 's/^export SYSFS_PATH=//p' <<<"$out")
	cleanup_dirs+=("$sysfs")
	printf -v "${name}_env" '%s' "$out"
	printf -v "${name}_counters" '%s' "$sysfs/class/infiniband/softrdma0/ports/1/counters"
}

# in_env NAME [PREFIX...] -- COMMAND...: COMMAND with NAME's device (and run with PREFIX),
# its output line-buffered: wait_for reads a receiver's while it runs.
in_env() {
	local name=$1 envs prefix=()
	shift
	while [ "$1" != -- ]; do prefix+=("$1"); shift; done
	shift
	envs=${name}_env
	"${prefix[@]}" bash -c "${!envs}"$'\n''exec timeout 60 stdbuf -oL "$@"' mckey "$@"
}

# counter NAME FILE: that port counter of NAME's device, in bytes (it counts 4-octet words).
counter() { local d=${1}_counters; echo $(($(cat "${!d}/$2") * 4)); }

# wait_for FILE PATTERN: until a line of FILE matches (mckey has joined), 30 s at most.
wait_for() {
	local i
	for ((i = 0; i < 300; i++)); do
		grep -q -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# receiver NAME LOG ADDR QPS [PREFIX...]: mckey receiving on ADDR in the background with QPS
# QPs (each joins the group and must get every message), once they have joined.
receiver() {
	local name=$1 log=$2 addr=$3 qps=$4
	shift 4
	in_env "$name" "$@" -- mckey -m "$group" -b "$addr" -c "$qps" -C $count -S $size \
		>"$log" 2>&1 &
	bg_pids+=($!)
	wait_for "$log" '^receiving data transfers$' ||
		{ fail "mckey receiver on $addr did not join:"; cat "$log" >&2; }
}

# expect_done LABEL LOG: mckey's own verdict.
expect_done() {
	local out
	out=$(cat "$2")
	expect_contains "$1: all $count messages" "$out" '^data transfers complete$'
	expect_contains "$1: exit status" "$out" '^return status 0$'
	expect_contains "$1: joined the group" "$out" "^mckey: joined dgid: ::ffff:$group "
}

# expect_packets LABEL NAME FILE: at least count packets counted in FILE on NAME's device.
expect_packets() {
	local d=${2}_counters got
	got=$(cat "${!d}/$3")
	[ "$got" -ge $count ] && pass "$1: $3 $got >= $count" || fail "$1: $3 $got, want at least $count"
}

# expect_bytes LABEL NAME FILE: at least count * size bytes counted in FILE on NAME's device.
expect_bytes() {
	local got
	got=$(counter "$2" "$3")
	[ "$got" -ge $((count * size)) ] && pass "$1: $3 $got bytes >= $((count * size))" ||
		fail "$1: $3 $got bytes, want at least $((count * size))"
}

# One host: every process on loopback shares the device's run tree, so its counters are the
# sum of the three.
device_env host
receiver host "$logs/recv1" 127.0.0.1 1
receiver host "$logs/recv2" 127.0.0.1 2
if in_env host -- mckey -m "$group" -b 127.0.0.1 -s -C $count -S $size >"$logs/send" 2>&1; then
	pass "one host: mckey sender"
else
	fail "one host: mckey sender failed:"; cat "$logs/send" >&2
fi
wait "${bg_pids[@]}"
bg_pids=()
expect_done "one host: receiver 1" "$logs/recv1"
expect_done "one host: receiver 2" "$logs/recv2"
expect_done "one host: sender" "$logs/send"
expect_bytes "one host" host port_xmit_data
expect_packets "one host" host multicast_xmit_packets
got=$(counter host port_rcv_data)
[ "$got" -ge $((2 * count * size)) ] && pass "one host: both receivers' bytes counted ($got)" ||
	fail "one host: port_rcv_data $got bytes, want at least $((2 * count * size))"
n=$(grep -c "^mckey: joined dgid: ::ffff:$group " "$logs/recv2")
[ "$n" -eq 2 ] && pass "one host: receiver 2's two QPs joined (each got all, or mckey fails)" ||
	fail "one host: receiver 2: $n joins, want 2"

# Two namespaces: each side's device attached to its veth (root only: netns.sh says so).
if [ "$(id -u)" -ne 0 ]; then
	echo "namespaces skipped: needs root"
	finish
fi
. "$(dirname "$0")/netns.sh"
netns_setup mc
device_env srv "${srv_in[@]}"
device_env cli "${cli_in[@]}"
receiver srv "$logs/ns_recv" "$ip_srv" 1 "${srv_in[@]}"
if in_env cli "${cli_in[@]}" -- mckey -m "$group" -b "$ip_cli" -s -C $count -S $size \
	>"$logs/ns_send" 2>&1; then
	pass "namespaces: mckey sender$where_cli"
else
	fail "namespaces: mckey sender$where_cli failed:"; cat "$logs/ns_send" >&2
fi
wait "${bg_pids[@]}"
bg_pids=()
expect_done "namespaces: receiver$where_srv" "$logs/ns_recv"
expect_done "namespaces: sender$where_cli" "$logs/ns_send"
expect_bytes "namespaces: sender's device" cli port_xmit_data
expect_packets "namespaces: sender's device" cli multicast_xmit_packets
expect_bytes "namespaces: receiver's device" srv port_rcv_data
expect_packets "namespaces: receiver's device" srv multicast_rcv_packets
finish
