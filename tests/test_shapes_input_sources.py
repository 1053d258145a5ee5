"""Where inputs and constructor arguments come from when no layer or literal tells them:
forward's docstring, its first unpacking, the script's argparse options."""

from __future__ import annotations

import ast
import types

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from torchlint.shapes.described_shapes import described_plans, unpacked_plans  # noqa: E402
from torchlint.shapes.discover import scan  # noqa: E402
from torchlint.shapes.evidence import collect  # noqa: E402
from torchlint.shapes.guess import guesses  # noqa: E402
from torchlint.shapes.inputs import Dim, InputPlan, TensorSpec, combine, copies_first  # noqa: E402
from torchlint.shapes.script_values import parsed_options  # noqa: E402


class Documented(nn.Module):
    def forward(self, hidden_states, mask, ids, steps, bbox):
        """
        Args:
            bbox ('torch.Tensor' of shape '(batch_size, num_boxes, 4)'): quoted, not ticked.
            hidden_states (`torch.Tensor` of shape `(batch size, sequence_len, embed_dims)`):
                the tokens.
            mask (`torch.BoolTensor`):
                Boolean tensor of shape `(B, S)`.
            ids (`torch.LongTensor` of shape `(batch_size, heads * head_dim)`): not a size.
            steps: one value per sample, shape (batch_size,)
        """
        return hidden_states


class Unpacking(nn.Module):
    def forward(self, x, y):
        b, c, h, w = x.shape
        z = y.mean()
        t, s = y.size()
        return x.reshape(b, c * h * w) + z + t + s


class PlacedFirst(nn.Module):
    def forward(self, x, table, y):
        table = table.to(x[0].device, x.dtype)
        m = y.sum()
        b, c, h, w = x.size()
        k, v = y.shape
        return x.reshape(b, c * h * w) + table + m + k + v


def test_docstring_shapes() -> None:
    model = Documented()
    plans = described_plans(model, "hidden_states")
    assert plans is not None and plans[0].source == "named"
    assert [d.name for d in plans[0].specs[0].dims] == ["N", "L", "embed_dims"]
    mask = described_plans(model, "mask")
    assert mask is not None and [d.name for d in mask[0].specs[0].dims] == ["N", "L"]
    assert mask[0].specs[0].dtype == torch.bool
    assert described_plans(model, "ids") is None  # an expression: no plain size
    steps = described_plans(model, "steps")
    assert steps is not None and [d.name for d in steps[0].specs[0].dims] == ["N"]
    assert described_plans(model, "missing") is None
    boxes = described_plans(model, "bbox")
    assert boxes is not None and [d.name for d in boxes[0].specs[0].dims] == [
        "N",
        "num_boxes",
        None,
    ]


class Patches(nn.Module):
    def forward(self, inputs):
        """
        Args:
            inputs (`torch.Tensor` of shape `((batch_size, num_channels, num_patches, d_model))`):
                the patches of each channel.
        """
        return inputs


def test_docstring_sizes_named_after_configuration_fields() -> None:
    """Doubled brackets are read; a size named after a configuration field takes its value
    (the model's own configuration first), the others stay free."""
    config = types.SimpleNamespace(num_channels=1, d_model=8, name="series")
    plans = described_plans(Patches(), "inputs", config)
    assert plans is not None
    assert [(d.name, d.hint) for d in plans[0].specs[0].dims] == [
        ("N", 2),
        (None, 1),
        ("num_patches", 8),
        (None, 8),
    ]
    kept = Patches()
    kept.config = types.SimpleNamespace(num_channels=3)
    plans = described_plans(kept, "inputs", config)
    assert plans is not None
    assert [d.hint for d in plans[0].specs[0].dims][1:] == [3, 8, 8]


def test_unpacked_shapes() -> None:
    model = Unpacking()
    plans = unpacked_plans(model, "x")
    assert plans is not None and [d.name for d in plans[0].specs[0].dims] == ["N", "c", "H", "W"]
    assert unpacked_plans(model, "y") is None  # read before it is unpacked
    # Reading only where the input lives (`x[0].device`, `x.dtype`) is no read of its sizes.
    placed = PlacedFirst()
    plans = unpacked_plans(placed, "x")
    assert plans is not None and [d.name for d in plans[0].specs[0].dims] == ["N", "c", "H", "W"]
    assert unpacked_plans(placed, "y") is None  # `y.sum()` reads it first


SCRIPT = """
import argparse
import torch.nn as nn


class Tagger(nn.Module):
    def __init__(self, rnn_type, ntoken, ninp, dropout=0.5):
        super().__init__()

    def forward(self, x):
        return x


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="GRU")
    parser.add_argument("--emsize", type=int, default=200)
    parser.add_argument("--nhid", type=int, default=200)
    args = parser.parse_args()
    args.nhid = 2 * args.emsize
    ntokens = len(open("vocab.txt").read())
    model = Tagger(args.model, ntokens, args.emsize, dropout=0.1)
    other = Tagger(args.model, 100, args.nhid)
"""


