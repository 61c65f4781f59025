#!/bin/sh
# What QEMU's image tool tells of a guest's disk image, as root (the pool's files are libvirt's):
# its space on this hypervisor and its internal snapshots. Installed as
# /usr/libexec/trog/disk-image-info and run through sudo. Argument: the image's absolute path.
# Shared (-U) because a running guest's QEMU holds the image's lock; nothing is written.
set -u
if [ $# -ne 1 ]; then
	echo "usage: disk-image-info PATH" >&2
	exit 2
fi
case $1 in
/*) ;;
*)
	echo "disk-image-info: not an absolute path: $1" >&2
	exit 2
	;;
esac
if [ ! -f "$1" ]; then
	echo "disk-image-info: no image at $1" >&2
	exit 1
fi
exec qemu-img info --output=json -U "$1"
