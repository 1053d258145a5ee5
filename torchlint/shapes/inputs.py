"""What to feed a model: input plans, from a declared shape, from evidence, or inferred.

A plan lists each forward input's sizes, fixed or *free*; free sizes become symbols when
the model is analysed, with a hint value to start from. Inference from the first layer is
in `infer`; this module also knows the forward signature and traces it with fx.
"""

from __future__ import annotations

import inspect
import itertools
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import torch
from torch import fx, nn

#: Starting values for free sizes, by role.
#: A first guess that divides by 32 (so U-Nets and strided stacks pass) but is not one of
#: the usual resolutions (28, 32, 224): a model written for one resolution fails at the
#: guess, and the probes that follow find (and report, TL606) the size it needs.
HINTS = {"N": 2, "L": 16, "H": 96, "W": 96, "D": 32, "T": 256}


@dataclass(frozen=True)
class Dim:
    """One size of an input: free (`name` set, `hint` to start from) or fixed (`name` None)."""

    name: str | None
    hint: int

    @staticmethod
    def fixed(size: int) -> Dim:
        return Dim(None, size)

    @staticmethod
    def free(name: str) -> Dim:
        return Dim(name, HINTS.get(name[:1], 8))


@dataclass
class TensorSpec:
    dims: list[Dim]
    dtype: torch.dtype = torch.float32
    #: A tensor shaped like the first input, whatever plan of it is run: `combine` copies
    #: the first input's dimensions in (`dims` is empty until then).
    like_first: bool = False
    #: A tensor of the first input's rank and batch, its other sizes its own (free): a
    #: skip connection beside a feature map. `combine` gives it its dimensions.
    first_rank: bool = False


@dataclass
class InputPlan:
    """The inputs for one analysis of a model."""

    specs: list[TensorSpec]
    #: "declared", "tensor", "image", "config" (evidence), "inferred", or "named" (by the
    #: input's conventional name alone: inferred, and only a sized layer's failure counts),
    #: or "assumed" (found past a layer taken to keep the shape: no failure counts).
    source: str = "inferred"
    #: For messages: "the declared input [1, 3, 224, 224]".
    label: str = ""
    #: Per forward argument, how many specs it takes as one list (`images: list[Tensor]`),
    #: 0 for one plain tensor, or the names of the attributes of an object holding them
    #: (`batch.premise`); empty: one tensor per argument.
    packed: tuple[int | tuple[str, ...], ...] = ()
    #: Its sizes are those of the layer that takes the input as it is (a recurrent layer's
    #: state): the analysis never frees or unties them.
    exact: bool = False
    #: A shape guessed from an argument's name alone (`encoder_hidden_states` sized by the
    #: configuration): the real caller may pass another rank or size, so it is no evidence;
    #: only a failure that holds at every size of it is reported.
    guessed: bool = False

    def arguments(self, tensors: list[Any]) -> list[Any]:
        """The forward's arguments from one tensor per spec (lists where `packed` says)."""
        if not self.packed:
            return list(tensors)
        out: list[Any] = []
        start = 0
        for size in self.packed:
            if isinstance(size, tuple):  # an object holding tensors (`batch.premise`)
                out.append(SimpleNamespace(**dict(zip(size, tensors[start:], strict=False))))
                start += len(size)
                continue
            out.append(list(tensors[start : start + size]) if size else tensors[start])
            start += size or 1
        return out

    @property
    def evidenced(self) -> bool:
        return self.source not in ("inferred", "named", "assumed") and not self.guessed


# -- the forward signature ----------------------------------------------------------------


def forward_parameter(model: nn.Module, name: str) -> inspect.Parameter | None:
    """Forward's parameter `name`, or None (no such parameter, or no signature)."""
    try:
        return inspect.signature(model.forward).parameters.get(name)
    except (TypeError, ValueError):
        return None


