"""Benchmark: shape-check every Python file under some directories (real code, e.g. timm).

Run: `python bench/shapes_tree.py DIR_OR_FILE... [--timeout S] [-v]`. Prints every TL601-TL606
finding (on correct code each TL601-TL605 is a false positive), how many models were
checked and how (fx graph or the hooks fallback), the TL690 reasons by count (`-v` prints
every TL690), the worker's start time and the total time.
"""

from __future__ import annotations

import collections
import os
import sys
import time
from pathlib import Path

from torchlint.shapes import discover, evidence, worker_job
from torchlint.shapes.client import run_worker


def main() -> None:
    args = sys.argv[1:]
    verbose = "-v" in args
    timeout = 30.0
    if "--timeout" in args:
        at = args.index("--timeout")
        timeout = float(args[at + 1])
        del args[at : at + 2]
    paths: list[Path] = []
    for arg in args:
        if arg.startswith("-"):
            continue
        path = Path(arg)
        paths.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    files = [(str(p), p.read_text(encoding="utf-8", errors="replace")) for p in paths]
    started = time.perf_counter()
    infos = discover.scan(files)
    facts = evidence.collect(infos, files, None)
    jobs = [worker_job(info, facts) for info in infos]
    request = {
        "jobs": jobs,
        "texts": {os.path.abspath(p): t for p, t in files},
        "roots": sorted({info.root for info in infos} | {os.getcwd()}),
        "timeout": timeout,
    }
    results, worker = run_worker(request, timeout) if jobs else ({}, {})
    elapsed = time.perf_counter() - started
    codes: collections.Counter[str] = collections.Counter()
    reasons: collections.Counter[str] = collections.Counter()
    models: collections.Counter[str] = collections.Counter()
    for abspath, result in sorted(results.items()):
        shown = os.path.relpath(abspath)
        if "error" in result:
            codes["TL690"] += 1
            reasons[result["error"]] += 1
            print(f"{shown}:1:1: TL690 {result['error']}")
            continue
        for record in result.get("models", []):
            key = record["result"] if record["result"] == "skipped" else record["path"]
            models[key] += 1
        for f in result.get("findings", []):
            codes[f["code"]] += 1
            if f["code"] == "TL690":
                reasons[f["message"].split(" skipped: ", 1)[-1][:90]] += 1
            if f["code"] != "TL690" or verbose:
                where = os.path.relpath(f["path"])
                print(f"{where}:{f['line']}:{f['col']}: {f['code']} {f['message']}")
    print(
        f"\n{len(files)} files ({len(jobs)} with models) in {elapsed:.1f} s; worker start "
        f"{worker.get('ready', float('nan')):.1f} s; models: {models.get('fx', 0)} checked by fx,"
        f" {models.get('fallback', 0)} by the fallback, {models.get('skipped', 0)} skipped "
        f"(building blocks without literal arguments are checked inside their users and not "
        f"counted); findings: {dict(sorted(codes.items()))}"
    )
    if worker.get("error"):
        print(f"worker: {worker['error']}")
    for reason, count in reasons.most_common(20):
        print(f"  {count:5}  {reason}")


if __name__ == "__main__":
    main()
