"""Forward parameters that take values (a dtype, the batch size), and inputs read only on a
branch the model does not take."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from torchlint.shapes.infer import unread_input_plans  # noqa: E402
from torchlint.shapes.value_arguments import assumes_layout, value_arguments  # noqa: E402


class Conditioned(nn.Module):
    def __init__(self, extra: bool = False) -> None:
        super().__init__()
        self.use_extra = extra
        self.fc = nn.Linear(4, 4)

    def forward(self, x, extra, batch_size, hidden_dtype):
        if self.use_extra:
            x = x + extra
        return self.fc(x.to(hidden_dtype)).reshape(batch_size, -1)


class Typed(nn.Module):
    def forward(self, x: torch.Tensor, dtype: torch.dtype, steps: int):
        return x.to(dtype) * steps


class Drawn(nn.Module):
    def forward(self, src, trg, teacher_forcing_ratio, multimask_output: bool):
        return src if multimask_output else trg


def test_values_are_handed_on_beside_the_tensors() -> None:
    found = value_arguments(Conditioned())
    assert found == (
        ["x", "extra"],
        {"batch_size": "x.shape[0]", "hidden_dtype": "torch.float32"},
    )
    assert assumes_layout(found[1])
    # A dtype alone assumes nothing; an int that is no batch size is not given.
    typed = value_arguments(Typed())
    assert typed == (["x", "steps"], {"dtype": "torch.float32"})
    assert not assumes_layout(typed[1])
    assert value_arguments(nn.Linear(2, 2)) is None
    # A flag annotated `bool` is False; a ratio the forward draws against is 0.5.
    drawn = value_arguments(Drawn())
    assert drawn == (["src", "trg"], {"teacher_forcing_ratio": "0.5", "multimask_output": "False"})
    assert not assumes_layout(drawn[1])


def test_an_input_read_only_on_a_branch_not_taken_takes_any_shape() -> None:
    plans = unread_input_plans(Conditioned(extra=False), "extra")
    assert plans is not None and [d.name for d in plans[0].specs[0].dims] == ["N"]
    assert unread_input_plans(Conditioned(extra=True), "extra") is None
    assert unread_input_plans(Conditioned(), "x") is None
