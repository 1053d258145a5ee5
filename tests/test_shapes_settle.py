"""Models that cannot be checked are told from the source, word for word as the worker would."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from torchlint.shapes import check_files, client, settle
from torchlint.shapes.astutil import import_aliases

SETTLED = {
    "module_argument": """
from __future__ import annotations

from torch.nn import Module


class Averaged(Module):
    '''Keeps an average of another model.'''

    count: int

    def __init__(self, model: Module, device=None, use_buffers=False) -> None:
        super().__init__()
        self.module = model

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)
""",
    "keyword_only": """
import torch.nn as nn


class Head(nn.Module):
    def __init__(self, *, backbone, scale=2.0):
        super().__init__()
        self.backbone = backbone

    def forward(self, x: "torch.Tensor"):
        return self.backbone(x) * 2
""",
    "called_with_a_variable": """
import torch
import torch.nn as nn


class Wrapper(nn.Module):
    def __init__(self, inner: nn.Module, extra: torch.Tensor):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x)


def make(inner, extra):
    return Wrapper(inner, extra)
""",
}

#: Classes the source alone does not settle: the worker builds or guesses them.
LEFT_TO_THE_WORKER = {
    "guessable_size": "def __init__(self, width: int):",
    "guessable_by_name": "def __init__(self, hidden_dim):",
    "configuration": "def __init__(self, config):",
    "default_from_a_name": "def __init__(self, inner, act=ACT):",
    "no_arguments": "def __init__(self):",
}


def _compare(tmp_path: Path, name: str, source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / f"{name}.py")
    files = [(path, source)]

    def no_worker(*args: object, **kwargs: object) -> None:
        raise AssertionError("the worker was started")

    with monkeypatch.context() as patch:
        patch.setattr(client, "start_worker", no_worker)
        patch.setattr(client, "run_worker", no_worker)
        static = check_files(files)
    with monkeypatch.context() as patch:
        patch.setattr(settle, "settled", lambda *args: None)
        patch.setattr(settle, "may_settle", lambda info: False)
        worker = check_files(files)
    assert static == worker
    [diagnostic] = static[path]
    assert diagnostic.code == "TL690" and "needs arguments" in diagnostic.message


@pytest.mark.parametrize("name", sorted(SETTLED))
def test_settled_models_read_as_the_worker_says(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _compare(tmp_path, name, SETTLED[name], monkeypatch)


def test_call_sites_with_variables_are_named(tmp_path: Path) -> None:
    path = str(tmp_path / "wrapper.py")
    [diagnostic] = check_files([(path, SETTLED["called_with_a_variable"])])[path]
    assert "its call sites pass values that are not literals" in diagnostic.message


def _missing(source: str) -> list[str] | None:
    tree = ast.parse(source)
    [node] = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    return settle.missing_arguments(node, import_aliases(tree), postponed=False)


@pytest.mark.parametrize("name", sorted(LEFT_TO_THE_WORKER))
def test_what_the_worker_could_build_is_left_to_it(name: str) -> None:
    source = f"""
import torch.nn as nn


class Net(nn.Module):
    {LEFT_TO_THE_WORKER[name]}
        super().__init__()

    def forward(self, x):
        return x
"""
    assert _missing(source) is None


@pytest.mark.parametrize(
    "definition",
    [
        "@decorate\nclass Net(nn.Module):",  # the decorator may replace the class
        "class Net(Base):",  # another library's base
        "class Net(nn.Module, metaclass=Meta):",
    ],
)
def test_classes_that_may_not_define_as_written_are_left_to_the_worker(definition: str) -> None:
    source = f"""
import torch.nn as nn
from lib import Base, Meta, decorate


{definition}
    def __init__(self, inner):
        super().__init__()

    def forward(self, x):
        return x
"""
    assert _missing(source) is None


def test_a_class_body_that_runs_code_is_left_to_the_worker() -> None:
    source = """
import torch.nn as nn


class Net(nn.Module):
    table = build_table()

    def __init__(self, inner):
        super().__init__()

    def forward(self, x):
        return x
"""
    assert _missing(source) is None
