"""Models of one file that hold the same base model: a head takes over what the analysis
of another found (sizes that pass, or a failure that is not a shape error) and still
reports its own bugs; one model's check stops at its time budget, the file's others are
kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from torchlint.shapes import check_files
from torchlint.shapes.build import _shallow

# The base model's conv needs 300 samples: the first guess fails, the analysis solves for
# a length that passes (a series: a waveform would be tried at a second of audio first).
# The second head's classifier reads the wrong number of features.
HEADS = """
from dataclasses import dataclass

import torch.nn as nn


@dataclass
class TinyConfig:
    channels: int = 8
    hidden: int = 16
    labels: int = 3


class TinyModel(nn.Module):
    def __init__(self, config: TinyConfig):
        super().__init__()
        self.conv = nn.Conv1d(1, config.channels, kernel_size=300, stride=100)
        self.proj = nn.Linear(config.channels, config.hidden)

    def forward(self, series):
        features = self.conv(series.unsqueeze(1)).transpose(1, 2)
        return self.proj(features)


class TinyForClassification(nn.Module):
    def __init__(self, config: TinyConfig):
        super().__init__()
        self.model = TinyModel(config)
        self.classifier = nn.Linear(config.hidden, config.labels)

    def forward(self, series):
        return self.classifier(self.model(series).mean(1))


class TinyForPooledClassification(nn.Module):
    def __init__(self, config: TinyConfig):
        super().__init__()
        self.model = TinyModel(config)
        self.classifier = nn.Linear(config.hidden, config.labels)

    def forward(self, series):
        return self.classifier(self.model(series).amax(1))


class TinyForFrameClassification(nn.Module):
    def __init__(self, config: TinyConfig):
        super().__init__()
        self.model = TinyModel(config)
        self.classifier = nn.Linear(config.hidden * 2, config.labels)  # bug: hidden

    def forward(self, series):
        return self.classifier(self.model(series))
"""

# The base model stops every forward with an error that is not about shapes.
FAILING = """
from dataclasses import dataclass

import torch.nn as nn


@dataclass
class StreamConfig:
    hidden: int = 16


class StreamModel(nn.Module):
    def __init__(self, config: StreamConfig):
        super().__init__()
        self.proj = nn.Linear(config.hidden, config.hidden)
        self.state = None

    def forward(self, features):
        hidden = self.proj(features)
        if self.state is None:
            raise RuntimeError("the stream was not opened")
        return hidden + self.state.mean()


class StreamForTagging(nn.Module):
    def __init__(self, config: StreamConfig):
        super().__init__()
        self.model = StreamModel(config)
        self.tagger = nn.Linear(config.hidden, 4)

    def forward(self, features):
        return self.tagger(self.model(features))


class StreamForScoring(nn.Module):
    def __init__(self, config: StreamConfig):
        super().__init__()
        self.model = StreamModel(config)
        self.score = nn.Linear(config.hidden, 1)

    def forward(self, features):
        return self.score(self.model(features))
"""

# One model spins far past its budget: it alone is reported, not the whole file.
SLOW = """
import torch.nn as nn


