"""Check one file's models: load, build on meta, choose inputs, run, explain failures.

For each input plan the model is first run once on fake tensors with concrete sizes (most
models pass here and cost a few milliseconds). A failure is analysed with symbolic sizes:
the guard the failing op left (`Ne(32*(H//2)*(W//2), 6272)`) is negated and searched for a
satisfying input size. None: the bug is definite (TL601-TL605). Some: the model only works
for some sizes (TL606), and the analysis goes on with that size.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.util
import inspect
import itertools
import math
import os
import re
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from torch import fx, nn

from torchlint.shapes import crash_marks, module_settings
from torchlint.shapes import findings as F
from torchlint.shapes.added_tables import infer_from_added_table
from torchlint.shapes.assumed_inputs import assumed, is_assumed
from torchlint.shapes.astutil import import_aliases, parse
from torchlint.shapes.attention_masks import transformer_mask_plans
from torchlint.shapes.attribute_inputs import attribute_plans
from torchlint.shapes.budget import BudgetSpent, cpu_budget, raised_by_model_code
from torchlint.shapes.build import (
    NeedsArguments,
    build,
    builder_arguments,
    call_builder,
    constructor_arguments,
    full_depth,
    materialize_lazy,
    site_of,
)
from torchlint.shapes.compat import explain
from torchlint.shapes.compat import size_functions as tf
from torchlint.shapes.deferred import sympy
from torchlint.shapes.described_shapes import (
    asserted_plans,
    described_plans,
    indexed_plans,
    named_dims,
    sliced_plans,
    unpacked_plans,
)
from torchlint.shapes.feature_maps import image_list_plans, list_plans, tensor_list_input
from torchlint.shapes.guess import (
    DIVIDES,
    OtherChoice,
    Variant,
    config_sizes,
    describe,
    guesses,
    scaled,
    unwrap,
)
from torchlint.shapes.guessed_parts import built_parts
from torchlint.shapes.infer import (
    infer_from_base_layer,
    infer_from_graph,
    infer_from_name,
    infer_from_source,
    joined_plan,
    leading_reshape,
    shape_free_plan,
    unread_input_plans,
    unused_input_plans,
)
from torchlint.shapes.inputs import (
    Dim,
    InputPlan,
    TensorSpec,
    combine,
    copies_first,
    declared_plan,
    forward_inputs,
    image_plan,
    paired_image_plan,
    reshaped_image_plan,
    tensor_plan,
    trace,
)
from torchlint.shapes.keyword_inputs import called_keywords, companion_inputs, fed_by_keyword
from torchlint.shapes.loader import Project, is_stub
from torchlint.shapes.meta_run import MetaRuns
from torchlint.shapes.mixins import forward_mixin
from torchlint.shapes.open_inputs import (
    TRIED_FIRST,
    TRIED_SHAPES,
    first_open_plans,
    open_input_plans,
)
from torchlint.shapes.propagate import (
    Failure,
    Session,
    World,
    analyze_fx,
    analyze_hooks,
    run_direct,
)
from torchlint.shapes.recurrent_state import state_plans
from torchlint.shapes.scaled_inputs import scaled_input_plans
from torchlint.shapes.settle import needs_arguments_text
from torchlint.shapes.siblings import mask_plans, sibling_plans
from torchlint.shapes.size_terms import never_equal, symbolic, variables, with_correction
from torchlint.shapes.solve import Problem, Unsupported, few_sizes
from torchlint.shapes.stand_ins import from_data, stand_in_base, stands_for
from torchlint.shapes.sweep import further_builders
from torchlint.shapes.value_arguments import (
    assumes_layout,
    layout_assumed,
    mark_layout_assumed,
    value_arguments,
)
from torchlint.shapes.value_stop import ValueStop, value_stop

#: Why a building block no checked model built was not checked, and what to do.
_UNBUILT = (
    "it is only built by models that were not checked "
    "(give its arguments in [tool.torchlint.shapes] to check it on its own)"
)
_MAX_FLIPS = 6
#: Argument-free builders tried per class (`resnet18`, `resnet34`, ...): one usually does.
_MAX_BUILDERS = 2
#: More builders called, per file, for blocks no checked model built (see `sweep`).
_MAX_SWEPT = 4
_GUESSED_DEFINITE = frozenset({"TL601", "TL602", "TL603", "TL604"})
#: Findings that a configuration cut to fewer layers may cause (see `full_depth`).
_DEPTH_SENSITIVE = frozenset({"TL601", "TL602", "TL603", "TL604", "TL605", "TL607"})
#: Input sizes often met (images, mel bins, sequences): a failure that one of them avoids is
#: not certain.
_USUAL_SIZES = (28, 32, 64, 80, 128, 224)
#: Models with more modules than this get no TL606 analysis after passing at a usual size.
_HARVEST_MODULES = 48


#: First failures that no input size can change (see `_size_blind`).
_BLIND_TYPES = (AttributeError, NameError, ImportError, NotImplementedError)
_BLIND_TEXT = re.compile(
    r"NoneType|'bool' object|must specify|has to be passed|cannot specify both", re.IGNORECASE
)


def _size_blind(exc: BaseException) -> bool:
    """Whether a forward's failure is one that other input sizes cannot change: an input
    left None (`'NoneType' object has no attribute 'shape'`), an attribute or name the model
    lacks, an input the caller must give (`You must specify exactly one of input_ids or
    inputs_embeds`)."""
    if isinstance(exc, _BLIND_TYPES):
        return True
    return isinstance(exc, (TypeError, ValueError)) and bool(_BLIND_TEXT.search(str(exc)))


@dataclass
class PlanResult:
    ok: bool = False
    failure: Failure | None = None
    code: str | None = None  #: TL601-TL605 when the failure is definite
    rank_error: bool = False  #: failed on the number of dimensions (maybe a wrong guess)
    pinned: bool = False  #: passed only after sizes were solved for (not at a usual size)
    reason: str | None = None  #: why it could not be decided (TL690)
    #: The input sizes of the last run (the passing one, or the one that failed for good).
    hints: dict[str, int] = field(default_factory=dict)
    #: Passed up to an op whose sizes depend on tensor values (see `value_stop`).
    stopped: ValueStop | None = None
    names: dict[sympy.Symbol, str] = field(default_factory=dict)
    constraints: list[tuple[Failure, Any, list[int], dict[sympy.Symbol, str]]] = field(
        default_factory=list
    )
    refused: bool = False  #: stopped at a refused batch of several samples, not analysed


@dataclass(frozen=True)
class _BuildRequest:
    """A class to build with these arguments and check (`call`: how a build failure names
    the call, when not from the arguments)."""

    cls: type
    name: str
    where: tuple[str, int]
    spec: dict[str, Any]
    declared: dict[str, Any]
    args: list[Any]
    kwargs: dict[str, Any]
    call: str | None = None
    #: The configuration class whose defaults built it, named in its findings.
    configured: str | None = None

    def at_full_depth(self) -> _BuildRequest | None:
        """The same build with all the layers a configuration cut to a couple has."""
        deep = full_depth(self.kwargs)
        return None if deep is None else dataclasses.replace(self, kwargs=deep)


@dataclass(frozen=True)
class _Undecided:
    """An analysis that found no shape error (`result`: why not), and the failure it ended
    on (`_failure_key` at the sizes it came to)."""

    result: PlanResult
    last: tuple[Any, ...]


@dataclass
class Stats:
    """How each model was checked (the benchmark reports these)."""

    models: list[dict[str, Any]] = field(default_factory=list)


class FileChecker:
    def __init__(
        self,
        project: Project,
        sources: dict[str, str],
        stats: Stats | None = None,
        deadline: float | None = None,
        model_budget: float | None = None,
    ):
        self.project = project
        self.sources = sources
        #: `time.monotonic()` after which the remaining models are skipped (not lost).
        self.deadline = deadline
        #: CPU seconds one model's check may take (None: no limit; see `budget`).
        self.model_budget = model_budget
        self.user_files = project.files
        self.stats = stats or Stats()
        self.findings: list[F.Finding] = []
        #: Whether the sizes a model is limited to are wanted (TL606), see `_clean_at_own_side`.
        self.size_conditions = True
        self.covered: set[type] = set()
        #: Per class, an instance of it inside a model that was built but not checked: a
        #: block built with its real arguments, to check on its own (see `_check_part`).
        self.unchecked_parts: dict[type, nn.Module] = {}
        #: `path::Class` -> why a class inside a model checked only up to a stop on tensor
        #: values was not checked (its forward had not run yet).
        self.cut_short: dict[str, str] = {}
        #: The classes whose forward ran, when the model being checked stopped early.
        self._ran: set[type] | None = None
        #: Deferred blocks checked on their own with a default configuration.
        self.configured: set[type] = set()
        #: The configuration object the model being checked was built with, if any.
        self._config: Any = None
        #: Classes not checked on their own, unless a model of another file builds them.
        self.pending: list[dict[str, Any]] = []
        self._sessions: dict[int, Session] = {}
        self._settings: module_settings.Settings = []
        #: The forward input whose shape the last planning could not infer.
        self._unknown_input: str | None = None
        self._open_input: str | None = None
        #: Failures of a first run (see `_failure_key`) whose analysis found no shape error.
        self._failed: dict[tuple[Any, ...], _Undecided] = {}
        #: Failures of a first run, and sizes at which the analysis found the model passes.
        self._passed: dict[tuple[Any, ...], dict[str, int]] = {}
        #: How the model being checked took another's analysis over ("sizes", "failure").
        self._reused: str | None = None
        #: Whether a model's first run is tried on plain meta tensors first (`meta_run`).
        self._meta_first = False
        self._meta_runs: MetaRuns | None = None

    def _session(self, model: nn.Module) -> Session:
        """The fake-tensor session of the model being checked (made on first use)."""
        if self._sessions.get(id(model)) is None:
            self._sessions = {id(model): Session(model)}
        module_settings.put_back(self._settings)  # what the last run changed
        return self._sessions[id(model)]

    # -- files -----------------------------------------------------------------------------
    def check_job(self, job: dict[str, Any]) -> list[F.Finding]:
        path = job["abspath"]
        self.size_conditions = job.get("size_conditions", True)
        try:
            module = self.project.load(path, job["module"])
        except Exception as exc:
            self.findings.append(F.skipped(path, 1, f"could not import the file: {_brief(exc)}"))
            return self.findings
        deferred: list[tuple[str, int, str]] = []
        classes = sorted(job["classes"].items(), key=lambda item: item[1]["line"])
        crashed = job.get("crashed") or {}
        for name, spec in classes:
            cls = getattr(module, name, None)
            line = spec["line"]
            if name in crashed:  # an earlier check of the file died on this model
                self._skip(path, line, name, crashed[name])
                continue
            crash_marks.mark(name)
            if self.deadline is not None and time.monotonic() > self.deadline:
                self._skip(path, line, name, "the file's time budget was used up")
                continue
            if not _is_module_class(cls):
                base = stand_in_base(cls)
                if base is not None:
                    note = self._missing_note(cls, base)
                    why = f"its base class {base.__name__} could not be imported{note}"
                    self._skip(path, line, name, why)
                elif cls is None or is_stub(cls):
                    self._skip(path, line, name, self._load_reason(path, "is not defined"))
                continue
            if _without_forward(cls):
                continue  # an abstract base without forward
            declared = spec.get("declared") or {}
            ctor = declared.get("ctor") or spec.get("ctor")
            if ctor is None and spec.get("sub_block") and not declared.get("shapes"):
                # A building block of another model: its defaults may be a configuration
                # nobody uses; it is checked inside the models that build it.
                deferred.append((name, line, _UNBUILT))
                continue
            try:
                args, kwargs, source = constructor_arguments(cls, ctor, self.project.load)
            except NeedsArguments as exc:
                built = self._from_builders(module, cls, spec.get("builders", []))
                if isinstance(built, str) and spec.get("foreign_builders"):
                    built = self._from_foreign_builders(cls, spec["foreign_builders"]) or built
                if isinstance(built, str):
                    reason = needs_arguments_text(str(exc), spec.get("instantiated", False), built)
                    deferred.append((name, line, reason))
                    continue
                model, how = built
                if type(model) is cls:
                    self.check_model(model, name, (path, line), spec, declared)
                    self.stats.models[-1]["built_by"] = how
                else:  # `resnet50()` hands `Bottleneck` to `ResNet`: checked inside it
                    self._check_user(model, how, path, line, job)
                continue
            guessed_data = from_data(ctor, args, kwargs) if ctor is not None else None
            if guessed_data is not None:
                # `RNN(INPUT_DIM, 256)` with `INPUT_DIM = len(TEXT.vocab)`: sizes the script
                # reads from its data are guessed, the call site's others kept.
                partial, unread = guessed_data
                job["classes"][name] = {**spec, "partial": partial}
                reason = f"its call site passes {unread}, which the script computes from data"
                deferred.append((name, line, reason))
                continue
            configured = _config_name(kwargs) if source == "default config" else None
            request = _BuildRequest(cls, name, (path, line), spec, declared, args, kwargs)
            self._build_and_check(dataclasses.replace(request, configured=configured))
        for name in job.get("module_level", []):
            value = getattr(module, name, None)
            if name in crashed:
                site = site_of(value) if isinstance(value, nn.Module) else None
                code = getattr(value, "__code__", None)
                line = site.line if site is not None else getattr(code, "co_firstlineno", 1)
                self._skip(path, line, name, crashed[name])
                continue
            crash_marks.mark(name)
            if inspect.isfunction(value):  # a factory: `def net(): return nn.Sequential(...)`
                try:
                    value = build(value, [], {})
                except Exception as exc:
                    line = value.__code__.co_firstlineno
                    why = f"could not build {name}(): {_brief(exc)}{self._missing_note(value)}"
                    self._skip(path, line, name, why)
                    continue
            if isinstance(value, nn.Module):
                site = site_of(value)
                line = site.line if site is not None else 1
                spec = job.get("module_level_spec") or {"evidence": []}
                own = (job.get("module_level_specs") or {}).get(name)
                if own:  # its own calls first (`model_0(image)`), then the file's data
                    spec = {**spec, "evidence": [*own["evidence"], *spec.get("evidence", [])]}
                self.check_model(value, name, (path, line), spec, {}, prefix=name)
        # A block built from a configuration object (`Block(config)`) gets the parent's
        # kind of configuration: one the parent did not check is checked with the default
        # configuration, the largest first (it covers the blocks it builds).
        for name, line, _ in sorted(deferred, key=lambda item: -item[1]):
            self._check_configured(module, name, (path, line), job["classes"][name])
        self._sweep_builders(module, job, deferred)
        for name, line, reason in deferred:
            cls = getattr(module, name, None)
            if cls in self.configured:
                continue
            crash_marks.mark(name)
            users = job["classes"][name].get("users", [])
            if cls not in self.covered and users:
                # A block (`Bottleneck`) checked inside a model its module builds (`resnet50`).
                built = self._from_builders(module, None, users)
                if not isinstance(built, str):
                    self._check_user(*built, path, line, job)
            if cls not in self.covered and cls in self.unchecked_parts:
                self._check_part(cls, name, (path, line), job["classes"][name])
            if cls not in self.covered and _is_module_class(cls):
                alone = self._check_alone(cls, name, (path, line), job["classes"][name])
                if alone:
                    reason = f"{reason}; {alone}"
            if cls not in self.covered and _is_module_class(cls):
                guessed = self._check_guessed(cls, name, (path, line), job["classes"][name])
                if guessed is None:
                    continue
                if guessed:
                    head, cut, tail = reason.partition(" (give")
                    reason = f"{head}; {guessed}{cut}{tail}"
            if cls not in self.covered:
                # Another file's model may build it: the caller decides (see `pending`).
                self.pending.append({"name": name, "line": line, "reason": reason})
        return self.findings

    def _check_part(
        self, cls: type, name: str, where: tuple[str, int], spec: dict[str, Any]
    ) -> None:
        """Check, on its own, the block a model was built with when that model could not be
        checked: its arguments are the ones the model gave it. A block this check cannot
        take either is left to the other ways (and its reason), as if it were not tried."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            return
        found = len(self.findings)
        self.check_model(self.unchecked_parts[cls], name, where, spec, {})
        if self.stats.models[-1]["result"] == "skipped":
            del self.findings[found:]
            self.stats.models.pop()

    def _check_user(
        self, model: nn.Module, how: str, path: str, line: int, job: dict[str, Any]
    ) -> None:
        """Check a model a builder made that uses the class at `line` (not the class itself)."""
        model_name = type(model).__name__
        spec = job["classes"].get(model_name, {"evidence": [], "line": line})
        self.check_model(model, model_name, (path, spec.get("line", line)), spec, {})
        self.stats.models[-1]["built_by"] = how

    def _sweep_builders(
        self, module: Any, job: dict[str, Any], deferred: list[tuple[str, int, str]]
    ) -> None:
        """Blocks no checked model built: a few more of the module's builders are called
        (other families first, see `sweep`), and a model that holds one of them is checked."""
        waiting = {getattr(module, name, None) for name, _, _ in deferred}
        waiting = {c for c in waiting if _is_module_class(c)}
        for name in further_builders(job["classes"], _MAX_BUILDERS)[:_MAX_SWEPT]:
            waiting -= self.covered
            if not waiting or (self.deadline is not None and time.monotonic() > self.deadline):
                return
            function = getattr(module, name, None)
            if function is None or is_stub(function):
                continue
            try:
                model = call_builder(module, name, builder_arguments(function))
            except Exception:
                continue
            if any(_builds(model, cls) for cls in waiting):
                self._check_user(model, f"{name}()", job["abspath"], 1, job)

    def _check_configured(
        self, module: Any, name: str, where: tuple[str, int], spec: dict[str, Any]
    ) -> None:
        """Check a deferred class on its own when its constructor takes a configuration
        object that can be built with its defaults (and nothing else it lacks)."""
        cls = getattr(module, name, None)
        if cls in self.covered or not _is_module_class(cls):
            return
        if self.deadline is not None and time.monotonic() > self.deadline:
            return
        if _without_forward(cls):
            return
        try:
            args, kwargs, source = constructor_arguments(cls, None)
        except NeedsArguments:
            return
        if source != "default config":
            return
        self.configured.add(cls)
        request = _BuildRequest(
            cls, name, where, spec, {}, args, kwargs, f"{name}(config)", _config_name(kwargs)
        )
        self._build_and_check(request)

    def _build_and_check(self, request: _BuildRequest) -> None:
        """Build a class and check it.

        A definite finding met with a configuration cut to a couple of layers stands only
        if the model with all its layers fails too."""
        start = len(self.findings)
        if not self._build_once(request):
            self._build_deep(request)
            return
        if not any(f["code"] in _DEPTH_SENSITIVE for f in self.findings[start:]):
            return
        deep = request.at_full_depth()
        if deep is None:
            return
        kept, self.findings[start:] = self.findings[start:], []
        record = self.stats.models.pop()
        if not self._build_once(deep):
            self.findings[start:] = kept  # the full model cannot be built: keep what was seen
            self.stats.models.append(record)

    def _build_deep(self, request: _BuildRequest) -> None:
        """After a build with a configuration cut to a couple of layers failed (its other
        fields may count on all of them), build and check it with all its layers."""
        deep = request.at_full_depth()
        if deep is None:
            return
        failed = self.findings.pop()
        if not self._build_once(deep):
            self.findings[-1] = failed

    def _build_once(self, request: _BuildRequest) -> bool:
        """Build and check a class (False, with a TL690, when it cannot be built)."""
        cls, name, args, kwargs = request.cls, request.name, request.args, request.kwargs
        try:
            model = build(cls, args, kwargs)
        except Exception as exc:
            call = request.call or _call_text(name, args, kwargs)
            why = f"could not build {call}: {_brief(exc)}{self._missing_note(cls)}"
            self._skip(*request.where, name, why)
            return False
        self._config = _config_in(kwargs)
        start = len(self.findings)
        try:
            self.check_model(model, name, request.where, request.spec, request.declared)
        finally:
            self._config = None
        if request.configured:  # a checkpoint's configuration may not fail so
            for finding in self.findings[start:]:
                if finding["code"] != "TL690" and "message" in finding:
                    finding["message"] += f" (with the defaults of {request.configured})"
        return True

    def _check_alone(
        self, cls: type, name: str, where: tuple[str, int], spec: dict[str, Any]
    ) -> str:
        """Check a block that no checked model built, with its constructor's defaults when
        it needs no argument (what `Net()` builds). Why it could not be checked, or ""."""
        if _without_forward(cls):
            return ""
        if self.deadline is not None and time.monotonic() > self.deadline:
            return ""
        try:
            source = constructor_arguments(cls, None)[2]
        except NeedsArguments:
            return ""
        if source != "defaults":
            return ""  # a configuration object: `_check_configured` builds those
        start, records = len(self.findings), len(self.stats.models)
        self._build_and_check(_BuildRequest(cls, name, where, spec, {}, [], {}, f"{name}()"))
        if cls in self.covered:
            return ""
        new, self.findings[start:] = self.findings[start:], []
        del self.stats.models[records:]
        skipped = next((f for f in new if f["code"] == "TL690"), None)
        if skipped is None:
            return ""
        return "built with its defaults: " + skipped["message"].split(" skipped: ", 1)[-1]

    def _check_guessed(
        self, cls: type, name: str, where: tuple[str, int], spec: dict[str, Any]
    ) -> str | None:
        """Check a class built with guessed sizes (see `guess`): None once checked, else
        why not ("" when its parameters cannot be guessed)."""
        partial = spec.get("partial")
        if partial is not None:
            partial = built_parts(partial, self.project.load)
            if isinstance(partial, str):
                return partial
        variants = guesses(cls, partial)
        if variants is None:
            return ""
        records = len(self.stats.models)
        reported: dict[tuple[str, int, str], F.Finding] = {}
        failed: list[str] = []
        for variant in variants:
            found = self._check_variant(cls, name, where, spec, variant)
            for factor in (2, 4):
                if not (isinstance(found, str) and DIVIDES.search(found)):
                    break
                # `assert dim % dim_head == 0` with a default `dim_head = 64`: larger widths.
                found = self._check_variant(cls, name, where, spec, scaled(variant, factor))
            if isinstance(found, str):
                failed.append(found)
                continue
            for key, finding in found.items():
                reported.setdefault(key, finding)
        del self.stats.models[records + 1 :]  # one model, checked several ways
        unchecked = [reason for reason in failed if reason.startswith("with ")]
        if unchecked or len(failed) == len(variants):
            # A built variant could not be checked, or none could be built (a value that a
            # branch refuses, `rnn_type="LSTMX"`, leaves the others to check).
            return (unchecked or failed)[0]
        if not reported and records < len(self.stats.models):
            record = self.stats.models[records]
            if record.get("result") == "finding":
                record["result"] = "ok"  # a mismatch at some sizes only: nothing reported
        self.findings += [reported[key] for key in sorted(reported)]
        return None

    def _check_variant(
        self,
        cls: type,
        name: str,
        where: tuple[str, int],
        spec: dict[str, Any],
        variant: Variant,
    ) -> dict[tuple[str, int, str], F.Finding] | str:
        """The findings met in every run of one variant, with their sizes written as
        expressions of the arguments (see `size_terms`), or why it could not be checked."""
        found: list[dict[tuple[str, int, str], F.Finding]] = []
        for run, arguments in enumerate(variant.runs):
            if self.deadline is not None and time.monotonic() > self.deadline:
                return "with guessed sizes: the file's time budget was used up"
            try:
                model = build(cls, [], unwrap(arguments))
            except Exception as exc:
                # A default configuration may leave sizes to the parent model: give them.
                filled = config_sizes(cls, arguments, run)
                try:
                    if filled is None:
                        raise exc
                    model = build(cls, [], unwrap(filled))
                except Exception:
                    return f"built with guessed sizes ({describe(arguments)}): {_brief(exc)}"
                arguments = filled
            start = len(self.findings)
            self.check_model(model, name, where, spec, {})
            new, self.findings[start:] = self.findings[start:], []
            skipped = next((f for f in new if f["code"] == "TL690"), None)
            if skipped is not None:
                reason = skipped["message"].split(" skipped: ", 1)[-1]
                return f"with guessed sizes ({describe(arguments)}): {reason}"
            # Layer sizes only: an op's failure (a residual add) may be a contract of the
            # guessed sizes that real callers keep.
            definite = [f for f in new if f["code"] in _GUESSED_DEFINITE]
            found.append({(f["path"], f["line"], f["code"]): f for f in definite})
            if _settled_clean(found):
                return {}
        kept: dict[tuple[str, int, str], F.Finding] = {}
        for key in sorted(set(found[0]).intersection(*found[1:])):
            met = [f[key] for f in found]
            message = symbolic([f["message"] for f in met], variant.runs)
            if message is None or not never_equal(message, variables(variant.runs)):
                continue  # the runs failed in different ways, or some sizes would fit
            finding = dict(met[0])
            finding["message"] = with_correction(message) + _holds_for(name, variant)
            if any(f.get("fix") != finding.get("fix") for f in met[1:]):
                finding.pop("fix", None)  # the corrected literal depends on the sizes
            kept[key] = finding
        return kept

    def covered_classes(self) -> list[str]:
        """`path::name` of the user classes that some checked model of this file built."""
        found = []
        for cls in self.covered:
            module = inspect.getmodule(cls)
            file = getattr(module, "__file__", None)
            if file in self.user_files:
                found.append(f"{file}::{cls.__name__}")
        return sorted(found)

    def _from_builders(
        self, module: Any, cls: type | None, names: list[str]
    ) -> tuple[nn.Module, str] | str:
        """The model built by one of its module's argument-free builders (`resnet18()`,
        without weights), or why none did."""
        reason = ""
        containing: tuple[nn.Module, str] | None = None
        for name in names[:_MAX_BUILDERS]:
            function = getattr(module, name, None)
            if is_stub(function):
                continue
            kwargs = builder_arguments(function) if function is not None else {}
            try:
                model = call_builder(module, name, kwargs)
            except Exception as exc:
                reason = f"{_call_text(name, [], kwargs)} failed: {_brief(exc)}"
                continue
            if type(model) is cls or (cls is None and isinstance(model, nn.Module)):
                return model, f"{name}()"
            if containing is None and _builds(model, cls):
                # The builder hands the class to the model it makes (`_resnet(Bottleneck,
                # ...)`): that model is checked, and the class with it.
                containing = (model, f"{name}()")
        return containing or reason

    def _from_foreign_builders(
        self, cls: type, builders: list[dict[str, str]]
    ) -> tuple[nn.Module, str] | None:
        """The model built by an argument-free builder in another file of the project
        (`build_sam_vit_b()` for `Sam`), or None when none built it."""
        for builder in builders[:_MAX_BUILDERS]:
            try:
                module = self.project.load(builder["path"], builder["module"])
            except Exception:
                continue
            built = self._from_builders(module, cls, [builder["name"]])
            if not isinstance(built, str):
                model, how = built
                return model, f"{builder['module']}.{how}"
        return None

    def _load_reason(self, path: str, default: str) -> str:
        notes = self.project.notes.get(path) or []
        return f"{default} ({notes[0]})" if notes else default

    def _skip(self, path: str, line: int, name: str, reason: str) -> None:
        self.findings.append(F.skipped(path, line, f"shape check of {name} skipped: {reason}"))

    # -- models ----------------------------------------------------------------------------
    def check_model(
        self,
        model: nn.Module,
        label: str,
        where: tuple[str, int],
        spec: dict[str, Any],
        declared: dict[str, Any],
        prefix: str = "",
    ) -> None:
        started = time.perf_counter()
        record: dict[str, Any] = {"model": label, "path": "fx", "result": "ok"}
        self.stats.models.append(record)
        self._settings = module_settings.note(model)
        self._ran = None
        found = len(self.findings)
        self._reused = None
        try:
            with cpu_budget(self.model_budget):
                self._check_model(model, label, where, spec, declared, record, prefix)
                if record["result"] == "skipped" and not declared.get("shapes"):
                    self._check_with_companions(model, label, where, spec, record, prefix)
        except BudgetSpent:
            record["result"] = "skipped"
            del self.findings[found:]
            self._skip(
                where[0],
                where[1],
                label,
                f"the model's time budget ({self.model_budget:g} s of CPU) was used up"
                " before its check ended",
            )
        except Exception as exc:
            record["result"] = "skipped"
            self._skip(where[0], where[1], label, explain(f"internal error: {_brief(exc)}"))
        except BaseException as exc:
            if not raised_by_model_code(exc):
                raise
            # `sys.exit()`, or an exception class outside Exception's tree (transformers'
            # OptionalDependencyNotAvailable): this model's check ends, not its file's.
            del self.findings[found:]
            record["result"] = "skipped"
            self._skip(where[0], where[1], label, f"the model's code raised {_brief(exc)}")
        finally:
            self._sessions = {}
            module_settings.put_back(self._settings)
            self._settings = []
            record["seconds"] = time.perf_counter() - started
            if self._reused:
                record["reused"] = self._reused
            if record["result"] != "skipped":
                with contextlib.suppress(Exception):
                    ran = self._ran if self._ran is not None else map(type, model.modules())
                    self.covered.update(_with_forward_owners(ran))
            else:
                with contextlib.suppress(Exception):
                    for part in model.modules():
                        if part is not model:
                            self.unchecked_parts.setdefault(type(part), part)

    def _check_with_companions(
        self,
        model: nn.Module,
        label: str,
        where: tuple[str, int],
        spec: dict[str, Any],
        record: dict[str, Any],
        prefix: str,
    ) -> None:
        """Check a model that its first input alone did not get through once more, with the
        inputs it takes by keyword beside it (`decoder_input_ids`, `pixel_values`: see
        `keyword_inputs`), or with its tensors alone when it takes values beside them (a
        dtype, the batch size: see `value_arguments`). The second check's result stands."""
        names = companion_inputs(model)
        called = called_keywords(model, spec.get("evidence") or [])
        if called:  # `unet(images, time=t, class_labels=labels)`: the tensors it is given
            first = names or forward_inputs(model) or []
            names = [*first, *(n for n in called if n not in first)]
        values: dict[str, str] = {}
        if names is None:  # or its tensors alone, with the values it takes beside them
            names, values = value_arguments(model) or (None, {})
        if names is None or (self.deadline is not None and time.monotonic() > self.deadline):
            return
        skipped = self.findings.pop()
        start = len(self.findings)
        record["result"] = "ok"
        try:
            with fed_by_keyword(model, names, values):
                if assumes_layout(values):
                    mark_layout_assumed(model)
                self._check_model(model, label, where, spec, {}, record, prefix)
        except Exception:  # the first check's reason stands
            del self.findings[start:]
            record["result"] = "skipped"
            self.findings.append(skipped)

    def _check_model(
        self,
        model: nn.Module,
        label: str,
        where: tuple[str, int],
        spec: dict[str, Any],
        declared: dict[str, Any],
        record: dict[str, Any],
        prefix: str,
    ) -> None:
        path, line = where
        inputs = forward_inputs(model)
        if not inputs:
            record["result"] = "skipped"
            self._skip(path, line, label, "cannot tell which forward arguments are inputs")
            return
        count = len(inputs)
        graph, complete, entry = trace(model, count)
        record["path"] = "fx" if complete else "fallback"
        # A forward that fx traced to its end has no branch on values: it runs on meta
        # tensors as on fake ones. Others often stop on meta where fake tensors go on.
        self._meta_first = complete
        self._meta_runs = MetaRuns(model)
        self._unknown_input = self._open_input = None
        plans = self._plans(model, graph, entry, count, spec, declared)
        if layout_assumed(model):
            plans = assumed(plans, "with its batch size read off the first input")
        if not plans:
            record["result"] = "skipped"
            missing = _stubbed_parts(model, self.project.stubbed)
            unknown = self._unknown_input or inputs[0]
            reason = f"needs {missing}, which is not installed" if missing else _unknown(unknown)
            self._skip(path, line, label, reason)
            if not missing and not prefix:
                # A layer (an RMSNorm) that a checked model of the run uses was checked there.
                self.findings[-1]["unless_covered"] = f"{path}::{type(model).__name__}"
            return
        start = len(self.findings)
        self._try_plans(model, label, where, record, prefix, plans, graph, count, complete)
        if self._open_input is not None and record["result"] == "skipped":
            # An input whose shape nothing tells was guessed, and no guess ran: say so.
            failed = self.findings[start:]
            del self.findings[start:]
            tried = failed[-1]["message"].split(" skipped: ", 1)[-1] if failed else ""
            tried = tried.split(" (for the input [")[0]
            shapes = TRIED_FIRST if self._open_input == inputs[0] else TRIED_SHAPES
            guesses = f"tried as {shapes}: {tried}" if tried else f"tried as {shapes}"
            self._skip(path, line, label, f"{_unknown(self._open_input)} ({guesses})")
            if not prefix:
                self.findings[-1]["unless_covered"] = f"{path}::{type(model).__name__}"

    def _try_plans(
        self,
        model: nn.Module,
        label: str,
        where: tuple[str, int],
        record: dict[str, Any],
        prefix: str,
        plans: list[InputPlan],
        graph: fx.Graph,
        count: int,
        complete: bool,
    ) -> None:
        """Run the model on its candidate input plans; report, note or skip what happened."""
        path, line = where
        if not self.size_conditions and self._clean_at_own_side(model, plans):
            return
        if not materialize_lazy(model, plans):
            record["result"] = "skipped"
            self._skip(
                path,
                line,
                label,
                "its lazy layers (nn.LazyLinear, ...) did not take "
                "the inferred input; declare the input shape",
            )
            return
        analysis_graph: list[tuple[fx.Graph, nn.Module] | None] = []

        def graph_for_analysis() -> tuple[fx.Graph, nn.Module] | None:
            """The graph with stack traces, and the wrapper it was traced from."""
            if not complete:
                return None
            if not analysis_graph:
                traced, finished, traced_entry = trace(model, count, stack_traces=True)
                analysis_graph.append((traced, traced_entry) if finished else None)
            return analysis_graph[0]

        def ctx_for(plan: InputPlan, result: PlanResult) -> F.Context:
            return F.Context(
                label, plan, result.names, self.sources, where, prefix, result.hints, model
            )

        # With several candidate shapes (the input's rank was guessed), a model is clean if
        # one candidate passes as is. A definite failure is reported when every candidate that
        # did not fail on the number of dimensions fails the same way, and none passes
        # without first pinning a size (`L = 100` so a BatchNorm1d sees 100 "channels").
        results: list[tuple[InputPlan, PlanResult]] = []
        for index, plan in enumerate(plans):
            runs = self._meta_runs if self._meta_first else None
            if runs is not None and runs.rank_refused(plans, index):
                continue  # a later candidate passes: the model is clean
            result = self._run_plan(model, plan, graph_for_analysis)
            results.append((plan, result))
            deeper = _unpacked_rank(plan, result, self.sources) or _unpacked_names(
                plan, result, self.sources
            )
            if deeper is not None and deeper not in plans:
                plans.append(deeper)  # tried next, in this loop
            if result.ok and not result.pinned:
                self._note_stop(model, result, label, where)
                self._constraints(result, plan, label, where, prefix, model)
                return
        # An error on the number of dimensions only counts when the input's rank is known.
        definite = [
            (p, r) for p, r in results if r.code is not None and (not r.rank_error or p.evidenced)
        ]
        passing = [(p, r) for p, r in results if r.ok]
        if passing and all(is_assumed(p) for p, _ in definite):
            definite = []  # a guessed input's failure is no news when another guess runs
        between = [(p, r) for p, r in definite if _between_layers(r.code, r.failure)]
        if between and not passing:
            # Two layers that do not fit each other, whatever the input: the other guesses
            # of the input failed on the input itself (a label's rank at a `cat`).
            definite = between
        if not definite and passing:
            self._note_stop(model, passing[0][1], label, where)
            self._constraints(passing[0][1], passing[0][0], label, where, prefix, model)
            return
        if definite and all(_same_site(r, definite[0][1]) for _, r in definite):
            plan, result = definite[0]
            assert result.code is not None and result.failure is not None
            conventional = plan.source in ("config", "named")
            if (is_assumed(plan) and not _between_layers(result.code, result.failure)) or (
                conventional
                and (not F.layer_sizes(result.failure.module) or _unbatched(result.failure))
            ):
                # Inputs sized by convention: only a sized layer that cannot take them is
                # news; an op may well be fed something else by the real parent, and a conv
                # fed one dimension too few (raw audio `[N, L]` by its name, where the model
                # takes `[N, 1, L]`) was given the wrong rank. Inputs assumed to pass a layer
                # unchanged: no failure is news.
                record["result"] = "skipped"
                reason = self._failure_reason(result.failure)
                told = f" (for {plan.label})" if plan.label else ""
                self._skip(path, line, label, reason + told)
                return
            if (_other_rank_open(plan, results) and not F.layer_sizes(result.failure.module)) or (
                plan.source == "named" and _other_rank_open(plan, results, ran=True)
            ):
                # The rank was guessed and an input of another rank runs, or fails on no
                # shape: an op that fails on the guessed rank says nothing of the real input;
                # nor does a layer that fails on a rank read from a name or a docstring, when
                # the rank the first layer takes runs.
                record["result"] = "skipped"
                reason = self._failure_reason(result.failure) + _GUESSED_RANK
                self._skip(path, line, label, reason)
                return
            if self._passes_at_own_side(model, plan, result):
                return  # its own image size passes: a size it was not made for failed
            record["result"] = "finding"
            self.findings.append(F.definite(result.code, result.failure, ctx_for(plan, result)))
            return
        record["result"] = "skipped"
        first = _told_most(results)
        reason = (
            first.reason
            or _rank_reason(results)
            or ("the model failed differently for each possible input shape")
        )
        self._skip(path, line, label, reason)
        if forward_mixin(type(model)) and not prefix:
            self.findings[-1]["unless_covered"] = f"{path}::{type(model).__name__}"

    def _note_stop(
        self, model: nn.Module, result: PlanResult, label: str, where: tuple[str, int]
    ) -> None:
        """After a run that passed up to a stop on tensor values: only the classes whose
        forward returned count as checked; the others, and the layers not reached, are told."""
        stop = result.stopped
        if stop is None:
            return
        self._ran = {type(m) for m in stop.ran} | {type(model)}
        for module in model.modules():
            cls = type(module)
            file = getattr(inspect.getmodule(cls), "__file__", None)
            if cls not in self._ran and file in self.user_files:
                self.cut_short.setdefault(f"{file}::{cls.__name__}", stop.class_reason(label))
        note = stop.model_note(model)
        if note is not None:
            self.findings.append(F.skipped(where[0], where[1], f"shape check of {label} {note}"))

    def _constraints(
        self,
        result: PlanResult,
        plan: InputPlan,
        label: str,
        where: tuple[str, int],
        prefix: str,
        model: nn.Module | None = None,
    ) -> None:
        if is_assumed(plan):
            return  # a size condition of an assumed input may be the assumption's
        for failure, condition, squares, names in result.constraints:
            ctx = F.Context(label, plan, names, self.sources, where, prefix, result.hints, model)
            self.findings.append(F.constraint(failure, condition, squares, ctx))

    def _plans(
        self,
        model: nn.Module,
        graph: fx.Graph,
        entry: nn.Module,
        count: int,
        spec: dict[str, Any],
        declared: dict[str, Any],
    ) -> list[InputPlan]:
        if declared.get("shapes"):
            plan = declared_plan(declared, count)
            return [plan] if plan else []
        per_input: list[list[InputPlan]] = []
        names = forward_inputs(model) or []
        opened = None  # the first input, when only guesses of its shape are tried
        for index in range(count):
            listed = index < len(names) and tensor_list_input(model, names[index])
            if listed:
                # A list of tensors (its annotation says so) is never fed one tensor: the
                # first layer would read an element of it, or an element's element.
                found = list_plans(model, index) or image_list_plans(names[index])
                if not found:
                    self._unknown_input = names[index]
                    per_input = []
                    break
                per_input.append(found)
                continue
            named = index < len(names) and infer_from_name(model, names[index], first=True)
            if named:
                # One value per sample by its name (`timestep` -> [N]); the layer that takes
                # it may say otherwise (a time embedding already made, [N, C]): tried next.
                # Joined by `cat` with the other inputs (InfoGAN's one-hot `labels`), it has
                # their rank: that first.
                graphed = infer_from_graph(graph, entry, index)
                if graphed and all(joined_plan(plan) for plan in graphed):
                    found = graphed + named
                else:
                    found = named + (graphed or infer_from_source(model, index) or [])
            else:
                found = (
                    infer_from_graph(graph, entry, index)
                    or infer_from_source(model, index)
                    or infer_from_added_table(model, index)
                    or (index < len(names) and infer_from_name(model, names[index], self._config))
                    or sibling_plans(names, index, per_input)
                    or mask_plans(names, index, per_input)
                    or (index and transformer_mask_plans(model, names[index], per_input))
                    or (index and state_plans(model, names[index], per_input[0]))
                    or infer_from_base_layer(model, index)
                    or attribute_plans(model, index)
                )
            described = (
                described_plans(model, names[index], self._config) if index < len(names) else None
            )
            if not described and index < len(names):
                # `assert x.shape[1:] == (self.channels, self.size, self.size)` tells the
                # sizes; `b, c, h, w = x.size()` first tells the rank, whatever the first
                # layer takes after a reshape (`x.view(b, -1)` into a Linear).
                described = asserted_plans(model, names[index]) or unpacked_plans(
                    model, names[index]
                )
            if not (described or found) and index < len(names):
                described = indexed_plans(model, names[index])
            if not (described or found):  # last: assumed, or any shape where none is read
                found = (
                    infer_from_source(model, index, past_layers=True)
                    or unused_input_plans(graph, index)
                    or (index < len(names) and unread_input_plans(model, names[index]))
                    or (index < len(names) and sliced_plans(model, names[index]))
                    or scaled_input_plans(model, index)
                )
                if not found and (found := open_input_plans(model, names, index)):
                    self._open_input = names[index]
            if described:
                found = _with_described(found or [], described[0])
            if not found and index == 0 and (found := first_open_plans(model, names)):
                self._open_input = opened = names[0]  # kept if a later input's is found
            if not found:
                self._unknown_input = names[index] if index < len(names) else None
                per_input = []
                break
            per_input.append(found)
        if opened and per_input and not _told(per_input[1:]):
            self._unknown_input, per_input = opened, []  # every input a guess
        inferred = combine(per_input) if per_input else []
        for evidence in spec.get("evidence", []):
            if evidence["kind"] == "tensor":
                plan = tensor_plan(evidence, count, names)
            else:
                plan = image_plan(evidence, inferred if count == 1 else None)
                plan = plan or paired_image_plan(evidence, per_input)
                if plan is None and count == 1:
                    plan = reshaped_image_plan(evidence, leading_reshape(graph, 0))
            if plan is not None:
                return [plan]
        return inferred or shape_free_plan(model, count)

    def _run_plan(self, model: nn.Module, plan: InputPlan, graph_for_analysis: Any) -> PlanResult:
        result = self._run_plan_once(model, plan, graph_for_analysis, refusal_first=True)
        single = _single_batch(plan) if _batch_refused(result) else None
        if single is not None:
            # "Cannot handle batch sizes > 1 if no padding token is defined": one sample.
            retry = self._run_plan_once(model, single, graph_for_analysis)
            if retry.ok or retry.code is not None:
                return retry
            if result.refused:  # not analysed yet: the batch was not the only trouble
                result = self._run_plan_once(model, plan, graph_for_analysis)
        return result

    def _run_plan_once(
        self,
        model: nn.Module,
        plan: InputPlan,
        graph_for_analysis: Any,
        refusal_first: bool = False,
        ones: bool = True,
    ) -> PlanResult:
        """Run one plan, and analyse a failure. With `refusal_first`, a forward that refuses
        a batch of several samples is not analysed (`refused`): one sample is tried first.
        With `ones`, a definite failure is tried again with each described size at 1."""
        result = PlanResult()
        runs = self._meta_runs if self._meta_first else None
        passed = runs(plan)[0] if runs is not None and runs.model is model else None
        if passed is not None:  # the same run as the first below, on plain meta tensors
            return PlanResult(ok=True, hints=passed)
        world = World(model, plan, {}, symbolic=False, session=self._session(model))
        first_error = run_direct(world)
        result.hints = world.hints
        if first_error is None:
            result.ok = True
            return result
        if _BATCH_REFUSED.search(str(first_error)) and _single_batch(plan) is not None:
            result.failure = Failure(first_error)
            if refusal_first:  # `_run_plan` tries one sample first
                result.refused = True
                return result
            # One sample at a time did not pass either: other sizes, and the symbolic run
            # that stops at an op it cannot follow, tell nothing.
            failure = self._failure_at(model, plan, world.hints) or Failure(first_error)
            result.failure, result.reason = failure, self._failure_reason(failure)
            return result
        stop = value_stop(first_error, lambda: run_direct(world), self.user_files)
        if stop is not None:
            # Every layer before the op that needs values took its input (see `value_stop`).
            result.ok = True
            result.stopped = stop
            return result
        if is_assumed(plan) and F.rank_error(first_error):
            # An input of an assumed rank that an op refuses: no size changes a rank, and an
            # assumed plan's failure is no finding (an interpolated mask given one dimension
            # too few ran a backbone at every size tried before).
            failure = Failure(first_error)
            result.failure, result.reason = failure, self._failure_reason(failure)
            result.rank_error = True
            return result
        if _size_blind(first_error):
            # An input left None, an attribute the model lacks, an option the caller must
            # give: no other size changes that, and the search for one is spared.
            failure = self._failure_at(model, plan, world.hints) or Failure(first_error)
            result.failure, result.reason = failure, self._failure_reason(failure)
            return result
        seen = _failure_key(first_error, plan, world.hints, self.user_files)
        known = self._failed.get(seen) if seen is not None else None
        passed = self._passed.get(seen) if seen is not None else None
        if passed is not None:
            # Another model of this file failed here alike and passed at other sizes (an
            # audio model's length solved for): this one is run at those first.
            probe = World(model, plan, passed, symbolic=False, session=self._session(model))
            if run_direct(probe) is None:
                self._reused = "sizes"
                return PlanResult(ok=True, pinned=True, hints=dict(passed))
        if known is not None and self._fails_as(model, plan, known):
            # Another model of this file (the base model a head holds) failed here alike,
            # and its analysis ended on a failure this model meets too, at the sizes the
            # analysis came to, without finding a shape error: it would find the same.
            self._reused = "failure"
            return dataclasses.replace(known.result, constraints=[])
        sizes = _probed_dims(plan)
        if sizes and F.shape_like(first_error):
            # Most models that fail at the first guess were written for one common size.
            own = F.own_image_shape(model)
            for probed in _probes(sizes, _takes_audio(model), own):
                hints = {**world.hints, **probed}
                probe = World(model, plan, hints, symbolic=False, session=self._session(model))
                if run_direct(probe) is None:
                    result.ok = True
                    result.hints = hints
                    if self._sized_layer_failed(model, plan, world.hints):
                        self._harvest(model, plan, hints, graph_for_analysis, result)
                    return result
        if copies_first(plan):
            # An input given the first input's shape as a guess: its failure is no finding,
            # and the sizes the search could free are the first input's, tried on their own.
            failure = Failure(first_error)
            result.failure, result.reason = failure, self._failure_reason(failure)
            return result
        result = self._search(model, plan, dict(world.hints), graph_for_analysis, result)
        if seen is not None and result.ok and not result.constraints:
            self._passed[seen] = dict(result.hints)
        if seen is not None and _undecided(result) and result.failure is not None:
            last = _failure_key(result.failure.exc, plan, result.hints, self.user_files)
            if last is not None:
                self._failed[seen] = _Undecided(dataclasses.replace(result), last)
        # An inferred plan fixes a size from the first layer that reads the input; the
        # forward may change that size first (`x[:, :, 2:]`): solve for it instead. Inputs
        # whose sizes were inferred alike may differ (a mask at 16 times a feature map's
        # resolution): each gets sizes of its own.
        for relaxed in (_freed(plan), _untied(plan)):
            if relaxed is None or result.code is None:
                continue
            hinted = dict(world.hints)
            retry = self._search(model, relaxed, hinted, graph_for_analysis, PlanResult())
            if (
                retry.failure is not None
                and retry.code is None
                and _symbolic_limit(retry.failure.exc)
            ):
                continue  # the relaxed run stopped at an op that wants numbers: no news
            if plan.guessed and (retry.ok or not _same_site(retry, result)):
                # The failure holds only at the size guessed from the input's name.
                assert result.failure is not None
                reason = self._failure_reason(result.failure)
                told = "passes" if retry.ok else "fails elsewhere"
                return PlanResult(
                    failure=result.failure,
                    reason=f"{reason} (for {plan.label}, a size guessed from the input's "
                    f"name; at other sizes the model {told})",
                    hints=result.hints,
                )
            if retry.ok or not _same_site(retry, result):
                retry.constraints = []  # conditions on the relaxed sizes are not the user's
                return retry
        if result.code is not None and sizes:
            # A definite failure holds for every size; one found after sizes were solved for
            # (an audio model's length) may only hold for small ones.
            for scale in _SCALES:
                hints = {**result.hints, **{n: result.hints[n] * scale for n in sizes}}
                probe = World(model, plan, hints, symbolic=False, session=self._session(model))
                if run_direct(probe) is None:
                    return PlanResult(ok=True, pinned=True, hints=hints)
        if ones and _regroups_batch(result):
            # `x.reshape(x.shape[0] // 4, -1)`: the first size counts rows to group (a list
            # of patches), not samples; a count of them that fits decides.
            # A plain run at each count decides: a full analysis of each would repeat the
            # failure's, at many times the cost.
            layers_ran = False
            for count in _GROUPED_BATCHES:
                grouped = _fixed_at(plan, "N", count)
                probe = World(model, grouped, {}, symbolic=False, session=self._session(model))
                with _layers_running(model) as ran:
                    if run_direct(probe) is None:
                        return PlanResult(ok=True, pinned=True, hints=probe.hints)
                layers_ran = layers_ran or bool(ran)
            if not plan.evidenced and not layers_ran:
                # No layer ran before the grouping: the input's features were read off one
                # past it, which takes the grouped rows' features, so no count can fit.
                assert result.failure is not None
                reason = self._failure_reason(result.failure)
                return PlanResult(
                    failure=result.failure,
                    reason=f"{reason} (the input was inferred from a layer after a reshape"
                    " that groups its rows; declare its shape to check it)",
                    hints=result.hints,
                )
        for name in _described_sizes(result) if ones else ():
            # A size the analysis takes as more than 1 (one channel, one head) may be 1:
            # at 1 the model passes, or fails where it fails at that size.
            hints = {**result.hints, name: 1}
            probe = World(model, plan, hints, symbolic=False, session=self._session(model))
            if run_direct(probe) is None:
                return PlanResult(ok=True, pinned=True, hints=hints)
            single = self._run_plan_once(
                model, _fixed_at(plan, name, 1), graph_for_analysis, ones=False
            )
            if single.code is not None and not _same_site(single, result):
                return single
        return result

    def _fails_as(self, model: nn.Module, plan: InputPlan, known: _Undecided) -> bool:
        """Whether the model fails as `known` ended, at the sizes its analysis came to."""
        hints = dict(known.result.hints)
        world = World(model, plan, hints, symbolic=False, session=self._session(model))
        error = run_direct(world)
        return error is not None and (
            _failure_key(error, plan, hints, self.user_files) == known.last
        )

    def _unlike(
        self,
        model: nn.Module,
        plan: InputPlan,
        hints: dict[str, int],
        fixed: dict[str, str],
        failure: Failure,
    ) -> tuple[dict[str, int], str] | None:
        """Whether the failure comes back, at the same layer or op, when the sizes an op fixed
        take other values: each one more, then every free size equal (a view by one of them).

        None when it comes back at every trial; else the trial's sizes where it did not, and
        how it went there: `passed` when the forward passed because a fixed size took the
        failing layer's own size. The op hid the guard that compared that size with the
        layer's (a guessed side that is the channels of a mono spectrogram, 1): such a trial
        is what solving the guard would have given, and a pass there is a pass; `taken` when
        the layer took the input at that size and the forward failed further on (the rest is
        solved from there); `unlike` for the other trials, where a pass may be a coincidence
        (a view by two sizes that were made equal).
        """
        sizes = sorted(s for s in F.layer_sizes(failure.module) if s > 0)
        taken = None
        for trial in ({name: size} for name in fixed for size in sizes):
            ran: list[bool] = []
            assert failure.module is not None  # it has sizes
            handle = failure.module.register_forward_hook(lambda *_, ran=ran: ran.append(True))
            try:
                again = self._failure_at(model, plan, {**hints, **trial})
            finally:
                handle.remove()
            if again is None:
                return trial, "passed"
            if taken is None and ran:
                taken = trial
        if taken is not None:
            return taken, "taken"
        for trial, again in self._trials(model, plan, hints, fixed):
            if again is not None and again.op == "assert" and failure.op != "assert":
                continue  # the model's own assertion refuses other values (`H == img_size`)
            if not _alike(again, failure):
                return trial, "unlike"
        return None

    def _trials(
        self, model: nn.Module, plan: InputPlan, hints: dict[str, int], fixed: dict[str, str]
    ) -> Iterator[tuple[dict[str, int], Failure | None]]:
        """Runs with the sizes in `fixed` changed: each trial's sizes and its failure (None:
        it passed)."""
        top = max(hints.values())
        start = {d.name: d.hint for spec in plan.specs for d in spec.dims if d.name}
        start.update(hints)  # a freed size (`F0`) has only its plan's hint
        trials = [{n: start[n] + 1 for n in fixed}, dict.fromkeys(hints, top + 1)]
        # A size a strided stack divides before a sized layer fits a narrow range away from
        # the guess (80 mel bins, not 96): the sizes inputs often have are tried too.
        trials += [dict.fromkeys(fixed, size) for size in _USUAL_SIZES]
        for trial in trials:
            yield trial, self._failure_at(model, plan, {**hints, **trial})

    def _conflicting(
        self, model: nn.Module, plan: InputPlan, hints: dict[str, int], solved: list[_Solved]
    ) -> tuple[Failure, str] | None:
        """When no sizes fix at once all the failures the search solved for, and a run at
        `hints` (or at the sizes a layer failed at) fails at one of them again: that failure
        and its code, found by a run with concrete sizes (a tenth of a symbolic run's cost);
        else None. `hints` are set to the sizes of the failure returned."""
        if len(solved) < 2:
            return None
        names = {_size_symbol(name): name for name in hints}
        sizes = {symbol: hints[name] for symbol, name in names.items()}
        try:
            if Problem([s.named for s in solved], names, sizes).find() is not None:
                return None
        except Unsupported:
            return None
        # The failure of a layer with sizes of its own (a norm) is the one to report: the
        # sizes that pass it are what the op met after it (an `add` of a position table) fixes.
        for met in sorted(solved, key=lambda s: s.site[0] is None):
            at = met.hints if met.site[0] is not None else hints
            failure = self._failure_at(model, plan, at)
            if failure is None or _site(failure) not in {s.site for s in solved}:
                continue
            code = F.classify(failure, self.user_files)
            if code is not None:
                hints.update(at)
                return failure, code
        return None

    def _failure_at(
        self, model: nn.Module, plan: InputPlan, hints: dict[str, int]
    ) -> Failure | None:
        """The failure of a run with concrete sizes, followed by hooks (None: it passed)."""
        world = World(model, plan, hints, symbolic=False, session=self._session(model))
        return analyze_hooks(world, self.user_files)

    def _clean_at_own_side(self, model: nn.Module, plans: list[InputPlan]) -> bool:
        """Whether an image model runs on an inferred input at the usual side it gives itself
        (`img_size = 224`): then it is clean, and the search for the other sizes it takes,
        which only TL606 tells (off by default), is spared. Most vision transformers fail
        at the first guess (96) and pass only at their own side."""
        own = F.own_image_side(model)
        if own is None or own[1] not in F.COMMON_IMAGE_SIZES:
            return False
        for plan in plans:
            sides = {d.name for spec in plan.specs for d in spec.dims} & {"H", "W"}
            if plan.evidenced or not sides or plan.exact:
                continue
            sized = _with_sides(plan, sides, own[1])
            if self._meta_first:
                if self._meta_runs(sized)[0] is not None:
                    return True
                continue
            world = World(model, sized, {}, symbolic=False, session=self._session(model))
            if run_direct(world) is None:
                return True
        return False

    def _passes_at_own_side(self, model: nn.Module, plan: InputPlan, result: PlanResult) -> bool:
        """Whether an image model passes at the side it gives itself (`config.image_size =
        224`) although the analysis found no size that passes: the search missed it (a
        position table reshaped to the patch grid fits that grid only)."""
        own = F.own_image_side(model)
        sides = {d.name for spec in plan.specs for d in spec.dims} & {"H", "W"}
        if own is None or not sides:
            return False
        hints = {**result.hints, **dict.fromkeys(sides, own[1])}
        return self._failure_at(model, plan, hints) is None

    def _concrete_failure(
        self, model: nn.Module, plan: InputPlan, hints: dict[str, int]
    ) -> tuple[Failure, str] | None:
        """The failure of a run with concrete sizes and its rule, when it comes back alike
        with every free size changed (else None)."""
        failure = self._failure_at(model, plan, hints)
        if failure is None:
            return None
        code = F.classify(failure, self.user_files)
        every = {d.name: "" for spec in plan.specs for d in spec.dims if d.name}
        if code is None or not every:
            return None
        if F.received_size(failure) is None and failure.module is None:
            alike = self._op_alike(model, plan, hints, every, failure)
        else:
            alike = self._sized_alike(model, plan, hints, every, failure)
        return (failure, code) if alike else None

    def _op_alike(
        self,
        model: nn.Module,
        plan: InputPlan,
        hints: dict[str, int],
        sizes: dict[str, str],
        failure: Failure,
    ) -> bool:
        """Whether a reshape fails at the same line at every other value of `sizes`, in the
        same proportion: past the dims it keeps from its input, it is given 3 values for
        every 4 it asks for each time (`.reshape(b, n, 4, 3, 32)` of [b, n, 288]).
        Other ops are left undecided: a table made for one input size (a rotary table of
        the model's own resolution) fails alike at every size but that one."""
        if failure.op not in ("reshape", "view"):
            return False
        runs = [again for _, again in self._trials(model, plan, hints, sizes)]
        if any(not (_alike(a, failure) and a.frame == failure.frame) for a in runs):
            return False
        items = {_per_item(a) for a in [failure, *runs]}  # type: ignore[list-item]
        return len(items) == 1 and None not in items

    def _sized_alike(
        self,
        model: nn.Module,
        plan: InputPlan,
        hints: dict[str, int],
        sizes: dict[str, str],
        failure: Failure,
    ) -> bool:
        """Whether a sized layer (a Linear, a norm) fails alike, on the same received size,
        when `sizes` take other values. A run that stops earlier at another size (a window
        that no longer divides the input, a mask shorter than it) tells nothing; one that
        passes, or brings the layer another size, shows the failure is not definite."""
        received = F.received_size(failure)
        if received is None:
            return False
        runs = [again for _, again in self._trials(model, plan, hints, sizes)]
        if any(a is None or (_alike(a, failure) and F.received_size(a) != received) for a in runs):
            return False
        # The model's own assertion refusing every other size (`H == img_size`): the sizes
        # checked are the ones it accepts.
        refused = all(_alike(a, failure) or a.op == "assert" for a in runs if a is not None)
        return sum(_alike(a, failure) for a in runs) >= 2 or refused

    def _failure_reason(self, failure: Failure) -> str:
        return _failure_reason(failure, self.project.stubbed)

    def _missing_note(self, built: Any, base: type | None = None) -> str:
        """` (torchvision, which its file imports, is not installed)` when the module that
        defines `built` holds stand-ins for imports that failed, else nothing (`base`: only
        the import that stands in for this class)."""
        module = sys.modules.get(getattr(built, "__module__", "") or "")
        stubs = [b for b, v in vars(module).items() if is_stub(v)] if module else []
        if base is not None:
            stubs = [b for b in stubs if stands_for(vars(module)[b], base)]
        if not stubs:
            return ""
        tree = None
        with contextlib.suppress(OSError, TypeError):
            tree = parse(inspect.getsource(module))
        origins = import_aliases(tree) if tree is not None else {}
        packages = {origins.get(bound, "").split(".")[0] for bound in stubs}
        packages.discard("")
        if not packages:
            return ""
        absent = sorted(p for p in packages if _not_installed(p))
        if absent:
            verb = "is" if len(absent) == 1 else "are"
            return f" ({', '.join(absent)}, which its file imports, {verb} not installed)"
        return f" ({', '.join(sorted(packages))}, which its file imports, could not be imported)"

    def _analyze(self, world: World, graph_for_analysis: Any) -> Failure | None:
        traced = None if world.plan.packed else graph_for_analysis()
        if traced is not None:
            return analyze_fx(world, traced[0], traced[1], self.user_files)
        return analyze_hooks(world, self.user_files)

    def _sized_layer_failed(self, model: nn.Module, plan: InputPlan, hints: dict[str, int]) -> bool:
        """Whether the first guess failed in a layer with a fixed size (a Linear, a norm)."""
        failure = self._failure_at(model, plan, hints)
        return failure is not None and bool(F.layer_sizes(failure.module))

    def _harvest(
        self,
        model: nn.Module,
        plan: InputPlan,
        hints: dict[str, int],
        graph_for_analysis: Any,
        result: PlanResult,
    ) -> None:
        """TL606: a layer's size that holds for only a few input sizes.

        Only the equalities a sized layer (a Linear, a norm) checked against its own size are
        considered. The symbolic run costs about as much as the rest of the check together,
        so large models (where this information is rarely news) are left out.
        """
        if sum(1 for _ in model.modules()) > _HARVEST_MODULES:
            return
        world = World(model, plan, hints, symbolic=True, session=self._session(model))
        if self._analyze(world, graph_for_analysis) is not None or world.env is None:
            return
        symbol_hints = {s: world.hints[n] for s, n in world.names.items()}
        guards = world.guards_since(0)
        reported: set[int] = set()
        for start, end, step in world.steps:
            sizes = F.layer_sizes(step.module)
            for guard in guards[start:end]:
                if not isinstance(guard, sympy.Eq) or id(step) in reported:
                    continue
                constants = {int(a) for a in guard.args if isinstance(a, sympy.Integer)}
                if not constants & sizes:
                    continue
                if not guard.free_symbols or not guard.free_symbols <= set(world.names):
                    continue
                try:
                    squares = Problem([guard], world.names, symbol_hints).square_solutions()
                except Unsupported:
                    continue
                if few_sizes(squares):
                    reported.add(id(step))
                    failure = Failure(
                        RuntimeError(),
                        module=step.module,
                        module_name=step.module_name,
                        op=step.op,
                        frame=step.frame,
                    )
                    result.constraints.append((failure, guard, squares, dict(world.names)))

    def _passes_elsewhere(
        self,
        model: nn.Module,
        plan: InputPlan,
        hints: dict[str, int],
        failure: Failure,
        world: World,
        together: list[Any],
    ) -> bool:
        """Whether the forward passes at sizes that give the failing layer one of its own
        sizes where its input holds a product of input sizes, or with those sizes set to 1
        (then kept in `hints`). A symbolic run takes every size to be 2 or more, so it left
        no condition to solve for these: a step-at-a-time RNN's `embedding(x).view(1, 1, -1)`
        takes one token (`N * L == 1`), `emb.view(1, 6, -1)` six. A view of a tensor that is
        not contiguous fails at every batch but 1, and is no such size. `together`: the
        conditions solved for before, kept."""
        if F.not_contiguous(failure):
            return False
        sized = [
            size
            for shape in failure.inputs
            for size in shape or ()
            if getattr(size, "free_symbols", None) and size.free_symbols <= set(world.names)
        ]
        if not sized:
            return False
        symbol_hints = {s: world.hints[n] for s, n in world.names.items()}
        trials: list[dict[str, int]] = []
        for size, own in itertools.islice(
            itertools.product(sized, sorted(F.layer_sizes(failure.module))), _MAX_OWN_SIZES
        ):
            solution = _solve([sympy.Eq(size, own), *together], world, symbol_hints)
            if solution is not None:
                trials.append({world.names[k]: max(int(v), 1) for k, v in solution.items()})
        held = {world.names[symbol] for size in sized for symbol in size.free_symbols}
        trials.append(dict.fromkeys(held, 1))
        for trial in trials:
            sizes = {**hints, **trial}
            run = World(model, plan, sizes, symbolic=False, session=self._session(model))
            if run_direct(run) is None:
                hints.update(trial)
                return True
        return False

    def _search(
        self,
        model: nn.Module,
        plan: InputPlan,
        hints: dict[str, int],
        graph_for_analysis: Any,
        result: PlanResult,
    ) -> PlanResult:
        """Symbolic analysis: negate the failing guard and look for sizes that satisfy it."""
        result.hints = hints  # updated in place as sizes are solved for
        flipped: set[Any] = set()
        # The sizes each attempt started from, and where it left the result (see `_Round`).
        rounds: list[_Round] = []
        # Where each attempt failed, with the condition solved for there (see `_Solved`).
        solved: list[_Solved] = []

        for attempt in range(_MAX_FLIPS):
            again = _repeated(rounds, hints, len(result.constraints))
            if again is not None:
                # Back at sizes an earlier attempt started from: the attempts after would
                # only go round the same sizes again; end where they would have ended.
                again.restore(result)
                break
            rounds.append(_Round(dict(hints), len(result.constraints)))
            if attempt > 0:
                # At the sizes just solved for, a plain run (a tenth of a symbolic one's
                # cost) decides whether the model passes; only a failure is analysed.
                plain = World(model, plan, hints, symbolic=False, session=self._session(model))
                if run_direct(plain) is None:
                    result.ok = True
                    return result
                conflict = self._conflicting(model, plan, hints, solved)
                if conflict is not None:
                    result.failure, result.code = conflict
                    result.rank_error = F.rank_error(conflict[0].exc)
                    return result
            world = World(model, plan, hints, symbolic=True, session=self._session(model))
            failure = self._analyze(world, graph_for_analysis)
            if failure is None and attempt == 0 and graph_for_analysis() is not None:
                # The plain run failed but the traced graph passes: the graph left something
                # out (a call fx could not see); the hooks run follows the real forward.
                world = World(model, plan, hints, symbolic=True, session=self._session(model))
                failure = analyze_hooks(world, self.user_files)
            result.names = world.names
            if failure is not None and _SYMBOLIC_ONLY.search(str(failure.exc)):
                # An op that takes a plain bool or int got a symbolic one (`is_causal` from
                # a size comparison): a run with these sizes as numbers decides.
                concrete = World(model, plan, hints, symbolic=False, session=self._session(model))
                if run_direct(concrete) is None:
                    failure = None
            if failure is None:
                result.ok = True
                return result
            if (
                attempt > 0
                and _symbolic_limit(failure.exc)
                and not self._failure_at(model, plan, hints)
            ):
                # With the sizes solved for so far the forward passes: the op that stopped
                # the symbolic run (`is_causal=q_len > 1`) only wanted numbers.
                result.ok = result.pinned = True
                return result
            if _symbolic_limit(failure.exc):
                # An op that needs numbers (a sliced attention mask) stopped the symbolic run
                # before the failure: a concrete one that fails alike at other sizes decides.
                concrete = self._concrete_failure(model, plan, hints)
                if concrete is not None:
                    result.failure, result.code = concrete
                    result.rank_error = F.rank_error(result.failure.exc)
                    return result
            result.failure = failure
            result.rank_error = F.rank_error(failure.exc)
            code = F.classify(failure, self.user_files)
            if code is not None and F.splits_samples(failure, world.names):
                result.code = code
                return result
            fixed = world.specialized()
            unlike = self._unlike(model, plan, hints, fixed, failure) if code and fixed else None
            if unlike is not None:
                trial, how = unlike
                if how == "passed":
                    # The sizes the op fixed, at other values, make the whole forward pass.
                    hints.update(trial)
                    result.ok = result.pinned = True
                    return result
                if how == "taken":
                    # The layer takes the input at its own size: go on from there.
                    hints.update(trial)
                    result.pinned = True
                    continue
            if unlike is not None and not self._sized_alike(model, plan, hints, fixed, failure):
                # Seen at one size only: the op that fixed it hides whether others work.
                result.reason = self._failure_reason(failure) + _fixed_note(fixed)
                return result
            guard = _failing_guard(failure, world, flipped)
            if code is not None and F.fixed_features(failure):
                guard = None  # the guard was the matmul's, not the Linear's size check
            # The conditions solved for so far, in this run's symbols.
            together = [earlier.condition(world.names) for earlier in solved]
            symbol_hints = {s: world.hints[n] for s, n in world.names.items()}
            ones = _pinned_to_one(world, flipped) if guard is None and code is not None else []
            if ones:
                # A view of a map whose side is 1 at these sizes made torch fix that side
                # to 1 (`(H - 33) // 32 == 1`): what failed after was only seen there.
                lifted = _solve(
                    [*(sympy.Ge(size, 2) for _, size in ones), *together], world, symbol_hints
                )
                if lifted is not None:
                    flipped.update(pin for pin, _ in ones)
                    for symbol, value in lifted.items():
                        hints[world.names[symbol]] = max(int(value), 1)
                    result.pinned = True
                    rounds[-1].left(result, hints)
                    continue
            if guard is None:
                if code is None:
                    result.reason = self._failure_reason(failure)
                elif self._passes_elsewhere(model, plan, hints, failure, world, together):
                    result.ok = result.pinned = True  # one token per call, say
                else:
                    result.code = code
                return result
            target = sympy.Not(guard)
            site = _site(failure)
            # Back at a failure solved for before: the sizes that fixed the failures met
            # since undo it. When no sizes fix them all at once, none makes the model run (a
            # norm over a map's width that the position table fixes): definite.
            again_here = code is not None and any(earlier.site == site for earlier in solved)
            if again_here and _solve([target, *together], world, symbol_hints) is None:
                result.code = code
                return result
            solved.append(_Solved(site, target, world.names, dict(hints)))
            path = _path_guards(world, failure, flipped, guard)
            solution = _solve([target, *path], world, symbol_hints)
            if solution is None and path:  # without them (else the same problem again)
                solution = _solve([target], world, symbol_hints)
            if solution is None:
                if code is None or _searched_too_little(target, world):
                    result.reason = self._failure_reason(failure)
                else:
                    result.code = code
                return result
            flipped.update({guard, target})
            if code is not None and isinstance(target, sympy.Eq):
                try:
                    squares = Problem([target], world.names, symbol_hints).square_solutions()
                except Unsupported:
                    squares = []
                if few_sizes(squares) or _length_only(target, world):
                    result.constraints.append((failure, target, squares, dict(world.names)))
            for symbol, value in solution.items():
                hints[world.names[symbol]] = max(int(value), 1)
            result.pinned = True
            rounds[-1].left(result, hints)
        result.reason = "no input size found that the model accepts"
        return result


