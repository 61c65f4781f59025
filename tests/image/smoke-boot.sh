#!/usr/bin/env bash
# Proves the test image boots for real under libvirt and reports how long each stage took:
#   tests/image/smoke-boot.sh [IMAGE.qcow2]     (default: tests/image/ensure-image.sh)
# It makes its own storage pool, uploads the image as a base volume, makes a qcow2 overlay on it
# and a NoCloud seed ISO (label cidata: a throwaway SSH key, DHCP on the one NIC), defines a TCG
# domain (type qemu) on the default network with the seed on virtio-scsi and a unique MAC, starts
# it, finds the address from the DHCP lease, waits for SSH and for cloud-init, checks the guest,
# shuts it down through ACPI, and removes everything it made, also on failure or interruption.
# Needs tests/services/start.sh to have run. Prints `smoke-boot: … key=value` lines with timings.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
image=${1:-}
uri=qemu:///system
network=default
memory_mib=${TROG_SMOKE_MEMORY_MIB:-1024}
# One vCPU: two TCG vCPU threads on a busy two-core host spin on each other's locks for minutes.
vcpus=${TROG_SMOKE_VCPUS:-1}
disk_gib=4
lease_timeout_s=${TROG_SMOKE_LEASE_TIMEOUT_S:-240}
ssh_timeout_s=${TROG_SMOKE_SSH_TIMEOUT_S:-300}
cloud_init_timeout_s=${TROG_SMOKE_CLOUD_INIT_TIMEOUT_S:-300}
shutdown_timeout_s=${TROG_SMOKE_SHUTDOWN_TIMEOUT_S:-120}

# shellcheck source=tests/image/guest-lib.sh
source "$here/guest-lib.sh"
guest_log_tag=smoke-boot
log() { guest_log "$@"; }
die() { guest_die "$@"; }
virsh() { command virsh -q -c "$uri" "$@"; }

for tool in virsh ssh ssh-keygen genisoimage qemu-img; do
  command -v "$tool" >/dev/null || die "$tool is missing (bash .ci/install-packages)"
done
if [[ -z $image ]]; then
  image=$("$here/ensure-image.sh")
fi
[[ -f $image ]] || die "no image at $image"

run_id=$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
name=trog-smoke-$run_id
pool=$name
pool_dir=/var/lib/libvirt/$name
mac=$(random_mac)
work=$(mktemp -d "/tmp/$name.XXXXXX")
serial_log=$work/serial.log
ssh_key=$work/id_ed25519

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  if ((status != 0)) && [[ -s $serial_log ]]; then
    log "last lines of the guest's serial console:"
    tail -n 30 "$serial_log" | sed 's/^/    /' >&2
  fi
  virsh destroy "$name" >/dev/null 2>&1 || true
  virsh undefine "$name" --nvram >/dev/null 2>&1 || virsh undefine "$name" >/dev/null 2>&1 || true
  for volume in root.qcow2 seed.iso base.qcow2; do
    virsh vol-delete "$volume" --pool "$pool" >/dev/null 2>&1 || true
  done
  virsh pool-destroy "$pool" >/dev/null 2>&1 || true
  virsh pool-undefine "$pool" >/dev/null 2>&1 || true
  rm -rf "$pool_dir" "$work"
  if virsh dominfo "$name" >/dev/null 2>&1 || virsh pool-info "$pool" >/dev/null 2>&1; then
    log "warning: could not remove all of $name"
  else
    log "cleaned up $name"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log "guest $name, mac $mac, image $image"
ssh-keygen -q -t ed25519 -N '' -C "$name" -f "$ssh_key"

# --- seed ISO (NoCloud) ---
write_seed_files "$work/seed" "$name" "$mac" "$ssh_key.pub"
genisoimage -quiet -output "$work/seed.iso" -volid cidata -joliet -rock \
  "$work/seed/user-data" "$work/seed/meta-data" "$work/seed/network-config"

# --- storage: a pool of its own, the base uploaded, an overlay, the seed uploaded ---
started_ms=$(now_ms)
virsh pool-define-as "$pool" dir --target "$pool_dir" >/dev/null
virsh pool-build "$pool" >/dev/null
virsh pool-start "$pool" >/dev/null
base_bytes=$(stat -c %s "$image")
virsh vol-create-as "$pool" base.qcow2 "$base_bytes" --format raw >/dev/null
virsh vol-upload base.qcow2 "$image" --pool "$pool"
virsh pool-refresh "$pool" >/dev/null
virsh vol-create-as "$pool" root.qcow2 "${disk_gib}G" --format qcow2 \
  --backing-vol base.qcow2 --backing-vol-format qcow2 >/dev/null
virsh vol-create-as "$pool" seed.iso "$(stat -c %s "$work/seed.iso")" --format raw >/dev/null
virsh vol-upload seed.iso "$work/seed.iso" --pool "$pool"
storage_s=$(seconds_since "$started_ms")
log "storage ready in ${storage_s} s"

