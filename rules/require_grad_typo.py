"""TL203: assigning a misspelling of `requires_grad`, which silently does nothing."""

from __future__ import annotations

import re

import libcst as cst

from torchlint.fixes import FixBuilder
from torchlint.rule import Rule

_CORRECT = "requires_grad"


def _distance(a: str, b: str, limit: int) -> int:
    """Optimal-string-alignment edit distance (a swap counts once), capped at `limit + 1`."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cost = 0 if ca == cb else 1
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                current[j] = min(current[j], previous2[j - 2] + 1)
        previous2, previous = previous, current
    return min(previous[-1], limit + 1)


def is_typo(attribute: str) -> bool:
    """A near miss of `requires_grad` (`require_grad`, `requires_grads`, `requries_grad`...)."""
    if attribute == _CORRECT or "grad" not in attribute.lower():
        return False
    normalized = attribute.lower()
    if normalized in (_CORRECT, _CORRECT + "_"):
        return normalized != attribute or attribute.endswith("_")
    return _distance(normalized, _CORRECT, 2) <= 2


class RequireGradTypo(Rule):
    """
    ## What it does
    Checks for assignments to a misspelled `requires_grad` attribute, such as
    `p.require_grad = False`, `x.requires_grads = True`, `w.requries_grad = False` or
    `p.requires_grad_ = False`. Attributes the file reads elsewhere (a field of its own
    class, say), private names (`m._requires_grad`) and assignments to `self.<attr>` are not
    reported.

    The fix renames the attribute to `requires_grad`.

    ## Why is this bad?
    Tensors and modules accept any new Python attribute, so the misspelling raises no error:
    it creates an unrelated attribute and leaves `requires_grad` unchanged. Layers meant to be
    frozen keep training (and the optimizer keeps updating them), or a tensor meant to be
    optimised never gets a gradient.

    ## Example
    ```python
    for p in backbone.parameters():
        p.require_grad = False
    ```

    ## Use instead
    ```python
    for p in backbone.parameters():
        p.requires_grad = False
    ```

    ## Fix safety
    The fix is marked safe: it makes the assignment do what it was written for. Note that
    freezing a whole `nn.Module` takes `module.requires_grad_(False)`; the attribute only
    exists on tensors and parameters.
    """

    code = "TL203"
    name = "require-grad-typo"
    triggers = ("grad",)
    fix_availability = "safe"

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._check(target.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._check(node.target, node.value)

    def _check(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._check(element.value, value)
            return
        if not isinstance(target, cst.Attribute):
            return
        attribute = target.attr.value
        if attribute.startswith("_") or not is_typo(attribute):
            return  # `_requires_grad`: a private flag of the program's own, not a typo
        owner = target.value
        if isinstance(owner, cst.Name) and owner.value in ("self", "cls"):
            return  # a field of the class being written, most likely on purpose
        if attribute.endswith("grad_"):
            # `requires_grad_` is the in-place method: assigning a bool to it is the typo;
            # anything else may be deliberate patching.
            if not (isinstance(value, cst.Name) and value.value in ("True", "False")):
                return
        elif self._used_elsewhere(attribute):
            return
        self.report(
            target,
            f"`{attribute}` is not a tensor attribute: this assignment creates a new attribute "
            f"and leaves requires_grad unchanged; did you mean `requires_grad`?",
            fix=FixBuilder(
                message="Rename to requires_grad",
                replacements=[(target.attr, cst.Name(_CORRECT))],
                safe=True,
            ),
        )

    def _used_elsewhere(self, attribute: str) -> bool:
        """Whether the name occurs anywhere but as an assignment target (read, keyword,
        string, definition): then it is a real attribute of some object, not a typo."""
        pattern = re.compile(rf"\b{re.escape(attribute)}\b")
        assigned = re.compile(rf"\.{re.escape(attribute)}\s*(?::[^=\n]*)?=(?!=)")
        return self.context.scan(_more_often, pattern, assigned)


def _more_often(source: str, pattern: re.Pattern[str], than: re.Pattern[str]) -> bool:
    return len(pattern.findall(source)) > len(than.findall(source))
