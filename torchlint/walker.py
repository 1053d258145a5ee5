"""One pass over a LibCST tree that feeds every active rule's `visit_*`/`leave_*` callbacks.

LibCST's own `visit` rebuilds each node as it goes; reading the dataclass fields directly
walks the same tree in a fraction of the time. Whitespace and punctuation fields are skipped.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Sequence
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
    entry = index_entry(node)
    if entry is not None:
        return entry[0].children(entry[1])
    return _children(node)


def _children(node: cst.CSTNode) -> list[cst.CSTNode]:
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
    entry = index_entry(node)
    if entry is not None:
        index, position = entry
        return index.order[position + 1 : index.ends[position]]
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


class TreeIndex:
    """A tree's nodes in source order, each with its children and where its subtree ends:
    the walks every analysis repeats (children, descendants, a scope's own nodes) become
    look-ups and slices while the tree is `indexed`."""

    def __init__(self, root: cst.CSTNode, parts: Sequence[TreeIndex] = ()) -> None:
        """Index `root`'s tree; `parts`, when given, are the indexes of `root`'s children
        (each made alone, perhaps for an earlier tree that shared them), joined, not walked."""
        #: Every node, root first, in the order `iter_descendants` gives.
        self.order: list[cst.CSTNode] = []
        #: Per position: the position after the node's last descendant.
        self.ends: list[int] = []
        #: Per position: the position of the node's parent (-1 for the root).
        self.parents: list[int] = []
        self._scope_nodes: dict[int, list[cst.CSTNode]] = {}
        children = _children(root)
        if (
            parts
            and len(parts) == len(children)
            and all(part.order[0] is child for part, child in zip(parts, children, strict=True))
        ):
            self._join(root, parts)
        else:
            self._walk(root)
        #: id(node) -> position, for the look-ups.
        self.positions = dict(zip(map(id, self.order), range(len(self.order)), strict=True))

    def _join(self, root: cst.CSTNode, parts: Sequence[TreeIndex]) -> None:
        order, ends, parents = self.order, self.ends, self.parents
        order.append(root)
        ends.append(0)
        parents.append(-1)
        for part in parts:
            offset = len(order)
            order.extend(part.order)
            ends.extend([end + offset for end in part.ends])
            parents.append(0)
            parents.extend([parent + offset for parent in part.parents[1:]])
        ends[0] = len(order)

    def _walk(self, root: cst.CSTNode) -> None:
        order, ends, parents = self.order, self.ends, self.parents
        stack: list[object] = [root]  # nodes, and the positions of nodes to close
        opened = [-1]  # positions of the nodes whose subtree is being read, innermost last
        while stack:
            node = stack.pop()
            if type(node) is int:
                ends[node] = len(order)
                opened.pop()
                continue
            position = len(order)
            order.append(node)  # type: ignore[arg-type]
            parents.append(opened[-1])
            below = _children(node)  # type: ignore[arg-type]
            if below:
                ends.append(0)
                stack.append(position)
                opened.append(position)
                stack.extend(reversed(below))
            else:
                ends.append(position + 1)

    def children(self, position: int) -> list[cst.CSTNode]:
        """The children of the node at `position`."""
        order, ends = self.order, self.ends
        found = []
        index, end = position + 1, ends[position]
        while index < end:
            found.append(order[index])
            index = ends[index]
        return found

    def path(self, position: int) -> tuple[cst.CSTNode, ...]:
        """The nodes from the root down to the one at `position`, both included."""
        order, parents = self.order, self.parents
        nodes = []
        while position >= 0:
            nodes.append(order[position])
            position = parents[position]
        nodes.reverse()
        return tuple(nodes)

    def scope_nodes(self, position: int, scopes: frozenset[type]) -> list[cst.CSTNode]:
        """The nodes below the one at `position`, not entering nodes of the `scopes` types."""
        found = self._scope_nodes.get(position)
        if found is None:
            found = []
            order, ends = self.order, self.ends
            index, end = position + 1, ends[position]
            while index < end:
                node = order[index]
                found.append(node)
                index = ends[index] if type(node) in scopes else index + 1
            self._scope_nodes[position] = found
        return found


#: The trees indexed now (usually one; a tuple, replaced whole, so that threads can share it).
_active: tuple[TreeIndex, ...] = ()


@contextlib.contextmanager
def indexed(root: cst.CSTNode, index: TreeIndex | None = None) -> Iterator[TreeIndex]:
    """Index `root`'s tree for the walks made while in the block (`index`: its index, made
    already)."""
    global _active
    if index is None or index.order[0] is not root:
        index = TreeIndex(root)
    _active = (*_active, index)
    try:
        yield index
    finally:
        _active = tuple(i for i in _active if i is not index)


def index_entry(node: cst.CSTNode) -> tuple[TreeIndex, int] | None:
    """The indexed tree holding `node`, and its position there, if `node` is indexed."""
    key = id(node)
    for index in _active:
        position = index.positions.get(key)
        if position is not None and index.order[position] is node:
            return index, position
    return None


Callback = Callable[[cst.CSTNode], object]
#: Told of a callback that raised (the callback, the node, the exception); it may take
#: callbacks out of the tables, which the walk reads again from the next node on.
Failed = Callable[[Callback, cst.CSTNode, Exception], None]
# Marks, on the walk's stack, where the node on top of `ancestors` is left.
_LEAVE = object()


def walk(
    root: cst.CSTNode,
    visitors: dict[str, Sequence[Callback]],
    leavers: dict[str, Sequence[Callback]],
    ancestors: list[cst.CSTNode],
    failed: Failed | None = None,
) -> None:
    """Depth-first walk calling `visitors[TypeName]` on entry and `leavers[TypeName]` on exit.

    `ancestors` is kept current (root first, the visited node's parent last) so callbacks
    can look upward without a parent-pointer pass. A callback that raises stops the walk,
    unless `failed` is given: then it is told, and the walk goes on.
    """
    calls = _Calls(visitors, leavers, failed)
    entry = index_entry(root)
    if entry is not None:
        _walk_indexed(*entry, calls, ancestors)
        return
    stack: list[object] = [root]
    while stack:
        node = stack.pop()
        if node is _LEAVE:
            node = ancestors.pop()
            calls.run(_ON_LEAVE, node)  # type: ignore[arg-type]
            continue
        calls.run(_ON_VISIT, node)  # type: ignore[arg-type]
        ancestors.append(node)  # type: ignore[arg-type]
        stack.append(_LEAVE)
        children = iter_children(node)  # type: ignore[arg-type]
        if children:
            children.reverse()
            stack.extend(children)


#: Which callbacks `_Calls.run` makes: on the way into a node, or out of it.
_ON_VISIT, _ON_LEAVE = 0, 1


class _Calls:
    """The callbacks of a walk by node type (not by type name: no `__name__` per node)."""

    def __init__(
        self,
        visitors: dict[str, Sequence[Callback]],
        leavers: dict[str, Sequence[Callback]],
        failed: Failed | None,
    ) -> None:
        self._tables = (visitors, leavers)
        self._failed = failed
        #: Visit and leave callbacks by node type, filled as types are met.
        self.by_type: tuple[dict[type, Sequence[Callback]], ...] = ({}, {})

    def run(self, which: int, node: cst.CSTNode) -> None:
        """Call the `_ON_VISIT` or `_ON_LEAVE` callbacks of the node's type on it."""
        callbacks = self.by_type[which].get(type(node))
        if callbacks is None:
            callbacks = self.callbacks(which, type(node))
        for callback in callbacks:
            try:
                callback(node)
            except Exception as exc:
                self.fail(callback, node, exc)

    def callbacks(self, which: int, kind: type) -> Sequence[Callback]:
        found = self.by_type[which][kind] = tuple(self._tables[which].get(kind.__name__, ()))
        return found

    def fail(self, callback: Callback, node: cst.CSTNode, exc: Exception) -> None:
        if self._failed is None:
            raise exc
        self._failed(callback, node, exc)
        for known in self.by_type:  # the tables may have changed
            known.clear()


def _walk_indexed(
    index: TreeIndex, position: int, calls: _Calls, ancestors: list[cst.CSTNode]
) -> None:
    """`walk` over an indexed tree: its source order, each subtree left where it ends."""
    order, ends = index.order, index.ends
    visiting, leaving = calls.by_type
    closing: list[int] = []  # where each node on `ancestors` (of this walk) is left
    # `_Calls.run` written out: this loop runs for every node of the file.
    for current in range(position, ends[position]):
        while closing and closing[-1] <= current:
            closing.pop()
            node = ancestors.pop()
            callbacks = leaving.get(type(node))
            if callbacks is None:
                callbacks = calls.callbacks(1, type(node))
            for callback in callbacks:
                try:
                    callback(node)
                except Exception as exc:
                    calls.fail(callback, node, exc)
        node = order[current]
        callbacks = visiting.get(type(node))
        if callbacks is None:
            callbacks = calls.callbacks(0, type(node))
        for callback in callbacks:
            try:
                callback(node)
            except Exception as exc:
                calls.fail(callback, node, exc)
        ancestors.append(node)
        closing.append(ends[current])
    while closing:
        closing.pop()
        calls.run(_ON_LEAVE, ancestors.pop())
