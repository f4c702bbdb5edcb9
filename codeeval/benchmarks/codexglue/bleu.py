"""The two BLEUs bigcode reports, computed here without the hub or Perl.

* `corpus_bleu`: `evaluate.load("bleu")` (huggingface/evaluate's metrics/bleu, which is
  tensorflow/nmt's scripts/bleu.py over sacrebleu's 13a tokenizer), used by CoNaLa, Concode and
  Spider. Corpus-level clipped n-gram counts; `smooth=True` adds one to every order's matches
  and candidates, unigrams included (nmt master, as `evaluate` fetches it).
* `codexglue_bleu`: CodeXGLUE code-to-text's evaluator (Moses' NIST-normalised smoothed
  sentence BLEU-4, averaged over sentences, x100), bigcode's `{"blue": ...}`.

Both are pure functions of the strings, checked against the references' published test
vectors (tests/test_bleu.py). The metrics score each problem's first sample, as bigcode does.
"""
from __future__ import annotations

import functools
import math
import re
import sys
import xml.sax.saxutils
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from codeeval.benchmarks.spec import Metric, Problem, Sample

# mteval's punctuation rules, shared by sacrebleu's 13a (as evaluate copies it) and the NIST
# normalisation of CodeXGLUE's evaluator: split punctuation; '.' and ',' only when not between
# digits; '-' after a digit
_PUNCT_RULES = [(re.compile(p), r) for p, r in (
    (r"([\{-\~\[-\` -\&\(-\+\:-\@\/])", r" \1 "),
    (r"([^0-9])([\.,])", r"\1 \2 "),
    (r"([\.,])([^0-9])", r" \1 \2"),
    (r"([0-9])(-)", r"\1 \2 "),
)]


def tokenize_13a(line: str) -> list[str]:
    """mteval-v13a tokenization (evaluate's Tokenizer13a): no lowercasing."""
    line = line.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    if "&" in line:
        line = line.replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    line = f" {line} "
    for pattern, repl in _PUNCT_RULES:
        line = pattern.sub(repl, line)
    return line.split()


def ngrams(tokens: Sequence[str], max_order: int) -> Counter:
    return Counter(tuple(tokens[i:i + n]) for n in range(1, max_order + 1) for i in range(len(tokens) - n + 1))


@functools.lru_cache(maxsize=1 << 16)
def pair_counts(prediction: str, reference: str, max_order: int) -> tuple[tuple[int, ...], tuple[int, ...], int, int]:
    """One pair's share of the corpus counts: clipped matches and candidates per order, the two
    lengths. Cached: the bootstrap (codeeval/pipeline/uncertainty.py) rescores the same pairs many times."""
    hyp, ref = tokenize_13a(prediction), tokenize_13a(reference)
    matches = [0] * max_order
    for gram, count in (ngrams(hyp, max_order) & ngrams(ref, max_order)).items():
        matches[len(gram) - 1] += count
    possible = tuple(max(len(hyp) - order + 1, 0) for order in range(1, max_order + 1))
    return tuple(matches), possible, len(hyp), len(ref)


def corpus_bleu(predictions: Sequence[str], references: Sequence[str], max_order: int = 4,
                smooth: bool = False) -> dict[str, Any]:
    """`evaluate.load("bleu").compute(predictions=..., references=..., max_order=..., smooth=...)`
    with one reference string per prediction; the same dict, the same floats.

    Guards where the reference raises ZeroDivisionError: when every prediction is empty the
    length ratio is 0, so the brevity penalty is its limit 0 and BLEU is 0.0; every reference
    being empty is bad data (Concode's test.json has no targets) and raises ValueError."""
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions for {len(references)} references")
    matches, possible = [0] * max_order, [0] * max_order
    translation_length = reference_length = 0
    for prediction, reference in zip(predictions, references):
        pair_matches, pair_possible, hyp_length, ref_length = pair_counts(prediction, reference, max_order)
        reference_length += ref_length
        translation_length += hyp_length
        for order in range(max_order):
            matches[order] += pair_matches[order]
            possible[order] += pair_possible[order]
    if smooth:
        precisions = [(m + 1.0) / (p + 1.0) for m, p in zip(matches, possible)]
    else:
        precisions = [float(m) / p if p > 0 else 0.0 for m, p in zip(matches, possible)]
    geo_mean = math.exp(sum((1.0 / max_order) * math.log(p) for p in precisions)) if min(precisions) > 0 else 0
    if reference_length == 0:
        raise ValueError("BLEU needs references: every reference is empty")
    ratio = float(translation_length) / reference_length
    if ratio > 1.0:
        bp = 1.0
    else:
        bp = math.exp(1 - 1.0 / ratio) if ratio > 0 else 0.0
    return {"bleu": geo_mean * bp, "precisions": precisions, "brevity_penalty": bp, "length_ratio": ratio,
            "translation_length": translation_length, "reference_length": reference_length}


