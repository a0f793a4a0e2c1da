"""The results dataset: the per-run result files as flat tables (`write_tables`: `runs.jsonl`, one row per
fine-tuning run; `predictions/<model>.jsonl`, one per run, split and instance; `summary.jsonl`, summary.csv typed) with
one typed schema for every task family (`RUNS_FEATURES`, `PREDICTIONS_FEATURES`), declared in the dataset card so that
`datasets.load_dataset(repo, "runs")` never guesses a column's type. Which data a task's test scores come from is
`evaluation.tasks.describe_test_data`'s.
"""

import contextlib
import csv
import json
from pathlib import Path

import yaml

from core import store
from core.names import scaled_name
from model_cards.public import public_result

OFFLINE_DATA = yaml.safe_load(Path(__file__).with_name("offline_data.yaml").read_text(encoding="utf-8"))
RESULTS_FOLDER = "results"  # where the per-run result files go in the dataset repo
RUNS_FILE = "runs.jsonl"
SUMMARY_FILE = "summary.jsonl"  # summary.csv as JSON lines: `datasets` reads every config of a repo with one builder
PREDICTIONS_FOLDER = "predictions"
JSON = "string"  # JSON-encoded columns are strings: any `datasets` version reads them, json.loads decodes them

RUNS_FEATURES = {
    "model": "string",
    "task": "string",
    "family": "string",
    "lr": "float64",
    "seed": "int64",
    "status": "string",
    "main_metric": "string",
    "main_score_validation": "float64",
    "main_score_test": "float64",
    "validation_scores": JSON,
    "test_scores": JSON,  # every metric of the split, {"accuracy": 0.91, ...}
    "data_source": "string",
    "test_dataset": "string",
    "test_split": "string",
    "config": JSON,
    "versions": JSON,
    "git_commit": "string",
    "identity": JSON,
}
PREDICTIONS_FEATURES = {
    "model": "string",
    "task": "string",
    "family": "string",
    "lr": "float64",
    "seed": "int64",
    "split": "string",
    "index": "int64",
    "id": "string",
    "score": "float64",
    "prediction": JSON,
    "reference": JSON,
    "scores": JSON,
}
# Per-instance fields of the result files (core.store.result_body): ir keeps a ranking and the judgements.
PREDICTION_KEYS, REFERENCE_KEYS, ID_KEYS = ("prediction", "ranking"), ("reference", "relevance"), ("id", "qid")


def scored_test(record: dict) -> dict:
    """How many test instances a result scored: {"n" (None when it kept none), "capped" (by the grid's `--max_eval`),
    "text": the cards' words}."""
    n = len(store.instances(record)) or None
    capped = n is not None and store.run_config(record).get("max_eval") == n
    text = (
        ""
        if n is None
        else f"a seeded random {n:,} of that split (--max_eval {n})"
        if capped
        else f"all {n:,} instances"
    )
    return {"n": n, "capped": capped, "text": text}


def record_source(record: dict) -> str:
    """The data source of a result ("offline" | "hub"), as its identity records it."""
    source = (record.get("identity") or {}).get("task", {}).get("source") or store.run_config(record).get("source")
    if source is None:
        raise ValueError(
            f"result of {record.get('model')} on {record.get('task')} records no data source "
            "(identity.task.source): re-run it with the current evaluation.run"
        )
    return source


# ------------------------------------------------------------------------------------------------ flat tables
def _json(value) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _main(scores: dict, metric: str):
    value = (scores or {}).get(metric)
    return float(value) if isinstance(value, (int, float)) else None


def _run_key(record: dict) -> dict:
    return {k: record[k] for k in ("model", "task", "family")} | {
        "lr": float(record["lr"]),
        "seed": int(record["seed"]),
    }


def run_row(record: dict) -> dict:
    """One `runs` row (every column of RUNS_FEATURES) from a published result record."""
    from evaluation.tasks import describe_test_data  # the task registry: imported only when scores are described

    source, metric = record_source(record), store.main_metric(record)
    data = describe_test_data(record["task"], source)
    return {
        **_run_key(record),
        "status": store.OK if store.scored(record) else store.DIVERGED,
        "main_metric": metric,
        **{f"main_score_{s}": _main(store.split_scores(record, s), metric) for s in store.SPLITS},
        **{f"{s}_scores": _json(store.split_scores(record, s) or {}) for s in store.SPLITS},
        "data_source": source,
        "test_dataset": data["dataset"],
        "test_split": data["split"],
        "config": _json(store.run_config(record)),
        "versions": _json(record.get("versions") or {}),
        "git_commit": record.get("git_commit"),
        "identity": _json(record.get("identity") or {}),
    }


