#!/usr/bin/env bash
# Checks that libvirt.sh (bin/setup's and the tests' way to start libvirt) gives the socket
# configuration the tests need to a libvirtd that was started with libvirt's defaults, as the
# package's init script starts one on installation on a machine without systemd: README's two
# commands must pass in either order on a fresh machine.
#   tests/services/check-package-libvirtd.sh
# As root. Runs itself again in private mount, network and PID namespaces, so the machine's own
# libvirtd, networks and guests are neither seen nor touched; everything it starts ends with it.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
socket=/run/libvirt/libvirt-sock
socket_wait_s=10

say() { printf '[check-package-libvirtd] %s\n' "$*"; }
die() { printf '[check-package-libvirtd] FAILED: %s\n' "$*" >&2; exit 1; }

if [[ ${1:-} != --inside ]]; then
  [[ $(id -u) -eq 0 ]] || die "must run as root"
  exec timeout 120 unshare --mount --net --pid --fork --mount-proc --propagation private "$0" --inside
fi

# libvirt's own state and configuration, empty but for its settings files, on top of the machine's.
# A machine with systemd starts libvirt through it: hidden here, libvirt.sh takes the path of one
# without (where the package's init script starts libvirtd).
for dir in /run/libvirt /var/lib/libvirt /var/cache/libvirt /var/log/libvirt /run/systemd; do
  [[ -d $dir ]] || [[ $dir == /run/systemd ]] || mkdir -p "$dir"
  [[ -d $dir ]] && mount -t tmpfs none "$dir"
done
etc=/var/cache/libvirt/etc
state=/var/cache/libvirt/state
mkdir -p "$etc" "$state"
cp -a /etc/libvirt/*.conf "$etc/"
mount --bind "$etc" /etc/libvirt
mkdir -p /var/lib/libvirt/dnsmasq /var/log/libvirt/qemu
ip link set lo up

virtlogd -d
libvirtd -d # as the init script starts it: libvirt's defaults, no -f
for _ in $(seq $((socket_wait_s * 10))); do [[ -S $socket ]] && break; sleep 0.1; done
[[ -S $socket ]] || die "libvirtd started with its defaults made no $socket within ${socket_wait_s} s"
before=$(pgrep -x libvirtd)
say "libvirtd with libvirt's defaults: pid $before, socket $(stat -c '%G %a' "$socket")"

TROG_SERVICES_STATE=$state "$here/libvirt.sh"

after=$(pgrep -x libvirtd)
[[ $after != "$before" ]] || die "libvirt.sh left the libvirtd started with libvirt's defaults running"
[[ $(stat -c '%G %a' "$socket") == "libvirt 770" ]] ||
  die "the socket is $(stat -c '%G %a' "$socket") after libvirt.sh, not group libvirt, mode 770"
say "libvirt.sh restarted it with the libvirt-group socket (pid $after): ok"
