#!/usr/bin/env bash
# Gives ACCOUNT a range of subordinate user and group ids (/etc/subuid, /etc/subgid) when it has
# none, so that it can build images as root of a user namespace of its own (`trog image build`
# as an ordinary account, docs/IMAGES.md). Run by bin/setup, as root:
#   bash grant_subordinate_ids.sh ACCOUNT [ROOT]
# ROOT (default /) is the system whose files are read and changed (`usermod --prefix`). A range it
# gives starts past every range either file gives anyone, at 100000 at least (above ordinary
# accounts' own ids) and at a multiple of 65536, so it overlaps none. Safe to run again: an
# account that has a range keeps it. Says what it did on standard output.
set -euo pipefail
usage() { echo "usage: grant_subordinate_ids.sh ACCOUNT [ROOT]" >&2; exit 2; }
[[ $# -eq 1 || $# -eq 2 ]] || usage
account=$1 root=${2:-/}
count=65536
first_start=100000

uid=$(awk -F: -v account="$account" '$1 == account { print $3 }' "$root/etc/passwd")
[[ -n $uid ]] || { echo "there is no account $account" >&2; exit 1; }

# Whether FILE gives the account (by name or by uid) a range of at least one id.
has_range() {
  [[ -f $1 ]] && awk -F: -v account="$account" -v uid="$uid" \
    '($1 == account || $1 == uid) && $3 > 0 { found = 1 } END { exit !found }' "$1"
}

options=()
has_range "$root/etc/subuid" || options+=(--add-subuids)
has_range "$root/etc/subgid" || options+=(--add-subgids)
if ((${#options[@]} == 0)); then
  echo "$account has subordinate ids already"
  exit 0
fi

# The end of the last range either file gives, and the first multiple of the range's size past it.
last_end=$(cat "$root/etc/subuid" "$root/etc/subgid" 2>/dev/null |
  awk -F: '$2 ~ /^[0-9]+$/ && $3 ~ /^[0-9]+$/ { end = $2 + $3; if (end > last) last = end } END { print last + 0 }')
start=$first_start
if ((last_end > start)); then
  start=$(((last_end + count - 1) / count * count))
fi
range="$start-$((start + count - 1))"
args=()
for option in "${options[@]}"; do args+=("$option" "$range"); done
prefix=()
[[ $root == / ]] || prefix=(--prefix "$root")
usermod "${prefix[@]}" "${args[@]}" "$account"
echo "gave $account the subordinate ids $range (${options[*]#--add-})"
