from math import comb

import pytest

from codeeval.errors import UsageError
from codeeval.metrics import pass_at_k, resolve_ks, score


@pytest.mark.parametrize("n,c,k", [(5, 2, 1), (10, 3, 2), (20, 5, 10), (7, 0, 3), (7, 7, 3), (200, 13, 100)])
def test_pass_at_k_matches_the_combinatorial_definition(n, c, k):
    assert pass_at_k(n, c, k) == pytest.approx(1 - comb(n - c, k) / comb(n, k))


def test_score_averages_over_problems():
    ids = ["a", "a", "b", "b"]
    assert score(ids, [True, False, False, False], [1, 2]) == {"pass@1": 0.25, "pass@2": 0.5}


def test_requested_k_above_n_is_an_error_naming_task_and_n():
    with pytest.raises(UsageError, match=r"pass@10 .* task mbpp has n=5"):
        resolve_ks("mbpp", 5, [1, 10], (1, 10, 100))


def test_default_ks_above_n_are_left_out_and_reported():
    assert resolve_ks("humaneval", 1, None, (1, 10, 100)) == ([1], [10, 100])
    assert resolve_ks("humaneval", 20, None, (1, 10, 100)) == ([1, 10], [100])
