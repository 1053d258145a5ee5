"""Fixes for an activation a loss applies again itself (TL101-TL103).

The loss input is either the activation call itself (`F.cross_entropy(F.softmax(z, 1), y)`)
or a name bound to one just before and used nowhere else (`p = z.softmax(1)`, then
`criterion(p, y)`). Anything else gets no fix: the probabilities may be wanted elsewhere.
"""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.activations import LOG_SOFTMAX, SIGMOID, SOFTMAX
from torchlint.analysis.call_args import detached, keeps_comments, with_absolute_indent
from torchlint.context import FileContext, iter_scope_nodes, layout_read
from torchlint.fix_layout import indent_at
from torchlint.fixes import FixBuilder
from torchlint.names import dotted_name
from torchlint.walker import iter_descendants

#: Activation functions a fix may drop, by kind.
_FUNCTIONS = {
    "torch.softmax": SOFTMAX,
    "torch.nn.functional.softmax": SOFTMAX,
    "torch.special.softmax": SOFTMAX,
    "torch.log_softmax": LOG_SOFTMAX,
    "torch.nn.functional.log_softmax": LOG_SOFTMAX,
    "torch.special.log_softmax": LOG_SOFTMAX,
    "torch.sigmoid": SIGMOID,
    "torch.nn.functional.sigmoid": SIGMOID,
    "torch.special.expit": SIGMOID,
}
#: Activation methods a fix may drop (`sigmoid_` works in place: dropping it changes more).
_METHODS = {"softmax": SOFTMAX, "log_softmax": LOG_SOFTMAX, "sigmoid": SIGMOID}
#: Spellings of softmax whose log counterpart is the same spelling with `log_` in front.
_LOG_SPELLINGS = frozenset(
    {"torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax"}
)


def drop_activation(
    context: FileContext, argument: cst.BaseExpression, kinds: frozenset[str], message: str
) -> FixBuilder | None:
    """Pass the activation's input to the loss instead of its output."""
    found = _activation_source(context, argument)
    if found is None:
        return None
    call, binding, read_before = found
    activation = _activation_input(context, call, kinds)
    if activation is None or not keeps_comments(call, activation):
        return None
    if binding is None:
        return FixBuilder(message, [(call, detached(context, activation))])
    if isinstance(activation, cst.Name) and activation.value == _bound_name(binding):
        # `out = out.softmax(1)`: without the line, `out` is the logits again.
        return FixBuilder(message, deletions=[binding])
    if read_before or not _stays_bound(context, activation, binding, argument):
        return None
    return FixBuilder(message, [(argument, detached(context, activation))], deletions=[binding])


def use_log_softmax(
    context: FileContext, argument: cst.BaseExpression, message: str
) -> FixBuilder | None:
    """Turn the softmax that feeds the loss into log_softmax (same arguments)."""
    found = _activation_source(context, argument)
    if found is None or found[2]:
        return None
    call = found[0]
    func = call.func
    if not isinstance(func, cst.Attribute):
        return None  # a bare imported `softmax`: its log twin would need an import
    qualified = context.qualified_name(func)
    is_method = qualified is None and func.attr.value == "softmax"
    if qualified not in _LOG_SPELLINGS and not (is_method and _tensor_method_call(call)):
        return None
    renamed = func.with_changes(attr=cst.Name("log_softmax"))
    return FixBuilder(message, [(func, renamed)])


def _activation_source(
    context: FileContext, argument: cst.BaseExpression
) -> tuple[cst.Call, cst.SimpleStatementLine | None, bool] | None:
    """The activation call whose output `argument` is; the statement binding it to a name
    when there is one (that name read nowhere after it but in this loss); whether the name
    is read before that statement (a loop's previous value, or the input itself)."""
    if isinstance(argument, cst.Call):
        return argument, None, False
    if not isinstance(argument, cst.Name):
        return None
    scope = _scope(context)
    if scope is None:
        return None
    nodes = list(iter_scope_nodes(scope))
    position = next((i for i, n in enumerate(nodes) if n is argument), None)
    if position is None:
        return None
    name = argument.value
    stores = _store_names(nodes)
    binding: cst.SimpleStatementLine | None = None
    own_target: cst.CSTNode | None = None
    for node in nodes[:position]:
        if isinstance(node, cst.SimpleStatementLine) and _bound_name(node) == name:
            binding = node
            own_target = node.body[0].targets[0].target  # type: ignore[attr-defined]
        elif (
            isinstance(node, cst.Name)
            and node.value == name
            and id(node) in stores
            and node is not own_target
        ):
            binding = None  # bound some other way (a loop, unpacking, augmented assignment)
    if binding is None or not _alone_in_block(context, binding, argument):
        return None
    start = nodes.index(binding)
    inside = {id(n) for n in iter_descendants(binding)}
    read_before = False
    for index, node in enumerate(nodes):
        if node is argument or id(node) in stores or not isinstance(node, cst.Name):
            continue
        if node.value != name or id(node) in inside or not _is_read(node, nodes):
            continue
        if index > start:
            return None  # the probabilities are used elsewhere too
        read_before = True
    value = binding.body[0].value  # type: ignore[attr-defined]
    if not isinstance(value, cst.Call) or _has_comments(binding):
        return None
    return value, binding, read_before


