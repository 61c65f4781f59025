#!/bin/sh
# Reads the logs of a guest that libvirt writes as root on this hypervisor, for trog's messages
# and debug_boot's console. Installed as /usr/libexec/trog/read-log and run through sudo, so it
# reads only what its arguments name in one of these forms, and refuses anything else:
#   read-log from PATH BYTE   PATH from byte BYTE on, or whole when shorter (virtlogd rotated it)
#   read-log after PATH BYTE  PATH from byte BYTE on exactly (a console capture)
#   read-log size PATH        PATH's size in bytes, 0 when there is none yet
#   read-log qemu DOMAIN      the last lines of libvirt's log of DOMAIN's QEMU
set -u
qemu_log_dir=/var/log/libvirt/qemu
qemu_log_lines=15 # a guest's last start and the reason it ended
refuse() {
	echo "read-log: $1" >&2
	exit 2
}
absolute() {
	case $1 in
	/*) ;;
	*) refuse "not an absolute path: $1" ;;
	esac
	case /$1/ in
	*/../*) refuse "a path with ..: $1" ;;
	esac
}
byte() {
	case $1 in
	'' | *[!0-9]*) refuse "not a byte offset: $1" ;;
	esac
}
[ $# -ge 2 ] || refuse "usage: read-log from|after PATH BYTE, size PATH, qemu DOMAIN"
case $1 in
from)
	[ $# -eq 3 ] || refuse "usage: read-log from PATH BYTE"
	absolute "$2"
	byte "$3"
	size=$(wc -c <"$2") || exit 1
	if [ "$size" -lt "$3" ]; then cat -- "$2"; else tail -c "+$(($3 + 1))" -- "$2"; fi
	;;
after)
	[ $# -eq 3 ] || refuse "usage: read-log after PATH BYTE"
	absolute "$2"
	byte "$3"
	tail -c "+$(($3 + 1))" -- "$2"
	;;
size)
	[ $# -eq 2 ] || refuse "usage: read-log size PATH"
	absolute "$2"
	if [ -e "$2" ]; then wc -c <"$2"; else echo 0; fi
	;;
qemu)
	[ $# -eq 2 ] || refuse "usage: read-log qemu DOMAIN"
	case $2 in
	'' | .* | *[!A-Za-z0-9.-]*) refuse "not a domain name: $2" ;;
	esac
	tail -n "$qemu_log_lines" -- "$qemu_log_dir/$2.log"
	;;
*) refuse "unknown form $1" ;;
esac
