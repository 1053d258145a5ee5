"""Where the tensors of a module's method live: on the module's device, or on the CPU.

A straight-line walk over one method of an `nn.Module` (its `forward`, or a helper it
calls): the tensor parameters, the module's parameters and buffers and the outputs of its
layers are on the module's device; a factory call without `device=` (`torch.zeros(...)`)
makes a CPU tensor. The walk finds where a CPU tensor meets a device tensor: arithmetic,
comparisons, `torch.cat`/`matmul`/`where`, a layer with weights. Moves (`.to(x.device)`,
`.type_as(x)`), `*_like` and `x.new_*` keep a tensor on its source's device; anything the walk
cannot tell is unknown and meets nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from torchlint.analysis.call_args import keyword, positional
from torchlint.context import FileContext, iter_scope_nodes
from torchlint.names import dotted_name
from torchlint.semantic.bindings import statement_list
from torchlint.semantic.calls import call_target
from torchlint.semantic.candidates import target_names
from torchlint.semantic.devices import device_arg_kind, module_device_state, move_kind

FACTORIES = frozenset(
    [
        "torch.zeros",
        "torch.ones",
        "torch.empty",
        "torch.full",
        "torch.randn",
        "torch.rand",
        "torch.randint",
        "torch.arange",
        "torch.tensor",
        "torch.eye",
        "torch.linspace",
    ]
)
_DEV = "dev"
#: torch functions that need all their tensor arguments on one device.
COMBINING_FUNCTIONS = frozenset(
    [
        "cat",
        "concat",
        "concatenate",
        "stack",
        "hstack",
        "vstack",
        "dstack",
        "column_stack",
        "row_stack",
        "matmul",
        "mm",
        "bmm",
        "mv",
        "dot",
        "einsum",
        "add",
        "sub",
        "subtract",
        "mul",
        "multiply",
        "div",
        "divide",
        "true_divide",
        "floor_divide",
        "remainder",
        "fmod",
        "pow",
        "where",
        "maximum",
        "minimum",
        "fmax",
        "fmin",
        "atan2",
        "lerp",
        "addmm",
        "addbmm",
        "baddbmm",
        "addcmul",
        "addcdiv",
        "cdist",
        "outer",
        "inner",
        "kron",
        "tensordot",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "logical_and",
        "logical_or",
        "logical_xor",
        "bitwise_and",
        "bitwise_or",
        "masked_fill",
    ]
)
#: `torch.nn.functional` functions that need their tensor arguments on one device (not
#: `interpolate`/`pad`, whose extra arguments are sizes; not `ctc_loss`, which moves targets).
_COMBINING_FUNCTIONAL = frozenset(
    [
        "linear",
        "bilinear",
        "embedding",
        "embedding_bag",
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
        "cross_entropy",
        "nll_loss",
        "mse_loss",
        "l1_loss",
        "smooth_l1_loss",
        "huber_loss",
        "binary_cross_entropy",
        "binary_cross_entropy_with_logits",
        "kl_div",
        "cosine_similarity",
        "pairwise_distance",
        "grid_sample",
        "layer_norm",
        "group_norm",
        "batch_norm",
        "scaled_dot_product_attention",
    ]
)
#: Tensor methods that combine the receiver with tensor arguments.
COMBINING_METHODS = frozenset(
    [
        "add",
        "add_",
        "sub",
        "sub_",
        "mul",
        "mul_",
        "div",
        "div_",
        "matmul",
        "mm",
        "bmm",
        "masked_fill",
        "masked_fill_",
        "where",
        "pow",
        "lerp",
        "maximum",
        "minimum",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "logical_and",
        "logical_or",
        "addmm",
        "baddbmm",
        "addcmul",
        "dot",
    ]
)
#: Tensor methods whose result is a tensor on the receiver's device.
_TENSOR_METHODS = frozenset(
    [
        "view",
        "reshape",
        "permute",
        "transpose",
        "contiguous",
        "unsqueeze",
        "squeeze",
        "flatten",
        "unflatten",
        "expand",
        "expand_as",
        "view_as",
        "reshape_as",
        "repeat",
        "repeat_interleave",
        "float",
        "half",
        "double",
        "bfloat16",
        "long",
        "int",
        "bool",
        "byte",
        "clone",
        "detach",
        "t",
        "sum",
        "mean",
        "max",
        "min",
        "amax",
        "amin",
        "argmax",
        "argmin",
        "softmax",
        "log_softmax",
        "sigmoid",
        "tanh",
        "relu",
        "exp",
        "log",
        "sqrt",
        "rsqrt",
        "abs",
        "neg",
        "cumsum",
        "norm",
        "masked_select",
        "gather",
        "index_select",
        "narrow",
        "chunk",
        "split",
        "unbind",
        "roll",
        "flip",
        "tril",
        "triu",
        "clamp",
        "clamp_min",
        "clamp_max",
        "pow",
        "type_as",
        "new_zeros",
        "new_ones",
        "new_empty",
        "new_full",
        "new_tensor",
        "tile",
        "sort",
        "topk",
        "square",
        "var",
        "std",
        "prod",
        "logsumexp",
        "floor",
        "ceil",
        "round",
    ]
)
_TENSOR_ATTRS = frozenset({"T", "mT", "H", "mH", "real", "imag", "data"})
_NOT_TENSOR_PARAM = re.compile(
    r"(^|_)(len|lens|length|lengths|size|sizes|shape|num|n|dim|dims|step|steps|count|device|"
    r"dtype|training|mode|config|cfg|kwargs|args|offset|start|end|scale|temperature|tau|"
    r"alpha|beta|gamma|eps|ratio|factor|rate|prob|p|idx|index|epoch|iteration|seed|height|"
    r"width|max|min|flag|name|key_name|layer_id)(_|$)|^(use|return|output|is|do|need|with)_",
    re.I,
)


@dataclass(eq=False)
class _Cpu:
    """A tensor made on the CPU by the factory call `call`."""

    call: cst.Call
    factory: str


@dataclass(eq=False)
class _Seq:
    """A tuple or list of values (python concatenation, not a tensor op)."""

    items: tuple[object, ...]


Kind = object  # _DEV | _Cpu | _Seq | None


@dataclass
class CpuTensor:
    """A factory call whose CPU result meets the module's device tensors."""

    call: cst.Call
    factory: str
    source: str  # the expression to take the device from (`x`)


