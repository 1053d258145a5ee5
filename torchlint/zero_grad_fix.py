"""The fix for TL501: clear the gradients at the top of the training loop's body."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.call_args import with_absolute_indent
from torchlint.context import FileContext, layout_read
from torchlint.fix_layout import indent_at
from torchlint.fixes import FixBuilder
from torchlint.names import dotted_name
from torchlint.walker import iter_descendants


def insert_zero_grad(
    context: FileContext, loop: cst.CSTNode, optimizer: cst.BaseExpression, backward: cst.CSTNode
) -> FixBuilder | None:
    """`optimizer.zero_grad()` at the top of `loop`'s body: before its first statement, or,
    when comments introduce that one, before the first statement up to the `backward` one
    that has none (clearing anywhere before the backward pass is as good). Only when that
    statement is simple and the optimizer a plain name."""
    name = dotted_name(optimizer)
    if name is None or not isinstance(loop, (cst.For, cst.While)):
        return None
    body = loop.body
    if not isinstance(body, cst.IndentedBlock) or not body.body:
        return None
    first = _insertion_point(list(body.body), backward)
    if not isinstance(first, cst.SimpleStatementLine):
        return None  # a compound statement first: where it starts is not a node of its own
    indent = indent_at(context.module, first)
    if indent is None:
        return None
    head = first.body[0]
    moved = context.code(with_absolute_indent(head, indent))
    return FixBuilder(
        message=f"Call {name}.zero_grad() at the start of each iteration",
        replacements=[(head, f"{name}.zero_grad()\n{indent}{moved}")],
        safe=False,
    )


def _insertion_point(
    statements: list[cst.BaseStatement], backward: cst.CSTNode
) -> cst.BaseStatement:
    for statement in statements:
        layout_read(statement)
        if isinstance(statement, cst.SimpleStatementLine) and not any(
            line.comment for line in statement.leading_lines
        ):
            return statement
        if statement is backward or any(n is backward for n in iter_descendants(statement)):
            break
    return statements[0]
