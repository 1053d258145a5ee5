"""Inputs that are lists of tensors (`x: list[Tensor]`): the feature maps a detection head
or a pyramid reads level by level.

The element's shape comes from the first layer that reads one element in a loop over the
list (`for feature in x: self.conv(feature)`), following the list into the submodule it is
handed to whole (`self.classification_head(x)`). The plan passes a couple of such maps.
"""

from __future__ import annotations

import ast
import typing
from typing import Any

import torch
from torch import nn

from torchlint.shapes.infer import (
    forward_function,
    forward_input,
    forward_params,
    infer_from_source,
)
from torchlint.shapes.inputs import Dim, InputPlan, TensorSpec, forward_parameter

#: Feature maps passed for a list input (pyramid levels).
_LEVELS = 2
_MAX_DEPTH = 3


def _list_text(text: str) -> bool:
    text = text.replace(" ", "").replace("typing.", "").replace("torch.", "")
    return text in ("list[Tensor]", "List[Tensor]")


def tensor_list_input(model: nn.Module, name: str) -> bool:
    """Whether forward's parameter `name` is annotated as a list of tensors (in the
    signature, or in a `# type: (list[Tensor]) -> Tensor` comment)."""
    parameter = forward_parameter(model, name)
    if parameter is None:
        return False
    annotation = parameter.annotation
    if annotation is parameter.empty:
        return _commented_list(model, name)
    if isinstance(annotation, str):
        return _list_text(annotation)
    origin = typing.get_origin(annotation)
    return origin is list and typing.get_args(annotation) == (torch.Tensor,)


def _commented_list(model: nn.Module, name: str) -> bool:
    function = forward_function(model)
    comment = function.type_comment if function is not None else None
    if not comment or not comment.startswith("("):
        return False
    params = forward_params(function)
    try:
        signature = ast.parse(comment, mode="func_type")
    except SyntaxError:
        return False
    if name not in params or len(signature.argtypes) != len(params):
        return False
    return _list_text(ast.unparse(signature.argtypes[params.index(name)]))


def _element_name(loop: ast.For | ast.comprehension, name: str) -> str | None:
    """The loop variable bound to the list's elements: `for f in x`, `for i, f in
    enumerate(x)` (a statement or a comprehension)."""
    target, iterated = loop.target, loop.iter
    if isinstance(iterated, ast.Name) and iterated.id == name and isinstance(target, ast.Name):
        return target.id
    if (
        isinstance(iterated, ast.Call)
        and isinstance(iterated.func, ast.Name)
        and iterated.func.id == "enumerate"
        and len(iterated.args) == 1
        and isinstance(iterated.args[0], ast.Name)
        and iterated.args[0].id == name
        and isinstance(target, ast.Tuple)
        and len(target.elts) == 2
        and isinstance(target.elts[1], ast.Name)
    ):
        return target.elts[1].id
    return None


def _handed_to(call: ast.Call, name: str, module: nn.Module) -> tuple[nn.Module, int] | None:
    """The submodule a call `self.head(x)` hands the whole list to, and the argument's slot."""
    func = call.func
    if not (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id == "self"
    ):
        return None
    for position, arg in enumerate(call.args):
        if isinstance(arg, ast.Name) and arg.id == name:
            child = getattr(module, func.attr, None)
            return (child, position) if isinstance(child, nn.Module) else None
    return None


def element_plans(module: nn.Module, index: int, depth: int = 0) -> list[InputPlan] | None:
    """The shape of one element of forward input `index` (a list), as plans of one tensor."""
    found = forward_input(module, index)
    if found is None:
        return None
    function, name = found
    for node in ast.walk(function):
        if isinstance(node, (ast.For, ast.comprehension)):
            element = _element_name(node, name)
            if element is not None:
                return infer_from_source(module, index, seed=element)
        if isinstance(node, ast.Call) and depth < _MAX_DEPTH:
            handed = _handed_to(node, name, module)
            if handed is not None:
                return element_plans(handed[0], handed[1], depth + 1)
    return None


def list_plans(module: nn.Module, index: int) -> list[InputPlan] | None:
    """Plans for a list input: a couple of elements of the inferred shape, one list."""
    found = element_plans(module, index)
    if not found:
        return None
    plans = []
    for plan in found:
        specs = [plan.specs[0]] * _LEVELS
        label = f"a list of {_LEVELS} feature maps {_shape(plan)}"
        plans.append(InputPlan(list(specs), "named", label, (_LEVELS,)))
    return plans


#: List inputs that hold whole images (a detector's `images: list[Tensor]`).
_IMAGE_LISTS = frozenset({"images", "imgs", "image_list", "img_list"})
#: Sizes of the images of such a list: unlike, as a detector is fed them.
_IMAGE_SIZES = ((96, 128), (112, 80))


def image_list_plans(name: str) -> list[InputPlan] | None:
    """Plans for a list of images named by convention (`images: list[Tensor]`): RGB images
    [3, H, W] of unlike sizes, as a detector takes them before batching them itself."""
    if name not in _IMAGE_LISTS:
        return None
    specs = [
        TensorSpec([Dim.fixed(3), Dim(f"H{i}", h), Dim(f"W{i}", w)], torch.float32)
        for i, (h, w) in enumerate(_IMAGE_SIZES, 1)
    ]
    sizes = " and ".join(f"[3, H{i}, W{i}]" for i in range(1, len(specs) + 1))
    label = f"a list of images {sizes} (`{name}`: images of unlike sizes)"
    return [InputPlan(specs, "named", label, (len(specs),))]


def _shape(plan: InputPlan) -> str:
    dims: list[Any] = [d.name or d.hint for d in plan.specs[0].dims]
    return "[" + ", ".join(str(d) for d in dims) + "]"
