"""The prefilter skips rules (and files) without changing a single diagnostic."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import libcst as cst
import pytest

from torchlint import engine
from torchlint.diagnostic import SYNTAX_ERROR, Diagnostic
from torchlint.inputs import lint_input
from torchlint.prefilter import NO_PREFILTER_ENV, can_fire, rules_that_can_fire
from torchlint.registry import all_rules
from torchlint.rule import Rule

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
ALL_CODES = set(all_rules())
TREE_RULES = [rule for rule in all_rules().values() if not rule.engine_reported]
# Every source file and notebook of the fixtures: the rule fixtures, their fixed versions,
# the multi-file projects and the corpus of training scripts.
INPUTS = sorted(
    p for p in FIXTURES.rglob("*") if p.suffix in (".py", ".ipynb") and "__pycache__" not in p.parts
)


def _lint(path: Path) -> list[Diagnostic]:
    return lint_input(str(path), path.read_bytes(), ALL_CODES)


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: p.relative_to(FIXTURES).as_posix())
def test_the_prefilter_changes_no_diagnostic(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    filtered = _lint(path)
    monkeypatch.setenv(NO_PREFILTER_ENV, "1")
    assert _lint(path) == filtered


def test_the_fixtures_cover_both_paths() -> None:
    """Some fixture files are skipped by the prefilter, most are not: both paths are tested."""
    skipped = [
        p
        for p in INPUTS
        if p.suffix == ".py"
        and not engine.active_rules(p.read_text(encoding="utf-8", errors="replace"), ALL_CODES)
    ]
    assert skipped and len(skipped) < len(INPUTS) // 2


@pytest.mark.parametrize("rule", TREE_RULES, ids=lambda r: r.code)
def test_declared_triggers_are_well_formed(rule: type[Rule]) -> None:
    groups = (rule.triggers, *rule.requires)
    assert isinstance(rule.triggers, tuple) and isinstance(rule.requires, tuple)
    assert all(isinstance(group, tuple) for group in groups)
    assert all(group for group in rule.requires), "an empty group could never match"
    assert all(isinstance(token, str) and token for group in groups for token in group)


@pytest.mark.parametrize("rule", TREE_RULES, ids=lambda r: r.code)
def test_a_rule_is_run_wherever_its_tokens_are(rule: type[Rule]) -> None:
    tokens = " ".join(group[0] for group in (rule.triggers, *rule.requires) if group)
    assert can_fire(rule, f"import torch\n# {tokens}\n")
    assert rule in rules_that_can_fire(f"import torch\n{tokens}\n", TREE_RULES)
    if rule.triggers:
        assert not can_fire(rule, "import torch\n")


class _Untriggered(Rule):
    code = "TL998"
    name = "untriggered"


class _TwoGroups(Rule):
    code = "TL997"
    name = "two-groups"
    triggers: ClassVar[tuple[str, ...]] = ("alpha", "beta")
    requires: ClassVar[tuple[tuple[str, ...], ...]] = (("gamma",),)


def test_a_rule_without_triggers_is_always_run() -> None:
    assert rules_that_can_fire("import torch\n", [_Untriggered]) == [_Untriggered]
    assert rules_that_can_fire("import torch\nx = 1\n", [_Untriggered, _TwoGroups]) == [
        _Untriggered
    ]


def test_every_group_of_tokens_is_needed() -> None:
    assert not can_fire(_TwoGroups, "beta")
    assert not can_fire(_TwoGroups, "gamma")
    assert can_fire(_TwoGroups, "beta gamma")


def test_files_without_torch_are_not_linted_even_with_the_prefilter_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert rules_that_can_fire("x = 1\n", [_Untriggered]) == []
    monkeypatch.setenv(NO_PREFILTER_ENV, "1")
    assert rules_that_can_fire("x = 1\n", [_Untriggered, _TwoGroups]) == []
    assert rules_that_can_fire("import torch\n", [_Untriggered, _TwoGroups]) == [
        _Untriggered,
        _TwoGroups,
    ]


def test_a_skipped_file_is_not_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(source: str) -> cst.Module:
        raise AssertionError("parsed")

    monkeypatch.setattr(cst, "parse_module", refuse)
    assert engine.lint_source("import os\nprint(os.sep)\n", "m.py", ALL_CODES) == []


@pytest.mark.parametrize(
    "source",
    [
        "x = 1\ndef f(:\n",
        "x = (" * 300 + ")" * 300 + "\n",
        "x = " + " + ".join(["a"] * 600) + "\n",
    ],
    ids=["syntax", "nesting", "long-expression"],
)
def test_a_skipped_file_is_still_reported_when_it_cannot_be_parsed(
    source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    filtered = engine.lint_source(source, "m.py", ALL_CODES)
    assert [d.code for d in filtered] == [SYNTAX_ERROR]
    monkeypatch.setenv(NO_PREFILTER_ENV, "1")
    assert engine.lint_source(source, "m.py", ALL_CODES) == filtered


SPELLED_APART = """\
import torch
import torch.nn as nn

model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in [(torch.randn(2, 4), torch.randn(2, 1))]:
    loss = nn.functional.mse_loss(model (x), y)
    loss.backward()
    optimizer . step ()
    print(loss.data[ 0 ], loss.data[(0)], loss.data[0,])
"""


def test_tokens_spelled_with_spaces_still_count(monkeypatch: pytest.MonkeyPatch) -> None:
    filtered = engine.lint_source(SPELLED_APART, "train.py", ALL_CODES)
    assert [d.code for d in filtered].count("TL705") == 3
    monkeypatch.setenv(NO_PREFILTER_ENV, "1")
    assert engine.lint_source(SPELLED_APART, "train.py", ALL_CODES) == filtered


def test_tokens_split_by_whitespace_or_a_line_continuation_are_found() -> None:
    assert can_fire(_Spaced, "x . to (device)")
    assert can_fire(_Spaced, "x.to \\\n (device)")
    assert not can_fire(_Spaced, "x.total(device)")


class _Spaced(Rule):
    code = "TL996"
    name = "spaced"
    triggers: ClassVar[tuple[str, ...]] = (".to(",)
