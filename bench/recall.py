"""Recall and precision of the source rules on a corpus of realistic training scripts.

Run: `python bench/recall.py [--json OUT] [--verify]`.

The corpus (`fixtures/corpus/`) holds training scripts, model files and small projects (a
folder whose `train.py` imports its siblings), written the way users write them, with tiny
sizes and synthetic data. Each real bug is marked on the line a rule should report, as in
`fixtures/` (`# error: TL101`); everything else is correct code, much of it made to look like
a bug (clean look-alikes). Every file is linted alone, as the editor and the pre-commit hook
do (imports of sibling files are followed).

Scoring, per bug class (a rule family) and overall: a true positive is a finding at a marked
line with the marked code; a miss is a mark with no such finding; a false positive is any
finding no mark asks for, whatever its code (a finding of a rule outside the classes below
counts against "other"). The rules enabled by default run, as in a user's first run. A mark of
a code outside the classes (TL105, advice on numerical stability) counts in "other" and is not
checked by `--verify`.

`--verify` runs the corpus and checks that each marked bug really happens, and that the clean
files run and show none of the bugs (Linux and macOS: it forks). Each runnable unit (a file with
a `__main__` block, or a project's `train.py`) runs in a child process with probes installed,
and the evidence each probe records is matched against the codes marked in the unit:

- TL101 / TL103: a cross-entropy (NLL) loss received rows that are probabilities (non-negative,
  summing to 1) or, for cross-entropy, log-probabilities (logsumexp 0): the loss input was
  already normalised. TL102: a with-logits BCE loss received values all inside (0, 1).
- TL201: the run ends in autograd's own RuntimeError ("modified by an inplace operation" or
  "a leaf Variable that requires grad is being used in an in-place operation").
- TL301 / TL302: there is no GPU here, so the unit runs with the accelerator replaced by
  PyTorch's meta device: in its source, `torch.cuda.is_available()` becomes `True`, the
  string "cuda" becomes "meta" and `.cuda()` becomes `.to("meta")`. A batch, target or new
  tensor left on the CPU then meets meta parameters, and PyTorch raises the same
  device-mismatch error it raises on CUDA ("Tensor on device meta is not on the expected
  device cpu"). There `.item()` on a meta tensor gives 0.0 and optimizer steps are skipped,
  so that training runs on to the evaluation code. Clean device files run the same way and
  must not hit that error (they may stop later at an operation meta tensors cannot do; that
  is not counted). Known gap: the meta kernel of `nn.Embedding` does not check where its
  index tensor lives, so a CPU index fed to a meta embedding (position ids, start tokens)
  raises nothing here although CUDA raises for it; such cases show as not observed.
- TL401 / TL402: a module that ran holds an `nn.Module` or `nn.Parameter` in a plain list,
  tuple or dict attribute whose parameters are missing from its `parameters()`; or building
  the optimizer failed with "optimizer got an empty parameter list" (all of them missing).
- TL501: an optimizer stepped with gradients that a `backward()` had added onto the ones its
  previous step already used, with no clearing (None or zero) in between: the gradients
  accumulate across steps.
- TL502: an optimizer stepped with every gradient zero or None after a backward pass.
- TL503: a module in eval mode ran with grad enabled and its output requires grad, or (in a
  run that ended normally) a model's output carried a graph that no `backward()` went
  through: the evaluation recorded a graph for nothing.
- TL504: a module holding dropout or batch-norm ran under `no_grad` / `inference_mode` while
  in training mode.
- TL505: an optimizer stepped before any gradient existed.
- TL506: PyTorch warned that `lr_scheduler.step()` was called before `optimizer.step()`.

The probes see behaviour, not intent: Monte-Carlo dropout (a deliberate training-mode forward
under `no_grad`) shows the TL504 evidence although it is correct; such a clean unit lists the
evidence it is allowed in `ALLOWED_EVIDENCE` with the reason.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fixture_expectations import expected_pairs  # noqa: E402

CORPUS = ROOT / "fixtures" / "corpus"

#: Bug classes: one per rule family, as named in the report.
CLASSES: dict[str, tuple[str, ...]] = {
    "loss-activation": ("TL101", "TL102", "TL103"),
    "inplace-autograd": ("TL201",),
    "device": ("TL301", "TL302"),
    "plain-container": ("TL401", "TL402"),
    "zero-grad": ("TL501",),
    "eval-mode": ("TL503", "TL504"),
    "loop-order": ("TL502", "TL505", "TL506"),
}
OTHER = "other"

#: Clean units whose correct code shows a probe's evidence, with the reason.
ALLOWED_EVIDENCE: dict[str, dict[str, str]] = {
    "evaluation_clean.py": {"TL504": "Monte-Carlo dropout runs in training mode on purpose"},
    # One prediction outside no_grad builds one graph; TL503 is about evaluation loops and
    # functions, so these are left unmarked (and would be the rule's misses if marked).
    "logits_then_softmax_clean.py": {"TL503": "one predict_proba() call after training"},
    "nanogpt_style_clean.py": {"TL503": "generate() once after training, not under no_grad"},
}


def class_of(code: str) -> str:
    for name, codes in CLASSES.items():
        if code in codes:
            return name
    return OTHER


def corpus_files() -> list[Path]:
    return sorted(CORPUS.rglob("*.py"))


@dataclass
class Tally:
    tp: int = 0
    fn: int = 0
    fp: int = 0
    misses: list[str] = field(default_factory=list)
    false_positives: list[str] = field(default_factory=list)

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0


def score(files: Iterable[Path] | None = None) -> dict[str, Tally]:
    """Per-class tallies, plus "overall"."""
    from torchlint.engine import lint_bytes
    from torchlint.registry import all_rules

    enabled = {code for code, rule in all_rules().items() if rule.default_enabled}
    tallies = {name: Tally() for name in [*CLASSES, OTHER, "overall"]}
    for path in files if files is not None else corpus_files():
        where = path.relative_to(CORPUS).as_posix()
        expected = expected_pairs(path)
        found = {
            (d.line, d.code): d.message for d in lint_bytes(path.read_bytes(), str(path), enabled)
        }
        for line, code in sorted(expected | set(found)):
            for tally in (tallies[class_of(code)], tallies["overall"]):
                if (line, code) in expected and (line, code) in found:
                    tally.tp += 1
                elif (line, code) in expected:
                    tally.fn += 1
                    tally.misses.append(f"{where}:{line} {code}")
                else:
                    tally.fp += 1
                    tally.false_positives.append(f"{where}:{line} {code} {found[(line, code)]}")
    return tallies


def format_table(tallies: dict[str, Tally]) -> str:
    rows = [f"{'class':<18}{'marked':>7}{'TP':>5}{'FN':>5}{'FP':>5}{'recall':>9}{'precision':>11}"]
    for name, t in tallies.items():
        if name == OTHER and not (t.tp or t.fn or t.fp):
            continue
        rows.append(
            f"{name:<18}{t.tp + t.fn:>7}{t.tp:>5}{t.fn:>5}{t.fp:>5}"
            f"{t.recall:>9.1%}{t.precision:>11.1%}"
        )
    for name, t in tallies.items():
        if name == "overall":
            continue
        rows += [f"  miss {m}" for m in t.misses]
        rows += [f"  false positive {f}" for f in t.false_positives]
    return "\n".join(rows)


# --- verification ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Unit:
    """A runnable part of the corpus: its entry script and the files whose marks it covers."""

    name: str
    entry: Path
    files: tuple[Path, ...]

    def codes(self) -> set[str]:
        """The marked codes of the bug classes (other marks are not checked by running)."""
        marks = {code for path in self.files for _, code in expected_pairs(path)}
        return {code for code in marks if class_of(code) != OTHER}


def units() -> list[Unit]:
    found = []
    for path in sorted(CORPUS.iterdir()):
        if path.is_dir() and (path / "train.py").exists():
            found.append(Unit(path.name, path / "train.py", tuple(sorted(path.glob("*.py")))))
        elif path.is_dir():
            entries = [p for p in sorted(path.glob("*.py")) if "__main__" in p.read_text()]
            found += [
                Unit(f"{path.name}/{p.name}", p, tuple(sorted(path.glob("*.py")))) for p in entries
            ]
        elif path.suffix == ".py":
            found.append(Unit(path.name, path, (path,)))
    return found


DEVICE_CODES = {"TL301", "TL302"}
_ON_META = [
    (re.compile(r"torch\.cuda\.is_available\(\)"), "True"),
    (re.compile(r"""(["'])cuda\1"""), '"meta"'),
    (re.compile(r"\.cuda\(\)"), '.to("meta")'),
]


