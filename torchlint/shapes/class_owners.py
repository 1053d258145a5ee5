"""Which linted class a name in a file refers to.

A name that one linted file defines as a model class is that class. A name that several files
define (every file of a model zoo has its `ViT`) is the one the file's imports bring: its own,
or the one its `from ... import` names, followed through the packages that re-export it
(`from vit_pytorch import ViT`, whose `__init__.py` imports it from `vit_pytorch.vit`), with
relative imports read as Python reads them. Nothing is imported; the files are only parsed.
"""

from __future__ import annotations

import ast
import os

from torchlint.shapes.astutil import import_aliases, parse, walk_statements
from torchlint.shapes.discover import SOURCE_SUFFIXES, FileInfo, module_identity

#: How many re-exporting packages a name is followed through.
_MAX_HOPS = 4


class ClassOwners(dict[str, list[FileInfo]]):
    """The files that define each model class name, by name; `resolve` picks one."""

    def __init__(
        self,
        infos: list[FileInfo],
        files: list[tuple[str, str]],
        trees: dict[str, ast.Module] | None = None,
    ) -> None:
        super().__init__()
        for info in infos:
            for name in info.classes:
                self.setdefault(name, []).append(info)
        self._sources = {os.path.abspath(p): s for p, s in files if p.endswith(SOURCE_SUFFIXES)}
        self._known = set(self._sources)
        self._trees = {**(trees or {}), **{i.abspath: i.tree for i in infos if i.tree}}
        self._modules: dict[str, str] | None = None
        self._imports: dict[str, dict[str, str]] = {}

    def resolve(self, name: str, path: str) -> FileInfo | None:
        """The class `name` in file `path` refers to, when it is known which one."""
        candidates = self.get(name, [])
        if len(candidates) == 1:
            return candidates[0]
        for info in candidates:
            if info.abspath == path:
                return info
        return self._imported(name, path) if candidates else None

    def foreign(self, func: ast.expr, path: str) -> bool:
        """Whether a call's qualifier is an installed package's import, not a linted module
        (`nn.LeakyReLU(0.2)` in a tree that defines its own `LeakyReLU`)."""
        if not isinstance(func, ast.Attribute):
            return False
        root = func.value
        while isinstance(root, ast.Attribute):
            root = root.value
        origin = self._imports_of(path).get(root.id) if isinstance(root, ast.Name) else None
        if origin is None:
            return False  # not an import (`self.blocks`, a local object)
        if self._modules is None:
            self._module_file("")
        assert self._modules is not None
        top = origin.split(".")[0]
        return not any(m == top or m.startswith(f"{top}.") for m in self._modules)

    def _imported(self, name: str, path: str) -> FileInfo | None:
        for _ in range(_MAX_HOPS):
            origin = self._imports_of(path).get(name)
            if origin is None or "." not in origin:
                return None
            module, name = origin.rsplit(".", 1)  # the name it has where it comes from
            for info in self.get(name, []):
                if info.module == module:
                    return info
            found = self._module_file(module)
            if found is None:
                return None
            path = found  # a package that imports it from elsewhere: follow that import
        return None

    def _imports_of(self, path: str) -> dict[str, str]:
        if path not in self._imports:
            tree = self._trees.get(path)
            if tree is None and path in self._sources:
                tree = parse(self._sources[path], path)
            self._imports[path] = {} if tree is None else self._aliases(tree, path)
        return self._imports[path]

    def _aliases(self, tree: ast.Module, path: str) -> dict[str, str]:
        """The file's imports, relative ones made absolute (`from .vit import ViT`)."""
        aliases = import_aliases(tree)
        _, module = module_identity(path, self._known)
        package = module if os.path.basename(path) == "__init__.py" else module.rpartition(".")[0]
        for node in walk_statements(tree):
            if not isinstance(node, ast.ImportFrom) or not node.level:
                continue
            parts = package.split(".") if package else []
            if node.level - 1 > len(parts):
                continue
            base = parts[: len(parts) - (node.level - 1)]
            origin = ".".join([*base, *([node.module] if node.module else [])])
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{origin}.{alias.name}"
        return aliases

    def _module_file(self, module: str) -> str | None:
        if self._modules is None:
            self._modules = {}
            for path in sorted(self._known):
                self._modules.setdefault(module_identity(path, self._known)[1], path)
        return self._modules.get(module)
