"""Guessed constructor arguments: what the constructor's body says they are, and sizes in
messages written as expressions of them."""

from __future__ import annotations

import ast
import inspect

import pytest

from torchlint.shapes.ctor_usage import init_uses
from torchlint.shapes.guess import describe, guesses_for, unwrap
from torchlint.shapes.size_terms import expression, never_equal, symbolic, with_correction

RUNS = [
    {"d_model": 96, "heads": 2, "img_shape": (3, 64, 64)},
    {"d_model": 160, "heads": 4, "img_shape": (1, 128, 128)},
    {"d_model": 64, "heads": 8, "img_shape": (4, 96, 96)},
]
KNOWN = {"d_model": (96, 160, 64), "heads": (2, 4, 8), "x": (3, 1, 4)}


@pytest.mark.parametrize(
    ("values", "term"),
    [
        ((96, 160, 64), "d_model"),
        ((384, 640, 256), "4*d_model"),
        ((48, 80, 32), "d_model//2"),
        ((97, 161, 65), "d_model+1"),
        ((384, 1280, 1024), "2*d_model*heads"),
        ((48, 40, 8), "d_model//heads"),
        ((99, 161, 68), "d_model+x"),
        ((7, 11, 13), None),
    ],
)
def test_a_size_is_matched_with_one_expression(values: tuple[int, ...], term: str) -> None:
    assert expression(values, KNOWN) == term


def test_messages_are_written_with_the_arguments() -> None:
    messages = [
        f"norm = nn.LayerNorm({d}) of size [{d}], but gets [{4 * d}] (at model.py:18)"
        for d in (96, 160, 64)
    ]
    assert symbolic(messages, RUNS) == (
        "norm = nn.LayerNorm(d_model) of size [d_model], but gets [4*d_model] (at model.py:18)"
    )
    shapes = [f"gets {run['img_shape'][0] + 1}" for run in RUNS]
    assert symbolic(shapes, RUNS) == "gets img_shape[0]+1"
    # Messages that differ in their words, or a size no expression gives: no message.
    assert symbolic(["fc1 expects 96", "fc2 expects 160", "fc1 expects 64"], RUNS) is None
    assert symbolic(["gets 7", "gets 11", "gets 13"], RUNS) is None


@pytest.mark.parametrize(
    ("message", "definite"),
    [
        (
            "fc = nn.Linear(2*d_model, 8) expects 2*d_model input features, but a produces d_model",
            True,
        ),
        (
            "fc = nn.Linear(d_model*heads, 8) expects d_model*heads input features, "
            "but a produces 3*d_model",
            False,
        ),
        ("fc = nn.Linear(64, 8) expects 64 input features, but embed produces d_model", False),
        (
            "n = nn.LayerNorm(d_model) normalizes the last 1 dim(s) of size [d_model], "
            "but gets [d_model+1]",
            True,
        ),
        ("c = nn.Conv2d(x+32, 8, 3) expects x+32 input channels, but conv produces 32", True),
        ("fc = nn.Linear(d_model, 8) expects d_model input features, but conv produces 8*H", False),
    ],
)
def test_a_mismatch_stands_only_when_no_value_fits(message: str, definite: bool) -> None:
    assert never_equal(message, KNOWN) is definite


def test_what_to_write_replaces_the_expected_size() -> None:
    message = (
        "fc = nn.Linear(2*d_model, 8) expects 2*d_model input features, but a produces d_model"
    )
    assert with_correction(message).endswith("; write nn.Linear(d_model, 8)")
    norm = "n = nn.GroupNorm(32, d_model) expects d_model channels in 32 groups, but a produces 96"
    assert with_correction(norm).endswith("; write nn.GroupNorm(32, 96)")


def _guesses(source: str) -> list | None:
    init = ast.parse(source).body[0]
    assert isinstance(init, ast.FunctionDef)
    args = init.args.args[1:]
    defaults = [inspect.Parameter.empty] * (len(args) - len(init.args.defaults))
    defaults += [ast.literal_eval(d) for d in init.args.defaults]
    parameters = [
        inspect.Parameter(a.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=d)
        for a, d in zip(args, defaults, strict=True)
    ]
    return guesses_for(parameters, init_uses(init))


