"""Cache keys for shape results: one per group of files that can change each other's.

A file's shape findings depend on the file, on the project files it imports (they run when
its models are built), on the checked files that import it or name its classes (their call
sites are evidence of its inputs, their models may build and so check its blocks) and on
the settings. Files linked in any of these ways form a group, and a group's files share one
key over all their contents: an edit re-checks the groups it touches, no other.

`ShapeKeys.stamps` are what the keys were read from besides the checked files: the imported
files' stamps, and those of the folders listed to resolve imports (a file created there
would change the answer, and its folder's stamp). While they hold, the keys do
(`ResultCache.shape_run`).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from torchlint.shapes.dependencies import package_of, scan_imports
from torchlint.shapes.modular_templates import generated_files, is_template

#: Path -> [st_mtime_ns, st_size], or None for nothing there.
Stamps = dict[str, "list[int] | None"]

_CLASS = re.compile(r"^[ \t]*class[ \t]+(\w+)", re.MULTILINE)
_WORD = re.compile(r"\w+")
# More class names than this defined outside a group: one word scan of each file beats a
# substring search per name.
_MANY_NAMES = 64


@dataclass
class ShapeKeys:
    #: Checked file (as displayed) -> its key.
    keys: dict[str, str]
    #: Checked file -> the checked files of its group (itself included).
    groups: dict[str, frozenset[str]]
    stamps: Stamps


def shape_keys(
    contents: Mapping[str, bytes],
    sources: Mapping[str, str],
    candidates: Mapping[str, str],
    common: str,
) -> ShapeKeys | None:
    """The keys of the `candidates` (displayed path -> what else their key covers: their
    settings) among the checked files (`contents`: displayed path -> bytes; `sources`: their
    Python text). `common` covers the settings of the whole run. None when the imports
    cannot be followed (too many project files)."""
    absolute = {display: os.path.abspath(display) for display in contents}
    texts = {absolute[d]: text for d, text in sources.items() if d in absolute}
    roots = {_root(absolute[d]) for d in candidates} | {os.getcwd()}
    scan = scan_imports(texts, roots)
    if scan is None:
        return None
    group = _Groups(scan.edges)
    _join_named(group, texts, {absolute[d] for d in candidates})
    stamps: Stamps = {}
    digests: dict[str, bytes] = {}
    for display, data in contents.items():
        digests[absolute[display]] = hashlib.sha256(data).digest()
    for path in scan.files():
        if path not in digests:
            stamp, digest = _read(path)
            if digest is None:
                return None
            stamps[path], digests[path] = stamp, digest
    # A modular template's classes are answered by the files generated from it: they join
    # its group, and its folder's stamp tells when one is generated anew.
    for path in {absolute[d] for d in candidates}:
        if not is_template(path):
            continue
        _stamp_folder(os.path.dirname(path), stamps)
        for generated in generated_files(path):
            if generated not in digests:
                stamp, digest = _read(generated)
                if digest is None:
                    return None
                stamps[generated], digests[generated] = stamp, digest
            group.join(path, generated)
    # A file created where an import found none would change the answer, and its folder.
    for folder, (stamp, _) in scan.folders.items():
        if stamp is not None:
            stamps[folder] = stamp
        else:
            _stamp_folder(os.path.dirname(folder), stamps)
    members: dict[str, list[str]] = {}
    for path in digests:
        members.setdefault(group.find(path), []).append(path)
    group_keys: dict[str, str] = {}
    for leader, paths in members.items():
        digest = hashlib.sha256(common.encode())
        for path in sorted(paths):
            digest.update(b"\0" + path.encode() + b"\0" + digests[path])
        group_keys[leader] = digest.hexdigest()
    checked: dict[str, set[str]] = {}
    for display in candidates:
        checked.setdefault(group.find(absolute[display]), set()).add(display)
    keys: dict[str, str] = {}
    groups: dict[str, frozenset[str]] = {}
    for display, settings in candidates.items():
        leader = group.find(absolute[display])
        keys[display] = hashlib.sha256(
            f"{group_keys[leader]}\0{display}\0{settings}".encode()
        ).hexdigest()
        groups[display] = frozenset(checked[leader])
    return ShapeKeys(keys, groups, stamps)


def _root(path: str) -> str:
    return package_of(os.path.dirname(path))[0]


class _Groups:
    """Union-find over file paths."""

    def __init__(self, edges: Mapping[str, set[str]]) -> None:
        self.parent: dict[str, str] = {}
        for path, imported in edges.items():
            for other in imported:
                self.join(path, other)

    def find(self, path: str) -> str:
        parent = self.parent.setdefault(path, path)
        while parent != path:
            grand = self.parent.setdefault(parent, parent)
            self.parent[path] = grand
            path, parent = parent, grand
        return path

    def join(self, one: str, other: str) -> None:
        first, second = self.find(one), self.find(other)
        if first != second:
            self.parent[max(first, second)] = min(first, second)


def _join_named(group: _Groups, texts: Mapping[str, str], candidates: set[str]) -> None:
    """Join each file to the files defining a class it names (its call sites and inputs are
    evidence for that class), where imports have not joined them already."""
    owners: dict[str, set[str]] = {}
    for path in candidates:
        for name in _CLASS.findall(texts.get(path, "")):
            owners.setdefault(name, set()).add(path)
    if not owners:
        return
    outside: dict[str, list[str]] = {}  # group -> names defined in another group
    for path, text in texts.items():
        leader = group.find(path)
        if leader not in outside:
            outside[leader] = [
                name
                for name, where in owners.items()
                if any(group.find(owner) != leader for owner in where)
            ]
        names = outside[leader]
        if not names:
            continue
        if len(names) > _MANY_NAMES:
            named = set(_WORD.findall(text)).intersection(names)
        else:
            named = {n for n in names if n in text and re.search(rf"\b{n}\b", text)}
        for name in named:
            for owner in owners[name]:
                group.join(path, owner)


def _read(path: str) -> tuple[list[int] | None, bytes | None]:
    """A file's stamp (taken first: a change while reading shows on the next run) and the
    digest of its content."""
    stamp = _stat(path)
    try:
        with open(path, "rb") as handle:
            return stamp, hashlib.sha256(handle.read()).digest()
    except OSError:
        return stamp, None


def _stamp_folder(folder: str, stamps: Stamps) -> None:
    """Stamp `folder`, or when it does not exist the nearest folder above that does."""
    while folder not in stamps:
        stamp = _stat(folder)
        if stamp is not None:
            stamps[folder] = stamp
            return
        parent = os.path.dirname(folder)
        if parent == folder:
            return
        folder = parent


def _stat(path: str) -> list[int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return [info.st_mtime_ns, info.st_size]
