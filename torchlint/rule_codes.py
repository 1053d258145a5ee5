"""Every rule's code and whether it is on by default, read from the rule files' text.

Choosing the enabled codes happens on every run, also on one the cache answers entirely;
importing the rules (and LibCST with them) would cost that run most of its time. A rule
module declares its rule's `code = "TLxxx"` and, when off by default,
`default_enabled = False` in the class body; a module read otherwise (no code, two codes)
makes this fall back to importing the rules, so the answer is always `all_rules()`'s.
"""

from __future__ import annotations

import os
import re
from functools import cache

_CODE = re.compile(r'^    code(?:: [^=\n]+)? = "(TL\d+)"', re.M)
_DEFAULT = re.compile(r"^    default_enabled(?:: [^=\n]+)? = (True|False)\b", re.M)


def rule_codes() -> dict[str, bool]:
    """Every rule code, in code order, with whether the rule is on by default."""
    from torchlint.registry import all_rules

    found = None if all_rules.cache_info().currsize else _scanned()
    if found is None:  # the rules are imported already (or must be): they say
        return {code: rule.default_enabled for code, rule in all_rules().items()}
    return found


@cache
def _scanned() -> dict[str, bool] | None:
    found = _scan()
    return None if found is None else dict(sorted(found.items()))


def _scan() -> dict[str, bool] | None:
    import torchlint.rules as package

    found: dict[str, bool] = {}
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
                    text = handle.read()
            except (OSError, UnicodeDecodeError):
                return None
            codes = _CODE.findall(text)
            defaults = _DEFAULT.findall(text)
            if len(codes) != 1 or len(defaults) > 1 or codes[0] in found:
                return None
            found[codes[0]] = not defaults or defaults[0] == "True"
    return found or None
