"""Tables and figures from a results directory written by `evaluation.run`.

    python -m evaluation.report results/ --output report/ [--bootstrap] [--compare 610m-mlm40-42k,610m-clm-42k]

Per model x task (SPEC "Report"): the best learning rate is the one with the highest mean validation score over
seeds; the test score is the mean over that LR's seeds with a 95% confidence interval (Student t over seeds, or a
percentile bootstrap with --bootstrap). Stability is the spread across LRs and seeds: the standard deviation of
the test score over every finished run, and the range of the per-LR mean test scores. Diverged runs are counted
(`n_diverged`) and left out of means; an LR with a diverged seed ranks below every LR without one, so an unstable
LR is never picked on the strength of its surviving seeds. TC rows also show `entity_f1` (seqeval, mean over the
best LR's test runs) beside the main metric, so a model that predicts no entity is visible whatever the task's
main metric (the paper's sentence_macro_f1 is lenient); other rows leave it empty. `--compare A,B` adds a
paired comparison per task on per-instance test scores (averaged over the best LR's seeds): a paired bootstrap of
the difference and a sign test.

`summary.md` starts with the results table (mean ± CI half-width per model and task, and each task's trivial
baseline: `evaluation.baselines`), the means whose CI does not clear that baseline, the SC/TC means wider than
±0.02 with the seeds that would take (`seeds_needed`), then the paper's findings tested on these results
(`evaluation.findings`: `findings.csv`), the paired comparisons and every column.

Writes `summary.csv`, `summary.md` and PNG figures (only those with data): score by objective per task family,
score vs pretraining step (intermediate checkpoints `<name>-<step>`), score vs learning rate per objective, PFS
split vs budget (`<size>-clm-<k1>-mlm40-<total>`), CPT curves (`<size>-<base>-dec<steps>-mlm40-<total>`).
All scores are fractions in [0, 1].
"""

from __future__ import annotations

import argparse
import collections
import csv
import io
import math
from pathlib import Path

import numpy as np
from scipy import stats

from core import artifacts, cli, names
from evaluation import identity

SUMMARY_COLUMNS = artifacts.SUMMARY_COLUMNS


def model_kind(name: str) -> str:
    """How the report groups a model: its grammar kind (single, pfs, cpt), "intermediate" or "other" (a BERT, a
    local run: outside the grammar of `core.names`)."""
    p = names.try_parse_name(name)
    return "other" if p is None else "intermediate" if p.step is not None else p.kind


def load_results(results_dir: str | Path) -> list[dict]:
    """Every result file under `results_dir` (temp files of interrupted writes and moved-aside files are not),
    each with its path under "_path"; a corrupt or older-format file is refused, naming it."""
    files = artifacts.result_files(results_dir)
    if not files:
        raise FileNotFoundError(f"no result files under {results_dir}; "
                                f"run `python -m evaluation.run ... --output {results_dir}`")
    return [{**artifacts.read_result(p), "_path": str(p)} for p in files]


def check_same_protocol(records: list[dict]) -> None:
    """Refuse to average, in one summary row, runs of one (model, task) whose identities differ (other weights,
    other task data, other protocol): such a row would mix two experiments."""
    first = records[0]
    for record in records[1:]:
        differences = identity.diff(first["identity"], record["identity"])
        if differences:
            raise ValueError(f"{record['_path']} and {first['_path']} are results of {first['model']} on "
                             f"{first['task']} made differently ({'; '.join(differences[:3])}); re-run one of them "
                             "(evaluation.run --rerun_changed) or keep them in separate results directories")


def confidence_interval(scores, bootstrap: bool = False, level: float = 0.95) -> tuple[float, float]:
    """95% CI of the mean over seeds: Student t (default) or percentile bootstrap, clipped to [0, 1] (scores are
    fractions: a t-interval of few seeds can otherwise reach past them); (nan, nan) with < 2 scores."""
    scores = np.asarray(scores, dtype=float)
    if len(scores) < 2:
        return math.nan, math.nan
    if bootstrap:
        res = stats.bootstrap((scores,), np.mean, confidence_level=level, method="percentile", random_state=0)
        return float(res.confidence_interval.low), float(res.confidence_interval.high)
    if np.all(scores == scores[0]):  # no spread over seeds: the interval is the point
        return float(scores[0]), float(scores[0])
    low, high = stats.t.interval(level, len(scores) - 1, loc=scores.mean(), scale=stats.sem(scores))
    return max(0.0, float(low)), min(1.0, float(high))


