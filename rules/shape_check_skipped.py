"""TL690: a module could not be shape-checked."""

from __future__ import annotations

from torchlint.rule import Rule


class ShapeCheckSkipped(Rule):
    """
    ## What it does
    Reports that a module could not be loaded, built or traced for shape checking, with
    the reason: a constructor that needs arguments no call site, builder or configuration
    gives (and that cannot be guessed), an input whose shape cannot be inferred, a missing
    dependency, a forward pass that fails for reasons other than shapes, or a check that
    ran out of time or memory. Every class with a `forward` that no checked model built is
    reported, so a run never passes over a model in silence. A model whose forward stops
    where sizes start to depend on the values of tensors (a detector keeping the boxes that
    score well) is checked up to there; the layers it had not reached are named. Off by
    default: a run that does not show it says on standard error how many models were not
    shape-checked (`warning: 3 models not shape-checked; see --extend-select TL690`).

    ## Why is this bad?
    Shape bugs in such a module go unreported. Most reasons can be removed: give the
    constructor's arguments in the configuration, or declare the input shape.

    ## Example
    ```text
    model.py:5:1: TL690 shape check of Encoder skipped: needs arguments: in_dim, hidden
    ```

    ## Use instead
    ```toml
    [tool.torchlint.shapes]
    "model:Encoder" = { args = { in_dim = 64, hidden = 128 }, input-shape = [1, 64] }
    ```
    """

    code = "TL690"
    name = "shape-check-skipped"
    engine_reported = True
    default_enabled = False
