#!/usr/bin/env bash
# Re-finish benchmark (not a test): the example site's guest (bench/example-site-lib.sh), built
# once, then finished again over SSH after a change that reaches only its payload (nginx's
# server name), with the recipes of a baseline revision and with the checkout's, alternating
# (odd pairs the baseline first). This is what a guest pays whenever its recipes or their
# settings change: the finish (apt, the Makefile, the recipes' tests) on a running guest, no boot.
#   TROG_BENCH_BASELINE=REV bench/refinish.sh [IMAGE.qcow2]   (default image: tests/image/ensure-image.sh)
# Settings (environment), besides the library's:
#   TROG_BENCH_BASELINE    the git revision whose recipes/ is the peer (required)
#   TROG_BENCH_PAIRS       pairs to run (default 5)
# Prints one line per run, then the medians of each side (the whole `trog provision` and its
# finish step) and their ratio, checkout ÷ baseline.
# Run it through the guest-tests lock: flock /run/lock/trog-guest-tests.lock bench/refinish.sh
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
baseline=${TROG_BENCH_BASELINE:?set TROG_BENCH_BASELINE to the git revision whose recipes are the peer}
git -C "$root" rev-parse --verify --quiet "$baseline^{commit}" >/dev/null ||
  { echo "bench refinish: $baseline is no revision of $root" >&2; exit 2; }
bench_name=refinish
# shellcheck source=bench/example-site-lib.sh
source "$root/bench/example-site-lib.sh"
pairs=${TROG_BENCH_PAIRS:-5}

baseline_recipes=$work/baseline
mkdir -p "$baseline_recipes"
git -C "$root" archive "$baseline" recipes | tar -x -C "$baseline_recipes"
declare -A recipes_of=([baseline]=$baseline_recipes/recipes [checkout]=$root/recipes)

first=$(TROG_RECIPES=${recipes_of[baseline]} timed_provision first)
echo "{\"run\": \"first\", \"seconds\": $first}"

run=0
for ((pair = 1; pair <= pairs; pair++)); do
  if ((pair % 2 == 1)); then order=(baseline checkout); else order=(checkout baseline); fi
  for side in "${order[@]}"; do
    run=$((run + 1))
    write_guest false Etc/UTC "www$run.example.test"
    name=$side-$pair
    seconds=$(TROG_RECIPES=${recipes_of[$side]} timed_provision "$name")
    if grep -q "create root disk" "$logs/$name.log" || ! grep -q "finish over SSH" "$logs/$name.log"; then
      echo "bench refinish: $name did more or less than finish the running guest again" >&2
      exit 1
    fi
    echo "{\"run\": \"$name\", \"pair\": $pair, \"side\": \"$side\", \"seconds\": $seconds}"
  done
done

python3 - "$logs" "$baseline" <<'PY'
import re, statistics, sys, pathlib
logs, baseline = pathlib.Path(sys.argv[1]), sys.argv[2]
def medians(side):
    whole, finish = [], []
    for log in sorted(logs.glob(f"{side}-*.log")):
        text = log.read_text()
        whole.append(float(re.search(r"provisioned in ([0-9.]+)s", text).group(1)))
        finish.append(float(re.search(r"^\s+([0-9.]+)s  finish over SSH", text, re.M).group(1)))
    return statistics.median(whole), statistics.median(finish), len(whole)
bw, bf, n = medians("baseline")
cw, cf, _ = medians("checkout")
print(f"bench refinish: pairs={n} baseline={baseline} baseline_median_s={bw:.1f} "
      f"checkout_median_s={cw:.1f} ratio={cw / bw:.2f} baseline_finish_s={bf:.1f} "
      f"checkout_finish_s={cf:.1f} finish_ratio={cf / bf:.2f}")
PY