def _main_score(record: dict, split: str) -> float:
    if record[split] is None:  # a split not evaluated: mteb records (evaluation.mteb) have no validation
        return math.nan
    return float(record[split][record["main_metric"]])


def summarize_group(records: list[dict], bootstrap: bool = False) -> dict:
    """One summary row from all runs of one (model, task).

    Returns:
        A dict with SUMMARY_COLUMNS, plus "per_lr" {lr: (mean validation, mean test, n ok, n diverged)}.
        `entity_f1` (TC only, else None) is the mean test entity F1 of the best LR's runs, shown beside any main
        metric so that a model predicting no entity is never hidden by a lenient one (sentence_macro_f1).
    """
    first = records[0]
    ok = [r for r in records if r["status"] == "ok"]
    per_lr = {}
    for lr in sorted({r["lr"] for r in records}):
        runs = [r for r in records if r["lr"] == lr]
        done = [r for r in runs if r["status"] == "ok"]
        per_lr[lr] = (np.mean([_main_score(r, "validation") for r in done]) if done else math.nan,
                      np.mean([_main_score(r, "test") for r in done]) if done else math.nan,
                      len(done), len(runs) - len(done))
    candidates = [lr for lr, (val, _, n, _) in per_lr.items() if n > 0]
    row = {"model": first["model"], "task": first["task"], "family": first["family"], "metric": first["main_metric"],
           "n_runs": len(records), "n_diverged": len(records) - len(ok), "per_lr": per_lr}
    if not candidates:
        return {**row, **{k: math.nan for k in SUMMARY_COLUMNS if k not in row}, "best_lr": None, "n_seeds": 0,
                "entity_f1": None}
    best = min(candidates, key=lambda lr: (per_lr[lr][3], -per_lr[lr][0]))
    test = [_main_score(r, "test") for r in ok if r["lr"] == best]
    low, high = confidence_interval(test, bootstrap)
    baselines = {round(r["trivial_baseline"]["test"][first["main_metric"]], 12)
                 for r in records if "trivial_baseline" in r}
    if len(baselines) > 1:
        raise ValueError(f"results of {first['model']} on {first['task']} disagree on the trivial baseline "
                         f"({sorted(baselines)}): they were scored on different test data")
    entity = [r["test"]["entity_f1"] for r in ok if r["lr"] == best and "entity_f1" in r["test"]]
    entity_f1 = float(np.mean(entity)) if first["family"] == "tc" and entity else None
    lr_means = [per_lr[lr][1] for lr in candidates]
    return {**row, "best_lr": best, "n_seeds": len(test), "mean": float(np.mean(test)), "ci_low": low,
            "ci_high": high, "trivial_baseline": baselines.pop() if baselines else None, "entity_f1": entity_f1,
            "std": float(np.std(test, ddof=1)) if len(test) > 1 else math.nan,
            "val_mean": float(per_lr[best][0]),
            "stability_std": float(np.std([_main_score(r, "test") for r in ok], ddof=1)) if len(ok) > 1 else math.nan,
            "lr_range": float(max(lr_means) - min(lr_means))}


def summarize(records: list[dict], bootstrap: bool = False) -> list[dict]:
    """Summary rows for every (model, task) in the results, sorted by task then model."""
    groups = collections.defaultdict(list)
    for record in records:
        groups[(record["model"], record["task"])].append(record)
    for group in groups.values():
        check_same_protocol(group)
    rows = [summarize_group(g, bootstrap) for g in groups.values()]
    return sorted(rows, key=lambda r: (r["task"], r["model"]))


# ---------------------------------------------------------------------------------------------------------------
# Paired comparison on per-instance scores
# ---------------------------------------------------------------------------------------------------------------


