"""Benchmark: where the shape stage's time goes, model by model, and what the time budget hides.

Run: `python bench/model_seconds.py DIR [--every N] [--offset K] [--audit]`. Checks the Python
files under DIR (with `--every N`, only every Nth of DIR's subfolders: transformers' model
families) in one worker, as a run does, and reports:

- the seconds of the checked models and of the skipped ones, by how long each took;
- the skipped models' seconds grouped by their TL690 reason, with the slowest of each;
- the slowest files.

A model whose check runs past its CPU budget (a quarter of the file's time limit) is skipped,
and a faster machine would finish it: with `--audit`, the files of such models are checked
again with ten times the time limit, and any TL601-TL605 they then reach is printed (on
released code each is a false positive until a real forward shows otherwise).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from torchlint import shapes
from torchlint.shapes import evidence
from torchlint.shapes.client import run_worker

TIMEOUT = 20.0
BUCKETS = [(0.0, 0.5), (0.5, 1.0), (1.0, 2.0), (2.0, 3.0), (3.0, 5.0), (5.0, float("inf"))]


def _files(root: Path, every: int, offset: int) -> list[tuple[str, str]]:
    folders = sorted(p for p in root.iterdir() if p.is_dir()) if every > 1 else [root]
    paths = [p for folder in folders[offset::every] for p in sorted(folder.rglob("*.py"))]
    return [(str(p), p.read_text(encoding="utf-8", errors="replace")) for p in paths]


def _check(files: list[tuple[str, str]], timeout: float) -> dict[str, Any]:
    """Per abspath, the worker's answer for the files of `files` that define models."""
    scan = shapes._scan_files(files)
    facts = evidence.collect(scan.infos, files, None, scan.trees)
    # As a default run: TL606 (the sizes a model is limited to) is off.
    jobs = [{**shapes.worker_job(info, facts), "size_conditions": False} for info in scan.infos]
    request = {
        "jobs": jobs,
        "texts": {os.path.abspath(path): text for path, text in files},
        "roots": sorted({info.root for info in scan.infos} | {os.getcwd()}),
        "timeout": timeout,
    }
    return run_worker(request, timeout)[0] if jobs else {}


def _reason(message: str) -> str:
    reason = message.split(" skipped: ", 1)[-1]
    reason = re.sub(r"line \d+", "line N", reason)
    return re.sub(r"`[^`]*`", "`X`", reason)[:80]


def _skips(results: dict[str, Any]) -> list[tuple[float, str, str, str]]:
    """(seconds, file, model, reason) of every skipped model."""
    skipped = []
    for abspath, result in results.items():
        told = [f["message"] for f in result.get("findings", []) if f.get("code") == "TL690"]
        for record in result.get("models", []):
            if record.get("result") != "skipped":
                continue
            label = record["model"]
            message = next((m for m in told if f" {label} skipped" in m), None)
            reason = _reason(message) if message else "(no TL690 of its own in the answer)"
            skipped.append((record["seconds"], abspath, label, reason))
    return skipped


def _report(results: dict[str, Any], shown: Path) -> None:
    records = [r for result in results.values() for r in result.get("models", [])]
    checked = [r["seconds"] for r in records if r.get("result") != "skipped"]
    skipped = [r["seconds"] for r in records if r.get("result") == "skipped"]
    print(f"models: {len(checked)} checked in {sum(checked):.1f} s, ", end="")
    print(f"{len(skipped)} skipped in {sum(skipped):.1f} s")
    print("seconds per model   checked            skipped")
    for low, high in BUCKETS:
        ok = [s for s in checked if low <= s < high]
        no = [s for s in skipped if low <= s < high]
        print(f"  [{low:g}, {high:g})".ljust(20), end="")
        print(f"{len(ok):5} {sum(ok):7.1f} s    {len(no):5} {sum(no):7.1f} s")
    by_reason: dict[str, list[tuple[float, str]]] = collections.defaultdict(list)
    for seconds, abspath, label, reason in _skips(results):
        by_reason[reason].append((seconds, f"{os.path.relpath(abspath, shown)}:{label}"))
    print("\nskipped models by reason (seconds, count, the slowest)")
    ranked = sorted(by_reason.items(), key=lambda item: -sum(s for s, _ in item[1]))
    for reason, items in ranked[:12]:
        print(f"{sum(s for s, _ in items):7.1f} s {len(items):4}  {reason}")
        for seconds, where in sorted(items, reverse=True)[:2]:
            print(f"{'':16}{seconds:5.2f} s  {where}")
    print("\nslowest files (seconds, models)")
    timed = [(r.get("seconds", 0.0), p, len(r.get("models", []))) for p, r in results.items()]
    for seconds, abspath, count in sorted(timed, reverse=True)[:10]:
        print(f"  {seconds:6.2f} s {count:4}  {os.path.relpath(abspath, shown)}")


def _audit(files: list[tuple[str, str]], results: dict[str, Any], shown: Path) -> None:
    over = {abspath for _, abspath, _, reason in _skips(results) if "time budget" in reason}
    print(f"\naudit: {len(over)} files with a model past its time budget, checked again")
    again = _check([f for f in files if os.path.abspath(f[0]) in over], TIMEOUT * 10)
    found = [
        (os.path.relpath(abspath, shown), f)
        for abspath, result in sorted(again.items())
        for f in result.get("findings", [])
        if f.get("code", "") in {"TL601", "TL602", "TL603", "TL604", "TL605"}
    ]
    for where, f in found:
        print(f"  {f['code']} {where}:{f['line']} {f['message'][:160]}")
    print(f"audit: {len(found)} TL601-TL605 behind the budget")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--every", type=int, default=1, help="every Nth subfolder (1: all)")
    parser.add_argument("--offset", type=int, default=0)
    parser.add_argument("--audit", action="store_true", help="recheck budget skips unbudgeted")
    args = parser.parse_args()
    files = _files(args.folder, args.every, args.offset)
    started = time.perf_counter()
    results = _check(files, TIMEOUT)
    print(f"{len(files)} files, {len(results)} with models, {time.perf_counter() - started:.0f} s")
    _report(results, args.folder)
    if args.audit:
        _audit(files, results, args.folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
