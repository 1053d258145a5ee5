"""The shape-check worker process: imports torch once, then checks one file per request.

Protocol, one JSON object per line: the worker first says `{"ready": true}` (or `false` with a
`reason`), then answers each `{"id", "path", "source", "declared"}` request on stdin with
`{"id", "diagnostics": [...]}` or `{"id", "error": "..."}`. Run: `python -m
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
) -> list[dict[str, object]]:
    files = [(path, source)]
    if declared and "declared" in inspect.signature(check).parameters:
        found = check(files, declared=declared)
    else:
        found = check(files)
    return [d.to_dict() for d in found.get(path, [])]


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
            diagnostics = _check(
                check, request["path"], request["source"], request.get("declared") or {}
            )
        except Exception:
            _send(channel, {"id": request["id"], "error": traceback.format_exc()})
        else:
            _send(channel, {"id": request["id"], "diagnostics": diagnostics})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
