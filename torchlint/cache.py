"""Results cache: a file's diagnostics keyed by its content, the settings and the version.

One JSON file per cache folder, entries keyed by path so it stays as large as the project;
a file whose key changed (edited, other settings, new torchlint) is simply linted again.
A cache file or entry that cannot be read as one is dropped: the file is linted again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
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


def cache_key(content: bytes, enabled: Iterable[str], *extra: str) -> str:
    digest = hashlib.sha256()
    digest.update(__version__.encode())
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
        if enabled:
            with contextlib.suppress(OSError, ValueError):
                data = json.loads(self.file.read_text(encoding="utf-8"))
                if isinstance(data, dict) and data.get("version") == __version__:
                    entries = data.get("entries")
                    self._entries = entries if isinstance(entries, dict) else {}

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

    def put(self, path: str, key: str, diagnostics: list[Diagnostic], *, section: str = "") -> None:
        if self.enabled:
            self._entries[section + path] = [key, [d.to_dict() for d in diagnostics]]
            self._dirty = True

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
            payload = json.dumps({"version": __version__, "entries": self._entries})
            fd, temp = tempfile.mkstemp(dir=self.directory, prefix=".results-")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(payload)
            os.replace(temp, self.file)
        except OSError:
            pass
