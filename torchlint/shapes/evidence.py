"""What the code says about a model's inputs and constructor arguments, read statically.

Nothing here runs user code. For every candidate nn.Module class it collects, from all
linted files:

* constructor call sites whose arguments are all literals (`Net(10, hidden=32)`);
* literal tensors passed to an instance (`model = Net(); model(torch.randn(4, 3, 32, 32))`),
  and `torchsummary`/`torchinfo` `summary(model, ...)` sizes;
* well-known datasets and resizing transforms used in the same file (MNIST: 1x28x28, ...);
* an input size or a dataset named in the class's docstring or comments;
* a declared shape: `# torchlint: input-shape=(1, 3, 224, 224)` on the class line, or the
  `[tool.torchlint.shapes]` configuration.
"""

from __future__ import annotations

import ast
import os
import re
import weakref
from collections.abc import Iterator
from typing import Any

from torchlint.shapes import option_objects
from torchlint.shapes.astutil import (
    MISSING,
    dotted,
    import_aliases,
    int_tuple,
    literal,
    module_literals,
    parse,
    qualify,
    walk_statements,
)
from torchlint.shapes.call_values import (
    SAME_MODEL,
    UNKNOWN,
    LocalValues,
    Passed,
    changed_names,
    encoded,
    guessed_part,
    holds_unknown,
    plain_dict,
)
from torchlint.shapes.class_owners import ClassOwners
from torchlint.shapes.config_factories import factory_configs
from torchlint.shapes.discover import SOURCE_SUFFIXES, FileInfo, module_identity
from torchlint.shapes.image_data import (
    DATASETS,
    RESIZES,
    dataset_samples,
    image_evidence,
    sample_of,
)
from torchlint.shapes.script_values import parsed_options, top_level

Evidence = dict[str, Any]
#: `args = get_args()`: a helper may parse the command line (see `option_objects`).
_HELPER_CALL = re.compile(r"^\s*\w+\s*=\s*\w+\(\)\s*$", re.MULTILINE)
#: The key, in place of a class name, for the evidence of a file's module-level models.
MODULE_LEVEL = "<module>"

_DECLARED = re.compile(
    r"#\s*torchlint:\s*input-shapes?\s*=\s*(?P<shape>[\[(][^#]*?[\])])\s*(?:,\s*dtype\s*=\s*(?P<dtype>\w+))?\s*(?:#|$)"
)
# "28x28 MNIST digits", "input size 224x224", "1x28x28 images", "224x224 crops": a size,
# and on the same line a word that says it is the input's (not "16x16 patches" alone).
_TEXT_SIZE = re.compile(
    r"\b(?:(?P<c>[134])\s*[x\u00d7]\s*)?(?P<h>\d{2,4})\s*[x\u00d7]\s*(?P<w>\d{2,4})\b"
)
_TEXT_CONTEXT = re.compile(
    r"\b(?:inputs?|images?|pictures?|photos?|crops?|pixels?|px|digits?|resolution|frames?)\b",
    re.IGNORECASE,
)
#: Words after a size that say it is of a part, not of the input ("16x16 words", "a 3x3
#: kernel", "7x7 patches").
_PART_SIZE = re.compile(
    r"\s*(?:-\s*)?(?:words?|patch(?:es)?|tokens?|kernels?|windows?|tiles?|blocks?|grids?|"
    r"filters?|convs?|convolutions?|pool(?:ing)?|cells?)\b",
    re.IGNORECASE,
)
#: Dataset names as prose writes them -> the torchvision class (for its image size).
_TEXT_DATASETS = re.compile(
    r"\b(?P<name>Fashion[-_ ]?MNIST|KMNIST|EMNIST|QMNIST|MNIST|CIFAR[-_ ]?100|CIFAR[-_ ]?10|"
    r"SVHN|STL[-_ ]?10)\b",
    re.IGNORECASE,
)
_COMMENT = re.compile(r"#(?P<text>.*)$")

_TENSOR_FACTORIES = ("randn", "rand", "zeros", "ones", "empty")
#: Wrappers whose call runs the wrapped model on the same inputs (`DDP(model, ...)(x)`).
_WRAPPERS = ("DistributedDataParallel", "DDP", "DataParallel", "FSDP", "compile")


def collect(
    infos: list[FileInfo],
    files: list[tuple[str, str]],
    declared: dict[str, dict] | None,
    trees: dict[str, ast.Module] | None = None,
) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (abspath, class name): `ctor`, `declared` and `evidence` for the worker (`trees`:
    files already parsed, by abspath)."""
    owners = ClassOwners(infos, files, trees)
    result: dict[tuple[str, str], dict[str, Any]] = {
        (info.abspath, name): {
            "ctor": None,
            "declared": None,
            "evidence": [],
            "instantiated": False,
            "sub_block": False,
            "builders": [],
        }
        for info in infos
        for name in info.classes
    }
    for info in infos:
        if info.tree is not None and info.classes:
            functions = top_functions(info.tree)
            built = builders_of(functions, set(info.classes))
            for name, builders in built.items():
                result[(info.abspath, name)]["builders"] = builders
            # A builder of a model imported from elsewhere (`ssdlite320(...)` returns the
            # `SSD` of another module) uses this module's blocks too.
            imported = builders_of(functions, imported_classes(info.tree))
            users = users_of(functions, set(info.classes), {**imported, **built})
            for name, builders in users.items():
                if not result[(info.abspath, name)]["builders"]:
                    result[(info.abspath, name)]["users"] = builders
    for info in infos:
        if info.module_level:
            # Module-level models (`model = nn.Sequential(...)`) take the file's evidence.
            result[(info.abspath, MODULE_LEVEL)] = {"evidence": []}
    if not owners and not any(info.module_level for info in infos):
        return result
    by_path = {info.abspath: info for info in infos}
    # Call sites in the defining file come first.
    ordered = sorted(files, key=lambda item: (os.path.abspath(item[0]) not in by_path, item[0]))
    for path, source in ordered:
        abspath = os.path.abspath(path)
        if not path.endswith(SOURCE_SUFFIXES):
            continue
        if not _mentions(source, owners) and (abspath, MODULE_LEVEL) not in result:
            continue
        info = by_path.get(abspath)
        tree = info.tree if info is not None else (trees or {}).get(abspath) or parse(source, path)
        if tree is None:
            continue
        _scan_file(path, abspath, tree, owners, by_path, result, source)
        _note_foreign_builders(path, abspath, tree, owners, result)
    for info in infos:
        lines = info.source.splitlines()
        resized = bool(_RESIZING.search(info.source))
        for name, cls in info.classes.items():
            entry = result[(info.abspath, name)]
            entry["declared"] = _declared_comment(lines, cls.line, info.path) or _declared_config(
                declared, info, name
            )
            described = _described_input(cls.node, lines, info.path, resized)
            if described:
                entry["evidence"].append(described)
            example = (
                _example_input(cls.node, info.tree, info.path)
                if "example_input_array" in info.source
                else None
            )
            if example:
                entry["evidence"].append(example)
    return result


_WORD = re.compile(r"\w+")
#: A transform that resizes or crops images: a dataset's own size is not what a model gets.
_RESIZING = re.compile(rf"\b(?:{'|'.join(RESIZES)})\(")


def _mentions(source: str, names: dict[str, Any]) -> bool:
    """Whether the text names one of `names` (a set lookup per word: one alternation of
    every class name of a large run costs its length at every character)."""
    return not names.keys().isdisjoint(_WORD.findall(source))


def _naming_lines(source: str, names: dict[str, Any]) -> list[int]:
    """Per line number, how many lines up to it name one of `names` (a running count)."""
    counts = [0]
    for line in re.split(r"\r\n|\r|\n", source):
        counts.append(counts[-1] + (not names.keys().isdisjoint(_WORD.findall(line))))
    return counts


def _lines_name(node: ast.FunctionDef | ast.AsyncFunctionDef, naming: list[int]) -> bool:
    """Whether a function's lines (its decorators too) name one of the counted names."""
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    last = min(node.end_lineno or len(naming) - 1, len(naming) - 1)
    return naming[last] > naming[first - 1]


