#!/bin/sh
# Reads the kernel, the initramfs and the kernel command line that a base image's GRUB boots
# first, and keeps them beside the image in its pool, so a guest's first boot can start that
# kernel directly: no firmware reading the disk sector by sector, no GRUB. As root on the
# hypervisor. Arguments: pool directory, the base image's file name. Prints either
#   kernel PATH / initrd PATH / cmdline TEXT   (three lines)
#   network_stage UNIT                          (a fourth, when the image has that unit: below)
# or one line `none REASON` when the image holds nothing this can boot directly. A reason that
# lies in the image (no ext2/3/4 filesystem with a GRUB menu, a menu whose default is not its
# first entry, GRUB variables in the command line) is kept beside it too, so the next run does
# not look again; one that lies in this host (a missing tool) is not.
set -eu
# debugfs and sfdisk live in sbin, which a login's PATH may lack.
PATH=$PATH:/usr/sbin:/sbin
# Installed as /usr/libexec/trog/boot-files and run through sudo: the arguments are checked first.
if [ $# -ne 2 ]; then
	echo "usage: boot-files DIR IMAGE" >&2
	exit 2
fi
dir=$1 base=$2
case $dir in
/*) ;;
*)
	echo "boot-files: not an absolute directory: $dir" >&2
	exit 2
	;;
esac
case $base in
'' | . | .. | */* | -*)
	echo "boot-files: not a file name: $base" >&2
	exit 2
	;;
esac
kept=$dir/$base
report() {
	if [ -e "$kept.no-direct-boot" ]; then
		printf 'none %s\n' "$(cat "$kept.no-direct-boot")"
	else
		printf 'kernel %s\ninitrd %s\ncmdline %s\n' "$kept.kernel" "$kept.initrd" "$(cat "$kept.cmdline")"
		if [ -s "$kept.network-stage" ]; then
			printf 'network_stage %s\n' "$(cat "$kept.network-stage")"
		fi
	fi
	exit 0
}
give_up() {
	printf '%s\n' "$1" >"$kept.no-direct-boot.$$"
	mv -f -T -- "$kept.no-direct-boot.$$" "$kept.no-direct-boot"
	report
}
# The command line is written last, so its presence says the kernel and initramfs are whole.
if [ -e "$kept.cmdline" ] || [ -e "$kept.no-direct-boot" ]; then
	report
fi
for tool in qemu-img debugfs sfdisk; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "none $tool is not installed on the hypervisor"
		exit 0
	fi
done
umask 022
# The raw copy goes to the host's temporary space, not the pool: a run killed meanwhile leaves
# nothing in the pool that libvirt would list as a volume.
work=$(mktemp -d "${TMPDIR:-/var/tmp}/trog-boot-files.XXXXXX")
trap 'rm -rf -- "$work"' EXIT
# debugfs reads a raw filesystem at an offset; the image is qcow2 (sparse: only data is written).
qemu-img convert -f qcow2 -O raw -- "$dir/$base" "$work/disk"
sector=$(sfdisk -d "$work/disk" 2>/dev/null | sed -n 's/^sector-size: *\([0-9]*\)$/\1/p')
starts=$(sfdisk -d "$work/disk" 2>/dev/null | sed -n 's/.* start= *\([0-9]*\),.*/\1/p')
found=
for start in 0 $starts; do
	source="$work/disk?offset=$((start * ${sector:-512}))"
	# /boot/grub on the root filesystem, or /grub on a /boot of its own.
	for menu in /boot/grub/grub.cfg /grub/grub.cfg; do
		debugfs -R "dump -p $menu $work/grub.cfg" "$source" >/dev/null 2>&1 || true
		if [ -s "$work/grub.cfg" ]; then
			found=$source
			break 2
		fi
	done
done
[ -n "$found" ] || give_up "no ext2/3/4 filesystem in it holds /boot/grub/grub.cfg"
default=$(sed -n "s/^[[:space:]]*set default=[\"']*\([^\"' ]*\).*/\1/p" "$work/grub.cfg" | head -n 1)
case $default in
'' | 0) ;;
*) give_up "its GRUB menu starts entry \"$default\", not the first" ;;
esac
linux=$(grep -m 1 -E '^[[:space:]]*linux(16|efi)?[[:space:]]' "$work/grub.cfg" || true)
initrd=$(grep -m 1 -E '^[[:space:]]*initrd(16|efi)?[[:space:]]' "$work/grub.cfg" || true)
if [ -z "$linux" ] || [ -z "$initrd" ]; then
	give_up "its GRUB menu has no linux and initrd line"
