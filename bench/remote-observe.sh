#!/usr/bin/env bash
# Fleet observation benchmark (not a test): several hypervisors reached over SSH links with added
# latency, observed at once by `trog fleet`, against the sum of observing each alone.
#   bench/remote-observe.sh [HYPERVISORS] [DELAY_MS] [GUESTS]   (defaults: 4, 40 ms, 0)
# GUESTS defined, stopped guests (bench-observe-N, 64 MiB each) are added to the libvirtd behind the
# namespace host for the run and removed afterwards, to show whether a hypervisor's guest count
# costs round trips; so is a running directory pool (bench-observe-PID), the hypervisors' pool.
# The hypervisors are aliases (hv1…hvN) of the namespace host of tests/services/remote-host.sh,
# each its own ssh connection and libvirt session. The kernel here has no sch_netem, so the
# latency is added by the ssh ProxyCommand, a relay that holds every chunk DELAY_MS in each
# direction (and the connection DELAY_MS before it opens): every round trip costs 2×DELAY_MS.
# Prints one line per measurement and a summary line:
#   bench remote-observe: hypervisors=N delay_ms=D guests=G round_trips=R concurrent_s=… single_s=…
#     concurrent_over_single=… sum_of_single_s=… speedup=…
# round_trips counts, for one hypervisor observed alone, the times the conversation turned from the
# far side back to trog (data sent after data received) on its one SSH link: the SSH handshake
# and every libvirt call that waits for an answer.
# trog keeps a shared master connection per hypervisor login for a minute after a run
# (src/machine/ssh_masters.rs); here in a runtime directory of the bench's own. MASTERS=cold (the
# default) closes them before every run, so each run connects as the first one after a quiet
# minute does; MASTERS=warm opens them before the clock starts and keeps them, as for a run soon
# after another.
# Needs root, tests/services/start.sh and remote-host.sh. TROG_BIN names the binary (default:
# target/debug/trog of this checkout). Runs each measurement REPEATS times (default 3), takes medians.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
count=${1:-4}
delay_ms=${2:-40}
guests=${3:-0}
repeats=${REPEATS:-3}
trog=${TROG_BIN:-$root/target/debug/trog}
# The relay starts once per SSH connection, eight at once in the fleet case: the system's
# interpreter without site packages starts in a few milliseconds of CPU, where a version
# manager's shim on PATH costs a tenth of a second each and would be measured as the fleet's.
python=${PYTHON:-/usr/bin/python3}
masters=${MASTERS:-cold}
[[ $masters == cold || $masters == warm ]] || { echo "bench: MASTERS is cold or warm, not $masters" >&2; exit 1; }
[[ -x $trog ]] || { echo "bench: $trog is not built (cargo build)" >&2; exit 1; }

eval "$(TROG_BIN=$trog "$root/tests/services/remote-host.sh")"
work=$(mktemp -d /tmp/trog-bench-remote.XXXXXX)
remove_guests() {
  for i in $(seq "$guests"); do virsh -q -c qemu:///system undefine "bench-observe-$i" >/dev/null 2>&1 || true; done
}
# trog's masters, in a runtime directory of the bench's own (short: a socket's path is short).
runtime=$work/rt
mkdir -m 0700 "$runtime"
export XDG_RUNTIME_DIR=$runtime
stop_masters() {
  for i in $(seq "$count"); do
    "$work/ssh" -o "ControlPath=$runtime/trog/ssh/%C" -O exit "hv$i" >/dev/null 2>&1 || true
  done
}
# A running directory pool, as every hypervisor has one: observing it (look up, refresh, read
# its size) belongs to the cost.
pool=bench-observe-$$
remove_pool() {
  virsh -q -c qemu:///system pool-destroy "$pool" >/dev/null 2>&1 || true
  virsh -q -c qemu:///system pool-undefine "$pool" >/dev/null 2>&1 || true
}
trap 'stop_masters; remove_guests; remove_pool; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM # so that the EXIT trap cleans up after an interrupted run too
mkdir "$work/pool"
virsh -q -c qemu:///system pool-define-as "$pool" dir --target "$work/pool" >/dev/null
virsh -q -c qemu:///system pool-start "$pool" >/dev/null
for i in $(seq "$guests"); do
  cat >"$work/guest.xml" <<XML
<domain type='qemu'><name>bench-observe-$i</name><memory unit='MiB'>64</memory><vcpu>1</vcpu>
<os><type arch='x86_64'>hvm</type></os></domain>
XML
  virsh -q -c qemu:///system define "$work/guest.xml" >/dev/null
done

cat >"$work/lag.py" <<'PY'
import os, socket, sys, threading, time
host, port, delay = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]) / 1000
turns_file = sys.argv[4] if len(sys.argv) > 4 else None
time.sleep(delay)
sock = socket.create_connection((host, port))
state = {"last": None, "turns": 0}
lock = threading.Lock()
def record():
    # Written as the count grows: ssh ends its ProxyCommand with a signal when it is done.
    # The opening exchange (the far side speaks first in SSH) counts as one round trip too.
    # Replaced whole, never truncated in place: a signal between truncating and writing would
    # leave an empty count.
    if turns_file:
        path = f"{turns_file}.{os.getpid()}"
        with open(f"{path}.new", "w") as f:
            f.write(f"{state['turns'] + 1}\n")
        os.replace(f"{path}.new", path)
