"""Generated documentation: the README's rules table and the full rule reference.

Both come from the rules' docstrings; `python -m torchlint.readme` rewrites them and a test
fails when they are stale.
"""

from __future__ import annotations

import sys
from pathlib import Path

from torchlint.registry import all_rules

BEGIN, END = "<!-- begin rules table -->", "<!-- end rules table -->"
REFERENCE_HEADER = (
    "# Rule reference\n\n"
    "Generated from each rule's docstring by `python -m torchlint.readme`; "
    "`torchlint rule CODE` prints the same text.\n"
)


def rules_table() -> str:
    rows = [
        "| Code | Name | What it flags | Default | Fix |",
        "|---|---|---|---|---|",
    ]
    for rule in all_rules().values():
        doc = rule.doc()
        anchor = f"docs/rules.md#{doc.code.lower()}-{doc.name}"
        rows.append(
            f"| [{doc.code}]({anchor}) | `{doc.name}` | {doc.summary} "
            f"| {'on' if doc.default_enabled else 'off'} | {doc.fix_availability or ''} |"
        )
    return "\n".join(rows)


def rules_reference() -> str:
    parts = [REFERENCE_HEADER]
    for rule in all_rules().values():
        doc = rule.doc()
        body = doc.to_markdown().split("\n", 1)[1]
        body = body.replace("\n## ", "\n#### ")
        parts.append(f"## {doc.code} {doc.name}\n{body}")
    return "\n".join(parts)


def render_readme(text: str) -> str:
    """README text with the rules table between its markers replaced by the current one."""
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n{rules_table()}\n{END}{tail}"


def main(root: Path | None = None) -> int:
    root = root or Path.cwd()
    readme = root / "README.md"
    readme.write_text(render_readme(readme.read_text(encoding="utf-8")), encoding="utf-8")
    (root / "docs").mkdir(exist_ok=True)
    (root / "docs" / "rules.md").write_text(rules_reference(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
