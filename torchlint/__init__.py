"""torchlint: a static analysis tool for PyTorch code."""

from __future__ import annotations

__version__ = "0.1.0"
