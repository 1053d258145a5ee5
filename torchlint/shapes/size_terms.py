"""Sizes in a message written as expressions of the constructor's arguments.

A model built three times with guessed sizes (see `guess`) fails three times with messages
that differ only in their numbers: `nn.LayerNorm(96) ... gets [384]`, then `(160) ...
[640]`, then `(64) ... [256]`. Each number that changes is matched with one expression of
the arguments that gives it in every run (`d_model`, `4*d_model`, `d_model+1`,
`heads*head_dim`, `dim//heads`, `in_dim+out_dim`), and the message is written with it:
`nn.LayerNorm(d_model) ... gets [4*d_model]`. A number no such expression explains means
the runs failed in different ways: no message, and the finding is not reported.
"""

from __future__ import annotations

import argparse
import itertools
import re
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

#: A size (`[N, 96]`, `Linear(96, 160)`), or the index of a layer in its list (`blocks.1`).
_NUMBER = re.compile(r"((?<![\w.])\d+(?![\w.])|(?<=[A-Za-z_]\.)\d+(?!\w))")
#: Largest denominator of a coefficient (`d_model//2`, `3*d/4`).
_MAX_DENOMINATOR = 8


def variables(runs: list[dict[str, Any]]) -> dict[str, tuple[int, ...]]:
    """Each integer argument (and each item of a shape tuple) with its value in every run."""
    found: dict[str, tuple[int, ...]] = {}
    for name, value in runs[0].items():
        if isinstance(value, dict):  # a configuration read by key (`cfg["emb_dim"]`)
            keyed = [{f'{name}["{k}"]': v for k, v in run[name].items()} for run in runs]
            found.update(variables(keyed))
        elif getattr(value, "record", False):  # a record of guessed sizes (`dims.n_vocab`)
            fields = [{f"{name}.{k}": v for k, v in run[name].sizes.items()} for run in runs]
            found.update(variables(fields))
        elif isinstance(value, argparse.Namespace) or _made_config(value):
            # The script's options (`config.d_out`), or a configuration a factory made and
            # the script completed (minGPT's `GPT.get_default_config()`).
            fields = [{f"{name}.{k}": v for k, v in vars(run[name]).items()} for run in runs]
            found.update(variables(fields))
        elif _integer(value):
            found[name] = tuple(run[name] for run in runs)
        elif isinstance(value, tuple) and all(_integer(v) for v in value):
            for index in range(len(value)):
                found[f"{name}[{index}]"] = tuple(run[name][index] for run in runs)
    return {name: values for name, values in found.items() if len(set(values)) > 1}


def _made_config(value: Any) -> bool:
    """A plain object of fields: no class, function or layer, and attributes of its own."""
    return (
        not isinstance(value, type)
        and not callable(value)
        and isinstance(getattr(value, "__dict__", None), dict)
    )


def symbolic(messages: list[str], runs: list[dict[str, Any]]) -> str | None:
    """The message of every run with its changing numbers written as expressions of the
    arguments, or None when the messages differ otherwise or a number fits no expression."""
    pieces = [_NUMBER.split(message) for message in messages]
    if len({len(p) for p in pieces}) != 1:
        return None
    known = variables(runs)
    out = []
    for index, texts in enumerate(zip(*pieces, strict=True)):
        if index % 2 == 0:
            if len(set(texts)) != 1:
                return None
            out.append(texts[0])
            continue
        values = tuple(int(t) for t in texts)
        if len(set(values)) == 1 or out[-1].endswith("."):
            out.append(texts[0])  # a layer's index names the layer of the first run
            continue
        term = expression(values, known)
        if term is None:
            return None
        out.append(term)
    return "".join(out)


def never_equal(message: str, known: dict[str, tuple[int, ...]]) -> bool:
    """Whether the sizes a symbolic message compares (`expects 2*breadth input features,
    but ... produces breadth`) differ for every positive value of the arguments; False when
    some values make them equal (`breadth*stack` and `3*breadth`: the model needs stack=3)."""
    for pattern in _COMPARED:
        for found in pattern.finditer(message):
            # Shapes differ when one of their sizes always differs (a norm's [C, H, W]
            # against [C, H-2, W-2]).
            pairs = zip(found["x"].split(", "), found["y"].split(", "), strict=False)
            if all(_may_equal(x, y, known) for x, y in pairs):
                return False
    return True


#: `dims[1]`: an item of a per-stage argument; `cfg["emb_dim"]`: a key of a configuration.
_ITEM = r'\[\d+\]|\["\w+"\]'
_SIZE = rf"(?:[^\[\]\s;,]|{_ITEM})+"
#: The two sizes a layer-size message compares (what the layer expects, what it gets).
_GOT = rf", but (?:it receives|the input has|\S+ produces|gets) \[?(?P<y>{_SIZE}(?:, {_SIZE})*)"
_COMPARED = (
    re.compile(r"expects (?P<x>\S+) (?:input features|input channels|channels)" + _GOT),
    re.compile(r"expects (?P<x>\S+) channels in \S+ groups" + _GOT),
    re.compile(rf"of size \[(?P<x>(?:[^\[\]]|{_ITEM})+)\]" + _GOT),
)
#: An argument's name, a field of one (`dims.n_state`, `config.d_out`) or an item of one.
_IDENTIFIER = re.compile(rf"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*(?:{_ITEM})?")
_TERM = re.compile(r'[\w\[\]\s+\-*/()."]+')
#: Values tried for the arguments a comparison involves, by how many there are.
_SEARCH = {1: 4096, 2: 256, 3: 40}


