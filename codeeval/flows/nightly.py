"""The `nightly-leaderboard` flow: evaluate every model of a models file (each an `evaluate`
subflow: finished shards are reused), write leaderboard.parquet (model x task x metric, run id,
date) and a static index.html, and publish a Prefect table artifact (`leaderboard`) and a
markdown artifact of the changes since the previous night (`leaderboard-changes`).

Every night's leaderboard is also kept as history/leaderboard-<UTC timestamp>.parquet, never
overwritten (the page's trend charts read them), each model's Parquet files as
samples/<UTC timestamp>/<run_id> (what the paired comparisons read, tonight's and the next night's:
codeeval/reporting/paired.py), and the view of that copy as views/<UTC timestamp>/<run_id>
(`codeeval view`'s site: the page's cells and flipped problems link into it;
codeeval/reporting/view/nights.py). With CODEEVAL_STORAGE a URL and the leaderboard under it, all of
it is put in the store, pruning included, so the page and its links work from the store or from any
host's mirror of it. A model whose run fails keeps its previous rows (their date says how old they
are), carries its root cause (every failed shard's) on the page, in the table and in the changes,
and fails the flow run once the page is written, so the UI shows it red while the leaderboard stays
complete. The page also draws tonight's confusion matrix of each model on each classification task
(codeeval/reporting/matrix.py), from the results in hand.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from prefect import get_run_logger
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from codeeval.core import artifacts
from codeeval.core.errors import RunFailed
from codeeval.core.results import LeaderboardRow, reuse_json
from codeeval.flows.ending import flow  # prefect.flow, ending Failed with no unnamed result artifact
from codeeval.flows.evaluate import evaluate
from codeeval.flows.guard import enforce, worker_policy
from codeeval.pipeline import failures, usage
from codeeval.pipeline.plan import check
from codeeval.pipeline.policy import nightly_request
from codeeval.reporting import charts, matrix, nightly, page, paired
from codeeval.reporting.view import nights


def _run_name() -> str:
    """Unique per run: the models file, the UTC time and the flow run's short id."""
    from prefect.runtime import flow_run

    stem = Path(str(flow_run.parameters.get("models_file"))).stem
    return f"nightly-{stem}-{nightly.stamp()}-{str(flow_run.id or '')[:8]}".rstrip("-")


