#!/usr/bin/env bash
# Builds a cloud-init-ready Debian image from a package mirror, run by `trog image build` with bash:
#   bash build_debian.sh OUT_DIR RELEASE MIRRORS SECURITY_MIRRORS PACKAGES [OVERLAY]
# writes OUT_DIR/image.qcow2 and OUT_DIR/packages (every installed package and its version).
# MIRRORS is the mirror the release comes from, or several separated by spaces: the first is asked
# first, and apt turns to the next for any file one fails (a `mirror+file:` list, in this order).
# SECURITY_MIRRORS is the same for the security suite. PACKAGES is a comma-separated list installed
# besides the base system. OVERLAY, when given and not empty, is a directory whose tree is copied
# over the image's root after the settings below (owned by root, modes kept).
#
# The guest boots like Debian's own cloud images: BIOS, GRUB in the MBR gap, one ext4 partition
# (grown to the disk by cloud-init), cloud-init with the NoCloud datasource, systemd-networkd for
# the network cloud-init writes, kernel console on ttyS0. Nothing here needs a loop device or a
# mount: the filesystem is filled by `mkfs.ext4 -d` and GRUB's core image (with its configuration
# embedded) is written straight into the raw file.
#
# Needs root, mmdebstrap, e2fsprogs, fdisk (sfdisk), grub-pc-bin, grub2-common, qemu-utils.
set -euo pipefail

