"""A CPU-time budget for one model's check: past it, the check stops with `BudgetSpent`.

A few models (a large vision-language stack whose every size is data-dependent) take most
of a run's time in the size search; stopping them at a budget keeps the rest of the file's
models checked within its time limit, and the stopped one is reported as not checked.
The budget counts the process's CPU time (not the wall clock), so a busy machine does not
change which models finish.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

#: After the budget is spent, the stop is raised again this often (CPU seconds), in case
#: the model's own code caught it (`except BaseException`).
_REPEAT = 0.05


class EngineStop(BaseException):
    """A stop the engine raises through the checked code (a time limit, a request to warm
    up first): a BaseException, which a model's own `except Exception` does not swallow, and
    never taken for the model's own failure."""


def raised_by_model_code(exc: BaseException) -> bool:
    """Whether an exception came from the checked code (`sys.exit()`, an exception class
    outside Exception's tree), not from the engine's own stops or the user's interrupt."""
    return not isinstance(exc, (EngineStop, KeyboardInterrupt, GeneratorExit))


class BudgetSpent(EngineStop):
    """The model's check ran past its CPU-time budget."""


def _spent(signum: int, frame: Any) -> None:
    raise BudgetSpent()


@contextlib.contextmanager
def cpu_budget(seconds: float | None) -> Iterator[None]:
    """Raise `BudgetSpent` in the block once it used `seconds` of CPU time (None: no limit;
    nor off the main thread, where signals cannot be handled)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGPROF, _spent)
    signal.setitimer(signal.ITIMER_PROF, seconds, _REPEAT)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)
