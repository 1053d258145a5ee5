"""The language server with a real editor: headless Neovim runs tests/nvim/diagnostics.lua.

The script attaches `torchlint server` to a buggy buffer, prints the diagnostics, applies the
"Disable ... for this line" code action through Neovim's own edit machinery, and hovers the
noqa code. Works with Neovim 0.7 (Debian's) and later.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from torchlint.registry import all_rules

SCRIPT = Path(__file__).resolve().parent / "nvim" / "diagnostics.lua"
NVIM = shutil.which("nvim")

BUGGY = """\
import torch
import torch.nn.functional as F


def step(logits, y):
    loss = F.cross_entropy(F.softmax(logits, dim=1), y)
    return loss
"""


@pytest.mark.skipif(NVIM is None, reason="nvim (Neovim) is not on PATH")
@pytest.mark.skipif("TL101" not in all_rules(), reason="rule TL101 is not there yet")
def test_neovim_shows_diagnostics_and_applies_noqa(tmp_path: Path) -> None:
    assert NVIM is not None
    (tmp_path / "buggy.py").write_text(BUGGY)
    env = {
        **os.environ,
        "TORCHLINT_SERVER_CMD": json.dumps([sys.executable, "-m", "torchlint", "server"]),
        "TORCHLINT_NVIM_TIMEOUT": "30000",
    }
    command = [NVIM, "--headless", "--clean", "-n", "-i", "NONE", "buggy.py"]
    result = subprocess.run(
        [*command, "-c", f"luafile {SCRIPT}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    lines = result.stdout.splitlines()
    diagnostics = [line for line in lines if line.startswith("DIAGNOSTIC ")]
    assert len(diagnostics) == 1, output
    assert diagnostics[0].startswith("DIAGNOSTIC 6:28 TL101 "), output
    assert "softmax" in diagnostics[0]
    assert "ACTION Disable TL101 for this line" in lines
    assert "LINE     loss = F.cross_entropy(F.softmax(logits, dim=1), y)  # noqa: TL101" in lines
    assert "SILENCED TL101" in lines
    assert "HOVER # softmax-before-cross-entropy (TL101)" in lines
    assert (tmp_path / "buggy.py").read_text() == BUGGY  # the buffer was never saved