def _example_input(node: ast.ClassDef, tree: ast.Module | None, path: str) -> Evidence | None:
    """Lightning's `self.example_input_array = torch.zeros(2, 1, 28, 28)` (a tuple for
    several inputs): the model's own example of its input."""
    for inner in ast.walk(node):
        if not isinstance(inner, ast.Assign) or len(inner.targets) != 1:
            continue
        target = inner.targets[0]
        if not (
            isinstance(target, ast.Attribute)
            and target.attr == "example_input_array"
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
        ):
            continue
        aliases = import_aliases(tree) if tree is not None else {}
        values = inner.value.elts if isinstance(inner.value, ast.Tuple) else [inner.value]
        tensors = [_tensor_literal(value, aliases) for value in values]
        if not tensors or any(t is None for t in tensors):
            return None
        return {
            "kind": "tensor",
            "shapes": [t["shape"] for t in tensors if t],
            "dtypes": [t["dtype"] for t in tensors if t],
            "where": f"{path}:{inner.lineno}",
            "label": ", ".join(t["label"] for t in tensors if t) + " (example_input_array)",
        }
    return None


#: A name bound to a method call without arguments on a name (`GPT.get_default_config()`).
_FACTORY_CALL = re.compile(r"^\s*\w+\s*=\s*\w+\.\w+\(\)\s*$", re.MULTILINE)


def _class_node(name: str, path: str, owners: ClassOwners) -> ast.ClassDef | None:
    """The definition of the model class a name in `path` refers to."""
    owner = owners.resolve(name, path)
    found = owner.classes.get(name) if owner is not None else None
    return found.node if found is not None else None


def _resolve(name: str, path: str, owners: ClassOwners) -> FileInfo | None:
    """The class a name in `path` refers to (see `ClassOwners`)."""
    return owners.resolve(name, path)


