"""The numbers behind the report: results loaded and summarised per model x task, confidence intervals, paired
comparisons on per-instance scores, Holm's correction (`findings` tests, `figures` draws, `report` renders them).

Intervals are Student t over the unit that varies between repeats (a bootstrap over 3 seeds is about 2.7x too
narrow): the fine-tuning seed for a model pretrained once; for a model pretrained several times (`<name>-pseed<k>`,
one `replicate_group`, one summary row) the pretraining run, a random effect, each run's mean over its seeds one
unit. A paired comparison adds the test instances' part (a paired bootstrap) to the units' (Welch-Satterthwaite df).
"""

from __future__ import annotations

import collections
import functools
import math
from pathlib import Path

import numpy as np
from scipy import stats

from analysis import import_encodeval
from analysis.import_encodeval import is_imported
from core import names, run_folders, store

# the model cards' columns, then the replicate columns: pretraining runs, their SD and the fine-tuning seeds' SD
SUMMARY_COLUMNS = (*run_folders.SUMMARY_COLUMNS, "n_pretrain_runs", "pretrain_sd", "seed_sd")
N_RESAMPLES = 2000  # bootstrap samples of every interval and p-value the report computes by resampling


def model_kind(name: str) -> str:
    """How the report groups a model: its grammar kind (single, pfs, cpt), "intermediate" or "other" (outside the
    grammar)."""
    p = names.try_parse_name(name)
    return "other" if p is None else "intermediate" if p.paper_step is not None else p.kind


@functools.lru_cache(maxsize=None)  # called per record by every lookup (`best_runs`): a few names, parsed once
def replicate_group(name: str) -> str:
    """The model a result belongs to: its name without `-pseed<k>` (`names.split_replicate`)."""
    return names.split_replicate(name)[0]


def unit_scores(records: list[dict], split: str = "test") -> np.ndarray:
    """The scores an interval is over: one per fine-tuning seed for one pretraining run; one per pretraining run (its
    mean over seeds) when `records` span several runs of one model."""
    runs = sorted({r["model"] for r in records})
    scores = [main_score(r, split) for r in records]
    if len(runs) < 2:
        return np.asarray(scores, dtype=float)
    return np.array([np.mean([s for s, r in zip(scores, records) if r["model"] == run]) for run in runs])


def run_variance(records: list[dict]) -> tuple[int, float, float]:
    """(pretraining runs, pretraining-run SD, fine-tuning seed SD) of one model's best-LR runs: the seed variance is the
    mean within-run variance, the run variance that of the run means less the seed variance over the seeds per run
    (method of moments, 0 when negative); nan where a level has fewer than 2 units."""
    runs = sorted({r["model"] for r in records})
    by_run = [np.array([main_score(r, "test") for r in records if r["model"] == run]) for run in runs]
    within = [np.var(s, ddof=1) for s in by_run if len(s) > 1]
    seed_var = float(np.mean(within)) if within else math.nan
    if len(runs) < 2:
        return len(runs), math.nan, math.sqrt(seed_var)
    between = float(np.var([s.mean() for s in by_run], ddof=1))
    if within:
        between -= seed_var * float(np.mean([1 / len(s) for s in by_run]))
    return len(runs), math.sqrt(max(0.0, between)), math.sqrt(seed_var)


def load_results(results_dir: str | Path) -> list[store.LoadedResult]:
    """Every result file under `results_dir` (not temp or moved-aside files), each with its path under "_path",
    compacted (`compact`); a corrupt or older-format file, or a folder an import did not finish, is refused, naming
    it."""
    import_encodeval.check_complete(results_dir)
    if not (files := store.result_files(results_dir)):
        raise FileNotFoundError(
            f"no result files under {results_dir}; run `python -m evaluation.run ... --output {results_dir}`"
        )
    return [compact({**store.read_result(p), "_path": str(p)}) for p in files]


def compact(record: store.LoadedResult) -> store.LoadedResult:
    """`record` without its per-instance rows (`store.compact`): a finished one keeps its test split's main metric as
    (numerator, denominator) float arrays (`instance_columns`), a TC run its entity F1 beside it; about 8 bytes per
    instance, for trees of the paper's size (165 million test instances)."""
    rows, metric = store.instances(record), store.main_metric(record)
    kept = [metric] if store.scored(record) and rows else []  # none kept: a paired comparison refuses the run
    if kept and metric != "entity_f1" and rows and "entity_tp" in rows[0]:  # TC: entity F1 beside it
        kept.append("entity_f1")
    return store.compact(record, {m: instance_columns(rows, m) for m in kept})


