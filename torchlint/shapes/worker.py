"""The shape-check worker: `python -m torchlint.shapes.worker` (the only place torch is imported).

Protocol: one JSON request on stdin (`jobs`, `texts`, `roots`, `timeout`); one JSON line per
event on stdout: `{"event": "ready", ...}` once started, then `{"event": "file", ...}` per job.

The worker imports torch and the engine, installs the sandbox (`sandbox`: an audit hook
refusing processes, network, writes and native code) before any user code runs, calls
`gc.freeze()`, and then forks one child per file (one per idle core at a time: `check_all`).
Each child also runs under OS limits and `signal.alarm`, and is killed from this side when
late. A timeout, crash, hang or refused
side effect becomes a TL690 finding for that file and the run goes on.

What only some checks need is imported when first needed: fake tensors and the symbolic
shape machinery (torch._dynamo, sympy's solvers) load in the first child that runs a model
on fake tensors; the worker then warms itself up (`warm`: a small built-in model checked
here) so that the children forked after it share them. A run whose models all stop before
that point (they need constructor arguments, or no input shape is known) never pays for them.
A worker started early for a run that will check models (`--warm`) warms up at once instead,
while its client still prepares the request.

Events: `ready` once started (with `seconds` and the `phases` they went to), then `load`
before importing a job's module here (preloading) and `start` before forking its child, so
that the client can tell which file was at fault if this process dies or hangs, and restart
without it.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import math
import mmap
import os
import resource
import select
import shutil
import signal
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_started = time.perf_counter()

import torch  # noqa: E402 - timed from the very start

_torch_imported = time.perf_counter()

from torchlint.shapes import (  # noqa: E402
    compat,
    crash_marks,
    packed_sequences,
    pretrained,
    version_skew,
)
from torchlint.shapes.budget import EngineStop  # noqa: E402
from torchlint.shapes.build import install_site_hook  # noqa: E402
from torchlint.shapes.check import FileChecker  # noqa: E402
from torchlint.shapes.loader import Project, environment_paths  # noqa: E402
from torchlint.shapes.sandbox import Blocked, die_with_parent, install, limit_child  # noqa: E402

_engine_imported = time.perf_counter()

MEMORY_MB = int(os.environ.get("TORCHLINT_SHAPES_MEMORY_MB", "4096"))
_GRACE = 5.0
#: Most children checking files at once (each on a core of its own).
_MAX_CHILDREN = 4
#: The share of a file's time limit that one model's check may take (CPU time).
_MODEL_SHARE = 0.25

_WARM_PATH = "/__torchlint_warmup__/torchlint_warm_model.py"
_WARM_SOURCE = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class WarmNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(8 * 14 * 14, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.bn(self.conv(x))))
        return self.fc(torch.flatten(x, 1))


class WarmSeq(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        self.rnn = nn.LSTM(16, 32, batch_first=True)
        self.norm = nn.LayerNorm(32)

    def forward(self, tokens):
        if tokens.dim() == 1:
            tokens = tokens.unsqueeze(0)
        out, _ = self.rnn(self.emb(tokens))
        return self.norm(out).view(out.size(0), -1)
"""


def _quiet() -> None:
    warnings.simplefilter("ignore")
    logging.disable(logging.CRITICAL)
    torch.set_num_threads(1)


def _cpu_only() -> None:
    """Models are checked as on a CPU-only machine, whatever this machine has.

    `torch.device("cuda" if torch.cuda.is_available() else "cpu")` then picks the CPU, and
    a stray `.cuda()` keeps the fake tensor where it is instead of failing the check.
    """
    torch.cuda.is_available = compat.stand_in(torch.cuda.is_available, lambda: False)
    torch.Tensor.cuda = lambda self, *args, **kwargs: self  # type: ignore[method-assign]
    torch.nn.Module.cuda = lambda self, *args, **kwargs: self  # type: ignore[method-assign]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None:
        mps.is_available = compat.stand_in(mps.is_available, lambda: False)


