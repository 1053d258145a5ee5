"""Shape findings land on the line the user has to change."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch", reason="shape checks (TL6xx) need torch installed")

import torch
from torch import nn
from torch.nn import functional as F

from torchlint.shapes import check_files
from torchlint.shapes.deferred import sympy
from torchlint.shapes.findings import describe_layer, splits_samples
from torchlint.shapes.propagate import Failure, library_layer


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


def _reshape(shape: tuple, target: list[int]) -> Failure:
    return Failure(RuntimeError("invalid for input"), op="view", inputs=[shape], target=target)


def test_a_reshape_that_splits_samples_is_a_bug_for_any_batch() -> None:
    batch = sympy.Symbol("N@1", positive=True, integer=True)
    names = {batch: "N"}
    assert splits_samples(_reshape((batch, 20, 4, 4), [-1, 321]), names)
    assert splits_samples(_reshape((batch, 784), [-1, 29, 28]), names)
    # Whole samples, pairs of samples, whole parts of one sample: batches of any size fit.
    assert not splits_samples(_reshape((batch, 20, 4, 4), [-1, 320]), names)
    assert not splits_samples(_reshape((batch, 320), [-1, 2, 320]), names)
    assert not splits_samples(_reshape((batch, 784), [-1, 16]), names)
    # Not the batch in front, or a size not known: nothing to say.
    assert not splits_samples(_reshape((batch, 20, 4, 4), [batch, 321]), names)
    assert not splits_samples(_reshape((4, 320), [-1, 321]), names)
    height = sympy.Symbol("H@1", positive=True, integer=True)
    assert not splits_samples(_reshape((batch, height, 4), [-1, 321]), {**names, height: "H"})


def test_messages_say_what_to_change_at_the_line_reported() -> None:
    shapes = Path(__file__).resolve().parent.parent / "fixtures" / "shapes"
    paths = [shapes / name for name in ("missing_flatten.py", "batch_reshapes.py")]
    paths += [shapes / "layer_subclasses.py", shapes / "paired_images.py"]
    found = check_files([(str(p), p.read_text(encoding="utf-8")) for p in paths])
    messages = {(Path(k).name, d.line): d.message for k, ds in found.items() for d in ds}
    flatten = messages["missing_flatten.py", 12]
    assert flatten.endswith("add .flatten(2) before it") and "write" not in flatten
    assert messages["batch_reshapes.py", 19].endswith(
        "rows of 321 values would mix samples of 320 values each"
    )
    assert messages["layer_subclasses.py", 25].endswith("write CastLinear(8, 10)")
    assert "(each input)" in messages["paired_images.py", 11]
    assert "on dim 2 (2-D)" in messages["paired_images.py", 33]


def test_a_length_against_the_models_own_only_for_token_sequences() -> None:
    """TL607 compares a guessed length `L` with the model's own (`max_position_embeddings`)
    only where `L` counts tokens: ids `[N, L]` or vectors `[N, L, 768]`; in a float input
    with another free size (`[N, L, T]`: mel bins by frames) `L` may be anything else."""
    from torchlint.shapes.findings import _token_sequence
    from torchlint.shapes.inputs import Dim, InputPlan, TensorSpec

    n, length, frames = Dim.free("N"), Dim.free("L"), Dim.free("T")
    ids = InputPlan([TensorSpec([n, length], torch.long)])
    vectors = InputPlan([TensorSpec([n, length, Dim.fixed(768)], torch.float32)])
    mel = InputPlan([TensorSpec([n, length, frames], torch.float32)])
    assert _token_sequence(ids, "L") and _token_sequence(vectors, "L")
    assert not _token_sequence(mel, "L")
