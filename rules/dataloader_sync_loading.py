"""TL704: a training `DataLoader` that loads batches in the main process."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.call_args import has_star_args, has_star_kwargs, keyword, positional
from torchlint.analysis.test_paths import is_test_file
from torchlint.context import FileContext
from torchlint.diagnostic import Severity
from torchlint.names import dotted_name
from torchlint.rule import Rule

_DATALOADER = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, ...)
_NUM_WORKERS_POSITION = 5
_EVAL_WORDS = ("test", "val", "eval")
_ITERATION_WRAPPERS = frozenset({"enumerate", "tqdm", "iter", "zip"})


class DataLoaderSyncLoading(Rule):
    """
    ## What it does
    Checks for a training `DataLoader(...)` that passes no `num_workers` (or
    `num_workers=0`) in a script with a training loop, that is a loop calling `.backward()`.
    The loader counts as a training loader when that loop iterates over it, when it is
    assigned to a name containing `train`, or when it shuffles (`shuffle=True`) and its name
    does not say `test`/`val`/`eval`. Test files are not checked.

    Off by default: small in-memory datasets load fine in the main process.

    ## Why is this bad?
    With `num_workers=0` every batch is read, decoded and augmented in the training process,
    between optimizer steps, while the GPU waits. For image, audio or text pipelines this is
    often the bottleneck of the whole run; worker processes prepare the next batches in
    parallel with the step.

    ## Known problems
    The right number of workers depends on the machine; on Windows and macOS worker processes
    are spawned and need the usual `if __name__ == "__main__":` guard.

    ## Example
    ```python
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True)
    ```

    ## Use instead
    ```python
    train_loader = DataLoader(
        train_set, batch_size=64, shuffle=True, num_workers=4, pin_memory=True
    )
    ```
    """

    code = "TL704"
    name = "dataloader-sync-loading"
    triggers = ("DataLoader",)
    default_enabled = False
    severity = Severity.WARNING

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self._loaders: list[tuple[cst.Call, str | None]] = []
        self._loop_iterables: set[str] = set()
        self._loop_calls: set[int] = set()
        self._has_training_loop = False

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "backward":
            self._training_step()
            return
        if self.context.qualified_name(func) not in _DATALOADER:
            return
        if has_star_kwargs(node) or has_star_args(node):
            return
        if len(positional(node)) > _NUM_WORKERS_POSITION:
            return
        workers = keyword(node, "num_workers")
        if workers is not None and not (
            isinstance(workers.value, cst.Integer) and workers.value.value == "0"
        ):
            return
        self._loaders.append((node, self._assigned_name(node)))

    def _training_step(self) -> None:
        """A `.backward()` call: every loop around it is a training loop."""
        for ancestor in self.context.ancestors:
            if isinstance(ancestor, cst.While):
                self._has_training_loop = True
            elif isinstance(ancestor, cst.For):
                self._has_training_loop = True
                iterable = _unwrap_iteration(ancestor.iter)
                name = dotted_name(iterable)
                if name is not None:
                    self._loop_iterables.add(name)
                elif isinstance(iterable, cst.Call):
                    self._loop_calls.add(id(iterable))

    def leave_Module(self, node: cst.Module) -> None:
        if not self._has_training_loop or is_test_file(self.context.path):
            return
        for call, assigned in self._loaders:
            name = (assigned or "").lower()
            evaluation = any(word in name for word in _EVAL_WORDS)
            if not (
                id(call) in self._loop_calls
                or (assigned is not None and assigned in self._loop_iterables)
                or "train" in name
                or (_shuffles(call) and not evaluation)
            ):
                continue
            self.report(
                call,
                "this training DataLoader loads every batch in the main process "
                "(num_workers=0), so the GPU waits on data; set num_workers (and pin_memory=True "
                "when training on GPU)",
            )

    def _assigned_name(self, call: cst.Call) -> str | None:
        parent = self.context.ancestors[-1] if self.context.ancestors else None
        if isinstance(parent, cst.Assign) and parent.value is call and len(parent.targets) == 1:
            return dotted_name(parent.targets[0].target)
        if isinstance(parent, cst.AnnAssign) and parent.value is call:
            return dotted_name(parent.target)
        return None


def _shuffles(call: cst.Call) -> bool:
    shuffle = keyword(call, "shuffle")
    if shuffle is None:
        args = positional(call)
        value = args[2].value if len(args) > 2 else None
    else:
        value = shuffle.value
    return isinstance(value, cst.Name) and value.value == "True"


def _unwrap_iteration(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`loader` from `enumerate(loader)`, `tqdm(loader, ...)`, `iter(loader)`."""
    for _ in range(3):
        if (
            isinstance(expr, cst.Call)
            and dotted_name(expr.func) is not None
            and (dotted_name(expr.func) or "").rsplit(".", 1)[-1] in _ITERATION_WRAPPERS
            and expr.args
        ):
            expr = expr.args[0].value
        else:
            break
    return expr
