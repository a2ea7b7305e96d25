# The generated tree: what libibverbs needs, and the host's real devices linked in beside ours.
. "$(dirname "$0")/lib.sh"
mksysfs="$SOFTRDMA_BUILD/lib/softrdma/softrdma-sysfs"

# A host with two real devices (uverbs0, uverbs1) and their nodes.
scratch_dir fake
mkdir -p "$fake/sys/class/infiniband_verbs/uverbs0" "$fake/sys/class/infiniband_verbs/uverbs1" \
	"$fake/sys/class/infiniband/mlx5_0" "$fake/sys/class/infiniband/mlx5_1" "$fake/dev"
echo 6 >"$fake/sys/class/infiniband_verbs/abi_version"
touch "$fake/dev/uverbs0" "$fake/dev/uverbs1"

scratch_dir tree

tree=$tree/sysfs
out=$(SOFTRDMA_REAL_SYSFS="$fake/sys" SOFTRDMA_REAL_CDEV_DIR="$fake/dev" "$mksysfs" "$tree")
[ "$(head -n1 <<<"$out")" = "$tree" ] && pass "prints the tree's path" || fail "printed '$out'"
node=$(tail -n1 <<<"$out")
[ "$node" = uverbs2 ] && pass "picks the first free uverbs index" || fail "picked '$node', expected uverbs2"
[ "$(stat -c %a "$tree")" = 700 ] && pass "the tree is private (0700)" || fail "tree mode $(stat -c %a "$tree")"
for d in uverbs0 uverbs1; do
	[ "$(readlink "$tree/class/infiniband_verbs/$d")" = "$fake/sys/class/infiniband_verbs/$d" ] &&
		pass "real $d linked" || fail "real $d not linked"
done
[ -L "$tree/class/infiniband/mlx5_0" ] && pass "real mlx5_0 linked" || fail "mlx5_0 not linked"
[ "$(cat "$tree/class/infiniband_verbs/abi_version")" = 6 ] && pass "abi_version 6" || fail "abi_version"

dev="$tree/class/infiniband/softrdma0"
[ "$(cat "$tree/class/infiniband_verbs/uverbs2/ibdev")" = softrdma0 ] && pass "ibdev" || fail "ibdev"
[ "$(cat "$tree/class/infiniband_verbs/uverbs2/dev")" = 0:0 ] && pass "dev 0:0" || fail "dev"
[ "$(cat "$dev/node_type")" = "1: CA" ] && pass "node_type" || fail "node_type"
grep -Eqx '[0-9a-f]{4}(:[0-9a-f]{4}){3}' "$dev/node_guid" && pass "node_guid format" || fail "node_guid"
[ "$(cat "$dev/ports/1/pkeys/0")" = 0xffff ] && pass "pkey 0" || fail "pkey 0"

ngids=$(ls "$dev/ports/1/gids" | wc -l)
[ "$ngids" -ge 1 ] && pass "$ngids GIDs" || fail "no GIDs"
for f in "$dev"/ports/1/gids/*; do
	i=$(basename "$f")
	grep -Eqx '[0-9a-f]{4}(:[0-9a-f]{4}){7}' "$f" || fail "GID $i not in 8-group form: $(cat "$f")"
	[ "$(cat "$dev/ports/1/gid_attrs/types/$i")" = "RoCE v2" ] || fail "GID $i type"
	[ -s "$dev/ports/1/gid_attrs/ndevs/$i" ] || fail "GID $i has no netdev"
done
pass "every GID has 8 groups, a type and a netdev"

# What node_exporter's infiniband collector needs beside the counters.
expect_contains "port rate" "$(cat "$dev/ports/1/rate")" '^25 Gb/sec \(1X EDR\)$'
for f in port_xmit_data port_rcv_data port_xmit_packets port_rcv_packets port_rcv_errors \
	symbol_error link_downed VL15_dropped; do
	[ "$(cat "$dev/ports/1/counters/$f")" = 0 ] || fail "counters/$f is not 0 in a new tree"
done
for f in sent_pkts rcvd_pkts duplicate_request out_of_seq_request rcvd_rnr_err send_rnr_err \
	completer_retry_err retry_exceeded_err rnr_nak_retry_err resp_remote_access_errors; do
	[ "$(cat "$dev/ports/1/hw_counters/$f")" = 0 ] || fail "hw_counters/$f is not 0 in a new tree"
done
pass "counters/ and hw_counters/ start at 0"
[ -d "$tree/softrdma/counters" ] && [ "$(stat -c %a "$tree/softrdma")" = 700 ] &&
	pass "the counter store is private" || fail "no private counter store in the tree"

# --in PARENT: a new directory of its own (mkdtemp), never one that exists.
scratch_dir parent
out=$("$mksysfs" --in "$parent" softrdma-env) || fail "--in failed"
made=$(head -n1 <<<"$out")
case $made in "$parent"/softrdma-env.??????) pass "--in makes $made" ;; *) fail "--in made '$made'" ;; esac
out=$("$mksysfs" "$made" 2>&1); rc=$?
[ $rc -ne 0 ] && pass "an existing directory is refused" || fail "wrote into the existing $made"
expect_contains "says why" "$out" 'File exists'
"$mksysfs" --check "$made" && pass "--check accepts a tree of ours" || fail "--check refused $made"
chmod 755 "$made"
out=$("$mksysfs" --check "$made" 2>&1) && fail "--check accepted a tree others can read" ||
	expect_contains "--check names the mode" "$out" 'mode 0755: it must be private'

# The same node GUID every time on one host.
scratch_dir tree2
tree2=$tree2/sysfs
"$mksysfs" "$tree2" >/dev/null
cmp -s "$dev/node_guid" "$tree2/class/infiniband/softrdma0/node_guid" &&
	pass "node GUID stable" || fail "node GUID changed between runs"

out=$("$mksysfs" relative/path 2>&1); rc=$?
[ $rc -eq 2 ] && pass "relative path refused" || fail "relative path: exit $rc"
expect_contains "usage message" "$out" 'usage: softrdma-sysfs'
finish
