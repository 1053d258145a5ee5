"""The shape worker starts while the source rules run, only when a model will be checked."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from torchlint import runner, shapes
from torchlint.config import Overrides
from torchlint.runner import RunOptions, run
from torchlint.shapes import client

MODEL = """\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)


model = Net()
print(model(torch.randn(3, 4)))
"""
# Mentions nn.Module (a candidate for the shape stage) but defines no model.
NO_MODEL = """\
import torch

# Works with any nn.Module.
def count(model):
    return sum(p.numel() for p in model.parameters())
"""


class _FakeWorker:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Records the workers started early and what the shape stage was given."""
    seen: dict[str, Any] = {"started": [], "given": []}

    def start(warm: bool = False) -> _FakeWorker:
        worker = _FakeWorker()
        seen["started"].append(worker)
        seen.setdefault("warm", []).append(warm)
        return worker

    def check_files(files: list, **kwargs: Any) -> dict:
        seen["given"].append(kwargs.get("started"))
        return {}

    monkeypatch.setattr(client, "start_worker", start)
    monkeypatch.setattr(shapes, "check_files", check_files)
    monkeypatch.setattr(shapes, "torch_available", lambda: True)
    return seen


def _run(folder: Path, **options: Any) -> None:
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        run([folder], Overrides(), RunOptions(jobs=1, **options))
    finally:
        os.chdir(cwd)


def test_a_model_to_check_gets_a_worker_started_early(
    tmp_path: Path, recorded: dict[str, Any]
) -> None:
    (tmp_path / "train.py").write_text(MODEL)
    _run(tmp_path, use_cache=False)
    assert len(recorded["started"]) == 1
    assert recorded["given"] == recorded["started"]
    assert recorded["started"][0].closed
    assert recorded["warm"] == [True]  # it loads fake tensors while the request is prepared


def test_no_worker_when_no_file_defines_a_model(tmp_path: Path, recorded: dict[str, Any]) -> None:
    (tmp_path / "count.py").write_text(NO_MODEL)
    (tmp_path / "script.py").write_text("import torch\nprint(torch.zeros(2))\n")
    _run(tmp_path, use_cache=False)
    assert recorded["started"] == []
    assert recorded["given"] == [None]


def test_no_worker_when_shape_checks_are_off(tmp_path: Path, recorded: dict[str, Any]) -> None:
    (tmp_path / "train.py").write_text(MODEL)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        run([tmp_path], Overrides(shapes="off"), RunOptions(jobs=1, use_cache=False))
    finally:
        os.chdir(cwd)
    assert recorded["started"] == [] and recorded["given"] == []


def test_no_worker_when_no_file_changed_since_the_cached_run(
    tmp_path: Path, recorded: dict[str, Any]
) -> None:
    (tmp_path / "train.py").write_text(MODEL)
    cache = tmp_path / "cache"
    _run(tmp_path, cache_dir=cache)
    assert len(recorded["started"]) == 1
    _run(tmp_path, cache_dir=cache)
    assert len(recorded["started"]) == 1  # the second run starts none