class Quick(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc(x)


class Spinning(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        for _ in range(10**9):
            x = self.fc(x)
        return x
"""


def _check(tmp_path: Path, name: str, text: str, **options: Any) -> tuple[list, dict]:
    path = tmp_path / name
    path.write_text(text)
    stats: dict[str, list[dict[str, Any]]] = {}
    found = check_files([(str(path), text)], stats=stats, **options)
    records = {r["model"]: r for r in stats.get(str(path), [])}
    return found.get(str(path), []), records


def test_a_head_reuses_the_sizes_found_and_keeps_its_own_bug(tmp_path: Path) -> None:
    found, records = _check(tmp_path, "heads.py", HEADS)
    assert [(d.code, d.line) for d in found if d.code != "TL690"] == [("TL601", 49)]
    assert records["TinyForClassification"]["result"] == "ok"
    assert records["TinyForPooledClassification"]["result"] == "ok"
    assert records["TinyForPooledClassification"].get("reused") == "sizes"
    assert records["TinyForFrameClassification"]["result"] == "finding"


def test_a_head_reuses_a_failure_that_is_not_about_shapes(tmp_path: Path) -> None:
    found, records = _check(tmp_path, "stream.py", FAILING)
    skipped = {d.line: d.message for d in found if d.code == "TL690"}
    assert [d.code for d in found if d.code != "TL690"] == []
    tagging, scoring = skipped[25], skipped[35]
    assert "forward pass failed at line 21" in tagging
    assert tagging.split(" skipped: ")[1] == scoring.split(" skipped: ")[1]
    assert records["StreamForScoring"].get("reused") == "failure"


def test_a_model_past_its_budget_is_skipped_alone(tmp_path: Path) -> None:
    found, records = _check(tmp_path, "slow.py", SLOW, timeout=12.0)
    reasons = [d.message for d in found if d.code == "TL690"]
    assert len(reasons) == 1 and "Spinning" in reasons[0] and "time budget" in reasons[0]
    assert records["Quick"]["result"] == "ok"


@pytest.mark.parametrize(
    ("kinds", "expected"),
    [
        (["full_attention"] * 8, ["full_attention", "full_attention"]),
        (
            ["sliding_attention"] * 5 + ["full_attention"] * 3,
            ["sliding_attention", "full_attention"],
        ),
    ],
)
def test_per_layer_kinds_are_cut_with_the_layer_count(
    kinds: list[str], expected: list[str]
) -> None:
    class Config:
        def __init__(self) -> None:
            self.num_hidden_layers = 8
            self.layer_types = list(kinds)

    config = _shallow(Config())
    assert (config.num_hidden_layers, config.layer_types) == (2, expected)


def test_per_layer_lists_keep_one_layer_of_each_kind() -> None:
    """Kinds, per-layer values and lists naming every layer are cut together: the first layer
    of each combination is kept (a 45-layer hybrid checked 45 layers before), and a list
    that names other layers (`kv_source_layers`) leaves the count as it is."""

    class Config:
        def __init__(self, sources: list[int] | None = None) -> None:
            self.num_hidden_layers = 12
            self.layer_types = ["linear_attention"] * 3 + ["full_attention"]
            self.layer_types *= 3
            self.mlp_layer_types = ["dense"] * 2 + ["sparse"] * 10
            self.no_rope_layers = [1, 0] * 6
            self.moe_layers = list(range(12))
            if sources is not None:
                self.kv_source_layers = sources

    # Layers 0-3 and 5 differ in one list or another; the others repeat them.
    config = _shallow(Config())
    assert config.num_hidden_layers == 5
    assert config.layer_types == ["linear_attention"] * 3 + ["full_attention", "linear_attention"]
    assert config.mlp_layer_types == ["dense", "dense", "sparse", "sparse", "sparse"]
    assert config.no_rope_layers == [1, 0, 1, 0, 0]
    assert config.moe_layers == [0, 1, 2, 3, 4]
    shared = [0, 1, 2, 3] + [3] * 8
    assert _shallow(Config(shared)).num_hidden_layers == 12
    assert _shallow(Config(list(range(12)))).num_hidden_layers == 5


def test_the_stacks_of_a_models_parts_are_cut() -> None:
    """Counts named for a part (SeamlessM4T's `speech_encoder_layers`, a unit decoder's
    `t2u_decoder_layers`, VideoPrism's space and time) are cut like `num_hidden_layers`:
    each part built with its 24 layers cost seconds for shapes two layers show."""

    class Config:
        def __init__(self) -> None:
            self.speech_encoder_layers = 24
            self.t2u_decoder_layers = 6
            self.num_spatial_layers = 12
            self.num_temporal_layers = 4
            self.max_window_layers = 28  # a threshold, not a count

    config = _shallow(Config())
    assert (config.speech_encoder_layers, config.t2u_decoder_layers) == (2, 2)
    assert (config.num_spatial_layers, config.num_temporal_layers) == (2, 2)
    assert config.max_window_layers == 28


def test_per_stage_sizes_keep_the_layer_count() -> None:
    class Config:
        def __init__(self) -> None:
            self.num_hidden_layers = 4
            self.hidden_sizes = [96, 192, 384, 768]
            self.layer_types = ["a", "b", "c", "d"]

    config = _shallow(Config())
    assert (config.num_hidden_layers, len(config.layer_types)) == (4, 4)


def test_layers_named_by_index_are_kept() -> None:
    """A head that reads hidden states by their layer index (`out_indices`) keeps the layers
    up to the deepest one it names; with none named past the usual cut, the cut stays."""

    class Config:
        def __init__(self, indices: tuple[int, ...]) -> None:
            self.num_hidden_layers = 12
            self.out_indices = indices
            self.layer_types = ["full_attention"] * 12

    config = _shallow(Config((3, 5, 7, 9)))
    assert (config.num_hidden_layers, len(config.layer_types)) == (10, 10)
    assert _shallow(Config((3, 5, 7, 11))).num_hidden_layers == 12
    assert _shallow(Config((0, 1))).num_hidden_layers == 2
    assert _shallow(Config((-1,))).num_hidden_layers == 2


def test_held_configurations_and_experts_are_cut() -> None:
    """A multimodal model's `vision_config` is cut like its own; a mixture of experts keeps
    enough experts for its routing (two per group at least, as many groups)."""
    from dataclasses import dataclass, field

    @dataclass
    class Vision:
        num_hidden_layers: int = 24

    @dataclass
    class Text:
        num_hidden_layers: int = 48
        n_routed_experts: int = 256
        num_experts_per_tok: int = 8
        n_group: int = 8
        topk_group: int = 4

    @dataclass
    class Multimodal:
        vision_config: Vision = field(default_factory=Vision)
        text_config: Text = field(default_factory=Text)

    config = _shallow(Multimodal())
    assert config.vision_config.num_hidden_layers == 2
    text = config.text_config
    assert text.num_hidden_layers == 2
    # 8 groups of 2: four chosen groups hold the 8 experts a token takes.
    assert text.n_routed_experts == 16

    # A failure met with the cut configuration is confirmed with the whole one.
    from torchlint.shapes.build import full_depth

    deep = full_depth({"config": config})
    assert deep is not None and deep["config"].vision_config.num_hidden_layers == 24

    @dataclass
    class Few:
        num_local_experts: int = 4
        num_experts_per_tok: int = 2

    assert _shallow(Few()).num_local_experts == 4


def test_batch_sizes_are_searched_up_to_a_few_hundred() -> None:
    """A condition only a batch of thousands meets is no solution (and the batch's range
    does not multiply the search with another size)."""
    import sympy

    from torchlint.shapes.solve import MAX_BATCH, Problem

    n, length = sympy.Symbol("n", positive=True), sympy.Symbol("l", positive=True)
    names = {n: "N", length: "L"}
    assert Problem([sympy.Eq(n, MAX_BATCH + 1)], names, {n: 2}).find() is None
    found = Problem([sympy.Eq(n * length, 3000)], names, {n: 2, length: 16}).find()
    assert found is not None and found[n] * found[length] == 3000 and found[n] <= MAX_BATCH


def test_a_flattened_image_of_few_channels_is_found() -> None:
    """`C * H * W == 784` (an image flattened into a Linear) holds at 1 x 28 x 28: the
    search tries a few channel counts with square images when the channels' hint (8) finds
    none, rather than calling the Linear's size unreachable."""
    import sympy

    from torchlint.shapes.solve import Problem

    c, h, w = (sympy.Symbol(name, positive=True) for name in ("c", "h", "w"))
    names = {c: "channels", h: "H", w: "W"}
    found = Problem([sympy.Eq(c * h * w, 784)], names, {c: 8, h: 96, w: 96}).find()
    assert found == {c: 1, h: 28, w: 28}
    assert Problem([sympy.Eq(c * h * w, 787)], names, {c: 8, h: 96, w: 96}).find() is None


def test_a_configuration_that_refuses_a_field_or_leaves_sizes_unset_still_builds() -> None:
    """A per-layer field read globally raises (transformers' heterogeneous configurations):
    the cut reads around it. `head_dim` and `num_key_value_heads` left None take the values
    they stand for, and a `vocab_size` left to the tokenizer a stand-in."""
    from torchlint.shapes.build import _sizes_set

    class PerLayer:
        def __init__(self) -> None:
            self.num_hidden_layers = 12

        def __getattr__(self, name: str) -> Any:
            if name == "num_local_experts":
                raise LookupError("a per-layer attribute: read it per layer")
            raise AttributeError(name)

    assert _shallow(PerLayer()).num_hidden_layers == 2

    class Unset:
        def __init__(self) -> None:
            self.hidden_size, self.num_attention_heads = 256, 8
            self.head_dim = self.num_key_value_heads = self.vocab_size = None
            self.window_size = None  # a part left off: stays off

    config = _sizes_set(Unset())
    assert (config.head_dim, config.num_key_value_heads) == (32, 8)
    assert config.vocab_size > 0 and config.window_size is None

    from dataclasses import dataclass, field

    @dataclass
    class Text:
        hidden_size: int = 64
        num_attention_heads: int = 4
        head_dim: int | None = None

    @dataclass
    class Multimodal:
        text_config: Text = field(default_factory=Text)

    assert _sizes_set(Multimodal()).text_config.head_dim == 16  # held configurations too


def test_a_size_asked_for_by_name_keeps_the_values_the_configuration_was_given() -> None:
    """A constructor that refuses a None horizon by name is built again with a stand-in for
    it, and with the sizes the call site gave (not the class's defaults)."""
    from dataclasses import dataclass

    import torch.nn as nn

    from torchlint.shapes.build import build

    @dataclass
    class Horizon:
        d_model: int = 32
        prediction_length: int | None = None

    class Forecaster(nn.Module):
        def __init__(self, config: Horizon) -> None:
            super().__init__()
            if config.prediction_length is None:
                raise ValueError("The `prediction_length` config needs to be specified.")
            self.head = nn.Linear(config.d_model, config.prediction_length)

    model = build(Forecaster, [Horizon(d_model=48)], {})
    assert model.head.in_features == 48 and model.head.out_features > 0


def test_failures_no_size_can_change_are_not_searched() -> None:
    """An input left None or an option the caller must give fails at every size: the first
    run's failure is the answer, without the search for other sizes."""
    from torchlint.shapes.check import _size_blind

    assert _size_blind(AttributeError("'NoneType' object has no attribute 'shape'"))
    assert _size_blind(ValueError("You must specify exactly one of input_ids or inputs_embeds"))
    assert _size_blind(TypeError("linear(): argument 'input' must be Tensor, not NoneType"))
    assert not _size_blind(RuntimeError("mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"))
    assert not _size_blind(ValueError("not enough values to unpack (expected 3, got 2)"))
    assert not _size_blind(KeyError(96))  # a table keyed by a size: another size may be in it
