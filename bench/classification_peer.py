"""codeeval's classification tasks against bigcode-evaluation-harness's own fine-tuning scripts.

  python bench/classification_peer.py --bigcode /path/to/bigcode-evaluation-harness [--model tiny|smollm2|DIR]
      [--tasks codecomplex,codeclone,codedefect] [--epochs 2] [--batch-size 6] [--learning-rate 5e-4]
      [--seed 0] [--hash-seed 0] [--old-stack]

Runs bigcode's finetuning/{CodeComplex,CodeClone,CodeDefect}/train.py (from a checkout or a bare git
dir, at HEAD) on the CPU beside `codeeval run`, with the same fixtures (tests/fixtures/classification),
model, epochs, batch size, learning rate and seed, and compares the test predictions record by record
and the test accuracies (to 1e-6). The scripts run unmodified but for what the pinned stack
(transformers 5) requires, each change printed as a `rename:` line, and one `bug fix:` (CodeDefect's
tokenize() reads the column the script renamed; it cannot run as written). A runner (RUNNER below)
then runs each copy with runpy as `__main__`, after patching, around the script and never in it:
* `datasets.load_dataset`: the three hub ids load the fixtures through the json / parquet builders;
* `evaluate.load("accuracy")`: a local accuracy, evaluate's number, that records each call: the last
  is the final `trainer.evaluate(test)`; the Trainer's last evaluation loop gives its logits;
* `datasets.ClassLabel`: the names the script builds are recorded: CodeComplex's label ids are the
  order of `list(set(train complexities))` under PYTHONHASHSEED, passed to codeeval as --label_order;
* a model without `.roberta` (SmolLM2) gets it as `.base_model`, so the script's freeze loop runs
  (codeeval freezes `base_model`, docs/deviations.md); printed as a `shim:` line when it happens.
The scripts' `import evaluate, wandb` (report_to="wandb") come from a --target site of pinned
evaluate and wandb (with the wandb dependencies the venv lacks), on the peer's PYTHONPATH only.
Every process: HF_HUB_OFFLINE=1, HF_DATASETS_OFFLINE=1, WANDB_MODE=disabled, OMP_WAIT_POLICY=PASSIVE,
PYTHONHASHSEED=--hash-seed, no GPU, a fresh HF_HOME.

--old-stack also runs the scripts as written (the bug fix only) in a venv of the 2022 versions they
were written for (OLD_STACK; torch stays 2.13.0, see OLD_STACK_NOTES), against codeeval alike; its
tokenizers 0.13 reads a copy of the model folder whose tokenizer.json says its BPE merges the old way.

Prints the commands, environment and versions, then per stack and task: test records, labels and
predictions identical (n/n), the peer's and codeeval's accuracy, their difference, the largest
difference of a class probability, and the first differing record. Exits 1 when a task differs on
the pinned stack (the old stack is reported, not judged). Cached in $CODEEVAL_CACHE/classification-peer
(default ~/.cache/codeeval/classification-peer): peer-site/, old-stack/, models/, runs/<time>/.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "classification"
SCRIPTS = {"codecomplex": "finetuning/CodeComplex/train.py", "codeclone": "finetuning/CodeClone/train.py",
           "codedefect": "finetuning/CodeDefect/train.py"}
# hub id -> (builder, split files), as the scripts' load_dataset(...) finds them
DATA = {
    "codeparrot/codecomplex": ("json", {"train": [FIXTURES / "codecomplex" / "data.jsonl"]}),
    "code_x_glue_cc_clone_detection_big_clone_bench":
        ("json", {s: [FIXTURES / "codeclone" / f"{s}.jsonl"] for s in ("train", "validation", "test")}),
    "code_x_glue_cc_defect_detection":
        ("parquet", {s: [FIXTURES / "codedefect" / "data" / f"{s}-00000-of-00001.parquet"]
                     for s in ("train", "validation", "test")}),
}
SITE_PINS = ("evaluate==0.4.6", "wandb==0.31.0")  # evaluate without its deps (the venv has them; no torch)
# the stack of bigcode's requirements (transformers>=4.25.1, accelerate>=0.13.2, datasets>=2.6.1,
# evaluate>=0.3.0), late 2022, with what it needs to import on Python 3.11 beside torch 2.13
OLD_STACK = ("torch==2.13.0", "transformers==4.25.1", "tokenizers==0.13.2", "accelerate==0.15.0", "datasets==2.7.1",
             "evaluate==0.4.0", "huggingface_hub==0.11.1", "numpy==1.23.5", "pyarrow==10.0.1", "pandas==1.5.2",
             "fsspec==2022.11.0", "safetensors==0.2.6", "wandb==0.13.7", "protobuf==4.21.12", "sentry-sdk==1.12.1",
             "GitPython==3.1.29", "setuptools==80.9.0")
OLD_STACK_NOTES = (
    ("torch: 2022's CPU wheels (1.13.x+cpu) are only on download.pytorch.org, unreachable here; PyPI's torch "
     "1.13.1 cp311 wheel is the CUDA 11.7 build (887 MB, plus nvidia-* wheels): torch==2.13.0+cpu, the local wheel"),
    "transformers 4.25.1 installs on Python 3.11 with tokenizers 0.13.2 (a cp311 wheel)",
    ("datasets 2.7.1 with today's pyarrow (26) fails to import under numpy<2 ('pyarrow requires NumPy 2.0'): "
     "pyarrow 10.0.1, pandas 1.5.2, fsspec 2022.11.0, huggingface_hub 0.11.1 (its era)"),
    ("transformers 4.25 reads model.safetensors only with safetensors installed (not its requirement): "
     "safetensors 0.2.6"),
    ("tokenizers 0.13 cannot parse a tokenizer.json of tokenizers >= 0.20 ('data did not match any variant of "
     "untagged enum ModelWrapper': BPE merges as pairs): the old stack reads a copy of the model folder whose "
     "tokenizer.json has them as 'a b' strings (ignore_merges dropped): the same token ids on the fixtures"),
    ("wandb 0.13.7 imports pkg_resources, gone from setuptools 81+; torch 2.13 needs setuptools>=77: "
     "setuptools 80.9.0"),
    "evaluate 0.4.0 (Dec 2022); accelerate 0.15.0 (Dec 2022; transformers 4.25's Trainer does not use it)",
)
CHANGES = [  # (tasks, old, new, kind, within: regex of the span the old text must lie in, why)
    (tuple(SCRIPTS), "evaluation_strategy=", "eval_strategy=", "rename", r"TrainingArguments\(.*?\n    \)",
     "TrainingArguments' evaluation_strategy is eval_strategy in transformers 5"),
    (tuple(SCRIPTS), "tokenizer=tokenizer,", "processing_class=tokenizer,", "rename", r"Trainer\(.*?\n    \)",
     "Trainer(tokenizer=) was removed in transformers 5 for processing_class="),
    (("codedefect",), 'example["target"]', 'example["label"]', "bug fix", r"def tokenize\(.*?\n\n",
     'tokenize() reads "target" after `ds.rename_column("target", "label")`: KeyError as written'),
]
RESULT_LINE = re.compile(r"Evaluation accuracy on the test set: ([0-9.eE+-]+)")

RUNNER = r'''
"""bench/classification_peer.py's runner: python RUNNER SPEC_JSON. Patches datasets/evaluate/ClassLabel
(see the bench's docstring), runs the script as __main__ and writes what it recorded to spec["out"]."""
import json, os, runpy, sys

spec = json.load(open(sys.argv[1]))
script = os.path.realpath(spec["script"])
import numpy as np
import datasets, evaluate, transformers

record = {"classlabels": [], "computes": [], "shims": [], "logits": None}

_load_dataset = datasets.load_dataset
def load_dataset(path, *args, **kwargs):
    if path in spec["data"]:
        if args or "name" in kwargs or "data_files" in kwargs:
            raise SystemExit(f"runner: load_dataset({path!r}) with a config or files: {args} {kwargs}")
        builder, files = spec["data"][path]
        return _load_dataset(builder, data_files=files, **kwargs)
    return _load_dataset(path, *args, **kwargs)
datasets.load_dataset = load_dataset

class Accuracy:
    """evaluate's accuracy (sklearn's accuracy_score), each call recorded."""
    def compute(self, predictions=None, references=None, **kwargs):
        p, r = np.asarray(predictions), np.asarray(references)
        accuracy = float((p == r).mean())
        record["computes"].append({"predictions": p.tolist(), "references": r.tolist(), "accuracy": accuracy})
        return {"accuracy": accuracy}
_load = evaluate.load
def load(path, *args, **kwargs):
    return Accuracy() if path == "accuracy" else _load(path, *args, **kwargs)
evaluate.load = load

_classlabel_init = datasets.ClassLabel.__init__
def classlabel_init(self, *args, **kwargs):
    _classlabel_init(self, *args, **kwargs)
    if os.path.realpath(sys._getframe(1).f_code.co_filename) == script:
        record["classlabels"].append({"names_given": list(kwargs.get("names") or []), "names": list(self.names)})
datasets.ClassLabel.__init__ = classlabel_init

_evaluation_loop = transformers.Trainer.evaluation_loop
def evaluation_loop(self, *args, **kwargs):
    output = _evaluation_loop(self, *args, **kwargs)
    record["logits"] = np.asarray(output.predictions, dtype=np.float64).tolist()
    return output
transformers.Trainer.evaluation_loop = evaluation_loop

Auto = transformers.AutoModelForSequenceClassification
_from_pretrained = Auto.from_pretrained
def from_pretrained(*args, **kwargs):
    model = _from_pretrained(*args, **kwargs)
    if not hasattr(model, "roberta"):  # not registered as a module: state_dict and checkpoints unchanged
        object.__setattr__(model, "roberta", model.base_model)
        record["shims"].append(f"{type(model).__name__} has no .roberta: the script's freeze loop runs over "
                               f".base_model ({type(model.base_model).__name__})")
    return model
Auto.from_pretrained = from_pretrained

sys.argv = [script, *spec["argv"]]
try:
    runpy.run_path(script, run_name="__main__")
finally:
    versions = {}
    for name in ("torch", "transformers", "datasets", "accelerate", "evaluate", "wandb", "numpy", "tokenizers",
                 "pyarrow"):
        try:
            versions[name] = __import__(name).__version__
        except Exception as exc:
            versions[name] = f"({type(exc).__name__})"
    with open(spec["out"], "w") as out:
        json.dump({"test": record["computes"][-1] if record["computes"] else None, "calls": len(record["computes"]),
                   "classlabels": record["classlabels"], "logits": record["logits"], "shims": record["shims"],
                   "versions": versions}, out)
'''


def cache_root() -> Path:
    return Path(os.environ.get("CODEEVAL_CACHE") or Path.home() / ".cache" / "codeeval") / "classification-peer"


def run(cmd: list, env: dict | None = None, log: Path | None = None, cwd: Path | None = None) -> str:
    """Runs cmd; its stdout+stderr (also to `log`); SystemExit with the tail when it fails."""
    done = subprocess.run([str(c) for c in cmd], env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, check=False)
    if log is not None:
        log.write_text(done.stdout)
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {shlex.join(map(str, cmd))}\n{done.stdout[-4000:]}"
                         + (f"\n(log: {log})" if log else ""))
    return done.stdout


def quiet_pip(*args) -> list:
    return [sys.executable, "-m", "pip", *args, "--quiet", "--disable-pip-version-check"]


# ---- bigcode's scripts --------------------------------------------------------------------------

def script_source(bigcode: Path, rel: str) -> str:
    if (bigcode / rel).is_file():
        return (bigcode / rel).read_text(encoding="utf-8")
    return run(["git", "-C", bigcode, "show", f"HEAD:{rel}"])


def bigcode_commit(bigcode: Path) -> str:
    done = subprocess.run(["git", "-C", str(bigcode), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=False)
    return done.stdout.strip() if done.returncode == 0 else "(not a git checkout)"


def patched(task: str, text: str, renames: bool) -> tuple[str, list[str]]:
    """The script with CHANGES applied (only the bug fix when not `renames`), and one line for each."""
    lines = []
    for tasks, old, new, kind, within, why in CHANGES:
        if task not in tasks or (kind == "rename" and not renames):
            continue
        spans = [m for m in re.finditer(within, text, re.DOTALL) if old in m.group(0)]
        if len(spans) != 1 or text.count(old) != spans[0].group(0).count(old):
            raise SystemExit(f"{task}: {old!r} is not found exactly in one {within!r} span of {SCRIPTS[task]} "
                             f"({text.count(old)} in the file): the script changed; update CHANGES")
        span = spans[0]
        count = span.group(0).count(old)
        text = text[:span.start()] + span.group(0).replace(old, new) + text[span.end():]
        lines.append(f"{kind}: {SCRIPTS[task]}: {old} -> {new} ({count}x; {why})")
    return text, lines


# ---- environments -------------------------------------------------------------------------------

def ensure_site(root: Path) -> tuple[Path, list[str]]:
    """--target site with SITE_PINS and the wandb dependencies the venv lacks (pip resolves wandb against
    the venv's own packages, pinned to their versions); nothing of the venv is shadowed."""
    site, stamp = root / "peer-site", root / "peer-site.json"
    if stamp.is_file() and json.loads(stamp.read_text())["pins"] == list(SITE_PINS):
        return site, json.loads(stamp.read_text())["extra"]
    shutil.rmtree(site, ignore_errors=True)
    root.mkdir(parents=True, exist_ok=True)
    freeze = run([sys.executable, "-m", "pip", "freeze", "--exclude-editable", "--disable-pip-version-check"])
    (root / "venv-constraints.txt").write_text("\n".join(line for line in freeze.splitlines() if "==" in line) + "\n")
    report = root / "wandb-report.json"
    wandb_pin = next(p for p in SITE_PINS if p.startswith("wandb=="))
    run(quiet_pip("install", "--dry-run", "--report", report, wandb_pin, "-c", root / "venv-constraints.txt"))
    extra = [f"{i['metadata']['name']}=={i['metadata']['version']}" for i in json.loads(report.read_text())["install"]
             if i["metadata"]["name"].lower() != "wandb"]
    run(quiet_pip("install", "--no-deps", "--target", site, *SITE_PINS, *extra))
    run([sys.executable, "-c", "import evaluate, wandb"], env={**os.environ, "PYTHONPATH": str(site)})
    stamp.write_text(json.dumps({"pins": list(SITE_PINS), "extra": extra}))
    return site, extra


def ensure_old_stack(root: Path) -> Path:
    venv, stamp = root / "old-stack", root / "old-stack.json"
    python = venv / "bin" / "python"
    if stamp.is_file() and json.loads(stamp.read_text()) == list(OLD_STACK) and python.is_file():
        return python
    shutil.rmtree(venv, ignore_errors=True)
    run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", venv])
    run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *OLD_STACK])
    run([python, "-c", "import torch, transformers, datasets, evaluate, accelerate, wandb"],
        env={**os.environ, "WANDB_MODE": "disabled"})
    stamp.write_text(json.dumps(list(OLD_STACK)))
    return python


def old_stack_model(model: Path, root: Path) -> tuple[Path, str]:
    """The model folder as tokenizers 0.13 reads it (OLD_STACK_NOTES): links to its files, the tokenizer.json
    rewritten when its BPE merges are pairs; (folder, what was changed)."""
    if not (model / "tokenizer.json").is_file():
        return model, ""
    tokenizer = json.loads((model / "tokenizer.json").read_text(encoding="utf-8"))
    merges = tokenizer.get("model", {}).get("merges") or []
    if not merges or isinstance(merges[0], str):
        return model, ""
    if any(" " in m for pair in merges for m in pair):
        raise SystemExit(f"{model}: a BPE merge holds a space: no tokenizer.json for tokenizers 0.13 can say it")
    tokenizer["model"]["merges"] = [" ".join(pair) for pair in merges]
    tokenizer["model"].pop("ignore_merges", None)
    out = root / "models" / f"{model.name}-tokenizers-0.13"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for f in model.iterdir():
        if f.name != "tokenizer.json":
            (out / f.name).symlink_to(f.resolve())
    (out / "tokenizer.json").write_text(json.dumps(tokenizer, ensure_ascii=False), encoding="utf-8")
    return out, f"{out}: {model}'s files, its tokenizer.json's {len(merges)} merges as 'a b' strings"


def model_dir(spec: str, root: Path) -> Path:
    if spec == "tiny":
        return Path(run([sys.executable, REPO / "tests" / "classifier_models.py", root / "models" / "tiny-roberta"])
                    .strip().splitlines()[-1])
    if spec == "smollm2":
        return Path(run([sys.executable, REPO / "scripts" / "fetch-smollm2.py", "--hf"]).strip().splitlines()[-1])
    path = Path(spec).resolve()
    if not (path / "config.json").is_file():
        raise SystemExit(f"--model {spec}: not tiny, smollm2 or an HF model directory")
    return path


def environment(hash_seed: int, hf_home: Path, pythonpath: Path | None = None) -> tuple[dict, dict]:
    """(the full environment, what the bench sets in it)"""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "WANDB_")) and k != "PYTHONPATH"}
    own = {"PYTHONHASHSEED": str(hash_seed), "HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "disabled",
           "WANDB_DIR": str(hf_home), "OMP_WAIT_POLICY": "PASSIVE", "CUDA_VISIBLE_DEVICES": "",
           "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}
    if pythonpath:
        own["PYTHONPATH"] = str(pythonpath)
    return {**base, **own}, own


# ---- the two sides ------------------------------------------------------------------------------

def run_peer(python: Path, runner: Path, task: str, source: str, model: Path, ns, env: dict, folder: Path) -> dict:
    folder.mkdir(parents=True)
    (folder / "train.py").write_text(source, encoding="utf-8")
    argv = ["--model_ckpt", str(model), "--num_epochs", str(ns.epochs), "--batch_size", str(ns.batch_size),
            "--learning_rate", str(ns.learning_rate), "--seed", str(ns.seed), "--output_dir", str(folder / "out")]
    spec = {"script": str(folder / "train.py"), "argv": argv, "out": str(folder / "result.json"),
            "data": {k: [b, {s: [str(f) for f in fs] for s, fs in files.items()}] for k, (b, files) in DATA.items()}}
    (folder / "spec.json").write_text(json.dumps(spec, indent=1))
    cmd = [python, runner, folder / "spec.json"]
    print(f"  peer {task}: {shlex.join(map(str, cmd))}  # train.py {shlex.join(argv)}", flush=True)
    t0 = time.time()
    log = run(cmd, env=env, log=folder / "log.txt", cwd=folder)
    result = json.loads((folder / "result.json").read_text())
    printed = RESULT_LINE.findall(log)
    result["printed_accuracy"] = float(printed[-1]) if printed else None
    result["seconds"] = time.time() - t0
    shutil.rmtree(folder / "out", ignore_errors=True)  # the Trainer's checkpoints (a whole model each epoch)
    return result


def run_codeeval(task: str, model: Path, ns, label_order, env: dict, folder: Path) -> dict:
    import pyarrow.parquet as pq

    cmd = [sys.executable, "-m", "codeeval", "run", "--model", model, "--tasks", task, "--data-dir", FIXTURES,
           "--num_epochs", ns.epochs, "--batch_size", ns.batch_size, "--learning_rate", ns.learning_rate,
           "--seed", ns.seed, *(["--label_order", ",".join(label_order)] if label_order else []),
           "--output_dir", folder]
    print(f"  codeeval {task}: {shlex.join(map(str, cmd))}", flush=True)
    t0 = time.time()
    run(cmd, env=env, log=folder.with_suffix(".log"), cwd=REPO)
    shards = sorted((folder / task / "predictions").glob("shard-*.parquet"))
    rows = [r for shard in shards for r in pq.read_table(shard).to_pylist()]
    results = json.loads((folder / "results.json").read_text())
    return {"rows": rows, "accuracy": results[task]["accuracy"], "seconds": time.time() - t0}


def softmax(logits) -> list:
    import numpy as np

    x = np.asarray(logits, dtype=np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).tolist()


def compare(task: str, peer: dict, ours: dict) -> tuple[bool, str, list[str]]:
    """(identical, table row, notes)"""
    test = peer["test"] or {"predictions": [], "references": [], "accuracy": float("nan")}
    p_pred, p_ref, rows = test["predictions"], test["references"], ours["rows"]
    n = len(rows)
    same_len = len(p_pred) == n
    labels = sum(a == r["label"] for a, r in zip(p_ref, rows))
    preds = sum(a == r["predicted"] for a, r in zip(p_pred, rows))
    p_acc = peer["printed_accuracy"] if peer["printed_accuracy"] is not None else test["accuracy"]
    diff = abs(p_acc - ours["accuracy"])
    probs = softmax(peer["logits"]) if peer.get("logits") and len(peer["logits"]) == n else None
    dprob = max((abs(a - b) for pr, r in zip(probs, rows) for a, b in zip(pr, r["probabilities"])), default=0.0) \
        if probs else float("nan")
    identical = same_len and labels == n and preds == n and diff <= 1e-6
    row = (f"{task:<12} {n:>7} {labels:>4}/{n:<4} {preds:>5}/{n:<5} {p_acc:>10.6f} {ours['accuracy']:>13.6f} "
           f"{diff:>9.2e} {dprob:>10.2e}  {'identical' if identical else 'DIFFERENT'}")
    notes = []
    if not same_len:
        notes.append(f"{task}: the peer predicted {len(p_pred)} test records, codeeval {n}")
    if test["accuracy"] is not None and peer["printed_accuracy"] is not None \
            and abs(test["accuracy"] - peer["printed_accuracy"]) > 1e-9:
        notes.append(f"{task}: the script printed {peer['printed_accuracy']}, its last metric call gave "
                     f"{test['accuracy']}")
    if same_len and preds == n and dprob > 1e-6:
        notes.append(f"{task}: the predictions agree but the class probabilities differ by up to {dprob:.2e}: "
                     f"the two trainings did not end in the same model")
    for i, (a, ref, r) in enumerate(zip(p_pred, p_ref, rows)):
        if a != r["predicted"] or ref != r["label"]:
            notes.append(f"{task}: first differing record: #{i} ({r['task_id']}): label peer {ref} / codeeval "
                         f"{r['label']}, predicted peer {a} / codeeval {r['predicted']}; probabilities peer "
                         f"{_fmt(probs[i]) if probs else '?'} / codeeval {_fmt(r['probabilities'])}")
            break
    return identical, row, notes


# ---- main ---------------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bigcode", required=True, help="a bigcode-evaluation-harness checkout or bare git dir")
    ap.add_argument("--model", default="tiny", help="tiny (tests/classifier_models.py), smollm2, or a model dir")
    ap.add_argument("--tasks", default=",".join(SCRIPTS))
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=6)
    ap.add_argument("--learning-rate", type=float, default=5e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--hash-seed", type=int, default=0, help="PYTHONHASHSEED of every process")
    ap.add_argument("--old-stack", action="store_true", help="also run the scripts as written on 2022's versions")
    ns = ap.parse_args(argv)
    tasks = [t for t in ns.tasks.split(",") if t]
    if unknown := [t for t in tasks if t not in SCRIPTS]:
        raise SystemExit(f"unknown tasks {unknown}: choose from {', '.join(SCRIPTS)}")
    bigcode = Path(ns.bigcode).resolve()
    root = cache_root()
    folder = root / "runs" / time.strftime("%Y%m%d-%H%M%S")
    folder.mkdir(parents=True)
    runner = folder / "peer_runner.py"
    runner.write_text(RUNNER)

    sources = {t: script_source(bigcode, SCRIPTS[t]) for t in tasks}
    stacks = [("pinned", sys.executable, True)]
    site, extra = ensure_site(root)
    if ns.old_stack:
        stacks.append(("old", ensure_old_stack(root), False))
    model = model_dir(ns.model, root)
    print(f"bigcode-evaluation-harness {bigcode} at {bigcode_commit(bigcode)}; model {model}; "
          f"epochs {ns.epochs}, batch {ns.batch_size}, lr {ns.learning_rate}, seed {ns.seed}, "
          f"PYTHONHASHSEED {ns.hash_seed}, {os.cpu_count()} CPUs; work in {folder}")
    print(f"codeeval: {sys.executable} -m codeeval (torch {metadata.version('torch')}, transformers "
          f"{metadata.version('transformers')}, datasets {metadata.version('datasets')}, accelerate "
          f"{metadata.version('accelerate')})")
    print(f"peer site {site}: {', '.join(SITE_PINS)} (--no-deps) + {', '.join(extra) or 'nothing'}")
    if ns.old_stack:
        print(f"old stack {stacks[1][1]}: {' '.join(OLD_STACK)}")
        for note in OLD_STACK_NOTES:
            print(f"  old-stack note: {note}")

    ours_env, ours_own = environment(ns.hash_seed, folder / "hf-codeeval")
    print("environment (codeeval): " + " ".join(f"{k}={shlex.quote(v)}" for k, v in ours_own.items()))
    rows, notes, verdict, ours_cache = {}, [], {}, {}
    for stack, python, renames in stacks:
        env, own = environment(ns.hash_seed, folder / f"hf-{stack}", site if renames else None)
        print(f"[{stack} stack] environment (peer): " + " ".join(f"{k}={shlex.quote(v)}" for k, v in own.items()))
        peer_model = model
        if stack == "old":
            peer_model, changed = old_stack_model(model, root)
            if changed:
                print(f"  compat (old stack's model folder): {changed}")
        for task in tasks:
            source, changes = patched(task, sources[task], renames)
            for line in changes:
                print(f"  {line}")
            peer = run_peer(Path(python), runner, task, source, peer_model, ns, env, folder / f"{stack}-{task}")
            for shim in peer["shims"]:
                print(f"  shim: {shim}")
            order = None
            if task == "codecomplex":
                named = [c["names"] for c in peer["classlabels"]]
                if not named:
                    raise SystemExit("codecomplex: the script built no ClassLabel: its label order is unknown")
                order = named[0]
                print(f"  codecomplex label ids (the script's list(set(...)) under PYTHONHASHSEED={ns.hash_seed}): "
                      f"{order}")
            elif stack == "pinned":
                print(f"  {task}: the script's ClassLabel {peer['classlabels'][0]['names_given']} "
                      f"(names {peer['classlabels'][0]['names']}); its ids are the bool column cast: int(label)")
            key = (task, tuple(order or ()))
            if key not in ours_cache:
                ours_cache[key] = run_codeeval(task, model, ns, order, ours_env,
                                               folder / f"codeeval-{task}-{len(ours_cache)}")
            ours = ours_cache[key]
            v = peer["versions"]
            print(f"  {stack} peer ran on torch {v['torch']}, transformers {v['transformers']}, datasets "
                  f"{v['datasets']}, accelerate {v['accelerate']}, evaluate {v['evaluate']}, wandb {v['wandb']}, "
                  f"numpy {v['numpy']} ({peer['seconds']:.0f} s; codeeval {ours['seconds']:.0f} s)", flush=True)
            same, row, why = compare(task, peer, ours)
            rows.setdefault(stack, []).append(row)
            notes += [f"[{stack}] {n}" for n in why]
            verdict.setdefault(stack, []).append((task, same))

    print()
    print(f"{'stack':<7} {'task':<12} {'records':>7} {'labels':>9} {'predictions':>11} {'peer acc':>10} "
          f"{'codeeval acc':>13} {'|diff|':>9} {'max|dprob|':>10}  verdict")
    for stack, lines in rows.items():
        for line in lines:
            print(f"{stack:<7} {line}")
    for note in notes:
        print(note)
    for stack, results in verdict.items():
        differ = [t for t, same in results if not same]
        print(f"verdict ({stack} stack{'' if stack == 'pinned' else ', reported only'}): "
              + (f"DIFFERENT on {', '.join(differ)}" if differ else
                 f"identical predictions and accuracy on all {len(results)} task(s)"))
    return 1 if any(not same for _, same in verdict["pinned"]) else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))


def _fmt(probabilities) -> str:
    return "[" + ", ".join(f"{x:.6f}" for x in probabilities) + "]"