# --- domain ---
cat >"$work/domain.xml" <<EOF
<domain type='qemu'>
  <name>$name</name>
  <memory unit='MiB'>$memory_mib</memory>
  <vcpu>$vcpus</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type><boot dev='hd'/></os>
  <features><acpi/><apic/></features>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <disk type='volume' device='disk'>
      <driver name='qemu' type='qcow2'/>
      <source pool='$pool' volume='root.qcow2'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <controller type='scsi' model='virtio-scsi'/>
    <disk type='volume' device='cdrom'>
      <driver name='qemu' type='raw'/>
      <source pool='$pool' volume='seed.iso'/>
      <target dev='sda' bus='scsi'/>
      <readonly/>
    </disk>
    <interface type='network'>
      <source network='$network'/>
      <mac address='$mac'/>
      <model type='virtio'/>
    </interface>
    <serial type='pty'>
      <log file='$serial_log' append='off'/>
      <target port='0'/>
    </serial>
    <console type='pty'><target type='serial' port='0'/></console>
    <channel type='unix'><target type='virtio' name='org.qemu.guest_agent.0'/></channel>
    <rng model='virtio'><backend model='random'>/dev/urandom</backend></rng>
  </devices>
</domain>
EOF
if command -v virt-xml-validate >/dev/null; then
  validation=$(virt-xml-validate "$work/domain.xml" domain 2>&1) || die "domain XML is invalid: $validation"
fi
virsh define "$work/domain.xml" >/dev/null

boot_ms=$(now_ms)
virsh start "$name" >/dev/null
log "started"

# --- address from the DHCP lease (the MAC is unique, so its lease is this guest's) ---
address=$(wait_for_lease "$mac" "$lease_timeout_s")
lease_s=$(seconds_since "$boot_ms")
log "lease $address after ${lease_s} s"
guest() { guest_ssh "$ssh_key" "$address" "$@"; }

wait_for_ssh "$ssh_key" "$address" "$ssh_timeout_s"
ssh_s=$(seconds_since "$boot_ms")
log "SSH answers after ${ssh_s} s"

wait_for_cloud_init "$ssh_key" "$address" "$cloud_init_timeout_s"
cloud_init_s=$(seconds_since "$boot_ms")
log "cloud-init done after ${cloud_init_s} s"
log "guest's view: $(guest systemd-analyze 2>/dev/null | head -n1)"
if [[ ${TROG_SMOKE_DIAG:-0} == 1 ]]; then
  guest 'systemd-analyze blame | head -n 12; systemd-analyze critical-chain' 2>/dev/null | sed 's/^/    /' >&2 || true
  guest 'sudo -n cloud-init analyze show' 2>/dev/null | grep -E 'Finished|Total Time' | sed 's/^/    /' >&2 || true
fi

# --- what the end-to-end tests rely on ---
hostname_seen=$(guest hostname)
[[ $hostname_seen == "$name" ]] || die "hostname is '$hostname_seen', expected $name"
guest sudo -n true || die "passwordless sudo does not work for the default user"
guest 'command -v make && command -v curl && command -v tar && command -v gzip' >/dev/null ||
  die "make, curl, tar or gzip missing in the guest"
root_gib=$(guest "df -BG --output=size / | tail -n1 | tr -dc 0-9")
((root_gib >= disk_gib - 1)) || die "root filesystem is ${root_gib} GiB; growpart/resize did not run"
guest "systemctl is-active qemu-guest-agent" >/dev/null || log "note: qemu-guest-agent not active"
# The guard rules must keep the guest inside the host bridge: an address the host itself can reach
# (the Debian mirror, by number since the guest has no resolver) must be unreachable from the guest.
outside=$(getent ahostsv4 deb.debian.org 2>/dev/null | awk 'NR == 1 {print $1}')
if [[ -n $outside ]]; then
  if guest "curl -s -m 5 -o /dev/null http://$outside/"; then
    die "the guest reached $outside beyond the host bridge: guard rules missing (tests/services/start.sh)"
  fi
  log "guest cannot reach $outside beyond the bridge (guard rules hold)"
fi
log "guest checks passed (hostname, sudo, tools, root grown to ${root_gib} GiB)"

shutdown_ms=$(now_ms)
virsh shutdown "$name" >/dev/null
deadline=$((SECONDS + shutdown_timeout_s))
until [[ $(virsh domstate "$name" 2>/dev/null) == "shut off" ]]; do
  ((SECONDS < deadline)) || die "guest did not power off within ${shutdown_timeout_s} s of ACPI shutdown"
  sleep 1
done
shutdown_s=$(seconds_since "$shutdown_ms")
log "ACPI shutdown took ${shutdown_s} s"

echo "smoke-boot: ok vcpus=$vcpus memory_mib=$memory_mib storage_s=$storage_s lease_s=$lease_s ssh_s=$ssh_s cloud_init_s=$cloud_init_s shutdown_s=$shutdown_s"
