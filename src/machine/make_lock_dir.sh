#!/bin/sh
# Makes the directory of trog's locks on this hypervisor, as root: owned by root, of the group of
# trog's logins (libvirt's), mode 2770: those logins lock in it, nobody else can put anything in
# it, and the set-group-ID bit gives each lock file that group.
# Arguments: the directory, the group.
# A directory (or anything) already there is left as it is: hold_lock.sh judges it, and refuses
# one that is not safe. It lives in /run, so a reboot removes it and the first run after makes it.
# Installed as /usr/libexec/trog/make-lock-dir and run through sudo: the arguments are checked
# first.
set -u
if [ $# -ne 2 ]; then
	echo "usage: make-lock-dir DIR GROUP" >&2
	exit 3
fi
dir=$1 group=$2
case $dir in
/*/*) ;;
*)
	echo "make-lock-dir: not an absolute directory below another: $dir" >&2
	exit 3
	;;
esac
case /$dir/ in
*/../*)
	echo "make-lock-dir: a path with ..: $dir" >&2
	exit 3
	;;
esac
case $group in
'' | -* | *[!A-Za-z0-9_.-]*)
	echo "make-lock-dir: not a group name: $group" >&2
	exit 3
	;;
esac
parent=${dir%/*}
# /run/lock is missing on a system that no init made it on; made as mkdir makes it (0755).
if [ ! -d "$parent" ] && ! mkdir -p -- "$parent"; then
	exit 3
fi
# Root acts on the new directory by its name after making it: a parent others may write without
# the sticky bit would let them put a link there in between.
mode=$(stat -L -c '%a' -- "$parent/") || exit 3
if [ $((0$mode & 02)) -ne 0 ] && [ $((0$mode & 01000)) -eq 0 ]; then
	echo "$parent is writable by every user without the sticky bit: trog makes no lock directory in it" >&2
	exit 3
fi
# Private until it has its group, so that it is never open to the wrong one.
if mkdir -m 0700 -- "$dir" 2>/dev/null; then
	if ! chgrp -h -- "$group" "$dir"; then
		rmdir -- "$dir"
		echo "the group $group does not exist here: trog's logins lock in a directory of libvirt's group" >&2
		exit 3
	fi
	chmod 2770 -- "$dir" || exit 3
elif [ ! -e "$dir" ] && [ ! -L "$dir" ]; then
	echo "cannot make the lock directory $dir" >&2
	exit 3
fi