def _scan_file(
    path: str,
    abspath: str,
    tree: ast.Module,
    owners: ClassOwners,
    by_path: dict[str, FileInfo],
    result: dict[tuple[str, str], dict[str, Any]],
    source: str,
) -> None:
    aliases = import_aliases(tree)
    bound = module_bindings(tree)
    data = module_literals(tree)
    # Options come from `add_argument` defaults: a file that never calls it has none.
    parses = "parse_" in source and "add_argument" in source
    helped = not parses and _HELPER_CALL.search(source)
    options = parsed_options(tree, abspath, direct=parses) if parses or helped else {}
    if _FACTORY_CALL.search(source):  # `model_config = GPT.get_default_config()`
        options.update(
            factory_configs(top_level(tree), lambda name: _class_node(name, path, owners))
        )
    used_here: set[tuple[str, str]] = set()
    called_here: set[tuple[str, str]] = set()
    if abspath in by_path:
        used_here.update((abspath, n) for n in by_path[abspath].classes)
        if by_path[abspath].module_level:
            used_here.add((abspath, MODULE_LEVEL))
    naming = _naming_lines(source, owners)
    # The file's images, and one sample of each of its datasets (`image, label = data[0]`).
    has_data = any(name in source for name in DATASETS)
    images = image_evidence(tree, aliases, path, options, owners, data) if has_data else None
    samples = dataset_samples(tree, aliases, images)
    # Module-level models (`model_0 = nn.Sequential(...)`) called on a tensor of the file.
    module_models = set(by_path[abspath].module_level) if abspath in by_path else set()
    # A notebook binds `net` anew cell after cell: the model checked is the last one, and
    # only the calls after it are its own.
    rebound = _last_bindings(tree, module_models)

    def models(call: ast.Call) -> tuple[str, str, str] | None:
        found = _called_class(call, abspath, owners)
        return (found[0].abspath, found[0].module, found[1]) if found is not None else None

    def ctor_of(call: ast.Call, local: LocalValues) -> dict[str, Any] | None:
        model = models(call)
        if model is None:
            return None
        names = bound - local.shadowing if model[0] == abspath else frozenset()
        return _ctor_args(call, path, names, options, local)

    # A block built in another model class's methods is not fed the file's data.
    model_lines = [
        (node.lineno, node.end_lineno or node.lineno)
        for node in tree.body
        if isinstance(node, ast.ClassDef) and node.name in owners
    ]
    # The file's functions that build a model (`def train(**hparams): Net(**hparams)`),
    # each valued by its first call here (`train(lr=1e-3, hidden=64)`).
    functions = _functions_by_name(tree, naming)
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    passed: dict[int, Passed] = {}

    def note_call(call: ast.Call, local: LocalValues) -> None:
        function = _called_function(call, functions)
        if function is not None and id(function) not in passed:
            given = local.passed(call)
            if given is not None:
                passed[id(function)] = given

    for scope in _callers_first(tree, functions):
        if scope is not tree and not _lines_name(scope, naming) and not _calls(scope, functions):
            continue  # nothing in it builds, calls or refers to a model class
        instances: dict[str, tuple[str, str]] = {}
        tensors: dict[str, Evidence] = {}
        local = LocalValues(models, aliases, classes)
        nodes = list(_scope_nodes(scope))
        local.changed = changed_names(nodes)
        if scope is not tree:
            local.shadowing = _local_names(scope, nodes)
        if id(scope) in passed:
            assert isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef))
            local.take_parameters(scope, passed[id(scope)])
        # A statement's own calls are read before the names it binds change (`v = Wrap(v)`).
        read_before: dict[int, dict[str, Any] | None] = {}
        for node in nodes:
            if isinstance(node, _BINDING):
                for call in _own_calls(node):
                    read_before[id(call)] = ctor_of(call, local)
                    note_call(call, local)
                local.bind(node)
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                if isinstance(target, ast.Name):
                    key = _instance_of(node.value, abspath, owners) or _wrapped(
                        node.value, instances
                    )
                    if key is not None:
                        instances[target.id] = key
                    else:
                        instances.pop(target.id, None)
                    tensor = _tensor_literal(node.value, aliases, data) or _sample(
                        target.id, sample_of(node.value), samples
                    )
                    if tensor is not None:
                        tensors[target.id] = tensor
                    else:
                        tensors.pop(target.id, None)
                elif isinstance(target, ast.Tuple) and target.elts:
                    # `image, label = train_data[0]`
                    first, value = target.elts[0], node.value
                    taken = value.value if isinstance(value, ast.Subscript) else None
                    if isinstance(first, ast.Name) and isinstance(taken, ast.Name):
                        tensor = _sample(first.id, taken.id, samples)
                        if tensor is not None:
                            tensors[first.id] = tensor
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                used = _resolve(node.id, abspath, owners)
                if used is not None:
                    result[(used.abspath, node.id)]["instantiated"] = True
            if not isinstance(node, ast.Call):
                continue
            note_call(node, local)
            called = _called_class(node, abspath, owners)
            if called is not None:
                info, name = called
                key = (info.abspath, name)
                used_here.add(key)
                if not _within(scope, model_lines):
                    called_here.add(key)
                entry = result[key]
                entry["instantiated"] = True
                if entry["ctor"] is None:
                    if id(node) in read_before:
                        entry["ctor"] = read_before[id(node)]
                    else:
                        entry["ctor"] = ctor_of(node, local)
                    if unknown_in(entry["ctor"]):
                        # Some sizes come from what the caller computes: guessed (the
                        # script's options, when it passes them, valued by their defaults).
                        optioned = _partial_args(node, path, options)
                        _note_partial(entry, optioned or entry["ctor"])
                        entry["ctor"] = None
                    if entry["ctor"] is None:
                        partial = _partial_args(node, path, options)
                        if partial is not None:
                            _note_partial(entry, partial)
            # model(x) / model.forward(x) / Net()(x)
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "forward":
                func = func.value
            key = None
            if isinstance(func, ast.Name) and func.id in instances:
                key = instances[func.id]
            elif isinstance(func, ast.Call):
                key = _instance_of(func, abspath, owners)
            if (
                key is None
                and isinstance(func, ast.Name)
                and func.id in module_models
                and node.lineno > rebound.get(func.id, 0)
            ):
                key = (abspath, f"{MODULE_LEVEL}:{func.id}")
                result.setdefault(key, {"evidence": []})
            # The positional tensors, and the tensors given by keyword (`unet(images,
            # time=torch.ones(2))`), which fill the required inputs the positional ones
            # leave; other keywords are options (`return_loss=True`).
            if key is not None and node.args:
                shapes = [_tensor_arg(a, tensors, aliases, data) for a in node.args]
                if all(s is not None for s in shapes):
                    named = {
                        kw.arg: found
                        for kw in node.keywords
                        if kw.arg and (found := _tensor_arg(kw.value, tensors, aliases, data))
                    }
                    result[key]["evidence"].append(
                        {
                            "kind": "tensor",
                            "shapes": [s["shape"] for s in shapes],
                            "dtypes": [s["dtype"] for s in shapes],
                            "keywords": {
                                k: {"shape": v["shape"], "dtype": v["dtype"], "label": v["label"]}
                                for k, v in named.items()
                            },
                            "where": f"{path}:{node.lineno}",
                            "label": ", ".join(s["label"] for s in shapes),
                        }
                    )
            summary = _summary_call(node, aliases, instances)
            if summary is not None:
                key, evidence = summary
                evidence["where"] = f"{path}:{node.lineno}"
                result[key]["evidence"].append(evidence)
    # Classes another module class builds with arguments (or hands on to be built) are its
    # building blocks: they are checked as part of it, with the arguments it gives them.
    for node in tree.body:
        if not isinstance(node, ast.ClassDef) or node.name not in owners:
            continue
        if not _body_names_model(node, naming):
            continue
        named: list[ast.Name] = []
        # Names that neither build another class nor hand it on: a bare call's function,
        # its bases (a subclass, `LevitDistilled(Levit)`, is another model), the types of
        # an `isinstance` test (`_init_weights`) and annotations.
        only_named = {id(n) for base in node.bases for n in ast.walk(base)}
        for inner in ast.walk(node):
            if isinstance(inner, ast.Name):
                if inner.id != node.name and inner.id in owners:
                    named.append(inner)
                continue
            if isinstance(inner, ast.Call) and not inner.args and not inner.keywords:
                only_named.add(id(inner.func))
            typed = _type_expression(inner)
            if typed is not None:
                only_named.update(id(n) for n in ast.walk(typed) if isinstance(n, ast.Name))
        for inner in named:
            if id(inner) not in only_named:
                used = _resolve(inner.id, abspath, owners)
                if used is not None:
                    result[(used.abspath, inner.id)]["sub_block"] = True
    # A data set is named in the text wherever it is used (`datasets.MNIST`, an import).
    image = images if used_here else None
    if image is not None:
        for key in used_here:
            # A model built in this file is used with the data: its channels count even
            # when they contradict the model's first layer. The other classes defined here
            # only take the size, when their channels agree.
            result[key]["evidence"].append({**image, "direct": key in called_here})


