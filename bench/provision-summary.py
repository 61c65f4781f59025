#!/usr/bin/env python3
"""Summarises bench/provision.sh's JSON lines: per tool the median, min and max of every phase over its completed runs,
then for each peer (virt-install, kcli) trog / peer: the ratio of the medians, and the median
(min, max) of the per-pair ratios. Only pairs (rounds) where trog's run and that peer's completed
count for that peer.
    bench/provision-summary.py RESULTS.jsonl"""
import json
import statistics
import sys

runs = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
by_pair = {}
for run in runs:
    by_pair.setdefault(run["pair"], {})[run["tool"]] = run
failed = [run for run in runs if "failed" in run]
peers = sorted({run["tool"] for run in runs} - {"trog"})
phases = {"trog": ["before_boot_s", "lease_s", "ssh_s", "cloud_init_s", "finish_s"]}
phases.update({peer: ["command_s", "lease_s", "ssh_s", "cloud_init_s"] for peer in peers})


def complete(peer):
    """The pairs where trog's run and `peer`'s both completed."""
    return [tools for tools in by_pair.values()
            if "trog" in tools and peer in tools
            and "failed" not in tools["trog"] and "failed" not in tools[peer]]


def spread(values):
    return {"median": round(statistics.median(values), 2), "min": min(values), "max": max(values)}


summary = {"summary": True, "pairs": len(by_pair),
           "complete_pairs": {peer: len(complete(peer)) for peer in peers},
           "failed_runs": [f'{run["tool"]} pair {run["pair"]}: {run["failed"]}' for run in failed]}
for tool, names in phases.items():
    done = [run for run in runs if run["tool"] == tool and "failed" not in run]
    summary[tool] = {name: spread([run[name] for run in done if name in run])
                     for name in names if any(name in run for run in done)}
ratios = {}
for peer in peers:
    for trog_phase, peer_phase in [("lease_s", "lease_s"), ("ssh_s", "ssh_s"),
                                   ("cloud_init_s", "cloud_init_s"), ("finish_s", "cloud_init_s")]:
        pairs = [(tools["trog"][trog_phase], tools[peer][peer_phase]) for tools in complete(peer)
                 if trog_phase in tools["trog"] and peer_phase in tools[peer]]
        if not pairs:
            continue
        per_pair = [trog / other for trog, other in pairs]
        ratios[f"trog_{trog_phase}/{peer}_{peer_phase}"] = {
            "of_medians": round(statistics.median(t for t, _ in pairs)
                                / statistics.median(p for _, p in pairs), 3),
            "per_pair": {key: round(value, 3) for key, value in spread(per_pair).items()},
        }
summary["ratios"] = ratios
print(json.dumps(summary))
