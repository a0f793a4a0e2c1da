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

Writes `summary.csv`, `summary.md` and PNG figures (only those with data): score by objective per task family,
score vs pretraining step (intermediate checkpoints `<name>-<step>`), score vs learning rate per objective, PFS
split vs budget (`<size>-clm-<k1>-mlm40-<total>`), CPT curves (`<size>-<base>-dec<steps>-mlm40-<total>`).
All scores are fractions in [0, 1].
"""

from __future__ import annotations

import argparse
import collections
import csv
import math
from pathlib import Path

import numpy as np
from scipy import stats

from evaluation import identity
from recipes import artifacts, names

SUMMARY_COLUMNS = ["model", "task", "family", "metric", "best_lr", "n_seeds", "mean", "ci_low", "ci_high", "entity_f1",
                   "std", "val_mean", "stability_std", "lr_range", "n_runs", "n_diverged"]


def parse_model_name(name: str) -> dict:
    """Read a study model name for plotting: {"kind": single|pfs|cpt|intermediate|other, size, objective ("clm",
    "mlm40"), steps, clm_steps (PFS), base (CPT), base_name and step (intermediate)}.

    The grammar lives in `recipes.names`; names outside it (a BERT, a local run) are kind "other".
    """
    try:
        p = names.parse_name(name)
    except ValueError:
        return {"kind": "other"}
    info = {"size": p["size"], "objective": names.objective_label(p), "steps": p["total_steps"]}
    if p["step"] is not None:
        return {**info, "kind": "intermediate", "base_name": p["run_name"], "step": p["step"]}
    if p["kind"] == "two_phase":
        return {**info, "kind": "pfs", "clm_steps": p["switch_step"]}
    if p["kind"] == "cpt":
        return {**info, "kind": "cpt", "base": p["base"], "base_steps": p["base_steps"]}
    return {**info, "kind": "single"}


def load_results(results_dir: str | Path) -> list[dict]:
    """Every result file under `results_dir` (temp files of interrupted writes and moved-aside files are not),
    each with its path under "_path"; a corrupt or older-format file is refused, naming it."""
    files = artifacts.result_files(results_dir)
    if not files:
        raise FileNotFoundError(f"no result files under {results_dir}; run `python -m evaluation.run ... --output {results_dir}`")
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
    """95% CI of the mean over seeds: Student t (default) or percentile bootstrap; (nan, nan) with < 2 scores."""
    scores = np.asarray(scores, dtype=float)
    if len(scores) < 2:
        return math.nan, math.nan
    if bootstrap:
        res = stats.bootstrap((scores,), np.mean, confidence_level=level, method="percentile", random_state=0)
        return float(res.confidence_interval.low), float(res.confidence_interval.high)
    low, high = stats.t.interval(level, len(scores) - 1, loc=scores.mean(), scale=stats.sem(scores))
    return float(low), float(high)


def _main_score(record: dict, split: str) -> float:
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
        return {**row, **{k: math.nan for k in SUMMARY_COLUMNS if k not in row}, "best_lr": None, "n_seeds": 0}
    best = min(candidates, key=lambda lr: (per_lr[lr][3], -per_lr[lr][0]))
    test = [_main_score(r, "test") for r in ok if r["lr"] == best]
    low, high = confidence_interval(test, bootstrap)
    entity = [r["test"]["entity_f1"] for r in ok if r["lr"] == best and "entity_f1" in r["test"]]
    entity_f1 = float(np.mean(entity)) if first["family"] == "tc" and entity else None
    lr_means = [per_lr[lr][1] for lr in candidates]
    return {**row, "best_lr": best, "n_seeds": len(test), "mean": float(np.mean(test)), "ci_low": low,
            "ci_high": high, "entity_f1": entity_f1, "std": float(np.std(test, ddof=1)) if len(test) > 1 else math.nan,
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


def instance_table(records: list[dict], metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(numerator, denominator) per test instance, averaged over runs, so that sum(num) / sum(den) is the metric.

    Mean metrics (accuracy, f1, ndcg@10) have denominator 1; token_micro_f1 / token_accuracy are correct/count
    tokens, entity_f1 is rebuilt from its counts later (numerator = tp, denominator = (pred + gold) / 2).
    """
    def columns(record):
        rows = record["per_instance"]["test"]
        if metric in ("token_micro_f1", "token_accuracy"):
            return [r["token_correct"] for r in rows], [r["token_count"] for r in rows]
        if metric == "entity_f1":
            return [r["entity_tp"] for r in rows], [(r["entity_pred"] + r["entity_gold"]) / 2 for r in rows]
        return [r[metric] for r in rows], [1.0] * len(rows)

    pairs = [columns(r) for r in records]
    return np.mean([p[0] for p in pairs], axis=0), np.mean([p[1] for p in pairs], axis=0)


