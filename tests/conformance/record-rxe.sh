#!/usr/bin/env bash
# Records rxe's answers to the conformance program (tests/conformance/rxe.ref) and rxe's
# outcome of each test of rdma-core's pyverbs suite (tests/pyverbs/rxe.results).
#
#   tests/conformance/record-rxe.sh
#
# Boots Debian bookworm's own kernel under QEMU (TCG: no KVM needed) with an initramfs made
# only of Debian packages fetched with apt-get download (the kernel image, whose modules
# include rdma_rxe; busybox-static; rdma-core's runtime; iproute2 for `ip` and `rdma`; and
# the libraries those need; Python and python3-pyverbs with its tests), plus the conformance
# program built from this checkout. The guest binds rxe0 to a dummy interface, runs the
# program and the pyverbs suite against it and prints their output between markers on the
# serial console; this script keeps them. Takes a few minutes. The packages come from the
# host's apt sources, which must be Debian bookworm's.
# Needs root for apt-get (it installs qemu-system-x86 and the build's packages if missing).
set -euo pipefail

src=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
out=$src/tests/conformance/rxe.ref
pyverbs_out=$src/tests/pyverbs/rxe.results
# Waits in the guest: TCG runs 10-15 times slower than the host.
guest_wait_ms=${RXE_WAIT_MS:-30000}
guest_quiet_ms=${RXE_QUIET_MS:-3000}
guest_pyverbs_s=${RXE_PYVERBS_S:-1200}
work=$(mktemp -d /tmp/softrdma-rxe.XXXXXX)
trap 'rm -rf "$work"' EXIT
say() { echo "record-rxe: $*" >&2; }

need_packages() {
	local missing=() p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		say "missing packages; run: sudo apt-get install -y ${missing[*]}"
		exit 1
	fi
	say "installing ${missing[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		"${missing[@]}" >/dev/null
}

# 1. Tools, and the program built from this checkout.
[ "$(id -u)" -eq 0 ] && apt-get update -qq
need_packages qemu-system-x86 xz-utils build-essential cmake pkg-config libibverbs-dev \
	librdmacm-dev liburing-dev libcmocka-dev python3-pyverbs
say "building the conformance program"
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$work/build" --target softrdma-conformance -j "$(nproc)" >/dev/null
prog=$work/build/bin/softrdma-conformance

