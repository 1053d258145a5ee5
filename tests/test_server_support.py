"""Test-only rules, and a launcher running the language server with them registered.

The real rules land separately; these two give the server tests a rule with a fix (TL990)
and a rule that crashes (TL991), whatever the state of `rules/`. Run as a script, this file
starts `torchlint server` with them added: `python tests/test_server_support.py`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import libcst as cst

from torchlint.fixes import FixBuilder
from torchlint.rule import Rule


class FakeSoftmaxRule(Rule):
    """
    ## What it does
    Test rule: reports calls of `F.softmax`.

    ## Why is this bad?
    It is not; the server tests need a rule with a fix.

    ## Example
    ```python
    y = F.softmax(x, dim=1)
    ```

    ## Use instead
    ```python
    y = F.log_softmax(x, dim=1)
    ```
    """

    code = "TL990"
    name = "fake-softmax"
    triggers = ("softmax",)
    fix_availability = "safe"

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.code(node.func) == "F.softmax":
            self.report(
                node.func,
                "fake: use F.log_softmax",
                fix=FixBuilder("use F.log_softmax", [(node.func, "F.log_softmax")]),
            )


class FakeCrashRule(Rule):
    """
    ## What it does
    Test rule: crashes on a call of `boom()`.

    ## Why is this bad?
    It is not; the server tests need a rule that raises.

    ## Example
    ```python
    boom()
    ```

    ## Use instead
    ```python
    pass
    ```
    """

    code = "TL991"
    name = "fake-crash"
    triggers = ("boom",)

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.code(node.func) == "boom":
            raise RuntimeError("fake rule failure")


def register() -> None:
    """Add the test rules to the (cached) registry of this process."""
    from torchlint.registry import all_rules

    rules = all_rules()
    rules[FakeSoftmaxRule.code] = FakeSoftmaxRule
    rules[FakeCrashRule.code] = FakeCrashRule


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    register()
    from torchlint.server import main

    raise SystemExit(main())
