"""The command line as a user drives it: exit codes, formats, configuration, suppression."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import BUGGY, run_cli

SCHEMA = Path(__file__).resolve().parents[2] / "shared" / "schemas" / "sarif-schema-2.1.0.json"


def test_exit_codes(project: Path) -> None:
    assert run_cli("clean.py", cwd=project).returncode == 0
    found = run_cli(".", cwd=project)
    assert found.returncode == 1
    assert "buggy.py:5:28: TL101" in found.stdout
    assert run_cli(".", "--exit-zero", cwd=project).returncode == 0
    assert run_cli(".", "--select", "NOPE", cwd=project).returncode == 2
    assert run_cli("missing.py", cwd=project).returncode == 2


def test_check_subcommand_and_default_path(project: Path) -> None:
    explicit = run_cli("check", ".", cwd=project)
    implicit = run_cli(cwd=project)
    assert explicit.stdout == implicit.stdout
    assert "TL101" in implicit.stdout


def test_json_has_every_field(project: Path) -> None:
    result = run_cli(".", "--output-format", "json", cwd=project)
    [item] = json.loads(result.stdout)
    assert item["code"] == "TL101"
    assert item["name"] == "softmax-before-cross-entropy"
    assert item["filename"] == "buggy.py"
    assert item["location"] == {"row": 5, "column": 28}
    assert item["end_location"]["row"] == 5
    assert item["severity"] == "error"
    assert "logits" in item["message"]
    assert item["url"].endswith("#tl101-softmax-before-cross-entropy")


def test_json_lines(project: Path) -> None:
    result = run_cli(".", "--output-format", "json-lines", cwd=project)
    lines = result.stdout.splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["code"] == "TL101"


def test_full_format_shows_source_and_caret(project: Path) -> None:
    result = run_cli(".", "--output-format", "full", cwd=project)
    assert "5 |     return F.cross_entropy(F.softmax(logits, dim=1), y)" in result.stdout
    caret_line = next(line for line in result.stdout.splitlines() if "^" in line)
    assert caret_line.index("^") == result.stdout.splitlines()[2].index("F.softmax")
    assert "help:" in result.stdout


def test_sarif_validates_against_the_official_schema(project: Path) -> None:
    if not SCHEMA.is_file():
        pytest.skip(f"SARIF 2.1.0 schema not found at {SCHEMA}")
    jsonschema = pytest.importorskip("jsonschema")
    first = json.loads(run_cli(".", "--output-format", "sarif", cwd=project).stdout)
    schema = json.loads(SCHEMA.read_text())
    jsonschema.validators.validator_for(schema)(schema).validate(first)
    run = first["runs"][0]
    [result] = run["results"]
    assert result["ruleId"] == "TL101"
    assert run["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == "TL101"
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "buggy.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"]["startLine"] == 5
    # Fingerprints survive a rerun and a shift of the code by a few lines.
    (project / "buggy.py").write_text("# a new header comment\n\n" + BUGGY)
    second = json.loads(run_cli(".", "--output-format", "sarif", cwd=project).stdout)
    moved = second["runs"][0]["results"][0]
    assert moved["locations"][0]["physicalLocation"]["region"]["startLine"] == 7
    assert moved["partialFingerprints"] == result["partialFingerprints"]


def test_github_format_escapes_paths_and_messages(tmp_path: Path) -> None:
    (tmp_path / "a,b:c.py").write_text(BUGGY)
    result = run_cli(".", "--output-format", "github", cwd=tmp_path)
    [line] = result.stdout.splitlines()
    assert line.startswith("::error file=a%2Cb%3Ac.py,line=5,col=28,endLine=5,endColumn=")
    assert ",title=torchlint (TL101)::TL101 " in line


def test_junit_format(project: Path) -> None:
    import xml.etree.ElementTree as ET

    root = ET.fromstring(run_cli(".", "--output-format", "junit", cwd=project).stdout)
    case = root.find("testsuite/testcase")
    assert case is not None and case.get("name") == "org.torchlint.TL101"
    assert root.get("failures") == "1"


def test_statistics(project: Path) -> None:
    result = run_cli(".", "--statistics", cwd=project)
    assert result.stdout.split() == ["1", "TL101", "softmax-before-cross-entropy"]


def test_stdin_filename(tmp_path: Path) -> None:
    result = run_cli("--stdin-filename", "model.py", cwd=tmp_path, stdin=BUGGY.encode())
    assert result.returncode == 1
    assert "model.py:5:28: TL101" in result.stdout


def test_select_ignore_prefixes(project: Path) -> None:
    assert run_cli(".", "--ignore", "TL1", cwd=project).returncode == 0
    assert run_cli(".", "--select", "TL2,TL3", cwd=project).returncode == 0
    assert run_cli(".", "--select", "TL101", "--ignore", "TL1", cwd=project).returncode == 1
    assert run_cli(".", "--select", "ALL", "--ignore", "TL101", cwd=project).returncode == 0


def test_config_discovery_and_per_file_ignores(project: Path) -> None:
    sub = project / "pkg"
    sub.mkdir()
    (sub / "model.py").write_text(BUGGY)
    (project / "pyproject.toml").write_text(
        '[tool.torchlint]\nper-file-ignores = { "pkg/*.py" = ["TL101"] }\n'
    )
    result = run_cli(".", cwd=project)
    assert "buggy.py" in result.stdout and "pkg/model.py" not in result.stdout
    # A nearer pyproject.toml governs the files below it.
    (sub / "pyproject.toml").write_text('[tool.torchlint]\nselect = ["TL101"]\n')
    assert "pkg/model.py" in run_cli(".", cwd=project).stdout


def test_unknown_key_or_code_is_a_clear_error(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.torchlint]\nselekt = ["TL101"]\n')
    result = run_cli(".", cwd=project)
    assert result.returncode == 2
    assert "unknown key 'selekt'" in result.stderr and "pyproject.toml" in result.stderr
    assert "Traceback" not in result.stderr
    (project / "pyproject.toml").write_text('[tool.torchlint]\nignore = ["TL9999"]\n')
    result = run_cli(".", cwd=project)
    assert result.returncode == 2 and "TL9999" in result.stderr


def test_exclude_and_force_exclude(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.torchlint]\nextend-exclude = ["buggy.py"]\n')
    assert run_cli(".", cwd=project).returncode == 0
    # Named explicitly, it is checked, unless --force-exclude (as pre-commit passes files).
    assert run_cli("buggy.py", cwd=project).returncode == 1
    assert run_cli("buggy.py", "--force-exclude", cwd=project).returncode == 0


def test_gitignore_and_default_excludes(project: Path) -> None:
    (project / ".git").mkdir()
    (project / ".gitignore").write_text("generated/\n")
    for folder in ("generated", ".venv", "build", "nb/.ipynb_checkpoints"):
        (project / folder).mkdir(parents=True)
        (project / folder / "m.py").write_text(BUGGY)
    result = run_cli(".", "--show-files", cwd=project)
    assert sorted(result.stdout.split()) == ["buggy.py", "clean.py"]


def test_noqa_comments(tmp_path: Path) -> None:
    line = "    return F.cross_entropy(F.softmax(logits, dim=1), y)"
    for suffix, expected in [
        ("  # noqa: TL101", 0),
        ("  # noqa", 0),
        ("  # noqa: TL102, TL103", 1),
        ("  # noqa:TL102,TL101", 0),
    ]:
        (tmp_path / "m.py").write_text(BUGGY.replace(line, line + suffix))
        assert run_cli("m.py", cwd=tmp_path).returncode == expected, suffix
    (tmp_path / "m.py").write_text("# torchlint: noqa: TL101\n" + BUGGY)
    assert run_cli("m.py", cwd=tmp_path).returncode == 0
    (tmp_path / "m.py").write_text("# torchlint: noqa\n" + BUGGY)
    assert run_cli("m.py", cwd=tmp_path).returncode == 0


def test_parallel_jobs_give_the_same_sorted_output(tmp_path: Path) -> None:
    for i in range(40):
        (tmp_path / f"m{i:02d}.py").write_text(BUGGY if i % 3 == 0 else "import torch\n")
    serial = run_cli(".", "--jobs", "1", "--no-cache", cwd=tmp_path)
    parallel = run_cli(".", "--jobs", "2", "--no-cache", cwd=tmp_path)
    assert serial.stdout == parallel.stdout
    assert serial.stdout.count("TL101") == 14
    paths = [line.split(":")[0] for line in serial.stdout.splitlines() if "TL101" in line]
    assert paths == sorted(paths)


def test_cache_hit_then_miss_after_edit(project: Path) -> None:
    first = run_cli(".", "--verbose", cwd=project)
    assert "2 from the cache" not in first.stderr
    assert (project / ".torchlint_cache" / "CACHEDIR.TAG").is_file()
    assert (project / ".torchlint_cache" / ".gitignore").read_text() == "*\n"
    second = run_cli(".", "--verbose", cwd=project)
    assert "checked 2 files, 2 from the cache" in second.stderr
    assert second.stdout == first.stdout
    (project / "buggy.py").write_text(BUGGY.replace("F.softmax(logits, dim=1)", "logits"))
    third = run_cli(".", "--verbose", cwd=project)
    assert "checked 2 files, 1 from the cache" in third.stderr
    assert third.returncode == 0
    assert "0 from the cache" in run_cli(".", "--verbose", "--no-cache", cwd=project).stderr


def test_rule_command(tmp_path: Path) -> None:
    text = run_cli("rule", "TL101", cwd=tmp_path).stdout
    for heading in ("## What it does", "## Why is this bad?", "## Example", "## Use instead"):
        assert heading in text
    data = json.loads(run_cli("rule", "--all", "--output-format", "json", cwd=tmp_path).stdout)
    assert {"TL000", "TL101", "TL501"} <= {item["code"] for item in data}
    assert run_cli("rule", "TL555", cwd=tmp_path).returncode == 2


def test_version_and_help(tmp_path: Path) -> None:
    assert run_cli("--version", cwd=tmp_path).stdout.startswith("torchlint ")
    assert "--select" in run_cli("check", "--help", cwd=tmp_path).stdout


BLOCK_TORCH = """
import sys
class _BlockTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch is blocked for this test")
sys.meta_path.insert(0, _BlockTorch())
"""


def test_source_rules_work_without_torch(project: Path) -> None:
    with_torch = run_cli(".", "--no-cache", "--output-format", "json", cwd=project)
    without = run_cli(
        ".", "--no-cache", "--output-format", "json", cwd=project, prelude=BLOCK_TORCH
    )
    assert without.returncode == 1, without.stderr
    assert json.loads(without.stdout) == json.loads(with_torch.stdout)
    assert "TL101" in without.stdout
