"""Constructor arguments a call site gives, as they travel to the worker and back.

The worker receives JSON, so values that JSON would change are tagged on the way:

* a tuple stays a tuple: `{"$tuple": [2, 2, 6, 2]}` (`assert isinstance(depth, tuple)`);
* a model the calling code built itself and passes on (`vit = ViT(image_size=256, ...)`
  then `MAE(encoder=vit)`, or `heads=[head]`) is built again by the worker:
  `{"$build": {"path": ..., "module": ..., "class": "ViT", "args": [...], "kwargs": {...}}}`,
  and so is one made by an installed package's layer or model builder (`nn.Linear(512, 10)`,
  `torchvision.models.resnet18()`, without its weights): `{"$build": {"callable": ...}}`.

`LocalValues` follows a scope's names to those values (read statically, in source order):
literals bound to a name (`moss = dict(dim=512)` is not one, `moss = {"dim": 512}` is), the
first values a `for` loop over literals takes, and models built from such values. In a
function, its parameters hold what its first call passes (`train_model("mlp", lr=1e-3,
**hparams)`), spread into the constructor (`Net(**model_kwargs)`); what the function or its
caller computes from data is `UNKNOWN`, a size to guess.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from typing import Any

from torchlint.shapes.astutil import MISSING, dotted, literal

#: A model built at a call site: its class key, module name and encoded arguments.
BuildSpec = dict[str, Any]
#: Packages whose callables a call site may build a model with (layers, model zoos).
_FACTORIES = ("torch.nn.", "torchvision.models.", "timm.")
#: Keywords that load weights: left out when a model is built again for its shapes.
_WEIGHTS = frozenset({"pretrained", "weights", "pretrained_cfg", "checkpoint_path"})
#: Methods that return the model they are called on (`ViT(...).to(device)`).
SAME_MODEL = ("to", "cuda", "cpu", "eval", "train", "float", "half", "requires_grad_")
#: A value the code computes from its data (`len(vocab)`): a size to guess.
UNKNOWN = {"$unknown": True}
#: What one call passes to a function: its positional and keyword values.
Passed = tuple[list[Any], dict[str, Any]]


def encoded(value: Any) -> Any:
    """A literal value with its tuples tagged, so that JSON keeps them tuples."""
    if isinstance(value, tuple):
        return {"$tuple": [encoded(v) for v in value]}
    if isinstance(value, list):
        return [encoded(v) for v in value]
    if isinstance(value, dict):
        return {k: encoded(v) for k, v in value.items()}
    return value


def decoded(value: Any, named: Callable[[str], Any], built: Callable[[BuildSpec], Any]) -> Any:
    """The worker's side of `encoded`: `$tuple`, `$name` (looked up by `named`) and `$build`
    (made by `built`) become the objects they stand for, at any depth."""
    if isinstance(value, list):
        return [decoded(v, named, built) for v in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {"$tuple"}:
        return tuple(decoded(v, named, built) for v in value["$tuple"])
    if set(value) == {"$name"}:
        return named(str(value["$name"]))
    if set(value) == {"$build"}:
        spec = value["$build"]
        args = [decoded(v, named, built) for v in spec.get("args", [])]
        kwargs = {k: decoded(v, named, built) for k, v in spec.get("kwargs", {}).items()}
        return built({**spec, "args": args, "kwargs": kwargs})
    return {k: decoded(v, named, built) for k, v in value.items()}


class LocalValues:
    """The values a scope's names hold at each point of a source-order walk.

    `models(call)` says which linted model class a call builds: (path, module, class
    name), or None; `aliases` are the file's imports (`nn` -> `torch.nn`), through which a
    layer or model of an installed package is known. `changed` names are never followed.
    """

    def __init__(
        self,
        models: Callable[[ast.Call], tuple[str, str, str] | None],
        aliases: dict[str, str] | None = None,
        classes: dict[str, ast.ClassDef] | None = None,
    ) -> None:
        self._models = models
        self._aliases = aliases or {}
        #: The file's classes by name: an object made of one (`dm = MNISTDataModule()`)
        #: has the attributes its `__init__` sets to literals (`self.dims = (1, 28, 28)`).
        self._classes = classes or {}
        self._values: dict[str, Any] = {}
        self._objects: dict[str, ast.ClassDef] = {}
        #: Names whose model the scope changes after building it: not followed.
        self.changed: set[str] = set()
        #: A function's own names (parameters, assignments), which hide the module's.
        self.shadowing: frozenset[str] = frozenset()
        #: Whether the scope is a function whose parameters one of its calls valued
        #: (`take_parameters`): what it computes is then a size to guess, not unknowable.
        self.from_caller = False

    def arguments(self, call: ast.Call) -> dict[str, Any] | None:
        """`{"args": [...], "kwargs": {...}}` when every argument has a value here."""
        if any(isinstance(a, ast.Starred) for a in call.args):
            return None
        if any(kw.arg is None for kw in call.keywords):
            return None
        args = [self.value(a) for a in call.args]
        kwargs = {kw.arg: self.value(kw.value) for kw in call.keywords if kw.arg}
        given = [*args, *kwargs.values()]
        if any(v is MISSING or v == UNKNOWN or guessed_part(v) for v in given):
            return None
        return {"args": args, "kwargs": kwargs}

    def passed(self, call: ast.Call) -> Passed | None:
        """What a call passes, each value encoded or `UNKNOWN`; `*items` and `**options`
        spread where their values are known here (else None)."""
        args: list[Any] = []
        for arg in call.args:
            if isinstance(arg, ast.Starred):
                items = self.value(arg.value)
                items = items.get("$tuple", MISSING) if isinstance(items, dict) else items
                if not isinstance(items, list):
                    return None
                args.extend(items)
            else:
                args.append(self._given(arg))
        kwargs: dict[str, Any] = {}
        for keyword in call.keywords:
            if keyword.arg is not None:
                kwargs[keyword.arg] = self._given(keyword.value)
                continue
            spread = self.value(keyword.value)
            if not plain_dict(spread):
                return None
            kwargs.update(spread)
        return args, kwargs

    def _given(self, node: ast.AST) -> Any:
        value = self.value(node)
        return UNKNOWN if value is MISSING else value

    def take_parameters(
        self, function: ast.FunctionDef | ast.AsyncFunctionDef, passed: Passed
    ) -> None:
        """Value a function's parameters as one of its calls does (`train(lr=1e-3,
        **hparams)`), and the rest by their literal defaults."""
        spec = function.args
        positional = [*spec.posonlyargs, *spec.args]
        args, kwargs = passed
        names = {p.arg for p in [*spec.args, *spec.kwonlyargs]}
        if (len(args) > len(positional) and spec.vararg is None) or (
            spec.kwarg is None and not set(kwargs) <= names
        ):
            return  # a call that does not fit the function fails before it builds anything
        self.from_caller = True
        kwargs = dict(kwargs)
        for param, value in zip(positional, args, strict=False):
            self._take(param.arg, value)
        if spec.vararg is not None:
            self._take(spec.vararg.arg, {"$tuple": list(args[len(positional) :])})
        defaults = dict(
            zip(
                [p.arg for p in positional][len(positional) - len(spec.defaults) :],
                spec.defaults,
                strict=True,
            )
        )
        defaults.update(
            {p.arg: d for p, d in zip(spec.kwonlyargs, spec.kw_defaults, strict=True) if d}
        )
        for param in [*positional[len(args) :], *spec.kwonlyargs]:
            if param.arg in kwargs:
                self._take(param.arg, kwargs.pop(param.arg))
            elif param.arg in defaults:
                self._take(param.arg, self.value(defaults[param.arg]))
        if spec.kwarg is not None:
            self._take(spec.kwarg.arg, kwargs)

    def _take(self, name: str, value: Any) -> None:
        if value is not MISSING and name not in self.changed:
            self._values[name] = value

    def value(self, node: ast.AST) -> Any:
        """The encoded value of an expression, or MISSING."""
        found = literal(node)
        if found is not MISSING:
            return encoded(found)
        if isinstance(node, ast.Name):
            return self._values.get(node.id, MISSING)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            made = self._objects.get(node.value.id)
            if made is None or node.value.id in self.changed:
                return MISSING
            found = set_once(made, node.attr)
            return encoded(found) if found is not MISSING else MISSING
        if isinstance(node, (ast.List, ast.Tuple)):
            items = [self.value(e) for e in node.elts]
            if any(v is MISSING or v == UNKNOWN for v in items):  # a starred one: no value
                return MISSING
            return {"$tuple": items} if isinstance(node, ast.Tuple) else items
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                return MISSING
            keys = [literal(k) for k in node.keys if k is not None]
            items = [self.value(v) for v in node.values]
            if any(not isinstance(k, str) for k in keys) or any(
                v is MISSING or v == UNKNOWN for v in items
            ):
                return MISSING
            return dict(zip(keys, items, strict=True))
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id == "dict" and not node.args:
                given = self.arguments(node)  # `dict(dim=512, causal=True)`
                return given["kwargs"] if given is not None else MISSING
            return self._built(node)
        return MISSING

    def _built(self, call: ast.Call) -> Any:
        while isinstance(call.func, ast.Attribute) and call.func.attr in SAME_MODEL:
            if not isinstance(call.func.value, ast.Call):
                return MISSING
            call = call.func.value
        model = self._models(call)
        factory = self._installed(call) if model is None else None
        given = self.arguments(call) if model is not None or factory else None
        if given is None and model is not None:
            given = self._guessable(call)
        if given is None:
            return MISSING
        if factory:
            # The architecture is what counts: no weights are loaded, none downloaded.
            given["kwargs"] = {k: v for k, v in given["kwargs"].items() if k not in _WEIGHTS}
            return {"$build": {"callable": factory, **given}}
        assert model is not None
        path, module, name = model
        return {"$build": {"path": path, "module": module, "class": name, **given}}

    def _guessable(self, call: ast.Call) -> dict[str, Any] | None:
        """A linted model's arguments where those read from data (`features.shape[1]`) are
        `UNKNOWN`, for the worker to guess: the model built for each guess is handed on."""
        if any(isinstance(a, ast.Starred) for a in call.args):
            return None
        if any(kw.arg is None for kw in call.keywords):
            return None
        args = [self._given(a) for a in call.args]
        kwargs = {kw.arg: self._given(kw.value) for kw in call.keywords if kw.arg}
        if any(holds_unknown(v) for v in [*args, *kwargs.values()]):
            return None  # a size inside a list: not guessed
        return {"args": args, "kwargs": kwargs}

    def _installed(self, call: ast.Call) -> str | None:
        """`resnet18` / `nn.Linear` / `timm.create_model`, imported from a package of
        models or layers: its full dotted name."""
        name = dotted(call.func)
        head = name.split(".")[0] if name else ""
        if name is None or head not in self._aliases:
            return None
        origin = self._aliases[head]
        full = origin + name[len(head) :]
        return full if full.startswith(_FACTORIES) else None

    def bind(self, statement: ast.stmt) -> None:
        """Take in what a statement binds (call before walking into the statement's body)."""
        if isinstance(statement, ast.Assign):
            value = self.value(statement.value)
            for target in statement.targets:
                self._assign(target, value)
            made = self._made(statement.value)
            for target in statement.targets:
                if isinstance(target, ast.Name) and made is not None:
                    self._objects[target.id] = made
        elif isinstance(statement, (ast.AnnAssign, ast.AugAssign)):
            value = MISSING
            if isinstance(statement, ast.AnnAssign) and statement.value is not None:
                value = self.value(statement.value)
            self._assign(statement.target, value)
        elif isinstance(statement, (ast.For, ast.AsyncFor)):
            # The loop's first round: what the code runs first, and a value it surely takes.
            items = literal(statement.iter)
            if isinstance(statement.iter, ast.Name):
                items = self._values.get(statement.iter.id, MISSING)
                items = items.get("$tuple", MISSING) if isinstance(items, dict) else items
            elif items is not MISSING:
                items = encoded(items)
                items = items["$tuple"] if isinstance(items, dict) else items
            first = items[0] if isinstance(items, list) and items else MISSING
            self._assign(statement.target, first)
        elif isinstance(statement, (ast.With, ast.AsyncWith)):
            for item in statement.items:
                if item.optional_vars is not None:
                    self._assign(item.optional_vars, MISSING)

    def _made(self, value: ast.expr) -> ast.ClassDef | None:
        """The file's class a call makes an object of (`MNISTDataModule()`)."""
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
            return self._classes.get(value.func.id)
        return None

    def _assign(self, target: ast.AST, value: Any) -> None:
        if isinstance(target, ast.Name):
            self._objects.pop(target.id, None)
            if value is MISSING or target.id in self.changed:
                self._values.pop(target.id, None)
            else:
                self._values[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            parts = value.get("$tuple", MISSING) if isinstance(value, dict) else value
            fits = isinstance(parts, list) and len(parts) == len(target.elts)
            for i, element in enumerate(target.elts):
                self._assign(element, parts[i] if fits else MISSING)
        elif isinstance(target, ast.Starred):
            self._assign(target.value, MISSING)


def holds_unknown(value: Any) -> bool:
    """Whether an encoded value has `UNKNOWN` below its top."""
    if isinstance(value, list):
        return any(v == UNKNOWN or holds_unknown(v) for v in value)
    if isinstance(value, dict) and value != UNKNOWN:
        return any(v == UNKNOWN or holds_unknown(v) for v in value.values())
    return False


def guessed_part(value: Any) -> bool:
    """Whether an encoded value is a linted model built with sizes to guess."""
    if not (isinstance(value, dict) and set(value) == {"$build"}):
        return False
    spec = value["$build"]
    return "class" in spec and UNKNOWN in [*spec["args"], *spec["kwargs"].values()]


def set_once(cls: ast.ClassDef, attribute: str) -> Any:
    """The literal that `cls.__init__` sets `self.<attribute>` to, in its own body, when no
    other statement of the class sets it (else MISSING)."""
    init = next(
        (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None
    )
    if init is None:
        return MISSING
    setting = [
        node
        for node in ast.walk(cls)
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign))
        and any(
            isinstance(t, ast.Attribute)
            and t.attr == attribute
            and isinstance(t.value, ast.Name)
            and t.value.id == "self"
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            for t in ast.walk(target)
        )
    ]
    if len(setting) != 1 or setting[0] not in init.body:
        return MISSING
    found = setting[0]
    targets = found.targets if isinstance(found, ast.Assign) else [found.target]
    if isinstance(found, ast.AugAssign) or found.value is None or len(targets) != 1:
        return MISSING
    if not isinstance(targets[0], ast.Attribute):
        return MISSING  # `self.a, self.b = sizes`
    return literal(found.value)


def plain_dict(value: Any) -> bool:
    """Whether an encoded value is a dictionary of the code's (`{"lr": 1e-3}`), not a tag."""
    return isinstance(value, dict) and not any(str(k).startswith("$") for k in value)


#: Methods that change a model in place (`net.add_module("fc", ...)`).
_CHANGING = frozenset(
    {"add_module", "register_module", "append", "extend", "insert", "pop", "remove"}
    | {"update", "setdefault", "popitem", "clear"}  # a dictionary of arguments
)


def changed_names(nodes: Iterable[ast.AST]) -> set[str]:
    """Names whose object a scope changes in place (`net.fc = nn.Identity()`, `del net[-1]`,
    `setattr(net, ...)`, `net.add_module(...)`): a model built under such a name is not the
    model the call site passes, wherever the change is."""
    found: set[str] = set()
    for node in nodes:
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in ("setattr", "delattr") and node.args:
                targets = [ast.Attribute(value=node.args[0], attr="_", ctx=ast.Store())]
            elif isinstance(func, ast.Attribute) and func.attr in _CHANGING:
                targets = [func]
        for target in targets:
            if isinstance(target, (ast.Attribute, ast.Subscript)):
                root = target.value
                while isinstance(root, (ast.Attribute, ast.Subscript)):
                    root = root.value
                if isinstance(root, ast.Name):
                    found.add(root.id)
    return found
