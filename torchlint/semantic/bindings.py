"""Which value a name or `self.<attr>` holds at a point of the file: scopes and bindings.

Every rule that follows values asks this one per-file model instead of tracking assignments
itself. A name resolves to the single plain assignment that surely reaches its use in
straight-line code; a name bound on another branch, later in a loop, by unpacking, `global`
or an import is ambiguous, and ambiguous is never guessed. `self.<attr>` resolves to every
assignment in the methods of the class and its same-file bases. A rule that needs every value a
name may hold (one per branch of an `if`) asks `Bindings.definitions` instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import Enum

import libcst as cst

from torchlint.context import FileContext, iter_scope_nodes
from torchlint.names import dotted_name
from torchlint.semantic.values import unwrap_module_methods
from torchlint.walker import iter_children, iter_descendants

SCOPE_NODES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)
COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
_REBINDING_PARENTS = (
    cst.For,
    cst.While,
    cst.ListComp,
    cst.SetComp,
    cst.DictComp,
    cst.GeneratorExp,
    cst.Match,
    cst.MatchCase,
    cst.ExceptHandler,
    cst.ExceptStarHandler,
)
_MISSING: list[cst.BaseExpression | None] = []
# Node types `_own_bindings` looks at: a cheap filter before its chain of checks.
_BINDING_NODES = frozenset(
    {
        cst.Assign,
        cst.AnnAssign,
        cst.NamedExpr,
        cst.AugAssign,
        cst.For,
        cst.CompFor,
        cst.WithItem,
        cst.ExceptHandler,
        cst.ExceptStarHandler,
        cst.Del,
        cst.Global,
        cst.Nonlocal,
        cst.Import,
        cst.ImportFrom,
        cst.FunctionDef,
        cst.ClassDef,
        cst.Param,
        cst.MatchAs,
        cst.MatchStar,
        cst.MatchMapping,
    }
)


@dataclass(frozen=True)
class Where:
    """Where an expression is evaluated.

    `path` runs from a scope root (the module, or a class for `forward`) down to the statement
    or expression being resolved; names are then resolved by the assignment that reaches it.
    Without a path (a value found by unique binding), names resolve only to a scope's single
    binding.
    """

    path: tuple[cst.CSTNode, ...] | None
    scopes: tuple[cst.CSTNode, ...]  # innermost first, the module last
    cls: cst.ClassDef | None


class Reach(Enum):
    FOUND = 1
    AMBIGUOUS = 2  # bound, but not by one plain assignment that surely reaches
    NOT_BOUND = 3  # no binding in the innermost scope: a global or closure variable
    CHANGED = 4  # changed without a new binding (asked for with `changes`)


@dataclass(frozen=True)
class Definition:
    """One binding of a name: its value (None when bound without one plain value: a loop
    target, `with ... as`, unpacking, an import) and where that value is evaluated (the path
    ends at the binding statement)."""

    value: cst.BaseExpression | None
    where: Where

    @property
    def node(self) -> cst.CSTNode:
        """The statement (or loop, `with`) that makes the binding."""
        assert self.where.path is not None
        return self.where.path[-1]


@dataclass(frozen=True)
class Definitions:
    """The definitions that may reach a point, and whether the name may also still hold
    what it held before (`within`'s start or the scope's start: no binding on some path)."""

    found: tuple[Definition, ...]
    before: bool


class Bindings:
    """The file's scopes and bindings; every answer is cached for the other rules."""

    def __init__(self, context: FileContext) -> None:
        self.context = context
        self._bound: dict[int, frozenset[str]] = {}
        self._bound_in_place: dict[int, frozenset[str]] = {}
        self._indexes: dict[int, dict[str, list[cst.BaseExpression | None]]] = {}
        self._globals: frozenset[str] | None = None
        self._augmented: dict[int, cst.BinaryOperation] = {}
        self._functions: dict[str, cst.FunctionDef] | None = None

    def top_level_function(self, name: str) -> cst.FunctionDef | None:
        """The module-level `def name` when it is the name's only top-level binding."""
        values = self.index(self.context.module).get(name, _MISSING)
        if len(values) != 1 or values[0] is not None:
            return None
        if self._functions is None:  # asked for each call a rule follows: looked up once
            self._functions = {
                stmt.name.value: stmt
                for stmt in self.context.module.body
                if isinstance(stmt, cst.FunctionDef)
            }
        return self._functions.get(name)

    def where(self, path: tuple[cst.CSTNode, ...]) -> Where:
        """The evaluation point at the end of `path` (module first, the expression last)."""
        return where_from_path(path, self.context.module)

    def values(
        self, expr: cst.BaseExpression, where: Where
    ) -> list[tuple[cst.BaseExpression, Where]]:
        """Every value an object-holding name may have, with where to evaluate it; [] if unknown."""
        if isinstance(expr, cst.Name):
            name = expr.value
            outer = where.scopes
            if where.path is not None:
                status, value, value_where = self.reaching(name, where)
                if status is Reach.FOUND and value is not None and value_where is not None:
                    return [(value, value_where)]
                if status is Reach.AMBIGUOUS:
                    return []
                outer = where.scopes[1:]
            return self.unique_binding(name, outer)
        name = dotted_name(expr)
        if name is None or where.cls is None:
            return []
        head, _, attr = name.partition(".")
        if head != "self" or not attr or "." in attr:
            return []
        return self.self_attribute(name, where.cls)

    def unique_binding(
        self, name: str, scopes: tuple[cst.CSTNode, ...]
    ) -> list[tuple[cst.BaseExpression, Where]]:
        for i, scope in enumerate(scopes):
            if isinstance(scope, cst.ClassDef):
                continue  # class bodies are not visible from their methods
            values = self.index(scope).get(name, _MISSING)
            if values is _MISSING:
                continue
            value = values[0]
            if len(values) != 1 or value is None:
                return []
            if isinstance(scope, cst.Module) and name in self.global_names():
                return []
            return [(value, Where(None, scopes[i:], None))]
        return []

    def self_attribute(
        self, name: str, classdef: cst.ClassDef
    ) -> list[tuple[cst.BaseExpression, Where]]:
        """Values assigned to `self.<attr>` in the class and its same-file bases."""
        found: list[tuple[cst.BaseExpression, Where]] = []
        seen: set[str] = set()
        pending = [classdef]
        while pending:
            current = pending.pop()
            if current.name.value in seen:
                continue
            seen.add(current.name.value)
            for stmt in class_body(current):
                if not isinstance(stmt, cst.FunctionDef):
                    continue
                for value in self.index(stmt).get(name, ()):
                    if value is None:
                        return []  # also bound some way we cannot follow
                    if dotted_name(unwrap_module_methods(value)) == name:
                        continue  # `self.net = self.net.to(device)` keeps the same model
                    found.append(
                        (value, Where(None, (stmt, current, self.context.module), current))
                    )
            for base in current.bases:
                parent = self.context.class_defs().get(dotted_name(base.value) or "")
                if parent is not None:
                    pending.append(parent)
        return found

    def reaching(
        self,
        name: str,
        where: Where,
        *,
        unpacked: bool = False,
        elementwise: bool = False,
        in_place: bool = False,
        changes: Callable[[cst.CSTNode], bool] | None = None,
    ) -> tuple[Reach, cst.BaseExpression | None, Where | None]:
        """The one plain assignment of `name` that reaches the end of `where.path`, if any.

        With `unpacked`, `a, b = <expr>` counts too, with the whole `<expr>` as the value of
        each name it binds: enough to ask what the value was computed from. With
        `elementwise`, `a, b = x, y` gives each name its own element. With `in_place`,
        `name += ...` changes the value in place (a tensor) instead of binding a new one.
        `changes(statement)` says whether a statement changes what `name` holds without
        binding it (`x.requires_grad_()`); the last such simple statement that reaches comes
        back as CHANGED, with the statement's path, unless a binding comes after it.
        """
        path = where.path
        assert path is not None
        for i in range(len(path) - 2, -1, -1):
            parent, child = path[i], path[i + 1]
            before = statements_before(parent, child)
            if before is not None:
                found = self._last_binding(
                    name,
                    before,
                    path[: i + 1],
                    where,
                    unpacked,
                    in_place,
                    changes,
                    elementwise,
                )
                if found is not None:
                    return found
                continue
            if isinstance(parent, (cst.FunctionDef, cst.Module)):
                if name in self.index(parent):
                    return Reach.AMBIGUOUS, None, None
                return Reach.NOT_BOUND, None, None
            if isinstance(parent, (cst.Lambda, cst.ClassDef)):
                return Reach.AMBIGUOUS, None, None  # late binding, or a class body
            if isinstance(parent, cst.With):
                if any(name in self.bound_names(item, in_place=in_place) for item in parent.items):
                    return Reach.AMBIGUOUS, None, None
                continue
            rebinding = isinstance(parent, _REBINDING_PARENTS) or (
                isinstance(parent, (cst.Try, cst.TryStar)) and child is not parent.body
            )
            # Loops (a later binding reaches through the back edge), the handlers of a try,
            # comprehensions, match cases: any binding in them may be the one that reaches.
            if rebinding and name in self.bound_names(parent, in_place=in_place):
                return Reach.AMBIGUOUS, None, None
        return Reach.NOT_BOUND, None, None

    def definitions(
        self, name: str, where: Where, *, within: cst.CSTNode | None = None
    ) -> Definitions:
        """Every definition of `name` that may reach the end of `where.path`.

        Unlike `reaching`, nothing is ambiguous: a name bound on both branches of an `if`
        gets both definitions, one bound in a loop body gets the binding that reaches through
        the back edge too, one bound in a `try` body may reach its handlers. `name op= value`
        defines `name` as `name op value` (evaluated at the augmented assignment, so `name`
        there is the definition before it). With `within` (a loop or block on the path), only
        definitions inside it count: the walk stops at its start, so for a loop body this is
        "bound in this iteration". After `del name` nothing reaches; `break`, `continue`,
        `return` and `raise` are not followed (a definition they skip is still counted).
        """
        path = where.path
        assert path is not None
        found: list[Definition] = []
        for i in range(len(path) - 2, -1, -1):
            parent, child = path[i], path[i + 1]
            before = statements_before(parent, child)
            if before is not None:
                passes = self._flow_statements(name, before, path[: i + 1], where, found)
                if not passes:
                    return _collected(found, False)
                continue
            if parent is within or isinstance(parent, (*SCOPE_NODES, cst.Module)):
                return _collected(found, True)
            if (
                isinstance(parent, cst.For)
                and child is parent.body
                and name in target_names(parent.target)
            ):
                found.append(self._definition(parent, None, path[:i], where))
                return _collected(found, False)
            if isinstance(parent, (cst.For, cst.While)) and child is parent.body:
                # what the end of the previous iteration left
                self._flow_statements(name, [parent.body], (*path[:i], parent), where, found)
            elif isinstance(parent, COMPREHENSIONS) and name in self.bound_names(parent):
                found.append(self._definition(parent, None, path[:i], where))
                return _collected(found, False)
            elif isinstance(parent, cst.With) and any(
                name in self.bound_names(item) for item in parent.items
            ):
                found.append(self._definition(parent, None, path[:i], where))
                return _collected(found, False)
            elif (
                isinstance(parent, (cst.ExceptHandler, cst.ExceptStarHandler))
                and parent.name is not None
                and name in target_names(parent.name.name)
            ):
                found.append(self._definition(parent, None, path[:i], where))
                return _collected(found, False)
            elif isinstance(parent, (cst.Try, cst.TryStar)) and child is not parent.body:
                # a handler, `else` or `finally` may follow any part of the body
                self._flow_statements(name, [parent.body], (*path[:i], parent), where, found)
        return _collected(found, True)

    def _flow_statements(
        self,
        name: str,
        statements: Sequence[cst.CSTNode],
        prefix: tuple[cst.CSTNode, ...],
        where: Where,
        found: list[Definition],
    ) -> bool:
        """Adds the definitions of `name` that may flow out of the end of `statements` (run
        in order, their parent last in `prefix`); whether some path through them binds none."""
        for stmt in reversed(statements):
            if name not in self.bound_names(stmt):
                continue
            if not self._flow_statement(name, stmt, prefix, where, found):
                return False
        return True

    def _flow_statement(
        self,
        name: str,
        stmt: cst.CSTNode,
        prefix: tuple[cst.CSTNode, ...],
        where: Where,
        found: list[Definition],
    ) -> bool:
        """`_flow_statements` for one statement that binds `name` somewhere inside."""
        inner = (*prefix, stmt)
        block = statement_list(stmt)
        if block is not None and not isinstance(stmt, cst.Module):
            return self._flow_statements(name, block, inner, where, found)
        if isinstance(stmt, cst.Del):
            return False  # unbound after it: nothing reaches
        if isinstance(stmt, cst.BaseSmallStatement):
            found.append(self._definition(stmt, self._small_value(stmt, name), prefix, where))
            return False
        if isinstance(stmt, cst.If):
            passes = self._flow_statements(name, [stmt.body], inner, where, found)
            if stmt.orelse is None:
                passes = True
            elif isinstance(stmt.orelse, cst.If):
                passes = self._flow_statement(name, stmt.orelse, inner, where, found) or passes
            else:
                orelse = (*inner, stmt.orelse)
                passes = (
                    self._flow_statements(name, [stmt.orelse.body], orelse, where, found) or passes
                )
            if passes and name in self.bound_names(stmt.test):
                found.append(self._definition(stmt, None, prefix, where))  # a walrus
                return False
            return passes
        if isinstance(stmt, (cst.For, cst.While)):
            # the body may run zero times, or stop anywhere with `break`
            if stmt.orelse is not None:
                orelse = (*inner, stmt.orelse)
                self._flow_statements(name, [stmt.orelse.body], orelse, where, found)
            self._flow_statements(name, [stmt.body], inner, where, found)
            if isinstance(stmt, cst.For) and name in target_names(stmt.target):
                found.append(self._definition(stmt, None, prefix, where))
            return True
        if isinstance(stmt, cst.With):
            if self._flow_statements(name, [stmt.body], inner, where, found):
                if any(name in self.bound_names(item) for item in stmt.items):
                    found.append(self._definition(stmt, None, prefix, where))
                    return False
                return True
            return False
        if isinstance(stmt, (cst.Try, cst.TryStar)):
            if stmt.finalbody is not None and not self._flow_statements(
                name, [stmt.finalbody.body], (*inner, stmt.finalbody), where, found
            ):
                return False
            passes = True
            if stmt.orelse is not None:
                orelse = (*inner, stmt.orelse)
                passes = self._flow_statements(name, [stmt.orelse.body], orelse, where, found)
            if passes:
                passes = self._flow_statements(name, [stmt.body], inner, where, found)
            for handler in stmt.handlers:
                handled = (*inner, handler)
                if self._flow_statements(name, [handler.body], handled, where, found):
                    passes = True  # the body may have stopped before binding
            return passes
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            found.append(self._definition(stmt, None, prefix, where))
            return False
        # `match` and anything else: some binding inside, followed no further
        found.append(self._definition(stmt, None, prefix, where))
        return True

    def _small_value(self, small: cst.BaseSmallStatement, name: str) -> cst.BaseExpression | None:
        """What a simple statement binding `name` gives it (see `definitions`)."""
        if isinstance(small, cst.AugAssign) and dotted_name(small.target) == name:
            combined = self._augmented.get(id(small))
            if combined is None:
                operator = getattr(cst, type(small.operator).__name__.removesuffix("Assign"))
                combined = cst.BinaryOperation(small.target, operator(), small.value)
                self._augmented[id(small)] = combined
            return combined
        value, _ = _assigned_value(small, name, elementwise=True)
        return value

    def _definition(
        self,
        node: cst.CSTNode,
        value: cst.BaseExpression | None,
        prefix: tuple[cst.CSTNode, ...],
        where: Where,
    ) -> Definition:
        return Definition(value, Where((*prefix, node), where.scopes, where.cls))

    def _last_binding(
        self,
        name: str,
        statements: list[cst.CSTNode],
        prefix: tuple[cst.CSTNode, ...],
        where: Where,
        unpacked: bool = False,
        in_place: bool = False,
        changes: Callable[[cst.CSTNode], bool] | None = None,
        elementwise: bool = False,
    ) -> tuple[Reach, cst.BaseExpression | None, Where | None] | None:
        """The last binding of `name` among straight-line `statements`; None if there is none."""
        for stmt in reversed(statements):
            if changes is not None and changes(stmt):
                if isinstance(stmt, cst.SimpleStatementLine):
                    return Reach.CHANGED, None, Where((*prefix, stmt), where.scopes, where.cls)
                return Reach.AMBIGUOUS, None, None  # changed on some paths only
            if name not in self.bound_names(stmt, in_place=in_place):
                continue
            if isinstance(stmt, cst.With) and not any(
                name in self.bound_names(item, in_place=in_place) for item in stmt.items
            ):
                # A `with` body runs straight through: look inside it.
                inner = statement_list(stmt.body)
                if inner is not None:
                    found = self._last_binding(
                        name,
                        inner,
                        (*prefix, stmt, stmt.body),
                        where,
                        unpacked,
                        in_place,
                        changes,
                        elementwise,
                    )
                    if found is not None:
                        return found
                return Reach.AMBIGUOUS, None, None
            value, small = _assigned_value(stmt, name, unpacked, elementwise)
            if value is None or small is None:
                return Reach.AMBIGUOUS, None, None
            def_path = (*prefix, stmt) if small is stmt else (*prefix, stmt, small)
            return Reach.FOUND, value, Where(def_path, where.scopes, where.cls)
        return None

    def bound_names(self, node: cst.CSTNode, *, in_place: bool = False) -> frozenset[str]:
        """Names `node` and the code in it bind (not in nested scopes); with `in_place`,
        without the names only an augmented assignment binds (it changes a tensor in place)."""
        cache = self._bound_in_place if in_place else self._bound
        cached = cache.get(id(node))
        if cached is None:
            every, plain = self._fill_bound(node)
            cached = plain if in_place else every
        return cached

    def _fill_bound(self, node: cst.CSTNode) -> tuple[frozenset[str], frozenset[str]]:
        every: set[str] = set()
        plain: set[str] = set()
        for name, _, augmented in _bindings_in(node):
            every.add(name)
            if not augmented:
                plain.add(name)
        found = frozenset(every), frozenset(plain)
        self._bound[id(node)], self._bound_in_place[id(node)] = found
        return found

    def index(self, scope: cst.CSTNode) -> dict[str, list[cst.BaseExpression | None]]:
        """Every binding in a scope by name: the value for plain assignments, else None."""
        key = id(scope)
        cached = self._indexes.get(key)
        if cached is None:
            cached = {}
            for node in iter_scope_nodes(scope):
                if type(node) in _BINDING_NODES:
                    for name, value in _own_bindings(node):
                        cached.setdefault(name, []).append(value)
            self._indexes[key] = cached
        return cached

    def global_names(self) -> frozenset[str]:
        """Names some function declares `global` (so a module-level value may change)."""
        if self._globals is None:
            found: set[str] = set()
            if self.context.mentions("global"):
                for node in iter_descendants(self.context.module):
                    if isinstance(node, cst.Global):
                        found.update(item.name.value for item in node.names)
            self._globals = frozenset(found)
        return self._globals


