"""The classification tasks as library code (no training here; tests/test_flow_classification.py trains):
their splits as bigcode's scripts cut them, their data read in each data set's own formats, their
labels as the scripts number them, their metric, and bad data refused in one line."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from codeeval.benchmarks.classification import COMPLEXITIES, macro_f1
from codeeval.benchmarks.classification.data import codecomplex_cut
from codeeval.benchmarks.registry import get_task
from codeeval.benchmarks.spec import LoadOptions, Sample
from codeeval.core.errors import UsageError

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "classification"


def splits(task: str, data_dir: Path = FIXTURES, seed: int = 0) -> dict:
    return get_task(task).classification.splits(LoadOptions(data_dir=data_dir, split_seed=seed))


@pytest.mark.parametrize("n,seed", [(84, 0), (84, 7), (4517, 0), (13, 3)])
def test_codecomplex_is_cut_as_the_script_cuts_it(n, seed):
    """set_seed(seed), then datasets' seedless train_test_split(0.2) and its test part's (0.5), as
    finetuning/CodeComplex/train.py does: the same rows, in the same order, in each split."""
    from datasets import Dataset
    from transformers import set_seed

    set_seed(seed)
    cut = Dataset.from_dict({"row": list(range(n))}).train_test_split(test_size=0.2)
    second = cut["test"].train_test_split(test_size=0.5)
    expected = {"train": cut["train"]["row"], "test": second["train"]["row"], "validation": second["test"]["row"]}
    assert codecomplex_cut(n, seed) == {k: list(v) for k, v in expected.items()}


def test_the_fixtures_load_in_each_format_and_number_their_labels_as_the_scripts_do():
    cc, clone, defect = splits("codecomplex"), splits("codeclone"), splits("codedefect")
    assert [len(cc[s]) for s in ("train", "validation", "test")] == [67, 9, 8]  # 84 records cut 80/10/10
    assert [len(clone[s]) for s in ("train", "validation", "test")] == [48, 16, 16]
    assert [len(defect[s]) for s in ("train", "validation", "test")] == [48, 16, 16]
    # a test record's task id is its record's id (CodeComplex's: its line in data.jsonl)
    problems = get_task("codeclone").load(LoadOptions(data_dir=FIXTURES))
    first = json.loads((FIXTURES / "codeclone" / "test.jsonl").read_text().splitlines()[0])
    assert problems[0].task_id == f"BigCloneBench/{first['id']}" and problems[0].record == first
    # the scripts cast the bool column to ClassLabel(names=[True, False]): the id is int(label)
    from datasets import ClassLabel, Dataset

    column = [r["label"] for _, r in clone["test"]]
    cast = Dataset.from_dict({"label": column}).cast_column("label", ClassLabel(num_classes=2, names=[True, False]))
    classification = get_task("codeclone").classification
    assert [classification.classes.index(classification.label(r)) for _, r in clone["test"]] == cast["label"]


def test_a_dataset_saved_by_datasets_reads_the_same(tmp_path):
    """`Dataset.to_json` / `to_parquet` files, one per split, read as the hub's layout does."""
    from datasets import Dataset

    for split in ("train", "validation", "test"):
        table = pq.read_table(FIXTURES / "codedefect" / "data" / f"{split}-00000-of-00001.parquet")
        ds = Dataset(table)
        ds.to_json(tmp_path / "codedefect" / f"{split}.jsonl")
        ds.to_parquet(tmp_path / "code_x_glue_cc_defect_detection" / f"{split}.parquet")
    hub = splits("codedefect")
    for folder in ("codedefect", "code_x_glue_cc_defect_detection"):
        only = tmp_path / "only"
        shutil.rmtree(only, ignore_errors=True)
        shutil.copytree(tmp_path / folder, only / folder)
        assert splits("codedefect", only) == hub, folder


