"""The table of deprecated and removed torch APIs behind TL703, and the target torch version.

Each entry records when torch deprecated the API, whether it has been removed, what replaces
it and since when the replacement exists, and whether the rewrite is mechanical (a fix kind).

Versions are (major, minor). Only versions backed by torch's own messages, documentation or
release history are recorded. For APIs deprecated before torch 1.0 the exact release is not
recorded: `deprecated_in` is then (1, 0), a safe upper bound, and messages give no version
(`exact_version=False`). Likewise `replacement_since` may be an upper bound (the release that
deprecated the old API always has its replacement). Removal releases are not recorded: a
removed API is reported as "removed in later releases".
"""

from __future__ import annotations

from dataclasses import dataclass

from torchlint.analysis.torch_load import version_tuple
from torchlint.torch_version import installed_torch_version as installed_torch_release

Version = tuple[int, int]

# Fix kinds. RENAME: swap the referenced name (any use). RENAME_SINGLE_ARG: a call with exactly
# one positional argument and nothing else. DEVICE_FIRST: prepend the device string argument.
# DEVICE_FIRST_KEYWORDS: the same, only when every argument is a keyword. LIST_ARGS:
# f(a, b, c) -> g([a, b, c]).
RENAME = "rename"
RENAME_SINGLE_ARG = "rename-single-arg"
DEVICE_FIRST = "device-first"
DEVICE_FIRST_KEYWORDS = "device-first-keywords"
LIST_ARGS = "list-args"


@dataclass(frozen=True)
class DeprecatedApi:
    name: str
    deprecated_in: Version
    replacement: str | None
    #: First release known to have the replacement (possibly an upper bound).
    replacement_since: Version | None = None
    removed: bool = False
    #: The qualified name a mechanical fix writes, and how (None: no fix).
    fix_target: str | None = None
    fix_kind: str | None = None
    #: The device string a DEVICE_FIRST fix inserts.
    device: str | None = None
    #: Keywords whose presence makes the rewrite non-mechanical.
    no_fix_keywords: tuple[str, ...] = ()
    #: Whether `deprecated_in` is the actual release (False: an upper bound, not shown).
    exact_version: bool = True
    #: The release that withdrew the deprecation, if torch did (earliest possible).
    undeprecated_in: Version | None = None
    #: Only calls are deprecated (the name itself stays in use, e.g. `Variable._execution_engine`).
    calls_only: bool = False
    #: Kept for old code and discouraged by the documentation, without a warning of its own.
    legacy: bool = False


#: The legacy typed constructors (`torch.FloatTensor(...)`) and the dtype each one makes.
_TYPED_TENSORS = {
    "Float": "float32",
    "Double": "float64",
    "Half": "float16",
    "BFloat16": "bfloat16",
    "Long": "int64",
    "Int": "int32",
    "Short": "int16",
    "Char": "int8",
    "Byte": "uint8",
    "Bool": "bool",
}


def _typed_tensor(module: str, kind: str, dtype: str) -> DeprecatedApi:
    # Legacy since torch 0.4 brought `torch.tensor` and dtype/device arguments.
    device = ', device="cuda"' if module == "torch.cuda" else ""
    return DeprecatedApi(
        f"{module}.{kind}Tensor",
        (1, 0),
        f"torch.tensor(data, dtype=torch.{dtype}{device}) for data, or "
        f"torch.empty(size, dtype=torch.{dtype}{device}) for a size",
        (1, 0),
        exact_version=False,
        calls_only=True,
        legacy=True,
    )


def _init(name: str) -> DeprecatedApi:
    # nn.init functions renamed with a trailing underscore in torch 0.4 (in-place naming).
    return DeprecatedApi(
        f"torch.nn.init.{name}",
        (1, 0),
        f"torch.nn.init.{name}_",
        (1, 0),
        fix_target=f"torch.nn.init.{name}_",
        fix_kind=RENAME,
        exact_version=False,
    )


