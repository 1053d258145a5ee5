"""TL701: autograd anomaly detection left switched on outside tests."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.call_args import is_true, keyword, positional
from torchlint.analysis.test_paths import is_test_file
from torchlint.diagnostic import Severity
from torchlint.rule import Rule

_SET = frozenset(
    {"torch.autograd.set_detect_anomaly", "torch.autograd.anomaly_mode.set_detect_anomaly"}
)
_CONTEXT = frozenset(
    {"torch.autograd.detect_anomaly", "torch.autograd.anomaly_mode.detect_anomaly"}
)
_DEBUG_WORDS = ("anomaly", "debug", "check")


class AnomalyDetectionEnabled(Rule):
    """
    ## What it does
    Checks for autograd anomaly detection switched on unconditionally in non-test code:
    `torch.autograd.set_detect_anomaly(True)` and `torch.autograd.detect_anomaly()` (as a
    context manager or decorator). Files under a `tests/` directory or named `test_*.py`,
    `*_test.py` or `conftest.py`, calls with a non-literal flag
    (`set_detect_anomaly(args.debug)`), calls inside an `if` block (a debug switch) and
    calls inside a function named for debugging (`debug_step`, `check_numerics`,
    `run_with_anomaly`) are not reported; `set_detect_anomaly(False)` is fine.

    ## Why is this bad?
    Anomaly detection records a Python stack trace for every autograd operation and checks
    every backward result for NaN: it makes training several times slower and uses more
    memory. It is a debugging aid, meant to be enabled while hunting a NaN and removed
    afterwards, not left in the training script.

    ## Example
    ```python
    torch.autograd.set_detect_anomaly(True)
    for batch in loader:
        train_step(batch)
    ```

    ## Use instead
    ```python
    torch.autograd.set_detect_anomaly(args.debug_anomaly)
    for batch in loader:
        train_step(batch)
    ```
    """

    code = "TL701"
    name = "anomaly-detection-enabled"
    triggers = ("anomaly",)
    severity = Severity.WARNING

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.context.qualified_name(node.func)
        if qualified in _SET:
            args = positional(node)
            flag = args[0].value if args else None
            mode = keyword(node, "mode")
            if mode is not None:
                flag = mode.value
            if not is_true(flag):
                return
            message = (
                "set_detect_anomaly(True) slows every backward pass several times; remove it "
                "or put it behind a debug flag"
            )
        elif qualified in _CONTEXT:
            # Enabled whatever its arguments: `check_nan=` only tunes what it checks.
            message = (
                "detect_anomaly() slows every backward pass several times; remove it or put "
                "it behind a debug flag"
            )
        else:
            return
        if is_test_file(self.context.path) or self._conditional() or self._debug_function():
            return
        self.report(node, message)

    def _debug_function(self) -> bool:
        """Inside a function whose name says it is a debugging or checking aid."""
        return any(
            isinstance(node, cst.FunctionDef)
            and any(word in node.name.value.lower() for word in _DEBUG_WORDS)
            for node in self.context.ancestors
        )

    def _conditional(self) -> bool:
        """Inside an `if` (other than `if __name__ == "__main__":`): a debug switch."""
        for ancestor in self.context.ancestors:
            if isinstance(ancestor, (cst.If, cst.IfExp)) and not _is_main_guard(ancestor):
                return True
        return False


def _is_main_guard(node: cst.If | cst.IfExp) -> bool:
    test = node.test
    return (
        isinstance(node, cst.If)
        and isinstance(test, cst.Comparison)
        and isinstance(test.left, cst.Name)
        and test.left.value == "__name__"
    )