def warm() -> None:
    """Check a small model in this process, so that the lazy imports (fake tensors, torch._dynamo,
    symbolic shapes) and torch's caches happen once here instead of in every child."""
    job = {
        "abspath": _WARM_PATH,
        "module": "torchlint_warm_model",
        "classes": {
            "WarmNet": {"line": 7, "ctor": None, "declared": None, "evidence": []},
            "WarmSeq": {"line": 20, "ctor": None, "declared": None, "evidence": []},
        },
        "module_level": [],
    }
    check_one(job, {_WARM_PATH: _WARM_SOURCE}, [os.path.dirname(_WARM_PATH)], install=False)
    sys.modules.pop("torchlint_warm_model", None)


def check_one(
    job: dict[str, Any], texts: dict[str, str], roots: list[str], install: bool = True
) -> dict[str, Any]:
    """Check one file in this process with a fresh project (used for the warm-up)."""
    project = Project(roots, texts, meta_context=lambda: torch.device("meta"))
    project.files.update(texts)
    if install:
        project.install()
    else:
        sys.meta_path.insert(0, project)
    install_site_hook(project.files)
    try:
        return check_job(job, project)
    finally:
        if not install and project in sys.meta_path:
            sys.meta_path.remove(project)


def check_job(
    job: dict[str, Any], project: Project, timeout: float | None = None
) -> dict[str, Any]:
    # Stop starting new models a little before the hard limit, to keep what was found; and
    # stop one model that would take most of the file's time (its siblings are checked).
    deadline = time.monotonic() + 0.75 * timeout if timeout else None
    budget = _MODEL_SHARE * timeout if timeout else None
    if job.get("table"):
        # Shape insight: the same checks, and a per-layer table of each model checked.
        from torchlint.shapes.table import TableChecker

        checker = TableChecker(project, project.texts, deadline=deadline, model_budget=budget)
    else:
        checker = FileChecker(project, project.texts, deadline=deadline, model_budget=budget)
    findings = checker.check_job(job)
    result = {"findings": findings, "models": checker.stats.models, "stubbed": project.stubbed}
    result.update(pending=checker.pending, covered=checker.covered_classes())
    result["cut_short"] = checker.cut_short
    tables = getattr(checker, "tables", None)
    if tables is not None:
        result["tables"] = tables
    return result


def preload(
    project: Project, jobs: list[dict[str, Any]], timeout: float, emit: Callable[..., None]
) -> None:
    """Import the jobs' modules (sliced) once, before forking, so children share them.

    A project package is usually imported by every one of its files; importing it in each
    child again would repeat the work per file. A module that fails or takes too long here
    is left for its child, which reports it. One that stops or hangs this process is found
    by the client (the last `load` event) and left out when it restarts the worker.
    """
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    limits = resource.getrlimit(resource.RLIMIT_AS)
    _limit_memory()
    try:
        for job in jobs:
            emit("load", job["abspath"])
            signal.alarm(max(1, math.ceil(timeout)))
            try:
                project.load(job["abspath"], job["module"])
            except _Timeout:
                pass
            except BaseException:  # the child will report it
                pass
            finally:
                signal.alarm(0)
    finally:
        signal.signal(signal.SIGALRM, previous)
        resource.setrlimit(resource.RLIMIT_AS, limits)


class _Timeout(EngineStop):
    pass


def _on_alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


def _memory_limit() -> int | None:
    """This process's size plus the allowance, as an address-space limit in bytes."""
    try:
        with open("/proc/self/status") as status:
            vm = next(int(line.split()[1]) for line in status if line.startswith("VmSize:"))
    except (OSError, ValueError, StopIteration):
        return None
    return vm * 1024 + MEMORY_MB * 1024 * 1024


