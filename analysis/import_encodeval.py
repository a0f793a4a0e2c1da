"""The paper's own fine-tuning runs as result records of this project: the released per-run results of its
evaluation harness (hgissbkh/EncodEval, branch MLM_vs_CLM, `results/`), so that `analysis.report` gives the
paper's tables, findings and curves from the paper's own numbers, beside a user's results.

    git clone --branch MLM_vs_CLM --depth 1 https://github.com/hgissbkh/EncodEval
    python -m analysis.import_encodeval EncodEval/results --output imported/
    python -m analysis.report imported/ --output report/

What it reads and writes: docs/evaluation.md ("The paper's own runs"). A record is filed as `evaluation.run` files
its own, marked imported (no model files and no protocol identity: it never joins a run of this project in one
summary row). Each import replaces what an earlier one left in `--output`; a malformed or partial tree, or an
`--output` inside it, is refused in one line naming the path, before anything is written.
"""

from __future__ import annotations

import argparse
import collections
import csv
import io
import math
import re
from pathlib import Path

from core import artifacts, cli, names, store
from core.paper import PAPER_LRS, PAPER_SEEDS

FAMILIES = {"SC": "sc", "TC": "tc", "QA": "qa", "IR": "ir"}  # EncodEval's task folders -> this project's families
METRICS = {"sc": "accuracy", "tc": "sentence_macro_f1", "qa": "f1", "ir": "ndcg@10"}  # what EncodEval's score is
TASKS = {"mnli_m": "mnli", "conll2003_en": "conll2003", "uner_en": "uner", "mldr_en": "mldr"}  # same task, our name
RUN_DIR = re.compile(r"^(?:(?P<train>.+)_)?lr(?P<lr>\d+(?:\.\d+)?e[-+]?\d+)_sd(?P<seed>\d+)$")
RESULT_NAME = "results.json"
IDENTITY = {"imported": "encodeval"}  # no protocol identity: the harness recorded none
MISSING_RUNS = "missing_runs.csv"  # beside the imported records: the paper's grid runs the tree lacks
MISSING_COLUMNS = ["model", "task", "lr", "seed", "expected"]
INCOMPLETE = ".import-incomplete"  # in --output while an import writes it: a folder holding it is refused by the report
# this project's task -> (its trivial baseline's test score in the family's metric, how it is known, from what):
# "computed" from the task's data in the bundle, whose test split is EncodEval's (tests/test_import_encodeval.py
# recomputes each with `evaluation.baselines`), or "declared" from EncodEval's setup (docs/evaluation.md gives the
# source); a task not listed has none (its findings are then not testable)
BASELINES = {
    "sst2": (
        0.5091743119266054,
        "computed",
        "the training split's majority class (positive) on the 872 sentences of GLUE's validation split, EncodEval's "
        "test set",
    ),
    "conll2003": (
        0.4778333744393713,
        "computed",
        "all \"O\" on the 3,453 sentences of the official testb, EncodEval's test set, scored on the file's own IOB1 "
        "tags as EncodEval scored them",
    ),
    "squad": (
        0.04661071636941165,
        "computed",
        "the passage's first 2 words (the median gold answer length of the bundled training subset) on the 10,570 "
        "questions of the official dev set, EncodEval's test set",
    ),
    "mldr": (
        0.004543559338088284,
        "declared",
        "the expected NDCG@10 of a random ranking of 1,000 documents with one relevant per query: EncodEval pools "
        "the judged documents of MLDR's 200 validation and 800 test queries into one corpus (at most 1,000; a "
        "smaller one only raises the random ranking's score)",
    ),
}


def is_imported(record: dict) -> bool:
    """Whether a result record came from EncodEval's released runs (`imported_record`)."""
    return store.record_kind(record) == "imported"


def imported_record(model: str, task: str, family: str, lr: float, seed: int, run: dict, path: str) -> dict:
    """The result record of one EncodEval run (`run`: its parsed results.json; `path`: under the results folder)."""
    metric = METRICS[family]
    scores = {
        "validation": {metric: run["validation"]["score"]},
        "test": {metric: run["test"]["score"], "per_instance": {metric: run["test"].get("scores_i", [])}},
    }
    body, source = store.result_body(metric, scores), {"kind": store.IMPORTED_SOURCE, "path": path}
    if task in BASELINES:
        value, how, what = BASELINES[task]
        body["trivial_baseline"] = {"validation": None, "test": {metric: value}}
        source["baseline"] = f"{how}: {what}"
    # no protocol identity and no library versions: EncodEval's runs record neither
    return store.new_result(
        model, task, family, lr, seed, body, dict(IDENTITY), {}, store.pretrain_seed(model), source=source
    )


def baseline_note(task: str) -> str:
    """How an imported task's trivial baseline is known ("computed: ...", "declared: ..."), or that it has none."""
    if task not in BASELINES:
        return "none known: its findings are not testable"
    value, how, what = BASELINES[task]
    return f"{value:.4g} ({how}: {what})"


