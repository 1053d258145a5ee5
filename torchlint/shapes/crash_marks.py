"""Which model a file's check was at when its process died, so a crash costs that model only.

A model's forward can take the process down with it (a segmentation fault in a compiled
extension the model calls, an abort in torch on an input it never expected). The worker
checks each file in a forked child; before forking it maps a small page shared with the
child, and the child writes there the name of the class it is about to check (`mark`).
When the child dies by a signal, the worker reads the name back (`read`) and checks the
file again with that class set aside, reported as crashed; the file's other models keep
their findings.
"""

from __future__ import annotations

import mmap

_SIZE = 512
#: The page this process writes its marks to (set in a forked child), or None.
_page: mmap.mmap | None = None


def new_page() -> mmap.mmap:
    """A blank page, shared with the children forked after it is made."""
    return mmap.mmap(-1, _SIZE)


def use(page: mmap.mmap) -> None:
    """In the child: write marks to `page` from now on."""
    global _page
    _page = page


def mark(name: str) -> None:
    """Note the class the check is about to build and check (nothing outside a child)."""
    if _page is None:
        return
    data = name.encode("utf-8", "replace")[: _SIZE - 1]
    _page.seek(0)
    _page.write(data + b"\0" * (_SIZE - len(data)))


def read(page: mmap.mmap) -> str | None:
    """The last class marked on `page`, or None."""
    page.seek(0)
    name = page.read(_SIZE).split(b"\0", 1)[0].decode("utf-8", "replace")
    return name or None
