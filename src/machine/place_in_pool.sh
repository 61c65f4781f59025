#!/bin/sh
# Fills one file of a storage pool from standard input, as root on the hypervisor, and puts it in
# place only once it is whole: written under a partial name, checked against its digest, synced,
# then given its final name. A run killed midway leaves only the partial file.
# Arguments: pool directory, partial name, final name, checksum program, digest, keep|replace,
# as-sent|inflate.
# Installed as /usr/libexec/trog/place-in-pool and run through sudo: each argument is checked
# for its form before anything is written.
set -eu
refuse() {
	echo "place-in-pool: $1" >&2
	exit 2
}
[ $# -eq 7 ] || refuse "usage: place-in-pool DIR PARTIAL NAME sha256sum|sha512sum DIGEST keep|replace as-sent|inflate"
dir=$1 partial=$2 name=$3 sum=$4 digest=$5 placement=$6 form=$7
case $dir in
/*) ;;
*) refuse "not an absolute directory: $dir" ;;
esac
for file in "$partial" "$name"; do
	case $file in
	'' | . | .. | */* | -*) refuse "not a file name: $file" ;;
	esac
done
case $sum in
sha256sum | sha512sum) ;;
*) refuse "unknown checksum program $sum" ;;
esac
case $digest in
'' | *[!0-9a-f]*) refuse "not a digest: $digest" ;;
esac
case $placement in
keep | replace) ;;
*) refuse "unknown placement $placement" ;;
esac
case $form in
as-sent | inflate) ;;
*) refuse "unknown form $form" ;;
esac
umask 077
cat >"$dir/$partial"
if ! printf '%s  %s\n' "$digest" "$dir/$partial" | "$sum" --check --status; then
	echo "what arrived in $dir/$partial does not match its digest $digest: the transfer was cut short or changed on the way" >&2
	exit 1
fi
if [ "$form" = inflate ]; then
	# A base image: checked as it was sent (compressed, as cloud images are), then kept with
	# every cluster plain, so QEMU does not inflate one on each of the guests' reads. Still
	# under a partial name: a run killed meanwhile leaves only partial files.
	qemu-img convert -f qcow2 -O qcow2 "$dir/$partial" "$dir/$partial.inflated"
	mv -f -T -- "$dir/$partial.inflated" "$dir/$partial"
fi
sync -- "$dir/$partial"
if [ "$placement" = keep ]; then
	# The final name is the digest: a file already under it holds the same bytes and stays.
	if [ ! -e "$dir/$name" ] && ! ln -T -- "$dir/$partial" "$dir/$name" && [ ! -e "$dir/$name" ]; then
		exit 1
	fi
	rm -f -- "$dir/$partial"
else
	mv -f -T -- "$dir/$partial" "$dir/$name"
fi