def bindings(context: FileContext) -> Bindings:
    """The file's one shared binding model."""
    return context.shared(Bindings)


def _collected(found: list[Definition], before: bool) -> Definitions:
    """The definitions, each once (the back edge of a loop meets some twice), in order."""
    unique: dict[int, Definition] = {}
    for definition in found:
        unique.setdefault(id(definition.node), definition)
    return Definitions(tuple(unique.values()), before)


def where_from_path(path: tuple[cst.CSTNode, ...], module: cst.Module) -> Where:
    scopes: list[cst.CSTNode] = [n for n in reversed(path[:-1]) if isinstance(n, SCOPE_NODES)]
    scopes.append(module)
    cls = None
    for i in range(len(path) - 2, -1, -1):
        if isinstance(path[i], cst.FunctionDef):
            if i >= 2 and isinstance(path[i - 2], cst.ClassDef):
                candidate = path[i - 2]
                assert isinstance(candidate, cst.ClassDef)
                cls = candidate
            break
    return Where(path, tuple(scopes), cls)


def statement_list(node: cst.CSTNode) -> list[cst.CSTNode] | None:
    if isinstance(
        node, (cst.Module, cst.IndentedBlock, cst.SimpleStatementSuite, cst.SimpleStatementLine)
    ):
        return list(node.body)
    return None


