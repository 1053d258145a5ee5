"""Re-parsing an edited buffer by its edit gives the tree, and the findings, of a full parse."""

from __future__ import annotations

import random
from pathlib import Path

import libcst as cst
import pytest
from libcst._nodes.deep_equals import deep_equals

pytest.importorskip("lsprotocol", reason="lsprotocol is not installed")

from torchlint.context import NodeTexts
from torchlint.engine import lint_source
from torchlint.positions import locate
from torchlint.server.app import lint_document
from torchlint.server.reparse import ParsedText, full_parse, reparse
from torchlint.walker import TreeIndex, iter_descendants

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted((ROOT / "fixtures").glob("*.py"))

#: Text typed in: code, comments, blank lines, indentation, unbalanced brackets and quotes,
#: decorators, new blocks, line continuations.
TYPED = [
    "x",
    "(",
    ")",
    "[",
    "]",
    "{",
    ":",
    ",",
    "\n",
    "\n\n",
    "    ",
    "  ",
    "\t",
    "# note\n",
    "    # note\n",
    "'''",
    '"',
    "\\\n",
    "@decorator\n",
    "pass\n",
    "if x:\n",
    "\n    y = 1\n",
    "\nelse:\n    pass\n",
    "def helper():\n    return torch.ones(2)\n",
    "class Extra(nn.Module):\n    pass\n",
    "import torch\n",
    "lambda: 0",
    "async ",
]
#: Typed at the start of a line: they change indentation and comment ownership.
AT_LINE_START = ["    ", "  ", "# note\n", "    # note\n", "\n", "x = 1\n", "\\\n"]


def random_edit(rng: random.Random, text: str) -> str:
    """`text` after one edit: typing, deleting, typing at a line start, or retyping."""
    at = rng.randrange(len(text) + 1)
    kind = rng.random()
    if kind < 0.4:
        return text[:at] + rng.choice(TYPED) + text[at:]
    if kind < 0.7:
        end = min(len(text), at + rng.choice([1, 1, 2, 5, 20, 80, 300]))
        return text[:at] + text[end:]
    if kind < 0.9:
        line_start = text.rfind("\n", 0, at) + 1
        return text[:line_start] + rng.choice(AT_LINE_START) + text[line_start:]
    end = min(len(text), at + rng.randrange(1, 40))
    return text[:at] + text[at:end].upper() + text[end:]


def class_body_edit(rng: random.Random, text: str) -> str:
    """An edit inside a class body (or anywhere, in a file without classes)."""
    starts = [i for i in range(len(text)) if text.startswith("class ", i)]
    if not starts:
        return random_edit(rng, text)
    body = text.find("\n", rng.choice(starts)) + 1
    end = text.find("\n", body)
    end = len(text) if end < 0 else end
    at = rng.randrange(body, end + 1)
    return text[:at] + rng.choice([*TYPED, "self.extra = nn.Linear(4, 4)\n    "]) + text[at:]


def same_parse(result: ParsedText | Exception, full: ParsedText | Exception) -> bool:
    if isinstance(full, Exception) or isinstance(result, Exception):
        return isinstance(full, Exception) and isinstance(result, Exception)
    return (
        deep_equals(result.module, full.module)
        and result.bounds == full.bounds
        and result.blocks == full.blocks
    )


def edit_sequence(path: Path, seed: int, steps: int):
    """(previous good parse, new text) along `steps` random edits of a fixture file; a text
    that does not parse is edited on once in a while, as when a person is midway through
    typing, with the last text that parsed as the base."""
    rng = random.Random(f"{path.name}:{seed}")
    text = path.read_text(encoding="utf-8")
    previous = full_parse(text)
    if not isinstance(previous, ParsedText):
        return
    for _ in range(steps):
        edit = class_body_edit if rng.random() < 0.2 else random_edit
        new = edit(rng, text)
        yield previous, new
        result = reparse(previous, new)
        if isinstance(result, ParsedText):
            previous, text = result, new
        elif text == previous.source and rng.random() < 0.3:
            text = new  # edited on from there once, then back to the last text that parsed
        else:
            text = previous.source


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_random_edits_reparse_to_the_full_tree(path: Path) -> None:
    for previous, new in edit_sequence(path, seed=1, steps=12):
        assert same_parse(reparse(previous, new), full_parse(new)), new


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_random_edits_lint_as_a_full_lint(path: Path) -> None:
    for previous, new in edit_sequence(path, seed=2, steps=4):
        linted = lint_document(None, path.name, new, ROOT, "utf-16", previous)
        settings = linted.settings
        full = lint_source(new, path.name, settings.enabled, torch_version=settings.torch_version)
        assert linted.diagnostics == full, new


