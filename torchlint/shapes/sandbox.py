"""The walls around user code in the shape worker: an audit hook and OS limits.

Building a model runs its constructor, which is the user's code. The slicer (`slicing`)
keeps only definitions, but a constructor body runs as written. So once torch and the
engine are imported, the worker installs a PEP 578 audit hook that refuses, from then on:
process creation and signals (`os.system`, `subprocess.Popen`, `os.fork`, `os.exec*`,
`os.posix_spawn`, `os.kill`), new threads, network access, file writes, deletes, renames
and permission changes outside a private temporary folder, and native code loaded through
`ctypes`/`cffi`, except an installed package's own library (torchvision's operators, which
`import torchvision` opens through `torch.ops.load_library`).
Reads are allowed: torch and the user's imports need them.

A refused action raises `Blocked` (a `PermissionError`), which the check reports as a
TL690 naming it ("Blocked: the model's code runs a subprocess"). The engine's own calls
(forking one child per file, killing it when late) are recognised by the code object that
makes them. Each per-file child also runs
under OS limits (`limit_child`): address space, CPU time, file size and no new processes.

This is defence in depth against side effects, not a boundary for code written to defeat
it: Python code in the same process can, with effort, reach around a hook. The parent
process group is killed at the end of every run, whatever happened inside.
"""

from __future__ import annotations

import contextlib
import math
import os
import resource
import signal
import sys
from collections.abc import Callable, Iterable
from types import CodeType
from typing import Any

#: What each refused event is, for the TL690 message ("blocked: the constructor ...").
_PROCESS = "runs a subprocess"
_REFUSED: dict[str, str] = {
    "os.system": _PROCESS,
    "subprocess.Popen": _PROCESS,
    "os.posix_spawn": _PROCESS,
    "os.spawn": _PROCESS,
    "os.exec": _PROCESS,
    "os.startfile": _PROCESS,
    "pty.spawn": _PROCESS,
    "os.fork": "forks a process",
    "os.forkpty": "forks a process",
    "os.kill": "sends a signal to a process",
    "os.killpg": "sends a signal to a process group",
    "_thread.start_new_thread": "starts a thread",
    "socket.connect": "opens a network connection",
    "socket.bind": "listens on the network",
    "socket.getaddrinfo": "looks up a network address",
    "socket.gethostbyname": "looks up a network address",
    "socket.gethostbyaddr": "looks up a network address",
    "socket.sendto": "sends network data",
    "socket.sendmsg": "sends network data",
    "ctypes.dlopen": "loads native code (ctypes)",
    "ctypes.dlsym": "loads native code (ctypes)",
    "ctypes.call_function": "calls native code (ctypes)",
    "resource.setrlimit": "changes resource limits",
}
#: File events whose path arguments must all lie in the private folder.
_FILE_EVENTS: dict[str, tuple[str, tuple[int, ...]]] = {
    "os.remove": ("deletes a file", (0,)),
    "os.rmdir": ("deletes a folder", (0,)),
    "shutil.rmtree": ("deletes a folder", (0,)),
    "os.rename": ("renames a file", (0, 1)),
    "shutil.move": ("moves a file", (0, 1)),
    "shutil.copyfile": ("copies a file", (1,)),
    "shutil.copytree": ("copies a folder", (1,)),
    "os.link": ("creates a link", (1,)),
    "os.symlink": ("creates a link", (1,)),
    "os.truncate": ("truncates a file", (0,)),
    "os.chmod": ("changes file permissions", (0,)),
    "os.chown": ("changes file ownership", (0,)),
    "os.chflags": ("changes file flags", (0,)),
    "os.lchmod": ("changes file permissions", (0,)),
    "os.lchown": ("changes file ownership", (0,)),
    "os.mkdir": ("creates a folder", (0,)),
    "os.mknod": ("creates a device file", (0,)),
    "os.mkfifo": ("creates a pipe file", (0,)),
    "os.utime": ("changes file times", (0,)),
}
_NATIVE_MODULES = frozenset({"cffi", "_cffi_backend"})
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_WRITABLE = (os.devnull,)


