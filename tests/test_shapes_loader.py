"""The shape worker's importer: project files through slices, installed packages as they are."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from torchlint.shapes import loader


def test_installed_package_in_a_virtualenv_inside_the_project_is_not_the_projects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / ".venv" / "lib" / "site-packages"
    (site / "package" / "utils").mkdir(parents=True)
    (site / "package" / "__init__.py").write_text("")
    (tmp_path / "models").mkdir()
    monkeypatch.setattr(loader, "environment_paths", lambda: {str(site)})
    project = loader.Project([str(tmp_path)], {}, contextlib.nullcontext)
    # `package.utils` is the installed package's business (a lazy module, say), not a
    # namespace package of the project's.
    assert project.find_spec("package.utils", [str(site / "package")]) is None
    assert project.find_spec("models.sub", [str(tmp_path / "models")]) is None
    (tmp_path / "models" / "sub").mkdir()
    spec = project.find_spec("models.sub", [str(tmp_path / "models")])
    assert spec is not None and spec.submodule_search_locations == [
        str(tmp_path / "models" / "sub")
    ]