DEPRECATED_APIS: tuple[DeprecatedApi, ...] = (
    # Automatic mixed precision: device-generic torch.amp replaces torch.cuda.amp/torch.cpu.amp
    # (FutureWarning since 2.4; torch.amp.GradScaler exists since 2.3).
    DeprecatedApi(
        "torch.cuda.amp.autocast",
        (2, 4),
        'torch.amp.autocast("cuda", ...)',
        (2, 4),
        fix_target="torch.amp.autocast",
        fix_kind=DEVICE_FIRST_KEYWORDS,
        device="cuda",
    ),
    DeprecatedApi(
        "torch.cpu.amp.autocast",
        (2, 4),
        'torch.amp.autocast("cpu", ...)',
        (2, 4),
        fix_target="torch.amp.autocast",
        fix_kind=DEVICE_FIRST_KEYWORDS,
        device="cpu",
    ),
    DeprecatedApi(
        "torch.cuda.amp.GradScaler",
        (2, 4),
        'torch.amp.GradScaler("cuda", ...)',
        (2, 3),
        fix_target="torch.amp.GradScaler",
        fix_kind=DEVICE_FIRST,
        device="cuda",
    ),
    DeprecatedApi(
        "torch.cuda.amp.custom_fwd",
        (2, 4),
        'torch.amp.custom_fwd(device_type="cuda")',
        (2, 4),
    ),
    DeprecatedApi(
        "torch.cuda.amp.custom_bwd",
        (2, 4),
        'torch.amp.custom_bwd(device_type="cuda")',
        (2, 4),
    ),
    # Linear algebra: the torch.linalg equivalents (deprecated in 1.9; several since removed).
    DeprecatedApi(
        "torch.chain_matmul",
        (1, 9),
        "torch.linalg.multi_dot([...])",
        (1, 9),
        fix_target="torch.linalg.multi_dot",
        fix_kind=LIST_ARGS,
    ),
    DeprecatedApi(
        "torch.qr",
        (1, 9),
        "torch.linalg.qr",
        (1, 8),
        fix_target="torch.linalg.qr",
        fix_kind=RENAME_SINGLE_ARG,
    ),
    DeprecatedApi(
        "torch.cholesky",
        (1, 9),
        "torch.linalg.cholesky (pass upper=True for the upper factor)",
        (1, 8),
        fix_target="torch.linalg.cholesky",
        fix_kind=RENAME_SINGLE_ARG,
    ),
    DeprecatedApi(
        "torch.symeig",
        (1, 9),
        "torch.linalg.eigh (or torch.linalg.eigvalsh; it reads the lower triangle by default)",
        (1, 8),
        removed=True,
    ),
    DeprecatedApi(
        "torch.eig",
        (1, 9),
        "torch.linalg.eig (it returns complex tensors)",
        (1, 9),
        removed=True,
    ),
    DeprecatedApi(
        "torch.solve",
        (1, 9),
        "torch.linalg.solve(A, B) (the arguments are reversed)",
        (1, 8),
        removed=True,
    ),
    DeprecatedApi(
        "torch.lstsq",
        (1, 9),
        "torch.linalg.lstsq(A, B).solution (the arguments are reversed)",
        (1, 9),
        removed=True,
    ),
    DeprecatedApi(
        "torch.matrix_rank",
        (1, 9),
        "torch.linalg.matrix_rank (`symmetric=` is now `hermitian=`)",
        (1, 8),
        removed=True,
    ),
    DeprecatedApi(
        "torch.range",
        (1, 0),
        "torch.arange (its end is exclusive: torch.range(a, b) is torch.arange(a, b + 1) for "
        "integer steps)",
        (1, 0),
        exact_version=False,
    ),
    # torch.nn.functional
    DeprecatedApi(
        "torch.nn.functional.upsample",
        (1, 0),
        "torch.nn.functional.interpolate",
        (1, 0),
        fix_target="torch.nn.functional.interpolate",
        fix_kind=RENAME,
        exact_version=False,
    ),
    DeprecatedApi(
        "torch.nn.functional.upsample_nearest",
        (1, 0),
        'torch.nn.functional.interpolate(..., mode="nearest")',
        (1, 0),
        exact_version=False,
    ),
    DeprecatedApi(
        "torch.nn.functional.upsample_bilinear",
        (1, 0),
        'torch.nn.functional.interpolate(..., mode="bilinear", align_corners=True)',
        (1, 0),
        exact_version=False,
    ),
    # Deprecated in 0.4.1; the warning was withdrawn later (not before 2.0).
    DeprecatedApi(
        "torch.nn.functional.sigmoid",
        (1, 0),
        "torch.sigmoid",
        (1, 0),
        fix_target="torch.sigmoid",
        fix_kind=RENAME,
        exact_version=False,
        undeprecated_in=(2, 0),
    ),
    DeprecatedApi(
        "torch.nn.functional.tanh",
        (1, 0),
        "torch.tanh",
        (1, 0),
        fix_target="torch.tanh",
        fix_kind=RENAME,
        exact_version=False,
        undeprecated_in=(2, 0),
    ),
    # torch.nn.utils / torch.nn.init
    DeprecatedApi(
        "torch.nn.utils.clip_grad_norm",
        (1, 0),
        "torch.nn.utils.clip_grad_norm_",
        (1, 0),
        fix_target="torch.nn.utils.clip_grad_norm_",
        fix_kind=RENAME,
        exact_version=False,
    ),
    DeprecatedApi(
        "torch.nn.utils.clip_grad.clip_grad_norm",
        (1, 0),
        "torch.nn.utils.clip_grad_norm_",
        (1, 0),
        fix_target="torch.nn.utils.clip_grad.clip_grad_norm_",
        fix_kind=RENAME,
        exact_version=False,
    ),
    *(
        _init(name)
        for name in (
            "uniform",
            "normal",
            "constant",
            "eye",
            "dirac",
            "xavier_uniform",
            "xavier_normal",
            "kaiming_uniform",
            "kaiming_normal",
            "orthogonal",
            "sparse",
        )
    ),
    DeprecatedApi(
        "torch.nn.utils.weight_norm",
        (2, 1),
        "torch.nn.utils.parametrizations.weight_norm (its state_dict keys differ)",
        (2, 1),
    ),
    DeprecatedApi(
        "torch.nn.utils.stateless.functional_call",
        (2, 0),
        "torch.func.functional_call",
        (2, 0),
        fix_target="torch.func.functional_call",
        fix_kind=RENAME,
        no_fix_keywords=("parameters_and_buffers",),
    ),
    # Misc
    DeprecatedApi(
        "torch.testing.assert_allclose",
        (1, 12),
        "torch.testing.assert_close (its defaults differ: equal_nan=False, dtype checks)",
        (1, 9),
    ),
    DeprecatedApi(
        "torch.set_default_tensor_type",
        (2, 1),
        "torch.set_default_dtype and torch.set_default_device",
        (2, 1),
    ),
    DeprecatedApi(
        "torch.backends.cuda.sdp_kernel",
        (2, 3),
        "torch.nn.attention.sdpa_kernel (it takes a list of SDPBackend values)",
        (2, 3),
    ),
    DeprecatedApi(
        "torch.cuda.memory_cached",
        (1, 6),
        "torch.cuda.memory_reserved",
        (1, 6),
        fix_target="torch.cuda.memory_reserved",
        fix_kind=RENAME,
    ),
    DeprecatedApi(
        "torch.cuda.max_memory_cached",
        (1, 6),
        "torch.cuda.max_memory_reserved",
        (1, 6),
        fix_target="torch.cuda.max_memory_reserved",
        fix_kind=RENAME,
    ),
    DeprecatedApi(
        "torch.autograd.Variable",
        (1, 0),
        "plain tensors (torch.tensor(..., requires_grad=True) or x.requires_grad_())",
        (1, 0),
        exact_version=False,
        calls_only=True,
    ),
    *(
        _typed_tensor(module, kind, dtype)
        for module in ("torch", "torch.cuda")
        for kind, dtype in _TYPED_TENSORS.items()
    ),
)

BY_NAME: dict[str, DeprecatedApi] = {api.name: api for api in DEPRECATED_APIS}
#: The last segment of every name: a file mentioning none of them needs no look-up at all.
LAST_SEGMENTS: frozenset[str] = frozenset(api.name.rsplit(".", 1)[-1] for api in DEPRECATED_APIS)


def installed_torch_version() -> Version | None:
    """The installed torch's version from its metadata (torch itself is not imported)."""
    return version_tuple(installed_torch_release())


def target_version(configured: str | None) -> Version | None:
    """The torch version to check against: the setting, else the installed torch, else None
    (meaning the newest release known to this table)."""
    return version_tuple(configured) or installed_torch_version()


def is_deprecated_for(api: DeprecatedApi, target: Version | None) -> bool:
    if target is None:
        return api.undeprecated_in is None
    if target < api.deprecated_in:
        return False
    return api.undeprecated_in is None or target < api.undeprecated_in


def replacement_available(api: DeprecatedApi, target: Version | None) -> bool:
    if api.replacement is None:
        return False
    return target is None or api.replacement_since is None or target >= api.replacement_since
