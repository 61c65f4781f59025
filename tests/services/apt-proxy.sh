#!/usr/bin/env bash
# A caching apt proxy for test guests: Debian's apt-cacher-ng, listening on the libvirt bridge
# address only, fetching from the Debian archive this machine reaches. Guests reach nothing beyond
# the bridge (tests/services/start.sh's guard rules), so this is how they install real packages.
#
#   apt-proxy.sh start   start it (safe to rerun: an instance already answering is kept)
#   apt-proxy.sh stop    stop the instance this script started, and nothing else
#   apt-proxy.sh url     print the mirror URL guests use, e.g. http://192.168.122.1:3142/deb.debian.org/debian
#                        (exit status 1, nothing printed, when the proxy is not answering)
#
# `start` also prints the mirror URL as its last line. The Debian security archive is served beside
# it: the same URL with `-security` appended (http://…:3142/deb.debian.org/debian-security).
#
# The cache lives in a persistent directory ($TROG_APT_PROXY_CACHE, default
# /var/cache/trog-tests/apt-cacher-ng), so a rerun fetches again only the index files apt
# revalidates, never a package it already has. PID file, logs and the control socket live under
# $TROG_SERVICES_STATE/apt-proxy (default /run/trog-tests/apt-proxy).
#
# Environment: TROG_APT_PROXY_ARCHIVE (default deb.debian.org/debian, the archive this machine's own
# apt uses), TROG_APT_PROXY_PORT (default 3142, apt-cacher-ng's own).
set -euo pipefail

state_dir=${TROG_SERVICES_STATE:-/run/trog-tests}/apt-proxy
cache_dir=${TROG_APT_PROXY_CACHE:-/var/cache/trog-tests/apt-cacher-ng}
archive=${TROG_APT_PROXY_ARCHIVE:-deb.debian.org/debian}
port=${TROG_APT_PROXY_PORT:-3142}
libvirt_uri=qemu:///system
virsh_timeout_s=30 # a question to libvirt answers in well under a second; a hung libvirtd must not hang this
# virsh runs without a controlling terminal (setsid): with one, it offers a polkit agent, and on a
# machine without polkit prints "Authorization not available" although root needs no authorization.
pid_file=$state_dir/apt-cacher-ng.pid
# The daemon runs as the package's own unprivileged user when it exists.
service_user=apt-cacher-ng
start_wait_s=15

say() { printf '[apt-proxy] %s\n' "$*" >&2; }
die() { printf '[apt-proxy] error: %s\n' "$*" >&2; exit 1; }

# The bridge address of libvirt's default network (where guests reach this machine).
bridge_address() {
  local bridge
  bridge=$(timeout "$virsh_timeout_s" setsid --wait virsh -c "$libvirt_uri" net-info default 2>/dev/null | awk '/^Bridge:/ {print $2}')
  [[ -n $bridge ]] || die "libvirt's default network has no bridge (run tests/services/start.sh first)"
  ip -4 -o addr show dev "$bridge" | awk '{print $4}' | cut -d/ -f1 | head -n1
}

mirror_url() { printf 'http://%s:%s/%s\n' "$1" "$port" "$archive"; }

# Does the proxy answer, serving the archive's release file?
answers() { # address
  curl -fsS --max-time 10 -o /dev/null "$(mirror_url "$1")/dists/bookworm/InRelease"
}

pid_alive() {
  local pid
  [[ -s $pid_file ]] || return 1
  pid=$(<"$pid_file")
  [[ -r /proc/$pid/comm && $(</proc/"$pid"/comm) == apt-cacher-ng ]]
}

start() {
  [[ $(id -u) -eq 0 ]] || die "must run as root"
  command -v apt-cacher-ng >/dev/null || die "apt-cacher-ng is missing (bash .ci/install-packages)"
  local address
  address=$(bridge_address)
  [[ -n $address ]] || die "the default network's bridge has no IPv4 address"
  if pid_alive; then
    say "already running (pid $(<"$pid_file")) on $address:$port"
    mirror_url "$address"
    return
  fi
  mkdir -p "$state_dir/log" "$cache_dir"
  local as_user=()
  if getent passwd "$service_user" >/dev/null; then
    chown -R "$service_user:" "$state_dir" "$cache_dir"
    as_user=(setpriv --reuid "$service_user" --regid "$service_user" --init-groups)
  fi
  # Debian's configuration directory supplies the remapping and backend files; everything this
  # instance writes is redirected to its own directories, and it listens on the bridge only.
  # In a session of its own: it outlives the shell (and any job control) that started it.
  setsid "${as_user[@]}" apt-cacher-ng -c /etc/apt-cacher-ng \
    ForeGround=0 BindAddress="$address" Port="$port" \
    CacheDir="$cache_dir" LogDir="$state_dir/log" PidFile="$pid_file" \
    SocketPath="$state_dir/socket" ReportPage=acng-report.html </dev/null
  local deadline=$((SECONDS + start_wait_s))
  until pid_alive && answers "$address"; do
    ((SECONDS < deadline)) || die "apt-cacher-ng did not serve $(mirror_url "$address") within ${start_wait_s} s (log: $state_dir/log)"
    sleep 0.3
  done
  touch "$state_dir/started"
  say "started apt-cacher-ng (pid $(<"$pid_file")) on $address:$port, cache $cache_dir"
  mirror_url "$address"
}

stop() {
  [[ -e $state_dir/started ]] || { say "not started by this script; nothing to stop"; return; }
  if pid_alive; then
    local pid
    pid=$(<"$pid_file")
    kill -TERM "$pid"
    for _ in $(seq 100); do [[ -d /proc/$pid ]] || break; sleep 0.1; done
    [[ ! -d /proc/$pid ]] || die "apt-cacher-ng (pid $pid) still running after 10 s"
    say "stopped apt-cacher-ng (pid $pid)"
  fi
  rm -f "$state_dir/started" "$pid_file"
}

url() {
  local address
  address=$(bridge_address)
  pid_alive && answers "$address" || exit 1
  mirror_url "$address"
}

case ${1:-} in
  start) start ;;
  stop) stop ;;
  url) url ;;
  *) die "usage: $0 start|stop|url" ;;
esac
