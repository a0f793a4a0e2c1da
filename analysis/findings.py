"""The paper's findings, each a pre-declared hypothesis with its own test, tested on a results directory only where
the study can test them, and a verdict per finding. docs/protocol.md ("The findings' decision rules") gives the
rules and why; the report prints them under its findings table.

The models each finding compares are found by their names (`core.names`): `<s>-clm-<T>` and `<s>-mlm40-<T>`, their
intermediate checkpoints `<run>-<step>`, PFS runs `<s>-clm-<k>-mlm40-<T>` and the CPT pair `<s>-clm-dec<B>-mlm40-<T>`
/ `<s>-mlm40-dec<B>-mlm40-<T>`. A model pretrained several times (`<name>-pseed<k>`) is one model, its pretraining
run a random effect (`analysis.statistics`: units are the runs' means).

| finding (the paper) | comparison | supports when (one-sided, Holm within the finding) |
|---|---|---|
| TC: CLM is on par with MLM or better | CLM - MLM40, finals | > -0.01 (non-inferiority, TOST lower test: `TC_MARGIN`) |
| SC / QA: MLM is better past the crossover | MLM40 - CLM, final checkpoints | MLM40 - CLM > 0 |
| IR: MLM is better past its crossover | MLM40 - CLM, final checkpoints | MLM40 - CLM > 0 |
| IR: the gap narrows with model size | (MLM40 - CLM) at the largest size - at the smallest, one budget | < 0 |
| data efficiency: CLM leads early, the gap closes | CLM - MLM40 at the first checkpoint; its slope | > 0; < 0 (both) |
| stability: CLM fine-tuning is more stable across LRs | relative LR spread per unit, CLM - MLM40 | CLM - MLM40 < 0 |
| PFS beats MLM40 / CLM alone at the same budget | PFS - MLM40, PFS - CLM | > 0 |
| MLM CPT from a CLM base beats continued MLM on an MLM base | CPT(CLM base) - CPT(MLM40 base) | > 0 |
| MLM CPT improves the CLM base itself | CPT(CLM base) - the CLM base | > 0 |

A test supports the claim when its Holm-corrected one-sided p on the claim's side is below `ALPHA`, contradicts it
when the p on the other side is, else is not significant (`_corrected`); what makes a comparison testable is
`untestable`'s. The crossover (MLM overtakes CLM: SC/QA by 10k steps of the paper's 610m model, IR by 20k) is only
known to lie between the released checkpoints that bracket it: SC/QA 19-78 tokens per parameter, IR 39-155.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from analysis import statistics
from core import names, store
from core.formatting import p_cell
from core.paper import (
    CROSSOVER_STEPS,
    PAPER_CHECKPOINTS,
    PAPER_EMBEDDINGS,
    PAPER_LRS,
    PAPER_PARAMETERS,
    PAPER_PFS_SWITCHES,
    PAPER_SEEDS,
    PAPER_TOKENS_PER_STEP,
)

ALPHA = 0.025  # per side: each comparison is a three-way decision (supports / contradicts / not significant), 5% in all
TC_MARGIN = 0.01  # "on par": CLM - MLM40 above -0.01 of the task's metric (fractions), declared before any result
PFS_SMALLEST_BUDGET = min(PAPER_PFS_SWITCHES)  # the paper's smallest PFS budget (steps)
CONVENTIONS = ("counted", "no embeddings")  # input embedding in, LM head out | neither embedding


def _per_parameter(steps: int, convention: str = "counted") -> float:
    """Tokens per parameter of the paper's 610m model after `steps`, under `convention`."""
    count = PAPER_PARAMETERS["610m"] - (PAPER_EMBEDDINGS["610m"] if convention == "no embeddings" else 0)
    return steps * PAPER_TOKENS_PER_STEP / count


def crossover_interval(family: str, convention: str = "counted") -> tuple[float, float] | None:
    """The tokens per parameter between the released checkpoints that bracket the paper's crossover for `family` (None:
    TC)."""
    if (step := CROSSOVER_STEPS.get(family)) is None:
        return None
    i = PAPER_CHECKPOINTS.index(step)
    return _per_parameter(PAPER_CHECKPOINTS[i - 1], convention), _per_parameter(PAPER_CHECKPOINTS[i + 1], convention)


