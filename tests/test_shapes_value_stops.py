"""A detector's check stops where sizes start to depend on tensor values, and says so."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch", reason="shape checks (TL6xx) need torch installed")

from torchlint.shapes import check_files

SHAPES = Path(__file__).resolve().parent.parent / "fixtures" / "shapes"


def test_a_model_stopped_by_values_is_told_with_the_line_of_the_stop() -> None:
    path = SHAPES / "detector_images.py"
    stats: dict = {}
    found = check_files([(str(path), path.read_text(encoding="utf-8"))], stats=stats)
    messages = {d.line: d.message for d in found[str(path)]}
    # The refiner, which the detector builds past its stop, is checked on its own: its call
    # site's pooling layer is built and its channels are guessed.
    assert 43 not in messages
    assert "were not checked (refine.fc)" in messages[81]
    # Two RGB images of unlike sizes, padded to the larger sides (112 x 128) by the model.
    assert "its input is [2, 16, 56, 64]" in messages[57]
    results = {r["model"]: r["result"] for r in stats[str(path)]}
    # The detector is checked; the base class whose forward its head runs is covered.
    assert results["GoodDetector"] == results["TwoStageDetector"] == "ok"
    assert results["ScoringHead"] == "covered"


PADS_PICKED = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class PadsPicked(nn.Module):
    def __init__(self):
        super().__init__()
        self.score = nn.Linear(32, 1)
        self.proj = nn.Linear(32, 32)
        self.out = nn.Linear(32, 10)

    def forward(self, x):
        x = self.proj(x)
        keep = torch.nonzero(self.score(x)[:, 0] > 0).squeeze(-1)
        picked = x[keep]
        picked = F.pad(picked, (0, 0, 0, 64 - picked.shape[0]))
        return self.out(picked)
"""


def test_a_size_from_values_handed_to_an_op_that_takes_numbers_is_a_stop(
    tmp_path: Path,
) -> None:
    """`F.pad` refuses the count of kept tokens (an unbacked size): the run stops there, as
    at a branch on values, and the layers after it are told."""
    path = tmp_path / "picked.py"
    path.write_text(PADS_PICKED, encoding="utf-8")
    found = check_files([(str(path), PADS_PICKED)])[str(path)]
    assert [d.code for d in found] == ["TL690"]
    assert "stopped at picked.py:18" in found[0].message
    assert "were not checked (out)" in found[0].message


@pytest.mark.parametrize(
    "message",
    [
        # Qwen-VL's vision tower: patch grids read from `grid_thw`'s values.
        "reshape(): argument 'shape' (position 1) must be tuple of ints, but found element of"
        " type SymFloat at pos 0",
        "empty(): argument 'size' (position 1) must be tuple of ints, but found element of"
        " type SymInt at pos 1",
    ],
)
def test_a_size_read_from_tensor_values_is_not_a_shape_error(message: str) -> None:
    """No input size changes a size taken from a tensor's values: such an error is not
    probed at other sizes (Qwen-VL's vision tower ran at six of them) nor reported."""
    from torchlint.shapes import findings

    assert not findings.shape_like(TypeError(message))
    assert findings.shape_like(TypeError("reshape(): shape '[2, -1, 8]' is invalid for input"))
