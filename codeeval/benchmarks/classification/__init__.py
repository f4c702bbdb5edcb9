"""The downstream classification tasks of bigcode's docs, evaluated by fine-tuning a sequence
classifier as its finetuning/{CodeComplex,CodeClone,CodeDefect}/train.py do: `codecomplex` (Java
time complexity, 7 classes), `codeclone` (BigCloneBench: are two Java methods clones) and
`codedefect` (Devign: is a C function vulnerable).

Each is a frozen spec: its splits, the fields the tokenizer reads, its class names by label id, and
its metric (accuracy, bigcode's, with macro-F1 and the confusion matrix beside it). The test records
are the task's problems; a problem's one sample is the predicted class name (docs/classification.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from codeeval.benchmarks.classification import data
from codeeval.benchmarks.data import check_record
from codeeval.benchmarks.spec import Classification, Example, LoadOptions, Metric, Problem, Sample, TaskSpec
from codeeval.core.errors import UsageError


@dataclass(frozen=True)
class Source:
    """Where a data set comes from and what its records hold."""

    hf_dataset: str
    folders: tuple[str, ...]  # its folder names under --data-dir
    fields: Mapping[str, Any]  # what the task reads of each record, with its types (data.check_record)
    inputs: tuple[str, ...]
    classes: tuple[str, ...]
    label: Callable[[Mapping[str, Any], str], str]  # (record, where) -> class name; raises outside the classes
    id_prefix: str  # task ids: <prefix>/<record id>


def _complexity(record: Mapping[str, Any], where: str) -> str:
    if record["complexity"] not in COMPLEXITIES:
        raise UsageError(f"{where}: complexity {record['complexity']!r} is not one of {', '.join(COMPLEXITIES)}")
    return record["complexity"]


# CodeComplex's classes, in the order of its data set card; bigcode numbers them in the order of
# `list(set(...))`, which changes with Python's hash seed (docs/deviations.md): `label_order` sets any order
COMPLEXITIES = ("constant", "linear", "quadratic", "cubic", "logn", "nlogn", "np")
BINARY = ("false", "true")  # label id = int(label), as bigcode's cast of the bool column gives it

SOURCES = {
    "codecomplex": Source("codeparrot/codecomplex", ("codecomplex",), {"src": str, "complexity": str}, ("src",),
                          COMPLEXITIES, _complexity, "CodeComplex"),
    "codeclone": Source("code_x_glue_cc_clone_detection_big_clone_bench",
                        ("codeclone", "code_x_glue_cc_clone_detection_big_clone_bench"),
                        {"id": int, "func1": str, "func2": str, "label": (bool, int)}, ("func1", "func2"), BINARY,
                        lambda r, where: data.bool_label(r["label"], where), "BigCloneBench"),
    "codedefect": Source("code_x_glue_cc_defect_detection", ("codedefect", "code_x_glue_cc_defect_detection"),
                         {"id": int, "func": str, "target": (bool, int)}, ("func",), BINARY,
                         lambda r, where: data.bool_label(r["target"], where), "Devign"),
}
DESCRIPTIONS = {
    "codecomplex": "CodeComplex: Java time complexity, 7 classes (fine-tuned; bigcode's finetuning/CodeComplex)",
    "codeclone": "BigCloneBench: Java method pairs, clone or not (fine-tuned; bigcode's finetuning/CodeClone)",
    "codedefect": "Devign: C functions, vulnerable or not (fine-tuned; bigcode's finetuning/CodeDefect)",
}


def _records(name: str, source: Source, options: LoadOptions, split: str) -> list[dict]:
    if options.data_dir is None:
        return data.hub_split(source.hf_dataset, split, f"{source.folders[0]}/{split}.jsonl")
    base = data.folder(options.data_dir, source.folders)
    return data.local_split(base, name, split, ("data.jsonl", "data.jsonl.gz", "data.parquet")
                            if name == "codecomplex" else ())


def _checked(name: str, source: Source, split: str, records: list, ids: Sequence) -> list[Example]:
    """The split's examples, each record checked (its fields, its label) and its id unique."""
    out, seen = [], set()
    for n, (record_id, record) in enumerate(zip(ids, records)):
        where = f"{name}: record {n} of the {split} split"
        check_record(record, source.fields, where)
        source.label(record, where)
        if record_id in seen:
            raise UsageError(f"{where}: id {record_id} appears twice")
        seen.add(record_id)
        out.append((str(record_id), record))
    if not out:
        raise UsageError(f"{name}: its {split} split holds no records")
    return out