def paired_comparison(records_a: list[dict], records_b: list[dict], metric: str, n_resamples: int = 2000,
                      seed: int = 0) -> dict:
    """Paired bootstrap and sign test of model A minus model B on the same test instances.

    Args:
        records_a, records_b: the best-LR runs of each model on one task (status "ok").
        metric: the task's main metric.
        n_resamples: bootstrap resamples of the instances.

    Returns:
        {"delta", "ci_low", "ci_high", "p_bootstrap" (two-sided), "wins", "losses", "p_sign"}.
    """
    num_a, den_a = instance_table(records_a, metric)
    num_b, den_b = instance_table(records_b, metric)
    if len(num_a) != len(num_b):
        raise ValueError(f"models were scored on different test sets ({len(num_a)} vs {len(num_b)} instances)")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(num_a), size=(n_resamples, len(num_a)))
    deltas = num_a[idx].sum(1) / den_a[idx].sum(1).clip(1e-12) - num_b[idx].sum(1) / den_b[idx].sum(1).clip(1e-12)
    delta = num_a.sum() / max(den_a.sum(), 1e-12) - num_b.sum() / max(den_b.sum(), 1e-12)
    per_a, per_b = num_a / np.where(den_a > 0, den_a, 1), num_b / np.where(den_b > 0, den_b, 1)
    wins, losses = int((per_a > per_b).sum()), int((per_a < per_b).sum())
    p_sign = stats.binomtest(wins, wins + losses, 0.5).pvalue if wins + losses else 1.0
    p_boot = min(1.0, 2 * min((deltas <= 0).mean(), (deltas >= 0).mean()))
    return {"delta": float(delta), "ci_low": float(np.percentile(deltas, 2.5)),
            "ci_high": float(np.percentile(deltas, 97.5)), "p_bootstrap": float(p_boot), "wins": wins,
            "losses": losses, "p_sign": float(p_sign)}


def compare(records: list[dict], rows: list[dict], model_a: str, model_b: str) -> list[dict]:
    """Paired comparisons of two models on every task both have, each at its own best LR."""
    best = {(r["model"], r["task"]): r["best_lr"] for r in rows}
    out = []
    for task in sorted({r["task"] for r in rows}):
        if best.get((model_a, task)) is None or best.get((model_b, task)) is None:
            continue
        pick = lambda m: [r for r in records if r["model"] == m and r["task"] == task  # noqa: E731
                          and r["lr"] == best[(m, task)] and r["status"] == "ok"]
        metric = pick(model_a)[0]["main_metric"]
        out.append({"task": task, "a": model_a, "b": model_b, "metric": metric,
                    **paired_comparison(pick(model_a), pick(model_b), metric)})
    return out


# ---------------------------------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------------------------------


