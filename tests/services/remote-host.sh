#!/usr/bin/env bash
# A second host for the remote-hypervisor tests, and safe to rerun: a network namespace with its
# own address, an sshd started by hand inside it (its own configuration and host key), fronting
# this machine's libvirtd (the socket is a file, shared by every network namespace), so
#   qemu+ssh://USER@10.213.0.2/system?keyfile=$TROG_REMOTE_STATE/id_ed25519
# is a hypervisor reached over SSH. Two logins, both in group libvirt, key-only over SSH, each of
# which may run as root trog's root programs and nothing else (the lines that
# `trog root-programs sudoers` prints; the programs installed from TROG_BIN, the trog under test):
#   trognp   without a password (NOPASSWD)
#   trogpw   sudo asks for a password, a random one kept in $TROG_REMOTE_STATE/sudo-password (0600)
# The host key goes into /etc/ssh/ssh_known_hosts (one line, marked), so ssh and libvirt trust it
# as they would a real hypervisor's.
#
# Prints nothing on stdout but `KEY=VALUE` lines (ADDRESS, NAMESPACE, STATE, KEYFILE,
# USER_NOPASSWD, USER_PASSWORD) for a caller to read. Test binaries that run at once may each call
# it: one run at a time sets up (a lock), and what is already as wanted is left untouched. `remote-host.sh stop` undoes all of it.
# Needs libvirtd started by tests/services/start.sh (group-libvirt socket, no polkit).
set -euo pipefail
virsh_timeout_s=30 # a question to libvirt answers in well under a second; a hung libvirtd must not hang this
# virsh runs without a controlling terminal (setsid): with one, it offers a polkit agent, and on a
# machine without polkit prints "Authorization not available" although root needs no authorization.

namespace=trog-remote
host_side=trogr-h
namespace_side=trogr-n
host_address=10.213.0.1
address=10.213.0.2
state=${TROG_REMOTE_STATE:-/run/trog-tests/remote-host}
user_nopasswd=trognp
user_password=trogpw
known_hosts=/etc/ssh/ssh_known_hosts
marker="# trog-remote-host"
sudoers=/etc/sudoers.d/trog-remote-host
lock=/run/lock/trog-remote-host.lock
lock_wait_s=120 # a setup takes seconds; one that never ends must not hang its waiters

say() { printf '[remote-host] %s\n' "$*" >&2; }
die() { printf '[remote-host] error: %s\n' "$*" >&2; exit 1; }

[[ $(id -u) -eq 0 ]] || die "must run as root"

exec 9>"$lock"
flock -w "$lock_wait_s" 9 || die "another remote-host.sh held $lock for ${lock_wait_s}s"

sshd_alive() { [[ -s $state/sshd.pid && -d /proc/$(<"$state/sshd.pid") && $(</proc/"$(<"$state/sshd.pid")"/comm) == sshd ]]; }

if [[ ${1:-} == stop ]]; then
  if sshd_alive; then kill "$(<"$state/sshd.pid")"; say "stopped sshd"; fi
  ip netns del "$namespace" 2>/dev/null && say "removed namespace $namespace" || true
  ip link del "$host_side" 2>/dev/null || true
  [[ -f $known_hosts ]] && sed -i "/$marker\$/d" "$known_hosts"
  rm -f "$sudoers"
  for user in "$user_nopasswd" "$user_password"; do
    id "$user" >/dev/null 2>&1 && userdel -r "$user" 2>/dev/null && say "removed $user" || true
  done
  rm -rf "$state"
  exit 0
fi

trog_bin=${TROG_BIN:-}
[[ -x $trog_bin ]] || die "TROG_BIN must name the trog under test (its root programs are installed here)"
for tool in sshd ssh-keygen sudo ip virt-ssh-helper; do
  command -v "$tool" >/dev/null || die "$tool is missing"
done
getent group libvirt >/dev/null || die "group libvirt is missing (run tests/services/start.sh first)"
mkdir -p "$state" /run/sshd
chmod 0755 "$state"

# --- the namespace and its link ---
if ! ip netns list | grep -qw "$namespace"; then
  ip netns add "$namespace"
  say "created namespace $namespace"
fi
if ! ip link show "$host_side" >/dev/null 2>&1; then
  ip link add "$host_side" type veth peer name "$namespace_side"
  ip link set "$namespace_side" netns "$namespace"
  ip addr add "$host_address/24" dev "$host_side"
  ip link set "$host_side" up
  ip netns exec "$namespace" ip addr add "$address/24" dev "$namespace_side"
  ip netns exec "$namespace" ip link set "$namespace_side" up
  ip netns exec "$namespace" ip link set lo up
  say "linked $host_address (here) to $address ($namespace)"
