"""The shape-check worker process: imports torch once, then checks one file per request.

Protocol, one JSON object per line: the worker first says `{"ready": true}` (or `false` with a
`reason`), then answers each `{"id", "path", "source", "declared"}` request on stdin with
`{"id", "diagnostics": [...], "tables": [...]}` (tables when the engine makes per-layer
tables, `torchlint.shapes.table`) or `{"id", "error": "..."}`. Run: `python -m
torchlint.server.shape_worker [module:function]`.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any, BinaryIO

DEFAULT_TARGET = "torchlint.shapes:check_files"


def _send(channel: BinaryIO, message: dict[str, Any]) -> None:
    channel.write(json.dumps(message).encode() + b"\n")
    channel.flush()


def _load(target: str) -> Callable[..., Any]:
    module_name, _, function = target.partition(":")
    module = importlib.import_module(module_name)
    available = getattr(module, "torch_available", None)
    if available is not None and not available():
        raise ImportError("torch cannot be imported")
    return getattr(module, function or "check_files")


def _check(
    check: Callable[..., Any], path: str, source: str, declared: dict[str, Any]
) -> tuple[list[dict[str, object]], list[dict[str, Any]] | None]:
    """The file's diagnostics, and its per-layer tables when the engine makes them."""
    files = [(path, source)]
    parameters = inspect.signature(check).parameters
    options: dict[str, Any] = {}
    if declared and "declared" in parameters:
        options["declared"] = declared
    tables: dict[str, list[dict[str, Any]]] | None = {} if "tables" in parameters else None
    if tables is not None:
        options["tables"] = tables  # for inlay hints and hover (shape insight)
    found = check(files, **options)
    return [d.to_dict() for d in found.get(path, [])], (
        tables.get(path, []) if tables is not None else None
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # The protocol owns the real stdout; anything else printed (torch warnings) goes to stderr.
    channel = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    try:
        check = _load(argv[0] if argv else DEFAULT_TARGET)
    except Exception as exc:
        _send(channel, {"ready": False, "reason": f"{type(exc).__name__}: {exc}"})
        return 0
    _send(channel, {"ready": True})
    for line in sys.stdin.buffer:
        request = json.loads(line)
        try:
            diagnostics, tables = _check(
                check, request["path"], request["source"], request.get("declared") or {}
            )
        except Exception:
            _send(channel, {"id": request["id"], "error": traceback.format_exc()})
        else:
            reply: dict[str, Any] = {"id": request["id"], "diagnostics": diagnostics}
            if tables is not None:
                reply["tables"] = tables
            _send(channel, reply)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
