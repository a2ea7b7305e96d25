# shellcheck shell=bash
# Sourced by the scripts that run programs beside rxe in an emulated guest
# (tests/conformance/record-rxe.sh, bench/guest.sh): Debian bookworm's own kernel booted under
# QEMU (TCG: no KVM needed) with an initramfs made only of Debian packages fetched with
# apt-get download, plus what the caller adds. The guest loads rdma_rxe, binds rxe0 to a
# dummy interface (192.0.2.1/24), runs the caller's /init body and prints its output between
# markers on the serial console, which the caller reads back with guest_between.
#
# The caller sets guest_tag (the prefix of messages) and work (an empty scratch directory),
# then calls, in this order: guest_kernel_package, guest_fetch, guest_fetch_libs,
# guest_vmlinux, guest_initrd, (adds its files under $initrd), guest_pack, guest_boot.
# The packages come from the host's apt sources, which must be Debian bookworm's.

: "${guest_tag:?}" "${work:?}"
say() { echo "$guest_tag: $*" >&2; }

# need_packages PACKAGE...: installs the missing ones (root), or says how and exits.
. "$(dirname "${BASH_SOURCE[0]}")/../../tools/packages.sh"
need_packages() { install_missing "${0##*/}" "$@"; }

# Sets kpkg and kver: the kernel that linux-image-amd64 names today. Also debs (the fetched
# packages) and root (their files, extracted).
guest_kernel_package() {
	kpkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
	[ -n "$kpkg" ] || { say "no kernel package named by linux-image-amd64"; exit 1; }
	kver=${kpkg#linux-image-}
	debs=$work/debs root=$work/root
	mkdir -p "$debs" "$root"
}

guest_fetch() { # PACKAGE...: downloads them and extracts them into $root
	say "apt-get download $*"
	(cd "$debs" && apt-get download -q "$@" >/dev/null 2>&1) ||
		(cd "$debs" && apt-get download "$@")
	local p f
	for p in "$@"; do
		for f in "$debs/${p}"_*.deb; do dpkg-deb -x "$f" "$root"; done
	done
}

guest_unresolved() { # FILE...: the libraries they resolve outside $root, one a line
	LD_LIBRARY_PATH=$root/lib/x86_64-linux-gnu:$root/usr/lib/x86_64-linux-gnu \
		ldd "$@" 2>/dev/null |
		awk -v r="$root" '$2 == "=>" && index($3, r) != 1 { print $1 }' | sort -u
}

# guest_fetch_libs FILE...: fetches the packages that own the libraries the guest's programs
# and libraries link, found by asking the loader which ones are not in the tree yet.
guest_fetch_libs() {
	local libs pkgs l p
	for _ in 1 2 3; do
		mapfile -t libs < <(guest_unresolved "$@")
		[ ${#libs[@]} -eq 0 ] && break
		pkgs=()
		for l in "${libs[@]}"; do
			p=$(dpkg -S "*/$l" 2>/dev/null | head -1 | cut -d: -f1) ||
				{ say "no installed package owns $l"; exit 1; }
			pkgs+=("$p")
		done
		# shellcheck disable=SC2046 # one word a package
		guest_fetch $(printf '%s\n' "${pkgs[@]}" | sort -u)
	done
	[ -z "$(guest_unresolved "$@")" ] ||
		{ say "still unresolved: $(guest_unresolved "$@" | tr '\n' ' ')"; exit 1; }
}

# Writes $work/vmlinux, the kernel uncompressed: bzImage's payload is an xz stream (Debian's
# KERNEL_XZ); booting the ELF inside it (PVH) skips decompression, which is slow under TCG.
guest_vmlinux() {
	local vmlinuz=$root/boot/vmlinuz-$kver off
	vmlinux=$work/vmlinux
	for off in $(LC_ALL=C grep -obUa $'\xfd''7zXZ' "$vmlinuz" | cut -d: -f1); do
		tail -c +$((off + 1)) "$vmlinuz" | xz -dc --single-stream >"$vmlinux" 2>/dev/null || true
		[ "$(head -c 4 "$vmlinux" | od -An -c | tr -d ' ')" = '177ELF' ] && break
	done
	[ "$(head -c 4 "$vmlinux" | od -An -c | tr -d ' ')" = '177ELF' ] ||
		{ say "no ELF kernel inside $vmlinuz"; exit 1; }
}

# guest_initrd MODULE...: sets initrd, the initramfs tree: the packages' files, and the
# modules named with their dependencies, in load order (modules.dep, made by busybox's depmod).
guest_initrd() {
	local mods=$root/lib/modules/$kver name path m
	busybox=$root/bin/busybox
	"$busybox" depmod -b "$root" "$kver"
	order=()
	add_module() { # PATH relative to $mods, after its dependencies
		local m=$1 d
		for d in $(awk -v m="$m:" '$1 == m { $1 = ""; print }' "$mods/modules.dep"); do
			add_module "$d"
		done
		[[ " ${order[*]} " == *" $m "* ]] || order+=("$m")
	}
	for name in "$@"; do
		path=$(awk -F: -v n="/$name.ko" 'index($1, n) { print $1; exit }' "$mods/modules.dep")
		[ -n "$path" ] || { say "module $name not in $kpkg"; exit 1; }
		add_module "$path"
	done
	initrd=$work/initrd
	mkdir -p "$initrd/lib/modules" "$initrd"/{proc,sys,dev,tmp}
	cp -a "$root"/. "$initrd"/
	rm -rf "${initrd:?}/boot" "${initrd:?}/usr/share" "${initrd:?}/lib/modules"
	mkdir -p "$initrd/modules"
	for m in "${order[@]}"; do cp "$mods/$m" "$initrd/modules/"; done
	printf '%s\n' "${order[@]##*/}" >"$initrd/modules/order"
}

# guest_pack: writes $initrd/init (the common start, then the body read from stdin: busybox
# sh, with $g the GID index of rxe0's IPv4 RoCE v2 GID) and packs $work/initrd.cpio.
guest_pack() {
	{
		cat <<'EOF'
#!/bin/busybox sh
/bin/busybox mkdir -p /sbin /usr/sbin
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
echo 1 >/proc/sys/kernel/printk
for m in $(cat /modules/order); do insmod /modules/$m || echo "insmod $m failed"; done
/bin/ip link add dummy0 type dummy
/bin/ip addr add 192.0.2.1/24 dev dummy0
/bin/ip link set dummy0 up
/usr/bin/rdma link add rxe0 type rxe netdev dummy0
# The GID of the interface's IPv4 address, RoCE v2: the kind softrdma's GID 0 is.
g=
for i in 0 1 2 3 4 5 6 7; do
	gid=$(cat /sys/class/infiniband/rxe0/ports/1/gids/$i 2>/dev/null)
	type=$(cat /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/$i 2>/dev/null)
	case "$gid/$type" in 0000:0000:0000:0000:0000:ffff:*"/RoCE v2") g=$i; break ;; esac
done
echo "guest: gid index $g, kernel $(uname -r)"
EOF
		cat
		echo "poweroff -f"
	} >"$initrd/init"
	chmod +x "$initrd/init"
	(cd "$initrd" && find . | "$busybox" cpio -o -H newc 2>/dev/null) >"$work/initrd.cpio"
	say "initramfs $(du -m "$work/initrd.cpio" | cut -f1) MiB, modules: ${order[*]##*/}"
}

# guest_boot SECONDS [QEMU_ARG...]: boots the guest, at most SECONDS, and keeps its console
# in $work/console.txt. guest_append, if set, is added to the kernel's command line.
guest_boot() {
	local limit=$1
	shift
	say "booting $kpkg under qemu (TCG); this takes minutes"
	timeout "$limit" qemu-system-x86_64 -accel tcg -m 1024 -nographic -no-reboot "$@" \
		-kernel "$vmlinux" -initrd "$work/initrd.cpio" \
		-append "console=ttyS0 quiet loglevel=1 panic=-1 rdinit=/init${guest_append:+ $guest_append}" \
		</dev/null >"$work/console.log" 2>&1 || true
	tr -d '\r' <"$work/console.log" >"$work/console.txt"
}

guest_finished() { # MARKER: true if the guest printed that line; otherwise shows its console
	grep -q "^$1\$" "$work/console.txt" && return 0
	say "the guest did not finish; its console:"
	tail -n 40 "$work/console.txt" >&2
	return 1
}

guest_between() { # FROM TO: the console's lines between two marker lines
	sed -n "/^$1\$/,/^$2\$/p" "$work/console.txt" | sed '1d;$d'
}