@dataclass
class _Round:
    """One attempt of a search: the sizes it started from, the constraints found before it,
    and what it left in the result when it solved for other sizes."""

    start: dict[str, int]
    constraints: int
    hints: dict[str, int] = field(default_factory=dict)
    failure: Failure | None = None
    rank_error: bool = False
    names: dict[Any, str] = field(default_factory=dict)

    def left(self, result: PlanResult, hints: dict[str, int]) -> None:
        self.hints = dict(hints)
        self.failure, self.rank_error, self.names = result.failure, result.rank_error, result.names

    def restore(self, result: PlanResult) -> None:
        result.hints.clear()
        result.hints.update(self.hints)
        result.failure, result.rank_error, result.names = self.failure, self.rank_error, self.names


def _site(failure: Failure) -> tuple[Any, ...]:
    """Where a run failed: the layer, the op and the user's line."""
    return (failure.module_name, failure.op, failure.frame)


class _Solved:
    """A failure the search solved for: its site, and the condition on the input's sizes
    that fixes it, kept by the sizes' names (each attempt's run names its symbols anew)."""

    def __init__(
        self, site: tuple[Any, ...], target: Any, names: dict[Any, str], hints: dict[str, int]
    ) -> None:
        self.site = site
        self.hints = hints  #: the sizes it was met at
        #: The condition in symbols named after the sizes (`_size_symbol`).
        self.named = target.xreplace({s: _size_symbol(n) for s, n in names.items()})

    def condition(self, names: dict[Any, str]) -> Any:
        """The condition in the symbols of a run that names its sizes `names`."""
        return self.named.xreplace({_size_symbol(n): s for s, n in names.items()})


