"""The pre-commit hooks, run by real pre-commit against this checkout.

`pre-commit try-repo` clones the checkout (committed files, plus uncommitted changes to
tracked ones) and installs it into a fresh virtualenv, which needs the package index for
libcst and pathspec: the first test of this module takes a minute or so. One PRE_COMMIT_HOME
is shared by the module, so that happens once.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from torchlint.registry import all_rules

CHECKOUT = Path(__file__).resolve().parent.parent
MANIFEST = CHECKOUT / ".pre-commit-hooks.yaml"
# Building the hook's environment downloads and installs packages.
TIMEOUT = 900

BUGGY = """\
import torch
import torch.nn.functional as F


def step(logits, y):
    loss = F.cross_entropy(F.softmax(logits, dim=1), y)
    return loss
"""
CLEAN = BUGGY.replace("F.softmax(logits, dim=1)", "logits")


def _pre_commit() -> list[str] | None:
    if importlib.util.find_spec("pre_commit") is not None:
        return [sys.executable, "-m", "pre_commit"]
    found = shutil.which("pre-commit")
    return [found] if found else None


PRE_COMMIT = _pre_commit()
pytestmark = pytest.mark.skipif(PRE_COMMIT is None, reason="pre-commit is not installed")


def _tracked(path: str) -> bool:
    """Whether try-repo will see `path`: it clones tracked files only."""
    result = subprocess.run(
        ["git", "ls-files", "--error-unmatch", path],
        cwd=CHECKOUT,
        capture_output=True,
        check=False,
    )
    return result.returncode == 0


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")


def run_pre_commit(args: list[str], cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    assert PRE_COMMIT is not None
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "PRE_COMMIT_COLOR": "never"}
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(
        [*PRE_COMMIT, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_manifest_is_valid(pre_commit_home: Path) -> None:
    result = run_pre_commit(["validate-manifest", str(MANIFEST)], CHECKOUT, pre_commit_home)
    assert result.returncode == 0, result.stdout + result.stderr


def test_hook_reports_then_passes_and_respects_excludes(
    tmp_path: Path, pre_commit_home: Path
) -> None:
    if not (CHECKOUT / ".git").exists():
        pytest.skip("not a git checkout: pre-commit try-repo needs one")
    missing = [p for p in (".pre-commit-hooks.yaml", "torchlint/cli.py") if not _tracked(p)]
    if missing:
        pytest.skip(f"not committed yet, so try-repo cannot see them: {missing}")
    if "TL101" not in all_rules():
        pytest.skip("rule TL101 is not there yet")
    repo = tmp_path / "project"
    (repo / "generated").mkdir(parents=True)
    (repo / "pyproject.toml").write_text('[tool.torchlint]\nextend-exclude = ["generated"]\n')
    (repo / "train.py").write_text(BUGGY)
    (repo / "clean.py").write_text(CLEAN)
    (repo / "generated" / "made.py").write_text(BUGGY)
    git(repo, "init", "-q")
    git(repo, "add", ".")

    hook = ["try-repo", str(CHECKOUT), "torchlint", "--all-files"]
    result = run_pre_commit(hook, repo, pre_commit_home)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "TL101" in output
    assert "train.py:6:" in output
    assert "clean.py" not in output
    assert "made.py" not in output  # excluded by the project's configuration

    (repo / "train.py").write_text(CLEAN)
    result = run_pre_commit(hook, repo, pre_commit_home)
    assert result.returncode == 0, result.stdout + result.stderr
