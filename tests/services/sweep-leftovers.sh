#!/usr/bin/env bash
# Removes from this machine's libvirtd what a test run stopped before its own cleanup left: the
# test binaries clean up when they end, but a run killed from outside (a machine stopped mid-run)
# leaves its guests defined and its pools in place, and the next run then finds fewer vCPUs,
# less memory and the same static addresses taken.
#   tests/services/sweep-leftovers.sh
# As root; .ci/run runs it before the tests. What the tests make carries the id of the process
# that made it in its name (`shop-a-4242.test`, `trog-shared-4242`, `trog-leaving-4242-123.test`):
# a domain that is shut off and a pool whose names end so, with no such process running, are a
# dead run's. Anything else is left alone, and what is removed is named.
set -euo pipefail
uri=qemu:///system
virsh_timeout_s=30 # a question to libvirt answers in well under a second
# virsh runs without a controlling terminal (setsid): with one, it offers a polkit agent, and on a
# machine without polkit prints "Authorization not available" although root needs no authorization.
say() { printf '[sweep-leftovers] %s\n' "$*"; }
v() { timeout "$virsh_timeout_s" setsid --wait virsh -q -c "$uri" "$@"; }

# The process id a test's name carries, when the name has the tests' form; nothing otherwise.
pid_in_name() {
  sed -nE 's/^[a-z0-9-]*[a-z]-([0-9]+)(-[0-9]+)?(\.test)?$/\1/p' <<<"$1"
}
dead() { [[ -n $1 && ! -d /proc/$1 ]]; }

swept=0
while read -r domain; do
  [[ -n $domain ]] || continue
  dead "$(pid_in_name "$domain")" || continue
  # Its pinned lease or reserved address goes with it: one MAC's reservation, in its network.
  while read -r _ type source _ mac; do
    [[ $type == network && -n $mac ]] || continue
    v net-update "$source" delete ip-dhcp-host "<host mac='$mac'/>" --live --config >/dev/null 2>&1 &&
      say "removed the DHCP reservation of $mac (of $domain) from the network $source"
  done < <(v domiflist --inactive "$domain")
  v undefine --managed-save --snapshots-metadata --nvram "$domain" >/dev/null 2>&1 ||
    v undefine "$domain" >/dev/null
  say "removed the domain $domain (its test run is gone)"
  swept=$((swept + 1))
done < <(v list --all --state-shutoff --name)

while read -r pool; do
  [[ $pool == trog-* ]] || continue
  dead "$(pid_in_name "$pool")" || continue
  path=$(v pool-dumpxml "$pool" | sed -n 's|.*<path>\(.*\)</path>.*|\1|p' | head -n 1)
  if [[ $(v pool-info "$pool" | awk '/^State:/ {print $2}') == running ]]; then
    while read -r volume _; do
      [[ -n $volume ]] && v vol-delete --pool "$pool" "$volume" >/dev/null
    done < <(v vol-list "$pool")
    v pool-destroy "$pool" >/dev/null
  fi
  v pool-undefine "$pool" >/dev/null
  # Only a directory the pool had to itself, now empty.
  [[ -n $path && -d $path ]] && rmdir "$path" 2>/dev/null || true
  say "removed the pool $pool${path:+ ($path)} (its test run is gone)"
  swept=$((swept + 1))
done < <(v pool-list --all --name)

say "$swept leftover(s) of stopped test runs removed"
