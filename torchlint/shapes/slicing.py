"""Cut a file down to the statements that define things, so it can be imported safely.

The shape checker never runs a user's script. It keeps imports, `def` and `class`
statements, guarded imports (`try: import x / except ImportError:`), `if` blocks with a
harmless test, and assignments whose value only uses literals, names and an allow-list of
calls (`nn.Sequential(...)` included, built later on the meta device). Everything else
(training loops, `if __name__ == "__main__":`, `model = Net().cuda()`, `main()`) is dropped.
The kept statements keep their original line and column numbers, so tracebacks and
creation sites point at the user's real lines.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field

from torchlint.shapes.astutil import dotted, import_aliases, qualify

_SAFE_BUILTINS = frozenset(
    {
        "int",
        "float",
        "str",
        "bool",
        "bytes",
        "tuple",
        "list",
        "dict",
        "set",
        "frozenset",
        "range",
        "len",
        "min",
        "max",
        "sum",
        "abs",
        "round",
        "isinstance",
        "issubclass",
        "getattr",
        "hasattr",
        "type",
        "object",
        "sorted",
        "enumerate",
        "zip",
        "reversed",
        "repr",
        "divmod",
        "pow",
        "any",
        "all",
        "slice",
        "property",
        "staticmethod",
        "classmethod",
        "NotImplemented",
        "dir",
        "callable",
        "iter",
        "next",
        "map",
        "filter",
        "format",
        "chr",
        "ord",
        "hex",
        "id",
        "hash",
        "globals",
    }
)
_SAFE_PREFIXES = (
    "math.",
    "os.path.",
    "typing.",
    "typing_extensions.",
    "enum.",
    "dataclasses.",
    "functools.",
    "collections.",
    "itertools.",
    "operator.",
    "re.compile",
    "logging.getLogger",
    "warnings.filterwarnings",
    "importlib.util.find_spec",
    "packaging.version.",
    "torch.device",
    "torch.dtype",
    "torch.Size",
    "torch.finfo",
    "torch.iinfo",
    "torch.cuda.is_available",
    "torch.cuda.device_count",
    "torch.backends.",
    "torch.tensor",
    "torch.zeros",
    "torch.ones",
    "torch.arange",
    "torch.linspace",
    "torch.eye",
    "torch.full",
    "torch.empty",
    "torch.nn.",
    "torch.jit.",
    "torch.fx.wrap",
    "torch.nn.functional.",
)
_SAFE_EXACT = frozenset(
    {
        "os.environ.get",
        "os.getenv",
        "sys.version_info",
        "platform.system",
        "platform.python_version",
    }
)
_DATA_BASES = frozenset({"NamedTuple", "Enum", "IntEnum", "TypedDict", "BaseModel"})
#: Methods that only read or copy the value they are called on (`MAP.items()`).
_SAFE_METHODS = frozenset(
    {
        "items",
        "keys",
        "values",
        "get",
        "copy",
        "lower",
        "upper",
        "strip",
        "split",
        "join",
        "format",
        "replace",
        "startswith",
        "endswith",
        "index",
        "count",
    }
)


@dataclass
class Plan:
    """The statements to execute, in order, each tagged with what it is."""

    statements: list[tuple[ast.stmt, str]] = field(default_factory=list)
    dropped: list[int] = field(default_factory=list)  #: lines of dropped statements
    future_flags: int = 0


class _Checker:
    def __init__(self, tree: ast.Module) -> None:
        self.aliases = import_aliases(tree)
        self.data_classes = {
            node.name
            for node in tree.body
            if isinstance(node, ast.ClassDef) and _is_data_class(node)
        }
        #: Local functions that only define things when called (`to_2tuple = _ntuple(2)`).
        self.factories = {
            node.name
            for node in tree.body
            if isinstance(node, ast.FunctionDef) and self._defines_only(node)
        }

    def _defines_only(self, node: ast.FunctionDef) -> bool:
        for statement in node.body:
            if isinstance(statement, (ast.FunctionDef, ast.ClassDef, ast.Pass)):
                continue
            if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
                continue
            if isinstance(statement, ast.Return) and isinstance(
                statement.value, (ast.Name, ast.Lambda, type(None))
            ):
                continue
            return False
        return True

    def call_ok(self, func: ast.AST) -> bool:
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Constant):
            return True  # "a,b".split(",")
        if isinstance(func, ast.Attribute) and func.attr in _SAFE_METHODS:
            receiver = dotted(func.value)
            if receiver is None or receiver.split(".")[0] not in self.aliases:
                return True  # a method of a local value; the value is checked by expr_ok
        if isinstance(func, ast.Name) and func.id in self.factories:
            return True
        if isinstance(func, ast.Name) and (
            func.id in _SAFE_BUILTINS or func.id in self.data_classes
        ):
            return func.id not in self.aliases or func.id in self.data_classes
        qual = qualify(func, self.aliases)
        if qual is None:
            return False
        return qual in _SAFE_EXACT or qual.startswith(_SAFE_PREFIXES)

    def is_nn_call(self, node: ast.AST) -> bool:
        if not isinstance(node, ast.Call):
            return False
        qual = qualify(node.func, self.aliases) or ""
        last = qual.rsplit(".", 1)[-1]
        return qual.startswith("torch.nn.") and last[:1].isupper()

    def expr_ok(self, node: ast.AST | None) -> bool:
        if node is None:
            return True
        if isinstance(node, ast.Lambda):
            return True  # the body runs only when called
        if isinstance(node, ast.Call):
            if not self.call_ok(node.func):
                return False
            if isinstance(node.func, ast.Attribute) and not self.expr_ok(node.func.value):
                return False
            return all(self.expr_ok(a) for a in node.args) and all(
                self.expr_ok(k.value) for k in node.keywords
            )
        if isinstance(node, (ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)):
            return False
        return all(self.expr_ok(child) for child in ast.iter_child_nodes(node))

    def decorators_ok(self, node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        for deco in node.decorator_list:
            target = deco.func if isinstance(deco, ast.Call) else deco
            if qualify(target, self.aliases) is None:
                return False
            if isinstance(deco, ast.Call) and not (
                all(self.expr_ok(a) for a in deco.args)
                and all(self.expr_ok(k.value) for k in deco.keywords)
            ):
                return False
        return True


def _is_data_class(node: ast.ClassDef) -> bool:
    for deco in node.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name == "dataclass":
            return True
    for base in node.bases:
        name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
        if name in _DATA_BASES:
            return True
    return False


def _is_main_guard(test: ast.AST) -> bool:
    return any(isinstance(n, ast.Name) and n.id == "__name__" for n in ast.walk(test))


def plan(tree: ast.Module) -> Plan:
    """Choose the top-level statements of a module that are safe to execute."""
    checker = _Checker(tree)
    result = Plan()
    for node in tree.body:
        if (
            isinstance(node, ast.ImportFrom)
            and node.module == "__future__"
            and any(alias.name == "annotations" for alias in node.names)
        ):
            import __future__

            result.future_flags |= __future__.annotations.compiler_flag
        kept = _keep(node, checker, top=True)
        if kept is None:
            result.dropped.append(node.lineno)
        else:
            result.statements.append(kept)
    return result


def _keep(node: ast.stmt, checker: _Checker, top: bool) -> tuple[ast.stmt, str] | None:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return node, "import"
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        if not checker.decorators_ok(node):
            return None
        return node, "def"
    if isinstance(node, ast.ClassDef):
        if not checker.decorators_ok(node) or not all(checker.expr_ok(b) for b in node.bases):
            return None
        clone = copy.copy(node)
        clone.body = _block(node.body, checker, node)
        return clone, "class"
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        value = node.value
        if value is not None and checker.is_nn_call(value) and checker.expr_ok(value):
            return node, "nn"
        if checker.expr_ok(value):
            return node, "assign"
        return None
    if isinstance(node, ast.Expr):
        if isinstance(node.value, ast.Constant):
            return node, "doc"
        return None
    if isinstance(node, ast.Pass):
        return node, "pass"
    if isinstance(node, ast.If):
        if _is_main_guard(node.test) or not checker.expr_ok(node.test):
            return None
        clone = copy.copy(node)
        clone.body = _block(node.body, checker, node)
        clone.orelse = _block(node.orelse, checker, node) if node.orelse else []
        return clone, "if"
    if isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
        clone = copy.copy(node)
        clone.body = _block(node.body, checker, node)  # type: ignore[attr-defined]
        handlers = []
        for handler in node.handlers:  # type: ignore[attr-defined]
            h = copy.copy(handler)
            h.body = _block(handler.body, checker, handler)
            handlers.append(h)
        clone.handlers = handlers  # type: ignore[attr-defined]
        clone.orelse = _block(node.orelse, checker, node) if node.orelse else []  # type: ignore[attr-defined]
        clone.finalbody = _block(node.finalbody, checker, node) if node.finalbody else []  # type: ignore[attr-defined]
        return clone, "try"
    return None


def _block(body: list[ast.stmt], checker: _Checker, owner: ast.AST) -> list[ast.stmt]:
    kept = [k[0] for k in (_keep(s, checker, top=False) for s in body) if k is not None]
    if not kept:
        anchor = body[0] if body else owner
        stub = ast.Pass()
        ast.copy_location(stub, anchor)
        kept = [stub]
    return kept
