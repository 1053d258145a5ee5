"""The torchlint language server: `torchlint server` speaks LSP on stdio.

Diagnostics are pushed as documents change, with quick fixes, `# noqa` actions and rule
documentation on hover. pygls and lsprotocol (the `server` extra) are imported only here.
"""

from __future__ import annotations

import sys

#: Rule documentation; each rule has an anchor named after its lower-case code.
DOCS_URL = "https://github.com/torchlint/torchlint/blob/main/README.md"


def docs_url(code: str) -> str:
    """The documentation link of one rule, e.g. `...README.md#tl101`."""
    return f"{DOCS_URL}#{code.lower()}"


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
