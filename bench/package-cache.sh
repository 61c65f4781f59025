#!/usr/bin/env bash
# Package cache benchmark (not a test): the provision time of one guest that installs real
# packages (nginx, mariadb, ufw, cron) through a caching apt proxy whose cache is empty (cold),
# then of the same guest again through the same proxy, now holding every package (warm), side by
# side in one run. The proxy is a private instance of tests/services/apt-proxy.sh (its own port,
# state and an empty temporary cache), so the test services' own cache is neither used nor touched.
#   bench/package-cache.sh [IMAGE.qcow2]      (default: tests/image/ensure-image.sh)
# Prints `bench package-cache: cold_s=… warm_s=… ratio=…` (whole provision runs, guest destroyed
# and rebuilt in between). Needs tests/services/start.sh to have run, as root, and python3.
# TROG_BIN names a trog binary to use (a debug build will do: the guest's package installs, not
# trog, take the time measured); left out, a release build is made.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
image=${1:-$("$root/tests/image/ensure-image.sh")}
memory_mib=${TROG_BENCH_MEMORY_MIB:-1536}
vcpus=${TROG_BENCH_VCPUS:-2}
# Not the test services' port (3142): this instance starts with an empty cache of its own.
proxy_port=3143

if [[ -z ${TROG_BIN:-} ]]; then
  cargo build --quiet --release --manifest-path "$root/Cargo.toml"
  TROG_BIN=$root/target/release/trog
fi
export TROG_BIN
# The checkout's recipes, wherever the binary was copied to.
export TROG_RECIPES=${TROG_RECIPES:-$root/recipes}

work=$(mktemp -d /var/tmp/trog-bench-cache.XXXXXX)
chmod 755 "$work"
domain=bench-cache-$$.test
proxy_env=(TROG_SERVICES_STATE="$work/services" TROG_APT_PROXY_CACHE="$work/apt-cache" TROG_APT_PROXY_PORT="$proxy_port")
trog() { printf 'keepass: bench\n\n' | TROG_PROVISIONER_CONFIG=$work XDG_CACHE_HOME=$work/cache "$TROG_BIN" --credentials "$@"; }
cleanup() {
  trog destroy --purge --yes "$domain" >/dev/null 2>&1 || true
  virsh -q -c qemu:///system pool-destroy "trog-bench-cache-$$" >/dev/null 2>&1 || true
  virsh -q -c qemu:///system pool-undefine "trog-bench-cache-$$" >/dev/null 2>&1 || true
  env "${proxy_env[@]}" "$root/tests/services/apt-proxy.sh" stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

mirror=$(env "${proxy_env[@]}" "$root/tests/services/apt-proxy.sh" start)

cat >"$work/hypervisors.conf" <<CONF
[local]
libvirt_uri = qemu:///system
domain_type = qemu
pool_name = trog-bench-cache-$$
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
cat >"$work/recipes.d/$domain.yaml" <<CONF
$domain:
  _global:
    memory: $memory_mib
    cpus: $vcpus
    size: 6G
    image:
      url: file://$image
      sha256: $(sha256sum "$image" | cut -d' ' -f1)
  nginx: {}
  mariadb: {root_pw: bench-root-password}
  ufw: {}
  cron: {}
CONF
# The secret store and the guest's key exist before the clock starts.
trog new_config --new-secret-store "$domain" --out "$work/out" >/dev/null

timed_provision() {
  local started
  started=$(date +%s.%N)
  trog provision "$domain" >"$work/provision.log" 2>&1 || { cat "$work/provision.log" >&2; exit 1; }
  python3 -c "import time; print(round(time.time() - $started, 1))"
}
cold=$(timed_provision)
trog destroy --purge --yes "$domain" >/dev/null
warm=$(timed_provision)
echo "bench package-cache: cold_s=$cold warm_s=$warm ratio=$(python3 -c "print(round($cold / $warm, 2))")"
