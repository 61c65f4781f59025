#!/usr/bin/env bash
# Prints the path of the test guest image, building it only when the cache has none for the current
# inputs. The cache key is the sha256 of everything that decides the image's contents (the
# product's builder, the tests' build script, package list and overlay), so editing any of them
# builds a new image; the three most recently used
# images are kept. Cache: ${TROG_TEST_CACHE:-/var/cache/trog-tests}/images/<key>/.
# Only the path goes to standard output; progress goes to standard error.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${TROG_TEST_CACHE:-/var/cache/trog-tests}/images
image_name=debian-bookworm-test.qcow2
keep_images=3
lock_wait_s=1800 # another run may be building the same image

log() { printf '[ensure-image] %s\n' "$*" >&2; }

key=$(
  cd "$here"
  cat build-image.sh packages.txt ../../src/images/build_debian.sh
  find overlay -type f | LC_ALL=C sort | while read -r file; do
    printf '%s %s\n' "$file" "$(stat -c %a "$file")"
    cat "$file"
  done
)
key=$(sha256sum <<<"$key" | cut -c1-16)
dir=$cache/$key
mkdir -p "$cache"

exec 9>"$cache/.lock"
flock -w "$lock_wait_s" 9 || { log "error: waited ${lock_wait_s} s for $cache/.lock"; exit 1; }

valid() { [[ -f $dir/$image_name && -f $dir/$image_name.sha256 ]] && (cd "$dir" && sha256sum --quiet -c "$image_name.sha256" >/dev/null 2>&1); }

if valid; then
  log "cached image $key"
else
  log "building image $key (takes a minute or two)"
  rm -rf "$dir" "$dir.partial"
  started=$SECONDS
  "$here/build-image.sh" "$dir.partial" >&2
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
