"""The paper's findings, stated as the paper states them, tested on a results directory only where the study can
test them: a paired comparison per task, a testability check per comparison, and a verdict per finding.

The models each finding compares are found by their names (`core.names`): `<s>-clm-<T>` and `<s>-mlm40-<T>`, their
intermediate checkpoints `<run>-<step>`, PFS runs `<s>-clm-<k>-mlm40-<T>` and the CPT pair `<s>-clm-dec<B>-mlm40-<T>`
/ `<s>-mlm40-dec<B>-mlm40-<T>`.

| finding (the paper) | comparison (A - B) | claim holds when |
|---|---|---|
| TC: CLM is on par with MLM or better | CLM - MLM40, final checkpoints | A is not significantly below B |
| SC / QA: MLM is better once past the crossover (about 39 tokens per parameter) | MLM40 - CLM | A > B |
| IR: MLM is better past its crossover (about 78), the gap narrowing with size | MLM40 - CLM | A > B |
| data efficiency: CLM leads early, the gap closes | CLM - MLM40 early, and at the end | A > B early, less at the end |
| stability: CLM fine-tuning is more stable across learning rates | relative LR spread, CLM - MLM40 | A < B |
| PFS (CLM then MLM40) beats MLM40 alone at the same budget | PFS - MLM40 | A > B |
| PFS beats CLM alone at the same budget | PFS - CLM | A > B |
| MLM CPT from a CLM base beats continued MLM on an MLM base | CPT(CLM base) - CPT(MLM40 base) | A > B |
| MLM CPT improves the CLM base itself | CPT(CLM base) - the CLM base | A > B |

**Testable at this scale** means, for every model a comparison uses: the tokens it saw per parameter reach the
paper's crossover for the task's family (the crossover where MLM overtakes CLM on SC/QA is at 10k steps of the
610m model, 10,000 x 2.36M tokens / 607.9M parameters = 39 tokens per parameter; for IR at 20k steps, 78; TC uses
39); a PFS budget reaches the paper's smallest (12k steps, 47 tokens per parameter); the LR grid brackets the
model's optimum (its best LR is not the grid's smallest or largest); and for data efficiency, the run has
intermediate checkpoints on the task. Otherwise the comparison is **not testable at this scale**, with the reason,
and is left out of the verdict and of the correction. Tokens per parameter come from `Regime` (the paper's own
by default; a toy study passes its scale's).

**Stability** is the paper's "more stable across learning rates" measured so that a model that learns more is not
called less stable: the standard deviation over the grid's LRs of the mean test score, divided by the model's
gain over the trivial baseline at its best LR (`relative_lr_spread`); the grid must bracket both models' optima,
so the spread is over LRs on both sides of the optimum. Its CI and p come from resampling seeds within each LR.

Each testable comparison has a 95% CI (Student t combining seeds and test instances:
`analysis.statistics.paired_comparison`) and a p-value; the p-values of all testable comparisons are corrected
together (Holm). A comparison **supports** the claim when its Holm-adjusted p is below 0.05 with the difference on
the claim's side, **contradicts** it on the other side, and is **not significant** otherwise. A finding **agrees**
at this scale when at least one comparison supports it and none contradicts it, **disagrees** in the reverse case,
is **mixed** when both happen, and **inconclusive** when no testable comparison is significant. Every model is one
pretraining run: the verdicts are conditional on those runs (pretraining seeds are not resampled).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from analysis import statistics
from core import names

ALPHA = 0.05
PAPER_TOKENS_PER_STEP = 1152 * 2048  # the paper's global batch x block: 2.36M tokens per step
# the paper's parameter counts, input embedding included, LM head excluded
PAPER_PARAMETERS = {"210m": 211.8e6, "610m": 607.9e6, "1b": 1187.9e6}
# The paper's crossover, where MLM overtakes CLM, in steps of its 610m model: SC and QA by 10k, IR by 20k
CROSSOVER_STEPS = {"sc": 10_000, "qa": 10_000, "tc": 10_000, "ir": 20_000}
PFS_SMALLEST_BUDGET = 12_000  # the paper's smallest PFS budget (steps)


def _per_parameter(steps: int) -> float:
    return steps * PAPER_TOKENS_PER_STEP / PAPER_PARAMETERS["610m"]


CROSSOVER = {family: _per_parameter(steps) for family, steps in CROSSOVER_STEPS.items()}  # tokens per parameter


@dataclass(frozen=True)
class Regime:
    """How many tokens a model's name means: `tokens_per_step` tokens per step of the names, over `parameters`
    (one count for every size, or {size: count}). The default is the paper's."""

    tokens_per_step: float = PAPER_TOKENS_PER_STEP
    parameters: float | dict = field(default_factory=lambda: dict(PAPER_PARAMETERS))
    scale: str | None = None  # the manifest scale of the names: the reasons name models as a reader sees them

    def shown(self, model: str) -> str:
        return names.scaled_name(model, self.scale)

    def tokens_per_parameter(self, model: str) -> float | None:
        p = names.try_parse_name(model)
        if p is None:
            return None
        count = self.parameters.get(p.size) if isinstance(self.parameters, dict) else self.parameters
        steps = p.step if p.step is not None else p.total_steps
        return steps * self.tokens_per_step / count if count else None