def pump(direction, read, write):
    while True:
        chunk = read(65536)
        if not chunk:
            break
        with lock:
            # A turn: trog speaks again after the far side spoke, i.e. it waited for an answer.
            if direction == "up" and state["last"] == "down":
                state["turns"] += 1
                record()
            state["last"] = direction
        time.sleep(delay)
        write(chunk)
    try: sock.shutdown(socket.SHUT_WR)
    except OSError: pass
up = threading.Thread(target=pump, args=("up", getattr(sys.stdin.buffer, "raw", sys.stdin.buffer).read, sock.sendall), daemon=True)
up.start()
out = getattr(sys.stdout.buffer, "raw", sys.stdout.buffer)
def write_all(data):
    while data:
        data = data[out.write(data):]
pump("down", sock.recv, write_all)
PY

# Each alias names a host of its own (hvN.bench), as eight hypervisors would be, so each gets a
# master of its own; its relay connects to the one namespace host whatever the name.
for i in $(seq "$count"); do
  cat <<CFG
Host hv$i
  HostName hv$i.bench
  HostKeyAlias $ADDRESS
  User $USER_NOPASSWD
  IdentityFile $KEYFILE
  IdentitiesOnly yes
  BatchMode yes
  ProxyCommand $python -S $work/lag.py $ADDRESS 22 $delay_ms $work/turns/hv$i
CFG
done >"$work/ssh_config"
cat >"$work/ssh" <<SH
#!/bin/sh
exec ssh -F $work/ssh_config "\$@"
SH
chmod +x "$work/ssh"

block() { # index
  printf '[hv%s]\nlibvirt_uri = qemu+ssh://%s@hv%s/system?command=%s\npool_name = %s\n\n' \
    "$1" "$USER_NOPASSWD" "$1" "$work/ssh" "$pool"
}
mkdir -p "$work/fleet" "$work/turns"
for i in $(seq "$count"); do block "$i"; done >"$work/fleet/hypervisors.conf"
for i in $(seq "$count"); do mkdir -p "$work/hv$i"; block "$i" >"$work/hv$i/hypervisors.conf"; done

# Seconds one `trog fleet` takes on the installation in $1; fails if not every hypervisor answered.
observe() {
  local started ended output
  [[ $masters == warm ]] || stop_masters
  started=$(date +%s.%N)
  output=$(TROG_PROVISIONER_CONFIG=$1 "$trog" fleet --json)
  ended=$(date +%s.%N)
  if grep -q '"unreachable"\|"error"' <<<"$output"; then
    echo "bench: a hypervisor did not answer: $output" >&2; exit 1
  fi
  echo "$ended - $started" | bc
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

if [[ $masters == warm ]]; then
  TROG_PROVISIONER_CONFIG=$work/fleet "$trog" fleet --json >/dev/null
fi
# Alternating: all at once, then each alone, REPEATS times, so drift on a shared machine hits both.
concurrent_runs=()
declare -A single_runs
for _ in $(seq "$repeats"); do
  concurrent_runs+=("$(observe "$work/fleet")")
  for i in $(seq "$count"); do single_runs[$i]+="$(observe "$work/hv$i") "; done
done
concurrent=$(printf '%s\n' "${concurrent_runs[@]}" | median)
echo "concurrent (all $count at once): ${concurrent}s (median of $repeats; runs: ${concurrent_runs[*]})"
sum=0
singles=()
for i in $(seq "$count"); do
  single=$(tr ' ' '\n' <<<"${single_runs[$i]}" | grep . | median)
  echo "hv$i alone: ${single}s (runs: ${single_runs[$i]})"
  singles+=("$single")
  sum=$(echo "$sum + $single" | bc)
done
single=$(printf '%s\n' "${singles[@]}" | median)
# Round trips of one hypervisor observed alone, once more, counted on its links: the counts are
# cumulative per link (a multiplexed master lives across runs), so the difference is this run's.
turns_total() { { cat "$work/turns/hv1".*[0-9] 2>/dev/null || true; } | paste -sd+ | bc; }
[[ $masters == warm ]] || { stop_masters; sleep 1; rm -f "$work/turns/"*; }
before=$(turns_total); before=${before:-0}
observe "$work/hv1" >/dev/null
sleep 1 # the relay of a closed link may still be writing its count
after=$(turns_total)
round_trips=$(( ${after:-0} - before ))
speedup=$(echo "scale=2; $sum / $concurrent" | bc)
ratio=$(echo "scale=2; $concurrent / $single" | bc)
echo "bench remote-observe: hypervisors=$count delay_ms=$delay_ms guests=$guests masters=$masters round_trips=$round_trips concurrent_s=$concurrent single_s=$single concurrent_over_single=$ratio sum_of_single_s=$sum speedup=$speedup"
