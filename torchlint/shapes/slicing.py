"""Cut a file down to the statements that define things, so it can be imported safely.

The shape checker never runs a user's script. It keeps imports, `def` and `class`
statements, guarded imports (`try: import x / except ImportError:`), `if` blocks with a
harmless test, and assignments whose value only uses literals, names and an allow-list of
calls (`nn.Sequential(...)` included, built later on the meta device; loggers, paths from
`__file__`, `os.environ.get`, version checks and feature flags, `namedtuple`/`TypeVar`, and
instances of the `namedtuple` classes so made).
Everything else (training loops, `if __name__ == "__main__":`, `model = Net().cuda()`,
`main()`) is dropped; a dropped assignment binds its names to an inert stand-in
(`__torchlint_unavailable__`, see `loader.Unavailable`) that fails only when used.

What a kept definition evaluates when it is executed is neutralised too: annotations
become strings, a default value that is not harmless becomes a stand-in, decorators and
metaclasses that do not come from an imported library are left off, and a local class's
`__init_subclass__` is removed. A function or class passed to a call that would call it
(`map`, `sorted(key=...)`, `functools.reduce`) stops the statement, as do references to
`os.system`-like functions, `exec`/`open`/`__import__` and dunder attributes.

The kept statements keep their original line and column numbers, so tracebacks and
creation sites point at the user's real lines.
"""

from __future__ import annotations

import ast
import copy
import re
from dataclasses import dataclass, field

from torchlint.shapes.astutil import dotted, import_aliases, qualify
from torchlint.shapes.script_values import PURE_CALLS, plain

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
        "dir",
        "property",
        "staticmethod",
        "classmethod",
        "NotImplemented",
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
    "warnings.simplefilter",
    "importlib.util.find_spec",
    "importlib.metadata.version",
    "packaging.version.",
    "pathlib.Path",
    "pathlib.PurePath",
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
        # `from ..utils import logging` in libraries built like transformers
        "logging.get_logger",
        # Lightning's feature flags (`_TORCHVISION_AVAILABLE = module_available(...)`)
        "lightning_utilities.core.imports.module_available",
        "lightning_utilities.core.imports.package_available",
        "lightning_utilities.core.imports.compare_version",
        "lightning_utilities.core.imports.RequirementCache",
        "lightning_utilities.core.imports.ModuleAvailableCache",
    }
)
#: Calls that make a record class whose instances are built without running user code.
_RECORD_TYPES = frozenset(
    {"collections.namedtuple", "typing.NamedTuple", "typing_extensions.NamedTuple"}
)
#: Allowed by the prefixes above, but they evaluate code or call what they are given.
_UNSAFE_EXACT = frozenset(
    {
        "typing.get_type_hints",
        "typing_extensions.get_type_hints",
        "operator.call",
        "operator.methodcaller",
        "operator.attrgetter",
        "functools.reduce",
        "collections.defaultdict",
    }
)
#: Allowed calls that call a function they are given (`map(f, xs)`, `sorted(key=f)`): a
#: local function or class there would run the user's code.
_CALLERS = frozenset(
    {"map", "filter", "iter", "itertools.starmap", "itertools.filterfalse", "itertools.accumulate"}
)
_KEY_CALLERS = frozenset({"sorted", "min", "max", "itertools.groupby"})
#: Feature flags by name, wherever they are defined (`is_torch_available()`).
_FEATURE_FLAG = re.compile(r"^is_\w+_available$")
#: Names that run or reach code when merely referenced in a kept expression.
_DENIED_NAMES = frozenset(
    {
        "exec",
        "eval",
        "compile",
        "open",
        "__import__",
        "__builtins__",
        "globals",
        "locals",
        "vars",
        "breakpoint",
        "input",
        "exit",
        "quit",
        "help",
        "setattr",
        "delattr",
        "__loader__",
        "__spec__",
    }
)
#: Modules whose functions have side effects; only the listed harmless parts may be named.
_DANGEROUS_ROOTS = frozenset(
    {
        "os",
        "sys",
        "subprocess",
        "shutil",
        "socket",
        "ctypes",
        "cffi",
        "pty",
        "signal",
        "multiprocessing",
        "threading",
        "asyncio",
        "urllib",
        "http",
        "requests",
        "builtins",
        "importlib",
        "pickle",
        "marshal",
        "runpy",
        "code",
        "webbrowser",
        "tempfile",
        "resource",
        "gc",
    }
)
_SAFE_REFERENCES = (
    "os.path",
    "os.environ",
    "os.getenv",
    "os.sep",
    "os.pathsep",
    "os.linesep",
    "os.name",
    "os.curdir",
    "os.pardir",
    "os.extsep",
    "sys.version_info",
    "sys.version",
    "sys.platform",
    "sys.maxsize",
    "sys.byteorder",
    "sys.float_info",
    "sys.int_info",
    "importlib.util.find_spec",
    "importlib.metadata.version",
)
#: Dunder attributes that only read a fact; any other (`__subclasses__`, `__globals__`)
#: reaches into the interpreter.
_SAFE_DUNDERS = frozenset({"__version__", "__name__", "__file__", "__doc__", "__qualname__"})
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
        # pathlib: `Path(__file__).resolve().parent`
        "resolve",
        "absolute",
        "joinpath",
        "with_suffix",
        "with_name",
        "as_posix",
        "expanduser",
    }
)