def instance_matrix(records: list[dict], metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(numerator, denominator), each (runs, test instances), so that sum(num) / sum(den) is one run's metric.

    Mean metrics (accuracy, f1, ndcg@10, sentence_macro_f1) have denominator 1; token_micro_f1 / token_accuracy
    are correct/count tokens; entity_f1 is rebuilt from its counts (numerator = tp, denominator = (pred + gold) / 2).
    """
    def columns(record):
        rows = record["per_instance"]["test"]
        if metric in ("token_micro_f1", "token_accuracy"):
            return [r["token_correct"] for r in rows], [r["token_count"] for r in rows]
        if metric == "entity_f1":
            return [r["entity_tp"] for r in rows], [(r["entity_pred"] + r["entity_gold"]) / 2 for r in rows]
        return [r[metric] for r in rows], [1.0] * len(rows)

    pairs = [columns(r) for r in records]
    return np.array([p[0] for p in pairs], dtype=float), np.array([p[1] for p in pairs], dtype=float)


def paired_comparison(records_a: list[dict], records_b: list[dict], metric: str, n_resamples: int = 2000,
                      seed: int = 0) -> dict:
    """Model A minus model B on the same test instances: a two-level paired bootstrap and a sign test.

    Each bootstrap sample resamples the fine-tuning seeds of each model (with replacement: the run-to-run spread
    is part of the uncertainty) and, paired across the two models, the test instances. The sign test counts the
    instances where A's per-instance score, averaged over its seeds, beats B's.

    Args:
        records_a, records_b: the best-LR runs of each model on one task (status "ok").
        metric: the task's main metric.
        n_resamples: bootstrap samples.

    Returns:
        {"delta", "ci_low", "ci_high", "p_bootstrap" (two-sided), "wins", "losses", "p_sign"}.
    """
    num_a, den_a = instance_matrix(records_a, metric)
    num_b, den_b = instance_matrix(records_b, metric)
    if num_a.shape[1] != num_b.shape[1]:
        raise ValueError(f"models were scored on different test sets ({num_a.shape[1]} vs {num_b.shape[1]} instances)")
    rng = np.random.default_rng(seed)
    n = num_a.shape[1]
    deltas = []
    for start in range(0, n_resamples, 250):  # chunks keep the (samples x instances) matrices small
        size = min(250, n_resamples - start)
        weights = rng.multinomial(n, np.full(n, 1.0 / n), size=size)  # instance counts, shared by A and B
        runs_a = rng.multinomial(len(num_a), np.full(len(num_a), 1.0 / len(num_a)), size=size) / len(num_a)
        runs_b = rng.multinomial(len(num_b), np.full(len(num_b), 1.0 / len(num_b)), size=size) / len(num_b)
        score_a = ((runs_a @ num_a) * weights).sum(1) / ((runs_a @ den_a) * weights).sum(1).clip(1e-12)
        score_b = ((runs_b @ num_b) * weights).sum(1) / ((runs_b @ den_b) * weights).sum(1).clip(1e-12)
        deltas.append(score_a - score_b)
    deltas = np.concatenate(deltas)
    mean_a, mean_b = num_a.mean(0), num_b.mean(0)
    delta = mean_a.sum() / max(den_a.mean(0).sum(), 1e-12) - mean_b.sum() / max(den_b.mean(0).sum(), 1e-12)
    per_a = mean_a / np.where(den_a.mean(0) > 0, den_a.mean(0), 1)
    per_b = mean_b / np.where(den_b.mean(0) > 0, den_b.mean(0), 1)
    wins, losses = int((per_a > per_b).sum()), int((per_a < per_b).sum())
    p_sign = stats.binomtest(wins, wins + losses, 0.5).pvalue if wins + losses else 1.0
    p_boot = min(1.0, 2 * min((deltas <= 0).mean(), (deltas >= 0).mean()))
    return {"delta": float(delta), "ci_low": float(np.percentile(deltas, 2.5)),
            "ci_high": float(np.percentile(deltas, 97.5)), "p_bootstrap": float(p_boot), "wins": wins,
            "losses": losses, "p_sign": float(p_sign)}


def compare(records: list[dict], rows: list[dict], model_a: str, model_b: str) -> list[dict]:
    """Paired comparisons of two models on every task both have, each at its own best LR."""
    out = []
    for task in sorted({r["task"] for r in rows}):
        runs_a, runs_b = best_runs(records, rows, model_a, task), best_runs(records, rows, model_b, task)
        if runs_a and runs_b:
            metric = runs_a[0]["main_metric"]
            out.append({"task": task, "a": model_a, "b": model_b, "metric": metric,
                        **paired_comparison(runs_a, runs_b, metric)})
    return out


def best_runs(records: list[dict], rows: list[dict], model: str, task: str) -> list[dict]:
    """The finished runs of `model` on `task` at its best learning rate ([] when it has none)."""
    best = next((r["best_lr"] for r in rows if r["model"] == model and r["task"] == task), None)
    return [r for r in records if r["model"] == model and r["task"] == task and r["lr"] == best and r["status"] == "ok"]


# ---------------------------------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------------------------------


def _fmt(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _cell(row: dict) -> str:
    """"0.812 ± 0.011" (mean ± half-width of the 95% CI), or the mean alone with one seed."""
    if row["best_lr"] is None:
        return "diverged"
    if math.isnan(row["ci_low"]):
        return f"{row['mean']:.3f}"
    return f"{row['mean']:.3f} ± {_half_width(row):.3f}"


def _half_width(row: dict) -> float:
    """Half the width of a summary row's 95% CI (nan with one seed)."""
    return (row["ci_high"] - row["ci_low"]) / 2


def results_table(rows: list[dict]) -> list[str]:
    """Markdown: one line per model, one column per task (mean ± CI half-width), the trivial baseline last."""
    tasks = sorted({r["task"] for r in rows})
    models = sorted({r["model"] for r in rows}, key=_model_order)
    cell = {(r["model"], r["task"]): r for r in rows}
    metric = {r["task"]: r["metric"] for r in rows}
    header = ["model", *[f"{t} ({metric[t]})" for t in tasks]]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for model in models:
        cells = [_cell(cell[(model, t)]) if (model, t) in cell else "" for t in tasks]
        lines.append("| " + " | ".join([model, *cells]) + " |")
    baseline = {t: _baseline(rows, t) for t in tasks}
    lines.append("| " + " | ".join(["*trivial baseline*", *[_fmt(baseline[t]) for t in tasks]]) + " |")
    tc = [t for t in tasks if any(r["task"] == t and r["family"] == "tc" for r in rows)]
    if tc:
        lines += ["", "Entity F1 (seqeval) of the same TC runs, beside the main metric: a model that predicts no "
                  "entity is visible here.", "", "| model | " + " | ".join(tc) + " |", "|" + "---|" * (len(tc) + 1)]
        for m in models:
            entity = [_fmt(cell[(m, t)]["entity_f1"]) if (m, t) in cell else "" for t in tc]
            lines.append("| " + " | ".join([m, *entity]) + " |")
    return lines


TARGET_HALF_WIDTH = 0.02  # the precision asked of a SC or TC mean over seeds (fractions)


def seeds_needed(std: float, half_width: float = TARGET_HALF_WIDTH, level: float = 0.95,
                 max_seeds: int = 1000) -> int | None:
    """The fewest seeds whose Student-t CI of the mean is at most `half_width` wide on each side, at this spread
    over seeds (itself an estimate from the seeds run); None when the spread is unknown or would need more."""
    if not std > 0:
        return None
    return next((n for n in range(2, max_seeds + 1)
                 if stats.t.ppf((1 + level) / 2, n - 1) * std / math.sqrt(n) <= half_width), None)


def checks_lines(rows: list[dict]) -> list[str]:
    """Markdown: which means do not clear their task's trivial baseline (95% CI above it), and which SC/TC means
    are less precise than TARGET_HALF_WIDTH, with the seeds it would take at the observed spread."""
    rows = sorted((r for r in rows if r["best_lr"] is not None), key=lambda r: (r["task"], _model_order(r["model"])))
    lower = lambda r: r["mean"] if math.isnan(r["ci_low"]) else r["ci_low"]  # noqa: E731 (one seed: the mean)
    below = [r for r in rows if r.get("trivial_baseline") is not None and lower(r) <= r["trivial_baseline"]]
    lines = ["## Above the trivial baseline", "",
             "A model learned a task when the 95% CI of its mean lies above the task's trivial baseline."]
    if below:
        lines += [f"{len(below)} of {len(rows)} model x task means do not clear it:", "",
                  "| model | task | mean | ci_low | trivial_baseline |", "|---|---|---|---|---|"]
        lines += [f"| {r['model']} | {r['task']} | {_fmt(r['mean'])} | {_fmt(r['ci_low'])} | "
                  f"{_fmt(r['trivial_baseline'])} |" for r in below]
    else:
        lines.append(f"All {len(rows)} model x task means clear it.")
    precise = [r for r in rows if r["family"] in ("sc", "tc")]
    wide = [r for r in precise if not _half_width(r) <= TARGET_HALF_WIDTH]  # one seed (nan) counts as wide
    lines += ["", f"## Seeds for a ±{TARGET_HALF_WIDTH} interval (SC and TC)", ""]
    if not wide:
        return lines + [f"Every SC and TC mean ({len(precise)}) has a 95% CI half-width of at most "
                        f"{TARGET_HALF_WIDTH}."]
    lines += [f"{len(wide)} of {len(precise)} SC and TC means have a wider 95% CI; the seeds a ±{TARGET_HALF_WIDTH} "
              "interval would take at the spread seen over their seeds (itself uncertain with few seeds):", "",
              "| model | task | n_seeds | half-width | std | seeds needed |", "|---|---|---|---|---|---|"]
    for r in wide:
        needed = seeds_needed(r["std"])
        lines.append(f"| {r['model']} | {r['task']} | {r['n_seeds']} | {_fmt(_half_width(r))} | "
                     f"{_fmt(r['std'])} | {needed if needed is not None else 'unknown'} |")
    return lines


_KIND_ORDER = {"single": 0, "pfs": 1, "cpt": 2, "intermediate": 3, "other": 4}


def _model_order(name: str):
    """Single-objective runs (CLM first, then MLM by ratio), PFS, CPT, intermediate checkpoints, other encoders."""
    p = names.try_parse_name(name)
    if p is None:
        return (_KIND_ORDER["other"], "", "", 0, 0, 0, name)
    return (_KIND_ORDER[model_kind(name)], p.size, p.run_name if p.step is not None else "", p.ratio or 0,
            p.step or 0, p.total_steps, name)


def write_tables(rows: list[dict], comparisons: list[dict], output: Path, findings: list[dict] | None = None) -> None:
    """`summary.csv` (one row per model x task, every column) and `summary.md`: the results table first, then the
    paper's findings at this scale, the paired comparisons and the full table."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=SUMMARY_COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: _fmt(r[k]) for k in SUMMARY_COLUMNS} for r in rows)
    artifacts.write_text_atomic(output / "summary.csv", buffer.getvalue())
    lines = ["# Fine-tuning results", "",
             "Test score at the best learning rate (highest mean validation score over seeds): mean over seeds ± the "
             "half-width of its 95% confidence interval (Student t over seeds). Scores are fractions in [0, 1]. The "
             "trivial baseline is what a model scores without learning the task (majority class, all \"O\", the "
             "passage's first words, a random ranking).", "", *results_table(rows), "", *checks_lines(rows)]
    if findings:
        from evaluation import findings as findings_module

        lines += ["", *findings_module.findings_markdown(findings)]
    if comparisons:
        keys = ["task", "a", "b", "metric", "delta", "ci_low", "ci_high", "p_bootstrap", "wins", "losses", "p_sign"]
        lines += ["", "## Paired comparisons (A - B, per-instance test scores, seeds and instances resampled)", "",
                  "| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
        lines += ["| " + " | ".join(_fmt(c[k]) for k in keys) + " |" for c in comparisons]
    lines += ["", "## Every column", "",
              "entity_f1 = TC entity F1 (seqeval) of the best LR's runs; std = over the best LR's seeds; "
              "stability_std = std over all finished runs; lr_range = range of the per-LR mean test scores.", "",
              "| " + " | ".join(SUMMARY_COLUMNS) + " |", "|" + "---|" * len(SUMMARY_COLUMNS)]
    lines += ["| " + " | ".join(_fmt(r[k]) for k in SUMMARY_COLUMNS) + " |" for r in rows]
    artifacts.write_text_atomic(output / "summary.md", "\n".join(lines) + "\n")


# ---------------------------------------------------------------------------------------------------------------
# Figures (matplotlib, Agg): each is skipped when the results hold no data for it
# ---------------------------------------------------------------------------------------------------------------


MIN_SPAN = 0.2  # a score axis spans at least this much, so run-to-run noise never looks like a trend


def _axes(n: int):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(n, 3)
    fig, axes = plt.subplots((n + cols - 1) // cols, cols, figsize=(5.2 * cols, 3.8 * ((n + cols - 1) // cols)),
                             squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def _save(fig, path: Path, caption: str) -> Path:
    """Legends sit outside the data (right of each axes); the caption under the figure says what is drawn."""
    import textwrap

    import matplotlib.pyplot as plt

    fig.text(0.01, 0.005, textwrap.fill(caption, 150), fontsize=7, va="bottom", ha="left", wrap=True)
    fig.tight_layout(rect=(0, 0.06 + 0.012 * caption.count(". "), 1, 1))
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def _legend(ax) -> None:
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)


def _score_axis(ax, values, baseline: float | None, label: str) -> None:
    """Label the axis with the metric, draw the trivial baseline, and show at least MIN_SPAN of the [0, 1] scale."""
    values = [v for v in values if v is not None and not math.isnan(v)]
    if baseline is not None and not math.isnan(baseline):
        ax.axhline(baseline, color="grey", linestyle="--", linewidth=1, label="trivial baseline")
        values.append(baseline)
    if values:
        low, high = min(values), max(values)
        pad = max(0.0, MIN_SPAN - (high - low)) / 2
        low, high = max(0.0, low - pad - 0.02), min(1.0, high + pad + 0.02)
        if high - low < MIN_SPAN:  # pushed against 0 or 1
            low, high = (0.0, MIN_SPAN) if low == 0.0 else (1.0 - MIN_SPAN, 1.0)
        ax.set_ylim(low, high)
    ax.set_ylabel(label)


def _baseline(rows, task) -> float | None:
    return next((r["trivial_baseline"] for r in rows
                 if r["task"] == task and r.get("trivial_baseline") is not None), None)


def _errors(rows):
    return np.array([[r["mean"] - r["ci_low"], r["ci_high"] - r["mean"]] for r in rows]).T


def plot_objectives(rows: list[dict], output: Path) -> list[Path]:
    """Score by objective per task family: bars per model (final single-objective checkpoints when there are any),
    grouped by task, with 95% CI bars and each task's trivial baseline."""
    written = []
    for family in sorted({r["family"] for r in rows}):
        fam = [r for r in rows if r["family"] == family and r["best_lr"] is not None]
        single = [r for r in fam if model_kind(r["model"]) == "single"]
        fam = single or fam
        if not fam:
            continue
        task_names, models = sorted({r["task"] for r in fam}), sorted({r["model"] for r in fam}, key=_model_order)
        fig, (ax,) = _axes(1)
        width = 0.8 / len(models)
        for i, model in enumerate(models):
            cells = [next((r for r in fam if r["model"] == model and r["task"] == t), None) for t in task_names]
            xs = [j + i * width for j, c in enumerate(cells) if c]
            present = [c for c in cells if c]
            ax.bar(xs, [c["mean"] for c in present], width, yerr=np.nan_to_num(_errors(present)), label=model,
                   capsize=2)
        for j, task in enumerate(task_names):
            if (base := _baseline(rows, task)) is not None:
                ax.hlines(base, j - width / 2, j + 0.8 - width / 2, colors="black", linestyles="--", linewidth=1,
                          label="trivial baseline" if j == 0 else None)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(task_names))], task_names)
        metrics = sorted({r["metric"] for r in fam})
        values = [r["ci_high"] if not math.isnan(r["ci_high"]) else r["mean"] for r in fam]
        values += [r["ci_low"] if not math.isnan(r["ci_low"]) else r["mean"] for r in fam]
        _score_axis(ax, values, None, "test " + " / ".join(metrics))
        ax.set_title(f"{family.upper()}: test score by pretraining objective")
        _legend(ax)
        written.append(_save(fig, output / f"objective_{family}.png",
                             f"Mean test score over seeds at each model's best learning rate, with 95% confidence "
                             f"intervals over seeds; dashed: the task's trivial baseline. Family {family.upper()}."))
    return written


