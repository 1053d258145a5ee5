"""TL303: `torch.load` without `map_location` in code that chooses its device."""

from __future__ import annotations

import re

import libcst as cst

from torchlint.analysis.call_args import add_keyword, detached, has_star_kwargs, keyword, positional
from torchlint.analysis.test_paths import is_test_file
from torchlint.analysis.torch_load import is_torch_load, loads_file_it_saves, loads_own_data
from torchlint.context import FileContext, iter_scope_nodes
from torchlint.diagnostic import Severity
from torchlint.fixes import FixBuilder
from torchlint.rule import Rule
from torchlint.semantic.lookup import value_here

# The file decides where it runs: it builds a device, moves things to one, or checks for CUDA.
_CHOOSES_DEVICE = re.compile(
    r"cuda\.is_available\(\)"
    r"""|torch\.device\(\s*(?:type\s*=\s*)?["']cuda"""
    r"""|["']cuda(?::\d+)?["']\s+if\b"""
    r"|^\s*device\s*=",
    re.M,
)
# With a `device = ...` of its own, moving things `.to(device)` is choosing the device.
_MOVES_TO_DEVICE = re.compile(r"\.to\(\s*device\b")
_DEVICE_NAMES = ("device", "dev")


class TorchLoadWithoutMapLocation(Rule):
    """
    ## What it does
    Checks for `torch.load(f)` without `map_location` in a file that otherwise chooses its
    device at run time: it calls `torch.cuda.is_available()`, builds `torch.device("cuda")`,
    picks `"cuda" if ... else "cpu"`, or assigns its own `device = ...` and moves things
    `.to(device)`. Calls that forward `**kwargs`, loads of data the program just wrote (an
    `io.BytesIO` buffer, a file saved by the same function), loads of a file the same file
    saves with `torch.save` (the same path expression, or a handle opened on it: the run
    that reads it wrote it on this machine) and test files are not reported.

    An unsafe fix adds `map_location=device` when a variable named `device` is assigned (or is
    a parameter) in the enclosing function or at module level before the call, and
    `map_location="cpu"` otherwise.

    ## Why is this bad?
    `torch.load` restores every tensor onto the device it was saved from. A checkpoint saved
    during GPU training then fails to load on a machine without CUDA ("Attempting to
    deserialize object on a CUDA device but torch.cuda.is_available() is False"), or lands on
    `cuda:0` of a multi-GPU host, which is exactly what code that picks its device is meant
    to avoid.

    ## Example
    ```python
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model.load_state_dict(torch.load("model.pt"))
    ```

    ## Use instead
    ```python
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model.load_state_dict(torch.load("model.pt", map_location=device))
    ```

    ## Fix safety
    The fix is unsafe: it changes where the loaded tensors live, and code after the call may
    rely on them being on the GPU they were saved from.
    """

    code = "TL303"
    name = "torch-load-without-map-location"
    triggers = ("load",)
    severity = Severity.WARNING
    fix_availability = "unsafe"

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self._chooses_device: bool | None = None

    def visit_Call(self, node: cst.Call) -> None:
        if not is_torch_load(self.context, node):
            return
        if keyword(node, "map_location") is not None or has_star_kwargs(node):
            return
        if len(positional(node)) >= 2 or any(a.star for a in node.args):
            return  # map_location passed positionally (or possibly, through *args)
        if self._chooses_device is None:
            self._chooses_device = self.context.scan(_chooses_device) and not is_test_file(
                self.context.path
            )
        if not self._chooses_device or loads_own_data(self.context, node):
            return
        if loads_file_it_saves(self.context, node):
            return
        device = self._device_in_scope(node)
        spelled = device or '"cpu"'
        value: cst.BaseExpression = cst.Name(device) if device else cst.SimpleString(spelled)
        self.report(
            node,
            "torch.load without map_location restores tensors onto the device they were saved "
            f"from; pass map_location={spelled} so the checkpoint loads wherever this code runs",
            fix=FixBuilder(
                message=f"Add map_location={spelled}",
                replacements=[
                    (node, detached(self.context, add_keyword(node, "map_location", value)))
                ],
                safe=False,
            ),
        )

    def _device_in_scope(self, call: cst.Call) -> str | None:
        """A variable named like a device that is certainly bound where the call is."""
        function = None
        for ancestor in reversed(self.context.ancestors):
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                if isinstance(ancestor, cst.FunctionDef):
                    function = ancestor
                break
        for name in _DEVICE_NAMES:
            if function is not None and _is_parameter(function, name):
                return name
            value = value_here(self.context, cst.Name(name), max_hops=1)
            if value is None or not _looks_like_device(value):
                continue
            # Bound in the call's own scope: the assignment must come first.
            scope = function if function is not None else self.context.module
            if name not in self.context.assignments(scope) or _precedes(scope, value, call):
                return name
        return None


def _chooses_device(source: str) -> bool:
    match = _CHOOSES_DEVICE.search(source)
    if match is None:
        return False
    if match.group(0).lstrip().startswith("device"):
        # A bare `device = ...` counts only together with `.to(device)`, or another signal.
        return bool(_MOVES_TO_DEVICE.search(source)) or any(
            not m.group(0).lstrip().startswith("device") for m in _CHOOSES_DEVICE.finditer(source)
        )
    return True


def _precedes(scope: cst.CSTNode, first: cst.CSTNode, second: cst.CSTNode) -> bool:
    for node in iter_scope_nodes(scope):
        if node is first:
            return True
        if node is second:
            return False
    return False


def _is_parameter(function: cst.FunctionDef, name: str) -> bool:
    params = function.params
    return any(
        p.name.value == name
        for p in (*params.posonly_params, *params.params, *params.kwonly_params)
    )


def _looks_like_device(value: cst.BaseExpression) -> bool:
    """`torch.device(...)`, a string literal, or a conditional between those."""
    if isinstance(value, cst.IfExp):
        return _looks_like_device(value.body) and _looks_like_device(value.orelse)
    return isinstance(value, (cst.SimpleString, cst.Call, cst.Attribute))
