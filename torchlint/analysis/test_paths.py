"""Is this file test code? (Rules about debugging aids and data loading skip tests.)"""

from __future__ import annotations

import re

_TEST_PATH = re.compile(
    r"(^|[/\\])(tests?|testing)[/\\]|(^|[/\\])(test_[^/\\]*|[^/\\]*_test|conftest)\.py$"
)


def is_test_file(path: str) -> bool:
    """Under a `test/`, `tests/` or `testing/` directory, or named `test_*.py`, `*_test.py`
    or `conftest.py`."""
    return bool(_TEST_PATH.search(path))
