"""Allow `python -m torchlint`."""

from __future__ import annotations

from torchlint.cli import main

raise SystemExit(main())
