"""The private torch APIs the shape engine uses work with the installed torch."""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="shape checks (TL6xx) need torch installed")

import torch

from torchlint.shapes import compat
from torchlint.shapes.loader import Project

ROOT = Path(__file__).resolve().parent.parent


def test_the_shapes_extra_declares_the_supported_range() -> None:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    match = re.search(r'shapes = \["torch>=(\d+)\.(\d+),<(\d+)\.(\d+)"\]', text)
    assert match, "the shapes extra should read torch>=A.B,<C.D"
    low, high = (int(match[1]), int(match[2])), (int(match[3]), int(match[4]))
    assert low == compat.OLDEST
    assert high == (compat.NEWEST[0], compat.NEWEST[1] + 1)


def test_the_torch_matrix_tests_both_ends_of_the_range() -> None:
    text = (ROOT / ".ci" / "torch-matrix").read_text(encoding="utf-8")
    ends = dict(re.findall(r"^(OLDEST|NEWEST)=(\S+)$", text, re.MULTILINE))
    assert compat.parse_version(ends["OLDEST"]) == compat.OLDEST
    assert compat.parse_version(ends["NEWEST"]) == compat.NEWEST


LOW = "{}.{}".format(*compat.OLDEST)
HIGH = "{}.{}".format(*compat.NEWEST)
BELOW = f"{compat.OLDEST[0]}.{compat.OLDEST[1] - 1}"
ABOVE = f"{compat.NEWEST[0]}.{compat.NEWEST[1] + 1}"


@pytest.mark.parametrize("version", [f"{LOW}.0", f"{LOW}.1+cpu", f"{HIGH}.0", f"{HIGH}.2"])
def test_versions_in_range_get_no_note(version: str) -> None:
    assert compat.outside_range(version) is None


@pytest.mark.parametrize(
    "version", [f"{BELOW}.1", f"{ABOVE}.0", f"{ABOVE}.0a0+git1234", "3.0.0", "nightly"]
)
def test_versions_outside_the_range_are_named(version: str) -> None:
    note = compat.outside_range(version)
    assert note == f"torch {version} is outside the supported range {LOW} to {HIGH}"


def test_failures_name_the_range_only_outside_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch, "__version__", f"{HIGH}.0")
    assert compat.explain("internal error: KeyError") == "internal error: KeyError"
    monkeypatch.setattr(torch, "__version__", f"{ABOVE}.1")
    assert compat.explain("internal error: KeyError") == (
        f"internal error: KeyError (torch {ABOVE}.1 is outside the supported range {LOW} to {HIGH})"
    )


def test_symbolic_sizes_record_guards() -> None:
    env = compat.shape_env()
    mode = compat.fake_mode(env)
    compat.set_cache(mode, False)
    h, h_size = compat.symbolic_size(env, 32, "H")
    w, w_size = compat.symbolic_size(env, 32, "W")
    assert h != w  # equal hints, distinct symbols
    with mode:
        x = torch.empty(2, h_size, w_size)
        y = torch.nn.functional.max_pool2d(x, 2)
        before = compat.guard_count(env)
        if x.shape[1] == 32:  # a branch on a symbolic size records a guard
            pass
    assert compat.guard_count(env) > before
    assert any(h in e.free_symbols for e in compat.guard_exprs(env, before))
    assert compat.computed_expr(x.shape[1]) == h
    pooled = compat.computed_expr(y.shape[-1])
    assert pooled.free_symbols == {w}
    assert pooled.subs(w, 32) == 16
    assert compat.computed_expr(7) == 7 and compat.current_expr(7) == 7