def _lines_per_task(rows, output: Path, name: str, points, xlabel: str, title: str, caption: str, logx: bool = False):
    """One subplot per task; `points(row) -> (line label, x) | None` selects and places each summary row."""
    series = collections.defaultdict(list)
    for r in rows:
        placed = points(r) if r["best_lr"] is not None else None
        if placed:
            series[(r["task"], placed[0])].append((placed[1], r["mean"], r["ci_low"], r["ci_high"]))
    task_names = sorted({t for t, _ in series})
    if not any(len(v) > 1 for v in series.values()):
        return []
    fig, axes = _axes(len(task_names))
    for ax, task in zip(axes, task_names):
        values = []
        for (t, label), pts in sorted(series.items()):
            if t == task:
                pts.sort()
                xs, ys = [p[0] for p in pts], [p[1] for p in pts]
                ax.errorbar(xs, ys, yerr=np.nan_to_num(np.array([[p[1] - p[2], p[3] - p[1]] for p in pts]).T),
                            marker="o", capsize=2, label=label)
                values += [v for p in pts for v in p[1:]]
        metric = next(r["metric"] for r in rows if r["task"] == task)
        _score_axis(ax, values, _baseline(rows, task), f"test {metric}")
        ax.set_title(f"{task}: {title}")
        ax.set_xlabel(xlabel)
        ax.set_xscale("log" if logx else "linear")
        _legend(ax)
    return [_save(fig, output / name, caption)]