# 2. The packages: the kernel that linux-image-amd64 names today, and the libraries the
# guest's programs link, found by asking the loader which ones are not in the tree yet.
kpkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
[ -n "$kpkg" ] || { say "no kernel package named by linux-image-amd64"; exit 1; }
kver=${kpkg#linux-image-}
debs=$work/debs root=$work/root
mkdir -p "$debs" "$root"
fetch() { # PACKAGE...
	say "apt-get download $*"
	(cd "$debs" && apt-get download -q "$@" >/dev/null 2>&1) ||
		(cd "$debs" && apt-get download "$@")
	local p f
	for p in "$@"; do
		for f in "$debs/${p}"_*.deb; do dpkg-deb -x "$f" "$root"; done
	done
}
fetch "$kpkg" busybox-static libibverbs1 ibverbs-providers libnl-3-200 libnl-route-3-200 \
	iproute2 libc6 python3.11-minimal libpython3.11-minimal libpython3.11-stdlib \
	libpython3.11 python3-pyverbs librdmacm1
pydir=$root/usr/lib/python3/dist-packages/pyverbs
guest_libs() { # the libraries the guest's programs resolve outside the tree, one a line
	LD_LIBRARY_PATH=$root/lib/x86_64-linux-gnu:$root/usr/lib/x86_64-linux-gnu \
		ldd "$prog" "$root"/bin/ip "$root"/usr/bin/rdma \
		"$root"/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so \
		"$root"/usr/bin/python3.11 "$pydir"/*.so "$pydir"/providers/*/*.so \
		"$root"/usr/lib/python3.11/lib-dynload/*.so 2>/dev/null |
		awk -v r="$root" '$2 == "=>" && index($3, r) != 1 { print $1 }' | sort -u
}
for _ in 1 2 3; do
	mapfile -t libs < <(guest_libs)
	[ ${#libs[@]} -eq 0 ] && break
	pkgs=()
	for l in "${libs[@]}"; do
		p=$(dpkg -S "*/$l" 2>/dev/null | head -1 | cut -d: -f1) ||
			{ say "no installed package owns $l"; exit 1; }
		pkgs+=("$p")
	done
	fetch $(printf '%s\n' "${pkgs[@]}" | sort -u)
done
[ -z "$(guest_libs)" ] || { say "still unresolved: $(guest_libs | tr '\n' ' ')"; exit 1; }

# 3. The kernel, uncompressed: bzImage's payload is an xz stream (Debian's KERNEL_XZ);
# booting the ELF inside it (PVH) skips decompression, which is slow under TCG.
vmlinuz=$root/boot/vmlinuz-$kver
vmlinux=$work/vmlinux
for off in $(LC_ALL=C grep -obUa $'\xfd''7zXZ' "$vmlinuz" | cut -d: -f1); do
	tail -c +$((off + 1)) "$vmlinuz" | xz -dc --single-stream >"$vmlinux" 2>/dev/null || true
	[ "$(head -c 4 "$vmlinux" | od -An -c | tr -d ' ')" = '177ELF' ] && break
done
[ "$(head -c 4 "$vmlinux" | od -An -c | tr -d ' ')" = '177ELF' ] ||
	{ say "no ELF kernel inside $vmlinuz"; exit 1; }

# 4. The initramfs: the packages' files, the modules rxe needs in dependency order
# (modules.dep, made by busybox's depmod), the program and an /init.
busybox=$root/bin/busybox
mods=$root/lib/modules/$kver
"$busybox" depmod -b "$root" "$kver"
order=()
add_module() { # PATH relative to $mods, after its dependencies
	local m=$1 d
	for d in $(awk -v m="$m:" '$1 == m { $1 = ""; print }' "$mods/modules.dep"); do
		add_module "$d"
	done
	[[ " ${order[*]} " == *" $m "* ]] || order+=("$m")
}
for name in crc32_generic dummy ib_core ib_uverbs rdma_rxe rdma_ucm; do
	path=$(awk -F: -v n="/$name.ko" 'index($1, n) { print $1; exit }' "$mods/modules.dep")
	[ -n "$path" ] || { say "module $name not in $kpkg"; exit 1; }
	add_module "$path"
done
initrd=$work/initrd
mkdir -p "$initrd/lib/modules" "$initrd"/{proc,sys,dev,tmp}
cp -a "$root"/. "$initrd"/
rm -rf "$initrd/boot" "$initrd/usr/share" "$initrd/lib/modules"
# The pyverbs suite as Debian ships it (partly gzipped), and the runner that prints one
# line per test.
cp -r "$root/usr/share/doc/rdma-core/tests" "$initrd/pyverbs-tests"
gunzip -f "$initrd"/pyverbs-tests/*.gz
cp "$src/tests/pyverbs/run_suite.py" "$initrd/run_suite.py"
ln -sf python3.11 "$initrd/usr/bin/python3"
mkdir -p "$initrd/modules"
for m in "${order[@]}"; do cp "$mods/$m" "$initrd/modules/"; done
printf '%s\n' "${order[@]##*/}" >"$initrd/modules/order"
cp "$prog" "$initrd/softrdma-conformance"
cat >"$initrd/init" <<EOF
#!/bin/busybox sh
/bin/busybox mkdir -p /sbin /usr/sbin
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
echo 1 >/proc/sys/kernel/printk
for m in \$(cat /modules/order); do insmod /modules/\$m || echo "insmod \$m failed"; done
/bin/ip link add dummy0 type dummy
/bin/ip addr add 192.0.2.1/24 dev dummy0
/bin/ip link set dummy0 up
/usr/bin/rdma link add rxe0 type rxe netdev dummy0
# The GID of the interface's IPv4 address, RoCE v2: the kind softrdma's GID 0 is.
g=
for i in 0 1 2 3 4 5 6 7; do
	gid=\$(cat /sys/class/infiniband/rxe0/ports/1/gids/\$i 2>/dev/null)
	type=\$(cat /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/\$i 2>/dev/null)
	case "\$gid/\$type" in 0000:0000:0000:0000:0000:ffff:*"/RoCE v2") g=\$i; break ;; esac