@dataclass(frozen=True)
class Regime:
    """How many tokens a model's name means: `tokens_per_step` per step of the names, over `parameters` (input embedding
    in, LM head out; one count for every size, or {size: count}), of which `embeddings` are the input embedding (None:
    unknown, the no-embeddings convention not shown); `step_divisor`: the name's steps over the run's (None: 1 for a
    paper-scale name under the paper's sizes, else unknown). The default is the paper's."""

    tokens_per_step: float = PAPER_TOKENS_PER_STEP
    parameters: float | dict = field(default_factory=lambda: dict(PAPER_PARAMETERS))
    scale: str | None = None  # the manifest scale of the names: the reasons name models as a reader sees them
    embeddings: float | dict | None = field(default_factory=lambda: dict(PAPER_EMBEDDINGS))
    # task -> (low, high): LRs an earlier, wider grid measured worse on either side of this grid, declared by the
    # study (`parse_brackets`); an optimum this grid cannot bracket itself counts as bracketed by them, named so
    bracketed_by: dict = field(default_factory=dict)
    step_divisor: int | None = None
    # model -> {"parameters", "steps", "max_steps"} as its results recorded them (`recorded_runs`): a name the
    # rules above know nothing of (outside the grammar, or at a scale without a count) is shown with these
    recorded: dict = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.parameters, dict) and isinstance(self.embeddings, dict):  # a toy count, paper embeddings
            object.__setattr__(self, "embeddings", None)

    def shown(self, model: str) -> str:
        return names.scaled_name(model, self.scale)

    def tokens_per_parameter(self, model: str, convention: str = "counted") -> float | None:
        if (p := names.try_parse_name(model)) is None:
            return None
        pick = lambda v: v.get(p.size) if isinstance(v, dict) else v  # noqa: E731
        count = pick(self.parameters)
        if convention == "no embeddings":
            count = count - embeddings if count and (embeddings := pick(self.embeddings)) is not None else None
        steps = p.paper_step if p.paper_step is not None else p.total_steps
        return steps * self.tokens_per_step / count if count else None

    def parameters_of(self, shown: str) -> float | None:
        """The parameters (input embedding in, LM head out) of a name as a reader sees it (its scale first): the study's
        count, or the paper's size table for a paper-scale name under the paper's sizes, else what its results
        recorded (`recorded`); None when unknown."""
        if (p := names.try_parse_name(shown)) is not None and not isinstance(self.parameters, dict):
            return self.parameters
        known = self.parameters.get(p.size) if p is not None and not p.scale else None
        return known if known is not None else self.recorded.get(shown, {}).get("parameters")

    def steps_of(self, shown: str) -> tuple[int, int] | None:
        """(the step the run saved this checkpoint at, the run's total) of a name as a reader sees it (from the name,
        else what its results recorded); None when unknown."""
        p = names.try_parse_name(shown)
        divisor = self.step_divisor or (1 if p and not p.scale and isinstance(self.parameters, dict) else None)
        if p is None or divisor is None:
            run = self.recorded.get(shown)
            return (run["steps"], run["max_steps"]) if run else None
        return (p.paper_step or p.total_steps) // divisor, p.total_steps // divisor

    def both(self, model: str) -> str:
        """ "48.4 (118 without embeddings)": the tokens per parameter under both conventions."""
        counted, bare = (self.tokens_per_parameter(model, c) for c in CONVENTIONS)
        return f"{counted:.3g}" + (f" ({bare:.3g} without embeddings)" if bare is not None else "")


def recorded_runs(records: list[dict]) -> dict:
    """`Regime.recorded`: {model: its parameters and steps} as its results recorded them from the model's
    run_info.json (`evaluation.run.model_run`), a pretraining replicate under its group's name."""
    return {
        statistics.replicate_group(r["model"]): run for r in records if (run := store.run_config(r).get("model_run"))
    }


def phase(regime: Regime, model: str, family: str) -> str:
    """ "before", "inside" or "past" the family's crossover interval under every known convention, both places named
    when the conventions disagree ("before (counted) / inside (no embeddings)"); "no crossover" (TC) or "unknown"."""
    if family not in CROSSOVER_STEPS:
        return "no crossover"
    places = {}
    for convention in CONVENTIONS:
        if (tpp := regime.tokens_per_parameter(model, convention)) is not None:
            low, high = crossover_interval(family, convention)
            places[convention] = "before" if tpp < low else "inside" if tpp <= high else "past"
    if "counted" not in places:
        return "unknown"
    if len(set(places.values())) == 1:
        return places["counted"]
    return " / ".join(f"{place} ({convention})" for convention, place in places.items())


# finding -> (the claim as the paper states it, the side of A - B the claim predicts: +1 above, -1 below the bound)
CLAIMS = {
    "tc_clm_on_par": ("TC: CLM is on par with MLM or better", +1),
    "sc_mlm_better": ("SC: MLM is better past the crossover (19-78 tokens/parameter)", +1),
    "qa_mlm_better": ("QA: MLM is better past the crossover (19-78 tokens/parameter)", +1),
    "ir_mlm_better": ("IR: MLM is better past its crossover (39-155 tokens/parameter)", +1),
    "ir_gap_narrows": ("IR: the MLM - CLM gap narrows with model size", -1),
    "data_efficiency": ("CLM leads early in pretraining and the gap closes", -1),
    "stability": ("CLM fine-tuning is more stable across learning rates (spread relative to the gain)", -1),
    "pfs_vs_mlm": ("PFS (CLM then MLM40) beats MLM40 alone at the same budget", +1),
    "pfs_vs_clm": ("PFS (CLM then MLM40) beats CLM alone at the same budget", +1),
    "cpt_vs_mlm_cpt": ("MLM CPT from a CLM base beats continued MLM on an MLM base", +1),
    "cpt_vs_base": ("MLM CPT improves the CLM base itself", +1),
}
FAMILY_FINDING = {"tc": "tc_clm_on_par", "sc": "sc_mlm_better", "qa": "qa_mlm_better", "ir": "ir_mlm_better"}
FINDING_FAMILY = {**{finding: family for family, finding in FAMILY_FINDING.items()}, "ir_gap_narrows": "ir"}
BOUND = {"tc_clm_on_par": -TC_MARGIN}  # the claim's bound on A - B (0 for every other finding)
IMPORTED_WHERE = "on the paper's own runs (this project's statistics)"  # a verdict on imported runs says so
UNTESTED = dict.fromkeys(("delta", "p", "p_other", "ci_low", "ci_high"), math.nan)