def test_options_parsed_in_the_main_block() -> None:
    options = parsed_options(ast.parse(SCRIPT))
    # `args.nhid` is set again after parsing, from another option: valued in order.
    assert vars(options["args"]) == {"model": "GRU", "emsize": 200, "nhid": 400}


HELPER = """
from argparse import ArgumentParser


def get_args():
    parser = ArgumentParser()
    parser.add_argument("--n_layers", type=int, default=2)
    parser.add_argument("--no-bidirectional", action="store_false", dest="birnn")
    parser.add_argument("--lr", type=float, default=0.1)
    return parser.parse_args()
"""

HELPED = """
from options import get_args

args = get_args()
config = args
config.n_cells = config.n_layers
if config.birnn:
    config.n_cells *= 2
else:
    config.n_cells = 0
config.vocab = len(open("vocab.txt").read())
for epoch in range(3):
    config.lr *= 0.5
"""


def test_options_from_a_helper_followed_in_order(tmp_path) -> None:
    (tmp_path / "options.py").write_text(HELPER)
    script = tmp_path / "train.py"
    script.write_text(HELPED)
    options = parsed_options(ast.parse(HELPED), str(script))
    assert options["config"] is options["args"]
    # The branch the defaults take; a size from the data is unknown; a field set in a
    # loop has no one value.
    assert vars(options["args"]) == {
        "n_layers": 2,
        "birnn": True,
        "n_cells": 4,
        "vocab": {"$unknown": True},
    }
    assert parsed_options(ast.parse(HELPED)) == {}  # the helper's module is not found


def test_call_site_with_options_and_data_sizes() -> None:
    files = [("script.py", SCRIPT)]
    facts = collect(scan(files), files, None)
    entry = next(v for (_, name), v in facts.items() if name == "Tagger")
    # `other`: every argument known (`args.nhid`, set from another option, is valued).
    assert entry["ctor"]["args"] == ["GRU", 100, 400]
    assert entry["partial"]["args"] == ["GRU", {"$unknown": True}, 200]
    assert entry["partial"]["kwargs"] == {"dropout": 0.1}

    namespace: dict = {}
    exec(compile(SCRIPT.split("if __name__")[0], "script.py", "exec"), namespace)
    variants = guesses(namespace["Tagger"], entry["partial"])
    assert variants is not None and len(variants) == 1
    runs = variants[0].runs
    assert len(runs) == 3
    for run in runs:
        assert run["rnn_type"] == "GRU" and run["ninp"] == 200 and run["dropout"] == 0.1
    assert len({run["ntoken"] for run in runs}) > 1  # the data's size is guessed


def test_a_conv_fed_one_dimension_too_few_was_given_the_wrong_rank() -> None:
    """A conventional input (a name's, a docstring's) that a conv gets without its batch
    dimension, or a Linear as one value per sample (`timestep` read as [N] where the model
    takes a time embedding [N, 1024]), is a wrong rank, not a wrong layer: such a run is a
    TL690, never a TL601 or TL603."""
    from torchlint.shapes.check import _unbatched
    from torchlint.shapes.propagate import Failure

    conv = nn.Conv1d(1, 8, 7)
    assert _unbatched(Failure(RuntimeError("channels"), module=conv, inputs=[(2, 16000)]))
    assert not _unbatched(Failure(RuntimeError("channels"), module=conv, inputs=[(2, 4, 100)]))
    flat = nn.Conv2d(3, 8, 3)
    assert _unbatched(Failure(RuntimeError("channels"), module=flat, inputs=[(4, 32, 32)]))
    # A Linear given one value per sample read the batch as its features.
    assert _unbatched(Failure(RuntimeError("features"), module=nn.Linear(4, 2), inputs=[(2,)]))
    assert not _unbatched(
        Failure(RuntimeError("features"), module=nn.Linear(4, 2), inputs=[(2, 3)])
    )


class ReadsAtOnce(nn.Module):
    def forward(self, x, temb=None, frames=None, mask=None, scale=None, cond=None):
        n = frames.shape[-1]
        if mask is not None:
            x = x * mask
        if cond is None:
            raise ValueError("cond is required")
        y = x if scale is None else x * scale
        return self.block(y, temb) + n


