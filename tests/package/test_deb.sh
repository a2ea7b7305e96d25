#!/usr/bin/env bash
# tests/package/test_deb.sh: the .deb as a user gets it, in a clean Debian root.
#
# debootstrap makes a minimal root of this host's Debian release from Debian's own
# packages; an unprivileged user there (with sudo, as on a CI runner) runs the two step
# blocks of docs/ci.md verbatim: build the package from this checkout, `apt-get install
# ./softrdma_*.deb`, `eval "$(softrdma env)"`, ibv_devinfo and an ibv_rc_pingpong pair.
# Then the package is checked: its files under /usr, its dependency on the libibverbs it was
# built for, the man pages. Needs root (debootstrap, chroot) and Debian's archive; about 5
# minutes on 2 cores. SOFTRDMA_DEBIAN_MIRROR overrides the archive, SOFTRDMA_COMPAT_CACHE
# where the downloaded packages are kept between runs.
set -uo pipefail
src=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
. "$src/tools/packages.sh"
mirror=${SOFTRDMA_DEBIAN_MIRROR:-http://deb.debian.org/debian}
cache=${SOFTRDMA_COMPAT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/softrdma/compat}/debootstrap
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

[ "$(id -u)" -eq 0 ] || { echo "test_deb.sh: needs root (debootstrap, chroot)" >&2; exit 1; }
install_missing test_deb.sh debootstrap debian-archive-keyring git

root=$(mktemp -d "${TMPDIR:-/var/tmp}/softrdma-deb.XXXXXX") || exit 1
chmod 755 "$root"	# it becomes /, which every user traverses
mounts=()
cleanup() {
	local m
	for m in "${mounts[@]}"; do umount -R "$m" 2>/dev/null || umount -lR "$m"; done
	# Nothing of the host may still be mounted below the root when it is removed.
	if findmnt -rn -o TARGET | grep -q "^$root/"; then
		echo "test_deb.sh: $root still has mounts; not removed" >&2
		return
	fi
	rm -rf --one-file-system "$root"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start=$SECONDS
mkdir -p "$cache"
if ! debootstrap --variant=minbase --include=sudo,ca-certificates --cache-dir="$cache" \
	"$suite" "$root" "$mirror" >"$root.debootstrap.log" 2>&1; then
	tail -n 20 "$root.debootstrap.log" >&2
	echo "FAIL: debootstrap $suite from $mirror (log: $root.debootstrap.log)" >&2
	exit 1
fi
rm -f "$root.debootstrap.log"
pass "clean $suite root from $mirror ($((SECONDS - start)) s)"

for m in proc dev; do
	case $m in
	proc) mount -t proc proc "$root/proc" ;;
	dev) mount --rbind /dev "$root/dev" && mount --make-rslave "$root/dev" ;;
	esac || { echo "FAIL: mount $m" >&2; exit 1; }
	mounts=("$root/$m" "${mounts[@]}")
done
cp /etc/resolv.conf "$root/etc/resolv.conf"
# No service of an installed package starts in the root.
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
chroot "$root" useradd -m -s /bin/bash tester || exit 1
echo "tester ALL=(ALL) NOPASSWD: ALL" >"$root/etc/sudoers.d/tester"

# This checkout as a CI job checks it out: the tracked files and the new ones not ignored.
mkdir "$root/home/tester/softrdma"
git -C "$src" ls-files -z --cached --others --exclude-standard |
	(cd "$src" && xargs -0 tar -cf - --no-recursion) | tar -xf - -C "$root/home/tester/softrdma"
chroot "$root" chown -R tester: /home/tester/softrdma

# The step blocks of docs/ci.md, in order, as one script.
steps=$(awk '/^<!-- ci-steps: /{want=1; next} want && /^```sh$/{inside=1; next}
	inside && /^```$/{inside=0; want=0; next} inside' "$src/docs/ci.md")
[ -n "$steps" ] || { echo "FAIL: no ci-steps blocks in docs/ci.md" >&2; exit 1; }
printf '%s\n' "$steps" >"$root/home/tester/steps.sh"
step_start=$SECONDS
out=$(chroot "$root" runuser -l tester -c 'bash -e -x ./steps.sh' 2>&1)
rc=$?
printf '%s\n' "$out" >"$root.steps.log"
if [ $rc -eq 0 ]; then
	pass "docs/ci.md's steps as an unprivileged user ($((SECONDS - step_start)) s)"
	rm -f "$root.steps.log"
else
	tail -n 40 <<<"$out" >&2
	fail "docs/ci.md's steps exited $rc (log: $root.steps.log)"
fi
grep -Eq 'hca_id:[[:space:]]+softrdma0' <<<"$out" && pass "ibv_devinfo shows softrdma0" ||
	fail "ibv_devinfo did not show softrdma0"
[ "$(grep -Ec '^[0-9]+ bytes in [0-9.]+ seconds' <<<"$out")" -eq 2 ] &&
	pass "ibv_rc_pingpong: both sides report their transfer" ||
	fail "ibv_rc_pingpong: not both sides reported a transfer"

# The package: its files under /usr, its dependencies, the man pages.
files=$(chroot "$root" dpkg -L softrdma 2>&1)
for f in /usr/bin/softrdma '/usr/lib/softrdma/libsoftrdma-rdmav[0-9]+\.so' \
	/usr/lib/softrdma/libsoftrdma-preload.so /usr/lib/softrdma/softrdma-sysfs \
	/usr/lib/softrdma/rdmacm/librdmacm.so.1 /usr/share/man/man1/softrdma.1.gz \
	/usr/share/man/man7/softrdma.7.gz /usr/share/man/man7/softrdma-faults.7.gz; do
	grep -Eqx "$f" <<<"$files" && pass "installs $f" || fail "does not install $f"
done
depends=$(chroot "$root" dpkg-query -W -f='${Depends}' softrdma)
grep -Eq 'libibverbs1 \(>= [0-9]+\), libibverbs1 \(<< [0-9]+\)' <<<"$depends" &&
	pass "depends on the libibverbs it was built for: $depends" ||
	fail "no libibverbs range in Depends: $depends"
installed=$(chroot "$root" dpkg-query -W -f='${Version}' libibverbs1)
chroot "$root" dpkg --compare-versions "$installed" ge 36 && pass "libibverbs1 $installed" ||
	fail "libibverbs1 $installed"

echo "test_deb.sh: $((SECONDS - start)) s"
[ $failures -eq 0 ] && { echo "all checks passed"; exit 0; }
echo "$failures check(s) failed" >&2
exit 1
