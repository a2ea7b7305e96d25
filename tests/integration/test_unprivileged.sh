# softrdma needs no root: an ordinary user, who cannot create /dev/infiniband, sees the device.
. "$(dirname "$0")/lib.sh"

run_as=()
created_user=""
if [ "$(id -u)" -eq 0 ]; then
	user=softrdma-test
	if ! id "$user" >/dev/null 2>&1; then
		useradd --system --no-create-home --shell /bin/sh "$user" ||
			{ fail "cannot create the test user $user (useradd)"; finish; }
		created_user=$user
	fi
	at_exit '[ -n "$created_user" ] && userdel "$created_user"'
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
finish
