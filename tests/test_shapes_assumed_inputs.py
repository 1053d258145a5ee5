"""Inputs found past a custom layer taken to keep their shape: plans marked as assumed."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from torchlint.shapes.assumed_inputs import is_assumed  # noqa: E402
from torchlint.shapes.described_shapes import sliced_plans  # noqa: E402
from torchlint.shapes.infer import infer_from_source  # noqa: E402
from torchlint.shapes.inputs import Dim, InputPlan, TensorSpec, combine  # noqa: E402


class GroupNormed(nn.Module):
    def forward(self, x, emb):
        return F.group_norm(x, 4) + emb[:, :, None, None]


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = GroupNormed()
        self.conv = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x, emb):
        h = self.norm(x, emb)
        return self.conv(h)


class Nested(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = GroupNormed()
        self.conv = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x, emb):
        return self.conv(self.norm(x, emb) + 1)


def test_the_layer_after_a_sizeless_one_gives_an_assumed_plan() -> None:
    assert infer_from_source(Block(), 0) is None
    plans = infer_from_source(Block(), 0, past_layers=True)
    assert plans is not None and all(is_assumed(p) for p in plans)
    assert [d.name or d.hint for d in plans[0].specs[0].dims] == ["N", 8, "H", "W"]
    assert "self.norm" in plans[0].label and not plans[0].evidenced
    # Inside an expression the call's result is not what the next layer reads by name.
    assert infer_from_source(Nested(), 0, past_layers=True) is None


def test_one_assumed_input_makes_the_whole_plan_assumed() -> None:
    free = InputPlan([TensorSpec([Dim.free("N")])])
    assumed = InputPlan([TensorSpec([Dim.free("N"), Dim.fixed(8)])], "assumed", "a label")
    [plan] = combine([[free], [assumed]])
    assert is_assumed(plan) and plan.label == "a label"


class Sliced(nn.Module):
    def forward(self, x, table, other):
        table = table.to(x.device)
        return x, table[:2, :3], other[:2], other.sum()


def test_an_input_only_cut_with_slices_has_at_least_that_many_sizes() -> None:
    plans = sliced_plans(Sliced(), "table")
    assert plans is not None and is_assumed(plans[0])
    assert len(plans[0].specs[0].dims) == 2
    assert sliced_plans(Sliced(), "other") is None  # read otherwise too
    assert sliced_plans(Sliced(), "x") is None


class MaskedPool(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(12)

    def forward(self, feats, mask):
        weights = mask.float().unsqueeze(-1)
        pooled = (feats * weights).sum(dim=1) / weights.sum(dim=1)
        return self.norm(pooled)


def test_a_masked_sum_over_tokens_gives_an_assumed_sequence() -> None:
    assert infer_from_source(MaskedPool(), 0) is None
    plans = infer_from_source(MaskedPool(), 0, past_layers=True)
    assert plans is not None and all(is_assumed(p) for p in plans)
    assert [[d.name or d.hint for d in p.specs[0].dims] for p in plans] == [["N", "L", 12]]
    assert "a product with another tensor" in plans[0].label
