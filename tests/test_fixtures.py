"""Every fixture yields exactly the diagnostics marked inline in it, and no others."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixture_expectations import expected_pairs
from torchlint.engine import lint_bytes
from torchlint.registry import all_rules

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
# Shape fixtures (TL6xx) need torch and run in tests/test_shapes*.py.
SOURCE_FIXTURES = sorted(
    p for p in FIXTURES.glob("TL*.py") if ".fixed" not in p.name and not p.name.startswith("TL6")
)


@pytest.mark.parametrize("path", SOURCE_FIXTURES, ids=lambda p: p.stem)
def test_fixture_diagnostics(path: Path) -> None:
    diagnostics = lint_bytes(path.read_bytes(), str(path), set(all_rules()))
    found = {(d.line, d.code) for d in diagnostics}
    assert found == expected_pairs(path), "\n".join(
        f"{d.line}:{d.column} {d.code} {d.message}" for d in diagnostics
    )


PROJECT_FILES = sorted((FIXTURES / "projects").glob("*/**/*.py"))


@pytest.mark.parametrize(
    "path", PROJECT_FILES, ids=lambda p: p.relative_to(FIXTURES / "projects").as_posix()
)
def test_project_fixture_diagnostics(path: Path) -> None:
    """Each file of a multi-file fixture, linted alone, sees what it imports from the others."""
    diagnostics = lint_bytes(path.read_bytes(), str(path), set(all_rules()))
    found = {(d.line, d.code) for d in diagnostics}
    assert found == expected_pairs(path), "\n".join(
        f"{d.line}:{d.column} {d.code} {d.message}" for d in diagnostics
    )


def test_every_rule_has_a_fixture() -> None:
    names = {p.stem for p in SOURCE_FIXTURES}
    missing = [
        code for code, rule in all_rules().items() if not rule.engine_reported and code not in names
    ]
    assert not missing, f"rules without a fixture: {missing}"