fi

# --- keys ---
[[ -f $state/host_key ]] || ssh-keygen -q -t ed25519 -N '' -C "$namespace host" -f "$state/host_key"
[[ -f $state/id_ed25519 ]] || ssh-keygen -q -t ed25519 -N '' -C "trog remote tests" -f "$state/id_ed25519"
# Rewritten only when it differs: a test running meanwhile may be reading it.
touch "$known_hosts"
known_line="$address $(cut -d' ' -f1,2 "$state/host_key.pub") $marker"
if ! grep -qxF "$known_line" "$known_hosts"; then
  sed -i "/$marker\$/d" "$known_hosts"
  echo "$known_line" >>"$known_hosts"
fi

# --- the logins ---
for user in "$user_nopasswd" "$user_password"; do
  id "$user" >/dev/null 2>&1 || { useradd -m -s /bin/bash -G libvirt "$user"; say "created $user"; }
  usermod -aG libvirt "$user"
  home=$(getent passwd "$user" | cut -d: -f6)
  install -d -m 0700 -o "$user" -g "$user" "$home/.ssh"
  cmp -s "$state/id_ed25519.pub" "$home/.ssh/authorized_keys" ||
    install -m 0600 -o "$user" -g "$user" "$state/id_ed25519.pub" "$home/.ssh/authorized_keys"
done
# Key-only: the unlocked-but-passwordless account; the other has a password only sudo asks for.
usermod -p '*' "$user_nopasswd"
if [[ ! -s $state/sudo-password ]]; then
  (umask 077; head -c 18 /dev/urandom | base64 | tr -d '/+=' >"$state/sudo-password")
fi
printf '%s:%s\n' "$user_password" "$(<"$state/sudo-password")" | chpasswd
"$trog_bin" root-programs install-script | sh >/dev/null
{
  echo "# Written by tests/services/remote-host.sh"
  "$trog_bin" root-programs sudoers --user "$user_nopasswd"
  "$trog_bin" root-programs sudoers --user "$user_password" | sed 's/NOPASSWD: //'
  echo "Defaults:$user_password lecture=never"
} >"$sudoers.new"
chmod 0440 "$sudoers.new"
visudo -cqf "$sudoers.new" || die "the sudoers file does not check"
mv "$sudoers.new" "$sudoers"

# --- sshd in the namespace ---
cat >"$state/sshd_config.new" <<EOF
# Written by tests/services/remote-host.sh
ListenAddress $address
Port 22
HostKey $state/host_key
PidFile $state/sshd.pid
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin no
UsePAM no
AllowUsers $user_nopasswd $user_password
MaxSessions 64
MaxStartups 64:30:128
Subsystem sftp internal-sftp
EOF
if sshd_alive && cmp -s "$state/sshd_config.new" "$state/sshd_config"; then
  rm "$state/sshd_config.new"
  say "sshd already running (pid $(<"$state/sshd.pid"))"
else
  if sshd_alive; then
    old_pid=$(<"$state/sshd.pid")
    kill "$old_pid"
    for _ in $(seq 50); do [[ -d /proc/$old_pid ]] || break; sleep 0.1; done
  fi
  mv "$state/sshd_config.new" "$state/sshd_config"
  ip netns exec "$namespace" /usr/sbin/sshd -f "$state/sshd_config" -E "$state/sshd.log"
  for _ in $(seq 50); do sshd_alive && break; sleep 0.1; done
  sshd_alive || die "sshd did not start (see $state/sshd.log)"
  say "started sshd in $namespace on $address (pid $(<"$state/sshd.pid"))"
fi

# Proves the whole chain once: ssh as the passwordless login, and libvirt through it.
for _ in $(seq 50); do
  ssh -o BatchMode=yes -o ConnectTimeout=2 -i "$state/id_ed25519" "$user_nopasswd@$address" true 2>/dev/null && break
  sleep 0.1
done
timeout "$virsh_timeout_s" setsid --wait virsh -c "qemu+ssh://$user_nopasswd@$address/system?keyfile=$state/id_ed25519&no_tty=1" version >/dev/null ||
  die "libvirt does not answer through qemu+ssh://$user_nopasswd@$address/system"
say "ready: qemu+ssh://$user_nopasswd@$address/system"

cat <<EOF
ADDRESS=$address
NAMESPACE=$namespace
STATE=$state
KEYFILE=$state/id_ed25519
USER_NOPASSWD=$user_nopasswd
USER_PASSWORD=$user_password
EOF
