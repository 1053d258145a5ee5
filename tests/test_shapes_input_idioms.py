"""Inputs whose shape comes from how forward uses them: a recurrent layer's state, an axis
added after the last one, a permute, a mask named after another input, the torch layer a
class extends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from torchlint.shapes.described_shapes import indexed_plans  # noqa: E402
from torchlint.shapes.infer import infer_from_base_layer  # noqa: E402
from torchlint.shapes.inputs import Dim, InputPlan, TensorSpec, combine  # noqa: E402
from torchlint.shapes.recurrent_state import state_plans  # noqa: E402
from torchlint.shapes.siblings import mask_plans  # noqa: E402


def _shapes(plans: list[InputPlan] | None) -> list[list[list[str | int]]]:
    return [[[d.name or d.hint for d in spec.dims] for spec in plan.specs] for plan in plans or []]


class Tagger(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 8)
        self.rnn = nn.LSTM(8, 16, 2, bidirectional=True)

    def forward(self, tokens, hidden):
        return self.rnn(self.embed(tokens), hidden)


class BatchFirstGRU(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.GRU(4, 6, batch_first=True)

    def forward(self, x, h):
        return self.rnn(x, hx=h)


def test_recurrent_state_follows_the_layer_and_the_batch_it_sees() -> None:
    tokens = [InputPlan([TensorSpec([Dim.free("N"), Dim.free("L")], torch.long)])]
    lstm = state_plans(Tagger(), "hidden", tokens)
    assert _shapes(lstm) == [[[4, "L", 16], [4, "L", 16]]]
    assert lstm is not None and lstm[0].packed == (2,) and lstm[0].exact
    sequence = [InputPlan([TensorSpec([Dim.free("N"), Dim.free("L"), Dim.fixed(4)])])]
    assert _shapes(state_plans(BatchFirstGRU(), "h", sequence)) == [[[1, "N", 6]]]
    assert state_plans(Tagger(), "tokens", tokens) is None


def test_plain_tensors_beside_a_list_stay_tensors() -> None:
    first = InputPlan([TensorSpec([Dim.free("N")])])
    pair = InputPlan([TensorSpec([Dim.fixed(1)]), TensorSpec([Dim.fixed(2)])], packed=(2,))
    plan = combine([[first], [pair]])[0]
    assert plan.packed == (0, 2)
    assert plan.arguments(["a", "b", "c"]) == ["a", ["b", "c"]]


class Fourier(nn.Module):
    def forward(self, x):
        x = torch.log(x)
        return x[:, None] * 2


class Leading(nn.Module):
    def forward(self, x):
        return x[None, :]


class Pool(nn.Module):
    def forward(self, x):
        x = x.permute(1, 0, 2)
        return x[0]


def test_rank_from_a_trailing_new_axis_or_a_permute() -> None:
    assert _shapes(indexed_plans(Fourier(), "x")) == [[["N"]]]
    assert indexed_plans(Leading(), "x") is None  # adds an axis to any tensor
    assert _shapes(indexed_plans(Pool(), "x")) == [[["N", "L", "C"]]]


def test_mask_named_after_an_input() -> None:
    states = [
        InputPlan([TensorSpec([Dim.free("N"), Dim.fixed(32)])]),
        InputPlan([TensorSpec([Dim.free("N"), Dim.free("L"), Dim.fixed(32)])]),
    ]
    names = ["encoder_hidden_states", "encoder_attention_mask"]
    masks = mask_plans(names, 1, [states])
    assert _shapes(masks) == [[["N"]], [["N", "L"]]]
    assert masks is not None and masks[1].specs[0].dtype == torch.bool
    assert mask_plans(["image", "attention_mask"], 1, [states[:1]]) is None
    assert mask_plans(["tokens", "attention_mask"], 1, [states]) is None  # any rank


class Normalized(nn.Linear):
    def forward(self, x):
        return torch.mm(x / x.norm(), self.weight.T)


def test_a_class_extending_a_torch_layer_takes_its_input() -> None:
    plans = infer_from_base_layer(Normalized(12, 3), 0)
    assert _shapes(plans) == [[["N", 12]], [["N", "L", 12]]]
    assert infer_from_base_layer(nn.Linear(12, 3), 0) is None  # torch's own forward


VGG_SLICES = """
import torch
from torchvision import models