def _activation_input(
    context: FileContext, call: cst.Call, kinds: frozenset[str]
) -> cst.BaseExpression | None:
    """`z` of `F.softmax(z, dim=1)` / `z.softmax(1)` when the call is one of `kinds`."""
    qualified = context.qualified_name(call.func)
    if qualified is not None:
        if _FUNCTIONS.get(qualified) not in kinds:
            return None
        for arg in call.args:
            if arg.star:
                return None
            if arg.keyword is None or arg.keyword.value == "input":
                return arg.value
        return None
    func = call.func
    if (
        isinstance(func, cst.Attribute)
        and _METHODS.get(func.attr.value) in kinds
        and _tensor_method_call(call)
    ):
        return func.value
    return None


def _tensor_method_call(call: cst.Call) -> bool:
    """`x.sigmoid()`, or `x.softmax(d)` / `x.softmax(dim=d)`: the tensor methods' shapes."""
    assert isinstance(call.func, cst.Attribute)
    if call.func.attr.value == "sigmoid":
        return not call.args
    keywords = [a.keyword.value for a in call.args if a.keyword is not None]
    positional = [a for a in call.args if a.keyword is None]
    if any(a.star for a in call.args) or not set(keywords) <= {"dim", "dtype"}:
        return False
    return (len(positional), "dim" in keywords) in ((1, False), (0, True))


def _scope(context: FileContext) -> cst.CSTNode | None:
    for node in reversed(context.ancestors):
        if isinstance(node, cst.FunctionDef):
            return node
        if isinstance(node, (cst.ClassDef, cst.Lambda)):
            return None
    return context.module


def _bound_name(statement: cst.SimpleStatementLine) -> str | None:
    """`p` for a line holding only `p = <value>`."""
    if len(statement.body) != 1 or not isinstance(statement.body[0], cst.Assign):
        return None
    targets = statement.body[0].targets
    if len(targets) != 1 or not isinstance(targets[0].target, cst.Name):
        return None
    return targets[0].target.value


def _store_names(nodes: list[cst.CSTNode]) -> set[int]:
    """Ids of the Name nodes that are bound (not read) among `nodes`."""
    stores: set[int] = set()
    for node in nodes:
        targets: list[cst.CSTNode] = []
        if isinstance(node, cst.AssignTarget):
            targets.append(node.target)
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.NamedExpr)):
            targets.append(node.target)
        elif isinstance(node, (cst.For, cst.CompFor)):
            targets.append(node.target)
        elif isinstance(node, cst.WithItem) and node.asname is not None:
            targets.append(node.asname.name)
        for target in targets:
            stores.update(id(n) for n in _names_in(target))
    return stores


def _names_in(node: cst.CSTNode) -> list[cst.Name]:
    if isinstance(node, cst.Name):
        return [node]
    if isinstance(node, (cst.Tuple, cst.List)):
        return [n for e in node.elements for n in _names_in(e.value)]
    if isinstance(node, cst.StarredElement):
        return _names_in(node.value)
    return []


def _is_read(name: cst.Name, nodes: list[cst.CSTNode]) -> bool:
    """A Name that reads a variable: not an attribute (`x.p`) nor a keyword (`f(p=1)`)."""
    for node in nodes:
        if isinstance(node, cst.Attribute) and node.attr is name:
            return False
        if isinstance(node, cst.Arg) and node.keyword is name:
            return False
    return True


def _alone_in_block(
    context: FileContext, statement: cst.SimpleStatementLine, argument: cst.CSTNode
) -> bool:
    """The statement sits in the same block as the loss, before it, and is not the block's
    only statement (removing it must leave valid code)."""
    for block in reversed(context.ancestors):
        if isinstance(block, (cst.IndentedBlock, cst.Module)):
            body = list(block.body)
            return statement in body and len(body) > 1
    return False


def _next_statement_holds(
    context: FileContext, statement: cst.SimpleStatementLine, argument: cst.CSTNode
) -> bool:
    for block in reversed(context.ancestors):
        if isinstance(block, (cst.IndentedBlock, cst.Module)):
            body = list(block.body)
            following = body.index(statement) + 1
            return following < len(body) and any(
                n is argument for n in iter_descendants(body[following])
            )
    return False


def _has_comments(statement: cst.SimpleStatementLine) -> bool:
    """Comments on, in or just above the statement: removing it would lose them."""
    import libcst.matchers as m  # slow to import: only when a fix is built

    layout_read(statement)
    return any(line.comment is not None for line in statement.leading_lines) or bool(
        m.findall(statement.with_changes(leading_lines=()), m.Comment())
    )


