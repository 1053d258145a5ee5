"""Benchmark: precision of the source rules on real code, scored against reviewed verdicts.

Run: `python bench/real_code.py TREE [TREE ...] [--verdicts FILE] [--stub OUT] [--json OUT]
[--torch-version X.Y]`.
Each TREE is an extracted source tree (pytorch/examples, timm, a tutorial repository ...); its
folder name is the repository's name in the report and in the verdicts file. Every source rule
runs (`--select ALL --no-shapes`); the rules on by default and those a user has to enable are
scored apart, since the precision target is for what a plain run reports.

The verdicts file (`bench/real_code_verdicts.toml` by default) holds one `[[finding]]` per
reviewed finding: `repo`, `path` (inside the repository), `code`, `line` (the flagged source
line, stripped, whitespace collapsed), `verdict` (`true`, `false` or `debatable`) and a one-line
`reason`. A finding matches the entry with the same repository, path, code and line, so verdicts
survive edits elsewhere in the file; identical lines flagged twice share one verdict. Its
`[repositories]` table names the snapshot (`owner/name@commit`) each tree was extracted from.

Reported: lines per repository (Python lines and notebook code-cell lines), findings per rule and
per repository with their verdicts, false positives per 100k lines (debatable ones counted apart),
the `false` verdicts no finding matches any more (false positives since fixed), and every finding
no entry covers. `--stub OUT` writes entries for those, verdict left empty, to
paste into the verdicts file once reviewed. Exit status 1 when some finding is unreviewed.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchlint.config import tomllib
from torchlint.discovery import discover
from torchlint.registry import all_rules

VERDICTS = Path(__file__).with_name("real_code_verdicts.toml")
VERDICT_KINDS = ("true", "false", "debatable")
#: Findings that say the input is not checkable Python, not that the code has a bug.
INPUT_CODES = frozenset({"TL000", "TL999"})


@dataclass(frozen=True)
class Key:
    """What identifies a finding across runs: repository, path, rule, flagged line."""

    repo: str
    path: str
    code: str
    line: str


@dataclass
class Finding:
    key: Key
    row: int
    cell: int | None
    message: str


def normalise(line: str) -> str:
    """The flagged line as the verdicts file stores it: stripped, whitespace collapsed."""
    return re.sub(r"\s+", " ", line.strip())[:200]


def _notebook_code_cells(path: Path) -> list[str] | None:
    """Each cell's source ("" for text cells), or None when the file is not a notebook."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    cells = []
    for cell in data.get("cells", []):
        source = cell.get("source", "")
        text = "".join(source) if isinstance(source, list) else str(source)
        cells.append(text if cell.get("cell_type") == "code" else "")
    return cells


def count_lines(path: Path) -> int:
    """Physical lines of a Python file, or of a notebook's code cells."""
    if path.suffix == ".ipynb":
        cells = _notebook_code_cells(path) or []
        return sum(len(cell.splitlines()) for cell in cells)
    try:
        return len(path.read_bytes().splitlines())
    except OSError:
        return 0


def flagged_line(path: Path, row: int, cell: int | None) -> str:
    if cell is not None:
        cells = _notebook_code_cells(path) or []
        lines = cells[cell - 1].splitlines() if 0 < cell <= len(cells) else []
    else:
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            lines = []
    return normalise(lines[row - 1]) if 0 < row <= len(lines) else ""


