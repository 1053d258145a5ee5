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