def hypothesis(finding: str) -> str:
    """The one-sided alternative a finding's comparisons test, in words ("A - B > 0")."""
    side, bound = CLAIMS[finding][1], BOUND.get(finding, 0.0)
    what = {
        "data_efficiency": "slope of CLM - MLM40 per doubling",
        "ir_gap_narrows": "(MLM40 - CLM) at the largest size - at the smallest",
    }.get(finding, "A - B")
    return f"{what} {'>' if side > 0 else '<'} {bound:g}"


def _final_pairs(models: set[str]) -> list[tuple[str, int, str | None, str | None]]:
    """(size, budget, its CLM final, its MLM40 final; None where absent) of every final single-objective run."""
    finals = sorted(
        {
            (p.size, p.total_steps)
            for m in models
            if (p := names.try_parse_name(m)) and p.kind == "single" and p.paper_step is None
        }
    )
    return [
        (
            size,
            total,
            *(m if (m := names.compose(size, objective, total)) in models else None for objective in ("clm", "mlm40")),
        )
        for size, total in finals
    ]


def _row(rows, model, task):
    return next((r for r in rows if r["model"] == model and r["task"] == task), None)


def parse_brackets(text: str | None) -> dict[str, tuple[float, float]]:
    """`"conll2003=0.001,0.03;mnli=0.0001,0.003"` -> {task: (low, high)}, the LRs an earlier, wider grid measured worse
    on either side of this study's grid; {} for None or ""."""
    out = {}
    for item in filter(None, (part.strip() for part in (text or "").split(";"))):
        task, _, values = item.partition("=")
        try:
            low, high = (float(v) for v in values.split(","))
        except ValueError:
            low = high = math.nan
        if not task.strip() or not 0 < low < high or task.strip() in out:
            raise ValueError(
                f"bracket {item!r}: give each task once as TASK=LOW,HIGH, the earlier grid's LRs "
                "below and above this grid (0 < LOW < HIGH), tasks separated by ';'"
            )
        out[task.strip()] = (low, high)
    return out


def _bracket(rows, regime: Regime, task: str, model: str) -> tuple[str | None, str | None]:
    """(why `model`'s LR grid does not bracket its optimum on `task`, or None; the declared bracket that makes it
    bracketed, or None)."""
    row = _row(rows, model, task)
    lrs = sorted(lr for lr, v in row["per_lr"].items() if v[2]) if row else []
    best, shown = (row["best_lr"] if row else None), regime.shown(model)
    if best is None:
        return f"{shown} has no finished run", None
    if row.get("imported") and len(lrs) < len(PAPER_LRS):  # the paper's own runs: its grid, partly imported
        missing = len(PAPER_LRS) * len(PAPER_SEEDS) - row["n_runs"]
        reason = (
            f"{shown}: {len(lrs)} of the paper's {len(PAPER_LRS)} LRs imported ({missing} runs missing), the "
            "best of the imported LRs is not known to be the paper's optimum"
        )
    elif len(lrs) < 3:
        reason = f"{shown}'s LR grid has {len(lrs)} finished LR(s): an optimum is never bracketed by fewer than 3"
    elif best in (lrs[0], lrs[-1]):
        reason = (
            f"best LR on the grid's edge: {shown}'s optimum is not bracketed (best LR {best:g}, grid "
            f"{lrs[0]:g}-{lrs[-1]:g})"
        )
    else:
        return None, None
    if task not in regime.bracketed_by:
        return reason, None
    low, high = regime.bracketed_by[task]
    if not low < lrs[0] <= lrs[-1] < high:
        return (
            f"{reason}; the declared earlier grid's {low:g} and {high:g} do not lie on either side of this grid "
            f"({lrs[0]:g}-{lrs[-1]:g})"
        ), None
    return None, (
        f"bracketed by an earlier grid ({task}: {low:g} and {high:g} measured worse than this grid's "
        f"{lrs[0]:g}-{lrs[-1]:g} in an earlier run; declared, not measured in this study)"
    )


def edge_reasons(rows, regime: Regime, task: str, models: list[str]) -> list[str]:
    """One reason per model whose LR grid does not bracket its optimum on `task`, unless a declared bracket does
    (`_bracket`)."""
    return [reason for model in dict.fromkeys(models) if (reason := _bracket(rows, regime, task, model)[0])]


def declared_brackets(rows, regime: Regime, task: str, models: list[str]) -> str:
    """The declared bracket a comparison of `models` on `task` relies on, shown in its row ("" when none)."""
    return next((note for model in dict.fromkeys(models) if (note := _bracket(rows, regime, task, model)[1])), "")


def untestable(
    rows,
    regime: Regime,
    task: str,
    family: str,
    models: list[str],
    budget: int | None = None,
    grid: list[str] | None = None,
) -> str:
    """Every reason a comparison of `models` on `task` cannot test the claim, joined by "; " ("" when it can): the
    crossover interval, the PFS budget, chance and the LR grid's edge (of the models in `grid`, default `models`)."""
    reasons = []
    for model in dict.fromkeys(models):
        where, shown = phase(regime, model, family), regime.shown(model)
        if where == "unknown":
            reasons.append(f"{shown}: tokens per parameter unknown")
        elif where not in ("past", "no crossover"):
            low, high = crossover_interval(family)
            text = (
                "past the crossover interval under one parameter convention only"
                if "past" in where
                else "inside the crossover interval"
                if "inside" in where
                else "below the paper's crossover interval"
            )
            reasons.append(
                f"{text}: {shown} saw {regime.both(model)} tokens per parameter; the paper's "
                f"{family.upper()} crossover lies in {low:.0f}-{high:.0f} "
                f"({'-'.join(f'{v:.0f}' for v in crossover_interval(family, 'no embeddings'))} without "
                "embeddings)"
            )
    if (
        budget is not None
        and (tpp := regime.tokens_per_parameter(models[0])) is not None
        and tpp < _per_parameter(budget)
    ):
        reasons.append(
            f"budget of {tpp:.3g} tokens per parameter, below the paper's smallest ({_per_parameter(budget):.0f})"
        )
    return "; ".join(
        reasons + chance_reasons(rows, regime, task, grid or models) + edge_reasons(rows, regime, task, grid or models)
    )