def nist_normalize(text: str) -> list[str]:
    """CodeXGLUE's evaluator's `normalize` (Moses' bleu.py after NIST mteval-v11a): unlike 13a
    it unescapes with xml.sax.saxutils (&amp; last) and lowercases."""
    text = re.sub("<skipped>", "", text)
    text = re.sub(r"-\n", "", text)
    text = re.sub(r"\n", " ", text)
    text = xml.sax.saxutils.unescape(text, {"&quot;": '"'})
    text = f" {text} ".lower()
    for pattern, repl in _PUNCT_RULES:
        text = pattern.sub(repl, text)
    return text.split()


def split_puncts(line: str) -> str:
    """CodeXGLUE's splitPuncts: words and single punctuation marks, space-joined."""
    return " ".join(re.findall(r"[\w]+|[^\s\w]", line))


def sentence_bleu(reference: str, hypothesis: str, n: int = 4) -> float:
    """CodeXGLUE's `bleu([reference], hypothesis)[0]`: add-one smoothing for orders 2..n only,
    the brevity term min(0, 1 - (r+1)/(h+1)), in [0, 1]."""
    ref, hyp = nist_normalize(reference), nist_normalize(hypothesis)
    ref_counts, hyp_counts = ngrams(ref, n), ngrams(hyp, n)
    correct = [0] * n
    for gram, count in hyp_counts.items():
        correct[len(gram) - 1] += min(ref_counts.get(gram, 0), count)
    guess = [max(len(hyp) - k + 1, 0) for k in range(1, n + 1)]
    tiny = sys.float_info.min
    log_bleu = 0.0
    for k in range(n):
        smooth = 1 if k > 0 else 0
        log_bleu += math.log(correct[k] + smooth + tiny) - math.log(guess[k] + smooth + tiny)
    log_bleu /= float(n)
    log_bleu += min(0, 1 - float(len(ref) + 1) / (len(hyp) + 1))
    return math.exp(log_bleu)


def codexglue_bleu(golds: Sequence[str], predictions: Sequence[str]) -> float:
    """bigcode's compute_codexglue_code_to_text_bleu: each string stripped, cut at its first
    tab, lowercased and punctuation-split; the mean sentence BLEU x 100 (0.0 for no pairs)."""
    total = 0.0
    for gold, prediction in zip(golds, predictions):
        total += codexglue_sentence_bleu(gold, prediction)
    return total * 100.0 / len(golds) if golds else 0.0


def codexglue_sentence_bleu(gold: str, prediction: str) -> float:
    """One pair's term of codexglue_bleu, in [0, 1]."""
    gold = gold.strip().split("\t")[0]
    prediction = prediction.strip().split("\t")[0]
    return sentence_bleu(split_puncts(gold.strip().lower()), split_puncts(prediction.strip().lower()))


def first_samples(problems: Sequence[Problem], samples: Sequence[Sample]) -> list[str]:
    """Each problem's first sample's completion ("" for a problem with none), in dataset order."""
    first: dict[str, str] = {}
    for s in samples:
        first.setdefault(s.task_id, s.completion)
    return [first.get(p.task_id, "") for p in problems]


@dataclass(frozen=True)
class CorpusBleu(Metric):
    """CoNaLa, Concode and Spider: corpus BLEU of each problem's first sample against
    `reference(problem)`, in [0, 1]. `keys` keeps part of the dict (Spider reported `bleu` alone)."""

    reference: Callable[[Problem], str]
    max_order: int = 4
    smooth: bool = True
    keys: Optional[tuple[str, ...]] = None
    name = "bleu"
    primary = "bleu"

    def compute(self, problems: Sequence[Problem], samples: Sequence[Sample], ks: Sequence[int]) -> dict[str, Any]:
        result = corpus_bleu(first_samples(problems, samples), [self.reference(p) for p in problems],
                             self.max_order, self.smooth)
        return {k: result[k] for k in self.keys} if self.keys else result


@dataclass(frozen=True)
class CodeXGlueBleu(Metric):
    """CodeXGLUE code-to-text: smoothed sentence BLEU x 100 of each problem's first sample,
    under bigcode's key "blue" (sic)."""

    reference: Callable[[Problem], str]
    name = "smoothed_bleu"
    primary = "blue"

    def compute(self, problems: Sequence[Problem], samples: Sequence[Sample], ks: Sequence[int]) -> dict[str, Any]:
        return {"blue": codexglue_bleu([self.reference(p) for p in problems], first_samples(problems, samples))}

    def per_problem(self, problems: Sequence[Problem], samples: Sequence[Sample],
                    ks: Sequence[int]) -> dict[str, dict[str, float]]:
        pairs = zip(problems, first_samples(problems, samples))
        return {"blue": {p.task_id: 100.0 * codexglue_sentence_bleu(self.reference(p), c) for p, c in pairs}}