def _first(instance: dict, keys: tuple[str, ...]):
    return next((instance[k] for k in keys if k in instance), None)


def prediction_rows(record: dict):
    """`predictions` rows (every column of PREDICTIONS_FEATURES) of one result record, split by split."""
    metric, known = store.main_metric(record), {*PREDICTION_KEYS, *REFERENCE_KEYS, *ID_KEYS}
    for split in store.SPLITS:
        for index, instance in enumerate(store.instances(record, split)):
            instance_id, score = _first(instance, ID_KEYS), instance.get(metric)
            yield {
                **_run_key(record),
                "split": split,
                "index": index,
                "id": None if instance_id is None else str(instance_id),
                "score": float(score) if isinstance(score, (int, float)) else None,
                "prediction": _json(_first(instance, PREDICTION_KEYS)),
                "reference": _json(_first(instance, REFERENCE_KEYS)),
                "scores": _json({k: v for k, v in instance.items() if k not in known}),
            }


def write_tables(result_paths: list[Path], out_dir: Path, scale: str | None = None) -> dict[str, Path]:
    """Write the published copies of the result files and the `runs` / `predictions` tables into the scratch folder
    `out_dir`, one result at a time (memory does not grow with the grid); returns path in the dataset repo -> local
    file. `scale`: the rows name the models as the report does (`scaled_name`); the result files stay as recorded."""
    files, shards = {}, {}
    with contextlib.ExitStack() as stack:
        runs = stack.enter_context(open(out_dir / RUNS_FILE, "w", encoding="utf-8"))
        for path in result_paths:
            record = public_result(store.read_result(path))
            repo_path = f"{RESULTS_FOLDER}/{path.parent.parent.name}/{path.parent.name}/{path.name}"
            copy = out_dir / repo_path
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_text(json.dumps(record, indent=2, allow_nan=False) + "\n", encoding="utf-8")
            files[repo_path] = copy
            record = {**record, "model": scaled_name(record["model"], scale)}  # the rows: as the report names it
            runs.write(json.dumps(run_row(record), ensure_ascii=False, allow_nan=False) + "\n")
            shard = f"{PREDICTIONS_FOLDER}/{record['model']}.jsonl"
            if shard not in shards:
                (out_dir / PREDICTIONS_FOLDER).mkdir(exist_ok=True)
                shards[shard] = stack.enter_context(open(out_dir / shard, "w", encoding="utf-8"))
            for row in prediction_rows(record):
                shards[shard].write(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n")
    files[RUNS_FILE] = out_dir / RUNS_FILE
    files.update({shard: out_dir / shard for shard in shards})
    return files


def _typed(column: str, text: str):
    if text in ("", "nan"):
        return None
    try:
        return int(text) if column.startswith("n_") else float(text)
    except ValueError:
        return text


def write_summary_table(summary_csv: Path, out_dir: Path) -> dict[str, Path]:
    """`summary.jsonl`: the report's summary.csv with typed values, for the `summary` config."""
    with open(summary_csv, newline="", encoding="utf-8") as f:
        rows = [{k: _typed(k, v) for k, v in row.items()} for row in csv.DictReader(f)]
    (out_dir / SUMMARY_FILE).write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )
    return {SUMMARY_FILE: out_dir / SUMMARY_FILE}


def dataset_configs() -> tuple[list[dict], list[dict]]:
    """(`configs`, `dataset_info`) metadata of the results dataset card: the three configs and their schemas."""
    configs = [
        {"config_name": "runs", "data_files": RUNS_FILE, "default": True},
        {"config_name": "predictions", "data_files": f"{PREDICTIONS_FOLDER}/*.jsonl"},
        {"config_name": "summary", "data_files": SUMMARY_FILE},
    ]
    info = [
        {"config_name": name, "features": [{"name": k, "dtype": v} for k, v in features.items()]}
        for name, features in (("runs", RUNS_FEATURES), ("predictions", PREDICTIONS_FEATURES))
    ]
    return configs, info
