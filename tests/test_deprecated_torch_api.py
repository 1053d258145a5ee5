"""TL703 follows the target torch version: what is deprecated, and what replaces it."""

from __future__ import annotations

import pytest

from torchlint.analysis.deprecated_apis import DEPRECATED_APIS, target_version
from torchlint.engine import lint_source

SOURCE = """\
import torch
import torch.nn.functional as F

scaler = torch.cuda.amp.GradScaler()
y = F.sigmoid(x)
z = torch.chain_matmul(a, b)
"""


def codes_by_line(torch_version: str | None) -> dict[int, str]:
    found = lint_source(SOURCE, "train.py", {"TL703"}, torch_version=torch_version)
    return {d.line: d.message for d in found}


@pytest.mark.parametrize(
    ("version", "lines"),
    [
        ("1.8", {5}),  # F.sigmoid deprecated (0.4.1); chain_matmul not yet
        ("1.13", {5, 6}),  # F.sigmoid still warned; chain_matmul deprecated in 1.9
        ("2.1", {6}),  # the F.sigmoid warning is gone
        ("2.4", {4, 6}),  # torch.cuda.amp deprecated in 2.4
        ("2.13", {4, 6}),
    ],
)
def test_version_gates_findings(version: str, lines: set[int]) -> None:
    assert set(codes_by_line(version)) == lines


def test_fix_follows_replacement() -> None:
    found = lint_source(SOURCE, "train.py", {"TL703"}, torch_version="2.4")
    fixes = {d.line: d.fix for d in found}
    assert fixes[4] is not None and fixes[4].edits[0].content == 'torch.amp.GradScaler("cuda")'
    assert fixes[6] is not None
    assert fixes[6].edits[0].content == "torch.linalg.multi_dot([a, b])"


def test_target_version_prefers_setting() -> None:
    assert target_version("2.1") == (2, 1)
    assert target_version("2.4.1+cu121") == (2, 4)


def test_table_is_consistent() -> None:
    names = [api.name for api in DEPRECATED_APIS]
    assert len(names) == len(set(names))
    for api in DEPRECATED_APIS:
        assert api.name.startswith("torch.")
        assert (api.fix_kind is None) == (api.fix_target is None), api.name
        if api.replacement_since is not None:
            # A deprecation always comes with its replacement available.
            assert api.replacement_since <= api.deprecated_in, api.name
