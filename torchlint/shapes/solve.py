"""Decide whether a size condition can hold for some input, by bounded search.

Guards from the ShapeEnv are sympy expressions over the input's symbolic sizes, using
torch's integer functions (FloorDiv, Mod, ...). They are compiled into vectorised torch
integer code and searched over positive sizes up to `BOUND` (batch sizes up to
`MAX_BATCH`): first equal sizes for all
spatial dimensions (the usual square image), then one size at a time, then (for two sizes)
the full grid, then a square side against one more size (a clip's frames), then random
samples.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import torch

from torchlint.shapes.compat import size_functions as tf
from torchlint.shapes.deferred import sympy

BOUND = 4096
_SPATIAL = ("H", "W", "D")
#: Spatial sizes below this are not real inputs (a 1x1 image would "fix" any conv net).
MIN_SPATIAL = 4
#: Batch sizes searched: a condition that only a batch of thousands meets is none a user
#: has, and the batch's range is a factor of every search with another size.
MAX_BATCH = 256
#: A clip's frames searched against its side.
MAX_FRAMES = 128
#: Channel counts tried with square images when the channels' own hint finds none.
_FEW = (1, 3, 2, 4)

Values = dict["sympy.Symbol", torch.Tensor]
Compiled = Callable[[Values], torch.Tensor]


class Unsupported(Exception):
    """The expression uses a function the evaluator does not know."""


def compile_expr(expr: Any) -> Compiled:
    """A function of tensors of symbol values that evaluates `expr` elementwise."""
    if isinstance(expr, bool) or expr in (sympy.true, sympy.false):
        value = bool(expr)
        return lambda env: torch.tensor(value)
    if isinstance(expr, int):
        return lambda env: torch.tensor(expr, dtype=torch.int64)
    if isinstance(expr, sympy.Symbol):
        return lambda env: env[expr]
    if isinstance(expr, sympy.Integer):
        number = int(expr)
        return lambda env: torch.tensor(number, dtype=torch.int64)
    args = [compile_expr(a) for a in expr.args]
    if isinstance(expr, sympy.Add):
        return lambda env: _fold(args, env, torch.add)
    if isinstance(expr, sympy.Mul):
        return lambda env: _fold(args, env, torch.mul)
    if isinstance(expr, sympy.Pow) or type(expr).__name__ == "PowByNatural":
        exponent = expr.args[1]
        if not (isinstance(exponent, sympy.Integer) and int(exponent) >= 0):
            raise Unsupported(str(expr))
        base, power = args[0], int(exponent)
        return lambda env: torch.pow(base(env), power)
    if isinstance(expr, (tf.FloorDiv, tf.CleanDiv)):
        a, b = args
        return lambda env: torch.div(a(env), _nonzero(b(env)), rounding_mode="floor")
    if isinstance(expr, tf.CeilDiv):
        a, b = args
        return lambda env: -torch.div(-a(env), _nonzero(b(env)), rounding_mode="floor")
    if isinstance(expr, (tf.Mod, tf.PythonMod)):
        a, b = args
        return lambda env: torch.remainder(a(env), _nonzero(b(env)))
    if isinstance(expr, tf.ModularIndexing):
        a, b, c = args
        return lambda env: torch.remainder(
            torch.div(a(env), _nonzero(b(env)), rounding_mode="floor"), _nonzero(c(env))
        )
    if isinstance(expr, (tf.Max, sympy.Max)):
        return lambda env: _fold(args, env, torch.maximum)
    if isinstance(expr, (tf.Min, sympy.Min)):
        return lambda env: _fold(args, env, torch.minimum)
    if isinstance(expr, tf.Identity):
        return args[0]
    relations: dict[type, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
        sympy.Eq: torch.eq,
        sympy.Ne: torch.ne,
        sympy.Lt: torch.lt,
        sympy.Le: torch.le,
        sympy.Gt: torch.gt,
        sympy.Ge: torch.ge,
    }
    for kind, fn in relations.items():
        if isinstance(expr, kind):
            a, b = args
            return lambda env, fn=fn: fn(a(env), b(env))
    if isinstance(expr, sympy.And):
        return lambda env: _fold(args, env, torch.logical_and)
    if isinstance(expr, sympy.Or):
        return lambda env: _fold(args, env, torch.logical_or)
    if isinstance(expr, sympy.Not):
        return lambda env: torch.logical_not(args[0](env))
    raise Unsupported(type(expr).__name__)


def _fold(args: list[Compiled], env: Values, fn: Callable) -> torch.Tensor:
    result = args[0](env)
    for arg in args[1:]:
        result = fn(result, arg(env))
    return result


def _nonzero(value: torch.Tensor) -> torch.Tensor:
    return torch.where(value == 0, torch.ones_like(value), value)


class Problem:
    """Find sizes for `symbols` (named "N", "H", ...) that make all `conditions` true."""

    def __init__(
        self,
        conditions: list[Any],
        names: dict[sympy.Symbol, str],
        hints: dict[sympy.Symbol, int],
    ) -> None:
        self.names = names
        self.hints = hints
        # In the order of their names (`H` before `W`), not of the ShapeEnv's numbering: the
        # search must not depend on how many symbols earlier runs made.
        self.symbols = sorted(
            set().union(*(_free(c) for c in conditions)) if conditions else set(),
            key=lambda s: (names.get(s, "~"), str(s)),
        )
        self.unknown = [s for s in self.symbols if s not in names]
        self.check = _conjunction([compile_expr(c) for c in conditions])

    def _eval(self, values: Values) -> torch.Tensor:
        full = {s: values.get(s, torch.tensor(self.hints.get(s, 1))) for s in self.symbols}
        with torch.no_grad():
            return self.check(full)

    def square_solutions(self, others: dict[sympy.Symbol, int] | None = None) -> list[int]:
        """Sizes t for which every spatial size = t (the others at their hints, or at the
        values `others` gives) works."""
        spatial = [s for s in self.symbols if self.names.get(s, "")[:1] in _SPATIAL]
        if not spatial:
            return []
        t = torch.arange(MIN_SPATIAL, BOUND + 1, dtype=torch.int64)
        fixed = {s: torch.tensor(v) for s, v in (others or {}).items()}
        ok = self._eval({**fixed, **{s: t for s in spatial}})
        ok = ok.expand_as(t) if ok.dim() == 0 else ok
        return (t[ok]).tolist()

    def _few_channels(self) -> dict[sympy.Symbol, int] | None:
        """Values for the sizes that are neither spatial nor the batch (an image's channels)
        with which some square works, when there are one or two such sizes: a flattened
        image that a Linear takes (`C * H * W == 784`) works at 1 x 28 x 28, which the
        search at the channels' hint misses."""
        spatial = [s for s in self.symbols if self.names.get(s, "")[:1] in _SPATIAL]
        others = [s for s in self.symbols if s not in spatial and self.names.get(s, "")[:1] != "N"]
        if not spatial or not 1 <= len(others) <= 2:
            return None
        for values in itertools.product(_FEW, repeat=len(others)):
            chosen = dict(zip(others, values, strict=True))
            if self.square_solutions(chosen):
                return chosen
        return None

    def find(self) -> dict[sympy.Symbol, int] | None:
        """Some satisfying assignment (sizes up to BOUND), or None if none was found."""
        if self.unknown:
            return None
        if not self.symbols:
            return {} if bool(self._eval({})) else None
        squares = self.square_solutions()
        if squares:
            best = min(squares, key=lambda v: (abs(v - max(self.hints.values(), default=v)), v))
            spatial = [s for s in self.symbols if self.names.get(s, "")[:1] in _SPATIAL]
            return {s: (best if s in spatial else self.hints.get(s, 1)) for s in self.symbols}
        channels = self._few_channels()
        if channels is not None:
            best = min(self.square_solutions(channels))
            spatial = [s for s in self.symbols if self.names.get(s, "")[:1] in _SPATIAL]
            return {
                s: best if s in spatial else channels.get(s, self.hints.get(s, 1))
                for s in self.symbols
            }
        for symbol in self.symbols:
            t = self._domain(symbol)
            ok = self._eval({symbol: t})
            ok = ok.expand_as(t) if ok.dim() == 0 else ok
            if bool(ok.any()):
                values = t[ok]
                hint = self.hints.get(symbol, 1)
                best = int(values[torch.argmin((values - hint).abs())])
                return {s: (best if s == symbol else self.hints.get(s, 1)) for s in self.symbols}
        if len(self.symbols) == 2:
            a, b = self.symbols
            columns = self._domain(b)
            for rows in self._domain(a).split(256):
                grid_a = rows[:, None].expand(-1, len(columns))
                grid_b = columns[None, :].expand(len(rows), -1)
                ok = self._eval({a: grid_a, b: grid_b})
                if bool(ok.any()):
                    i, j = (int(x) for x in ok.nonzero()[0])
                    return {a: int(rows[i]), b: int(columns[j])}
            return None
        clip = self._clip_solution()
        if clip is not None:
            return clip
        generator = torch.Generator().manual_seed(0)
        samples = {
            s: torch.randint(self._low(s), self._high(s) + 1, (200_000,), generator=generator)
            for s in self.symbols
        }
        ok = self._eval(samples)
        if ok.dim() and bool(ok.any()):
            i = int(ok.nonzero()[0][0])
            return {s: int(samples[s][i]) for s in self.symbols}
        return None

    def _clip_solution(self) -> dict[sympy.Symbol, int] | None:
        """For a clip's square frames: its number of frames (up to `MAX_FRAMES`) against the
        side, the batch at its hint."""
        by_name = {self.names.get(s, ""): s for s in self.symbols}
        height, width = by_name.get("H"), by_name.get("W")
        rest = [s for s in self.symbols if s not in (height, width)]
        rest = [s for s in rest if self.names.get(s, "")[:1] != "N"]
        if height is None or width is None or len(rest) != 1:
            return None
        other = rest[0]
        if self.names.get(other, "")[:1] != "D":
            return None
        sides = self._domain(height)
        for rows in torch.arange(1, MAX_FRAMES + 1, dtype=torch.int64).split(32):
            grid_other = rows[:, None].expand(-1, len(sides))
            grid_side = sides[None, :].expand(len(rows), -1)
            ok = self._eval({other: grid_other, height: grid_side, width: grid_side})
            if ok.dim() and bool(ok.any()):
                i, j = (int(x) for x in ok.nonzero()[0])
                found = {s: self.hints.get(s, 1) for s in self.symbols}
                found.update({other: int(rows[i]), height: int(sides[j]), width: int(sides[j])})
                return found
        return None

    def _low(self, symbol: sympy.Symbol) -> int:
        return MIN_SPATIAL if self.names.get(symbol, "")[:1] in (*_SPATIAL, "T") else 1

    def _high(self, symbol: sympy.Symbol) -> int:
        return MAX_BATCH if self.names.get(symbol, "")[:1] == "N" else BOUND

    def _domain(self, symbol: sympy.Symbol) -> torch.Tensor:
        return torch.arange(self._low(symbol), self._high(symbol) + 1, dtype=torch.int64)


def _conjunction(parts: list[Compiled]) -> Compiled:
    if not parts:
        return lambda env: torch.tensor(True)
    return lambda env: _fold(parts, env, torch.logical_and)


def _free(expr: Any) -> set[sympy.Symbol]:
    return set(getattr(expr, "free_symbols", set()))


def satisfiable(
    condition: Any, names: dict[sympy.Symbol, str], hints: dict[sympy.Symbol, int]
) -> dict[sympy.Symbol, int] | None:
    """A satisfying assignment for one condition, or None (none exists up to BOUND)."""
    try:
        return Problem([condition], names, hints).find()
    except Unsupported:
        return None


def runs(values: list[int]) -> list[tuple[int, int]]:
    """[28, 29, 40] -> [(28, 29), (40, 40)]."""
    out: list[tuple[int, int]] = []
    for value in values:
        if out and value == out[-1][1] + 1:
            out[-1] = (out[-1][0], value)
        else:
            out.append((value, value))
    return out


def few_sizes(values: list[int]) -> bool:
    """Whether a set of working sizes is a real restriction worth reporting."""
    return 0 < len(values) <= 64 and len(runs(values)) <= 3


def describe_squares(values: list[int]) -> str:
    """[28, 29] -> "28x28 (or 29x29)"; [32, ..., 35] -> "32x32 to 35x35" (with a times sign)."""

    def square(v: int) -> str:
        return f"{v}\u00d7{v}"

    parts = []
    for low, high in runs(values):
        if low == high:
            parts.append(square(low))
        elif high == low + 1:
            parts.append(f"{square(low)} (or {square(high)})")
        else:
            parts.append(f"{square(low)} to {square(high)}")
    return ", ".join(parts)
