"""TL703: use or import of a deprecated or removed torch API."""

from __future__ import annotations

import re

import libcst as cst

from torchlint.analysis.call_args import (
    detached,
    keeps_comments,
    module_spelling,
    positional,
)
from torchlint.analysis.deprecated_apis import (
    BY_NAME,
    DEVICE_FIRST,
    DEVICE_FIRST_KEYWORDS,
    LAST_SEGMENTS,
    LIST_ARGS,
    RENAME,
    RENAME_SINGLE_ARG,
    DeprecatedApi,
    Version,
    is_deprecated_for,
    replacement_available,
    target_version,
)
from torchlint.context import FileContext
from torchlint.diagnostic import Severity
from torchlint.fixes import FixBuilder
from torchlint.names import dotted_name
from torchlint.rule import Rule

_VERSION_CHECK = re.compile(r"version|hasattr|TORCH_|torch_(?:ge|gt|lt|le|greater|less)", re.I)


class DeprecatedTorchApi(Rule):
    """
    ## What it does
    Checks for uses and imports of torch APIs that are deprecated or already removed, from a
    table kept in `torchlint/analysis/deprecated_apis.py`: `torch.cuda.amp.autocast` and
    `GradScaler` (use `torch.amp`), `torch.cpu.amp.autocast`, `torch.chain_matmul`,
    `torch.qr`, `torch.cholesky`, the removed `torch.symeig`/`eig`/`solve`/`lstsq`/
    `matrix_rank`, `torch.range`, `F.upsample`, `torch.nn.utils.clip_grad_norm`, the
    `nn.init` functions without a trailing underscore, `torch.testing.assert_allclose`,
    `torch.nn.utils.weight_norm`, `torch.backends.cuda.sdp_kernel`,
    `torch.set_default_tensor_type`, `torch.autograd.Variable`, the legacy typed
    constructors (`torch.FloatTensor(...)`, `torch.cuda.LongTensor(...)`, ...), and more.
    Imports such as `from torch.cuda.amp import autocast` are reported at the import.

    `Variable(x, volatile=True)` gets its own message: the flag has done nothing since
    torch 0.4, so evaluation code written with it builds the autograd graph it meant to
    skip; `with torch.no_grad():` is what replaces it. The typed constructors are reported
    only where they are called: `isinstance(x, torch.FloatTensor)`, `x.type(torch.LongTensor)`
    and annotations name the type, which is fine.

    The `torch-version` setting (otherwise the installed torch's version, read from its
    package metadata) decides what counts: APIs deprecated after that version are not
    reported, and a replacement is suggested only if that version has it.

    Where the rewrite is mechanical a safe fix applies it: `torch.cuda.amp.GradScaler(...)`
    becomes `torch.amp.GradScaler("cuda", ...)`, `torch.cuda.amp.autocast(enabled=...)`
    becomes `torch.amp.autocast("cuda", enabled=...)`, `torch.chain_matmul(a, b, c)` becomes
    `torch.linalg.multi_dot([a, b, c])`, `F.upsample` becomes `F.interpolate`,
    `clip_grad_norm` becomes `clip_grad_norm_`, `nn.init.xavier_uniform` becomes
    `nn.init.xavier_uniform_`. Rewrites that change argument order or semantics
    (`torch.solve`, `torch.range`, `assert_allclose`, ...) are left to you.

    ## Why is this bad?
    Deprecated APIs print warnings on every run and disappear in a later release; removed
    ones raise an error as soon as the line runs (`torch.solve`, `torch.symeig` and friends
    already do). Their replacements are usually more general (`torch.amp` works for every
    device type) or fix long-standing inconsistencies (`torch.range` includes its end,
    unlike Python's `range`).

    ## Known problems
    A typed constructor chosen through an alias (`Tensor = torch.cuda.FloatTensor if cuda
    else torch.FloatTensor`, then `Tensor(...)`) is not reported: the alias is also used as
    a type (`x.type(Tensor)`), and the call does not name the API.

    ## Example
    ```python
    scaler = torch.cuda.amp.GradScaler()
    with torch.cuda.amp.autocast(dtype=torch.bfloat16):
        loss = model(x)
    with_grad = Variable(images, volatile=True)
    labels = torch.LongTensor([1, 0, 2])
    ```

    ## Use instead
    ```python
    scaler = torch.amp.GradScaler("cuda")
    with torch.amp.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x)
    with torch.no_grad():
        ...  # use `images` directly
    labels = torch.tensor([1, 0, 2], dtype=torch.int64)
    ```

    ## Fix safety
    The fixes are safe: each is offered only where the replacement takes the same arguments
    and computes the same result.
    """

    code = "TL703"
    name = "deprecated-torch-api"
    triggers = tuple(sorted(LAST_SEGMENTS))
    severity = Severity.WARNING
    fix_availability = "safe"

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self._target: Version | None = target_version(context.torch_version)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value not in LAST_SEGMENTS:
            return
        api = BY_NAME.get(self.context.qualified_name(node) or "")
        if api is None or not is_deprecated_for(api, self._target):
            return
        if self._inside_import_or_target(node) or not self._is_use(node):
            return
        call = self._called(node)
        if api.calls_only and call is None:
            return
        if self._compatibility_fallback() or self._reassigned_alias(node):
            return
        self.report(node, self._message(api, call), fix=self._fix(api, node, call))

    def visit_Call(self, node: cst.Call) -> None:
        # `Variable(x)` after `from torch.autograd import Variable`: the import itself is
        # fine (the class is still used for isinstance checks), only the call is deprecated.
        if not isinstance(node.func, cst.Name):
            return
        api = BY_NAME.get(self.context.qualified_name(node.func) or "")
        if api is None or not api.calls_only or not is_deprecated_for(api, self._target):
            return
        if not self._compatibility_fallback():
            self.report(node.func, self._message(api, node))

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or isinstance(node.names, cst.ImportStar):
            return
        if self._compatibility_fallback():
            return
        module = dotted_name(node.module)
        if module is None:
            return
        for alias in node.names:
            name = dotted_name(alias.name)
            api = BY_NAME.get(f"{module}.{name}")
            if api is not None and not api.calls_only and is_deprecated_for(api, self._target):
                self.report(alias, self._message(api))

    # -- helpers ----------------------------------------------------------------------------
    def _inside_import_or_target(self, node: cst.Attribute) -> bool:
        for ancestor in reversed(self.context.ancestors):
            if isinstance(ancestor, (cst.Import, cst.ImportFrom, cst.AssignTarget)):
                return True
            if isinstance(ancestor, cst.BaseStatement):
                return False
        return False

    def _is_use(self, node: cst.Attribute) -> bool:
        """False for mentions that only list, compare or patch the API: entries of a tuple,
        list, set or dict (dispatch tables), comparisons (`func is torch.range`), attribute
        look-ups on it, the object `add_docstr` documents, and APIs the file reassigns."""
        ancestors = self.context.ancestors
        parent = ancestors[-1] if ancestors else None
        if isinstance(parent, (cst.Element, cst.DictElement, cst.Comparison, cst.ComparisonTarget)):
            return False
        if isinstance(parent, cst.Attribute) and parent.value is node:
            return False  # `F.upsample.__name__`: introspection, not a call
        if self._patched(node):
            return False
        if isinstance(parent, cst.Arg) and len(ancestors) >= 2:
            call = ancestors[-2]
            if isinstance(call, cst.Call):
                called = dotted_name(call.func) or ""
                if called.rsplit(".", 1)[-1] in ("add_docstr", "_add_docstr"):
                    return False
        return True

    def _patched(self, node: cst.Attribute) -> bool:
        """The file assigns the attribute itself (`F.upsample = wrap(F.upsample)`): it is
        patching every function, the deprecated ones included, not using them."""
        spelled = re.escape(self.context.code(node))
        return self.context.matches(re.compile(rf"^\s*{spelled}\s*=[^=]", re.M))

    def _compatibility_fallback(self) -> bool:
        """Inside a branch chosen by a version check (`if is_torch_version(...)`,
        `... if _TORCH_GREATER_EQUAL_2_4 else ...`, `if hasattr(torch.amp, ...)`) or in an
        `except` handler (`try: new API except ImportError: old API`): kept on purpose for
        older torch releases."""
        for ancestor in self.context.ancestors:
            if isinstance(ancestor, cst.ExceptHandler):
                return True
            if isinstance(ancestor, (cst.If, cst.IfExp)) and _VERSION_CHECK.search(
                self.context.code(ancestor.test)
            ):
                return True
        return False

    def _reassigned_alias(self, node: cst.Attribute) -> bool:
        """`weight_norm = nn.utils.weight_norm` later replaced by the new API (`if hasattr(...):
        weight_norm = nn.utils.parametrizations.weight_norm`)."""
        parent = self.context.ancestors[-1] if self.context.ancestors else None
        if not isinstance(parent, cst.Assign) or parent.value is not node:
            return False
        scope: cst.CSTNode = self.context.enclosing_function() or self.context.module
        assigned = self.context.assignments(scope)
        for target in parent.targets:
            name = dotted_name(target.target)
            if name is not None and len(assigned.get(name, ())) > 1:
                return True
        return False

    def _called(self, node: cst.Attribute) -> cst.Call | None:
        parent = self.context.ancestors[-1] if self.context.ancestors else None
        if isinstance(parent, cst.Call) and parent.func is node:
            return parent
        return None

    def _message(self, api: DeprecatedApi, call: cst.Call | None = None) -> str:
        if call is not None and _volatile(call):
            return (
                f"`{api.name}(..., volatile=True)` has had no effect since torch 0.4: the "
                f"autograd graph it meant to skip is built (memory in evaluation); run the "
                f"code under `with torch.no_grad():` and pass the tensor itself"
            )
        version = f"torch {api.deprecated_in[0]}.{api.deprecated_in[1]}"
        if api.legacy:
            text = f"`{api.name}(...)` is a legacy constructor"
            if replacement_available(api, self._target):
                text += f"; use {api.replacement}"
            return text
        if api.removed:
            when = f" in {version}" if api.exact_version else ""
            status = f"was deprecated{when} and has since been removed"
        else:
            when = f" since {version}" if api.exact_version else ""
            status = f"is deprecated{when}"
        text = f"`{api.name}` {status}"
        if replacement_available(api, self._target):
            text += f"; use {api.replacement}"
        return text

    def _fix(
        self, api: DeprecatedApi, node: cst.Attribute, call: cst.Call | None
    ) -> FixBuilder | None:
        if api.fix_kind is None or api.fix_target is None:
            return None
        if not replacement_available(api, self._target):
            return None
        module, _, attr = api.fix_target.rpartition(".")
        new_func: cst.BaseExpression
        if module == api.name.rpartition(".")[0]:
            # Same module: keep the user's spelling of it, change the last name only.
            new_func = node.with_changes(attr=cst.Name(attr))
        else:
            spelled = module_spelling(self.context, module)
            if spelled is None:
                return None
            new_func = cst.parse_expression(f"{spelled}.{attr}")
        message = f"Replace with {api.fix_target}"
        if api.fix_kind == RENAME:
            if call is not None and any(
                a.keyword is not None and a.keyword.value in api.no_fix_keywords for a in call.args
            ):
                return None
            return FixBuilder(message=message, replacements=[(node, new_func)], safe=True)
        if call is None or not keeps_comments(call.func):
            return None
        replacement: cst.Call | None = None
        if api.fix_kind == RENAME_SINGLE_ARG:
            if len(call.args) == 1 and len(positional(call)) == 1:
                replacement = call.with_changes(func=new_func)
        elif api.fix_kind in (DEVICE_FIRST, DEVICE_FIRST_KEYWORDS):
            if any(a.star for a in call.args):
                return None
            if api.fix_kind == DEVICE_FIRST_KEYWORDS and positional(call):
                return None
            device = cst.Arg(
                value=cst.SimpleString(f'"{api.device}"'),
                comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
                if call.args
                else cst.MaybeSentinel.DEFAULT,
            )
            replacement = call.with_changes(func=new_func, args=[device, *call.args])
        elif api.fix_kind == LIST_ARGS:
            args = positional(call)
            if len(args) < 2 or len(args) != len(call.args) or not keeps_comments(call, *args):
                return None
            items = ", ".join(self.context.code(a.value) for a in args)
            replacement = call.with_changes(
                func=new_func, args=[cst.Arg(value=cst.parse_expression(f"[{items}]"))]
            )
        if replacement is None:
            return None
        return FixBuilder(
            message=message,
            replacements=[(call, detached(self.context, replacement))],
            safe=True,
        )


def _volatile(call: cst.Call) -> bool:
    """`Variable(x, volatile=True)`: the flag torch 0.4 turned into a no-op."""
    return any(
        arg.keyword is not None
        and arg.keyword.value == "volatile"
        and not (isinstance(arg.value, cst.Name) and arg.value.value == "False")
        for arg in call.args
    )
