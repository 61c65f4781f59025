#!/usr/bin/env bash
# Reprovision benchmark (not a test): the example site's guest (etc/recipes.yaml's `_base` and
# etc/recipes.d/example.test.yaml: adminconfig, nginx, data, with the distro's own packages)
# rebuilt with its root disk replaced, without and with a baked image (`bake_packages`),
# alternating (odd pairs plain first, even pairs baked first), through the test services' caching
# apt proxy (tests/services/apt-proxy.sh), from the offline test image.
#   bench/reprovision.sh [IMAGE.qcow2]      (default: tests/image/ensure-image.sh)
# Settings (environment):
#   TROG_BENCH_PAIRS       pairs to run (default 5)
#   TROG_BENCH_MEMORY_MIB  the guest's memory (default 1024, the example's)
#   TROG_BENCH_VCPUS       its vCPUs (default 1, the example's)
#   TROG_BENCH_LOGS        a directory: every provision's output is kept there as RUN.log
#   TROG_BIN               the trog binary (default: the checkout's debug build, built first; the
#                          guest's work, not trog's, is what is measured)
# First the guest is built once without a baked image (`first_plain`), then rebuilt with
# `bake_packages` on and no baked image yet (`first_baked`: the image build included). Each
# rebuild changes the guest's `timezone` (`Etc/UTC` and `UTC` in turn), which reaches its seed:
# the plan replaces the root disk as any such change does (the data recipe's files backed up
# first and restored after), boots it and finishes it. The time is the whole `trog provision`
# run (plan, backup, upload, boot, cloud-init, finish, restore and the recipes' tests). Prints one line per run, then the medians of each side, their ratio, and
# the median of each step of the baked runs (where their time goes).
# Run it through the guest-tests lock: flock /run/lock/trog-guest-tests.lock bench/reprovision.sh
# Removes the guest, its pool and every file it made, also on failure.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bench_name=reprovision
# shellcheck source=bench/example-site-lib.sh
source "$root/bench/example-site-lib.sh"
pairs=${TROG_BENCH_PAIRS:-5}

# The time zone the next rebuild gives the guest: a change of it makes a new root disk.
zone=Etc/UTC
next_zone() { if [[ $zone == Etc/UTC ]]; then zone=UTC; else zone=Etc/UTC; fi; }

# Provisions the guest with `bake_packages: $2` and time zone $3; prints the seconds the run
# took. $1 names it.
timed_rebuild() {
  write_guest "$2" "$3" www.example.test
  timed_provision "$1"
}

first_plain=$(timed_rebuild first-plain false "$zone")
echo "{\"run\": \"first_plain\", \"seconds\": $first_plain}"
next_zone
first_baked=$(timed_rebuild first-baked true "$zone")
echo "{\"run\": \"first_baked\", \"seconds\": $first_baked, \"note\": \"image build included\"}"
grep -q "base image: baked image .*built by this run" "$logs/first-baked.log" || {
  echo "bench reprovision: the first baked run did not build and use a baked image" >&2
  exit 1
}

plain=() baked=()
for ((pair = 1; pair <= pairs; pair++)); do
  if ((pair % 2 == 1)); then order=(false true); else order=(true false); fi
  for bake in "${order[@]}"; do
    next_zone
    if [[ $bake == true ]]; then name=baked-$pair; else name=plain-$pair; fi
    seconds=$(timed_rebuild "$name" "$bake" "$zone")
    grep -q "create root disk" "$logs/$name.log" || {
      echo "bench reprovision: $name made no new root disk" >&2
      exit 1
    }
    grep -q "finish over SSH" "$logs/$name.log" || {
      echo "bench reprovision: $name did not finish the guest" >&2
      exit 1
    }
    if [[ $bake == true ]]; then
      grep -q "base image: baked image " "$logs/$name.log" || {
        echo "bench reprovision: $name did not use the baked image" >&2
        exit 1
      }
      baked+=("$seconds")
    else
      plain+=("$seconds")
    fi
    echo "{\"run\": \"$name\", \"pair\": $pair, \"baked\": $bake, \"seconds\": $seconds}"
  done
done

python3 - "$logs" "${plain[*]}" "${baked[*]}" "$first_plain" "$first_baked" <<'PY'
import re, statistics, sys, pathlib
logs, plain, baked, first_plain, first_baked = sys.argv[1:]
plain = [float(x) for x in plain.split()]
baked = [float(x) for x in baked.split()]
mp, mb = statistics.median(plain), statistics.median(baked)
print(f"bench reprovision: pairs={len(plain)} plain_median_s={mp:.1f} baked_median_s={mb:.1f} "
      f"ratio={mb / mp:.2f} first_plain_s={first_plain} first_baked_s={first_baked} "
      f"first_ratio={float(first_baked) / float(first_plain):.2f}")
for side in ("baked", "plain"):
    steps = {}
    for log in sorted(pathlib.Path(logs).glob(f"{side}-*.log")):
        for line in log.read_text().splitlines():
            found = re.match(r"\s+([0-9.]+)s  (.*)$", line)
            if found:
                step = re.sub(r"[0-9a-f]{12,}", "…", found.group(2))
                steps.setdefault(step, []).append(float(found.group(1)))
    for step, seconds in steps.items():
        print(f"  {side} step median {statistics.median(seconds):7.1f}s  {step}")
PY
