"""One pass over a LibCST tree that feeds every active rule's `visit_*`/`leave_*` callbacks.

LibCST's own `visit` rebuilds each node as it goes; reading the dataclass fields directly
walks the same tree in a fraction of the time. Whitespace and punctuation fields are skipped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import libcst as cst

_SKIPPED_FIELDS = frozenset(
    {
        "lpar",
        "rpar",
        "semicolon",
        "comma",
        "equal",
        "colon",
        "dot",
        "header",
        "footer",
        "leading_lines",
        "lines_after_decorators",
        "trailing_whitespace",
        "operator",
        "asynchronous",
        "star",
        "newline",
        "encoding",
        "default_indent",
        "default_newline",
    }
)
_child_fields: dict[type, tuple[str, ...]] = {}


def child_fields(node_type: type) -> tuple[str, ...]:
    """The fields of a node type that can hold code, in source order."""
    fields = _child_fields.get(node_type)
    if fields is None:
        names = [
            f.name
            for f in dataclasses.fields(node_type)
            if f.name not in _SKIPPED_FIELDS and "whitespace" not in f.name
        ]
        if "decorators" in names:  # decorators come first in the source
            names.remove("decorators")
            names.insert(0, "decorators")
        fields = _child_fields[node_type] = tuple(names)
    return fields


# type -> is it a CSTNode subclass? (CSTNode is an ABC: isinstance on it is slow)
_is_node_type: dict[type, bool] = {}


def _is_node(value: object) -> bool:
    kind = type(value)
    known = _is_node_type.get(kind)
    if known is None:
        known = _is_node_type[kind] = issubclass(kind, cst.CSTNode)
    return known


def iter_children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """Direct children that can hold code, in source order."""
    children: list[cst.CSTNode] = []
    for name in child_fields(type(node)):
        value = getattr(node, name)
        kind = type(value)
        if kind is tuple or kind is list:
            children.extend(v for v in value if _is_node(v))
        elif _is_node(value):
            children.append(value)
    return children


def iter_descendants(node: cst.CSTNode) -> list[cst.CSTNode]:
    """Every code-bearing node below `node`, in source order (iterative: no recursion limit)."""
    out: list[cst.CSTNode] = []
    stack = iter_children(node)[::-1]
    while stack:
        current = stack.pop()
        out.append(current)
        stack.extend(reversed(iter_children(current)))
    return out


Callback = Callable[[cst.CSTNode], object]


def walk(
    root: cst.CSTNode,
    visitors: dict[str, Sequence[Callback]],
    leavers: dict[str, Sequence[Callback]],
    ancestors: list[cst.CSTNode],
) -> None:
    """Depth-first walk calling `visitors[TypeName]` on entry and `leavers[TypeName]` on exit.

    `ancestors` is kept current (root first, the visited node's parent last) so callbacks
    can look upward without a parent-pointer pass.
    """
    stack: list[tuple[cst.CSTNode, bool]] = [(root, False)]
    while stack:
        node, leaving = stack.pop()
        type_name = type(node).__name__
        if leaving:
            ancestors.pop()
            for callback in leavers.get(type_name, ()):
                callback(node)
            continue
        for callback in visitors.get(type_name, ()):
            callback(node)
        ancestors.append(node)
        stack.append((node, True))
        stack.extend((child, False) for child in reversed(iter_children(node)))
