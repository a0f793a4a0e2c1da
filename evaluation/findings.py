"""The paper's findings, tested on a results directory: a paired comparison per task, and a verdict per finding.

The models each finding compares are found by their names (the study's grammar, `core.names`), so any study
that trained them gets the verdicts: `<s>-clm-<T>` vs `<s>-mlm40-<T>` (MLM vs CLM), the intermediate checkpoints
`<run>-<step>` of both (data efficiency), a PFS run `<s>-clm-<k>-mlm40-<T>` vs `<s>-mlm40-<T>`, and the CPT pair
`<s>-clm-dec<B>-mlm40-<T>` vs `<s>-mlm40-dec<B>-mlm40-<T>`.

| finding (paper) | comparison (A - B) | claim holds when |
|---|---|---|
| MLM beats CLM, per task family | MLM40 - CLM at the final checkpoint | A > B |
| CLM is more data-efficient early in training | CLM - MLM40 at intermediate checkpoints in the first half | A > B |
| CLM fine-tuning is more stable across learning rates | std over the LRs of the mean test score, CLM - MLM40 | A < B |
| CLM then MLM (PFS) beats MLM alone at a fixed budget | PFS - MLM40, same budget | A > B |
| MLM CPT from a CLM base beats MLM CPT from an MLM base | CPT(CLM base) - CPT(MLM40 base) | A > B |

Each comparison has a 95% CI from a bootstrap that resamples fine-tuning seeds and test instances
(`evaluation.report.paired_comparison`; for stability, seeds within each learning rate). It "supports" the claim
when the CI excludes 0 on the claim's side, "contradicts" it when it excludes 0 on the other side, and is "not
significant" otherwise. A finding **agrees** at this scale when at least one comparison supports it and none
contradicts it, **disagrees** in the reverse case, is **mixed** when both happen, and **inconclusive** when no
comparison is significant. No correction for multiple comparisons is applied: read the per-task lines.
"""

from __future__ import annotations

import math

import numpy as np

from core import names
from evaluation import report

FAMILY_NAMES = {"sc": "sequence classification", "tc": "token classification", "qa": "extractive QA", "ir": "retrieval"}


def _single(models, size, objective, total):
    name = f"{size}-{objective}-{total // 1000}k"
    return name if name in models else None


def comparisons(records: list[dict], rows: list[dict]) -> list[dict]:
    """Every (finding, task) comparison the results allow, with its CI and its verdict on the claim."""
    models = {r["model"] for r in rows}
    parsed = {m: p for m in models if (p := names.try_parse_name(m)) is not None}
    # mteb records (evaluation.mteb: no LR x seed grid, mostly zero-shot) are not the protocol these claims are about
    tasks = sorted({r["task"] for r in records if r.get("evaluation") != "mteb"})
    family = {r["task"]: r["family"] for r in rows}
    out = []
    finals = {(p.size, p.total_steps) for p in parsed.values() if p.kind == "single" and p.step is None}
    for size, total in sorted(finals):
        clm, mlm = _single(models, size, "clm", total), _single(models, size, "mlm40", total)
        if clm and mlm:
            for task in tasks:
                out += _pair(records, rows, f"mlm_vs_clm_{family[task]}", task, mlm, clm, +1)
                out += _stability(records, rows, task, clm, mlm)
            steps = sorted({p.step for m, p in parsed.items() if p.step is not None and p.run_name == clm}
                           & {p.step for m, p in parsed.items() if p.step is not None and p.run_name == mlm})
            for step in [s for s in steps if s <= total / 2]:
                for task in tasks:
                    out += _pair(records, rows, "data_efficiency", task, f"{clm}-{step}", f"{mlm}-{step}", +1)
        for model, p in sorted(parsed.items()):
            if p.kind == "pfs" and p.step is None and (p.size, p.total_steps) == (size, total) \
                    and p.ratio == 40 and mlm:
                for task in tasks:
                    out += _pair(records, rows, "pfs", task, model, mlm, +1)
    for model, p in sorted(parsed.items()):
        if p.kind == "cpt" and p.base == "clm" and p.step is None:
            other = model.replace("-clm-dec", "-mlm40-dec", 1)
            if other in models:
                for task in tasks:
                    out += _pair(records, rows, "cpt", task, model, other, +1)
    return out


def _verdict(ci_low: float, ci_high: float, direction: int) -> str:
    if math.isnan(ci_low) or math.isnan(ci_high):
        return "not significant"
    if (ci_low > 0 and direction > 0) or (ci_high < 0 and direction < 0):
        return "supports"
    if (ci_high < 0 and direction > 0) or (ci_low > 0 and direction < 0):
        return "contradicts"
    return "not significant"