def run_torchlint(tree: Path, torch_version: str | None) -> list[dict[str, Any]]:
    """Every source rule's findings on `tree`, as torchlint's JSON report."""
    command = [sys.executable, "-m", "torchlint", "check", "."]
    command += ["--select", "ALL", "--no-shapes", "--no-cache", "--exit-zero", "-q"]
    command += ["--output-format", "json"]
    if torch_version:
        command += ["--torch-version", torch_version]
    done = subprocess.run(command, cwd=tree, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"torchlint failed on {tree.name}: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout or "[]")


def findings_of(tree: Path, torch_version: str | None) -> list[Finding]:
    found = []
    for item in run_torchlint(tree, torch_version):
        relative = Path(item["filename"])
        row, cell = item["location"]["row"], item.get("cell")
        line = flagged_line(tree / relative, row, cell)
        key = Key(tree.name, relative.as_posix(), item["code"], line)
        found.append(Finding(key, row, cell, item["message"]))
    return found


def load_verdicts(path: Path) -> tuple[dict[Key, tuple[str, str]], dict[str, str]]:
    """The verdicts by key, and the snapshot (`owner/name@commit`) of each repository."""
    if not path.exists():
        return {}, {}
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    entries = data.get("finding", [])
    verdicts = {}
    for entry in entries:
        key = Key(entry["repo"], entry["path"], entry["code"], normalise(entry["line"]))
        verdict = entry.get("verdict", "")
        if verdict not in VERDICT_KINDS:
            raise SystemExit(f"{path}: {key}: verdict must be one of {VERDICT_KINDS}")
        verdicts[key] = (verdict, entry.get("reason", ""))
    return verdicts, data.get("repositories", {})


def _toml_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def stub_entry(finding: Finding) -> str:
    where = f"cell {finding.cell}, line {finding.row}" if finding.cell else f"line {finding.row}"
    key = finding.key
    return "\n".join(
        [
            "[[finding]]",
            f"repo = {_toml_string(key.repo)}",
            f"path = {_toml_string(key.path)}",
            f"code = {_toml_string(key.code)}",
            f"line = {_toml_string(key.line)}",
            'verdict = ""',
            f"reason = {_toml_string('')}  # {where}: {finding.message[:120]}",
            "",
        ]
    )


def per_100k(count: int, lines: int) -> float:
    return 100_000 * count / lines if lines else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+", type=Path, help="extracted repository trees")
    parser.add_argument("--verdicts", type=Path, default=VERDICTS)
    parser.add_argument("--stub", type=Path, help="write entries for unreviewed findings here")
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    parser.add_argument(
        "--torch-version", help="the torch version the code targets (default: the installed one)"
    )
    args = parser.parse_args(argv)

    rules = all_rules()
    verdicts, snapshots = load_verdicts(args.verdicts)
    lines: dict[str, int] = {}
    findings: list[Finding] = []
    for tree in args.trees:
        tree = tree.resolve()
        files = discover([tree]).files
        lines[tree.name] = sum(count_lines(path) for path in files)
        findings += findings_of(tree, args.torch_version)
        snapshot = snapshots.get(tree.name, "not in the verdicts file's [repositories]")
        print(f"{tree.name} ({snapshot}): {len(files)} files, {lines[tree.name]} lines")

    total_lines = sum(lines.values())
    table: dict[str, Counter[str]] = defaultdict(Counter)
    by_repo: dict[str, Counter[str]] = defaultdict(Counter)
    unreviewed: list[Finding] = []
    used: set[Key] = set()
    for finding in findings:
        verdict = verdicts.get(finding.key, ("unreviewed", ""))[0]
        if verdict == "unreviewed":
            unreviewed.append(finding)
        else:
            used.add(finding.key)
        table[finding.key.code][verdict] += 1
        by_repo[finding.key.repo][verdict] += 1

    columns = ("true", "false", "debatable", "unreviewed")
    print(f"\n{'repository':<44}{'lines':>9}  " + "".join(f"{c:>11}" for c in columns))
    for repo, count in lines.items():
        cells = "".join(f"{by_repo[repo][c]:>11}" for c in columns)
        print(f"{repo:<44}{count:>9}  {cells}")
    print(f"{'all':<44}{total_lines:>9}")

    print(f"\n{'rule':<8}{'name':<40}{'on':>4}" + "".join(f"{c:>11}" for c in columns))
    for code in sorted(table):
        rule = rules.get(code)
        name = rule.name if rule else "?"
        on = "yes" if rule is None or rule.default_enabled else "no"
        cells = "".join(f"{table[code][c]:>11}" for c in columns)
        print(f"{code:<8}{name:<40}{on:>4}{cells}")

    scores = {}
    groups = {
        "on by default": lambda c: c not in INPUT_CODES and rules[c].default_enabled,
        "off by default": lambda c: c not in INPUT_CODES and not rules[c].default_enabled,
        "input not checkable (TL000)": lambda c: c in INPUT_CODES,
    }
    print()
    for label, member in groups.items():
        counts = sum((table[c] for c in table if member(c)), Counter())
        false, debatable = counts["false"], counts["debatable"]
        scores[label] = {
            **{c: counts[c] for c in columns},
            "false_per_100k": round(per_100k(false, total_lines), 2),
            "false_or_debatable_per_100k": round(per_100k(false + debatable, total_lines), 2),
        }
        print(
            f"{label}: {sum(counts.values())} findings, {false} false, {debatable} debatable, "
            f"{counts['unreviewed']} unreviewed: {per_100k(false, total_lines):.2f} false per "
            f"100k lines ({per_100k(false + debatable, total_lines):.2f} with the debatable)"
        )

    stale = [key for key in verdicts if key.repo in lines and key not in used]
    fixed = sum(verdicts[key][0] == "false" for key in stale)
    if fixed:
        print(f"{fixed} false positives reviewed earlier are no longer reported")
    if stale:
        print(f"\n{len(stale)} verdicts match no finding now (fixed, or the code moved):")
        for key in stale:
            print(f"  {key.repo}/{key.path}: {key.code} {verdicts[key][0]}: {key.line}")
    if unreviewed:
        print(f"\n{len(unreviewed)} unreviewed findings:")
        for finding in unreviewed:
            key = finding.key
            cell = f"cell {finding.cell}:" if finding.cell else ""
            where = f"{key.path}:{cell}{finding.row}"
            print(f"  {key.repo}/{where}: {key.code} {key.line}")
    if args.stub:
        first = {f.key: f for f in reversed(unreviewed)}
        stubs = [stub_entry(first[key]) for key in dict.fromkeys(f.key for f in unreviewed)]
        args.stub.write_text("\n".join(stubs), encoding="utf-8")
    if args.json:
        report = {
            "lines": lines,
            "rules": {code: dict(table[code]) for code in sorted(table)},
            "repositories": {repo: dict(by_repo[repo]) for repo in lines},
            "scores": scores,
            "unreviewed": [vars(f.key) | {"row": f.row, "cell": f.cell} for f in unreviewed],
        }
        args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")
    return 1 if unreviewed else 0


if __name__ == "__main__":
    sys.exit(main())
