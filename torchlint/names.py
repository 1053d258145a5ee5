"""A lean import-alias resolver: which dotted name a local expression stands for.

LibCST's QualifiedNameProvider is precise but costs several times the parse; torchlint only
needs `nn` -> `torch.nn`, `F` -> `torch.nn.functional`, `CE` -> `torch.nn.CrossEntropyLoss`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import libcst as cst

# `torch.nn.modules.loss.CrossEntropyLoss` is the same class as `torch.nn.CrossEntropyLoss`.
_NN_SUBMODULE = re.compile(r"^torch\.nn\.modules\.[a-z_]+\.")


def dotted_name(expr: cst.BaseExpression | cst.Attribute | cst.Name | None) -> str | None:
    """`a.b.c` for a chain of names and attributes; None for anything else."""
    parts: list[str] = []
    # Exact types: LibCST's node classes are ABCs, whose isinstance is slow on a miss.
    while type(expr) is cst.Attribute:
        parts.append(expr.attr.value)
        expr = expr.value
    if type(expr) is not cst.Name:
        return None
    parts.append(expr.value)
    return ".".join(reversed(parts))


def canonical(qualified: str) -> str:
    """Fold re-exports into the public spelling users write (`torch.nn.X`)."""
    if "torch.nn.modules." not in qualified:
        return qualified
    return _NN_SUBMODULE.sub("torch.nn.", qualified)


def _module_name(node: cst.BaseExpression | None) -> str:
    return dotted_name(node) or "" if node is not None else ""


class ImportMap:
    """Local names bound by import statements, mapped to the dotted names they import."""

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}
        #: `resolve`'s answers by the expression's id, until an import is added: rules ask
        #: about the same calls' functions many times.
        self._resolved: dict[int, tuple[cst.BaseExpression, str | None]] = {}

    def add(self, node: cst.Import | cst.ImportFrom) -> None:
        self._resolved.clear()
        if isinstance(node, cst.Import):
            for alias in node.names:
                full = _module_name(alias.name)
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    self.aliases[alias.asname.name.value] = full
                else:
                    head = full.split(".", 1)[0]
                    self.aliases[head] = head
            return
        if isinstance(node.names, cst.ImportStar) or node.relative:
            return
        module = _module_name(node.module)
        for alias in node.names:
            imported = _module_name(alias.name)
            local = imported
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            self.aliases[local] = f"{module}.{imported}"

    def add_all(self, nodes: Iterable[cst.Import | cst.ImportFrom]) -> None:
        for node in nodes:
            self.add(node)

    def resolve(self, expr: cst.BaseExpression | None) -> str | None:
        """The canonical dotted name `expr` refers to, or None when it is not imported."""
        if expr is None:
            return None
        known = self._resolved.get(id(expr))
        if known is not None and known[0] is expr:
            return known[1]
        found = None
        name = dotted_name(expr)
        if name is not None:
            head, _, rest = name.partition(".")
            base = self.aliases.get(head)
            if base is not None:
                found = canonical(f"{base}.{rest}" if rest else base)
        self._resolved[id(expr)] = (expr, found)
        return found


def top_level_imports(module: cst.Module) -> list[cst.Import | cst.ImportFrom]:
    """Imports at module level, including those under `if`/`try`/`with` blocks."""
    found: list[cst.Import | cst.ImportFrom] = []
    pending: list[cst.BaseStatement | cst.BaseSmallStatement] = list(module.body)
    while pending:
        stmt = pending.pop(0)
        if isinstance(stmt, cst.SimpleStatementLine):
            found.extend(s for s in stmt.body if isinstance(s, (cst.Import, cst.ImportFrom)))
        elif isinstance(stmt, (cst.If, cst.Try, cst.With, cst.Else, cst.Finally)):
            body = stmt.body
            if isinstance(body, cst.IndentedBlock):
                pending.extend(body.body)
            for extra in ("orelse", "finalbody"):
                child = getattr(stmt, extra, None)
                if child is not None:
                    pending.append(child)
            for handler in getattr(stmt, "handlers", ()):
                if isinstance(handler.body, cst.IndentedBlock):
                    pending.extend(handler.body.body)
    return found
