#!/usr/bin/env bash
# Starts libvirt the one way both bin/setup and the test services (start.sh) use, and is safe to
# rerun:
#   - with systemd: enables and starts virtlogd and libvirtd through it (polkit, with Debian's rule
#     for group `libvirt`, decides who may use the socket);
#   - without systemd: virtlogd and libvirtd by hand, libvirtd with a configuration that lets
#     members of group `libvirt` use the read-write socket without polkit (there is no system D-Bus);
#   - the libvirt `default` NAT network (defined from libvirt's own XML if absent, then started).
# Whatever it starts or defines is recorded under $TROG_SERVICES_STATE (default /run/trog-tests) so
# that tests/services/stop.sh undoes exactly that and nothing else.
#   - the directory of trog's locks on this machine, when an older trog left it writable by every
#     user (it refuses such a directory now): removed, and trog's next run makes it again, root's
#     and libvirt's group's alone.
#
# A libvirtd already running without that socket configuration is restarted with it when it is the
# one this script started, when no guest runs on it (the package's init script starts one with
# libvirt's defaults on installation, so on a fresh machine bin/setup and tests/services find it so
# in either order), or when TROG_RESTART_LIBVIRTD=1 or CI=true. One with running guests, started
# by someone else, is left alone with a warning that says how to restart it. Running guests survive
# a libvirtd restart; connected clients must reconnect.
set -euo pipefail

state_dir=${TROG_SERVICES_STATE:-/run/trog-tests}
libvirt_uri=qemu:///system
virsh_timeout_s=30 # a question to libvirt answers in well under a second; a hung libvirtd must not hang this
# virsh runs without a controlling terminal (setsid): with one, it offers a polkit agent, and on a
# machine without polkit prints "Authorization not available" although root needs no authorization.
libvirtd_conf=$state_dir/libvirtd.conf
libvirtd_pid=$state_dir/libvirtd.pid
virtlogd_pid=$state_dir/virtlogd.pid
rw_socket=/run/libvirt/libvirt-sock
socket_wait_s=30

say() { printf '[libvirt] %s\n' "$*"; }
die() { printf '[libvirt] error: %s\n' "$*" >&2; exit 1; }

lock_dir=/run/lock/trog
if [[ -d $lock_dir && ! -L $lock_dir && $(stat -c '%a' "$lock_dir") == 1777 ]]; then
  rm -rf -- "$lock_dir"
  say "removed $lock_dir, which an older trog left writable by every user"
fi

[[ $(id -u) -eq 0 ]] || die "must run as root"
for tool in libvirtd virtlogd virsh; do
  command -v "$tool" >/dev/null || die "$tool is missing (bash .ci/install-packages, or bin/setup)"
done
mkdir -p "$state_dir"

# Is a process with the PID in this file alive and running the named program?
pid_alive() { # pidfile program
  local pid
  [[ -s $1 ]] || return 1
  pid=$(<"$1")
  [[ -r /proc/$pid/comm && $(</proc/"$pid"/comm) == "$2" ]]
}
# PID of an instance of the program started by anyone (for the "already running" case).
running_pid() { pgrep -x "$1" | head -n1 || true; }

getent group libvirt >/dev/null || { groupadd --system libvirt; say "created group libvirt"; }

cat >"$libvirtd_conf" <<'EOF'
# Written by tests/services/libvirt.sh. No polkit without a system D-Bus: the socket's group decides.
unix_sock_group = "libvirt"
unix_sock_ro_perms = "0777"
unix_sock_rw_perms = "0770"
auth_unix_ro = "none"
auth_unix_rw = "none"
EOF

if [[ -d /run/systemd/system ]]; then
  if ! timeout "$virsh_timeout_s" setsid --wait virsh -c "$libvirt_uri" version >/dev/null 2>&1; then
    systemctl enable --now virtlogd libvirtd >/dev/null 2>&1 || die "systemctl could not start libvirtd"
    say "started virtlogd and libvirtd through systemd"
  fi
