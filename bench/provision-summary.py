#!/usr/bin/env python3
"""Summarises bench/provision.sh's JSON lines: per tool the median, min and max of every phase,
then trog / virt-install: the ratio of the medians, and the median (min, max) of the per-pair
ratios. Only pairs where both runs completed count.
    bench/provision-summary.py RESULTS.jsonl"""
import json
import statistics
import sys

runs = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
by_pair = {}
for run in runs:
    by_pair.setdefault(run["pair"], {})[run["tool"]] = run
complete = {pair: tools for pair, tools in by_pair.items()
            if len(tools) == 2 and not any("failed" in run for run in tools.values())}
failed = [run for run in runs if "failed" in run]
phases = {"trog": ["before_boot_s", "lease_s", "ssh_s", "cloud_init_s", "finish_s"],
          "virt-install": ["command_s", "lease_s", "ssh_s", "cloud_init_s"]}


def spread(values):
    return {"median": round(statistics.median(values), 2), "min": min(values), "max": max(values)}


summary = {"summary": True, "pairs": len(by_pair), "complete_pairs": len(complete),
           "failed_runs": [f'{run["tool"]} pair {run["pair"]}: {run["failed"]}' for run in failed]}
for tool, names in phases.items():
    summary[tool] = {name: spread([tools[tool][name] for tools in complete.values()
                                   if name in tools[tool]])
                     for name in names
                     if any(name in tools[tool] for tools in complete.values())}
ratios = {}
for trog_phase, peer_phase in [("lease_s", "lease_s"), ("ssh_s", "ssh_s"),
                               ("cloud_init_s", "cloud_init_s"), ("finish_s", "cloud_init_s")]:
    pairs = [(tools["trog"][trog_phase], tools["virt-install"][peer_phase])
             for tools in complete.values()
             if trog_phase in tools["trog"] and peer_phase in tools["virt-install"]]
    if not pairs:
        continue
    per_pair = [trog / peer for trog, peer in pairs]
    ratios[f"trog_{trog_phase}/virt-install_{peer_phase}"] = {
        "of_medians": round(statistics.median(t for t, _ in pairs)
                            / statistics.median(p for _, p in pairs), 3),
        "per_pair": {key: round(value, 3) for key, value in spread(per_pair).items()},
    }
summary["ratios"] = ratios
print(json.dumps(summary))
