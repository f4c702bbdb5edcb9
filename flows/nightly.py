"""The `nightly-leaderboard` flow: evaluate every model of a models file (each an `evaluate`
subflow: finished shards are reused), write leaderboard.parquet (model x task x metric, run id,
date) and a static index.html, and publish a Prefect table artifact (`leaderboard`) and a
markdown artifact of the changes since the previous night (`leaderboard-changes`).

The previous night's leaderboard.parquet is kept under history/ before it is replaced. A model
whose run fails keeps its previous rows (their date says how old they are) and fails the flow
run once the page is written, so the UI shows it red while the leaderboard stays complete.
"""
from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from codeeval import artifacts, leaderboard_html, nightly
from codeeval.errors import RunFailed
from codeeval.flows.evaluate import evaluate
from codeeval.plan import check


def _run_name() -> str:
    from prefect.runtime import flow_run

    return f"nightly-{Path(str(flow_run.parameters.get('models_file'))).stem}-{nightly.today()}"


@flow(name="nightly-leaderboard", flow_run_name=_run_name)
def nightly_leaderboard(models_file: str, output_dir: str = "leaderboard", runs_dir: str = "runs") -> dict:
    log = get_run_logger()
    configs = nightly.load_models(Path(models_file), Path(runs_dir))
    for config in configs:
        check(config)  # every model's input errors before the first model runs for hours
    date = nightly.today()
    rows: list[dict] = []
    reused: dict[str, dict] = {}
    failed: dict[str, str] = {}
    for config in configs:
        try:
            results = evaluate(config)
        except Exception as exc:  # noqa: BLE001 - one model's failure must not cost the others
            failed[config.model] = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            log.error("%s failed: %s", config.model, failed[config.model])
            continue
        rows += nightly.rows_of(results, date)
        reused[config.model] = {task: detail["reused"] for task, detail in results["codeeval"]["tasks"].items()}

    out = Path(output_dir)
    board = out / "leaderboard.parquet"
    previous = nightly.read_leaderboard(board)
    rows += [r for r in previous if r["model"] in failed]  # kept, with their old date
    delta = nightly.changes(previous, rows)
    previous_date = max((r["date"] for r in previous), default=None)
    if previous:
        artifacts.write_table(out / "history" / f"leaderboard-{previous_date}.parquet", previous,
                              nightly.LEADERBOARD_SCHEMA)
    nightly.write_leaderboard(board, rows)
    changes_md = nightly.changes_markdown(delta, previous_date, date, failed)
    page = artifacts.write_bytes(out / "index.html", leaderboard_html.render(rows, date, changes_md).encode())
    create_table_artifact([{k: r[k] for k in ("model", "task", "metric", "value", "problems", "run_id", "date")}
                           for r in rows if r["primary"]], key="leaderboard",
                          description=f"codeeval leaderboard {date} (primary metric per task)")
    create_markdown_artifact(changes_md, key="leaderboard-changes", description=f"changes on {date}")
    log.info("leaderboard: %d rows, %d changes; %s", len(rows), len(delta), page)
    if failed:
        raise RunFailed(f"{len(failed)} of {len(configs)} models failed: "
                        + "; ".join(f"{m}: {why}" for m, why in failed.items()))
    return {"date": date, "rows": len(rows), "changes": delta, "reused": reused,
            "parquet": str(board), "html": str(page)}
