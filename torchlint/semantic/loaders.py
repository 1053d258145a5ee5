"""Data loaders: which expressions are loaders, whether their batches may already be on a
device, and where a file moves the batches of its loops.

`for x, y in train_loader`, `enumerate(tqdm(loader))` and `iter(loader)` iterate a loader when
its name says so or it was assigned a `DataLoader(...)`. A loader built with a `collate_fn`,
from a dataset already moved, by a device-aware wrapper, or in a file that defines a dataset
or loader class moving what it yields may hand out device tensors: its batches are unknown.
"""

from __future__ import annotations

import re

import libcst as cst

from torchlint.analysis.call_args import keyword, positional
from torchlint.context import FileContext, iter_scope_nodes
from torchlint.names import dotted_name
from torchlint.semantic.bindings import class_body
from torchlint.semantic.candidates import candidate_values, target_names
from torchlint.semantic.devices import device_argument, flat_dotted, move_kind
from torchlint.walker import iter_descendants

#: Loader constructions that may yield tensors already on the device.
_DEVICE_LOADER = re.compile(
    r"device|cuda|prepare|prefetch|setup_dataloaders|\.to\(|DeviceLoader|gpu", re.I
)
ITER_WRAPPERS = frozenset({"enumerate", "tqdm", "iter", "track", "progress_bar", "trange"})
_LOADER_NAME = re.compile(r"loader|(^|_)dl(s|_|$)|^dl", re.I)


def loader_of(
    context: FileContext,
    expr: cst.BaseExpression,
    scope: cst.Module | cst.FunctionDef,
    classdef: cst.ClassDef | None,
) -> tuple[str, bool] | None:
    """(loader text, whether an `enumerate` index comes first) when `expr` iterates a loader
    whose batches are surely CPU tensors."""
    indexed = False
    while isinstance(expr, cst.Call):
        name = (dotted_name(expr.func) or "").rsplit(".", 1)[-1]
        args = positional(expr)
        if name not in ITER_WRAPPERS or not args:
            return None
        indexed = indexed or name == "enumerate"
        expr = args[0].value
    base = expr.value if isinstance(expr, cst.Subscript) else expr
    name = dotted_name(base)
    if name is None or not _looks_like_loader(context, name, scope, classdef):
        return None
    if _loader_may_move(context, name, scope, classdef):
        return None
    return context.code(expr), indexed


def _looks_like_loader(
    context: FileContext,
    name: str,
    scope: cst.Module | cst.FunctionDef,
    classdef: cst.ClassDef | None,
) -> bool:
    if _LOADER_NAME.search(name.rsplit(".", 1)[-1]):
        return True
    return any(
        isinstance(value, cst.Call) and (dotted_name(value.func) or "").endswith("DataLoader")
        for value in candidate_values(context, name, scope, classdef)
    )


def _loader_may_move(
    context: FileContext,
    name: str,
    scope: cst.Module | cst.FunctionDef,
    classdef: cst.ClassDef | None,
) -> bool:
    if loaders_may_be_moved(context):
        return True
    for value in candidate_values(context, name, scope, classdef):
        if _DEVICE_LOADER.search(context.code(value)):
            return True
        if not isinstance(value, cst.Call):
            continue
        callee = dotted_name(value.func) or ""
        if callee in context.class_defs():
            return True  # a loader class of this file: it may move what it yields
        if not callee.endswith("DataLoader"):
            continue
        collate = keyword(value, "collate_fn")
        if collate is not None and not (
            isinstance(collate.value, cst.Name) and collate.value.value == "None"
        ):
            return True
        # The dataset (`TensorDataset(x, y)` with `x = x.to(device)` earlier) may already be
        # on the device: look one assignment back from every name in the call.
        for name_node in iter_descendants(value):
            if isinstance(name_node, cst.Name) and any(
                _DEVICE_LOADER.search(context.code(v))
                for v in candidate_values(context, name_node.value, scope, classdef)
            ):
                return True
    return False


def loaders_may_be_moved(context: FileContext) -> bool:
    """Whether the file wraps loaders in something that moves their batches: a dataset or
    loader class (`__getitem__`/`__iter__`/`__next__`) that moves tensors, or a call that
    takes a loader and a device (`DeviceDataLoader(dl, device)`,
    `accelerator.prepare(..., loader)`)."""
    return context.shared(_LoaderFacts).wrapping


def batch_move(context: FileContext) -> tuple[cst.FunctionDef, cst.Call] | None:
    """The first function whose loop over a loader moves the loop's batches to a device
    (`for x, y in loader: x = x.to(device)`): where this file's models run."""
    return context.shared(_LoaderFacts).batch_move