def plot_pretraining_steps(rows, output: Path) -> list[Path]:
    """Score vs pretraining step: intermediate checkpoints `<name>-<step>` plus the final `<name>` itself, on the
    tasks the intermediate checkpoints were evaluated on (a lone final point is no curve)."""
    steps = [r for r in rows if (p := names.try_parse_name(r["model"])) and p.step is not None]
    bases, tasks = {names.try_parse_name(r["model"]).run_name for r in steps}, {r["task"] for r in steps}
    rows = [r for r in rows if r["task"] in tasks]

    def points(r):
        p = names.try_parse_name(r["model"])
        if p is not None and p.step is not None:
            return p.run_name, p.step
        if p is not None and p.kind == "single" and r["model"] in bases:
            return r["model"], p.total_steps
        return None

    return _lines_per_task(rows, output, "pretraining_steps.png", points, "pretraining step (paper scale)",
                           "score vs pretraining step",
                           "Data efficiency: mean test score (95% CI over seeds) of the intermediate and final "
                           "checkpoints of each run, fine-tuned with the same protocol; dashed: trivial baseline.")


def plot_learning_rates(rows, output: Path) -> list[Path]:
    """Score vs fine-tuning learning rate (mean test score over seeds at each LR), one line per final checkpoint
    (intermediate checkpoints have their own figure), the grid's LRs as ticks."""
    written = []
    for task in sorted({r["task"] for r in rows}):
        task_rows = sorted((r for r in rows if r["task"] == task and model_kind(r["model"]) != "intermediate"),
                           key=lambda r: _model_order(r["model"]))
        if not any(len([v for v in r["per_lr"].values() if v[2]]) > 1 for r in task_rows):
            continue
        fig, (ax,) = _axes(1)
        values, lrs = [], set()
        for r in task_rows:
            pts = [(lr, v[1]) for lr, v in sorted(r["per_lr"].items()) if v[2]]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=r["model"])
            values += [p[1] for p in pts]
            lrs.update(p[0] for p in pts)
        ax.set_xscale("log")
        ax.set_xticks(sorted(lrs), [f"{lr:g}" for lr in sorted(lrs)])
        ax.minorticks_off()
        ax.set_xlabel("fine-tuning learning rate")
        _score_axis(ax, values, _baseline(rows, task), f"mean test {task_rows[0]['metric']}")
        ax.set_title(f"{task}: score vs learning rate")
        _legend(ax)
        written.append(_save(fig, output / f"learning_rate_{task}.png",
                             "Stability across learning rates: mean test score over seeds at each fine-tuning "
                             "learning rate; a flat line is a model whose fine-tuning is insensitive to the LR; "
                             "dashed: trivial baseline."))
    return written


