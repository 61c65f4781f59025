#!/bin/sh
# Reads or changes one file of a shut-off guest through libguestfs, as root (the disks are
# libvirt's), for debug_boot. Installed as /usr/libexec/trog/guest-disk and run through sudo.
#   guest-disk MODE ACCEL PATH OTHER FORMAT DISK [FORMAT DISK ...]
# MODE: cat (prints `true` and PATH's bytes, or `false`), ls (prints `true` and the names in
# PATH, or `false`), replace (copies PATH to OTHER with owner, mode and times, then replaces PATH
# by standard input), put-back (moves OTHER back over PATH; `false` when there is none).
# ACCEL: kvm, or tcg where the hypervisor's guests run under software emulation (QEMU would
# abort trying KVM). PATH and OTHER are paths in the guest; OTHER is `-` for cat and ls.
# Each disk is opened in its own format (raw or qcow2) and the guest's filesystems are mounted
# as it mounts them.
set -u
refuse() {
	echo "guest-disk: $1" >&2
	exit 2
}
[ $# -ge 6 ] && [ $((($# - 4) % 2)) -eq 0 ] ||
	refuse "usage: guest-disk cat|ls|replace|put-back kvm|tcg PATH OTHER FORMAT DISK [FORMAT DISK ...]"
mode=$1 accel=$2 path=$3 other=$4
shift 4
case $path in
/*) ;;
*) refuse "not an absolute path in the guest: $path" ;;
esac
case $mode in
cat | ls) [ "$other" = - ] || refuse "$mode takes - for OTHER" ;;
replace | put-back)
	case $other in
	/*) ;;
	*) refuse "not an absolute path in the guest: $other" ;;
	esac
	;;
*) refuse "unknown mode $mode" ;;
esac
LIBGUESTFS_BACKEND=direct
export LIBGUESTFS_BACKEND
case $accel in
kvm) ;;
tcg)
	LIBGUESTFS_BACKEND_SETTINGS=force_tcg
	export LIBGUESTFS_BACKEND_SETTINGS
	;;
*) refuse "unknown acceleration $accel" ;;
esac
# Each FORMAT DISK pair is taken off the front and its options put at the end, so that once all
# are read the arguments are guestfish's.
pairs=$(($# / 2))
while [ "$pairs" -gt 0 ]; do
	format=$1 disk=$2
	shift 2
	case $format in
	raw | qcow2) ;;
	*) refuse "unknown disk format $format" ;;
	esac
	case $disk in
	/*) ;;
	*) refuse "not an absolute disk path: $disk" ;;
	esac
	[ -f "$disk" ] || refuse "no disk at $disk"
	set -- "$@" "--format=$format" -a "$disk"
	pairs=$((pairs - 1))
done
case $mode in
cat) exec guestfish --ro "$@" -i is-file "$path" followsymlinks:true : download "$path" - ;;
ls) exec guestfish --ro "$@" -i is-dir "$path" followsymlinks:true : ls "$path" ;;
replace) exec guestfish --rw "$@" -i cp-a "$path" "$other" : upload - "$path" ;;
put-back) exec guestfish --rw "$@" -i is-file "$other" : mv "$other" "$path" ;;
esac
