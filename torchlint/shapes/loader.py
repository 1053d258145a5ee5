"""Import the user's project through slices (see `slicing`), never running its scripts.

A meta-path finder claims every module that lives under the project's roots, so plain,
relative and package imports between the user's files all go through the slicing loader.
Each kept statement is compiled on its own with its original positions and executed in
order; a statement that raises is skipped (and noted) and the rest still run. A third-party
module that is not installed and is imported without a guard is replaced by a stub.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import linecache
import os
import sys
import types
from collections.abc import Callable
from typing import Any

from torchlint.shapes.sandbox import inside_folder
from torchlint.shapes.slicing import STAND_IN, plan
from torchlint.shapes.value_asserts import without_value_asserts

_MAX_STUB_RETRIES = 8


class _StubMeta(type):
    """Classes standing in for names from a module that is not installed."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return make_stub(name)

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if _decorated(args, kwargs):
            return args[0]  # used as a decorator: leave the function alone
        return super().__call__(*args, **kwargs)


class Stub(metaclass=_StubMeta):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return make_stub(name)()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _decorated(args, kwargs):
            return args[0]
        return Stub()


def _decorated(args: tuple, kwargs: dict) -> bool:
    return (
        len(args) == 1
        and not kwargs
        and (inspect.isfunction(args[0]) or inspect.isclass(args[0]) or inspect.ismethod(args[0]))
    )


def make_stub(name: str) -> type:
    return _StubMeta(name, (Stub,), {"__torchlint_stub__": True})


class StubModule(types.ModuleType):
    __torchlint_stub__ = True

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.__path__: list[str] = []
        # `importlib.util.find_spec(name)` raises for a module without one.
        self.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = make_stub(name)
        setattr(self, name, value)
        return value


class Unavailable:
    """Stands in for a value whose code the slicer did not run (`X = load_config()`).

    The model that uses it fails with a message naming it; one that does not, is checked.
    """

    __torchlint_stub__ = True

    def __init__(self, name: str, line: int) -> None:
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_what", f"{name} (line {line})")

    def _fail(self, *args: Any, **kwargs: Any) -> Any:
        raise NameError(
            f"{object.__getattribute__(self, '_what')} is not available: the shape check"
            " does not run the code that computes it",
            name=object.__getattribute__(self, "_name"),
        )

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._fail()

    __call__ = __getitem__ = __iter__ = __len__ = __bool__ = __int__ = __index__ = _fail
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _fail
    __truediv__ = __floordiv__ = __mod__ = __pow__ = __lt__ = __gt__ = __le__ = __ge__ = _fail
    __setattr__ = __setitem__ = __contains__ = __float__ = __enter__ = _fail

    def __repr__(self) -> str:
        return f"<unavailable {object.__getattribute__(self, '_what')}>"


def is_stub(value: object) -> bool:
    return bool(getattr(type(value), "__torchlint_stub__", False)) or bool(
        getattr(value, "__torchlint_stub__", False)
    )


class _SliceLoader(importlib.abc.Loader):
    def __init__(self, project: Project, path: str) -> None:
        self.project = project
        self.path = path

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        self.project.execute(module, self.path)