def _stays_bound(
    context: FileContext,
    activation: cst.BaseExpression,
    binding: cst.SimpleStatementLine,
    argument: cst.CSTNode,
) -> bool:
    """Whether the activation's input still holds the same value at the loss: for `z` or
    `out.logits`, the name is not bound again in between; for an expression (`model(x)`),
    the loss comes in the very next statement, so moving the expression there changes
    nothing in between."""
    root = dotted_name(activation)
    if root is None:
        return _next_statement_holds(context, binding, argument)
    root = root.split(".", 1)[0]
    scope = _scope(context)
    assert scope is not None
    nodes = list(iter_scope_nodes(scope))
    stores = _store_names(nodes)
    start, end = nodes.index(binding), next(i for i, n in enumerate(nodes) if n is argument)
    return not any(
        isinstance(n, cst.Name) and n.value == root and id(n) in stores
        for n in nodes[start + 1 : end]
    )


#: Activation layers a fix may remove from the end of an `nn.Sequential`.
_LAYERS = {
    "torch.nn.Softmax": "softmax",
    "torch.nn.LogSoftmax": "log_softmax",
    "torch.nn.Sigmoid": "sigmoid",
}
#: Methods of a model that do not run it: the model may be used so elsewhere.
_NOT_RUNNING = frozenset(
    {
        "parameters",
        "named_parameters",
        "to",
        "cuda",
        "cpu",
        "train",
        "eval",
        "zero_grad",
        "state_dict",
        "load_state_dict",
    }
)


def drop_last_layer(
    context: FileContext, argument: cst.BaseExpression, kinds: frozenset[str], message: str
) -> FixBuilder | None:
    """Remove the activation layer that ends `model = nn.Sequential(..., nn.Softmax(1))`
    when the loss input is `model(x)` and the file runs the model nowhere else (so nothing
    else wanted its probabilities)."""
    import libcst.matchers as m  # slow to import: only when a fix is built

    found = _activation_source(context, argument)
    if found is None or found[2]:
        return None
    call = found[0]
    if not isinstance(call.func, cst.Name):
        return None
    name = call.func.value
    sequential = _only_sequential(context, name)
    if sequential is None or not sequential.args:
        return None
    last = sequential.args[-1]
    if last.keyword is not None or last.star or not isinstance(last.value, cst.Call):
        return None
    if _LAYERS.get(context.qualified_name(last.value.func) or "") not in kinds:
        return None
    if len(sequential.args) < 2 or _has_other_runs(context, name, call):
        return None
    layout_read(last)
    if m.findall(last, m.Comment()):
        return None
    args = list(sequential.args)
    args[-2] = args[-2].with_changes(comma=last.comma)
    shorter = sequential.with_changes(args=args[:-1])
    indent = indent_at(context.module, sequential)
    if indent is None:
        return None
    return FixBuilder(message, [(sequential, with_absolute_indent(shorter, indent))], safe=False)


def _only_sequential(context: FileContext, name: str) -> cst.Call | None:
    """The `nn.Sequential(...)` call of the file's only assignment to `name` (through
    `.to(device)` and kin)."""
    values = [
        node.value
        for node in _nodes(context)
        if isinstance(node, cst.Assign)
        and any(isinstance(t.target, cst.Name) and t.target.value == name for t in node.targets)
    ]
    if len(values) != 1:
        return None
    value = values[0]
    while (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value in ("to", "cuda", "cpu", "float", "double", "train", "eval")
    ):
        value = value.func.value
    if isinstance(value, cst.Call) and context.qualified_name(value.func) == "torch.nn.Sequential":
        return value
    return None


def _has_other_runs(context: FileContext, name: str, call: cst.Call) -> bool:
    """Whether the file uses `name` other than in `call`, its assignment and methods that
    do not run it (`.parameters()`, `.to(device)`, ...)."""
    allowed: set[int] = {id(call.func)}
    names = []
    for node in _nodes(context):
        if isinstance(node, cst.Name):
            if node.value == name:
                names.append(node)
        elif isinstance(node, cst.AssignTarget):
            if _is_name(node.target, name):
                allowed.add(id(node.target))
        elif isinstance(node, cst.Attribute):
            allowed.add(id(node.attr))
            if _is_name(node.value, name) and node.attr.value in _NOT_RUNNING:
                allowed.add(id(node.value))
        elif isinstance(node, cst.Arg) and _is_name(node.keyword, name):
            allowed.add(id(node.keyword))
    return any(id(node) not in allowed for node in names)


def _is_name(node: cst.CSTNode | None, name: str) -> bool:
    return isinstance(node, cst.Name) and node.value == name


def _nodes(context: FileContext) -> list[cst.CSTNode]:
    """Every node of the file, in source order, listed once per file for all fixes."""
    return context.shared(_descendants)


def _descendants(context: FileContext) -> list[cst.CSTNode]:
    return iter_descendants(context.module)