def _check_run(path: Path) -> dict:
    """A results.json: {"validation"|"test": {"score": number, "scores_i": [numbers]}}, score their mean. `scores_i`
    may be left out (a trimmed copy, docs/paper-runs/'s): the run then has no per-instance scores, and a paired
    comparison that needs them says so instead of being made."""
    run = artifacts.read_json(path, "EncodEval result")
    for split in ("validation", "test"):
        part = run.get(split) if isinstance(run, dict) else None
        score, scores = (part.get("score"), part.get("scores_i", [])) if isinstance(part, dict) else (None, None)
        if not _number(score) or not isinstance(scores, list) or not all(map(_number, scores)):
            raise ValueError(
                f"{path} is not an EncodEval result: `{split}` needs a finite `score` and a list of finite "
                "`scores_i` (or none)"
            )
        if scores and not math.isclose(sum(scores) / len(scores), score, rel_tol=1e-9, abs_tol=1e-9):
            raise ValueError(
                f"{path}: `{split}` score {score} is not the mean of its {len(scores)} scores_i "
                f"({sum(scores) / len(scores)}); the file is not what this importer reads"
            )
    return run


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def read_tree(
    results: Path, models: set[str] | None = None, datasets: set[str] | None = None
) -> tuple[list[dict], list[dict]]:
    """Every run of an EncodEval results tree, each file checked (`_check_run`) and let go, and the paper-grid runs the
    tree lacks (`MISSING_COLUMNS`); `models` / `datasets` (EncodEval's or this project's names) keep only those.

    Returns:
        (runs: {"model", "task", "family", "lr", "seed", "path", "source"}, missing runs).
    """
    runs, tasks, seen = [], set(), {}
    for model_dir in sorted(p for p in results.iterdir() if not p.name.startswith(".")):
        for task_dir in sorted(model_dir.iterdir()) if model_dir.is_dir() else [model_dir]:
            if task_dir.name not in FAMILIES or not task_dir.is_dir():
                raise ValueError(
                    f"{task_dir} is outside EncodEval's layout <model>/<{'|'.join(FAMILIES)}>/<dataset>/"
                    "[<train>_]lr<lr>_sd<seed>/results.json; pass the results folder of a clone"
                )
            for data_dir in sorted(task_dir.iterdir()):
                task = TASKS.get(data_dir.name, data_dir.name)
                if (models and model_dir.name not in models) or (datasets and not {data_dir.name, task} & datasets):
                    continue
                tasks.add(task)
                for run_dir in sorted(data_dir.iterdir()) if data_dir.is_dir() else [data_dir]:
                    match = RUN_DIR.match(run_dir.name)
                    if not match or not run_dir.is_dir():
                        raise ValueError(
                            f"{run_dir} is outside EncodEval's layout: a run folder is "
                            "[<train>_]lr<lr>_sd<seed> holding results.json"
                        )
                    path = run_dir / RESULT_NAME
                    if not path.is_file():
                        raise ValueError(
                            f"{path} is missing: the run folder is there without its result (a partial "
                            "copy?); copy the tree again"
                        )
                    _check_run(path)
                    source = path.relative_to(results).as_posix()
                    try:
                        source.encode("utf-8")
                    except UnicodeEncodeError:
                        raise ValueError(
                            f"{path} has a name that is not UTF-8, which no result record can name; "
                            "rename it (EncodEval's names are ASCII)"
                        ) from None
                    run = {
                        "model": model_dir.name,
                        "task": task,
                        "family": FAMILIES[task_dir.name],
                        "lr": float(match["lr"]),
                        "seed": int(match["seed"]),
                        "path": path,
                        "source": source,
                    }
                    key = (run["model"], task, run["lr"], run["seed"])
                    if key in seen:  # one record per file: two files of one run would be filed as one, the last winning
                        raise ValueError(
                            f"{seen[key]} and {path} are both {run['model']} on {task} at lr {run['lr']:g} seed "
                            f"{run['seed']} (two spellings of one run, or one dataset under two families): keep one "
                            "of them in the tree, or import them with --datasets into separate --output folders"
                        )
                    seen[key] = path
                    runs.append(run)
    if not runs:
        raise FileNotFoundError(
            f"no EncodEval results under {results}"
            f"{' for --models/--datasets' if models or datasets else ''}: pass the results "
            "folder of a clone of hgissbkh/EncodEval (branch MLM_vs_CLM)"
        )
    found = sorted({r["model"] for r in runs}, key=lambda m: (names.try_parse_name(m) is None, m))
    missing = [
        {"model": m, "task": task, "lr": lr, "seed": seed, "expected": "the paper's grid"}
        for m in found
        for task in sorted(tasks)
        for lr in PAPER_LRS
        for seed in PAPER_SEEDS
        if (m, task, lr, seed) not in seen
    ]
    return runs, missing


