"""The results cache for shape checks says what `--no-cache` would say.

Shape results depend on the file, on the project files it imports, on the shape
configuration and on the versions; a warm run after a change to any of them must print what
a cold run prints. A damaged cache is rebuilt, never an error.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from torchlint.cache import ResultCache
from torchlint.diagnostic import Diagnostic

MODEL = """\
import torch.nn as nn

from consts import IN


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, IN)
        self.fc2 = nn.Linear(8, 2)

    def forward(self, x):
        return self.fc2(self.fc1(x))
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "consts.py").write_text("IN = 30\n")
    (tmp_path / "model.py").write_text(MODEL)
    return tmp_path


def lint(project: Path, *args: str):
    return run_cli("--select", "TL6", *args, ".", cwd=project)


def test_shape_cache_follows_imported_files_and_keeps_names(project: Path) -> None:
    pytest.importorskip("torch")
    cold = lint(project)
    assert "model.py:10:20: TL601" in cold.stdout
    warm = lint(project, "--output-format", "json")
    assert [d["filename"] for d in json.loads(warm.stdout)] == ["model.py"]
    assert lint(project).stdout == cold.stdout
    (project / "consts.py").write_text("IN = 8\n")  # fc1 now fits fc2
    assert lint(project).stdout == lint(project, "--no-cache").stdout == "All checks passed!\n"
    (project / "consts.py").write_text("IN = 30\n")
    assert lint(project).stdout == cold.stdout


def test_shape_cache_follows_the_shape_configuration(project: Path) -> None:
    pytest.importorskip("torch")
    lint(project)
    (project / "pyproject.toml").write_text("[tool.torchlint]\nshapes = false\n")
    assert lint(project).stdout == lint(project, "--no-cache").stdout == "All checks passed!\n"
    (project / "pyproject.toml").write_text(
        '[tool.torchlint.shapes]\n"model:Net" = { input-shape = [4, 8] }\n'
    )
    assert lint(project).stdout == lint(project, "--no-cache").stdout


@pytest.mark.parametrize("content", ["[1, 2]", '{"version": "0", "entries": []}', "not json"])
def test_damaged_cache_file_is_rebuilt(project: Path, content: str) -> None:
    folder = project / ".torchlint_cache"
    folder.mkdir()
    (folder / "results.json").write_text(content)
    result = run_cli("--no-shapes", ".", cwd=project)
    assert result.returncode == 0, result.stderr
    assert json.loads((folder / "results.json").read_text())["entries"]


@pytest.mark.parametrize(
    "entry", [{"a": 1}, ["k", [{"code": 5}]], ["k", [{"location": {"row": "1"}}]], ["k"], 3]
)
def test_damaged_cache_entry_is_dropped(tmp_path: Path, entry: object) -> None:
    from torchlint.cache import engine_version

    data = {"version": engine_version(), "entries": {"shapes:model.py": entry}}
    (tmp_path / "results.json").write_text(json.dumps(data))
    cache = ResultCache(tmp_path)
    assert cache.get("model.py", "k", section="shapes:") is None
    cache.save()
    assert json.loads((tmp_path / "results.json").read_text())["entries"] == {}


def test_cache_names_results_as_given(tmp_path: Path) -> None:
    diagnostic = Diagnostic("model.py", 3, 1, 3, 5, "TL601", "name", "message")
    cache = ResultCache(tmp_path)
    cache.put("model.py", "k", [diagnostic], section="shapes:")
    assert cache.get("model.py", "k", section="shapes:") == [diagnostic]
    assert cache.get("model.py", "k", section="shapes:")[0].path == "model.py"
    assert cache.get("model.py", "k") is None


def test_imported_files_are_followed_transitively(tmp_path: Path) -> None:
    from torchlint.shapes.dependencies import imported_files

    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from .deep import VALUE\n")
    (package / "sub" / "deep.py").write_text("import pkg.consts as c\nVALUE = c.X\n")
    (package / "consts.py").write_text("X = 1\n")
    (package / "lazy.py").write_text("Y = 2\n")
    (package / "unused.py").write_text("Z = 3\n")
    (package / "model.py").write_text(
        "import torch\nfrom . import sub\n\n\ndef build():\n    from .lazy import (\n"
        "        Y,\n    )\n    return Y\n"
    )
    found = imported_files([str(package / "model.py")], [str(tmp_path)])
    assert found is not None
    names = sorted(str(Path(p).relative_to(tmp_path)) for p in found)
    assert names == [
        "pkg/__init__.py",
        "pkg/consts.py",
        "pkg/lazy.py",
        "pkg/sub/__init__.py",
        "pkg/sub/deep.py",
    ]
