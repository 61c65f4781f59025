#!/usr/bin/env bash
# Snapshot benchmark (not a test): `trog snapshot` / `trog restore` against `virsh
# snapshot-create-as` / `virsh snapshot-revert` doing the same by hand (internal snapshots of the
# same disks, the seed cdrom left out; with memory while the guest runs, offline when it is shut
# off), on one guest trog builds from the test image.
#   bench/snapshot.sh [IMAGE.qcow2]      (default: tests/image/ensure-image.sh)
# Pairs alternate which of the two goes first (TROG_BENCH_PAIRS pairs per case, default 3); each
# case prints every pair's seconds and the median of the ratios trog/virsh. What each side does:
#   snapshot: trog locates the guest, takes its lock, lists its snapshots, then asks libvirt;
#             virsh asks libvirt.
#   restore:  trog also waits until SSH answers (running) and says what `status` would say;
#             virsh returns when libvirt has reverted.
# Needs tests/services/start.sh to have run, and python3. Uses the checkout's debug build
# (TROG_BIN names another). Removes the guest, its pool and its files afterwards, also on failure.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
image=${1:-$("$root/tests/image/ensure-image.sh")}
pairs=${TROG_BENCH_PAIRS:-3}
port=18778
uri=qemu:///system

if [[ -z ${TROG_BIN:-} ]]; then
  cargo build --quiet --manifest-path "$root/Cargo.toml" --bin trog
  TROG_BIN=$root/target/debug/trog
fi

work=$(mktemp -d /var/tmp/trog-bench-snapshot.XXXXXX)
chmod 755 "$work"
domain=bench-snap-$$.test
mirror_pid=
trog() {
  printf 'keepass: bench\n\n' | TROG_PROVISIONER_CONFIG=$work XDG_CACHE_HOME=$work/cache \
    "$TROG_BIN" --credentials "$@"
}
cleanup() {
  [[ -n $mirror_pid ]] && kill "$mirror_pid" 2>/dev/null || true
  trog destroy --purge --yes "$domain" >/dev/null 2>&1 || true
  virsh -q -c "$uri" pool-destroy "trog-bench-snap-$$" >/dev/null 2>&1 || true
  virsh -q -c "$uri" pool-undefine "trog-bench-snap-$$" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# An empty apt archive on the bridge, as in bench/provision.sh.
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
pool_name = trog-bench-snap-$$
pool_path = $work/pool
reserve_memory = 512
cpu_overcommit = 100
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
    memory: 768
    cpus: 1
    size: 4G
    data_volume_size: 1G
    image:
      url: file://$image
      sha256: $(sha256sum "$image" | cut -d' ' -f1)
CONF
trog provision "$domain" >"$work/provision.log" 2>&1 || { cat "$work/provision.log" >&2; exit 1; }

# The same request trog makes: every writable disk internal, read-only ones (the seed) left out.
diskspecs=()
while read -r _type device target _source; do
  [[ $device == disk ]] && diskspecs+=(--diskspec "$target,snapshot=internal")
  [[ $device == cdrom ]] && diskspecs+=(--diskspec "$target,snapshot=no")
done < <(virsh -q -c "$uri" domblklist --details "$domain")

seconds() { local started=$1; python3 -c "import time; print(f'{time.time() - $started:.3f}')"; }
timed() { local started; started=$(date +%s.%N); "$@" >/dev/null; seconds "$started"; }

# One case: `trog_cmd` and `virsh_cmd` (functions taking a pair number) alternately first.
run_case() {
  local label=$1 trog_cmd=$2 virsh_cmd=$3 prepare=$4 pair trog_s virsh_s ratios=()
  for ((pair = 1; pair <= pairs; pair++)); do
    "$prepare" "$pair"
    if ((pair % 2)); then
      trog_s=$(timed "$trog_cmd" "$pair"); virsh_s=$(timed "$virsh_cmd" "$pair")
    else
      virsh_s=$(timed "$virsh_cmd" "$pair"); trog_s=$(timed "$trog_cmd" "$pair")
    fi
    echo "bench $label pair $pair: trog_s=$trog_s virsh_s=$virsh_s"
    ratios+=("$(python3 -c "print($trog_s / $virsh_s)")")
  done
  python3 -c "import statistics, sys; print(f'bench $label: median trog/virsh = {statistics.median(map(float, sys.argv[1:])):.2f} over $pairs pairs')" "${ratios[@]}"
}

delete_all() {
  local name
  for name in $(virsh -q -c "$uri" snapshot-list --name "$domain"); do
    virsh -q -c "$uri" snapshot-delete "$domain" "$name" >/dev/null
  done
}
trog_snapshot() { trog snapshot --name "t$1" "$domain"; }
virsh_snapshot() { virsh -q -c "$uri" snapshot-create-as "$domain" "v$1" --atomic "${diskspecs[@]}"; }
trog_restore() { trog restore --name "t$1" "$domain"; }
virsh_restore() { virsh -q -c "$uri" snapshot-revert "$domain" "v$1"; }
fresh() { delete_all; }
# A restore pair reverts to snapshots taken just before, one each.
with_both() { delete_all; trog_snapshot "$1" >/dev/null; virsh_snapshot "$1" >/dev/null; }

run_case "snapshot (running)" trog_snapshot virsh_snapshot fresh
run_case "restore (running)" trog_restore virsh_restore with_both
delete_all
virsh -q -c "$uri" destroy "$domain" >/dev/null
run_case "snapshot (shut off)" trog_snapshot virsh_snapshot fresh
run_case "restore (shut off)" trog_restore virsh_restore with_both
delete_all
