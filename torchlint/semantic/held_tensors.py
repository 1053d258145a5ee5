"""What a local name holds where it is used, in terms of `TensorFacts` (leaf, parameter, layer...).

A name holds what the one assignment that reaches the use (from the semantic model's bindings)
makes of it, evaluated where that assignment runs; a loop variable holds an element of what its
loop walks (`for p in model.parameters()`). `x.requires_grad_()`, `x.requires_grad = ...` and
`x.<attr> = ...` change what `x` holds without binding it, and `x += ...` changes a tensor in
place: neither starts a new value. Anything else (a name bound on another branch, by unpacking,
in a closure) is unknown. Also collected here: which parameters a file freezes with
`requires_grad_(False)` / `requires_grad = False`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from torchlint.analysis.call_args import is_true
from torchlint.context import FileContext
from torchlint.semantic.bindings import (
    SCOPE_NODES,
    Reach,
    Where,
    bindings,
    target_names,
    where_from_path,
)
from torchlint.semantic.tensors import Binding, path_parts, tensor_facts, through_loops
from torchlint.walker import iter_children

_FLAGGED = re.compile(r"\b(\w+)\s*\.\s*requires_grad(?:_\s*\(|\s*=[^=])")


@dataclass(frozen=True)
class Freeze:
    """`<parts>.requires_grad_(False)` (or `= False`) in class `where` (None: not in a method)."""

    parts: tuple[str, ...]  # ("*",): cannot be named
    where: cst.ClassDef | None
    #: What `parts[0]` held at the freeze (None: unknown).
    start: Binding | None


class PointView:
    """The names in scope at one point of the file (a `NameView` for `TensorFacts`)."""

    def __init__(self, held: HeldTensors, where: Where) -> None:
        self.held = held
        self.where = where

    @property
    def classdef(self) -> cst.ClassDef | None:
        return self.where.cls

    def lookup(self, name: str, resolve: bool = True) -> Binding | None:
        binding = self.held.holds(name, self.where)
        return self.held.tensors.resolved(binding, self) if resolve else binding


class HeldTensors:
    """The file's answers to "what does this name hold here"; cached per point."""

    def __init__(self, context: FileContext) -> None:
        self.context = context
        self.tensors = tensor_facts(context)
        self.bindings = bindings(context)
        self._held: dict[tuple[str, int, int], Binding | None] = {}
        self._changed: dict[int, frozenset[str]] = {}
        self._attribute_heads: dict[int, frozenset[str]] = {}
        self._flagged_names: frozenset[str] | None = None
        self._freezes: list[Freeze] | None = None

    def view(self, path: tuple[cst.CSTNode, ...]) -> PointView:
        """The names in scope at the end of `path` (the module first)."""
        return PointView(self, where_from_path(path, self.context.module))

    def holds(self, name: str, where: Where) -> Binding | None:
        """What `name` holds at `where` (a "ref" to `self.<attr>` not resolved yet)."""
        assert where.path is not None
        key = (name, id(where.path[-1]), len(where.path))
        if key in self._held:
            return self._held[key]
        self._held[key] = None  # a cycle stays unknown
        found = self._holds(name, where)
        self._held[key] = found
        return found

    def _holds(self, name: str, where: Where) -> Binding | None:
        # Whether a flag change may come between: a text scan of the file first, so that the
        # scope's attribute assignments are looked at only for layers and models.
        flagged = name in self._flagged()
        found = self._reach(name, where, changes=flagged)
        if (
            not flagged
            and found is not None
            and found.kind in ("layer", "model", "ref")
            and name in self._assigned_attribute_heads(where.scopes[0])
        ):
            found = self._reach(name, where, changes=True)
        return found

    def _reach(self, name: str, where: Where, *, changes: bool) -> Binding | None:
        status, value, found_where = self.bindings.reaching(
            name,
            where,
            elementwise=True,
            in_place=True,
            changes=(lambda stmt: name in self._changed_in(stmt)) if changes else None,
        )
        if status is Reach.FOUND and value is not None and found_where is not None:
            return self.tensors.classify(value, PointView(self, found_where))
        if status is Reach.CHANGED and found_where is not None:
            return self._after_change(name, found_where)
        if status is Reach.AMBIGUOUS:
            return self._loop_element(name, where)
        return None

    # -- loop variables -----------------------------------------------------------------------
    def _loop_element(self, name: str, where: Where) -> Binding | None:
        """What `name` holds as the variable of the innermost `for` loop around `where` that
        binds it and does not rebind it in its body."""
        path = where.path
        assert path is not None
        for i in range(len(path) - 2, -1, -1):
            parent, child = path[i], path[i + 1]
            if isinstance(parent, SCOPE_NODES):
                return None
            if not (isinstance(parent, cst.For) and child is parent.body):
                continue
            if name not in target_names(parent.target):
                continue
            if name in self.bindings.bound_names(parent.body, in_place=True):
                return None
            at_loop = Where(path[: i + 1], where.scopes, where.cls)
            elements = self.tensors.loop_elements(
                parent.target,
                parent.iter,
                PointView(self, at_loop),
                optimizer_step=self._in_plain_optimizer_method(where),
            )
            for node, binding in elements:
                if isinstance(node, cst.Name) and node.value == name:
                    return binding
            return None
        return None

    def _in_plain_optimizer_method(self, where: Where) -> bool:
        """In an undecorated method of a `torch.optim.Optimizer` subclass.

        Such a `step()` runs with grad enabled, so updating `group["params"]` in place raises;
        any decorator (`@torch.no_grad()`, torch's `_use_grad_for_differentiable`) may change
        the grad mode, so decorated methods are left alone.
        """
        function = where.scopes[0]
        classdef = where.cls
        if not isinstance(function, cst.FunctionDef) or function.decorators or classdef is None:
            return False
        return any(
            (self.context.qualified_name(base.value) or "").startswith("torch.optim.")
            for base in classdef.bases
        )

    # -- changes without a new binding --------------------------------------------------------
    def _assigned_attribute_heads(self, scope: cst.CSTNode) -> frozenset[str]:
        """Names whose attributes a statement of `scope` assigns (`fc.weight = ...`)."""
        key = id(scope)
        found = self._attribute_heads.get(key)
        if found is None:
            heads = {name.split(".", 1)[0] for name in self.bindings.index(scope) if "." in name}
            found = self._attribute_heads[key] = frozenset(heads)
        return found

    def _flagged(self) -> frozenset[str]:
        """Every name the file calls `requires_grad_(` on or assigns `.requires_grad` of (a
        text scan)."""
        if self._flagged_names is None:
            self._flagged_names = self.context.scan(_flagged_names)
        return self._flagged_names

    def _changed_in(self, stmt: cst.CSTNode) -> frozenset[str]:
        """Names whose value `stmt` changes without binding it (nested scopes not entered)."""
        key = id(stmt)
        found = self._changed.get(key)
        if found is None:
            names = {name for name, _ in _changes(stmt)}
            found = self._changed[key] = frozenset(names)
        return found

    def _after_change(self, name: str, where: Where) -> Binding | None:
        """What `name` holds after the statement at the end of `where.path` changed it."""
        assert where.path is not None
        statement = where.path[-1]
        view = PointView(self, where)
        current = self.holds(name, where)
        for changed, change in _changes(statement):
            if changed != name:
                continue
            known = self.tensors.resolved(current, view)
            if isinstance(change, cst.Call):  # `x.requires_grad_(flag)`
                turned_on = not change.args or is_true(change.args[0].value)
                if turned_on and known is not None and known.kind == "fresh":
                    current = Binding("leaf")
                elif not turned_on or known is None or known.kind not in ("leaf", "param"):
                    current = None  # on an unknown tensor it may be a no-op on a non-leaf
            elif change.attr.value == "requires_grad":  # `x.requires_grad = flag`
                if not isinstance(change.value, cst.Name):
                    continue  # `x.fc.requires_grad = ...` changes a flag of a member only
                if not is_true(_assigned(statement, change)):
                    current = None
                elif known is None or known.kind != "param":
                    current = Binding("leaf")  # setting the flag raises on a non-leaf
            elif current is not None and current.kind in ("layer", "model", "ref"):
                current = None  # `fc.weight = nn.Parameter(...)`: the layer is no longer known
        return current

    # -- freezing -----------------------------------------------------------------------------
    def freezes(self) -> list[Freeze]:
        """Every `<x>.requires_grad_(<not True>)` and `<x>.requires_grad = <not True>` in the
        file, with what it freezes (loop variables replaced by the module they walk)."""
        if self._freezes is None:
            self._freezes = []
            if self.context.mentions("requires_grad"):
                self._collect_freezes((self.context.module,))
        return self._freezes

    def _collect_freezes(self, root: tuple[cst.CSTNode, ...]) -> None:
        stack = [root]
        while stack:
            path = stack.pop()
            node = path[-1]
            if (
                isinstance(node, cst.Call)
                and isinstance(node.func, cst.Attribute)
                and node.func.attr.value == "requires_grad_"
                and node.args
                and not is_true(node.args[0].value)
            ):
                self._record_freeze(node.func.value, path)
            elif isinstance(node, (cst.Assign, cst.AnnAssign)) and node.value is not None:
                targets = (
                    [t.target for t in node.targets]
                    if isinstance(node, cst.Assign)
                    else [node.target]
                )
                for target in targets:
                    for part, value in _flag_values(target, node.value):
                        if (
                            isinstance(part, cst.Attribute)
                            and part.attr.value == "requires_grad"
                            and not is_true(value)
                        ):
                            self._record_freeze(part.value, path)
            stack.extend((*path, child) for child in reversed(iter_children(node)))

    def _record_freeze(self, expr: cst.BaseExpression, path: tuple[cst.CSTNode, ...]) -> None:
        view = self.view(path)
        classdef = view.classdef
        assert self._freezes is not None
        if isinstance(expr, cst.Call):
            made = self.tensors.classify(expr, view)  # `nn.Linear(2, 2).requires_grad_(False)`
            if made is not None and made.kind in ("layer", "fresh", "leaf", "param"):
                return  # a new object: no existing parameter is frozen
        parts = path_parts(expr)
        if parts is not None:
            parts = through_loops(parts, path)
        if parts is None:
            self._freezes.append(Freeze(("*",), classdef, None))
            return
        start: Binding | None
        if parts[0] == "self":
            start = Binding("model", classdef=classdef) if classdef is not None else None
        else:
            start = view.lookup(parts[0])
        self._freezes.append(Freeze(parts, classdef, start))


