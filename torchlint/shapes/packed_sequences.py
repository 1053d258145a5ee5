"""Packed sequences kept padded while a model is checked.

`pack_padded_sequence(embedded, lengths)` packs a batch by the values in `lengths`, which
the check does not have (its tensors are fake): the packed data's length, and every step
of a recurrent layer over it, depend on them. In the worker, packing keeps the padded batch
instead, a recurrent layer (`nn.RNN`, `nn.LSTM`, `nn.GRU`) given it runs on that batch, and
`pad_packed_sequence` gives the padded output back. Every shape the model meets is then the
one it meets when its longest sequence fills the batch; only the packed `data` of a
`PackedSequence` read directly is longer than a real one (padding included).
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch import nn
from torch.nn.utils import rnn


class PaddedPack(rnn.PackedSequence):
    """A `PackedSequence` that holds its padded batch: `padded` as `batch_first` says,
    with each sequence's `lengths`."""

    padded: torch.Tensor
    batch_first: bool
    lengths: Any

    def __new__(cls, padded: torch.Tensor, lengths: Any, batch_first: bool) -> PaddedPack:
        time_major = padded if not batch_first else padded.transpose(0, 1)
        data = time_major.reshape(-1, *time_major.shape[2:])
        pack = tuple.__new__(cls, (data, _batch_sizes(time_major), None, None))
        pack.padded, pack.lengths, pack.batch_first = padded, lengths, batch_first
        return pack

    def oriented(self, batch_first: bool) -> torch.Tensor:
        """The padded batch, batch dimension first or second."""
        return self.padded if batch_first == self.batch_first else self.padded.transpose(0, 1)

    def to(self, *args: Any, **kwargs: Any) -> PaddedPack:  # type: ignore[override]
        return self

    def cpu(self) -> PaddedPack:  # type: ignore[override]
        return self

    def cuda(self, *args: Any, **kwargs: Any) -> PaddedPack:  # type: ignore[override]
        return self


def _batch_sizes(time_major: torch.Tensor) -> torch.Tensor:
    """One count per step (a CPU tensor in a real pack): each step's full batch here."""
    steps = time_major.shape[0]
    return torch.full((steps,), time_major.shape[1], dtype=torch.int64, device=time_major.device)


def pack_padded_sequence(
    input: torch.Tensor,
    lengths: Any,
    batch_first: bool = False,
    enforce_sorted: bool = True,
) -> PaddedPack:
    """`rnn.pack_padded_sequence`, keeping the padded batch."""
    return PaddedPack(input, lengths, batch_first)


def pad_packed_sequence(
    sequence: Any,
    batch_first: bool = False,
    padding_value: float = 0.0,
    total_length: int | None = None,
) -> tuple[torch.Tensor, Any]:
    """`rnn.pad_packed_sequence` of a `PaddedPack`: its batch, padded to `total_length`."""
    if not isinstance(sequence, PaddedPack):
        return _ORIGINAL_PAD(sequence, batch_first, padding_value, total_length)
    padded = sequence.oriented(batch_first)
    if isinstance(total_length, int):  # a fixed length: `total_length=tokens.size(1)` is kept
        step = 1 if batch_first else 0
        sizes = [*padded.shape[:step], total_length, *padded.shape[step + 1 :]]
        padded = padded.new_full(sizes, padding_value)
    lengths = sequence.lengths
    if not isinstance(lengths, torch.Tensor):
        lengths = torch.as_tensor(lengths, dtype=torch.int64)
    return padded, lengths


def _unpacking(forward: Any) -> Any:
    """A recurrent layer's `forward` that runs a `PaddedPack` as its padded batch."""

    @functools.wraps(forward)
    def run(self: nn.RNNBase, input: Any, hx: Any = None) -> Any:
        if not isinstance(input, PaddedPack):
            return forward(self, input, hx)
        output, state = forward(self, input.oriented(self.batch_first), hx)
        if input.batch_first != self.batch_first:
            output = output.transpose(0, 1)
        return PaddedPack(output, input.lengths, input.batch_first), state

    run.__torchlint_unpacking__ = True  # type: ignore[attr-defined]
    return run


_ORIGINAL_PAD = rnn.pad_packed_sequence


def install() -> None:
    """Packing keeps padded batches from now on, in this process (the worker's)."""
    rnn.pack_padded_sequence = pack_padded_sequence
    rnn.pad_packed_sequence = pad_packed_sequence
    for layer in (nn.RNN, nn.LSTM, nn.GRU):
        forward = layer.__dict__.get("forward")
        if forward is not None and not getattr(forward, "__torchlint_unpacking__", False):
            layer.forward = _unpacking(forward)  # type: ignore[method-assign]
