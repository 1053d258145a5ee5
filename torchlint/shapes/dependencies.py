"""Which project files the checked files import, directly or not (a text scan, no parsing).

A shape result depends on more than the file itself: a size defined in `consts.py` and
imported by `model.py` changes `model.py`'s findings. The results cache keys shape results
on the project files found here, so that a warm run says what a cold run would.

Only the project counts: the package a checked file belongs to (its top-level package), or
the folder of scripts it sits in, and whatever the working folder holds. Libraries installed
beside it (numpy next to torch in site-packages) are not project files.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

#: Past this many project files besides the checked ones, following imports costs more
#: than checking again (a scan reads about a thousand files a second, each import resolved
#: once from folder listings).
LIMIT = 5000


@dataclass
class ImportScan:
    """What a scan found: the project files each file imports, and every folder it listed
    to find them, with the folder's stamp (modification time, size) taken before listing it:
    a file created there later changes the answer, and the stamp."""

    edges: dict[str, set[str]] = field(default_factory=dict)
    #: Folder -> (its stamp, or None when it could not be read; the names in it).
    folders: dict[str, tuple[list[int] | None, frozenset[str]]] = field(default_factory=dict)
    #: (dotted parts, the folder of a relative import or "") -> the files the import runs.
    resolved: dict[tuple[tuple[str, ...], str], tuple[str, ...]] = field(default_factory=dict)

    def files(self) -> list[str]:
        """Every file the scan read: the checked ones and what they import."""
        return sorted(self.edges)

    def names_in(self, folder: str) -> frozenset[str]:
        known = self.folders.get(folder)
        if known is None:
            try:
                info = os.stat(folder)
                stamp: list[int] | None = [info.st_mtime_ns, info.st_size]
                names = frozenset(os.listdir(folder))
            except OSError:
                stamp, names = None, frozenset()
            known = self.folders[folder] = (stamp, names)
        return known[1]


def scan_imports(sources: Mapping[str, str], roots: Iterable[str]) -> ImportScan | None:
    """The import edges of `sources` (absolute path -> text) and, transitively, of the
    project files they import (read from disk).

    None when more than `LIMIT` files besides `sources` are imported (the caller should not
    rely on a cache then). Absolute imports resolve against `roots` (folders a project
    module is imported from), relative ones against the importing file's package. Packages
    count with their `__init__.py`, which runs on import.
    """
    search = sorted({os.path.abspath(r) for r in roots})
    trees = _Trees(search, sources)
    scan = ImportScan()
    todo = list(sources)
    extra = 0
    while todo:
        path = todo.pop()
        if path in scan.edges:
            continue
        text = sources.get(path)
        if text is None:
            try:
                with open(path, encoding="utf-8", errors="replace") as handle:
                    text = handle.read()
            except OSError:
                text = ""
        found = _direct_imports(path, text, search, trees, scan)
        scan.edges[path] = found
        for dependency in found:
            if dependency not in scan.edges and dependency not in sources:
                extra += 1
                if extra > LIMIT:
                    return None
                todo.append(dependency)
    return scan


def imported_files(paths: Iterable[str], roots: Iterable[str]) -> list[str] | None:
    """The project files (absolute paths) that `paths` import, transitively, sorted; None
    past `LIMIT`."""
    sources: dict[str, str] = {}
    for path in paths:
        path = os.path.abspath(path)
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                sources[path] = handle.read()
        except OSError:
            sources[path] = ""
    scan = scan_imports(sources, roots)
    if scan is None:
        return None
    return [path for path in scan.files() if path not in sources]


class _Trees:
    """Where project files are: under each checked file's top-level package, in each
    folder of loose scripts, and anywhere an import reaches from the working folder."""

    def __init__(self, roots: list[str], sources: Iterable[str]) -> None:
        self.loose = {os.getcwd()}
        self.packages: set[str] = set()
        for path in sources:
            root, parts = package_of(os.path.dirname(path))
            if parts:
                self.packages.add(os.path.join(root, parts[0]))
            else:
                self.loose.add(root)

    def holds(self, search: str, first: str) -> bool:
        """Whether `import first...` found under the folder `search` is a project file."""
        return search in self.loose or os.path.join(search, first) in self.packages


@functools.lru_cache(maxsize=4096)
def package_of(directory: str) -> tuple[str, tuple[str, ...]]:
    """(the folder a module of `directory` is imported from, the package's dotted parts)."""
    if not os.path.isfile(os.path.join(directory, "__init__.py")):
        return directory, ()
    parent, package = os.path.split(directory)
    if not package.isidentifier() or parent == directory:
        return directory, ()
    root, parts = package_of(parent)
    return root, (*parts, package)


#: `import a.b, c` and `from .x import (y, z)`, wherever they are (in a function too). A
#: regular expression is enough: a name too many only makes the key stricter, and it is
#: many times faster than parsing, which matters for projects that import hundreds of files.
_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]*)"
    r"|import[ \t]+([^\n#;]*))",
    re.MULTILINE,
)


def _direct_imports(
    path: str, source: str, roots: list[str], trees: _Trees, scan: ImportScan
) -> set[str]:
    root, package_parts = package_of(os.path.dirname(path))
    package = list(package_parts)
    names: list[tuple[list[str], str]] = []  # (dotted parts, the root to search or "")
    for match in _IMPORT.finditer(source):
        dots, origin, imported, plain = match.groups()
        if plain is not None:
            names.extend((word.split("."), "") for word in _words(plain))
            continue
        level = len(dots)
        if level:
            if level - 1 > len(package):
                continue
            base, where = package[: len(package) - (level - 1)], root
        else:
            base, where = [], ""
        parts = base + [p for p in origin.split(".") if p]
        names.append((parts, where))
        names.extend(([*parts, word], where) for word in _words(imported))
    files: set[str] = set()
    for parts, where in names:
        if parts:
            files.update(_resolve(tuple(parts), where, roots, trees, scan))
    files.discard(path)
    return files


def _resolve(
    parts: tuple[str, ...], where: str, roots: list[str], trees: _Trees, scan: ImportScan
) -> tuple[str, ...]:
    """The project files `import a.b.c` runs (a/__init__.py, a/b.py, ...), from `where` (a
    relative import) or else from any of `roots`; remembered in `scan`."""
    remembered = scan.resolved.get((parts, where))
    if remembered is not None:
        return remembered
    files: list[str] = []
    for search in [where] if where else roots:
        if not where and not trees.holds(search, parts[0]):
            continue
        folder = search
        for part in parts:
            names = scan.names_in(folder)
            if f"{part}.py" in names:
                files.append(os.path.join(folder, f"{part}.py"))
            if part not in names:
                break
            folder = os.path.join(folder, part)
            if "__init__.py" in scan.names_in(folder):
                files.append(os.path.join(folder, "__init__.py"))
    scan.resolved[(parts, where)] = found = tuple(files)
    return found


def _words(names: str) -> list[str]:
    """The imported names of `(a, b as c)`: `["a", "b"]`."""
    return [
        item.split()[0]
        for item in names.strip().strip("()").replace("\n", " ").split(",")
        if item.strip()
    ]
