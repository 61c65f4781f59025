# Does hardware virtualisation actually work here? Run as root (it opens /dev/kvm) with sh.
# Exit 0: a guest ran under KVM with the host's CPU, as a `domain_type = kvm` guest does.
# Exit 1: it did not; stdout says why. Exit 2: this machine cannot be asked (no QEMU).
#
# /dev/kvm existing proves little: a software-paging KVM (nested, some cloud VMs) offers it, and
# libvirt lists kvm as available, yet QEMU aborts with `-cpu host` there. So this boots a 512-byte
# boot sector that writes to QEMU's isa-debug-exit port at once (QEMU then exits with status 3),
# under KVM with `-cpu host`, and waits a bounded time for it.
# trog's preflight runs this text on every hypervisor; bin/setup runs this file.
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
  3) exit 0 ;;
  124) echo "a guest under KVM did not finish its first instruction within $limit_s s"; exit 1 ;;
  *) echo "QEMU under KVM with the host's CPU failed (status $status): $reason"; exit 1 ;;
esac