def instance_columns(rows: list[dict], metric: str) -> tuple[np.ndarray, np.ndarray | None]:
    """(numerator, denominator) of `metric` over per-instance rows, so that sum(num) / sum(den) is the run's metric:
    mean metrics have no denominator (None), token_micro_f1 / token_accuracy are correct / count tokens, entity_f1 is tp
    / ((pred + gold) / 2)."""
    if metric in ("token_micro_f1", "token_accuracy"):
        return (
            np.array([r["token_correct"] for r in rows], dtype=float),
            np.array([r["token_count"] for r in rows], dtype=float),
        )
    if metric in HELDOUT_COLUMNS:
        numerator, count = HELDOUT_COLUMNS[metric]
        return (
            np.array([r[numerator] for r in rows], dtype=float),
            np.array([r[count] for r in rows], dtype=float),
        )
    if metric == "entity_f1":
        return (
            np.array([r["entity_tp"] for r in rows], dtype=float),
            np.array([(r["entity_pred"] + r["entity_gold"]) / 2 for r in rows], dtype=float),
        )
    return np.array([r[metric] for r in rows], dtype=float), None


# a held-out result's metrics (`store` kind "heldout"): (the per-block sum, the per-block count) they are the ratio of
HELDOUT_COLUMNS = {
    "mlm_loss": ("mlm_loss_sum", "mlm_count"),
    "mlm_accuracy": ("mlm_correct", "mlm_count"),
    "clm_loss": ("clm_loss_sum", "clm_count"),
}


def rows_mismatch(record: dict, tolerance: float = 1e-6) -> str | None:
    """Where a result's test score of its main metric differs from what its per-instance rows give (`instance_columns`),
    or None: a probe's or held-out result checked against its rows."""
    metric, rows = store.main_metric(record), store.instances(record)
    if not store.scored(record):
        return None
    try:
        num, den = instance_columns(rows, metric)
    except KeyError as missing:
        return f"its per-instance rows lack {missing} (its {metric} cannot be recomputed)"
    again = float(num.sum() / max(num.size if den is None else den.sum(), 1e-12))
    stored = store.main_score(record)
    return None if abs(again - stored) <= tolerance else f"its test {metric} is {stored} but its rows give {again}"


def check_same_protocol(records: list[dict]) -> None:
    """Refuse to average in one row runs of one (model, task) whose identities differ: it would mix two experiments."""
    first = records[0]
    for record in records[1:]:
        differences = store.identity_diff(first["identity"], record["identity"])
        imported = [r["_path"] for r in (first, record) if is_imported(r)]
        if differences and len(imported) == 1:
            raise ValueError(
                f"{imported[0]} (imported from EncodEval) and a result of this project are both "
                f"{first['model']} on {first['task']}: keep them in separate results directories"
            )
        if differences:
            raise ValueError(
                f"{record['_path']} and {first['_path']} are results of {first['model']} on "
                f"{first['task']} made differently ({'; '.join(differences[:3])}); re-run one of them "
                "(evaluation.run --rerun_changed) or keep them in separate results directories"
            )


def check_replicates(records: list[dict]) -> None:
    """Refuse what would count one pretraining run twice in a replicated model's row: a result whose `pretrain_seed` is
    not its name's `-pseed<k>`, or a plain run beside replicates of the same name (it most likely shares one's seed)."""
    plain, replicated = {}, {}
    for record in records:
        named = store.pretrain_seed(record["model"])
        where = record.get("_path", record["model"])
        if record.get("format") == store.RESULT_FORMAT and record.get("pretrain_seed") != named:
            raise ValueError(
                f"{where} records pretrain_seed {record.get('pretrain_seed')} but is filed under "
                f"{record['model']} (pretraining seed {named}): file it under the name of its "
                "pretraining run, or move it out of the results directory"
            )
        (plain if named is None else replicated).setdefault(replicate_group(record["model"]), record["model"])
    for group in sorted(plain.keys() & replicated.keys()):
        raise ValueError(
            f"results of {plain[group]} (one pretraining run) and of {replicated[group]} (a replicate) "
            f"would be pooled in one row {group}, counting a pretraining run twice: rename the plain "
            "run -pseed<k> after its pretraining seed, or keep it in another results directory"
        )


