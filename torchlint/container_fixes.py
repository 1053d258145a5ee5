"""The fix for TL401/TL402: wrap a plain container of modules or Parameters in its `nn` twin.

`self.layers = [nn.Linear(8, 8), ...]` becomes `self.layers = nn.ModuleList([...])`, a dict
with string keys an `nn.ModuleDict`, and likewise `nn.ParameterList` / `nn.ParameterDict`;
the import is added when the file has no spelling of `torch.nn`. A fix is offered only when
the wrapper surely accepts the value and supports every use the class makes of it: one
assignment of the attribute, every element a freshly built object (a call), dict keys that
are strings, and no method the wrapper lacks (`list.index`, `dict.get` on a ModuleDict...).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from torchlint.analysis.call_args import module_spelling, with_absolute_indent
from torchlint.context import FileContext
from torchlint.fix_imports import import_line
from torchlint.fixes import FixBuilder
from torchlint.names import dotted_name

if TYPE_CHECKING:
    from torchlint.analysis.containers import ContainerFinding

#: (element kind, container) -> the registering wrapper in torch.nn.
_WRAPPERS = {
    ("module", "list"): "ModuleList",
    ("module", "tuple"): "ModuleList",
    ("module", "dict"): "ModuleDict",
    ("parameter", "list"): "ParameterList",
    ("parameter", "tuple"): "ParameterList",
    ("parameter", "dict"): "ParameterDict",
}
#: Attribute uses each wrapper supports besides iteration, indexing, `len` and `in`.
_METHODS = {
    "ModuleList": frozenset({"append", "extend", "insert", "pop"}),
    "ParameterList": frozenset({"append", "extend"}),
    "ModuleDict": frozenset({"items", "keys", "values", "pop", "update", "clear"}),
    "ParameterDict": frozenset(
        {"items", "keys", "values", "pop", "update", "clear", "get", "setdefault", "copy"}
    ),
}


def wrap_container(
    context: FileContext, classdef: cst.ClassDef, finding: ContainerFinding
) -> FixBuilder | None:
    """Wrap the attribute's one assigned value in the matching `nn` container."""
    wrapper = _WRAPPERS.get((finding.element, finding.container))
    if wrapper is None:
        return None
    values = context.self_attributes(classdef).get(finding.attribute, [])
    if len(values) != 1:
        return None
    value = values[0]
    attribute = finding.attribute.split(".", 1)[1]
    uses = _uses(classdef, attribute)
    if uses is None or not uses[0] <= _METHODS[wrapper]:
        return None
    argument = _contents(context, value, wrapper, uses[1])
    if argument is False:
        return None
    spelling, insertions = _spelling(context, wrapper)
    if spelling is None:
        return None
    if isinstance(argument, cst.Tuple):
        argument = cst.List(argument.elements)  # `nn.ModuleList([a, b])`, not `((a, b))`
    wrapped = cst.Call(
        func=cst.parse_expression(spelling),
        args=[cst.Arg(argument)] if isinstance(argument, cst.BaseExpression) else [],
    )
    # The whole assignment is replaced: a value's span leaves out its own parentheses.
    found = _assignment(classdef, value)
    if found is None:
        return None
    assign, indent = found
    new = with_absolute_indent(assign.with_changes(value=wrapped), indent)
    return FixBuilder(
        message=f"Wrap in {spelling}", replacements=[(assign, new)], insertions=insertions
    )


def _assignment(classdef: cst.ClassDef, value: cst.CSTNode) -> tuple[cst.Assign, str] | None:
    """The `self.x = value` statement in a method, and the indentation of its block."""
    import libcst.matchers as m  # slow to import: only when a fix is built

    class_indent = _indent(classdef.body)
    for method in classdef.body.body:
        if not isinstance(method, cst.FunctionDef):
            continue
        for assign in m.findall(method, m.Assign()):
            if isinstance(assign, cst.Assign) and assign.value is value:
                return assign, class_indent + _indent(method.body)
    return None  # nested in a block of the method: its indentation is not worth guessing


