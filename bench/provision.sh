#!/usr/bin/env bash
# Provisioning benchmark (not a test): trog against virt-install, one after the other in one run,
# booting the same test image with the same shape on the same network.
#   bench/provision.sh [IMAGE.qcow2]      (default: tests/image/ensure-image.sh)
# Prints, for trog, the time from `bin/provision` starting to "SSH answers" and to "finished",
# and trog's own overhead: every step that is not waiting for the guest (generating, defining,
# uploading, starting). Then runs bench/boot.sh for virt-install --import --cloud-init.
# Needs tests/services/start.sh to have run, a release or debug build, and python3.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
image=${1:-$("$root/tests/image/ensure-image.sh")}
memory_mib=${TROG_BENCH_MEMORY_MIB:-1024}
vcpus=${TROG_BENCH_VCPUS:-2}
port=18777
export TROG_BENCH_MEMORY_MIB=$memory_mib TROG_BENCH_VCPUS=$vcpus

cargo build --quiet --release --manifest-path "$root/Cargo.toml"
export TROG_BIN=$root/target/release/trog

work=$(mktemp -d /var/tmp/trog-bench.XXXXXX)
chmod 755 "$work"
domain=bench-$$.test
mirror_pid=
cleanup() {
  [[ -n $mirror_pid ]] && kill "$mirror_pid" 2>/dev/null || true
  printf 'keepass: bench\n\n' | TROG_PROVISIONER_CONFIG=$work "$TROG_BIN" --credentials destroy "$domain" >/dev/null 2>&1 || true
  virsh -q -c qemu:///system pool-destroy "trog-bench-$$" >/dev/null 2>&1 || true
  virsh -q -c qemu:///system pool-undefine "trog-bench-$$" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# An empty apt archive on the bridge: apt succeeds and installs nothing new (see tests/e2e).
python3 - "$work/mirror" <<'PY'
import hashlib, os, sys
root, empty = sys.argv[1], hashlib.sha256(b"").hexdigest()
# Debian keeps the security suite in an archive of its own beside the main one.
for archive, suite in [("debian", "bookworm"), ("debian", "bookworm-updates"),
                       ("debian-security", "bookworm-security"), ("debian", "bookworm-backports")]:
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
mkdir -p "$work/recipes.d"
cat >"$work/recipes.d/$domain.yaml" <<CONF
$domain:
  _global:
    memory: $memory_mib
    cpus: $vcpus
    size: 4G
    image:
      url: file://$image
      sha256: $(sha256sum "$image" | cut -d' ' -f1)
  data: {}
CONF

# The secret store and the guest's key exist before the clock starts, as in any installation
# that has provisioned before; the base image is uploaded inside the timed run.
printf 'keepass: bench\n\n' | TROG_PROVISIONER_CONFIG=$work "$TROG_BIN" --credentials new_config "$domain" --out "$work/out" >/dev/null

started=$(date +%s.%N)
printf 'keepass: bench\n\n' | TROG_PROVISIONER_CONFIG=$work XDG_CACHE_HOME=$work/cache \
  "$TROG_BIN" --credentials --json provision "$domain" >"$work/events.jsonl"
python3 - "$work/events.jsonl" "$started" <<'PY'
import json, sys, time
events = [json.loads(line) for line in open(sys.argv[1])]
started = float(sys.argv[2])
steps = [e for e in events if e.get("event") == "step_finished"]
wait = sum(e["seconds"] for e in steps if "wait for the guest" in e["label"])
finish = sum(e["seconds"] for e in steps if "finish over SSH" in e["label"])
own = sum(e["seconds"] for e in steps) - wait - finish
done = [e for e in events if e.get("event") == "done"][0]["report"]["total_seconds"]
print(f"bench trog: steps_before_boot_s={own:.2f} to_ssh_s={own + wait:.1f} finish_s={finish:.1f} total_steps_s={done:.1f}")
PY
echo "bench trog: command_total_s=$(python3 -c "import time; print(round(time.time() - $started, 1))") (includes generation and placement)"
"$root/bench/boot.sh" "$image"