#: The name a dropped value's stand-in is made by (bound by the loader).
STAND_IN = "__torchlint_unavailable__"


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
            if isinstance(node, ast.ClassDef) and (_is_data_class(node) or _is_plain_class(node))
        } | self._record_types(tree)
        #: Local functions that only define things when called (`to_2tuple = _ntuple(2)`).
        self.factories = {
            node.name
            for node in tree.body
            if isinstance(node, ast.FunctionDef) and self._defines_only(node)
        }
        #: Names bound to the project's own code: local functions and classes, and names
        #: imported from the project (relative imports). Calling one runs the user's code.
        self.local_code = {
            node.name
            for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        } | {
            alias.asname or alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level
            for alias in node.names
        }

    def _record_types(self, tree: ast.Module) -> set[str]:
        """Names bound to a `namedtuple(...)` or `NamedTuple(...)` class: building one runs no
        code of the user's (`Config = namedtuple(...)`, then `config=Config(True, False)`)."""
        names = set()
        for node in tree.body:
            if not (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Call)
            ):
                continue
            qual = qualify(node.value.func, self.aliases) or ""
            if qual in _RECORD_TYPES:
                names.add(node.targets[0].id)
        return names

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
            if receiver.endswith(".__version__"):
                return True  # `torch.__version__.split(".")`: a version check
        if isinstance(func, ast.Name) and func.id in self.factories:
            return True
        if isinstance(func, ast.Name) and (
            func.id in _SAFE_BUILTINS or func.id in self.data_classes
        ):
            return func.id not in self.aliases or func.id in self.data_classes
        name = dotted(func)
        if name is not None and _FEATURE_FLAG.match(name.rsplit(".", 1)[-1]):
            return True
        qual = qualify(func, self.aliases)
        if qual is None or qual in _UNSAFE_EXACT:
            return False
        return qual in _SAFE_EXACT or qual.startswith(_SAFE_PREFIXES)

    def _caller(self, func: ast.AST) -> str | None:
        if isinstance(func, ast.Name) and func.id not in self.aliases:
            return func.id
        return qualify(func, self.aliases)

    def arguments_of_call_ok(self, node: ast.Call) -> bool:
        """A function given to a call that calls it (`map(f, xs)`) must not be user code."""
        caller = self._caller(node.func)
        called: list[ast.expr] = []
        if caller in _CALLERS and node.args:
            called.append(node.args[0])
        if caller in _KEY_CALLERS:
            called.extend(k.value for k in node.keywords if k.arg == "key")
            if caller == "itertools.groupby" and len(node.args) > 1:
                called.append(node.args[1])
        if caller in ("getattr", "hasattr") and not (
            len(node.args) > 1
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and not _is_dunder(node.args[1].value)
        ):
            return False
        rest = [a for a in node.args if a not in called]
        rest += [k.value for k in node.keywords if k.value not in called]
        return all(self.callable_ok(c) for c in called) and all(self.expr_ok(a) for a in rest)

    def callable_ok(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Constant) and node.value is None:
            return True
        if isinstance(node, ast.Lambda):
            return self.expr_ok(node)
        name = dotted(node)
        return name is not None and self.reference_ok(node, name, passed=True)

    def is_nn_call(self, node: ast.AST) -> bool:
        if not isinstance(node, ast.Call):
            return False
        qual = qualify(node.func, self.aliases) or ""
        last = qual.rsplit(".", 1)[-1]
        return qual.startswith("torch.nn.") and last[:1].isupper()

    def reference_ok(self, node: ast.AST, name: str, passed: bool) -> bool:
        """Whether naming `name` (`os.path.sep`, `CONFIG`) in a kept expression is harmless.

        `passed`: the name is given to a call that calls it (`map(NAME, ...)`).
        """
        head, *attributes = name.split(".")
        if any(_is_dunder(a) and a not in _SAFE_DUNDERS for a in attributes):
            return False
        if head in self.aliases:
            qual = qualify(node, self.aliases) or name
            if qual.split(".")[0] in _DANGEROUS_ROOTS:
                return any(qual == r or qual.startswith(r + ".") for r in _SAFE_REFERENCES)
            return not (passed and head in self.local_code)
        if head in _DENIED_NAMES:
            return False
        return not (passed and head in self.local_code)

    def expr_ok(self, node: ast.AST | None) -> bool:
        if node is None:
            return True
        if isinstance(node, (ast.Name, ast.Attribute)):
            name = dotted(node)
            if name is not None:
                return self.reference_ok(node, name, passed=False)
            assert isinstance(node, ast.Attribute)
            if _is_dunder(node.attr) and node.attr not in _SAFE_DUNDERS:
                return False
            return self.expr_ok(node.value)
        if isinstance(node, ast.Lambda):
            # A lambda given to `map` or `sorted` runs now: its body must be harmless too.
            return self.arguments_ok(node.args) and self.expr_ok(node.body)
        if isinstance(node, ast.Call):
            if not self.call_ok(node.func):
                return False
            if isinstance(node.func, ast.Attribute) and not self._receiver_ok(node.func.value):
                return False
            return self.arguments_of_call_ok(node)
        if isinstance(node, (ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)):
            return False
        return all(self.expr_ok(child) for child in ast.iter_child_nodes(node))

    def _receiver_ok(self, receiver: ast.expr) -> bool:
        name = dotted(receiver)
        if name is not None and name.split(".")[0] in self.aliases:
            return True  # `importlib.util.find_spec`: the whole name was allowed by call_ok
        return self.expr_ok(receiver)

    def arguments_ok(self, arguments: ast.arguments) -> bool:
        defaults = [*arguments.defaults, *arguments.kw_defaults]
        return all(self.expr_ok(d) for d in defaults if d is not None)

    def from_library(self, node: ast.AST) -> bool:
        """Whether a decorator or metaclass is imported code (not the project's own)."""
        target = node.func if isinstance(node, ast.Call) else node
        name = dotted(target)
        if name is None:
            return False
        head = name.split(".")[0]
        if head in self.aliases:
            if not self.reference_ok(target, name, passed=False):
                return False
        elif not (
            (head in _SAFE_DECORATORS and head not in self.local_code)
            or (len(name.split(".")) == 2 and name.split(".")[1] in _PROPERTY_PARTS)
        ):
            return False
        if isinstance(node, ast.Call):
            return all(self.expr_ok(a) for a in node.args) and all(
                self.expr_ok(k.value) for k in node.keywords
            )
        return True