def _load_prctl() -> Callable[..., int] | None:
    # Looked up at import, before the audit hook refuses `ctypes.dlopen`.
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_prctl = _load_prctl()
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Have the kernel kill this process when its parent dies (Linux), so that killing the
    worker (a stale check in the editor, say) also ends the check it was running."""
    parent = os.getppid()
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it died before the request took effect
        os._exit(1)


class Blocked(PermissionError):
    """User code tried something the shape worker refuses."""


def inside_folder(path: str, folder: str) -> bool:
    """Whether `path` is `folder` or lies under it (both already made absolute)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def install(
    private: str, engine: Iterable[Callable[..., Any]], libraries: Iterable[str] = ()
) -> None:
    """Refuse side effects from now on, except writes under `private`, `engine`'s calls and
    opening a native library by its path under one of `libraries` (where installed packages
    live).

    Irreversible: audit hooks cannot be removed. Call it after torch and the engine's
    modules are imported.
    """
    private = os.path.realpath(private)
    own = (_set, die_with_parent)
    engine_codes: frozenset[CodeType] = frozenset(f.__code__ for f in (*engine, *own))
    trusted = [os.path.realpath(f) for f in libraries]

    def inside(path: object) -> bool:
        if isinstance(path, int):
            return True  # an already open descriptor: opening it was checked
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str):
            return False
        real = os.path.realpath(path)
        return real in _WRITABLE or inside_folder(real, private)

    def installed_library(name: object) -> bool:
        if isinstance(name, bytes):
            name = os.fsdecode(name)
        if not isinstance(name, str) or not os.path.isabs(name):
            return False  # a bare name is looked up on the system's library path
        real = os.path.realpath(name)
        return any(inside_folder(real, folder) for folder in trusted)

    def refuse(what: str) -> None:
        raise Blocked(f"the model's code {what}")

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            path, _mode, flags = args
            if flags is not None and flags & _WRITE_FLAGS and not inside(path):
                refuse(f"writes the file {path}")
            return
        reason = _REFUSED.get(event)
        if reason is not None:
            if sys._getframe(1).f_code in engine_codes:
                return
            if event == "ctypes.dlopen" and args and installed_library(args[0]):
                return
            refuse(reason)
        file_event = _FILE_EVENTS.get(event)
        if file_event is not None:
            reason, positions = file_event
            for index in positions:
                if index < len(args) and not inside(args[index]):
                    refuse(f"{reason} ({args[index]})")
            return
        if event == "import" and args and str(args[0]).split(".")[0] in _NATIVE_MODULES:
            refuse("loads native code (cffi)")

    tempfile_module = sys.modules.get("tempfile")
    if tempfile_module is not None:
        tempfile_module.tempdir = private
    os.environ["TMPDIR"] = private
    sys.addaudithook(hook)


def limit_child(timeout: float, memory_bytes: int | None) -> None:
    """OS limits for a per-file child: CPU, address space, file size, no new processes."""
    die_with_parent()
    cpu = max(1, math.ceil(timeout)) + 2
    _set(resource.RLIMIT_CPU, cpu, cpu + 3)
    _set(resource.RLIMIT_FSIZE, 64 << 20, 64 << 20)
    _set(resource.RLIMIT_NPROC, 0, 0)
    if memory_bytes is not None:
        _set(resource.RLIMIT_AS, memory_bytes, memory_bytes)
    # A write past the size limit fails with an error instead of killing the check.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def _set(limit: int, soft: int, hard: int) -> None:
    """Lower a limit, soft and hard alike (so the checked code cannot raise it again)."""
    current_hard = resource.getrlimit(limit)[1]
    if current_hard != resource.RLIM_INFINITY and current_hard < hard:
        hard = current_hard
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    with contextlib.suppress(OSError, ValueError):
        resource.setrlimit(limit, (soft, hard))