@functools.cache
def _size_symbol(name: str) -> Any:
    """One symbol per size name (`H`), the same in every attempt."""
    return sympy.Symbol(f"torchlint_{name}", integer=True, positive=True)


def _repeated(rounds: list[_Round], hints: dict[str, int], constraints: int) -> _Round | None:
    """The round the search's last attempt would have ended like, when `hints` are the sizes
    an earlier attempt started from and no constraint was found since: the search goes round
    the same attempts until `_MAX_FLIPS`. None when it does not."""
    for first, earlier in enumerate(rounds):
        if earlier.start == hints and earlier.constraints == constraints:
            period = len(rounds) - first
            return rounds[first + (_MAX_FLIPS - 1 - len(rounds)) % period]
    return None


#: Sizes tried (for all spatial or length dims at once) when the first guess fails.
PROBE_SIZES = (32, 28, 224, 64)
#: A video clip's usual numbers of frames (its depth `D`), tried with sides of 224.
_CLIP_FRAMES = (16, 8)


def _probes(
    sizes: list[str], audio: bool = False, own: tuple[int, int] | None = None
) -> Iterator[dict[str, int]]:
    """The input sizes to try after the first guess failed: the image's height and width the
    model gives itself when they differ (`image_size = (256, 192)`), or, for a model that
    takes a waveform, a second of it first; each of `PROBE_SIZES` for all of them at once;
    then, for a video model, the usual clips (16 or 8 frames of 224 x 224)."""
    if own is not None and {"H", "W"} <= set(sizes):
        yield {"H": own[0], "W": own[1]}
    if audio and any(name[:1] in "LT" for name in sizes):
        # A speech encoder's strided convolutions need hundreds of samples (wav2vec2: 400).
        yield {n: _SECOND_OF_AUDIO if n[:1] in "LT" else PROBE_SIZES[0] for n in sizes}
    for size in PROBE_SIZES:
        yield dict.fromkeys(sizes, size)
    if any(name.startswith("D") for name in sizes):
        for frames in _CLIP_FRAMES:
            yield {n: frames if n.startswith("D") else 224 for n in sizes}


