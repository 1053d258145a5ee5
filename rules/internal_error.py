"""TL999: a rule crashed on a file (a torchlint bug)."""

from __future__ import annotations

from torchlint.rule import Rule


class InternalErrorRule(Rule):
    """
    ## What it does
    Reports that one of torchlint's rules raised an exception on a file. The other rules'
    findings for the file are kept; the crashed rule's are missing, and torchlint exits
    with status 2.

    ## Why is this bad?
    It is a bug in torchlint, not in your code. Please report it with the file (or a
    reduced example) and the message, which names the rule and the exception.

    ## Example
    ```text
    model.py:12:5: TL999 rule TL101 (softmax-before-cross-entropy) crashed on this file: ...
    ```

    ## Use instead
    Disable the crashed rule for that file with `per-file-ignores` until it is fixed.
    """

    code = "TL999"
    name = "internal-error"
    engine_reported = True
