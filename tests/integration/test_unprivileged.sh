# softrdma needs no root: an ordinary user, who cannot create /dev/infiniband, sees the device.
. "$(dirname "$0")/lib.sh"

run_as=()
created_user=""
# The system's tools run without the sanitizer runtimes that a sanitizer build's `softrdma
# env` preloads: procps (pkill, pgrep) deadlocks at start under them (in textdomain(), with
# libasan alone too), and LeakSanitizer makes userdel exit 1 and leave the user behind.
bare() { env -u LD_PRELOAD "$@"; }
if [ "$(id -u)" -eq 0 ]; then
	# One user per run: two suites at once (two build trees, a helper's worktree) must not
	# share, or delete, each other's user.
	user=softrdma-t$$
	if ! id "$user" >/dev/null 2>&1; then
		bare useradd --system --no-create-home --shell /bin/sh "$user" ||
			{ fail "cannot create the test user $user (useradd)"; finish; }
		created_user=$user
	fi
	# The user's processes go first: userdel refuses a user that still runs one, and a
	# background `as_user` leaves its command running when only its subshell is killed.
	at_exit 'if [ -n "$created_user" ]; then
		bare pkill -KILL -u "$created_user"
		for _ in $(seq 50); do bare pgrep -u "$created_user" >/dev/null || break; sleep 0.1; done
		bare userdel "$created_user" || fail "the test user $created_user is left (userdel)"
	fi'
	run_as=(setpriv --reuid="$user" --regid="$user" --clear-groups --reset-env --)
fi

# An installed copy that the user can read wherever the build tree lives.
scratch_dir prefix
chmod 755 "$prefix"
cmake --install "$SOFTRDMA_BUILD" --prefix "$prefix" >/dev/null || fail "cmake --install"

out=$("${run_as[@]}" env PATH=/usr/sbin:/usr/bin:/sbin:/bin sh -c \
	"id -u; test -w /dev || echo dev-not-writable; \
	 '$prefix/bin/softrdma' run -- ibv_devinfo -v" 2>&1)
rc=$?
[ $rc -eq 0 ] && pass "ibv_devinfo -v as $(id -un 2>/dev/null) -> unprivileged exits 0" ||
	fail "ibv_devinfo -v unprivileged exited $rc"
uid=$(head -n1 <<<"$out")
[ "$uid" != 0 ] && pass "ran as uid $uid" || fail "ran as root, not as an unprivileged user"
expect_contains "cannot write /dev" "$out" '^dev-not-writable$'
expect_contains "hca_id" "$out" 'hca_id:[[:space:]]+softrdma0'
expect_contains "port active" "$out" 'PORT_ACTIVE'
expect_contains "GID 0" "$out" 'GID\[  0\]:[[:space:]]+::ffff:127\.0\.0\.1, RoCE v2'

out=$("${run_as[@]}" env PATH=/usr/sbin:/usr/bin:/sbin:/bin "$prefix/bin/softrdma" run -- ibv_devices 2>&1)
expect_contains "ibv_devices unprivileged" "$out" 'softrdma0'

