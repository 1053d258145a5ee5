"""A detector's check stops where sizes start to depend on tensor values, and says so."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch", reason="shape checks (TL6xx) need torch installed")

from torchlint.shapes import check_files

SHAPES = Path(__file__).resolve().parent.parent / "fixtures" / "shapes"


def test_a_head_past_the_stop_is_told_with_the_line_of_the_stop() -> None:
    path = SHAPES / "detector_images.py"
    stats: dict = {}
    found = check_files([(str(path), path.read_text(encoding="utf-8"))], stats=stats)
    messages = {d.line: d.message for d in found[str(path)]}
    refiner = messages[43]
    assert "models that build it (TwoStageDetector) stopped at detector_images.py:93" in refiner
    assert "depend on the values of tensors" in refiner
    assert "were not checked (refine.fc)" in messages[81]
    # Two RGB images of unlike sizes, padded to the larger sides (112 x 128) by the model.
    assert "its input is [2, 16, 56, 64]" in messages[57]
    results = {r["model"]: r["result"] for r in stats[str(path)]}
    # The detector is checked; the base class whose forward its head runs is covered.
    assert results["GoodDetector"] == results["TwoStageDetector"] == "ok"
    assert results["ScoringHead"] == "covered"
