"""The slicer: what importing a user's file through it runs, and what it keeps.

The first layer of the shape worker's sandbox (`torchlint.shapes.slicing`): each way around
it that was found (defaults, annotations, decorators, metaclasses, `map(os.system, ...)`)
must not run, and the harmless module-level values real model files need must be kept.
These tests import through the slicer in this process, without the audit hook, so a side
effect that got through would leave its marker file.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import pytest

from torchlint.shapes.loader import Project, Unavailable

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = ROOT / "fixtures" / "hostile"


def load(tmp_path: Path, name: str, source: str):
    """Import `source` as module `name` through the slicer; returns (module, project)."""
    (tmp_path / f"{name}.py").write_text(source)
    project = Project([str(tmp_path)], {}, contextlib.nullcontext)
    sys.meta_path.insert(0, project)
    try:
        return project.load(str(tmp_path / f"{name}.py"), name), project
    finally:
        sys.meta_path.remove(project)
        sys.modules.pop(name, None)


def hostile(name: str, marker: Path) -> str:
    marker.mkdir(exist_ok=True)
    text = (HOSTILE / name).read_text()
    return text.replace("MARKER", str(marker)).replace("PORT", "1")


def test_no_bypass_runs_while_importing(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    marker = tmp_path / "markers"
    module, project = load(tmp_path, "bypasses_mod", hostile("bypasses.py", marker))
    assert list(marker.iterdir()) == []
    # The model is still there, and so are the definitions around it.
    assert module.Net.__name__ == "Net"
    assert callable(module.default) and callable(module.decorated)
    assert isinstance(module.MAPPED, Unavailable)
    assert project.notes[str(tmp_path / "bypasses_mod.py")] == []


@pytest.mark.parametrize(
    "source",
    [
        "def f(a=os.system(CMD)):\n    return a\n",
        "x: os.system(CMD) = 1\n",
        "def f(a: os.system(CMD)) -> os.system(CMD):\n    return a\n",
        "def deco(fn):\n    os.system(CMD)\n    return fn\n\n@deco\ndef f():\n    pass\n",
        "X = list(map(os.system, [CMD]))\n",
        "X = sorted([CMD], key=os.system)\n",
        "X = functools.reduce(lambda a, b: os.system(CMD), [1, 2])\n",
        "X = operator.call(os.system, CMD)\n",
        "X = list(map(lambda c: os.system(c), [CMD]))\n",
        "def run(c):\n    os.system(c)\n\nX = list(map(run, [CMD]))\n",
        "X = list(map(getattr(os, 'system'), [CMD]))\n",
        "T = {}\nT[os.system(CMD)] = 1\n",
        "class M(type):\n    def __new__(m, n, b, d):\n        os.system(CMD)\n"
        "        return type.__new__(m, n, b, d)\n\nclass A(metaclass=M):\n    pass\n",
        "class B:\n    def __init_subclass__(cls, **kw):\n        os.system(CMD)\n\n"
        "class C(B):\n    pass\n",
        "class D(flag=os.system(CMD)):\n    pass\n",
        "class E:\n    def method(self, a=os.system(CMD)):\n        pass\n",
        "X = [c for c in [CMD] if os.system(c)]\n",
        "X = f'{os.system(CMD)}'\n",
        "X = (lambda a=os.system(CMD): a)\n",
        "X = __builtins__['exec']('import os; os.system(CMD)')\n",
    ],
)
def test_side_effect_does_not_run(tmp_path: Path, source: str) -> None:
    marker = tmp_path / "ran"
    prelude = f"import functools\nimport operator\nimport os\n\nCMD = 'touch {marker}'\n\n"
    load(tmp_path, "case", prelude + source)
    assert not marker.exists()


KEPT = """
import importlib.util
import logging
import os
import sys
from collections import namedtuple
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import NamedTuple, Optional, TypeVar

import torch
from packaging import version

logger = logging.getLogger(__name__)
HERE = Path(__file__).resolve().parent
ROOT = os.path.dirname(os.path.abspath(__file__))
CACHE = os.environ.get("TORCHLINT_TEST_UNSET", "cache")
NEW = version.parse("2.1.0") >= version.parse("2.0")
PY3 = sys.version_info >= (3,)
TORCH_VERSION = tuple(int(x) for x in torch.__version__.split(".")[:2])
HAS_MISSING = importlib.util.find_spec("surely_not_installed_pkg") is not None
T = TypeVar("T")
Point = namedtuple("Point", "x y")
Flags = NamedTuple("Flags", [("flash", bool), ("math", bool)])
ORIGIN = Point(0, 0)
BASE = 16
HIDDEN = BASE * 4
ORDER = sorted([3, 1, 2], key=lambda d: -d)
Joined = partial(max, 0)


