"""Benchmark: a cold default run (`torchlint --no-cache`, shape checks on) over transformers'
model families, in CPU seconds.

Run: `python bench/transformers_cpu.py [--every N] [--offset K] [--json OUT]`. Checks every
Nth family folder of the installed `transformers/models` (all of them with `--every 1`, the
target run) in one torchlint process, the way a user's `torchlint DIR` does. On a shared
machine the wall time says little, so reported are the CPU seconds of the run with every
process it started (user + system), their half as the wall time two idle cores would take
(target for the whole folder: <= 300 s), the wall time, the TL601-TL605 findings (the
models are released and tested: each one is a false positive until a real forward shows
otherwise), TL607, and the TL690 skips grouped by reason (as `zoo.py` groups them).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from zoo import _reason  # a sibling script


def families(every: int, offset: int) -> list[Path]:
    spec = importlib.util.find_spec("transformers")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("transformers is not installed")
    root = Path(next(iter(spec.submodule_search_locations))) / "models"
    folders = sorted(p for p in root.iterdir() if p.is_dir() and p.name[0] != "_")
    return folders[offset::every]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=int, default=13, help="every Nth family (1: all)")
    parser.add_argument("--offset", type=int, default=4, help="the first family's index")
    parser.add_argument("--json", type=Path, help="write the figures and every TL6xx here")
    args = parser.parse_args()
    folders = families(args.every, args.offset)
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        command = [sys.executable, "-m", "torchlint", "check", "--no-cache", "--exit-zero"]
        command += ["--extend-select", "TL690", "--output-format", "json", "-o", str(report)]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run([*command, *map(str, folders)], cwd=scratch, capture_output=True)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        found = json.loads(report.read_text()) if report.exists() else []
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    shapes = [d for d in found if str(d.get("code", "")).startswith("TL6")]
    codes = Counter(d["code"] for d in shapes)
    reasons = Counter(_reason(d["message"]) for d in shapes if d["code"] == "TL690")
    figures = {
        "families": len(folders),
        "cpu_s": round(cpu, 1),
        "two_core_s": round(cpu / 2, 1),
        "wall_s": round(wall, 1),
        "TL601-605": sum(n for c, n in codes.items() if c in {f"TL60{i}" for i in range(1, 6)}),
        "TL607": codes.get("TL607", 0),
        "TL690": codes.get("TL690", 0),
        "TL690 by reason": dict(reasons.most_common()),
    }
    print(json.dumps(figures, indent=1))
    for d in shapes:
        if d["code"] in {f"TL60{i}" for i in range(1, 6)}:
            print(f"  {d['code']} {d.get('filename', '')}:{d.get('location', {}).get('row', '')}")
    if args.json:
        args.json.write_text(json.dumps({**figures, "diagnostics": shapes}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