def test_guards_leave_torch_export_unloaded() -> None:
    """torch looks for a guard's user frame past its own files; naming them must not import
    torch.export (and networkx with it) into every worker."""
    probe = (
        "import sys, torch\n"
        "from torchlint.shapes import compat\n"
        "env = compat.shape_env()\n"
        "h, size = compat.symbolic_size(env, 32, 'H')\n"
        "with compat.fake_mode(env):\n"
        "    x = torch.empty(2, size)\n"
        "    if x.shape[1] == 32:\n"
        "        pass\n"
        "assert compat.guard_count(env), 'no guard recorded'\n"
        "from torch.fx.experimental import symbolic_shapes\n"
        "assert symbolic_shapes.__file__ in symbolic_shapes.uninteresting_files()\n"
        "print(sorted(m for m in ('torch.export._trace', 'networkx') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout.strip() == "[]"


def test_fake_copies_keep_what_a_run_reads() -> None:
    mode = compat.fake_mode(compat.shape_env())
    frozen = torch.nn.Parameter(torch.empty(4, 3, device="meta"), requires_grad=False)
    layer = torch.nn.Linear(3, 4, device="meta")
    weight = compat.fake_like(mode, layer.weight)
    buffer = compat.fake_like(mode, torch.empty(6, 2, dtype=torch.float16, device="meta").t())
    assert isinstance(weight, torch.nn.Parameter) and weight.requires_grad and weight.is_leaf
    assert not compat.fake_like(mode, frozen).requires_grad
    assert not isinstance(buffer, torch.nn.Parameter) and not buffer.requires_grad
    assert (buffer.shape, buffer.stride(), buffer.dtype) == ((2, 6), (1, 2), torch.float16)
    assert weight.device.type == buffer.device.type == "cpu"
    with mode:
        out = torch.nn.functional.linear(torch.empty(2, 3), weight)
    assert out.shape == (2, 4) and out.fake_mode is weight.fake_mode is mode


def test_size_checks_fail_like_torch_does() -> None:
    compat.check(True, lambda: "unused")
    with pytest.raises(RuntimeError, match="sizes differ"):
        compat.check(False, lambda: "sizes differ")


def test_size_functions_are_classes_of_this_torch() -> None:
    import sympy

    n = sympy.Symbol("n", integer=True, positive=True)
    assert isinstance(compat.size_functions.FloorDiv(n, 2), compat.size_functions.FloorDiv)
    for name, value in vars(compat.size_functions).items():
        assert isinstance(value, type), name


def test_layer_families() -> None:
    nn = torch.nn
    layers = compat.layers
    assert isinstance(nn.Conv2d(1, 1, 3), layers.ConvNd)
    assert isinstance(nn.MaxPool2d(2), layers.MaxPoolNd)
    assert isinstance(nn.AvgPool1d(2), layers.AvgPoolNd)
    assert isinstance(nn.AdaptiveAvgPool2d(1), layers.AdaptiveAvgPoolNd)
    assert isinstance(nn.AdaptiveMaxPool2d(1), layers.AdaptiveMaxPoolNd)
    assert isinstance(nn.BatchNorm2d(4), layers.NormBase)
    assert isinstance(nn.Dropout(0.1), layers.DropoutNd)
    assert torch.nn.functional.linear.__module__ == compat.NATIVE_FUNCTIONAL_MODULE


def test_torch_files_the_table_walks_past_exist() -> None:
    for path in [compat.MODULE_FILE, compat.CONTAINER_FILE, *compat.DISPATCH_FILES]:
        assert os.path.isfile(path), path


def test_stand_in_keeps_what_torch_reads_off_the_original() -> None:
    @functools.lru_cache
    def available() -> bool:
        return True

    replacement = compat.stand_in(available, lambda: False)
    assert replacement() is False
    assert replacement.__wrapped__ is available.__wrapped__
    plain = compat.stand_in(len, lambda: 0)
    assert not hasattr(plain, "__wrapped__")


def test_internals_load_before_the_worker_patches_torch() -> None:
    compat.load_internals()
    assert hasattr(sys.modules["torch._dynamo"], "disable")


def test_import_hook_leaves_installed_packages_alone(tmp_path: Path) -> None:
    """A virtualenv beside the project (`proj-venv`) or inside it is not the project's."""
    project_root = tmp_path / "proj"
    (project_root / "pkg" / "sub").mkdir(parents=True)
    sibling = tmp_path / "proj-venv" / "pkg"
    (sibling / "sub").mkdir(parents=True)
    project = Project([str(project_root)], {}, meta_context=lambda: None)  # type: ignore[arg-type]
    assert project.find_spec("pkg.sub", [str(sibling)]) is None
    spec = project.find_spec("pkg.sub", [str(project_root / "pkg")])
    assert spec is not None and spec.submodule_search_locations == [
        str(project_root / "pkg" / "sub")
    ]
    inside = project_root / ".venv" / "lib" / "site-packages" / "lib"
    (inside / "models").mkdir(parents=True)
    project.environment.add(str(project_root / ".venv" / "lib" / "site-packages"))
    assert project.find_spec("lib.models", [str(inside)]) is None


@pytest.mark.parametrize("layer", [torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_recurrent_kernels_make_outputs_as_torch_does(
    monkeypatch: pytest.MonkeyPatch, layer: type, batch_first: bool, bidirectional: bool
) -> None:
    """The kernels made from sizes (`compat._adapt_torch`) give the shapes and strides of
    torch's own, which run step by step (a batch-first output is not contiguous)."""
    name = {torch.nn.LSTM: "lstm", torch.nn.GRU: "gru", torch.nn.RNN: "rnn_tanh"}[layer]
    assert getattr(getattr(torch._VF, name), "__torchlint_by_shape__", False)
    module = layer(5, 7, 2, batch_first=batch_first, bidirectional=bidirectional)
    batch = torch.randn(4, 6, 5)

    def layout(result: tuple) -> list:
        output, state = result
        states = state if isinstance(state, tuple) else (state,)
        return [(t.shape, t.stride()) for t in (output, *states)]

    by_shape = layout(module(batch))
    monkeypatch.setattr(torch._VF, name, getattr(torch._C._VariableFunctions, name))
    assert by_shape == layout(module(batch))
