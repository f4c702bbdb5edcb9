"""The two BLEUs against the references' own numbers (docs: benchmarks.md sections 7, 8, 13).

Expected values were computed with the reference code itself (tensorflow/nmt's compute_bleu over
huggingface/evaluate's Tokenizer13a; CodeXGLUE's evaluator as bigcode copies it) and, where
small enough, by hand in the comments."""
from __future__ import annotations

import math

import pytest

from codeeval.benchmarks.codexglue.bleu import (
    CodeXGlueBleu,
    CorpusBleu,
    codexglue_bleu,
    corpus_bleu,
    nist_normalize,
    sentence_bleu,
    split_puncts,
    tokenize_13a,
)
from codeeval.benchmarks.spec import Problem, Sample

HYPS = ["x = sorted(a, key=len)", "os.remove(path)"]
REFS = ["x = sorted(a, key=lambda s: len(s))", "os.remove(file_path)"]


def test_the_smoothed_test_vector_gives_evaluates_whole_dict():
    result = corpus_bleu(HYPS, REFS, max_order=4, smooth=True)
    assert list(result) == ["bleu", "precisions", "brevity_penalty", "length_ratio", "translation_length",
                            "reference_length"]
    assert result["bleu"] == pytest.approx(0.467333, abs=5e-7)
    assert result["precisions"] == pytest.approx([1.0, 0.8, 0.692308, 0.636364], abs=5e-7)
    assert result["brevity_penalty"] == pytest.approx(0.606531, abs=5e-7)
    assert (result["translation_length"], result["reference_length"]) == (16, 24)
    assert result["length_ratio"] == pytest.approx(16 / 24)


def test_without_smoothing_unigrams_and_the_rest_are_plain_ratios():
    result = corpus_bleu(HYPS, REFS, smooth=False)
    assert result["bleu"] == pytest.approx(0.454134, abs=5e-7)
    assert result["precisions"] == pytest.approx([15 / 15, 11 / 14, 8 / 12, 6 / 10])


def test_smoothing_adds_one_to_every_order_including_unigrams():
    # 4 of 5 reference tokens, all n-grams match: precisions (4+1)/(4+1)...; bp = exp(1 - 5/4)
    result = corpus_bleu(["a b c d"], ["a b c d e"], smooth=True)
    assert result["precisions"] == [1.0, 1.0, 1.0, 1.0]
    assert result["bleu"] == pytest.approx(math.exp(-0.25)) == pytest.approx(0.7788007830714049)
    # one wrong unigram: (3+1)/(4+1) and (1+1)/(3+1), (0+1)/(2+1), (0+1)/(1+1) -- unigrams smoothed too
    result = corpus_bleu(["a b X d"], ["a b c d"], smooth=True)
    assert result["precisions"] == pytest.approx([4 / 5, 2 / 4, 1 / 3, 1 / 2])
    assert result["brevity_penalty"] == 1.0  # ratio 1 is not > 1: exp(1 - 1/1)


def test_counts_are_clipped_and_summed_over_the_corpus():
    # "the the the" against "the cat": one "the" matches; a second pair adds its own counts
    result = corpus_bleu(["the the the", "cat"], ["the cat", "cat"], smooth=False)
    assert result["precisions"][0] == pytest.approx(2 / 4)
    assert result["translation_length"] == 4 and result["reference_length"] == 3
    assert result["brevity_penalty"] == 1.0 and result["length_ratio"] == pytest.approx(4 / 3)


def test_identical_strings_score_exactly_one():
    assert corpus_bleu(REFS, REFS, smooth=True)["bleu"] == 1.0
    assert corpus_bleu(REFS, REFS, smooth=False)["bleu"] == 1.0


def test_all_empty_predictions_score_zero_instead_of_dividing_by_zero():
    result = corpus_bleu(["", "  "], REFS, smooth=True)
    assert result["bleu"] == 0.0 and result["brevity_penalty"] == 0.0 and result["length_ratio"] == 0.0
    assert result["translation_length"] == 0 and result["precisions"] == [1.0, 1.0, 1.0, 1.0]
    # one non-empty prediction is the reference's own formula again
    assert corpus_bleu(["", "os.remove(file_path)"], REFS)["bleu"] > 0