#: One second of 16 kHz audio, the rate speech models are trained at.
_SECOND_OF_AUDIO = 16000
_WAVEFORM = re.compile(r"(?:input_values|(?:raw_)?(?:audio|waveforms?|wavs?|speech)\w*)")


def _takes_audio(model: nn.Module) -> bool:
    """Whether the first input's name says it is a waveform (`input_values`, `audio`)."""
    names = forward_inputs(model)
    return bool(names) and _WAVEFORM.fullmatch(names[0]) is not None


#: Scales of the last sizes tried before a failure is called definite.
_SCALES = (4, 16, 64)


#: A symbolic size where an op takes a number (`is_causal=q_len > 1`): a run with the
#: same sizes as numbers decides at once whether the model passes.
_SYMBOLIC_ONLY = re.compile(r"must be \w+, not Sym(?:Bool|Int|Float)")
#: Errors of ops that need concrete sizes (the symbolic run cannot go past them); those of
#: `_SYMBOLIC_ONLY` among them, for a model whose run with numbers failed too.
_SYMBOLIC_LIMIT = re.compile(
    r"expected to contain only concrete integers|GuardOnDataDependentSymNode|"
    r"data-dependent|Cannot call (?:sizes|strides|numel|storage_offset)\(\)|"
    + _SYMBOLIC_ONLY.pattern
)
_BATCH_REFUSED = re.compile(r"batch sizes? (> ?1|larger than 1|greater than 1|of 1)", re.I)