def confidence_interval(scores, bootstrap: bool = False, level: float = 0.95) -> tuple[float, float]:
    """95% CI of the mean, Student t or percentile bootstrap, clipped to [0, 1]; (nan, nan) with < 2 scores."""
    scores = np.asarray(scores, dtype=float)
    if len(scores) < 2:
        return math.nan, math.nan
    if bootstrap:
        res = stats.bootstrap((scores,), np.mean, confidence_level=level, method="percentile", random_state=0)
        return float(res.confidence_interval.low), float(res.confidence_interval.high)
    if np.all(scores == scores[0]):  # no spread over seeds: the interval is the point, the mean (not scores[0]: the
        return float(scores.mean()), float(scores.mean())  # mean of equal floats can differ from them by an ulp)
    low, high = stats.t.interval(level, len(scores) - 1, loc=scores.mean(), scale=stats.sem(scores))
    return max(0.0, float(low)), min(1.0, float(high))


main_score = store.main_score


def summarize_group(records: list[dict], bootstrap: bool = False) -> dict:
    """One summary row from all runs of one (model, task), a replicated model's pretraining runs included: the best LR
    is chosen on the mean over all of them, the mean and CI are over `unit_scores`.

    Returns:
        SUMMARY_COLUMNS, plus "per_lr" {lr: (mean validation, mean test, n ok, n diverged)} and "per_lr_ci" {lr: (low,
        high)}; `entity_f1` (TC only, else None) is the best LR's mean test entity F1.
    """
    first = records[0]
    ok = [r for r in records if store.scored(r)]
    per_lr = {}
    for lr in sorted({r["lr"] for r in records}):
        runs = [r for r in records if r["lr"] == lr]
        done = [r for r in runs if store.scored(r)]
        per_lr[lr] = (
            np.mean([main_score(r, "validation") for r in done]) if done else math.nan,
            np.mean([main_score(r, "test") for r in done]) if done else math.nan,
            len(done),
            len(runs) - len(done),
        )
    candidates = [lr for lr, (val, _, n, _) in per_lr.items() if n > 0]
    row = {
        "model": replicate_group(first["model"]),
        "task": first["task"],
        "family": first["family"],
        "metric": store.main_metric(first),
        "imported": is_imported(first),
        "n_runs": len(records),
        "n_diverged": len(records) - len(ok),
        "per_lr": per_lr,
        "per_lr_ci": {lr: confidence_interval(unit_scores([r for r in ok if r["lr"] == lr])) for lr in per_lr},
    }
    if not candidates:
        return {
            **row,
            **{k: math.nan for k in SUMMARY_COLUMNS if k not in row},
            "best_lr": None,
            "n_seeds": 0,
            "entity_f1": None,
            "n_pretrain_runs": len({r["model"] for r in records}),
        }
    best = min(candidates, key=lambda lr: (per_lr[lr][3], -per_lr[lr][0]))
    chosen = [r for r in ok if r["lr"] == best]
    test = [main_score(r, "test") for r in chosen]
    units = unit_scores(chosen)
    low, high = confidence_interval(units, bootstrap)
    n_pretrain_runs, pretrain_sd, seed_sd = run_variance(chosen)
    baselines = {round(b, 12) for r in records if (b := store.baseline_score(r)) is not None}
    if len(baselines) > 1:
        raise ValueError(
            f"results of {first['model']} on {first['task']} disagree on the trivial baseline "
            f"({sorted(baselines)}): they were scored on different test data"
        )
    entity = [s["entity_f1"] for r in chosen if "entity_f1" in (s := store.split_scores(r, "test"))]
    entity_f1 = float(np.mean(entity)) if first["family"] == "tc" and entity else None
    lr_means = [per_lr[lr][1] for lr in candidates]
    seeds = min(sum(r["model"] == m for r in chosen) for m in {r["model"] for r in chosen})
    return {
        **row,
        "best_lr": best,
        "n_seeds": len(test) if n_pretrain_runs == 1 else seeds,
        "n_pretrain_runs": n_pretrain_runs,
        "pretrain_sd": pretrain_sd,
        "seed_sd": seed_sd,
        "mean": float(np.mean(units)),
        "ci_low": low,
        "ci_high": high,
        "trivial_baseline": baselines.pop() if baselines else None,
        "entity_f1": entity_f1,
        "std": float(np.std(test, ddof=1)) if len(test) > 1 else math.nan,
        "val_mean": float(per_lr[best][0]),
        "stability_std": float(np.std([main_score(r, "test") for r in ok], ddof=1)) if len(ok) > 1 else math.nan,
        "lr_range": float(max(lr_means) - min(lr_means)),
    }