def chance_reasons(rows, regime: Regime, task: str, models: list[str]) -> list[str]:
    """One reason per model not shown to have learned `task` (`statistics.above_baseline`), or one when the task has no
    known baseline: a difference between models that have not learned the task says nothing about the claim."""
    out = []
    for model in dict.fromkeys(models):
        row = _row(rows, model, task)
        if row is None or row["best_lr"] is None:
            continue  # no finished run: `edge_reasons` names it
        if (above := statistics.above_baseline(row)) is None:
            return [f"{task} has no known trivial baseline: whether its models learned it is not known"]
        if not above:
            low = row["mean"] if math.isnan(row["ci_low"]) else row["ci_low"]
            where = "at" if statistics.at_baseline(row) else f"95% CI from {low:.4g}, not above"
            out.append(
                f"{regime.shown(model)} not above chance on {task} ({where} the trivial baseline "
                f"{row['trivial_baseline']:.4g})"
            )
    return out


def comparisons(records: list[dict], rows: list[dict], regime: Regime | None = None) -> list[dict]:
    """Every (finding, task) comparison the results allow, with its testability, CI, Holm-adjusted p and verdict. Model
    names are replicate groups (`statistics.summarize`'s rows)."""
    regime = regime or Regime()
    models = {r["model"] for r in rows}
    parsed = {m: p for m in models if (p := names.try_parse_name(m)) is not None}
    # mteb records (evaluation.mteb: no LR x seed grid, mostly zero-shot) are not the protocol these claims are about
    tasks = sorted({r["task"] for r in records if store.record_kind(r) != "mteb"})
    family = {r["task"]: r["family"] for r in rows}
    out = []
    sizes = {}  # budget -> [(size, CLM, MLM40)]: the IR gap across sizes compares pairs of one budget
    for size, total, clm, mlm in _final_pairs(models):
        if clm and mlm:
            sizes.setdefault(total, []).append((size, clm, mlm))
            for task in tasks:
                finding = FAMILY_FINDING[family[task]]
                a, b = (clm, mlm) if finding == "tc_clm_on_par" else (mlm, clm)
                out += _pair(records, rows, regime, finding, task, a, b)
                out += stability(records, rows, regime, task, clm, mlm)
                out += data_efficiency(records, rows, regime, task, family[task], clm, mlm)
        for model, p in sorted(parsed.items()):
            if p.kind == "pfs" and p.paper_step is None and (p.size, p.total_steps) == (size, total) and p.ratio == 40:
                for task in tasks:
                    for finding, other in (("pfs_vs_mlm", mlm), ("pfs_vs_clm", clm)):
                        if other:
                            out += _pair(records, rows, regime, finding, task, model, other, PFS_SMALLEST_BUDGET)
    for model, p in sorted(parsed.items()):
        if p.kind == "cpt" and p.base == "clm" and p.paper_step is None:
            other, base = dataclasses.replace(p, base="mlm40").format(), p.base_run
            for task in tasks:
                if other in models:
                    out += _pair(
                        records, rows, regime, "cpt_vs_mlm_cpt", task, model, other, check=[base, model, other]
                    )
                if base in models:
                    out += _pair(records, rows, regime, "cpt_vs_base", task, model, base, check=[base, model])
    for total, pairs in sorted(sizes.items()):
        for task in (t for t in tasks if family[t] == "ir"):
            out += gap_across_sizes(records, rows, regime, task, pairs)
    return _corrected(out)


def size_value(size: str) -> float:
    """The parameters a name's size says ("210m" -> 2.1e8, "1b" -> 1e9): the order of the sizes."""
    return float(size[:-1]) * (1e6 if size.endswith("m") else 1e9)