def statements_before(parent: cst.CSTNode, child: cst.CSTNode) -> list[cst.CSTNode] | None:
    """The statements of `parent`'s statement list that come before `child` (none
    when `child` is not one); None when `parent` holds no statement list."""
    body = statement_list(parent)
    if body is None:
        return None
    index = next((k for k, stmt in enumerate(body) if stmt is child), None)
    return [] if index is None else body[:index]


def _assigned_value(
    stmt: cst.CSTNode, name: str, unpacked: bool = False, elementwise: bool = False
) -> tuple[cst.BaseExpression | None, cst.CSTNode | None]:
    """The value and statement of the last binding of `name` in `stmt`, if a plain assignment.

    With `unpacked`, also `a, b = <expr>` (one target, `<expr>` not a literal tuple or list);
    with `elementwise`, `a, b = x, y` (no starred element) binds `a` to `x`.
    """
    smalls = list(stmt.body) if isinstance(stmt, cst.SimpleStatementLine) else [stmt]
    for small in reversed(smalls):
        bindings = sum(1 for bound, _, _ in _bindings_in(small) if bound == name)
        if not bindings:
            continue
        if isinstance(small, cst.Assign):
            direct = sum(1 for t in small.targets if dotted_name(t.target) == name)
            # Every binding must be a whole target: not unpacking, not a walrus in the value.
            if direct == bindings:
                return small.value, small
            if (
                unpacked
                and bindings == 1
                and len(small.targets) == 1
                and isinstance(small.targets[0].target, (cst.Tuple, cst.List))
                and not isinstance(small.value, (cst.Tuple, cst.List))
                and any(
                    dotted_name(e.value) == name
                    for e in small.targets[0].target.elements
                    if not isinstance(e, cst.StarredElement)
                )
            ):
                return small.value, small
            if elementwise and bindings == 1 and len(small.targets) == 1:
                element = _element_value(small.targets[0].target, small.value, name)
                if element is not None:
                    return element, small
        elif (
            isinstance(small, cst.AnnAssign)
            and small.value is not None
            and bindings == 1
            and dotted_name(small.target) == name
        ):
            return small.value, small
        return None, None
    return None, None


