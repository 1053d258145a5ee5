"""The first run of a traced model on plain meta tensors (`meta_run`): it decides only when
it passes; any failure leaves the model to the fake-tensor run, whose answer stands."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from torchlint.shapes.inputs import Dim, InputPlan, TensorSpec  # noqa: E402
from torchlint.shapes.meta_run import MetaRuns, on_meta, run_on_meta  # noqa: E402


class Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        positions = torch.arange(x.shape[-1])  # no device: made on meta too
        return self.fc2(torch.relu(self.fc1(x + positions)))


class MadeOnCpu(Mlp):
    def forward(self, x):
        return self.fc2(self.fc1(x + torch.zeros(16, device="cpu")))


def _plan(features: int) -> InputPlan:
    return InputPlan([TensorSpec([Dim.free("N"), Dim.fixed(features)])])


def passes_on_meta(model: nn.Module, plan: InputPlan) -> dict[str, int] | None:
    return run_on_meta(model, plan)[0]


def test_a_model_that_runs_on_meta_passes_with_the_plans_sizes() -> None:
    with torch.device("meta"):
        model = Mlp()
    assert on_meta(model)
    assert passes_on_meta(model, _plan(16)) == {"N": 2}


def test_a_failure_on_meta_decides_nothing() -> None:
    with torch.device("meta"):
        wrong, cpu_made = Mlp(), MadeOnCpu()
    assert passes_on_meta(wrong, _plan(8)) is None  # a shape error: the fake run tells it
    assert passes_on_meta(cpu_made, _plan(16)) is None  # a CPU tensor met a meta one


def test_a_model_holding_other_tensors_is_not_run_on_meta() -> None:
    model = Mlp()  # real CPU weights (or fake ones, once a session made them)
    assert not on_meta(model)
    assert passes_on_meta(model, _plan(16)) is None


def test_a_batch_norm_counter_kept_on_the_cpu_still_runs_on_meta() -> None:
    """The build keeps numbers made as tensors on the CPU (a batch norm's
    `num_batches_tracked`): a CNN is still run on meta first, not on fake tensors."""
    from torchlint.shapes.build import build

    class Cnn(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3)
            self.norm = nn.BatchNorm2d(8)

        def forward(self, x):
            return self.norm(self.conv(x))

    model = build(Cnn, [], {})
    assert model.norm.num_batches_tracked.device.type == "cpu"
    assert on_meta(model)
    plan = InputPlan([TensorSpec([Dim.free("N"), Dim.fixed(3), Dim.free("H"), Dim.free("W")])])
    assert passes_on_meta(model, plan) is not None


def test_a_candidate_of_the_wrong_rank_is_spared_when_a_later_one_passes() -> None:
    generic = [
        InputPlan([TensorSpec([Dim.free("N"), Dim.free("L")])]),
        InputPlan([TensorSpec([Dim.free(n) for n in "NCHW"])]),
    ]
    with torch.device("meta"):
        pool, mlp = nn.MaxPool2d(2), Mlp()
    runs = MetaRuns(pool)
    assert runs.rank_refused(generic, 0)  # [N, L] fails on its rank, [N, C, H, W] runs
    assert not runs.rank_refused(generic, 1)  # the last candidate is always run
    assert runs(generic[1])[0] == {"N": 2, "C": 8, "H": 96, "W": 96}  # run once, kept
    # A failure on sizes, not on the rank, is left to the analysis.
    assert not MetaRuns(mlp).rank_refused([_plan(8), _plan(16)], 0)