def summarize(records: list[dict], bootstrap: bool = False) -> list[dict]:
    """Summary rows for every (model, task), a replicated model's runs in one row, sorted by task then model."""
    runs, groups = collections.defaultdict(list), collections.defaultdict(list)
    for record in records:
        runs[(record["model"], record["task"])].append(record)
        groups[(replicate_group(record["model"]), record["task"])].append(record)
    for run in runs.values():
        check_same_protocol(run)
    check_replicates(records)
    return sorted((summarize_group(g, bootstrap) for g in groups.values()), key=lambda r: (r["task"], r["model"]))


def instance_matrix(records: list[dict], metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(numerator, denominator), each (runs, test instances), of one metric (`instance_columns`): from what a loaded
    record kept, or from a record's per-instance rows."""

    def columns(record):
        if (kept := store.kept_scores(record)) is None:
            return instance_columns(store.instances(record), metric)
        if metric not in kept:
            raise ValueError(
                f"{record['_path']} keeps no per-instance test scores of {metric} (it has "
                f"{', '.join(kept) or 'none'}), which a paired comparison needs"
            )
        return kept[metric]

    pairs = [columns(r) for r in records]
    return (
        np.array([num for num, _ in pairs], dtype=float),
        np.array([np.ones(len(num)) if den is None else den for num, den in pairs], dtype=float),
    )


def paired_comparison(
    records_a: list[dict],
    records_b: list[dict],
    metric: str,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
    level: float = 0.95,
) -> dict:
    """Model A minus model B on the same test instances: a Student-t interval (`t_test`: each model's `unit_part` plus
    the variance of the unit-averaged difference over resampled test instances; with one unit on a side only the
    instance part is known, so the interval is then too narrow), and a paired bootstrap.

    Returns:
        `t_test`'s dict (`p` two-sided), "parts": [(unit variance part, its df)] of A and B, "p_bootstrap" (test
        instances resampled, paired, and each model's units, `resample_units`; never 0: `bootstrap_p`),
        "p_bootstrap_bound", and "wins" / "losses": the test instances where A is above / below B (not a test).
    """
    num_a, den_a = instance_matrix(records_a, metric)
    num_b, den_b = instance_matrix(records_b, metric)
    if num_a.shape[1] != num_b.shape[1]:
        raise ValueError(f"models were scored on different test sets ({num_a.shape[1]} vs {num_b.shape[1]} instances)")
    rng = np.random.default_rng(seed)
    n = num_a.shape[1]
    mean_a, mean_b, mden_a, mden_b = num_a.mean(0), num_b.mean(0), den_a.mean(0), den_b.mean(0)
    deltas, instance_deltas = [], []
    for start in range(0, n_resamples, 250):  # chunks keep the (samples x instances) matrices small
        size = min(250, n_resamples - start)
        weights = instance_counts(rng, n, size)  # shared by A and B
        runs_a, runs_b = resample_units(records_a, rng, size), resample_units(records_b, rng, size)
        score_a = (runs_a * (weights @ num_a.T)).sum(1) / (runs_a * (weights @ den_a.T)).sum(1).clip(1e-12)
        score_b = (runs_b * (weights @ num_b.T)).sum(1) / (runs_b * (weights @ den_b.T)).sum(1).clip(1e-12)
        deltas.append(score_a - score_b)
        instance_deltas.append(
            (weights @ mean_a) / (weights @ mden_a).clip(1e-12) - (weights @ mean_b) / (weights @ mden_b).clip(1e-12)
        )
    delta = mean_a.sum() / max(mden_a.sum(), 1e-12) - mean_b.sum() / max(mden_b.sum(), 1e-12)
    parts = [unit_part(records) for records in (records_a, records_b)]
    per_a, per_b = (mean / np.where(mden > 0, mden, 1) for mean, mden in ((mean_a, mden_a), (mean_b, mden_b)))
    p_boot, bound = bootstrap_p(np.concatenate(deltas))
    return {
        **t_test(float(delta), parts, float(np.var(np.concatenate(instance_deltas), ddof=1)), level),
        "parts": parts,
        "p_bootstrap": p_boot,
        "p_bootstrap_bound": bound,
        "wins": int((per_a > per_b).sum()),
        "losses": int((per_a < per_b).sum()),
    }


def unit_part(records: list[dict]) -> tuple[float, int]:
    """One model's unit part of a difference's variance and its df: s^2 / n over its `unit_scores` (0 with one unit)."""
    units = unit_scores(records)
    return (float(np.var(units, ddof=1)) / len(units) if len(units) > 1 else 0.0, len(units) - 1)


def t_test(delta: float, parts: list[tuple[float, int]], instance_variance: float, level: float = 0.95) -> dict:
    """A difference's Student-t interval and two-sided p: the unit parts plus the instance part, df by
    Welch-Satterthwaite on the unit parts."""
    variance = sum(part for part, _ in parts) + instance_variance
    welch = sum(part**2 / df for part, df in parts if df > 0 and part > 0)
    df = variance**2 / welch if welch > 0 else math.inf
    se = math.sqrt(variance)
    if variance > 0:
        half = float(stats.t.ppf((1 + level) / 2, df)) * se
        p = float(2 * stats.t.sf(abs(delta) / se, df))
    else:
        half, p = 0.0, 1.0 if delta == 0 else 0.0
    return {"delta": delta, "se": se, "ci_low": delta - half, "ci_high": delta + half, "df": df, "p": p}


def instance_counts(rng: np.random.Generator, n: int, size: int) -> np.ndarray:
    """(size, n) bootstrap counts of n instances drawn with replacement, from drawn indices (`rng.multinomial` is ten
    times slower here)."""
    draws = rng.integers(0, n, size=(size, n)) + n * np.arange(size)[:, None]
    return np.bincount(draws.ravel(), minlength=size * n).reshape(size, n).astype(float)


def contrast(
    groups: list[list[dict]],
    weights: list[float],
    metric: str,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
    level: float = 0.95,
) -> dict:
    """sum_k weights[k] x score of model k on the same test instances (the IR gap at one size minus at another), as
    `t_test`'s dict: the unit part sum_k w_k^2 s_k^2 / n_k plus the instances' part, drawn once for every model (the
    gaps share their instances, so their parts are not independent)."""
    matrices = [instance_matrix(g, metric) for g in groups]
    if len({num.shape[1] for num, _ in matrices}) > 1:
        raise ValueError(
            f"models were scored on different test sets ({[num.shape[1] for num, _ in matrices]} instances)"
        )
    means = [(num.mean(0), den.mean(0)) for num, den in matrices]
    n = matrices[0][0].shape[1]
    rng = np.random.default_rng(seed)
    draws = []
    for start in range(0, n_resamples, 250):  # chunks keep the (samples x instances) matrices small
        counts = instance_counts(rng, n, min(250, n_resamples - start))
        draws.append(sum(w * (counts @ num) / (counts @ den).clip(1e-12) for w, (num, den) in zip(weights, means)))
    delta = float(sum(w * num.sum() / max(den.sum(), 1e-12) for w, (num, den) in zip(weights, means)))
    parts = [(w**2 * part, df) for w, (part, df) in zip(weights, map(unit_part, groups))]
    return t_test(delta, parts, float(np.var(np.concatenate(draws), ddof=1)), level)


def resample_units(records: list[dict], rng: np.random.Generator, size: int) -> np.ndarray:
    """(size, len(records)) bootstrap weights over one model's records, each row summing to 1. One pretraining run: its
    seeds drawn with replacement. Several: the runs drawn, then each drawn run's seeds within it, every run weighing the
    same (as `unit_scores`)."""
    n = len(records)
    runs = sorted({r["model"] for r in records})
    if len(runs) < 2:
        return rng.multinomial(n, np.full(n, 1.0 / n), size=size) / n
    run_counts = rng.multinomial(len(runs), np.full(len(runs), 1.0 / len(runs)), size=size)
    weights = np.zeros((size, n))
    for k, run in enumerate(runs):
        members = np.array([i for i, r in enumerate(records) if r["model"] == run])
        seeds = rng.multinomial(run_counts[:, k] * len(members), np.full(len(members), 1.0 / len(members)))
        weights[:, members] = seeds / (len(members) * len(runs))
    return weights


def one_sided(estimate: float, se: float, df: float, bound: float = 0.0) -> float:
    """p of the one-sided t-test of H1: estimate > bound (the other side: `one_sided(-estimate, se, df, -bound)`)."""
    if not se > 0:
        return 0.0 if estimate > bound else 1.0
    return float(stats.t.sf((estimate - bound) / se, df))


def bootstrap_p(samples: np.ndarray) -> tuple[float, bool]:
    """Two-sided bootstrap p of "the statistic is 0", and whether it is only the bound 1 / len(samples): never 0."""
    p = min(1.0, 2 * min((samples <= 0).mean(), (samples >= 0).mean()))
    return (float(p), False) if p > 0 else (1.0 / len(samples), True)


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted, running = [0.0] * len(p_values), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def compare(records: list[dict], rows: list[dict], model_a: str, model_b: str) -> list[dict]:
    """Paired comparisons of two models on every task both have, each at its own best LR."""
    out = []
    for task in sorted({r["task"] for r in rows}):
        runs_a, runs_b = best_runs(records, rows, model_a, task), best_runs(records, rows, model_b, task)
        if runs_a and runs_b:
            metric = store.main_metric(runs_a[0])
            out.append(
                {
                    "task": task,
                    "a": model_a,
                    "b": model_b,
                    "metric": metric,
                    **paired_comparison(runs_a, runs_b, metric),
                }
            )
    return out


def best_runs(records: list[dict], rows: list[dict], model: str, task: str) -> list[dict]:
    """The finished runs of `model` (a replicate group) on `task` at its best LR ([] when none)."""
    best = next((r["best_lr"] for r in rows if r["model"] == model and r["task"] == task), None)
    return [
        r
        for r in records
        if replicate_group(r["model"]) == model and r["task"] == task and r["lr"] == best and store.scored(r)
    ]


TARGET_HALF_WIDTH = 0.02  # the precision asked of a SC or TC mean over seeds (fractions)


def seeds_needed(
    std: float, half_width: float = TARGET_HALF_WIDTH, level: float = 0.95, max_seeds: int = 1000
) -> int | None:
    """The fewest seeds whose Student-t CI half-width is at most `half_width` at this spread; None when unknown or more
    than `max_seeds`."""
    if not std > 0:
        return None
    return next(
        (n for n in range(2, max_seeds + 1) if stats.t.ppf((1 + level) / 2, n - 1) * std / math.sqrt(n) <= half_width),
        None,
    )


KIND_ORDER = {"single": 0, "pfs": 1, "cpt": 2, "intermediate": 3, "other": 4}


def model_order(name: str):
    """Single-objective runs (CLM first, then MLM by ratio), PFS, CPT, intermediate checkpoints, other encoders."""
    if (p := names.try_parse_name(name)) is None:
        return (KIND_ORDER["other"], "", "", 0, 0, 0, name)
    return (
        KIND_ORDER[model_kind(name)],
        p.size,
        p.run_name if p.paper_step is not None else "",
        p.ratio or 0,
        p.paper_step or 0,
        p.total_steps,
        name,
    )


def trivial_baseline(rows: list[dict], task: str) -> float | None:
    """The task's trivial baseline test score from its summary rows, None when unknown."""
    return next(
        (r["trivial_baseline"] for r in rows if r["task"] == task and r.get("trivial_baseline") is not None), None
    )


BASELINE_TOLERANCE = 1e-9  # baselines are kept to 12 decimals: a mean this close to one is at it, not above it


def above_baseline(row: dict) -> bool | None:
    """Whether a summary row's 95% CI (its mean, with one unit) lies above its task's trivial baseline by more than
    `BASELINE_TOLERANCE`; None without a known baseline or a finished run."""
    if row.get("trivial_baseline") is None or row.get("best_lr") is None:
        return None
    low = row["mean"] if math.isnan(row["ci_low"]) else row["ci_low"]
    return low > row["trivial_baseline"] + BASELINE_TOLERANCE


def at_baseline(row: dict) -> bool:
    """Whether a summary row's mean is its task's trivial baseline (within `BASELINE_TOLERANCE`)."""
    return (
        row.get("trivial_baseline") is not None
        and row.get("best_lr") is not None
        and abs(row["mean"] - row["trivial_baseline"]) <= BASELINE_TOLERANCE
    )
