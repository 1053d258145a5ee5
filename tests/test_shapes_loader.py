"""The shape worker's importer: project files through slices, installed packages as they are."""

from __future__ import annotations

import contextlib
import sys
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


def test_weight_initialisation_is_skipped_on_meta_only() -> None:
    """Value-only in-place methods return a meta tensor as it is while a model is built (no
    slow decomposition per weight), and work as usual on real tensors."""
    import torch

    from torchlint.shapes.build import _meta_normal_skipped

    with _meta_normal_skipped():
        meta = torch.empty(4, 4, device="meta")
        assert meta.clamp_(-2, 2) is meta and meta.normal_() is meta
        real = torch.full((2,), 5.0)
        assert real.clamp_(-2, 2).tolist() == [2.0, 2.0]
    assert torch.Tensor.clamp_ is not None and torch.full((1,), 9.0).clamp_(0, 1).item() == 1.0


def test_a_class_whose_decorator_cannot_be_had_is_defined_without_it(tmp_path: Path) -> None:
    """A registry's `@HEADS.register()` (the registry made by code that is not run), or a
    decorator the installed version lacks, only registers the class or wraps it: the class is
    defined without it, and the note says so, instead of every model that uses it failing."""
    import torch

    path = tmp_path / "heads.py"
    text = (
        "import torch\n"
        "import torch.nn as nn\n"
        "\n"
        "\n"
        "@torch.no_such_decorator_in_this_version()\n"
        "class Head(nn.Module):\n"
        "    def forward(self, x):\n"
        "        return x\n"
    )
    path.write_text(text)
    project = loader.Project([str(tmp_path)], {str(path): text}, lambda: torch.device("meta"))
    sys.meta_path.insert(0, project)  # not `install`, which takes the project off sys.path
    try:
        module = project.load(str(path), "heads")
    finally:
        sys.meta_path.remove(project)
        sys.modules.pop("heads", None)
    assert isinstance(module.Head(), torch.nn.Module)
    (note,) = project.notes[str(path)]
    assert note.startswith("line 5: AttributeError") and "(the decorator was left out)" in note