def _element_value(
    target: cst.BaseExpression, value: cst.BaseExpression, name: str
) -> cst.BaseExpression | None:
    """`x` for `a` in `a, b = x, y` (same length, nothing starred)."""
    if not (
        isinstance(target, (cst.Tuple, cst.List))
        and isinstance(value, (cst.Tuple, cst.List))
        and len(target.elements) == len(value.elements)
    ):
        return None
    for part, item in zip(target.elements, value.elements, strict=True):
        if isinstance(part, cst.StarredElement) or isinstance(item, cst.StarredElement):
            return None
    for part, item in zip(target.elements, value.elements, strict=True):
        if dotted_name(part.value) == name:
            return item.value
    return None


def _bindings_in(
    node: cst.CSTNode,
) -> Iterator[tuple[str, cst.BaseExpression | None, bool]]:
    """Bindings made by `node` and the code inside it, not inside nested scopes, each with
    whether an augmented assignment makes it."""
    if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
        yield node.name.value, None, False
        return
    for name, value in _own_bindings(node):
        yield name, value, type(node) is cst.AugAssign
    for inner in iter_scope_nodes(node):
        if type(inner) in _BINDING_NODES:
            augmented = type(inner) is cst.AugAssign
            for name, value in _own_bindings(inner):
                yield name, value, augmented


