"""Re-parse an edited buffer one top-level statement at a time, reusing the rest of the tree.

An edit usually touches one function of a long file, yet LibCST parses all of it again. This
keeps each document's last tree with where each top-level statement starts in its text; on
an edit it finds the statements the changed characters fall in, parses only their new text,
and splices the result between the unchanged statement nodes (LibCST nodes are immutable, so
sharing them between trees is safe).

The spliced tree must be the tree a full parse would give, node for node. Where LibCST's
attribution of comments and blank lines, or the module's default indentation, could come out
differently when parsed apart, the region grows by one statement each side, and after a few
tries this parses the whole text instead. `tests/test_server_reparse.py` checks random edits
against full parses.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import libcst as cst

from torchlint.context import NodeTexts
from torchlint.engine import LintRecord, parse
from torchlint.parse_guard import complexity_error
from torchlint.positions import Span, line_column, locate, offsets
from torchlint.walker import TreeIndex, iter_descendants

#: A line continued by a backslash and holding nothing else.
_LONE_BACKSLASH = re.compile(r"^[ \t\f]*\\\n", re.M)
#: How often the re-parsed region may grow (a statement each side) before a full parse.
_WIDENINGS = 2


@dataclass(frozen=True)
class ParsedText:
    """A parsed text and where each of its top-level statements starts in it."""

    source: str
    module: cst.Module
    #: Offset of each statement of `module.body` (its leading comment lines included), then
    #: the offset where the footer starts; empty when the tree does not give back the text
    #: (LibCST drops some line continuations), so that statements cannot be told apart.
    bounds: tuple[int, ...]
    #: Whether each statement holds an indented block (the first one sets the default indent).
    blocks: tuple[bool, ...]
    #: The ids of the nodes below each statement (by the statement's id), filled as needed
    #: and handed on to the next parse for the statements it reuses.
    below: dict[int, frozenset[int]] = field(default_factory=dict, compare=False, repr=False)
    #: Spans found below each statement (by the statement's id, then the node's), with lines
    #: counted from the statement's first: they hold wherever the statement moves.
    spans: dict[int, dict[int, Span]] = field(default_factory=dict, compare=False, repr=False)
    #: Each statement's tree index (by the statement's id), handed on like `below`.
    indexes: dict[int, TreeIndex] = field(default_factory=dict, compare=False, repr=False)
    #: The source text of nodes, as the lint asked for it; the next parse borrows from it.
    texts: NodeTexts = field(default_factory=NodeTexts, compare=False, repr=False)
    #: What the lint of this text looked at and found, by its settings (`relint.carried`).
    lints: dict[object, LintRecord] = field(default_factory=dict, compare=False, repr=False)

    def tree_index(self) -> TreeIndex:
        """The module's tree index, joined from its statements' (made for those not kept)."""
        parts = []
        for statement in self.module.body:
            part = self.indexes.get(id(statement))
            if part is None or part.order[0] is not statement:
                part = self.indexes[id(statement)] = TreeIndex(statement)
            parts.append(part)
        return TreeIndex(self.module, parts)

    def locate(self, module: cst.Module, nodes: Iterable[cst.CSTNode]) -> dict[cst.CSTNode, Span]:
        """`positions.locate` for this text's tree, generating the code of only the
        statements that hold the nodes."""
        wanted = {id(node): node for node in nodes}
        if module is not self.module or not self.bounds:
            return locate(module, wanted.values())
        try:
            spans = self._locate(wanted)
        except Exception:  # LibCST internals changed: the whole module's way
            spans = None
        return spans if spans is not None else locate(module, wanted.values())

    def _locate(self, wanted: dict[int, cst.CSTNode]) -> dict[cst.CSTNode, Span] | None:
        spans: dict[cst.CSTNode, Span] = {}
        remaining = set(wanted)
        position = line_column(self.source)
        for index, statement in enumerate(self.module.body):
            if not remaining:
                break
            here = remaining & self._below(statement)
            if not here:
                continue
            known = self.spans.setdefault(id(statement), {})
            missing = [wanted[i] for i in here if i not in known]
            if missing:
                code, found = offsets(self.module, statement, missing)
                if not self.source.startswith(code, self.bounds[index]):
                    return None
                local = line_column(code)
                for node in missing:
                    begin, end = found[node]
                    known[id(node)] = (*local(begin), *local(end))
            line = position(self.bounds[index])[0] - 1
            for i in here:
                start_line, start_column, end_line, end_column = known[i]
                spans[wanted[i]] = (line + start_line, start_column, line + end_line, end_column)
            remaining -= here
        return None if remaining else spans  # a node outside the statements: header, footer

    def _below(self, statement: cst.BaseStatement) -> frozenset[int]:
        found = self.below.get(id(statement))
        if found is None:
            part = self.indexes.get(id(statement))
            if part is not None and part.order[0] is statement:
                found = frozenset(part.positions)
            else:
                found = frozenset(map(id, iter_descendants(statement))) | {id(statement)}
            self.below[id(statement)] = found
        return found


def full_parse(source: str) -> ParsedText | Exception:
    """The text parsed whole: its tree and statement offsets, or why it does not parse."""
    module = parse(source)
    if not isinstance(module, cst.Module):
        return module
    bounds = _bounds(module, source, 0, len(source))
    return ParsedText(source, module, bounds or (), tuple(_has_block(s) for s in module.body))


def reparse(previous: ParsedText | None, source: str) -> ParsedText | Exception:
    """`source` parsed, reusing the statements of `previous` that its edit left alone.

    The result equals `full_parse(source)`; only the work differs.
    """
    if previous is not None and previous.source == source:
        return previous
    if (
        previous is None
        or "\r" in source
        or previous.module.default_newline != "\n"
        or not previous.bounds
        or not previous.module.body
    ):
        return full_parse(source)  # a new newline convention, or nothing to reuse
    if complexity_error(source) is not None:
        return full_parse(source)  # which says why
    start, old_end = _changed(previous.source, source)
    count = len(previous.module.body)
    first = _statement_at(previous.bounds, max(start - 1, 0))
    last = _statement_at(previous.bounds, old_end - 1) if old_end > start else first
    for _ in range(_WIDENINGS + 1):
        spliced = _splice(previous, source, first, last)
        if spliced is not None:
            return spliced
        if first == 0 and last == count - 1:
            break
        first, last = max(first - 1, 0), min(last + 1, count - 1)
    return full_parse(source)


def _changed(old: str, new: str) -> tuple[int, int]:
    """Where `old` and `new` differ: (first differing offset, end of the change in `old`)."""
    shortest = min(len(old), len(new))
    low, high = 0, shortest  # the longest common prefix, by halving
    while low < high:
        middle = (low + high + 1) // 2
        if old[:middle] == new[:middle]:
            low = middle
        else:
            high = middle - 1
    prefix = low
    low, high = 0, shortest - prefix  # the longest common suffix after it
    while low < high:
        middle = (low + high + 1) // 2
        if old[len(old) - middle :] == new[len(new) - middle :]:
            low = middle
        else:
            high = middle - 1
    return prefix, len(old) - low


def _statement_at(bounds: Sequence[int], offset: int) -> int:
    """The statement whose text holds `offset` (header: the first, footer: the last)."""
    index = bisect_right(bounds, offset) - 1
    return min(max(index, 0), len(bounds) - 2)


def _splice(previous: ParsedText, source: str, first: int, last: int) -> ParsedText | None:
    """The tree with statements `first`..`last` parsed again from their new text, or None
    when that region cannot be parsed apart (the caller widens it or parses everything)."""
    old = previous.module
    bounds = previous.bounds
    count = len(old.body)
    at_start, at_end = first == 0, last == count - 1
    begin = 0 if at_start else bounds[first]
    delta = len(source) - len(previous.source)
    end = len(source) if at_end else bounds[last + 1] + delta
    if end < begin:
        return None
    text = source[begin:end]
    if _LONE_BACKSLASH.search(text):
        return None  # LibCST joins such a line to its neighbours differently when cut apart
    try:
        chunk = cst.parse_module(text)
    except Exception:  # a syntax error here may be a region cut wrongly: widen, then parse all
        return None
    body = list(chunk.body)
    if not body and not (at_start and at_end):
        return None  # comment lines alone: which statement owns them depends on the rest
    if not at_end:
        following = old.body[last + 1]
        if chunk.footer or not _flush_left(following.leading_lines):
            return None  # trailing lines a full parse could give to a neighbour
        if not text.endswith("\n") or text.endswith("\\\n"):
            return None  # the next statement would continue this line
    if not at_start:
        if not _flush_left(chunk.header):
            return None  # indented lines may belong to the previous statement's block
        if chunk.header:
            body[0] = body[0].with_changes(leading_lines=(*chunk.header, *body[0].leading_lines))
    blocks = [_has_block(statement) for statement in body]
    if not _same_indent(previous, first, last, chunk, any(blocks)):
        return None
    region = chunk.with_changes(header=chunk.header if at_start else (), body=body)
    new_bounds = _bounds(region, source, begin, end)
    if new_bounds is None:
        return None  # the region's tree does not give back its text
    footer_start = new_bounds[-1]
    new_bounds = (
        *bounds[:first],
        *new_bounds[:-1],
        *(bound + delta for bound in bounds[last + 1 : count]),
        footer_start if at_end else bounds[count] + delta,
    )
    module = old.with_changes(
        header=region.header if at_start else old.header,
        body=(*old.body[:first], *body, *old.body[last + 1 :]),
        footer=chunk.footer if at_end else old.footer,
        has_trailing_newline=chunk.has_trailing_newline if at_end else old.has_trailing_newline,
    )
    kept = (*old.body[:first], *old.body[last + 1 :])
    return ParsedText(
        source,
        module,
        new_bounds,
        (*previous.blocks[:first], *blocks, *previous.blocks[last + 1 :]),
        {id(s): previous.below[id(s)] for s in kept if id(s) in previous.below},
        {id(s): previous.spans[id(s)] for s in kept if id(s) in previous.spans},
        {id(s): previous.indexes[id(s)] for s in kept if id(s) in previous.indexes},
        NodeTexts(previous.texts),
    )


def _same_indent(
    previous: ParsedText, first: int, last: int, chunk: cst.Module, chunk_has_block: bool
) -> bool:
    """Whether the region's blocks agree with the indentation unit of the whole new text.

    LibCST records the first indented block's indentation as the module's unit and only the
    other blocks' own; parsed apart, the region's first block would set its own unit.
    """
    if chunk_has_block:
        return chunk.default_indent == previous.module.default_indent
    # No block in the region: the unit is still set where it was, unless it was set there.
    return any(previous.blocks[:first]) or not any(previous.blocks[first : last + 1])


def _flush_left(lines: Sequence[cst.EmptyLine]) -> bool:
    """Lines (comments, blank lines) with nothing before them on their line."""
    return all(not line.whitespace.value for line in lines)


def _has_block(statement: cst.BaseStatement) -> bool:
    if isinstance(statement, cst.SimpleStatementLine):
        return False
    if isinstance(getattr(statement, "body", None), cst.IndentedBlock):
        return True
    return any(isinstance(node, cst.IndentedBlock) for node in iter_descendants(statement))


def _bounds(module: cst.Module, source: str, begin: int, end: int) -> tuple[int, ...] | None:
    """Where each statement of `module` (parsed from `source[begin:end]`) starts in `source`,
    then where its footer starts; None when the tree's code is not that text."""
    pieces = [
        "".join(module.code_for_node(line) for line in module.header),
        *(module.code_for_node(statement) for statement in module.body),
        "".join(module.code_for_node(line) for line in module.footer),
    ]
    if not module.has_trailing_newline:  # LibCST leaves out the module's last newline
        last = max((i for i, piece in enumerate(pieces) if piece), default=None)
        if last is not None and pieces[last].endswith(module.default_newline):
            pieces[last] = pieces[last][: -len(module.default_newline)]
    bounds = []
    offset = begin
    for piece in pieces:
        if not source.startswith(piece, offset):
            return None
        offset += len(piece)
        bounds.append(offset)
    return tuple(bounds[:-1]) if offset == end else None
