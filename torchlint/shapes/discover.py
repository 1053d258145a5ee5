"""Which linted files define `nn.Module` subclasses, and how each file is imported.

Runs in the linting process (no torch): a cheap text check, then `ast`. A class counts when
one of its bases is a known module base or another class that counts, matched by simple
name across all the linted files (the worker checks the real class hierarchy later).
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field

from torchlint.shapes.astutil import dotted, import_aliases, parse, qualify

#: Base names that make a class an nn.Module (last dotted component).
MODULE_BASES = frozenset(
    {
        "Module",
        "Sequential",
        "ModuleList",
        "ModuleDict",
        "PreTrainedModel",
        "LightningModule",
    }
)
_TEXT_HINTS = ("Module", "Sequential", "PreTrainedModel")


@dataclass
class ClassInfo:
    name: str
    line: int
    bases: list[str]
    node: ast.ClassDef


@dataclass
class FileInfo:
    path: str  #: as given by the caller (used in diagnostics)
    abspath: str
    source: str
    tree: ast.Module | None
    module: str  #: dotted import name ("pkg.model")
    root: str  #: the sys.path entry that makes `module` importable
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    #: Module-level names bound to an `nn.Sequential(...)`-style constructor call, and
    #: argument-free functions that return one.
    module_level: list[str] = field(default_factory=list)


#: What the shape checks read: Python files, and notebooks by their joined code cells.
SOURCE_SUFFIXES = (".py", ".ipynb")


def is_notebook(path: str) -> bool:
    return path.endswith(".ipynb")


def module_identity(abspath: str, known: set[str]) -> tuple[str, str]:
    """(root, dotted module name) for a file, following `__init__.py` files upward. A
    notebook, which nothing imports, is named after its file, made an identifier."""
    directory, filename = os.path.split(abspath)
    stem = os.path.splitext(filename)[0]
    if is_notebook(abspath):
        return directory, "_notebook_" + re.sub(r"\W", "_", stem)
    parts = [] if stem == "__init__" else [stem]
    while True:
        init = os.path.join(directory, "__init__.py")
        if not (init in known or os.path.isfile(init)):
            break
        parent, package = os.path.split(directory)
        if not package.isidentifier() or parent == directory:
            break
        parts.insert(0, package)
        directory = parent
    return directory, ".".join(parts) or stem


def might_define_modules(source: str) -> bool:
    if "Sequential(" in source:
        return True
    return "class " in source and any(h in source for h in _TEXT_HINTS)


def scan(
    files: list[tuple[str, str]], trees: dict[str, ast.Module] | None = None
) -> list[FileInfo]:
    """Parse the candidate files and mark their nn.Module classes (`trees`, when given, gets
    every tree parsed, by abspath, those of files without a model too)."""
    known = {os.path.abspath(p) for p, _ in files}
    infos: list[FileInfo] = []
    for path, source in files:
        if not path.endswith(SOURCE_SUFFIXES):
            continue
        if not might_define_modules(source):
            continue
        tree = parse(source, path)
        if tree is None:
            continue
        abspath = os.path.abspath(path)
        if trees is not None:
            trees[abspath] = tree
        root, module = module_identity(abspath, known)
        info = FileInfo(path, abspath, source, tree, module, root)
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.bases:
                bases = [b for b in (dotted(base) for base in node.bases) if b]
                info.classes[node.name] = ClassInfo(node.name, node.lineno, bases, node)
        info.module_level = _module_level_models(tree)
        infos.append(info)
    _keep_module_classes(infos)
    return [i for i in infos if i.classes or i.module_level]


def _keep_module_classes(infos: list[FileInfo]) -> None:
    """Keep only classes that derive (by name, transitively) from a module base."""
    module_names = set(MODULE_BASES)
    changed = True
    while changed:
        changed = False
        for info in infos:
            for cls in info.classes.values():
                if cls.name not in module_names and any(
                    b.rsplit(".", 1)[-1] in module_names for b in cls.bases
                ):
                    module_names.add(cls.name)
                    changed = True
    for info in infos:
        info.classes = {
            name: cls
            for name, cls in info.classes.items()
            if any(b.rsplit(".", 1)[-1] in module_names for b in cls.bases)
        }


def _module_level_models(tree: ast.Module) -> list[str]:
    """Names assigned `nn.Sequential(...)` (or another torch.nn container) at top level."""
    aliases = import_aliases(tree)
    names = []
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Call)
        ):
            qual = qualify(node.value.func, aliases) or ""
            if qual in _SEQUENTIAL:
                names.append(node.targets[0].id)
        elif isinstance(node, ast.FunctionDef) and _returns_sequential(node, aliases):
            names.append(node.name)
    return names


_SEQUENTIAL = ("torch.nn.Sequential", "torch.nn.modules.container.Sequential")


def _returns_sequential(node: ast.FunctionDef, aliases: dict[str, str]) -> bool:
    """A factory (`def net(width=64): return nn.Sequential(...)`) that needs no argument."""
    args = node.args
    if len(args.defaults) < len(args.posonlyargs + args.args) or None in args.kw_defaults:
        return False
    returns = [n for n in ast.walk(node) if isinstance(n, ast.Return)]
    return bool(returns) and all(
        isinstance(r.value, ast.Call) and (qualify(r.value.func, aliases) or "") in _SEQUENTIAL
        for r in returns
    )