class HandsItOn(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = ReadsAtOnce()

    def forward(self, x, frames=None, mask=None, cond=None):
        return self.inner(x, None, frames, mask=mask, cond=cond)


def test_a_none_default_read_at_once_is_an_input() -> None:
    from torchlint.shapes.keyword_inputs import companion_inputs
    from torchlint.shapes.required_optionals import required_optionals

    model = ReadsAtOnce()
    # `frames` is read at once and `cond` refuses None; `mask` is tested first, `scale`
    # read only where it is not None, and `temb` only handed on.
    assert required_optionals(model) == ["frames", "cond"]
    assert companion_inputs(model) == ["x", "frames", "cond"]
    # A head that hands them on to the block that needs them needs them too.
    assert required_optionals(HandsItOn()) == ["frames", "cond"]


class ReadsPerSample(nn.Module):
    def forward(self, x, mask=None, lengths=None):
        out = []
        for i in range(x.shape[0]):
            out.append(x[i] * mask[i])
        for n in lengths or []:
            out.append(n)
        return torch.stack(out)


class ProjectsTime(nn.Module):
    def __init__(self, timed: bool) -> None:
        super().__init__()
        self.act = nn.SiLU()
        self.proj = nn.Linear(8, 8) if timed else None
        self.skip_act = False

    def forward(self, x, temb=None):
        if self.proj is not None:
            if not self.skip_act:
                temb = self.act(temb)
            x = x + self.proj(temb)
        else:
            x = x if temb is None else x + temb
        return x


class TakesTime(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = ProjectsTime(timed=True)

    def forward(self, x, temb=None):
        return self.block(x, temb)


def test_reads_in_sample_loops_and_settled_branches_count() -> None:
    """A loop over `range(n)` runs; an `if` on the model's own attributes runs one way; a
    layer of torch's own (`nn.SiLU`) needs its tensor, as does a submodule's parameter
    without a default that its forward reads at once."""
    from torchlint.shapes.required_optionals import required_optionals

    assert required_optionals(ReadsPerSample()) == ["mask"]  # `lengths` is tested first
    assert required_optionals(ProjectsTime(timed=True)) == ["temb"]
    assert required_optionals(ProjectsTime(timed=False)) == []
    assert required_optionals(TakesTime()) == ["temb"]


def test_an_input_beside_the_first_whose_shape_nothing_tells_is_tried_assumed() -> None:
    from torchlint.shapes.assumed_inputs import is_assumed
    from torchlint.shapes.open_inputs import open_input_plans

    model = ReadsPerSample()
    names = ["x", "mask", "lengths"]
    assert open_input_plans(model, names, 0) is None  # the first input is never guessed
    plans = open_input_plans(model, names, 1)
    assert plans is not None
    assert plans[0].specs[0].like_first  # first: shaped like `x`, whichever plan `x` runs
    assert [len(p.specs[0].dims) for p in plans[1:4]] == [2, 1, 3]
    assert plans[4].specs[0].first_rank  # last: `x`'s rank and batch, sizes of its own
    assert all(is_assumed(p) and "`mask`" in p.label for p in plans)
    image = InputPlan([TensorSpec([Dim.free("N"), Dim.fixed(3), Dim.free("H"), Dim.free("W")])])
    tokens = InputPlan([TensorSpec([Dim.free("N"), Dim.free("L")], torch.long)])
    combined = combine([[image], plans])
    assert combined[0].specs[1].dims == image.specs[0].dims  # the same sizes, not new ones
    assert combined[0].source == "assumed"
    own = combined[-1].specs[1].dims  # a skip connection's: the batch shared, the rest free
    assert own[0] == image.specs[0].dims[0] and [d.name for d in own[1:]] == ["S2", "H2", "W2"]
    assert not copies_first(combined[-1])  # searched for, unlike a copy
    # Beside token ids (a translation's target beside its source), the copy is token ids
    # too; a skip connection of their rank is left out.
    beside_tokens = combine([[tokens], plans])
    copies = [p.specs[1] for p in beside_tokens if p.specs[1].like_first]
    assert [(c.dims, c.dtype) for c in copies] == [(tokens.specs[0].dims, torch.long)]
    assert len(beside_tokens) == len(plans) - 1
    assert open_input_plans(TakesLayers(), ["x", "p", "embed"], 1) is None  # an int
    assert open_input_plans(TakesLayers(), ["x", "p", "embed"], 2) is None  # a layer


class TakesLayers(nn.Module):
    def forward(self, x, p: int, embed):
        return x.view(-1, p) @ embed.weight


def test_an_input_rebound_by_its_stages_is_not_inferred_from_the_last_layer() -> None:
    """`x, h, w = embed(x)` in a loop over stages: the final norm takes the last stage's
    output, not the input; the docstring's plan is the one left."""
    import importlib.util
    from pathlib import Path

    from torchlint.shapes.infer import infer_from_source

    path = Path(__file__).parent.parent / "fixtures" / "shapes" / "staged_embeddings.py"
    spec = importlib.util.spec_from_file_location("staged_embeddings", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with torch.device("meta"):
        model = module.Pyramid()
    assert infer_from_source(model, 0) is None
    [plan] = described_plans(model, "pixel_values")
    assert [d.hint for d in plan.specs[0].dims][1] == 3
