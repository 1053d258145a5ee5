"""The README's rules table and docs/rules.md are generated from the rules and kept current."""

from __future__ import annotations

from pathlib import Path

from torchlint.readme import render_readme, rules_reference
from torchlint.registry import all_rules

ROOT = Path(__file__).resolve().parent.parent


def test_readme_rules_table_is_current() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert text == render_readme(text), "run `python -m torchlint.readme` to regenerate"


def test_rule_reference_is_current() -> None:
    text = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    assert text == rules_reference(), "run `python -m torchlint.readme` to regenerate"


def test_every_rule_is_documented_in_ruff_sections() -> None:
    for code, rule in all_rules().items():
        doc = rule.doc()
        assert doc.summary, code
        for section in ("What it does", "Why is this bad?", "Example", "Use instead"):
            assert doc.sections.get(section), f"{code} lacks '## {section}'"
        assert rule.name == rule.name.lower() and " " not in rule.name, code
