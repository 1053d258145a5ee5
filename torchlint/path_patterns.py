"""gitignore-style path patterns (`exclude`, `include`, `per-file-ignores`), matched fast.

A folder walk matches every file and folder name it meets, so the patterns almost every
project uses get a shortcut: a plain name (`build`, `.venv`) matches a path with a part of
that name, and `*.py` a path with a part ending in `.py`, which is what git's rules say for
a pattern without a slash. Other patterns go to `pathspec`, imported only then; a negated
pattern (`!keep.py`) sends them all there, as the last matching pattern decides.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pathspec

# A name git matches as is: no wildcard, escape, slash, negation, comment or space.
_PLAIN = re.compile(r"(?!\.*$)[\w.+-]+")
# `*.py`, `*.tar.gz`: a star then a plain suffix.
_SUFFIX = re.compile(r"\*((?:\.[\w+-]+)+)")


class PathPatterns:
    """Patterns matched like `pathspec.GitIgnoreSpec.match_file` (paths use `/`; a folder
    may end with one)."""

    def __init__(self, patterns: tuple[str, ...]) -> None:
        self._names: frozenset[str] = frozenset()
        self._suffixes: tuple[str, ...] = ()
        self._rest = tuple(patterns)
        self._spec: pathspec.PathSpec | None = None
        if any(p.lstrip().startswith("!") for p in patterns):
            return
        names = {p for p in patterns if _PLAIN.fullmatch(p)}
        suffixes = tuple(m.group(1) for p in patterns if (m := _SUFFIX.fullmatch(p)))
        self._names = frozenset(names)
        self._suffixes = suffixes
        self._rest = tuple(p for p in patterns if p not in names and not _SUFFIX.fullmatch(p))

    def match_file(self, path: str) -> bool:
        """Whether the patterns cover `path` (relative, `/`-separated)."""
        if self._names or self._suffixes:
            for part in path.split("/"):
                if part in self._names or (self._suffixes and part.endswith(self._suffixes)):
                    return True
        if not self._rest:
            return False
        if self._spec is None:
            import pathspec  # only for patterns the shortcut does not cover

            self._spec = pathspec.GitIgnoreSpec.from_lines(self._rest)
        return self._spec.match_file(path)
