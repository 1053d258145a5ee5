"""Test-only rules, and a launcher running the language server with them registered.

The real rules land separately; these two give the server tests a rule with a fix (TL9901)
and a rule that crashes (TL9902), whatever the state of `rules/`. Run as a script, this file
starts `torchlint server` with them added: `python tests/test_server_support.py`; with
`--fake-shapes`, `fake_check_files` below stands in for the shape engine.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import time
from pathlib import Path

import libcst as cst

from torchlint.diagnostic import Diagnostic
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

    code = "TL9901"
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

    code = "TL9902"
    name = "fake-crash"
    triggers = ("boom",)

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.code(node.func) == "boom":
            raise RuntimeError("fake rule failure")


class FakeShapeRule(Rule):
    """
    ## What it does
    Test rule: a stand-in shape check, reported by `fake_check_files`.

    ## Why is this bad?
    It is not; the server tests need a shape rule.

    ## Example
    ```python
    x = 1  # shape-bug
    ```

    ## Use instead
    ```python
    x = 1
    ```
    """

    code = "TL6901"
    name = "fake-shape"
    engine_reported = True


def fake_check_files(
    files: list[tuple[str, str]], declared: dict[str, object] | None = None
) -> dict[str, list[Diagnostic]]:
    """A stand-in shape engine: reports lines marked `# shape-bug`, after `# shape-delay: S`."""
    found: dict[str, list[Diagnostic]] = {}
    for path, source in files:
        delay = re.search(r"# shape-delay: ([0-9.]+)", source)
        if delay:
            time.sleep(float(delay.group(1)))
        found[path] = [
            Diagnostic(path, number, 1, number, len(line) + 1, "TL6901", "fake-shape", "fake shape")
            for number, line in enumerate(source.splitlines(), 1)
            if line.rstrip().endswith("# shape-bug")
        ]
    return found


def register() -> None:
    """Add the test rules to the (cached) registry of this process."""
    from torchlint.registry import all_rules

    rules = all_rules()
    rules[FakeSoftmaxRule.code] = FakeSoftmaxRule
    rules[FakeCrashRule.code] = FakeCrashRule
    rules[FakeShapeRule.code] = FakeShapeRule


def use_fake_shapes() -> None:
    """Make this process's server run `fake_check_files` as its shape engine."""
    from torchlint.server import app, settings

    target = f"{__name__}:fake_check_files"
    app.ShapeRunner = functools.partial(app.ShapeRunner, target=target)  # type: ignore[misc]
    settings.shapes_installed = lambda: True  # type: ignore[assignment]
    app.shapes_installed = settings.shapes_installed  # type: ignore[attr-defined]


if __name__ == "__main__":
    ROOT = str(Path(__file__).resolve().parent.parent)
    sys.path.insert(0, ROOT)
    # The shape worker imports this module as `tests.test_server_support`.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    register()
    if "--fake-shapes" in sys.argv:
        import tests.test_server_support as support

        support.use_fake_shapes()
    from torchlint.server import main

    raise SystemExit(main())