def _pair(records, rows, finding, task, model_a, model_b, direction) -> list[dict]:
    runs_a, runs_b = report.best_runs(records, rows, model_a, task), report.best_runs(records, rows, model_b, task)
    if not runs_a or not runs_b:
        return []
    metric = runs_a[0]["main_metric"]
    result = report.paired_comparison(runs_a, runs_b, metric)
    return [{"finding": finding, "task": task, "a": model_a, "b": model_b, "measure": metric,
             "delta": result["delta"], "ci_low": result["ci_low"], "ci_high": result["ci_high"],
             "p": result["p_bootstrap"], "n_seeds": f"{len(runs_a)}/{len(runs_b)}",
             "verdict": _verdict(result["ci_low"], result["ci_high"], direction)}]


def lr_spread(records: list[dict], n_resamples: int = 2000, seed: int = 0) -> tuple[float, np.ndarray]:
    """Std over learning rates of the mean test score, and its bootstrap samples (seeds resampled within each LR)."""
    by_lr = {}
    for r in records:
        if r["status"] == "ok":
            by_lr.setdefault(r["lr"], []).append(float(r["test"][r["main_metric"]]))
    scores = [np.asarray(v) for _, v in sorted(by_lr.items())]
    rng = np.random.default_rng(seed)
    value = float(np.std([s.mean() for s in scores]))
    samples = np.std(np.stack([rng.choice(s, size=(n_resamples, len(s))).mean(1) for s in scores], axis=1), axis=1)
    return value, samples


def _stability(records, rows, task, clm, mlm) -> list[dict]:
    runs = {m: [r for r in records if r["model"] == m and r["task"] == task] for m in (clm, mlm)}
    if any(len({r["lr"] for r in v if r["status"] == "ok"}) < 2 for v in runs.values()):
        return []
    (spread_a, samples_a), (spread_b, samples_b) = lr_spread(runs[clm]), lr_spread(runs[mlm], seed=1)
    deltas = samples_a - samples_b
    low, high = float(np.percentile(deltas, 2.5)), float(np.percentile(deltas, 97.5))
    p = min(1.0, 2 * min((deltas <= 0).mean(), (deltas >= 0).mean()))
    return [{"finding": "stability", "task": task, "a": clm, "b": mlm, "measure": "std over LRs",
             "delta": spread_a - spread_b, "ci_low": low, "ci_high": high, "p": float(p),
             "n_seeds": f"{len(runs[clm])}/{len(runs[mlm])} runs", "verdict": _verdict(low, high, -1)}]


CLAIMS = {
    "mlm_vs_clm_sc": "MLM beats CLM on sequence classification",
    "mlm_vs_clm_tc": "MLM beats CLM on token classification (the paper: CLM is competitive there)",
    "mlm_vs_clm_qa": "MLM beats CLM on extractive QA",
    "mlm_vs_clm_ir": "MLM beats CLM on retrieval",
    "data_efficiency": "CLM is more data-efficient early in training",
    "stability": "CLM fine-tuning is more stable across learning rates",
    "pfs": "CLM then MLM (PFS) beats MLM alone at a fixed budget",
    "cpt": "MLM continued pretraining from a CLM base beats it from an MLM base",
}


def verdicts(rows: list[dict]) -> list[dict]:
    """One verdict per finding from its comparisons: agrees / disagrees / mixed / inconclusive at this scale."""
    out = []
    for finding, claim in CLAIMS.items():
        mine = [r for r in rows if r["finding"] == finding]
        if not mine:
            continue
        support = sum(r["verdict"] == "supports" for r in mine)
        against = sum(r["verdict"] == "contradicts" for r in mine)
        verdict = ("agrees" if support and not against else "disagrees" if against and not support
                   else "mixed" if support else "inconclusive")
        out.append({"finding": finding, "claim": claim, "comparisons": len(mine), "supporting": support,
                    "contradicting": against, "verdict": f"{verdict} at this scale"})
    return out


def findings_markdown(rows: list[dict]) -> list[str]:
    """The verdicts, then every comparison behind them."""
    lines = ["## The paper's findings at this scale", "",
             "A comparison supports a claim when its 95% CI (bootstrap over fine-tuning seeds and test instances) "
             "excludes 0 on the claim's side. Not corrected for multiple comparisons: read the per-task lines.", "",
             "| finding | comparisons | supporting | contradicting | verdict |", "|---|---|---|---|---|"]
    lines += [f"| {v['claim']} | {v['comparisons']} | {v['supporting']} | {v['contradicting']} | **{v['verdict']}** |"
              for v in verdicts(rows)]
    keys = ["finding", "task", "a", "b", "measure", "delta", "ci_low", "ci_high", "p", "n_seeds", "verdict"]
    lines += ["", "| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(report._fmt(r[k]) for k in keys) + " |" for r in rows]
    return lines