_SAFE_DECORATORS = frozenset({"property", "staticmethod", "classmethod"})
#: `@value.setter` on a property defined just above.
_PROPERTY_PARTS = frozenset({"setter", "getter", "deleter"})


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


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


def _is_plain_class(node: ast.ClassDef) -> bool:
    """A class of plain values (`class Config: n_embd = 64`, a notebook's logger shim whose
    `__init__` only sets attributes): making one runs nothing but those assignments. No
    bases, decorators or keywords; no special method but `__init__`, which may only set
    attributes of `self` to expressions of its parameters and literals."""
    if node.bases or node.keywords or node.decorator_list:
        return False
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if item.name == "__init__":
                if not _sets_attributes_only(item):
                    return False
            elif item.name.startswith("__") or item.decorator_list:
                return False
        elif isinstance(item, (ast.Assign, ast.AnnAssign)):
            value = item.value
            if value is not None and not _plain_expression(value):
                return False
        elif not isinstance(item, ast.Pass) and not (
            isinstance(item, ast.Expr) and isinstance(item.value, ast.Constant)
        ):
            return False
    return True


def _sets_attributes_only(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    if function.decorator_list or any(
        d is not None and not _plain_expression(d)
        for d in [*function.args.defaults, *function.args.kw_defaults]
    ):
        return False
    for statement in function.body:
        if isinstance(statement, ast.Pass) or (
            isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
        ):
            continue
        if not isinstance(statement, (ast.Assign, ast.AnnAssign)) or statement.value is None:
            return False
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        if not all(
            isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
            for t in targets
        ):
            return False
        if not _plain_expression(statement.value):
            return False
    return True


#: Calls a plain value may make: pure builtins and containers (`self._seen = set()`).
_PLAIN_CALLS = PURE_CALLS | {"set", "dict", "list", "tuple"}


def _plain_expression(node: ast.expr) -> bool:
    """A plain value (`script_values.plain`) that reads no other object's attribute or item:
    reading one may run its code."""
    return plain(node, _PLAIN_CALLS) and not any(
        isinstance(inner, (ast.Attribute, ast.Subscript)) for inner in ast.walk(node)
    )


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
        return _defused_def(node, checker), "def"
    if isinstance(node, ast.ClassDef):
        if not all(checker.expr_ok(b) for b in node.bases):
            return None
        clone = copy.copy(node)
        clone.decorator_list = [d for d in node.decorator_list if checker.from_library(d)]
        clone.keywords = [k for k in node.keywords if _keyword_ok(k, checker)]
        body = [
            s
            for s in node.body
            if not (isinstance(s, ast.FunctionDef) and s.name == "__init_subclass__")
        ]
        clone.body = _block(body, checker, node)
        return clone, "class"
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = node.value
        if all(checker.expr_ok(t) for t in targets) and checker.expr_ok(value):
            kept = node
            if isinstance(node, ast.AnnAssign):
                kept = copy.copy(node)
                kept.annotation = _as_string(node.annotation)
            if value is not None and checker.is_nn_call(value):
                return kept, "nn"
            return kept, "assign"
        return _stand_ins(node, targets)
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
            if not checker.expr_ok(handler.type):
                continue
            h = copy.copy(handler)
            h.body = _block(handler.body, checker, handler)
            handlers.append(h)
        if not handlers and not getattr(node, "finalbody", None):
            return None
        clone.handlers = handlers  # type: ignore[attr-defined]
        clone.orelse = _block(node.orelse, checker, node) if node.orelse else []  # type: ignore[attr-defined]
        clone.finalbody = _block(node.finalbody, checker, node) if node.finalbody else []  # type: ignore[attr-defined]
        return clone, "try"
    return None


def _defused_def(
    node: ast.FunctionDef | ast.AsyncFunctionDef, checker: _Checker
) -> ast.FunctionDef | ast.AsyncFunctionDef:
    """The definition with nothing evaluated at `def` time that could run user code."""
    clone = copy.copy(node)
    clone.decorator_list = [d for d in node.decorator_list if checker.from_library(d)]
    arguments = copy.copy(node.args)
    parameters = [*arguments.posonlyargs, *arguments.args]
    first_default = len(parameters) - len(arguments.defaults)
    arguments.defaults = [
        _default(d, parameters[first_default + i].arg, checker)
        for i, d in enumerate(arguments.defaults)
    ]
    arguments.kw_defaults = [
        None if d is None else _default(d, arguments.kwonlyargs[i].arg, checker)
        for i, d in enumerate(arguments.kw_defaults)
    ]
    for parameter in (
        *arguments.posonlyargs,
        *arguments.args,
        *arguments.kwonlyargs,
        arguments.vararg,
        arguments.kwarg,
    ):
        if parameter is not None and parameter.annotation is not None:
            parameter.annotation = _as_string(parameter.annotation)
    if clone.returns is not None:
        clone.returns = _as_string(clone.returns)
    clone.args = arguments
    if node.name == "__init__":
        clone.body = [_guarded_example(statement) for statement in node.body]
    return clone


#: The attribute Lightning reads an example batch from, for its summaries and graph logs.
_EXAMPLE_INPUT = "example_input_array"


def _guarded_example(statement: ast.stmt) -> ast.stmt:
    """`self.example_input_array = next(iter(train_loader))[0]` made from the script's data,
    which the slice does not run: left unset instead of failing the model's construction
    (nothing in its forward reads it)."""
    if not (
        isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and isinstance(target := statement.targets[0], ast.Attribute)
        and target.attr == _EXAMPLE_INPUT
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
    ):
        return statement
    guarded = ast.Try(
        body=[statement],
        handlers=[
            ast.ExceptHandler(
                type=ast.Name(id="NameError", ctx=ast.Load()), body=[ast.Pass()], name=None
            )
        ],
        orelse=[],
        finalbody=[],
    )
    return ast.fix_missing_locations(ast.copy_location(guarded, statement))


def _default(value: ast.expr, parameter: str, checker: _Checker) -> ast.expr:
    if checker.expr_ok(value):
        return value
    return _stand_in_call(f"the default of {parameter}", value)


def _keyword_ok(keyword: ast.keyword, checker: _Checker) -> bool:
    if keyword.arg == "metaclass":
        return checker.from_library(keyword.value)
    return keyword.arg is not None and checker.expr_ok(keyword.value)


def _stand_in_call(what: str, where: ast.AST) -> ast.expr:
    call = ast.Call(
        func=ast.Name(id=STAND_IN, ctx=ast.Load()),
        args=[ast.Constant(what), ast.Constant(getattr(where, "lineno", 0))],
        keywords=[],
    )
    return ast.fix_missing_locations(ast.copy_location(call, where))


def _stand_ins(
    node: ast.Assign | ast.AnnAssign | ast.AugAssign, targets: list[ast.expr]
) -> tuple[ast.stmt, str] | None:
    """`NAME = <not run>` becomes `NAME = <stand-in>`, so the name exists but fails if used."""
    if isinstance(node, ast.AugAssign):
        return None
    names = [
        n.id
        for target in targets
        for n in ast.walk(target)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    ]
    if not names or not all(isinstance(t, (ast.Name, ast.Tuple, ast.List)) for t in targets):
        return None
    # A name bound before (`X = 1`, then `X = compute(X)`) keeps its earlier value.
    statements: list[ast.stmt] = [
        ast.Try(
            body=[ast.Expr(ast.Name(id=name, ctx=ast.Load()))],
            handlers=[
                ast.ExceptHandler(
                    type=ast.Name(id="NameError", ctx=ast.Load()),
                    body=[
                        ast.Assign(
                            targets=[ast.Name(id=name, ctx=ast.Store())],
                            value=_stand_in_call(name, node),
                        )
                    ],
                )
            ],
            orelse=[],
            finalbody=[],
        )
        for name in names
    ]
    block = ast.If(test=ast.Constant(True), body=statements, orelse=[])
    return ast.fix_missing_locations(ast.copy_location(block, node)), "unavailable"


def _as_string(annotation: ast.expr) -> ast.expr:
    """An annotation as a string: kept for dataclasses and NamedTuples, never evaluated."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return annotation
    return ast.copy_location(ast.Constant(ast.unparse(annotation)), annotation)


def _block(body: list[ast.stmt], checker: _Checker, owner: ast.AST) -> list[ast.stmt]:
    kept = [k[0] for k in (_keep(s, checker, top=False) for s in body) if k is not None]
    if not kept:
        anchor = body[0] if body else owner
        stub = ast.Pass()
        ast.copy_location(stub, anchor)
        kept = [stub]
    return kept
