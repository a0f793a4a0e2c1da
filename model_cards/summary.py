"""What a card publishes of a report: the rows of its `summary.csv`, checked against the per-run results behind
them (`check_summary`: a card never shows a number its results do not give), each with the test data it was scored
on, and as the cards' tables show them."""

import csv
import math
from pathlib import Path

from core import model_folders, run_folders, store
from core.formatting import table_cell
from core.names import try_parse_name
from model_cards.results_dataset import record_source, scored_test

# model-index task types, one per evaluation family (the paper's four).
FAMILY_TASK_TYPES = {
    "SC": ("text-classification", "Sequence classification"),
    "TC": ("token-classification", "Token classification"),
    "QA": ("question-answering", "Extractive question answering"),
    "IR": ("sentence-similarity", "Retrieval"),
}


def number(value) -> float | None:
    if value in (None, ""):
        return None
    value = float(value)
    return None if math.isnan(value) else value


def card_number(value) -> str:
    """A summary.csv cell as a card shows it: 4 decimals below 10, 2 above, "n/a" when empty."""
    value = number(value)
    return table_cell(value, ".4f" if value is None or abs(value) < 10 else ".2f", missing="n/a")


def confidence_interval(row: dict) -> tuple[float, float] | None:
    """The row's 95% CI, clipped to [0, 1] (scores are fractions; a t-interval over few seeds can overshoot)."""
    low, high = number(row["ci_low"]), number(row["ci_high"])
    return None if low is None or high is None else (max(0.0, min(1.0, low)), max(0.0, min(1.0, high)))