def plot_pfs(rows, output: Path) -> list[Path]:
    """PFS: score vs share of CLM steps, one line per total budget (pure MLM40 = 0, pure CLM = 1 when present)."""
    final = [p for r in rows if (p := names.try_parse_name(r["model"])) is not None and p.step is None]
    budgets = {p.total_steps for p in final if p.kind == "pfs"}

    def points(r):
        p = names.try_parse_name(r["model"])
        if p is None or p.step is not None:
            return None
        if p.kind == "pfs" and p.objective_label == "mlm40":
            return f"{p.size} {p.total_steps // 1000}k", p.switch_step / p.total_steps
        if p.kind == "single" and p.total_steps in budgets and p.objective_label in ("clm", "mlm40"):
            return f"{p.size} {p.total_steps // 1000}k", 1.0 if p.objective == "clm" else 0.0
        return None

    return _lines_per_task(rows, output, "pfs.png", points, "share of CLM steps (0 = MLM40 only, 1 = CLM only)",
                           "PFS split at a fixed budget",
                           "Two-phase pretraining (CLM then MLM40) at a fixed step budget: mean test score (95% CI "
                           "over seeds) against the share of CLM steps; dashed: trivial baseline.")


def plot_cpt(rows, output: Path) -> list[Path]:
    """CPT: score vs total steps of MLM40 continued pretraining, one line per base objective."""
    def points(r):
        p = names.try_parse_name(r["model"])
        return (f"{p.size} {p.base} base", p.total_steps) if p is not None and p.kind == "cpt" and p.step is None \
            else None

    return _lines_per_task(rows, output, "cpt.png", points, "total steps (base + CPT, paper scale)", "CPT curves",
                           "MLM40 continued pretraining from a decayed CLM or MLM40 base: mean test score (95% CI "
                           "over seeds) against the total number of steps; dashed: trivial baseline.")


