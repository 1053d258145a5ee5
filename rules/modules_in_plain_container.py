"""TL401: submodules kept in a plain list/tuple/dict attribute of an nn.Module."""

from __future__ import annotations

from torchlint.analysis.containers import MODULE, ContainerFinding, PlainContainerRule


class ModulesInPlainContainer(PlainContainerRule):
    """
    ## What it does
    Checks for `nn.Module` subclasses that store submodules in a plain `list`, `tuple`,
    `dict` or `set` attribute instead of `nn.ModuleList` / `nn.ModuleDict`.

    Reported: `self.x = [...]`, comprehensions, `{"a": nn.Conv2d(...)}`, a local list
    filled in a loop and then assigned, and `self.x = []` followed by `self.x.append(...)`,
    when the elements are newly built `torch.nn` layers or Module subclasses from the same
    file. Lists of already registered modules (`list(self.blocks)`), local lists passed to
    `nn.Sequential(*layers)`, and lists of parameter-free activations are not reported.

    ## Why is this bad?
    `nn.Module` registers an attribute only when the value itself is a Module. Modules
    inside a plain container are invisible to `parameters()`, so the optimizer never
    updates them; `.to(device)`, `.half()`, `.train()`/`.eval()` skip them; and
    `state_dict()` neither saves nor loads their weights. Training silently leaves those
    layers at their random initialisation, or fails later with a device mismatch.

    ## Known problems
    Modules are recognised when built in the class itself, by a helper of the same file
    (`self.layers = self._make_layers(cfg)`), or by a top-level function of another project
    file that always returns a plain container of new modules (`mlp_layers(sizes)` imported
    from `layers.py`); a list of modules passed in as an argument is not checked. A
    one-element list or tuple of an existing module (`[teacher]`) is the usual way to hide
    it on purpose and is not reported; `[nn.Linear(4, 4)]` is.

    ## Example
    ```python
    class MLP(nn.Module):
        def __init__(self, dim, depth):
            super().__init__()
            self.layers = [nn.Linear(dim, dim) for _ in range(depth)]
    ```

    ## Use instead
    ```python
    class MLP(nn.Module):
        def __init__(self, dim, depth):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(dim, dim) for _ in range(depth)])
    ```

    ## Fix safety
    The fix wraps the container in `nn.ModuleList` (or `nn.ModuleDict` for a dict with string keys),
    adding the import when the file has no spelling of `torch.nn`. It is offered only when
    the attribute is assigned once, every element is built right there (a call), and the
    class uses no method the wrapper lacks; it is safe: the elements now get registered,
    which is the point.
    """

    code = "TL401"
    name = "modules-in-plain-container"
    # Recognising an nn.Module subclass needs `torch.nn` (or `from torch import nn`).
    triggers = ("nn",)
    fix_availability = "safe"

    element = MODULE

    def message(self, finding: ContainerFinding) -> str:
        wrapper = "ModuleDict" if finding.container == "dict" else "ModuleList"
        return (
            f"{finding.attribute} is a plain {finding.container} of modules: their "
            "parameters are not registered (optimizer, .to(), state_dict skip them); "
            f"use nn.{wrapper}(...)"
        )