class Project(importlib.abc.MetaPathFinder):
    """The user's files, importable through slices."""

    def __init__(
        self,
        roots: list[str],
        texts: dict[str, str],
        meta_context: Callable[[], contextlib.AbstractContextManager[Any]],
    ) -> None:
        environment = environment_paths()
        self.roots = [
            r
            for r in dict.fromkeys(os.path.abspath(r) for r in roots)
            if r and r not in environment
        ]
        self.environment = environment
        self.texts = texts
        self.meta_context = meta_context
        #: Per file: why statements were skipped ("line 12: NameError: ...").
        self.notes: dict[str, list[str]] = {}
        self.stubbed: list[str] = []
        self.files: set[str] = set()

    # -- finder ------------------------------------------------------------------------------
    def find_spec(
        self, fullname: str, path: Any = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        parts = fullname.split(".")
        for root in self.roots:
            base = os.path.join(root, *parts)
            file = base + ".py"
            if self._exists(file):
                return importlib.util.spec_from_file_location(
                    fullname, file, loader=_SliceLoader(self, file)
                )
            init = os.path.join(base, "__init__.py")
            if self._exists(init):
                return importlib.util.spec_from_file_location(
                    fullname,
                    init,
                    loader=_SliceLoader(self, init),
                    submodule_search_locations=[base],
                )
        if len(parts) > 1 and path:
            for directory in path:
                base = os.path.join(directory, parts[-1])
                if os.path.isdir(base) and self._in_project(directory):
                    spec = importlib.machinery.ModuleSpec(fullname, None, is_package=True)
                    spec.submodule_search_locations = [base]
                    return spec
        return None

    def _in_project(self, directory: str) -> bool:
        """Under a root, and not in an installed package (a virtualenv inside the project)."""
        directory = os.path.abspath(directory)
        return not any(inside_folder(directory, p) for p in self.environment) and any(
            inside_folder(directory, r) for r in self.roots
        )

    def _exists(self, path: str) -> bool:
        return path in self.texts or os.path.isfile(path)

    def source(self, path: str) -> str:
        if path in self.texts:
            return self.texts[path]
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()

    # -- loading -----------------------------------------------------------------------------
    def install(self) -> None:
        sys.meta_path.insert(0, self)
        # The worker must not find user modules through sys.path (that would run them).
        sys.path[:] = [
            p for p in sys.path if p and os.path.abspath(p) not in self.roots and p != os.getcwd()
        ]

    def load(self, path: str, module_name: str) -> types.ModuleType:
        """Import a user file by its module name, through the slicing loader.

        A file of an installed package (the project is torch itself, say) is imported the
        ordinary way: installed code is imported anyway by the files that use it.
        """
        if _installed_module(module_name, path):
            return importlib.import_module(module_name)
        existing = sys.modules.get(module_name.split(".")[0])
        if path.endswith(".ipynb"):
            self._cache_lines(path)  # no import finds a notebook: loaded by name, below
        elif existing is None or isinstance(getattr(existing, "__loader__", None), _SliceLoader):
            module = importlib.import_module(module_name)
            if os.path.abspath(getattr(module, "__file__", "") or "") == path:
                return module
        # The name is taken (a file called `queue.py`, or two projects' `model.py`): load
        # the file on its own, under a name of its own.
        alias = "_torchlint_user_" + module_name.replace(".", "_") + f"_{abs(hash(path))}"
        if alias in sys.modules:
            return sys.modules[alias]
        spec = importlib.util.spec_from_file_location(alias, path, loader=_SliceLoader(self, path))
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[alias] = module
        self.execute(module, path)
        return module

    def _cache_lines(self, path: str) -> None:
        """Give the line cache a notebook's joined code cells, which its code objects' lines
        count, in place of the file's JSON (`inspect.getsource` reads forward there)."""
        text = self.source(path)
        linecache.cache[path] = (len(text), None, text.splitlines(keepends=True), path)

    def execute(self, module: types.ModuleType, path: str) -> None:
        self.files.add(path)
        notes = self.notes.setdefault(path, [])
        source = self.source(path)
        tree = ast.parse(source, filename=path)
        chosen = plan(tree)
        namespace = module.__dict__
        namespace.setdefault(STAND_IN, Unavailable)
        asserts = "assert" in source  # most files have none: no walk for them

        def compiled(statement: ast.stmt) -> types.CodeType:
            if asserts:
                statement = without_value_asserts(statement)
            module = ast.Module(body=[statement], type_ignores=[])
            return compile(module, path, "exec", flags=chosen.future_flags, dont_inherit=True)

        for statement, kind in chosen.statements:
            self._run(compiled(statement), statement, kind, namespace, notes, compiled)

    def _run(
        self,
        code: types.CodeType,
        statement: ast.stmt,
        kind: str,
        namespace: dict[str, Any],
        notes: list[str],
        compiled: Callable[[ast.stmt], types.CodeType],
    ) -> None:
        for _ in range(_MAX_STUB_RETRIES):
            try:
                if kind == "nn":
                    with self.meta_context():
                        exec(code, namespace)
                else:
                    exec(code, namespace)
                return
            except ModuleNotFoundError as exc:
                if kind != "import" or not exc.name or self._is_project_module(exc.name):
                    notes.append(_note(statement, exc))
                    return
                self._stub_module(exc.name)
            except ImportError as exc:
                if kind != "import" or not isinstance(statement, ast.ImportFrom):
                    notes.append(_note(statement, exc))
                    return
                self._import_names_one_by_one(statement, namespace, notes)
                return
            except BaseException as exc:
                if isinstance(exc, KeyboardInterrupt | TimeoutError | MemoryError):
                    raise
                if _run_undecorated(statement, namespace, notes, compiled):
                    return
                notes.append(_note(statement, exc))
                _stand_in_for_targets(statement, namespace)
                return
        notes.append(f"line {statement.lineno}: too many missing modules")

    def _is_project_module(self, name: str) -> bool:
        parts = name.split(".")
        return any(
            self._exists(os.path.join(root, *parts) + ".py")
            or os.path.isdir(os.path.join(root, *parts))
            for root in self.roots
        )

    def _stub_module(self, name: str) -> None:
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            sub = ".".join(parts[:i])
            if sub not in sys.modules:
                sys.modules[sub] = StubModule(sub)
                if i > 1:
                    setattr(sys.modules[".".join(parts[: i - 1])], parts[i - 1], sys.modules[sub])
        self.stubbed.append(name)

    def _import_names_one_by_one(
        self, statement: ast.ImportFrom, namespace: dict[str, Any], notes: list[str]
    ) -> None:
        package = namespace.get("__package__") if statement.level else None
        name = "." * statement.level + (statement.module or "")
        try:
            source = importlib.import_module(name, package)
        except Exception as exc:
            notes.append(_note(statement, exc))
            return
        for alias in statement.names:
            bound = alias.asname or alias.name
            try:
                value = getattr(source, alias.name)
            except Exception:
                try:
                    prefix = name if name.endswith(".") else name + "."
                    value = importlib.import_module(prefix + alias.name, package)
                except Exception:
                    value = make_stub(alias.name)
                    self.stubbed.append(f"{name}.{alias.name}")
            namespace[bound] = value


def _run_undecorated(
    statement: ast.stmt,
    namespace: dict[str, Any],
    notes: list[str],
    compiled: Callable[[ast.stmt], types.CodeType],
) -> bool:
    """Define a class or function whose decorators could not all be had (a registry's
    `@HEADS_REGISTRY.register()`, the registry made by code the slicer did not run)
    without those decorators, which register it rather than change it. Whether it
    was defined so."""
    if not isinstance(statement, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    kept, dropped = [], []
    for decorator in statement.decorator_list:
        try:
            eval(compile(ast.Expression(decorator), "<decorator>", "eval"), namespace)
        except Exception as exc:
            dropped.append((decorator, exc))
        else:
            kept.append(decorator)
    if not dropped:
        return False
    clone = copy.copy(statement)
    clone.decorator_list = kept
    try:
        exec(compiled(clone), namespace)
    except Exception:
        return False
    for decorator, exc in dropped:
        notes.append(f"{_note(decorator, exc)} (the decorator was left out)")
    return True


def _stand_in_for_targets(statement: ast.stmt, namespace: dict[str, Any]) -> None:
    """A module-level value that failed to compute fails again only where it is used."""
    if isinstance(statement, ast.Assign | ast.AnnAssign):
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        for target in targets:
            for node in ast.walk(target):
                if isinstance(node, ast.Name) and node.id not in namespace:
                    namespace[node.id] = Unavailable(node.id, statement.lineno)


def environment_paths() -> set[str]:
    """Where installed packages and the standard library live (never project roots)."""
    import site
    import sysconfig

    paths = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        value = sysconfig.get_paths().get(key)
        if value:
            paths.add(os.path.abspath(value))
    with contextlib.suppress(AttributeError):  # virtualenv's old site module
        paths.update(os.path.abspath(p) for p in site.getsitepackages())
    return paths


def _installed_module(module_name: str, path: str) -> bool:
    roots = environment_paths()
    if not any(path.startswith(root + os.sep) for root in roots):
        return False
    try:
        spec = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        return False
    return spec is not None and os.path.abspath(spec.origin or "") == path


def _note(statement: ast.stmt, exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"line {statement.lineno}: {type(exc).__name__}: {text}"[:200]