def is_flash_available():
    return False


FLASH = is_flash_available()


class Pair(NamedTuple):
    a: int
    b: Optional[int] = None


@dataclass
class Config:
    dim: int = HIDDEN
    layers: list = field(default_factory=list)

    @property
    def double(self) -> int:
        return self.dim * 2

    @double.setter
    def double(self, value: int) -> None:
        self.dim = value // 2


DEFAULT = Config()


def attend(flags: Flags = Flags(True, False), at=Point(1, 1)):
    return flags.math, at.x


WEIRD = load_from_disk("weights.bin")
"""


def test_harmless_module_values_are_kept(tmp_path: Path) -> None:
    module, _ = load(tmp_path, "kept", KEPT)
    assert module.logger.name == "kept"
    assert tmp_path == module.HERE
    assert str(tmp_path) == module.ROOT
    assert module.CACHE == "cache"
    assert module.NEW is True and module.PY3 is True and module.HAS_MISSING is False
    assert module.TORCH_VERSION >= (2, 0)  # a version check on torch's own version string
    assert module.FLASH is False
    assert module.T.__name__ == "T"
    assert module.Point(1, 2).y == 2
    assert module.ORIGIN == (0, 0)  # a record class is built like a dataclass
    assert module.attend() == (False, 1)  # and in defaults (not a stand-in)
    assert module.Pair(1).b is None
    assert module.HIDDEN == 64 and module.ORDER == [3, 2, 1]
    assert module.DEFAULT.double == 128
    assert module.Config.__dataclass_fields__["dim"].type == "int"  # a string, not evaluated


PLAIN = """
import os


class Settings:
    n_embd = 64
    heads = (2, 4)


class NotebookLogger:
    def __init__(self, level=0):
        self._seen = set()
        self.level = level + 1


class Touching:
    def __init__(self):
        self.files = os.listdir(".")


class Sized:
    def __len__(self):
        return 3


settings = Settings()
logger = NotebookLogger()
touched = Touching()
sized = Sized()
"""


def test_instances_of_plain_value_classes_are_kept(tmp_path: Path) -> None:
    module, _ = load(tmp_path, "plain", PLAIN)
    assert module.settings.n_embd == 64 and module.logger.level == 1
    # An `__init__` that calls anything, or a special method, runs the user's code: not run.
    for name in ("touched", "sized"):
        assert isinstance(vars(module)[name], Unavailable)


def test_value_that_is_not_computed_fails_only_when_used(tmp_path: Path) -> None:
    source = KEPT + "\n\ndef uses():\n    return WEIRD.shape\n\n\ndef ignores():\n    return 1\n"
    module, _ = load(tmp_path, "standin", source)
    assert module.ignores() == 1
    with pytest.raises(NameError, match=r"WEIRD \(line \d+\) is not available"):
        module.uses()


def test_earlier_value_survives_a_dropped_rebinding(tmp_path: Path) -> None:
    module, _ = load(tmp_path, "rebind", "SIZE = 8\nSIZE = compute(SIZE)\n")
    assert module.SIZE == 8


def test_value_that_fails_to_compute_fails_only_when_used(tmp_path: Path) -> None:
    source = "HAS = 'x' in dir(int)\nTABLE = dict(a=1 if HAS else 2, b=1 // 0)\n"
    module, _ = load(tmp_path, "fails", source)
    assert module.HAS is False
    with pytest.raises(NameError, match=r"TABLE \(line 2\) is not available"):
        module.TABLE.get("a")


def test_lightning_feature_flags_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`_TORCHVISION_AVAILABLE = module_available("torchvision")` (lightning_utilities, as
    Lightning and its model zoos write their flags) is a feature flag: kept, so that a model
    reading it is built. A stand-in package plays lightning_utilities here."""
    installed = tmp_path / "installed" / "lightning_utilities" / "core"
    installed.mkdir(parents=True)
    (installed.parent / "__init__.py").write_text("")
    (installed / "__init__.py").write_text("")
    (installed / "imports.py").write_text(
        "def module_available(name):\n    return name == 'os'\n\n\n"
        "def compare_version(name, op, version):\n    return True\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "installed"))
    project = tmp_path / "project"
    project.mkdir()
    try:
        module, _ = load(
            project,
            "flags",
            "import operator\n"
            "from lightning_utilities.core.imports import compare_version, module_available\n\n"
            "_OS_AVAILABLE = module_available('os')\n"
            "_NEW = compare_version('torch', operator.ge, '1.10.0')\n",
        )
    finally:
        for name in [n for n in sys.modules if n.startswith("lightning_utilities")]:
            sys.modules.pop(name)
    assert module._OS_AVAILABLE is True and module._NEW is True