def _limit_memory() -> None:
    limit = _memory_limit()
    if limit is None:
        return
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    with contextlib.suppress(OSError, ValueError):
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _out_of_memory(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and (
        "can't allocate memory" in text or "bad_alloc" in text or "out of memory" in text
    )


class _WarmUpFirst(EngineStop):
    """A child needs fake tensors that the worker has not loaded: it stops so that the
    worker loads them (outside any file's time limit) and checks the file again."""


def _warm_up_first() -> None:
    raise _WarmUpFirst()


def _child(
    job: dict[str, Any], project: Project, timeout: float, out: int, ask_warm_up: bool
) -> None:
    # A check allocates many short-lived objects and lives for a fraction of a second: the
    # cycle collector would only cost time (and touch the parent's shared pages).
    gc.disable()
    limit_child(timeout, _memory_limit())
    if ask_warm_up:
        compat.before_internals = _warm_up_first
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(max(1, math.ceil(timeout)))
    try:
        result = check_job(job, project, timeout)
    except _WarmUpFirst:
        result = {"warm_up": True}
    except _Timeout:
        result = {"error": f"timed out after {timeout:g} s"}
    except Blocked as exc:
        result = {"error": f"Blocked: {exc}"}
    except BaseException as exc:
        if _out_of_memory(exc):
            result = {"error": f"ran out of memory (limit {MEMORY_MB} MB)"}
        else:
            result = {"error": compat.explain(f"worker error: {type(exc).__name__}: {exc}"[:300])}
    signal.alarm(0)
    result = {**result, "findings": [_memory_finding(f) for f in result.get("findings", [])]}
    if not result["findings"]:
        del result["findings"]
    try:
        data = json.dumps(result, default=str).encode()
    except (TypeError, ValueError) as exc:
        data = json.dumps({"error": f"unreportable result: {exc}"}).encode()
    view = memoryview(data)
    while view:
        written = os.write(out, view)
        view = view[written:]


def _memory_finding(finding: dict[str, Any]) -> dict[str, Any]:
    """A model that failed on an allocation ran out of memory; say so in its reason."""
    error = finding.get("message") or ""
    if finding.get("code") == "TL690" and ("MemoryError" in error or "allocate memory" in error):
        return {**finding, "message": f"{error} (ran out of memory: limit {MEMORY_MB} MB)"}
    return finding


@dataclass
class _Running:
    """A forked child checking one job: the end of its pipe this side reads, and its
    hard deadline."""

    job: dict[str, Any]
    pid: int
    read_end: int
    deadline: float
    began: float
    chunks: list[bytes] = field(default_factory=list)
    #: The page where the child marks the model it is checking (see `crash_marks`).
    page: mmap.mmap | None = None


def fork_child(
    job: dict[str, Any], project: Project, timeout: float, ask_warm_up: bool = False
) -> _Running:
    """Start checking one job in a forked child; with `ask_warm_up`, a child that needs fake
    tensors not loaded here answers `{"warm_up": true}` instead of loading them itself."""
    read_end, write_end = os.pipe()
    page = crash_marks.new_page()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read_end)
        crash_marks.use(page)
        code = 0
        try:
            _child(job, project, timeout, write_end, ask_warm_up)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write_end)
    # A hard deadline from this side: a check that swallows its alarm is killed all the same.
    began = time.monotonic()
    return _Running(job, pid, read_end, began + timeout + _GRACE, began, page=page)


def next_answer(
    running: list[_Running], timeout: float, wait: float | None = None
) -> tuple[_Running | None, dict[str, Any]]:
    """The first of the running children to finish (or to run past its deadline, killed),
    and its answer; `(None, {})` when none did within `wait` seconds."""
    until = None if wait is None else time.monotonic() + wait
    while True:
        now = time.monotonic()
        late = next((child for child in running if child.deadline <= now), None)
        if late is not None:
            return late, end_child(late, False, timeout)
        left = min(child.deadline for child in running) - now
        if until is not None:
            if now >= until:
                return None, {}
            left = min(left, until - now)
        ready, _, _ = select.select([child.read_end for child in running], [], [], left)
        for child in running:
            if child.read_end in ready:
                chunk = os.read(child.read_end, 1 << 16)
                if not chunk:
                    return child, end_child(child, True, timeout)
                child.chunks.append(chunk)


