"""Reading a call's arguments and building fixed calls: add a keyword, spell a module.

Shared by the rules whose fix adds a keyword argument (TL303 `map_location=`, TL304
`weights_only=`, TL702 `use_reentrant=`) or rewrites a call through a module alias.
"""

from __future__ import annotations

import dataclasses

import libcst as cst

from torchlint.context import FileContext, layout_read


def keyword(call: cst.Call, name: str) -> cst.Arg | None:
    """The argument passed as `name=...`, if any."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def positional(call: cst.Call) -> list[cst.Arg]:
    """Plain positional arguments, in order (not `*args`, not keywords)."""
    return [arg for arg in call.args if arg.keyword is None and arg.star == ""]


def method_name(call: cst.Call) -> str | None:
    """The method a call invokes (`x.view(...)` -> "view"), or None for a plain call."""
    return call.func.attr.value if isinstance(call.func, cst.Attribute) else None


def has_star_args(call: cst.Call) -> bool:
    return any(arg.star == "*" for arg in call.args)


def has_star_kwargs(call: cst.Call) -> bool:
    return any(arg.star == "**" for arg in call.args)


def is_true(expr: cst.BaseExpression | None) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "True"


def is_false(expr: cst.BaseExpression | None) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "False"


def string_value(expr: cst.BaseExpression | None) -> str | None:
    """The value of a plain string literal (no f-string, no concatenation)."""
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _separator(call: cst.Call) -> cst.BaseParenthesizableWhitespace:
    """The whitespace that separates arguments in this call's layout (without comments)."""
    args = call.args
    if len(args) >= 2 and isinstance(args[-2].comma, cst.Comma):
        between = args[-2].comma.whitespace_after
    else:
        between = call.whitespace_before_args
    if isinstance(between, cst.ParenthesizedWhitespace):
        # One argument per line: repeat the indentation, not any comment on the line.
        return cst.ParenthesizedWhitespace(
            first_line=cst.TrailingWhitespace(),
            empty_lines=[],
            indent=between.indent,
            last_line=between.last_line,
        )
    return cst.SimpleWhitespace(" ")


def add_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """`call` with `name=value` appended, keeping its layout and trailing comma."""
    new_arg = cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )
    if not call.args:
        return call.with_changes(args=[new_arg])
    last = call.args[-1]
    separator = _separator(call)
    if isinstance(last.comma, cst.Comma):
        # A trailing comma stays trailing: the new argument takes it over.
        new_arg = new_arg.with_changes(comma=last.comma)
        last = last.with_changes(comma=cst.Comma(whitespace_after=separator))
    else:
        # Whatever preceded `)` (a newline in a hanging layout) now follows the new argument.
        new_arg = new_arg.with_changes(whitespace_after_arg=last.whitespace_after_arg)
        last = last.with_changes(
            comma=cst.Comma(whitespace_after=separator),
            whitespace_after_arg=cst.SimpleWhitespace(""),
        )
    return call.with_changes(args=[*call.args[:-1], last, new_arg])


def module_spelling(context: FileContext, module: str) -> str | None:
    """How this file can refer to `module` (e.g. `F` or `torch.nn.functional`), or None.

    Prefers a direct alias of the module, then the longest imported parent package.
    """
    aliases = context.imports.aliases
    best: tuple[int, str] | None = None
    for local, target in aliases.items():
        if target == module:
            return local
        if module.startswith(target + "."):
            rest = module[len(target) :]
            if best is None or len(target) > best[0]:
                best = (len(target), local + rest)
    return best[1] if best else None


def parse_expression(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


def comment_count(node: cst.CSTNode) -> int:
    """Comments inside `node` (a fix that drops one loses the user's text: offer none)."""
    return _count(node, cst.Comment)


def _count(node: cst.CSTNode, wanted: type[cst.CSTNode]) -> int:
    """Nodes of type `wanted` in `node`, whitespace and comments included."""
    layout_read(node)
    count = 0
    stack: list[object] = [node]
    while stack:
        value = stack.pop()
        kind = type(value)
        if kind is wanted:
            count += 1
        elif kind is tuple or kind is list:
            stack.extend(value)  # type: ignore[call-overload]
        else:
            names = _NODE_FIELDS.get(kind)
            if names is None:
                names = _NODE_FIELDS[kind] = (
                    tuple(f.name for f in dataclasses.fields(kind))
                    if issubclass(kind, cst.CSTNode)
                    else ()
                )
            stack.extend(getattr(value, name) for name in names)
    return count


#: Every field of each node type, whitespace included (comments live there); () for values
#: that are no node.
_NODE_FIELDS: dict[type, tuple[str, ...]] = {}


def keeps_comments(old: cst.CSTNode, *kept: cst.CSTNode) -> bool:
    """Whether replacing `old` by a node built from `kept` parts loses no comment."""
    return comment_count(old) == sum(comment_count(k) for k in kept)


class _AbsoluteIndent(cst.CSTTransformer):
    def __init__(self, indent: str) -> None:
        super().__init__()
        self.indent = indent

    def leave_ParenthesizedWhitespace(
        self, original: cst.ParenthesizedWhitespace, updated: cst.ParenthesizedWhitespace
    ) -> cst.ParenthesizedWhitespace:
        if not updated.indent:
            return updated
        return updated.with_changes(
            indent=False, last_line=cst.SimpleWhitespace(self.indent + updated.last_line.value)
        )


def block_indent(context: FileContext) -> str:
    """The indentation of the statement being visited (from the enclosing blocks)."""
    default = context.module.default_indent
    return "".join(
        (block.indent if block.indent is not None else default)
        for block in context.ancestors
        if isinstance(block, cst.IndentedBlock)
    )


def detached(context: FileContext, node: cst.CSTNode) -> cst.CSTNode:
    """`node` made printable on its own: continuation lines carry their full indentation.

    Continuation lines inside brackets are indented relative to the enclosing block; a
    replacement rendered outside the tree would lose that part, so spell it out.
    """
    return with_absolute_indent(node, block_indent(context))


def with_absolute_indent(node: cst.CSTNode, indent: str) -> cst.CSTNode:
    """`node` with its continuation lines indented by `indent` plus their own indentation."""
    if not indent or not _count(node, cst.ParenthesizedWhitespace):
        return node  # no continuation line: what the transformer gives prints the same
    return node.visit(_AbsoluteIndent(indent))
