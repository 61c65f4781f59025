#!/usr/bin/env bash
# Fleet observation benchmark (not a test): several hypervisors reached over SSH links with added
# latency, observed at once by `trog fleet`, against the sum of observing each alone.
#   bench/remote-observe.sh [HYPERVISORS] [DELAY_MS]      (defaults: 4 hypervisors, 40 ms)
# The hypervisors are aliases (hv1…hvN) of the namespace host of tests/services/remote-host.sh,
# each its own ssh connection and libvirt session. The kernel here has no sch_netem, so the
# latency is added by the ssh ProxyCommand, a relay that holds every chunk DELAY_MS in each
# direction (and the connection DELAY_MS before it opens): every round trip costs 2×DELAY_MS.
# Prints one line per measurement and a summary line:
#   bench remote-observe: hypervisors=N delay_ms=D concurrent_s=… sum_of_single_s=… speedup=…
# Needs root, tests/services/start.sh and remote-host.sh. TROG_BIN names the binary (default:
# target/debug/trog of this checkout). Runs each measurement REPEATS times (default 3), takes medians.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
count=${1:-4}
delay_ms=${2:-40}
repeats=${REPEATS:-3}
trog=${TROG_BIN:-$root/target/debug/trog}
[[ -x $trog ]] || { echo "bench: $trog is not built (cargo build)" >&2; exit 1; }

eval "$("$root/tests/services/remote-host.sh")"
work=$(mktemp -d /tmp/trog-bench-remote.XXXXXX)
trap 'rm -rf "$work"' EXIT

cat >"$work/lag.py" <<'PY'
import socket, sys, threading, time
host, port, delay = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]) / 1000
time.sleep(delay)
sock = socket.create_connection((host, port))
def pump(read, write):
    while True:
        chunk = read(65536)
        if not chunk:
            break
        time.sleep(delay)
        write(chunk)
    try: sock.shutdown(socket.SHUT_WR)
    except OSError: pass
up = threading.Thread(target=pump, args=(sys.stdin.buffer.raw.read, sock.sendall), daemon=True)
up.start()
out = sys.stdout.buffer.raw
def write_all(data):
    while data:
        data = data[out.write(data):]
pump(sock.recv, write_all)
PY

{
  for i in $(seq "$count"); do
    cat <<CFG
Host hv$i
  HostName $ADDRESS
  HostKeyAlias $ADDRESS
  User $USER_NOPASSWD
  IdentityFile $KEYFILE
  IdentitiesOnly yes
  BatchMode yes
  ProxyCommand python3 $work/lag.py %h %p $delay_ms
CFG
  done
} >"$work/ssh_config"
cat >"$work/ssh" <<SH
#!/bin/sh
exec ssh -F $work/ssh_config "\$@"
SH
chmod +x "$work/ssh"

block() { # index
  printf '[hv%s]\nlibvirt_uri = qemu+ssh://%s@hv%s/system?command=%s\npool_name = bench-absent\n\n' \
    "$1" "$USER_NOPASSWD" "$1" "$work/ssh"
}
mkdir -p "$work/fleet"
for i in $(seq "$count"); do block "$i"; done >"$work/fleet/hypervisors.conf"
for i in $(seq "$count"); do mkdir -p "$work/hv$i"; block "$i" >"$work/hv$i/hypervisors.conf"; done

# Seconds one `trog fleet` takes on the installation in $1; fails if not every hypervisor answered.
observe() {
  local started ended output
  started=$(date +%s.%N)
  output=$(TROG_PROVISIONER_CONFIG=$1 "$trog" fleet --json)
  ended=$(date +%s.%N)
  if grep -q '"unreachable"\|"error"' <<<"$output"; then
    echo "bench: a hypervisor did not answer: $output" >&2; exit 1
  fi
  echo "$ended - $started" | bc
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

concurrent=$(for _ in $(seq "$repeats"); do observe "$work/fleet"; done | median)
echo "concurrent (all $count at once): ${concurrent}s (median of $repeats)"
sum=0
for i in $(seq "$count"); do
  single=$(for _ in $(seq "$repeats"); do observe "$work/hv$i"; done | median)
  echo "hv$i alone: ${single}s"
  sum=$(echo "$sum + $single" | bc)
done
speedup=$(echo "scale=2; $sum / $concurrent" | bc)
echo "bench remote-observe: hypervisors=$count delay_ms=$delay_ms concurrent_s=$concurrent sum_of_single_s=$sum speedup=$speedup"
