"""Benchmark: recall of the shape check on real model files with one injected shape bug.

Run: `python bench/mutants.py [--zoo NAME ...] [--limit N] [--src DIR] [--json OUT]`
(zoos as in `bench/zoo.py`; by default the pytorch/examples and nanoGPT trees under
`--src`). For each file, the engine's table (`torchlint shapes --output-format json`) tells
which models it checked and on which input; a model counts when it also builds with no
arguments and runs a real forward on CPU on that input (small sizes) in a child process.
Mutants change one thing at a time: a Linear's in_features, a conv's in_channels, a norm's
size, a reshape's literal size, the dim of a cat, or a removed flatten. Only mutants whose
real forward then fails are kept (the others are not bugs). Reported: recall at the mutated
line and anywhere in the file (TL601-TL605), and findings on the unmodified files.

A removed flatten leaves no line to point at: the bug is an absence, and the layer that
receives the unflattened tensor is the one whose size no longer fits. A finding there
counts as at the line when its message says to add the flatten before that layer (and it
names the forward line where the layer is called); a finding there that does not say so
counts only as found in the file.
"""

from __future__ import annotations

import argparse
import ast
import itertools
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from zoo import zoo_files

_LINEAR = {"Linear", "LazyLinear", "Bilinear"}
_CONV = {"Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"}
_NORM = {"BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm", "InstanceNorm2d"}
_CODES = {"TL601", "TL602", "TL603", "TL604", "TL605"}
#: A message that tells to add a flatten before the layer reported (TL602; TL604 on a LayerNorm).
_ADD_FLATTEN = re.compile(r"\badd [^;]*flatten[^;]* before it", re.IGNORECASE)

RUN_FORWARD = r"""
import ast, importlib.util, json, os, sys, torch
from torchlint.shapes.build import NeedsArguments, builder_arguments, constructor_arguments
from torchlint.shapes.evidence import builder_functions
path, models, package = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
sys.path.insert(0, os.path.dirname(path))
sys.argv = [path]
if package.startswith("torchvision"):
    # The package's own copy of the file registered its builders already.
    import torchvision.models._api
    torchvision.models._api.BUILTIN_MODELS.clear()
with open(path, encoding="utf-8") as handle:
    builders = builder_functions(ast.parse(handle.read()), set(models))
name = (package + "." if package else "") + "mutant_under_test"
spec = importlib.util.spec_from_file_location(name, path)
module = importlib.util.module_from_spec(spec)
sys.modules[name] = module
spec.loader.exec_module(module)
torch.manual_seed(0)
out = {}
for name, inputs in models.items():
    try:
        cls = getattr(module, name)
        try:
            args, kwargs, _ = constructor_arguments(cls, None)
            model = cls(*args, **kwargs).eval()
        except NeedsArguments:
            # As the engine does: the first argument-free builder of the class (`vgg11()`).
            function = getattr(module, builders.get(name, ["?"])[0])
            model = function(**builder_arguments(function)).eval()
    except Exception as exc:
        out[name] = "build: " + type(exc).__name__
        continue
    tensors = [
        torch.randint(0, 2, shape) if dtype.startswith("int") else torch.randn(shape)
        for shape, dtype in inputs
    ]
    try:
        with torch.no_grad():
            model(*tensors)
        out[name] = "ok"
    except Exception as exc:
        out[name] = "fail: " + type(exc).__name__ + ": " + str(exc).splitlines()[0][:120]
print(json.dumps(out))
"""


@dataclass
class Mutant:
    kind: str
    line: int
    text: str  #: the whole mutated file
    what: str


