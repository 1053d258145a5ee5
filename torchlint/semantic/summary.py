"""A file's summary for the files that import it: its module classes and what its models do.

Small, JSON-serialisable and computed from the file alone, so summaries are cached by content
and join cheaply: a rule in `train.py` asks what `models.Net` outputs without parsing
`models.py` again.
"""

from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from torchlint.context import FileContext
from torchlint.names import ImportMap, top_level_imports

if TYPE_CHECKING:
    from torchlint.semantic.modes import DropoutRates


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
    #: Module classes whose layers behave differently in training and eval mode (dropout,
    #: batch norm), directly or through same-file submodules and bases.
    mode_layer_classes: list[str] = field(default_factory=list)
    #: Top-level functions that return a plain container of freshly built modules or
    #: Parameters: name -> ("list"/"tuple"/"dict"/"set", element kinds).
    container_factories: dict[str, tuple[str, list[str]]] = field(default_factory=dict)
    #: Mode-layer classes whose only mode layers are dropouts at rates their parameters give.
    dropout_rates: dict[str, DropoutRates] = field(default_factory=dict)

    def defines(self, name: str) -> bool:
        """Whether the summary knows `name` (a module class, a model fact or a container
        factory)."""
        return (
            name in self.outputs or name in self.module_classes or name in self.container_factories
        )

    def to_dict(self) -> dict:
        return {
            "module_classes": self.module_classes,
            "outputs": {k: [v.kind, v.source, v.via, v.role] for k, v in self.outputs.items()},
            "mode_layer_classes": self.mode_layer_classes,
            "container_factories": {k: [v[0], v[1]] for k, v in self.container_factories.items()},
            "dropout_rates": {
                k: [list(v.positional), list(v.rates), list(v.zero_by_default)]
                for k, v in self.dropout_rates.items()
            },
        }

    @classmethod
    def from_dict(cls, data: dict) -> FileSummary:
        from torchlint.semantic.modes import DropoutRates

        return cls(
            list(data["module_classes"]),
            {k: OutputFact(*v) for k, v in data["outputs"].items()},
            list(data["mode_layer_classes"]),
            {k: (v[0], list(v[1])) for k, v in data["container_factories"].items()},
            {
                k: DropoutRates(tuple(v[0]), tuple(v[1]), tuple(v[2]))
                for k, v in data.get("dropout_rates", {}).items()
            },
        )


# Without one of these a file has no model whose output is an activation's, and no layer
# that behaves differently in eval mode.
_ACTIVATION_TOKENS = ("softmax", "Softmax", "sigmoid", "Sigmoid", "expit")
_MODE_LAYER_TOKENS = ("Dropout", "BatchNorm", "Transformer", "dropout", "RReLU")


def summarize_source(source: str, path: str) -> FileSummary | None:
    """The summary of a file's text; None when it does not parse."""
    if not any(token in source for token in (*_ACTIVATION_TOKENS, *_MODE_LAYER_TOKENS)):
        # Only the module classes are needed: Python's own parser finds them many times
        # faster than a LibCST parse (an imported file is often the project's largest).
        tree = _parse_fast(source)
        if tree is None:
            return None
        if not _may_build_containers(tree):
            return FileSummary(_module_classes_fast(tree))
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
    from torchlint.semantic.containers import container_factories
    from torchlint.semantic.modes import dropout_rates, mode_layer_classes

    flow = activation_flow(context)
    summary = FileSummary()
    classes = context.class_defs()
    summary.module_classes = [name for name, c in classes.items() if context.is_nn_module(c)]
    summary.container_factories = container_factories(context)
    if "torch" not in context.source:
        return summary
    summary.mode_layer_classes = sorted(mode_layer_classes(context))
    summary.dropout_rates = dropout_rates(context)
    for name, (role, activation) in flow.top_level_outputs().items():
        summary.outputs[name] = OutputFact(
            activation.kind, activation.source, activation.via or "", role
        )
    return summary


def _parse_fast(source: str) -> ast.Module | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _may_build_containers(tree: ast.Module) -> bool:
    """Whether a top-level function may return a container of objects it builds (`return
    [Block(d) for d in dims]`, or `layers.append(nn.Linear(...))` then `return layers`):
    then the file is parsed in full to tell which functions return plain containers of
    modules."""
    displays = (ast.List, ast.ListComp, ast.Tuple, ast.Set, ast.SetComp, ast.Dict, ast.DictComp)
    for function in tree.body:
        if not isinstance(function, ast.FunctionDef):
            continue
        filled: set[str] = set()  # locals that receive a built object
        returned: list[ast.expr] = []
        for node in ast.walk(function):
            if isinstance(node, ast.Return) and node.value is not None:
                returned.append(node.value)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and any(_builds(arg) for arg in node.args)
            ):
                filled.add(node.func.value.id)  # `layers.append(nn.Linear(...))`
            elif isinstance(node, (ast.Assign, ast.AugAssign)) and _builds(node.value):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    while isinstance(target, ast.Subscript):
                        target = target.value  # `heads[name] = nn.Linear(...)`
                    if isinstance(target, ast.Name):
                        filled.add(target.id)
        for value in returned:
            if (isinstance(value, displays) and _builds(value)) or (
                isinstance(value, ast.Name) and value.id in filled
            ):
                return True
    return False


def _builds(expr: ast.expr) -> bool:
    """Whether `expr` calls a class (a capitalised name: `nn.Linear(...)`, `Block(...)`)."""
    for node in ast.walk(expr):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name[:1].isupper():
                return True
    return False


def _module_classes_fast(tree: ast.Module) -> list[str]:
    """Top-level classes deriving from `torch.nn` classes, directly or through each other."""
    aliases: dict[str, str] = {}
    classes: dict[str, ast.ClassDef] = {}
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop(0)
        if isinstance(node, ast.Import):
            for alias in node.names:
                head = alias.name.split(".", 1)[0]
                aliases[alias.asname or head] = alias.name if alias.asname else head
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.ClassDef):
            classes.setdefault(node.name, node)
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            pending.extend(node.body)
            pending.extend(getattr(node, "orelse", []))
            for handler in getattr(node, "handlers", []):
                pending.extend(handler.body)
    found: dict[str, bool] = {}

    def is_module(name: str, seen: frozenset[str]) -> bool:
        if name not in found:
            found[name] = False
            for base in classes[name].bases:
                dotted = _dotted(base)
                if dotted is None:
                    continue
                head, _, rest = dotted.partition(".")
                target = aliases.get(head)
                qualified = f"{target}.{rest}" if target and rest else target
                if (qualified or "").startswith("torch.nn.") or (
                    dotted in classes and dotted not in seen and is_module(dotted, seen | {name})
                ):
                    found[name] = True
                    break
        return found[name]

    return [name for name in classes if is_module(name, frozenset({name}))]


def _dotted(expr: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return None
    parts.append(expr.id)
    return ".".join(reversed(parts))