# finding -> (the claim as the paper states it, the sign of A - B the claim predicts; 0: "A not below B")
CLAIMS = {
    "tc_clm_on_par": ("TC: CLM is on par with MLM or better", 0),
    "sc_mlm_better": ("SC: MLM is better once past the crossover (~39 tokens/parameter)", +1),
    "qa_mlm_better": ("QA: MLM is better once past the crossover (~39 tokens/parameter)", +1),
    "ir_mlm_better": ("IR: MLM is better past its crossover (~78 tokens/parameter); the gap narrows with size", +1),
    "data_efficiency": ("CLM leads early in pretraining and the gap closes", +1),
    "stability": ("CLM fine-tuning is more stable across learning rates (spread relative to the gain)", -1),
    "pfs_vs_mlm": ("PFS (CLM then MLM40) beats MLM40 alone at the same budget", +1),
    "pfs_vs_clm": ("PFS (CLM then MLM40) beats CLM alone at the same budget", +1),
    "cpt_vs_mlm_cpt": ("MLM CPT from a CLM base beats continued MLM on an MLM base", +1),
    "cpt_vs_base": ("MLM CPT improves the CLM base itself", +1),
}
FAMILY_FINDING = {"tc": "tc_clm_on_par", "sc": "sc_mlm_better", "qa": "qa_mlm_better", "ir": "ir_mlm_better"}


def _single(models, size, objective, total):
    name = f"{size}-{objective}-{total // 1000}k"
    return name if name in models else None


def _row(rows, model, task):
    return next((r for r in rows if r["model"] == model and r["task"] == task), None)


def untestable(rows, regime: Regime, task: str, family: str, models: list[str], budget: int | None = None) -> str:
    """Why a comparison of `models` on `task` cannot test the paper's claim at this scale ("" when it can)."""
    for model in models:
        tpp = regime.tokens_per_parameter(model)
        if tpp is None:
            return f"{regime.shown(model)}: tokens per parameter unknown"
        if tpp < CROSSOVER[family]:
            return (f"{regime.shown(model)} saw {tpp:.3g} tokens per parameter, below the paper's crossover "
                    f"({CROSSOVER[family]:.0f}) for {family.upper()}")
    if budget is not None and (tpp := regime.tokens_per_parameter(models[0])) is not None \
            and tpp < _per_parameter(budget):
        return f"budget of {tpp:.3g} tokens per parameter, below the paper's smallest ({_per_parameter(budget):.0f})"
    for model in models:
        row = _row(rows, model, task)
        lrs = sorted(lr for lr, v in row["per_lr"].items() if v[2]) if row else []
        if row is None or row["best_lr"] is None or len(lrs) < 3 or row["best_lr"] in (lrs[0], lrs[-1]):
            best, shown = (row["best_lr"] if row else None), regime.shown(model)
            return f"the LR grid does not bracket {shown}'s optimum (best LR {best:g} at the grid's edge)" \
                if best is not None and len(lrs) > 1 else f"the LR grid does not bracket {shown}'s optimum"
    return ""


