"""`torch.load(...)` calls and their arguments (TL303 map_location, TL304 weights_only)."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from torchlint.context import FileContext, iter_scope_nodes
from torchlint.semantic.lookup import value_here

LOAD_FUNCTIONS = frozenset({"torch.load", "torch.serialization.load"})


def is_torch_load(context: FileContext, call: cst.Call) -> bool:
    return context.qualified_name(call.func) in LOAD_FUNCTIONS


def version_tuple(text: str | None) -> tuple[int, int] | None:
    """`"2.1"`, `"2.13.0+cpu"`, `"2.4.0a0+git"` -> (major, minor); None when unreadable."""
    if not text:
        return None
    parts: list[int] = []
    for piece in text.strip().split(".")[:2]:
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            return None
        parts.append(int(digits))
    if len(parts) == 1:
        parts.append(0)
    return (parts[0], parts[1])


def loads_own_data(context: FileContext, call: cst.Call) -> bool:
    """Whether the call reads back data this program just produced: an in-memory buffer
    (`io.BytesIO`, directly or through a variable), or a file the same function writes with
    `torch.save` first (at module level: the same file, spelled the same). Neither the
    device nor the pickle is foreign then."""
    source = _file_argument(call, 0)
    if source is None:
        return False
    if _is_buffer(context, source):
        return True
    if isinstance(source, cst.Name):
        value = value_here(context, source, max_hops=1)
        if value is not None and _is_buffer(context, value):
            return True
    function = context.enclosing_function()
    script = _module_scope(context) if function is None else None
    scope = function or script
    if scope is None:
        return False
    # At module level the save must name the same file: a script writes many.
    key = _path_key(context, source, context.ancestors) if script is not None else None
    for node in iter_scope_nodes(scope):
        if node is call:
            break
        if isinstance(node, cst.Call) and context.qualified_name(node.func) in _SAVE_FUNCTIONS:
            target = _file_argument(node, 1)
            if script is None or (
                target is not None and key is not None and _path_key(context, target, []) == key
            ):
                return True
    return False


def _module_scope(context: FileContext) -> cst.Module | None:
    """The module, when the visited node is at module level (a script)."""
    if any(isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) for n in context.ancestors):
        return None
    return context.module


_SAVE_FUNCTIONS = frozenset({"torch.save", "torch.serialization.save"})
_BUFFERS = frozenset({"io.BytesIO", "_io.BytesIO"})


def _is_buffer(context: FileContext, expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.Call):
        return context.qualified_name(expr.func) in _BUFFERS
    return False


def _file_argument(call: cst.Call, position: int) -> cst.BaseExpression | None:
    """The `f` argument of `torch.load(f, ...)` (position 0) or `torch.save(obj, f)` (1)."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "f":
            return arg.value
    args = [a for a in call.args if a.keyword is None and not a.star]
    return args[position].value if len(args) > position else None


def loads_file_it_saves(context: FileContext, call: cst.Call) -> bool:
    """Whether the file that `call` loads is one this file writes with `torch.save` (spelled
    the same: `args.save`, `"best.pt"`, or a handle from `with open(args.save) as f`), so
    the same program, on the same machine, produced it."""
    source = _file_argument(call, 0)
    if source is None:
        return False
    key = _path_key(context, source, context.ancestors)
    return key is not None and key in context.shared(_saved_paths)


def _path_key(
    context: FileContext, expr: cst.BaseExpression, ancestors: list[cst.CSTNode]
) -> str | None:
    """How a path is spelled; a file handle named by `with open(path) as f` stands for path.

    A name local to a function is told apart from the same name in another function."""
    if isinstance(expr, cst.Name):
        for node in reversed(ancestors):
            if not isinstance(node, cst.With):
                continue
            for item in node.items:
                if (
                    item.asname is not None
                    and isinstance(item.asname.name, cst.Name)
                    and item.asname.name.value == expr.value
                    and isinstance(item.item, cst.Call)
                    and context.qualified_name(item.item.func) in _OPEN_FUNCTIONS
                    and item.item.args
                ):
                    return _path_key(context, item.item.args[0].value, ancestors)
        function = next((n for n in reversed(ancestors) if isinstance(n, cst.FunctionDef)), None)
        if function is not None and _is_local(context, function, expr.value):
            return f"{id(function)}:{expr.value}"
        return expr.value
    if isinstance(expr, (cst.Attribute, cst.SimpleString)):
        return context.code(expr)
    return None


