"""Inputs found past a layer taken to keep their shape.

`h = self.norm1(x, emb)` with a custom normalization that reads no size of `x`
(`F.group_norm(x, groups)`), then `self.conv1(h)`: the convolution tells the input's shape
only if the normalization keeps it, which is the usual case but not a certainty. Such a plan
is `assumed`: a model that runs with it is checked, and one that fails with it is skipped
with the reason, never reported (the failure may be the assumption's, not the model's).
No size condition (TL606, TL607) is drawn from it either.
"""

from __future__ import annotations

from torchlint.shapes.inputs import InputPlan

#: The `InputPlan.source` of an assumed plan.
ASSUMED = "assumed"


def assumed_past(plans: list[InputPlan], passed: list[str]) -> list[InputPlan]:
    """The plans as assumed when the search went past what `passed` names (`self.norm`, a
    product with another tensor), as found otherwise."""
    if not passed:
        return plans
    return assumed(plans, f"to keep its shape through {', '.join(passed)}")


def assumed(plans: list[InputPlan], why: str) -> list[InputPlan]:
    """The plans as assumed, labelled `the input [...] assumed {why}`."""
    out = []
    for plan in plans:
        text = "; ".join(", ".join(d.name or str(d.hint) for d in spec.dims) for spec in plan.specs)
        label = f"the input [{text}] assumed {why}"
        out.append(InputPlan(plan.specs, ASSUMED, label, plan.packed, plan.exact))
    return out


def is_assumed(plan: InputPlan) -> bool:
    """Whether a plan rests on a layer taken to keep its input's shape."""
    return plan.source == ASSUMED
