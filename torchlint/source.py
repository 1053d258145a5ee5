"""Turning a file's bytes into text, or a clear reason why they are not Python source."""

from __future__ import annotations

import io
import tokenize


class UndecodableSource(Exception):
    """The bytes are not text Python can read (null byte, bad encoding)."""


def decode(data: bytes) -> str:
    """Decode as Python does: BOM, then an encoding cookie, then UTF-8."""
    if b"\x00" in data:
        raise UndecodableSource("file contains a null byte; is it a binary file?")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        raise UndecodableSource(str(exc)) from None
    try:
        text = data.decode(encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        raise UndecodableSource(
            f"file is not valid {encoding} text ({exc.__class__.__name__}: {exc.reason})"
            if isinstance(exc, UnicodeDecodeError)
            else f"unknown encoding {encoding!r}"
        ) from None
    return text.removeprefix("\ufeff")
