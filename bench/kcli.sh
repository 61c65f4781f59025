#!/usr/bin/env bash
# Boot benchmark with kcli (not a test): seconds until the guest has a DHCP lease, until SSH
# answers and until cloud-init finished, when the test image is booted by `kcli create vm` with
# the same memory, vCPUs and network as bench/boot.sh's virt-install and trog's guests. kcli's own
# defaults otherwise (its machine type, CPU model, seed), but for two things this machine needs:
#   - `virttype=qemu`: there is no KVM here, and kcli asks for it unless told;
#   - its seed ISO on IDE instead of SATA: kcli puts the cloud-init ISO on SATA, whose AHCI driver
#     Debian's cloud kernel does not have, so the guest would never find its seed. The guest is
#     created stopped, its cdrom moved to IDE (the i440fx machine kcli picks has it), then started:
#     both inside the clock.
#   bench/kcli.sh [IMAGE.qcow2]       (default: tests/image/ensure-image.sh)
#   TROG_BENCH_BOOTCHART=FILE  also save where the guest's boot went (bench/bootchart.sh) in FILE,
#                              and its serial console beside it (FILE without .txt, -serial.log)
# Needs tests/services/start.sh to have run, and kcli on PATH (`pip install kcli` into a Python
# that has libvirt's bindings, e.g. `python3 -m venv --system-site-packages` over Debian's
# python3-libvirt). kcli reads its settings from $HOME/.kcli: this script gives it a home of its
# own, so a user's kcli settings are neither used nor touched.
# Prints one line: `bench kcli: command_s=… lease_s=… ssh_s=… cloud_init_s=…`, each counted from
# the moment kcli was started. Removes the guest, its pool and files afterwards, also on failure.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
image=${1:-}
uri=qemu:///system
network=default
memory_mib=${TROG_BENCH_MEMORY_MIB:-1024}
vcpus=${TROG_BENCH_VCPUS:-2}
disk_gib=4
timeout_s=${TROG_BENCH_TIMEOUT_S:-400}

# shellcheck source=tests/image/guest-lib.sh
source "$root/tests/image/guest-lib.sh"
# shellcheck source=bench/peer-lib.sh
source "$root/bench/peer-lib.sh"
guest_log_tag=bench-kcli
command -v kcli >/dev/null || guest_die "kcli is missing (pip install kcli)"
[[ -n $image ]] || image=$("$root/tests/image/ensure-image.sh")
[[ -f $image ]] || guest_die "no image at $image"

name=kcli-bench-$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
work=$(mktemp -d "/var/tmp/$name.XXXXXX")
chmod 755 "$work"
pool_dir=$work/pool
export HOME=$work/home

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  if ((status != 0)) && [[ -s $work/serial.log ]]; then
    guest_log "last lines of the guest's serial console:"
    tail -n 30 "$work/serial.log" | sed 's/^/    /' >&2
  fi
  virsh -q -c "$uri" destroy "$name" >/dev/null 2>&1 || true
  virsh -q -c "$uri" undefine "$name" >/dev/null 2>&1 || true
  virsh -q -c "$uri" pool-destroy "$name" >/dev/null 2>&1 || true
  virsh -q -c "$uri" pool-undefine "$name" >/dev/null 2>&1 || true
  rm -rf "$work"
  guest_log "cleaned up $name"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# kcli's settings, its key (which kcli puts in the seed for the image's default user), and a pool
# of its own holding the image as a volume, as kcli expects images: all before the clock starts,
# as trog's and virt-install's counterparts are.
mkdir -p "$HOME/.kcli" "$HOME/.ssh" "$pool_dir"
ssh-keygen -q -t ed25519 -N '' -C "$name" -f "$HOME/.ssh/id_ed25519"
cat >"$HOME/.kcli/config.yml" <<EOF
default:
  client: local
local:
  type: kvm
  host: 127.0.0.1
  pool: $name
EOF
virsh -q -c "$uri" pool-define-as "$name" dir --target "$pool_dir" >/dev/null
virsh -q -c "$uri" pool-start "$name" >/dev/null
# Under the image's own name: kcli tells the guest's interface name from it (`debian…` on its
# i440fx machine: ens3), as it would for an image it downloaded.
volume=$(basename "$image")
cp "$image" "$pool_dir/$volume"
virsh -q -c "$uri" pool-refresh "$name" >/dev/null

started_ms=$(now_ms)
kcli create vm -i "$volume" -P virttype=qemu -P memory="$memory_mib" -P numcpus="$vcpus" \
  -P disks="[$disk_gib]" -P nets="[$network]" -P start=false "$name" \
  >"$work/kcli.log" 2>&1 </dev/null || { cat "$work/kcli.log" >&2; guest_die "kcli create failed"; }
# The seed's cdrom onto IDE (its SATA address dropped for libvirt to give an IDE one), and the
# serial console into a file for the bootchart, then the first start.
virsh -q -c "$uri" dumpxml --inactive "$name" >"$work/domain.xml"
python3 - "$work/domain.xml" "$work/serial.log" <<'PY'
import sys
import xml.etree.ElementTree as ET
path, serial_log = sys.argv[1:]
tree = ET.parse(path)
devices = tree.getroot().find("devices")
for disk in devices.findall("disk"):
    target = disk.find("target")
    if disk.get("device") == "cdrom" and target is not None and target.get("bus") == "sata":
        target.set("bus", "ide")
        address = disk.find("address")
        if address is not None:
            disk.remove(address)
for serial in devices.findall("serial"):
    log = ET.SubElement(serial, "log")
    log.set("file", serial_log)
tree.write(path)
PY
virsh -q -c "$uri" define "$work/domain.xml" >/dev/null
virsh -q -c "$uri" start "$name" >/dev/null
command_s=$(seconds_since "$started_ms")
guest_log "kcli created and started $name after ${command_s} s"

mac=$(virsh -q -c "$uri" domiflist "$name" | awk '{print $5}' | head -n1)
peer_phases kcli "$HOME/.ssh/id_ed25519" "$mac" "$started_ms" "$command_s" "$work/serial.log"
