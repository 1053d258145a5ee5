"""A file's summary for the files that import it: its module classes and what its models output.

Small, JSON-serialisable and computed from the file alone, so summaries are cached by content
and join cheaply: a rule in `train.py` asks what `models.Net` outputs without parsing
`models.py` again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from torchlint.context import FileContext
from torchlint.names import ImportMap, top_level_imports


@dataclass(frozen=True)
class OutputFact:
    """What calling a model (an instance of a class, a factory's result) returns."""

    #: "softmax", "log_softmax" or "sigmoid".
    kind: str
    #: What applied it, for messages: "`F.softmax`", "an `nn.Softmax` layer".
    source: str
    #: How it is reached: "`Net.forward` returns the output of", or "" when direct.
    via: str = ""
    #: What the name is: "class" or "factory" (calling it builds the model) or "model".
    role: str = "model"


@dataclass
class FileSummary:
    """Top-level facts of one file."""

    #: nn.Module subclasses defined at the top level.
    module_classes: list[str] = field(default_factory=list)
    #: Classes, factory functions and module-level models whose output is an activation's.
    outputs: dict[str, OutputFact] = field(default_factory=dict)

    def defines(self, name: str) -> bool:
        """Whether the summary knows `name` (a module class or a model fact)."""
        return name in self.outputs or name in self.module_classes

    def to_dict(self) -> dict:
        return {
            "module_classes": self.module_classes,
            "outputs": {k: [v.kind, v.source, v.via, v.role] for k, v in self.outputs.items()},
        }

    @classmethod
    def from_dict(cls, data: dict) -> FileSummary:
        return cls(
            list(data["module_classes"]),
            {k: OutputFact(*v) for k, v in data["outputs"].items()},
        )


def summarize_source(source: str, path: str) -> FileSummary | None:
    """The summary of a file's text; None when it does not parse."""
    try:
        module = cst.parse_module(source)
    except Exception:  # a syntax error in an imported file is its own file's TL000
        return None
    imports = ImportMap()
    imports.add_all(top_level_imports(module))
    return summarize(FileContext(path, source, module, imports))


def summarize(context: FileContext) -> FileSummary:
    """Compute the summary of a parsed file (imported files are not looked into)."""
    # The output facts are the activation analysis' answers about top-level definitions.
    from torchlint.analysis.activations import activation_flow

    flow = activation_flow(context)
    summary = FileSummary()
    classes = context.class_defs()
    summary.module_classes = [name for name, c in classes.items() if context.is_nn_module(c)]
    if "torch" not in context.source:
        return summary
    for name, (role, activation) in flow.top_level_outputs().items():
        summary.outputs[name] = OutputFact(
            activation.kind, activation.source, activation.via or "", role
        )
    return summary