def held_tensors(context: FileContext) -> HeldTensors:
    """The file's shared answers."""
    return context.shared(HeldTensors)


def _changes(stmt: cst.CSTNode) -> list[tuple[str, cst.Call | cst.Attribute]]:
    """(name, how) for each change of a plain name's value without a binding in `stmt`:
    `x.requires_grad_(...)` (the call), `x.requires_grad = ...` / `x.<attr>... = ...` (the
    assigned attribute)."""
    found: list[tuple[str, cst.Call | cst.Attribute]] = []
    stack = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Call):
            func = node.func
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value == "requires_grad_"
                and isinstance(func.value, cst.Name)
            ):
                found.append((func.value.value, node))
        elif isinstance(node, (cst.Assign, cst.AnnAssign)):
            targets = (
                [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            )
            for target in targets:
                for attribute in _attribute_targets(target):
                    parts = path_parts(attribute)
                    if parts is not None:
                        found.append((parts[0], attribute))
        if node is stmt or not isinstance(node, SCOPE_NODES):
            stack.extend(reversed(iter_children(node)))
    return found


def _attribute_targets(target: cst.BaseExpression) -> list[cst.Attribute]:
    if isinstance(target, cst.Attribute):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [a for e in target.elements for a in _attribute_targets(e.value)]
    if isinstance(target, cst.StarredElement):
        return _attribute_targets(target.value)
    return []


def _assigned(statement: cst.CSTNode, attribute: cst.Attribute) -> cst.BaseExpression | None:
    """The value assigned to `attribute` in `statement` (None: unknown)."""
    found: cst.BaseExpression | None = None
    for node in _statement_nodes(statement):
        if isinstance(node, (cst.Assign, cst.AnnAssign)) and node.value is not None:
            targets = (
                [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            )
            for target in targets:
                for owner, value in _flag_values(target, node.value):
                    if owner is attribute:
                        found = value
    return found


def _statement_nodes(statement: cst.CSTNode) -> list[cst.CSTNode]:
    return list(statement.body) if isinstance(statement, cst.SimpleStatementLine) else [statement]


def _flag_values(
    target: cst.BaseExpression, value: cst.BaseExpression | None
) -> list[tuple[cst.BaseExpression, cst.BaseExpression | None]]:
    """(target part, the value it receives) through tuple unpacking (None: unknown)."""
    if isinstance(target, (cst.Tuple, cst.List)):
        values: list[cst.BaseExpression | None]
        if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(target.elements):
            values = [e.value for e in value.elements]
        else:
            values = [None] * len(target.elements)
        return [
            pair
            for element, item in zip(target.elements, values, strict=True)
            for pair in _flag_values(element.value, item)
        ]
    if isinstance(target, cst.StarredElement):
        return _flag_values(target.value, None)
    return [(target, value)]


def _flagged_names(source: str) -> frozenset[str]:
    return frozenset(_FLAGGED.findall(source) if "requires_grad" in source else ())