def _name(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _replace(source: str, node: ast.AST, new: str) -> str:
    lines = source.splitlines(keepends=True)
    start = sum(len(x) for x in lines[: node.lineno - 1]) + _chars(
        lines[node.lineno - 1], node.col_offset
    )
    end_line = lines[node.end_lineno - 1]
    end = sum(len(x) for x in lines[: node.end_lineno - 1]) + _chars(end_line, node.end_col_offset)
    return source[:start] + new + source[end:]


def _chars(line: str, byte_offset: int) -> int:
    return len(line.encode("utf-8")[:byte_offset].decode("utf-8", errors="ignore"))


def _segment(source: str, node: ast.AST) -> str:
    return ast.get_source_segment(source, node) or ""


def mutants(source: str) -> list[Mutant]:
    """Every one-change shape mutant of a file."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found: list[Mutant] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _name(node.func)
        size_arg = None
        if name in _LINEAR or name in _CONV or name in _NORM:
            size_arg = node.args[0] if node.args else None
            if name == "GroupNorm" and len(node.args) > 1:
                size_arg = node.args[1]
        if size_arg is not None and not isinstance(size_arg, ast.Starred):
            kind = "linear" if name in _LINEAR else "conv" if name in _CONV else "norm"
            new = _bumped(source, size_arg)
            found.append(
                Mutant(kind, node.lineno, _replace(source, size_arg, new), f"{name}: {new}")
            )
        elif name in ("view", "reshape") and isinstance(node.func, ast.Attribute):
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, int) and arg.value > 1:
                    new = str(arg.value + 1)
                    found.append(
                        Mutant("reshape", node.lineno, _replace(source, arg, new), f"{name}: {new}")
                    )
                    break
        elif name == "cat":
            dim = node.args[1] if len(node.args) > 1 else None
            dim = dim or next((k.value for k in node.keywords if k.arg == "dim"), None)
            if isinstance(dim, ast.Constant) and isinstance(dim.value, int):
                new = str(dim.value + 1 if dim.value >= 0 else dim.value - 1)
                found.append(
                    Mutant("cat", node.lineno, _replace(source, dim, new), f"cat dim {new}")
                )
            elif isinstance(dim, ast.UnaryOp) and isinstance(dim.operand, ast.Constant):
                new = str(-int(dim.operand.value) - 1)
                found.append(
                    Mutant("cat", node.lineno, _replace(source, dim, new), f"cat dim {new}")
                )
        elif name == "flatten" and node.args:
            # `torch.flatten(x, 1)` and a layer's `self.flatten(x)` flatten their argument;
            # `x.flatten(1)`, and `torch.view_as_real(z).flatten(3)`, flatten what they are
            # called on.
            func = node.func
            functional = isinstance(func, ast.Name) or (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id in ("torch", "self")
            )
            target = node.args[0] if functional else func.value  # type: ignore[union-attr]
            found.append(
                Mutant(
                    "flatten",
                    node.lineno,
                    _replace(source, node, _segment(source, target)),
                    "flatten removed",
                )
            )
    # Round robin over the kinds (in source order within each), so that a limit keeps some
    # of every kind rather than the first layers of `__init__`.
    found.sort(key=lambda m: m.line)
    kinds: dict[str, list[Mutant]] = {}
    for mutant in found:
        kinds.setdefault(mutant.kind, []).append(mutant)
    mixed = itertools.zip_longest(*kinds.values())
    return [m for group in mixed for m in group if m is not None]


def _bumped(source: str, node: ast.expr) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return str(node.value + 1)
    return f"({_segment(source, node)}) + 1"


def engine_models(path: Path, timeout: float) -> tuple[dict[str, list[Any]], list[dict[str, Any]]]:
    """The models the engine checked in a file, with their input (shapes, dtypes); its findings."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "torchlint", "shapes", "--output-format", "json", str(path)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        table = json.loads(done.stdout)
    except (subprocess.TimeoutExpired, json.JSONDecodeError):
        return {}, []
    models: dict[str, list[Any]] = {}
    findings = []
    for model in table.get("models", []):
        if model.get("finding"):
            findings.append(model["finding"])
        data = model.get("input") or {}
        if model.get("status") != "ok" or model.get("prefix") or not data.get("dims"):
            continue
        sizes = data.get("sizes") or {}
        shapes = [
            [d if isinstance(d, int) else sizes.get(d) for d in dims] for dims in data["dims"]
        ]
        if all(isinstance(d, int) for shape in shapes for d in shape):
            models[model["class"]] = list(zip(shapes, data.get("dtypes", []), strict=False))
    return models, findings


def package_of(path: Path) -> str:
    """The dotted package an installed file belongs to ("" for a script tree)."""
    for root in sorted(sys.path, key=len, reverse=True):
        if root and "site-packages" in root and str(path).startswith(root.rstrip("/") + "/"):
            return ".".join(path.parent.relative_to(root).parts)
    return ""


def unregistered(text: str, package: str) -> str:
    """A torchvision file's copy without `@register_model()` (its builders' names are taken
    by the package's own file), line for line."""
    if not package.startswith("torchvision"):
        return text
    return text.replace("@register_model()", "# register_model()")


def run_forward(
    path: Path, models: dict[str, list[Any]], timeout: float, package: str = ""
) -> dict[str, str]:
    try:
        done = subprocess.run(
            [sys.executable, "-c", RUN_FORWARD, str(path), json.dumps(models), package],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            cwd=path.parent,
        )
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, IndexError, json.JSONDecodeError):
        return {}


def lint(path: Path, timeout: float) -> list[tuple[int, str, str]]:
    """(line, code, message) of the file's diagnostics, as a default run (TL606 off) finds
    them."""
    from torchlint.shapes import check_files

    text = path.read_text(encoding="utf-8")
    found = check_files([(str(path), text)], timeout=timeout, size_conditions=False)
    return [(d.line, d.code, d.message) for ds in found.values() for d in ds]


