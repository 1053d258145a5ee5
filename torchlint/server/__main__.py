"""`python -m torchlint.server`: the language server, without going through the CLI."""

from __future__ import annotations

from torchlint.server import main

raise SystemExit(main())
