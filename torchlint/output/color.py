"""Colour for the human-readable formats: when to use it, and the styles it applies."""

from __future__ import annotations

import os
from typing import TextIO

from torchlint.diagnostic import Severity

COLOR_CHOICES = ("auto", "always", "never")

BOLD, RED, YELLOW, CYAN, GREEN, BLUE = "1", "31", "33", "36", "32", "34"
SEVERITY_COLORS = {Severity.ERROR: RED, Severity.WARNING: YELLOW, Severity.INFO: CYAN}


def use_color(choice: str, stream: TextIO) -> bool:
    """`--color always|never` decide; `auto` follows NO_COLOR, FORCE_COLOR, then the terminal."""
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and os.environ.get("TERM") != "dumb"


def paint(text: str, *styles: str, enabled: bool = True) -> str:
    """`text` wrapped in ANSI styles, or unchanged when colour is off."""
    if not enabled or not styles or not text:
        return text
    return f"\x1b[{';'.join(styles)}m{text}\x1b[0m"
