"""Benchmark: the shape checks of a user's run over whole repositories (tutorials, scripts
and notebooks), the way `torchlint DIR` runs them.

Run: `python bench/shapes_repos.py TREE [TREE ...] [--json OUT]`. Each TREE is an extracted
source tree (PyTorch-GAN, pytorch-tutorial, deeplearning-models, a course's notebooks ...);
its folder name names it in the report. One `torchlint check --no-cache --select TL6
--extend-select TL690` process runs per tree. Reported per tree: Python files and notebooks,
the model classes they define (with a `forward`) and how many were checked (those without a
TL690), the TL601-TL607 findings (each listed with its message: on released tutorials every
one is a false positive until a real run shows otherwise), the models left unchecked
(TL690) grouped by reason, and the wall time. The trees are not part of this repository:
fetch them (their snapshots are named in `bench/real_code_verdicts.toml`) and extract their
files.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

_FINDINGS = {f"TL60{i}" for i in range(1, 8)}


def reason(message: str) -> str:
    """A TL690's reason with its names, numbers and lines left out, to group alike skips."""
    text = message.split(" skipped: ", 1)[-1]
    text = re.sub(r"`[^`]*`", "X", text)
    text = re.sub(r"\(line \d+.*", "", text)
    text = re.sub(r"\(give .*", "", text)
    return re.sub(r"\d+", "#", text).strip()[:90]


def model_classes(tree: Path) -> set[tuple[str, str]]:
    """The `nn.Module` classes with a `forward` that the tree's files and notebooks define,
    as (path, class name)."""
    from torchlint.inputs import python_source
    from torchlint.shapes import discover

    files = []
    for path in sorted([*tree.rglob("*.py"), *tree.rglob("*.ipynb")]):
        source = python_source(str(path), path.read_bytes())
        if source is not None:
            files.append((str(path), source))
    found = set()
    for info in discover.scan(files):
        for name, cls in info.classes.items():
            if any(getattr(item, "name", "") == "forward" for item in cls.node.body):
                found.add((str(Path(info.abspath).resolve()), name))
    return found


def _skipped_class(message: str) -> str:
    """The class a TL690 names ("shape check of Net skipped: ...")."""
    head = message.removeprefix("shape check of ")
    return head.split(" skipped", 1)[0]


def run_tree(tree: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        command = [sys.executable, "-m", "torchlint", "check", "--no-cache", "--exit-zero"]
        command += ["--select", "TL6", "--extend-select", "TL690", "--output-format", "json"]
        started = time.perf_counter()
        subprocess.run(
            [*command, "-o", str(report), str(tree)], cwd=scratch, capture_output=True, check=False
        )
        wall = time.perf_counter() - started
        found = json.loads(report.read_text()) if report.exists() else []
    findings = [d for d in found if d["code"] in _FINDINGS]
    skipped = Counter(reason(d["message"]) for d in found if d["code"] == "TL690")
    classes = model_classes(tree)
    # A class without a `forward` of its own may be skipped too: only those with one count.
    unchecked = {
        key
        for d in found
        if d["code"] == "TL690"
        and (key := (str(Path(d["filename"]).resolve()), _skipped_class(d["message"]))) in classes
    }
    return {
        "tree": tree.name,
        "classes": len(classes),
        "checked": len(classes - unchecked),
        "python_files": sum(1 for _ in tree.rglob("*.py")),
        "notebooks": sum(1 for _ in tree.rglob("*.ipynb")),
        "findings": [
            {
                "code": d["code"],
                "where": f"{Path(d['filename']).relative_to(tree)}"
                + (f":cell {d['cell']}" if d.get("cell") else "")
                + f":{d['location']['row']}",
                "message": d["message"],
            }
            for d in findings
        ],
        "TL690": sum(skipped.values()),
        "TL690 by reason": dict(skipped.most_common()),
        "wall_s": round(wall, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--json", type=Path, help="write every tree's figures here")
    args = parser.parse_args()
    rows = [run_tree(tree) for tree in args.trees]
    print("tree | .py | .ipynb | model classes | checked | TL601-607 | TL690 | wall s")
    print("--- | --- | --- | --- | --- | --- | --- | ---")
    for row in rows:
        print(
            f"{row['tree']} | {row['python_files']} | {row['notebooks']} | {row['classes']} | "
            f"{row['checked']} | {len(row['findings'])} | {row['TL690']} | {row['wall_s']}"
        )
    for row in rows:
        for finding in row["findings"]:
            print(f"  {row['tree']}/{finding['where']}: {finding['code']} {finding['message']}")
    reasons: Counter[str] = Counter()
    for row in rows:
        reasons.update(row["TL690 by reason"])
    print("\nTL690 by reason, all trees:")
    for text, count in reasons.most_common(15):
        print(f"  {count:4} {text}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
