"""Where a node sits in the file's layout, for fixes built away from the node's visit."""

from __future__ import annotations

import libcst as cst

from torchlint.walker import iter_children


def indent_at(module: cst.Module, target: cst.CSTNode) -> str | None:
    """The indentation of the block holding `target` (a statement or a node inside one)."""
    stack: list[tuple[cst.CSTNode, str]] = [(module, "")]
    while stack:
        node, indent = stack.pop()
        if node is target:
            return indent
        if isinstance(node, cst.IndentedBlock):
            indent += node.indent if node.indent is not None else module.default_indent
        stack.extend((child, indent) for child in iter_children(node))
    return None
