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
#
# The verdict holds until the machine boots again, /dev/kvm is made again (a module loaded or
# reloaded) or QEMU changes: it is kept in /run (root's alone, emptied at boot) under those
# three, and given again without running QEMU. A KVM that does not work costs the full bound of
# a busy CPU each time it is asked, and preflight asks on every run.
[ $# -eq 0 ] || { echo 'usage: kvm-probe'; exit 2; }
limit_s=20 # a working KVM runs the sector in milliseconds; QEMU itself starts in about one second
qemu=$(command -v qemu-system-x86_64) || { echo 'qemu-system-x86_64 is not installed'; exit 2; }
[ -c /dev/kvm ] || { echo '/dev/kvm does not exist'; exit 1; }

# One file for each QEMU on the machine, named after its path.
verdict_file=/run/trog-kvm-probe.$(printf '%s' "$qemu" | cksum | cut -d ' ' -f 1)
asked_of="boot $(cat /proc/sys/kernel/random/boot_id 2>/dev/null), /dev/kvm $(stat -c '%i %Z' /dev/kvm 2>/dev/null), $qemu $(stat -L -c '%i %Y' "$qemu" 2>/dev/null)"
if [ -f "$verdict_file" ] && [ ! -L "$verdict_file" ] && [ "$(head -n 1 "$verdict_file")" = "$asked_of" ]; then
  kept_status=$(sed -n 2p "$verdict_file")
  case $kept_status in
    0 | 1)
      tail -n +3 "$verdict_file"
      exit "$kept_status"
      ;;
  esac
fi
# Keeps the verdict (status $1, what it says in $2) for the next time, when this runs as root:
# written beside the file and renamed over it, so a reader sees a whole verdict or none.
keep() {
  [ "$(id -u)" = 0 ] || return 0
  kept=$(mktemp /run/trog-kvm-probe.XXXXXX) || return 0
  printf '%s\n%s\n%s' "$asked_of" "$1" "$2" >"$kept" && mv -f "$kept" "$verdict_file" || rm -f "$kept"
}
# The verdict, said and kept.
verdict() { # status message
  [ -z "$2" ] || echo "$2"
  keep "$1" "${2:+$2
}"
  exit "$1"
}
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
  124) verdict 1 "a guest under KVM did not finish its first instruction within $limit_s s" ;;
  *) verdict 1 "QEMU under KVM with the host's CPU failed (status $status): $reason" ;;
esac

kernel=
for candidate in /boot/vmlinuz-*; do
  [ -f "$candidate" ] && [ -r "$candidate" ] && kernel=$candidate
done
[ -n "$kernel" ] || verdict 0 ""
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
  verdict 0 ""
fi
case $status in
  124) verdict 1 "a boot sector ran under KVM, but this machine's kernel ($kernel) started under it did not get as far as its panic without a root file system within $limit_s s" ;;
  0) verdict 1 "a boot sector ran under KVM, but this machine's kernel ($kernel) started under it ended before its panic without a root file system" ;;
  *) verdict 1 "a boot sector ran under KVM, but QEMU starting this machine's kernel ($kernel) under it failed (status $status): $reason" ;;
esac
