"""How long the shape worker takes to start, and where that time goes.

    python bench/worker_start.py [--repeat 3] [--model examples/models.py]

Prints, best of `--repeat` fresh processes:

- the wall time from starting `python -m torchlint.shapes.worker` to its `ready` event, and
  the phases the worker reports (importing torch, importing the engine, setting up the
  sandbox);
- what the worker's imports cost, by package (`python -X importtime`);
- what the fake-tensor machinery costs when a check first needs it (`compat.load_internals`,
  which a run pays only once a model runs on fake tensors);
- a whole `torchlint shapes` run on one model file, against `import torch` alone.

Target: the worker is ready within 1.5 s (about `import torch` plus 0.5 s).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOAD_INTERNALS = """
import time
import torch
from torchlint.shapes import compat
started = time.perf_counter()
compat.load_internals()
print(time.perf_counter() - started)
"""


def worker_start() -> tuple[float, dict[str, float]]:
    """Wall seconds from spawning a worker to its `ready` event, and its reported phases."""
    with tempfile.TemporaryDirectory() as private:
        request = {"jobs": [], "texts": {}, "roots": [private], "timeout": 20, "private": private}
        started = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-m", "torchlint.shapes.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=private,
        )
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(json.dumps(request).encode())
        process.stdin.close()
        for line in process.stdout:
            event = json.loads(line)
            if event.get("event") == "ready":
                wall = time.perf_counter() - started
                process.kill()
                process.wait()
                return wall, event.get("phases") or {}
        process.wait()
    raise SystemExit("the worker stopped before it was ready")


def import_costs() -> dict[str, float]:
    """Seconds per package the worker module's imports take (cumulative, top level only)."""
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import torchlint.shapes.worker"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    costs: dict[str, float] = defaultdict(float)
    for line in run.stderr.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+(\d+) \|( +)(\S+)", line)
        if match and len(match.group(2)) == 3:  # imported by the worker module itself
            name = match.group(3)
            package = name if name.startswith("torchlint") else name.split(".")[0]
            costs[package] += int(match.group(1)) / 1e6
    return dict(costs)


def timed(command: list[str], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - started)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (best kept)")
    parser.add_argument("--model", default="examples/models.py", help="a file with one model")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    runs = [worker_start() for _ in range(args.repeat)]
    wall, phases = min(runs, key=lambda run: run[0])
    torch_alone = timed([sys.executable, "-c", "import torch"], args.repeat)
    print(f"{'import torch (fresh python)':<40} {torch_alone:6.2f} s")
    print(f"{'worker start, spawn to ready':<40} {wall:6.2f} s  ({wall / torch_alone:.2f}x torch)")
    for name, seconds in phases.items():
        print(f"  {name:<38} {seconds:6.2f} s")
    print("worker imports by package (-X importtime, cumulative):")
    costs = import_costs()
    for name, seconds in sorted(costs.items(), key=lambda item: -item[1])[:8]:
        print(f"  {name:<38} {seconds:6.2f} s")
    internals = min(
        float(
            subprocess.run(
                [sys.executable, "-c", LOAD_INTERNALS], capture_output=True, text=True, cwd=ROOT
            ).stdout
            or "nan"
        )
        for _ in range(args.repeat)
    )
    print(f"{'fake tensors on first use (lazy)':<40} {internals:6.2f} s")
    command = [sys.executable, "-m", "torchlint", "shapes", args.model]
    check = timed(command, args.repeat)
    print(
        f"{'torchlint shapes ' + args.model:<40} {check:6.2f} s  ({check / torch_alone:.2f}x torch)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
