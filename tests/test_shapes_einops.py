"""Vision transformers written with einops (lucidrains' style): a `Rearrange` patch layer first,
`rearrange` in the attention, `q, k, v = map(f, qkv.chunk(3, dim=-1))`, and constructor
arguments that nothing in the linted files gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch", reason="shape checks (TL6xx) need torch installed")
pytest.importorskip("einops", reason="einops layers are checked when einops is installed")

from torchlint.shapes import check_files
from torchlint.shapes.einops_layers import pattern_input
from torchlint.shapes.guess import guesses_for

VIT = """\
import torch
from torch import nn
from einops import rearrange, repeat
from einops.layers.torch import Rearrange


class Attention(nn.Module):
    def __init__(self, dim, heads=8, dim_head=64):
        super().__init__()
        inner_dim = dim_head * heads
        self.heads = heads
        self.norm = nn.LayerNorm(dim)
        self.to_qkv = nn.Linear(dim, inner_dim * 3, bias=False)
        self.to_out = nn.Linear(inner_dim, dim)

    def forward(self, x):
        x = self.norm(x)
        qkv = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = map(lambda t: rearrange(t, "b n (h d) -> b h n d", h=self.heads), qkv)
        attn = (torch.matmul(q, k.transpose(-1, -2)) * 0.125).softmax(dim=-1)
        out = rearrange(torch.matmul(attn, v), "b h n d -> b n (h d)")
        return self.to_out(out)


class ViT(nn.Module):
    def __init__(self, *, image_size, patch_size, num_classes, dim, depth, heads, channels=3):
        super().__init__()
        assert image_size % patch_size == 0, "Image dimensions must be divisible by the patch size."
        num_patches = (image_size // patch_size) ** 2
        patch_dim = channels * patch_size**2
        self.to_patch_embedding = nn.Sequential(
            Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=patch_size, p2=patch_size),
            nn.LayerNorm(patch_dim),
            nn.Linear(PATCH_FEATURES, dim),
        )
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim))
        self.pos_embedding = nn.Parameter(torch.randn(1, num_patches + 1, dim))
        self.layers = nn.ModuleList([Attention(dim, heads=heads) for _ in range(depth)])
        self.mlp_head = nn.Linear(dim, num_classes)

    def forward(self, img):
        x = self.to_patch_embedding(img)
        cls_tokens = repeat(self.cls_token, "1 1 d -> b 1 d", b=x.shape[0])
        x = torch.cat((cls_tokens, x), dim=1) + self.pos_embedding
        for attention in self.layers:
            x = attention(x) + x
        return self.mlp_head(x[:, 0])
"""
DEMO = """\
import torch
from vit import ViT

model = ViT(image_size=64, patch_size=16, num_classes=10, dim=96, depth=2, heads=4)
preds = model(torch.randn(2, 3, 64, 64).cuda())
"""


def _check(tmp_path: Path, files: dict[str, str]) -> tuple[list, dict[str, Any]]:
    written = []
    for name, text in files.items():
        (tmp_path / name).write_text(text)
        written.append((str(tmp_path / name), text))
    stats: dict[str, list[dict[str, Any]]] = {}
    found = check_files(written, stats=stats)
    records = {r["model"]: r for path in stats for r in stats[path]}
    return [d for path in found for d in found[path]], records


def test_a_vit_without_call_sites_is_built_with_sides_its_patches_divide(
    tmp_path: Path,
) -> None:
    found, records = _check(tmp_path, {"vit.py": VIT.replace("PATCH_FEATURES", "patch_dim")})
    assert [d.message for d in found if "of ViT " in d.message] == []
    assert records["ViT"]["result"] == "ok" and records["ViT"]["path"] == "fx"


def test_a_wrong_patch_projection_is_reported_through_the_demo(tmp_path: Path) -> None:
    """The demo's tensor is moved to the GPU on the way (`.cuda()`): still the evidence."""
    vit = VIT.replace("PATCH_FEATURES", "patch_dim + 1")
    found, _ = _check(tmp_path, {"vit.py": vit, "demo.py": DEMO})
    assert [(d.code, d.line) for d in found if d.code != "TL690"] == [("TL601", 34)]


def test_the_input_is_read_off_the_pattern() -> None:
    from einops.layers.torch import Rearrange

    layer = Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=16, p2=16)
    dims = pattern_input(layer)
    assert dims is not None
    assert [d.name for d in dims] == ["N", "C", "H", "W"]
    assert dims[1].hint == 3 and dims[2].hint % 16 == 0 and dims[3].hint % 16 == 0
    assert pattern_input(Rearrange("b ... c -> b c ...")) is None


