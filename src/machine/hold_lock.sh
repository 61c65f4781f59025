# Holds one of trog's locks on this hypervisor for as long as its standard input stays open: the
# run of trog that started it keeps that input open while it needs the lock; when the run ends or
# dies, the input closes, this script ends, and the lock goes with it.
# Arguments: lock directory, lock file name, the holder's host, process id and verb (written into
# the lock file once it is held, so that a run that has to wait can say for whom), and the group
# of trog's logins here (libvirt's: every login that can use libvirt here is in it).
# Prints `busy <record>` while another holds it (at once, then every second) and `held` once held.
# Prints `no-directory` (exit 4) when the directory is missing: it is made as root, by
# make_lock_dir.sh, and this is started again. Prints `unsafe-directory which=lock|parent
# owner=… group=… mode=… type=…` (exit 5) for a directory another user could put a file or a
# link in: nothing is opened there.
set -u
dir=$1 file=$2 host=$3 pid=$4 verb=$5 group=$6
lock=$dir/$file
# The directory is the whole defence: when only root, this login and the group of trog's logins
# can write it, nobody else can put a link where a lock file goes (which would make this login
# truncate or write whatever it points to) or make, hold or rewrite a lock. So it is refused,
# not used, when it is a link, owned by another user, writable by others, or writable by a group
# that is not trog's; and when its parent lets others rename it away (writable without the
# sticky bit).
if [ ! -e "$dir" ] && [ ! -L "$dir" ]; then
	echo no-directory
	exit 4
fi
unsafe() { # which owner group mode type
	printf 'unsafe-directory which=%s owner=%s group=%s mode=%s type=%s\n' "$@"
	exit 5
}
# Without -L, stat describes a link itself, not what it points to.
IFS=: read -r uid gid mode owner group_name kind <<EOF
$(stat -c '%u:%g:%a:%U:%G:%F' -- "$dir")
EOF
if [ "$kind" != directory ] || { [ "$uid" -ne 0 ] && [ "$uid" -ne "$(id -u)" ]; } ||
	[ $((0$mode & 02)) -ne 0 ] ||
	{ [ $((0$mode & 020)) -ne 0 ] && [ "$gid" -ne 0 ] && [ "$group_name" != "$group" ]; }; then
	unsafe lock "$owner" "$group_name" "$mode" "$kind"
fi
IFS=: read -r mode owner group_name kind <<EOF
$(stat -L -c '%a:%U:%G:%F' -- "${dir%/*}/")
EOF
if [ $((0$mode & 02)) -ne 0 ] && [ $((0$mode & 01000)) -eq 0 ]; then
	unsafe parent "$owner" "$group_name" "$mode" "$kind"
fi
# Made by this login when missing, readable and writable by the directory's group (which its
# set-group-ID bit gives the file) and by nobody else. `set -C` creates it exclusively: it
# neither replaces one another run made meanwhile nor follows a link.
if [ ! -e "$lock" ] && [ ! -L "$lock" ]; then
	(umask 0117 && set -C && : >"$lock") 2>/dev/null
fi
if [ -L "$lock" ] || { [ -e "$lock" ] && [ ! -f "$lock" ]; }; then
	echo "the lock file $lock is not a regular file: trog follows no link and opens nothing else there" >&2
	exit 3
fi
# `command`: a failed redirection of `exec` would otherwise end the shell before it can say why.
# The braces keep the shell's own message out, and only it: descriptor 9 stays open after them.
if ! { command exec 9<>"$lock"; } 2>/dev/null; then
	echo "cannot open the lock file $lock (this login must be in the group $group, or own $dir)" >&2
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
# The record is written through the descriptor the lock is held on, never by the file's name.
# A holder that died left its record: the file is emptied first (through /proc, the file open
# on descriptor 9 itself, whatever its name now is). Nothing reads through descriptor 9, so the
# record is written from the start.
since=$(date +%s)
if ! truncate -c -s 0 /proc/self/fd/9 ||
	! printf 'host=%s\npid=%s\nverb=%s\nsince=%s\n' "$host" "$pid" "$verb" "$since" >&9; then
	echo "cannot write who holds the lock into $lock" >&2
	exit 3
fi
echo held
# Until trog closes its end. Not `read`: a line would end it too. cat does not get the lock's
# descriptor, so only this shell holds it.
cat >/dev/null 9<&-
# Let go: the record goes first, so that nobody is named as holding it.
truncate -c -s 0 /proc/self/fd/9