def gap_across_sizes(records, rows, regime: Regime, task: str, pairs: list[tuple[str, str, str]]) -> list[dict]:
    """The IR gap across sizes on `task` at one budget (`pairs`: [(size, CLM, MLM40)]): (MLM40 - CLM) at the largest
    size minus at the smallest on the same test instances (`statistics.contrast`), one-sided (< 0). One row, a = the
    largest size's MLM40, b = the smallest's. Not testable with one size (a regime with one parameter count has one size
    whatever its names say) or when any of the four models is not (`untestable`)."""
    pairs = sorted(pairs, key=lambda pair: size_value(pair[0]))
    (small, clm_small, mlm_small), (large, clm_large, mlm_large) = pairs[0], pairs[-1]
    models = [mlm_large, clm_large, mlm_small, clm_small]
    runs = [statistics.best_runs(records, rows, m, task) for m in models]
    if not all(runs):
        return []
    metric = store.main_metric(runs[0][0])
    row = {
        "finding": "ir_gap_narrows",
        "task": task,
        "family": "ir",
        "a": mlm_large,
        "b": mlm_small,
        "measure": f"(MLM40 - CLM) at {large} - at {small} ({metric})",
        "entity_f1": "",
        "n_seeds": "/".join(_n_units(r) for r in runs),
        "hypothesis": hypothesis("ir_gap_narrows"),
        **UNTESTED,
        "bracket": declared_brackets(rows, regime, task, models),
    }
    one = (
        None
        if isinstance(regime.parameters, dict)
        else (
            f"one model size ({regime.parameters:,.0f} parameters: this study trains its "
            f"{', '.join(size for size, _, _ in pairs)} name(s) at one architecture)"
        )
    )
    if len(pairs) < 2:
        return [
            {
                **row,
                "b": clm_small,
                "measure": f"MLM40 - CLM at {small} ({metric})",
                "bracket": "",
                "n_seeds": "/".join(_n_units(r) for r in runs[:2]),
                "untestable": one or f"one model size ({small})",
            }
        ]
    if one:
        return [{**row, "untestable": one}]
    return [
        {
            **row,
            **_tested("ir_gap_narrows", statistics.contrast(runs, [1, -1, -1, 1], metric)),
            "untestable": untestable(rows, regime, task, "ir", models),
        }
    ]


def _n_units(runs: list[dict]) -> str:
    """ "3" seeds, or "3 runs x 3" when the model has several pretraining runs."""
    count = len({r["model"] for r in runs})
    return str(len(runs)) if count == 1 else f"{count} runs x {len(runs) // count}"


def _pair(records, rows, regime, finding, task, model_a, model_b, budget=None, check=None) -> list[dict]:
    runs_a, runs_b = (statistics.best_runs(records, rows, m, task) for m in (model_a, model_b))
    if not runs_a or not runs_b:
        return []
    metric, family, grid = store.main_metric(runs_a[0]), runs_a[0]["family"], [*(check or []), model_a, model_b]
    reason = untestable(rows, regime, task, family, check or [model_a, model_b], budget, grid=grid)
    if bare := sorted({regime.shown(r["model"]) for r in runs_a + runs_b if not _has_instances(r, metric)}):
        reason = "; ".join(
            filter(None, [reason, f"{', '.join(bare)}: runs without per-instance test scores (a trimmed import)"])
        )
        tested = {**UNTESTED, "hypothesis": hypothesis(finding)}
    else:
        tested = _tested(finding, statistics.paired_comparison(runs_a, runs_b, metric))
    entity = ""
    if finding == "tc_clm_on_par" and all(_has_instances(r, "entity_f1") for r in runs_a + runs_b):
        e = statistics.paired_comparison(runs_a, runs_b, "entity_f1")
        entity = f"{e['delta']:+.4f} [{e['ci_low']:+.4f}, {e['ci_high']:+.4f}]"
    return [
        {
            "finding": finding,
            "task": task,
            "family": family,
            "a": model_a,
            "b": model_b,
            "measure": metric,
            "entity_f1": entity,
            **tested,
            "n_seeds": f"{_n_units(runs_a)}/{_n_units(runs_b)}",
            "untestable": reason,
            "bracket": declared_brackets(rows, regime, task, grid),
        }
    ]


def _has_instances(record: dict, metric: str) -> bool:
    """Whether a run kept the per-instance test scores of `metric` a paired comparison needs (this project's runs do;
    imported TC runs keep no entity counts, a trimmed import no per-instance scores at all)."""
    if (kept := store.kept_scores(record)) is not None:
        return metric in kept
    rows = store.instances(record)
    return bool(rows) and ("entity_tp" if metric == "entity_f1" else metric) in rows[0]


def _tested(finding: str, result: dict, side: int | None = None) -> dict:
    """The one-sided tests of a `statistics.t_test` result ("delta", "se", "df") on the finding's side (or `side`) of
    its bound, and on the other side, with its 95% CI."""
    side, bound = side or CLAIMS[finding][1], BOUND.get(finding, 0.0)
    estimate, se, df = result["delta"], result["se"], result["df"]
    return {
        "delta": estimate,
        "hypothesis": hypothesis(finding),
        "p": statistics.one_sided(side * estimate, se, df, side * bound),
        "p_other": statistics.one_sided(-side * estimate, se, df, -side * bound),
        "ci_low": result["ci_low"],
        "ci_high": result["ci_high"],
    }


MIN_STABILITY_LRS = 3  # LRs fine-tuned in this study per model: a spread over 2 LRs next to the optimum is no spread


def unit_curves(records: list[dict]) -> dict:
    """{unit: {lr: mean test score}} of one model's finished runs; the unit is the fine-tuning seed for a model
    pretrained once, the pretraining run (its mean over seeds) for one pretrained several times. Only units finished at
    every LR: the curves are paired across LRs."""
    ok = [r for r in records if store.scored(r)]
    lrs = {r["lr"] for r in ok}
    several = len({r["model"] for r in ok}) > 1
    curves = {}
    for r in ok:
        curves.setdefault(r["model"] if several else r["seed"], {}).setdefault(r["lr"], []).append(
            statistics.main_score(r, "test")
        )
    return {
        unit: {lr: float(np.mean(v)) for lr, v in sorted(c.items())}
        for unit, c in sorted(curves.items())
        if set(c) == lrs
    }


