"""The project index: which file of the project an import names, and that file's summary.

A file run alone still sees what its project imports define: `from models import Net`,
`from .models import Net` and `import models` are resolved to files next to the importer or in
a folder above it up to the project root, and each imported file is read as a small summary
(`FileSummary`), computed once per content and cached on disk. Summaries depend on their own
file only, so results stay exact however a run is sharded.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import libcst as cst

from torchlint.cache import engine_version
from torchlint.context import FileContext
from torchlint.names import dotted_name, top_level_imports
from torchlint.semantic.resolve import resolve_module
from torchlint.semantic.summary import FileSummary, summarize_source

_MAX_SUMMARY_BYTES = 2_000_000


@dataclass(frozen=True)
class ProjectSymbol:
    """A name defined at the top level of another file of the project."""

    path: Path
    name: str


class ProjectIndex:
    """Summaries of project files, keyed by content hash; the on-disk cache is optional."""

    def __init__(self, cache_dir: Path | None = None) -> None:
        self.cache_dir = cache_dir
        self._by_path: dict[Path, FileSummary | None] = {}

    @property
    def consulted(self) -> bool:
        """Whether any project file has been read (or looked for and not found)."""
        return bool(self._by_path)

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
        digest = hashlib.sha256(engine_version().encode() + b"\0" + data).hexdigest()
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