def comparisons(records: list[dict], rows: list[dict], regime: Regime | None = None) -> list[dict]:
    """Every (finding, task) comparison the results allow, with its testability, CI, Holm-adjusted p and verdict."""
    regime = regime or Regime()
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
                finding = FAMILY_FINDING[family[task]]
                a, b = (clm, mlm) if finding == "tc_clm_on_par" else (mlm, clm)
                out += _pair(records, rows, regime, finding, task, a, b)
                out += _stability(records, rows, regime, task, clm, mlm)
            steps = sorted({p.step for p in parsed.values() if p.step is not None and p.run_name == clm}
                           & {p.step for p in parsed.values() if p.step is not None and p.run_name == mlm})
            for task in tasks:
                early = [s for s in steps if s <= total / 2 and _row(rows, f"{clm}-{s}", task)
                         and _row(rows, f"{mlm}-{s}", task)]
                for step in early:
                    out += _pair(records, rows, regime, "data_efficiency", task, f"{clm}-{step}", f"{mlm}-{step}",
                                 check=[clm, mlm])
                if early:
                    out += _pair(records, rows, regime, "data_efficiency", task, clm, mlm)
        for model, p in sorted(parsed.items()):
            if p.kind == "pfs" and p.step is None and (p.size, p.total_steps) == (size, total) and p.ratio == 40:
                for task in tasks:
                    if mlm:
                        out += _pair(records, rows, regime, "pfs_vs_mlm", task, model, mlm, budget=PFS_SMALLEST_BUDGET)
                    if clm:
                        out += _pair(records, rows, regime, "pfs_vs_clm", task, model, clm, budget=PFS_SMALLEST_BUDGET)
    for model, p in sorted(parsed.items()):
        if p.kind == "cpt" and p.base == "clm" and p.step is None:
            other, base = model.replace("-clm-dec", "-mlm40-dec", 1), f"{p.size}-clm-{p.base_steps // 1000}k"
            for task in tasks:
                if other in models:
                    out += _pair(records, rows, regime, "cpt_vs_mlm_cpt", task, model, other,
                                 check=[base, model, other])
                if base in models:
                    out += _pair(records, rows, regime, "cpt_vs_base", task, model, base, check=[base, model])
    return _corrected(out)


def _pair(records, rows, regime, finding, task, model_a, model_b, budget=None, check=None) -> list[dict]:
    runs_a = statistics.best_runs(records, rows, model_a, task)
    runs_b = statistics.best_runs(records, rows, model_b, task)
    if not runs_a or not runs_b:
        return []
    metric = runs_a[0]["main_metric"]
    result = statistics.paired_comparison(runs_a, runs_b, metric)
    family = runs_a[0]["family"]
    reason = untestable(rows, regime, task, family, check or [model_a, model_b], budget)
    if not reason and check:  # the checkpoints compared (intermediate ones too) must be bracketed as well
        reason = _bracket_only(rows, regime, task, [model_a, model_b])
    return [{"finding": finding, "task": task, "family": family, "a": model_a, "b": model_b, "measure": metric,
             "delta": result["delta"], "ci_low": result["ci_low"], "ci_high": result["ci_high"], "p": result["p"],
             "p_bound": False, "n_seeds": f"{len(runs_a)}/{len(runs_b)}", "untestable": reason}]


def _bracket_only(rows, regime, task, models) -> str:
    """The LR-grid check alone (intermediate checkpoints sit below the crossover by design)."""
    for model in models:
        row = _row(rows, model, task)
        lrs = sorted(lr for lr, v in row["per_lr"].items() if v[2])
        if row["best_lr"] is None or len(lrs) < 3 or row["best_lr"] in (lrs[0], lrs[-1]):
            return (f"the LR grid does not bracket {regime.shown(model)}'s optimum (best LR {row['best_lr']:g} at "
                    "the grid's edge)")
    return ""


