#!/usr/bin/env bash
# Builds the small Debian bookworm guest image the end-to-end tests boot, with the product's own
# image builder (src/images/build_debian.sh, what `trog image build` runs: mmdebstrap, no loop
# devices or mounts):
#   tests/image/build-image.sh OUT_DIR
# writes OUT_DIR/debian-bookworm-test.qcow2 and OUT_DIR/debian-bookworm-test.qcow2.sha256.
#
# What only a test guest needs comes on top: the packages of packages.txt (the guest reaches no
# mirror, so whatever a test runs must be in the image) and the files under overlay/ (an ed25519
# host key only; apt accepting the tests' unsigned mirror). The builder is called directly rather
# than through `trog image build`, whose base package list adds what a test guest does not need
# (systemd-resolved made every test boot slower under TCG).
#
# TROG_IMAGE_MIRROR and TROG_IMAGE_SECURITY_MIRROR override the Debian mirrors.
set -euo pipefail

usage() { echo "usage: $0 OUT_DIR" >&2; exit 2; }
[[ $# -eq 1 ]] || usage

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
builder=$here/../../src/images/build_debian.sh
out_dir=$1
mirror=${TROG_IMAGE_MIRROR:-http://deb.debian.org/debian}
security_mirror=${TROG_IMAGE_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
image_name=debian-bookworm-test.qcow2

command -v sha256sum >/dev/null || { echo "build-image: sha256sum is missing (coreutils)" >&2; exit 1; }
mkdir -p "$out_dir"
out_dir=$(cd "$out_dir" && pwd)
work=$(mktemp -d "$out_dir/.build-image.XXXXXX")
trap 'rm -rf "$work"' EXIT

packages=$(grep -v '^[[:space:]]*\(#\|$\)' "$here/packages.txt" | tr '\n' ',' | sed 's/,$//')
bash "$builder" "$work" bookworm "$mirror" "$security_mirror" "$packages" "$here/overlay"

mv "$work/image.qcow2" "$work/$image_name"
(cd "$work" && sha256sum "$image_name" >"$image_name.sha256")
mv -f "$work/$image_name" "$out_dir/$image_name"
mv -f "$work/$image_name.sha256" "$out_dir/$image_name.sha256"