def end_child(child: _Running, finished: bool, timeout: float) -> dict[str, Any]:
    """Reap a child (killed first when it did not finish) and read its answer."""
    os.close(child.read_end)
    if not finished:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, signal.SIGKILL)
    _, status = os.waitpid(child.pid, 0)
    if not finished:
        return {"error": f"timed out after {timeout:g} s"}
    try:
        return json.loads(b"".join(child.chunks) or b"null") or _crash(status, timeout)
    except ValueError:
        return _crash(status, timeout)


def _crash(status: int, timeout: float) -> dict[str, Any]:
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        if signum in (signal.SIGXCPU, signal.SIGKILL):
            return {"error": f"timed out after {timeout:g} s (the CPU time limit ended it)"}
        return {"error": f"the check crashed (signal {signum})", "crashed": signum}
    return {"error": f"the check stopped its process (exit status {os.WEXITSTATUS(status)})"}


def main() -> None:
    die_with_parent()
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # user code that prints must not corrupt the protocol
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115
    pretrained.stay_offline()
    warmed_early = _warm_while_waiting()
    # The client may start this process before its request is ready, so that importing
    # torch overlaps with its own work: time spent waiting here is not start-up time.
    waiting = time.perf_counter()
    request = json.loads(sys.stdin.read())
    received = time.perf_counter()
    # How busy the machine is, measured while this process prepares (see `_idle_cores`).
    since = _cpu_sample()
    timeout = float(request.get("timeout", 20.0))

    def emit(event: str, abspath: str | None = None, **fields: Any) -> None:
        message = {"event": event, **({"abspath": abspath} if abspath else {}), **fields}
        protocol.write(json.dumps(message, default=str) + "\n")

    _quiet()
    warmed = bool(request.get("warm")) or warmed_early is not None
    if warmed and warmed_early is None:  # asked to warm up before any user code
        warm()
        compat.load_internals()
    _cpu_only()
    version_skew.numpy_aliases()
    packed_sequences.install()
    pretrained.skip_downloads()
    compat.load_native_openers()
    private = request.get("private") or tempfile.mkdtemp(prefix="torchlint-shapes-")
    engine = [fork_child, end_child, preload, _limit_memory]
    install(private, engine, libraries=environment_paths())
    ready = time.perf_counter()
    phases = {
        "torch": _torch_imported - _started,
        "engine": _engine_imported - _torch_imported,
        "setup": (waiting - _engine_imported) + (ready - received),
    }
    if warmed_early is not None:
        phases["setup"] -= warmed_early
        phases["warm"] = warmed_early
    emit("ready", seconds=sum(phases.values()), phases=phases, waited=received - waiting)
    project = Project(request["roots"], request["texts"], lambda: torch.device("meta"))
    project.files.update(request["texts"])
    project.install()
    install_site_hook(project.files)
    preload(project, request["jobs"], timeout, emit)
    gc.collect()
    gc.freeze()
    check_all(request["jobs"], project, timeout, warmed, emit, protocol, since)
    protocol.flush()
    if not request.get("private"):
        shutil.rmtree(private, ignore_errors=True)