def test_the_body_tells_sizes_counts_shapes_and_choices() -> None:
    [variant] = _guesses(
        "def __init__(self, tokens, breadth, stack, img_shape):\n"
        "    self.e = nn.Embedding(tokens, breadth)\n"
        "    self.b = [nn.Linear(breadth * stack, breadth) for _ in range(stack)]\n"
        "    c, h, w = img_shape\n"
    )
    assert [run["stack"] for run in variant.runs] == [2, 3, 4]
    assert len({run["tokens"] for run in variant.runs}) == 3
    assert variant.runs[0]["img_shape"] == (3, 64, 64)
    variants = _guesses(
        "def __init__(self, dim, kind, gated):\n"
        "    self.fc = nn.Linear(dim, dim)\n"
        "    if kind == 'lstm' and gated:\n"
        "        pass\n"
    )
    # Each value a branch tests, and for a string another value too (the else branch).
    assert [(repr(v.fixed["kind"]), v.fixed["gated"]) for v in variants] == [
        ("'lstm'", True),
        ("'lstm'", False),
        ("none of 'lstm'", True),
        ("none of 'lstm'", False),
    ]


def test_a_part_the_parent_hands_in_is_not_guessed() -> None:
    assert (
        _guesses("def __init__(self, dim, shortcut=None):\n    self.s = shortcut or I()\n") is None
    )
    # An optional value the constructor neither keeps nor calls is no part.
    assert _guesses("def __init__(self, dim, plan=None):\n    plan = fill(plan, dim)\n") is not None
    # An argument whose attributes are read is an object, not a number.
    assert _guesses("def __init__(self, model, size):\n    self.c = model.channels\n") is None
    # A wrapper keeps the model it is handed: `model` and `net` are no sizes (`d_model`,
    # `nhid` are).
    assert _guesses("def __init__(self, model, hidden):\n    self.model = model\n") is None
    assert _guesses("def __init__(self, net, hidden):\n    self.net = net\n") is None
    assert _guesses("def __init__(self, nhid):\n    self.fc = L(nhid, 2)\n") is not None
    [variant] = _guesses("def __init__(self, d_model):\n    self.fc = L(d_model, 2)\n")
    assert all(isinstance(run["d_model"], int) for run in variant.runs)


def test_a_default_head_count_is_guessed_with_the_widths() -> None:
    # `heads=64` fits the real widths, not those guessed for `dim`: it is guessed too.
    [variant] = _guesses("def __init__(self, dim, heads=64):\n    self.fc = nn.Linear(dim, dim)\n")
    assert [run["heads"] for run in variant.runs] == [2, 4, 8]
    # A size per head keeps its default.
    [variant] = _guesses(
        "def __init__(self, dim, dim_head=64):\n    self.fc = nn.Linear(dim, dim)\n"
    )
    assert all(run.get("dim_head", 64) == 64 for run in variant.runs)
    # Nothing guessed: the defaults stand.
    assert _guesses("def __init__(self, dim=32, heads=64):\n    pass\n") is None


def test_a_parameter_kept_first_is_followed_to_its_layer() -> None:
    # `self.positive_len = positive_len`, then `nn.Linear(self.positive_len + ...)`: a size,
    # as is a parameter a size is computed from (`self.position_dim = freqs * 8`).
    [variant] = _guesses(
        "def __init__(self, positive_len, freqs):\n"
        "    self.positive_len = positive_len\n"
        "    self.position_dim = freqs * 8\n"
        "    self.fc = nn.Linear(self.positive_len + self.position_dim, 512)\n"
    )
    assert all(isinstance(run["positive_len"], int) for run in variant.runs)
    assert all(isinstance(run["freqs"], int) for run in variant.runs)
    # A name assigned twice may hold anything the second time: not followed.
    assert (
        _guesses(
            "def __init__(self, amount):\n"
            "    self.w = amount\n"
            "    self.w = other\n"
            "    self.fc = nn.Linear(self.w, 4)\n"
        )
        is None
    )


class _Processor:
    def __call__(self, attn: object, x: object) -> object:
        return x


def test_a_helper_object_named_by_its_annotation_is_built() -> None:
    processor = inspect.Parameter(
        "processor", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation="_Processor"
    )
    dim = inspect.Parameter("dim", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=int)
    [variant] = guesses_for([dim, processor], None, {"_Processor": _Processor})
    built = [unwrap(run)["processor"] for run in variant.runs]
    assert all(isinstance(p, _Processor) for p in built) and len({id(p) for p in built}) == 3
    assert describe({"processor": variant.runs[0]["processor"]}) == "processor=_Processor()"
    # Not a layer, nor a class that needs arguments.
    assert guesses_for([dim, processor], None, {"_Processor": dict}) is None


def test_options_made_by_a_factory_that_cannot_be_found_stay_a_namespace() -> None:
    import argparse

    from torchlint.shapes import option_objects

    value = {"$options": {"__made_by__": "Missing.get_default_config", "n_embd": 48}}

    def resolve(name: str) -> object:
        raise KeyError(name)

    config = option_objects.filled(value, (96, 160), resolve)
    assert isinstance(config, argparse.Namespace) and config.n_embd == 48
