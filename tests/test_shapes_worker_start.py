"""The shape worker starts early, loads fake tensors only for files that need them, and
answers the same either way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from torchlint.shapes import check_files
from torchlint.shapes.client import run_worker, start_worker

NEEDS_ARGUMENTS = """
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x)
"""

MISMATCH = """
import torch.nn as nn


class Mismatch(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(6, 2)

    def forward(self, x):
        return self.fc2(self.fc1(x))
"""


def _request(tmp_path: Path, sources: dict[str, str], name: str) -> dict[str, Any]:
    texts = {}
    jobs = []
    for stem, text in sources.items():
        path = tmp_path / f"{stem}.py"
        path.write_text(text)
        texts[str(path)] = text
        spec = {"line": 5, "ctor": None, "declared": None, "evidence": []}
        jobs.append(
            {"abspath": str(path), "module": stem, "classes": {name: spec}, "module_level": []}
        )
    return {"jobs": jobs, "texts": texts, "roots": [str(tmp_path)], "timeout": 20.0}


def test_models_that_stop_before_fake_tensors_never_load_them(tmp_path: Path) -> None:
    sources = {f"block{i}": NEEDS_ARGUMENTS for i in range(3)}
    answered: list[tuple[int, int]] = []
    request = _request(tmp_path, sources, "Block")
    results, facts = run_worker(request, 20.0, progress=lambda *seen: answered.append(seen))
    assert answered == [(1, 3), (2, 3), (3, 3)]  # a progress line follows the answers
    assert "warmed_up" not in facts and "error" not in facts
    for result in results.values():
        [pending] = result["pending"]
        assert pending["reason"].startswith("needs arguments: inner")


def test_the_first_model_on_fake_tensors_warms_the_worker_up_once(tmp_path: Path) -> None:
    sources = {f"net{i}": MISMATCH for i in range(3)}
    results, facts = run_worker(_request(tmp_path, sources, "Mismatch"), 20.0)
    assert facts.get("warmed_up") is True
    codes = [[f["code"] for f in r.get("findings", [])] for r in results.values()]
    # The file that asked for the warm-up is checked again, and answers like the others.
    assert codes == [["TL601"]] * 3


def test_a_single_file_gets_the_same_answer(tmp_path: Path) -> None:
    path = str(tmp_path / "net.py")
    [diagnostic] = check_files([(path, MISMATCH)])[path]
    assert diagnostic.code == "TL601" and diagnostic.line == 9  # fc2


def test_a_worker_started_early_serves_the_request(tmp_path: Path) -> None:
    worker = start_worker()
    request = _request(tmp_path, {"net": MISMATCH}, "Mismatch")
    results, facts = run_worker(request, 20.0, worker)
    assert facts["ready"] > 0 and set(facts["phases"]) == {"torch", "engine", "setup"}
    [result] = results.values()
    assert [f["code"] for f in result["findings"]] == ["TL601"]
    assert worker.process.poll() is not None  # stopped once it answered


def test_a_worker_warmed_while_waiting_answers_alike_without_a_warm_up(tmp_path: Path) -> None:
    sources = {f"net{i}": MISMATCH for i in range(2)}
    results, facts = run_worker(_request(tmp_path, sources, "Mismatch"), 20.0, start_worker(True))
    assert "warmed_up" not in facts and facts["phases"]["warm"] > 0
    codes = [[f["code"] for f in r.get("findings", [])] for r in results.values()]
    assert codes == [["TL601"]] * 2


def test_files_checked_two_at_a_time_get_the_same_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCHLINT_SHAPES_PROCESSES", "2")
    sources = {"net0": MISMATCH, "block": NEEDS_ARGUMENTS, "net1": MISMATCH, "net2": MISMATCH}
    jobs = _request(tmp_path, sources, "Mismatch")
    jobs["jobs"][1]["classes"] = {"Block": jobs["jobs"][1]["classes"]["Mismatch"]}
    results, facts = run_worker(jobs, 20.0, start_worker(True))
    assert "error" not in facts and len(results) == 4
    for path, result in results.items():
        codes = [f["code"] for f in result.get("findings", [])]
        assert codes == ([] if path.endswith("block.py") else ["TL601"])


def test_a_worker_started_for_nothing_is_stopped() -> None:
    worker = start_worker()
    worker.close()
    worker.close()  # closing twice is harmless
    assert worker.process.poll() is not None
