#!/usr/bin/env bash
# Builds the small Debian bookworm guest image the end-to-end tests boot, from Debian packages only:
#   tests/image/build-image.sh OUT_DIR
# writes OUT_DIR/debian-bookworm-test.qcow2 and OUT_DIR/debian-bookworm-test.qcow2.sha256.
#
# The guest boots like a cloud image: BIOS, GRUB in the MBR gap, one ext4 partition, cloud-init
# with the NoCloud datasource, systemd-networkd for DHCP, kernel console on ttyS0. Nothing here
# needs a loop device or a mount: the filesystem is filled by `mkfs.ext4 -d` and GRUB's core
# image (with its configuration embedded) is written straight into the raw file.
#
# Needs root, mmdebstrap, e2fsprogs, fdisk (sfdisk), grub-pc-bin, grub2-common, qemu-utils.
# TROG_IMAGE_MIRROR overrides the Debian mirror the packages come from.
set -euo pipefail

usage() { echo "usage: $0 OUT_DIR" >&2; exit 2; }
[[ $# -eq 1 ]] || usage

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out_dir=$1
mirror=${TROG_IMAGE_MIRROR:-http://deb.debian.org/debian}
security_mirror=${TROG_IMAGE_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
image_name=debian-bookworm-test.qcow2
disk_size_mib=2048
partition_start_sector=2048 # 1 MiB: sectors 1..2047 hold GRUB's core image
root_label=trog-root
grub_modules_dir=/usr/lib/grub/i386-pc

log() { printf '[build-image %s] %s\n' "$(date +%T)" "$*" >&2; }

[[ $(id -u) -eq 0 ]] || { echo "build-image: must run as root (mmdebstrap --mode=root)" >&2; exit 1; }
for tool in mmdebstrap mkfs.ext4 sfdisk grub-mkimage qemu-img sha256sum; do
  command -v "$tool" >/dev/null || { echo "build-image: $tool is missing (bash .ci/install-packages)" >&2; exit 1; }
done
[[ -f $grub_modules_dir/boot.img ]] || { echo "build-image: $grub_modules_dir/boot.img missing (grub-pc-bin)" >&2; exit 1; }

mkdir -p "$out_dir"
out_dir=$(cd "$out_dir" && pwd)
work=$(mktemp -d "$out_dir/.build-image.XXXXXX")
cleanup() {
  # mmdebstrap unmounts what it mounted, even when it fails; make sure before deleting the tree.
  if [[ -d $work/rootfs ]] && grep -qs " $work/rootfs/" /proc/mounts; then
    grep " $work/rootfs/" /proc/mounts | awk '{print $2}' | sort -r | xargs -r -n1 umount -l || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

packages=$(grep -v '^[[:space:]]*\(#\|$\)' "$here/packages.txt" | tr '\n' ',' | sed 's/,$//')
rootfs=$work/rootfs

started=$SECONDS
log "bootstrapping bookworm from $mirror"
# Mirrors are given explicitly: without them mmdebstrap would read a sources.list from stdin.
# Documentation, manual pages and translations are left out: nothing in a test guest reads them.
mmdebstrap --mode=root --variant=apt --quiet \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --include="$packages" \
  bookworm "$rootfs" \
  "deb $mirror bookworm main" \
  "deb $mirror bookworm-updates main" \
  "deb $security_mirror bookworm-security main" </dev/null
log "bootstrap done in $((SECONDS - started)) s"

log "configuring the guest"
kernel=$(cd "$rootfs/boot" && ls vmlinuz-* | sort -V | tail -n1)
initrd=initrd.img-${kernel#vmlinuz-}
[[ -f $rootfs/boot/$initrd ]] || { echo "build-image: $initrd missing from the image" >&2; exit 1; }

# cloud-init writes systemd-networkd files; networkd must start for them to take effect.
systemctl --root="$rootfs" enable systemd-networkd.service >/dev/null 2>&1
# Under TCG every boot-time job costs seconds; this one only cleans up after e2scrub snapshots.
systemctl --root="$rootfs" mask e2scrub_reap.service >/dev/null 2>&1
cat >"$rootfs/etc/cloud/cloud.cfg.d/90-trog-test.cfg" <<'EOF'
# Only the seed ISO (NoCloud) counts; no network metadata service is probed.
datasource_list: [ NoCloud, None ]
manage_etc_hosts: true
# The image has no `locales` package; C.UTF-8 is built into glibc and needs no generation.
locale: C.UTF-8
# RSA host key generation takes many seconds under TCG; an ed25519 host key is all clients need.
ssh_genkeytypes: [ ed25519 ]
EOF
# The end-to-end tests' mirror (on the libvirt bridge) is an unsigned archive listing no packages:
# apt must accept it, and finds everything the recipes install already in the image.
cat >"$rootfs/etc/apt/apt.conf.d/99trog-test-mirror" <<'EOF'
Acquire::AllowInsecureRepositories "true";
APT::Get::AllowUnauthenticated "true";
EOF
cat >"$rootfs/etc/fstab" <<EOF
LABEL=$root_label / ext4 defaults,errors=remount-ro 0 1
EOF
echo debian >"$rootfs/etc/hostname"
# Each guest must get its own identity: no host resolver, machine id or SSH host keys baked in.
rm -f "$rootfs/etc/resolv.conf" "$rootfs"/etc/ssh/ssh_host_*_key "$rootfs"/etc/ssh/ssh_host_*_key.pub
: >"$rootfs/etc/machine-id"
rm -f "$rootfs/var/lib/dbus/machine-id"
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/log/*.log \
  "$rootfs"/var/lib/cloud/*

# GRUB's configuration, read at every boot from the guest's filesystem (see the core image below).
mkdir -p "$rootfs/boot/grub"
cat >"$rootfs/boot/grub/grub.cfg" <<EOF
set timeout=0
linux /boot/$kernel root=LABEL=$root_label ro console=tty0 console=ttyS0,115200n8 net.ifnames=1
initrd /boot/$initrd
boot
EOF

log "making the ext4 filesystem"
fs_size_mib=$((disk_size_mib - 1))
mkfs.ext4 -q -F -L "$root_label" -d "$rootfs" "$work/root.ext4" "${fs_size_mib}M" >&2

log "partitioning and installing GRUB (BIOS)"
raw=$work/disk.raw
truncate -s "${disk_size_mib}M" "$raw"
echo "start=$partition_start_sector, type=83, bootable" | sfdisk --quiet --label dos "$raw"
dd if="$work/root.ext4" of="$raw" bs=1M seek=1 conv=notrunc,sparse status=none

# The kernel command line lives in the guest's own /boot/grub/grub.cfg (written above, before
# the filesystem was made), where `trog debug_boot --single` can change it; the configuration
# embedded in GRUB's core image only finds and runs that file.
cat >"$work/grub-embedded.cfg" <<EOF
set root=(hd0,msdos1)
configfile /boot/grub/grub.cfg
EOF
grub-mkimage -O i386-pc -o "$work/core.img" -c "$work/grub-embedded.cfg" \
  -p '(hd0,msdos1)/boot/grub' biosdisk part_msdos ext2 linux boot normal configfile
core_sectors=$(( ($(stat -c %s "$work/core.img") + 511) / 512 ))
((core_sectors < partition_start_sector)) || { echo "build-image: GRUB core image too large" >&2; exit 1; }
# boot.img's code (first 440 bytes) goes into the MBR, keeping the partition table; it loads the
# core image from sector 1, whose first sector knows how many sectors follow.
dd if="$grub_modules_dir/boot.img" of="$raw" bs=440 count=1 conv=notrunc status=none
dd if="$work/core.img" of="$raw" bs=512 seek=1 conv=notrunc status=none

log "converting to compressed qcow2"
qemu-img convert -c -f raw -O qcow2 "$raw" "$work/$image_name"
(cd "$work" && sha256sum "$image_name" >"$image_name.sha256")
mv -f "$work/$image_name" "$out_dir/$image_name"
mv -f "$work/$image_name.sha256" "$out_dir/$image_name.sha256"
log "built $out_dir/$image_name ($(du -m "$out_dir/$image_name" | cut -f1) MiB, kernel $kernel) in $((SECONDS - started)) s"
