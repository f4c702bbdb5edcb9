from math import comb

import pytest

from codeeval.benchmarks.metrics import PassAtK, pass_at_k, resolve_ks
from codeeval.benchmarks.spec import Sample, Verdict
from codeeval.core.errors import UsageError


@pytest.mark.parametrize("n,c,k", [(5, 2, 1), (10, 3, 2), (20, 5, 10), (7, 0, 3), (7, 7, 3), (200, 13, 100)])
def test_pass_at_k_matches_the_combinatorial_definition(n, c, k):
    assert pass_at_k(n, c, k) == pytest.approx(1 - comb(n - c, k) / comb(n, k))


def sample(task_id, i, passed, **verdict):
    return Sample(task_id, i, "", Verdict("passed" if passed else "failed", passed, **verdict))


def test_pass_at_k_averages_over_problems_and_scores_subsets():
    samples = [sample("a", 0, True, subsets={"base": True}), sample("a", 1, False, subsets={"base": True}),
               sample("b", 0, False, subsets={"base": False}), sample("b", 1, False, subsets={"base": True})]
    assert PassAtK().compute([], samples, [1, 2]) == {"pass@1": 0.25, "pass@2": 0.5}
    assert PassAtK(subset="base", prefix="base_").compute([], samples, [1]) == {"base_pass@1": 0.75}


def test_requested_k_above_n_is_an_error_naming_task_and_n():
    with pytest.raises(UsageError, match=r"pass@10 .* task mbpp has n=5"):
        resolve_ks("mbpp", 5, [1, 10], (1, 10, 100))


def test_default_ks_above_n_are_left_out_and_reported():
    assert resolve_ks("humaneval", 1, None, (1, 10, 100)) == ([1], [10, 100])
    assert resolve_ks("humaneval", 20, None, (1, 10, 100)) == ([1, 10], [100])
