"""Which project files a checked file imports, directly or not (static: `ast` only).

A shape result depends on more than the file itself: a size defined in `consts.py` and
imported by `model.py` changes `model.py`'s findings. The results cache keys shape results
on every project file found here, so that a warm run says what a cold run would.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable

from torchlint.shapes.astutil import parse
from torchlint.shapes.discover import module_identity

#: Past this many files, following imports costs more than checking again.
LIMIT = 1000


def imported_files(paths: Iterable[str], roots: Iterable[str]) -> list[str] | None:
    """The project files (absolute paths) that `paths` import, transitively, sorted.

    None when there are more than `LIMIT` (the caller should not rely on a cache then).
    Imports resolve against `roots` (folders a project module is imported from) and, for
    relative imports, the importing file's package. Packages count with their
    `__init__.py`, which runs on import. Installed libraries are not project files.
    """
    search = [os.path.abspath(r) for r in roots]
    todo = [os.path.abspath(p) for p in paths]
    seen = set(todo)
    found: set[str] = set()
    while todo:
        path = todo.pop()
        for dependency in _direct_imports(path, search):
            if dependency not in seen:
                if len(seen) >= LIMIT:
                    return None
                seen.add(dependency)
                found.add(dependency)
                todo.append(dependency)
    return sorted(found)


def _direct_imports(path: str, roots: list[str]) -> set[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            source = handle.read()
    except OSError:
        return set()
    tree = parse(source, path)
    if tree is None:
        return set()
    root, module = module_identity(path, set())
    package = module.split(".")
    if os.path.basename(path) != "__init__.py":
        package = package[:-1]
    names: list[tuple[list[str], str]] = []  # (dotted parts, root to search or "")
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend((alias.name.split("."), "") for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if node.level - 1 > len(package):
                    continue
                base = package[: len(package) - (node.level - 1)]
                where = root
            else:
                base, where = [], ""
            parts = base + (node.module.split(".") if node.module else [])
            names.append((parts, where))
            names.extend(([*parts, alias.name], where) for alias in node.names)
    files: set[str] = set()
    for parts, where in names:
        for search in [where] if where else roots:
            for end in range(1, len(parts) + 1):
                base = os.path.join(search, *parts[:end])
                for candidate in (os.path.join(base, "__init__.py"), base + ".py"):
                    if os.path.isfile(candidate):
                        files.add(candidate)
    files.discard(path)
    return files
