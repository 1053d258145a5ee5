"""The wheel holds every subpackage and the rules as `torchlint.rules`, not a top-level `rules`."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_contents(tmp_path: Path) -> None:
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            tmp_path,
            ROOT,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if build.returncode != 0 and "No module named" in build.stderr:
        pytest.skip(f"cannot build a wheel here: {build.stderr.strip().splitlines()[-1]}")
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