class Slices(torch.nn.Module):
    def __init__(self):
        super().__init__()
        features = models.vgg11(weights=models.VGG11_Weights.IMAGENET1K_V1).features
        self.slice1 = torch.nn.Sequential(*[features[i] for i in range(4)])

    def forward(self, x):
        return self.slice1(x)
"""


def test_pretrained_torchvision_parts_are_built_without_their_weights(tmp_path: Path) -> None:
    pytest.importorskip("torchvision")
    from torchlint.shapes import check_files

    path = tmp_path / "vgg_slices.py"
    path.write_text(VGG_SLICES)
    stats: dict[str, list[dict[str, Any]]] = {}
    found = check_files([(str(path), VGG_SLICES)], timeout=120, stats=stats)
    assert not [d for ds in found.values() for d in ds], found
    assert [r["result"] for rs in stats.values() for r in rs] == ["ok"]


class SteppedCell(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.LSTMCell(3, 5)

    def forward(self, series, state):
        for step in series.split(3, dim=-1):
            state = self.cell(step, state)
        return state


class UnboundCell(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.GRUCell(4, 5)

    def forward(self, frames, h):
        for frame in frames.unbind(1):
            h = self.cell(frame, h)
        return h


def test_a_loop_over_slices_frees_the_sliced_dimension() -> None:
    from torchlint.shapes.infer import infer_from_source

    assert _shapes(infer_from_source(SteppedCell(), 0)) == [[["N", "L"]]]
    assert _shapes(infer_from_source(UnboundCell(), 0)) == [[["N", "L", 4]]]


def test_a_waveform_is_probed_at_a_second_of_audio_first() -> None:
    from torchlint.shapes.check import PROBE_SIZES, _probes, _takes_audio

    class Encoder(torch.nn.Module):
        def forward(self, input_values: torch.Tensor) -> torch.Tensor:
            return input_values

    class Classifier(torch.nn.Module):
        def forward(self, images: torch.Tensor) -> torch.Tensor:
            return images

    assert _takes_audio(Encoder()) and not _takes_audio(Classifier())
    assert next(_probes(["N", "T"], audio=True)) == {"N": PROBE_SIZES[0], "T": 16000}
    assert next(_probes(["H", "W"], audio=True)) == {"H": PROBE_SIZES[0], "W": PROBE_SIZES[0]}
    assert next(_probes(["N", "T"])) == {"N": PROBE_SIZES[0], "T": PROBE_SIZES[0]}


def test_the_parts_of_a_chunk_are_counted_when_traced() -> None:
    """`q, k, v = map(f, qkv.chunk(3, dim=-1))` iterates a traced value: fx counts only an
    unpacking, the tracer counts the chunk's parts (and a split's list of sizes)."""
    import torch
    from torch import nn

    from torchlint.shapes.inputs import trace

    class Heads(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = nn.Linear(8, 24)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            q, k, v = map(lambda t: t.transpose(0, 1), self.qkv(x).chunk(3, dim=-1))
            a, b = map(torch.relu, torch.split(q, [3, 5], dim=-1))
            return (a.sum() + b.sum()) * k * v

    graph, complete, _ = trace(Heads(), 1)
    assert complete
    parts = [n for n in graph.nodes if n.op == "call_function" and "getitem" in str(n.target)]
    assert len(parts) == 5


UNFOLDED = """
import torch.nn as nn


class Swap(nn.Module):
    def forward(self, x):
        return x.transpose(1, 2)


class PatchNet(nn.Module):
    def __init__(self, dim=64, patch=4):
        super().__init__()
        self.embed = nn.Sequential(
            nn.Unfold(kernel_size=patch, stride=patch), Swap(), nn.Linear(3 * patch * patch, dim)
        )
        self.head = nn.Linear(dim * 2, 10)

    def forward(self, img):
        return self.head(self.embed(img).mean(1))
"""


def test_patches_unfolded_first_take_an_image(tmp_path: Path) -> None:
    """`nn.Unfold` first (PiT's patches): an image whose channels the search finds."""
    from torchlint.shapes import check_files

    path = tmp_path / "unfolded.py"
    path.write_text(UNFOLDED)
    found = check_files([(str(path), UNFOLDED)])
    assert [(d.code, d.line) for ds in found.values() for d in ds] == [("TL601", 16)]