def forward_inputs(model: nn.Module) -> list[str] | None:
    """Names of the forward parameters that take the model's inputs, or None if unclear."""
    try:
        signature = inspect.signature(model.forward)
    except (TypeError, ValueError):
        return None
    positional = [
        p
        for p in signature.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    required = [p.name for p in positional if p.default is p.empty]
    if required:
        return required
    if positional:
        return [positional[0].name]  # HF style: forward(self, input_ids=None, ...)
    if any(p.kind == p.VAR_POSITIONAL for p in signature.parameters.values()):
        return ["input"]
    return None


def entry_module(model: nn.Module, count: int) -> nn.Module:
    """A wrapper whose forward takes exactly `count` positional inputs (what fx traces)."""
    names = ", ".join(f"x{i}" for i in range(count))
    namespace: dict[str, Any] = {}
    exec(f"def forward(self, {names}):\n    return self.inner({names})\n", namespace)
    entry_type = type("Entry", (nn.Module,), {"forward": namespace["forward"]})
    entry = entry_type()
    entry.inner = model
    return entry


class _Tracer(fx.Tracer):
    def __init__(self, stack_traces: bool = False) -> None:
        super().__init__(autowrap_functions=_einops_functions())
        self.record_stack_traces = stack_traces

    def iter(self, obj: fx.Proxy) -> Any:
        # `q, k, v = map(f, qkv.chunk(3, dim=-1))`: the parts of a chunk or of a split by a
        # list of sizes are counted by its arguments, where fx counts only an unpacking.
        count = _parts_count(obj.node)
        if count is not None:
            return iter([obj[index] for index in range(count)])
        return super().iter(obj)

    def is_leaf_module(self, m: nn.Module, module_qualified_name: str) -> bool:
        # An einops layer stays whole: tracing into it stops at its first shape look-up.
        return is_einops_layer(m) or super().is_leaf_module(m, module_qualified_name)


def is_einops_layer(module: nn.Module) -> bool:
    """Whether a module is one of einops' layers (kept whole when tracing)."""
    return type(module).__module__.startswith("einops.")


def _parts_count(node: fx.Node) -> int | None:
    """How many tensors a `chunk(n)` or `split([a, b, c])` node gives, when its arguments say."""
    if node.op not in ("call_method", "call_function"):
        return None
    name = op_name(node.target)
    # The tensor first (`x.chunk(3)` and `torch.chunk(x, 3)` alike), then the count or sizes.
    argument = node.args[1] if len(node.args) > 1 else None
    if name == "chunk":
        count = node.kwargs.get("chunks", argument)
        return count if isinstance(count, int) and 0 < count <= 64 else None
    if name == "split":
        sizes = node.kwargs.get("split_size_or_sections", node.kwargs.get("split_size", argument))
        if isinstance(sizes, (list, tuple)) and 0 < len(sizes) <= 64:
            return len(sizes)
    return None


def _einops_functions() -> tuple[Any, ...]:
    """einops' functions, recorded whole when tracing (`rearrange(x, "b n (h d) -> b h n d",
    h=8)`), when the model's code has imported einops: tracing into one stops at its first
    shape look-up."""
    einops = sys.modules.get("einops")
    names = ("rearrange", "repeat", "reduce", "einsum", "pack", "unpack")
    return tuple(f for f in (getattr(einops, n, None) for n in names) if callable(f))


def trace(
    model: nn.Module, count: int, stack_traces: bool = False
) -> tuple[fx.Graph, bool, nn.Module]:
    """The fx graph of the model's forward, whether tracing got to the end, and the wrapper.

    When tracing stops early (data-dependent control flow, `len(x)`, ...), the graph holds
    the nodes recorded up to that point, which is often enough to see the first layer.
    Node targets are relative to the wrapper (`inner.fc1`).
    """
    tracer = _Tracer(stack_traces)
    entry = entry_module(model, count)
    saved = _tensor_state(model)
    try:
        return tracer.trace(entry), True, entry
    except Exception:
        graph = getattr(tracer, "graph", None)
        return (graph if isinstance(graph, fx.Graph) else fx.Graph()), False, entry
    finally:
        _restore(saved)


def _tensor_state(model: nn.Module) -> list[tuple[dict[str, Any], str, Any]]:
    """The model's buffers and tensor attributes, to put back after tracing: a forward
    that caches a tensor on the module (`self.freqs = self.freqs.to(x.device)`) leaves
    a proxy there when traced."""
    saved = []
    for module in model.modules():
        for name, value in module._buffers.items():
            saved.append((module._buffers, name, value))
        for name, value in vars(module).items():
            if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter):
                saved.append((vars(module), name, value))
    return saved


def _restore(saved: list[tuple[dict[str, Any], str, Any]]) -> None:
    for store, name, value in saved:
        if store.get(name) is not value:
            store[name] = value