def relative_lr_spread(records: list[dict], baseline: float, best_lr: float) -> np.ndarray:
    """Per unit (`unit_curves`), the standard deviation over LRs of its test score divided by its gain over the trivial
    baseline at the model's best LR: a model that learns more is not called less stable for it."""
    return np.array([np.std(list(c.values())) / (c[best_lr] - baseline) for c in unit_curves(records).values()])


def stability(records, rows, regime, task, clm, mlm) -> list[dict]:
    """The stability test on `task`: the mean relative LR spread (`relative_lr_spread`), CLM - MLM40, Welch t over the
    two models' units. Testable where both models were fine-tuned at `MIN_STABILITY_LRS` or more LRs in this study (a
    declared bracket does not enter the spread), learned the task, and every unit's gain at the best LR is positive."""
    runs = {
        m: [r for r in records if statistics.replicate_group(r["model"]) == m and r["task"] == task] for m in (clm, mlm)
    }
    row = {m: _row(rows, m, task) for m in (clm, mlm)}
    if any(row[m] is None or row[m]["best_lr"] is None for m in (clm, mlm)):
        return []
    family = row[clm]["family"]
    baseline = statistics.trivial_baseline(rows, task)
    reasons = [untestable(rows, regime, task, family, [clm, mlm])]
    grids = {m: sorted({r["lr"] for r in runs[m] if store.scored(r)}) for m in (clm, mlm)}
    reasons += [
        f"{regime.shown(m)} was fine-tuned at {len(lrs)} LR(s) in this study: a spread across LRs needs "
        f"{MIN_STABILITY_LRS}"
        for m, lrs in grids.items()
        if len(lrs) < MIN_STABILITY_LRS
    ]
    values = {}
    if baseline is not None and not any(reasons):
        for m in (clm, mlm):
            values[m] = relative_lr_spread(runs[m], baseline, row[m]["best_lr"])
            if len(values[m]) < 2:
                reasons.append(
                    f"{regime.shown(m)} has {len(values[m])} unit(s) finished at every LR: a spread's variance needs 2"
                )
            elif not np.all(np.isfinite(values[m])) or np.any(values[m] <= 0):
                reasons.append(f"a unit of {regime.shown(m)} does not clear the trivial baseline at its best LR")
    reason = "; ".join(filter(None, reasons))
    tested = {**UNTESTED, "hypothesis": hypothesis("stability")}
    if not reason:
        parts = [(float(np.var(values[m], ddof=1)) / len(values[m]), len(values[m]) - 1) for m in (clm, mlm)]
        tested = _tested("stability", statistics.t_test(float(values[clm].mean() - values[mlm].mean()), parts, 0.0))
    count = f"{len(grids[clm])}/{len(grids[mlm])} LRs" + (
        f", {len(values[clm])}/{len(values[mlm])} units" if len(values) == 2 else ""
    )
    return [
        {
            "finding": "stability",
            "task": task,
            "family": family,
            "a": clm,
            "b": mlm,
            "measure": "LR spread / gain",
            **tested,
            "n_seeds": count,
            "untestable": reason,
            "bracket": declared_brackets(rows, regime, task, [clm, mlm]),
        }
    ]


def checkpoints(rows, clm: str, mlm: str, task: str) -> list[tuple[str, str]]:
    """The (CLM, MLM40) checkpoint pairs both runs saved and evaluated on `task`, in pretraining order, the final pair
    last."""

    def steps(run):
        return {
            p.paper_step
            for m in {r["model"] for r in rows if r["task"] == task}
            if (p := names.try_parse_name(m)) and p.paper_step is not None and p.run_name == run
        }

    pairs = [(names.step_name(clm, s), names.step_name(mlm, s)) for s in sorted(steps(clm) & steps(mlm))]
    return [*pairs, (clm, mlm)] if pairs else []


def gap_points(records, rows, regime: Regime, task: str, family: str, clm: str, mlm: str) -> list[dict]:
    """The CLM - MLM40 difference at every checkpoint pair (descriptive), with its tokens per parameter under both
    conventions and its place against the crossover interval."""
    out = []
    for a, b in checkpoints(rows, clm, mlm, task):
        runs_a, runs_b = (statistics.best_runs(records, rows, m, task) for m in (a, b))
        if not runs_a or not runs_b:
            continue
        metric = store.main_metric(runs_a[0])
        result = statistics.paired_comparison(runs_a, runs_b, metric)
        final = names.parse_name(a).paper_step is None
        out.append(
            {
                "task": task,
                "family": family,
                "a": a,
                "b": b,
                "measure": metric,
                **{k: result[k] for k in ("delta", "se", "df", "ci_low", "ci_high", "parts")},
                "tokens_per_parameter": regime.tokens_per_parameter(a),
                "tokens_per_parameter_bare": regime.tokens_per_parameter(a, "no embeddings"),
                "final": final,
                "phase": phase(regime, a, family),
                "runs": (runs_a, runs_b),
            }
        )
    return out


