"""The images a script trains on: a torchvision dataset, at the size its transforms give.

`image_evidence` reads a file for a known dataset (MNIST: 1x28x28, CIFAR-10: 3x32x32 ...)
and the resize or crop its transforms end with. It says nothing rather than guess: a resize
whose size cannot be read (`Resize(opt.img_size)` with no default to take) leaves the size
unknown, and a script that changes the channels of its batches (`imgs.expand(n, 3, h, w)`,
`x.repeat(1, 3, 1, 1)`, a `Lambda` transform) leaves the channels to the model.
"""

from __future__ import annotations

import ast
from collections.abc import Container, Iterator
from typing import Any

from torchlint.shapes.astutil import MISSING, int_tuple, literal, qualify
from torchlint.shapes.option_objects import option_default

#: (channels, height, width) of torchvision datasets, by class name.
DATASETS: dict[str, tuple[int, int | None, int | None]] = {
    "MNIST": (1, 28, 28),
    "FashionMNIST": (1, 28, 28),
    "KMNIST": (1, 28, 28),
    "EMNIST": (1, 28, 28),
    "QMNIST": (1, 28, 28),
    "CIFAR10": (3, 32, 32),
    "CIFAR100": (3, 32, 32),
    "SVHN": (3, 32, 32),
    "STL10": (3, 96, 96),
    "ImageFolder": (3, None, None),
    "ImageNet": (3, None, None),
}
#: Transforms that resize or crop images (the last one gives their size).
RESIZES = ("Resize", "CenterCrop", "RandomResizedCrop", "RandomCrop", "FiveCrop")
#: Tensor methods that copy a batch along a dimension (to 3 channels, say).
_COPIES = ("expand", "repeat", "tile")

Options = dict[str, Any]


def image_evidence(
    tree: ast.Module,
    aliases: dict[str, str],
    path: str,
    options: Options,
    models: Container[str],
    literals: dict[str, object],
) -> dict[str, Any] | None:
    """The first dataset the file builds, as `[channels, height, width]` evidence, or None.

    `options`: the script's argparse defaults by namespace name (`opt.img_size` is read
    there); `models`: the names of module classes, whose bodies run on the model's input,
    not on the dataset's batches; `literals`: the file's module-level literals
    (`astutil.module_literals`: `IMG_SIZE = 64`).
    """
    constants = {
        name: value
        for name, value in literals.items()
        if isinstance(value, int) and not isinstance(value, bool)
    }
    dataset: tuple[str, tuple[int, int | None, int | None], int] | None = None
    size: tuple[int, int, bool, int] | None = None  # (h, w, exact, line)
    gray: int | None = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        qual = qualify(node.func, aliases) or ""
        last = qual.rsplit(".", 1)[-1]
        if last in DATASETS and ("datasets" in qual or qual.startswith("torchvision")):
            if dataset is None or node.lineno < dataset[2]:
                dataset = (last, DATASETS[last], node.lineno)
        elif last in RESIZES and "transforms" in qual:
            hw = _size(_argument(node, 0, "size"), options, constants)
            if hw is None:
                return None  # `Resize(side)` with a side unknown here: so is the image's
            if size is None or node.lineno >= size[2]:
                size = (hw[0], hw[-1], len(hw) == 2 or last != "Resize", node.lineno)
        elif last == "Grayscale" and "transforms" in qual:
            given = _argument(node, 0, "num_output_channels")
            gray = 1 if given is None else _int(given, options, constants)
            if gray is None:
                return None
    if dataset is None:
        return None
    name, (channels, height, width), line = dataset
    label = name
    if size is not None:
        h, w, exact = size[0], size[1], size[2]
        if not exact and name in ("ImageFolder", "ImageNet"):
            return None  # Resize(256) on arbitrary images: only the short side is known
        height, width = h, w
        label = f"{name} resized to {h}x{w}"
    if height is None or width is None:
        return None
    found: int | None = gray or channels
    if _copies_channels(tree, models):
        found = None  # the model's own
    return {
        "kind": "image",
        "shape": [found, height, width],
        "where": f"{path}:{line}",
        "label": label,
    }


