"""Constructor arguments followed through the calling scope's names (no torch needed):
literals bound to names, a loop's first values, models built and passed on, tuples kept."""

from __future__ import annotations

import ast
from pathlib import Path

from torchlint.shapes import discover, evidence
from torchlint.shapes.astutil import dotted
from torchlint.shapes.call_values import UNKNOWN, LocalValues, changed_names, decoded

MODELS = """
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self, dim, depths):
        super().__init__()

    def forward(self, x):
        return x


class Wrapper(nn.Module):
    def __init__(self, encoder, settings, heads=()):
        super().__init__()

    def forward(self, x):
        return x
"""

SCRIPT = """
import torch.nn as nn
from models import Encoder, Wrapper

settings = dict(width=64, causal=True)
for depths, width in (((2, 2), 64), ((3, 3), 128)):
    encoder = Encoder(dim=width, depths=depths).to("cuda")
    encoder = Wrapper(encoder, settings, heads=[nn.Linear(width, 10)])
"""


def _collect(tmp_path: Path, script: str) -> dict:
    files = [(str(tmp_path / "models.py"), MODELS), (str(tmp_path / "train.py"), script)]
    return evidence.collect(discover.scan(files), files, None)


def test_names_are_followed_to_literals_loops_and_built_models(tmp_path: Path) -> None:
    facts = _collect(tmp_path, SCRIPT)
    models = str(tmp_path / "models.py")
    encoder = facts[(models, "Encoder")]["ctor"]
    assert encoder["kwargs"] == {"dim": 64, "depths": {"$tuple": [2, 2]}}
    wrapper = facts[(models, "Wrapper")]["ctor"]
    built, settings = wrapper["args"]
    # `encoder = Wrapper(encoder, ...)`: the argument is the Encoder built before.
    given = {"args": encoder["args"], "kwargs": encoder["kwargs"]}
    assert built == {"$build": {"path": models, "module": "models", "class": "Encoder", **given}}
    assert settings == {"width": 64, "causal": True}
    head = wrapper["kwargs"]["heads"][0]["$build"]
    assert head == {"callable": "torch.nn.Linear", "args": [64, 10], "kwargs": {}}


def test_a_model_changed_after_it_is_built_is_not_followed(tmp_path: Path) -> None:
    script = SCRIPT.replace('.to("cuda")', '.to("cuda")\n    encoder.blocks[-1] = nn.Identity()')
    facts = _collect(tmp_path, script)
    assert facts[(str(tmp_path / "models.py"), "Wrapper")]["ctor"] is None


def test_changed_names_are_those_changed_in_place() -> None:
    tree = ast.parse(
        "net.fc = x\ndel blocks[0]\nsetattr(head, 'w', 1)\nlayers.append(m)\n"
        "other = net.fc\ncount += 1\nprint(model.fc)\n"
    )
    assert changed_names(ast.walk(tree)) == {"net", "blocks", "head", "layers"}


def test_values_come_back_as_written() -> None:
    def named(name: str) -> str:
        return f"<{name}>"

    def built(spec: dict) -> str:
        return f"{spec['class']}{tuple(spec['args'])}"

    value = {"depths": {"$tuple": [2, {"$tuple": [1]}]}, "block": {"$name": "Block"}}
    value["net"] = {"$build": {"class": "Net", "args": [{"$tuple": [3]}], "kwargs": {}}}
    assert decoded(value, named, built) == {
        "depths": (2, (1,)),
        "block": "<Block>",
        "net": "Net((3,),)",
    }


def test_a_loop_over_a_name_takes_its_first_item() -> None:
    local = LocalValues(lambda call: None)
    for line in ("sizes = [(1, 2), (3, 4)]", "for a, b in sizes: pass", "c = b"):
        local.bind(ast.parse(line).body[0])
    assert local.value(ast.parse("(a, c)").body[0].value) == {"$tuple": [1, 2]}
    local.bind(ast.parse("for a in range(3): pass").body[0])
    assert local.value(ast.parse("a").body[0].value) is evidence.MISSING


def _function(source: str) -> ast.FunctionDef:
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.FunctionDef)
    return node


def _call(source: str) -> ast.Call:
    node = ast.parse(source).body[0].value  # type: ignore[attr-defined]
    assert isinstance(node, ast.Call)
    return node


def test_a_function_takes_what_its_call_passes_and_its_defaults() -> None:
    caller = LocalValues(lambda call: None)
    caller.bind(ast.parse("hparams = {'lr': 0.1, 'hidden': 64}").body[0])
    passed = caller.passed(_call("train('mlp', 3, 4, size=len(data), **hparams)"))
    assert passed == (["mlp", 3, 4], {"size": UNKNOWN, "lr": 0.1, "hidden": 64})
    assert passed is not None
    local = LocalValues(lambda call: None)
    local.take_parameters(_function("def train(name, *dims, epochs=10, **kw): pass"), passed)
    value = local.value
    assert value(ast.Name("name")) == "mlp" and value(ast.Name("epochs")) == 10
    assert value(ast.Name("dims")) == {"$tuple": [3, 4]}
    assert value(ast.Name("kw")) == {"size": UNKNOWN, "lr": 0.1, "hidden": 64}
    # A size to guess is a value of its own, never part of a list or a dictionary.
    assert value(ast.parse("[size, 1]").body[0].value) is evidence.MISSING  # type: ignore[attr-defined]


