"""Shared helpers: run the real `torchlint` command in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# A test machine may be busy: shape checks of the fixtures get a generous time limit. The tests
# of the time limit itself set their own.
os.environ.setdefault("TORCHLINT_SHAPES_TIMEOUT", "60")

BUGGY = """\
import torch.nn.functional as F


def loss_fn(logits, y):
    return F.cross_entropy(F.softmax(logits, dim=1), y)
"""
CLEAN = """\
import torch.nn.functional as F


def loss_fn(logits, y):
    return F.cross_entropy(logits, y)
"""

#: A model whose constructor never returns: for the tests of the shape checks' time limit.
SPINNING_MODEL = """\
import torch.nn as nn


class Spin(nn.Module):
    def __init__(self):
        super().__init__()
        while True:
            pass

    def forward(self, x):
        return x
"""


def run_cli(
    *args: str,
    cwd: Path,
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
    prelude: str = "",
) -> subprocess.CompletedProcess[str]:
    """Run `python -m torchlint ARGS` (after `prelude`, e.g. an import blocker)."""
    code = f"{prelude}\nimport sys\nfrom torchlint.cli import main\nsys.exit(main(sys.argv[1:]))"
    full_env = {**os.environ, "PYTHONIOENCODING": "utf-8", **(env or {})}
    full_env.pop("TORCHLINT_OUTPUT_FORMAT", None)
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        input=stdin.decode() if stdin is not None else None,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=300,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A small project: one buggy file, one clean file, no configuration."""
    (tmp_path / "buggy.py").write_text(BUGGY)
    (tmp_path / "clean.py").write_text(CLEAN)
    return tmp_path