def main(argv=None) -> Path:
    """Write summary.csv, summary.md and the figures; return the output directory."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", help="results directory written by evaluation.run")
    parser.add_argument("--output", default=None, help="report directory (default: <results>/report)")
    parser.add_argument("--bootstrap", action="store_true", help="percentile bootstrap CI instead of Student t")
    parser.add_argument("--compare", default=None, help="two model names A,B for paired comparisons")
    args = parser.parse_args(argv)
    with cli.bad_input_exits():
        records = load_results(args.results)
        rows = summarize(records, args.bootstrap)
        models = {r["model"] for r in records}
        pair = cli.split_list(args.compare) or None
        if pair and (len(pair) != 2 or not set(pair) <= models):
            raise ValueError(f"--compare needs two model names from the results ({sorted(models)}), "
                             f"got {args.compare!r}")
    output = Path(args.output or Path(args.results) / "report")
    output.mkdir(parents=True, exist_ok=True)
    comparisons = compare(records, rows, *pair) if pair else []
    from evaluation import findings

    tested = findings.comparisons(records, rows)
    write_tables(rows, comparisons, output, tested)
    if tested:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(tested[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows({k: _fmt(v) for k, v in r.items()} for r in tested)
        artifacts.write_text_atomic(output / "findings.csv", buffer.getvalue())
    for plot in (plot_objectives, plot_pretraining_steps, plot_learning_rates, plot_pfs, plot_cpt):
        plot(rows, output)
    print(f"report written to {output}")
    return output


if __name__ == "__main__":
    main()
