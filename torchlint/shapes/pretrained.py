"""Pretrained weights a constructor would download (`models.vgg16(weights=...)`) are not
fetched: shapes do not depend on them, and the check neither writes files nor reaches the
network. The model is built with its freshly made parameters instead."""

from __future__ import annotations

import os
from typing import Any

import torch
from torch import nn


class NoWeights(dict):  # type: ignore[type-arg]
    """The state dict a download gives while models are checked: loading it changes nothing."""


def skip_downloads() -> None:
    """Make `torch.hub.load_state_dict_from_url` give `NoWeights` and `load_state_dict` take
    it as a no-op (torchvision and timm import the former from torch.hub when they load)."""
    torch.hub.load_state_dict_from_url = _no_weights  # type: ignore[assignment]
    load = nn.Module.load_state_dict

    def load_state_dict(module: nn.Module, state_dict: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(state_dict, NoWeights):
            return nn.modules.module._IncompatibleKeys([], [])
        return load(module, state_dict, *args, **kwargs)

    nn.Module.load_state_dict = load_state_dict  # type: ignore[method-assign,assignment]


#: Switches that keep Hugging Face's libraries off the network: a constructor that loads a
#: model from the hub (`AutoModel.from_pretrained(name)`) fails at once, where it would
#: retry the connection the sandbox refuses until the check's time ran out.
_OFFLINE = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")


def stay_offline() -> None:
    """Set the offline switches before the libraries that read them are imported."""
    for name in _OFFLINE:
        os.environ[name] = "1"


def _no_weights(*args: Any, **kwargs: Any) -> NoWeights:
    return NoWeights()
