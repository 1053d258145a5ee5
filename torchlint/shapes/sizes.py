"""Symbolic sizes in readable terms: `[N, 32, H/2, W/2]`, `H/2-2`, `(H//2)·(W//2) = 196`.

The worker's ShapeEnv names its symbols `s0`, `s26`, ...; `Names` maps the input's symbols
to the letters the user thinks in (N for the batch, C, H, W, D for images and volumes, L for
sequence length) and renders size expressions compactly, with floor division written `/`
inside shapes (every size is an integer) and `//` in equations (where it matters).
"""

from __future__ import annotations

from typing import Any

from torchlint.shapes import compat
from torchlint.shapes.compat import size_functions as tf
from torchlint.shapes.deferred import sympy

#: Display order of the letters in a product (N*L, H*W).
_ORDER = "NCDHWLT"
#: Names for the free sizes of a declared shape, by rank (position 0 is always N).
_BY_RANK = {2: "NL", 3: "NLC", 4: "NCHW", 5: "NCDHW"}


class Names:
    """Symbol -> letter, for the free sizes of one model's inputs."""

    def __init__(self, names: dict[sympy.Symbol, str], ranks: dict[str, tuple[int, int]]) -> None:
        """`names`: the engine's names ("N", "H", "T", "S2"); `ranks`: name -> (rank, position)."""
        used = set(names.values())
        self.names: dict[sympy.Symbol, str] = {}
        for symbol, name in names.items():
            self.names[symbol] = _letter(name, used, ranks.get(name))

    def size(self, expr: Any) -> str:
        """`H/2-2`, `32*(H/4)*(W/4)`, `(H+1)/2`, `N*L`, `768`."""
        expr = _simplify(_sympify(expr))
        texts = [_show(e, self.names, floor="/", times="*") for e in (expr, *_folded(expr))]
        return min(texts, key=len)

    def shape(self, shape: tuple[Any, ...] | list[Any] | None) -> str:
        if shape is None:
            return "?"
        return "[" + ", ".join(self.size(d) for d in shape) + "]"

    def dims(self, shape: tuple[Any, ...] | list[Any]) -> list[int | str]:
        """A shape as JSON: numbers stay numbers, symbolic sizes become their text."""
        out: list[int | str] = []
        for d in shape:
            value = _simplify(_sympify(d))
            out.append(int(value) if isinstance(value, sympy.Integer) else self.size(value))
        return out

    def letter(self, symbol: sympy.Symbol) -> str:
        return self.names.get(symbol, str(symbol))

    def equation(self, lhs: Any, rhs: Any) -> str:
        """`(H//2)·(W//2) = 196`: a size equation, with common factors cancelled."""
        lhs, rhs = _simplify(_sympify(lhs)), _simplify(_sympify(rhs))
        if isinstance(rhs, sympy.Integer) and not isinstance(lhs, sympy.Integer):
            try:
                coefficient, rest = lhs.as_content_primitive()
            except (AttributeError, TypeError, ValueError):
                coefficient, rest = sympy.Integer(1), lhs
            if (
                isinstance(coefficient, sympy.Integer)
                and int(coefficient) > 1
                and int(rhs) % int(coefficient) == 0
            ):
                lhs, rhs = rest, sympy.Integer(int(rhs) // int(coefficient))
        left = _show(lhs, self.names, floor="//", times="\u00b7")
        right = _show(rhs, self.names, floor="//", times="\u00b7")
        return f"{left} = {right}"


def _letter(name: str, used: set[str], rank: tuple[int, int] | None) -> str:
    if name == "T" and "L" not in used:
        return "L"  # a Conv1d's length
    if name.startswith("S") and name[1:].isdigit() and rank is not None:
        letters = _BY_RANK.get(rank[0], "")
        if rank[1] < len(letters) and letters[rank[1]] not in used:
            used.add(letters[rank[1]])
            return letters[rank[1]]
    return name


def _sympify(expr: Any) -> Any:
    if isinstance(expr, bool):
        return sympy.Integer(int(expr))
    if isinstance(expr, int):
        return sympy.Integer(expr)
    return compat.computed_expr(expr)  # a SymInt's expression; anything else as it is


def _simplify(expr: Any) -> Any:
    """`(H - 4)//2` -> `H//2 - 2`: pull whole multiples of the divisor out of a floor division."""
    if not isinstance(expr, sympy.Basic) or not expr.args:
        return expr
    args = [_simplify(a) for a in expr.args]
    if isinstance(expr, (tf.FloorDiv, tf.CleanDiv)):
        numerator, divisor = args
        if (
            isinstance(divisor, sympy.Integer)
            and int(divisor) > 0
            and isinstance(numerator, sympy.Add)
        ):
            d = int(divisor)
            constant = sum(int(a) for a in numerator.args if isinstance(a, sympy.Integer))
            if constant and constant % d == 0:
                rest = sympy.Add(*[a for a in numerator.args if not isinstance(a, sympy.Integer)])
                return tf.FloorDiv(rest, divisor) + constant // d
        if numerator == expr.args[0] and divisor == expr.args[1]:
            return expr
        return tf.FloorDiv(numerator, divisor)
    if isinstance(expr, sympy.Mul):
        # `(16*(H/8) - 16)*(W/8 - 1)` -> `16*(H/8 - 1)*(W/8 - 1)`
        coefficient, factors = sympy.Integer(1), []
        for factor in args:
            if isinstance(factor, sympy.Add):
                content, factor = factor.as_content_primitive()
                coefficient *= content
            factors.append(factor)
        return sympy.Mul(coefficient, *factors)
    if all(a is b for a, b in zip(args, expr.args, strict=True)):
        return expr
    try:
        return expr.func(*args)
    except (TypeError, ValueError):
        return expr


def _folded(expr: Any) -> list[Any]:
    """`(H-1)//2 + 1` -> `(H+1)//2`: a constant added to a floor division, moved inside."""
    if not isinstance(expr, sympy.Add) or len(expr.args) != 2:
        return []
    constant = next((a for a in expr.args if isinstance(a, sympy.Integer)), None)
    division = next((a for a in expr.args if isinstance(a, (tf.FloorDiv, tf.CleanDiv))), None)
    if constant is None or division is None:
        return []
    numerator, divisor = division.args
    if not isinstance(divisor, sympy.Integer) or int(divisor) <= 0:
        return []
    return [tf.FloorDiv(numerator + constant * divisor, divisor)]


def _key(expr: Any, names: dict[sympy.Symbol, str]) -> tuple[int, str]:
    text = _show(expr, names, floor="/", times="*")
    letter = text.lstrip("(")[:1]
    return (_ORDER.index(letter) if letter and letter in _ORDER else len(_ORDER), text)


def _show(expr: Any, names: dict[sympy.Symbol, str], *, floor: str, times: str) -> str:
    if isinstance(expr, (int, sympy.Integer)):
        return str(int(expr))
    if isinstance(expr, sympy.Symbol):
        return names.get(expr, str(expr))
    if isinstance(expr, sympy.Add):
        constant = sum(int(a) for a in expr.args if isinstance(a, sympy.Integer))
        terms = sorted(
            (a for a in expr.args if not isinstance(a, sympy.Integer)),
            key=lambda a: _key(a, names),
        )
        text = ""
        for term in terms:
            coefficient, _ = term.as_coeff_Mul()
            part = _show(term, names, floor=floor, times=times)
            if text and coefficient.is_negative:
                text += part  # "-2*H" keeps its sign
            elif text:
                text += "+" + part
            else:
                text = part
        if constant > 0:
            text += f"+{constant}"
        elif constant < 0:
            text += f"-{-constant}"
        return text
    if isinstance(expr, sympy.Mul):
        coefficient, rest = expr.as_coeff_Mul()
        factors = sorted(sympy.Mul.make_args(rest), key=lambda a: _key(a, names))
        parts = [_wrap(f, names, floor=floor, times=times) for f in factors]
        if coefficient == -1:
            return "-" + times.join(parts)
        if coefficient != 1:
            parts.insert(0, str(coefficient))
        return times.join(parts)

    def show(part: Any) -> str:
        return _show(part, names, floor=floor, times=times)

    def wrap(part: Any) -> str:
        return _wrap(part, names, floor=floor, times=times)

    if isinstance(expr, (tf.FloorDiv, tf.CleanDiv)):
        return f"{wrap(expr.args[0])}{floor}{wrap(expr.args[1])}"
    if isinstance(expr, tf.CeilDiv):
        return f"ceil({show(expr.args[0])}/{show(expr.args[1])})"
    if isinstance(expr, (tf.Mod, tf.PythonMod)):
        return f"{wrap(expr.args[0])} % {wrap(expr.args[1])}"
    if isinstance(expr, sympy.Pow) or type(expr).__name__ == "PowByNatural":
        return f"{wrap(expr.args[0])}^{show(expr.args[1])}"
    if isinstance(expr, (sympy.Max, tf.Max)):
        return "max(" + ", ".join(show(a) for a in expr.args) + ")"
    if isinstance(expr, (sympy.Min, tf.Min)):
        return "min(" + ", ".join(show(a) for a in expr.args) + ")"
    text = str(expr)
    for symbol, name in names.items():
        text = text.replace(str(symbol), name)
    return text


def _wrap(expr: Any, names: dict[sympy.Symbol, str], *, floor: str, times: str) -> str:
    text = _show(expr, names, floor=floor, times=times)
    if isinstance(expr, sympy.Add) or (
        isinstance(expr, (sympy.Mul, tf.FloorDiv, tf.CleanDiv, tf.Mod, tf.PythonMod))
        and not text.isalnum()
    ):
        return f"({text})"
    return text
