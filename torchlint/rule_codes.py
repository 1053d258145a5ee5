"""Every rule's code and whether it is on by default, read from the rule files' text.

Choosing the enabled codes happens on every run, also on one the cache answers entirely;
importing the rules (and LibCST with them) would cost that run most of its time. A rule
module declares its rule's `code = "TLxxx"` and, when off by default,
`default_enabled = False` in the class body; a module read otherwise (no code, two codes)
makes this fall back to importing the rules, so the answer is always `all_rules()`'s.

A run whose rules ran in worker processes reports the shape checks' diagnostics from the
main process: `rule_label` gives their rules' names and severities the same way.
"""

from __future__ import annotations

import os
import re
from functools import cache

from torchlint.diagnostic import Severity

_CODE = re.compile(r'^    code(?:: [^=\n]+)? = "(TL\d+)"', re.M)
_DEFAULT = re.compile(r"^    default_enabled(?:: [^=\n]+)? = (True|False)\b", re.M)
_NAME = re.compile(r'^    name(?:: [^=\n]+)? = "([\w-]+)"', re.M)
_SEVERITY = re.compile(r"^    severity(?:: [^=\n]+)? = Severity\.([A-Z]+)\b", re.M)


def rule_codes() -> dict[str, bool]:
    """Every rule code, in code order, with whether the rule is on by default."""
    from torchlint.registry import all_rules

    found = None if all_rules.cache_info().currsize else _scanned()
    if found is None:  # the rules are imported already (or must be): they say
        return {code: rule.default_enabled for code, rule in all_rules().items()}
    return found


def rule_label(code: str) -> tuple[str, Severity] | None:
    """A rule's name and severity (None for an unknown code), without importing the rules
    unless they are imported already or a rule file cannot be read that way."""
    from torchlint.registry import all_rules

    labels = None if all_rules.cache_info().currsize else _labels()
    if labels is None:
        rule = all_rules().get(code)
        return None if rule is None else (rule.name, rule.severity)
    return labels.get(code)


@cache
def _scanned() -> dict[str, bool] | None:
    found = _scan()
    return None if found is None else dict(sorted(found.items()))


def _scan() -> dict[str, bool] | None:
    texts = _rule_texts()
    if texts is None:
        return None
    found: dict[str, bool] = {}
    for text in texts:
        codes = _CODE.findall(text)
        defaults = _DEFAULT.findall(text)
        if len(codes) != 1 or len(defaults) > 1 or codes[0] in found:
            return None
        found[codes[0]] = not defaults or defaults[0] == "True"
    return found or None


@cache
def _labels() -> dict[str, tuple[str, Severity]] | None:
    """Every rule's name and severity (an error unless it says otherwise), by code."""
    texts = _rule_texts()
    if texts is None:
        return None
    found: dict[str, tuple[str, Severity]] = {}
    for text in texts:
        codes = _CODE.findall(text)
        names = _NAME.findall(text)
        severities = _SEVERITY.findall(text)
        if len(codes) != 1 or len(names) != 1 or len(severities) > 1 or codes[0] in found:
            return None
        if severities and severities[0] not in Severity.__members__:
            return None
        severity = Severity[severities[0]] if severities else Severity.ERROR
        found[codes[0]] = (names[0], severity)
    return found or None


def _rule_texts() -> list[str] | None:
    """The text of every rule module, None when one cannot be read."""
    import torchlint.rules as package

    texts = []
    for folder in package.__path__:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            return None
        for name in names:
            if not name.endswith(".py") or name.startswith("_"):
                continue
            try:
                with open(os.path.join(folder, name), encoding="utf-8") as handle:
                    texts.append(handle.read())
            except (OSError, UnicodeDecodeError):
                return None
    return texts
