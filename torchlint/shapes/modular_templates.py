"""Model classes of a transformers modular template, checked in the file generated from it.

transformers writes each model family once as `modular_<name>.py`, and a converter writes
`modeling_<name>.py` from it ("This file was automatically generated from
.../modular_<name>.py"). The template is not the code that runs: in
`class FalconH1Mixer(BambaMixer)`, an `__init__` that calls `super().__init__()` and then
changes a size becomes, in the generated file, the parent's body with the change made
inside it. Run as written, the template builds its parent's layers with the new sizes
beside them, which the generated model never does, so its shapes tell nothing of the model.

A class of a template that a generated sibling file also defines is therefore checked
there, not in the template; it gets a TL690 that names the generated file.
"""

from __future__ import annotations

import os
import re

#: How a generated file names its template, in its first lines.
_GENERATED = re.compile(r"automatically generated from \S*?(modular_\w+\.py)")
_TEMPLATE = re.compile(r"modular_\w+\.py")
#: Bytes of a sibling read to find its header.
_HEAD = 2048


def generated_twins(path: str, names: list[str]) -> dict[str, str]:
    """For a modular template at `path`: each of `names` (its classes) that a file generated
    from it defines too, with that file's name. Empty for any other file."""
    twins: dict[str, str] = {}
    if not names:
        return twins
    for sibling, text in _generated_siblings(path):
        for name in names:
            if name not in twins and re.search(rf"^class {re.escape(name)}\b", text, re.M):
                twins[name] = os.path.basename(sibling)
    return twins


def generated_files(path: str) -> list[str]:
    """The files generated from the modular template at `path` (their classes' results
    stand for its classes); empty for any other file."""
    return [sibling for sibling, _ in _generated_siblings(path, whole=False)]


def is_template(path: str) -> bool:
    return _TEMPLATE.fullmatch(os.path.basename(path)) is not None


def _generated_siblings(path: str, whole: bool = True) -> list[tuple[str, str]]:
    """The files beside a modular template generated from it, with their texts (only their
    headers unless `whole`)."""
    folder, template = os.path.split(os.path.abspath(path))
    if not _TEMPLATE.fullmatch(template):
        return []
    try:
        siblings = sorted(os.listdir(folder))
    except OSError:
        return []
    found = []
    for sibling in siblings:
        if not sibling.endswith(".py") or sibling == template:
            continue
        text = _generated_text(os.path.join(folder, sibling), template, whole)
        if text is not None:
            found.append((os.path.join(folder, sibling), text))
    return found


def _generated_text(path: str, template: str, whole: bool = True) -> str | None:
    """The text of a file generated from `template` (its header unless `whole`), or None."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            head = handle.read(_HEAD)
            match = _GENERATED.search(head)
            if match is None or match.group(1) != template:
                return None
            return head + handle.read() if whole else head
    except OSError:
        return None


def template_reason(twin: str) -> str:
    """Why a template's class is not checked where it is written."""
    return (
        "a modular template's class, which runs only as the converter writes it into "
        f"{twin}: checked there"
    )
