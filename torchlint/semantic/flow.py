"""Statement order inside one scope: loops, what runs after a call, whether autograd records.

A `ScopeIndex` lists one function's (or the module's) nodes in source order with their
parents, so a rule can ask which loop iteration a call runs in, what runs after it whenever it
runs, and whether `torch.no_grad()` (or a decorator) switches autograd off around it.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Sequence

import libcst as cst

from torchlint.analysis.call_args import is_false, is_true
from torchlint.context import FileContext
from torchlint.names import dotted_name
from torchlint.walker import TreeIndex, index_entry, iter_children, iter_descendants

_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
LOOPS = (cst.For, cst.While)
_SCOPE_TYPES = frozenset(_SCOPES)
_LOOP_TYPES = frozenset(LOOPS)

#: Context managers / decorators that switch autograd off for sure.
GRAD_OFF = frozenset(
    {
        "torch.no_grad",
        "torch.inference_mode",
        "torch.autograd.no_grad",
        "torch.autograd.inference_mode",
        "torch.autograd.grad_mode.no_grad",
        "torch.autograd.grad_mode.inference_mode",
    }
)
#: `set_grad_enabled(flag)`: off when the flag is the literal False, unknown otherwise.
_GRAD_SET = frozenset(
    {
        "torch.set_grad_enabled",
        "torch.autograd.set_grad_enabled",
        "torch.autograd.grad_mode.set_grad_enabled",
    }
)
#: Context managers / decorators that switch it back on.
GRAD_ON = frozenset(
    {"torch.enable_grad", "torch.autograd.enable_grad", "torch.autograd.grad_mode.enable_grad"}
)
#: Words in the names of project wrappers that may switch autograd off.
GRAD_SWITCH_WORDS = ("no_grad", "inference_mode", "set_grad_enabled")


def grad_mode_of(context: FileContext, call: cst.BaseExpression) -> str | None:
    """ "off" / "maybe" for a `torch.no_grad()`-like expression, None when it is something else.

    "maybe" is `set_grad_enabled(<not False>)` and unresolvable look-alikes.
    """
    func = call.func if isinstance(call, cst.Call) else call
    qualified = context.qualified_name(func)
    if qualified in GRAD_OFF:
        return "off"
    if qualified in _GRAD_SET:
        if isinstance(call, cst.Call) and call.args:
            value = call.args[0].value
            if isinstance(value, cst.Name) and value.value == "False":
                return "off"
        return "maybe"
    if qualified is None or not qualified.startswith("torch"):
        # look-alikes and project wrappers: `smart_inference_mode()`, `maybe_no_grad(...)`
        name = dotted_name(func)
        if name is not None and any(word in name.rsplit(".", 1)[-1] for word in GRAD_SWITCH_WORDS):
            return "maybe"
    return None


def decorator_grad_mode(context: FileContext, func: cst.FunctionDef) -> str | None:
    """The strongest grad mode a function's decorators impose ("off", "maybe" or None)."""
    found = None
    for decorator in func.decorators:
        mode = grad_mode_of(context, decorator.decorator)
        if mode == "off":
            return "off"
        found = found or mode
    return found


def functions_called_without_grad(context: FileContext) -> frozenset[str]:
    """Names of functions/methods (last name part) called anywhere in the file from inside a
    `no_grad`-like block or a function decorated with one."""
    return context.shared(_functions_called_without_grad)


def _functions_called_without_grad(context: FileContext) -> frozenset[str]:
    bodies: list[cst.CSTNode] = []
    for node in iter_descendants(context.module):
        if type(node) is cst.With and any(  # exact types: isinstance on ABCs is slow on a miss
            grad_mode_of(context, item.item) is not None for item in node.items
        ):
            bodies.append(node.body)
        elif type(node) is cst.FunctionDef and decorator_grad_mode(context, node):
            bodies.append(node.body)
    return _names_called_in(bodies)


def _names_called_in(regions: list[cst.CSTNode]) -> frozenset[str]:
    """Last name parts of the functions called inside `regions`, and of the functions given to
    `.apply(fn)` there (`model.apply(init_fn)` calls `init_fn` on every submodule)."""
    found: set[str] = set()
    for region in regions:
        for node in iter_descendants(region):
            if type(node) is not cst.Call:
                continue
            func = node.func
            if isinstance(func, cst.Name):
                found.add(func.value)
            elif isinstance(func, cst.Attribute):
                found.add(func.attr.value)
                if func.attr.value == "apply" and node.args:
                    applied = dotted_name(node.args[0].value)
                    if applied is not None:
                        found.add(applied.rsplit(".", 1)[-1])
    return frozenset(found)


# -- where autograd may not record, erring towards "off" (for checks of in-place changes) --