def _own_bindings(node: cst.CSTNode) -> Iterator[tuple[str, cst.BaseExpression | None]]:
    """The names one node binds, with the value for a plain `name = value`."""
    if type(node) not in _BINDING_NODES:
        return  # exact types: most nodes bind nothing, and isinstance on ABCs is slow on a miss
    if isinstance(node, cst.Assign):
        for target in node.targets:
            yield from _target_names(target.target, node.value)
    elif isinstance(node, (cst.AnnAssign, cst.NamedExpr)):
        if node.value is not None:
            yield from _target_names(node.target, node.value)
    elif isinstance(node, cst.AugAssign):
        yield from _target_names(node.target, None)
    elif isinstance(node, (cst.For, cst.CompFor)):
        yield from _target_names(node.target, None)
    elif isinstance(node, (cst.WithItem, cst.ExceptHandler, cst.ExceptStarHandler)):
        asname = node.asname if isinstance(node, cst.WithItem) else node.name
        if asname is not None:
            yield from _target_names(asname.name, None)
    elif isinstance(node, cst.Del):
        yield from _target_names(node.target, None)
    elif isinstance(node, (cst.Global, cst.Nonlocal)):
        for item in node.names:
            yield item.name.value, None
    elif isinstance(node, (cst.Import, cst.ImportFrom)):
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            if alias.asname is not None:
                yield from _target_names(alias.asname.name, None)
            else:
                full = dotted_name(alias.name) or ""
                yield full.split(".", 1)[0], None
    elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
        yield node.name.value, None
    elif isinstance(node, cst.Param):
        yield node.name.value, None
    elif isinstance(node, (cst.MatchAs, cst.MatchStar)):
        if node.name is not None:
            yield node.name.value, None
    elif isinstance(node, cst.MatchMapping) and node.rest is not None:
        yield node.rest.value, None


