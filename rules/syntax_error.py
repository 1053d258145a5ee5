"""TL000: the file cannot be read or parsed."""

from __future__ import annotations

from torchlint.rule import Rule


class SyntaxErrorRule(Rule):
    """
    ## What it does
    Reports a file that cannot be read or parsed as Python: a syntax error, a null byte,
    bytes that are not valid in the file's encoding, or an unreadable file.

    ## Why is this bad?
    No other rule can look at a file torchlint cannot parse, so its mistakes go unreported.
    The run goes on with the other files.

    ## Example
    ```python
    def forward(self, x)
        return self.fc(x)
    ```

    ## Use instead
    ```python
    def forward(self, x):
        return self.fc(x)
    ```
    """

    code = "TL000"
    name = "syntax-error"
    engine_reported = True
