"""TL305: CUDA hard-coded in a file that never checks whether CUDA is there."""

from __future__ import annotations

import re

import libcst as cst

from torchlint.analysis.call_args import positional, string_value
from torchlint.analysis.test_paths import is_test_file
from torchlint.context import FileContext
from torchlint.diagnostic import Severity
from torchlint.rule import Rule

# Any of these means the file decides about the device somewhere: not hard-coded.
_DEVICE_AWARE = re.compile(
    r"is_available\s*\("
    r"|accelerator"
    r"|device_count\s*\("
    r"|--(?:device|cuda|no[-_]cuda|gpus?|cpu)\b"
    r"|\b(?:use_cuda|use_gpu|no_cuda|TEST_CUDA|HAS_CUDA|RUN_CUDA|CUDA_AVAILABLE|requires_cuda)\b"
    r"|\bargs\.(?:cuda|gpu|device)\b"
    r"|skipIf|onlyCUDA|instantiate_device_type_tests|pytest\.mark"
)


# Kernel libraries: code importing them runs on a GPU by construction.
_GPU_ONLY_PACKAGES = frozenset({"triton", "cutlass", "cuda", "pycuda", "cupy", "numba.cuda"})
_DEVICE_WORD = re.compile(r"cuda|gpu|device|accelerator", re.I)


def _gpu_only_file(context: FileContext) -> bool:
    """A file under a `cuda` directory (or named for CUDA), or one that imports a GPU kernel
    library: CUDA-specific by design."""
    # The file and its two nearest folders (not wherever the checkout happens to live).
    parts = re.split(r"[/\\]", context.path.lower())[-3:]
    if any("cuda" in part for part in parts):
        return True
    return any(
        target in _GPU_ONLY_PACKAGES or target.split(".", 1)[0] in _GPU_ONLY_PACKAGES
        for target in context.imports.aliases.values()
    )


def _is_cuda_string(expr: cst.BaseExpression | None) -> bool:
    value = string_value(expr)
    return value is not None and (value == "cuda" or value.startswith("cuda:"))


class HardCodedCuda(Rule):
    """
    ## What it does
    Checks for CUDA hard-coded as the device — `.cuda()`, `device="cuda"`,
    `torch.device("cuda")`, `.to("cuda")` — in a file that never checks whether CUDA is
    available: no `torch.cuda.is_available()`, `torch.accelerator`, `device_count()`, no
    `device` parameter of its own functions and no `--device`/`--cuda` command-line option.
    Each function is reported once, at its first use. Uses guarded by a device test
    (`if args.cuda:`, `if x.is_cuda:`), test files (which gate GPU tests with their own skip
    markers) and CUDA-specific code (a file under a `cuda` directory or importing `triton`,
    `cutlass`, `cupy`...) are not reported.

    Off by default: GPU-only code (a CUDA kernel benchmark, a cluster job) is fine to
    hard-code; select the rule for code that should also run on CPU or other accelerators.

    ## Why is this bad?
    The script crashes on a machine without an NVIDIA GPU (a laptop, CI, Apple silicon, a
    CPU-only container) with "Torch not compiled with CUDA enabled" or "No CUDA GPUs are
    available", and it cannot be pointed at another GPU or backend without editing the code.

    ## Known problems
    GPU-only library code that shows it neither by its path nor by its imports (a CUDA
    kernel binding benchmarking itself with `device="cuda"`) is reported; select the rule only
    for code meant to be portable.

    ## Example
    ```python
    model = Net().cuda()
    x = torch.randn(8, 3, device="cuda")
    ```

    ## Use instead
    ```python
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Net().to(device)
    x = torch.randn(8, 3, device=device)
    ```
    """

    code = "TL305"
    name = "hard-coded-cuda"
    triggers = ("cuda",)
    default_enabled = False
    severity = Severity.WARNING

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        #: Each hard-coded use, with the function it is in (0 at module level).
        self._found: list[tuple[cst.CSTNode, int]] = []
        self._device_parameter = False

    def visit_Param(self, node: cst.Param) -> None:
        name = node.name.value
        if name == "device" or name.endswith("_device"):
            self._device_parameter = True

    def visit_Call(self, node: cst.Call) -> None:
        target = self._hard_coded(node)
        if target is not None and not self._guarded():
            function = self.context.enclosing_function()
            self._found.append((target, id(function) if function is not None else 0))

    def _guarded(self) -> bool:
        """Inside `if cuda:` / `if args.use_gpu:` / `if x.is_cuda:` (or its else branch)."""
        for ancestor in self.context.ancestors:
            if isinstance(ancestor, (cst.If, cst.IfExp, cst.While)) and _DEVICE_WORD.search(
                self.context.code(ancestor.test)
            ):
                return True
        return False

    def leave_Module(self, node: cst.Module) -> None:
        # Decided at the end: a device parameter or check may come after the first use.
        if not self._found or self._device_parameter or is_test_file(self.context.path):
            return
        if _gpu_only_file(self.context):
            return
        if self.context.matches(_DEVICE_AWARE):
            return
        # One finding per function (its first use): the remedy is one device for all of them.
        uses: dict[int, list[cst.CSTNode]] = {}
        for target, scope in self._found:
            uses.setdefault(scope, []).append(target)
        for scope, targets in uses.items():
            more = len(targets) - 1
            where = "in this function" if scope else "at module level"
            also = f" ({more} more use{'s' if more > 1 else ''} {where})" if more else ""
            self.report(
                targets[0],
                f"CUDA is hard-coded{also} and this file never checks "
                "torch.cuda.is_available(); pick the device once (torch.device('cuda' if "
                "torch.cuda.is_available() else 'cpu')) and use .to(device)",
            )

    def _hard_coded(self, node: cst.Call) -> cst.CSTNode | None:
        func = node.func
        qualified = self.context.qualified_name(func)
        if qualified == "torch.device":
            args = positional(node)
            if args and _is_cuda_string(args[0].value):
                return node
            type_arg = next((a for a in node.args if a.keyword and a.keyword.value == "type"), None)
            return node if type_arg and _is_cuda_string(type_arg.value) else None
        if (
            isinstance(func, cst.Attribute)
            and qualified is None
            and func.attr.value == "cuda"
            and all(a.keyword is not None and a.keyword.value == "non_blocking" for a in node.args)
        ):
            # `.cuda()` on a tensor or module (not `.cuda(rank)`, which names its GPU).
            return node
        if isinstance(func, cst.Attribute) and qualified is None and func.attr.value == "to":
            args = positional(node)
            if args and _is_cuda_string(args[0].value):
                return args[0].value
        for arg in node.args:
            if (
                arg.keyword is not None
                and arg.keyword.value == "device"
                and _is_cuda_string(arg.value)
            ):
                return arg
        return None
