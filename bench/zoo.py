"""Benchmark: the shape check (TL601-TL606, TL690) on released model zoos.

Run: `python bench/zoo.py [--zoo NAME ...] [--files N] [--timeout S] [--src DIR] [--tl606]
[--json OUT]`.
Zoos: torchvision.models, timm.models, transformers (40 much-used model families),
diffusers.models, pytorch/examples, karpathy/nanoGPT and lucidrains/vit-pytorch (the last
three are source trees under `--src`, as `examples/`, `nanoGPT/` and `vit-pytorch/`; a zoo
whose package or tree is missing is left out with a note; vit-pytorch needs einops). Each
zoo's files are checked by one `check_files` call, the way a user's run checks them, in a
child process of its own so that its peak memory can be told.
The zoos are released, tested code: every TL601-TL605 finding is a false positive until a
real forward shows otherwise.

Reported per zoo: files, model classes with a `forward`, models checked through the fx graph
or the hooks fallback, classes checked only inside another model (covered), models skipped
(TL690) by reason, classes with neither (silent), the share of classes checked (`checked`
counts model checks, one class checked through two builders twice; `classes checked` counts
each class once), findings,
median seconds per model checked, wall seconds, peak memory of the worker. `--json` keeps
every TL690 message and the silent classes too. The rules are those of a default run (TL606
off, so the sizes a model is limited to are not searched for when it runs at its own usual
image side); `--tl606` turns it on.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

#: Much-used transformers model families (one `modeling_<family>.py` each).
TRANSFORMERS = [
    "bert",
    "roberta",
    "gpt2",
    "t5",
    "llama",
    "distilbert",
    "xlm_roberta",
    "bart",
    "vit",
    "clip",
    "whisper",
    "wav2vec2",
    "mistral",
    "albert",
    "electra",
    "deberta",
    "deberta_v2",
    "gpt_neo",
    "gpt_neox",
    "opt",
    "bloom",
    "mpnet",
    "mt5",
    "marian",
    "pegasus",
    "blip",
    "detr",
    "swin",
    "convnext",
    "resnet",
    "mobilebert",
    "camembert",
    "longformer",
    "xlnet",
    "qwen2",
    "gemma",
    "phi",
    "falcon",
    "layoutlmv3",
    "segformer",
]
#: Families where a default run once reported TL601-TL605 (kept as a regression zoo).
TRANSFORMERS_FP = [
    "openai",
    "pix2struct",
    "gpt_neo",
    "convbert",
    "fnet",
    "mobilebert",
    "glm4v",
    "wavlm",
    "clap",
    "vjepa2",
    "sam2_video",
    "videomae",
]
TIMM = [
    "resnet",
    "vision_transformer",
    "efficientnet",
    "convnext",
    "swin_transformer",
    "mobilenetv3",
    "regnet",
    "densenet",
    "deit",
    "beit",
    "vgg",
    "inception_v3",
    "xception",
    "mlp_mixer",
    "levit",
    "cait",
    "pvt_v2",
    "maxxvit",
    "efficientformer",
    "ghostnet",
]
DIFFUSERS = [
    "unets/unet_1d.py",
    "unets/unet_2d.py",
    "unets/unet_2d_condition.py",
    "autoencoders/autoencoder_kl.py",
    "autoencoders/vq_model.py",
    "autoencoders/autoencoder_tiny.py",
    "controlnets/controlnet.py",
    "transformers/transformer_2d.py",
    "transformers/dit_transformer_2d.py",
    "resnet.py",
    "embeddings.py",
    "attention_processor.py",
]

#: TL690 messages, grouped (first pattern that matches).
REASONS = (
    ("block of models not checked", r"only built by models that were not checked"),
    ("checked up to a size from tensor values", r"stopped at .*: sizes there depend on"),
    ("its model stopped before it (sizes from values)", r"before its forward finished"),
    ("needs constructor arguments", r"needs arguments"),
    ("could not build", r"could not build"),
    ("not importable / not defined", r"is not defined|could not import"),
    ("needs a package not installed", r"not installed"),
    ("input shape unknown", r"cannot infer the shape|cannot tell which forward"),
    ("input rank unknown", r"number of dimensions"),
    ("forward raised (not a shape error)", r"forward pass failed"),
    ("no accepted input size found", r"no input size found|failed differently"),
    ("time budget", r"time budget|timed out|took longer"),
    ("worker crashed / internal error", r"internal error|crash|no answer|killed"),
    ("modular template (checked in its generated file)", r"modular template"),
)


_PARTLY = REASONS[1][0]


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def zoo_files(zoo: str, src: Path, limit: int | None) -> tuple[list[Path], str | None]:
    """The files of one zoo, or why it is left out."""
    files: list[Path] = []
    if zoo == "torchvision":
        root = _package_dir("torchvision")
        if root is None:
            return [], "torchvision is not installed"
        for sub in ("", "segmentation", "video", "detection", "optical_flow"):
            files += sorted(p for p in (root / "models" / sub).glob("*.py") if p.name[0] != "_")
        files = [p for p in files if p.name not in ("feature_extraction.py",)]
    elif zoo == "timm":
        root = _package_dir("timm")
        if root is None:
            return [], "timm is not installed"
        files = [root / "models" / f"{n}.py" for n in TIMM]
    elif zoo in ("transformers", "transformers-fp"):
        root = _package_dir("transformers")
        if root is None:
            return [], "transformers is not installed"
        families = TRANSFORMERS if zoo == "transformers" else TRANSFORMERS_FP
        files = [root / "models" / f / f"modeling_{f}.py" for f in families]
    elif zoo == "diffusers":
        root = _package_dir("diffusers")
        if root is None:
            return [], "diffusers is not installed"
        files = [root / "models" / n for n in DIFFUSERS]
    elif zoo in ("examples", "nanoGPT", "vit-pytorch"):
        root = src / zoo
        if not root.is_dir():
            return [], f"no source tree at {root} (bring it with git)"
        # Every file, as `torchlint examples/` reads them: the scripts that build the
        # models (`model = RNNModel(args.model, ...)`) give their arguments and inputs.
        files = sorted(root.rglob("*.py"))
    else:
        return [], f"unknown zoo {zoo!r}"
    files = [p for p in files if p.is_file()]
    return (files[:limit] if limit else files), None


def _defines_forward(node: ast.ClassDef) -> bool:
    return any(
        isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == "forward"
        for item in node.body
    )


def _reason(message: str) -> str:
    for label, pattern in REASONS:
        if re.search(pattern, message):
            return label
    return "other"


def run_zoo(
    zoo: str, src: Path, limit: int | None, timeout: float, sizes: bool = False
) -> dict[str, Any]:
    """Check one zoo in this process (call it in a child: it reports the worker's peak RSS).
    `sizes`: with TL606 on (a default run has it off)."""
    from torchlint.shapes import check_files, discover

    files, missing = zoo_files(zoo, src, limit)
    if missing:
        return {"zoo": zoo, "missing": missing}
    pairs = [(str(p), p.read_text(encoding="utf-8")) for p in files]
    #: (path, class name) of every class with a forward, and its status (filled below).
    status: dict[tuple[str, str], str] = {}
    for info in discover.scan(pairs):
        for name, cls in info.classes.items():
            if _defines_forward(cls.node):
                status[(info.path, name)] = "silent"
    stats: dict[str, list[dict[str, Any]]] = {}
    started = time.perf_counter()
    try:
        found = check_files(pairs, timeout=timeout, stats=stats, size_conditions=sizes)
    except TypeError:  # an older torchlint (to compare with): no per-model records
        found = check_files(pairs, timeout=timeout)
    wall = time.perf_counter() - started
    records = [r for rs in stats.values() for r in rs]
    checked = [r for r in records if r.get("result") in ("ok", "finding")]
    for path, rs in stats.items():
        for r in rs:
            if (path, r.get("model")) in status and r.get("result") in ("ok", "finding"):
                status[(path, r["model"])] = r["path"]
            elif (path, r.get("model")) in status and r.get("result") == "covered":
                status[(path, r["model"])] = "covered"
    skipped: Counter[str] = Counter()
    skips: list[str] = []
    findings: list[dict[str, Any]] = []
    for path, diagnostics in found.items():
        for d in diagnostics:
            if d.code == "TL690":
                skipped[_reason(d.message)] += 1
                short = os.path.relpath(path, os.path.dirname(os.path.dirname(path)))
                skips.append(f"{short}:{d.line}: {d.message}")
                named = re.match(r"shape check of (\w+) skipped", d.message)
                key = (path, named.group(1)) if named else None
                if key in status and status[key] == "silent":
                    status[key] = "skipped"
            else:
                short = os.path.relpath(path, os.path.dirname(os.path.dirname(path)))
                findings.append(
                    {"code": d.code, "where": f"{short}:{d.line}", "message": d.message}
                )
    codes = Counter(f["code"] for f in findings)
    seconds = [r["seconds"] for r in checked if "seconds" in r]
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    states = Counter(status.values())
    return {
        "zoo": zoo,
        "files": len(files),
        "classes": len(status),
        "covered": states["covered"],
        #: Distinct classes checked on their own or inside a model (fx and fallback count
        #: model checks: a class checked through two builders counts twice there).
        "checked_classes": states["fx"] + states["fallback"] + states["covered"],
        "silent": states["silent"],
        "silent_classes": sorted(
            f"{Path(p).name}::{n}" for (p, n), s in status.items() if s == "silent"
        ),
        "skips": skips,
        "fx": sum(1 for r in checked if r.get("path") == "fx"),
        "fallback": sum(1 for r in checked if r.get("path") == "fallback"),
        #: A note on a model checked up to a stop is no skip (it is among the reasons).
        "skipped": sum(n for k, n in skipped.items() if k != _PARTLY),
        "reasons": dict(skipped.most_common()),
        "TL601-605": sum(n for c, n in codes.items() if c != "TL606"),
        "TL606": codes.get("TL606", 0),
        "findings": findings,
        "median_s": statistics.median(seconds) if seconds else None,
        #: Each model check's seconds (file, class, builder), to compare two runs model by model.
        "model_seconds": [
            [Path(path).name, r.get("model"), r.get("built_by"), round(r["seconds"], 3)]
            for path, rs in stats.items()
            for r in rs
            if r.get("result") in ("ok", "finding") and "seconds" in r
        ],
        "wall_s": wall,
        "peak_mib": peak,
    }


def _table(rows: list[dict[str, Any]]) -> str:
    head = ("zoo", "files", "classes", "fx", "fallback", "covered", "skipped", "silent")
    head += ("TL601-605", "TL606")
    tail = ("checked", "classes checked", "median s/model", "wall s", "peak MiB")
    lines = [" | ".join(head + tail), " | ".join("---" for _ in head + tail)]
    for row in rows:
        if "missing" in row:
            lines.append(f"{row['zoo']} | left out: {row['missing']}")
            continue
        median = f"{row['median_s']:.2f}" if row["median_s"] is not None else "-"
        done = row["fx"] + row["fallback"] + row["covered"]
        cells = [str(row[k]) for k in head] + [
            f"{done / row['classes']:.0%}" if row["classes"] else "-",
            f"{row['checked_classes'] / row['classes']:.0%}"
            if row["classes"] and "checked_classes" in row
            else "-",
            median,
            f"{row['wall_s']:.0f}",
            f"{row['peak_mib']:.0f}",
        ]
        lines.append(" | ".join(cells))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    zoos = (
        "torchvision",
        "timm",
        "transformers",
        "diffusers",
        "examples",
        "nanoGPT",
        "vit-pytorch",
    )
    parser.add_argument("--zoo", action="append", help=f"{', '.join(zoos)}, transformers-fp")
    parser.add_argument("--files", type=int, default=None, help="at most N files per zoo")
    parser.add_argument("--timeout", type=float, default=90.0, help="seconds per file")
    parser.add_argument("--src", type=Path, default=Path("bench/src"), help="source trees")
    parser.add_argument("--json", type=Path, help="write every row (with findings) here")
    parser.add_argument("--tl606", action="store_true", help="with TL606 on (off by default)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_zoo(args.one, args.src, args.files, args.timeout, args.tl606)))
        return
    rows = []
    for zoo in args.zoo or zoos:
        command = [sys.executable, __file__, "--one", zoo, "--src", str(args.src)]
        command += ["--timeout", str(args.timeout)]
        command += ["--files", str(args.files)] if args.files else []
        command += ["--tl606"] if args.tl606 else []
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        try:
            row = json.loads(done.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            row = {"zoo": zoo, "missing": f"the run failed: {done.stderr.strip()[-300:]}"}
        rows.append(row)
        print(f"{zoo}: done", file=sys.stderr, flush=True)
    print(_table(rows))
    for row in rows:
        reasons = row.get("reasons")
        if reasons:
            print(
                f"\n{row['zoo']}: skipped by reason: "
                + ", ".join(f"{k} {v}" for k, v in reasons.items())
            )
        if row.get("silent_classes"):
            print(f"  silent: {', '.join(row['silent_classes'])}")
        for finding in row.get("findings", []):
            print(f"  {finding['code']} {finding['where']}: {finding['message'][:160]}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