usage() { echo "usage: build_debian.sh OUT_DIR RELEASE MIRRORS SECURITY_MIRRORS PACKAGES [OVERLAY]" >&2; exit 2; }
[[ $# -eq 5 || $# -eq 6 ]] || usage
out_dir=$1 release=$2 packages=$5 overlay=${6:-}
read -r -a mirrors <<<"$3"
read -r -a security_mirrors <<<"$4"
((${#mirrors[@]} > 0 && ${#security_mirrors[@]} > 0)) || usage
# How often apt asks again when a connection fails, backing off 1, 2, 4, 8, 16 s: half a minute
# for a mirror guest or cache that restarts (apt's own three retries wait 7 s), where one file
# lost would lose the whole bootstrap. A mirror that answers an error is not asked again; the
# next one of the list is.
download_retries=5
disk_size_mib=2048 # cloud-init grows the partition to the guest's disk; the image stays small
partition_start_sector=2048 # 1 MiB: sectors 1..2047 hold GRUB's core image
root_label=trog-root
grub_modules_dir=/usr/lib/grub/i386-pc

log() { printf '[image build %s] %s\n' "$(date +%T)" "$*" >&2; }

[[ $(id -u) -eq 0 ]] || { echo "must run as root (mmdebstrap --mode=root)" >&2; exit 1; }
for tool in mmdebstrap mkfs.ext4 sfdisk grub-mkimage qemu-img; do
  command -v "$tool" >/dev/null || { echo "$tool is missing (apt-get install mmdebstrap e2fsprogs fdisk grub-pc-bin grub2-common qemu-utils)" >&2; exit 1; }
done
[[ -f $grub_modules_dir/boot.img ]] || { echo "$grub_modules_dir/boot.img is missing (apt-get install grub-pc-bin)" >&2; exit 1; }

work=$out_dir/work
rootfs=$work/rootfs
mkdir -p "$work"
cleanup() {
  # mmdebstrap unmounts what it mounted, even when it fails; make sure before deleting the tree.
  if [[ -d $rootfs ]] && grep -qs " $rootfs/" /proc/mounts; then
    grep " $rootfs/" /proc/mounts | awk '{print $2}' | sort -r | xargs -r -n1 umount -l || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# Where apt gets a suite: the one mirror itself, or a `mirror+file:` list of several, each line
# with its place (without a priority apt asks a list's mirrors in an order of its own).
source_of() {
  local list=$1
  shift
  if (($# == 1)); then
    printf '%s' "$1"
    return
  fi
  local place=1 mirror
  for mirror in "$@"; do
    printf '%s\tpriority:%s\n' "$mirror" "$place"
    place=$((place + 1))
  done >"$list"
  chmod 0644 "$list" # apt reads it as its own unprivileged user
  printf 'mirror+file:%s' "$list"
}
primary=$(source_of "$work/mirrors.list" "${mirrors[@]}")
security=$(source_of "$work/security-mirrors.list" "${security_mirrors[@]}")
# Read by apt during the bootstrap only: removed from the image below.
retries_conf=etc/apt/apt.conf.d/00trog-image-build

started=$SECONDS
log "bootstrapping $release from ${mirrors[*]}"
# Mirrors are given explicitly: without them mmdebstrap would read a sources.list from stdin.
# Documentation, manual pages and translations are left out: a server guest does not read them.
# The package lists stay in the image (mmdebstrap removes them by default): a guest whose
# sources name the same mirror then finds them current at its first `apt-get update`, and
# fetches only the suites' Release files instead of every index again (ten seconds and more of
# an emulated guest's finish).
mmdebstrap --mode=root --variant=apt --quiet --skip=cleanup/apt/lists \
  --setup-hook="printf 'Acquire::Retries \"%s\";\\n' $download_retries >\"\$1/$retries_conf\"" \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --include="$packages" \
  "$release" "$rootfs" \
  "deb $primary $release main" \
  "deb $primary $release-updates main" \
  "deb $security $release-security main" </dev/null
log "bootstrap done in $((SECONDS - started)) s"
rm -f "$rootfs/$retries_conf"
# The image's own sources name the first mirrors: the lists above are this machine's files.
printf 'deb %s %s main\n' "${mirrors[0]}" "$release" "${mirrors[0]}" "$release-updates" \
  "${security_mirrors[0]}" "$release-security" >"$rootfs/etc/apt/sources.list"

dpkg-query --admindir="$rootfs/var/lib/dpkg" --show --showformat='${Package} ${Version}\n' |
  sort >"$out_dir/packages"

kernel=$(cd "$rootfs/boot" && ls vmlinuz-* | sort -V | tail -n1)
initrd=initrd.img-${kernel#vmlinuz-}
[[ -f $rootfs/boot/$initrd ]] || { echo "$initrd is missing from the image" >&2; exit 1; }

# cloud-init writes systemd-networkd files; networkd must start for them to take effect.
systemctl --root="$rootfs" enable systemd-networkd.service >/dev/null 2>&1
# Only cleans up after e2scrub snapshots, which a guest does not take; it costs boot time.
systemctl --root="$rootfs" mask e2scrub_reap.service >/dev/null 2>&1
cat >"$rootfs/etc/cloud/cloud.cfg.d/90-trog-image.cfg" <<'CFG'
# Written by `trog image build`. Only the seed ISO (NoCloud) counts; no metadata service is probed.
datasource_list: [ NoCloud, None ]
manage_etc_hosts: true
# The image has no `locales` package; C.UTF-8 is built into glibc and needs no generation.
locale: C.UTF-8
CFG
# GRUB is written into the disk below, not installed by a package: unless an --include brought
# grub-pc, there is no package for cloud-init's grub_dpkg to tell its install device to, and
# finding that device costs a second of every first boot under emulation.
if ! grep -q '^grub-pc ' "$out_dir/packages"; then
  printf 'grub_dpkg:\n  enabled: false\n' >>"$rootfs/etc/cloud/cloud.cfg.d/90-trog-image.cfg"
fi
cat >"$rootfs/etc/fstab" <<FSTAB
LABEL=$root_label / ext4 defaults,errors=remount-ro 0 1
FSTAB
echo debian >"$rootfs/etc/hostname"
# Each guest must get its own identity: no host resolver, machine id or SSH host keys baked in.
[[ -L $rootfs/etc/resolv.conf ]] || rm -f "$rootfs/etc/resolv.conf"
rm -f "$rootfs"/etc/ssh/ssh_host_*_key "$rootfs"/etc/ssh/ssh_host_*_key.pub
: >"$rootfs/etc/machine-id"
rm -f "$rootfs/var/lib/dbus/machine-id"
# Lists fetched through a `mirror+file:` list of several mirrors are named after this machine's
# file, which no guest's sources name: they would only be fetched again.
if ((${#mirrors[@]} > 1 || ${#security_mirrors[@]} > 1)); then
  rm -rf "$rootfs"/var/lib/apt/lists/*
fi
# No translated package descriptions, as the distro recipe's Makefile says too (the same file):
# mmdebstrap fetched none, and a guest's first `apt-get update` then finds every list it needs
# already there. apt's source cache (every list, parsed) is made here from those lists and the
# sources above, as the guest's apt makes it: the distro recipe's update keeps it while no list
# changed, and the guest's first finish parses no list again under emulation. (pkgcache.bin,
# that cache with the installed packages added, is made again quickly from it.)
printf 'Acquire::Languages "none";\n' >"$rootfs/etc/apt/apt.conf.d/00trog-languages"
rm -rf "$rootfs"/var/lib/apt/lists/partial/* "$rootfs"/var/lib/apt/lists/lock \
  "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/log/*.log \
  "$rootfs"/var/lib/cloud/*
chroot "$rootfs" apt-cache gencaches >/dev/null
# mmdebstrap installed every package at the version these lists offer, so an upgrade over them
# does nothing. When apt agrees, the state an upgrade rests on is kept where the distro recipe's
# Makefile keeps it after an upgrade, read by the same command (recipes/debian/fragment.mk,
# APT_STATE and APT_UPGRADED): a guest's finish then runs no upgrade until a list, a package or a
# pin has changed (a root disk over a baked image: 3 s of an emulated processor).
apt_state="{ stat -c '%n %s %Y' /var/lib/apt/lists/*_Packages*; md5sum /var/lib/dpkg/status /var/lib/apt/extended_states; cat /etc/apt/preferences /etc/apt/preferences.d/*; } 2>/dev/null | md5sum"
if chroot "$rootfs" apt-get -s -o Debug::NoLocking=1 upgrade 2>/dev/null | grep -q '^0 upgraded, 0 newly installed'; then
  mkdir -p "$rootfs/var/lib/trog/debian"
  chroot "$rootfs" sh -c "$apt_state" >"$rootfs/var/lib/trog/debian/apt-upgraded"
fi
rm -f "$rootfs/var/cache/apt/pkgcache.bin"

# GRUB's configuration, read at every boot from the guest's filesystem (see the core image below).
mkdir -p "$rootfs/boot/grub"
cat >"$rootfs/boot/grub/grub.cfg" <<GRUB
set timeout=0
linux /boot/$kernel root=LABEL=$root_label ro console=tty0 console=ttyS0,115200n8 net.ifnames=1
initrd /boot/$initrd
boot
GRUB

if [[ -n $overlay ]]; then
  log "copying $overlay over the image's root"
  cp -a --no-preserve=ownership "$overlay/." "$rootfs/"
fi

log "partitioning and making the ext4 filesystem"
raw=$work/disk.raw
truncate -s "${disk_size_mib}M" "$raw"
echo "start=$partition_start_sector, type=83, bootable" | sfdisk --quiet --label dos "$raw"
# Made in place, at the partition's offset: a filesystem made apart and copied in would be read
# and written once more whole.
fs_size_mib=$((disk_size_mib - 1))
mkfs.ext4 -q -F -L "$root_label" -E offset=$((partition_start_sector * 512)) -d "$rootfs" \
  "$raw" "${fs_size_mib}M" >&2

log "installing GRUB (BIOS)"

# The kernel command line lives in the guest's own /boot/grub/grub.cfg (written above, before
# the filesystem was made), where `trog debug_boot --single` can change it; the configuration
# embedded in GRUB's core image only finds and runs that file.
cat >"$work/grub-embedded.cfg" <<GRUB
set root=(hd0,msdos1)
configfile /boot/grub/grub.cfg
GRUB
grub-mkimage -O i386-pc -o "$work/core.img" -c "$work/grub-embedded.cfg" \
  -p '(hd0,msdos1)/boot/grub' biosdisk part_msdos ext2 linux boot normal configfile
core_sectors=$(( ($(stat -c %s "$work/core.img") + 511) / 512 ))
((core_sectors < partition_start_sector)) || { echo "GRUB's core image is too large" >&2; exit 1; }
# boot.img's code (first 440 bytes) goes into the MBR, keeping the partition table; it loads the
# core image from sector 1, whose first sector knows how many sectors follow.
dd if="$grub_modules_dir/boot.img" of="$raw" bs=440 count=1 conv=notrunc status=none
dd if="$work/core.img" of="$raw" bs=512 seek=1 conv=notrunc status=none

# zstd rather than qcow2's default zlib: several times faster to write here and to inflate into
# a pool (QEMU 5.1 or later reads it; bullseye has 5.2).
log "converting to compressed qcow2 (zstd)"
qemu-img convert -c -o compression_type=zstd -f raw -O qcow2 "$raw" "$out_dir/image.qcow2"
log "built $release (kernel $kernel) in $((SECONDS - started)) s"
