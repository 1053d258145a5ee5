"""Hostile model files under `torchlint DIR`: no side effect, no orphan, neighbours kept.

`fixtures/hostile/` holds model files that try every side effect found so far, at import
time and in their constructors, plus files that end, hang or exhaust the worker. They run
through the real CLI with a small per-file time limit. A marker file appearing in the test's
folder, a connection to the test's socket, or a process left behind fails the test.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from tests.conftest import run_cli
from torchlint.shapes import UNFINISHED

pytest.importorskip("torch", reason="shape checks (TL6xx) need torch installed")

HOSTILE = Path(__file__).resolve().parent.parent / "fixtures" / "hostile"
#: Small, so that the files that hang cost seconds; large enough for the ordinary file on a
#: busy machine.
TIME_LIMIT = "10"


class Listener:
    """A socket server on 127.0.0.1 that counts the connections it gets."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        self.connections = 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                connection, _ = self.server.accept()
            except OSError:
                continue
            self.connections += 1
            connection.close()

    def close(self) -> None:
        self.stopped.set()
        self.thread.join()
        self.server.close()


def copy_corpus(target: Path, marker: Path, port: int, names: list[str] | None = None) -> None:
    target.mkdir()
    for path in sorted(HOSTILE.glob("*.py")):
        if names is None or path.name in names:
            text = path.read_text().replace("MARKER", str(marker)).replace("PORT", str(port))
            (target / path.name).write_text(text)


def tagged_processes(tag: str) -> list[int]:
    """Processes still alive whose environment carries `tag` (started by this test)."""
    found = []
    needle = f"TORCHLINT_TEST_TAG={tag}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environment = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in environment.split(b"\0") and state != "Z":
            found.append(int(entry.name))
    return found


@pytest.fixture
def corpus(tmp_path: Path):
    marker = tmp_path / "markers"
    marker.mkdir()
    (marker / "keep").write_text("must survive")
    listener = Listener()
    source = tmp_path / "project"
    copy_corpus(source, marker, listener.port)
    yield source, marker, listener
    listener.close()


def run(source: Path, *args: str, env: dict[str, str] | None = None):
    tag = uuid.uuid4().hex
    result = run_cli(
        *args,
        ".",
        cwd=source,
        env={"TORCHLINT_SHAPES_TIMEOUT": TIME_LIMIT, "TORCHLINT_TEST_TAG": tag, **(env or {})},
    )
    return result, tag


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="orphans are looked for in /proc")
def test_hostile_corpus_has_no_effect_and_keeps_the_neighbour(corpus) -> None:
    source, marker, listener = corpus
    result, tag = run(source, "--no-cache", "--select", "TL6", "--extend-select", "TL690")
    out = result.stdout
    assert result.returncode == 1, result.stderr
    # Nothing happened outside the worker.
    assert sorted(p.name for p in marker.iterdir()) == ["keep"]
    assert listener.connections == 0
    assert tagged_processes(tag) == []
    # The ordinary file's finding survived its hostile neighbours.
    assert "neighbour.py:10:20: TL601" in out
    # Each hostile file got its own TL690, naming what happened.
    for expected in (
        "Writes(): Blocked: the model's code writes the file",
        "System(): Blocked: the model's code runs a subprocess",
        "Spawns(): Blocked: the model's code runs a subprocess",
        "Connects(): Blocked: the model's code opens a network connection",
        "Deletes(): Blocked: the model's code deletes a file",
        "Native(): Blocked: the model's code loads native code (ctypes)",
        "Forks(): Blocked: the model's code forks a process",
        "allocates.py:6:1: TL690 shape check of Allocates skipped: could not build"
        " Allocates(): MemoryError (ran out of memory",
        f"exits.py:8:1: TL690 shape check of Exits skipped: {UNFINISHED}"
        " (the check stopped its process",
        f"exits_on_load.py:24:1: TL690 shape check of Small skipped: {UNFINISHED}"
        " (the check stopped the worker",
        f"spins.py:6:1: TL690 shape check of Spins skipped: {UNFINISHED}"
        f" (timed out after {TIME_LIMIT} s",
        f"spins_on_load.py:24:1: TL690 shape check of Tiny skipped: {UNFINISHED}"
        f" (timed out after {TIME_LIMIT} s",
    ):
        assert expected in out, out
    assert "Traceback" not in result.stderr


