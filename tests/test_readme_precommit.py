"""The README's `repo: local` pre-commit snippet works as written (no release tag needed)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import BUGGY, CLEAN
from tests.test_precommit import PRE_COMMIT, git

ROOT = Path(__file__).resolve().parent.parent


def _local_snippet() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    [block] = [b for b in re.findall(r"```yaml\n(.*?)```", readme, re.DOTALL) if "repo: local" in b]
    return block


@pytest.mark.skipif(PRE_COMMIT is None, reason="pre-commit is not installed")
def test_local_hook_snippet(tmp_path: Path) -> None:
    assert PRE_COMMIT is not None
    repo = tmp_path / "project"
    repo.mkdir()
    (repo / ".pre-commit-config.yaml").write_text(_local_snippet())
    (repo / "train.py").write_text(BUGGY)
    (repo / "clean.py").write_text(CLEAN)
    git(repo, "init", "-q")
    git(repo, "add", ".")
    # `language: system` runs the torchlint on PATH: the one installed beside this Python.
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    env = {
        **os.environ,
        "PATH": path,
        "PRE_COMMIT_HOME": str(tmp_path / "home"),
        "PRE_COMMIT_COLOR": "never",
    }
    command = [*PRE_COMMIT, "run", "--all-files"]
    result = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "train.py:5:28: TL101" in result.stdout
    (repo / "train.py").write_text(CLEAN)
    again = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