def _failure_key(
    exc: BaseException, plan: InputPlan, hints: dict[str, int], user_files: set[str]
) -> tuple[Any, ...] | None:
    """What identifies a first run's failure across the models of a file: the error, the
    user line that raised it, and the inputs (None without a user line)."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename in user_files:
            line = (tb.tb_frame.f_code.co_filename, tb.tb_lineno)
        tb = tb.tb_next
    if line is None:
        return None
    inputs = tuple((tuple(spec.dims), spec.dtype) for spec in plan.specs)
    return (type(exc), str(exc), line, inputs, plan.packed, tuple(sorted(hints.items())))


def _undecided(result: PlanResult) -> bool:
    """An analysis that ended without a finding or a pass, for a reason that is not about
    the input's number of dimensions."""
    return (
        not result.ok
        and result.code is None
        and result.reason is not None
        and not (result.rank_error)
    )


def _with_described(found: list[InputPlan], described: InputPlan) -> list[InputPlan]:
    """The plans inferred for an input, those of the described rank (forward's docstring,
    its unpacking) first; the described plan first when none has it (the layer that told
    another rank may come after a reshape: `(B, F, C, H, W)` folded into images)."""
    if any(len(p.specs) != 1 or p.packed for p in found):
        return found
    rank = len(described.specs[0].dims)
    alike = [_laid_out(p, described) for p in found if len(p.specs[0].dims) == rank]
    if not alike:
        return [described, *found]
    return alike + [p for p in found if len(p.specs[0].dims) != rank]


