"""Tables and figures from one or several results directories (`evaluation.run`'s, `analysis.import_encodeval`'s).

    python -m analysis.report results/ --output report/ [--bootstrap] [--compare 610m-mlm40-42k,610m-clm-42k] \
        [--scale mini --step_divisor 40] [--bracketed_by "conll2003=0.001,0.03;mnli=0.0001,0.003"]
    python -m analysis.report study/mini/results results/ imported/ --output all/   # read where they are

Writes `summary.csv`, `summary.md` (the results table, the checks against the trivial baseline and the seeds a
±0.02 interval takes, the paper's findings tested: `findings.csv`, the `--compare A,B` paired comparisons, every
column) and the PNG figures that have data (`analysis.figures`); docs/evaluation.md describes them and a report of
several directories (`read_folders`). Every table naming a model gives its parameters and the step its run saved it
at beside the paper's step its name stands for (`model_cells`), so a study's model is never read as the paper's.
"""

from __future__ import annotations

import argparse
import collections
import csv
import io
import math
import os
from pathlib import Path

from analysis import figures, findings, import_encodeval, statistics
from analysis.statistics import SUMMARY_COLUMNS, compare, load_results, summarize
from core import artifacts, cli, names, run_folders, store
from core.formatting import p_cell, table_cell

__all__ = ["SUMMARY_COLUMNS", "compare", "load_results", "main", "summarize"]


def _fmt_p(p: float, bound: bool = False) -> str:
    """A p-value, never "0": a bootstrap p with no sample past 0 is "< 1/B"; a tiny t-test p is "< 1e-06"."""
    return f"< 1/{statistics.N_RESAMPLES}" if bound else p_cell(p)


def _finding_cell(row: dict, key: str) -> str:
    return p_cell(row[key]) if key in ("p", "p_holm", "p_other_holm") else table_cell(row.get(key))


def count_cell(count: float | None) -> str:
    """A parameter count in a table: "0.216M", "608M", "1.19B" (3 significant digits); "?" when unknown."""
    return "?" if count is None else f"{count / 1e9:.3g}B" if count >= 1e9 else f"{count / 1e6:.3g}M"


def model_cells(regime: findings.Regime, model: str) -> list[str]:
    """[parameters, step] of a model as a reader sees its name (`findings.Regime.parameters_of`, `steps_of`): the step
    the run saved it at with the paper's step its name stands for beside it ("250 of 10,500 (paper 1,000 of 42,000)";
    the paper's alone where they are the same); "?" where unknown."""
    p, steps = names.try_parse_name(model), regime.steps_of(model)
    if p is None:  # a name outside the grammar: what its results recorded, if anything
        own = "?" if steps is None else f"{steps[0]:,}" + (f" of {steps[1]:,}" if steps[0] != steps[1] else "")
        return [count_cell(regime.parameters_of(model)), own]
    written = lambda step, total: f"{step:,} of {total:,}" if p.paper_step else f"{total:,}"  # noqa: E731
    paper = written(p.paper_step, p.total_steps)
    own = "?" if steps is None else written(*steps)
    return [count_cell(regime.parameters_of(model)), paper if own == paper else f"{own} (paper {paper})"]


def _model_part(regime: findings.Regime, model: str) -> str:
    return " | ".join(model_cells(regime, model))


def pair_cells(regime: findings.Regime, row: dict) -> dict:
    """{"parameters", "step"} of a comparison's models A and B ("A / B"), for the findings and comparisons tables."""
    a, b = model_cells(regime, row["a"]), model_cells(regime, row["b"])
    return {"parameters": f"{a[0]} / {b[0]}", "step": f"{a[1]} / {b[1]}"}


def markdown_table(header: list[str], rows) -> list[str]:
    """A Markdown table's lines: the header, its separator, one line per row of cells."""
    line = lambda cells: "| " + " | ".join(cells) + " |"  # noqa: E731
    return [line(header), "|" + "---|" * len(header), *map(line, rows)]


MODEL_COLUMNS = (
    "parameters: the model's, counted with the input embedding and without the LM head (the study's "
    "count at a study's scale, the paper's size table for the paper's names; ? where the report was "
    "not given it: `--parameters`); step: the optimizer step the run saved the checkpoint at, of its "
    "run's total, with the paper's step its name stands for in brackets where they differ "
    "(`--step_divisor`). Every table naming a model gives both."
)


FINDING_KEYS = [
    "finding",
    "task",
    "a",
    "b",
    "parameters",
    "step",
    "measure",
    "hypothesis",
    "delta",
    "ci_low",
    "ci_high",
    "p",
    "p_holm",
    "p_other_holm",
    "n_seeds",
    "verdict",
    "untestable",
]


def finding_keys(tested: list[dict]) -> list[str]:
    """The findings table's columns: `FINDING_KEYS`, plus "entity_f1" and "bracket" where a comparison has them."""
    return FINDING_KEYS + [k for k in ("entity_f1", "bracket") if any(r.get(k) for r in tested)]


UNITS = (
    "Units of every interval: a model's mean - Student t over its fine-tuning seeds (over its pretraining runs' "
    "means when it has several runs); a paired difference - Student t, the unit part (seeds or runs) plus the "
    "test-instance bootstrap part, Welch-Satterthwaite df on the unit part (the instance part taken as known: "
    "infinite df) (its bootstrap p - test instances, paired, and seeds, or pretraining runs and then the seeds "
    "within each); the gap's slope - least squares over checkpoints with each difference's variance (runs as "
    "units when both objectives have several, plus the test instances' part); stability - per unit (a seed, "
    "or a pretraining run, paired across the LRs it was fine-tuned at) the spread over LRs relative to its "
    "gain, Welch t over the two models' units."
)