def test_a_run_with_unfinished_checks_never_passes_silently(tmp_path: Path) -> None:
    marker = tmp_path / "markers"
    marker.mkdir()
    source = tmp_path / "project"
    copy_corpus(source, marker, 1, names=["exits_on_load.py", "neighbour.py"])
    (source / "neighbour.py").write_text(
        (source / "neighbour.py").read_text().replace("Linear(32, 4)", "Linear(16, 4)")
    )
    result, tag = run(source, "--no-cache", "--select", "TL6")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "All checks passed!" in result.stdout
    assert "shape checks did not finish for 1 file; see --extend-select TL690" in result.stderr
    assert tagged_processes(tag) == []


def test_untrusted_environment_turns_shapes_off_over_the_repository(corpus) -> None:
    source, _, _ = corpus
    (source / "pyproject.toml").write_text("[tool.torchlint]\nshapes = true\n")
    result, _ = run(source, "--no-cache", env={"TORCHLINT_NO_SHAPES": "1"})
    assert "TL6" not in result.stdout, result.stdout
    assert result.returncode in (0, 1), result.stderr
    result, _ = run(source, "--no-cache", "--no-shapes")
    assert "TL6" not in result.stdout, result.stdout


def test_server_follows_the_editors_trust_and_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from torchlint.server.settings import Options

    monkeypatch.delenv("TORCHLINT_NO_SHAPES", raising=False)
    assert Options.parse({}).runs_shapes is True  # no word from the client: trusted
    assert Options.parse({"trusted": False}).runs_shapes is False
    monkeypatch.setenv("TORCHLINT_NO_SHAPES", "1")
    assert Options.parse({"trusted": True}).runs_shapes is False


def test_shape_tables_refuse_to_run_when_the_environment_says_no(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text((HOSTILE / "neighbour.py").read_text())
    result = run_cli("shapes", "model.py", cwd=tmp_path, env={"TORCHLINT_NO_SHAPES": "1"})
    assert result.returncode == 2
    assert "TORCHLINT_NO_SHAPES" in result.stderr


def test_native_libraries_open_only_from_installed_packages(tmp_path: Path) -> None:
    """torchvision's operators load through ctypes when it is imported: a library under the
    installed packages' folders opens; one in the linted tree, or a bare name, does not."""
    import _json

    library = Path(_json.__file__)
    for folder in ("site-packages", "tree"):
        (tmp_path / folder).mkdir()
        shutil.copy(library, tmp_path / folder / library.name)
    script = f"""
import ctypes, tempfile
from torchlint.shapes import sandbox
sandbox.install(tempfile.mkdtemp(), [], libraries=[{str(tmp_path / "site-packages")!r}])
ctypes.CDLL({str(tmp_path / "site-packages" / library.name)!r})
for name in ({str(tmp_path / "tree" / library.name)!r}, None, "libc.so.6"):
    try:
        ctypes.CDLL(name)
    except sandbox.Blocked as exc:
        print("refused:", exc)
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("refused: the model's code loads native code (ctypes)") == 3


def test_hub_libraries_are_kept_offline(tmp_path: Path) -> None:
    """A constructor that loads a model from the Hugging Face hub fails at once (the
    libraries' offline switches are on), instead of retrying the refused connection until
    the file's time runs out."""
    (tmp_path / "model.py").write_text(
        "import os\n"
        "import torch.nn as nn\n\n\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        '        offline = os.environ.get("HF_HUB_OFFLINE") == "1"\n'
        "        self.fc = nn.Linear(4, 8 if offline else 4)\n"
        "        self.out = nn.Linear(4, 2)\n\n"
        "    def forward(self, x):\n"
        "        return self.out(self.fc(x))\n"
    )
    result = run_cli("check", "--select", "TL6", "--no-cache", "model.py", cwd=tmp_path)
    assert "TL601" in result.stdout and "out = nn.Linear(4, 2)" in result.stdout, result.stdout
