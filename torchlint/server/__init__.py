"""The torchlint language server: `torchlint server` speaks LSP on stdio.

Diagnostics are pushed as documents change, with quick fixes, `# noqa` actions and rule
documentation on hover; Jupyter notebooks (LSP notebook document sync) get them per cell.
pygls and lsprotocol (the `server` extra) are imported only here.
"""

from __future__ import annotations

import sys
from functools import cache

from torchlint.rule import DOCS_URL

__all__ = ["DOCS_URL", "docs_url", "main"]


@cache
def docs_url(code: str) -> str:
    """The documentation link of one rule (`codeDescription.href`), as SARIF output has it."""
    from torchlint.registry import all_rules

    rule = all_rules().get(code)
    return rule.doc().url if rule is not None else f"{DOCS_URL}#{code.lower()}"


def main() -> int:
    """Serve LSP on stdin/stdout until the client exits; the exit status."""
    try:
        from torchlint.server.features import serve
    except ImportError as exc:
        print(
            f"torchlint server needs pygls and lsprotocol ({exc});"
            " install them with: pip install 'torchlint[server]'",
            file=sys.stderr,
        )
        return 2
    return serve()
