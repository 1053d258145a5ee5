"""Which layers of a deep configuration to build: one of each kind the configuration lists.

A configuration describes its layers with per-layer lists beside the count: kinds
(`layer_types`, `mlp_layer_types`, `indexer_types`), values (`no_rope_layers` flags,
`layer_rope_theta`, `num_key_value_heads_per_layer`) and layer indices that name every layer
(`moe_layers = [0, ..., 47]`). Layers whose entries agree in every list are built alike, so a
check needs one of each: the first layer of each distinct combination, re-numbered from 0.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

#: Per-layer numbers by their name: sizes, rates and flags, one per layer.
_VALUE_NAME = re.compile(
    r"layer|_per_|intermediate_size$|_pattern$|_list$|windows$|theta$", re.IGNORECASE
)
#: Lists that name other layers by index (`kv_source_layers`, `target_layer_ids`): cut only
#: when each layer names itself.
_REFERENCE_NAME = re.compile(r"source|target|_ids?$|_idxs?$|index|indices", re.IGNORECASE)
#: At most this many distinct layers are kept; a configuration with more is not cut.
MAX_KINDS = 6


def kept_layers(lists: Mapping[str, Sequence[Any]], count: int, depth: int) -> list[int] | None:
    """The indices of the layers to keep out of `count`, or None when a list of that length
    is not one entry per layer (a stage's sizes, a list of names) or names other layers.

    `depth` is the fewest layers kept. With more than the usual fewest (a field names a deep
    layer by index: `out_indices`), the first `depth` layers are kept, so indices hold."""
    columns: list[Sequence[Any]] = []
    for name, values in lists.items():
        if len(values) != count:
            continue
        if _identity(values):
            continue  # every layer named once, in order: re-numbered with the cut
        if not _per_layer(name, values):
            return None
        columns.append(values)
    if depth >= count:
        return None
    if not columns or depth > 2:
        return list(range(depth))
    first: dict[tuple[Any, ...], int] = {}
    for index in range(count):
        first.setdefault(tuple(_hashable(column[index]) for column in columns), index)
    chosen = sorted(first.values())
    if len(chosen) > MAX_KINDS:
        chosen = _covering(columns, count)
        if chosen is None:
            return None
    for index in range(count):  # at least `depth` layers: the first ones fill in
        if len(chosen) >= depth:
            break
        if index not in chosen:
            chosen = sorted([*chosen, index])
    return chosen if len(chosen) < count else None


def cut(values: Sequence[Any], kept: list[int], count: int) -> list[Any]:
    """A per-layer list (or one naming every layer) cut to the kept layers."""
    if len(values) == count and _identity(values):
        return list(range(len(kept)))
    return [values[index] for index in kept]


def _per_layer(name: str, values: Sequence[Any]) -> bool:
    if all(isinstance(v, str) for v in values):
        return "layer" in name or name.endswith("_types")
    if _REFERENCE_NAME.search(name):
        return False
    return bool(_VALUE_NAME.search(name)) and all(_plain(v) for v in values)


def _plain(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    return value is None or isinstance(value, (int, float, str))


def _identity(values: Sequence[Any]) -> bool:
    return all(type(v) is int and v == i for i, v in enumerate(values))


def _hashable(value: Any) -> Any:
    return tuple(_hashable(v) for v in value) if isinstance(value, (list, tuple)) else value


def _covering(columns: list[Sequence[Any]], count: int) -> list[int] | None:
    """The first layer of each value of each list, where the combinations are too many."""
    chosen: set[int] = set()
    for column in columns:
        seen: set[Any] = set()
        for index in range(count):
            value = _hashable(column[index])
            if value not in seen:
                seen.add(value)
                chosen.add(index)
    return sorted(chosen) if len(chosen) <= MAX_KINDS else None
