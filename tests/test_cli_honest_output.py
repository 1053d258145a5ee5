"""What a run says about itself: missing paths, unknown commands, skipped checks, counts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import BUGGY, run_cli
from tests.test_cli import BLOCK_TORCH

ROOT = Path(__file__).resolve().parent.parent
MODEL = """\
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)
"""
WARNING = "import torch\n\nstate = torch.load('weights.pt')\n"


def test_a_missing_path_is_an_error_and_nothing_says_all_passed(project: Path) -> None:
    alone = run_cli("nope.py", cwd=project)
    assert alone.returncode == 2
    assert "error: nope.py: no such file or directory" in alone.stderr
    assert "All checks passed" not in alone.stdout
    assert "1 path could not be checked" in alone.stdout
    beside = run_cli("clean.py", "nope.py", cwd=project)
    assert beside.returncode == 2
    assert "All checks passed" not in beside.stdout


def test_an_unknown_command_is_an_error(project: Path) -> None:
    for word in ("config", "format", "lint"):
        result = run_cli(word, cwd=project)
        assert result.returncode == 2, word
        assert f"unknown command {word!r}" in result.stderr
        assert "All checks passed" not in result.stdout
    # A folder with a command-like name is still a path to check.
    (project / "config").mkdir()
    (project / "config" / "m.py").write_text(BUGGY)
    assert run_cli("config", cwd=project).returncode == 1


def test_a_run_that_finds_no_file_does_not_say_all_passed(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("nothing to lint\n")
    result = run_cli(".", cwd=tmp_path)
    assert result.returncode == 0
    assert "no Python files or notebooks found" in result.stderr
    assert "All checks passed" not in result.stdout
    assert "not run: every check" in result.stdout


def test_a_named_folder_inside_an_excluded_one_is_checked(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\n")
    package = tmp_path / ".venv" / "lib" / "python3.12" / "site-packages" / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "sub" / "model.py").write_text(BUGGY)
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "stale.py").write_text(BUGGY)
    (tmp_path / "src.py").write_text(BUGGY)
    named = run_cli(".venv/lib/python3.12/site-packages/pkg", "--no-shapes", cwd=tmp_path)
    assert named.returncode == 1, named.stderr
    assert "pkg/sub/model.py:" in named.stdout
    assert "__pycache__" not in named.stdout  # excludes still apply below the named folder
    # The project's own run still leaves the virtual environment out.
    whole = run_cli(".", "--no-shapes", cwd=tmp_path)
    assert "src.py:" in whole.stdout and ".venv" not in whole.stdout


def test_version_command(tmp_path: Path) -> None:
    result = run_cli("version", cwd=tmp_path)
    assert result.returncode == 0
    assert re.match(r"torchlint \d+\.\d+", result.stdout)
    assert "Python" in result.stdout


def test_summary_counts_by_severity(tmp_path: Path) -> None:
    (tmp_path / "errors.py").write_text(BUGGY)
    assert "Found 1 error." in run_cli("errors.py", cwd=tmp_path).stdout
    (tmp_path / "warns.py").write_text(WARNING)
    assert (
        "Found 1 warning."
        in run_cli("warns.py", "--select", "TL304", "--torch-version", "2.1", cwd=tmp_path).stdout
    )
    both = run_cli(".", "--select", "TL101,TL304", "--torch-version", "2.1", cwd=tmp_path)
    assert "Found 2 problems: 1 error, 1 warning." in both.stdout
    assert "errors" not in both.stdout.splitlines()[-1]


def test_without_torch_one_line_says_shape_checks_were_skipped(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "other.py").write_text(MODEL)
    result = run_cli(".", "--no-cache", cwd=tmp_path, prelude=BLOCK_TORCH)
    assert result.returncode == 0, result.stderr
    [note] = [line for line in result.stderr.splitlines() if "shape checks" in line]
    assert "skipped for 2 files with models: torch is not installed" in note
    assert "pip install torch" in note and "--no-shapes" in note
    assert "All checks passed" not in result.stdout
    assert "not run: shape checks: torch is not installed" in result.stdout
    # Asked not to run them, it says nothing; a file without models needs no note either.
    quiet = run_cli(".", "--no-shapes", cwd=tmp_path, prelude=BLOCK_TORCH)
    assert "shape checks" not in quiet.stderr and "All checks passed!" in quiet.stdout
    (tmp_path / "model.py").write_text(BUGGY)
    (tmp_path / "other.py").unlink()
    plain = run_cli(".", "--no-cache", cwd=tmp_path, prelude=BLOCK_TORCH)
    assert "shape checks" not in plain.stderr


def _readme_samples() -> list[tuple[str, list[str]]]:
    """(command, output lines) of each `$ torchlint ...` console block in the README."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    samples = []
    for block in re.findall(r"```console\n(.*?)```", text, re.DOTALL):
        lines = block.splitlines()
        if lines and re.fullmatch(r"\$ torchlint examples/\S*", lines[0]):
            samples.append((lines[0][2:], [line for line in lines[1:] if line != "..."]))
    return samples


def test_readme_sample_output_is_what_torchlint_prints() -> None:
    pytest.importorskip("torch")
    samples = _readme_samples()
    assert len(samples) >= 2
    for command, expected in samples:
        args = command.split()[1:]
        result = run_cli(*args, "--no-cache", cwd=ROOT)
        printed = set(result.stdout.splitlines())
        for line in expected:
            assert line in printed, (
                f"{command}: README shows a line torchlint does not print:\n{line}"
            )


@pytest.mark.parametrize(
    ("message", "unfinished"),
    [
        ("could not import the file: RuntimeError: operator torchvision::nms does not exist", True),
        ("shape check skipped: the worker stopped", True),
        ("shape check of Net skipped: Blocked: the model's code runs a subprocess", True),
        ("shape check of Net skipped: needs arguments: hidden_size", False),
    ],
)
def test_a_file_that_cannot_be_imported_counts_as_a_check_that_did_not_finish(
    message: str, unfinished: bool
) -> None:
    from torchlint.diagnostic import Diagnostic
    from torchlint.runner import _unfinished

    skipped = Diagnostic("model.py", 1, 1, 1, 2, "TL690", "shape-check-skipped", message)
    assert _unfinished(skipped) is unfinished


def test_models_skipped_without_tl690_shown_are_counted_on_stderr(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="shape checks (TL6xx) need torch installed")
    (tmp_path / "blocks.py").write_text(
        "import torch.nn as nn\n\n\n"
        "class Block(nn.Module):\n"
        "    def __init__(self, inner):\n"
        "        super().__init__()\n"
        "        self.inner = inner\n\n"
        "    def forward(self, x):\n"
        "        return self.inner(x)\n"
    )
    (tmp_path / "model.py").write_text(MODEL)
    hidden = run_cli(".", "--no-cache", cwd=tmp_path)
    assert hidden.returncode == 0, hidden.stderr
    assert "All checks passed!" in hidden.stdout
    assert "warning: 1 model not shape-checked; see --extend-select TL690" in hidden.stderr
    shown = run_cli(".", "--no-cache", "--extend-select", "TL690", cwd=tmp_path)
    assert "TL690 shape check of Block skipped: needs arguments: inner" in shown.stdout
    assert "not shape-checked" not in shown.stderr
