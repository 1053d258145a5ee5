"""The project index: which file of the project an import names, and that file's summary.

A file run alone still sees what its project imports define: `from models import Net`,
`from .models import Net` and `import models` are resolved to files next to the importer or in
a folder above it up to the project root, and each imported file is read as a small summary
(`FileSummary`), computed once per content and cached on disk. Summaries depend on their own
file only, so results stay exact however a run is sharded.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import libcst as cst

from torchlint import __version__
from torchlint.context import FileContext
from torchlint.names import dotted_name, top_level_imports
from torchlint.notebook import NOTEBOOK_SUFFIX, NotebookError, read_notebook
from torchlint.semantic.summary import FileSummary, summarize_source

_ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
# Imports that never name a project file worth reading.
_FOREIGN = frozenset({"torch", "torchvision", "torchaudio", "numpy", "__future__", "typing"})
# `import a.b as c` / `from .a.b import (x, y)`, one statement per match (a cheap pre-scan).
_IMPORT_LINE = re.compile(
    r"^[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import|import[ \t]+([\w.]+))", re.M
)
_MAX_SUMMARY_BYTES = 2_000_000
#: Bumped when FileSummary gains a field, so summaries cached without it are not read.
_SUMMARY_FORMAT = b"\0summary-2\0"


@dataclass(frozen=True)
class ProjectSymbol:
    """A name defined at the top level of another file of the project."""

    path: Path
    name: str


def project_root(path: Path) -> Path:
    """The nearest folder above `path` holding a project marker, else the file's folder."""
    return _root_of(path.parent)


@functools.lru_cache(maxsize=1024)
def _root_of(start: Path) -> Path:
    for folder in (start, *start.parents):
        if any((folder / marker).exists() for marker in _ROOT_MARKERS):
            return folder
    return start


def resolve_module(importer: Path, module: str, level: int) -> Path | None:
    """The project file `import module` (with `level` leading dots) names from `importer`."""
    parts = [p for p in module.split(".") if p]
    if level == 0 and (not parts or parts[0] in _FOREIGN):
        return None
    if level > 0:
        base = importer.parent
        for _ in range(level - 1):
            base = base.parent
        folders = [base]
    else:
        root = project_root(importer)
        folders = [importer.parent]
        if root != importer.parent and root in importer.parents:
            folders.extend(p for p in importer.parent.parents if p == root or root in p.parents)
    for folder in folders:
        target = folder.joinpath(*parts) if parts else folder
        for candidate in (target.with_suffix(".py"), target / "__init__.py"):
            if parts and candidate.is_file():
                return candidate
        if not parts and (target / "__init__.py").is_file():
            return target / "__init__.py"
    return None


def imported_files(path: Path, source: str) -> list[Path]:
    """The project files `source` imports (a text scan; for cache keys, not for resolution)."""
    found: list[Path] = []
    for match in _IMPORT_LINE.finditer(source):
        dots, from_module, plain = match.groups()
        module = plain if plain is not None else from_module
        resolved = resolve_module(path, module or "", len(dots or ""))
        if resolved is not None and resolved not in found and resolved != path:
            found.append(resolved)
        # `from pkg import models` may name the module pkg/models.py.
        if plain is None and resolved is not None and resolved.name == "__init__.py":
            line_end = source.find("\n", match.end())
            tail = source[match.end() : line_end if line_end >= 0 else None]
            for name in re.findall(r"\w+", tail.split("#", 1)[0]):
                inner = resolved.parent / f"{name}.py"
                if inner.is_file() and inner not in found:
                    found.append(inner)
    return found


