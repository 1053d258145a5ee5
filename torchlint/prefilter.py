"""Which rules can fire on a file, decided from its text before LibCST parses it.

Rules look only at files that mention torch (a file that never does is not torchlint's to
judge). Each rule declares `triggers` (substrings, one of which any of its findings needs in
the file) and optionally `requires` (more groups, one substring of each needed too). A token
that is not a plain name (`.to(`, `def forward`) is looked for with the whitespace taken out of
both, so that `x.to (device)` still counts. A rule whose tokens are absent is not run; a file
where no enabled rule can fire is not parsed by LibCST at all (the engine still reports it if
it does not compile). Imported files' summaries are computed on demand, so skipping a file
costs its importers nothing.

Setting `TORCHLINT_NO_PREFILTER=1` runs every enabled rule on every file that mentions torch:
the diagnostics must be the same, only slower (for debugging a rule whose tokens are suspected).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchlint.rule import Rule

#: Set to 1 (or true/yes/on) to run every enabled rule on every file that mentions torch.
NO_PREFILTER_ENV = "TORCHLINT_NO_PREFILTER"
#: What a file must mention for any rule to look at it.
TORCH = "torch"


def prefilter_enabled() -> bool:
    return os.environ.get(NO_PREFILTER_ENV, "").strip().lower() not in ("1", "true", "yes", "on")


class _Text:
    """A file's text, and the same without whitespace (made on first use)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._compact: str | None = None

    def contains(self, token: str) -> bool:
        if token.isidentifier():
            return token in self.source
        if self._compact is None:
            # Backslashes go too: a line continuation may split a token.
            self._compact = "".join(self.source.split()).replace("\\", "")
        return "".join(token.split()) in self._compact


def can_fire(rule: type[Rule], source: str) -> bool:
    """Whether the rule's declared tokens allow a finding in `source` (torch checked apart)."""
    return _can_fire(rule, _Text(source))


def _can_fire(rule: type[Rule], text: _Text) -> bool:
    groups = (rule.triggers, *rule.requires) if rule.triggers else rule.requires
    return all(any(text.contains(token) for token in group) for group in groups)


def rules_that_can_fire(source: str, rules: Iterable[type[Rule]]) -> list[type[Rule]]:
    """The rules among `rules` that may report something in `source`."""
    if TORCH not in source:
        return []
    if not prefilter_enabled():
        return list(rules)
    text = _Text(source)
    return [rule for rule in rules if _can_fire(rule, text)]


def tree_rules(enabled: Collection[str]) -> list[type[Rule]]:
    """The enabled rules that walk the tree (not the engine's own TL000, TL6xx, ...)."""
    from torchlint.registry import all_rules

    return [
        rule for code, rule in all_rules().items() if code in enabled and not rule.engine_reported
    ]
