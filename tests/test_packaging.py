"""The wheel holds every subpackage and the rules as `torchlint.rules`, not a top-level `rules`;
the README's quick-start commands are the ones CI runs."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Index errors: the isolated build could not fetch setuptools (an offline machine).
_OFFLINE = ("No matching distribution found", "Could not find a version", "NewConnectionError")


def _builds_without_isolation() -> bool:
    """Whether this environment can build the wheel itself: setuptools 70.1+ needs no `wheel`."""
    try:
        setuptools = importlib.metadata.version("setuptools")
    except importlib.metadata.PackageNotFoundError:
        return False
    major, minor = (int(part) for part in re.findall(r"\d+", setuptools)[:2])
    if (major, minor) >= (70, 1):
        return True
    try:
        importlib.metadata.version("wheel")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def test_wheel_contents(tmp_path: Path) -> None:
    # A bare virtual environment has an old setuptools and no `wheel`: build in isolation there.
    isolation = ["--no-build-isolation"] if _builds_without_isolation() else []
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation, "-w", tmp_path, ROOT]
    build = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if build.returncode != 0 and not isolation and any(e in build.stderr for e in _OFFLINE):
        pytest.skip(f"no package index to fetch the build backend from: {build.stderr[-300:]}")
    assert build.returncode == 0, build.stderr
    [wheel] = tmp_path.glob("torchlint-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    packages = {
        str(path.parent.relative_to(ROOT)).replace("/", ".")
        for path in (ROOT / "torchlint").rglob("__init__.py")
    }
    for package in packages:
        assert f"{package.replace('.', '/')}/__init__.py" in names, package
    assert "torchlint/rules/softmax_before_cross_entropy.py" in names
    assert not any(name.startswith("rules/") for name in names)


def _quick_start_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```console\n(.*?)```", section, re.DOTALL)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def test_ci_runs_the_readme_commands_as_written() -> None:
    commands = _quick_start_commands()
    assert 'pip install -e ".[dev]" && pytest' in commands
    assert "pip install -e . && torchlint examples/" in [c.split(" >")[0] for c in commands]
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    ci_lines = [line.split(" >")[0].strip() for line in script.splitlines()]
    for command in commands:
        if " -m venv " in command:
            assert "-m venv" in script  # CI makes its own bare environment
        else:
            assert command in ci_lines, f"CI does not run the README command {command!r}"
