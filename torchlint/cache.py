"""Results cache: a file's diagnostics keyed by its content, the settings and the version.

One JSON file per cache folder, entries keyed by path so it stays as large as the project;
a file whose key changed (edited, other settings, new torchlint) is simply linted again.
A cache file or entry that cannot be read as one is dropped: the file is linted again.

An entry may also keep the stamps (modification time and size) of the file and of what its
key was computed from (`torchlint.semantic.resolve`): while they all hold, `known_key` gives
the key without reading the file, so a warm run costs a few `stat` calls per file.

The shape stage keeps one record per set of checked files and settings (`shape_run`): the
key of each file's shape results and the stamps of what the keys were read from, so that a
warm run finds its shape results without reading a file either.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from torchlint import __version__
from torchlint.diagnostic import Diagnostic

CACHE_DIR_NAME = ".torchlint_cache"
_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by torchlint.\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)
# Stamps this recent may not tell two versions of a file apart (a coarse file-system clock).
_SETTLED_NS = 2_000_000_000
# Shape records kept (one per set of checked files and settings), the newest.
_SHAPE_RUNS = 8


@functools.cache
def engine_version() -> str:
    """torchlint's version and a stamp of its own code (every module of the engine and the
    rules: size and modification time), so that results cached by other code are never
    served, even between two builds of one version (an editable install, a patched rule)."""
    digest = hashlib.sha256(__version__.encode())
    roots = [Path(__file__).parent, *_rule_dirs()]
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            with contextlib.suppress(OSError):
                stat = path.stat()
                digest.update(f"{path.name}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    return f"{__version__}+{digest.hexdigest()[:16]}"


def _rule_dirs() -> list[Path]:
    """Where the rules live (installed as `torchlint.rules`, found without importing them)."""
    spec = importlib.util.find_spec("torchlint.rules")
    if spec is None or spec.submodule_search_locations is None:
        return []
    return [Path(location) for location in spec.submodule_search_locations]


def cache_key(content: bytes, enabled: Iterable[str], *extra: str) -> str:
    digest = hashlib.sha256()
    digest.update(engine_version().encode())
    digest.update(",".join(sorted(enabled)).encode())
    for part in extra:
        digest.update(b"\0" + part.encode())
    digest.update(b"\0")
    digest.update(content)
    return digest.hexdigest()


def _well_formed(diagnostic: Diagnostic) -> bool:
    numbers = (diagnostic.line, diagnostic.column, diagnostic.end_line, diagnostic.end_column)
    texts = (diagnostic.code, diagnostic.name, diagnostic.message)
    return all(type(n) is int for n in numbers) and all(isinstance(t, str) for t in texts)


class ResultCache:
    """Load once, look up per file, save once at the end of the run."""

    def __init__(self, directory: Path, *, enabled: bool = True) -> None:
        self.directory = directory
        self.enabled = enabled
        self.file = directory / "results.json"
        self._entries: dict[str, list] = {}
        self._dirty = False
        self._stats: dict[str, list[int] | None] = {}
        self._settled_before = time.time_ns() - _SETTLED_NS
        self._shape_runs: dict[str, dict] = {}
        if enabled:
            with contextlib.suppress(OSError, ValueError):
                data = json.loads(self.file.read_text(encoding="utf-8"))
                if isinstance(data, dict) and data.get("version") == engine_version():
                    entries = data.get("entries")
                    self._entries = entries if isinstance(entries, dict) else {}
                    runs = data.get("shape_runs")
                    self._shape_runs = runs if isinstance(runs, dict) else {}

    def get(self, path: str, key: str, *, section: str = "") -> list[Diagnostic] | None:
        """The diagnostics stored for `path` under `key`; None if absent, stale or unreadable.

        `section` keeps separate results for one path apart (`shapes:` for shape checks).
        """
        if not self.enabled:
            return None
        entry = self._entries.get(section + path)
        if entry is None:
            return None
        try:
            if entry[0] != key:
                return None
            found = [Diagnostic.from_dict({**item, "filename": path}) for item in entry[1]]
            if all(_well_formed(d) for d in found):
                return found
        except Exception:  # a damaged entry: forget it, lint again
            pass
        del self._entries[section + path]
        self._dirty = True
        return None

    def put(
        self,
        path: str,
        key: str,
        diagnostics: list[Diagnostic],
        *,
        section: str = "",
        stamps: dict[str, list[int]] | None = None,
        settings: str = "",
    ) -> None:
        """Store `path`'s diagnostics under `key`; with `stamps`, `known_key` can find it.

        `settings` stands for what else the key covers (the enabled codes and such).
        """
        if self.enabled:
            entry: list = [key, [d.to_dict() for d in diagnostics]]
            if stamps and all(s[0] < self._settled_before for s in stamps.values()):
                entry.append({"settings": settings, "stamps": stamps})
            self._entries[section + path] = entry
            self._dirty = True

    def known_key(self, path: str, settings: str) -> str | None:
        """The key stored for `path` when the stamps stored with it all still hold."""
        entry = self._entries.get(path) if self.enabled else None
        if entry is None or len(entry) < 3:
            return None
        try:
            witness = entry[2]
            if witness["settings"] != settings:
                return None
            for name, stamp in witness["stamps"].items():
                if self._stat(name) != stamp:
                    return None
            return entry[0] if isinstance(entry[0], str) else None
        except (KeyError, TypeError, AttributeError):
            return None

    def shape_run(self, fingerprint: str) -> dict | None:
        """The shape record stored for `fingerprint` while the stamps stored with it hold:
        `keys` (checked file -> key) and `load` (the load average when it was made)."""
        record = self._shape_runs.get(fingerprint) if self.enabled else None
        try:
            if record is None or not isinstance(record["keys"], dict):
                return None
            for name, stamp in record["stamps"].items():
                if self._stat(name) != stamp:
                    return None
            return record
        except (KeyError, TypeError, AttributeError):
            return None

    def put_shape_run(
        self, fingerprint: str, keys: dict[str, str], stamps: dict[str, list[int] | None]
    ) -> None:
        """Store the keys of one run's shape results, found by `fingerprint` while `stamps`
        hold (none too recent to tell two versions of a file apart)."""
        if not self.enabled:
            return
        if any(s is not None and s[0] >= self._settled_before for s in stamps.values()):
            return
        self._shape_runs.pop(fingerprint, None)
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        self._shape_runs[fingerprint] = {"keys": keys, "stamps": stamps, "load": load}
        for old in list(self._shape_runs)[:-_SHAPE_RUNS]:
            del self._shape_runs[old]
        self._dirty = True

    def _stat(self, name: str) -> list[int] | None:
        if name not in self._stats:
            try:
                info = os.stat(name)
                self._stats[name] = [info.st_mtime_ns, info.st_size]
            except OSError:
                self._stats[name] = None
        return self._stats[name]

    def save(self) -> None:
        """Write the cache atomically; a read-only tree just goes uncached."""
        if not (self.enabled and self._dirty):
            return
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            tag = self.directory / "CACHEDIR.TAG"
            if not tag.exists():
                tag.write_text(_TAG, encoding="utf-8")
                (self.directory / ".gitignore").write_text("*\n", encoding="utf-8")
            payload = json.dumps(
                {
                    "version": engine_version(),
                    "entries": self._entries,
                    "shape_runs": self._shape_runs,
                }
            )
            fd, temp = tempfile.mkstemp(dir=self.directory, prefix=".results-")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(payload)
            os.replace(temp, self.file)
        except OSError:
            pass
