"""Benchmark: shape-check every Python file under some directories (real code, e.g. timm).

Run: `python bench/shapes_tree.py DIR_OR_FILE... [--timeout S] [-v]`. Prints every TL601-TL606
finding (on correct code each TL601-TL605 is a false positive), the TL690 reasons by count
(`-v` prints every TL690), worker start and total time.
"""

from __future__ import annotations

import collections
import sys
import time
from pathlib import Path

from torchlint.shapes import check_files


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
    results = check_files(files, timeout=timeout)
    elapsed = time.perf_counter() - started
    counts: collections.Counter[str] = collections.Counter()
    reasons: collections.Counter[str] = collections.Counter()
    for diagnostics in results.values():
        for d in diagnostics:
            counts[d.code] += 1
            if d.code == "TL690":
                reasons[d.message.split(" skipped: ", 1)[-1][:90]] += 1
            if d.code != "TL690" or verbose or "internal error" in d.message:
                print(f"{d.path}:{d.line}:{d.column}: {d.code} {d.message}")
    print(f"\n{len(files)} files in {elapsed:.1f} s; findings: {dict(sorted(counts.items()))}")
    for reason, count in reasons.most_common(20):
        print(f"  {count:5}  {reason}")


if __name__ == "__main__":
    main()