def _indent(body: cst.BaseSuite) -> str:
    return body.indent if isinstance(body, cst.IndentedBlock) and body.indent else "    "


def _contents(
    context: FileContext, value: cst.BaseExpression, wrapper: str, added: list[cst.CSTNode]
) -> cst.BaseExpression | bool | None:
    """What to pass to the wrapper: the value itself, its generator (`tuple(g)` -> `g`),
    None for an empty container filled later; False when the wrapper may reject it."""
    is_dict = wrapper.endswith("Dict")
    if isinstance(value, (cst.List, cst.Tuple)) and not is_dict:
        if not value.elements:
            return None if all(_built(context, v, wrapper) for v in added) else False
        return value if all(_built(context, e.value, wrapper) for e in value.elements) else False
    if isinstance(value, cst.ListComp) and not is_dict:
        return value if _built(context, value.elt, wrapper) else False
    if (
        isinstance(value, cst.Call)
        and not is_dict
        and dotted_name(value.func) in ("list", "tuple")
        and len(value.args) == 1
        and isinstance(value.args[0].value, cst.GeneratorExp)
    ):
        generator = value.args[0].value
        return generator if _built(context, generator.elt, wrapper) else False
    if isinstance(value, cst.Dict) and is_dict:
        return (
            value
            if all(
                isinstance(e, cst.DictElement)
                and isinstance(e.key, (cst.SimpleString, cst.FormattedString))
                and _built(context, e.value, wrapper)
                for e in value.elements
            )
            else False
        )
    return False


def _built(context: FileContext, node: cst.CSTNode, wrapper: str) -> bool:
    """A freshly built object of the wrapper's kind: `nn.Parameter(...)` for a Parameter
    container, any other call (`nn.Linear(8, 8)`, `Block(dim)`) for a Module container."""
    if not isinstance(node, cst.Call):
        return False
    called = context.qualified_name(node.func) or dotted_name(node.func) or ""
    is_parameter = called.rsplit(".", 1)[-1] == "Parameter"
    return is_parameter == wrapper.startswith("Parameter")


def _uses(classdef: cst.ClassDef, attribute: str) -> tuple[set[str], list[cst.CSTNode]] | None:
    """The methods called on `self.<attribute>` in the class, and the values it is given by
    `append`/`insert`; None for a use the wrappers may not support (an operator, `[k] =`)."""
    import libcst.matchers as m  # slow to import: only when a fix is built

    methods: set[str] = set()
    added: list[cst.CSTNode] = []
    target = m.Attribute(value=m.Name("self"), attr=m.Name(attribute))
    for node in m.findall(classdef, m.Attribute(value=target)):
        assert isinstance(node, cst.Attribute)
        methods.add(node.attr.value)
    for call in m.findall(classdef, m.Call(func=m.Attribute(value=target))):
        assert isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
        if call.func.attr.value in ("append", "insert") and call.args:
            added.append(call.args[-1].value)
        elif call.func.attr.value in ("extend", "update"):
            added.append(cst.Name("unknown"))
    if m.findall(classdef, m.BinaryOperation(left=target) | m.BinaryOperation(right=target)):
        return None
    if m.findall(classdef, m.AugAssign(target=target)):
        return None
    if m.findall(classdef, m.AssignTarget(target=m.Subscript(value=target))):
        return None
    return methods, added


def _spelling(context: FileContext, wrapper: str) -> tuple[str | None, list[tuple[int, str]]]:
    """How this file spells `torch.nn.<wrapper>`, and the import to add when it cannot."""
    full = f"torch.nn.{wrapper}"
    for local, target in context.imports.aliases.items():
        if target == full:
            return local, []
    module = module_spelling(context, "torch.nn")
    if module is not None:
        return f"{module}.{wrapper}", []
    line = import_line(context.module)
    if line is None:
        return None, []
    return wrapper, [(line, f"from torch.nn import {wrapper}\n")]