def _laid_out(plan: InputPlan, described: InputPlan) -> InputPlan:
    """An inferred plan of the described rank with the described names for its free sizes:
    the layer that told the rank fixed some sizes, the description says what the others
    are (`(batch_size, num_channels, num_patches, d_model)`, not an image's [N, H, W, C])."""
    dims = [
        mine if mine.name is None or theirs.name == mine.name else _renamed(mine, theirs)
        for mine, theirs in zip(plan.specs[0].dims, described.specs[0].dims, strict=True)
    ]
    if dims == plan.specs[0].dims:
        return plan
    return dataclasses.replace(plan, specs=[TensorSpec(dims, plan.specs[0].dtype)])


def _batch_refused(result: PlanResult) -> bool:
    """Whether the forward stopped because it takes one sample at a time."""
    failure = result.failure
    return (
        not result.ok
        and result.code is None
        and failure is not None
        and bool(_BATCH_REFUSED.search(str(failure.exc)))
    )


def _single_batch(plan: InputPlan) -> InputPlan | None:
    """The plan with its batch size fixed to 1, if it has a free one."""
    if not any(d.name == "N" for spec in plan.specs for d in spec.dims):
        return None
    specs = [
        TensorSpec([Dim.fixed(1) if d.name == "N" else d for d in spec.dims], spec.dtype)
        for spec in plan.specs
    ]
    return InputPlan(specs, plan.source, plan.label, plan.packed, guessed=plan.guessed)


