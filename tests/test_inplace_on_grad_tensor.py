"""TL201 behaviour that needs a whole file of its own (file-wide switches and freezes)."""

from __future__ import annotations

import textwrap

from torchlint.engine import lint_source


def _lines(source: str) -> list[int]:
    diagnostics = lint_source(textwrap.dedent(source), "example.py", {"TL201"})
    return [d.line for d in diagnostics if d.code == "TL201"]


CLASS = """
import copy
import torch
import torch.nn as nn


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(3))

    def forward(self, x):
        self.w += 1
        return x * self.w
"""


def test_parameter_update_is_reported() -> None:
    assert _lines(CLASS) == [13]


def test_freezing_an_unknown_module_silences_self_parameters() -> None:
    # `teacher` may be a Gate: after requires_grad_(False) its in-place update is legal.
    source = CLASS + "\n\ndef make(model):\n    teacher = copy.deepcopy(model)\n"
    assert _lines(source + "    teacher.requires_grad_(False)\n") == []
    # Freezing a plain layer cannot reach Gate's parameters.
    assert _lines(source + "    fc = nn.Linear(2, 2)\n    fc.requires_grad_(False)\n") == [13]
    assert _lines(source + "    nn.Linear(2, 2).requires_grad_(False)\n") == [13]


def test_module_level_grad_switch_silences_the_file() -> None:
    source = """
    import torch

    torch.set_grad_enabled(False)
    w = torch.randn(3, requires_grad=True)
    w += 1
    """
    assert _lines(source) == []


def test_method_called_under_no_grad_in_the_same_file() -> None:
    source = CLASS.replace("def forward", "def bump") + (
        "\n\ndef evaluate(gate):\n    with torch.no_grad():\n        gate.bump(None)\n"
    )
    assert _lines(source) == []


def test_names_followed_through_the_binding_model() -> None:
    source = """
    import torch

    def sgd(model, lr):
        for p in model.parameters():
            p -= lr * p.grad

    def unpacked():
        a, b = torch.zeros(3, requires_grad=True), torch.zeros(3)
        a += 1

    def bound_in_a_with_block(path):
        with open(path) as f:
            w = torch.zeros(3, requires_grad=True)
        w += 1

    def rebound_later_in_the_loop(model):
        for p in model.parameters():
            p.add_(1)
            p = p.detach()
    """
    # the loop variable stays a parameter through `-=`; `a, b = x, y` binds each name to its
    # element; a value bound in a `with` block reaches past it; a rebinding in the loop body
    # leaves the name unknown
    assert _lines(source) == [6, 10, 15]
