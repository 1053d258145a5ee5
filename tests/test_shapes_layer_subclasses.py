"""A library's subclass of a torch layer is checked as that layer."""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="shape checks (TL6xx) need torch installed")

from torch import nn
from torch.nn import functional as F

from torchlint.shapes.findings import describe_layer
from torchlint.shapes.propagate import library_layer


class CastLinear(nn.Linear):
    """Like timm's `Linear`: its own forward, the same op on its own weight."""

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)


class Gated(nn.Module):
    def forward(self, x):
        return x


def test_a_library_subclass_of_a_layer_is_that_layer() -> None:
    assert library_layer(CastLinear(4, 2), user_files=set())
    assert describe_layer(CastLinear(4, 2)) == "CastLinear(4, 2)"
    assert describe_layer(nn.Linear(4, 2)) == "nn.Linear(4, 2)"


def test_a_subclass_with_the_users_forward_is_the_users_layer() -> None:
    # Its forward may do anything: a failure in it is told inside that forward.
    assert not library_layer(CastLinear(4, 2), user_files={__file__})
    assert not library_layer(nn.Linear(4, 2), user_files=set())
    assert not library_layer(Gated(), user_files=set())
