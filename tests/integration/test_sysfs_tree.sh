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
node=$(SOFTRDMA_REAL_SYSFS="$fake/sys" SOFTRDMA_REAL_CDEV_DIR="$fake/dev" "$mksysfs" "$tree")
[ "$node" = uverbs2 ] && pass "picks the first free uverbs index" || fail "picked '$node', expected uverbs2"
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
