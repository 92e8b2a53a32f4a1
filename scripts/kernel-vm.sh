#!/usr/bin/env bash
# Sets up Linux 7.2 as a virtual machine for the kernel matrix: Debian
# forky's stock kernel (linux-binary-7.2.12+deb14-amd64 and its modules,
# every EROFS codec, dm-verity, ext4 with fs-verity) and a busybox
# initramfs that loads the modules, mounts this machine's / read-only over
# 9p and runs one command in a chroot of it. The testkit boots it with
# qemu (software emulation: KVM here cannot run a stock kernel); see
# crates/testkit/src/vm.rs for the protocol.
#
#   scripts/kernel-vm.sh [DIR]   prints DIR, which then holds vmlinuz and
#                                initramfs.cpio.gz
#                                (default: $FERROFS_VM_DIR or ~/.cache/ferrofs-vm)
#
# Needs root (apt-get: qemu-system-x86, busybox-static, xz-utils, cpio) and
# the forky package lists of `upstream-tools --next`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-${FERROFS_VM_DIR:-$HOME/.cache/ferrofs-vm}}
ver=7.2.12+deb14-amd64
if [[ -f $dir/vmlinuz && -f $dir/initramfs.cpio.gz && -f $dir/version && $(cat "$dir/version") == "$ver 4" ]]; then
  echo "$dir"; exit 0
fi
need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
[[ -x /bin/busybox ]] && /bin/busybox --list | grep -qx insmod || need+=(busybox-static)
command -v xz >/dev/null || need+=(xz-utils)
command -v cpio >/dev/null || need+=(cpio)
if ((${#need[@]})); then
  echo "kernel-vm: installing ${need[*]}" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null ||
    { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null; }
fi
tools=${UPSTREAM_TOOLS:-$here/../../shared/tools/upstream-tools}
[[ -x $tools ]] || tools=$(command -v upstream-tools || true)
[[ -n $tools ]] || { echo "kernel-vm: upstream-tools not found (set UPSTREAM_TOOLS)" >&2; exit 1; }
napt=$(dirname "$("$tools" --next | tail -n 1)")/apt
[[ -f $napt/forky.sources ]] || { echo "kernel-vm: no forky package lists in $napt" >&2; exit 1; }
rm -rf "$dir/debs" "$dir/root" "$dir/initramfs"; mkdir -p "$dir/debs" "$dir/root" "$dir/initramfs"
(cd "$dir/debs" && apt-get -o "Dir::Etc::sourcelist=$napt/forky.sources" -o Dir::Etc::sourceparts=/dev/null \
  -o "Dir::State::Lists=$napt/lists" -o "Dir::Cache=$napt/cache" -o Debug::NoLocking=1 \
  download "linux-binary-$ver" "linux-modules-$ver" >/dev/null 2>&1)
for deb in "$dir"/debs/*.deb; do dpkg-deb -x "$deb" "$dir/root"; done
mods=$dir/root/usr/lib/modules/$ver
[[ -f $mods/vmlinuz ]] || { echo "kernel-vm: cannot download linux-binary-$ver from forky" >&2; exit 1; }
cp "$mods/vmlinuz" "$dir/vmlinuz"

# The modules the matrix needs and what they depend on (from each
# module's own depends= field: no depmod needed), dependencies first.
ir=$dir/initramfs
mkdir -p "$ir/bin" "$ir/mods" "$ir/proc" "$ir/sys" "$ir/dev" "$ir/host"
order=()
declare -A seen=()
path_of() { find "$mods/kernel" \( -name "$1.ko.xz" -o -name "${1//_/-}.ko.xz" -o -name "${1//-/_}.ko.xz" \) | head -n 1; }
add() {
  local m=$1 p d
  [[ -n ${seen[$m]:-} ]] && return 0
  seen[$m]=1
  p=$(path_of "$m")
  [[ -n $p ]] || return 0 # built in
  for d in $(xz -dc "$p" | tr '\0' '\n' | sed -n 's/^depends=//p' | tr , ' '); do add "$d"; done
  xz -dc "$p" >"$ir/mods/$m.ko"
  order+=("$m")
}
for m in virtio_blk netfs 9pnet 9pnet_virtio 9p erofs loop overlay squashfs dm-mod dm-bufio \
  reed_solomon dm-verity ext4; do
  add "$m"
done
printf '%s\n' "${order[@]}" >"$ir/mods/order"
cp /bin/busybox "$ir/bin/busybox"
cat >"$ir/init" <<'INIT'
#!/bin/busybox sh
# ferrofs kernel-matrix VM: loads the modules, mounts the host's / (9p tag
# "host", read-only) on /host and the control directory (tag "ctl") at the
# path given by ferrofs.ctl= inside it, more writable directories (tags
# rw1, rw2, ... at the paths of ferrofs.rw=P1,P2), then runs CTL/cmd.sh in
# a chroot of /host: its stdout, stderr and exit status go to CTL/stdout,
# CTL/stderr, CTL/status, the kernel's log to CTL/dmesg. Then power off.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /mods/order); do insmod "/mods/$m.ko" 2>/dev/null || echo "insmod $m failed" >/dev/kmsg; done
ctl=; rw=
for a in $(cat /proc/cmdline); do
  case $a in ferrofs.ctl=*) ctl=${a#ferrofs.ctl=} ;; ferrofs.rw=*) rw=${a#ferrofs.rw=} ;; esac
done
o=trans=virtio,version=9p2000.L,msize=1048576
mount -t 9p -o "$o,ro,cache=loose" host /host || { echo "cannot mount the host's /"; poweroff -f; }
mount -t proc proc /host/proc
mount -t sysfs sys /host/sys
mount -t devtmpfs dev /host/dev
for t in /run /mnt /var/tmp; do mount -t tmpfs tmpfs "/host$t" 2>/dev/null; done
# /tmp: the host's, writable through an overlay (writes stay in the VM)
mkdir -p /up && mount -t tmpfs tmpfs /up && mkdir -p /up/u /up/w
mount -t overlay overlay -o lowerdir=/host/tmp,upperdir=/up/u,workdir=/up/w /host/tmp 2>/dev/null ||
  mount -t tmpfs tmpfs /host/tmp
# (after the tmpfs mounts, which would hide them; made where a tmpfs is)
mkdir -p "/host$ctl" 2>/dev/null
mount -t 9p -o "$o,cache=none" ctl "/host$ctl"
i=1
for p in $(echo "$rw" | tr , ' '); do
  mkdir -p "/host$p" 2>/dev/null
  mount -t 9p -o "$o,cache=none" "rw$i" "/host$p"
  i=$((i + 1))
done
chroot /host /bin/sh "$ctl/cmd.sh" >"/host$ctl/stdout" 2>"/host$ctl/stderr"
echo $? >"/host$ctl/status"
dmesg >"/host$ctl/dmesg"
sync
poweroff -f
INIT
chmod +x "$ir/init"
(cd "$ir" && find . | cpio -o -H newc --quiet | gzip -1 >"$dir/initramfs.cpio.gz")
rm -rf "$dir/debs" "$dir/root" "$ir"
echo "$ver 4" >"$dir/version"
echo "$dir"