def _renamed(mine: Dim, theirs: Dim) -> Dim:
    """A free size under the described name, at the size inferred for it (a size the
    description fixes, from the configuration, stays fixed)."""
    return theirs if theirs.name is None else Dim(theirs.name, mine.hint)


def _described_sizes(result: PlanResult) -> list[str]:
    """The free sizes a definite failure's input depends on that a description of the input
    named (`num_channels` of a docstring's `(batch_size, num_channels, num_patches,
    d_model)`), not a role (`N`, `L`, `H`)."""
    failure = result.failure
    if result.code is None or failure is None:
        return []
    symbols: set[Any] = set()
    for shape in failure.inputs:
        for size in shape or ():
            symbols |= getattr(size, "free_symbols", set())
    names = {result.names.get(s, str(s)) for s in symbols}
    return sorted(n for n in names if n[:1].islower())


#: Batch sizes a reshape that groups the batch's rows is tried at.
_GROUPED_BATCHES = (4, 16)


@contextlib.contextmanager
def _layers_running(model: nn.Module) -> Iterator[list[nn.Module]]:
    """The layers with weights of `model` that ran inside the block, in order."""
    ran: list[nn.Module] = []
    handles = [
        layer.register_forward_hook(lambda layer, *_: ran.append(layer))
        for layer in model.modules()
        if layer is not model and next(layer.parameters(recurse=False), None) is not None
    ]
    try:
        yield ran
    finally:
        for handle in handles:
            handle.remove()


def _regroups_batch(result: PlanResult) -> bool:
    """Whether a definite failure is a reshape whose first asked size is computed from the
    batch size (`view(x.shape[0] // 4, -1)`), not the batch size itself."""
    failure = result.failure
    if result.code is None or failure is None or failure.op not in ("view", "reshape"):
        return False
    first = failure.target[0] if failure.target else None
    batch = {s for s, n in result.names.items() if n == "N"}
    used = getattr(first, "free_symbols", set())
    return bool(used & batch) and first not in batch


def _fixed_at(plan: InputPlan, name: str, size: int) -> InputPlan:
    """The plan with its free size `name` fixed at `size`."""
    specs = [
        TensorSpec([Dim.fixed(size) if d.name == name else d for d in spec.dims], spec.dtype)
        for spec in plan.specs
    ]
    return dataclasses.replace(plan, specs=specs)


def _probed_dims(plan: InputPlan) -> list[str]:
    names = {d.name for spec in plan.specs for d in spec.dims if d.name}
    return sorted(n for n in names if n[:1] in "HWDTL")


def _fixed_note(fixed: dict[str, str]) -> str:
    """` (`unfold` fixed the input sizes N, L; at other values this failure goes away)`."""
    ops = ", ".join(f"`{op}`" for op in dict.fromkeys(fixed.values()))
    names = ", ".join(fixed)
    return f" ({ops} fixed the input sizes {names}; at other values this failure goes away)"


def _freed(plan: InputPlan) -> InputPlan | None:
    """An inferred plan (or one guessed from an input's name) with its fixed sizes made free
    (hinted at their value), if it has any; a batch of one (see `_single_batch`) stays.

    Not a list's (`images: list[Tensor]`): its elements are read one by one, or batched
    whole (an image's channels, copied into a batch, are the batch's)."""
    if plan.evidenced or (plan.exact and not plan.guessed) or plan.packed:
        return None
    specs, count = [], 0
    for spec in plan.specs:
        dims = []
        for position, dim in enumerate(spec.dims):
            if dim.name is None and (position, dim.hint) != (0, 1):
                dim = Dim(f"F{count}", dim.hint)
                count += 1
            dims.append(dim)
        specs.append(TensorSpec(dims, spec.dtype))
    return (
        InputPlan(specs, plan.source, plan.label, plan.packed, guessed=plan.guessed)
        if count
        else None
    )


def _untied(plan: InputPlan) -> InputPlan | None:
    """An inferred plan of several inputs whose free sizes share names (`H`, `W`) with their
    own names for each input after the first (`H1`, `W1`); the batch size stays shared."""
    if plan.evidenced or plan.exact or len(plan.specs) < 2:
        return None
    seen: set[str] = set()
    specs, renamed = [], False
    for index, spec in enumerate(plan.specs):
        dims = []
        for dim in spec.dims:
            if dim.name is not None and dim.name != "N" and dim.name in seen:
                dim, renamed = Dim(f"{dim.name}{index}", dim.hint), True
            dims.append(dim)
        seen.update(d.name for d in spec.dims if d.name is not None)
        specs.append(TensorSpec(dims, spec.dtype))
    return (
        InputPlan(specs, plan.source, plan.label, plan.packed, guessed=plan.guessed)
        if renamed
        else None
    )


#: Unpacking three sizes of a 2-D tensor: run as Python, or as a traced graph's getitems.
def _unbatched(failure: Failure) -> bool:
    """A conv that got an input with one dimension fewer than a batch of its own (torch reads
    it as one unbatched sample, its batch as channels), or a Linear or LayerNorm that got a
    batch of single values ([N]: the batch read as its features)."""
    module = failure.module
    shape = failure.inputs[0] if failure.inputs else None
    if shape is None:
        return False
    if isinstance(module, (nn.Linear, nn.LayerNorm)):
        return len(shape) == 1
    if not isinstance(module, nn.modules.conv._ConvNd):
        return False
    return len(shape) == len(module.kernel_size) + 1


_UNPACK = re.compile(r"not enough values to unpack \(expected (\d+), got (\d+)\)")
_UNPACKS_SHAPE = re.compile(
    r"^\s*(\w+(?:\s*,\s*\w+)+)\s*=\s*[\w.]+\.(?:shape|size\(\))\s*(?:#.*)?$"
)


def _unpacked_rank(
    plan: InputPlan, result: PlanResult, sources: dict[str, str]
) -> InputPlan | None:
    """One more dimension, free and after the batch, for an input that forward unpacks in
    one name more than it has (`batch, length, hidden = x.shape` for a flat `[N, F]`, whose
    layer behind `x.view(-1, hidden)` took it flat; `b, t, c, h, w = pixel_values.shape` for
    an image `[N, C, H, W]`: a video's frames). Only these two: a two-dimensional input counts
    when a layer fixed its second size (a generic `[N, L]` is no flat `[N, F]`), and where a
    size goes in a sequence is anyone's guess."""
    failure = result.failure
    if result.ok or failure is None or failure.frame is None:
        return None
    message = str(failure.exc)
    counts = _UNPACK.search(message)
    if counts is None and "tuple index out of range" not in message:  # (traced: getitems)
        return None
    got = int(counts.group(2)) if counts else None
    fits = [
        i
        for i, spec in enumerate(plan.specs)
        if got in (None, len(spec.dims))
        and (len(spec.dims) == 4 or (len(spec.dims) == 2 and spec.dims[1].name is None))
    ]
    if len(fits) != 1:
        return None
    spec = plan.specs[fits[0]]
    expected = len(spec.dims) + 1
    if counts is not None and int(counts.group(1)) != expected:
        return None
    targets = _unpacked_targets(failure.frame, sources)
    if targets is None or targets.count(",") + 1 != expected:
        return None
    dims = [spec.dims[0], Dim.free("F" if len(spec.dims) == 4 else "L"), *spec.dims[1:]]
    specs = list(plan.specs)
    specs[fits[0]] = dataclasses.replace(spec, dims=dims)
    return dataclasses.replace(plan, specs=specs)


def _unpacked_names(
    plan: InputPlan, result: PlanResult, sources: dict[str, str]
) -> InputPlan | None:
    """The input with as many dimensions as the line it failed at unpacks, named after the
    targets (`B, C, H, W = x.shape` in a helper forward calls first, `img_to_patch(x, p)`),
    when the plan's rank was another: tried next, as an assumption (a failure under it is
    no finding)."""
    failure = result.failure
    if result.ok or failure is None or failure.frame is None or len(plan.specs) != 1:
        return None
    message = str(failure.exc)
    if not (
        _UNPACK.search(message)
        or "tuple index out of range" in message
        or "too many values to unpack" in message
    ):
        return None
    targets = _unpacked_targets(failure.frame, sources)
    dims = named_dims(targets) if targets is not None else None
    if dims is None or len(dims) == len(plan.specs[0].dims) or dims[0].name != "N":
        return None
    spec = TensorSpec(dims, plan.specs[0].dtype)
    path, line, _ = failure.frame
    where = f"{os.path.basename(path)}:{line}"
    return assumed([InputPlan([spec])], f"from the sizes unpacked at {where}")[0]


def _unpacked_targets(frame: tuple[str, int, int], sources: dict[str, str]) -> str | None:
    """`b, c, h, w` when the failure's line unpacks a tensor's sizes (`= x.shape`)."""
    path, line, _ = frame
    lines = sources.get(path, "").splitlines()
    unpacked = _UNPACKS_SHAPE.search(lines[line - 1]) if 0 < line <= len(lines) else None
    return unpacked.group(1) if unpacked is not None else None


def _told_most(results: list[tuple[InputPlan, PlanResult]]) -> PlanResult:
    """The result whose reason a skip gives: the first, unless it stopped at an unpacking
    that a later plan with one more dimension got past (`_unpacked_rank`)."""
    first = results[0][1]
    if first.failure is None or not _UNPACK.search(str(first.failure.exc)):
        return first
    for _, later in results[1:]:
        if later.failure is not None and not _UNPACK.search(str(later.failure.exc)):
            return later
    return first


