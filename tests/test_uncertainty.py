"""The standard errors and 95% intervals of codeeval/pipeline/uncertainty.py against simulation: synthetic
problems with known pass rates scored through the score stage (codeeval/pipeline/score.py, the real task
specs), and corpus BLEU on CoNaLa's real problems. docs/statistics.md states the tolerances."""
from __future__ import annotations

import math

import numpy as np
import pytest

from codeeval.benchmarks.registry import get_task
from codeeval.benchmarks.spec import LoadOptions, Problem, Sample, Verdict
from codeeval.pipeline import uncertainty
from codeeval.pipeline.score import score_samples

REPLICATIONS = 200
COVERAGE = (0.90, 0.99)  # around the nominal 0.95: 200 replications put 0.95 +- 0.015 (one sd)
A, B = 2.0, 3.0  # each problem's pass rate ~ Beta(A, B): population pass@1 = 0.4


def true_pass_at_k(k: int) -> float:
    """1 - E[(1 - p)^k] for p ~ Beta(A, B): 1 - B(A, B + k) / B(A, B)."""
    def log_beta(a, b):
        return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    return 1.0 - math.exp(log_beta(A, B + k) - log_beta(A, B))


def synthetic(rng: np.random.Generator, problems: int, n: int) -> tuple[list[Problem], list[Sample]]:
    """`problems` problems drawn from the population, n samples each passing at the problem's rate."""
    rates = rng.beta(A, B, size=problems)
    ps = [Problem(f"P/{i}", i, "", {"lib": "Numpy"}) for i in range(problems)]
    ss = [Sample(p.task_id, j, "", Verdict("passed" if ok else "failed", bool(ok)))
          for p, rate in zip(ps, rates) for j, ok in enumerate(rng.random(n) < rate)]
    return ps, ss


def coverage(task: str, problems: int, n: int, ks: list[int], seed: int) -> dict[str, float]:
    """Share of REPLICATIONS whose 95% interval holds the population's pass@k, per key."""
    spec, rng = get_task(task), np.random.default_rng(seed)
    hits = {f"pass@{k}": 0 for k in ks}
    for _ in range(REPLICATIONS):
        score = score_samples(spec, *synthetic(rng, problems, n), ks)
        for k in ks:
            lo, hi = score.ci95[f"pass@{k}"]
            hits[f"pass@{k}"] += lo <= true_pass_at_k(k) <= hi
    return {key: h / REPLICATIONS for key, h in hits.items()}


def test_true_pass_at_k_of_the_population():
    assert true_pass_at_k(1) == pytest.approx(0.4) and true_pass_at_k(2) == pytest.approx(0.6)


def test_closed_form_interval_of_pass_at_k_covers_the_population_value():
    """humaneval's metric (pass@k, unbiased per problem), 60 problems of 5 samples: pass@1 and pass@2."""
    got = coverage("humaneval", problems=60, n=5, ks=[1, 2], seed=1)
    assert all(COVERAGE[0] <= c <= COVERAGE[1] for c in got.values()), got
    spec = get_task("humaneval")
    score = score_samples(spec, *synthetic(np.random.default_rng(2), 60, 5), [1, 2])
    assert score.stderr_method == {"pass@1": uncertainty.CLOSED_FORM, "pass@2": uncertainty.CLOSED_FORM}


def test_closed_form_pass_at_1_with_one_sample_is_the_binomial_se():
    """n=1: SE = sqrt(p(1-p)/(P-1)) over P pass/fail problems (by hand: 7 of 10 pass, 0.1528)."""
    ps = [Problem(f"P/{i}", i, "", {}) for i in range(10)]
    ss = [Sample(p.task_id, 0, "", Verdict("passed", i < 7)) for i, p in enumerate(ps)]
    score = score_samples(get_task("humaneval"), ps, ss, [1])
    assert score.metrics["pass@1"] == pytest.approx(0.7)
    assert score.stderr["pass@1"] == pytest.approx(math.sqrt(0.7 * 0.3 / 9), abs=1e-12)
    assert score.ci95["pass@1"] == pytest.approx([0.7 - 1.959964 * 0.152753, min(1.0, 0.7 + 1.959964 * 0.152753)],
                                                 abs=1e-5)


