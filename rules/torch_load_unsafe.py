"""TL304: `torch.load` without `weights_only=`."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.call_args import add_keyword, detached, has_star_kwargs, keyword, positional
from torchlint.analysis.test_paths import is_test_file
from torchlint.analysis.torch_load import (
    in_type_error_fallback,
    is_torch_load,
    loads_own_data,
    pickled_object_kind,
    under_safe_globals,
    version_tuple,
)
from torchlint.diagnostic import Severity
from torchlint.fixes import FixBuilder
from torchlint.rule import Rule

# torch.load defaults to weights_only=True from this release on.
_SAFE_DEFAULT_SINCE = (2, 6)
# torch.load(f, map_location, pickle_module, *, weights_only, ...): a pickle_module cannot be
# combined with weights_only=True.
_PICKLE_MODULE_POSITION = 2


class TorchLoadUnsafe(Rule):
    """
    ## What it does
    Checks for `torch.load(...)` calls that do not pass `weights_only=` (parity with
    TorchFix's TOR102). Calls that forward `**kwargs` are not reported, since the keyword may
    be among them, and neither are loads of data the program itself just wrote (an
    `io.BytesIO` buffer, or a file the same function or script saved with `torch.save`),
    loads inside `with torch.serialization.safe_globals(...)`, the `except TypeError:`
    fallback for a torch too old to know `weights_only`, or test files. When the project
    targets torch 2.6 or newer, where `weights_only=True` is the default, nothing is
    reported: the `torch-version` setting says which torch, and without it the version of
    the torch installed next to torchlint counts.

    An unsafe fix adds `weights_only=True`. It is not offered when the call passes a
    `pickle_module`, which cannot be combined with it, nor when the file holds an object
    `weights_only=True` cannot load, and the message says what to do instead: a whole
    pickled model (the result is called, or a module method such as `.eval()` is called on
    it) or a numpy array (the result goes to `torch.from_numpy`).

    ## Why is this bad?
    Before torch 2.6, `torch.load` unpickles the file with the full `pickle` machinery, and
    unpickling can run arbitrary code: loading a checkpoint downloaded from the internet, or
    shared by someone else, lets that file execute whatever it contains. With
    `weights_only=True` only tensors, primitive types and containers (plus classes you allow
    with `torch.serialization.add_safe_globals`) are accepted.

    ## Example
    ```python
    state = torch.load("checkpoint.pt")
    ```

    ## Use instead
    ```python
    state = torch.load("checkpoint.pt", weights_only=True)
    ```

    ## Fix safety
    The fix is unsafe: files that pickle whole objects (a full `nn.Module`, an optimizer with
    custom classes, numpy arrays on old torch versions) fail to load with
    `weights_only=True`; save a `state_dict()` instead, or allow the classes explicitly.
    """

    code = "TL304"
    name = "torch-load-unsafe"
    triggers = ("load",)
    severity = Severity.WARNING
    fix_availability = "unsafe"

    def visit_Call(self, node: cst.Call) -> None:
        if not is_torch_load(self.context, node):
            return
        if keyword(node, "weights_only") is not None or has_star_kwargs(node):
            return
        if is_test_file(self.context.path) or loads_own_data(self.context, node):
            return
        if under_safe_globals(self.context) or in_type_error_fallback(self.context):
            return
        target = version_tuple(self.context.torch_version)
        if target is not None and target >= _SAFE_DEFAULT_SINCE:
            return
        kind = pickled_object_kind(self.context, node)
        if kind is not None:
            self.report(
                node,
                "torch.load without weights_only= can execute arbitrary code from the pickle, "
                f"and this file holds {kind}, which weights_only=True (the default from torch "
                "2.6) cannot load: save tensors or a state_dict() instead, or pass "
                "weights_only=False if you trust the file",
            )
            return
        fix = None
        pickles = keyword(node, "pickle_module") is not None or (
            len(positional(node)) > _PICKLE_MODULE_POSITION
        )
        if not pickles and not any(a.star for a in node.args):
            fix = FixBuilder(
                message="Add weights_only=True",
                replacements=[
                    (
                        node,
                        detached(self.context, add_keyword(node, "weights_only", cst.Name("True"))),
                    )
                ],
                safe=False,
            )
        self.report(
            node,
            "torch.load without weights_only= can execute arbitrary code from the pickle; "
            "pass weights_only=True (the default from torch 2.6)",
            fix=fix,
        )