def test_bad_data_is_refused_in_one_line(tmp_path):
    records = [json.loads(line) for line in (FIXTURES / "codecomplex" / "data.jsonl").read_text().splitlines()]
    records[5]["complexity"] = "exponential"
    (tmp_path / "codecomplex").mkdir()
    (tmp_path / "codecomplex" / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(UsageError, match=r"^codecomplex: record \d+ of the \w+ split: complexity 'exponential' is "
                                         "not one of constant, linear"):
        splits("codecomplex", tmp_path)
    (tmp_path / "codeclone").mkdir()
    for split in ("train", "test"):
        shutil.copy(FIXTURES / "codeclone" / f"{split}.jsonl", tmp_path / "codeclone")
    with pytest.raises(UsageError, match="^codeclone: no validation split in .*codeclone"):
        splits("codeclone", tmp_path)
    shutil.copy(FIXTURES / "codeclone" / "validation.jsonl", tmp_path / "codeclone")
    lines = (tmp_path / "codeclone" / "test.jsonl").read_text().splitlines()
    bad = json.loads(lines[3]) | {"label": 2}
    (tmp_path / "codeclone" / "test.jsonl").write_text("\n".join([*lines[:3], json.dumps(bad), *lines[4:]]) + "\n")
    with pytest.raises(UsageError, match=r"^codeclone: record 3 of the test split: label 2 is not one of false, true"):
        splits("codeclone", tmp_path)
    twice = json.loads(lines[0])
    (tmp_path / "codeclone" / "test.jsonl").write_text("\n".join([*lines, json.dumps(twice)]) + "\n")
    with pytest.raises(UsageError, match=rf"id {twice['id']} appears twice"):
        splits("codeclone", tmp_path)


def test_the_metric_is_accuracy_with_macro_f1_and_the_confusion_matrix():
    spec = get_task("codedefect")
    problems = spec.load(LoadOptions(data_dir=FIXTURES))
    gold = [spec.classification.label(p.record) for p in problems]
    guesses = ["true"] * len(problems)  # always "vulnerable"
    samples = [Sample(p.task_id, 0, g) for p, g in zip(problems, guesses)]
    (metric,) = spec.metrics
    result = metric.compute(problems, samples, [])
    positives = gold.count("true")
    assert result["accuracy"] == positives / len(problems)
    assert result["confusion_matrix"] == [[0, len(problems) - positives], [0, positives]]
    assert result["classes"] == ["false", "true"]
    # scikit-learn's macro F1: the never-predicted class counts 0
    assert result["macro_f1"] == pytest.approx((2 * positives / (2 * positives + len(problems) - positives)) / 2)
    assert metric.per_problem(problems, samples, [])["accuracy"] == {p.task_id: float(g == "true")
                                                                      for p, g in zip(problems, gold)}
    assert macro_f1([("a", "a"), ("b", "a"), ("b", "b")]) == pytest.approx((2 / 3 + 2 / 3) / 2)


def test_the_options_are_checked_before_any_data(tmp_path):
    from codeeval.pipeline.config import RunConfig
    from codeeval.pipeline.plan import check
    from codeeval.training.args import TrainArgs

    def refused(**change) -> str:
        training = TrainArgs(**change.pop("training", {}))
        config = RunConfig(model="reference", tasks=change.pop("tasks", ["codecomplex"]), data_dir=str(FIXTURES),
                           training=training, **change)
        with pytest.raises(UsageError) as error:
            check(config)
        return str(error.value)

    assert refused(training={"label_order": "constant,linear"}).startswith("label_order 'constant,linear' is not an")
    assert "num_epochs must be >= 1" in refused(training={"num_epochs": 0})
    assert "lr_scheduler_type 'cosine_warm' is not one of" in refused(training={"lr_scheduler_type": "cosine_warm"})
    assert refused(backend="openai").startswith("codecomplex is evaluated by fine-tuning the model's weights")
    assert refused(load_generations_path=str(tmp_path / "g.json")).startswith(
        "codecomplex is evaluated by fine-tuning the model's weights, which saved generations cannot do")
    # a label order is any order of the same classes
    check(RunConfig(model="reference", tasks=["codecomplex"], data_dir=str(FIXTURES),
                    training=TrainArgs(label_order=",".join(reversed(COMPLEXITIES)))))


def test_a_finished_checkpoint_reaches_another_host_through_the_store(tmp_path, monkeypatch):
    """CODEEVAL_STORAGE an fsspec URL (file://: a real store), two hosts each with its own mirror: the
    checkpoint host A finished reaches host B whole, readable by the team; the one A left half written
    never does; another training's key resumes nothing, and pruning keeps the newest, here and in the store."""
    from codeeval.core import storage
    from codeeval.training import checkpoints

    monkeypatch.setenv("CODEEVAL_STORAGE", (tmp_path / "store").as_uri())

    def host(name: str) -> Path:
        monkeypatch.setenv("CODEEVAL_CACHE", str(tmp_path / name))
        return storage.root() / "run-1" / "codeclone" / "training" / "checkpoints"

    root = host("host-a")
    for step, finish in ((8, True), (16, False)):
        folder = root / f"checkpoint-{step}"
        folder.mkdir(parents=True)
        (folder / "model.safetensors").write_bytes(b"weights %d" % step)
        (folder / "model.safetensors").chmod(0o600)  # as the Trainer writes it
        (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
        if finish:
            checkpoints.mark(folder, "key-1")
    assert (root / "checkpoint-8" / "model.safetensors").stat().st_mode & 0o044 == 0o044
    other = host("host-b")
    found = checkpoints.newest(other, "key-1")
    assert found == other / "checkpoint-8" and (found / "model.safetensors").read_bytes() == b"weights 8"
    assert not (other / "checkpoint-16").exists()
    host("host-a")
    assert checkpoints.newest(root, "key-1") == root / "checkpoint-8" and not (root / "checkpoint-16").exists()
    later = root / "checkpoint-24"
    later.mkdir()
    (later / "model.safetensors").write_bytes(b"weights 24")
    checkpoints.mark(later, "key-1")
    checkpoints.prune(root, "key-1", keep=1)
    assert [f.name for f in checkpoints.folders(root)] == ["checkpoint-24"]  # the store's listing too
    assert checkpoints.newest(host("host-c"), "key-2") is None  # another training's: removed, here and there
    assert storage.folders(host("host-a")) == []  # (host A's own mirror keeps its copy: key-1's, still right)