def on_meta(source: str) -> str:
    """The source with the accelerator replaced by the meta device (see the module doc)."""
    for pattern, replacement in _ON_META:
        source = pattern.sub(replacement, source)
    return source


def run_probe(unit: Unit, meta: bool, timeout: int = 120) -> dict:
    """Run one unit in a forked child of this process, which imported torch once already."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run the unit, send back what the probes saw, never return
        os.close(read_end)
        signal.alarm(timeout)
        try:
            os.chdir(unit.entry.parent)
            quiet = os.open(os.devnull, os.O_WRONLY)
            os.dup2(quiet, 1)
            os.dup2(quiet, 2)
            result = probe(unit.entry, meta)
        except BaseException as exc:
            result = {"evidence": [], "error": f"probe crashed: {exc!r}"}
        os.write(write_end, json.dumps(result).encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    if not data:
        return {"evidence": [], "error": f"no result (wait status {status}; time-out {timeout}s?)"}
    return json.loads(data)


def verify(selected: list[Unit]) -> list[str]:
    """Problems found; each line says which unit and what did not happen as marked."""
    import torch  # imported once; each unit runs in a fork of this process

    torch.set_num_threads(1)
    problems = []
    for unit in selected:
        codes = unit.codes()
        device = codes & DEVICE_CODES
        uses_device = any("cuda" in p.read_text() for p in unit.files)
        plain = run_probe(unit, meta=False)
        evidence = set(plain["evidence"])
        error = plain.get("error")
        if uses_device:
            on_device = run_probe(unit, meta=True)
            if "device" in on_device["evidence"]:
                evidence |= {"TL301", "TL302"} if device else {"device"}
        other = codes - DEVICE_CODES
        for code in sorted(codes):
            if code not in evidence:
                why = error or "no error"
                problems.append(f"{unit.name}: {code} marked but not observed ({why})")
        if not codes:
            allowed = ALLOWED_EVIDENCE.get(unit.name, {})
            unexpected = sorted(evidence - set(allowed))
            if unexpected:
                problems.append(f"{unit.name}: clean, but showed {unexpected}")
            if error:
                problems.append(f"{unit.name}: clean, but failed: {error}")
        elif error and "TL201" not in other and not device:
            problems.append(f"{unit.name}: failed: {error}")
        status = "ok" if not any(p.startswith(unit.name + ":") for p in problems) else "FAILED"
        marked, observed = sorted(codes) or "-", sorted(evidence) or "-"
        print(f"{status:<7}{unit.name:<48}marked {marked} observed {observed}")
    return problems


# --- probes (run in the child process) -------------------------------------------------------


def probe(entry: Path, meta: bool) -> dict:
    """Run `entry` as `__main__` with the probes installed; what they saw."""
    import runpy
    import warnings

    import torch
    from torch import nn
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    evidence: set[str] = set()
    seen_modules: dict[int, nn.Module] = {}
    consumed: dict[int, torch.Tensor] = {}
    backward_ran = [False]

    def looks_normalised(x: torch.Tensor, log: bool) -> bool:
        if not isinstance(x, torch.Tensor) or x.device.type == "meta":
            return False
        if x.dim() < 2 or not x.numel():
            return False
        x = x.detach().float()
        if log:
            return bool(torch.allclose(torch.logsumexp(x, dim=1), torch.zeros(()), atol=1e-4))
        return bool((x >= 0).all() and torch.allclose(x.sum(dim=1), torch.ones(()), atol=1e-4))

    functional = nn.functional
    cross_entropy, nll_loss, bce_logits = (
        functional.cross_entropy,
        functional.nll_loss,
        functional.binary_cross_entropy_with_logits,
    )

    def ce(input, target, *args, **kwargs):
        if looks_normalised(input, log=False) or looks_normalised(input, log=True):
            evidence.add("TL101")
        return cross_entropy(input, target, *args, **kwargs)

    def nll(input, target, *args, **kwargs):
        if looks_normalised(input, log=False):
            evidence.add("TL103")
        return nll_loss(input, target, *args, **kwargs)

    def bce(input, target, *args, **kwargs):
        usable = isinstance(input, torch.Tensor) and input.device.type != "meta"
        if usable and input.numel() and bool(((input > 0) & (input < 1)).all()):
            evidence.add("TL102")
        return bce_logits(input, target, *args, **kwargs)

    functional.cross_entropy, functional.nll_loss = ce, nll
    functional.binary_cross_entropy_with_logits = bce

    depth = [0]
    graphs: list[int] = []  # each outermost forward whose output carries a graph
    reached: set[int] = set()  # those a backward() computed a gradient for

    def forward_pre_hook(module: nn.Module, args: tuple) -> None:
        depth[0] += 1

    def forward_hook(module: nn.Module, args: tuple, output: object) -> None:
        depth[0] -= 1
        seen_modules[id(module)] = module
        results = output if isinstance(output, tuple) else (output,)
        outs = [o for o in results if isinstance(o, torch.Tensor) and o.grad_fn is not None]
        if not outs:
            return
        if not module.training and torch.is_grad_enabled():
            evidence.add("TL503")
        if depth[0] == 0:  # any of a tuple's outputs reaching backward() counts
            key = len(graphs)
            graphs.append(key)
            for out in outs:
                out.register_hook(lambda grad, key=key: reached.add(key))
        stochastic = (nn.modules.dropout._DropoutNd, nn.modules.batchnorm._BatchNorm)
        if (
            module.training
            and not torch.is_grad_enabled()
            and any(isinstance(m, stochastic) for m in module.modules())
        ):
            evidence.add("TL504")

    nn.modules.module.register_module_forward_pre_hook(forward_pre_hook)
    nn.modules.module.register_module_forward_hook(forward_hook)

    consumed_params: dict[int, torch.Tensor] = {}
    dirty: set[int] = set()  # parameters whose consumed gradient a new backward() adds to

    def step_hook(optimizer: torch.optim.Optimizer, args: tuple, kwargs: dict) -> None:
        params = [p for group in optimizer.param_groups for p in group["params"]]
        grads = [p.grad for p in params if p.grad is not None]
        if not grads:
            evidence.add("TL505" if not backward_ran[0] else "TL502")
        elif not any(g.is_meta for g in grads) and all(not bool(g.any()) for g in grads):
            evidence.add("TL502")
        if any(id(p) in dirty for p in params):
            evidence.add("TL501")  # this step uses gradients summed over earlier steps
        for p in params:
            dirty.discard(id(p))
            if p.grad is not None and not p.grad.is_meta:
                consumed[id(p)] = p.grad.clone()
                consumed_params[id(p)] = p

    register_optimizer_step_pre_hook(step_hook)

    tensor_backward = torch.Tensor.backward

    def backward(self, *args, **kwargs):
        # Cleared gradients (None or zero) start clean; an unchanged consumed one is added to.
        for key, before in consumed.items():
            grad = consumed_params[key].grad
            if grad is None or not bool(grad.any()):
                dirty.discard(key)
            elif bool(before.any()) and torch.equal(grad, before):
                dirty.add(key)
        backward_ran[0] = True
        return tensor_backward(self, *args, **kwargs)

    torch.Tensor.backward = backward

    def unregistered(module: nn.Module) -> bool:
        registered = {id(p) for p in module.parameters()}
        for value in vars(module).values():
            items = value.values() if isinstance(value, dict) else value
            if not isinstance(value, (list, tuple, dict)):
                continue
            for item in items:
                if isinstance(item, nn.Parameter) and id(item) not in registered:
                    return True
                if isinstance(item, nn.Module) and any(
                    id(p) not in registered for p in item.parameters()
                ):
                    return True
        return False

    if meta:
        # Meta tensors hold no values: `.item()` gives 0.0 and optimizer steps are skipped
        # (they read step counts), so a script runs on to its evaluation code.
        tensor_item = torch.Tensor.item
        torch.Tensor.item = lambda self: 0.0 if self.is_meta else tensor_item(self)
        pending = [torch.optim.Optimizer]
        while pending:
            kind = pending.pop()
            kind.step = lambda self, *args, **kwargs: None
            pending.extend(kind.__subclasses__())

    error = None
    source = entry.read_text()
    sys.argv = [str(entry)]
    sys.path.insert(0, str(entry.parent))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if meta:
                code = compile(on_meta(source), str(entry), "exec")
                exec(code, {"__name__": "__main__", "__file__": str(entry)})
            else:
                runpy.run_path(str(entry), run_name="__main__")
        except RuntimeError as exc:
            message = str(exc)
            error = f"RuntimeError: {message[:200]}"
            if "modified by an inplace operation" in message or (
                "leaf Variable that requires grad" in message and "in-place" in message
            ):
                evidence.add("TL201")
                error = None
            if "is not on the expected device" in message or "same device" in message:
                evidence.add("device")
                error = None
            if meta and "meta" in message and "device" not in evidence:
                error = None  # an operation meta tensors cannot do, after the code under test
        except ValueError as exc:
            error = f"ValueError: {str(exc)[:200]}"
            if "empty parameter list" in str(exc):
                # `optimizer(model.parameters())` found none: the layers are not registered.
                evidence.update({"TL401", "TL402"})
                error = None
        except SystemExit:
            pass
        except Exception as exc:  # a unit that fails otherwise is reported, not hidden
            error = f"{type(exc).__name__}: {str(exc)[:200]}"
    if error is None and not meta and any(key not in reached for key in graphs):
        evidence.add("TL503")  # a model's output carried a graph no backward() ever used
    if any("lr_scheduler.step()` before `optimizer.step()" in str(w.message) for w in caught):
        evidence.add("TL506")
    if any(unregistered(m) for m in seen_modules.values()):
        evidence.add("TL401")
        evidence.add("TL402")
    return {"evidence": sorted(evidence), "error": error}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the figures as JSON")
    parser.add_argument("--verify", action="store_true", help="run the corpus and check the bugs")
    parser.add_argument("--probe", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--meta", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.probe:  # one unit in this process, for debugging a case
        print(json.dumps(probe(args.probe.resolve(), args.meta)))
        return 0
    tallies = score()
    print(f"{len(corpus_files())} files in {CORPUS.relative_to(ROOT)}")
    print(format_table(tallies))
    if args.json:
        figures = {
            name: {"tp": t.tp, "fn": t.fn, "fp": t.fp, "recall": t.recall, "precision": t.precision}
            for name, t in tallies.items()
        }
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    if args.verify:
        problems = verify(units())
        print("\n".join(problems) if problems else "every marked bug observed; clean units clean")
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
