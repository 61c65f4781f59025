# Holds one of trog's locks on this hypervisor for as long as its standard input stays open: the
# run of trog that started it keeps that input open while it needs the lock; when the run ends or
# dies, the input closes, this script ends, and the lock goes with it.
# Arguments: lock directory, lock file name, then the holder's host, process id and verb, written
# into the lock file once it is held, so that a run that has to wait can say for whom.
# Prints `busy <record>` while another holds it (at once, then every second) and `held` once held.
set -u
dir=$1 file=$2 host=$3 pid=$4 verb=$5
lock=$dir/$file
# World-writable with the sticky bit, as /run/lock is: every login trog uses here locks in it.
# (/run/lock itself may be missing on a system that no init made it on; root makes it.)
if [ ! -d "$dir" ]; then
	mkdir -p -- "${dir%/*}" 2>/dev/null
	if ! mkdir -m 1777 -- "$dir" 2>/dev/null && [ ! -d "$dir" ]; then
		echo "cannot make the lock directory $dir" >&2
		exit 3
	fi
fi
# Made writable by every login, without replacing one that another run made meanwhile (set -C:
# created exclusively). It is never opened with O_CREAT again, which the kernel refuses for
# another login's file in a sticky directory (protected_regular).
if [ ! -e "$lock" ]; then
	(umask 0 && set -C && : >"$lock") 2>/dev/null
fi
if ! exec 9<"$lock"; then
	echo "cannot open the lock file $lock" >&2
	exit 3
fi
flock -n -E 75 9
status=$?
while [ "$status" -eq 75 ]; do
	printf 'busy %s\n' "$(tr '\n' ' ' <"$lock")" || exit 0
	flock -w 1 -E 75 9
	status=$?
done
if [ "$status" -ne 0 ]; then
	echo "flock (util-linux) could not take $lock (status $status)" >&2
	exit 3
fi
since=$(date +%s)
if ! printf 'host=%s\npid=%s\nverb=%s\nsince=%s\n' "$host" "$pid" "$verb" "$since" |
	dd of="$lock" conv=nocreat status=none 2>/dev/null; then
	echo "cannot write who holds the lock into $lock (it must be writable by this login)" >&2
	exit 3
fi
echo held
# Until trog closes its end. Not `read`: a line would end it too. cat does not get the lock's
# descriptor, so only this shell holds it.
cat >/dev/null 9<&-
# Let go: the record goes first, so that nobody is named as holding it.
dd if=/dev/null of="$lock" conv=nocreat status=none 2>/dev/null