def _splitter(name: str, source: Source) -> Callable[[LoadOptions], dict[str, list[Example]]]:
    def splits(options: LoadOptions) -> dict[str, list[Example]]:
        if name != "codecomplex":
            loaded = {split: _records(name, source, options, split) for split in data.SPLITS}
            return {split: _checked(name, source, split, records, [r.get("id") if isinstance(r, dict) else None
                                                                   for r in records])
                    for split, records in loaded.items()}
        records = _records(name, source, options, "train")  # one split on the hub, cut as bigcode cuts it
        cut = data.codecomplex_cut(len(records), options.split_seed)
        return {split: _checked(name, source, split, [records[i] for i in positions], positions)
                for split, positions in cut.items()}

    return splits


@dataclass(frozen=True)
class ClassifierScores(Metric):
    """bigcode's accuracy over the test records (its `eval_accuracy`), with macro-F1 and the confusion
    matrix (rows: true class, columns: predicted, in `classes` order). A sample's completion is its
    predicted class name."""

    classes: tuple[str, ...]
    gold: Callable[[Problem], str]
    name = "accuracy"
    primary = "accuracy"

    def per_problem(self, problems: Sequence[Problem], samples: Sequence[Sample],
                    ks: Sequence[int]) -> dict[str, dict[str, float]]:
        predicted = {s.task_id: s.completion for s in samples}
        return {"accuracy": {p.task_id: float(predicted.get(p.task_id) == self.gold(p)) for p in problems}}

    def compute(self, problems: Sequence[Problem], samples: Sequence[Sample], ks: Sequence[int]) -> dict[str, Any]:
        predicted = {s.task_id: s.completion for s in samples}
        pairs = [(self.gold(p), predicted.get(p.task_id, "")) for p in problems]
        index = {c: i for i, c in enumerate(self.classes)}
        matrix = [[0] * len(self.classes) for _ in self.classes]
        for true, guess in pairs:
            if guess in index:
                matrix[index[true]][index[guess]] += 1
        return {"accuracy": sum(t == g for t, g in pairs) / len(pairs) if pairs else 0.0,
                "macro_f1": macro_f1(pairs), "confusion_matrix": matrix, "classes": list(self.classes)}


def macro_f1(pairs: Sequence[tuple[str, str]]) -> float:
    """The mean F1 over the classes that occur as a truth or a prediction (scikit-learn's
    `f1_score(average="macro")`: a class never predicted, or never true, has F1 0)."""
    labels = sorted({t for t, _ in pairs} | {g for _, g in pairs})
    scores = []
    for label in labels:
        tp = sum(t == label and g == label for t, g in pairs)
        fp = sum(t != label and g == label for t, g in pairs)
        fn = sum(t == label and g != label for t, g in pairs)
        scores.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return sum(scores) / len(scores) if scores else 0.0


def make(name: str) -> TaskSpec:
    source = SOURCES[name]
    splits = _splitter(name, source)

    def gold(problem: Problem) -> str:
        return source.label(problem.record, f"{name}: {problem.task_id}")

    classification = Classification(classes=source.classes, inputs=source.inputs, splits=splits,
                                    label=lambda record: source.label(record, name), id_prefix=source.id_prefix)
    return TaskSpec(
        name=name, family="classification", load=lambda options: classification.problems(splits(options)["test"]),
        stop_words=(), postprocess=lambda problem, completion, stops=(): completion, reference_solution=gold,
        metrics=(ClassifierScores(source.classes, gold),), hf_dataset=source.hf_dataset,
        description=DESCRIPTIONS[name], classification=classification,
    )


TASK_NAMES = list(SOURCES)