def relative_lr_spread(records: list[dict], baseline: float, best_lr: float,
                       n_resamples: int = statistics.N_RESAMPLES, seed: int = 0) -> tuple[float, np.ndarray]:
    """Std over learning rates of the mean test score, divided by the gain of the best LR's mean over the trivial
    baseline; and its bootstrap samples (seeds resampled within each LR). A model that learns more is not called
    less stable for it: the spread is measured in units of what it learned."""
    by_lr = {}
    for r in records:
        if r["status"] == "ok":
            by_lr.setdefault(r["lr"], []).append(float(r["test"][r["main_metric"]]))
    lrs = sorted(by_lr)
    scores = [np.asarray(by_lr[lr]) for lr in lrs]
    best = lrs.index(best_lr)
    means = np.array([s.mean() for s in scores])
    value = float(np.std(means) / (means[best] - baseline))
    rng = np.random.default_rng(seed)
    resampled = np.stack([rng.choice(s, size=(n_resamples, len(s))).mean(1) for s in scores], axis=1)
    gains = (resampled[:, best] - baseline).clip(1e-12)
    return value, np.std(resampled, axis=1) / gains


def _stability(records, rows, regime, task, clm, mlm) -> list[dict]:
    runs = {m: [r for r in records if r["model"] == m and r["task"] == task] for m in (clm, mlm)}
    row = {m: _row(rows, m, task) for m in (clm, mlm)}
    if any(row[m] is None or row[m]["best_lr"] is None or len({r["lr"] for r in runs[m] if r["status"] == "ok"}) < 2
           for m in (clm, mlm)):
        return []
    family = row[clm]["family"]
    baseline = statistics.trivial_baseline(rows, task)
    reason = untestable(rows, regime, task, family, [clm, mlm])
    if baseline is None:
        reason = reason or "the task's trivial baseline is unknown"
    else:
        for m in (clm, mlm):
            if not reason and row[m]["mean"] <= baseline:
                reason = f"{regime.shown(m)} does not clear the trivial baseline"
    base = baseline if baseline is not None else 0.0
    if not reason:
        spread_a, samples_a = relative_lr_spread(runs[clm], base, row[clm]["best_lr"])
        spread_b, samples_b = relative_lr_spread(runs[mlm], base, row[mlm]["best_lr"], seed=1)
        deltas = samples_a - samples_b
        low, high = float(np.percentile(deltas, 2.5)), float(np.percentile(deltas, 97.5))
        p, bound = statistics.bootstrap_p(deltas)
        delta = spread_a - spread_b
    else:
        delta = low = high = p = math.nan
        bound = False
    return [{"finding": "stability", "task": task, "a": clm, "b": mlm, "measure": "LR spread / gain", "delta": delta,
             "ci_low": low, "ci_high": high, "p": p, "p_bound": bound,
             "n_seeds": f"{len(runs[clm])}/{len(runs[mlm])} runs", "untestable": reason}]


def _corrected(out: list[dict]) -> list[dict]:
    """Holm across every testable comparison, then each one's verdict on its claim."""
    testable = [r for r in out if not r["untestable"]]
    for r, adjusted in zip(testable, statistics.holm([r["p"] for r in testable])):
        r["p_holm"] = adjusted
    for r in out:
        r.setdefault("p_holm", math.nan)
        r["verdict"] = "not testable" if r["untestable"] else _verdict(r, CLAIMS[r["finding"]][1])
    return out


def _verdict(r: dict, direction: int) -> str:
    significant = r["p_holm"] < ALPHA
    if direction == 0:  # "A on par or better": only A significantly below B contradicts it
        return "contradicts" if significant and r["delta"] < 0 else "supports"
    if significant and r["delta"] * direction > 0:
        return "supports"
    return "contradicts" if significant else "not significant"


