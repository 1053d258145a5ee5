"""One pass over a LibCST tree that feeds every active rule's `visit_*`/`leave_*` callbacks.

LibCST's own `visit` rebuilds each node as it goes; reading the dataclass fields directly
walks the same tree in a fraction of the time. Whitespace and punctuation fields are skipped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from operator import attrgetter

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
# type -> a getter returning the values of its code-bearing fields, as a tuple
_getters: dict[type, Callable[[cst.CSTNode], tuple[object, ...]]] = {}


def _is_node(value: object) -> bool:
    kind = type(value)
    known = _is_node_type.get(kind)
    if known is None:
        known = _is_node_type[kind] = issubclass(kind, cst.CSTNode)
    return known


def _getter(node_type: type) -> Callable[[cst.CSTNode], tuple[object, ...]]:
    names = child_fields(node_type)
    if len(names) > 1:
        getter = attrgetter(*names)
    elif names:
        single = attrgetter(names[0])

        def getter(node: cst.CSTNode) -> tuple[object, ...]:
            return (single(node),)
    else:

        def getter(node: cst.CSTNode) -> tuple[object, ...]:
            return ()

    _getters[node_type] = getter
    return getter


def iter_children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """Direct children that can hold code, in source order."""
    getter = _getters.get(type(node)) or _getter(type(node))
    children: list[cst.CSTNode] = []
    is_node_type = _is_node_type
    for value in getter(node):
        kind = type(value)
        if kind is tuple or kind is list:
            for item in value:  # type: ignore[attr-defined]
                known = is_node_type.get(type(item))
                if known or (known is None and _is_node(item)):
                    children.append(item)
        else:
            known = is_node_type.get(kind)
            if known or (known is None and _is_node(value)):
                children.append(value)  # type: ignore[arg-type]
    return children


def iter_descendants(node: cst.CSTNode) -> list[cst.CSTNode]:
    """Every code-bearing node below `node`, in source order (iterative: no recursion limit)."""
    out: list[cst.CSTNode] = []
    stack = iter_children(node)[::-1]
    while stack:
        current = stack.pop()
        out.append(current)
        children = iter_children(current)
        if children:
            children.reverse()
            stack.extend(children)
    return out


Callback = Callable[[cst.CSTNode], object]
# Marks, on the walk's stack, where the node on top of `ancestors` is left.
_LEAVE = object()


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
    stack: list[object] = [root]
    while stack:
        node = stack.pop()
        if node is _LEAVE:
            node = ancestors.pop()
            for callback in leavers.get(type(node).__name__, ()):
                callback(node)
            continue
        for callback in visitors.get(type(node).__name__, ()):
            callback(node)  # type: ignore[arg-type]
        ancestors.append(node)  # type: ignore[arg-type]
        stack.append(_LEAVE)
        children = iter_children(node)  # type: ignore[arg-type]
        if children:
            children.reverse()
            stack.extend(children)