def _is_local(context: FileContext, function: cst.FunctionDef, name: str) -> bool:
    params = function.params
    if any(
        p.name.value == name
        for p in (*params.posonly_params, *params.params, *params.kwonly_params)
    ):
        return True
    return name in context.assignments(function) or any(
        isinstance(node, cst.For) and name in {n.value for n in m.findall(node.target, m.Name())}
        for node in iter_scope_nodes(function)
    )


_OPEN_FUNCTIONS = frozenset({"open", "builtins.open", "io.open"})


class _SavedPathsVisitor(cst.CSTVisitor):
    def __init__(self, context: FileContext) -> None:
        super().__init__()
        self.context = context
        self.enclosing: list[cst.CSTNode] = []
        self.keys: set[str] = set()

    def visit_With(self, node: cst.With) -> None:
        self.enclosing.append(node)

    def leave_With(self, original_node: cst.With) -> None:
        self.enclosing.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.enclosing.append(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.enclosing.pop()

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.qualified_name(node.func) in _SAVE_FUNCTIONS:
            target = _file_argument(node, 1)
            key = _path_key(self.context, target, self.enclosing) if target is not None else None
            if key is not None:
                self.keys.add(key)


def _saved_paths(context: FileContext) -> frozenset[str]:
    """The spellings of every path the file passes to `torch.save`."""
    visitor = _SavedPathsVisitor(context)
    context.module.visit(visitor)
    return frozenset(visitor.keys)


def under_safe_globals(context: FileContext) -> bool:
    """Inside `with torch.serialization.safe_globals([...]):`, a deliberate weights-only load."""
    return any(
        isinstance(node, cst.With)
        and any(
            isinstance(item.item, cst.Call)
            and context.qualified_name(item.item.func) in _SAFE_GLOBALS
            for item in node.items
        )
        for node in context.ancestors
    )


_SAFE_GLOBALS = frozenset({"torch.serialization.safe_globals"})


def in_type_error_fallback(context: FileContext) -> bool:
    """Inside `except TypeError:`, the fallback for a torch too old to know `weights_only`."""
    for node in context.ancestors:
        if isinstance(node, cst.ExceptHandler) and node.type is not None:
            kinds = node.type.elements if isinstance(node.type, cst.Tuple) else [node.type]
            for kind in kinds:
                value = kind.value if isinstance(kind, cst.Element) else kind
                if isinstance(value, cst.Name) and value.value == "TypeError":
                    return True
    return False


#: Methods only a module has: calling one on what was loaded means a whole model was pickled.
_MODULE_METHODS = frozenset(
    {
        "eval",
        "train",
        "parameters",
        "named_parameters",
        "modules",
        "named_modules",
        "children",
        "buffers",
        "forward",
        "zero_grad",
        "apply",
        "requires_grad_",
        "state_dict",
        "load_state_dict",
    }
)


def pickled_object_kind(context: FileContext, call: cst.Call) -> str | None:
    """What the load returns when it is an object `weights_only=True` cannot load: "a whole
    model" when a module method is called on the result (`torch.load(f).eval()`) or it is
    assigned to a name that the file calls or calls a module method on (`model(x)`,
    `model.parameters()`); "a numpy array" when that name goes to `torch.from_numpy`."""
    parent = context.ancestors[-1] if context.ancestors else None
    if isinstance(parent, cst.Attribute) and parent.attr.value in _MODULE_METHODS:
        return "a whole model"
    if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1):
        return None
    target = parent.targets[0].target
    if not isinstance(target, (cst.Name, cst.Attribute)):
        return None
    modules, arrays = context.shared(_object_uses)
    name = context.code(target)
    if name in modules:
        return "a whole model"
    return "a numpy array" if name in arrays else None


def _object_uses(context: FileContext) -> tuple[frozenset[str], frozenset[str]]:
    """Names (and `self.x`) the file uses as modules (calls them, or calls a module-only
    method on them), and names it hands to `torch.from_numpy` (`data` in `data[3:]`)."""
    modules: set[str] = set()
    arrays: set[str] = set()
    for node in m.findall(context.module, m.Call()):
        assert isinstance(node, cst.Call)
        func = node.func
        if isinstance(func, (cst.Name, cst.Attribute)):
            modules.add(context.code(func))
        if isinstance(func, cst.Attribute) and func.attr.value in _MODULE_METHODS:
            modules.add(context.code(func.value))
        if context.qualified_name(func) == "torch.from_numpy" and node.args:
            value = node.args[0].value
            while isinstance(value, cst.Subscript):
                value = value.value
            if isinstance(value, (cst.Name, cst.Attribute)):
                arrays.add(context.code(value))
    return frozenset(modules), frozenset(arrays)
