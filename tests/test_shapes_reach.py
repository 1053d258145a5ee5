"""What widens the shape check's reach to more released models (static parts)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="shape checks (TL6xx) need torch installed")

from torchlint.shapes.siblings import stem


@pytest.mark.parametrize(
    ("name", "expected"),
    [("image1", "image"), ("image2", "image"), ("x_1", "x"), ("img", None), ("feat3d", None)],
)
def test_numbered_inputs_share_a_stem(name: str, expected: str | None) -> None:
    assert stem(name) == expected
