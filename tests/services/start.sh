#!/usr/bin/env bash
# Starts what the real-libvirt tests need, and is safe to rerun:
#   - libvirt and its `default` NAT network, the same way bin/setup does (tests/services/libvirt.sh:
#     without systemd, libvirtd by hand with a socket members of group `libvirt` may use);
#   - guard firewall rules so guests reach nothing beyond the host bridge;
#   - a caching apt proxy on the bridge address, so guests install real Debian packages
#     (tests/services/apt-proxy.sh, which also prints the mirror URL guests use).
# Whatever it starts or adds is recorded under $TROG_SERVICES_STATE (default /run/trog-tests) so that
# tests/services/stop.sh undoes exactly that and nothing else.
set -euo pipefail

state_dir=${TROG_SERVICES_STATE:-/run/trog-tests}
libvirt_uri=qemu:///system
virsh_timeout_s=30 # a question to libvirt answers in well under a second; a hung libvirtd must not hang this
# virsh runs without a controlling terminal (setsid): with one, it offers a polkit agent, and on a
# machine without polkit prints "Authorization not available" although root needs no authorization.

say() { printf '[services] %s\n' "$*"; }
die() { printf '[services] error: %s\n' "$*" >&2; exit 1; }

[[ $(id -u) -eq 0 ]] || die "must run as root"
for tool in virsh iptables; do
  command -v "$tool" >/dev/null || die "$tool is missing (bash .ci/install-packages)"
done
mkdir -p "$state_dir"

"$(dirname "${BASH_SOURCE[0]}")/libvirt.sh"

bridge=$(timeout "$virsh_timeout_s" setsid --wait virsh -c "$libvirt_uri" net-info default | awk '/^Bridge:/ {print $2}')
[[ -n $bridge ]] || die "network default has no bridge"

# --- guard rules: guests may talk to the host bridge, nothing beyond ---
# Each rule carries the comment "trog-guard" and must come first in its chain: libvirt inserts its
# own ACCEPT jumps at the top when it (re)starts, so a guard found lower down is moved back up.
guard_tag=trog-guard
guard() { # chain match...
  local chain=$1; shift
  local rule=("$@" -m comment --comment "$guard_tag" -j DROP)
  if iptables -S "$chain" | sed -n 2p | grep -q -- "--comment $guard_tag"; then
    say "guard already first in $chain: $*"
    return
  fi
  while iptables -C "$chain" "${rule[@]}" 2>/dev/null; do iptables -D "$chain" "${rule[@]}"; done
  iptables -I "$chain" 1 "${rule[@]}"
  touch "$state_dir/added-guards"
  say "guard added first in $chain: $* -j DROP"
}
guard FORWARD -i "$bridge" ! -o "$bridge"
guard OUTPUT ! -o "$bridge" -m owner --uid-owner nobody

# --- the caching apt proxy on the bridge (its own start/stop/url interface) ---
apt_mirror=$("$(dirname "${BASH_SOURCE[0]}")/apt-proxy.sh" start)
say "ready: $libvirt_uri, network default on $bridge, apt mirror $apt_mirror"
