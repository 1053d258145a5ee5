"""Rules that check one scope (a function, or the module's top level) at a time.

The costly per-scope analysis runs only on the few scopes whose cheap signals (calls and
loops marked while the walk passes them) all showed up.
"""

from __future__ import annotations

from typing import ClassVar

import libcst as cst

from torchlint.context import FileContext
from torchlint.rule import Rule


class ScopeFlags:
    """What a rule has seen so far in each open scope (module, function)."""

    def __init__(self) -> None:
        self._stack: list[set[str]] = []

    def push(self) -> None:
        self._stack.append(set())

    def pop(self) -> set[str]:
        return self._stack.pop() if self._stack else set()

    def mark(self, flag: str) -> None:
        if self._stack:
            self._stack[-1].add(flag)


class LoopScopeRule(Rule):
    """Base of the rules that check a function (or the module) only when its cheap signals
    (`required`, marked by the subclass's callbacks plus "loop") were all seen in it."""

    required: ClassVar[frozenset[str]]

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self._flags = ScopeFlags()

    def check(self, scope: cst.Module | cst.FunctionDef) -> None:
        raise NotImplementedError

    def mark(self, flag: str) -> None:
        self._flags.mark(flag)

    def visit_Module(self, node: cst.Module) -> None:
        self._flags.push()

    def leave_Module(self, node: cst.Module) -> None:
        if self._flags.pop() >= self.required:
            self.check(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._flags.push()

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self._flags.pop() >= self.required:
            self.check(node)

    def visit_For(self, node: cst.For) -> None:
        self._flags.mark("loop")

    def visit_While(self, node: cst.While) -> None:
        self._flags.mark("loop")


def method_class(context: FileContext, scope: cst.CSTNode) -> cst.ClassDef | None:
    """During the walk, at `visit_FunctionDef(scope)`: the class it is a method of."""
    if not isinstance(scope, cst.FunctionDef):
        return None
    return context.enclosing_class()