else
  # --- virtlogd (without it, starting a domain fails) ---
  if [[ -n $(running_pid virtlogd) ]]; then
    say "virtlogd already running (pid $(running_pid virtlogd))"
  else
    virtlogd -d -p "$virtlogd_pid"
    for _ in $(seq 50); do pid_alive "$virtlogd_pid" virtlogd && break; sleep 0.1; done
    pid_alive "$virtlogd_pid" virtlogd || die "virtlogd did not start"
    touch "$state_dir/started-virtlogd"
    say "started virtlogd (pid $(<"$virtlogd_pid"))"
  fi

  # --- libvirtd ---
  socket_configured() { [[ -S $rw_socket && $(stat -c '%G %a' "$rw_socket") == "libvirt 770" ]]; }
  start_libvirtd() {
    libvirtd -d -f "$libvirtd_conf" -p "$libvirtd_pid"
    touch "$state_dir/started-libvirtd"
  }
  restart_libvirtd() { # pid why
    say "restarting libvirtd (pid $1, $2) to apply $libvirtd_conf"
    kill -TERM "$1"
    # A libvirtd that has just started finishes initialising its drivers (probing QEMU's
    # capabilities, seconds under emulation on a busy machine) before it acts on SIGTERM.
    for _ in $(seq 600); do [[ -d /proc/$1 ]] || break; sleep 0.1; done
    [[ ! -d /proc/$1 ]] || die "libvirtd (pid $1) did not stop within 60 s"
    start_libvirtd
    say "started libvirtd with $libvirtd_conf"
  }
  # How many guests run on the daemon (root reaches it whatever its socket's configuration), or
  # `unknown` when it does not answer.
  running_guests() {
    local names
    names=$(timeout "$virsh_timeout_s" setsid --wait virsh -c "$libvirt_uri" list --name 2>/dev/null) || { echo unknown; return; }
    grep -c . <<<"$names" || true
  }
  existing=$(running_pid libvirtd)
  if [[ -z $existing ]]; then
    start_libvirtd
    say "started libvirtd with $libvirtd_conf"
  elif socket_configured; then
    say "libvirtd already running (pid $existing) with the libvirt-group socket"
  elif pid_alive "$libvirtd_pid" libvirtd && [[ $(<"$libvirtd_pid") == "$existing" ]]; then
    restart_libvirtd "$existing" "started here earlier, its socket is not the libvirt group's"
  elif [[ ${TROG_RESTART_LIBVIRTD:-0} == 1 || ${CI:-} == true ]]; then
    restart_libvirtd "$existing" "without the libvirt-group socket; TROG_RESTART_LIBVIRTD=1 or CI=true"
  elif guests=$(running_guests) && [[ $guests == 0 ]]; then
    restart_libvirtd "$existing" "without the libvirt-group socket, no guest running on it"
  else
    say "warning: libvirtd (pid $existing) runs without the libvirt-group socket, guests: $guests,"
    say "         so non-root users (the tests' remote hypervisor) cannot reach it."
    say "         Restart it with the configuration (running guests survive):"
    say "         TROG_RESTART_LIBVIRTD=1 $0"
  fi

fi

deadline=$((SECONDS + socket_wait_s))
until timeout 5 setsid --wait virsh -c "$libvirt_uri" version >/dev/null 2>&1; do
  if ((SECONDS >= deadline)); then
    hung=$(running_pid libvirtd)
    [[ -z $hung ]] || die "libvirtd (pid $hung) runs but did not answer on $libvirt_uri within ${socket_wait_s} s: it is stuck; restart it: kill -9 $hung, then run this again"
    die "libvirtd did not answer on $libvirt_uri within ${socket_wait_s} s"
  fi
  sleep 0.2
done
say "libvirt answers: $(timeout "$virsh_timeout_s" setsid --wait virsh -c "$libvirt_uri" version 2>/dev/null | grep -i 'running hypervisor' | sed 's/^ *//')"

# --- the default NAT network ---
if ! timeout "$virsh_timeout_s" setsid --wait virsh -c "$libvirt_uri" net-info default >/dev/null 2>&1; then
  timeout "$virsh_timeout_s" setsid --wait virsh -c "$libvirt_uri" net-define /usr/share/libvirt/networks/default.xml >/dev/null
  touch "$state_dir/defined-network"
  say "defined network default"
fi
if [[ $(timeout "$virsh_timeout_s" setsid --wait virsh -c "$libvirt_uri" net-info default | awk '/^Active:/ {print $2}') != yes ]]; then
  timeout "$virsh_timeout_s" setsid --wait virsh -c "$libvirt_uri" net-start default >/dev/null
  touch "$state_dir/started-network"
  say "started network default"
else
  say "network default already active"
fi
# The tests give some guests addresses from a range (their address_range: .200 and above). A
# guest the network's DHCP server leased such an address to keeps it while a test started later
# hands it out again, and two guests answer at one address: the DHCP pool ends below the ranges.
dhcp_pool_end=192.168.122.199
network_xml=$(timeout "$virsh_timeout_s" setsid --wait virsh -c "$libvirt_uri" net-dumpxml default)
dhcp_pool=$(grep -o "<range start='[0-9.]*' end='[0-9.]*'" <<<"$network_xml" | head -n 1 || true)
if [[ -n $dhcp_pool && $dhcp_pool != *"end='$dhcp_pool_end'" ]]; then
  dhcp_pool_start=${dhcp_pool#*start=\'}
  dhcp_pool_start=${dhcp_pool_start%%\'*}
  timeout "$virsh_timeout_s" setsid --wait virsh -c "$libvirt_uri" net-update default delete ip-dhcp-range "$dhcp_pool/>" --live --config >/dev/null
  timeout "$virsh_timeout_s" setsid --wait virsh -c "$libvirt_uri" net-update default add ip-dhcp-range "<range start='$dhcp_pool_start' end='$dhcp_pool_end'/>" --live --config >/dev/null
  say "network default's DHCP pool now ends at $dhcp_pool_end, below the tests' address ranges (it was ${dhcp_pool#<range })"
fi
