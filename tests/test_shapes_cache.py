"""The results cache for shape checks says what `--no-cache` would say.

Shape results depend on the file, on the project files it imports, on the shape
configuration and on the versions; a warm run after a change to any of them must print what
a cold run prints. A damaged cache is rebuilt, never an error.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import SPINNING_MODEL, run_cli
from torchlint.cache import ResultCache
from torchlint.diagnostic import Diagnostic
from torchlint.shapes import UNFINISHED

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


SPY = """\
import sys
import torchlint.shapes as _shapes

_check_files = _shapes.check_files


def _spy(files, **options):
    checked = options.get("checked")
    print("checked:", "all" if checked is None else sorted(checked), file=sys.stderr)
    return _check_files(files, **options)


_shapes.check_files = _spy
"""

OTHER = """\
import torch.nn as nn


class Other(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 6)
        self.fc2 = nn.Linear(5, 2)

    def forward(self, x):
        return self.fc2(self.fc1(x))
"""


def checked(result) -> list[str]:
    """What the shape checks were asked to check in a run (`SPY`), one line per call."""
    return [line for line in result.stderr.splitlines() if line.startswith("checked:")]


def test_an_edit_checks_again_only_the_files_it_can_change(project: Path) -> None:
    pytest.importorskip("torch")
    (project / "other.py").write_text(OTHER)
    cold = lint(project)
    assert "model.py:10:20: TL601" in cold.stdout and "other.py:8:20: TL601" in cold.stdout
    assert checked(run_cli("--select", "TL6", ".", cwd=project, prelude=SPY)) == []
    (project / "other.py").write_text(OTHER.replace("Linear(5, 2)", "Linear(6, 2)"))
    warm = run_cli("--select", "TL6", ".", cwd=project, prelude=SPY)
    assert checked(warm) == ["checked: ['other.py']"]
    assert warm.stdout == lint(project, "--no-cache").stdout
    assert "model.py:10:20: TL601" in warm.stdout and "other.py" not in warm.stdout
    (project / "consts.py").write_text("IN = 8\n")  # only model.py imports it
    warm = run_cli("--select", "TL6", ".", cwd=project, prelude=SPY)
    assert checked(warm) == ["checked: ['model.py']"]
    assert warm.stdout == lint(project, "--no-cache").stdout == "All checks passed!\n"


def test_groups_follow_imports_and_named_classes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from torchlint.shape_keys import shape_keys

    files = {
        "model.py": MODEL,
        "other.py": OTHER,
        "train.py": "import torch\n\nnet = Other()\nnet(torch.randn(2, 4))\n",
        "lone.py": OTHER.replace("Other", "Lone"),
    }
    (tmp_path / "consts.py").write_text("IN = 30\n")  # imported, not checked
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    candidates = {"model.py": "", "other.py": "", "lone.py": ""}

    def keys_of(edits: dict[str, str]):
        sources = {**files, **edits}
        keys = shape_keys({n: t.encode() for n, t in sources.items()}, sources, candidates, "")
        assert keys is not None
        return keys

    keys = keys_of({})
    assert keys.groups == {
        "model.py": {"model.py"},
        "other.py": {"other.py"},
        "lone.py": {"lone.py"},
    }
    assert str(tmp_path / "consts.py") in keys.stamps  # read from disk: stamped
    # train.py names Other: its call sites are evidence for other.py, not for the rest.
    again = keys_of({"train.py": "net = Other(8)\n"})
    assert again.keys["other.py"] != keys.keys["other.py"]
    assert again.keys["model.py"] == keys.keys["model.py"]
    assert again.keys["lone.py"] == keys.keys["lone.py"]


def test_a_warm_run_reads_no_file_for_its_shape_results(project: Path) -> None:
    pytest.importorskip("torch")
    from tests.test_cache_stamps import _settle

    (project / ".torchlint_cache").mkdir()
    _settle(project)  # files nobody is editing: their stamps can be trusted
    cold = lint(project)
    probe = SPY + (
        "import atexit\n"
        "atexit.register(lambda: print('keyed:', 'torchlint.shape_keys' in sys.modules))\n"
    )
    warm = run_cli("--select", "TL6", ".", cwd=project, prelude=probe)
    assert warm.stdout.startswith(cold.stdout) and "keyed: False" in warm.stdout
    assert checked(warm) == []


def test_libraries_beside_the_package_are_not_project_files(tmp_path: Path) -> None:
    from torchlint.shapes.dependencies import imported_files

    site = tmp_path / "site"
    (site / "pkg").mkdir(parents=True)
    (site / "lib").mkdir()
    (site / "pkg" / "__init__.py").write_text("")
    (site / "pkg" / "model.py").write_text("import lib\nfrom pkg import sizes\n")
    (site / "pkg" / "sizes.py").write_text("")
    (site / "lib" / "__init__.py").write_text("")
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "train.py").write_text("import helper\nimport lib\n")
    (scripts / "helper.py").write_text("")
    found = imported_files([str(site / "pkg" / "model.py")], [str(site)])
    assert found == [str(site / "pkg" / "__init__.py"), str(site / "pkg" / "sizes.py")]
    found = imported_files([str(scripts / "train.py")], [str(scripts), str(site)])
    assert found == [str(scripts / "helper.py")]


def test_a_time_out_is_kept_said_and_retried_on_request(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from tests.test_cache_stamps import _settle

    (tmp_path / "spin.py").write_text(SPINNING_MODEL)
    (tmp_path / ".torchlint_cache").mkdir()
    _settle(tmp_path)
    quick = {"TORCHLINT_SHAPES_TIMEOUT": "1"}
    args = ("--select", "TL6", "--extend-select", "TL690", ".")
    cold = run_cli(*args, cwd=tmp_path, env=quick)
    assert (
        f"spin.py:4:1: TL690 shape check of Spin skipped: {UNFINISHED} (timed out after 1 s"
        in cold.stdout
    )
    warm = run_cli(*args, cwd=tmp_path, env=quick, prelude=SPY)
    assert warm.stdout == cold.stdout and checked(warm) == []
    assert "timed out in an earlier run (load average" in warm.stderr
    assert "--no-cache" in warm.stderr
    results = tmp_path / ".torchlint_cache" / "results.json"
    data = json.loads(results.read_text())
    for record in data["shape_runs"].values():
        record["load"] = "busy"  # damaged: the note goes without it
    results.write_text(json.dumps(data))
    warm = run_cli(*args, cwd=tmp_path, env=quick, prelude=SPY)
    assert warm.stdout == cold.stdout and checked(warm) == []
    assert "timed out in an earlier run and are not retried" in warm.stderr
    retried = run_cli(*args, "--no-cache", cwd=tmp_path, env=quick, prelude=SPY)
    assert checked(retried) == ["checked: all"]
    longer = run_cli(*args, cwd=tmp_path, env={"TORCHLINT_SHAPES_TIMEOUT": "2"}, prelude=SPY)
    assert checked(longer) == ["checked: ['spin.py']"]
    assert "timed out after 2 s" in longer.stdout


@pytest.mark.parametrize(
    "runs", [5, [], {"x": 5}, {"x": {"keys": [], "stamps": 1}}, {"x": {"keys": {}, "stamps": []}}]
)
def test_damaged_shape_record_is_rebuilt(project: Path, runs: object) -> None:
    pytest.importorskip("torch")
    from torchlint.cache import engine_version

    cold = lint(project, "--no-cache")
    folder = project / ".torchlint_cache"
    folder.mkdir()
    data = {"version": engine_version(), "entries": {}, "shape_runs": runs}
    (folder / "results.json").write_text(json.dumps(data))
    result = lint(project)
    assert result.stdout == cold.stdout and result.returncode == 1, result.stderr
    assert isinstance(json.loads((folder / "results.json").read_text())["shape_runs"], dict)


def test_a_modular_template_is_checked_again_when_its_generated_file_changes(
    tmp_path: Path,
) -> None:
    """A template's classes are answered by the file generated from it (see
    `modular_templates`): that file is part of the template's key even when only the
    template is linted, and a generated file that appears later is seen."""
    pytest.importorskip("torch")
    from tests.test_shapes_reach import GENERATED, TEMPLATE

    (tmp_path / "modular_toy.py").write_text("import torch\n" + TEMPLATE)

    def lint_template(*args: str) -> str:
        return run_cli("--select", "TL6", *args, "modular_toy.py", cwd=tmp_path).stdout

    alone = lint_template()
    assert "TL605" in alone
    (tmp_path / "modeling_toy.py").write_text(GENERATED)  # the mixer is checked there now
    assert lint_template() == lint_template("--no-cache") == "All checks passed!\n"
    (tmp_path / "modeling_toy.py").write_text(GENERATED.replace("ToyMixer", "OtherMixer"))
    assert lint_template() == lint_template("--no-cache") == alone