def findings_markdown(tested: list[dict], families: set[str], imported: bool = False) -> list[str]:
    """The verdicts, their Holm families and error rate, then every comparison behind them."""
    where = findings.IMPORTED_WHERE if imported else "at this scale"
    alpha = findings.ALPHA
    lines = [
        f"## The paper's findings {where}",
        "",
        "Each finding as the paper states it, with its pre-declared tests (`analysis.findings`): a comparison "
        "supports the claim when its one-sided p on the claim's side (the rule column), Holm-corrected within the "
        f"finding, is below {alpha:g}, and contradicts it only when the one-sided p on the other side is below "
        f'{alpha:g}; not significant is never support. TC\'s "on par or better" is a non-inferiority test at the '
        f"declared margin {findings.TC_MARGIN:g} (CLM - MLM40 > -{findings.TC_MARGIN:g}; docs/protocol.md says "
        "why), entity F1 reported beside it. Data efficiency is both halves of its claim: CLM ahead at the "
        "earliest checkpoint and the gap's slope below 0, each a test, a task agreeing only when both support it. "
        'IR\'s "the gap narrows with size" is (MLM40 - CLM) at the largest model size minus at the smallest, at '
        "one budget, on the same test instances (< 0); with one size it is not testable. A comparison is tested "
        "only where it can be: every model it uses learned the task (its 95% CI above the trivial baseline) and "
        "is past the paper's crossover interval (between the released checkpoints that bracket it: 19-78 tokens "
        "per parameter for SC and QA, 39-155 for IR, none for TC) under both parameter conventions (counted: "
        "input embedding in, LM head out; and without embeddings), a PFS budget reaches the paper's smallest, the "
        f"LR grid brackets each model's optimum, stability has {findings.MIN_STABILITY_LRS} or more LRs "
        f"fine-tuned here and the slope {findings.MIN_SLOPE_CHECKPOINTS} or more checkpoints before the "
        f"crossover; otherwise it is *not testable {where}*, with every reason. " + UNITS,
        "",
        "| finding (the paper) | rule | tasks | comparisons tested | supporting | contradicting | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {v['claim']} | {v['rule']} | {v['tasks']} | {v['comparisons']} | {v['supporting']} | "
        f"{v['contradicting']} | **{v['verdict']}** |"
        for v in findings.verdicts(tested, families, imported)
    ]
    lines += [
        "",
        f"Error rate: each test is a three-way decision at {alpha:g} per side ({2 * alpha:g} in all), "
        'Holm-corrected within its finding, so a finding with no true effect is called "agrees" or '
        f'"disagrees" with probability at most {2 * alpha:g}; across the findings of this report the rate is '
        f"not controlled jointly: with k testable findings, up to k x {2 * alpha:g} by chance.",
    ]
    holm = findings.families(tested)
    lines += [
        "",
        "Holm families (one per finding, each comparison counted once): "
        + ("; ".join(holm) if holm else "none (no comparison is testable)")
        + ".",
    ]
    if declared := list(dict.fromkeys(r["bracket"] for r in tested if r.get("bracket"))):
        lines += [
            "",
            "LR optima this study's grid does not bracket itself, counted as bracketed because the study "
            "declares (`--bracketed_by`) that an earlier, wider grid measured worse LRs on either side: "
            + "; ".join(declared)
            + ". The bracket column names the comparisons that rely on it.",
        ]
    keys = finding_keys(tested)
    return lines + ["", *markdown_table(keys, ([_finding_cell(r, k) for k in keys] for r in tested))]