def read_summary(summary_csv: Path, model: str | None = None) -> list[dict]:
    """Rows of `summary.csv` (all, or `model`'s), as strings, with the contract's columns checked."""
    try:
        with open(summary_csv, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            missing = [c for c in run_folders.SUMMARY_COLUMNS if c not in (reader.fieldnames or [])]
            rows = list(reader)
    except UnicodeDecodeError as error:
        raise ValueError(
            f"{summary_csv} is not UTF-8 text ({error}): pass the summary.csv written by evaluation"
        ) from None
    if missing:
        raise ValueError(f"{summary_csv} lacks columns {missing}: pass the summary.csv written by evaluation")
    if unknown := sorted({r["family"].upper() for r in rows} - set(FAMILY_TASK_TYPES)):
        raise ValueError(f"{summary_csv}: unknown task families {unknown}; expected {sorted(FAMILY_TASK_TYPES)}")
    return [r for r in rows if model is None or r["model"] == model]


def _recorded_name(shown: str) -> str:
    """The name results are filed under for a name a report shows at its scale (`<scale>-<name>`)."""
    parsed = try_parse_name(shown)
    return parsed.unscaled if parsed is not None else shown


def _same(published: str, computed, integer: bool = False) -> bool:
    """A summary cell (as `analysis.report` writes it: 4 significant digits, "" for none) equals a computed value."""
    if computed is None or (isinstance(computed, float) and math.isnan(computed)):
        return published.strip() == ""
    try:
        value = number(published)
    except ValueError:  # not a number
        return False
    return value is not None and (
        value == computed if integer else math.isclose(value, float(computed), rel_tol=1e-3, abs_tol=1e-6)
    )


SUMMARY_CHECKED = ("mean", "ci_low", "ci_high", "n_seeds", "best_lr", "trivial_baseline")  # what a card publishes


def _differences(row: dict, computed: dict) -> list[str]:
    """The published columns of a summary row that differ from the computed row (the CI as a card shows it)."""
    low, high = computed["ci_low"], computed["ci_high"]
    expected = {**computed, **({} if math.isnan(low) else {"ci_low": max(0.0, low), "ci_high": min(1.0, high)})}
    shown = {**row, **dict(zip(("ci_low", "ci_high"), confidence_interval(row) or (row["ci_low"], row["ci_high"])))}
    given = {k: expected[k] if k in ("n_seeds", "best_lr") else card_number(expected[k]) for k in SUMMARY_CHECKED}
    return [
        f"{k} {row[k] or 'none'} (the results give {given[k]})"
        for k in SUMMARY_CHECKED
        if not _same(str(shown[k]), expected[k], integer=k == "n_seeds")
    ]


def check_summary(rows: list[dict], results_dir, summary_csv, complete: bool = False) -> None:
    """Refuse summary rows the results do not give: each row's mean, 95% CI (as a card shows it), seed count and best LR
    are recomputed from `results_dir` (`analysis.statistics.summarize`; percentile intervals for a --bootstrap report).
    `complete`: the results hold no (model, task) the summary lacks either."""
    from analysis.statistics import load_results, replicate_group, summarize

    records = load_results(results_dir)
    computed = {(r["model"], r["task"]): r for r in summarize(records)}
    fix = f"regenerate it (python -m analysis.report {results_dir}) or pass the results it was made from"
    seen = set()
    for row in rows:
        key = next(
            (k for k in ((row["model"], row["task"]), (_recorded_name(row["model"]), row["task"])) if k in computed),
            None,
        )
        if key is None:
            raise ValueError(
                f"{summary_csv} reports {row['model']} on {row['task']}, of which {results_dir} holds no result: {fix}"
            )
        seen.add(key)
        differ = _differences(row, computed[key])
        if differ and all(d.startswith("ci_") for d in differ):
            group = [r for r in records if r["task"] == key[1] and replicate_group(r["model"]) == key[0]]
            differ = differ if _differences(row, summarize(group, bootstrap=True)[0]) else []
        if differ:
            raise ValueError(
                f"{summary_csv} disagrees with {results_dir} on {row['model']} / {row['task']}: "
                f"{'; '.join(differ)}: {fix}"
            )
    if missing := (sorted(set(computed) - seen) if complete else []):
        raise ValueError(
            f"{summary_csv} lacks {missing[0][0]} on {missing[0][1]}, which {results_dir} holds "
            f"({len(missing)} model x task rows in all): {fix}"
        )


def evaluation_rows(checkpoint_dir: Path, model: str, summary_csv, results_dir, shown: str | None = None) -> list[dict]:
    """This checkpoint's summary rows (filed under `shown`, default `model`), each with the test data it was scored on,
    once its results (filed under `model`) are checked to be of these very weights."""
    if not (rows := read_summary(summary_csv, shown or model)):
        return []
    if results_dir is None:
        raise ValueError(
            "an evaluation summary needs its per-run results folder too (--results): they say which "
            "data each score was computed on, and that it was computed on these weights"
        )
    from evaluation.tasks import describe_test_data  # the task registry: imported only when scores are described

    identity, paths = model_folders.checkpoint_identity(checkpoint_dir), {}
    for path in store.result_files(results_dir):
        paths.setdefault((path.parent.parent.name, path.parent.name), path)
    for row in rows:
        if (path := paths.get((model, row["task"]))) is None:
            raise ValueError(
                f"{results_dir} holds no result file of {model} on {row['task']}, which the summary "
                "reports: pass the results folder the summary was made from"
            )
        record = store.read_result(path)  # one per (model, task): the report refuses mixed identities in a row
        if why := store.differences(record, {"model": identity}):  # the store's "current" rule, on the weights alone
            raise ValueError(
                f"{path} was made from other weights than {checkpoint_dir} ({'; '.join(why)}): "
                "the summary is not this checkpoint's; evaluate it, or pass the right results"
            )
        row["data"] = describe_test_data(row["task"], record_source(record))
        row["scored"] = scored_test(record)
        row["budget"] = budget(record)
    return rows


def budget(record: dict) -> dict:
    """The fine-tuning budget behind a result, as a card publishes it beside the score: {"steps" or "epochs",
    "batch_size", "train_examples" (None: not recorded, by results made before it was), "reduced" (cut below the
    task's own by `--max_steps` or `--max_train`), "text"}."""
    if (kind := store.record_kind(record)) != "grid":
        return {"reduced": False, "text": {"mteb": "none (zero-shot)", "imported": "the paper's (imported)"}[kind]}
    config = store.run_config(record)
    schedule, examples = config["schedule"], config.get("train_examples")
    out = {
        **({"steps": schedule["max_steps"]} if schedule["max_steps"] is not None else {"epochs": schedule["epochs"]}),
        "batch_size": config["batch_size"],
        "train_examples": examples,
        "reduced": config["max_steps"] is not None or config["max_train"] is not None,
    }
    length = f"{out['steps']:,} steps" if "steps" in out else f"{out['epochs']:g} epoch(s)"
    data = (
        f"{examples:,} training examples"
        if examples is not None
        else f"at most {config['max_train']:,} training examples"
        if config["max_train"] is not None
        else "the task's training split"
    )
    flags = [f"--{k} {config[k]}" for k in ("max_steps", "max_train") if config[k] is not None]
    cut = f" (set by {', '.join(flags)}, not the task's own budget)" if flags else ""
    return {**out, "text": f"{length} x batch {out['batch_size']} on {data}{cut}"}


def above_baseline(row: dict) -> bool | None:
    """Whether a summary row's mean is above its task's trivial baseline, as summary.csv gives both (None: either is
    unknown). A mean that is not did no better than a model that learned nothing: its score is no result (a card
    marks it, and model-index publishes only scores above a known baseline)."""
    mean, trivial = number(row["mean"]), baseline(row)
    return None if mean is None or trivial is None else mean > trivial


def baseline(row: dict) -> float | None:
    """A summary row's trivial baseline (its summary.csv column), None when unknown."""
    return number(row["trivial_baseline"])


def table_rows(rows: list[dict]) -> list[dict]:
    return [
        {
            "family": r["family"].upper(),
            "task": r["task"],
            "metric": r["metric"],
            "mean": card_number(r["mean"])
            + (" (not above the trivial baseline)" if above_baseline(r) is False else ""),
            "baseline": "unknown" if baseline(r) is None else card_number(baseline(r)),
            "budget": r["budget"]["text"] if "budget" in r else "",
            "ci": f"[{ci[0]:.4f}, {ci[1]:.4f}]" if (ci := confidence_interval(r)) else "n/a",
            "std": card_number(r["std"]),
            "best_lr": r["best_lr"],
            "n_seeds": r["n_seeds"],
            "n_diverged": r["n_diverged"],
            "entity_f1": card_number(r.get("entity_f1")) if r["family"].upper() == "TC" else "",
            "data": r["data"]["label"] + (f"; scored: {r['scored']['text']}" if r.get("scored", {}).get("n") else "")
            if "data" in r
            else "",
        }
        for r in rows
    ]