def _last_bindings(tree: ast.Module, names: set[str]) -> dict[str, int]:
    """The line of each name's last top-level binding (an assignment or a `def`)."""
    last: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in names:
            last[node.name] = node.end_lineno or node.lineno
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for inner in ast.walk(target):
                    if isinstance(inner, ast.Name) and inner.id in names:
                        last[inner.id] = node.end_lineno or node.lineno
    return last


def _sample(name: str, dataset: str | None, samples: dict[str, Evidence]) -> Evidence | None:
    """The tensor `name` holds when it is one sample of a dataset's (see `dataset_samples`)."""
    sample = samples.get(dataset or "")
    return {**sample, "label": f"`{name}`, {sample['label']},"} if sample else None


def _within(scope: ast.AST, spans: list[tuple[int, int]]) -> bool:
    """Whether a function scope lies within one of the line spans (the module's model
    classes): its lines are those of a method, or of a function nested in one."""
    line = getattr(scope, "lineno", None)
    return line is not None and any(first <= line <= last for first, last in spans)


def _body_names_model(node: ast.ClassDef, naming: list[int]) -> bool:
    """Whether a class's body has a line that names a model class (see `_naming_lines`): a
    class whose body names none builds no other one."""
    first = node.body[0].lineno
    if first == node.lineno:
        return True  # a class on one line
    for decorator in getattr(node.body[0], "decorator_list", []):
        first = min(first, decorator.lineno)
    last = min(node.end_lineno or len(naming) - 1, len(naming) - 1)
    return naming[last] > naming[first - 1]


def _type_expression(node: ast.AST) -> ast.AST | None:
    """The expression that names types in a node: an `isinstance` test's second argument,
    an argument's, a return's or an annotated assignment's annotation."""
    if isinstance(node, ast.Call):
        func = node.func
        if (
            isinstance(func, ast.Name)
            and func.id in ("isinstance", "issubclass")
            and len(node.args) == 2
        ):
            return node.args[1]
        return None
    if isinstance(node, ast.arg):
        return node.annotation
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return node.returns
    if isinstance(node, ast.AnnAssign):
        return node.annotation
    return None


def builder_functions(
    tree: ast.Module, classes: set[str], mentioned: bool = False
) -> dict[str, list[str]]:
    """Per class, the module's functions that build it and need no argument, in file order.

    `resnet18(*, weights=None, progress=True, **kwargs)` builds `ResNet` through
    `_resnet(BasicBlock, [2, 2, 2, 2], weights, progress, **kwargs)`: a function counts
    when it calls the class, or calls another function of the module that does. With
    `mentioned`, a builder of any model counts for the classes it names (`BasicBlock`).
    """
    functions = top_functions(tree)
    found = builders_of(functions, classes)
    return users_of(functions, classes, found) if mentioned else found