class _MethodFlow:
    """Follows where tensors live through one method of a module class."""

    def __init__(
        self,
        context: FileContext,
        function: cst.FunctionDef,
        classdef: cst.ClassDef,
        depth: int = 0,
    ) -> None:
        self.context = context
        self.function = function
        self.classdef = classdef
        self.depth = depth
        self.state = module_device_state(context, classdef)
        #: What each `return` gives back (a helper's CPU tensors reach forward through them).
        self.returned: list[Kind] = []
        self.env: dict[str, Kind] = {}
        self.flagged: dict[int, _Cpu] = {}

    def run(self) -> list[CpuTensor]:
        params = tensor_parameters(self.context, self.function)
        for name in params:
            self.env[name] = _DEV
        tensors = self.state.tensors
        if not params and not tensors:
            return []
        self._block(statement_list(self.function.body) or [])
        source = params[0] if params else sorted(tensors)[0]
        return [CpuTensor(cpu.call, cpu.factory, source) for cpu in self.flagged.values()]

    # -- statements ---------------------------------------------------------------------------
    def _block(self, statements: Sequence[cst.CSTNode]) -> None:
        for statement in statements:
            self._statement(statement)

    def _statement(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                self._small(small)
        elif isinstance(node, cst.If):
            self.eval(node.test)
            self._block(statement_list(node.body) or [])
            if isinstance(node.orelse, cst.If):
                self._statement(node.orelse)
            elif node.orelse is not None:
                self._block(statement_list(node.orelse.body) or [])
        elif isinstance(node, cst.For):
            kind = self.eval(node.iter)
            self._bind(node.target, _DEV if kind == _DEV else None)
            self._block(statement_list(node.body) or [])
            if node.orelse is not None:
                self._block(statement_list(node.orelse.body) or [])
        elif isinstance(node, cst.While):
            self.eval(node.test)
            self._block(statement_list(node.body) or [])
        elif isinstance(node, cst.With):
            for item in node.items:
                self.eval(item.item)
                if item.asname is not None:
                    self._bind(item.asname.name, None)
            self._block(statement_list(node.body) or [])
        elif isinstance(node, (cst.Try, cst.TryStar)):
            self._block(statement_list(node.body) or [])
            for handler in node.handlers:
                self._block(statement_list(handler.body) or [])
            if node.orelse is not None:
                self._block(statement_list(node.orelse.body) or [])
            if node.finalbody is not None:
                self._block(statement_list(node.finalbody.body) or [])
        elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            self.env.pop(node.name.value, None)

    def _small(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.Assign):
            kind = self.eval(node.value)
            for target in node.targets:
                self._bind(target.target, kind)
        elif isinstance(node, cst.AnnAssign):
            if node.value is not None:
                self._bind(node.target, self.eval(node.value))
        elif isinstance(node, cst.AugAssign):
            target = self.eval(node.target)
            value = self.eval(node.value)
            if not isinstance(target, _Seq) and not isinstance(value, _Seq):
                self._combine([target, value])
        elif isinstance(node, cst.Expr):
            self.eval(node.value)
        elif isinstance(node, cst.Return) and node.value is not None:
            self.returned.append(self.eval(node.value))
        elif isinstance(node, cst.Del):
            for name in target_names(node.target):
                self.env.pop(name, None)

    def _bind(self, target: cst.BaseExpression, kind: Kind) -> None:
        if isinstance(target, cst.Name):
            if kind is None:
                self.env.pop(target.value, None)
            else:
                self.env[target.value] = kind
        elif isinstance(target, (cst.Tuple, cst.List)):
            elements = target.elements
            if (
                isinstance(kind, _Seq)
                and len(kind.items) == len(elements)
                and not any(isinstance(e, cst.StarredElement) for e in elements)
            ):
                for element, item in zip(elements, kind.items, strict=True):
                    self._bind(element.value, item)
            else:
                whole = kind if kind is _DEV or isinstance(kind, _Cpu) else None
                for element in elements:
                    self._bind(element.value, whole)
        elif isinstance(target, cst.StarredElement):
            self._bind(target.value, None)

    # -- expressions --------------------------------------------------------------------------
    def eval(self, expr: cst.BaseExpression) -> Kind:
        if isinstance(expr, cst.Name):
            return self.env.get(expr.value)
        if isinstance(expr, cst.Attribute):
            return self._attribute(expr)
        if isinstance(expr, cst.Subscript):
            base = self.eval(expr.value)
            for element in expr.slice:
                self._eval_slice(element)
            if isinstance(base, _Seq):
                return _merge(list(base.items))
            if isinstance(base, _Cpu) and not any(
                isinstance(e.slice, cst.Slice) or _is_none(e.slice) for e in expr.slice
            ):
                return None  # `t[0]` may be a 0-dim tensor, which mixes with device tensors
            return base
        if isinstance(expr, cst.BinaryOperation):
            left, right = self.eval(expr.left), self.eval(expr.right)
            if isinstance(left, _Seq) or isinstance(right, _Seq):
                return None
            return self._combine([left, right])
        if isinstance(expr, cst.UnaryOperation):
            kind = self.eval(expr.expression)
            return None if isinstance(expr.operator, cst.Not) else kind
        if isinstance(expr, cst.Comparison):
            kinds = [self.eval(expr.left)]
            kinds.extend(self.eval(c.comparator) for c in expr.comparisons)
            if any(
                isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn))
                for c in expr.comparisons
            ) or any(isinstance(k, _Seq) for k in kinds):
                return None
            return self._combine(kinds)
        if isinstance(expr, cst.BooleanOperation):
            self.eval(expr.left)
            self.eval(expr.right)
            return None
        if isinstance(expr, cst.IfExp):
            self.eval(expr.test)
            body, orelse = self.eval(expr.body), self.eval(expr.orelse)
            if isinstance(body, _Seq) or isinstance(orelse, _Seq):
                return None
            cpu = next((k for k in (body, orelse) if isinstance(k, _Cpu)), None)
            return cpu if cpu is not None else _merge([body, orelse])
        if isinstance(expr, (cst.Tuple, cst.List)):
            return _Seq(tuple(self.eval(e.value) for e in expr.elements))
        if isinstance(expr, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            return _Seq((self._comprehension(expr, expr.elt),))
        if isinstance(expr, cst.DictComp):
            self._comprehension(expr, expr.value)
            return None
        if isinstance(expr, cst.Call):
            return self._call(expr)
        if isinstance(expr, cst.NamedExpr):
            kind = self.eval(expr.value)
            self._bind(expr.target, kind)
            return kind
        if isinstance(expr, (cst.Await, cst.StarredElement)):
            return self.eval(expr.expression if isinstance(expr, cst.Await) else expr.value)
        if isinstance(expr, cst.Dict):
            for element in expr.elements:
                if isinstance(element, cst.DictElement):
                    self.eval(element.value)
            return None
        return None

    def _eval_slice(self, element: cst.SubscriptElement) -> None:
        # Indexing a device tensor with a CPU index tensor works: only look inside.
        inner = element.slice
        if isinstance(inner, cst.Index):
            self.eval(inner.value)
        elif isinstance(inner, cst.Slice):
            for part in (inner.lower, inner.upper, inner.step):
                if part is not None:
                    self.eval(part)

    def _comprehension(
        self, expr: cst.BaseComp | cst.DictComp, element: cst.BaseExpression
    ) -> Kind:
        saved = dict(self.env)
        clause: cst.CompFor | None = expr.for_in
        while clause is not None:
            kind = self.eval(clause.iter)
            self._bind(clause.target, _DEV if kind == _DEV else None)
            for condition in clause.ifs:
                self.eval(condition.test)
            clause = clause.inner_for_in
        result = self.eval(element)
        self.env = saved
        return result

    def _attribute(self, expr: cst.Attribute) -> Kind:
        name = dotted_name(expr)
        if name is not None and name.startswith("self."):
            if name in self.state.tensors:
                return _DEV
            owner, _, attr = name.rpartition(".")
            if owner in self.state.submodules and attr in ("weight", "bias"):
                return _DEV
            return None
        base = self.eval(expr.value)
        if expr.attr.value in _TENSOR_ATTRS and not isinstance(base, _Seq):
            return base
        return None

    def _args(self, call: cst.Call) -> list[Kind]:
        kinds: list[Kind] = []
        for arg in call.args:
            kinds.extend(_flatten(self.eval(arg.value)))
        return kinds

    def _call(self, call: cst.Call) -> Kind:
        context = self.context
        func = call.func
        qualified = (
            context.qualified_name(func) if isinstance(func, (cst.Name, cst.Attribute)) else None
        )
        if qualified in FACTORIES:
            self._args(call)
            return self._factory(call, qualified)
        if qualified is not None and qualified.startswith("torch."):
            kinds = self._args(call)
            device = keyword(call, "device")
            if device is not None:
                return None if device_arg_kind(context, device.value) == "cpu" else _DEV
            short = qualified.rsplit(".", 1)[-1]
            if (
                qualified.startswith("torch.nn.functional.") and short in _COMBINING_FUNCTIONAL
            ) or (qualified == f"torch.{short}" and short in COMBINING_FUNCTIONS):
                return self._combine(kinds)
            if qualified.startswith(("torch.nn.utils", "torch.jit", "torch.onnx")):
                return None
            if qualified == f"torch.{short}" and short[:1].islower():
                return _merge(kinds)
            return None
        callee = dotted_name(func)
        if callee is not None and callee.startswith("self.") and callee.count(".") == 1:
            kinds = self._args(call)
            if callee in self.state.layers:
                self._flag_all(kinds)  # a CPU tensor fed to a layer meets its weights
                return _DEV
            if callee in self.state.builtins:  # a loss, an activation: its inputs meet each other
                return self._combine(kinds)
            if callee in self.state.submodules:  # a module of this file may take CPU shape tensors
                return _DEV if _DEV in kinds else None
            return self._helper_result(call)
        if isinstance(func, cst.Attribute):
            return self._method(call, func)
        self._args(call)
        return None

    def _helper_result(self, call: cst.Call) -> Kind:
        """`self.init_hidden(n)`: the CPU tensors a method of the class always returns."""
        helper = call_target(self.context, call, self.classdef)
        if helper is None or helper is self.function or self.depth >= 2:
            return None
        inner = _MethodFlow(self.context, helper, self.classdef, self.depth + 1)
        inner._block(statement_list(helper.body) or [])
        if len(inner.returned) != 1:
            return None
        result = inner.returned[0]
        return result if all(isinstance(k, _Cpu) for k in _flatten(result)) else None

    def _method(self, call: cst.Call, func: cst.Attribute) -> Kind:
        receiver = self.eval(func.value)
        kinds = self._args(call)
        method = func.attr.value
        if isinstance(receiver, _Seq):
            return None
        moved = move_kind(self.context, call)
        if moved == "device":
            return _DEV if receiver is not None else None
        if moved == "cpu":
            return None
        if moved == "dtype":
            return receiver
        if method.startswith("new_") or method in ("type_as",):
            device = keyword(call, "device")
            if device is not None:
                return _DEV
            return receiver
        if method in COMBINING_METHODS:
            return self._combine([receiver, *kinds])
        if method in _TENSOR_METHODS:
            return receiver
        return None

    def _factory(self, call: cst.Call, qualified: str) -> Kind:
        device = keyword(call, "device")
        if device is not None:
            return None if device_arg_kind(self.context, device.value) == "cpu" else _DEV
        if any(arg.star == "**" for arg in call.args):
            return None  # `**factory_kwargs` may carry the device
        if qualified == "torch.tensor":
            args = positional(call)
            data = args[0].value if args else None
            if not isinstance(data, (cst.List, cst.Tuple, cst.ListComp)):
                return None  # a scalar (or unknown) CPU tensor broadcasts with device tensors
        elif qualified in ("torch.zeros", "torch.ones", "torch.empty", "torch.full"):
            args = positional(call)
            if (
                args
                and isinstance(args[0].value, (cst.Tuple, cst.List))
                and not args[0].value.elements
            ):
                return None  # 0-dim
        return _Cpu(call, qualified)

    # -- combining ----------------------------------------------------------------------------
    def _combine(self, kinds: list[Kind]) -> Kind:
        if any(kind is _DEV for kind in kinds):
            self._flag_all(kinds)
            return _DEV
        return _merge(kinds)

    def _flag_all(self, kinds: list[Kind]) -> None:
        for kind in kinds:
            if isinstance(kind, _Cpu):
                self.flagged.setdefault(id(kind.call), kind)


def _is_none(index: cst.BaseSlice) -> bool:
    return (
        isinstance(index, cst.Index)
        and isinstance(index.value, cst.Name)
        and index.value.value == "None"
    )


def _flatten(kind: Kind) -> list[Kind]:
    if isinstance(kind, _Seq):
        return [k for item in kind.items for k in _flatten(item)]
    return [kind]


def _merge(kinds: list[Kind]) -> Kind:
    flat = [k for kind in kinds for k in _flatten(kind)]
    if any(kind is _DEV for kind in flat):
        return _DEV
    return next((kind for kind in flat if isinstance(kind, _Cpu)), None)


def cpu_tensors_meeting_device(
    context: FileContext, function: cst.FunctionDef, classdef: cst.ClassDef
) -> list[CpuTensor]:
    """The factory calls in a method of the module class `classdef` whose CPU tensor meets
    the input or the module's own tensors."""
    return _MethodFlow(context, function, classdef).run()


def tensor_parameters(context: FileContext, function: cst.FunctionDef) -> list[str]:
    """The parameters of a module method that are tensors, by annotation or, without one,
    by a name that is not a size, a flag or a setting (and no default but `None`)."""
    params = function.params
    ordered = [*params.posonly_params, *params.params, *params.kwonly_params]
    found: list[str] = []
    for param in ordered[1:]:
        name = param.name.value
        if param.annotation is not None:
            annotation = context.code(param.annotation.annotation)
            if "Tensor" not in annotation:
                continue
        elif _NOT_TENSOR_PARAM.search(name):
            continue
        default = param.default
        if default is not None and not (isinstance(default, cst.Name) and default.value == "None"):
            continue
        found.append(name)
    counted = _counting_names(function) if found else set()
    return [name for name in found if name not in counted]


def _counting_names(function: cst.FunctionDef) -> set[str]:
    """Names a function uses as counts: in a slice's bounds (`preds[:, : -(i + 1)]`) or as
    `range(...)`'s arguments. Such a parameter is an integer, not a tensor."""
    found: set[str] = set()
    for node in iter_scope_nodes(function):
        bounds: list[cst.CSTNode] = []
        if isinstance(node, cst.Slice):
            bounds = [b for b in (node.lower, node.upper, node.step) if b is not None]
        elif (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Name)
            and node.func.value == "range"
        ):
            bounds = [arg.value for arg in node.args]
        for bound in bounds:
            found.update(_counted(bound))
    return found


def _counted(node: cst.CSTNode) -> list[str]:
    """The names a count is made of by arithmetic (`-(i + 1)`, `n - 1`): not those read
    through a call or an attribute (`mask.sum()`, a tensor's)."""
    if isinstance(node, cst.Name):
        return [node.value]
    if isinstance(node, cst.UnaryOperation):
        return _counted(node.expression)
    if isinstance(node, cst.BinaryOperation):
        return [*_counted(node.left), *_counted(node.right)]
    return []
