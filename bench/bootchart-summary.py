#!/usr/bin/env python3
"""Summarises the boot charts bench/provision.sh saves (TROG_BENCH_BOOTCHART=DIR): per tool, the
median (min-max) seconds of the kernel, of userspace until sshd was started, of cloud-init's
local and network units, and of cloud-init's four stages as it counted them.
    bench/bootchart-summary.py DIR"""
import pathlib
import re
import statistics
import sys

PHASES = {
    "kernel": r"Startup finished in ([\d.]+)s \(kernel\)",
    "sshd started (userspace)": r"basic\.target @([\d.]+)s",
    "cloud-init-local.service": r"cloud-init-local\.service @[\d.]+s \+([\d.]+)s",
    "DHCP (networkd-wait-online)": r"systemd-networkd-wait-online\.service @[\d.]+s \+([\d.]+)s",
    "cloud-init.service (network)": r"cloud-init\.service @[\d.]+s \+([\d.]+)s",
    "stage init-local": r"\(init-local\) ([\d.]+) seconds",
    "stage init-network": r"\(init-network\) ([\d.]+) seconds",
    "stage modules-config": r"\(modules-config\) ([\d.]+) seconds",
    "stage modules-final": r"\(modules-final\) ([\d.]+) seconds",
}

charts = {}
for path in sorted(pathlib.Path(sys.argv[1]).glob("*-[0-9]*.txt")):
    tool = path.stem.rsplit("-", 1)[0]
    charts.setdefault(tool, []).append(path.read_text(errors="replace"))
tools = sorted(charts)
print("| phase (s) | " + " | ".join(f"{tool} ({len(charts[tool])} boots)" for tool in tools) + " |")
print("|---|" + "---|" * len(tools))
for phase, pattern in PHASES.items():
    cells = []
    for tool in tools:
        values = [float(m.group(1)) for text in charts[tool] if (m := re.search(pattern, text))]
        cells.append(f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"
                     if values else "-")
    print(f"| {phase} | " + " | ".join(cells) + " |")
