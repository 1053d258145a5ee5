"""Shape insight, worker side: describe each checked model layer by layer.

`TableChecker` is the engine's `FileChecker` with one addition: after a model is checked,
it is run once more on fake tensors with symbolic sizes (`[N, 3, H, W]`) at the sizes the
check settled on, and every submodule call and every tensor op called from the user's code
is recorded in execution order: its qualified name, its type and key arguments, its input
and output shapes, its parameter count, and the span of the call in the user's source.
The run stops at the first failure, which becomes the table's last row.

Repeated blocks (a transformer's twelve identical layers) are run once: a call to a module
with the same structure and input shapes as an earlier one replays the earlier call's rows
under the new names instead of running again.

Everything here runs in the worker's child process (it imports torch); the tables are plain
JSON for `torchlint.shapes.render` and the language server.
"""

from __future__ import annotations

import itertools
import math
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from torchlint.shapes import compat
from torchlint.shapes.budget import EngineStop
from torchlint.shapes.check import FileChecker, PlanResult
from torchlint.shapes.deferred import sympy
from torchlint.shapes.inputs import InputPlan, forward_inputs, op_name
from torchlint.shapes.messages import char_column
from torchlint.shapes.propagate import World, fast_unary
from torchlint.shapes.sizes import Names
from torchlint.shapes.solve import MIN_SPATIAL, Problem, Unsupported, few_sizes, runs

Table = dict[str, Any]

_DEFINITE = ("TL601", "TL602", "TL603", "TL604", "TL605")
_CONTAINERS = (nn.Sequential, nn.ModuleList, nn.ModuleDict)
#: Attributes that number a layer without changing what it computes (replay ignores them).
_INDEX_ATTRIBUTES = frozenset(
    {"layer_idx", "layer_id", "layer_index", "layer_number", "block_idx", "idx", "index"}
)
_OPERATORS = {
    "add": "+",
    "radd": "+",
    "iadd": "+=",
    "sub": "-",
    "rsub": "-",
    "isub": "-=",
    "mul": "*",
    "rmul": "*",
    "imul": "*=",
    "truediv": "/",
    "rtruediv": "/",
    "itruediv": "/=",
    "floordiv": "//",
    "matmul": "@",
    "rmatmul": "@",
    "pow": "**",
    "getitem": "[...]",
    "neg": "-x",
}