# The run directory against a second local user (docs/security.md, "The run directory"):
# root is the victim, the test user the attacker. Without root there is no second user.
[ ${#run_as[@]} -gt 0 ] || finish
as_user() { "${run_as[@]}" env PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
scratch_dir shared	# stands for /tmp: sticky, everyone may write
chmod 1777 "$shared"
scratch_dir private	# root's own
echo precious >"$private/secret"
mkdir -m 700 "$private/dir"

# 1. The old predictable path, planted with a link to a root-owned file.
as_user sh -c "mkdir '$shared/softrdma-0' && ln -s '$private/secret' '$shared/softrdma-0/sysfs' &&
	ln -s '$private/secret' '$shared/softrdma-0/softrdma_counters'" || fail "planting as the user"
out=$(env -u XDG_RUNTIME_DIR TMPDIR="$shared" bash -c \
	"eval \"\$('$SOFTRDMA' env)\" && ibv_devices && echo \"tree=\$SYSFS_PATH\" &&
	 stat -c 'owner=%u mode=%a' \"\$SYSFS_PATH\"" 2>&1)
expect_contains "planted softrdma-0: root's env still works" "$out" 'softrdma0'
expect_contains "root's tree is a new private directory" "$out" "^tree=$shared/softrdma-env\.......\$"
expect_contains "owned by root, 0700" "$out" '^owner=0 mode=700$'
[ "$(cat "$private/secret")" = precious ] && pass "the file behind the planted link is untouched" ||
	fail "the planted link was followed: $(cat "$private/secret")"
[ "$(readlink "$shared/softrdma-0/sysfs")" = "$private/secret" ] &&
	pass "the planted directory is left alone" || fail "the planted directory was changed"

# 2. XDG_RUNTIME_DIR pointing at the attacker's directory, or at a link the attacker made.
as_user sh -c "mkdir -m 700 '$shared/xdg' && ln -s '$private/dir' '$shared/xdg-link'"
for xdg in "$shared/xdg" "$shared/xdg-link"; do
	out=$(XDG_RUNTIME_DIR=$xdg "$SOFTRDMA" env 2>&1); rc=$?
	[ $rc -ne 0 ] && pass "XDG_RUNTIME_DIR=$xdg refused" || fail "XDG_RUNTIME_DIR=$xdg accepted: $out"
	expect_contains "and the message says why" "$out" 'is owned by uid [0-9]+|is a symbolic link'
done
[ -z "$(ls -A "$private/dir")" ] && pass "nothing written through the link" || fail "written: $(ls "$private/dir")"

# 3. A TMPDIR the attacker may write (not sticky): refused, and the run goes elsewhere fine.
as_user sh -c "mkdir -m 777 '$shared/open' && chmod 777 '$shared/open'"
out=$(TMPDIR=$shared/open "$SOFTRDMA" run -- true 2>&1); rc=$?
[ $rc -ne 0 ] && pass "a TMPDIR of another user's is refused" || fail "TMPDIR=$shared/open accepted"
expect_contains "the refusal names it" "$out" "$shared/open is owned by uid [0-9]+, neither root nor you"
out=$(TMPDIR=$shared "$SOFTRDMA" run -- ibv_devices 2>&1)
expect_contains "root's run in the sticky directory works" "$out" 'softrdma0'

# 4. The counters. The attacker cannot reach root's store; a tree of the attacker's that
# root is pointed at is not attached; truncating a store file kills nobody (no mmap).
eval "$(TMPDIR=$shared "$SOFTRDMA" env)"
as_user sh -c "ls '$SYSFS_PATH'" >/dev/null 2>&1 && fail "the user can list root's tree" ||
	pass "the user cannot enter root's tree"
atree=$(as_user "$prefix/lib/softrdma/softrdma-sysfs" --in "$shared" | head -n1)
[ -d "$atree" ] && pass "the user made a tree of its own: $atree" || fail "no tree made by the user"
at_exit 'rm -rf "$atree"'
# hostile: truncate every counter file in that tree, again and again
as_user sh -c "while :; do for f in '$atree'/softrdma/counters/* '$atree'/class/infiniband/softrdma0/ports/1/counters/*; do : >\"\$f\"; done 2>/dev/null; sleep 0.01; done" &
truncator=$!
port=$(free_port) || { fail "no free TCP port"; exit 1; }
SYSFS_PATH=$atree timeout 60 ibv_rc_pingpong -g 0 -p $port -n 2000 -s 4096 >"$shared/srv" 2>&1 &
spid=$!
for _ in $(seq 300); do [ -n "$(ss -ltnH "sport = :$port")" ] && break; sleep 0.1; done
SYSFS_PATH=$atree timeout 60 ibv_rc_pingpong -g 0 -p $port -n 2000 -s 4096 localhost >"$shared/cli" 2>&1
crc=$?
wait "$spid"; src=$?
[ $crc = 0 ] && [ $src = 0 ] && pass "root's pair in the user's tree finishes (no SIGBUS)" ||
	{ fail "root's pair: server $src, client $crc"; cat "$shared/srv" "$shared/cli" >&2; }
expect_contains "the user's counters are refused, with the reason" "$(cat "$shared/srv")" \
	"counters at $atree are not used \\($atree is owned by uid [0-9]+"
out=$(SYSFS_PATH=$atree "$SOFTRDMA" counters 2>&1) && fail "softrdma counters read the user's tree" ||
	expect_contains "softrdma counters refuses the user's tree" "$out" "refusing the device tree $atree"
kill "$truncator" 2>/dev/null; bare pkill -u "$user" -f 'while :; do for f in'	# the subshell, then its sh

# root's own store truncated under a running pair (by root: the attacker cannot): no harm.
timeout 60 ib_write_bw -d softrdma0 -x 0 -D 3 -p $port >"$shared/srv" 2>&1 &
spid=$!
for _ in $(seq 300); do [ -n "$(ss -ltnH "sport = :$port")" ] && break; sleep 0.1; done
timeout 60 ib_write_bw -d softrdma0 -x 0 -D 3 -p $port localhost >"$shared/cli" 2>&1 &
cpid=$!
sleep 1.5
for f in "$SYSFS_PATH"/softrdma/counters/* "$SYSFS_PATH"/class/infiniband/softrdma0/ports/1/counters/*; do
	: >"$f"
done
wait "$cpid"; crc=$?
wait "$spid"; src=$?
[ $crc = 0 ] && [ $src = 0 ] && pass "a pair whose store was truncated finishes" ||
	fail "truncated store: server $src, client $crc"
[ -s "$SYSFS_PATH/class/infiniband/softrdma0/ports/1/counters/port_xmit_data" ] &&
	pass "and the counters were published again" || fail "port_xmit_data stayed empty"
finish
