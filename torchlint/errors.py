"""The one family of user-facing errors: a message, and exit status 2."""

from __future__ import annotations


class TorchlintError(Exception):
    """An error the user can act on (bad configuration, bad arguments); exits with status 2."""