def test_the_early_worker_is_stopped_when_the_run_fails(
    tmp_path: Path, recorded: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "train.py").write_text(MODEL)

    def fail(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(runner, "_shape_diagnostics", fail)
    with pytest.raises(RuntimeError):
        _run(tmp_path, use_cache=False)
    assert [w.closed for w in recorded["started"]] == [True]


def test_the_shape_stage_reuses_the_scan_that_decided_the_early_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from torchlint.shapes import discover

    (tmp_path / "model.py").write_text(MODEL)
    scans: list[int] = []
    scan = discover.scan

    def counted(files: list, trees: Any = None) -> list:
        scans.append(len(files))
        return scan(files, trees)

    monkeypatch.setattr(discover, "scan", counted)
    monkeypatch.setattr(shapes, "_needs_worker", lambda infos, tables: False)
    monkeypatch.setattr(shapes, "torch_available", lambda: True)
    files = [("model.py", MODEL)]
    assert shapes.needs_worker(files) is False
    assert shapes._scan(list(files))[0] != []
    assert scans == [1]
    assert shapes._scan(files)[0] != []  # taken over once only
    assert scans == [1, 1]


def test_the_shape_stage_takes_over_the_evidence_collected_while_the_rules_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from torchlint.shapes import evidence

    (tmp_path / "model.py").write_text(MODEL)
    collected: list[int] = []
    collect = evidence.collect

    def counted(infos: list, files: list, declared: Any, trees: Any = None) -> dict:
        collected.append(len(files))
        return collect(infos, files, declared, trees)

    monkeypatch.setattr(evidence, "collect", counted)
    monkeypatch.setattr(shapes, "_needs_worker", lambda infos, tables: True)
    monkeypatch.setattr(shapes, "torch_available", lambda: True)
    files = [("model.py", MODEL)]
    assert shapes.needs_worker(files)
    shapes.prepare_evidence(files, {})
    infos = shapes._scan(list(files)).infos
    facts = shapes._collect(infos, list(files), {})
    assert collected == [1]  # taken over, not collected again
    assert facts == collect(infos, files, {})
    # Other settings (a declared input shape) or other files: collected for them.
    assert shapes.needs_worker(files)
    shapes.prepare_evidence(files, {})
    shapes._collect(shapes._scan(files)[0], files, {"Net": {"shapes": [[1, 4]]}})
    assert collected == [1, 1, 1]


def test_idle_cores_count_the_workers_own_work_as_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    from torchlint.shapes import worker

    ticks = os.sysconf("SC_CLK_TCK")
    # Two cores over one second: the worker itself kept one busy, the other idled.
    before = worker._CpuSample(0.0, [0, 0, 0, 0, 0, 0, 0, 0], own=1.0)
    monkeypatch.setattr(worker, "_cpu_ticks", lambda: [ticks, 0, 0, ticks, 0, 0, 0, 0])
    monkeypatch.setattr(worker, "_own_cpu", lambda: 2.0)
    monkeypatch.setattr(worker.os, "cpu_count", lambda: 2)
    assert worker._idle_cores(2, before) == 2
    monkeypatch.setattr(worker, "_own_cpu", lambda: 1.0)  # another process was busy
    assert worker._idle_cores(2, before) == 1


def test_children_are_added_when_cores_come_free(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that started on one child (another program held the second core) takes a
    second one once that core idles; a core another program keeps busy is left to it, the
    worker's own children's use is not counted against it; an override stays."""
    pytest.importorskip("torch")
    from torchlint.shapes import worker

    ticks = os.sysconf("SC_CLK_TCK")
    monkeypatch.delenv("TORCHLINT_SHAPES_PROCESSES", raising=False)
    monkeypatch.setattr(worker.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(worker, "_usable_cores", lambda: 2)
    before = worker._CpuSample(0.0, [0, 0, 0, 0, 0, 0, 0, 0], own=0.0)
    # Over one second, one core ran the worker's child and the other idled.
    monkeypatch.setattr(worker, "_tree_cpu", lambda running: 1.0)
    monkeypatch.setattr(worker, "_cpu_ticks", lambda: [ticks, 0, 0, ticks, 0, 0, 0, 0])
    slots, measured = worker._slots_now(before, [], slots=1)
    assert slots == 2 and measured is not None
    # Both cores busy: the child's and another program's.
    monkeypatch.setattr(worker, "_cpu_ticks", lambda: [2 * ticks, 0, 0, 0, 0, 0, 0, 0])
    assert worker._slots_now(before, [], slots=2)[0] == 1
    # Both busy with two children of the worker: they keep both cores.
    monkeypatch.setattr(worker, "_tree_cpu", lambda running: 2.0)
    assert worker._slots_now(before, [], slots=2)[0] == 2
    monkeypatch.setenv("TORCHLINT_SHAPES_PROCESSES", "1")
    assert worker._slots_now(before, [], slots=1) == (1, None)


def test_a_run_collects_the_evidence_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The evidence collected while the rules run is the one the shape stage sends: the
    stage's own scan (templates' twins taken out, files without models left out) is the same
    list of files, so it is not collected a second time."""
    from torchlint.shapes import evidence

    (tmp_path / "train.py").write_text(MODEL)
    # Parsed by the scan (a class, the word Module), no model: the evidence reads its tree.
    (tmp_path / "settings.py").write_text('class NetSettings:\n    """For Net, a Module."""\n')
    collected: list[int] = []
    collect = evidence.collect

    def counted(infos: list, files: list, declared: Any, trees: Any = None) -> dict:
        collected.append(len(files))
        return collect(infos, files, declared, trees)

    parsed: list[str] = []
    parse = evidence.parse

    def parse_counted(source: str, path: str = "") -> Any:
        parsed.append(path)
        return parse(source, path)

    monkeypatch.setattr(evidence, "parse", parse_counted)
    sent: list[dict] = []

    def answer(request: dict, timeout: float, started: Any = None, progress: Any = None) -> tuple:
        sent.append(request)
        return {job["abspath"]: {"findings": []} for job in request["jobs"]}, {}

    monkeypatch.setattr(evidence, "collect", counted)
    monkeypatch.setattr(client, "start_worker", lambda warm=False: _FakeWorker())
    monkeypatch.setattr(client, "run_worker", answer)
    monkeypatch.setattr(shapes, "torch_available", lambda: True)
    monkeypatch.setattr(shapes, "_needs_worker", lambda infos, tables: True)
    monkeypatch.setattr("torchlint.shapes.settle.settled", lambda *args: None)
    _run(tmp_path, use_cache=False)
    assert len(sent) == 1 and [job["module"] for job in sent[0]["jobs"]] == ["train"]
    assert collected == [2]
    assert parsed == []  # every file it read was parsed by the scan
