"""What widens the shape check's reach to more released models (static parts)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="shape checks (TL6xx) need torch installed")

from torchlint.shapes.siblings import stem


@pytest.mark.parametrize(
    ("name", "expected"),
    [("image1", "image"), ("image2", "image"), ("x_1", "x"), ("img", None), ("feat3d", None)],
)
def test_numbered_inputs_share_a_stem(name: str, expected: str | None) -> None:
    assert stem(name) == expected


def test_a_packed_plan_hands_a_list_to_its_list_argument() -> None:
    from torchlint.shapes.inputs import Dim, InputPlan, TensorSpec

    spec = TensorSpec([Dim.free("N"), Dim.fixed(8)])
    plan = InputPlan([spec, spec, spec], packed=(2, 1))
    assert plan.arguments(["a", "b", "c"]) == [["a", "b"], ["c"]]
    assert InputPlan([spec]).arguments(["a"]) == ["a"]


def test_list_inputs_are_told_by_annotation_or_type_comment() -> None:
    import torch
    from torch import Tensor, nn

    from torchlint.shapes.feature_maps import list_plans, tensor_list_input

    class Annotated(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(4, 4, 1)

        def forward(self, x: list[Tensor], scale: float = 1.0) -> list[Tensor]:
            return [self.conv(level) * scale for level in x]

    class Commented(nn.Module):
        def forward(self, x, y):
            # type: (List[Tensor], Tensor) -> Tensor
            return torch.cat(x) + y

    assert tensor_list_input(Annotated(), "x")
    assert not tensor_list_input(Annotated(), "scale")
    assert tensor_list_input(Commented(), "x")
    assert not tensor_list_input(Commented(), "y")
    plans = list_plans(Annotated(), 0)
    assert plans and plans[0].packed == (2,)
    assert [d.hint for d in plans[0].specs[0].dims][1] == 4


def test_builders_of_another_family_come_first() -> None:
    from torchlint.shapes.sweep import family, further_builders

    assert family("efficientnet_b0") == "efficientnet"
    assert family("efficientnet_v2_s") == "efficientnet_v2"
    assert family("resnet18") == "resnet"
    sizes = [f"efficientnet_b{i}" for i in range(8)] + ["efficientnet_v2_s", "efficientnet_v2_m"]
    found = further_builders({"EfficientNet": {"builders": sizes}}, 2)
    assert found[0] == "efficientnet_v2_s"
    assert "efficientnet_b0" not in found and len(found) == len(sizes) - 2


def test_a_model_built_from_a_missing_package_says_which(tmp_path) -> None:
    from tests.conftest import run_cli

    (tmp_path / "backbone.py").write_text(
        "import torch.nn as nn\n"
        "from torchlint_test_absent_package import models\n"
        "\n"
        "\n"
        "class Features(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.stages = nn.Sequential(*models.vgg16().features[:4])\n"
        "\n"
        "    def forward(self, x):\n"
        "        return self.stages(x)\n"
    )
    result = run_cli("--no-cache", "--select", "TL690", "backbone.py", cwd=tmp_path)
    assert "shape check of Features skipped: could not build Features()" in result.stdout
    assert (
        "(torchlint_test_absent_package, which its file imports, is not installed)" in result.stdout
    ), result.stdout


def test_a_model_whose_base_class_is_missing_says_so(tmp_path) -> None:
    from tests.conftest import run_cli

    (tmp_path / "lit.py").write_text(
        "import torch.nn as nn\n"
        "import torchlint_test_absent_lightning as pl\n"
        "import torchlint_test_absent_metrics\n"
        "\n"
        "\n"
        "class Classifier(pl.LightningModule):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = nn.Linear(4, 2)\n"
        "\n"
        "    def forward(self, x):\n"
        "        return self.fc(x)\n"
    )
    result = run_cli("--no-cache", "--select", "TL690", "lit.py", cwd=tmp_path)
    assert (
        "shape check of Classifier skipped: its base class LightningModule could not be imported "
        "(torchlint_test_absent_lightning, which its file imports, is not installed)"
    ) in result.stdout, result.stdout


OWN_SIDE = """
import torch
import torch.nn as nn