def dataset_samples(
    tree: ast.Module, aliases: dict[str, str], image: dict[str, Any] | None
) -> dict[str, dict[str, Any]]:
    """Per module-level name bound to a dataset whose transform makes tensors
    (`train_data = datasets.FashionMNIST(..., transform=ToTensor())`), one sample's image
    as a tensor ([1, 28, 28]: no batch), from the file's `image` evidence. None where the
    file builds datasets of more than one kind (which size is whose)."""
    if image is None or None in image["shape"]:
        return {}
    built: list[str] = []
    kinds = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            qual = qualify(node.func, aliases) or ""
            if qual.rsplit(".", 1)[-1] in DATASETS and "datasets" in qual:
                kinds.add(qual.rsplit(".", 1)[-1])
    if len(kinds) != 1:
        return {}
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target, value = node.targets[0], node.value
        if not (isinstance(target, ast.Name) and isinstance(value, ast.Call)):
            continue
        qual = qualify(value.func, aliases) or ""
        transform = _argument(value, 99, "transform")
        makes_tensors = transform is not None and "ToTensor" in ast.unparse(transform)
        if qual.rsplit(".", 1)[-1] in kinds and makes_tensors:
            built.append(target.id)
    return {
        name: {
            "shape": list(image["shape"]),
            "dtype": "float",
            "label": f"one {image['label']} sample of {name}",
        }
        for name in built
    }


def sample_of(value: ast.expr) -> str | None:
    """The dataset a one-sample read takes its image from: `train_data[0][0]` (or `D[i]`
    unpacked, `image, label = D[0]`: see the caller), the dataset's name."""
    if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Subscript):
        index = value.slice
        if isinstance(index, ast.Constant) and index.value == 0:
            inner = value.value
            if isinstance(inner.value, ast.Name) and isinstance(inner.slice, ast.Constant):
                return inner.value.id
    return None


def _argument(call: ast.Call, index: int, keyword: str) -> ast.expr | None:
    if len(call.args) > index and not isinstance(call.args[index], ast.Starred):
        return call.args[index]
    return next((k.value for k in call.keywords if k.arg == keyword), None)


def _size(
    node: ast.expr | None, options: Options, constants: dict[str, int]
) -> tuple[int, ...] | None:
    """A resize's size: a literal, a module constant, an argparse default, or a pair of
    those; None when it cannot be read."""
    if node is None:
        return None
    found = int_tuple(node)
    if found is not None and len(found) in (1, 2):
        return found
    if isinstance(node, (ast.Tuple, ast.List)):
        sides = [_int(item, options, constants) for item in node.elts]
        known = [side for side in sides if side is not None]
        return tuple(known) if len(known) == len(sides) and len(known) in (1, 2) else None
    side = _int(node, options, constants)
    return (side,) if side is not None else None


def _int(node: ast.expr, options: Options, constants: dict[str, int]) -> int | None:
    value = literal(node)
    if value is MISSING:
        if isinstance(node, ast.Name):
            value = constants.get(node.id)
        else:
            value = option_default(node, options)  # `opt.img_size`: its argparse default
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _copies_channels(tree: ast.Module, models: Container[str]) -> bool:
    """Whether the script may change its batches' channels: outside the model classes, a
    copy with a literal count (`imgs.expand(n, 3, h, w)`, `x.repeat(1, 3, 1, 1)`) or a
    `Lambda` transform."""
    for node in _outside(tree, models):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else None
        if name == "Lambda" or (isinstance(node.func, ast.Name) and node.func.id == "Lambda"):
            return True
        if name in _COPIES:
            counts = [literal(a) for a in node.args]
            if any(isinstance(c, int) and not isinstance(c, bool) and c > 1 for c in counts):
                return True
    return False


def _outside(tree: ast.Module, models: Container[str]) -> Iterator[ast.AST]:
    """The file's nodes, less the bodies of the model classes."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not (isinstance(child, ast.ClassDef) and child.name in models):
                stack.append(child)