def recording_switch(context: FileContext, expr: cst.BaseExpression) -> str | None:
    """How a `with` item changes recording: "on" where it surely switches it on
    (`torch.enable_grad()`, `set_grad_enabled(True)`, `inference_mode(False)`), "off" where it
    may switch it off (a `no_grad`-like call, a context manager that cannot be seen through,
    `pytest.raises`: an error is expected there), else None."""
    if isinstance(expr, cst.Call):
        if "raises" in (dotted_name(expr.func) or "").lower():
            return "off"
        qualified = context.qualified_name(expr.func) or ""
        flag = expr.args[0].value if expr.args else None
        if (
            qualified in GRAD_ON
            or (qualified.endswith("set_grad_enabled") and is_true(flag))
            or (qualified in GRAD_OFF and "inference_mode" in qualified and is_false(flag))
        ):
            return "on"
        if grad_mode_of(context, expr) is not None:
            return "off"
    elif isinstance(expr, (cst.Name, cst.Attribute)):
        return "off"
    return "off" if any(word in context.code(expr) for word in GRAD_SWITCH_WORDS) else None


def decorator_recording(context: FileContext, func: cst.FunctionDef) -> str | None:
    """The first grad-mode switch among a function's decorators: "off", "on" or None."""
    for decorator in func.decorators:
        expr = decorator.decorator
        target = expr.func if isinstance(expr, cst.Call) else expr
        qualified = context.qualified_name(target) or ""
        flag = expr.args[0].value if isinstance(expr, cst.Call) and expr.args else None
        if qualified in GRAD_ON:
            return "on"
        if isinstance(expr, cst.Call) and qualified.endswith("set_grad_enabled"):
            return "on" if is_true(flag) else "off"
        if qualified in GRAD_OFF:
            return "on" if is_false(flag) else "off"
        name = dotted_name(target) or ""
        if "no_grad" in name or "inference_mode" in name:
            return "off"
    return None


def recording_at(context: FileContext, ancestors: Sequence[cst.CSTNode]) -> str | None:
    """The innermost grad-mode switch around a node (`ancestors`, module first): "off", "on"
    or None. A lambda counts as "off": it runs whenever it is called."""
    for node in reversed(ancestors):
        if isinstance(node, cst.With):
            modes = {recording_switch(context, item.item) for item in node.items}
            if "off" in modes:
                return "off"
            if "on" in modes:
                return "on"
        elif isinstance(node, cst.FunctionDef):
            mode = decorator_recording(context, node)
            if mode is not None:
                return mode
        elif isinstance(node, cst.Lambda):
            return "off"
    return None


def in_no_grad_region(context: FileContext, ancestors: Sequence[cst.CSTNode]) -> bool:
    """Whether any `with` block or decorated function around a node may switch recording off,
    or the node is in a lambda (whatever switches it back on inside)."""
    return any(
        isinstance(node, cst.Lambda)
        or (
            isinstance(node, cst.With)
            and any(recording_switch(context, item.item) == "off" for item in node.items)
        )
        or (isinstance(node, cst.FunctionDef) and decorator_recording(context, node) == "off")
        for node in ancestors
    )


def functions_called_in_no_grad_regions(context: FileContext) -> frozenset[str]:
    """Like `functions_called_without_grad`, with every region `in_no_grad_region` counts
    (wrappers that cannot be seen through included)."""
    return context.shared(_functions_called_in_no_grad_regions)


def _functions_called_in_no_grad_regions(context: FileContext) -> frozenset[str]:
    regions: list[cst.CSTNode] = []
    for node in iter_descendants(context.module):
        if (
            isinstance(node, cst.With)
            and any(recording_switch(context, item.item) == "off" for item in node.items)
        ) or (isinstance(node, cst.FunctionDef) and decorator_recording(context, node) == "off"):
            regions.append(node)
    return _names_called_in(regions)


def grad_switched_off_in(context: FileContext, scope: cst.CSTNode) -> bool:
    """Whether autograd may be off in all of `scope` (a module, function or class): a
    statement in it (not in nested functions or classes) runs `<...>.set_grad_enabled(<not
    True>)` or `<stack>.enter_context(<no_grad or inference_mode>)`, or it is a subclass of
    `torch.autograd.Function` (whose `forward` runs without recording)."""
    known = context.shared(_GradOffScopes).known
    key = id(scope)
    if key not in known:
        known[key] = _grad_switched_off_in(context, scope)
    return known[key]


class _GradOffScopes:
    def __init__(self, context: FileContext) -> None:
        self.known: dict[int, bool] = {}