class PatchClassifier(nn.Module):
    def __init__(self, img_size=224, patch=16, dim=32):
        super().__init__()
        self.img_size = img_size
        self.embed = nn.Conv2d(3, dim, patch, patch)
        self.head = nn.Linear(dim * (img_size // patch) ** 2, 10)

    def forward(self, x):
        return self.head(self.embed(x).flatten(1))
"""


def test_an_image_model_that_runs_at_its_own_side_is_clean_without_the_size_search() -> None:
    """A head sized for the model's own 224x224 fails at the first guess (96): the search
    that finds 224 only serves TL606 (off by default). Without TL606 the model
    is run at its own side at once, and is clean."""
    from torchlint.shapes import check_files

    files = [("own_side.py", OWN_SIDE)]
    told = check_files(files, size_conditions=True)
    assert [d.code for ds in told.values() for d in ds] == ["TL606"]
    stats: dict = {}
    assert check_files(files, size_conditions=False, stats=stats) == {}
    assert [r["result"] for rs in stats.values() for r in rs] == ["ok"]


TEMPLATE = """
import torch.nn as nn


class ToyMixer(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 16)
        self.scale = nn.Parameter(torch.ones(32))  # the converter's rewrite makes it 16

    def forward(self, x):
        return self.proj(x) * self.scale


class ToyHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(x)
"""

GENERATED = """# This file was automatically generated from src/toy/modular_toy.py.
import torch.nn as nn


class ToyMixer(nn.Module):
    pass
"""


def test_a_modular_templates_class_is_checked_in_its_generated_file(tmp_path) -> None:
    """transformers' `modular_<name>.py` is not what runs: a class that the file generated
    from it defines is a TL690 naming that file; the template's other classes are checked."""
    from torchlint.shapes import check_files

    template = tmp_path / "modular_toy.py"
    template.write_text("import torch\n" + TEMPLATE)
    (tmp_path / "modeling_toy.py").write_text(GENERATED)
    stats: dict = {}
    found = check_files([(str(template), template.read_text())], stats=stats)
    told = [d for ds in found.values() for d in ds]
    assert [(d.code, d.line) for d in told] == [("TL690", 6)]
    assert "modeling_toy.py: checked there" in told[0].message
    assert [r["model"] for rs in stats.values() for r in rs] == ["ToyHead"]
    # Without the generated file, the template is an ordinary file.
    (tmp_path / "modeling_toy.py").unlink()
    found = check_files([(str(template), template.read_text())])
    assert [d.code for ds in found.values() for d in ds] == ["TL605"]


def test_a_script_whose_only_model_is_a_sequential_is_shape_checked(tmp_path) -> None:
    """A beginner's script builds its model with `nn.Sequential` and never writes `Module`:
    the command line checks it as `shapes.check_files` does (it skipped the file before)."""
    from tests.conftest import run_cli

    (tmp_path / "train.py").write_text(
        "import torch\n"
        "from torch import nn\n"
        "\n"
        "model = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.Linear(64, 10))\n"
        "logits = model(torch.randn(8, 1, 28, 28))\n"
    )
    result = run_cli("--no-cache", "--select", "TL6", "train.py", cwd=tmp_path)
    assert "train.py:4:" in result.stdout and "TL601 nn.Linear(64, 10)" in result.stdout, (
        result.stdout
    )


def test_a_lightning_module_without_a_forward_is_not_a_model_to_check(tmp_path) -> None:
    """Lightning's base class has a `forward` that only hands on to `nn.Module`'s: a module
    that trains in `training_step` is not reported skipped, its neighbour is checked."""
    from tests.conftest import run_cli

    installed = tmp_path / "installed" / "lightning"
    installed.mkdir(parents=True)
    (installed / "__init__.py").write_text(
        "import torch.nn as nn\n"
        "\n"
        "\n"
        "class LightningModule(nn.Module):\n"
        "    def forward(self, *args, **kwargs):\n"
        "        return super().forward(*args, **kwargs)\n"
    )
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(
        "import lightning as L\n"
        "import torch.nn as nn\n"
        "\n"
        "\n"
        "class Contrastive(L.LightningModule):\n"
        "    def __init__(self, hidden_dim, lr):\n"
        "        super().__init__()\n"
        "        self.net = nn.Linear(hidden_dim, hidden_dim)\n"
        "\n"
        "    def training_step(self, batch, batch_idx):\n"
        "        return self.net(batch).sum()\n"
        "\n"
        "\n"
        "class Probe(L.LightningModule):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.net = nn.Sequential(nn.Linear(16, 32), nn.Linear(16, 2))\n"
        "\n"
        "    def forward(self, x):\n"
        "        return self.net(x)\n"
    )
    environment = {"PYTHONPATH": str(tmp_path / "installed")}
    result = run_cli(
        "--no-cache",
        "--select",
        "TL6",
        "--extend-select",
        "TL690",
        "train.py",
        cwd=project,
        env=environment,
    )
    assert "TL601" in result.stdout and "Contrastive" not in result.stdout, result.stdout