class ProjectIndex:
    """Summaries of project files, keyed by content hash; the on-disk cache is optional."""

    def __init__(self, cache_dir: Path | None = None) -> None:
        self.cache_dir = cache_dir
        self._by_path: dict[Path, FileSummary | None] = {}

    def summary(self, path: Path) -> FileSummary | None:
        """The summary of a project file, or None when it cannot be read or parsed."""
        if path not in self._by_path:
            self._by_path[path] = self._summary(path)
        return self._by_path[path]

    def _summary(self, path: Path) -> FileSummary | None:
        try:
            if path.stat().st_size > _MAX_SUMMARY_BYTES:
                return None
            data = path.read_bytes()
        except OSError:
            return None
        digest = hashlib.sha256(__version__.encode() + _SUMMARY_FORMAT + data).hexdigest()
        if digest in _MEMO:
            return _MEMO[digest]
        found = self._read_cached(digest)
        if found is None:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                text = None
            found = summarize_source(text, str(path)) if text is not None else None
            if found is not None:
                self._write_cached(digest, found)
        _MEMO[digest] = found
        return found

    def _cache_file(self, digest: str) -> Path | None:
        if self.cache_dir is None:
            return None
        return self.cache_dir / "summaries" / f"{digest[:2]}" / f"{digest}.json"

    def _read_cached(self, digest: str) -> FileSummary | None:
        file = self._cache_file(digest)
        if file is None:
            return None
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            return FileSummary.from_dict(json.loads(file.read_text(encoding="utf-8")))
        return None

    def _write_cached(self, digest: str, summary: FileSummary) -> None:
        file = self._cache_file(digest)
        if file is None:
            return
        with contextlib.suppress(OSError):
            file.parent.mkdir(parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(dir=file.parent, prefix=".summary-")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(summary.to_dict(), handle)
            os.replace(temp, file)


# Summaries are a pure function of a file's bytes: one process-wide memo serves every index.
_MEMO: dict[str, FileSummary | None] = {}


class ProjectImports:
    """What the top-level imports of one file bind, resolved to project files."""

    def __init__(self, path: Path, module: cst.Module, index: ProjectIndex) -> None:
        self.path = path
        self.index = index
        #: local name -> (module, level, imported name or None for a module import)
        self._bound: dict[str, tuple[str, int, str | None]] = {}
        #: (module, level) of each `from module import *`
        self._star: list[tuple[str, int]] = []
        for node in top_level_imports(module):
            if isinstance(node, cst.Import):
                for alias in node.names:
                    full = dotted_name(alias.name) or ""
                    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                        self._bound[alias.asname.name.value] = (full, 0, None)
                    elif "." not in full:
                        self._bound[full] = (full, 0, None)
            elif isinstance(node.names, cst.ImportStar):
                star = dotted_name(node.module) if node.module is not None else ""
                self._star.append((star or "", len(node.relative)))
            else:
                level = len(node.relative)
                module_name = dotted_name(node.module) if node.module is not None else ""
                for alias in node.names:
                    imported = dotted_name(alias.name) or ""
                    local = imported
                    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                        local = alias.asname.name.value
                    self._bound[local] = (module_name or "", level, imported)

    def symbol(self, expr: cst.BaseExpression) -> ProjectSymbol | None:
        """The project definition `Net` / `models.Net` refers to, if another file defines it."""
        name = dotted_name(expr)
        if name is None or self.path.name == "<stdin>":
            return None
        head, _, rest = name.partition(".")
        bound = self._bound.get(head)
        if bound is None:
            return self._star_symbol(head) if not rest else None
        module, level, imported = bound
        if imported is None:  # `import models` then `models.Net`
            if not rest or "." in rest:
                return None
            target = resolve_module(self.path, module, level)
            return ProjectSymbol(target, rest) if target is not None else None
        if rest:  # `from pkg import models` then `models.Net`
            if "." in rest:
                return None
            joined = f"{module}.{imported}" if module else imported
            target = resolve_module(self.path, joined, level)
            return ProjectSymbol(target, rest) if target is not None else None
        target = resolve_module(self.path, module, level)
        return ProjectSymbol(target, imported) if target is not None else None

    def summary(self, symbol: ProjectSymbol) -> FileSummary | None:
        if symbol.path == self.path:
            return None
        return self.index.summary(symbol.path)

    def _star_symbol(self, name: str) -> ProjectSymbol | None:
        """`Net` brought in by `from models import *`, when that file defines it (the last
        star import that does wins, as at runtime)."""
        found = None
        for module, level in self._star:
            target = resolve_module(self.path, module, level)
            summary = self.index.summary(target) if target is not None else None
            if target is not None and summary is not None and summary.defines(name):
                found = ProjectSymbol(target, name)
        return found


def project_imports(context: FileContext) -> ProjectImports | None:
    """The file's project imports, or None when the run does not look into other files."""
    return context.shared(_project_imports)


def _project_imports(context: FileContext) -> ProjectImports | None:
    if context.project_index is None:
        return None
    return ProjectImports(Path(context.path), context.module, context.project_index)


def dependency_digest(path: Path, data: bytes) -> str:
    """A digest of the project files `data` imports: part of its results-cache key."""
    digest = hashlib.sha256()
    text = data.decode("utf-8", errors="replace")
    if path.suffix == NOTEBOOK_SUFFIX:
        try:
            text = read_notebook(text).source  # the cells' code, not the JSON around it
        except NotebookError:
            return digest.hexdigest()
    for imported in imported_files(path, text):
        with contextlib.suppress(OSError):
            stat = imported.stat()
            digest.update(_file_digest(imported, stat.st_mtime_ns, stat.st_size))
    return digest.hexdigest()


@functools.lru_cache(maxsize=4096)
def _file_digest(path: Path, mtime_ns: int, size: int) -> bytes:
    """One imported file's digest; many files of a run import the same few."""
    try:
        return hashlib.sha256(str(path).encode() + b"\0" + path.read_bytes()).digest()
    except OSError:
        return b""
