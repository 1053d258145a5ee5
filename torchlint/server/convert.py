"""Between torchlint's 1-based code-point positions and LSP's 0-based positions in client units.

LSP counts columns in the code units of the negotiated position encoding (UTF-16 unless the
client offers another) and ends lines only at `\\n`, `\\r\\n` and `\\r`; torchlint counts code
points, 1-based. Every conversion goes through `Text`, built once per document version.
"""

from __future__ import annotations

import re
from bisect import bisect_right

from lsprotocol import types

from torchlint.diagnostic import Diagnostic, Edit, Severity
from torchlint.server import docs_url

SOURCE = "torchlint"
_EOL = re.compile(r"\r\n|\r|\n")
_SEVERITY = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.INFO: types.DiagnosticSeverity.Information,
}


def split_lines(text: str) -> list[str]:
    """Lines with their endings, as LSP counts them; the last one may be empty."""
    lines, start = [], 0
    for match in _EOL.finditer(text):
        lines.append(text[start : match.end()])
        start = match.end()
    lines.append(text[start:])
    return lines


def strip_eol(line: str) -> str:
    return line.rstrip("\r\n")


def _units(text: str, encoding: str) -> int:
    if encoding == types.PositionEncodingKind.Utf32 or text.isascii():
        return len(text)
    if encoding == types.PositionEncodingKind.Utf8:
        return len(text.encode("utf-8", "surrogatepass"))
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


class Text:
    """One version of a document's text, with position conversions in both directions."""

    def __init__(self, source: str, encoding: str = types.PositionEncodingKind.Utf16) -> None:
        self.source = source
        self.encoding = encoding
        self.lines = split_lines(source)
        self.starts = [0]
        for line in self.lines[:-1]:
            self.starts.append(self.starts[-1] + len(line))

    # --- torchlint (1-based code points) -> offsets and LSP ---------------------------------

    def offset(self, line: int, column: int) -> int:
        """Index into `source` of a 1-based (line, column), clamped to the text."""
        if line < 1:
            return 0
        if line > len(self.lines):
            return len(self.source)
        content = strip_eol(self.lines[line - 1])
        return self.starts[line - 1] + min(max(column - 1, 0), len(content))

    def position_at(self, offset: int) -> types.Position:
        """The LSP position of an index into `source`."""
        offset = min(max(offset, 0), len(self.source))
        index = bisect_right(self.starts, offset) - 1
        line = self.lines[index]
        character = min(offset - self.starts[index], len(strip_eol(line)))
        return types.Position(index, _units(line[:character], self.encoding))

    def range(self, line: int, column: int, end_line: int, end_column: int) -> types.Range:
        """The LSP range of a 1-based, end-exclusive span."""
        start = self.offset(line, column)
        end = max(self.offset(end_line, end_column), start)
        return types.Range(self.position_at(start), self.position_at(end))

    def diagnostic_range(self, diagnostic: Diagnostic) -> types.Range:
        """A diagnostic's range; an empty one covers its next character so editors show it."""
        start = self.offset(diagnostic.line, diagnostic.column)
        end = max(self.offset(diagnostic.end_line, diagnostic.end_column), start)
        if end == start and start < len(self.source) and self.source[start] not in "\r\n":
            end += 1
        return types.Range(self.position_at(start), self.position_at(end))

    def text_edit(self, edit: Edit) -> types.TextEdit:
        return types.TextEdit(
            range=self.range(edit.start_line, edit.start_column, edit.end_line, edit.end_column),
            new_text=edit.content,
        )

    # --- LSP -> offsets ----------------------------------------------------------------------

    def offset_of(self, position: types.Position) -> int:
        """Index into `source` of an LSP position, clamped to the text."""
        if position.line < 0:
            return 0
        if position.line >= len(self.lines):
            return len(self.source)
        content = strip_eol(self.lines[position.line])
        start = self.starts[position.line]
        if content.isascii() or self.encoding == types.PositionEncodingKind.Utf32:
            return start + min(max(position.character, 0), len(content))
        units = 0
        for index, char in enumerate(content):
            if units >= position.character:
                return start + index
            units += _units(char, self.encoding)
        return start + len(content)

    def line_column(self, position: types.Position) -> tuple[int, int]:
        """The 1-based (line, column) of an LSP position."""
        offset = self.offset_of(position)
        index = bisect_right(self.starts, offset) - 1
        return index + 1, offset - self.starts[index] + 1


def to_lsp(diagnostic: Diagnostic, text: Text) -> types.Diagnostic:
    """The LSP form of a torchlint diagnostic."""
    return types.Diagnostic(
        range=text.diagnostic_range(diagnostic),
        message=diagnostic.message,
        severity=_SEVERITY.get(diagnostic.severity, types.DiagnosticSeverity.Error),
        code=diagnostic.code,
        code_description=types.CodeDescription(href=docs_url(diagnostic.code)),
        source=SOURCE,
        data={"name": diagnostic.name, "fixable": diagnostic.fix is not None},
    )


def overlaps(text: Text, diagnostic: Diagnostic, start: int, end: int) -> bool:
    """Whether a diagnostic's span meets the offsets [start, end] (inclusive, as cursors are)."""
    first = text.offset(diagnostic.line, diagnostic.column)
    last = max(text.offset(diagnostic.end_line, diagnostic.end_column), first)
    return first <= end and start <= last
