#!/usr/bin/env bash
# Where a benchmark guest's boot went, as the guest saw it: systemd's split of the boot (kernel and
# userspace; firmware and loader too under UEFI), the chain of units that held back sshd, the slowest units,
# cloud-init's own account of its stages and modules, and when the guest's journal saw its
# lease, cloud-init's first two stages start (the service, then the program after its imports)
# and end, sshd listening and the first logins (with their sessions and user managers). Used by bench/provision.sh and
# bench/boot.sh (TROG_BENCH_BOOTCHART); not a test.
#   bench/bootchart.sh KEY LOGIN@ADDRESS
set -euo pipefail
key=$1 login=$2
ssh -i "$key" -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
  -o LogLevel=ERROR -o ConnectTimeout=10 "$login" '
  echo "== systemd-analyze"; systemd-analyze 2>&1
  echo "== critical-chain ssh.service"; systemd-analyze critical-chain ssh.service 2>&1
  echo "== blame (15 slowest)"; systemd-analyze blame 2>&1 | head -n 15
  echo "== cloud-init analyze show"; { sudo -n cloud-init analyze show 2>/dev/null || cloud-init analyze show; } 2>&1 | grep -E "^(Starting stage|Finished stage|Total Time)|->" | grep -vE "\+0+\.0[0-4][0-9]*s"
  echo "== network and sshd, seconds since the kernel started"
  sudo -n journalctl -b -o short-monotonic --no-pager 2>/dev/null |
    grep -E "Gained carrier|DHCPv4 address|Server listening on 0|Accepted publickey|session opened for user|New session|Started user@|Starting cloud-init|running .init|Finished cloud-init" | head -n 20
  echo "== kernel command line"; cat /proc/cmdline
  echo "== CPU and clock"; grep -m1 vendor_id /proc/cpuinfo
  echo "flags that cost under emulation: $(grep -m1 ^flags /proc/cpuinfo | tr " " "\n" | grep -xE "la57|svm|vmx|pcid|avx2|avx512f" | tr "\n" " ")"
  echo "clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
  echo "kvm modules loaded: $(lsmod | grep -c "^kvm" || true)"
' </dev/null
