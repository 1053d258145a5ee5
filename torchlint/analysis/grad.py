"""Which tensors require grad at a given statement, and whether autograd is recording there.

Used by TL201 (in-place change of a tensor that requires grad). The analysis runs inside the
engine's single walk: `GradTracker` is fed binding statements in source order and keeps, per
scope, what each local name is known to hold; what an expression is (a leaf created with
`requires_grad=True`, an `nn.Parameter`, a module's parameters, a layer, a same-file model) is
asked of the semantic model's `TensorFacts`, with the tracker as its view of the names in
scope. Facts that can only be known
after the whole file was seen (which functions are called under `torch.no_grad()`, which
modules get frozen with `requires_grad = False`) are collected along the way; findings are
decided in `finish()`.

Everything here errs on the side of silence: a name is known only while its last binding
dominates the use (same or enclosing block), and anything unresolved counts as unknown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import libcst as cst

from torchlint.analysis.call_args import is_true
from torchlint.context import FileContext
from torchlint.semantic.tensors import Binding, path_parts, tensor_facts, through_loops

# -- vocabulary -------------------------------------------------------------------------------

_BLOCKS = (cst.IndentedBlock, cst.SimpleStatementSuite)


@dataclass(frozen=True)
class _Known:
    binding: Binding
    blocks: frozenset[int]


@dataclass
class Scope:
    node: cst.CSTNode
    kind: str  # "module", "function", "class"
    classdef: cst.ClassDef | None = None  # for a method: its class
    names: dict[str, _Known] = field(default_factory=dict)
    blocked: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class Freeze:
    """`<parts>.requires_grad_(False)` (or `= False`) seen in class `where`."""

    parts: tuple[str, ...]  # ("*",): cannot be named
    where: cst.ClassDef | None
    #: What `parts[0]` held at the freeze (None: unknown); the classes it reaches are
    #: worked out only when a finding needs them.
    start: Binding | None


# -- the tracker ------------------------------------------------------------------------------


class GradTracker:
    """Per-file state for TL201, fed by the rule's callbacks in source order."""

    def __init__(self, context: FileContext) -> None:
        self.context = context
        self.scopes: list[Scope] = []
        self.lambda_depth = 0
        #: Paths frozen with `requires_grad = False` / `requires_grad_(False)`, with the class
        #: they were frozen in; `("*",)` when the frozen thing cannot be named.
        self.frozen: list[Freeze] = []
        self.tensors = tensor_facts(context)

    # -- scopes ---------------------------------------------------------------------------
    def enter_scope(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.Module):
            self.scopes.append(Scope(node, "module"))
            return
        outer = self.scopes[-1] if self.scopes else None
        if isinstance(node, cst.ClassDef):
            scope = Scope(node, "class")
        else:
            classdef = outer.node if outer is not None and outer.kind == "class" else None
            assert isinstance(classdef, (cst.ClassDef, type(None)))
            scope = Scope(node, "function", classdef=classdef)
        self.scopes.append(scope)

    def leave_scope(self, node: cst.CSTNode) -> None:
        if self.scopes and self.scopes[-1].node is node:
            self.scopes.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)) and self.scopes:
            self._forget(node.name.value)

    # -- bindings -------------------------------------------------------------------------
    @property
    def scope(self) -> Scope:
        return self.scopes[-1]

    def _blocks(self) -> frozenset[int]:
        return frozenset(id(n) for n in self.context.ancestors if isinstance(n, _BLOCKS))

    def _set(self, name: str, binding: Binding | None) -> None:
        scope = self.scope
        if binding is None:
            scope.names.pop(name, None)
        elif name not in scope.blocked:
            scope.names[name] = _Known(binding, self._blocks())

    def _forget(self, name: str) -> None:
        self.scope.names.pop(name, None)

    @property
    def classdef(self) -> cst.ClassDef | None:
        """The class of the method being walked (the tracker is the rules' `NameView`)."""
        return self.scope.classdef

    def lookup(self, name: str, resolve: bool = True) -> Binding | None:
        """The binding of a local name, if its last binding dominates the current point."""
        known = self.scope.names.get(name)
        if known is None or not known.blocks <= self._blocks():
            return None
        return self.tensors.resolved(known.binding, self) if resolve else known.binding

    def bind_target(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        """An assignment `target = value` (value None: bound to something unknown)."""
        if isinstance(target, cst.Name):
            binding = self.tensors.classify(value, self) if value is not None else None
            self._set(target.value, binding)
        elif isinstance(target, (cst.Tuple, cst.List)):
            values: Sequence[cst.BaseExpression | None]
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(
                target.elements
            ):
                values = [e.value for e in value.elements]
            else:
                values = [None] * len(target.elements)
            for element, item in zip(target.elements, values, strict=True):
                self.bind_target(element.value, item)
        elif isinstance(target, cst.StarredElement):
            self.bind_target(target.value, None)
        elif isinstance(target, cst.Attribute) and target.attr.value == "requires_grad":
            owner = target.value
            if not is_true(value):
                self.record_freeze(owner)
            if isinstance(owner, cst.Name):
                known = self.lookup(owner.value)
                if not is_true(value):
                    self._forget(owner.value)
                elif known is None or known.kind != "param":
                    # Setting the flag raises on a non-leaf: from here on it is a leaf.
                    self._set(owner.value, Binding("leaf"))
        elif isinstance(target, cst.Attribute):
            # `fc.weight = nn.Parameter(w, requires_grad=False)`: the layer is no longer known.
            parts = path_parts(target)
            if parts is not None and parts[0] in self.scope.names:
                known = self.scope.names[parts[0]].binding
                if known.kind in ("layer", "model", "ref"):
                    self._forget(parts[0])

    def bind_loop(self, target: cst.BaseExpression, iterable: cst.BaseExpression) -> None:
        elements = self.tensors.loop_elements(
            target, iterable, self, optimizer_step=self._in_plain_optimizer_method()
        )
        for name_node, binding in elements:
            self.bind_target(name_node, None)
            if isinstance(name_node, cst.Name) and binding is not None:
                self._set(name_node.value, binding)

    def _in_plain_optimizer_method(self) -> bool:
        """In an undecorated method of a `torch.optim.Optimizer` subclass.

        Such a `step()` runs with grad enabled, so updating `group["params"]` in place raises;
        any decorator (`@torch.no_grad()`, torch's `_use_grad_for_differentiable`) may change
        the grad mode, so decorated methods are left alone.
        """
        scope = self.scope
        node = scope.node
        if not isinstance(node, cst.FunctionDef) or node.decorators or scope.classdef is None:
            return False
        return any(
            (self.context.qualified_name(base.value) or "").startswith("torch.optim.")
            for base in scope.classdef.bases
        )

    def mark_requires_grad(self, call: cst.Call) -> None:
        """`x.requires_grad_(...)`: x becomes a leaf requiring grad, or gets frozen."""
        func = call.func
        assert isinstance(func, cst.Attribute)
        args = call.args
        turned_on = not args or is_true(args[0].value)
        receiver = func.value
        if not turned_on:
            self.record_freeze(receiver)
        if isinstance(receiver, cst.Name):
            known = self.lookup(receiver.value)
            if turned_on and known is not None and known.kind == "fresh":
                self._set(receiver.value, Binding("leaf"))
            elif not turned_on or known is None or known.kind not in ("leaf", "param"):
                # On an unknown tensor it may be a no-op on a non-leaf that needs grad.
                self._forget(receiver.value)

    def block_names(self, names: Sequence[str]) -> None:
        for name in names:
            self.scope.blocked.add(name)
            self._forget(name)

    # -- freezing -------------------------------------------------------------------------
    def record_freeze(self, expr: cst.BaseExpression) -> None:
        if isinstance(expr, cst.Call):
            made = self.tensors.classify(expr, self)  # `nn.Linear(2, 2).requires_grad_(False)`
            if made is not None and made.kind in ("layer", "fresh", "leaf", "param"):
                return  # a new object: no existing parameter is frozen
        parts = path_parts(expr)
        if parts is not None:
            parts = through_loops(parts, self.context.ancestors)
        if parts is None:
            self.frozen.append(Freeze(("*",), self.scope.classdef, None))
            return
        start: Binding | None
        if parts[0] == "self":
            classdef = self.scope.classdef
            start = Binding("model", classdef=classdef) if classdef is not None else None
        else:
            start = self.lookup(parts[0])
        self.frozen.append(Freeze(parts, self.scope.classdef, start))
