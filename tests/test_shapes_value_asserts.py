"""Asserts on tensor values are left out of the code the shape check runs; asserts on sizes
stay (`torchlint.shapes.value_asserts`)."""

import ast

from torchlint.shapes.value_asserts import without_value_asserts

SOURCE = """
def forward(self, x, hidden):
    assert x.size(1) == self.channels
    out = self.rnn(x)
    assert (out == hidden).all(), "the last output is the state"
    assert torch.isfinite(out).all()
    if self.training:
        assert not torch.isnan(out).any()
    return out
"""


def test_value_asserts_become_pass_and_size_asserts_stay() -> None:
    function = ast.parse(SOURCE).body[0]
    kept = without_value_asserts(function)
    asserts = [node for node in ast.walk(kept) if isinstance(node, ast.Assert)]
    assert [ast.unparse(a.test) for a in asserts] == ["x.size(1) == self.channels"]
    passes = [node.lineno for node in ast.walk(kept) if isinstance(node, ast.Pass)]
    assert passes == [5, 6, 8]  # each where its assert was: lines stay what they were
    compile(ast.Module(body=[kept], type_ignores=[]), "<test>", "exec")


def test_a_statement_without_value_asserts_is_the_same_object() -> None:
    statement = ast.parse("def f(x):\n    assert x.dim() == 4\n    return x").body[0]
    assert without_value_asserts(statement) is statement


def test_a_statement_nested_too_deep_to_visit_is_kept_as_written() -> None:
    depth = 3000
    deep = ast.Assert(test=ast.Call(ast.Attribute(ast.Name("x"), "all"), [], []))
    for _ in range(depth):
        deep = ast.If(test=ast.Constant(True), body=[deep], orelse=[])
    assert without_value_asserts(deep) is deep
