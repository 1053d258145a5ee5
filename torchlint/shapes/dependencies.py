"""Which project files a checked file imports, directly or not (static: `ast` only).

A shape result depends on more than the file itself: a size defined in `consts.py` and
imported by `model.py` changes `model.py`'s findings. The results cache keys shape results
on every project file found here, so that a warm run says what a cold run would.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

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


#: `import a.b, c` and `from .x import (y, z)`, wherever they are (in a function too). A
#: regular expression is enough: a name too many only makes the key stricter, and it is
#: many times faster than parsing, which matters for projects that import hundreds of files.
_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]*)"
    r"|import[ \t]+([^\n#;]*))",
    re.MULTILINE,
)


def _direct_imports(path: str, roots: list[str]) -> set[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            source = handle.read()
    except OSError:
        return set()
    root, module = module_identity(path, set())
    package = module.split(".")
    if os.path.basename(path) != "__init__.py":
        package = package[:-1]
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
        if not parts:
            continue
        for search in [where] if where else roots:
            for end in range(1, len(parts) + 1):
                base = os.path.join(search, *parts[:end])
                for candidate in (os.path.join(base, "__init__.py"), base + ".py"):
                    if os.path.isfile(candidate):
                        files.add(candidate)
    files.discard(path)
    return files


def _words(names: str) -> list[str]:
    """The imported names of `(a, b as c)`: `["a", "b"]`."""
    return [
        item.split()[0]
        for item in names.strip().strip("()").replace("\n", " ").split(",")
        if item.strip()
    ]