def check_complete(results_dir: str | Path) -> None:
    """Refuse (ValueError, one line) a results directory an import is writing or failed to finish (`INCOMPLETE`)."""
    if (Path(results_dir) / INCOMPLETE).exists():
        raise ValueError(
            f"{results_dir} holds {INCOMPLETE}: an import into it is running or did not finish (a full disk?), so "
            "its records are not the whole import; run `python -m analysis.import_encodeval` into it again"
        )


def missing_counts(results_dir: str | Path) -> dict[tuple[str, str], int]:
    """{(model, task): runs missing} from an imported directory's `missing_runs.csv` ({} when it has none)."""
    path = Path(results_dir) / MISSING_RUNS
    if not path.is_file():
        return {}
    with open(path, newline="", encoding="utf-8") as f:
        return dict(collections.Counter((row["model"], row["task"]) for row in csv.DictReader(f)))


def _check_output(output: Path, results: Path, runs: list[dict]) -> list[Path]:
    """Refuse an output inside the tree, or one holding this project's own results of a model being imported (one row
    would mix two experiments); return the records of an earlier import that this one does not rewrite (removed: the
    output holds what this import says)."""
    artifacts.check_output_dir(output, "--output")
    if output.resolve().is_relative_to(results.resolve()):
        raise ValueError(
            f"--output {output} is inside the EncodEval tree {results}, whose next import would read it "
            "as runs; pass a folder outside it"
        )
    models, written = {r["model"] for r in runs}, {r["target"] for r in runs}
    stale = []
    for path in store.result_files(output) if output.is_dir() else []:
        imported = store.marked_kind(artifacts.read_json(path, "result file")) == "imported"  # any format
        if path.parent.parent.name in models and not imported:
            raise ValueError(
                f"{path} is a result of this project for {path.parent.parent.name}, a model the import "
                "also has: import into another directory (the report keeps one row per model name)"
            )
        if imported and path not in written:
            stale.append(path)
    return stale


@cli.exit_on_write_failure
@cli.exit_on_bad_input
def main(argv=None) -> Path:
    """Import an EncodEval results tree; print what was imported and what is missing; return the output folder."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", help="the results/ folder of a clone of hgissbkh/EncodEval (branch MLM_vs_CLM)")
    parser.add_argument(
        "--output",
        required=True,
        help="results directory to write the records into (it may hold "
        "your own results of other models: the report shows them side by side)",
    )
    parser.add_argument("--models", default=None, help="only these models (comma-separated EncodEval names)")
    parser.add_argument(
        "--datasets",
        default=None,
        help="only these datasets (comma-separated; EncodEval's names or this project's: mnli_m, mnli)",
    )
    args = parser.parse_args(argv)
    results, output = Path(args.results), Path(args.output)
    if not results.is_dir():
        raise FileNotFoundError(f"{results} is not a directory: pass the results folder of an EncodEval clone")
    runs, missing = read_tree(results, set(cli.split_list(args.models)), set(cli.split_list(args.datasets)))
    for run in runs:
        run["target"] = store.result_path(output, run["model"], run["task"], run["lr"], run["seed"])
    stale = _check_output(output, results, runs)
    # marked first, unmarked last: a write that fails part-way leaves a folder the report refuses (`check_complete`)
    artifacts.write_json_atomic(output / INCOMPLETE, {"importing": str(results), "runs": len(runs)})
    for run in runs:  # each file read again, one at a time: the import holds one run's scores at once
        record = imported_record(
            run["model"], run["task"], run["family"], run["lr"], run["seed"], _check_run(run["path"]), run["source"]
        )
        store.write_result(run["target"], record)
    for path in stale:  # an earlier import's runs that this one lacks: gone, as in a fresh import
        path.unlink()
        for folder in (path.parent, path.parent.parent):
            if not any(folder.iterdir()):
                folder.rmdir()
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=MISSING_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows({**row, "lr": f"{row['lr']:g}"} for row in missing)
    artifacts.write_text_atomic(output / MISSING_RUNS, buffer.getvalue())
    (output / INCOMPLETE).unlink()
    models = {r["model"] for r in runs}
    if stale:
        print(f"removed {len(stale)} records of an earlier import into {output} that this import does not have")
    print(f"imported {len(runs)} runs of {len(models)} models on {len({r['task'] for r in runs})} tasks into {output}")
    for task in sorted({r["task"] for r in runs}):
        print(f"trivial baseline of {task}: {baseline_note(task)}")
    if outside := sorted(m for m in models if names.try_parse_name(m) is None):
        print(f"outside the paper's name grammar (reported as other encoders): {', '.join(outside)}")
    counts = collections.Counter((row["model"], row["task"]) for row in missing)
    print(
        f"missing: {len(missing)} runs of the paper's grid ({len(PAPER_LRS)} LRs x {len(PAPER_SEEDS)} seeds) in "
        f"{len(counts)} model x task cells, listed in {output / MISSING_RUNS}"
    )
    for (model, task), n in sorted(counts.items()):
        print(f"  {model} {task}: {n} missing")
    return output


if __name__ == "__main__":
    main()