def test_a_call_that_does_not_fit_the_function_values_nothing() -> None:
    local = LocalValues(lambda call: None)
    local.take_parameters(_function("def train(hidden): pass"), ([64], {"lr": 0.1}))
    assert local.value(ast.Name("hidden")) is evidence.MISSING and not local.from_caller


def test_a_dictionary_changed_in_place_is_changed() -> None:
    tree = ast.parse("kw.update(lr=1)\nopts.setdefault('a', 1)\nkept.get('a')\n")
    assert changed_names(ast.walk(tree)) == {"kw", "opts"}


DATA_MODULE = """
import torch.nn as nn


class MNISTDataModule:
    def __init__(self, data_dir="./"):
        self.data_dir = data_dir
        self.dims = (1, 28, 28)
        self.num_classes = 10
        self.splits, self.seed = (55000, 5000), 42

    def setup(self, stage=None):
        self.num_classes = 10 if stage else 11


class LitModel(nn.Module):
    def __init__(self, channels, width, height, num_classes=2, splits=None):
        super().__init__()

    def forward(self, x):
        return x


dm = MNISTDataModule()
model = LitModel(*dm.dims, dm.num_classes)
model = LitModel(*dm.dims, 3, splits=dm.splits)
"""


def test_an_objects_attributes_set_once_to_literals_are_followed(tmp_path: Path) -> None:
    """Lightning's `LitModel(*dm.dims, dm.num_classes)`: `dims` is set once, in `__init__`,
    to a literal; `num_classes` is set again in `setup`, and `splits` with another name."""
    path = tmp_path / "train.py"
    files = [(str(path), DATA_MODULE)]
    facts = evidence.collect(discover.scan(files), files, None)
    # Not literals here: the worker looks the names up in the script's module.
    first = facts[(str(path), "LitModel")]["ctor"]
    assert first["args"] == [1, 28, 28, {"$name": "dm.num_classes"}]
    files = [(str(path), DATA_MODULE.replace("model = LitModel(*dm.dims, dm.num_classes)", ""))]
    second = evidence.collect(discover.scan(files), files, None)[(str(path), "LitModel")]
    assert second["ctor"]["args"] == [1, 28, 28, 3]
    assert second["ctor"]["kwargs"] == {"splits": {"$name": "dm.splits"}}


def test_a_model_built_from_data_is_handed_on_with_its_sizes_to_guess(tmp_path: Path) -> None:
    script = """
import numpy as np
from models import Encoder, Wrapper

features = np.load("features.npy")
encoder = Encoder(dim=features.shape[1], depths=(2, 2))
wrapper = Wrapper(encoder, {"width": 64})
nested = Wrapper(Wrapper(encoder, {}), {})
"""
    facts = _collect(tmp_path, script)
    models = str(tmp_path / "models.py")
    wrapper = facts[(models, "Wrapper")]
    # The part's data size is `UNKNOWN`, so the wrapper is a call site to guess, not one
    # whose arguments are all known.
    assert wrapper["ctor"] is None
    part = wrapper["partial"]["args"][0]["$build"]
    assert part["class"] == "Encoder"
    assert part["kwargs"] == {"dim": UNKNOWN, "depths": {"$tuple": [2, 2]}}
    assert evidence.unknown_in(wrapper["partial"])
    # A part to guess is never built inside another model's arguments.
    local = LocalValues(
        lambda call: ("models.py", "models", "Wrapper") if dotted(call.func) == "Wrapper" else None
    )
    local.bind(ast.parse("inner = Wrapper(load(), {})").body[0])
    assert local.value(ast.parse("Wrapper(inner, {})").body[0].value) is evidence.MISSING  # type: ignore[attr-defined]


def test_a_functions_own_names_hide_the_modules(tmp_path: Path) -> None:
    source = (
        MODELS
        + """

import numpy as np

dim = int(np.load("dim.npy"))


class Model(nn.Module):
    def __init__(self, dim, depths):
        super().__init__()
        self.encoder = Encoder(dim=dim, depths=depths)
"""
    )
    path = str(tmp_path / "models.py")
    facts = evidence.collect(discover.scan([(path, source)]), [(path, source)], None)
    encoder = facts[(path, "Encoder")]
    # `dim` is the constructor's parameter, a size to guess: not the module's `dim`.
    assert encoder["ctor"] is None
    assert encoder["partial"]["kwargs"] == {"dim": UNKNOWN, "depths": UNKNOWN}