def _target_names(
    target: cst.BaseExpression, value: cst.BaseExpression | None
) -> Iterator[tuple[str, cst.BaseExpression | None]]:
    if isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _target_names(element.value, None)
        return
    if isinstance(target, cst.StarredElement):
        yield from _target_names(target.value, None)
        return
    name = dotted_name(target)
    if name is not None:
        yield name, value


def target_names(target: cst.BaseExpression) -> set[str]:
    """The plain names an assignment or loop target binds (`a`, `(a, *b)`, `[a, b]`)."""
    return {name for name, _ in _target_names(target, None) if "." not in name}


def comprehension_binds(ancestors: Sequence[cst.CSTNode], name: str) -> bool:
    """Whether a comprehension around a node (`ancestors`, module first) binds `name`."""
    for node in reversed(ancestors):
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            return False
        if isinstance(node, COMPREHENSIONS):
            comp: cst.CompFor | None = node.for_in
            while comp is not None:
                if name in target_names(comp.target):
                    return True
                comp = comp.inner_for_in
    return False


def class_body(classdef: cst.ClassDef) -> list[cst.BaseStatement]:
    return list(classdef.body.body) if isinstance(classdef.body, cst.IndentedBlock) else []


def method(classdef: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    found = None
    for stmt in class_body(classdef):
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value == name:
            found = stmt  # the last definition wins, as at runtime
    return found


def returns_with_paths(
    owner: cst.ClassDef | cst.Module, function: cst.FunctionDef
) -> Iterator[tuple[cst.CSTNode, ...]]:
    """Paths (owner, ..., statement) to each return or yield of a method or top-level function.

    Nested definitions are not entered.
    """
    start: tuple[cst.CSTNode, ...] = (
        (owner, owner.body, function) if isinstance(owner, cst.ClassDef) else (owner, function)
    )
    stack: list[tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]] = [(function.body, start)]
    while stack:
        node, parents = stack.pop()
        path = (*parents, node)
        if isinstance(node, (cst.Return, cst.Yield)):
            yield path
            continue
        if isinstance(node, SCOPE_NODES):
            continue
        stack.extend((child, path) for child in iter_children(node))
