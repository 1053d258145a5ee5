"""TL402: nn.Parameters kept in a plain list/tuple/dict attribute of an nn.Module."""

from __future__ import annotations

from torchlint.analysis.containers import PARAMETER, ContainerFinding, PlainContainerRule


class ParametersInPlainContainer(PlainContainerRule):
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

    ## Fix safety
    The fix wraps the container in `nn.ParameterList` (or `nn.ParameterDict` for a dict
    with string keys), adding the import when the file has no spelling of `torch.nn`. It
    is offered only when the attribute is assigned once, every element is built right there
    (an `nn.Parameter(...)` call), and the class uses no method the wrapper lacks; it is
    safe: the elements now get registered, which is the point.
    """

    code = "TL402"
    name = "parameters-in-plain-container"
    triggers = ("Parameter",)
    fix_availability = "safe"

    element = PARAMETER

    def message(self, finding: ContainerFinding) -> str:
        wrapper = "ParameterDict" if finding.container == "dict" else "ParameterList"
        return (
            f"{finding.attribute} is a plain {finding.container} of nn.Parameters: they "
            "are not registered (optimizer, .to(), state_dict skip them); "
            f"use nn.{wrapper}(...)"
        )