def _rank_reason(results: list[tuple[InputPlan, PlanResult]]) -> str | None:
    failure = results[0][1].failure
    if failure is None or not results[0][1].rank_error:
        return None
    return (
        "no guess of the input's number of dimensions works "
        f"({_brief(failure.exc)}); declare the input shape"
    )


#: Why a failure met only with a guessed input rank is not reported.
_GUESSED_RANK = " (the input's rank was guessed; declare it with `# torchlint: input-shape=(...)`)"


def _other_rank_open(
    plan: InputPlan, results: list[tuple[InputPlan, PlanResult]], ran: bool = False
) -> bool:
    """Whether `plan`'s rank was a guess (inferred, several candidates) and a candidate of
    another rank ran (at some sizes) or, unless `ran`, stopped on something else than
    shapes."""
    ranks = [len(s.dims) for s in plan.specs]
    return not plan.evidenced and any(
        [len(s.dims) for s in p.specs] != ranks
        and (r.ok or (not ran and r.code is None and not r.rank_error and not r.refused))
        for p, r in results
    )


def _same_site(a: PlanResult, b: PlanResult) -> bool:
    return (
        a.code == b.code
        and a.failure is not None
        and b.failure is not None
        and a.failure.module is b.failure.module
        and a.failure.op == b.failure.op
    )


#: How many of a failing layer's sizes a product of input sizes is solved to.
_MAX_OWN_SIZES = 6


def _pinned_to_one(world: World, flipped: set[Any]) -> list[tuple[Any, Any]]:
    """(guard, size) for sizes computed from the input's that an op fixed to 1 on the way
    (`Eq((H - 33) // 32, 1)`: torch's view specializes a side of 1), not yet lifted."""
    symbols = set(world.names)
    found: list[tuple[Any, Any]] = []
    for guard in world.guards_since(0):
        if not isinstance(guard, sympy.Eq) or guard in flipped:
            continue
        left, right = guard.args
        size = left if right == 1 else right if left == 1 else None
        if size is None or isinstance(size, sympy.Symbol):
            continue  # an input's own size is never fixed to 1: it starts at 2 or more
        free = size.free_symbols
        if free and free <= symbols and all(size != known for _, known in found):
            found.append((guard, size))
    return found


def _failing_guard(failure: Failure, world: World, flipped: set[Any]) -> Any:
    """The guard of the failing step that decided the failure, if it is about input sizes.

    A failed size check leaves a `Ne` or an inequality. A guard comparing a size with one of
    the failing layer's own sizes (`Ne(..., 6272)` for a Linear(6272, ...)) is preferred;
    size-0/1 special cases (broadcasting, empty tensors) and equalities (branches taken,
    specializations) are never the reason.
    """
    symbols = set(world.names)
    sizes = F.layer_sizes(failure.module)
    fallback = None
    for guard in reversed(failure.guards):
        free = getattr(guard, "free_symbols", set())
        if guard in flipped or not free or not free <= symbols:
            continue
        if isinstance(guard, sympy.Eq):
            continue  # a branch taken because sizes were equal (or a specialization)
        constants = {int(a) for a in getattr(guard, "args", ()) if isinstance(a, sympy.Integer)}
        if constants & sizes:
            return guard
        if (
            isinstance(guard, (sympy.Eq, sympy.Ne))
            and constants & {0, 1}
            and not any(isinstance(a, (tf.Mod, tf.PythonMod)) for a in guard.args)
        ):
            continue  # size 0 or 1 special cases; divisibility (`Mod(...) != 0`) does count
        if fallback is None:
            fallback = guard
    return fallback


def _path_guards(world: World, failure: Failure, flipped: set[Any], guard: Any) -> list[Any]:
    """Earlier decisions on the path to the failure (kept when searching, if possible): the
    guards recorded before the failing step, and those of the failing step before `guard`
    (a forward that raises after comparing two sizes, `if w != 90 or h != 60: raise`, leaves
    both in one step; the first, already solved for, must hold while the second is)."""
    if world.env is None:
        return []
    symbols = set(world.names)
    recorded = world.guards_since(0)
    own = failure.guards
    after = set(own[own.index(guard) :] if guard in own else own)
    return [
        g
        for g in recorded
        if g not in after
        and g not in flipped
        and getattr(g, "free_symbols", set())
        and g.free_symbols <= symbols
    ][:32]


def _length_only(condition: Any, world: World) -> bool:
    """A condition on a sequence's length alone (`16*L == 592`): a sequence model that
    only takes one length (TL606, or TL607 when it is not the model's own)."""
    symbols = condition.free_symbols
    return len(symbols) == 1 and world.names.get(next(iter(symbols)), "")[:1] in "LT"


def _searched_too_little(condition: Any, world: World) -> bool:
    """Whether the search for sizes may have missed some: with three or more spatial sizes
    (a video's frames, height and width), only equal sizes and samples are tried."""
    spatial = {s for s in condition.free_symbols if world.names.get(s, "")[:1] in "DHWT"}
    return len(spatial) >= 3


def _solve(conditions: list[Any], world: World, hints: dict[sympy.Symbol, int]) -> Any:
    try:
        return Problem(conditions, world.names, hints).find()
    except Unsupported:
        return None


def _per_item(failure: Failure) -> Fraction | None:
    """For a failed reshape: how many values it was given for each it asked for, past the
    leading dims it keeps from its input (None when they fit or are not all numbers)."""
    shape = failure.inputs[0] if failure.inputs else None
    target = failure.target
    if not shape or not target or any(not isinstance(s, int) for s in [*shape, *target]):
        return None
    kept = 0
    while kept < min(len(shape), len(target)) and shape[kept] == target[kept]:
        kept += 1
    given, asked = math.prod(shape[kept:]), math.prod(target[kept:])
    return Fraction(given, asked) if asked > 0 and given != asked else None


def _alike(again: Failure | None, failure: Failure) -> bool:
    """Whether a run failed at the same layer or op as `failure`."""
    return again is not None and again.module is failure.module and again.op == failure.op


def _symbolic_limit(exc: BaseException) -> bool:
    """Whether an error says that an op cannot take symbolic sizes (not that sizes differ)."""
    return bool(_SYMBOLIC_LIMIT.search(f"{type(exc).__name__}: {exc}"))


def _with_sides(plan: InputPlan, sides: set[str], side: int) -> InputPlan:
    """The plan with its image sides starting at `side` (still free sizes)."""
    specs = [
        TensorSpec([Dim(d.name, side) if d.name in sides else d for d in spec.dims], spec.dtype)
        for spec in plan.specs
    ]
    return dataclasses.replace(plan, specs=specs)


def _unknown(name: str) -> str:
    return (
        f"cannot infer the shape of `{name}`; declare it with "
        "`# torchlint: input-shape=(...)` on the class line"
    )


#: What a layer makes, by the attribute that sizes its output.
_OUTPUT_SIZES = ("out_features", "out_channels", "embedding_dim", "hidden_size")


def _between_layers(code: str | None, failure: Failure) -> bool:
    """Whether a layer-size failure is between two of the model's layers, whatever its input:
    the failing layer takes the output of the layer before it (an InfoGAN generator's
    `BatchNorm2d(128)` after `Conv2d(128, 64)`), and that output's size is the earlier
    layer's own. An input assumed (to pass a layer unchanged, to be an equal part of a
    `cat`) changes neither. A recurrent layer's input size counts too (TL605: an LSTM after
    an embedding of another width)."""
    recurrent = code == "TL605" and isinstance(failure.module, nn.RNNBase)
    if not (code in _LAYER_CODES or recurrent) or failure.module is None or not failure.inputs:
        return False
    made = _made_sizes(failure.producer_module)
    shape = failure.inputs[0]
    if not made or shape is None or len(shape) < 2:
        return False
    got = shape[1] if len(shape) > 2 and not isinstance(failure.module, _LAST_DIM) else shape[-1]
    return isinstance(got, int) and got in made and got not in F.layer_sizes(failure.module)


def _made_sizes(producer: nn.Module | None) -> list[int]:
    """The sizes a layer's output has of its own (a bidirectional RNN's twice its hidden)."""
    if isinstance(producer, nn.RNNBase):
        width = producer.proj_size or producer.hidden_size
        return [width * (2 if producer.bidirectional else 1)]
    made = [getattr(producer, a, None) for a in _OUTPUT_SIZES] if producer is not None else []
    return [size for size in made if isinstance(size, int)]


#: TL601-TL604: a layer whose size does not fit what it is given.
_LAYER_CODES = frozenset({"TL601", "TL602", "TL603", "TL604"})
#: Layers that read their input's last dimension, whatever its rank.
_LAST_DIM = (nn.Linear, nn.LayerNorm, nn.Embedding, nn.RNNBase)


def _failure_reason(failure: Failure, stubbed: list[str]) -> str:
    if stubbed and "Stub" in f"{failure.exc}":
        return f"needs {', '.join(sorted(set(stubbed)))}, which is not installed"
    where = ""
    if failure.frame is not None:
        where = f" at line {failure.frame[1]}"
    return f"the forward pass failed{where}: {_brief(failure.exc)}"


def _not_installed(package: str) -> bool:
    if is_stub(sys.modules.get(package)):
        return True  # a stand-in has a spec of its own
    try:
        return importlib.util.find_spec(package) is None
    except (ImportError, ValueError):
        return True


def _config_in(kwargs: dict[str, Any]) -> Any:
    """The configuration object among constructor arguments (`Block(config=...)`), if any."""
    for value in kwargs.values():
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return value
        if any(b.__name__ in ("PretrainedConfig", "PreTrainedConfig") for b in type(value).__mro__):
            return value
    return None


def _told(per_input: list[list[InputPlan]]) -> bool:
    """Whether some input's shape was found (not every plan of it assumed)."""
    return any(not all(is_assumed(plan) for plan in plans) for plans in per_input)


def _config_name(kwargs: dict[str, Any]) -> str | None:
    config = _config_in(kwargs)
    return type(config).__name__ if config is not None else None


def _with_forward_owners(classes: Iterable[type]) -> set[type]:
    """The classes, and the base classes whose forward they run (`SSDClassificationHead`
    runs `SSDScoringHead.forward`): that forward was checked too."""
    found = set()
    for cls in classes:
        found.add(cls)
        owner = next((c for c in cls.__mro__ if "forward" in vars(c)), None)
        if owner is not None and owner is not nn.Module:
            found.add(owner)
    return found


def _settled_clean(found: list[dict[tuple[str, int, str], F.Finding]]) -> bool:
    """Whether the guessed runs so far leave no finding to report: only one met in every
    run is, so the remaining runs could not add any (the first run already checked the
    class, and a later one that cannot be checked changes nothing)."""
    return not set(found[0]).intersection(*found[1:])


def _holds_for(name: str, variant: Variant) -> str:
    """` (for every value of FeedForward's d_model and width, when use_bias=True)`."""
    sized = list(dict.fromkeys(v.split("[")[0] for v in variables(variant.runs)))
    text = ", ".join(sized[:-1]) + " and " + sized[-1] if len(sized) > 1 else "".join(sized)
    when = ", ".join(
        f"{k} is {v!r}" if isinstance(v, OtherChoice) else f"{k}={v!r}"
        for k, v in variant.fixed.items()
    )
    if not sized:
        return f" (when {when})" if when else ""
    return f" (for every value of {name}'s {text}{', when ' + when if when else ''})"


def _brief(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if len(text) > 160:
        text = text[:157] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _stubbed_parts(model: nn.Module, stubbed: list[str]) -> str | None:
    """The missing modules, when the model holds objects standing in for them."""
    if not stubbed:
        return None
    for module in model.modules():
        if any(is_stub(value) for value in vars(module).values()):
            return ", ".join(sorted(set(stubbed)))
    return None


def _builds(model: Any, cls: type | None) -> bool:
    """Whether a built model holds an instance of the class."""
    if cls is None or not isinstance(model, nn.Module):
        return False
    return any(type(m) is cls for m in model.modules())


def _is_module_class(cls: Any) -> bool:
    return inspect.isclass(cls) and issubclass(cls, nn.Module) and not is_stub(cls)


def _without_forward(cls: Any) -> bool:
    """Whether a class has no forward of its own making: `nn.Module`'s, or the one a
    framework's base class only hands on to it (Lightning's `LightningModule.forward`; a
    module that trains in `training_step` need not define one)."""
    forward = getattr(cls, "forward", None)
    if forward is nn.Module.forward:
        return True
    return getattr(forward, "__qualname__", "") == "LightningModule.forward" and str(
        getattr(forward, "__module__", "")
    ).startswith(("lightning", "pytorch_lightning"))


def _call_text(name: str, args: list[Any], kwargs: dict[str, Any]) -> str:
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    text = ", ".join(parts)
    if len(text) > 60:
        text = "..."
    return f"{name}({text})"
