#!/bin/sh
# Does hardware virtualisation actually work here? Run as root (it opens /dev/kvm) with sh.
# Exit 0: a guest ran under KVM with the host's CPU, as a `domain_type = kvm` guest does.
# Exit 1: it did not; stdout says why. Exit 2: this machine cannot be asked (no QEMU).
#
# /dev/kvm existing proves little: a software-paging KVM (nested, some cloud VMs) offers it, and
# libvirt lists kvm as available, yet QEMU aborts with `-cpu host` there, or runs a boot sector
# and then spins or pauses on the first real kernel's paging. So this asks twice, under KVM with
# `-cpu host`, each within a bounded time:
#   1. a 512-byte boot sector that writes to QEMU's isa-debug-exit port at once (QEMU then exits
#      with status 3);
#   2. when this machine has a kernel of its own in /boot, that kernel started directly with no
#      root file system: it must reach its "Kernel panic" (about a second under a working KVM;
#      `panic=-1` reboots, which `-no-reboot` turns into QEMU's exit with status 0).
# trog's preflight runs it on every hypervisor (installed as /usr/libexec/trog/kvm-probe and run
# through sudo, it takes no arguments); bin/setup runs this file.
[ $# -eq 0 ] || { echo 'usage: kvm-probe'; exit 2; }
limit_s=20 # a working KVM runs the sector in milliseconds; QEMU itself starts in about one second
command -v qemu-system-x86_64 >/dev/null || { echo 'qemu-system-x86_64 is not installed'; exit 2; }
[ -c /dev/kvm ] || { echo '/dev/kvm does not exist'; exit 1; }
# Its files go in a directory of its own that only root can enter: a name beside mktemp's (its
# `.err`, say) is one another user could put a link at first, for root to write through.
work=$(mktemp -d) || exit 2
sector=$work/sector
{ printf '\260\001\346\364\364'; head -c 505 /dev/zero; printf '\125\252'; } >"$sector"
timeout "$limit_s" qemu-system-x86_64 -machine pc,accel=kvm -cpu host -m 16 -nodefaults \
  -no-user-config -display none -device isa-debug-exit,iobase=0xf4,iosize=0x04 \
  -drive file="$sector",format=raw,if=ide </dev/null >/dev/null 2>"$work/qemu.err"
status=$?
reason=$(grep -v -e warning -e "^Aborted" "$work/qemu.err" | head -n 1)
rm -rf -- "$work"
case $status in
  3) ;;
  124) echo "a guest under KVM did not finish its first instruction within $limit_s s"; exit 1 ;;
  *) echo "QEMU under KVM with the host's CPU failed (status $status): $reason"; exit 1 ;;
esac

kernel=
for candidate in /boot/vmlinuz-*; do
  [ -f "$candidate" ] && [ -r "$candidate" ] && kernel=$candidate
done
[ -n "$kernel" ] || exit 0
work=$(mktemp -d) || exit 2
timeout "$limit_s" qemu-system-x86_64 -machine pc,accel=kvm -cpu host -m 256 -nodefaults \
  -no-user-config -display none -serial "file:$work/console" -no-reboot -kernel "$kernel" \
  -append 'console=ttyS0 panic=-1' </dev/null >/dev/null 2>"$work/qemu.err"
status=$?
reason=$(grep -v -e warning -e "^Aborted" "$work/qemu.err" | head -n 1)
panicked=false
grep -q 'Kernel panic' "$work/console" 2>/dev/null && panicked=true
rm -rf -- "$work"
if [ "$status" = 0 ] && [ "$panicked" = true ]; then
  exit 0
fi
case $status in
  124) echo "a boot sector ran under KVM, but this machine's kernel ($kernel) started under it did not get as far as its panic without a root file system within $limit_s s" ;;
  0) echo "a boot sector ran under KVM, but this machine's kernel ($kernel) started under it ended before its panic without a root file system" ;;
  *) echo "a boot sector ran under KVM, but QEMU starting this machine's kernel ($kernel) under it failed (status $status): $reason" ;;
esac
exit 1
