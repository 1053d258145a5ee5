"""Refuse source too deeply nested or with too long an expression before LibCST sees it.

LibCST's native parser recurses without a limit (thousands of nested brackets crash the
process) and its time grows faster than linearly with the length of an operator chain
(`a + a + ...`, `x.y.z...`, `not not ...`). Both are measured here on the text with strings
and comments blanked out: regular expressions reduce the file to its brackets, operators and
separators; a bound computed a nesting level at a time clears nearly every file, and one pass
over those characters measures the rest exactly.
"""

from __future__ import annotations

import re

#: CPython's own tokenizer rejects deeper bracket nesting ("too many nested parentheses").
MAX_DEPTH = 200
#: Operators, trailers and nesting along one expression; real code stays far below.
MAX_CHAIN = 500

TOO_DEEP = "too deeply nested to analyse (more than {} levels of brackets)"
TOO_LONG = "expression too long to analyse (more than {} operators in one expression)"

# Strings (any prefix, which stays behind as a harmless name), comments and line
# continuations. A string left open at the end of the file swallows the rest of it.
_STRINGS_AND_COMMENTS = re.compile(
    r"""#[^\r\n]*|\\\r?\n"""
    r"""|'''(?:[^'\\]|\\.|'(?!''))*(?:'''|$)"""
    r'''|"""(?:[^"\\]|\\.|"(?!""))*(?:"""|$)'''
    r"""|'(?:[^'\\\r\n]|\\.)*'?"""
    r"""|"(?:[^"\\\r\n]|\\.)*"?""",
    re.S,
)
_KEYWORD = re.compile(r"\b(?:not|and|or|if|else|lambda|await|in|is)\b")
_NOT_SYMBOL = re.compile(r"[^-+*/%@&|^~.<>()\[\]{},;=\n]+")
_INNERMOST = re.compile(r"[(\[{]([^()\[\]{}]*)[)\]}]")
_RUN_END = re.compile(r"[,;=\n\0]")
_has_bracket = re.compile(r"[()\[\]{}]").search


def complexity_error(source: str) -> str | None:
    """Why `source` must not be parsed, or None when it is safe."""
    text = _STRINGS_AND_COMMENTS.sub("0", source)
    symbols = _NOT_SYMBOL.sub("", _KEYWORD.sub("~", text))
    if _bound(symbols) <= MAX_CHAIN:
        return None
    return _scan(symbols)


def _bound(symbols: str) -> int:
    """An upper bound of what `_scan` measures, computed a nesting level at a time.

    Each round takes the innermost bracket groups (their own longest run of operators
    between separators) and replaces each by one operator in its parent. An expression's
    path crosses one group per round, so the runs' sum bounds it. Returns more than
    MAX_CHAIN, so that `_scan` decides, on deep or unbalanced input.
    """
    bound = 0
    for _ in range(MAX_DEPTH):
        groups = _INNERMOST.findall(symbols)
        if not groups:
            break
        bound += _longest_run("\0".join(groups).replace("\n", ""))
        symbols = _INNERMOST.sub("x", symbols)
    if _has_bracket(symbols):
        return MAX_CHAIN + 1
    return bound + _longest_run(symbols)


def _longest_run(symbols: str) -> int:
    return max(map(len, _RUN_END.split(symbols)))


def _scan(symbols: str) -> str | None:
    """Bracket depth, and operators along one expression's nesting, over the symbols alone.

    Each open bracket level counts the operators (and trailers) since its last separator;
    their sum is how deep LibCST's tree, and its recursion, will go. Multi-character
    operators count once per character: the bound only gets safer.
    """
    chain = [0]
    total = 0
    for char in symbols:
        if char in "([{":
            chain[-1] += 1
            total += 1
            chain.append(0)
            if len(chain) > MAX_DEPTH:
                return TOO_DEEP.format(MAX_DEPTH)
            if total > MAX_CHAIN:
                return TOO_LONG.format(MAX_CHAIN)
        elif char in ")]}":
            if len(chain) > 1:
                total -= chain.pop()
        elif char in ",;=" or (char == "\n" and len(chain) == 1):
            total -= chain[-1]
            chain[-1] = 0
        elif char != "\n":
            chain[-1] += 1
            total += 1
            if total > MAX_CHAIN:
                return TOO_LONG.format(MAX_CHAIN)
    return None
