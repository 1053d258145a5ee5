"""Words for the findings: shapes as `[N, 32, H/2, W/2]`, layers as `fc2 = nn.Linear(30, 10)`.

Messages are written from the layer's attributes and the recorded shapes, never from
torch's error text.
"""

from __future__ import annotations

import ast
import functools
from typing import Any

from torchlint.shapes.compat import size_functions as tf
from torchlint.shapes.deferred import sympy

_ROLES = {"N": "batch size", "L": "length", "T": "length", "H": "height", "W": "width"}


def show(expr: Any, names: dict[sympy.Symbol, str]) -> str:
    """A size expression in the user's terms: `32*(H/2)*(W/2)`, `H - 2`."""
    if isinstance(expr, int):
        return str(expr)
    if isinstance(expr, sympy.Integer):
        return str(int(expr))
    if isinstance(expr, sympy.Symbol):
        return names.get(expr, str(expr))
    if isinstance(expr, sympy.Add):
        constant = sum(int(a) for a in expr.args if isinstance(a, sympy.Integer))
        terms = [a for a in expr.args if not isinstance(a, sympy.Integer)]
        text = " + ".join(sorted(show(t, names) for t in terms))
        if constant > 0:
            text += f" + {constant}"
        elif constant < 0:
            text += f" - {-constant}"
        return text.replace("+ -", "- ")
    if isinstance(expr, sympy.Mul):
        coefficient, rest = expr.as_coeff_Mul()
        factors = sorted(_wrap(f, names) for f in sympy.Mul.make_args(rest))
        if coefficient == -1:
            return "-" + "*".join(factors)
        if coefficient != 1:
            factors.insert(0, str(coefficient))
        return "*".join(factors)
    if isinstance(expr, (tf.FloorDiv, tf.CleanDiv)):
        a, b = expr.args
        return f"{_wrap(a, names)}/{_wrap(b, names)}"
    if isinstance(expr, (tf.Mod, tf.PythonMod)):
        a, b = expr.args
        return f"{_wrap(a, names)} % {_wrap(b, names)}"
    if isinstance(expr, sympy.Pow) or type(expr).__name__ == "PowByNatural":
        return f"{_wrap(expr.args[0], names)}^{show(expr.args[1], names)}"
    if isinstance(expr, (sympy.Max, tf.Max)):
        return "max(" + ", ".join(show(a, names) for a in expr.args) + ")"
    if isinstance(expr, (sympy.Min, tf.Min)):
        return "min(" + ", ".join(show(a, names) for a in expr.args) + ")"
    text = str(expr)
    for symbol, name in names.items():
        text = text.replace(str(symbol), name)
    return text


def _wrap(expr: Any, names: dict[sympy.Symbol, str]) -> str:
    text = show(expr, names)
    if isinstance(expr, (sympy.Add, sympy.Mul)) and not isinstance(expr, sympy.Symbol):
        if isinstance(expr, sympy.Mul) and "/" not in text and " " not in text:
            return text
        return f"({text})"
    if isinstance(expr, (tf.FloorDiv, tf.CleanDiv)):
        return f"({text})"
    return text


def show_shape(shape: tuple[Any, ...] | None, names: dict[sympy.Symbol, str]) -> str:
    if shape is None:
        return "?"
    return "[" + ", ".join(show(d, names) for d in shape) + "]"


def is_symbolic(expr: Any) -> bool:
    return bool(getattr(expr, "free_symbols", None))


# -- source text ---------------------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def _tree(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


def char_column(source: str, line: int, byte_col: int) -> int:
    """0-based character column from a 0-based UTF-8 byte column."""
    lines = source.splitlines()
    if not 1 <= line <= len(lines) or byte_col <= 0:
        return max(byte_col, 0)
    return len(lines[line - 1].encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


def span_text(source: str, line: int, end_line: int, col: int, end_col: int) -> str:
    """The text of a source span (byte columns), squeezed onto one line."""
    lines = source.splitlines()
    if not 1 <= line <= end_line <= len(lines):
        return ""
    chunk = [lines[i].encode("utf-8") for i in range(line - 1, end_line)]
    if len(chunk) == 1:
        chunk[0] = chunk[0][col:end_col]
    else:
        chunk[0] = chunk[0][col:]
        chunk[-1] = chunk[-1][:end_col]
    text = " ".join(part.decode("utf-8", errors="ignore").strip() for part in chunk)
    return text.replace("( ", "(").replace(" )", ")")


def assigned_name(source: str, line: int, col: int) -> str | None:
    """`fc2` when the call at (line, col) is the value of `self.fc2 = ...` or `fc2 = ...`."""
    tree = _tree(source)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            value = node.value
            if value.lineno == line and value.col_offset == col:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                target = targets[0]
                if isinstance(target, ast.Attribute):
                    return target.attr
                if isinstance(target, ast.Name):
                    return target.id
    return None


def call_argument(text: str, position: int, keyword: str) -> str | None:
    """The source of a call's argument (by position or keyword); a bare name as the name."""
    try:
        node = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError):
        return None
    if not isinstance(node, ast.Call):
        return None
    arg: ast.AST | None = None
    for kw in node.keywords:
        if kw.arg == keyword:
            arg = kw.value
    if arg is None and 0 <= position < len(node.args):
        if any(isinstance(a, ast.Starred) for a in node.args[: position + 1]):
            return None
        arg = node.args[position]
    if arg is None:
        return None
    return ast.unparse(arg)


