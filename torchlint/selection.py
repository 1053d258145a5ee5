"""Which rule codes are on: ruff's select / extend-select / ignore with prefix matching."""

from __future__ import annotations

from collections.abc import Iterable

from torchlint.errors import TorchlintError
from torchlint.rule_codes import rule_codes


def validate(selectors: Iterable[str], where: str) -> tuple[str, ...]:
    """Upper-case the selectors and fail clearly on any that matches no rule."""
    codes = rule_codes()
    result = []
    for raw in selectors:
        selector = str(raw).strip().upper()
        if selector != "ALL" and not any(code.startswith(selector) for code in codes):
            raise TorchlintError(f"unknown rule selector {raw!r} in {where}")
        result.append(selector)
    return tuple(result)


def _specificity(selectors: Iterable[str], code: str, *, exact_only: bool = False) -> int:
    """Length of the most specific selector matching `code` (ALL counts as 0), -1 for none.

    With `exact_only`, only the full code or ALL match (for rules that are off by default).
    """
    best = -1
    for selector in selectors:
        if selector == "ALL":
            best = max(best, 0)
        elif selector == code or (not exact_only and code.startswith(selector)):
            best = max(best, len(selector))
    return best


def enabled_codes(
    select: tuple[str, ...] | None,
    extend_select: tuple[str, ...] = (),
    ignore: tuple[str, ...] = (),
) -> frozenset[str]:
    """The enabled codes. A rule is on when its most specific select beats its ignore.

    Without `select`, the default set is every rule that is on by default. Rules that are
    off by default are turned on only by their exact code or by `ALL`.
    """
    enabled = set()
    for code, default_enabled in rule_codes().items():
        exact_only = not default_enabled
        chosen = _specificity(extend_select, code, exact_only=exact_only)
        if select is not None:
            chosen = max(chosen, _specificity(select, code, exact_only=exact_only))
        elif default_enabled:
            chosen = max(chosen, 0)
        if chosen >= 0 and chosen > _specificity(ignore, code):
            enabled.add(code)
    return frozenset(enabled)