def _may_equal(x: str, y: str, known: dict[str, tuple[int, ...]]) -> bool:
    """Whether some positive values of the arguments make two size expressions equal; True
    when that cannot be told (an expression of more arguments, or of an input's size)."""
    if x == y:
        return True
    names = list(dict.fromkeys(n for n in _IDENTIFIER.findall(f"{x} {y}")))
    if not names:
        return False  # numbers alone: they were the same in every run, and differ
    if len(names) > len(_SEARCH) or any(n not in known for n in names):
        return True
    if not (_TERM.fullmatch(x) and _TERM.fullmatch(y)):
        return True
    plain = {name: f"v{index}" for index, name in enumerate(names)}
    header = f"lambda {', '.join(plain.values())}: "
    try:
        # Only names of arguments, numbers and arithmetic (checked above) are evaluated.
        left, right = (eval(header + _rename(t, plain), {"__builtins__": {}}) for t in (x, y))
    except SyntaxError:
        return True
    top = _SEARCH[len(names)]
    for values in itertools.product(range(1, top + 1), repeat=len(names)):
        try:
            if left(*values) == right(*values):
                return True
        except ZeroDivisionError:
            return True
    return False


def _rename(term: str, plain: dict[str, str]) -> str:
    return _IDENTIFIER.sub(lambda m: plain[m.group(0)], term)


def with_correction(message: str) -> str:
    """The message with what to write, when it names a layer whose first size argument (a
    norm's only one) is the size it expects: `nn.Linear(2*breadth, tokens) expects 2*breadth
    ... produces breadth` -> `; write nn.Linear(breadth, tokens)`."""
    if "; write " in message:
        return message
    layer = _LAYER_CALL.search(message)
    compared = next((m for p in _COMPARED if (m := p.search(message))), None)
    if layer is None or compared is None or ", " in compared["y"]:
        return message
    arguments = layer["args"].split(", ")
    position = 1 if layer["kind"] == "GroupNorm" else 0
    expected = compared["x"]
    if expected.startswith("[") and expected.endswith("]"):
        expected = expected[1:-1]  # a norm's shape, `[dim]`; not `dims[1]`
    if len(arguments) <= position or arguments[position] != expected:
        return message
    arguments[position] = compared["y"]
    return f"{message}; write nn.{layer['kind']}({', '.join(arguments)})"


_LAYER_CALL = re.compile(r"\bnn\.(?P<kind>\w+)\((?P<args>[^()]*)\)")


def expression(values: tuple[int, ...], known: dict[str, tuple[int, ...]]) -> str | None:
    """The simplest expression of the arguments in `known` that takes `values` in every run."""
    for term in _candidates(values, known):
        return term
    return None


def _candidates(values: tuple[int, ...], known: dict[str, tuple[int, ...]]) -> Iterator[str]:
    items = list(known.items())
    for name, xs in items:  # c*x
        c = _ratio(values, xs)
        if c is not None:
            yield _scaled(name, c)
    for name, xs in items:  # c*x + k
        if xs[0] == xs[1]:
            continue
        c = Fraction(values[0] - values[1], xs[0] - xs[1])
        k = values[0] - c * xs[0]
        fits = all(c * x + k == v for v, x in zip(values, xs, strict=True))
        if c > 0 and k.denominator == 1 and _small(c) and fits:
            yield f"{_scaled(name, c)}{'+' if k > 0 else '-'}{abs(k)}"
    for (a, xs), (b, ys) in itertools.combinations(items, 2):
        products = tuple(x * y for x, y in zip(xs, ys, strict=True))
        c = _ratio(values, products)
        if c is not None:
            yield _scaled(f"{a}*{b}", c)
        if values == tuple(x + y for x, y in zip(xs, ys, strict=True)):
            yield f"{a}+{b}"
    for (a, xs), (b, ys) in itertools.permutations(items, 2):
        if all(x % y == 0 and v == x // y for v, x, y in zip(values, xs, ys, strict=True)):
            yield f"{a}//{b}"


def _ratio(values: tuple[int, ...], xs: tuple[int, ...]) -> Fraction | None:
    """c with values == c * xs in every run (a small fraction), else None."""
    if not xs[0]:
        return None
    c = Fraction(values[0], xs[0])
    if c and _small(c) and all(c * x == v for v, x in zip(values, xs, strict=True)):
        return c
    return None


def _small(c: Fraction) -> bool:
    return c.denominator <= _MAX_DENOMINATOR and abs(c.numerator) <= 4096


def _scaled(name: str, c: Fraction) -> str:
    if c == 1:
        return name
    if c.denominator == 1:
        return f"{c.numerator}*{name}"
    if c.numerator == 1:
        return f"{name}//{c.denominator}"
    return f"{c.numerator}*{name}//{c.denominator}"


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
