#!/usr/bin/env bash
# Boot benchmark (not a test): how long the test image takes from the provisioning command to
# "SSH answers" and to "cloud-init finished" when booted by virt-install --import --cloud-init.
# This is the baseline trog's own provisioning is compared with: same image, same shape, same
# network, same waits.
#   bench/boot.sh [IMAGE.qcow2]       (default: tests/image/ensure-image.sh)
#   TROG_BENCH_BOOTCHART=FILE  also save where the guest's boot went (bench/bootchart.sh) in FILE,
#                              and its serial console beside it (FILE without .txt, -serial.log)
# Needs tests/services/start.sh to have run, and virt-install (package virtinst).
# Prints one line: `bench virt-install: command_s=… lease_s=… ssh_s=… cloud_init_s=…`, each counted
# from the moment virt-install was started. Removes the domain and its disk afterwards, also on failure.
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
guest_log_tag=bench
command -v virt-install >/dev/null || guest_die "virt-install is missing (package virtinst)"
[[ -n $image ]] || image=$("$root/tests/image/ensure-image.sh")
[[ -f $image ]] || guest_die "no image at $image"

name=trog-bench-$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
mac=$(random_mac)
disk_dir=/var/lib/libvirt/$name
work=$(mktemp -d "/tmp/$name.XXXXXX")
ssh_key=$work/id_ed25519

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  if ((status != 0)) && [[ -s $work/serial.log ]]; then
    guest_log "last lines of the guest's serial console:"
    tail -n 30 "$work/serial.log" | sed 's/^/    /' >&2
  fi
  virsh -q -c "$uri" destroy "$name" >/dev/null 2>&1 || true
  virsh -q -c "$uri" undefine "$name" >/dev/null 2>&1 || true
  # virt-install made a storage pool of the disk's directory, named after it.
  virsh -q -c "$uri" pool-destroy "$name" >/dev/null 2>&1 || true
  virsh -q -c "$uri" pool-undefine "$name" >/dev/null 2>&1 || true
  rm -rf "$disk_dir" "$work"
  guest_log "cleaned up $name"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ssh-keygen -q -t ed25519 -N '' -C "$name" -f "$ssh_key"
write_seed_files "$work/seed" "$name" "$mac" "$ssh_key.pub"
mkdir -p "$disk_dir"
# Base copy and overlay are made before the clock starts: trog's counterparts (volumes) are timed
# separately. The copy keeps libvirt from relabelling the shared cached image.
cp "$image" "$disk_dir/base.qcow2"
qemu-img create -q -f qcow2 -b "$disk_dir/base.qcow2" -F qcow2 "$disk_dir/root.qcow2" "${disk_gib}G"

started_ms=$(now_ms)
# virt-install attaches its cloud-init ISO as an IDE cdrom on x86; the cloud kernel reads IDE
# (ata_piix) but has no AHCI, so the default i440fx machine type is required here.
virt-install --connect "$uri" --name "$name" --virt-type qemu --machine pc \
  --memory "$memory_mib" --vcpus "$vcpus" --osinfo detect=on,require=off \
  --import --disk "path=$disk_dir/root.qcow2,format=qcow2,bus=virtio" \
  --network "network=$network,mac=$mac,model=virtio" \
  --cloud-init "user-data=$work/seed/user-data,meta-data=$work/seed/meta-data,network-config=$work/seed/network-config" \
  --serial "file,path=$work/serial.log" --graphics none --noautoconsole \
  >"$work/virt-install.log" 2>&1 </dev/null || { cat "$work/virt-install.log" >&2; guest_die "virt-install failed"; }
command_s=$(seconds_since "$started_ms")
guest_log "virt-install returned after ${command_s} s"

peer_phases virt-install "$ssh_key" "$mac" "$started_ms" "$command_s" "$work/serial.log"
