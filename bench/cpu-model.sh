#!/usr/bin/env bash
# CPU model benchmark (not a test): how long `trog provision` of a guest that installs real
# packages (nginx, mariadb, ufw, cron) takes under TCG with each CPU model named, the guests of one
# round provisioned side by side (one per model, same image, packages, memory and vCPUs), so load
# that drifts during a round falls on all of them alike.
#   bench/cpu-model.sh [ROUNDS] [MODELS]     (defaults: 2, "qemu64 maximum")
# MODELS are `cpu_mode` values (`host-passthrough` is what a guest gets by default). Prints one line
# per guest (`bench cpu-model: round=… cpu_mode=… provision_s=… cloud_init_s=…`: the whole command,
# and cloud-init's end by the guest's clock since its kernel started), then per model the median
# provision time and its ratio to the first model's, the median of the per-round ratios.
# Packages come through the test services' apt proxy (tests/services/start.sh); run it warm once.
# TROG_BENCH_VCPUS (default 1) and TROG_BENCH_MEMORY_MIB (1536) set the guests' shape; TROG_BIN
# names a trog binary (default: a release build is made). Needs root and python3.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rounds=${1:-2}
read -r -a models <<<"${2:-qemu64 maximum}"
image=$("$root/tests/image/ensure-image.sh")
memory_mib=${TROG_BENCH_MEMORY_MIB:-1536}
vcpus=${TROG_BENCH_VCPUS:-1}
mirror=http://192.168.122.1:3142/deb.debian.org/debian

if [[ -z ${TROG_BIN:-} ]]; then
  cargo build --quiet --release --manifest-path "$root/Cargo.toml"
  TROG_BIN=$root/target/release/trog
fi
export TROG_RECIPES=${TROG_RECIPES:-$root/recipes}

work=$(mktemp -d /var/tmp/trog-bench-cpu.XXXXXX)
chmod 755 "$work"
pool=trog-bench-cpu-$$
trog() { printf 'keepass: bench\n\n' | TROG_PROVISIONER_CONFIG=$work XDG_CACHE_HOME=$work/cache "$TROG_BIN" --credentials "$@"; }
domain() { echo "bench-cpu$1-$$.test"; }
cleanup() {
  for i in "${!models[@]}"; do trog destroy --purge --yes "$(domain "$i")" >/dev/null 2>&1 || true; done
  virsh -q -c qemu:///system pool-destroy "$pool" >/dev/null 2>&1 || true
  virsh -q -c qemu:///system pool-undefine "$pool" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/hypervisors.conf" <<CONF
[local]
libvirt_uri = qemu:///system
domain_type = qemu
pool_name = $pool
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
    mirror: $mirror
    security_mirror: $mirror-security
    upgrade: false
CONF
mkdir -p "$work/recipes.d"
for i in "${!models[@]}"; do
  cat >"$work/recipes.d/$(domain "$i").yaml" <<CONF
$(domain "$i"):
  _global:
    memory: $memory_mib
    cpus: $vcpus
    size: 6G
    cpu_mode: ${models[$i]}
    image:
      url: file://$image
      sha256: $(cut -d' ' -f1 "$image.sha256")
  nginx: {}
  mariadb: {root_pw: bench-root-password}
  ufw: {}
  cron: {}
CONF
  # The secret store and each guest's key exist before the clock starts.
  trog new_config "$(domain "$i")" --out "$work/out-$i" >/dev/null
done

provision() { # round index
  local name started status=0
  name=$(domain "$2")
  started=$(date +%s.%N)
  trog provision "$name" >"$work/provision-$2.log" 2>&1 || status=$?
  local elapsed
  elapsed=$(python3 -c "import time; print(round(time.time() - $started, 1))")
  ((status == 0)) || { echo "bench cpu-model: ${models[$2]} failed:" >&2; tail -n 20 "$work/provision-$2.log" >&2; return 1; }
  # cloud-init's end by the guest's own clock (seconds since its kernel started), from its console
  # (which keeps every boot of the name: this round's is the last).
  local cloud_init
  cloud_init=$(grep -a 'Cloud-init v.* finished at' "/var/log/libvirt/qemu/$name-serial.log" | tail -n 1 |
    sed -n 's/^\[ *\([0-9.]*\)\].*/\1/p')
  echo "bench cpu-model: round=$1 cpu_mode=${models[$2]} vcpus=$vcpus provision_s=$elapsed cloud_init_s=${cloud_init:-unknown}" |
    tee -a "$work/results"
}

for round in $(seq "$rounds"); do
  pids=()
  for i in "${!models[@]}"; do provision "$round" "$i" & pids+=($!); done
  for pid in "${pids[@]}"; do wait "$pid"; done
  for i in "${!models[@]}"; do trog destroy --purge --yes "$(domain "$i")" >/dev/null; done
done

python3 - "$work/results" "${models[@]}" <<'PY'
import re, statistics, sys
path, models = sys.argv[1], sys.argv[2:]
runs = {}
for line in open(path):
    fields = dict(re.findall(r"(\w+)=(\S+)", line))
    runs.setdefault(fields["round"], {})[fields["cpu_mode"]] = float(fields["provision_s"])
first = models[0]
for model in models:
    times = [r[model] for r in runs.values() if model in r]
    ratios = [r[model] / r[first] for r in runs.values() if model in r and first in r]
    print(f"bench cpu-model: cpu_mode={model} rounds={len(times)} median_s={statistics.median(times):.1f} "
          f"min_s={min(times):.1f} max_s={max(times):.1f} ratio_to_{first}={statistics.median(ratios):.2f}")
PY