def top_functions(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    return {
        node.name: node
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


def builders_of(
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef], classes: set[str]
) -> dict[str, list[str]]:
    """`builder_functions` without `mentioned`, from the module's top-level functions."""
    calls = {name: _returned_calls(node) for name, node in functions.items()}
    builds: dict[str, set[str]] = {name: set(calls[name] & classes) for name in functions}
    changed = True
    while changed:  # through helper chains (`resnet18` -> `_resnet` -> `ResNet`)
        changed = False
        for name in functions:
            for callee in calls[name] & set(functions):
                extra = builds[callee] - builds[name]
                if extra:
                    builds[name] |= extra
                    changed = True
    found: dict[str, list[str]] = {}
    for name, node in functions.items():
        if not builds[name] or not _needs_no_arguments(node):
            continue
        for cls in sorted(builds[name]):
            found.setdefault(cls, []).append(name)
    return found


def users_of(
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
    classes: set[str],
    builders: dict[str, list[str]],
) -> dict[str, list[str]]:
    """`builder_functions` with `mentioned`, given the module's builders."""
    names = {b for found in builders.values() for b in found}
    named = {n: _names_in(functions[n]) for n in functions if n in names}
    found: dict[str, list[str]] = {}
    for cls in classes:
        users = [n for n in named if cls in named[n]]
        if users:
            found[cls] = users
    return found


def _note_foreign_builders(
    path: str,
    abspath: str,
    tree: ast.Module,
    owners: ClassOwners,
    result: dict[tuple[str, str], dict[str, Any]],
) -> None:
    """A file's argument-free builders of a class another file defines (`build_sam_vit_b()`
    in `build_sam.py` builds the `Sam` of `sam.py`), noted for a class with no builder of
    its own module: `{"path", "module", "name"}` each, in `foreign_builders`."""
    imported = imported_classes(tree)
    if not imported:
        return
    module: str | None = None
    for name, builders in builders_of(top_functions(tree), imported).items():
        owner = owners.resolve(name, path)
        entry = result.get((owner.abspath, name)) if owner is not None else None
        if owner is None or owner.abspath == abspath or entry is None or entry["builders"]:
            continue
        module = module or module_identity(abspath, set())[1]
        found = entry.setdefault("foreign_builders", [])
        found += [{"path": abspath, "module": module, "name": b} for b in builders]


def imported_classes(tree: ast.Module) -> set[str]:
    """Names a module imports that look like classes (`from .ssd import SSD`)."""
    return {
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.name[:1].isupper()
    }


def _names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


#: `_returned_calls` of each function read so far (a file's builders are looked for once
#: for its own classes, once for those it imports, and as another file's evidence).
_RETURNED: weakref.WeakKeyDictionary[ast.AST, frozenset[str]] = weakref.WeakKeyDictionary()


def _returned_calls(node: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
    """Names of the functions or classes whose result the function returns.

    `return ResNet(...)`, or `model = ResNet(...)` and later `return model`; a function that
    returns anything else (a training loop's `main()`) builds nothing and is never called.
    """
    found = _RETURNED.get(node)
    if found is None:
        found = _RETURNED[node] = frozenset(_read_returned_calls(node))
    return found


def _read_returned_calls(node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    made: dict[str, set[str]] = {}
    returns: list[ast.expr | None] = []
    #: `model_cls = EfficientNet` (a class chosen, then handed to a helper).
    aliases: dict[str, set[str]] = {}
    for inner in ast.walk(node):
        if isinstance(inner, ast.Assign) and len(inner.targets) == 1:
            target, value = inner.targets[0], inner.value
            if isinstance(target, ast.Name) and isinstance(value, ast.Name):
                aliases.setdefault(target.id, set()).add(value.id)

    def handed(args: list[ast.expr]) -> set[str]:
        found = {a.id for a in args if isinstance(a, ast.Name)}
        return found.union(*(aliases.get(name, set()) for name in found))

    for inner in ast.walk(node):
        if isinstance(inner, ast.Assign) and len(inner.targets) == 1:
            target, value = inner.targets[0], inner.value
            if (
                isinstance(target, ast.Name)
                and isinstance(value, ast.Call)
                and isinstance(value.func, ast.Name)
            ):
                made.setdefault(target.id, set()).add(value.func.id)
                made[target.id].update(handed(value.args))
        elif isinstance(inner, ast.Return):
            returns.append(inner.value)
    names: set[str] = set()
    for value in returns:
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
            names.add(value.func.id)
            # `build_model_with_cfg(ResNet, variant, pretrained, **kwargs)`: a library helper
            # handed the class builds it.
            names.update(handed(value.args))
        elif isinstance(value, ast.Name) and value.id in made:
            names |= made[value.id]
        else:
            return set()
    return names


def _needs_no_arguments(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    args = node.args
    positional = args.posonlyargs + args.args
    if len(args.defaults) < len(positional):
        return False
    return all(default is not None for default in args.kw_defaults)


def _functions_by_name(
    tree: ast.Module, naming: list[int]
) -> dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]]:
    """The module's functions that name a model class, by name, in source order (a
    notebook may define `train` again)."""
    found: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _lines_name(node, naming):
            found.setdefault(node.name, []).append(node)
    return found


def _called_function(
    call: ast.Call, functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]]
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The module function a call runs: the last one of its name defined above it."""
    if not isinstance(call.func, ast.Name) or call.func.id not in functions:
        return None
    defined = functions[call.func.id]
    above = [f for f in defined if f.lineno < call.lineno]
    return above[-1] if above else defined[-1]


def _scopes(tree: ast.Module) -> Iterator[ast.AST]:
    yield tree
    for node in walk_statements(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def _callers_first(
    tree: ast.Module, functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]]
) -> list[ast.AST]:
    """The module and its functions, each module function after the module's functions that
    call it (`main()` before the `train(cfg)` it calls, wherever each is written), so that a
    function's parameters hold what its first caller passes; others in source order."""
    scopes = list(_scopes(tree))
    if not functions:
        return scopes
    top = {id(node) for node in tree.body}
    callees: dict[int, set[int]] = {}
    for scope in scopes:
        if scope is tree or id(scope) in top:
            called = {
                id(function)
                for node in _scope_nodes(scope)
                if isinstance(node, ast.Call)
                and (function := _called_function(node, functions)) is not None
                and function is not scope
            }
            callees[id(scope)] = called
    by_id = {id(s): s for s in scopes}
    position = {key: i for i, key in enumerate(by_id)}
    waiting = {key: sum(key in c for c in callees.values()) for key in by_id}
    ordered: list[ast.AST] = []
    ready = [s for s in scopes if not waiting[id(s)]]
    while ready:
        scope = ready.pop(0)
        ordered.append(scope)
        for callee in sorted(callees.get(id(scope), ()), key=position.__getitem__):
            waiting[callee] -= 1
            if not waiting[callee]:
                ready.append(by_id[callee])
    placed = {id(s) for s in ordered}
    return ordered + [s for s in scopes if id(s) not in placed]  # calls in a cycle


def _local_names(
    function: ast.FunctionDef | ast.AsyncFunctionDef, nodes: list[ast.AST]
) -> frozenset[str]:
    """A function's parameters and the names it assigns: they hide the module's names of
    the same spelling (`batch_size` the parameter, not the module's constant)."""
    spec = function.args
    names = {a.arg for a in [*spec.posonlyargs, *spec.args, *spec.kwonlyargs]}
    names |= {a.arg for a in (spec.vararg, spec.kwarg) if a is not None}
    names |= {
        node.id for node in nodes if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
    }
    return frozenset(names)


def _calls(
    scope: ast.AST, functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]]
) -> bool:
    """Whether a scope calls one of the module's functions that build a model."""
    return bool(functions) and any(
        isinstance(node, ast.Call) and _called_function(node, functions) is not None
        for node in _scope_nodes(scope)
    )


#: `_scope_nodes` of each scope read so far: the order of scopes, the test of whether one
#: calls a builder and the scan itself read them.
_SCOPE_NODES: weakref.WeakKeyDictionary[ast.AST, tuple[ast.AST, ...]] = weakref.WeakKeyDictionary()


def _scope_nodes(scope: ast.AST) -> tuple[ast.AST, ...]:
    """Nodes of a scope in source order, not entering nested functions or classes."""
    found = _SCOPE_NODES.get(scope)
    if found is not None:
        return found
    nodes = []
    stack = list(reversed(list(ast.iter_child_nodes(scope))))
    while stack:
        node = stack.pop()
        nodes.append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))
    found = _SCOPE_NODES[scope] = tuple(nodes)
    return found


#: Statements that bind names (read by `LocalValues`).
_BINDING = (
    ast.Assign,
    ast.AnnAssign,
    ast.AugAssign,
    ast.For,
    ast.AsyncFor,
    ast.With,
    ast.AsyncWith,
)


def _own_calls(statement: ast.stmt) -> Iterator[ast.Call]:
    """The calls in a binding statement's own expressions (not in its body)."""
    if isinstance(statement, (ast.For, ast.AsyncFor)):
        parts: list[ast.AST] = [statement.iter]
    elif isinstance(statement, (ast.With, ast.AsyncWith)):
        parts = [item.context_expr for item in statement.items]
    else:
        parts = [statement.value] if statement.value is not None else []
    for part in parts:
        yield from (n for n in ast.walk(part) if isinstance(n, ast.Call))