done
echo "guest: gid index \$g, kernel \$(uname -r)"
/softrdma-conformance -d rxe0 -g "\${g:-1}" -w $guest_wait_ms -q $guest_quiet_ms >/tmp/out 2>/tmp/err
echo "===CONFORMANCE BEGIN==="
cat /tmp/out
echo "===CONFORMANCE END==="
echo "stderr:"; cat /tmp/err
timeout $guest_pyverbs_s /usr/bin/python3 /run_suite.py /pyverbs-tests --dev rxe0 --gid "\${g:-1}" \
	>/tmp/pyverbs 2>/tmp/pyverbs.err
echo "===PYVERBS BEGIN==="
cat /tmp/pyverbs
echo "===PYVERBS END==="
echo "===PYVERBS STDERR BEGIN==="
cat /tmp/pyverbs.err
echo "===PYVERBS STDERR END==="
poweroff -f
EOF
chmod +x "$initrd/init"
(cd "$initrd" && find . | "$busybox" cpio -o -H newc 2>/dev/null) >"$work/initrd.cpio"
say "initramfs $(du -m "$work/initrd.cpio" | cut -f1) MiB, modules: ${order[*]##*/}"

# 5. Boot, and keep what the guest printed between the markers.
say "booting $kpkg under qemu (TCG); this takes minutes"
start=$(date +%s)
timeout 3600 qemu-system-x86_64 -accel tcg -m 1024 -nographic -no-reboot \
	-kernel "$vmlinux" -initrd "$work/initrd.cpio" \
	-append "console=ttyS0 quiet loglevel=1 panic=-1 rdinit=/init" \
	</dev/null >"$work/console.log" 2>&1 || true
tr -d '\r' <"$work/console.log" >"$work/console.txt"
if ! grep -q '^===CONFORMANCE END===' "$work/console.txt"; then
	say "the guest did not finish; its console:"
	tail -n 40 "$work/console.txt" >&2
	exit 1
fi
{
	echo "# rxe's answers to softrdma-conformance, recorded by tests/conformance/record-rxe.sh"
	echo "# guest: Debian $kpkg ($(grep -m1 '^guest:' "$work/console.txt" | cut -d' ' -f2-))"
	echo "# rdma-core: $(cd "$debs" && ls libibverbs1_*.deb | sed 's/^libibverbs1_//; s/_amd64.deb//')"
	sed -n '/^===CONFORMANCE BEGIN===$/,/^===CONFORMANCE END===$/p' "$work/console.txt" |
		sed '1d;$d'
} >"$out"
between() { # FROM TO: the console's lines between two marker lines
	sed -n "/^$1\$/,/^$2\$/p" "$work/console.txt" | sed '1d;$d'
}
if grep -q '^===PYVERBS END===' "$work/console.txt"; then
	{
		echo "# rxe's outcome of each pyverbs test (python3-pyverbs $(cd "$debs" &&
			ls python3-pyverbs_*.deb | sed 's/^python3-pyverbs_//; s/_amd64.deb//')),"
		echo "# recorded by tests/conformance/record-rxe.sh on $kpkg"
		between '===PYVERBS BEGIN===' '===PYVERBS END===' | sort
	} >"$pyverbs_out"
	between '===PYVERBS STDERR BEGIN===' '===PYVERBS STDERR END===' >"$work/pyverbs.err"
	say "pyverbs on rxe: $(grep -v '^#' "$pyverbs_out" | cut -d' ' -f2 | sort | uniq -c |
		tr -s ' \n' ' ')"
	say "why each rxe test failed: $pyverbs_out.log"
	cp "$work/pyverbs.err" "$pyverbs_out.log"
else
	say "the pyverbs suite did not finish in the guest"
fi
say "$(grep -vc '^#' "$out") cases recorded in $out; $(($(date +%s) - start)) s in the guest"
