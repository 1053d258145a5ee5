"""The binding model's `definitions`: every definition of a name that may reach a point."""

from __future__ import annotations

import textwrap

import libcst as cst

from torchlint.context import FileContext
from torchlint.names import ImportMap
from torchlint.semantic.bindings import Bindings, Definitions, bindings
from torchlint.walker import iter_children


def _path_to_use(module: cst.Module) -> tuple[cst.CSTNode, ...]:
    """The path (module first) to the argument of the one `use(...)` call."""
    stack: list[tuple[cst.CSTNode, ...]] = [(module,)]
    while stack:
        path = stack.pop()
        node = path[-1]
        if (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Name)
            and node.func.value == "use"
        ):
            return (*path, node.args[0], node.args[0].value)
        stack.extend((*path, child) for child in iter_children(node))
    raise AssertionError("no use(...) in the example")


_MODELS: list[Bindings] = []  # the last example's model, to ask it again


def _definitions(source: str, name: str = "x", within: str | None = None) -> Definitions:
    """The definitions of `name` reaching `use(...)`; `within`: the loop whose target is it."""
    module = cst.parse_module(textwrap.dedent(source))
    context = FileContext("example.py", module.code, module, ImportMap())
    path = _path_to_use(module)
    model = bindings(context)
    _MODELS.append(model)
    loop = next(
        (n for n in path if isinstance(n, cst.For) and module.code_for_node(n.target) == within),
        None,
    )
    return model.definitions(name, model.where(path), within=loop)


def _values(found: Definitions) -> list[str | None]:
    module = cst.Module(body=[])
    return [None if d.value is None else module.code_for_node(d.value) for d in found.found]


def test_straight_line_gives_the_last_binding() -> None:
    found = _definitions("x = 1\nx = 2\nuse(x)\n")
    assert _values(found) == ["2"]
    assert not found.before


def test_both_branches_of_an_if_reach() -> None:
    source = """
    x = 0
    if flag:
        x = 1
    else:
        x = 2
    use(x)
    """
    found = _definitions(source)
    assert sorted(_values(found)) == ["1", "2"]  # `x = 0` is always overwritten
    assert not found.before


def test_a_branch_that_may_not_bind_lets_the_earlier_binding_through() -> None:
    source = """
    def f(flag):
        x = 0
        if flag:
            x = 1
        elif other:
            x = 2
        use(x)
    """
    assert sorted(_values(_definitions(source))) == ["0", "1", "2"]


def test_augmented_assignment_carries_the_binary_operation() -> None:
    found = _definitions("x = a\nx += b\nuse(x)\n")
    assert _values(found) == ["x + b"]
    # the `x` in `x + b` is evaluated where the augmented assignment runs: it is `a`
    definition = found.found[0]
    assert isinstance(definition.node, cst.AugAssign)
    inner = _MODELS[-1].definitions("x", definition.where)
    assert _values(inner) == ["a"]


def test_within_a_loop_only_this_iteration_counts() -> None:
    source = """
    x = None
    for batch in loader:
        if batch:
            x = f(batch)
        use(x)
        x = g(batch)
    """
    this_iteration = _definitions(source, within="batch")
    assert _values(this_iteration) == ["f(batch)"]
    assert this_iteration.before
    # without `within`, the back edge and the code before the loop reach too
    assert sorted(_values(_definitions(source)), key=str) == ["None", "f(batch)", "g(batch)"]


def test_loop_targets_and_unpacking_bind_without_one_value() -> None:
    found = _definitions("for x in xs:\n    use(x)\n")
    assert _values(found) == [None]
    assert not found.before
    assert _values(_definitions("x, y = pair()\nuse(x)\n")) == [None]
    assert _values(_definitions("x, y = a, b\nuse(x)\n")) == ["a"]


def test_try_handlers_see_the_body_bindings() -> None:
    source = """
    x = 0
    try:
        x = risky()
    except ValueError:
        use(x)
    """
    assert sorted(_values(_definitions(source))) == ["0", "risky()"]


def test_del_and_exception_names() -> None:
    assert _values(_definitions("x = 1\ndel x\nuse(x)\n")) == []
    source = """
    try:
        pass
    except ValueError as x:
        use(x)
    """
    assert _values(_definitions(source)) == [None]


def test_every_augmented_operator_becomes_its_binary_operation() -> None:
    assert _values(_definitions("x = a\nx -= b\nuse(x)\n")) == ["x - b"]
    assert _values(_definitions("x = a\nx //= b\nuse(x)\n")) == ["x // b"]


def test_a_while_loop_body_may_run_zero_times() -> None:
    source = """
    x = 0
    while more():
        x = step(x)
    use(x)
    """
    assert sorted(_values(_definitions(source))) == ["0", "step(x)"]