def check_all(
    jobs: list[dict[str, Any]],
    project: Project,
    timeout: float,
    warmed: bool,
    emit: Callable[..., None],
    protocol: Any,
    since: _CpuSample | None = None,
) -> None:
    """Check every job in forked children, several at once on a machine with idle cores (a
    child that needs fake tensors before they are loaded here asks for the warm-up). Children
    share nothing but what this process had loaded before forking them, so the answers do not
    depend on how many run at once. `since`: where the measure of idle cores starts
    (`_cpu_sample`), else now."""
    slots = _parallel_children(since)
    # With several at once, the files with the most models first: none is left to run alone
    # at the end while the other cores wait.
    waiting = sorted(jobs, key=lambda job: -len(job["classes"])) if len(jobs) > 1 else list(jobs)
    running: list[_Running] = []
    measured = _cpu_sample(running)
    while waiting or running:
        if measured is not None and time.monotonic() - measured.at >= _RESAMPLE_SECONDS:
            # Cores busy at the start (the run's own source rules ending, another program)
            # may have come free since: measured again, so a long run does not stay on one.
            slots, measured = _slots_now(measured, running, slots)
        while waiting and len(running) < slots:
            job = waiting.pop(0)
            emit("start", job["abspath"])
            running.append(fork_child(job, project, timeout, ask_warm_up=not warmed))
        # While fewer children run than cores could take, look again for idle cores now
        # and then, not only when a child ends (one file may take a minute).
        more = waiting and slots < min(_MAX_CHILDREN, _usable_cores())
        wait = _RESAMPLE_SECONDS if measured is not None and more else None
        child, result = next_answer(running, timeout, wait)
        if child is None:
            continue
        running.remove(child)
        if result.get("warm_up"):
            if child.page is not None:
                child.page.close()
            # Its models run on fake tensors, and other files' will: load that machinery
            # once here, then check the file again in a child that has it. A child forked
            # before the warm-up may ask too: it is only checked again.
            if not warmed:
                emit("warm_up")
                warmed = True
                with contextlib.suppress(Exception):  # the child then loads it itself
                    warm_after_start(project)
            waiting.insert(0, child.job)
            continue
        again = _without_crashed_model(child, result)
        if again is not None:
            waiting.insert(0, again)
            continue
        seconds = time.monotonic() - child.began
        result.update({"event": "file", "abspath": child.job["abspath"], "seconds": seconds})
        protocol.write(json.dumps(result, default=str) + "\n")


#: Models set aside, at most, before a file whose check keeps crashing is given up.
_MAX_CRASHED = 3


def _without_crashed_model(child: _Running, result: dict[str, Any]) -> dict[str, Any] | None:
    """The job to check again when its child died by a signal while checking one model
    (marked on its page): with that model set aside, reported as crashed. None otherwise."""
    page, child.page = child.page, None
    if page is None:
        return None
    name = crash_marks.read(page) if result.get("crashed") else None
    page.close()
    crashed = dict(child.job.get("crashed") or {})
    if name is None or name in crashed or len(crashed) >= _MAX_CRASHED:
        return None
    crashed[name] = f"its check crashed the process (signal {result['crashed']})"
    return {**child.job, "crashed": crashed}


def _parallel_children(since: _CpuSample | None = None) -> int:
    """How many children check files at once: one per idle core this process may use (at
    most `_MAX_CHILDREN`; `TORCHLINT_SHAPES_PROCESSES` overrides). On a busy machine a second
    child would only share a core, and each file would take longer against its time limit."""
    override = _children_override()
    if override is not None:
        return override
    cores = _usable_cores()
    return max(1, min(_MAX_CHILDREN, cores, int(_idle_cores(cores, since) + 0.5)))


def _children_override() -> int | None:
    """The count `TORCHLINT_SHAPES_PROCESSES` sets (at least 1), None when it sets none."""
    try:
        return max(1, int(os.environ.get("TORCHLINT_SHAPES_PROCESSES", "")))
    except ValueError:
        return None


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


#: Seconds over which idle cores are measured, at least.
_SAMPLE_SECONDS = 0.15
#: Seconds after which a run measures its idle cores again (see `_slots_now`).
_RESAMPLE_SECONDS = 2.0


def _slots_now(
    since: _CpuSample, running: list[_Running], slots: int
) -> tuple[int, _CpuSample | None]:
    """How many children may run at once now: the usable cores less those other programs kept
    busy since `since` (all the busy time but this worker's and its children's), and where the
    next measure starts. An override of the count (`TORCHLINT_SHAPES_PROCESSES`) stays."""
    if _children_override() is not None:
        return slots, None
    now = _cpu_sample(running)
    if now is None:
        return slots, None
    total = sum(now.ticks) - sum(since.ticks)
    if total <= 0:
        return slots, now
    busy = total - (now.ticks[3] + now.ticks[4] - since.ticks[3] - since.ticks[4])
    ours = (now.own - since.own) * os.sysconf("SC_CLK_TCK")
    others = (os.cpu_count() or 1) * max(0.0, busy - ours) / total
    cores = _usable_cores()
    return max(1, min(_MAX_CHILDREN, cores, int(cores - others + 0.5))), now