fi
case $linux$initrd in
*'$'* | *'"'* | *"'"* | *\\*) give_up "its GRUB menu's linux line uses variables or quoting" ;;
esac
set -f
# shellcheck disable=SC2086 # split into words on purpose, globbing off
set -- $initrd
[ $# -eq 2 ] || give_up "its GRUB menu loads more than one initramfs"
initrd_path=$2
# shellcheck disable=SC2086
set -- $linux
kernel_path=$2
shift 2
cmdline=$*
set +f
debugfs -R "dump -p $kernel_path $work/kernel" "$found" >/dev/null 2>&1 || true
debugfs -R "dump -p $initrd_path $work/initrd" "$found" >/dev/null 2>&1 || true
if [ ! -s "$work/kernel" ] || [ ! -s "$work/initrd" ]; then
	give_up "the kernel $kernel_path or the initramfs $initrd_path its GRUB menu names cannot be read"
fi
# The initramfs is kept as the kernel unpacks it, uncompressed, when this host has the tool: the
# guest's kernel then copies a cpio archive instead of decompressing one, which for the test
# image's 15 MB of gzip took about a second of an emulated processor at every first boot
# (bench/README.md). QEMU hands the larger file over in memory, not through disk reads. An
# initramfs that is not one compressed cpio archive (an early microcode archive in front of it,
# a compression this host cannot undo, output with trailing bytes) stays as the image has it.
magic=$(od -An -tx1 -N4 "$work/initrd" | tr -d ' \n')
case $magic in
1f8b*) inflate="gzip -dc" ;;
28b52ffd) inflate="zstd -dcq" ;;
fd377a58) inflate="xz -dc" ;;
02214c18) inflate="lz4 -dcq" ;;
*) inflate= ;;
esac
if [ -n "$inflate" ] && command -v "${inflate%% *}" >/dev/null 2>&1 &&
	$inflate <"$work/initrd" >"$work/initrd.cpio" 2>/dev/null; then
	case $(head -c 6 "$work/initrd.cpio") in
	070701 | 070702) mv -f -- "$work/initrd.cpio" "$work/initrd" ;;
	esac
fi
# cloud-init's network stage, when the image runs it as a service of its own (cloud-init before
# 24.3: `cloud-init.service` starting `cloud-init init`, and no `cloud-init-main.service` that
# runs every stage in one process and would wait for it). Reported for trog to leave out of the
# first boot; looked for only on the filesystem holding the GRUB menu (through /lib, which a
# merged /usr links): an image with a /boot of its own keeps the stage.
units=/lib/systemd/system
debugfs -R "dump -p $units/cloud-init.service $work/network-stage" "$found" >/dev/null 2>&1 || true
debugfs -R "dump -p $units/cloud-init-main.service $work/one-process" "$found" >/dev/null 2>&1 || true
if grep -qx 'ExecStart=/usr/bin/cloud-init init' "$work/network-stage" 2>/dev/null &&
	[ ! -e "$work/one-process" ]; then
	echo cloud-init.service >"$work/network-stage.unit"
fi
# Into the pool under a partial name, then renamed: a file under its final name is whole.
# Readable by QEMU, whichever user it runs as: what an image boots is no secret.
if [ -s "$work/network-stage.unit" ]; then
	cp -- "$work/network-stage.unit" "$kept.network-stage.part-$$"
	chmod 644 "$kept.network-stage.part-$$"
	mv -f -T -- "$kept.network-stage.part-$$" "$kept.network-stage"
fi
for file in kernel initrd; do
	cp -- "$work/$file" "$kept.$file.part-$$"
	chmod 644 "$kept.$file.part-$$"
	sync -- "$kept.$file.part-$$"
	mv -f -T -- "$kept.$file.part-$$" "$kept.$file"
done
printf '%s\n' "$cmdline" >"$kept.cmdline.part-$$"
mv -f -T -- "$kept.cmdline.part-$$" "$kept.cmdline"
report
