"""Statement order inside one scope: loops, what runs after a call, whether autograd records.

A `ScopeIndex` lists one function's (or the module's) nodes in source order with their
parents, so a rule can ask which loop iteration a call runs in, what runs after it whenever it
runs, and whether `torch.no_grad()` (or a decorator) switches autograd off around it.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

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
    found: set[str] = set()
    for node in iter_descendants(context.module):
        body: cst.CSTNode | None = None
        if type(node) is cst.With and any(  # exact types: isinstance on ABCs is slow on a miss
            grad_mode_of(context, item.item) is not None for item in node.items
        ):
            body = node.body
        elif type(node) is cst.FunctionDef and decorator_grad_mode(context, node):
            body = node.body
        if body is None:
            continue
        for inner in iter_descendants(body):
            if type(inner) is cst.Call:
                name = dotted_name(inner.func)
                if name is not None:
                    found.add(name.rsplit(".", 1)[-1])
    return frozenset(found)


def names_in(expr: cst.CSTNode) -> set[str]:
    """Every plain name and dotted name (`self.total`) used anywhere in `expr`."""
    found: set[str] = set()
    stack: list[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.Name, cst.Attribute)):
            name = dotted_name(node)
            if name is not None:
                found.add(name)
                if isinstance(node, cst.Name):
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
        nodes, parents = self.nodes, self._parent
        opened: list[tuple[int, cst.CSTNode]] = [(ends[position], self.scope)]
        current, end = position + 1, ends[position]
        while current < end:
            while opened[-1][0] <= current:
                opened.pop()
            node = order[current]
            parents[id(node)] = opened[-1][1]
            nodes.append(node)
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
            if isinstance(parent, LOOPS) and child is parent.body:
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
            start = self.order(statement)
            for node in self.nodes[start:]:
                if node is not statement and not self.contains(statement, node):
                    break
                if isinstance(node, cst.Call) and (
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