@dataclass(frozen=True)
class _CpuSample:
    """Where a measure of idle cores starts: the time, the machine's CPU ticks by state, and
    this process's own CPU seconds."""

    at: float
    ticks: list[int]
    own: float


def _cpu_sample(running: list[_Running] | None = None) -> _CpuSample | None:
    """Where a measure starts; with `running`, `own` is the CPU time of this worker and all its
    children so far (those reaped, and the `running` ones read from /proc)."""
    try:
        own = _own_cpu() if running is None else _tree_cpu(running)
        return _CpuSample(time.monotonic(), _cpu_ticks(), own)
    except (OSError, ValueError, IndexError):
        return None


def _own_cpu() -> float:
    times = os.times()
    return times.user + times.system


def _tree_cpu(running: list[_Running]) -> float:
    times = os.times()
    seconds = times.user + times.system + times.children_user + times.children_system
    ticks = os.sysconf("SC_CLK_TCK")
    for child in running:
        try:
            with open(f"/proc/{child.pid}/stat", encoding="ascii") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            seconds += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
        except (OSError, ValueError, IndexError):
            pass  # ended meanwhile: counted among the reaped once it is
    return seconds


def _idle_cores(cores: int, since: _CpuSample | None = None) -> float:
    """Idle cores right now, read from /proc/stat over a moment where there is one. The load
    average trails by a minute, so it would still count this run's own source-rule processes,
    which have just finished, and keep a long run's shape checks on one core.

    From `since` (the request's arrival), the moment is the time this process took to prepare,
    its own CPU counted as idle (its cores are the children's next), waited out to
    `_SAMPLE_SECONDS` if shorter."""
    try:
        before = since or _cpu_sample()
        if before is not None:
            time.sleep(max(0.0, _SAMPLE_SECONDS - (time.monotonic() - before.at)))
            after = _cpu_ticks()
            total = sum(after) - sum(before.ticks)
            own = (_own_cpu() - before.own) * os.sysconf("SC_CLK_TCK")
            if total > 0:
                # idle and iowait, and this process's own use
                idle = after[3] + after[4] - before.ticks[3] - before.ticks[4] + own
                return min(cores, (os.cpu_count() or cores) * min(idle, total) / total)
    except (OSError, ValueError, IndexError):
        pass
    try:
        return cores - os.getloadavg()[0]
    except OSError:
        return 1.0


def _cpu_ticks() -> list[int]:
    """The machine's CPU time so far, by state (user, nice, system, idle, iowait, ...)."""
    with open("/proc/stat", encoding="ascii") as stat:
        return [int(value) for value in stat.readline().split()[1:9]]


def _warm_while_waiting() -> float | None:
    """With `--warm` (a worker started before its request is ready, for a run that will check
    models), warm up now, before any user code, while the client still prepares the
    request: the seconds it took, or None when not asked."""
    if "--warm" not in sys.argv[1:]:
        return None
    began = time.perf_counter()
    _quiet()
    warm()
    compat.load_internals()
    # torch's objects are there for good: collected and frozen now, while the client still
    # works, the collection before forking only goes through what came after them.
    gc.collect()
    gc.freeze()
    return time.perf_counter() - began


def warm_after_start(project: Project) -> None:
    """Warm up with the sandbox in place, the user's files out of reach while it runs.

    The audit hook stays on (an import that tried a refused action would fail here, in the
    engine, not in a user's check); the user's project leaves the import system meanwhile, so
    that torch's lazy imports cannot find a user module of the same name.
    """
    sys.meta_path.remove(project)
    try:
        warm()
        compat.load_internals()
    finally:
        sys.meta_path.insert(0, project)
        install_site_hook(project.files)
        gc.collect()
        gc.freeze()


if __name__ == "__main__":
    main()