def gap_markdown(gap: list[dict], tested: list[dict], regime: findings.Regime) -> list[str]:
    """The CLM - MLM40 gap along pretraining per task: its slope test in words, then every checkpoint's difference."""
    lines = [
        "## The CLM - MLM40 gap over pretraining",
        "",
        "Per task, the two tests of the paper's finding 2 (CLM leads early, the gap closes): CLM - MLM40 at the "
        "earliest checkpoint (one-sided, > 0), and the slope of CLM - MLM40 against log2(tokens per parameter) "
        "over the stable-phase checkpoints both runs saved before the paper's crossover interval under both "
        "conventions (19-78 tokens per parameter for SC and QA, 39-155 for IR; TC has none; at least "
        f"{findings.MIN_SLOPE_CHECKPOINTS}), one-sided (slope < 0), Holm-corrected within the finding: the "
        "data-efficiency rows of the findings table. The differences at each checkpoint (the table under the "
        "bullets, and gap.png) are 95% CIs that describe the curve; they are not tests. Tokens per parameter are "
        "counted with the input embedding and without the LM head (without embeddings in brackets).",
        "",
    ]
    for task in sorted({r["task"] for r in gap}):
        curve = [r for r in gap if r["task"] == task]
        test, lead = (
            next(
                (r for r in tested if r["finding"] == "data_efficiency" and r["task"] == task and r["part"] == part),
                None,
            )
            for part in ("slope", "lead")
        )
        lines.append(f"- **{task}** ({curve[0]['measure']}): {findings.gap_trend(curve, test, lead)}.")
    lines += [
        "",
        "| task | checkpoint (CLM) | parameters | step | tokens per parameter | crossover interval | "
        "CLM - MLM40 | 95% CI | note |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in gap:
        bare = r["tokens_per_parameter_bare"]
        tpp = f"{r['tokens_per_parameter']:.3g}" + (f" ({bare:.3g})" if bare is not None else "")
        lines.append(
            f"| {r['task']} | {r['a']} | {_model_part(regime, r['a'])} | {tpp} | {r['phase']} | "
            f"{r['delta']:+.4f} | [{table_cell(r['ci_low'])}, {table_cell(r['ci_high'])}] | "
            f"{'final (decayed)' if r['final'] else 'stable phase'} |"
        )
    return lines


def _cell(row: dict) -> str:
    """ "0.812 ± 0.011" (mean ± half-width of the 95% CI); the interval, "0.135 [0.000, 0.635]", where "±" would mislead
    (clipped, not centred on the mean, or degenerate); the mean alone with one unit."""
    if row["best_lr"] is None:
        return store.DIVERGED
    if math.isnan(row["ci_low"]):
        return f"{row['mean']:.3f}"
    if not _symmetric(row):
        return f"{row['mean']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}]"
    return f"{row['mean']:.3f} ± {_half_width(row):.3f}"


def _symmetric(row: dict) -> bool:
    """Whether a row's CI is a proper interval centred on its mean (so "±" describes it)."""
    low, high = row["ci_low"], row["ci_high"]
    return high > low and abs((low + high) / 2 - row["mean"]) <= 1e-9


def _half_width(row: dict) -> float:
    """Half the width of a summary row's 95% CI (nan with one seed)."""
    return (row["ci_high"] - row["ci_low"]) / 2


def results_table(rows: list[dict], regime: findings.Regime) -> list[str]:
    """Markdown: one line per model with its parameters and step, one column per task, the trivial baseline last."""
    tasks = sorted({r["task"] for r in rows})
    models = sorted({r["model"] for r in rows}, key=statistics.model_order)
    cell = {(r["model"], r["task"]): r for r in rows}
    metric = {r["task"]: r["metric"] for r in rows}
    runs = {r["model"]: r["n_pretrain_runs"] for r in rows}
    replicated = any(n > 1 for n in runs.values())  # a column of its own: a group is not one run
    header = [
        "model",
        "parameters",
        "step",
        *(["pretraining runs"] if replicated else []),
        *[f"{t} ({metric[t]})" for t in tasks],
    ]
    lines = markdown_table(
        header,
        [
            *(
                [
                    model,
                    *model_cells(regime, model),
                    *([str(runs[model])] if replicated else []),
                    *[_cell(cell[(model, t)]) if (model, t) in cell else "" for t in tasks],
                ]
                for model in models
            ),
            [
                "*trivial baseline*",
                "",
                "",
                *([""] if replicated else []),
                *["unknown" if (b := statistics.trivial_baseline(rows, t)) is None else table_cell(b) for t in tasks],
            ],
        ],
    )
    lines += ["", MODEL_COLUMNS]
    shown = [r for r in rows if r["best_lr"] is not None and not math.isnan(r["ci_low"])]
    if any(not _symmetric(r) for r in shown):
        lines += [
            "",
            "A cell shown as mean [low, high] gives its 95% CI itself: clipped to [0, 1], not centred on "
            "the mean (a bootstrap's), or [m, m] where every unit scored the same (no spread measured).",
        ]
    if tc := [t for t in tasks if any(r["task"] == t and r["family"] == "tc" for r in rows)]:
        lines += [
            "",
            "Entity F1 (seqeval) of the same TC runs, beside the main metric: a model that predicts no "
            "entity is visible here.",
            "",
            *markdown_table(
                ["model", "parameters", "step", *tc],
                (
                    [
                        m,
                        *model_cells(regime, m),
                        *[table_cell(cell[(m, t)]["entity_f1"]) if (m, t) in cell else "" for t in tc],
                    ]
                    for m in models
                ),
            ),
        ]
    return lines


def run_variance_lines(rows: list[dict], regime: findings.Regime) -> list[str]:
    """Markdown: the pretraining-run variance of every model trained more than once (nothing when there is none)."""
    replicated = sorted(
        (r for r in rows if r["best_lr"] is not None and r["n_pretrain_runs"] > 1),
        key=lambda r: (r["task"], statistics.model_order(r["model"])),
    )
    if not replicated:
        return []
    lines = [
        "## Pretraining-run variance",
        "",
        "Models pretrained several times (`-pseed<k>`), each shown as one model: its mean and CI are over its "
        "runs' means (each a mean over fine-tuning seeds at the model's best LR). The SDs come from a two-level "
        "decomposition: seed SD = root of the mean within-run variance; pretraining-run SD = root of (variance "
        "of the run means - seed variance / seeds per run), 0 when negative.",
        "",
        "| model | parameters | step | task | pretraining runs | seeds per run | mean | SD of run means over "
        "seeds: pretraining run | fine-tuning seed |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['model']} | {_model_part(regime, r['model'])} | {r['task']} | {r['n_pretrain_runs']} | "
        f"{r['n_seeds']} | {table_cell(r['mean'])} | {table_cell(r['pretrain_sd'])} | "
        f"{table_cell(r['seed_sd'])} |"
        for r in replicated
    ]
    return lines


def checks_lines(rows: list[dict], regime: findings.Regime) -> list[str]:
    """Markdown: the means that do not clear their task's trivial baseline, and the SC/TC means wider than
    `statistics.TARGET_HALF_WIDTH` with the seeds it would take."""
    rows = sorted(
        (r for r in rows if r["best_lr"] is not None), key=lambda r: (r["task"], statistics.model_order(r["model"]))
    )
    lower = lambda r: r["mean"] if math.isnan(r["ci_low"]) else r["ci_low"]  # noqa: E731 (one seed: the mean)
    known = [r for r in rows if statistics.above_baseline(r) is not None]
    below = [r for r in known if not statistics.above_baseline(r)]
    unknown = [r for r in rows if statistics.above_baseline(r) is None]
    lines = [
        "## Above the trivial baseline",
        "",
        "A model learned a task when the 95% CI of its mean lies above the task's trivial baseline (a mean "
        f"within {statistics.BASELINE_TOLERANCE:g} of it is at it: the model predicts what the baseline does).",
    ]
    if below:
        lines += [
            f"{len(below)} of {len(known)} model x task means with a known baseline do not clear it:",
            "",
            "| model | parameters | step | task | mean | ci_low | trivial_baseline | note |",
            "|---|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['model']} | {_model_part(regime, r['model'])} | {r['task']} | {table_cell(r['mean'])} | "
            f"{table_cell(lower(r))} | {table_cell(r['trivial_baseline'])} | "
            f"{'at the baseline: not learned' if statistics.at_baseline(r) else 'CI reaches the baseline'} |"
            for r in below
        ]
    elif known:
        lines.append(f"All {len(known)} model x task means with a known baseline clear it.")
    if unknown:
        tasks = sorted({r["task"] for r in unknown})
        lines += [
            "",
            f"{len(unknown)} model x task means have no known trivial baseline ({', '.join(tasks)}): "
            "whether they clear one is not known, and they are not counted above.",
        ]
    precise = [r for r in rows if r["family"] in ("sc", "tc")]
    wide = [r for r in precise if not _half_width(r) <= statistics.TARGET_HALF_WIDTH]  # one seed (nan) counts as wide
    lines += ["", f"## Seeds for a ±{statistics.TARGET_HALF_WIDTH} interval (SC and TC)", ""]
    if not wide:
        return lines + [
            f"Every SC and TC mean ({len(precise)}) has a 95% CI half-width of at most {statistics.TARGET_HALF_WIDTH}."
        ]
    lines += [
        f"{len(wide)} of {len(precise)} SC and TC means have a wider 95% CI; the seeds a "
        f"±{statistics.TARGET_HALF_WIDTH} interval would take at the spread seen over their seeds (itself "
        "uncertain with few seeds):",
        "",
        "| model | parameters | step | task | n_seeds | half-width | std | seeds needed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    return lines + [
        f"| {r['model']} | {_model_part(regime, r['model'])} | {r['task']} | {r['n_seeds']} | "
        f"{table_cell(_half_width(r))} | {table_cell(r['std'])} | "
        f"{table_cell(statistics.seeds_needed(r['std']), missing='unknown')} |"
        for r in wide
    ]


def imported_baselines(records: list[dict]) -> dict[str, str]:
    """{task: its imported records' trivial baseline and how it is known ("computed: ...", "declared: ...")}."""
    out = {}
    for r in records:
        if import_encodeval.is_imported(r) and r["task"] not in out:
            value, how = store.baseline_score(r), r["source"].get("baseline")
            out[r["task"]] = "none: its findings are not testable" if value is None else f"{value:.4g} ({how})"
    return dict(sorted(out.items()))


def imported_markdown(
    records: list[dict], sources: list[tuple[Path, str | None]], regime: findings.Regime
) -> list[str]:
    """The models imported from EncodEval, and the paper-grid runs its tree lacks per model x task (each results
    folder's `missing_runs.csv`; never filled)."""
    imported = sorted({r["model"] for r in records if import_encodeval.is_imported(r)}, key=statistics.model_order)
    if not imported:
        return []
    missing = collections.Counter()
    for folder, _ in sources:
        missing.update(import_encodeval.missing_counts(folder))
    lines = [
        "## Imported from EncodEval",
        "",
        f"{len(imported)} models are the paper's own runs, imported from its harness's released results "
        "(hgissbkh/EncodEval, `analysis.import_encodeval`): no model files, no protocol identity. Runs of the "
        f"paper's grid absent from that tree: {sum(missing.values())}, left out of the means, never filled: a "
        "best LR is the best of the imported LRs. The findings below are this project's statistics on the "
        "paper's runs. Each imported task's trivial baseline, as the import recorded it:",
        "",
        *(f"- {task}: {note}" for task, note in imported_baselines(records).items()),
    ]
    if not missing:
        return lines
    lines += ["", "| model | parameters | step | task | runs missing |", "|---|---|---|---|---|"]
    lines += [
        f"| {model} | {_model_part(regime, model)} | {task} | {n} |"
        for (model, task), n in sorted(
            missing.items(), key=lambda item: (item[0][1], statistics.model_order(item[0][0]))
        )
    ]
    return lines


PROBE_SCORES = (
    "Test score of each frozen-feature probe (`evaluation.probe`): mean ± the half-width of its 95% confidence "
    "interval (Student t over the probe's seeds, its training subsets, for a model trained once; over its CPT "
    "runs, each run's mean over the seeds, for a model trained several times), or the interval itself where ± "
    "would misdescribe it. Scores are fractions in [0, 1]. The trivial baseline is what a model scores without "
    'learning the task (majority class, all "O", a random ranking).'
)
PROBE_WORDS = (
    (
        "Models pretrained several times (`-pseed<k>`), each shown as one model: its mean and CI are over its runs' "
        "means (each a mean over fine-tuning seeds at the model's best LR).",
        "Arms trained several times (`<arm>-pseed<k>`: CPT runs), each shown as one model: its mean and CI are over "
        "its runs' means (each a mean over the probe's seeds).",
    ),
    ("Pretraining-run", "CPT-run"),
    ("pretraining-run", "CPT-run"),
    ("pretraining run", "CPT run"),
    ("fine-tuning seed", "probe seed"),
)
PROBE_DROPPED = ("parameters", "step", "best_lr", "stability_std", "lr_range")  # a probe page's tables omit these


def without_columns(lines: list[str], dropped) -> list[str]:
    """`lines` with the columns named `dropped` taken out of every Markdown table (`markdown_table`'s layout)."""
    out, keep = [], None
    for line in lines:
        if not line.startswith("|"):
            keep = None
            out.append(line)
        elif line.startswith("|---"):
            out.append("|" + "---|" * len(keep))
        else:
            cells = line[2:-2].split(" | ")
            keep = keep or [i for i, cell in enumerate(cells) if cell not in dropped]  # the header's
            out.append("| " + " | ".join(cells[i] for i in keep) + " |")
    return out


def readouts_markdown(records: list[dict]) -> list[str]:
    """Markdown: the readout each probe's runs chose on validation (`evaluation.probe.choose`), with each readout's
    mean validation score over the runs; [] when no record names one."""
    chosen = collections.defaultdict(list)
    for record in records:
        if "readout" in (config := store.run_config(record)):
            chosen[statistics.replicate_group(record["model"]), record["task"]].append((record["model"], config))
    if not chosen:
        return []
    rows = []
    for (model, task), runs in sorted(
        chosen.items(), key=lambda item: (item[0][1], statistics.model_order(item[0][0]))
    ):
        per_run = dict(runs)  # one choice per run: its seeds share it
        counts = collections.Counter(config["readout"] for config in per_run.values())
        validation = {
            r: sum(c["readout_validation"][r] for c in per_run.values()) / len(per_run)
            for r in next(iter(per_run.values()))["readout_validation"]
        }
        rows.append(
            [
                model,
                task,
                ", ".join(
                    f"{readout} ({n} of {len(per_run)})" if len(per_run) > 1 else readout
                    for readout, n in sorted(counts.items())
                ),
                ", ".join(f"{readout} {table_cell(value)}" for readout, value in validation.items()),
            ]
        )
    return [
        "## Readouts",
        "",
        "Each probe is read out two ways (sentences: the mean or the last token's state; words: the first or the last "
        "sub-token's) and reported with the one of the higher mean validation score over its seeds, chosen per run "
        "(for a model trained several times, how many of its runs chose each); the test set plays no part.",
        "",
        *markdown_table(["model", "task", "readout chosen", "mean validation score per readout"], rows),
    ]


def heldout_markdown(heldout: list[dict]) -> list[str]:
    """Markdown: the held-out scores of each model (`store` kind "heldout"), with the attention and CPT steps its
    measure recorded."""
    keys = ("mlm_loss", "mlm_accuracy", "clm_loss")
    return [
        "## Held-out text",
        "",
        "Masked-token loss and accuracy with the model's attention (a masked token predicted at its own position, as "
        "MLM does) and next-token loss (causal attention), over the same held-out blocks."
        + (
            " — : not measured, for a model that attends causally (its head at a position predicts the next token, "
            "not the token there)."
            if any("mlm_loss" not in store.split_scores(r, "test") for r in heldout)
            else ""
        ),
        "",
        *markdown_table(
            ["model", "attention", "CPT steps", "masked-token loss", "masked-token accuracy", "next-token loss"],
            (
                [
                    r["model"],
                    store.run_config(r)["attention"],
                    str(store.run_config(r)["cpt_steps"]),
                    *(f"{v:.3f}" if (v := store.split_scores(r, "test").get(k)) is not None else "—" for k in keys),
                ]
                for r in sorted(heldout, key=lambda r: statistics.model_order(r["model"]))
            ),
        ),
    ]


def read_folders(folders: list[Path], scale: str | None) -> tuple[list[dict], list[tuple[Path, str | None]]]:
    """Every result of `folders`, read where it is, and each folder with the scale its names are shown at (a study's
    results folder, `run_folders.study_of`: its study.json's). With several folders every name is made the one a reader
    sees as it is read, so a study's `610m-clm-42k` and the paper's stay two rows."""
    if len({folder.resolve() for folder in folders}) < len(folders):
        raise ValueError("a results directory is given twice; give each once")
    records, sources, owner = [], [], {}
    for folder in folders:
        study = run_folders.study_of(folder)
        shown = study["definition"]["scale"] if study else scale
        if study and scale and names.scaled_name("610m-clm-42k", scale) != names.scaled_name("610m-clm-42k", shown):
            raise ValueError(
                f"--scale {scale}: {folder} is the {study['study']} study's results folder, trained at "
                f"the {shown} scale (its study.json); drop --scale"
            )
        found = load_results(folder)
        foreign = sorted({r["model"] for r in found if study and not run_folders.is_study_model(study, r["model"])})
        if foreign:
            raise ValueError(
                f"{folder} is the {study['study']} study's results folder but holds results of "
                f"{foreign[0]}, not one of its models: move {folder / foreign[0]} to a folder of its "
                f"own and report both (analysis.report {folder} OTHER --output DIR)"
            )
        for record in found:
            if len(folders) > 1:
                record["model"] = names.scaled_name(record["model"], shown)
            cell = (record["model"], record["task"])
            if owner.setdefault(cell, folder) != folder:
                raise ValueError(
                    f"{cell[0]} has {cell[1]} results in {owner[cell]} and in {folder}: keep a model's "
                    "results on a task in one results directory"
                )
        records += found
        sources.append((folder, shown))
    return records, sources


def sources_markdown(sources: list[tuple[Path, str | None]]) -> list[str]:
    """Markdown: the results directories a report of several was made from, read where they are."""
    lines = [
        "## Sources",
        "",
        "Results read where they are (nothing copied), each model shown under the name a "
        "reader sees (its study's scale first); the findings test the paper-scale names only.",
        "",
        "| results directory | what | scale |",
        "|---|---|---|",
    ]
    for folder, scale in sources:
        study = run_folders.study_of(folder)
        what = f"the {study['study']} study's results" if study else "results"
        lines.append(f"| {folder} | {what} | {scale or names.PAPER_SCALE + ' (names as recorded)'} |")
    return lines


def _write_csv(path: Path, columns, rows) -> None:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    artifacts.write_text_atomic(path, buffer.getvalue())


REPORT_MARK = ".evaluation-report.json"  # the files an earlier report wrote into its --output directory


def shown_at_scale(items: list[dict], scale: str | None) -> list[dict]:
    """Summary rows, comparisons or findings with every model name as a reader sees it at `scale` (`scaled_name`)."""
    return [
        {**item, **{k: names.scaled_name(item[k], scale) for k in ("model", "a", "b") if k in item}} for item in items
    ]


def report_scale(report_dir: Path) -> str | None:
    """The scale a report's names carry (`--scale`), as its marker records it (None: the names as recorded)."""
    mark = Path(report_dir) / REPORT_MARK
    return artifacts.read_json(mark, "report marker").get("scale") if mark.is_file() else None


def check_output(output: Path) -> None:
    """Refuse an --output that is a file or holds files this tool did not write (before anything is written)."""
    if output.exists() and not output.is_dir():
        raise ValueError(f"--output {output} is a file; pass a directory")
    artifacts.check_output_dir(output, "--output")  # under a file or a folder this user cannot write to
    if output.is_dir() and not (output / REPORT_MARK).is_file() and any(output.iterdir()):
        raise ValueError(
            f"--output {output} holds files analysis.report did not write; pass a new or empty "
            "directory, or one an earlier report wrote"
        )


def clear_earlier_report(output: Path) -> None:
    """Remove what an earlier report wrote here, as its marker names it (no stale findings or figure survives); a
    report killed before it moved its files in named none, one killed while moving them named them all."""
    mark = output / REPORT_MARK
    if mark.is_file():
        for name in artifacts.read_json(mark, "report marker")["files"]:
            (output / Path(name).name).unlink(missing_ok=True)
        mark.unlink()


def make_parser() -> argparse.ArgumentParser:
    """The command line of `python -m analysis.report`."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "results",
        nargs="+",
        help="results directories (evaluation.run's, analysis.import_encodeval's), read where they "
        "are: several make one report (a study's, your own, the paper's imported runs)",
    )
    parser.add_argument(
        "--output", default=None, help="report directory (default with one results directory: <results>/report)"
    )
    parser.add_argument("--bootstrap", action="store_true", help="percentile bootstrap CI instead of Student t")
    parser.add_argument(
        "--compare",
        default=None,
        help="two model names A,B for paired comparisons; several pairs 'A,B;C,D' are one family, "
        "their p-values Holm-adjusted together",
    )
    parser.add_argument(
        "--tokens_per_step",
        type=float,
        default=None,
        help="pretraining tokens per step of the model names (default: the paper's 2.36M)",
    )
    parser.add_argument(
        "--parameters",
        type=float,
        default=None,
        help="parameters of every model, input embedding in, LM head out (default: the paper's sizes)",
    )
    parser.add_argument(
        "--embedding_parameters",
        type=float,
        default=None,
        help="of --parameters, those of the input embedding: tokens per parameter are shown without "
        "embeddings too (default: the paper's sizes' with the paper's regime; unknown otherwise)",
    )
    parser.add_argument(
        "--step_divisor",
        type=int,
        default=None,
        help="the names' steps over the steps the runs took (a study's scale divides the paper's "
        "steps by it: recipes.study passes it): every table gives a checkpoint's own step beside "
        "its name's (default: 1 for the paper's names, unknown for a study's)",
    )
    parser.add_argument(
        "--bracketed_by",
        default=None,
        help="LR grids an earlier, wider grid bracketed, per task: 'conll2003=0.001,0.03;mnli=...' "
        "(the LRs measured worse below and above this grid in an earlier run). An optimum this "
        "grid cannot bracket (fewer than 3 LRs, or at an edge) then counts as bracketed, and "
        "the findings name it as declared, not measured in this study (default: none)",
    )
    parser.add_argument(
        "--scale",
        default=None,
        help="manifest scale the study's models were trained at (recipes.study passes it): every "
        "table, figure and finding names them <scale>-<name> (mini-610m-clm-42k); default: the "
        "names as recorded (the paper's)",
    )
    return parser


def check_arguments(args) -> tuple[list[Path], Path, dict]:
    """The command line's own checks, before any result is read: returns the folders, the output folder and
    `--bracketed_by`."""
    names.scaled_name("610m-clm-42k", args.scale)  # a scale that could not be read back is refused here
    if (args.tokens_per_step is None) != (args.parameters is None) or any(
        v is not None and not v > 0 for v in (args.tokens_per_step, args.parameters)
    ):
        raise ValueError("--tokens_per_step and --parameters go together, both positive (or neither: the paper's)")
    if args.embedding_parameters is not None and not (
        args.parameters and 0 < args.embedding_parameters < args.parameters
    ):
        raise ValueError(
            "--embedding_parameters is a part of --parameters: give it with --parameters, above 0 and below it"
        )
    if args.step_divisor is not None and args.step_divisor < 1:
        raise ValueError(
            f"--step_divisor {args.step_divisor}: give a whole number of 1 or more (the paper's "
            "steps per step a run took)"
        )
    brackets = findings.parse_brackets(args.bracketed_by)
    folders = [Path(folder) for folder in args.results]
    if len(folders) > 1 and (args.scale or args.parameters or args.embedding_parameters or args.step_divisor):
        raise ValueError(
            "--scale, --tokens_per_step, --parameters and --step_divisor describe one study's names; a "
            "report of several results directories shows each at the scale its study.json records and "
            "tests the findings on the paper-scale names: run one study's own report for its findings"
        )
    if args.output is None and len(folders) > 1:
        raise ValueError("several results directories make one report: pass --output DIR")
    output = Path(args.output or folders[0] / "report")
    if len(folders) > 1 and output.name == "report" and run_folders.study_of(output.parent / "results"):
        raise ValueError(
            f"--output {output} is a study's own report (its study.json is beside it): a report "
            "of several results directories goes to a folder of its own"
        )
    check_output(output)
    return folders, output, brackets


@cli.exit_on_write_failure
def main(argv=None) -> Path:
    """Write summary.csv, summary.md, findings.csv and the figures; return the output directory."""
    args = make_parser().parse_args(argv)
    with cli.bad_input_exits():
        folders, output, brackets = check_arguments(args)
        records, sources = read_folders(folders, args.scale)
        heldout = [r for r in records if store.record_kind(r) == "heldout"]  # a table of their own, not a task
        records = [r for r in records if store.record_kind(r) != "heldout"]
        if len(folders) > 1:
            args.scale = None  # every name already reads as a reader sees it (`read_folders`)
        elif sources[0][1] is not None:
            args.scale = sources[0][1]
        rows = summarize(records, args.bootstrap)
        if unknown := sorted(set(brackets) - {r["task"] for r in rows}):
            raise ValueError(f"--bracketed_by names task(s) with no results: {', '.join(unknown)}")
        models = {r["model"] for r in records}
        carried = sorted(m for m in models if (parsed := names.try_parse_name(m)) and parsed.scale is not None)
        if args.scale and carried:  # filed outside a study under the scale they were trained at (evaluation.resolve)
            raise ValueError(
                f"--scale {args.scale}: these results already name the scale their models were "
                f"trained at ({', '.join(carried[:3])}); drop --scale"
            )
        pairs = [cli.split_list(pair) for pair in args.compare.split(";")] if args.compare else []
        shown = {r["model"] for r in rows}  # a model's pretraining replicates (<name>-pseed<k>) are one row, <name>
        if any(len(pair) != 2 or len(set(pair)) != 2 or not set(pair) <= shown for pair in pairs):
            raise ValueError(
                f"--compare needs two model names from the results ({sorted(shown)}), or pairs of them joined "
                f"by ';', got {args.compare!r}"
            )
    tested_records, tested_rows = records, rows
    if len(folders) > 1:  # the paper's regime: the findings and the gap test the paper-scale names only
        tested_records, tested_rows = (
            [r for r in items if not (p := names.try_parse_name(r["model"])) or p.scale is None]
            for items in (records, rows)
        )
    recorded = findings.recorded_runs(records)
    regime = (
        findings.Regime(
            args.tokens_per_step,
            args.parameters,
            args.scale,
            args.embedding_parameters,
            brackets,
            args.step_divisor,
            recorded,
        )
        if args.parameters
        else findings.Regime(scale=args.scale, bracketed_by=brackets, step_divisor=args.step_divisor, recorded=recorded)
    )
    output.mkdir(parents=True, exist_ok=True)
    clear_earlier_report(output)
    # marked as this tool's before anything is written, so that a killed run can be rerun into it; the files are
    # written into a staging folder, then named in the marker, then moved in: a rerun removes exactly what a killed
    # run moved in, never a file a person added since
    artifacts.write_json_atomic(output / REPORT_MARK, {"files": [], "scale": args.scale})
    try:
        with artifacts.staging_directory(output / "report") as staging:
            write_report(staging, records, rows, pairs, regime, args, (tested_records, tested_rows), sources, heldout)
            written = sorted(p.name for p in staging.iterdir())
            artifacts.write_json_atomic(output / REPORT_MARK, {"files": written, "scale": args.scale})
            for name in written:
                os.replace(staging / name, output / name)
    # a failure (a full disk) leaves no half report (a kill leaves the marker, for the rerun)
    except Exception as error:
        clear_earlier_report(output)
        if isinstance(error, artifacts.WriteFailed):  # named as the report's file, not as its staging copy
            raise artifacts.WriteFailed(output / error.path.name, error.__cause__) from None
        raise
    print(f"report written to {output}")
    return output


def write_report(
    output: Path,
    records: list[dict],
    rows: list[dict],
    pairs,
    regime,
    args,
    tested: tuple[list[dict], list[dict]],
    sources,
    heldout: list[dict] = (),
) -> None:
    """Write `summary.csv`, `summary.md` (every name as a reader sees it, with its parameters and step), `findings.csv`
    and the figures into `output`; `tested`: the records and rows the findings test."""
    tested_records, tested_rows = tested
    probes = bool(records) and all(store.record_kind(r) == "probe" for r in records)  # no LR, no parameter count
    comparisons = [c for pair in pairs for c in compare(records, rows, *pair)]
    if len(pairs) > 1:  # one family: Holm over every comparison of every pair
        comparisons = [{**c, "p_holm": p} for c, p in zip(comparisons, statistics.holm([c["p"] for c in comparisons]))]
    tested = findings.comparisons(tested_records, tested_rows, regime)
    gap = findings.gap_over_pretraining(tested_records, tested_rows, regime)
    rows, comparisons, tested, gap = (shown_at_scale(items, args.scale) for items in (rows, comparisons, tested, gap))
    comparisons, tested = ([{**r, **pair_cells(regime, r)} for r in items] for items in (comparisons, tested))
    _write_csv(output / "summary.csv", SUMMARY_COLUMNS, ({k: table_cell(r[k]) for k in SUMMARY_COLUMNS} for r in rows))
    lines = [
        "# Fine-tuning results",
        "",
        PROBE_SCORES
        if probes
        else "Test score at the best learning rate (highest mean validation score over seeds; for a model trained "
        "several times, over all its runs' seeds: one LR pooled over the runs, not one per run): mean over seeds "
        "± the half-width of its 95% confidence interval (Student t over seeds; over pretraining runs for a model "
        "trained several times), or the interval itself where ± would misdescribe it. Scores are fractions in [0, "
        '1]. The trivial baseline is what a model scores without learning the task (majority class, all "O", '
        "the passage's first words, a random ranking).",
        "",
        *results_table(rows, regime),
    ]
    if readouts := readouts_markdown(records):
        lines += ["", *readouts]
    if heldout:
        lines += ["", *heldout_markdown(heldout)]
    if len(sources) > 1:
        lines += ["", *sources_markdown(sources)]
    if imported := imported_markdown(records, sources, regime):
        lines += ["", *imported]
    if gap:
        lines += ["", *gap_markdown(gap, tested, regime)]
    if variance := run_variance_lines(rows, regime):
        lines += ["", *variance]
    lines += ["", *checks_lines(rows, regime)]
    if tested:
        lines += [
            "",
            *findings_markdown(
                tested, {r["family"] for r in rows}, all(import_encodeval.is_imported(r) for r in tested_records)
            ),
        ]
    if comparisons:
        keys = [
            "task",
            "a",
            "b",
            "parameters",
            "step",
            "metric",
            "delta",
            "ci_low",
            "ci_high",
            "p",
            "p_bootstrap",
            "wins",
            "losses",
            *(["p_holm"] if "p_holm" in comparisons[0] else []),
        ]
        lines += [
            "",
            "## Paired comparisons (A - B, per-instance test scores; CI Student t over units - seeds, or "
            "pretraining runs - and instances; p_bootstrap resampling instances (paired) and seeds, or "
            "pretraining runs and then the seeds within each; wins / losses count test instances, a "
            "description, not a test"
            + (
                f"; p_holm: p Holm-adjusted over these {len(comparisons)} comparisons, one family)"
                if len(keys) > 13
                else ")"
            ),
            "",
            *markdown_table(
                keys,
                (
                    [
                        _fmt_p(c[k], k == "p_bootstrap" and c["p_bootstrap_bound"])
                        if k in ("p", "p_bootstrap", "p_holm")
                        else table_cell(c[k])
                        for k in keys
                    ]
                    for c in comparisons
                ),
            ),
        ]
    lines += [
        "",
        "## Every column",
        "",
        "entity_f1 = TC entity F1 (seqeval) over the probe's seeds; std = over its seeds; n_pretrain_runs, "
        "pretrain_sd, seed_sd: the CPT runs and the two-level SDs (CPT runs, the probe's seeds); summary.csv's "
        "best_lr (0: a probe has none), stability_std and lr_range do not apply to probes and are not shown."
        if probes
        else "entity_f1 = TC entity F1 (seqeval) of the best LR's runs; std = over the best LR's seeds; "
        "stability_std = std over all finished runs; lr_range = range of the per-LR mean test scores; "
        "n_pretrain_runs, pretrain_sd, seed_sd: the pretraining runs and the two-level SDs; parameters and "
        "step (not in summary.csv) as in the results table.",
        "",
        *markdown_table(
            ["model", "parameters", "step", *SUMMARY_COLUMNS[1:]],
            (
                [r["model"], *model_cells(regime, r["model"]), *(table_cell(r[k]) for k in SUMMARY_COLUMNS[1:])]
                for r in rows
            ),
        ),
    ]
    if probes:  # what only a trained, fine-tuned model has: no column of unknowns ("?") or of a single "LR" 0
        lines = without_columns([line for line in lines if line != MODEL_COLUMNS], PROBE_DROPPED)
        for old, new in PROBE_WORDS:  # a model trained several times is an arm's CPT runs; its seeds, the probe's
            lines = [line.replace(old, new) for line in lines]
    artifacts.write_text_atomic(output / "summary.md", "\n".join(lines) + "\n")
    if tested:
        keys = finding_keys(tested)
        _write_csv(output / "findings.csv", keys, ({k: _finding_cell(r, k) for k in keys} for r in tested))
    figures.plot_all(rows, output, regime.tokens_per_step if args.parameters else None)
    figures.plot_gap(gap, [r for r in tested if r["finding"] == "data_efficiency" and r["part"] == "slope"], output)


if __name__ == "__main__":
    main()