def at_line(mutant: Mutant, found: list[tuple[int, str, str]]) -> bool:
    """Reported where the user has to act: the mutated line, or for a removed flatten the
    receiving layer with a message that says to add the flatten (see the docstring)."""
    if any(line == mutant.line for line, _, _ in found):
        return True
    return mutant.kind == "flatten" and any(_ADD_FLATTEN.search(m) for _, _, m in found)


def bench_file(
    path: Path, limit: int, timeout: float, rows: list[dict[str, Any]]
) -> dict[str, Any]:
    source = path.read_text(encoding="utf-8")
    models, _ = engine_models(path, timeout)
    original = [(line, code) for line, code, _ in lint(path, timeout)]
    summary = {"file": str(path), "models": len(models), "original": original, "mutants": 0}
    package = package_of(path)
    passing = {
        n: i
        for n, i in models.items()
        if run_forward(path, {n: i}, timeout, package).get(n) == "ok"
    }
    summary["runnable"] = len(passing)
    if not passing:
        return summary
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / path.name
        if package:
            # An installed package's file imports its siblings relatively: the mutant lies
            # beside it (removed afterwards).
            target = path.parent / "mutant_under_test.py"
        else:
            for sibling in path.parent.glob("*.py"):  # local imports of the mutated file
                if sibling != path:
                    (Path(tmp) / sibling.name).write_text(sibling.read_text(encoding="utf-8"))
        try:
            _run_mutants(path, source, target, package, passing, limit, timeout, summary, rows)
        finally:
            if package:
                target.unlink(missing_ok=True)
    return summary


def _run_mutants(
    path: Path,
    source: str,
    target: Path,
    package: str,
    passing: dict[str, list[Any]],
    limit: int,
    timeout: float,
    summary: dict[str, Any],
    rows: list[dict[str, Any]],
) -> None:
    for mutant in mutants(source):
        if summary["mutants"] >= limit:
            break
        target.write_text(unregistered(mutant.text, package), encoding="utf-8")
        ran = run_forward(target, passing, timeout, package)
        if not any(v.startswith("fail") for v in ran.values()):
            continue  # not a bug for these models (or not reached)
        summary["mutants"] += 1
        found = [item for item in lint(target, timeout) if item[1] in _CODES]
        rows.append(
            {
                "file": str(path),
                "kind": mutant.kind,
                "line": mutant.line,
                "what": mutant.what,
                "at_line": at_line(mutant, found),
                "in_file": bool(found),
                "found": [(line, code) for line, code, _ in found],
                "messages": [message for _, _, message in found],
            }
        )
        brief = [(line, code) for line, code, _ in found]
        print(f"  {path.name}:{mutant.line} {mutant.what}: {brief}", file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zoo", action="append", help="examples, nanoGPT, torchvision, ...")
    parser.add_argument("--limit", type=int, default=4, help="kept mutants per file")
    parser.add_argument("--files", type=int, default=None, help="at most N files per zoo")
    parser.add_argument("--match", action="append", help="only files whose path has this")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--src", type=Path, default=Path("bench/src"), help="source trees")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    files: list[dict[str, Any]] = []
    started = time.perf_counter()
    for zoo in args.zoo or ("examples", "nanoGPT"):
        paths, missing = zoo_files(zoo, args.src, args.files)
        if missing:
            print(f"{zoo}: left out: {missing}")
            continue
        if args.match:
            paths = [p for p in paths if any(m in str(p) for m in args.match)]
        for path in paths:
            files.append(bench_file(path, args.limit, args.timeout, rows))
    kinds = Counter(r["kind"] for r in rows)
    print("kind | mutants | found at the line | found in the file")
    print("--- | --- | --- | ---")
    for kind in sorted(kinds):
        mine = [r for r in rows if r["kind"] == kind]
        at = sum(r["at_line"] for r in mine)
        anywhere = sum(r["in_file"] for r in mine)
        print(f"{kind} | {len(mine)} | {at} | {anywhere}")
    total = len(rows)
    if total:
        at = sum(r["at_line"] for r in rows)
        anywhere = sum(r["in_file"] for r in rows)
        print(f"all | {total} | {at} ({at / total:.0%}) | {anywhere} ({anywhere / total:.0%})")
    unmodified = [(f["file"], item) for f in files for item in f["original"] if item[1] in _CODES]
    checked = sum(f["models"] for f in files)
    runnable = sum(f.get("runnable", 0) for f in files)
    print(
        f"\nfiles {len(files)}, models checked {checked}, of which runnable {runnable};"
        f" TL601-TL605 on the unmodified files: {len(unmodified)}"
    )
    for path, (line, code) in unmodified:
        print(f"  {code} {path}:{line}")
    print(f"wall {time.perf_counter() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({"mutants": rows, "files": files}, indent=1))


if __name__ == "__main__":
    main()