def op_name(target: Any) -> str:
    """A short name for an fx node target (`torch.flatten` -> "flatten", operator.add -> "add")."""
    if isinstance(target, str):
        return target
    return getattr(target, "__name__", str(target)).strip("_")


# -- plans from evidence ------------------------------------------------------------------------


def shape_text(dims: list[int | None]) -> str:
    return "[" + ", ".join("N" if d is None else str(d) for d in dims) + "]"


def declared_plan(declared: dict[str, Any], count: int) -> InputPlan | None:
    shapes = declared.get("shapes")
    if not shapes:
        return None
    if len(shapes) != count:
        return None
    specs = []
    for shape, dtype in zip(
        shapes, declared.get("dtypes") or ["float"] * len(shapes), strict=False
    ):
        dims = [
            Dim.fixed(d) if d is not None else Dim.free("N" if i == 0 else f"S{i}")
            for i, d in enumerate(shape)
        ]
        specs.append(TensorSpec(dims, torch.long if dtype == "long" else torch.float32))
    label = " and ".join(shape_text(s) for s in shapes)
    where = declared["where"]
    if where.startswith("["):
        return InputPlan(specs, "declared", f"the input {label} declared in {where}")
    return InputPlan(specs, "declared", f"the declared input {label}")


def tensor_plan(
    evidence: dict[str, Any], count: int, names: Sequence[str] = ()
) -> InputPlan | None:
    """The plan of a call's tensors (`model(torch.randn(4, 3, 32, 32))`); `names`, the
    forward's inputs, place the tensors it gives by keyword (`time=torch.ones(2)`)."""
    shapes, dtypes = list(evidence["shapes"]), list(evidence["dtypes"])
    labels = [evidence["label"]]
    keywords = evidence.get("keywords") or {}
    for name in names[len(shapes) : count]:
        if name not in keywords:
            break
        shapes.append(keywords[name]["shape"])
        dtypes.append(keywords[name]["dtype"])
        labels.append(f"{name}={keywords[name]['label']}")
    if len(shapes) != count:
        return None
    specs = []
    for shape, dtype in zip(shapes, dtypes, strict=False):
        dims = [Dim.fixed(d) if d is not None else Dim.free("N") for d in shape]
        specs.append(TensorSpec(dims, torch.long if dtype == "long" else torch.float32))
    where = os.path.basename(evidence["where"])
    return InputPlan(specs, "tensor", f"the input {', '.join(labels)} at {where}")


def image_plan(evidence: dict[str, Any], inferred: list[InputPlan] | None) -> InputPlan | None:
    """An image size applies to a model whose input is [N, C, H, W].

    The evidence's channels (1 for MNIST) win over the first layer's when the evidence is
    about this model (its docstring, data it is called on): a first conv that takes 2
    channels on MNIST data is then reported at that conv, not passed over.
    """
    if not inferred:
        return None
    channels, height, width = evidence["shape"]
    for plan in inferred:
        if len(plan.specs) != 1:
            continue
        dims = plan.specs[0].dims
        if len(dims) != 4 or dims[2].name != "H" or dims[3].name != "W":
            continue
        c = dims[1]
        if c.name is not None:
            continue
        if channels is not None and c.hint != channels:
            if not evidence.get("direct", True):
                continue
            c = Dim.fixed(channels)
        shape = [dims[0], c, Dim.fixed(height), Dim.fixed(width)]
        text = f"[N, {c.hint}, {height}, {width}]"
        if evidence["label"] == "docstring":
            label = f"the input {text} from the class docstring"
        elif evidence["label"].startswith("comment at"):
            label = f"the input {text} from the {evidence['label']}"
        else:
            where = os.path.basename(evidence["where"])
            label = f"{evidence['label']} images {text} used at {where}"
        return InputPlan([TensorSpec(shape, torch.float32)], "image", label)
    return None


def reshaped_image_plan(evidence: dict[str, Any], sizes: list[int] | None) -> InputPlan | None:
    """An image size applies to a model whose forward first reshapes its input into rows of
    the image's width (`input.reshape(-1, 28, 28)`: an MNIST digit's rows, for an LSTM)."""
    channels, _, width = evidence["shape"]
    if not sizes or sizes[-1] != width or channels is None or not evidence.get("direct", True):
        return None
    image = [Dim.free("N"), Dim.fixed(channels), Dim.free("H"), Dim.free("W")]
    return image_plan(evidence, [InputPlan([TensorSpec(image, torch.float32)])])