def literal_arguments(text: str) -> bool:
    """Whether a call's arguments are all literal (`nn.Linear(32 * 7 * 7, 10)`)."""
    try:
        node = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError):
        return False
    if not isinstance(node, ast.Call):
        return False
    return all(_literal(v) for v in [*node.args, *(k.value for k in node.keywords)])


def _literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp):
        return _literal(node.operand)
    if isinstance(node, ast.BinOp):
        return _literal(node.left) and _literal(node.right)
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_literal(e) for e in node.elts)
    return False


def short_call(text: str, limit: int = 48) -> str:
    if len(text) <= limit:
        return text
    head = text.split("(", 1)[0]
    return f"{head}(...)"


def argument_text(source: str, line: int, attr: str | None) -> str | None:
    """The first argument of `self.<attr>(...)` on `line`, when it is a plain name."""
    tree = _tree(source)
    if tree is None or attr is None:
        return None
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or node.lineno != line or not node.args:
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name != attr:
            continue
        arg = node.args[0]
        if isinstance(arg, (ast.Name, ast.Attribute)):
            return ast.unparse(arg)
        return None
    return None


def op_column(source: str, line: int, op: str | None) -> int | None:
    """0-based character column of the op's call (or operator) on a line."""
    tree = _tree(source)
    if tree is None:
        return None
    candidates = []
    binary = {
        "add": ast.Add,
        "sub": ast.Sub,
        "mul": ast.Mult,
        "truediv": ast.Div,
        "matmul": ast.MatMult,
    }
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) != line:
            continue
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if op is not None and name == op:
                candidates.append((0, node))
            else:
                candidates.append((2, node))
        elif isinstance(node, ast.BinOp) and op in binary and isinstance(node.op, binary[op]):
            candidates.append((1, node))
    if not candidates:
        return None
    candidates.sort(key=lambda c: (c[0], c[1].col_offset))
    return candidates[0][1].col_offset


def first_code_column(source: str, line: int) -> int:
    lines = source.splitlines()
    if 1 <= line <= len(lines):
        text = lines[line - 1]
        return len(text) - len(text.lstrip())
    return 0


# -- corrected sizes -----------------------------------------------------------------------


def argument_node(source: str, line: int, col: int, position: int, keyword: str) -> ast.AST | None:
    """The argument node of the call that starts at (line, byte col), by position or keyword."""
    tree = _tree(source)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.lineno == line and node.col_offset == col:
            for kw in node.keywords:
                if kw.arg == keyword:
                    return kw.value
            if 0 <= position < len(node.args):
                if any(isinstance(a, ast.Starred) for a in node.args[: position + 1]):
                    return None
                return node.args[position]
            return None
    return None


def _factors(node: ast.AST) -> list[int] | None:
    """`32 * 7 * 7` -> [32, 7, 7]; a bare integer -> [n]; anything else -> None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return [node.value]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        left, right = _factors(node.left), _factors(node.right)
        if left is not None and right is not None:
            return left + right
    return None


def corrected_literal(node: ast.AST, value: int) -> str | None:
    """The source for `value` in the form of the literal it replaces, or None when the
    argument is not a literal or a simple product.

    `32 * 7 * 7` becomes `32 * 5 * 5` for 800; `128 * 4` becomes `128 * 2` for 256; a
    product that cannot keep its form becomes the plain number.
    """
    factors = _factors(node)
    if factors is None:
        return None
    if len(factors) == 3 and factors[1] == factors[2] and value % factors[0] == 0:
        side = round((value // factors[0]) ** 0.5)
        if side > 0 and side * side * factors[0] == value:
            return f"{factors[0]} * {side} * {side}"
    if len(factors) == 2 and value % factors[0] == 0:
        return f"{factors[0]} * {value // factors[0]}"
    return str(value)
