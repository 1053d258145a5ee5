"""`PathPatterns` answers as `pathspec.GitIgnoreSpec` does, shortcut or not."""

from __future__ import annotations

import itertools
import random

import pathspec
import pytest

from torchlint.config import DEFAULT_EXCLUDES, DEFAULT_INCLUDE
from torchlint.path_patterns import PathPatterns

PATTERN_SETS = [
    DEFAULT_EXCLUDES,
    DEFAULT_INCLUDE,
    ("*.py",),
    ("build", "*.tar.gz", "docs/"),
    ("build", "!build/keep.py"),
    ("/top", "a/**/b", "c?d", "[ab].py"),
    ("", "# a comment", "name ", "..", "."),
    ("foo.py", "sub/dir/", "*.ipynb", "site-packages"),
]
PARTS = ["a", "b", "build", "foo.py", "x.py", ".py", "x.pyi", "x.ipynb", "f.tar.gz", "top", "cd"]
PARTS += ["c1d", ".venv", "keep.py", "docs", "sub", "dir", "site-packages", "__dir__", "name"]


def _paths() -> list[str]:
    rng = random.Random(7)
    paths = []
    for depth in (1, 2, 3, 4):
        for _ in range(300):
            parts = [rng.choice(PARTS) for _ in range(depth)]
            paths.append("/".join(parts))
            paths.append("/".join(parts) + "/")
    return paths


@pytest.mark.parametrize("patterns", PATTERN_SETS, ids=lambda p: ",".join(p)[:40])
def test_same_answers_as_pathspec(patterns: tuple[str, ...]) -> None:
    reference = pathspec.GitIgnoreSpec.from_lines(patterns)
    fast = PathPatterns(patterns)
    for path in itertools.chain(_paths(), PARTS):
        assert fast.match_file(path) == reference.match_file(path), (patterns, path)


def test_default_patterns_need_no_pathspec() -> None:
    for patterns in (DEFAULT_EXCLUDES, DEFAULT_INCLUDE):
        fast = PathPatterns(patterns)
        fast.match_file("a/b/c.py")
        assert fast._spec is None