def batch_move_in(context: FileContext, function: cst.FunctionDef) -> cst.Call | None:
    """`x.to(device)` of a loop target in a loop over a loader of `function`, if any."""
    known = context.shared(_BatchMovesIn)  # asked per function, and by `batch_move`
    found = known.get(id(function))
    if found is None or found[0] is not function:
        found = known[id(function)] = (function, _batch_move_in(context, function))
    return found[1]


class _BatchMovesIn(dict[int, tuple[cst.FunctionDef, "cst.Call | None"]]):
    """`batch_move_in` of each function asked about, by the function's id."""

    def __init__(self, context: FileContext) -> None:
        super().__init__()


def _batch_move_in(context: FileContext, function: cst.FunctionDef) -> cst.Call | None:
    for loop in iter_scope_nodes(function):
        if type(loop) is not cst.For or not _is_loader_like(loop.iter):
            continue
        targets = set(target_names(loop.target))
        body = iter_descendants(loop.body)
        for index, node in enumerate(body):
            if (
                type(node) is cst.Call  # exact types: isinstance on LibCST's ABCs is slow
                and type(node.func) is cst.Attribute
                and type(node.func.value) is cst.Name
                and node.func.value.value in targets
                and move_kind(context, node) == "device"
                and device_argument(context, node) is not None
                and _fed_to_model(node.func.value.value, body[index + 1 :])
            ):
                return node
    return None


class _LoaderFacts:
    """The file-wide loader facts, computed on first use."""

    def __init__(self, context: FileContext) -> None:
        self.context = context
        self._wrapping: bool | None = None
        self._batch_move: tuple[cst.FunctionDef, cst.Call] | None = None
        self._batch_move_found = False

    @property
    def wrapping(self) -> bool:
        if self._wrapping is None:
            self._wrapping = self._find_loader_wrapping()
        return self._wrapping

    @property
    def batch_move(self) -> tuple[cst.FunctionDef, cst.Call] | None:
        if not self._batch_move_found:
            self._batch_move_found = True
            for function in iter_descendants(self.context.module):
                if isinstance(function, cst.FunctionDef):
                    move = batch_move_in(self.context, function)
                    if move is not None:
                        self._batch_move = (function, move)
                        break
        return self._batch_move

    def _find_loader_wrapping(self) -> bool:
        context = self.context
        for classdef in context.class_defs().values():
            # A dataset or loader of this file that moves what it holds or yields.
            methods = {m.name.value for m in class_body(classdef) if isinstance(m, cst.FunctionDef)}
            if methods & {"__iter__", "__next__", "__getitem__"} and _DEVICE_LOADER.search(
                context.code(classdef)
            ):
                return True
        # `train_dl = DeviceDataLoader(train_dl, device)`, `..., loader = accelerator.prepare(
        # ..., loader)`: a loader rebuilt from a loader by a call that mentions the device (a
        # plain `train(model, device, train_loader)` call is not one).
        for node in iter_descendants(context.module):
            if type(node) is not cst.Assign:  # exact type: most nodes are not
                continue
            assert isinstance(node, cst.Assign)
            if not isinstance(node.value, cst.Call):
                continue
            targets = [n for t in node.targets for n in flat_dotted(t.target)]
            if (
                any(_is_loader_name(name) for name in targets)
                and any(_is_loader_name(dotted_name(a.value) or "") for a in node.value.args)
                and _DEVICE_LOADER.search(context.code(node.value))
            ):
                return True
        return False


def _is_loader_name(name: str) -> bool:
    return bool(name) and bool(_LOADER_NAME.search(name.rsplit(".", 1)[-1]))


def _fed_to_model(name: str, later: list[cst.CSTNode]) -> bool:
    """Whether `name` is then passed to a model call (`model(x)`, `self.net(x)`): a batch
    moved only to meet outputs (`target.to(device)` after the model ran) says nothing."""
    for node in later:
        if type(node) is not cst.Call:  # exact type: most nodes are not
            continue
        assert isinstance(node, cst.Call)
        callee = dotted_name(node.func)
        if (
            callee is None
            or callee.count(".") > 1
            or ("." in callee and not callee.startswith("self."))
        ):
            continue
        if any(isinstance(arg.value, cst.Name) and arg.value.value == name for arg in node.args):
            return True
    return False


def _is_loader_like(expr: cst.BaseExpression) -> bool:
    """`loader`, `train_dl`, `enumerate(loader)`, `tqdm(loader)`: a loop over a data loader."""
    while isinstance(expr, cst.Call) and expr.args:
        expr = expr.args[0].value
    name = dotted_name(expr)
    last = name.rsplit(".", 1)[-1].lower() if name else ""
    return "loader" in last or last.endswith("_dl") or last == "dl"