def slope_fit(points: list[dict]) -> dict:
    """The `statistics.t_test` (slope, se, df, 95% CI) of the least-squares line of the points' differences on
    log2(tokens per parameter): variance sum(w_c^2 var_c) over checkpoints, df by Welch-Satterthwaite over the unit
    parts. With several pretraining runs on both sides the slope is fitted per run (run means at each checkpoint's best
    LR) and the runs are the units, plus the test instances' part sum(w_c^2 var_instances_c) (infinite df, as in
    `paired_comparison`)."""
    x = np.log2([p["tokens_per_parameter"] for p in points])
    weights = (x - x.mean()) / ((x - x.mean()) ** 2).sum()
    run_slopes = []
    for side in (0, 1):
        by_run = {}
        for p in points:
            for r in p["runs"][side]:
                by_run.setdefault(names.parse_name(r["model"]).pretrain_seed, {}).setdefault(p["a"], []).append(
                    statistics.main_score(r, "test")
                )
        run_slopes.append(
            [
                float(weights @ np.array([np.mean(run[p["a"]]) for p in points]))
                for run in by_run.values()
                if len(run) == len(points)
            ]
        )
    if all(len(s) > 1 for s in run_slopes):  # the pretraining runs are the units, plus the test instances' part
        parts = [(float(np.var(s, ddof=1)) / len(s), len(s) - 1) for s in run_slopes]
        instances = sum(
            w**2 * max(0.0, p["se"] ** 2 - sum(part for part, _ in p["parts"])) for w, p in zip(weights, points)
        )
        return statistics.t_test(float(np.mean(run_slopes[0]) - np.mean(run_slopes[1])), parts, instances)
    # one run on a side: the checkpoints' differences, each with its unit and instance variance
    parts = [(w**2 * part, df) for w, p in zip(weights, points) for part, df in p["parts"]]
    variance = float(sum(w**2 * p["se"] ** 2 for w, p in zip(weights, points)))
    estimate = float(weights @ np.array([p["delta"] for p in points]))
    return statistics.t_test(estimate, parts, variance - sum(part for part, _ in parts))


MIN_SLOPE_CHECKPOINTS = 3  # before the crossover under both conventions: a line through 2 points tests nothing
EARLY_CHECKPOINTS = 1  # the declared early set: the earliest stable-phase checkpoint pair both runs saved
LEAD = "CLM - MLM40 > 0 at the earliest checkpoint"  # the first half of the data-efficiency claim


def data_efficiency(records, rows, regime, task, family, clm, mlm) -> list[dict]:
    """Both data-efficiency tests on `task`, one row each: the lead (CLM - MLM40 > 0 at the earliest checkpoint pair)
    and the slope of the gap over the stable-phase checkpoints before the crossover interval under both conventions (all
    of them for TC), at least `MIN_SLOPE_CHECKPOINTS`. A reason either cannot be tested makes both not testable."""
    if not (points := gap_points(records, rows, regime, task, family, clm, mlm)):
        return []
    early = [p for p in points if not p["final"] and p["phase"] in ("before", "no crossover")]  # both conventions
    reasons = (
        []
        if len(early) >= MIN_SLOPE_CHECKPOINTS
        else [
            f"{len(early)} stable-phase checkpoint(s) before the crossover interval under both conventions: a "
            f"slope needs "
            f"{MIN_SLOPE_CHECKPOINTS}"
        ]
    )
    grid = [m for p in early for m in (p["a"], p["b"])]
    reasons += chance_reasons(rows, regime, task, grid) + edge_reasons(rows, regime, task, grid)
    common = {
        "finding": "data_efficiency",
        "task": task,
        "family": family,
        "a": clm,
        "b": mlm,
        "untestable": "; ".join(reasons),
        "bracket": declared_brackets(rows, regime, task, grid),
        "checkpoints": [p["tokens_per_parameter"] for p in early],
        **UNTESTED,
    }
    metric = points[0]["measure"]
    lead = {
        **common,
        "part": "lead",
        "measure": f"CLM - MLM40 at the earliest checkpoint ({metric})",
        "n_seeds": f"{EARLY_CHECKPOINTS} checkpoint",
        "hypothesis": LEAD,
    }
    slope = {
        **common,
        "part": "slope",
        "measure": f"slope of CLM - MLM40 per doubling ({metric})",
        "n_seeds": f"{len(early)} checkpoints",
        "hypothesis": hypothesis("data_efficiency"),
    }
    if early:
        lead.update(_tested("data_efficiency", early[0], side=+1), hypothesis=LEAD)
    if len(early) >= 2:
        slope.update(_tested("data_efficiency", slope_fit(early)))
    return [lead, slope]


def _corrected(out: list[dict]) -> list[dict]:
    """Holm within each finding, on each side, then each comparison's verdict."""
    for finding in CLAIMS:
        testable = [r for r in out if r["finding"] == finding and not r["untestable"]]
        for key in ("p", "p_other"):
            for r, adjusted in zip(testable, statistics.holm([r[key] for r in testable])):
                r[f"{key}_holm"] = adjusted
    for r in out:
        r.setdefault("p_holm", math.nan)
        r.setdefault("p_other_holm", math.nan)
        r["verdict"] = (
            "not testable"
            if r["untestable"]
            else "supports"
            if r["p_holm"] < ALPHA
            else "contradicts"
            if r["p_other_holm"] < ALPHA
            else "not significant"
        )
    return out


def families(tested: list[dict]) -> list[str]:
    """The Holm family of each finding, in words: its tests, each counted once."""
    out = []
    for finding in CLAIMS:
        if mine := [r for r in tested if r["finding"] == finding and not r["untestable"]]:
            tasks = ", ".join(
                f"{r['task']}"
                + (f" ({r['a']})" if finding.startswith(("pfs", "cpt")) else "")
                + (f" {r['part']}" if r.get("part") else "")
                for r in mine
            )
            out.append(f"{finding}: {len(mine)} test(s) of {rule(finding)} ({tasks})")
    return out