def verdicts(rows: list[dict], families: set[str] | None = None) -> list[dict]:
    """One verdict per finding: agrees / disagrees / mixed / inconclusive at this scale, or not testable at this
    scale with the reasons. A family finding with no task of its family in `families` is not testable either."""
    out = []
    for finding, (claim, _) in CLAIMS.items():
        mine = [r for r in rows if r["finding"] == finding]
        family = next((f for f, k in FAMILY_FINDING.items() if k == finding), None)
        if not mine:
            if family and families is not None and family not in families:
                out.append({"finding": finding, "claim": claim, "tasks": "", "comparisons": "0", "supporting": 0,
                            "contradicting": 0, "verdict": f"not testable at this scale: no {family.upper()} task"})
            continue
        tested = [r for r in mine if not r["untestable"]]
        tasks = ", ".join(sorted({r["task"] for r in mine}))
        count = f"{len(tested)} of {len(mine)}"
        if not tested:
            reasons = list(dict.fromkeys(r["untestable"] for r in mine))
            more = f" (and {len(reasons) - 2} more)" if len(reasons) > 2 else ""
            out.append({"finding": finding, "claim": claim, "tasks": tasks, "comparisons": count, "supporting": 0,
                        "contradicting": 0,
                        "verdict": "not testable at this scale: " + "; ".join(reasons[:2]) + more})
            continue
        counted = [r for r in tested if finding != "data_efficiency" or names.parse_name(r["a"]).step is not None]
        support = sum(r["verdict"] == "supports" for r in counted)
        against = sum(r["verdict"] == "contradicts" for r in counted)
        if finding == "data_efficiency":  # the gap must also close: the end's gap below the earliest one
            for task in {r["task"] for r in tested}:
                curve = [r for r in tested if r["task"] == task]
                if len(curve) > 1 and curve[-1]["delta"] >= curve[0]["delta"]:
                    against += 1
        verdict = ("agrees" if support and not against else "disagrees" if against and not support
                   else "mixed" if support else "inconclusive")
        out.append({"finding": finding, "claim": claim, "tasks": tasks, "comparisons": count, "supporting": support,
                    "contradicting": against, "verdict": f"{verdict} at this scale"})
    return out


def gap_over_pretraining(tested: list[dict], regime: Regime) -> list[dict]:
    """The CLM - MLM40 gap along pretraining, per task: the data-efficiency comparisons (intermediate checkpoints,
    then the final, decayed one) with the tokens per parameter their checkpoints saw and the paper's crossover for
    the task's family, in pretraining order."""
    out = []
    for r in tested:
        if r["finding"] == "data_efficiency":
            p = names.parse_name(r["a"])
            out.append({**r, "tokens_per_parameter": regime.tokens_per_parameter(r["a"]), "final": p.step is None,
                        "crossover": CROSSOVER[r["family"]]})
    return sorted(out, key=lambda r: (r["task"], r["tokens_per_parameter"]))


def gap_trend(curve: list[dict]) -> str:
    """What one task's gap curve shows, in words. A checkpoint counts as a lead for one objective when the gap's 95%
    CI excludes 0. The gap *crosses* when one objective leads at an earlier checkpoint and the other at a later one;
    CLM - MLM40 *falls* (or *rises*) when the last gap is below (above) the first and their CIs do not overlap."""
    if len(curve) < 2:
        return "one checkpoint: no curve"
    tpp = lambda r: f"{r['tokens_per_parameter']:.3g}"  # noqa: E731
    leads = [(r, "CLM" if r["ci_low"] > 0 else "MLM40" if r["ci_high"] < 0 else None) for r in curve]
    decisive = [(r, lead) for r, lead in leads if lead]
    switches = [(a, b) for a, b in zip(decisive, decisive[1:]) if a[1] != b[1]]
    if switches:
        (a, lead_a), (b, lead_b) = switches[0]
        text = (f"{lead_a} leads at {tpp(a)} tokens per parameter and {lead_b} at {tpp(b)}: the gap crosses "
                "between them")
        text += f" (and the lead switches {len(switches) - 1} more time(s))" if len(switches) > 1 else ""
    elif decisive:
        lead = decisive[0][1]
        text = (f"{lead} leads at {len(decisive)} of {len(curve)} checkpoints up to {tpp(curve[-1])} tokens per "
                "parameter and the other objective at none: no crossing within the study")
    else:
        text = f"no checkpoint's CI excludes 0 up to {tpp(curve[-1])} tokens per parameter"
    first, last = curve[0], curve[-1]
    if not _overlap(first, last):  # signed: the paper's finding 2 predicts CLM - MLM falls as pretraining goes on
        change = f"CLM - MLM40 {'falls' if last['delta'] < first['delta'] else 'rises'} from {first['delta']:+.3f} " \
                 f"to {last['delta']:+.3f}"
    else:
        change = f"from {first['delta']:+.3f} to {last['delta']:+.3f}, a change the overlapping 95% CIs do not resolve"
    return f"{text}; {change}"


def _overlap(a: dict, b: dict) -> bool:
    return not (a["ci_high"] < b["ci_low"] or b["ci_high"] < a["ci_low"])
