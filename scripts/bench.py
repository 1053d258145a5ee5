"""Benchmark torchlint against the raw LibCST parse and against TorchFix, on the same files.

Prints ratios (these machines are noisy; absolute times are for context only):
  (a) libcst.parse_module of every file, one process
  (b) torchlint --no-cache --jobs 1
  (c) torchlint --no-cache, all cores
  (d) torchlint, warm cache
  (e) TorchFix on torch/optim, against (c) on the same folder

Usage: python scripts/bench.py [--corpus DIR ...] [--torchfix PATH | --skip-torchfix]
Default corpus: the installed torch package, plus transformers/models when installed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import libcst


def package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def python_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if p.is_file())


def time_parse(files: list[Path]) -> float:
    start = time.perf_counter()
    for path in files:
        with contextlib.suppress(Exception):
            libcst.parse_module(path.read_bytes())
    return time.perf_counter() - start


def time_command(command: list[str], cwd: Path | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def torchlint(*args: str) -> list[str]:
    return [sys.executable, "-m", "torchlint", "check", "--exit-zero", "--no-shapes", *args]


def bench_corpus(root: Path) -> dict[str, float]:
    files = python_files(root)
    print(f"\n== {root} ({len(files)} files)")
    cache = Path(tempfile.mkdtemp(prefix="torchlint-bench-"))
    try:
        results = {
            "a_parse": time_parse(files),
            "b_jobs1": time_command(torchlint("--no-cache", "--jobs", "1", str(root))),
            "c_all_cores": time_command(torchlint("--no-cache", str(root))),
        }
        time_command(torchlint("--cache-dir", str(cache), str(root)))  # fill the cache
        results["d_warm"] = time_command(torchlint("--cache-dir", str(cache), str(root)))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    cores = os.cpu_count()
    print(f"(a) libcst parse, 1 process      {results['a_parse']:7.2f} s")
    print(
        f"(b) torchlint --jobs 1            {results['b_jobs1']:7.2f} s  = (a) x "
        f"{results['b_jobs1'] / results['a_parse']:.2f}"
    )
    print(
        f"(c) torchlint, {cores} cores        {results['c_all_cores']:7.2f} s  = (a) x "
        f"{results['c_all_cores'] / results['a_parse']:.2f}"
    )
    print(f"(d) torchlint, warm cache         {results['d_warm']:7.2f} s")
    return results


def bench_torchfix(root: Path, torchfix: str | None) -> None:
    torchfix = torchfix or shutil.which("torchfix")
    if torchfix is None:
        print("\n(e) TorchFix not found (pip install torchfix, or pass --torchfix PATH); skipped")
        return
    print(f"\n== TorchFix vs torchlint on {root}")
    ours = time_command(torchlint("--no-cache", str(root)))
    theirs = time_command([torchfix, str(root)])
    print(f"torchlint (all cores)  {ours:7.2f} s")
    print(f"TorchFix               {theirs:7.2f} s  = torchlint x {theirs / ours:.1f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", action="append", type=Path, help="folder(s) to lint")
    parser.add_argument("--skip-torchfix", action="store_true")
    parser.add_argument(
        "--torchfix",
        metavar="PATH",
        help="the torchfix executable (TorchFix pins its own libcst: a separate venv is best)",
    )
    args = parser.parse_args()
    corpora = args.corpus or [
        p for p in (package_dir("torch"), package_dir("transformers")) if p is not None
    ]
    corpora = [c / "models" if c.name == "transformers" else c for c in corpora]
    if not corpora:
        print("no corpus: install torch or pass --corpus DIR", file=sys.stderr)
        return 2
    for corpus in corpora:
        bench_corpus(corpus)
    torch_dir = package_dir("torch")
    if torch_dir is not None and not args.skip_torchfix:
        bench_torchfix(torch_dir / "optim", args.torchfix)
    return 0


if __name__ == "__main__":
    sys.exit(main())
