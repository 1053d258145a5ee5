"""Which project file an import names: path logic and a text scan, no parsing.

`dependency_digest` puts what a file imports into its results-cache key. It can also note
the stamps (modification time and size) of everything the answer was read from: the
imported files, and the folders whose listing decided where an import resolves (a file
created or removed changes its folder's stamp). While those stamps hold, so does the digest,
which lets a warm run trust its cache without reading or resolving anything.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from pathlib import Path

from torchlint.notebook import NOTEBOOK_SUFFIX, NotebookError, read_notebook

#: Path -> [st_mtime_ns, st_size] of a file or folder.
Stamps = dict[str, list[int]]

_ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
# Imports that never name a project file worth reading.
_FOREIGN = frozenset({"torch", "torchvision", "torchaudio", "numpy", "__future__", "typing"})
# `import a.b as c` / `from .a.b import (x, y)`, one statement per match (a cheap pre-scan).
_IMPORT_LINE = re.compile(
    r"^[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import|import[ \t]+([\w.]+))", re.M
)


def project_root(path: Path) -> Path:
    """The nearest folder above `path` holding a project marker, else the file's folder."""
    return _root_of(path.parent)


@functools.lru_cache(maxsize=1024)
def _root_of(start: Path) -> Path:
    for folder in (start, *start.parents):
        if any((folder / marker).exists() for marker in _ROOT_MARKERS):
            return folder
    return start


def resolve_module(
    importer: Path, module: str, level: int, stamps: Stamps | None = None
) -> Path | None:
    """The project file `import module` (with `level` leading dots) names from `importer`.

    With `stamps`, the folders the answer depends on are stamped into it.
    """
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
        if stamps is not None:  # a project marker added or removed moves the root
            for folder in (importer.parent, *importer.parent.parents):
                stamp(folder, stamps)
                if folder == root:
                    break
        if root != importer.parent and root in importer.parents:
            folders.extend(p for p in importer.parent.parents if p == root or root in p.parents)
    for folder in folders:
        target = folder.joinpath(*parts) if parts else folder
        for candidate in (target.with_suffix(".py"), target / "__init__.py"):
            if parts and _is_file(candidate, stamps):
                return candidate
        if not parts and _is_file(target / "__init__.py", stamps):
            return target / "__init__.py"
    return None


def imported_files(path: Path, source: str, stamps: Stamps | None = None) -> list[Path]:
    """The project files `source` imports (a text scan; for cache keys, not for resolution)."""
    found: list[Path] = []
    for match in _IMPORT_LINE.finditer(source):
        dots, from_module, plain = match.groups()
        module = plain if plain is not None else from_module
        resolved = resolve_module(path, module or "", len(dots or ""), stamps)
        if resolved is not None and resolved not in found and resolved != path:
            found.append(resolved)
        # `from pkg import models` may name the module pkg/models.py.
        if plain is None and resolved is not None and resolved.name == "__init__.py":
            line_end = source.find("\n", match.end())
            tail = source[match.end() : line_end if line_end >= 0 else None]
            for name in re.findall(r"\w+", tail.split("#", 1)[0]):
                inner = resolved.parent / f"{name}.py"
                if _is_file(inner, stamps) and inner not in found:
                    found.append(inner)
    return found


def dependency_digest(path: Path, data: bytes, stamps: Stamps | None = None) -> str:
    """A digest of the project files `data` imports: part of its results-cache key.

    With `stamps`, every file and folder the digest was read from is stamped into it.
    """
    digest = hashlib.sha256()
    text = data.decode("utf-8", errors="replace")
    if path.suffix == NOTEBOOK_SUFFIX:
        try:
            text = read_notebook(text).source  # the cells' code, not the JSON around it
        except NotebookError:
            return digest.hexdigest()
    for imported in imported_files(path, text, stamps):
        try:
            info = imported.stat()
        except OSError:
            continue
        if stamps is not None:
            stamps[str(imported)] = [info.st_mtime_ns, info.st_size]
        digest.update(_file_digest(imported, info.st_mtime_ns, info.st_size))
    return digest.hexdigest()


def stamp(folder: Path, stamps: Stamps) -> None:
    """Stamp `folder`, or when it does not exist the nearest folder above that does."""
    while str(folder) not in stamps:
        try:
            info = os.stat(folder)
        except OSError:
            if folder.parent == folder:
                return
            folder = folder.parent
            continue
        stamps[str(folder)] = [info.st_mtime_ns, info.st_size]
        return


def _is_file(path: Path, stamps: Stamps | None) -> bool:
    if stamps is not None:
        stamp(path.parent, stamps)
    return path.is_file()


@functools.lru_cache(maxsize=4096)
def _file_digest(path: Path, mtime_ns: int, size: int) -> bytes:
    """One imported file's digest; many files of a run import the same few."""
    try:
        return hashlib.sha256(str(path).encode() + b"\0" + path.read_bytes()).digest()
    except OSError:
        return b""