def test_all_empty_references_and_length_mismatches_are_errors():
    with pytest.raises(ValueError, match="every reference is empty"):
        corpus_bleu(["x"], [""], smooth=True)
    with pytest.raises(ValueError, match="2 predictions for 1 references"):
        corpus_bleu(["x", "y"], ["x"])


def test_13a_splits_punctuation_but_not_numbers_apostrophes_or_hyphens():
    assert tokenize_13a("a.b, 1,000 3-4 x-y &amp;lt; <skipped>foo-\nbar") == \
        ["a", ".", "b", ",", "1,000", "3", "-", "4", "x-y", "<", "foobar"]
    assert tokenize_13a("print('Hi')\nX") == ["print", "(", "'Hi'", ")", "X"]  # no lowercasing


def test_codexglue_test_vector():
    # "Returns the sum of two numbers." vs "Return the sum of two numbers": bigcode's 69.647
    assert codexglue_bleu(["Returns the sum of two numbers."], ["Return the sum of two numbers"]) == \
        pytest.approx(69.647434, abs=5e-7)


def test_codexglue_scores_per_sentence_and_averages():
    pairs = [("Returns the sum of two numbers.", "Return the sum of two numbers"), ("returns x", "")]
    golds, preds = zip(*pairs)
    assert codexglue_bleu(golds, preds) == pytest.approx((69.64743404143488 + 13.53352832366127) / 2)


def test_an_empty_prediction_keeps_only_the_brevity_term():
    # no unigram guesses: log((0+tiny)/(0+tiny)) = 0, higher orders (0+1)/(0+1); exp(1 - (2+1)/(0+1))
    assert sentence_bleu("returns x", "") == pytest.approx(math.exp(-2))
    assert codexglue_bleu(["returns x"], [""]) == pytest.approx(13.53352832366127)


def test_codexglue_lowercases_and_ignores_text_after_a_tab():
    assert codexglue_bleu(["Returns the sum of two numbers."], ["returns the SUM of two numbers.\tignored"]) == 100.0
    assert codexglue_bleu([], []) == 0.0


def test_unigrams_are_not_smoothed_in_codexglue_bleu():
    # one unigram right of two: unigram 1/2, bigram (0+1)/(1+1); equal lengths
    assert sentence_bleu("a b", "a c") == pytest.approx(math.exp((math.log(1 / 2) + math.log(1 / 2)) / 4))


def test_nist_normalisation_differs_from_13a_on_entities_and_case():
    assert nist_normalize("&amp;lt; Foo") == ["&", "lt", ";", "foo"]
    assert tokenize_13a("&amp;lt; Foo") == ["<", "Foo"]
    assert split_puncts("self.x=f(a,b)") == "self . x = f ( a , b )"


def _problems(refs):
    return [Problem(f"t/{i}", i, "", {"ref": r}) for i, r in enumerate(refs)]


def test_metrics_score_each_problems_first_sample_in_dataset_order():
    problems = _problems(REFS)
    samples = [Sample("t/0", 0, HYPS[0]), Sample("t/0", 1, REFS[0]), Sample("t/1", 0, HYPS[1])]
    corpus = CorpusBleu(lambda p: p.record["ref"]).compute(problems, samples, ())
    assert corpus == corpus_bleu(HYPS, REFS, smooth=True)
    only = CorpusBleu(lambda p: p.record["ref"], keys=("bleu",)).compute(problems, samples, ())
    assert only == {"bleu": corpus["bleu"]}
    blue = CodeXGlueBleu(lambda p: p.record["ref"]).compute(problems, samples, ())
    assert blue == {"blue": codexglue_bleu(REFS, HYPS)}
    # a problem with no sample counts as an empty prediction
    assert CodeXGlueBleu(lambda p: p.record["ref"]).compute(problems, samples[:1], ())["blue"] == \
        pytest.approx(codexglue_bleu(REFS, [HYPS[0], ""]))


def test_the_metrics_primary_keys():
    assert (CorpusBleu.primary, CodeXGlueBleu.primary) == ("bleu", "blue")