def verdicts(rows: list[dict], families: set[str] | None = None, imported: bool = False) -> list[dict]:
    """One verdict per finding (agrees / disagrees / mixed / inconclusive, or not testable with the reasons; "with these
    runs" when `imported`). A finding's claims are its (task, A, B) comparisons, each supporting only when all its tests
    do. A family finding with no task of its family in `families` is not testable."""
    where = IMPORTED_WHERE if imported else "at this scale"
    out = []
    for finding, (claim, _) in CLAIMS.items():
        mine = [r for r in rows if r["finding"] == finding]
        family = FINDING_FAMILY.get(finding)
        row = {"finding": finding, "claim": claim, "rule": rule(finding), "supporting": 0, "contradicting": 0}
        if not mine:
            if family and families is not None and family not in families:
                verdict = f"not testable {where}: no {family.upper()} task" + (" imported" if imported else "")
                out.append({**row, "tasks": "", "comparisons": "0", "verdict": verdict})
            continue
        claims = {}
        for r in mine:
            claims.setdefault((r["task"], r["a"], r["b"]), []).append(r)
        tested = [c for c in claims.values() if not any(r["untestable"] for r in c)]
        row.update(tasks=", ".join(sorted({r["task"] for r in mine})), comparisons=f"{len(tested)} of {len(claims)}")
        if not tested:
            reasons = list(dict.fromkeys(reason for r in mine for reason in r["untestable"].split("; ") if reason))
            more = f" (and {len(reasons) - 2} more)" if len(reasons) > 2 else ""
            verdict = f"not testable {where}: " + "; ".join(reasons[:2]) + more
        else:
            support = sum(all(r["verdict"] == "supports" for r in c) for c in tested)
            against = sum(any(r["verdict"] == "contradicts" for r in c) for c in tested)
            row.update(supporting=support, contradicting=against)
            verdict = (
                "agrees"
                if support and not against
                else "disagrees"
                if against and not support
                else "mixed"
                if support
                else "inconclusive"
            ) + f" {where}"
        out.append({**row, "verdict": verdict + entity_note(finding, mine)})
    return out


def rule(finding: str) -> str:
    """A finding's rule in words: its hypothesis, both halves for data efficiency."""
    return f"{LEAD}; and {hypothesis(finding)}" if finding == "data_efficiency" else hypothesis(finding)


def entity_note(finding: str, mine: list[dict]) -> str:
    """The TC verdict's CLM - MLM40 entity F1 per task with its 95% CI: described, not tested."""
    shown = [f"{r['task']} {r['entity_f1']}" for r in mine if finding == "tc_clm_on_par" and r.get("entity_f1")]
    return f"; entity F1, CLM - MLM40 (95% CI, not a test): {', '.join(shown)}" if shown else ""


def gap_over_pretraining(records: list[dict], rows: list[dict], regime: Regime) -> list[dict]:
    """Every checkpoint pair's CLM - MLM40 difference (`gap_points`) per task and final pair, the decayed final last."""
    models = {r["model"] for r in rows}
    family = {r["task"]: r["family"] for r in rows}
    return [
        {k: v for k, v in p.items() if k not in ("runs", "parts")}
        for _, _, clm, mlm in _final_pairs(models)
        if clm and mlm
        for task in sorted(family)
        for p in gap_points(records, rows, regime, task, family[task], clm, mlm)
    ]


def gap_trend(curve: list[dict], test: dict | None, lead: dict | None = None) -> str:
    """One task's gap in words: its data-efficiency tests (`lead`, `test`: the slope) and the differences past the
    crossover interval and at the decayed final."""
    tpp = lambda r: f"{r['tokens_per_parameter']:.3g}"  # noqa: E731
    ci = lambda r: f"{r['delta']:+.3f} [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]"  # noqa: E731
    words = {"supports": "CLM leads", "contradicts": "MLM40 leads", "not significant": "not significant"}
    text = ""
    if lead is not None and not math.isnan(lead["delta"]):
        text = (
            f"CLM - MLM40 at the earliest checkpoint ({lead['checkpoints'][0]:.3g}): {ci(lead)}, one-sided p "
            f"(> 0, Holm within the finding) {format_p(lead['p_holm'])}: "
            + ("not testable" if lead["untestable"] else words[lead["verdict"]])
            + "; "
        )
    if test is None or math.isnan(test["delta"]):
        text += "no slope: " + (test["untestable"] if test else "no checkpoint pair")
    else:
        span = test["checkpoints"]
        text += (
            f"slope of CLM - MLM40 per doubling of tokens per parameter over {len(span)} stable-phase "
            f"checkpoints ({span[0]:.3g}-{span[-1]:.3g}): {ci(test)}, one-sided p (slope < 0, Holm within the "
            f"finding) {format_p(test['p_holm'])}: "
        )
        text += (
            f"not testable ({test['untestable']})"
            if test["untestable"]
            else {"supports": "the gap closes", "contradicts": "the gap widens", "not significant": "not significant"}[
                test["verdict"]
            ]
        )
    if past := [r for r in curve if r["phase"] == "past" and not r["final"]]:
        text += "; past the crossover interval: " + ", ".join(f"{ci(r)} at {tpp(r)}" for r in past)
    if final := next((r for r in curve if r["final"]), None):
        text += f"; final (decayed) at {tpp(final)}: {ci(final)} (95% CI, not a test)"
    return text


def format_p(p: float) -> str:
    return p_cell(p, ".3g", "n/a")
