"""ruff's conventions: -o, --add-noqa, --show-settings, fix reporting, --config KEY=VALUE,
`extend`, `respect-gitignore`, colour and --torch-version."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import BUGGY, CLEAN, run_cli

FIXABLE = """\
import torch
import torch.nn.functional as F


def nll(logits):
    return torch.log(F.softmax(logits, dim=1))
"""
LOAD = "import torch\n\nstate = torch.load('weights.pt')\n"


def test_output_file_gets_the_report(project: Path) -> None:
    result = run_cli(".", "-o", "reports/out.txt", cwd=project)
    assert result.returncode == 1
    assert result.stdout == ""
    written = (project / "reports" / "out.txt").read_text()
    assert "buggy.py:5:28: TL101" in written and "Found 1 error." in written
    run_cli(".", "--output-file", "out.json", "--output-format", "json", cwd=project)
    assert '"TL101"' in (project / "out.json").read_text()


def test_add_noqa_silences_what_is_reported_today(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(BUGGY)
    (tmp_path / "b.py").write_text(
        'import torch\nDOC = """\ntext\n"""\nx = torch.load("w.pt")  # noqa: TL303\n'
    )
    result = run_cli(
        ".", "--add-noqa", "--select", "TL101,TL304,TL303", "--torch-version", "2.1", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert "Added 2 noqa comments." in result.stdout
    assert "F.softmax(logits, dim=1), y)  # noqa: TL101\n" in (tmp_path / "a.py").read_text()
    assert 'torch.load("w.pt")  # noqa: TL303, TL304\n' in (tmp_path / "b.py").read_text()
    again = run_cli(".", "--select", "TL101,TL304,TL303", "--torch-version", "2.1", cwd=tmp_path)
    assert again.returncode == 0 and "All checks passed!" in again.stdout


def test_add_noqa_leaves_multi_line_strings_alone(tmp_path: Path) -> None:
    from torchlint.add_noqa import add_noqa_to_source
    from torchlint.diagnostic import Diagnostic

    source = 'x = f("""\n  {a}\n""")\ny = 1\n'
    found = [Diagnostic("m.py", line, 1, line, 2, "TL101", "n", "m") for line in (1, 2, 4)]
    updated, changed = add_noqa_to_source(source, found)
    assert changed == 1
    assert updated == 'x = f("""\n  {a}\n""")\ny = 1  # noqa: TL101\n'


def test_show_settings(project: Path) -> None:
    (project / "pyproject.toml").write_text(
        '[tool.torchlint]\nignore = ["TL302"]\ntorch-version = "2.1"\n'
    )
    result = run_cli("--show-settings", "buggy.py", "--torch-version", "2.6", cwd=project)
    assert result.returncode == 0
    assert "pyproject.toml" in result.stdout
    assert 'ignore = ["TL302"]' in result.stdout
    assert 'torch-version = "2.6"' in result.stdout
    assert '"TL101"' in result.stdout.split("enabled = ")[1].splitlines()[0]


def test_fix_only_show_fixes_and_exit_non_zero_on_fix(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(FIXABLE + BUGGY.split("\n\n\n")[1])
    shown = run_cli("m.py", "--show-fixes", cwd=tmp_path)
    assert "`--fix` would fix:\n- m.py:\n    1 \u00d7 TL104 (log-of-softmax)" in shown.stdout
    fixed = run_cli("m.py", "--fix-only", "--show-fixes", cwd=tmp_path)
    assert fixed.returncode == 0  # the TL101 left over is not reported
    assert "Fixed:\n- m.py:\n    1 \u00d7 TL104 (log-of-softmax)" in fixed.stdout
    assert "Fixed 1 problem." in fixed.stdout and "TL101" not in fixed.stdout.split("Fixed 1")[1]
    assert "log_softmax" in (tmp_path / "m.py").read_text()
    (tmp_path / "n.py").write_text(FIXABLE)
    assert run_cli("n.py", "--fix", "--exit-non-zero-on-fix", cwd=tmp_path).returncode == 1
    # Nothing left to fix: 0 again.
    assert run_cli("n.py", "--fix", "--exit-non-zero-on-fix", cwd=tmp_path).returncode == 0
    (tmp_path / "o.py").write_text(FIXABLE)
    assert run_cli("o.py", "--fix", cwd=tmp_path).returncode == 0


def test_config_key_value_overrides(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.torchlint]\nselect = ["TL2"]\n')
    assert run_cli(".", cwd=project).returncode == 0
    result = run_cli(".", "--config", 'select = ["TL1"]', cwd=project)
    assert result.returncode == 1 and "TL101" in result.stdout
    both = run_cli(
        ".", "--config", 'select = ["TL1"]', "--config", 'ignore = ["TL101"]', cwd=project
    )
    assert both.returncode == 0
    bad = run_cli(".", "--config", "select=TL1", cwd=project)
    assert bad.returncode == 2 and "KEY = VALUE" in bad.stderr
    unknown = run_cli(".", "--config", "selekt = []", cwd=project)
    assert unknown.returncode == 2 and "unknown key 'selekt'" in unknown.stderr
    (project / "other.toml").write_text('select = ["TL1"]\n')
    assert run_cli(".", "--config", "other.toml", cwd=project).returncode == 1


def test_extend_builds_on_a_base_configuration(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.torchlint]\nselect = ["TL1", "TL3"]\nextend-exclude = ["gen"]\n'
    )
    sub = tmp_path / "sub"
    (sub / "gen").mkdir(parents=True)
    (sub / "gen" / "g.py").write_text(BUGGY)
    (sub / "m.py").write_text(BUGGY + "\n\n" + LOAD)
    (sub / "pyproject.toml").write_text(
        '[tool.torchlint]\nextend = "../pyproject.toml"\nextend-exclude = ["old"]\n'
        'ignore = ["TL304"]\n'
    )
    result = run_cli(".", cwd=sub)
    assert "m.py:5:28: TL101" in result.stdout  # selected by the base
    assert "TL304" not in result.stdout  # ignored here
    assert "g.py" not in result.stdout  # the base's extend-exclude is kept beside this one's
    (sub / "pyproject.toml").write_text('[tool.torchlint]\nextend = "missing.toml"\n')
    missing = run_cli(".", cwd=sub)
    assert missing.returncode == 2 and "missing.toml" in missing.stderr
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nextend = "sub/pyproject.toml"\n')
    (sub / "pyproject.toml").write_text('[tool.torchlint]\nextend = "../pyproject.toml"\n')
    cycle = run_cli(".", cwd=sub)
    assert cycle.returncode == 2 and "cycle" in cycle.stderr


def test_respect_gitignore_setting(project: Path) -> None:
    (project / ".git").mkdir()
    (project / ".gitignore").write_text("generated/\n")
    (project / "generated").mkdir()
    (project / "generated" / "m.py").write_text(CLEAN)
    assert "generated/m.py" not in run_cli(".", "--show-files", cwd=project).stdout
    (project / "pyproject.toml").write_text("[tool.torchlint]\nrespect-gitignore = false\n")
    assert "generated/m.py" in run_cli(".", "--show-files", cwd=project).stdout
    (project / "pyproject.toml").write_text('[tool.torchlint]\nrespect-gitignore = "no"\n')
    assert run_cli(".", cwd=project).returncode == 2


def test_color(project: Path) -> None:
    plain = run_cli(".", cwd=project)  # not a terminal
    assert "\x1b[" not in plain.stdout
    always = run_cli(".", "--color", "always", cwd=project)
    assert "\x1b[1;31mTL101\x1b[0m" in always.stdout
    assert "\x1b[" in run_cli(".", cwd=project, env={"FORCE_COLOR": "1"}).stdout
    no_color = run_cli(".", cwd=project, env={"FORCE_COLOR": "1", "NO_COLOR": "1"})
    assert "\x1b[" not in no_color.stdout
    assert (
        "\x1b["
        not in run_cli(".", "--color", "never", cwd=project, env={"FORCE_COLOR": "1"}).stdout
    )
    # JSON is never coloured.
    assert (
        "\x1b["
        not in run_cli(".", "--color", "always", "--output-format", "json", cwd=project).stdout
    )


def test_torch_version_option(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(LOAD)
    assert "TL304" in run_cli("m.py", "--no-cache", "--torch-version", "2.1", cwd=tmp_path).stdout
    assert "TL304" not in run_cli("m.py", "--torch-version", "2.6", cwd=tmp_path).stdout
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\ntorch-version = "2.6"\n')
    assert "TL304" not in run_cli("m.py", cwd=tmp_path).stdout
    assert "TL304" in run_cli("m.py", "--torch-version", "2.1", cwd=tmp_path).stdout
    bad = run_cli("m.py", "--torch-version", "latest", cwd=tmp_path)
    assert bad.returncode == 2 and "X.Y" in bad.stderr


def test_readme_options_table_lists_every_option() -> None:
    import argparse
    import re

    from torchlint.cli import build_parser

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    table = readme.split("| Option | Meaning |", 1)[1].split("\n\n", 1)[0]
    documented = set(re.findall(r"`(--[a-z-]+)", table))
    subparsers = next(
        a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)
    )
    check = subparsers.choices["check"]
    options = {
        option
        for action in check._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    }
    assert options - documented == set()
    assert documented - options == set()