class TableChecker(FileChecker):
    """The engine's checks, and a per-layer table of every model checked (`self.tables`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tables: list[Table] = []
        self._runs: list[tuple[InputPlan, PlanResult]] = []

    def _run_plan(self, model: nn.Module, plan: InputPlan, graph_for_analysis: Any) -> PlanResult:
        result = super()._run_plan(model, plan, graph_for_analysis)
        self._runs.append((plan, result))
        return result

    def check_model(
        self,
        model: nn.Module,
        label: str,
        where: tuple[str, int],
        spec: dict[str, Any],
        declared: dict[str, Any],
        prefix: str = "",
    ) -> None:
        start = len(self.findings)
        self._runs = []
        super().check_model(model, label, where, spec, declared, prefix)
        found = self.findings[start:]
        started = time.perf_counter()
        table: Table = {"model": label, "path": where[0], "line": where[1], "prefix": prefix}
        table["class"] = type(model).__name__
        if self.deadline is not None and time.monotonic() > self.deadline:
            table.update(status="skipped", reason="the file's time budget was used up")
        else:
            try:
                table.update(
                    describe(
                        model,
                        prefix,
                        self._runs,
                        found,
                        self.user_files,
                        self.sources,
                        deadline=self.deadline,
                    )
                )
            except OutOfTime:
                table.update(status="skipped", reason="the file's time budget was used up")
            except Exception as exc:  # the check's findings stand; only the table is lost
                reason = compat.explain(f"internal error: {_brief(exc)}")
                table.update(status="skipped", reason=reason)
        table["findings"] = [dict(f) for f in found]
        table["seconds"] = round(time.perf_counter() - started, 4)
        self.tables.append(table)


# -- choosing the run to describe ------------------------------------------------------------


def _chosen(
    runs_: list[tuple[InputPlan, PlanResult]], found: list[dict[str, Any]]
) -> tuple[InputPlan, PlanResult] | None:
    """The plan the check concluded with: its definite failure, else the first that passed."""
    codes = [f["code"] for f in found if f["code"] in _DEFINITE]
    if codes:
        for plan, result in runs_:
            if result.code == codes[0] and not result.rank_error:
                return plan, result
        for plan, result in runs_:
            if result.code == codes[0]:
                return plan, result
    for plan, result in runs_:
        if result.ok and not result.pinned:
            return plan, result
    for plan, result in runs_:
        if result.ok:
            return plan, result
    return runs_[0] if runs_ else None


def describe(
    model: nn.Module,
    prefix: str,
    runs_: list[tuple[InputPlan, PlanResult]],
    found: list[dict[str, Any]],
    user_files: set[str],
    sources: dict[str, str],
    deadline: float | None = None,
) -> Table:
    """The table of one model, from the run its check concluded with.

    Past `deadline` (`time.monotonic()`), the run stops and the model gets no table: the
    file's findings must come back before the worker's hard time limit.
    """
    chosen = _chosen(runs_, found)
    finding = _main_finding(found)
    if chosen is None:
        reason = finding["message"] if finding else "no input shape could be chosen"
        return {"status": "skipped", "reason": reason, "finding": finding}
    plan, result = chosen
    world = World(model, plan, dict(result.hints), symbolic=True)
    ranks = {
        dim.name: (len(spec.dims), position)
        for spec in plan.specs
        for position, dim in enumerate(spec.dims)
        if dim.name
    }
    names = Names(world.names, ranks)
    recorder = Recorder(world, model, prefix, user_files, sources, names, deadline)
    output, error = recorder.run()
    note = None
    if error is not None and (finding is None or finding["code"] not in _DEFINITE):
        # Some layers cannot run on symbolic sizes (an LSTM asks for numel()): show the
        # concrete sizes the check used, if that run gets further.
        world_ = World(model, plan, dict(result.hints), symbolic=False)
        concrete = Recorder(world_, model, prefix, user_files, sources, Names({}, ranks), deadline)
        output_, error_ = concrete.run()
        if error_ is None or len(concrete.rows) > len(recorder.rows):
            note = f"concrete sizes: the run with symbolic sizes failed ({_brief(error)})"
            world, names, recorder, output, error = (
                world_,
                concrete.names,
                concrete,
                output_,
                error_,
            )
    rows = recorder.rows
    if error is not None:
        failed = recorder.failed if recorder.failed is not None else recorder.error_row(error)
        rows[failed]["failed"] = True
        rows[failed]["error"] = _brief(error)
        status = "failed"
    else:
        status = "ok"
    table: Table = {
        "status": status,
        "finding": finding,
        "input": _input(model, plan, world, names),
        "note": note,
        "rows": rows,
        "params": _count(model),
        "modules": recorder.module_infos(),
        "constraints": _constraints(world, names) if error is None else [],
    }
    if error is None:
        table["output"] = _outputs(output, names)
    return table


def _main_finding(found: list[dict[str, Any]]) -> dict[str, Any] | None:
    for codes in (_DEFINITE, ("TL690",)):
        for item in found:
            if item["code"] in codes:
                return {k: item[k] for k in ("code", "message", "line", "col") if k in item}
    return None


def _input(model: nn.Module, plan: InputPlan, world: World, names: Names) -> dict[str, Any]:
    shapes = [tuple(t.shape) for t in world.inputs]
    return {
        "names": (forward_inputs(model) or [])[: len(shapes)],
        "source": plan.source,
        "label": plan.label,
        "shapes": [names.shape(s) for s in shapes],
        "dims": [names.dims(s) for s in shapes],
        "dtypes": [str(t.dtype).replace("torch.", "") for t in world.inputs],
        "symbolic": bool(world.names),
        "sizes": {names.letter(s): world.hints[n] for s, n in world.names.items()}
        or {name: size for name, size in world.hints.items()},
    }


# -- recording --------------------------------------------------------------------------------


class OutOfTime(EngineStop):
    """The table's run went past the file's time budget (not an Exception: user code that
    catches everything must not swallow it)."""


@dataclass
class _Memo:
    row: int  #: the first call's row
    end: int  #: one past the last row recorded inside it
    output: Any


@dataclass
class _Call:
    """A recorded module call or op, while it runs."""

    index: int
    container: bool
    span: list[int] | None = None
    path: str | None = None


@dataclass
class Recorder:
    """Records one symbolic run of a model: rows in execution order."""

    world: World
    model: nn.Module
    prefix: str
    user_files: set[str]
    sources: dict[str, str]
    names: Names
    deadline: float | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)
    failed: int | None = None
    _stack: list[_Call] = field(default_factory=list)
    _memo: dict[Any, _Memo] = field(default_factory=dict)
    _signatures: dict[int, Any] = field(default_factory=dict)
    _counted: set[int] = field(default_factory=set)
    _qualnames: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, module in self.model.named_modules():
            self._qualnames.setdefault(id(module), name)

    def qual(self, module: nn.Module) -> str:
        name = self._qualnames.get(id(module), type(module).__name__)
        if self.prefix:
            return f"{self.prefix}.{name}" if name else self.prefix
        return name

    # -- the run --
    def run(self) -> tuple[Any, BaseException | None]:
        originals: list[nn.Module] = []
        for module in self.model.modules():
            if module is self.model or "forward" in vars(module):
                continue
            bound = module.forward
            module.__dict__["forward"] = self._wrapper(module, bound)
            originals.append(module)
        try:
            with self.world.mode, torch.no_grad(), _OpRecorder(self):
                return self.model(*self.world.plan.arguments(self.world.inputs)), None
        except Exception as exc:
            return None, exc
        finally:
            for module in originals:
                module.__dict__.pop("forward", None)

    def _wrapper(self, module: nn.Module, forward: Any) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            return self.call(module, forward, args, kwargs)

        return wrapped

    def _in_time(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise OutOfTime()

    def call(self, module: nn.Module, forward: Any, args: tuple, kwargs: dict) -> Any:
        self._in_time()
        container = isinstance(module, _CONTAINERS)
        parent = self._stack[-1] if self._stack else None
        span, path = self._module_site(parent)
        index = len(self.rows)
        row: dict[str, Any] = {
            "index": index,
            "kind": "container" if container else "module",
            "name": self.qual(module),
            "type": type(module).__name__,
            "detail": layer_text(module),
            "depth": self._depth(),
            "parent": parent.index if parent is not None else None,
            "inputs": self._shapes(list(args) + list(kwargs.values())),
            "params": self._params(module),
        }
        _place(row, span, path)
        self.rows.append(row)
        call = _Call(index, container, span, path)
        self._stack.append(call)
        try:
            key = self._memo_key(module, args, kwargs)
            memo = self._memo.get(key) if key is not None else None
            if memo is not None:
                output = self._replay(memo, index, module)
            else:
                output = forward(*args, **kwargs)
                if key is not None:
                    self._memo[key] = _Memo(index, len(self.rows), output)
        except Exception:
            if self.failed is None:
                self.failed = index
            raise
        finally:
            self._stack.pop()
        row["outputs"] = self._shapes([output])
        return output

    def _depth(self) -> int:
        return 1 + sum(1 for call in self._stack if not call.container)

    def _module_site(self, parent: _Call | None) -> tuple[list[int] | None, str | None]:
        """The call's span in user code; a container's children share the container's."""
        frame = sys._getframe(3)
        while frame is not None and frame.f_code.co_filename == compat.MODULE_FILE:
            frame = frame.f_back  # type: ignore[assignment]
        if frame is None:
            return None, None
        filename = frame.f_code.co_filename
        if filename in self.user_files:
            return self._span(frame), filename
        if filename == compat.CONTAINER_FILE and parent is not None:
            return parent.span, parent.path
        return None, None

    def op_site(self) -> tuple[list[int] | None, str] | None:
        """Where user code called the op being dispatched, or None if torch or a library did."""
        frame = sys._getframe(2)
        for _ in range(8):
            if frame is None:
                return None
            filename = frame.f_code.co_filename
            if filename in self.user_files:
                return self._span(frame), filename
            if filename not in compat.DISPATCH_FILES:
                return None
            frame = frame.f_back  # type: ignore[assignment]
        return None

    def _span(self, frame: Any) -> list[int] | None:
        """[line, col, end_line, end_col] of the running instruction: 1-based lines, 0-based
        character columns."""
        code = frame.f_code
        positions = next(itertools.islice(code.co_positions(), frame.f_lasti // 2, None), None)
        if positions is None or positions[0] is None:
            return [frame.f_lineno, 0, frame.f_lineno, 0]
        line, end_line, col, end_col = positions
        end_line = end_line or line
        source = self.sources.get(code.co_filename)
        if source is not None:
            col = char_column(source, line, col or 0)
            end_col = char_column(source, end_line, end_col or 0)
        return [line, col or 0, end_line, end_col or 0]

    # -- ops --
    def begin_op(
        self, func: Any, args: tuple, kwargs: dict, span: list[int] | None, path: str
    ) -> int:
        self._in_time()
        index = len(self.rows)
        parent = self._stack[-1] if self._stack else None
        row: dict[str, Any] = {
            "index": index,
            "kind": "op",
            "name": _source_text(self.sources.get(path), span) or op_name(func),
            "type": op_label(func),
            "detail": "",
            "depth": self._depth(),
            "parent": parent.index if parent is not None else None,
            "inputs": self._shapes(list(args) + list(kwargs.values())),
            "params": None,
        }
        _place(row, span, path)
        self.rows.append(row)
        return index

    def end_op(self, index: int, output: Any) -> None:
        shapes = self._shapes([output])
        if shapes:
            self.rows[index]["outputs"] = shapes
        elif index == len(self.rows) - 1:
            self.rows.pop()  # `x.size(0)`, `x.dim()`: no tensor, no row

    def fail_op(self, index: int) -> None:
        if self.failed is None:
            self.failed = index

    def error_row(self, error: BaseException) -> int:
        """A row for a failure outside any layer or op (an `assert` in forward)."""
        found = None
        tb = error.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename in self.user_files:
                found = tb
            tb = tb.tb_next
        index = len(self.rows)
        row: dict[str, Any] = {
            "index": index,
            "kind": "error",
            "name": type(error).__name__,
            "type": "raise",
            "detail": "",
            "depth": 1,
            "parent": None,
            "inputs": [],
            "params": None,
        }
        if found is not None:
            frame = found.tb_frame
            code = frame.f_code
            positions = next(itertools.islice(code.co_positions(), found.tb_lasti // 2, None), None)
            line = positions[0] if positions and positions[0] else found.tb_lineno
            _place(row, [line, 0, line, 0], code.co_filename)
        self.rows.append(row)
        return index

    # -- shapes and parameters --
    def _shapes(self, values: list[Any]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for tensor in _tensors(values, limit=8):
            shape = tuple(tensor.shape)
            out.append(
                {
                    "shape": self.names.shape(shape),
                    "dims": self.names.dims(shape),
                    "dtype": str(tensor.dtype).replace("torch.", ""),
                }
            )
        return out

    def _params(self, module: nn.Module) -> int | None:
        """The module's parameter count, on its first call only (a reused layer counts once)."""
        if id(module) in self._counted:
            return None
        self._counted.add(id(module))
        return _count(module)

    # -- replaying repeated blocks --
    def _memo_key(self, module: nn.Module, args: tuple, kwargs: dict) -> Any:
        if not any(True for _ in module.children()):
            return None  # a single layer is as cheap to run as to replay
        inputs = _signature_of((args, tuple(sorted(kwargs.items()))))
        if inputs is None:
            return None
        structure = self._signatures.get(id(module))
        if structure is None:
            structure = self._signatures[id(module)] = _structure(module)
        return (structure, inputs)

    def _replay(self, memo: _Memo, index: int, module: nn.Module) -> Any:
        first = self.rows[memo.row]
        old, new = first["name"], self.rows[index]["name"]
        shift = self.rows[index]["depth"] - first["depth"]
        moved = {memo.row: index}
        for source in self.rows[memo.row + 1 : memo.end]:
            row = dict(source)
            row["index"] = len(self.rows)
            moved[source["index"]] = row["index"]
            row["parent"] = moved.get(source["parent"], index)
            row["depth"] = source["depth"] + shift
            if row["kind"] != "op" and (row["name"] == old or row["name"].startswith(old + ".")):
                row["name"] = new + row["name"][len(old) :]
            row["replayed"] = True
            self.rows.append(row)
        return memo.output

    def module_infos(self) -> list[dict[str, Any]]:
        """Every submodule (called or not): for hover on `self.<name>` in its owner's class."""
        infos = []
        named = dict(self.model.named_modules())
        for name, module in named.items():
            if not name:
                continue
            owner_name, _, attr = name.rpartition(".")
            owner = named.get(owner_name)
            infos.append(
                {
                    "name": f"{self.prefix}.{name}" if self.prefix else name,
                    "attr": attr,
                    "owner": type(owner).__name__ if owner is not None else "",
                    "owner_file": _class_file(type(owner)) if owner is not None else None,
                    "type": type(module).__name__,
                    "detail": layer_text(module),
                    "params": _count(module),
                }
            )
        return infos


class _OpRecorder(TorchFunctionMode):
    """Records ops called from user code; answers activations without running them."""

    def __init__(self, recorder: Recorder) -> None:
        super().__init__()
        self.recorder = recorder
        self.symbolic = recorder.world.env is not None

    def __torch_function__(
        self, func: Any, types_: Any, args: tuple = (), kwargs: dict | None = None
    ) -> Any:
        kwargs = kwargs or {}
        site = self.recorder.op_site()
        if site is None:
            out = fast_unary(func, args, kwargs) if self.symbolic else None
            return func(*args, **kwargs) if out is None else out
        index = self.recorder.begin_op(func, args, kwargs, site[0], site[1])
        try:
            out = fast_unary(func, args, kwargs) if self.symbolic else None
            if out is None:
                out = func(*args, **kwargs)
        except Exception:
            self.recorder.fail_op(index)
            raise
        self.recorder.end_op(index, out)
        return out


def _place(row: dict[str, Any], span: list[int] | None, path: str | None) -> None:
    row["path"] = path
    row["span"] = span
    row["line"] = span[0] if span else None


def _tensors(values: Any, limit: int) -> list[torch.Tensor]:
    """Tensors in nested tuples, lists, dicts and model outputs, in order, at most `limit`."""
    found: list[torch.Tensor] = []

    def visit(value: Any, depth: int) -> None:
        if len(found) >= limit or depth > 3:
            return
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            for item in value:
                visit(item, depth + 1)
        elif isinstance(value, dict):
            for item in value.values():
                visit(item, depth + 1)

    visit(values, 0)
    return found


def _signature_of(value: Any) -> Any:
    """A hashable description of call arguments (shapes, not values), or None if unsure."""
    if isinstance(value, torch.Tensor):
        return (
            "tensor",
            tuple(_expr(d) for d in value.shape),
            tuple(_expr(s) for s in value.stride()),
            value.dtype,
        )
    if value is None or isinstance(value, (bool, int, float, str, torch.dtype)):
        return value
    if isinstance(value, (tuple, list)):
        items = tuple(_signature_of(v) for v in value)
        if any(i is None and v is not None for i, v in zip(items, value, strict=True)):
            return None
        return (type(value).__name__, items)
    return None


def _expr(value: Any) -> Any:
    return compat.current_expr(value)


def _structure(module: nn.Module) -> Any:
    """What a module computes, as far as shapes go: its submodules, sizes and settings."""
    parts = []
    for name, sub in module.named_modules():
        params = tuple((n, tuple(p.shape), p.dtype) for n, p in sub.named_parameters(recurse=False))
        buffers = tuple((n, tuple(b.shape), b.dtype) for n, b in sub.named_buffers(recurse=False))
        settings = tuple(
            sorted(
                (key, value)
                for key, value in vars(sub).items()
                if not key.startswith("_")
                and key not in _INDEX_ATTRIBUTES
                and key != "training"
                and _plain(value)
            )
        )
        parts.append((name, type(sub), params, buffers, settings, sub.extra_repr()))
    return tuple(parts)


def _plain(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, tuple):
        return all(_plain(v) for v in value)
    return False


def _count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def _class_file(cls: type) -> str | None:
    module = sys.modules.get(cls.__module__)
    path = getattr(module, "__file__", None)
    return os.path.abspath(path) if path else None


def _source_text(source: str | None, span: list[int] | None) -> str | None:
    """The text of a span (character columns), squeezed onto one line."""
    if source is None or span is None:
        return None
    line, col, end_line, end_col = span
    lines = source.splitlines()
    if not 1 <= line <= end_line <= len(lines) or (line == end_line and end_col <= col):
        return None
    if line == end_line:
        return lines[line - 1][col:end_col]
    chunk = [lines[line - 1][col:], *lines[line : end_line - 1], lines[end_line - 1][:end_col]]
    return " ".join(part.strip() for part in chunk).replace("( ", "(").replace(" )", ")")


def op_label(func: Any) -> str:
    """`torch.flatten`, `F.relu`, `.view`, `+`: how the user wrote the op."""
    name = op_name(func)
    qualname = getattr(func, "__qualname__", "") or ""
    module = getattr(func, "__module__", "") or ""
    if qualname.startswith(("TensorBase.", "Tensor.", "_TensorBase.")):
        if name in _OPERATORS:
            return _OPERATORS[name]
        return f".{name}"
    if module.startswith("torch.nn.functional") or module == compat.NATIVE_FUNCTIONAL_MODULE:
        return f"F.{name}"
    if name in _OPERATORS and module in ("_operator", "operator"):
        return _OPERATORS[name]
    return f"torch.{name}"


# -- layers ------------------------------------------------------------------------------------


def _one(value: Any) -> Any:
    """(3, 3) -> 3; (3, 5) stays."""
    if isinstance(value, (tuple, list)) and value and all(v == value[0] for v in value):
        return value[0]
    return tuple(value) if isinstance(value, list) else value


def layer_text(module: nn.Module) -> str:
    """`Conv2d(32, 64, k=3, s=1, p=1)`, `Linear(6272, 128)`, `LayerNorm(768)`, `Block`."""
    kind = type(module).__name__
    args: list[str] = []
    if isinstance(module, nn.Linear):
        args = [str(module.in_features), str(module.out_features)]
        if module.bias is None:
            args.append("bias=False")
    elif isinstance(module, compat.layers.ConvNd):
        args = [str(module.in_channels), str(module.out_channels)]
        args.append(f"k={_one(module.kernel_size)}")
        args.append(f"s={_one(module.stride)}")
        padding = module.padding if isinstance(module.padding, str) else _one(module.padding)
        if padding != 0:
            args.append(f"p={padding}")
        if _one(module.dilation) != 1:
            args.append(f"d={_one(module.dilation)}")
        if module.groups != 1:
            args.append(f"g={module.groups}")
    elif isinstance(module, (compat.layers.MaxPoolNd, compat.layers.AvgPoolNd)):
        args = [f"k={_one(module.kernel_size)}", f"s={_one(module.stride)}"]
        if _one(module.padding) != 0:
            args.append(f"p={_one(module.padding)}")
    elif isinstance(
        module,
        (compat.layers.AdaptiveAvgPoolNd, compat.layers.AdaptiveMaxPoolNd),
    ):
        args = [str(_one(module.output_size))]
    elif isinstance(module, (nn.Embedding, nn.EmbeddingBag)):
        args = [str(module.num_embeddings), str(module.embedding_dim)]
    elif isinstance(module, nn.LayerNorm):
        shape = module.normalized_shape
        args = [str(shape[0] if len(shape) == 1 else list(shape))]
    elif isinstance(module, nn.GroupNorm):
        args = [str(module.num_groups), str(module.num_channels)]
    elif isinstance(module, compat.layers.NormBase):
        args = [str(module.num_features)]
    elif isinstance(module, nn.RNNBase):
        args = [str(module.input_size), str(module.hidden_size)]
        if module.num_layers != 1:
            args.append(f"layers={module.num_layers}")
        if module.bidirectional:
            args.append("bidirectional")
        if module.batch_first:
            args.append("batch_first")
    elif isinstance(module, nn.MultiheadAttention):
        args = [str(module.embed_dim), f"heads={module.num_heads}"]
    elif isinstance(module, nn.TransformerEncoderLayer):
        args = [
            str(module.self_attn.embed_dim),
            f"heads={module.self_attn.num_heads}",
            f"ff={module.linear1.out_features}",
        ]
    elif isinstance(module, compat.layers.DropoutNd):
        args = [f"p={module.p:g}"]
    elif isinstance(module, nn.Flatten):
        args = (
            [str(module.start_dim)]
            if module.end_dim == -1
            else [
                str(module.start_dim),
                str(module.end_dim),
            ]
        )
    elif isinstance(module, (nn.Sequential, nn.ModuleList, nn.ModuleDict)):
        args = [str(len(module))]
    elif type(module).__module__.startswith("torch.nn."):
        text = module.extra_repr()
        if text and len(text) <= 40:
            args = [text]
    else:
        for attrs in (
            ("in_features", "out_features"),
            ("nx", "nf"),
            ("in_channels", "out_channels"),
        ):
            values = [getattr(module, a, None) for a in attrs]
            if all(isinstance(v, int) for v in values):
                args = [str(v) for v in values]
                break
    return f"{kind}({', '.join(args)})" if args else kind


# -- what the input must satisfy ----------------------------------------------------------------


def _constraints(world: World, names: Names) -> list[str]:
    """Equalities the run relied on, in the input's sizes: `H = W = 28, or any H, W with ...`.

    Conditions on one size are combined per size and described by the sizes they allow
    (`H, W divisible by 4`, `L = 196`); conditions on several sizes keep their equation.
    """
    if world.env is None or not world.names:
        return []
    symbols = set(world.names)
    hints = {s: world.hints[n] for s, n in world.names.items()}
    single: dict[sympy.Symbol, list[Any]] = {}
    out: list[str] = []
    seen: set[Any] = set()
    for expr in world.guards_since(0):
        if not isinstance(expr, sympy.Eq) or expr in seen:
            continue
        free = getattr(expr, "free_symbols", set())
        if not free or not free <= symbols:
            continue
        seen.add(expr)
        if len(free) == 1:
            single.setdefault(next(iter(free)), []).append(expr)
            continue
        text = _constraint_text(expr, free, world.names, hints, names)
        if text not in out:
            out.append(text)
    by_text: dict[str, list[str]] = {}
    for symbol, conditions in single.items():
        text = _allowed(symbol, conditions, world.names, hints)
        if text is None:
            for condition in conditions:
                equation = names.equation(condition.lhs, condition.rhs)
                if equation not in out:
                    out.insert(0, equation)
        else:
            by_text.setdefault(text, []).append(names.letter(symbol))
    merged = []
    for text, letters in by_text.items():
        letters.sort(key=lambda n: "NCDHWLT".find(n))
        if text.startswith("= ") and len(letters) > 1:
            merged.append(" = ".join(letters) + " " + text)
        else:
            merged.append(", ".join(letters) + " " + text)
    return (merged + out)[:4]


def _allowed(
    symbol: sympy.Symbol,
    conditions: list[Any],
    engine_names: dict[sympy.Symbol, str],
    hints: dict[sympy.Symbol, int],
) -> str | None:
    """`= 28 or 29`, `divisible by 4`: the sizes one symbol may take, or None if unclear."""
    low = MIN_SPATIAL if engine_names.get(symbol, "")[:1] in "HWDT" else 1
    values = torch.arange(low, 4097, dtype=torch.int64)
    try:
        ok = Problem(conditions, engine_names, hints)._eval({symbol: values})
    except (Unsupported, RuntimeError, TypeError, ValueError):
        return None
    ok = ok.expand_as(values) if ok.dim() == 0 else ok
    found = values[ok].tolist()
    if not found:
        return None
    if few_sizes(found):
        return f"= {_values(found)}"
    step = math.gcd(*found)
    if (
        step > 1
        and found == list(range(found[0], 4097, step))
        and found[0] == step * (-(-low // step))
    ):
        return f"divisible by {step}"
    return None


def _constraint_text(
    expr: Any,
    free: set[sympy.Symbol],
    engine_names: dict[sympy.Symbol, str],
    hints: dict[sympy.Symbol, int],
    names: Names,
) -> str:
    equation = names.equation(expr.lhs, expr.rhs)
    letters = sorted((names.letter(s) for s in free), key=lambda n: "NCDHWLT".find(n))
    spatial = [s for s in free if engine_names.get(s, "")[:1] in "HWD"]
    try:
        problem = Problem([expr], engine_names, hints)
        if spatial and len(spatial) == len(free):
            squares = problem.square_solutions()
            if squares and few_sizes(squares):
                equal = " = ".join(letters)
                holds = f"{equal} = {_values(squares)}"
                return (
                    holds
                    if len(free) == 1
                    else f"{holds}, or any {', '.join(letters)} with {equation}"
                )
        if len(free) == 1:
            (symbol,) = free
            low = MIN_SPATIAL if symbol in spatial else 1
            values = torch.arange(low, 4097, dtype=torch.int64)
            ok = problem._eval({symbol: values})
            ok = ok.expand_as(values) if ok.dim() == 0 else ok
            found = values[ok].tolist()
            if found and few_sizes(found):
                return f"{letters[0]} = {_values(found)}"
    except (Unsupported, RuntimeError, TypeError, ValueError):
        pass
    return equation


def _values(values: list[int]) -> str:
    """[28] -> "28"; [28, 29] -> "28 or 29"; [32..35] -> "32 to 35"."""
    parts = []
    for low, high in runs(values):
        if low == high:
            parts.append(str(low))
        elif high == low + 1:
            parts.append(f"{low} or {high}")
        else:
            parts.append(f"{low} to {high}")
    return ", ".join(parts)


def _outputs(output: Any, names: Names) -> list[dict[str, Any]]:
    """The model's output tensors, labelled by field or position when there are several."""
    labelled: list[tuple[str, torch.Tensor]] = []
    if isinstance(output, torch.Tensor):
        labelled = [("", output)]
    elif isinstance(output, dict):
        for key, value in output.items():
            labelled += [(str(key), t) for t in _tensors([value], limit=2)[:1]]
    elif isinstance(output, (tuple, list)):
        for position, value in enumerate(output):
            labelled += [(str(position), t) for t in _tensors([value], limit=2)[:1]]
    return [
        {
            "name": label,
            "shape": names.shape(tuple(t.shape)),
            "dims": names.dims(tuple(t.shape)),
            "dtype": str(t.dtype).replace("torch.", ""),
        }
        for label, t in labelled[:6]
    ]


def _brief(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if len(text) > 200:
        text = text[:197] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
