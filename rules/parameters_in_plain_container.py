"""TL402: nn.Parameters kept in a plain list/tuple/dict attribute of an nn.Module."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.containers import PARAMETER, container_analysis
from torchlint.rule import Rule


class ParametersInPlainContainer(Rule):
    """
    ## What it does
    Checks for `nn.Module` subclasses that store `nn.Parameter`s in a plain `list`,
    `tuple`, `dict` or `set` attribute instead of `nn.ParameterList` /
    `nn.ParameterDict`.

    ## Why is this bad?
    `nn.Module` registers a Parameter only when it is assigned to an attribute directly.
    Parameters inside a plain container are missing from `parameters()`, so the
    optimizer never updates them; `.to(device)` and `.half()` leave them behind; and
    `state_dict()` neither saves nor restores them.

    ## Known problems
    Only `nn.Parameter(...)` calls written in the class are recognised; a list of
    parameters built by a helper function is not checked.

    ## Example
    ```python
    class Mixture(nn.Module):
        def __init__(self, k, dim):
            super().__init__()
            self.means = [nn.Parameter(torch.randn(dim)) for _ in range(k)]
    ```

    ## Use instead
    ```python
    class Mixture(nn.Module):
        def __init__(self, k, dim):
            super().__init__()
            self.means = nn.ParameterList([nn.Parameter(torch.randn(dim)) for _ in range(k)])
    ```
    """

    code = "TL402"
    name = "parameters-in-plain-container"
    triggers = ("Parameter",)

    # Assignments and `self.x.append(...)` calls are recorded as the walk passes them ...
    def visit_Assign(self, node: cst.Assign) -> None:
        container_analysis(self.context).note(node)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        container_analysis(self.context).note(node)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        container_analysis(self.context).note(node)

    def visit_Call(self, node: cst.Call) -> None:
        container_analysis(self.context).note(node)

    # ... and judged once the whole class has been seen.
    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        for finding in container_analysis(self.context).findings(node):
            if finding.element != PARAMETER:
                continue
            wrapper = "ParameterDict" if finding.container == "dict" else "ParameterList"
            self.report(
                finding.node,
                f"{finding.attribute} is a plain {finding.container} of nn.Parameters: they "
                "are not registered (optimizer, .to(), state_dict skip them); "
                f"use nn.{wrapper}(...)",
            )
