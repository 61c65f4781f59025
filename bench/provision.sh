#!/usr/bin/env bash
# Provisioning benchmark (not a test): trog against virt-install --import --cloud-init, and
# against kcli where it is installed, booting the same image with the same memory, vCPUs and
# network, in rounds whose order rotates (with one peer: odd rounds trog first, even rounds the
# peer first) so load that drifts during the run falls on every side. A round is a "pair".
#   bench/provision.sh [IMAGE.qcow2]      (default: tests/image/ensure-image.sh)
# Settings (environment):
#   TROG_BENCH_PAIRS       pairs (rounds) to run (default 5)
#   TROG_BENCH_PEERS       the tools trog is compared with: `virt-install` (bench/boot.sh) and
#                          `kcli` (bench/kcli.sh); default virt-install, and kcli too when it is
#                          on PATH
#   TROG_BENCH_VCPUS       vCPUs of both guests (default 2)
#   TROG_BENCH_MEMORY_MIB  memory of both guests (default 1024)
#   TROG_BENCH_CPU_MODE    trog's guest recipe `cpu_mode` (default: unset, trog's own default)
#   TROG_BENCH_MACHINE     trog's guest recipe `machine_type` (default: unset)
#   TROG_BENCH_LABEL       a name for this run's variant, copied into every line (default "default")
#   TROG_BENCH_ADDRESSES   `lease` (default): trog's guest asks for a DHCP lease, as virt-install's;
#                          `range`: trog hands its guest an address from 192.168.122.200-249
#                          (docs/NETWORK.md), written into the seed as a static address
#   TROG_BENCH_GUEST       `new` (default): each trog run provisions a guest of a new name, so a
#                          new MAC as each of virt-install's has; `same`: every run rebuilds the
#                          first run's guest, whose MAC the network's DHCP server knows
#   TROG_BIN               the trog binary (default: the checkout's debug build, built first)
#   TROG_BENCH_ONLY        `trog`: run trog's side only (to compare trog's own variants quickly)
#   TROG_BENCH_BOOTCHART   a directory: each guest's boot as it saw it (bench/bootchart.sh) is
#                          saved there as TOOL-PAIR.txt, its serial console (the kernel's own
#                          clock on every line) as TOOL-PAIR-serial.log
# Prints one JSON line per run on stdout, every phase counted in seconds from the moment the tool
# was started:
#   trog:          before_boot_s (trog's own steps before the guest starts: defining, uploading,
#                  starting), lease_s, ssh_s, cloud_init_s (cloud-init's result written on the
#                  guest), finish_s (Makefile and recipe tests done: the command returned)
#   virt-install, kcli: command_s, lease_s, ssh_s, cloud_init_s (`cloud-init status --wait`
#                  returned)
# then a summary line per tool (median, min, max of each phase) and the ratios trog/peer
# of the medians and the median of the per-pair ratios. Each run starts once the machine has
# settled (no QEMU left of the run before, processors idle; `settled_s` says how long that took);
# `stolen_s` is the processor time this machine's own host took from it during the run (steal,
# every CPU together: a virtual machine's share that neither tool got).
# A run that fails prints a line with
# "failed" and the pair continues; the summary counts only complete pairs.
# Needs tests/services/start.sh to have run, virt-install (package virtinst) and python3.
# (`order` in a line names the tool that ran first in its round.)
# Removes every guest, pool and file it made, also on failure.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
image=${1:-$("$root/tests/image/ensure-image.sh")}
pairs=${TROG_BENCH_PAIRS:-5}
memory_mib=${TROG_BENCH_MEMORY_MIB:-1024}
vcpus=${TROG_BENCH_VCPUS:-2}
label=${TROG_BENCH_LABEL:-default}
guests=${TROG_BENCH_GUEST:-new}
addresses=${TROG_BENCH_ADDRESSES:-lease}
[[ $addresses == lease || $addresses == range ]] || { echo "TROG_BENCH_ADDRESSES is lease or range, not $addresses" >&2; exit 2; }
[[ $guests == new || $guests == same ]] || { echo "TROG_BENCH_GUEST is new or same, not $guests" >&2; exit 2; }
port=18777
uri=qemu:///system
export TROG_BENCH_MEMORY_MIB=$memory_mib TROG_BENCH_VCPUS=$vcpus

