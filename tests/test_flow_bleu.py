"""The BLEU tasks through the whole flow on a real (temporary) Prefect API: no execution, no
--allow_code_execution, bigcode's result dicts in results.json."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from codeeval.cli import main

FIXTURES = Path(__file__).parent / "fixtures"


def run_cli(capsys, *args) -> str:
    assert main(["run", *args]) == 0
    return capsys.readouterr().out


def test_reference_scores_bleu_one_on_the_real_data_without_executing(prefect_api, data_dir, tmp_path, capsys):
    text = run_cli(capsys, "--model", "reference", "--tasks", "conala,concode,spider", "--data-dir", str(data_dir),
                   "--output-dir", str(tmp_path))
    assert "conala" in text and "bleu=1.0000" in text
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["conala"] == {"bleu": 1.0, "precisions": [1.0, 1.0, 1.0, 1.0], "brevity_penalty": 1.0,
                                 "length_ratio": 1.0, "translation_length": 9006, "reference_length": 9006}
    assert results["concode"]["bleu"] == 1.0 and results["concode"]["translation_length"] == 64565
    assert results["spider"] == {"bleu": 1.0}
    assert results["config"]["allow_code_execution"] is False
    for name, n in (("conala", 500), ("concode", 2000), ("spider", 1034)):
        assert results["codeeval"]["tasks"][name]["problems"] == n
        assert not (tmp_path / name / "executions").exists()


def test_saved_generations_with_three_wrong_lines_score_the_references_number(prefect_api, data_dir, tmp_path, capsys):
    snippets = [r["snippet"] for r in json.loads((data_dir / "conala" / "conala-test.json").read_text())]
    gens = [[s] for s in snippets]
    gens[0], gens[1], gens[2] = ["os.kill(os.getpid())"], [""], [snippets[2] + " + 1"]
    saved = tmp_path / "gens.json"
    saved.write_text(json.dumps(gens))
    run_cli(capsys, "--tasks", "conala", "--load_generations_path", str(saved), "--data-dir", str(data_dir),
            "--output-dir", str(tmp_path / "run"))
    conala = json.loads((tmp_path / "run" / "results.json").read_text())["conala"]
    # tensorflow/nmt's compute_bleu over evaluate's Tokenizer13a on the same strings
    assert conala["bleu"] == pytest.approx(0.99821824428307, rel=1e-12)
    assert conala["translation_length"] == 8993


def test_code_to_text_reference_scores_100_and_the_rbug_name_scores_bigcodes_reference(prefect_api, tmp_path, capsys):
    common = ["--data-dir", str(FIXTURES)]
    text = run_cli(capsys, "--model", "reference", "--tasks", "codexglue_code_to_text-python,codexglue_code_to_text-go",
                   *common, "--save_generations", "--save_generations_path", str(tmp_path / "g.json"),
                   "--output-dir", str(tmp_path / "a"))
    assert "blue=100.0000" in text
    results = json.loads((tmp_path / "a" / "results.json").read_text())
    assert results["codexglue_code_to_text-python"] == {"blue": 100.0}
    assert results["codexglue_code_to_text-go"] == {"blue": 100.0}
    # the right docstrings, scored as bigcode scores them: "returns ..." became "eturns ..."
    run_cli(capsys, "--tasks", "codexglue_code_to_text-python-rbug", *common,
            "--load_generations_path", str(tmp_path / "g_codexglue_code_to_text-python.json"),
            "--output-dir", str(tmp_path / "b"))
    blue = json.loads((tmp_path / "b" / "results.json").read_text())["codexglue_code_to_text-python-rbug"]["blue"]
    assert blue == pytest.approx((300 + 100 * (8 / 9 * 8 / 9 * 7 / 8 * 6 / 7) ** 0.25) / 4)