def test_bootstrap_interval_of_a_metric_without_a_closed_form_covers_the_population_value():
    """DS-1000's metric (correct samples / problems / n) has no per-problem values: it is
    bootstrapped. 60 problems of 1 sample; the same coverage band; its SE agrees with the
    closed form of the same numbers within 15% (the bootstrap's is sqrt((P-1)/P) smaller, plus noise)."""
    got = coverage("ds1000-numpy-completion", problems=60, n=1, ks=[1], seed=3)
    assert COVERAGE[0] <= got["pass@1"] <= COVERAGE[1], got
    problems, samples = synthetic(np.random.default_rng(4), 60, 1)
    boot = score_samples(get_task("ds1000-numpy-completion"), problems, samples, [1])
    closed = score_samples(get_task("humaneval"), problems, samples, [1])
    assert boot.metrics["pass@1"] == closed.metrics["pass@1"]
    assert boot.stderr_method["pass@1"] == uncertainty.BOOTSTRAP
    assert boot.stderr["pass@1"] == pytest.approx(closed.stderr["pass@1"], rel=0.15)


@pytest.fixture(scope="module")
def conala(data_dir):
    spec = get_task("conala")
    problems = spec.load(LoadOptions(data_dir=data_dir))
    return spec, problems


def conala_samples(spec, problems, wrong_every: int) -> list[Sample]:
    """The reference snippet as each completion, but every `wrong_every`-th one replaced by
    another problem's snippet (a plausible but wrong program)."""
    refs = [spec.reference_solution(p) for p in problems]
    return [Sample(p.task_id, 0, refs[(i + 7) % len(refs)] if i % wrong_every == 0 else refs[i])
            for i, p in enumerate(problems)]


def test_corpus_bleu_is_bootstrapped_seeded_and_shrinks_with_more_problems(conala):
    spec, problems = conala
    perfect = score_samples(spec, problems, [Sample(p.task_id, 0, spec.reference_solution(p)) for p in problems], [])
    assert perfect.metrics["bleu"] == pytest.approx(1.0) and perfect.stderr["bleu"] == pytest.approx(0.0)
    samples = conala_samples(spec, problems, 3)
    score = score_samples(spec, problems, samples, [])
    again = score_samples(spec, problems, samples, [])
    assert score.stderr == again.stderr and score.ci95 == again.ci95  # the fixed seed
    assert score.stderr_method["bleu"] == uncertainty.BOOTSTRAP
    lo, hi = score.ci95["bleu"]
    assert 0 < score.stderr["bleu"] < 0.1 and lo < score.metrics["bleu"] < hi
    # a quarter of the problems: about twice the standard error (1/sqrt(P)); the mean over the
    # four interleaved quarters (here 2.12, 2.13, 2.28, 2.97: corpus BLEU is no plain mean)
    ratios = [score_samples(spec, problems[q::4], samples[q::4], []).stderr["bleu"] / score.stderr["bleu"]
              for q in range(4)]
    assert 1.6 < sum(ratios) / 4 < 2.8, ratios


def test_bootstrap_interval_of_corpus_bleu_covers_the_whole_benchmarks_value(conala):
    """Draws of 80 of CoNaLa's 500 problems (a third of them answered wrongly): how often the
    interval of a draw holds the BLEU of all 500. Corpus BLEU is a ratio, biased at small P, so
    the band is wider below: [0.85, 0.99] over 100 draws."""
    spec, problems = conala
    samples = conala_samples(spec, problems, 3)
    whole = score_samples(spec, problems, samples, []).metrics["bleu"]
    rng, hits, draws = np.random.default_rng(5), 0, 100
    for _ in range(draws):
        chosen = sorted(rng.choice(len(problems), size=80, replace=False))
        score = score_samples(spec, [problems[i] for i in chosen], [samples[i] for i in chosen], [])
        lo, hi = score.ci95["bleu"]
        hits += lo <= whole <= hi
    assert 0.85 <= hits / draws <= 0.99, hits / draws
