# shellcheck shell=bash
# Sourced by bench/reprovision.sh and bench/refinish.sh: an installation of its own holding the
# example site's guest (etc/recipes.yaml's `_base` with `adminconfig`, and
# etc/recipes.d/example.test.yaml's nginx and data: 1 vCPU, 1024 MiB, the offline test image as
# its declared image), Debian's packages through the test services' caching apt proxy
# (tests/services/apt-proxy.sh). Removes the guest, its pool and every file it made when the
# script exits, also on failure.
# Before sourcing: `root` (the checkout) and `bench_name` (names the guest, pool and work
# directory). Settings (environment): TROG_BENCH_MEMORY_MIB (default 1024, the example's),
# TROG_BENCH_VCPUS (default 1, the example's), TROG_BENCH_LOGS (a directory: every provision's
# output is kept there as RUN.log), TROG_BIN (the trog binary; default: the checkout's debug
# build, built first: the guest's work, not trog's, is what is measured).
# Gives: `trog` (the binary on this installation, credentials piped), `write_guest BAKE ZONE
# SERVER_NAME` (the guest's file), `timed_provision RUN` (prints the seconds one `trog provision`
# took, its output in $logs/RUN.log), `work`, `logs`, `domain`.

: "${bench_name:?set bench_name before sourcing bench/example-site-lib.sh}"
image=${1:-$("$root/tests/image/ensure-image.sh")}
memory_mib=${TROG_BENCH_MEMORY_MIB:-1024}
vcpus=${TROG_BENCH_VCPUS:-1}
if [[ -z ${TROG_BIN:-} ]]; then
  cargo build --quiet --manifest-path "$root/Cargo.toml" --bin trog
  TROG_BIN=$root/target/debug/trog
fi
export TROG_RECIPES=${TROG_RECIPES:-$root/recipes}

work=$(mktemp -d "/var/tmp/trog-bench-$bench_name.XXXXXX")
chmod 755 "$work"
logs=${TROG_BENCH_LOGS:-$work/logs}
mkdir -p "$logs"
domain=bench-$bench_name-$$.test
pool=trog-bench-$bench_name-$$
uri=qemu:///system
trog() { printf 'keepass: bench\n\n' | TROG_PROVISIONER_CONFIG=$work XDG_CACHE_HOME=$work/cache "$TROG_BIN" --credentials "$@"; }
cleanup() {
  trog destroy --purge --yes "$domain" >/dev/null 2>&1 || true
  virsh -q -c "$uri" pool-destroy "$pool" >/dev/null 2>&1 || true
  virsh -q -c "$uri" pool-undefine "$pool" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

mirror=$("$root/tests/services/apt-proxy.sh" start)

cat >"$work/hypervisors.conf" <<CONF
[local]
libvirt_uri = $uri
domain_type = qemu
pool_name = $pool
pool_path = $work/pool
reserve_memory = 512
cpu_overcommit = 100
CONF
# etc/recipes.yaml's _base, with the proxy as the mirror.
cat >"$work/recipes.yaml" <<CONF
_base:
  _global:
    admin_user: siteadmin
    contact_email: ops@example.test
    distro: debian
    release: bookworm
    timezone: Etc/UTC
    mirror: $mirror
    security_mirror: $mirror-security
  adminconfig: {}
CONF
mkdir -p "$work/recipes.d/$domain"
cp "$root/etc/recipes.d/example.test/data.tar.gz" "$work/recipes.d/$domain/"
image_sha256=$(sha256sum "$image" | cut -d' ' -f1)
# etc/recipes.d/example.test.yaml's guest under this run's name, with `bake_packages: $1`, time
# zone $2 and nginx's server name $3. Without a baked image it is made over the test image; a baked
# image is built from the release and the mirror, so a pinned image is refused beside it.
write_guest() {
  local pinned=""
  if [[ $1 == false ]]; then
    pinned="    image: {url: 'file://$image', sha256: $image_sha256}"
  fi
  cat >"$work/recipes.d/$domain.yaml" <<CONF
$domain:
  _global:
    memory: $memory_mib
    cpus: $vcpus
    size: 4G
    bake_packages: $1
    timezone: $2
$pinned
  nginx:
    server_names: [$3]
    root: /srv/site/public
  data:
    site_dir: /srv/site
CONF
}
write_guest false Etc/UTC www.example.test
# The secret store and the guest's key exist before the clock starts.
trog new_config --new-secret-store "$domain" --out "$work/out" >/dev/null

# Provisions the guest as its file stands; prints the seconds the run took. $1 names the run.
timed_provision() {
  local name=$1 started
  started=$(date +%s.%N)
  if ! trog provision "$domain" >"$logs/$name.log" 2>&1; then
    echo "bench $bench_name: $name failed:" >&2
    tail -n 30 "$logs/$name.log" >&2
    exit 1
  fi
  python3 -c "import time; print(round(time.time() - $started, 1))"
}