@flow(name="nightly-leaderboard", flow_run_name=_run_name)
def nightly_leaderboard(models_file: str, output_dir: Optional[str] = None, runs_dir: Optional[str] = None) -> dict:
    """`output_dir`: the leaderboard's folder, else leaderboard/ under the storage; `runs_dir`: where each
    model's run directory goes, else where `evaluate` puts it (CODEEVAL_STORAGE, else runs/)."""
    log = get_run_logger()
    if (policy := worker_policy()) is not None:  # a deployment run: the worker decides (flows/guard.py)
        output_dir, runs_dir = policy.output(output_dir or nightly.BOARD), policy.output(runs_dir)
        enforce(policy, nightly_request(models_file, output_dir, runs_dir), f"nightly-{Path(models_file).stem}")
    configs = nightly.load_models(Path(models_file), Path(runs_dir) if runs_dir else None)
    for config in configs:
        check(config)  # every model's input errors before the first model runs for hours
    date, night = nightly.today(), nightly.stamp()
    out = nightly.board_dir(output_dir)
    board = out / "leaderboard.parquet"
    snapshot = nightly.history_path(out, night)  # tonight's history file; its name names tonight's samples/
    previous = nightly.read_leaderboard(board)
    rows: list[LeaderboardRow] = []
    reused: dict[str, dict] = {}
    compute: dict[str, dict] = {}  # model -> its decode time tonight (pipeline/usage.py's compute_total)
    failed: dict[str, str] = {}
    matrices: dict[str, dict[str, matrix.Confusion]] = {}  # model -> task -> tonight's confusion matrix
    for i, config in enumerate(configs, 1):  # a line as each model starts and ends: a night's progress
        log.info("model %d of %d: %s on %s", i, len(configs), config.model, ", ".join(config.tasks))
        try:
            results = evaluate(config)
        except Exception as exc:  # noqa: BLE001 - one model's failure must not cost the others
            failed[config.model] = nightly.failure_cause(exc)
            log.warning("model %d of %d: %s failed: its cause ends this run's log; the next model goes on",
                        i, len(configs), config.model)
            rows += nightly.failed_rows(previous, config.model, config.tasks, failed[config.model], date)
            continue
        samples = view = None
        try:  # what tomorrow's paired comparison reads, kept as it is tonight
            samples = paired.keep_samples(out, nightly.night_of(snapshot), results)
        except OSError as exc:
            log.warning("%s: its samples were not kept (no paired comparison): %s", config.model, exc)
        if samples is not None:
            try:  # the page's links into the run's samples
                view = nights.keep_view(out, samples)
            except Exception as exc:  # noqa: BLE001 - a view that cannot be built costs its links, not the night
                log.warning("%s: its view was not written (its cells link nowhere): %s", config.model,
                            failures.root_cause(exc))
        mine = nightly.rows_of(results, date, samples, view)
        rows += mine
        log.info("model %d of %d done: %s", i, len(configs), nightly.scores_text([config.model], mine, {}).strip())
        reused[config.model] = {task: reuse_json(detail.reused) for task, detail in results.tasks.items()}
        if spent := [detail.compute for detail in results.tasks.values() if detail.compute]:
            compute[config.model] = usage.compute_total(spent)
        if confusions := matrix.confusions_of(results.metrics):  # the classification tasks' (the page draws them)
            matrices[config.model] = confusions

    delta = nightly.changes(previous, rows)
    history = nightly.read_history(out)  # the nights before tonight's (other hosts' too): one listing a night
    previous_date = nightly.previous_night(history, previous)
    comparisons = paired.compare_nights(out, rows, previous, failed)
    nightly.write_leaderboard(board, rows)
    nightly.write_leaderboard(snapshot, rows)
    history = nightly.with_tonight(history, snapshot)
    kept = [rows for _, rows in history[-paired.KEEP_NIGHTS:]]
    paired.prune(out, kept)
    nights.prune(out, kept)
    changes_md = nightly.changes_markdown(delta, previous_date, date, failed, comparisons)
    html = artifacts.write_bytes(out / "index.html", page.render(
        rows, f"{charts.short_night(night)} UTC", delta, previous_date, failed, history, comparisons,
        matrices).encode())
    create_table_artifact([{k: getattr(r, k) for k in ("model", "task", "metric", "value", "stderr", "ci95_low",
                                                       "ci95_high", "problems", "run_id", "date", "error")}
                           for r in rows if r.primary], key="leaderboard",
                          description=f"codeeval leaderboard {date} (primary metric per task)")
    create_markdown_artifact(changes_md, key="leaderboard-changes", description=f"changes on {date}")
    log.info("leaderboard: %d rows, %d changes; %s", len(rows), len(delta), html)
    scores = nightly.scores_text([c.model for c in configs], rows, failed)  # every cause, whole
    if failed:
        names = ", ".join(failed)
        raise RunFailed(f"{len(failed)} of {len(configs)} models failed: {names}; tonight's scores:\n{scores}",
                        f"{len(failed)} of {len(configs)} models failed: {names}")
    log.info("tonight's scores:\n%s", scores)
    if compute:  # where a night's GPU time went: compiling steps, or decoding
        models = usage.compute_total(compute.values())
        log.info("tonight's decoding:\n%s", "\n".join(f"  {model}: {usage.compute_line(c)}" for model, c in
                                                     [*compute.items(), ("all models", models)]))
        compute["all models"] = models
    return {"date": date, "rows": len(rows), "changes": delta, "reused": reused, "compute": compute,
            "flips": paired.flips_by_model(comparisons),
            "parquet": str(board), "html": str(html)}