default_peers=virt-install
if command -v kcli >/dev/null; then default_peers="virt-install kcli"; fi
read -r -a peers <<<"${TROG_BENCH_PEERS:-$default_peers}"
[[ ${TROG_BENCH_ONLY:-} == trog ]] && peers=()
for peer in "${peers[@]}"; do
  case $peer in
  virt-install) command -v virt-install >/dev/null || { echo "virt-install is missing (package virtinst)" >&2; exit 1; } ;;
  kcli) command -v kcli >/dev/null || { echo "kcli is missing (pip install kcli)" >&2; exit 1; } ;;
  *) echo "TROG_BENCH_PEERS names virt-install and kcli, not $peer" >&2; exit 2 ;;
  esac
done
if [[ -z ${TROG_BIN:-} ]]; then
  cargo build --quiet --manifest-path "$root/Cargo.toml" --bin trog
  TROG_BIN=$root/target/debug/trog
fi

work=$(mktemp -d /var/tmp/trog-bench.XXXXXX)
chmod 755 "$work"
mirror_pid=
trog() { TROG_PROVISIONER_CONFIG=$work XDG_CACHE_HOME=$work/cache "$TROG_BIN" --credentials "$@"; }
cleanup() {
  if [[ -n $mirror_pid ]]; then kill "$mirror_pid" 2>/dev/null || true; fi
  local recipe
  for recipe in "$work"/recipes.d/*.yaml; do # every guest a run made, also one interrupted
    [[ -e $recipe ]] || continue
    printf 'keepass: bench\n\n' | trog destroy "$(basename "$recipe" .yaml)" --purge --yes >/dev/null 2>&1 || true
  done
  virsh -q -c "$uri" pool-destroy "trog-bench-$$" >/dev/null 2>&1 || true
  virsh -q -c "$uri" pool-undefine "trog-bench-$$" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# An empty apt archive on the bridge: apt succeeds and installs nothing new (see tests/e2e).
python3 - "$work/mirror" <<'PY'
import hashlib, os, sys
root, empty = sys.argv[1], hashlib.sha256(b"").hexdigest()
# Debian keeps the security suite in an archive of its own beside the main one; a guest whose
# `security_mirror` is unset asks the main one for it.
for archive, suite in [("debian", "bookworm"), ("debian", "bookworm-updates"),
                       ("debian-security", "bookworm-security"), ("debian", "bookworm-security"),
                       ("debian", "bookworm-backports")]:
    dists = f"{root}/{archive}/dists/{suite}"
    for index in ["main/binary-amd64/Packages", "main/source/Sources"]:
        os.makedirs(os.path.dirname(f"{dists}/{index}"), exist_ok=True)
        open(f"{dists}/{index}", "w").close()
    with open(f"{dists}/Release", "w") as release:
        release.write(f"Suite: {suite}\nCodename: {suite}\nComponents: main\nArchitectures: amd64\n"
                      f"SHA256:\n {empty} 0 main/binary-amd64/Packages\n {empty} 0 main/source/Sources\n")
PY
python3 -m http.server "$port" --bind 192.168.122.1 --directory "$work/mirror" >/dev/null 2>&1 &
mirror_pid=$!

cat >"$work/hypervisors.conf" <<CONF
[local]
libvirt_uri = qemu:///system
domain_type = qemu
pool_name = trog-bench-$$
pool_path = $work/pool
reserve_memory = 512
CONF
cat >"$work/recipes.yaml" <<CONF
_base:
  _global:
    admin_user: trogadmin
    contact_email: ops@example.test
    distro: debian
    release: bookworm
    mirror: http://192.168.122.1:$port/debian
    upgrade: false
CONF
if [[ $addresses == range ]]; then
  cat >>"$work/recipes.yaml" <<CONF
    network: default
    address_range: 192.168.122.200-192.168.122.249/24
    gateway: 192.168.122.1
    resolvers: [192.168.122.1]
CONF
fi
# A login of the bench's own, so it can ask the guest when cloud-init finished (and, with sudo,
# read cloud-init's log for bench/bootchart.sh) without trog's key.
ssh-keygen -q -t ed25519 -N '' -C bench -f "$work/probe_key"
image_sha256=$(sha256sum "$image" | cut -d' ' -f1)

# Writes the recipes of guest $1 and makes its secrets and key (new_config): before the clock
# starts, as in any installation that has provisioned before. The base image is uploaded inside
# the first timed run.
prepare_guest() { # name
  mkdir -p "$work/recipes.d/$1"
  {
    cat <<CONF
$1:
  _global:
    memory: $memory_mib
    cpus: $vcpus
    size: 4G
    image:
      url: file://$image
      sha256: $image_sha256
CONF
    [[ -n ${TROG_BENCH_CPU_MODE:-} ]] && echo "    cpu_mode: $TROG_BENCH_CPU_MODE"
    [[ -n ${TROG_BENCH_MACHINE:-} ]] && echo "    machine_type: $TROG_BENCH_MACHINE"
    echo "  data: {}"
  } >"$work/recipes.d/$1.yaml"
  cat >"$work/recipes.d/$1/users.yaml" <<CONF
- name: benchprobe
  lock_passwd: true
  sudo: ALL=(ALL) NOPASSWD:ALL
  ssh_authorized_keys:
    - $(cat "$work/probe_key.pub")
CONF
  printf 'keepass: bench\n\n' | trog new_config "$1" --out "$work/out.$1" >/dev/null
}

# The guest of each trog run: a new name (so a new MAC, as virt-install's guests have) or, with
# TROG_BENCH_GUEST=same, the first run's again (a rebuild: the network's DHCP server has its
# lease from the run before and answers at once, where a new MAC waits for its address-in-use
# check).
guest_for_run() { # pair
  if [[ $guests == same ]]; then echo "bench-$$.test"; else echo "bench-$$-$1.test"; fi
}

now() { date +%s.%N; }

# This machine's processor time taken by its own host (steal, summed over every CPU) so far, in
# clock ticks: on a virtual machine, what it grows by during a run says how much of the run's
# time the guests' emulation did not get, which the alternating pairs alone cannot tell.
clock_ticks=$(getconf CLK_TCK)
stolen_ticks() { awk '/^cpu / {print $9}' /proc/stat; }
stolen_since() { # ticks
  awk -v then="$1" -v now="$(stolen_ticks)" -v hz="$clock_ticks" 'BEGIN {printf "%.1f", (now - then) / hz}'
}

# Before each run: the previous run's guest gone (no QEMU left) and the machine's processors at
# least 90 % idle over a second, for up to 60 s. Without it, whichever tool ran first in a pair
# booted beside the previous run's teardown (QEMU exiting, volumes deleted). Prints how long it
# waited, for the run's JSON line.
settle() {
  python3 - <<'PY'
import os, time
def busy():
    return any(open(f"/proc/{p}/comm").read().startswith("qemu-system")
               for p in os.listdir("/proc") if p.isdigit() and os.path.exists(f"/proc/{p}/comm"))
def idle_fraction(seconds=1.0):
    def read():
        fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
        return fields[3] + fields[4], sum(fields)
    idle0, total0 = read(); time.sleep(seconds); idle1, total1 = read()
    return (idle1 - idle0) / max(1, total1 - total0)
start = time.monotonic()
while time.monotonic() - start < 60:
    try:
        if not busy() and idle_fraction() >= 0.9:
            break
    except OSError:
        pass  # a process that ended while it was read
    time.sleep(0.5)
print(f"{time.monotonic() - start:.1f}")
PY
}

# The lease's start: libvirt's network keeps dnsmasq's default lease time (one hour) and reports
# the expiry, so start = expiry - 3600 (whole seconds).
lease_started() { # mac
  local expiry
  expiry=$(virsh -q -c "$uri" net-dhcp-leases default --mac "$1" | awk '$5 ~ /\// {print $1" "$2}' | sort | tail -n1)
  [[ -n $expiry ]] && echo $(($(date -d "$expiry" +%s) - 3600))
}

run_trog() { # pair order
  local started status=0 mac address guest_times domain settled
  domain=$(guest_for_run "$1")
  [[ -f $work/recipes.d/$domain.yaml ]] || prepare_guest "$domain"
  settled=$(settle)
  local stolen_before stolen
  stolen_before=$(stolen_ticks)
  started=$(now)
  printf 'keepass: bench\n\n' | trog --json provision "$domain" 2>"$work/trog.stderr" |
    python3 -u -c 'import sys, time
for line in sys.stdin: print(f"{time.time():.3f} {line}", end="", flush=True)' >"$work/events.stamped" || status=$?
  local ended
  ended=$(now)
  stolen=$(stolen_since "$stolen_before")
  mac=$(virsh -q -c "$uri" domiflist "$domain" 2>/dev/null | awk '{print $5}' | head -n1)
  # Where trog reached the guest (the report in its last event); else the newest lease: an earlier
  # guest of the same name (same MAC) may have left one.
  address=$(tail -n1 "$work/events.stamped" | cut -d' ' -f2- |
    python3 -c 'import json, sys; print((json.load(sys.stdin).get("report") or {}).get("address") or "")' 2>/dev/null || true)
  if [[ -z $address ]]; then
    address=$(virsh -q -c "$uri" net-dhcp-leases default --mac "$mac" 2>/dev/null |
      awk '$5 ~ /\// {print $1" "$2" "$5}' | sort | tail -n1 | awk '{print $3}' | cut -d/ -f1)
  fi
  guest_times=
  if [[ -n $address ]]; then
    # The guest's clock and cloud-init's result, read at one moment: the difference to this
    # machine's clock at that moment carries the result's time over without trusting the guest's.
    guest_times="$(now) $(ssh -i "$work/probe_key" -o BatchMode=yes -o StrictHostKeyChecking=no \
      -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o ConnectTimeout=10 "benchprobe@$address" \
      'date +%s.%N; date -r /var/lib/cloud/data/result.json +%s.%N' </dev/null 2>/dev/null | tr '\n' ' ')" || true
  fi
  if [[ -n $address && -n ${TROG_BENCH_BOOTCHART:-} ]]; then
    "$root/bench/bootchart.sh" "$work/probe_key" "benchprobe@$address" \
      >"$TROG_BENCH_BOOTCHART/trog-$1.txt" 2>&1 || true
  fi
  if [[ -n ${TROG_BENCH_BOOTCHART:-} ]]; then
    # libvirt appends every boot of a name to one log: this run's boot is its last kernel's.
    python3 - "/var/log/libvirt/qemu/$domain-serial.log" >"$TROG_BENCH_BOOTCHART/trog-$1-serial.log" <<'PY' || true
import sys
text = open(sys.argv[1], errors="replace").read()
start = text.rfind("] Linux version ")
print(text[text.rfind("\n", 0, start) + 1 if start >= 0 else 0:], end="")
PY
  fi
  python3 - "$work/events.stamped" "$started" "$ended" "$status" "$(lease_started "$mac" || true)" \
    "$guest_times" "$1" "$2" "$label" "$vcpus" "$memory_mib" "${TROG_BENCH_CPU_MODE:-}" "$guests" "$addresses" \
    "$settled" "$stolen" <<'PY'
import json, sys
path, started, ended, status, lease, guest_times, pair, order, label, vcpus, memory, cpu, guest, addresses, settled, stolen = sys.argv[1:]
started, ended = float(started), float(ended)
line = {"tool": "trog", "label": label, "pair": int(pair), "order": order, "vcpus": int(vcpus),
        "memory_mib": int(memory), "cpu_mode": cpu or None, "guest": guest,
        "addresses": addresses, "settled_s": float(settled), "stolen_s": float(stolen),
        "load": float(open("/proc/loadavg").read().split()[0])}
events = []
for raw in open(path):
    stamp, _, text = raw.partition(" ")
    try:
        events.append((float(stamp), json.loads(text)))
    except ValueError:
        pass
finished = [(t, e) for t, e in events if e.get("event") == "step_finished"]
wait = [(t, e) for t, e in finished if "wait for the guest" in e["label"]]
if wait:
    wait_at = wait[0][0]
    line["before_boot_s"] = round(sum(e["seconds"] for t, e in finished if t < wait_at
                                      and "wait for the guest" not in e["label"]), 2)
    line["ssh_s"] = round(wait_at - started, 1)
    # Which of trog's own steps took the time before the boot (those of a fifth of a second or more).
    line["slow_steps"] = [[e["label"], round(e["seconds"], 2)] for t, e in finished
                          if t < wait_at and e["seconds"] >= 0.2]
if lease:
    line["lease_s"] = round(int(lease) - started, 1)
parts = guest_times.split()
if len(parts) == 3:
    here, guest_now, result = map(float, parts)
    line["cloud_init_s"] = round(result + (here - guest_now) - started, 1)
if status == "0":
    line["finish_s"] = round(ended - started, 1)
else:
    line["failed"] = f"trog exited {status}"
print(json.dumps(line), flush=True)
PY
  printf 'keepass: bench\n\n' | trog destroy "$domain" --purge --yes >/dev/null 2>&1 ||
    echo "trog destroy failed; see $work" >&2
  if [[ $status != 0 ]]; then tail -n 20 "$work/trog.stderr" >&2; fi
}

run_peer() { # tool pair order
  local tool=$1 script line status=0 settled stolen_before stolen
  case $tool in virt-install) script=boot.sh ;; kcli) script=kcli.sh ;; esac
  shift
  settled=$(settle)
  stolen_before=$(stolen_ticks)
  line=$(TROG_BENCH_BOOTCHART=${TROG_BENCH_BOOTCHART:+$TROG_BENCH_BOOTCHART/$tool-$1.txt} \
    "$root/bench/$script" "$image" 2>"$work/peer.stderr" | grep "^bench $tool:") || status=$?
  stolen=$(stolen_since "$stolen_before")
  python3 - "$tool" "$line" "$status" "$1" "$2" "$label" "$vcpus" "$memory_mib" "$settled" "$stolen" <<'PY'
import json, sys
tool, text, status, pair, order, label, vcpus, memory, settled, stolen = sys.argv[1:]
line = {"tool": tool, "label": label, "pair": int(pair), "order": order,
        "vcpus": int(vcpus), "memory_mib": int(memory), "settled_s": float(settled),
        "stolen_s": float(stolen)}
for field in text.split()[2:]:
    key, _, value = field.partition("=")
    if key.endswith("_s") or key == "load":
        line[key] = float(value)
if status != "0" or "cloud_init_s" not in line:
    line["failed"] = f"bench/{'boot' if tool == 'virt-install' else tool}.sh exited {status}"
print(json.dumps(line), flush=True)
PY
  if [[ $status != 0 ]]; then tail -n 20 "$work/peer.stderr" >&2; fi
}

: >"$work/results.jsonl"
tools=(trog "${peers[@]}")
for ((pair = 1; pair <= pairs; pair++)); do
  # Round N starts with tool N-1 (counting round the list), the rest following in the list's order.
  first=$(((pair - 1) % ${#tools[@]}))
  round=("${tools[@]:first}" "${tools[@]:0:first}")
  for tool in "${round[@]}"; do
    if [[ $tool == trog ]]; then
      run_trog "$pair" "${round[0]}-first"
    else
      run_peer "$tool" "$pair" "${round[0]}-first"
    fi | tee -a "$work/results.jsonl"
  done
done
"$root/bench/provision-summary.py" "$work/results.jsonl"