def _grad_switched_off_in(context: FileContext, scope: cst.CSTNode) -> bool:
    if isinstance(scope, cst.ClassDef):
        for base in scope.bases:
            name = context.qualified_name(base.value) or dotted_name(base.value) or ""
            if name.endswith("Function") and "nn" not in name.split("."):
                return True
    stack: list[tuple[cst.CSTNode, cst.CSTNode]] = [
        (child, scope) for child in iter_children(scope)
    ]
    while stack:
        node, parent = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            continue
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            method = node.func.attr.value
            if method in ("set_grad_enabled", "_set_grad_enabled") and isinstance(parent, cst.Expr):
                flag = node.args[0].value if node.args else None
                if not (isinstance(flag, cst.Name) and flag.value == "True"):
                    return True
            if method == "enter_context" and any(
                word in context.code(node) for word in ("no_grad", "inference_mode")
            ):
                return True
        stack.extend((child, node) for child in iter_children(node))
    return False


def names_in(expr: cst.CSTNode) -> set[str]:
    """Every plain name and dotted name (`self.total`) used anywhere in `expr`."""
    found: set[str] = set()
    stack: list[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        kind = type(node)  # exact types: isinstance on LibCST's ABCs is slow on a miss
        if kind is cst.Name or kind is cst.Attribute:
            name = dotted_name(node)
            if name is not None:
                found.add(name)
                if kind is cst.Name:
                    continue
        stack.extend(iter_children(node))
    return found


class ScopeIndex:
    """One scope's nodes in source order with parent links (nested scopes not entered)."""

    def __init__(
        self, context: FileContext, scope: cst.CSTNode, classdef: cst.ClassDef | None
    ) -> None:
        self.context = context
        self.scope = scope
        #: The class whose method this is (for `self.x` lookups), if any.
        self.classdef = classdef
        self.nodes: list[cst.CSTNode] = []
        self._parent: dict[int, cst.CSTNode] = {}
        #: Where each of `nodes` is in the file's tree index, when the tree is indexed.
        self._tree: TreeIndex | None = None
        self._in_tree: list[int] = []
        entry = index_entry(scope)
        if entry is not None:
            self._read_index(*entry)
        else:
            stack: list[tuple[cst.CSTNode, cst.CSTNode]] = [
                (child, scope) for child in reversed(iter_children(scope))
            ]
            while stack:
                node, parent = stack.pop()
                self._parent[id(node)] = parent
                self.nodes.append(node)
                if type(node) in _SCOPE_TYPES:
                    continue
                stack.extend((child, node) for child in reversed(iter_children(node)))
        self._order = {id(node): index for index, node in enumerate(self.nodes)}
        self.calls = [node for node in self.nodes if type(node) is cst.Call]
        self.loops = [node for node in self.nodes if type(node) in _LOOP_TYPES]
        self._grad: dict[int, str | None] = {}

    def _read_index(self, tree: TreeIndex, position: int) -> None:
        """The nodes and parents, read off the file's tree index."""
        order, ends = tree.order, tree.ends
        nodes, parents, in_tree = self.nodes, self._parent, self._in_tree
        self._tree = tree
        opened: list[tuple[int, cst.CSTNode]] = [(ends[position], self.scope)]
        current, end = position + 1, ends[position]
        while current < end:
            while opened[-1][0] <= current:
                opened.pop()
            node = order[current]
            parents[id(node)] = opened[-1][1]
            nodes.append(node)
            in_tree.append(current)
            if type(node) in _SCOPE_TYPES:
                current = ends[current]
                continue
            if ends[current] > current + 1:
                opened.append((ends[current], node))
            current += 1

    def order(self, node: cst.CSTNode) -> int:
        return self._order[id(node)]

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self._parent.get(id(node))

    def end(self, node: cst.CSTNode) -> int:
        """The order just past the last node of this scope under `node` (one of its nodes):
        `nodes[order(node):end(node)]` are `node` and the scope's nodes it contains."""
        start = self.order(node)
        if self._tree is not None:
            below = self._tree.ends[self._in_tree[start]]
            return bisect_left(self._in_tree, below, start + 1)
        end = start + 1
        while end < len(self.nodes) and self.contains(node, self.nodes[end]):
            end += 1
        return end

    def contains(self, outer: cst.CSTNode, node: cst.CSTNode) -> bool:
        current: cst.CSTNode | None = node
        while current is not None:
            if current is outer:
                return True
            current = self.parent(current)
        return False

    def chain(self, node: cst.CSTNode) -> Iterator[tuple[cst.CSTNode, cst.CSTNode]]:
        """(child, parent) pairs from `node` up to the scope."""
        current = node
        parent = self.parent(current)
        while parent is not None:
            yield current, parent
            current, parent = parent, self.parent(parent)

    def loop_of(self, node: cst.CSTNode) -> cst.For | cst.While | None:
        """The innermost loop whose body (or `else`) `node` runs in."""
        for child, parent in self.chain(node):
            if isinstance(parent, LOOPS) and child is not getattr(parent, "iter", None):
                if child is parent.body:
                    return parent
                if child is parent.orelse:
                    continue
                if isinstance(parent, cst.While) and child is parent.test:
                    return parent
        return None

    def loops_around(self, node: cst.CSTNode) -> list[cst.For | cst.While]:
        """Every loop whose body `node` is in, innermost first."""
        found = []
        for child, parent in self.chain(node):
            if type(parent) in LOOPS and child is parent.body:  # exact types: ABCs are slow
                found.append(parent)
        return found

    def in_body(self, loop: cst.For | cst.While, node: cst.CSTNode) -> bool:
        return any(parent is loop and child is loop.body for child, parent in self.chain(node))

    def is_conditional(self, node: cst.CSTNode) -> bool:
        """Whether `node` runs only on some paths through the scope (a branch or a loop)."""
        return any(
            isinstance(parent, (cst.If, cst.Else, cst.ExceptHandler, cst.For, cst.While, cst.IfExp))
            for _, parent in self.chain(node)
        )

    def statement(self, node: cst.CSTNode) -> cst.CSTNode:
        """The statement holding `node` (a simple statement line or a compound statement)."""
        current = node
        while not isinstance(current, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            parent = self.parent(current)
            if parent is None:
                return current
            current = parent
        return current

    def grad_mode(self, node: cst.CSTNode) -> str | None:
        """ "off" when autograd is surely off at `node` (inside this scope or by decorator),
        "maybe" when a `set_grad_enabled(flag)`-like block may switch it off, else None."""
        found: str | None = None
        for child, parent in self.chain(node):
            if isinstance(parent, cst.With) and child is parent.body:
                mode = self._with_mode(parent)
                if mode == "off":
                    return "off"
                found = found or mode
        if isinstance(self.scope, cst.FunctionDef):
            mode = decorator_grad_mode(self.context, self.scope)
            if mode == "off":
                return "off"
            found = found or mode
        return found

    def _with_mode(self, with_node: cst.With) -> str | None:
        key = id(with_node)
        if key not in self._grad:
            found: str | None = None
            for item in with_node.items:
                mode = grad_mode_of(self.context, item.item)
                if mode == "off":
                    found = "off"
                    break
                found = found or mode
            self._grad[key] = found
        return self._grad[key]

    def runs_after(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        """Statements that run after `node`'s statement, in the same pass through its loop body,
        whenever `node` runs: the rest of its block, climbing out of `with` and `try` bodies
        (straight-line code) but not out of `if`/`else`/`except` branches or the loop."""
        return self._after(self.statement(node), self.loop_of(node))

    def _after(self, statement: cst.CSTNode, loop: cst.CSTNode | None) -> list[cst.CSTNode]:
        block = self.parent(statement)
        owner = self.parent(block) if block is not None else None
        if block is None or owner is None:
            return []
        body = getattr(block, "body", ())
        index = next((i for i, s in enumerate(body) if s is statement), None)
        if index is None:
            return []
        rest = list(body[index + 1 :])
        if owner is not loop and (
            isinstance(owner, cst.With) or (isinstance(owner, cst.Try) and block is owner.body)
        ):
            rest.extend(self._after(owner, loop))
        return rest

    def calls_within(
        self, statements: list[cst.CSTNode], *, through_loops: bool = True
    ) -> Iterator[cst.Call]:
        """Calls inside `statements` (this scope only), in source order."""
        for statement in statements:
            for node in self.nodes[self.order(statement) : self.end(statement)]:
                if type(node) is cst.Call and (
                    through_loops or not self._inner_loop_between(node, statement)
                ):
                    yield node

    def _inner_loop_between(self, node: cst.CSTNode, top: cst.CSTNode) -> bool:
        """Whether `node` sits in the body of a loop that is `top` or inside it."""
        for child, parent in self.chain(node):
            if isinstance(parent, LOOPS) and child is parent.body:
                return True
            if parent is top:
                return False
        return False


class _ScopeIndexes:
    def __init__(self, context: FileContext) -> None:
        self.by_scope: dict[int, ScopeIndex] = {}


def scope_index(
    context: FileContext, scope: cst.CSTNode, classdef: cst.ClassDef | None = None
) -> ScopeIndex:
    """The (cached) index of `scope`, shared by every rule checking this file.

    `classdef` is the class `scope` is a method of; the first caller's answer is kept.
    """
    per_file = context.shared(_ScopeIndexes).by_scope
    index = per_file.get(id(scope))
    if index is None or index.scope is not scope:
        index = per_file[id(scope)] = ScopeIndex(context, scope, classdef)
    return index