def _call_class_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _instance_of(value: ast.AST, abspath: str, owners: ClassOwners) -> tuple[str, str] | None:
    """`Net(...)`, `Net(...).to(device)`, ... -> the class key."""
    while (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in SAME_MODEL
    ):
        value = value.func.value
    if not isinstance(value, ast.Call):
        return None
    called = _called_class(value, abspath, owners)
    return (called[0].abspath, called[1]) if called is not None else None


def _called_class(call: ast.Call, path: str, owners: ClassOwners) -> tuple[FileInfo, str] | None:
    """The linted model class a call builds (`Net(...)`, `models.Net(...)`) and its name;
    None for an installed package's (`nn.LeakyReLU(...)`), whatever the tree defines."""
    name = _call_class_name(call)
    if name is None or owners.foreign(call.func, path):
        return None
    info = _resolve(name, path, owners)
    return (info, name) if info is not None else None


def _wrapped(value: ast.AST, instances: dict[str, tuple[str, str]]) -> tuple[str, str] | None:
    """`DDP(model, device_ids=[rank])`, `torch.compile(model)` -> the wrapped model's class key."""
    while (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in SAME_MODEL
    ):
        value = value.func.value
    if not isinstance(value, ast.Call) or _call_class_name(value) not in _WRAPPERS:
        return None
    first = value.args[0] if value.args else None
    return instances.get(first.id) if isinstance(first, ast.Name) else None


def _ctor_args(
    call: ast.Call,
    path: str,
    bound: frozenset[str] = frozenset(),
    options: dict[str, Any] | None = None,
    local: LocalValues | None = None,
) -> dict[str, Any] | None:
    """Constructor arguments when all are literals, options of the script's command line
    (`args.emsize`, valued by its argparse default), values the calling scope gives its
    names (`moss = {...}`, `vit = ViT(...)`: see `call_values`), or names defined in the
    class's own module (`ResNet(BasicBlock, [2, 2, 2, 2])` in a factory function next to
    the class), which the worker looks up as `{"$name": "BasicBlock"}`."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for arg in call.args:
        if isinstance(arg, ast.Starred):
            # `*sizes`, valued by the function's caller (`local.take_parameters`)
            items = local.value(arg.value) if local is not None else MISSING
            items = items.get("$tuple", MISSING) if isinstance(items, dict) else items
            if not isinstance(items, list):
                return None
            args.extend(items)
            continue
        value = _argument_value(arg, bound, options, local)
        if value is MISSING:
            return None
        args.append(value)
    for keyword in call.keywords:
        if keyword.arg is None:  # `**hparams`, valued likewise
            spread = local.value(keyword.value) if local is not None else MISSING
            if not plain_dict(spread):
                return None
            kwargs.update(spread)
            continue
        value = _argument_value(keyword.value, bound, options, local)
        if value is MISSING:
            return None
        kwargs[keyword.arg] = value
    if any(holds_unknown(v) and not guessed_part(v) for v in [*args, *kwargs.values()]):
        return None  # a size to guess inside a list or a dictionary
    return {"args": args, "kwargs": kwargs, "where": f"{path}:{call.lineno}"}


def _argument_value(
    node: ast.expr,
    bound: frozenset[str],
    options: dict[str, Any] | None,
    local: LocalValues | None,
) -> Any:
    """One argument of a constructor call, encoded; `UNKNOWN` for a size the function
    computes from what its caller passed; MISSING when it cannot be had."""
    value = literal(node)
    if value is MISSING and isinstance(node, ast.Name) and _factory_made(node.id, options):
        return _option_value(node, options or {}, whole=True)  # built by the worker
    if value is MISSING:
        value = _option_value(node, options or {})
    if value is MISSING and local is not None:
        value = local.value(node)
    value = encoded(value) if value is not MISSING else value
    if value is MISSING or not _jsonable(value):
        name = dotted(node)
        if name is not None and name.split(".")[0] in bound:
            return {"$name": name}
        return UNKNOWN if local is not None else MISSING
    return value


def _note_partial(entry: dict[str, Any], partial: dict[str, Any]) -> None:
    """Keep a call site's partly known arguments: the first call site's, unless it knows
    nothing (`GPT(config)` in a method, `config` its own) and this one knows some."""
    kept = entry.get("partial")
    if kept is None or (_knows_nothing(kept) and not _knows_nothing(partial)):
        entry["partial"] = partial


def _knows_nothing(partial: dict[str, Any]) -> bool:
    return all(v == UNKNOWN for v in [*partial["args"], *partial["kwargs"].values()])


def unknown_in(ctor: dict[str, Any] | None) -> bool:
    """Whether a call site's arguments leave a size to guess (`UNKNOWN`, or a model handed
    on whose own sizes are to guess)."""
    if ctor is None:
        return False
    given = [*ctor["args"], *ctor["kwargs"].values()]
    return UNKNOWN in given or any(guessed_part(v) or option_objects.is_options(v) for v in given)


def _factory_made(name: str, options: dict[str, Any] | None) -> bool:
    """Whether a name holds a configuration a model class's factory made (`config_factories`)."""
    found = (options or {}).get(name)
    return found is not None and option_objects.MADE_BY in vars(found)


def _option_value(node: ast.expr, options: dict[str, Any], whole: bool = False) -> Any:
    """The argparse default an `args.name` argument takes (MISSING when it is no option);
    `args` itself, with `whole`, as `option_objects.as_argument` writes it."""
    if whole and isinstance(node, ast.Name) and node.id in options:
        value = option_objects.as_argument(options[node.id])
        return value if _jsonable(value) else MISSING
    value = option_objects.option_default(node, options)
    if value is None or value == option_objects.UNKNOWN:
        return MISSING  # set from the script's data
    return value if _jsonable(value) and value is not None else MISSING


def _partial_args(call: ast.Call, path: str, options: dict[str, Any]) -> dict[str, Any] | None:
    """The arguments of a call site that passes some options of the script's command line
    (`RNNModel(args.model, ntokens, args.emsize)`): literals and options valued, the rest
    (sizes the script reads from its data) marked `UNKNOWN`, to be guessed."""
    if not options or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    if any(kw.arg is None for kw in call.keywords):
        return None
    nodes = [*call.args, *(k.value for k in call.keywords)]
    values = []
    for node in nodes:
        value = literal(node)
        if value is MISSING:
            value = _option_value(node, options, whole=True)
        values.append(encoded(value) if value is not MISSING and _jsonable(value) else UNKNOWN)
    if not any(_option_value(node, options, whole=True) is not MISSING for node in nodes):
        return None
    args = values[: len(call.args)]
    kwargs = {kw.arg: v for kw, v in zip(call.keywords, values[len(call.args) :], strict=True)}
    return {"args": args, "kwargs": kwargs, "where": f"{path}:{call.lineno}"}


