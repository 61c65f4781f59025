#!/usr/bin/env bash
# Undoes what tests/services/start.sh recorded that it started or added, and nothing else:
# the apt proxy, guard rules, the default network (stopped / undefined only if start.sh started / defined it),
# libvirtd and virtlogd (only the processes named in start.sh's PID files).
set -euo pipefail

state_dir=${TROG_SERVICES_STATE:-/run/trog-tests}
libvirt_uri=qemu:///system
virsh_timeout_s=30 # a question to libvirt answers in well under a second; a hung libvirtd must not hang this
# virsh runs without a controlling terminal (setsid): with one, it offers a polkit agent, and on a
# machine without polkit prints "Authorization not available" although root needs no authorization.
guard_tag=trog-guard

say() { printf '[services] %s\n' "$*"; }

[[ -d $state_dir ]] || { say "nothing recorded in $state_dir; nothing to stop"; exit 0; }

# The second host of the remote-hypervisor tests (tests/services/remote-host.sh), when it was made.
if [[ -d $state_dir/remote-host ]]; then
  TROG_REMOTE_STATE=$state_dir/remote-host "$(dirname "${BASH_SOURCE[0]}")/remote-host.sh" stop
fi

# The caching apt proxy (its cache directory stays, so the next run downloads nothing again).
if [[ -d $state_dir/apt-proxy ]]; then
  TROG_SERVICES_STATE=$state_dir "$(dirname "${BASH_SOURCE[0]}")/apt-proxy.sh" stop
fi

if [[ -e $state_dir/added-guards ]]; then
  for chain in FORWARD OUTPUT; do
    # Delete by rule number, highest first, every rule carrying our tag.
    iptables -S "$chain" | tail -n +2 | grep -n -- "--comment $guard_tag" | cut -d: -f1 | sort -rn |
      while read -r number; do iptables -D "$chain" "$number"; done
  done
  rm -f "$state_dir/added-guards"
  say "removed guard rules"
fi

if [[ -e $state_dir/started-network ]]; then
  if timeout "$virsh_timeout_s" setsid --wait virsh -c "$libvirt_uri" net-destroy default >/dev/null 2>&1; then say "stopped network default"; fi
  rm -f "$state_dir/started-network"
fi
if [[ -e $state_dir/defined-network ]]; then
  if timeout "$virsh_timeout_s" setsid --wait virsh -c "$libvirt_uri" net-undefine default >/dev/null 2>&1; then say "undefined network default"; fi
  rm -f "$state_dir/defined-network"
fi

stop_daemon() { # name pidfile marker
  local name=$1 pidfile=$2 marker=$3 pid
  [[ -e $marker && -s $pidfile ]] || return 0
  pid=$(<"$pidfile")
  if [[ -r /proc/$pid/comm && $(</proc/"$pid"/comm) == "$name" ]]; then
    kill -TERM "$pid"
    for _ in $(seq 100); do [[ -d /proc/$pid ]] || break; sleep 0.1; done
    if [[ -d /proc/$pid ]]; then
      say "warning: $name (pid $pid) still running after 10 s"
      return 0
    fi
    say "stopped $name (pid $pid)"
  fi
  rm -f "$marker" "$pidfile"
}
stop_daemon libvirtd "$state_dir/libvirtd.pid" "$state_dir/started-libvirtd"
stop_daemon virtlogd "$state_dir/virtlogd.pid" "$state_dir/started-virtlogd"
