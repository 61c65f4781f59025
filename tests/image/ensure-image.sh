#!/usr/bin/env bash
# Prints the path of the test guest image, building it only when the cache has none for the current
# inputs. The image is what `trog image build` makes (src/images/build_debian.sh, with the packages
# of src/images/base_packages.txt), plus what only test guests need: the packages of packages.txt
# (`--include`) and the files under overlay/ (`--overlay`: an ed25519 host key only, apt settings
# for the tests' unsigned mirror).
# The cache key is the sha256 of everything that decides the image's contents (the builder, how
# trog calls it, both package lists, the overlay's files and this script's call), so editing any of
# them builds a new image; the three most recently used images are kept.
# Cache: ${TROG_TEST_CACHE:-/var/cache/trog-tests}/images/<key>/.
# trog is $TROG_BIN when set, else this checkout's (`cargo run`, which builds it when needed).
# TROG_IMAGE_MIRROR and TROG_IMAGE_SECURITY_MIRROR override the Debian mirrors.
# Only the path goes to standard output; progress goes to standard error.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cache=${TROG_TEST_CACHE:-/var/cache/trog-tests}/images
image_name=debian-bookworm-test.qcow2
keep_images=3
lock_wait_s=1800 # another run may be building the same image
mirror=${TROG_IMAGE_MIRROR:-http://deb.debian.org/debian}
security_mirror=${TROG_IMAGE_SECURITY_MIRROR:-http://deb.debian.org/debian-security}

log() { printf '[ensure-image] %s\n' "$*" >&2; }

overlay_files() { (cd "$here/overlay" && find . -type f -print0 | sort -z | xargs -0 sha256sum); }
key=$( {
  cat "$root/src/images/build_debian.sh" "$root/src/images/base_packages.txt" \
    "$root/src/images/build.rs" "$here/packages.txt" "${BASH_SOURCE[0]}"
  overlay_files
} | sha256sum | cut -c1-16)
dir=$cache/$key
mkdir -p "$cache"

exec 9>"$cache/.lock"
flock -w "$lock_wait_s" 9 || { log "error: waited ${lock_wait_s} s for $cache/.lock"; exit 1; }

valid() { [[ -f $dir/$image_name && -f $dir/$image_name.sha256 ]] && (cd "$dir" && sha256sum --quiet -c "$image_name.sha256" >/dev/null 2>&1); }

trog() {
  if [[ -n ${TROG_BIN:-} ]]; then
    "$TROG_BIN" "$@"
  else
    (cd "$root" && cargo run --quiet --bin trog -- "$@")
  fi
}

if valid; then
  log "cached image $key"
else
  log "building image $key with trog image build (takes a few minutes)"
  rm -rf "$dir" "$dir.partial"
  mkdir -p "$dir.partial"
  started=$SECONDS
  packages=$(grep -v '^[[:space:]]*\(#\|$\)' "$here/packages.txt" | tr '\n' ',' | sed 's/,$//')
  # trog files what it builds in its image cache, here one of the build's own: the one image in it.
  XDG_CACHE_HOME=$dir.partial/cache trog image build --distro debian --release bookworm \
    --mirror "$mirror" --security-mirror "$security_mirror" \
    --include "$packages" --overlay "$here/overlay" >&2
  built=("$dir.partial"/cache/trog/images/sha256-*.img)
  [[ ${#built[@]} -eq 1 && -f ${built[0]} ]] || { log "error: trog image build left no image in $dir.partial/cache"; exit 1; }
  mv "${built[0]}" "$dir.partial/$image_name"
  mv "${built[0]%.img}.packages" "$dir.partial/packages"
  rm -rf "$dir.partial/cache"
  (cd "$dir.partial" && sha256sum "$image_name" >"$image_name.sha256")
  mv "$dir.partial" "$dir"
  valid || { log "error: freshly built image fails its checksum"; exit 1; }
  log "built image $key in $((SECONDS - started)) s"
fi
touch "$dir"

# Keep the most recently used images only.
ls -1dt "$cache"/*/ 2>/dev/null | tail -n +$((keep_images + 1)) | while read -r old; do
  [[ $old == "$dir/" ]] || { rm -rf "$old"; log "removed old image ${old%/}"; }
done

echo "$dir/$image_name"
