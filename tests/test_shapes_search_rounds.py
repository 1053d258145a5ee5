"""A size search that comes back to sizes it already started from ends as its last attempt
would have: the attempts after it would only go round the same sizes."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from torchlint.shapes.check import _MAX_FLIPS, PlanResult, _repeated, _Round


def _rounds(*starts: int) -> list[_Round]:
    """Rounds that started at these lengths, each leaving the next one's start."""
    rounds = []
    for start, following in zip(starts, [*starts[1:], starts[0]], strict=True):
        done = _Round({"N": 2, "L": start}, constraints=0)
        done.left(PlanResult(rank_error=start == 2), {"N": 2, "L": following})
        rounds.append(done)
    return rounds


def test_new_sizes_go_on() -> None:
    assert _repeated(_rounds(16, 2, 3), {"N": 2, "L": 5}, 0) is None


def test_a_constraint_found_since_goes_on() -> None:
    assert _repeated(_rounds(16, 2, 3), {"N": 2, "L": 2}, 1) is None


@pytest.mark.parametrize(
    ("starts", "back_to"),
    [((16, 2, 3), 2), ((16, 2), 2), ((16, 2, 3, 4), 2), ((16,), 16)],
)
def test_a_repeat_ends_where_the_last_attempt_would_have(
    starts: tuple[int, ...], back_to: int
) -> None:
    rounds = _rounds(*starts)
    # What the attempts would have done: go round from the first repeated start.
    first = starts.index(back_to)
    cycle = rounds[first:]
    last = cycle[(_MAX_FLIPS - 1 - first) % len(cycle)]
    assert _repeated(rounds, {"N": 2, "L": back_to}, 0) is last
    result = PlanResult(hints={"N": 2, "L": 99})
    last.restore(result)
    assert result.hints == last.hints and result.rank_error == last.rank_error
