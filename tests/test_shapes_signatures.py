"""Constructor parameters are read through an `__init__` wrapper that hides them."""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import pytest

pytest.importorskip("torch", reason="shape checks (TL6xx) need torch installed")

from torch import nn

from torchlint.shapes.build import NeedsArguments, constructor_arguments
from torchlint.shapes.signatures import constructor_signature


def _hidden(cls: type) -> type:
    """Replace `__init__` the way kernel-swapping decorators do: no functools.wraps."""
    original = cls.__init__

    def new_init(self, *args, **kwargs):
        original(self, *args, **kwargs)

    cls.__init__ = new_init
    return cls


@dataclass
class MixerConfig:
    hidden_size: int = 8


@_hidden
class Mixer(nn.Module):
    def __init__(self, config: MixerConfig, layer_idx: int = 0, scale: float = 1.0):
        super().__init__()
        self.proj = nn.Linear(config.hidden_size, config.hidden_size)


class Plain(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()


def test_the_wrapped_constructor_gives_the_parameters() -> None:
    assert list(inspect.signature(Mixer).parameters) == ["args", "kwargs"]
    assert list(constructor_signature(Mixer).parameters) == ["config", "layer_idx", "scale"]


def test_a_class_built_from_its_default_configuration_through_the_wrapper() -> None:
    args, kwargs, source = constructor_arguments(Mixer, None)
    assert (args, source) == ([], "default config")
    assert kwargs == {"config": MixerConfig()}


def test_a_constructor_that_takes_anything_stays_as_written() -> None:
    assert list(constructor_signature(Plain).parameters) == ["args", "kwargs"]
    assert list(constructor_signature(nn.Linear).parameters)[:2] == ["in_features", "out_features"]


class Classifier(nn.Module):
    def __init__(self, *, dim: int, num_classes: int) -> None:
        super().__init__()
        self.head = nn.Linear(dim, num_classes)


class Described:
    def describe(self) -> str:
        return "a mixin before the model in the bases"


class Distillable(Described, Classifier):
    def __init__(self, *args, **kwargs):
        super(Distillable, self).__init__(*args, **kwargs)  # noqa: UP008 (as written in the wild)
        self.dim = kwargs["dim"]


class Forwarding(Distillable):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)


def test_a_subclass_that_hands_on_everything_takes_its_parents_parameters() -> None:
    assert list(constructor_signature(Distillable).parameters) == ["dim", "num_classes"]
    assert list(constructor_signature(Forwarding).parameters) == ["dim", "num_classes"]
    # `Plain` hands nothing to its parent: it takes anything.
    assert list(constructor_signature(Plain).parameters) == ["args", "kwargs"]


@dataclass
class MixerTextConfig:
    hidden_size: int = 16


class MixerTextBlock(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.proj = nn.Linear(config.hidden_size, config.hidden_size)


class MixerForScoring(nn.Module):
    config_class = MixerConfig

    def __init__(self, config):
        super().__init__()
        self.score = nn.Linear(config.hidden_size, 1)


def test_an_unannotated_config_takes_the_configuration_its_model_is_named_for() -> None:
    """Of the module's configurations, the one whose name begins the model's the longest
    way (`MixerTextBlock`: `MixerTextConfig`, not `MixerConfig`), or the one the model
    names (`config_class`, as transformers' models do)."""
    assert constructor_arguments(MixerTextBlock, None)[1] == {"config": MixerTextConfig()}
    assert constructor_arguments(MixerForScoring, None)[1] == {"config": MixerConfig()}


class MixerTextHead(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.score = nn.Linear(config.hidden_size, config.num_labels)


def test_a_configuration_chosen_by_name_must_have_the_fields_the_constructor_reads() -> None:
    """`MixerTextConfig` has no `num_labels`: another configuration is meant, none is built."""
    with pytest.raises(NeedsArguments):
        constructor_arguments(MixerTextHead, None)