def test_guessed_image_sides_are_divided_by_the_guessed_patches() -> None:
    import inspect

    from torchlint.shapes.guess import _SIZES

    def vit(*, image_size, patch_size, frames, frame_patch_size, dim, patch_dim, input_size):
        pass

    variants = guesses_for(list(inspect.signature(vit).parameters.values()))
    assert variants is not None
    for index, run in enumerate(variants[0].runs):
        assert run["image_size"] % run["patch_size"] == 0
        assert run["frames"] % run["frame_patch_size"] == 0
        # Sizes, not sides: a patch's features, an RNN's `input_size`.
        assert run["patch_dim"] in _SIZES[index] and run["input_size"] in _SIZES[index]


def test_a_forward_that_stops_tracing_before_the_patches_is_read_from_its_source(
    tmp_path: Path,
) -> None:
    """`*_, h, w, dtype = *img.shape, img.dtype` stops fx on its first line: the first
    call on the input in forward's source leads to the `Rearrange`."""
    first = "        x = self.to_patch_embedding(img)\n"
    unpacked = "        *_, h, w, dtype = *img.shape, img.dtype\n"
    vit = VIT.replace("PATCH_FEATURES", "patch_dim").replace(first, unpacked + first)
    found, records = _check(tmp_path, {"vit.py": vit})
    assert [d.message for d in found if "of ViT " in d.message] == []
    assert records["ViT"]["result"] == "ok" and records["ViT"]["path"] == "fallback"


PATCH_FUNCTION = """\
from torch import nn
from einops import rearrange


class PatchEmbedding(nn.Module):
    def __init__(self, *, dim, dim_out, patch_size):
        super().__init__()
        self.patch_size = patch_size
        self.proj = nn.Conv2d(patch_size ** 2 * dim, dim_out, 1)

    def forward(self, fmap):
        p = self.patch_size
        fmap = rearrange(fmap, "b c (h p1) (w p2) -> b (c p1 p2) h w", p1=p, p2=p)
        return self.proj(fmap)


class Pyramid(nn.Module):
    def __init__(self, num_classes, mlp_mult, dims=(32, 64)):
        super().__init__()
        self.stem = PatchEmbedding(dim=3, dim_out=dims[0], patch_size=4)
        self.mid = PatchEmbedding(dim=dims[0], dim_out=dims[1], patch_size=2)
        self.mlp = nn.Sequential(
            nn.Linear(dims[1], dims[1] * mlp_mult), nn.Linear(dims[1] * mlp_mult, dims[1])
        )
        self.head = nn.Linear(dims[0], num_classes)

    def forward(self, x):
        return self.head(self.mlp(self.mid(self.stem(x)).mean((2, 3))))
"""


def test_an_einops_function_first_gives_the_input_and_a_multiplier_is_guessed(
    tmp_path: Path,
) -> None:
    """`rearrange(fmap, "b c (h p1) (w p2) -> ...", p1=p, p2=p)` in a block's forward is
    the input's shape, as a `Rearrange` layer's is; `mlp_mult` is guessed as a multiplier."""
    found, records = _check(tmp_path, {"pyramid.py": PATCH_FUNCTION})
    assert [(d.code, d.line) for d in found] == [("TL601", 25)], [d.message for d in found]
    assert records["PatchEmbedding"]["result"] == "ok"


TOKEN_MAP = """\
import math

from torch import nn
from einops import rearrange


class TokensToMap(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.conv = nn.Conv2d(dim, dim, 3, padding=1)
        self.norm = nn.BatchNorm2d(CHANNELS)

    def forward(self, x):
        side = int(math.sqrt(x.shape[1]))
        x = rearrange(x, "b (h w) c -> b c h w", h=side)
        return self.norm(self.conv(x))


class Unflatten(nn.Module):
    def forward(self, x):
        return rearrange(x, "b (h w) c -> b c h w", h=int(math.sqrt(x.shape[1])))
"""


@pytest.mark.parametrize(("channels", "expected"), [("dim", []), ("2 * dim", [("TL604", 11)])])
def test_tokens_split_by_a_computed_length_are_one_free_size(
    tmp_path: Path, channels: str, expected: list[tuple[str, int]]
) -> None:
    """`rearrange(x, "b (h w) c -> ...", h=int(math.sqrt(x.shape[1])))`: `h` is known only
    when the forward runs (fx stops at `math.sqrt`), so `(h w)` is one number of tokens to
    solve for, not an unknown split; the input is read from forward's source."""
    source = TOKEN_MAP.replace("CHANNELS", channels)
    found, records = _check(tmp_path, {"tokens.py": source})
    assert [(d.code, d.line) for d in found] == expected, [d.message for d in found]
    assert records["Unflatten"]["result"] == "ok"
    assert records["TokensToMap"]["result"] in ("ok", "finding")