def module_bindings(tree: ast.Module) -> frozenset[str]:
    """Names bound at the top level of a module (definitions, imports, assignments)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return frozenset(names)


def _jsonable(value: object) -> bool:
    if value is None or isinstance(value, (bool, int, float, str)):
        return not (isinstance(value, float) and value != value)
    if isinstance(value, (list, tuple)):
        return all(_jsonable(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _jsonable(v) for k, v in value.items())
    return False


#: Tensor methods that keep the shape: moved to a device, copied, or of another dtype.
_SAME_SHAPE = ("to", "cuda", "cpu", "contiguous", "detach", "clone", "requires_grad_")
_CASTS = ("float", "long")
#: Integer dtypes an index input may have (an embedding takes int64 and int32).
_LONG_DTYPES = ("long", "int64", "int", "int32")


def _tensor_literal(
    node: ast.AST, aliases: dict[str, str], data: dict[str, object] | None = None
) -> Evidence | None:
    """`torch.randn(4, 3, 32, 32)`, `torch.zeros((2, 8), dtype=torch.long)`, ..., also moved
    or cast on the way (`torch.randn(2, 3, 256, 256).cuda()`, `.to(device)`, `.long()`), or
    wrapped in a `Variable`; `data`: module-level literals (`torch.LongTensor(x_data)`)."""
    cast = None
    while isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Attribute) and node.func.attr in (*_SAME_SHAPE, *_CASTS))
        or ((qualify(node.func, aliases) or "").endswith("Variable") and len(node.args) == 1)
    ):
        if not isinstance(node.func, ast.Attribute) or node.func.attr == "Variable":
            node = node.args[0]
            continue
        if node.func.attr in _CASTS:
            cast = cast or node.func.attr
        elif node.func.attr == "to":
            for arg in [*node.args, *(kw.value for kw in node.keywords)]:
                name = (dotted(arg) or "").rsplit(".", 1)[-1]
                if name in _LONG_DTYPES:
                    cast = cast or "long"
                elif name in ("float", "float32"):
                    cast = cast or "float"
                elif name.startswith(("float", "bfloat", "half", "int", "uint", "bool")):
                    return None
        node = node.func.value
    found = _factory_tensor(node, aliases, data or {})
    if found is not None and cast is not None:
        found = {**found, "dtype": cast}
    return found


def _factory_tensor(
    node: ast.AST, aliases: dict[str, str], data: dict[str, object]
) -> Evidence | None:
    if not isinstance(node, ast.Call):
        return None
    qual = qualify(node.func, aliases) or ""
    if not qual.startswith("torch."):
        return None
    fname = qual[len("torch.") :]
    dtype = "float"
    for kw in node.keywords:
        if kw.arg == "dtype":
            d = (dotted(kw.value) or "").rsplit(".", 1)[-1]
            if d in _LONG_DTYPES:
                dtype = "long"
            elif d not in ("float", "float32"):
                return None
        elif kw.arg not in ("device", "requires_grad"):
            return None
    shape: tuple[int, ...] | None = None
    if fname in _TENSOR_FACTORIES:
        if len(node.args) == 1:
            shape = int_tuple(node.args[0])
        elif node.args:
            parts = [int_tuple(a) for a in node.args]
            if all(p is not None and len(p) == 1 for p in parts):
                shape = tuple(p[0] for p in parts if p)
    elif fname == "randint" and node.args:
        shape = int_tuple(node.args[-1]) if len(node.args) >= 2 else None
        dtype = "long" if dtype == "float" else dtype
    elif fname in ("tensor", "Tensor", "LongTensor", "FloatTensor") and len(node.args) == 1:
        given = node.args[0]
        value = data.get(given.id, MISSING) if isinstance(given, ast.Name) else literal(given)
        if fname != "tensor" and not isinstance(value, (list, tuple)):
            return None  # `torch.Tensor(3)`: a size, not data
        shape, kind = _nested_shape(value)
        if shape is None:
            return None
        if fname == "LongTensor" or (kind is int and fname == "tensor" and dtype == "float"):
            dtype = "long"
    if not shape or any(d <= 0 for d in shape) or len(shape) > 6:
        return None
    text = f"torch.{fname}({', '.join(map(str, shape))})"
    return {"shape": list(shape), "dtype": dtype, "label": text}


def _nested_shape(value: object) -> tuple[tuple[int, ...] | None, type | None]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (), type(value)
    if isinstance(value, (list, tuple)) and value:
        subs = [_nested_shape(v) for v in value]
        first = subs[0]
        if first[0] is None or any(s[0] != first[0] for s in subs):
            return None, None
        kind = float if any(s[1] is float for s in subs) else int
        return (len(value), *first[0]), kind
    return None, None


def _tensor_arg(
    node: ast.AST,
    tensors: dict[str, Evidence],
    aliases: dict[str, str],
    data: dict[str, object] | None = None,
) -> Evidence | None:
    if isinstance(node, ast.Name):
        return tensors.get(node.id)
    return _tensor_literal(node, aliases, data)


def _summary_call(
    call: ast.Call, aliases: dict[str, str], instances: dict[str, tuple[str, str]]
) -> tuple[tuple[str, str], Evidence] | None:
    qual = qualify(call.func, aliases) or ""
    if qual not in ("torchsummary.summary", "torchinfo.summary") or not call.args:
        return None
    model = call.args[0]
    if not isinstance(model, ast.Name) or model.id not in instances:
        return None
    size_node = call.args[1] if len(call.args) > 1 else None
    for kw in call.keywords:
        if kw.arg == "input_size":
            size_node = kw.value
    if size_node is None:
        return None
    shape = int_tuple(size_node)
    if shape is None:
        return None
    dims: list[int | None] = list(shape)
    if qual == "torchsummary.summary":
        dims = [None, *dims]  # torchsummary sizes leave out the batch
    return instances[model.id], {
        "kind": "tensor",
        "shapes": [dims],
        "dtypes": ["float"],
        "label": f"{qual.split('.')[0]} input_size={tuple(shape)}",
    }


def _described_input(
    node: ast.ClassDef, lines: list[str], path: str, resized: bool = False
) -> Evidence | None:
    """An input size the class's docstring or comments name ("for 28x28 MNIST digits").

    Read: the docstring, the comments just above the class and those inside it. A size
    counts when its line also says it is about the input (images, digits, crops, pixels)
    or names a dataset; a dataset name alone gives that dataset's size when no other
    dataset of another size is named, unless the file resizes images (`resized`: AlexNet
    on Fashion-MNIST resized to 224).
    """
    texts: list[tuple[str, int, str]] = []
    doc = ast.get_docstring(node)
    if doc:
        texts.extend((line, node.lineno, "docstring") for line in doc.splitlines())
    first = node.lineno - 1
    while first >= 1 and lines[first - 1].lstrip().startswith("#"):
        first -= 1
    for number in range(first + 1, (node.end_lineno or node.lineno) + 1):
        match = _COMMENT.search(lines[number - 1]) if number <= len(lines) else None
        if match and number != node.lineno:
            texts.append((match.group("text"), number, "comment"))
    # A size the prose writes out, else the size of the only dataset it names ("CelebA,
    # MNIST or STL10" in a usage example says none).
    written = [(size, n, k) for t, n, k in texts if (size := _size_in_text(t)) is not None]
    named = {tuple(s): (n, k) for t, n, k in reversed(texts) for s in _named_sizes(t)}
    if resized:
        named = {}
    if written:
        found, number, kind = written[0]
    elif len(named) == 1:
        size, (number, kind) = next(iter(named.items()))
        found = list(size)
    else:
        return None
    label = "docstring" if kind == "docstring" else f"comment at line {number}"
    return {"kind": "image", "shape": found, "where": f"{path}:{number}", "label": label}


def _named_sizes(text: str) -> list[tuple[int | None, ...]]:
    """The sizes of the datasets a line of prose names (MNIST: 1x28x28)."""
    sizes = []
    for named in _TEXT_DATASETS.finditer(text):
        key = re.sub(r"[-_ ]", "", named.group("name")).upper()
        size = next((v for k, v in DATASETS.items() if k.upper() == key), None)
        if size is not None and size[1] is not None:
            sizes.append(size)
    return sizes


def _size_in_text(text: str) -> list[int | None] | None:
    """[channels or None, height, width] that one line of prose writes out ("28x28 MNIST
    digits"), or None."""
    named = _TEXT_DATASETS.search(text)
    dataset = None
    if named is not None:
        key = re.sub(r"[-_ ]", "", named.group("name")).upper()
        dataset = next((v for k, v in DATASETS.items() if k.upper() == key), None)
    sizes = [
        m
        for m in _TEXT_SIZE.finditer(text)
        if int(m.group("h")) >= 8 and int(m.group("w")) >= 8 and not _PART_SIZE.match(text, m.end())
    ]
    if sizes and (dataset is not None or _TEXT_CONTEXT.search(text)):
        best = max(sizes, key=lambda m: int(m.group("h")))
        channels = int(best.group("c")) if best.group("c") else None
        if channels is None and dataset is not None:
            channels = dataset[0]
        return [channels, int(best.group("h")), int(best.group("w"))]
    return None


def _parse_shape(text: str) -> list[list[int | None]] | None:
    """`(1, 3, 224, 224)` or `[(1, 10), (1, 5)]`, with `N`/`None` for a free batch size."""
    cleaned = re.sub(r"\b[A-Za-z_]\w*\b", "None", text)
    try:
        value = ast.literal_eval(cleaned)
    except (ValueError, SyntaxError):
        return None
    return _shape_list(value)


def _shape_list(value: object) -> list[list[int | None]] | None:
    def one(v: object) -> list[int | None] | None:
        if (
            isinstance(v, (list, tuple))
            and v
            and all(
                x is None or (isinstance(x, int) and not isinstance(x, bool) and x > 0) for x in v
            )
        ):
            return list(v)
        return None

    single = one(value)
    if single is not None:
        return [single]
    if isinstance(value, (list, tuple)) and value:
        shapes = [one(v) for v in value]
        if all(s is not None for s in shapes):
            return shapes  # type: ignore[return-value]
    return None


def _declared_comment(lines: list[str], line: int, path: str) -> dict[str, Any] | None:
    for number in (line, line - 1):
        if 1 <= number <= len(lines):
            match = _DECLARED.search(lines[number - 1])
            if match:
                shapes = _parse_shape(match.group("shape"))
                if shapes:
                    wanted = (match.group("dtype") or "").lower()
                    dtype = "long" if wanted in ("long", "int") else "float"
                    return {
                        "shapes": shapes,
                        "dtypes": [dtype] * len(shapes),
                        "where": f"{path}:{number}",
                    }
    return None


def _declared_config(
    declared: dict[str, dict] | None, info: FileInfo, name: str
) -> dict[str, Any] | None:
    if not declared:
        return None
    rel = info.abspath.replace(os.sep, "/")
    for key, spec in declared.items():
        if not isinstance(spec, dict) or ":" not in key:
            continue
        module, _, cls = key.rpartition(":")
        if cls != name:
            continue
        module_path = module.replace(".", "/")
        if not (
            module == info.module
            or info.module.endswith("." + module)
            or rel.endswith("/" + module_path + ".py")
            or rel.endswith("/" + module.lstrip("./"))
        ):
            continue
        shapes = _shape_list(spec.get("input-shape") or spec.get("input-shapes"))
        dtype = str(spec.get("dtype", "float")).lower()
        args = spec.get("args")
        entry: dict[str, Any] = {"where": f"[tool.torchlint.shapes] {key!r}"}
        if shapes:
            entry["shapes"] = shapes
            entry["dtypes"] = ["long" if dtype in ("long", "int", "int64") else "float"] * len(
                shapes
            )
        if isinstance(args, dict):
            entry["ctor"] = {"args": [], "kwargs": args, "where": entry["where"]}
        elif isinstance(args, list):
            entry["ctor"] = {"args": args, "kwargs": {}, "where": entry["where"]}
        return entry
    return None