def paired_image_plan(
    evidence: dict[str, Any], per_input: list[list[InputPlan]]
) -> InputPlan | None:
    """An image size applies to each input of a model that takes several images alike (a
    siamese network's pair): every input is inferred as [N, C, H, W] with the same C."""
    if len(per_input) < 2:
        return None
    channels = set()
    plans = []
    for candidates in per_input:
        image = next((p for p in candidates if len(p.specs) == 1 and _image_dims(p)), None)
        plan = image_plan(evidence, [image]) if image is not None else None
        if image is None or plan is None:
            return None
        channels.add(image.specs[0].dims[1].hint)
        plans.append(plan)
    if len(channels) != 1:
        return None  # an RGB image and a depth map, say: the data set's size is one's only
    specs = [plan.specs[0] for plan in plans]
    return InputPlan(specs, "image", f"{plans[0].label} (each input)")


def _image_dims(plan: InputPlan) -> bool:
    dims = plan.specs[0].dims
    return len(dims) == 4 and dims[1].name is None and (dims[2].name, dims[3].name) == ("H", "W")


_MAX_COMBINED = 6


def combine(per_input: list[list[InputPlan]]) -> list[InputPlan]:
    """Whole plans from per-input candidates (several inputs), at most a few.

    The aligned choices come first (every input's first candidate, then every input's
    second, ...): inputs of one forward usually have the same number of dimensions, and with
    three inputs of two candidates each the all-second choice would be the last of eight.
    """
    width = max(len(candidates) for candidates in per_input)
    aligned = [tuple(c[min(k, len(c) - 1)] for c in per_input) for k in range(width)]
    choices: list[tuple[InputPlan, ...]] = []
    for choice in itertools.chain(aligned, itertools.product(*per_input)):
        if len(choices) == _MAX_COMBINED:
            break
        if not any(all(a is b for a, b in zip(choice, c, strict=True)) for c in choices):
            choices.append(choice)
    combos = []
    for choice in choices:
        specs = _like_first([spec for plan in choice for spec in plan.specs])
        if specs is None:
            continue
        packed = ()
        if any(plan.packed for plan in choice):
            packed = tuple(plan.packed[0] if plan.packed else 0 for plan in choice)
        exact = any(plan.exact for plan in choice)
        guessed = any(plan.guessed for plan in choice)
        if len(choice) == 1:
            plan = choice[0]
            combos.append(InputPlan(specs, plan.source, plan.label, packed, exact, guessed))
        else:
            assumed = next((plan for plan in choice if plan.source == "assumed"), None)
            named = any(plan.source == "named" for plan in choice)
            source = "named" if named else "inferred"
            if assumed is not None:  # what one input rests on, the whole plan does
                source, label = "assumed", assumed.label
            else:
                label = next((plan.label for plan in choice if plan.guessed), "")
            combos.append(InputPlan(specs, source, label, packed, exact, guessed))
    return combos


def copies_first(plan: InputPlan) -> bool:
    """Whether an input of the plan is a copy of the first input's shape (`like_first`)."""
    return any(spec.like_first for spec in plan.specs[1:])


def _like_first(specs: list[TensorSpec]) -> list[TensorSpec] | None:
    """The specs with each `like_first` stand-in given the first input's dimensions and
    type (a target's token ids beside the source's); None when the first input is no single
    tensor to copy, or, for a `first_rank` one, no floating tensor."""
    if not any(spec.like_first or spec.first_rank for spec in specs[1:]):
        return specs
    first = specs[0]
    ranked = any(spec.first_rank for spec in specs[1:])
    if first.like_first or first.first_rank or (ranked and not first.dtype.is_floating_point):
        return None
    out = []
    for index, spec in enumerate(specs):
        if spec.like_first:
            spec = TensorSpec(list(first.dims), first.dtype, True)
        elif spec.first_rank:
            own = [Dim.free(f"{d.name or 'S'}{index + 1}") for d in first.dims[1:]]
            spec = TensorSpec([first.dims[0], *own], first.dtype)
        out.append(spec)
    return out