@pytest.mark.parametrize("path", FIXTURES[::4], ids=lambda p: p.stem)
def test_nodes_are_located_as_in_the_whole_module(path: Path) -> None:
    rng = random.Random(path.name)
    for previous, new in edit_sequence(path, seed=3, steps=5):
        result = reparse(previous, new)
        if not isinstance(result, ParsedText):
            continue
        nodes = rng.sample(iter_descendants(result.module), 40)
        assert result.locate(result.module, nodes) == locate(result.module, nodes)


@pytest.mark.parametrize("path", FIXTURES[1::4], ids=lambda p: p.stem)
def test_the_index_joined_from_kept_statements_is_the_whole_tree_index(path: Path) -> None:
    for previous, new in edit_sequence(path, seed=4, steps=5):
        previous.tree_index()  # the statements' indexes, handed on to the next parse
        result = reparse(previous, new)
        if not isinstance(result, ParsedText):
            continue
        joined, walked = result.tree_index(), TreeIndex(result.module)
        assert len(joined.order) == len(walked.order)
        assert all(a is b for a, b in zip(joined.order, walked.order, strict=True))
        assert (joined.ends, joined.parents) == (walked.ends, walked.parents)
        assert joined.positions == walked.positions


def test_a_typed_statement_reuses_the_others() -> None:
    text = "import torch\n\n\ndef f(x):\n    return x\n\n\ndef g(y):\n    return y\n"
    previous = full_parse(text)
    assert isinstance(previous, ParsedText)
    previous.tree_index()
    result = reparse(previous, text.replace("return x", "return x + 1"))
    assert isinstance(result, ParsedText)
    old, new = previous.module.body, result.module.body
    assert new[0] is old[0] and new[2] is old[2] and new[1] is not old[1]
    assert result.indexes.keys() == {id(new[0]), id(new[2])}  # indexes of the kept ones
    assert result.module.code == text.replace("return x", "return x + 1")


def test_node_texts_are_lent_to_the_next_parse_for_the_nodes_it_kept() -> None:
    text = "def f(x):\n    return x\n\n\ndef g(y):\n    if y:\n        return y\n"
    previous = full_parse(text)
    assert isinstance(previous, ParsedText)
    kept = previous.module.body[1]
    before = previous.texts.text(previous.module, kept)
    result = reparse(previous, text.replace("return x", "return x + 1"))
    assert isinstance(result, ParsedText) and result.module.body[1] is kept
    assert result.texts.text(result.module, kept) is before  # lent, not generated again
    # Another indentation unit renders the same node differently: not lent then.
    other = result.module.with_changes(default_indent="  ")
    texts = NodeTexts(result.texts)
    assert texts.text(other, kept) == other.code_for_node(kept) != before


@pytest.mark.parametrize(
    ("before", "after"),
    [
        # The first indented block sets the module's indentation unit.
        ("x = 1\n\n\ndef f():\n    return 1\n", "x = 1\n\n\ndef f():\n  return 1\n"),
        # A comment indented under a block belongs to that block once one precedes it.
        ("x = 1\n    # note\ny = 2\n", "def f():\n    x = 1\n    # note\ny = 2\n"),
        # A comment-only region: its owner depends on what follows.
        ("x = 1\ny = 2\nz = 3\n", "x = 1\n# y = 2\nz = 3\n"),
        # Header comments move into the first statement's leading lines and back.
        ("# top\nimport torch\nx = 1\n", "import torch\n# top\nx = 1\n"),
        ("x = 1\n", "x = 1"),
    ],
)
def test_edits_that_move_ownership_match_a_full_parse(before: str, after: str) -> None:
    previous = full_parse(before)
    assert isinstance(previous, ParsedText)
    assert same_parse(reparse(previous, after), full_parse(after))


def test_a_syntax_error_is_reported_as_a_full_parse_would() -> None:
    text = "import torch\n\n\ndef f(x):\n    return x\n"
    previous = full_parse(text)
    assert isinstance(previous, ParsedText)
    broken = text.replace("return x", "return (x")
    result = reparse(previous, broken)
    assert isinstance(result, cst.ParserSyntaxError)
    assert str(result) == str(full_parse(broken))
