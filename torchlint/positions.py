"""Positions of the reported nodes only, from one code-generation pass that counts characters.

LibCST's PositionProvider records a range for every node of the module (after an empty walk of
the whole tree); a lint run needs ranges for the handful of nodes it reports. This hooks the
same code-generation callbacks PositionProvider uses, but keeps only the wanted nodes, and falls
back to PositionProvider if LibCST's internals ever disagree.
"""

from __future__ import annotations

import contextlib
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.metadata import MetadataWrapper, PositionProvider

#: (start line, start column, end line, end column): 1-based lines, 0-based columns.
Span = tuple[int, int, int, int]
_NEWLINE = re.compile(r"\r\n?|\n")
_NOTHING = contextlib.nullcontext()


class _Locator(CodegenState):
    def __init__(self, module: cst.Module, wanted: set[cst.CSTNode]) -> None:
        super().__init__(
            default_indent=module.default_indent, default_newline=module.default_newline
        )
        self.wanted = wanted
        self.length = 0
        self.opened: dict[cst.CSTNode, int] = {}
        self.found: dict[cst.CSTNode, tuple[int, int]] = {}

    def add_indent_tokens(self) -> None:
        self.tokens.extend(self.indent_tokens)
        self.length += sum(len(token) for token in self.indent_tokens)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self.length += len(value)

    def before_codegen(self, node: cst.CSTNode) -> None:
        if node in self.wanted:
            self.opened[node] = self.length

    def after_codegen(self, node: cst.CSTNode) -> None:
        start = self.opened.pop(node, None)
        if start is not None and node not in self.found:
            self.found[node] = (start, self.length)

    def record_syntactic_position(
        self,
        node: cst.CSTNode,
        *,
        start_node: cst.CSTNode | None = None,
        end_node: cst.CSTNode | None = None,
    ) -> contextlib.AbstractContextManager[None]:
        if node not in self.wanted:
            return _NOTHING
        # A node's syntactic span can start or end at a descendant's: locate those too.
        for extra in (start_node, end_node):
            if extra is not None:
                self.wanted.add(extra)
        return self._record(node, start_node, end_node)

    @contextlib.contextmanager
    def _record(
        self, node: cst.CSTNode, start_node: cst.CSTNode | None, end_node: cst.CSTNode | None
    ) -> Iterator[None]:
        start = self.length
        try:
            yield
        finally:
            end = self.length
            if start_node is not None:
                start = self.found[start_node][0]
            if end_node is not None:
                end = self.found[end_node][1]
            self.found[node] = (start, end)


def locate(module: cst.Module, nodes: Iterable[cst.CSTNode]) -> dict[cst.CSTNode, Span]:
    """The span of each node, as PositionProvider would report it."""
    wanted = set(nodes)
    if not wanted:
        return {}
    try:
        return _locate_fast(module, wanted)
    except Exception:  # LibCST internals changed: take the slow, public road
        ranges = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        return {
            node: (r.start.line, r.start.column, r.end.line, r.end.column)
            for node, r in ((n, ranges[n]) for n in wanted)
        }


def _locate_fast(module: cst.Module, wanted: set[cst.CSTNode]) -> dict[cst.CSTNode, Span]:
    code, found = offsets(module, module, wanted)
    position = line_column(code)
    return {node: (*position(found[node][0]), *position(found[node][1])) for node in wanted}


def offsets(
    module: cst.Module, root: cst.CSTNode, wanted: Iterable[cst.CSTNode]
) -> tuple[str, dict[cst.CSTNode, tuple[int, int]]]:
    """The code of `root` (a top-level statement of `module`, or the module), and the start
    and end offset in it of each wanted node below `root`."""
    state = _Locator(module, set(wanted))
    root._codegen(state)
    return "".join(state.tokens), state.found


def line_column(code: str) -> Callable[[int], tuple[int, int]]:
    """Offset in `code` -> (1-based line, 0-based column)."""
    starts = [0] + [match.end() for match in _NEWLINE.finditer(code)]

    def position(offset: int) -> tuple[int, int]:
        line = bisect_right(starts, offset) - 1
        return line + 1, offset - starts[line]

    return position