def _fmt(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def write_tables(rows: list[dict], comparisons: list[dict], output: Path) -> None:
    """`summary.csv` (one row per model x task) and `summary.md` (the same, plus paired comparisons)."""
    with open(output / "summary.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=SUMMARY_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows({k: _fmt(r[k]) for k in SUMMARY_COLUMNS} for r in rows)
    lines = ["# Fine-tuning results", "",
             "Test mean over the seeds of the best LR (by mean validation score), 95% CI over seeds; entity_f1 = "
             "TC entity F1 (seqeval) of the same runs; stability = std over all runs and range of per-LR means. "
             "Scores are fractions in [0, 1].", "",
             "| " + " | ".join(SUMMARY_COLUMNS) + " |", "|" + "---|" * len(SUMMARY_COLUMNS)]
    lines += ["| " + " | ".join(_fmt(r[k]) for k in SUMMARY_COLUMNS) + " |" for r in rows]
    if comparisons:
        keys = ["task", "a", "b", "metric", "delta", "ci_low", "ci_high", "p_bootstrap", "wins", "losses", "p_sign"]
        lines += ["", "## Paired comparisons (A - B, per-instance test scores)", "",
                  "| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
        lines += ["| " + " | ".join(_fmt(c[k]) for k in keys) + " |" for c in comparisons]
    (output / "summary.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


# ---------------------------------------------------------------------------------------------------------------
# Figures (matplotlib, Agg): each is skipped when the results hold no data for it
# ---------------------------------------------------------------------------------------------------------------


def _axes(n: int):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(n, 3)
    fig, axes = plt.subplots((n + cols - 1) // cols, cols, figsize=(4.5 * cols, 3.5 * ((n + cols - 1) // cols)), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path


def _errors(rows):
    return np.array([[r["mean"] - r["ci_low"], r["ci_high"] - r["mean"]] for r in rows]).T


def plot_objectives(rows: list[dict], output: Path) -> list[Path]:
    """Score by objective per task family: bars per model (final single-objective checkpoints when there are any),
    grouped by task, with 95% CI bars."""
    written = []
    for family in sorted({r["family"] for r in rows}):
        fam = [r for r in rows if r["family"] == family and r["best_lr"] is not None]
        single = [r for r in fam if parse_model_name(r["model"])["kind"] == "single"]
        fam = single or fam
        if not fam:
            continue
        task_names, models = sorted({r["task"] for r in fam}), sorted({r["model"] for r in fam})
        fig, (ax,) = _axes(1)
        width = 0.8 / len(models)
        for i, model in enumerate(models):
            cells = [next((r for r in fam if r["model"] == model and r["task"] == t), None) for t in task_names]
            xs = [j + i * width for j, c in enumerate(cells) if c]
            present = [c for c in cells if c]
            ax.bar(xs, [c["mean"] for c in present], width, yerr=np.nan_to_num(_errors(present)), label=model, capsize=2)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(task_names))], task_names)
        ax.set_title(f"{family.upper()}: score by objective (95% CI over seeds)")
        ax.set_ylabel("test score")
        ax.legend(fontsize=7)
        written.append(_save(fig, output / f"objective_{family}.png"))
    return written


def _lines_per_task(rows, output: Path, name: str, points, xlabel: str, title: str, logx: bool = False):
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
        for (t, label), pts in sorted(series.items()):
            if t == task:
                pts.sort()
                xs, ys = [p[0] for p in pts], [p[1] for p in pts]
                ax.errorbar(xs, ys, yerr=np.nan_to_num(np.array([[p[1] - p[2], p[3] - p[1]] for p in pts]).T),
                            marker="o", capsize=2, label=label)
        ax.set_title(f"{task}: {title}")
        ax.set_xlabel(xlabel)
        ax.set_xscale("log" if logx else "linear")
        ax.legend(fontsize=7)
    return [_save(fig, output / name)]


def plot_pretraining_steps(rows, output: Path) -> list[Path]:
    """Score vs pretraining step: intermediate checkpoints `<name>-<step>` plus the final `<name>` itself."""
    bases = {parse_model_name(r["model"]).get("base_name") for r in rows} - {None}

    def points(r):
        info = parse_model_name(r["model"])
        if info["kind"] == "intermediate":
            return info["base_name"], info["step"]
        if info["kind"] == "single" and r["model"] in bases:
            return r["model"], info["steps"]
        return None

    return _lines_per_task(rows, output, "pretraining_steps.png", points, "pretraining step", "score vs step")


def plot_learning_rates(rows, output: Path) -> list[Path]:
    """Score vs fine-tuning learning rate (mean test score over seeds at each LR), one line per model."""
    written = []
    for task in sorted({r["task"] for r in rows}):
        task_rows = [r for r in rows if r["task"] == task]
        if not any(len([v for v in r["per_lr"].values() if v[2]]) > 1 for r in task_rows):
            continue
        fig, (ax,) = _axes(1)
        for r in task_rows:
            pts = [(lr, v[1]) for lr, v in sorted(r["per_lr"].items()) if v[2]]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=r["model"])
        ax.set_xscale("log")
        ax.set_xlabel("learning rate")
        ax.set_ylabel("mean test score")
        ax.set_title(f"{task}: score vs learning rate")
        ax.legend(fontsize=7)
        written.append(_save(fig, output / f"learning_rate_{task}.png"))
    return written


def plot_pfs(rows, output: Path) -> list[Path]:
    """PFS: score vs share of CLM steps, one line per total budget (pure MLM40 = 0, pure CLM = 1 when present)."""
    budgets = {parse_model_name(r["model"]).get("steps") for r in rows if parse_model_name(r["model"])["kind"] == "pfs"}

    def points(r):
        info = parse_model_name(r["model"])
        if info["kind"] == "pfs" and info["objective"] == "mlm40":
            return f"{info['size']} {info['steps'] // 1000}k", info["clm_steps"] / info["steps"]
        if info["kind"] == "single" and info["steps"] in budgets and info["objective"] in ("clm", "mlm40"):
            return f"{info['size']} {info['steps'] // 1000}k", 1.0 if info["objective"] == "clm" else 0.0
        return None

    return _lines_per_task(rows, output, "pfs.png", points, "share of CLM steps", "PFS split vs budget")


def plot_cpt(rows, output: Path) -> list[Path]:
    """CPT: score vs total steps of MLM40 continued pretraining, one line per base objective."""
    def points(r):
        info = parse_model_name(r["model"])
        return (f"{info['size']} {info['base']} base", info["steps"]) if info["kind"] == "cpt" else None

    return _lines_per_task(rows, output, "cpt.png", points, "total steps", "CPT curves")


def main(argv=None) -> Path:
    """Write summary.csv, summary.md and the figures; return the output directory."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", help="results directory written by evaluation.run")
    parser.add_argument("--output", default=None, help="report directory (default: <results>/report)")
    parser.add_argument("--bootstrap", action="store_true", help="percentile bootstrap CI instead of Student t")
    parser.add_argument("--compare", default=None, help="two model names A,B for paired comparisons")
    args = parser.parse_args(argv)
    try:
        records = load_results(args.results)
        rows = summarize(records, args.bootstrap)
    except (FileNotFoundError, ValueError) as error:
        parser.error(str(error))
    models = {r["model"] for r in records}
    pair = args.compare.split(",") if args.compare else None
    if pair and (len(pair) != 2 or not set(pair) <= models):
        parser.error(f"--compare needs two model names from the results ({sorted(models)}), got {args.compare!r}")
    output = Path(args.output or Path(args.results) / "report")
    output.mkdir(parents=True, exist_ok=True)
    comparisons = compare(records, rows, *pair) if pair else []
    write_tables(rows, comparisons, output)
    for plot in (plot_objectives, plot_pretraining_steps, plot_learning_rates, plot_pfs, plot_cpt):
        plot(rows, output)
    print(f"report written to {output}")
    return output


if __name__ == "__main__":
    main()
