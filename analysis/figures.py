"""The report's figures (matplotlib, Agg), each skipped when the results hold no data for it.

Bar charts start at 0 and draw each task's trivial baseline where the results record one; line charts show the mean
test score with its 95% CI. Legends sit under the axes, captions are wrapped to the figure's width, and each
objective has one colour in every figure (`core.colours`).
"""

from __future__ import annotations

import collections
import math
import textwrap
from pathlib import Path

import numpy as np

from analysis.statistics import model_kind, model_order, trivial_baseline
from core import artifacts, colours, names

MIN_SPAN = 0.2  # a score axis spans at least this much, so run-to-run noise never looks like a trend


def _axes(n: int):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(n, 3)
    fig, axes = plt.subplots(
        (n + cols - 1) // cols, cols, figsize=(5.6 * cols, 4.6 * ((n + cols - 1) // cols)), squeeze=False
    )
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


CHARS_PER_INCH = 19  # about as many 7-point characters fit in an inch of caption


def _save(fig, path: Path, caption: str) -> Path:
    """The caption under the figure, wrapped at word boundaries to the figure's width (never by matplotlib)."""
    lines = textwrap.wrap(caption, int(fig.get_figwidth() * CHARS_PER_INCH), break_on_hyphens=False)
    fig.tight_layout()
    fig.text(0.0, -0.02, "\n".join(lines), fontsize=7, va="top", ha="left", transform=fig.transFigure)
    return artifacts.save_figure(fig, path)


def _at_scale(rows) -> str:
    """ " (mini scale)" when every name in `rows` is of one scale (" (paper scale)": none), for the titles; else ""."""
    scales = {p.scale if (p := names.try_parse_name(r["model"])) is not None else "" for r in rows}
    return f" ({scales.pop() or names.PAPER_SCALE} scale)" if len(scales) == 1 and "" not in scales else ""


def _baseline_words(rows, tasks, drawn: str) -> str:
    """The caption's words for the trivial baseline: `drawn` when every task has one, else which tasks record none."""
    tasks = list(tasks)
    if not (without := [t for t in tasks if trivial_baseline(rows, t) is None]):
        return drawn
    if len(without) == len(tasks):
        words = "no trivial baseline drawn: these results record none (an imported dataset may have none)"
        return words.capitalize() if drawn[0].isupper() else words  # words has no other capital
    return f"{drawn}, none recorded for {', '.join(without)} (an imported dataset may have none)"


def _size(p: names.ModelName) -> str:
    """A line label's size with the scale first, as the names write it ("mini-610m"; "610m" at the paper's)."""
    return f"{p.scale}-{p.size}" if p.scale else p.size


STYLES = ("-", "-.", (0, (1, 1)), (0, (3, 1, 1, 1, 1, 1)))  # never "--": that is the trivial baseline's
BASELINE = {"color": "grey", "linestyle": "--", "linewidth": 1}
MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def _styles(labels) -> dict:
    """Each label's look: its objective's colour (`core.colours`), marker and dash by its place, the same in every
    subplot."""
    outside = [label for label in labels if colours.objective_key(label) is None]
    return {
        label: {
            "color": colours.of(label, outside.index(label) if label in outside else 0),
            "marker": MARKERS[i % len(MARKERS)],
            "linestyle": STYLES[i % len(STYLES)],
        }
        for i, label in enumerate(labels)
    }


def _legend(ax, columns: int = 3) -> None:
    """A compact legend under the axes, in columns, so it never takes the plot's width."""
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(
        handles,
        labels,
        fontsize=7,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.18),
        frameon=False,
        ncol=min(columns, max(1, len(labels))),
        handlelength=2.5,
    )


def _score_axis(ax, values, baseline: float | None, label: str) -> None:
    """Label the axis with the metric, draw the trivial baseline, and show at least MIN_SPAN of the [0, 1] scale."""
    values = [v for v in values if v is not None and not math.isnan(v)]
    if baseline is not None and not math.isnan(baseline):
        ax.axhline(baseline, **BASELINE, label="trivial baseline")
        values.append(baseline)
    if values:
        low, high = min(values), max(values)
        pad = max(0.0, MIN_SPAN - (high - low)) / 2
        low, high = max(0.0, low - pad - 0.02), min(1.0, high + pad + 0.02)
        if high - low < MIN_SPAN:  # pushed against 0 or 1
            low, high = (0.0, MIN_SPAN) if low == 0.0 else (1.0 - MIN_SPAN, 1.0)
        ax.set_ylim(low, high)
    ax.set_ylabel(label)


def _errors(points):
    """Error bars of (x, mean, low, high, ...) points, a missing CI drawn as none."""
    return np.nan_to_num(np.array([[p[1] - p[2], p[3] - p[1]] for p in points]).T)


def plot_objectives(rows: list[dict], output: Path) -> list[Path]:
    """Score by objective per task family: bars per model (the final single-objective checkpoints when there are any),
    grouped by task, with 95% CI bars and each task's trivial baseline."""
    written = []
    for family in sorted({r["family"] for r in rows}):
        fam = [r for r in rows if r["family"] == family and r["best_lr"] is not None]
        if any(model_kind(r["model"]) == "single" for r in fam):  # the final checkpoints, and models of one's own
            fam = [r for r in fam if model_kind(r["model"]) in ("single", "other")]
        if not fam:
            continue
        task_names, models = sorted({r["task"] for r in fam}), sorted({r["model"] for r in fam}, key=model_order)
        fig, (ax,) = _axes(1)
        width, styles = 0.8 / len(models), _styles(models)
        for i, model in enumerate(models):
            bars = [
                (j + i * width, c)
                for j, t in enumerate(task_names)
                if (c := next((r for r in fam if r["model"] == model and r["task"] == t), None))
            ]
            ax.bar(
                [x for x, _ in bars],
                [c["mean"] for _, c in bars],
                width,
                label=model,
                yerr=_errors([(x, c["mean"], c["ci_low"], c["ci_high"]) for x, c in bars]),
                capsize=2,
                color=styles[model]["color"],
            )
        bases = [(j, b) for j, t in enumerate(task_names) if (b := trivial_baseline(rows, t)) is not None]
        for k, (j, base) in enumerate(bases):  # bars have no dashes of their own
            ax.hlines(
                base,
                j - width / 2,
                j + 0.8 - width / 2,
                colors="black",
                linestyles="--",
                linewidth=1,
                label=None if k else "trivial baseline",
            )
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(task_names))], task_names)
        values = [r["ci_high"] if not math.isnan(r["ci_high"]) else r["mean"] for r in fam] + [b for _, b in bases]
        ax.set_ylim(0.0, min(1.0, max(values) * 1.08 + 0.02))  # bars start at 0: their heights compare as ratios
        ax.set_ylabel("test " + " / ".join(sorted({r["metric"] for r in fam})))
        ax.set_title(f"{family.upper()}: test score by pretraining objective{_at_scale(fam)}")
        _legend(ax)
        written.append(
            _save(
                fig,
                output / f"objective_{family}.png",
                f"Family {family.upper()}: mean test score over seeds at each model's best learning rate, "
                "with 95% confidence intervals over seeds (Student t); "
                + _baseline_words(rows, task_names, "dashed: the task's trivial baseline")
                + ". The axis starts at 0.",
            )
        )
    return written


def _lines_per_task(
    rows,
    output: Path,
    name: str,
    points,
    xlabel: str,
    title: str,
    caption: str,
    logx: bool = False,
    baseline: str = "dashed: trivial baseline",
):
    """One subplot per task; `points(row) -> (line label, x[, hollow]) | None` places each summary row (hollow: an open
    marker, not joined, e.g. a decayed final). "{baseline}" in `caption` becomes `_baseline_words` of `baseline`."""
    series = collections.defaultdict(list)
    for r in rows:
        if placed := (points(r) if r["best_lr"] is not None else None):
            hollow = len(placed) > 2 and placed[2]
            series[(r["task"], placed[0])].append((placed[1], r["mean"], r["ci_low"], r["ci_high"], hollow))
    task_names = sorted({t for t, _ in series})
    if not any(len(v) > 1 for v in series.values()):
        return []
    styles = _styles(sorted({label for _, label in series}))
    fig, axes = _axes(len(task_names))
    for ax, task in zip(axes, task_names):
        values = []
        for (t, label), pts in sorted(series.items()):
            if t != task:
                continue
            pts.sort()
            style = styles[label]
            line = [p for p in pts if not p[4]]  # the hollow (decayed) points are never joined to the curve
            hollow = {
                "linestyle": "none",
                "markersize": 9,
                "markerfacecolor": "white",
                "markeredgecolor": style["color"],
            }
            for part, looks in ((line, {"label": label}), ([p for p in pts if p[4]], hollow)):
                if part:
                    ax.errorbar(
                        [p[0] for p in part],
                        [p[1] for p in part],
                        yerr=_errors(part),
                        capsize=2,
                        **{**style, "label": None if line else label, **looks},
                    )
            values += [v for p in pts for v in p[1:4]]
        metric = next(r["metric"] for r in rows if r["task"] == task)
        _score_axis(ax, values, trivial_baseline(rows, task), f"test {metric}")
        ax.set_title(f"{task}: {title}{_at_scale(rows)}")
        ax.set_xlabel(xlabel)
        ax.set_xscale("log" if logx else "linear")
        _legend(ax)
    return [_save(fig, output / name, caption.replace("{baseline}", _baseline_words(rows, task_names, baseline)))]


def plot_pretraining_steps(rows, output: Path, tokens_per_step: float | None = None) -> list[Path]:
    """Score vs pretraining progress: the intermediate checkpoints `<name>-<paper step>` and the final `<name>` (hollow)
    on the tasks the intermediate checkpoints have; x is tokens seen when `tokens_per_step` is known, else the step."""
    steps = [r for r in rows if (p := names.try_parse_name(r["model"])) and p.paper_step is not None]
    bases, tasks = {names.try_parse_name(r["model"]).run_name for r in steps}, {r["task"] for r in steps}
    rows = [r for r in rows if r["task"] in tasks]
    scale = (lambda step: step * tokens_per_step / 1e6) if tokens_per_step else (lambda step: step)  # noqa: E731

    def points(r):
        p = names.try_parse_name(r["model"])
        if p is not None and p.paper_step is not None:
            return p.run_name, scale(p.paper_step)
        if p is not None and p.kind == "single" and r["model"] in bases:
            return r["model"], scale(p.total_steps), True
        return None

    xlabel = "pretraining tokens seen (millions)" if tokens_per_step else "pretraining step (as in the names)"
    return _lines_per_task(
        rows,
        output,
        "pretraining_steps.png",
        points,
        xlabel,
        "score vs pretraining",
        "Data efficiency: mean test score (95% CI over seeds, or over pretraining runs) of the "
        "intermediate (stable-phase) checkpoints of each run, joined, and its final checkpoint "
        "(open marker, not joined: after the learning-rate decay, another phase), fine-tuned with "
        "the same protocol; {baseline}.",
        baseline="dashed grey: trivial baseline",
    )


def plot_learning_rates(rows, output: Path) -> list[Path]:
    """Score vs fine-tuning LR, one line per final checkpoint, each model's chosen LR starred."""
    written = []
    final = [r for r in rows if model_kind(r["model"]) != "intermediate"]
    styles = _styles(sorted({r["model"] for r in final}, key=model_order))  # one look per model in every figure
    for task in sorted({r["task"] for r in rows}):
        task_rows = sorted((r for r in final if r["task"] == task), key=lambda r: model_order(r["model"]))
        if not any(len([v for v in r["per_lr"].values() if v[2]]) > 1 for r in task_rows):
            continue
        fig, (ax,) = _axes(1)
        values, lrs = [], set()
        for r in task_rows:
            pts = [(lr, v[1], *r["per_lr_ci"][lr]) for lr, v in sorted(r["per_lr"].items()) if v[2]]
            style = styles[r["model"]]
            ax.errorbar(
                [p[0] for p in pts], [p[1] for p in pts], yerr=_errors(pts), capsize=2, label=r["model"], **style
            )
            if r["best_lr"] is not None:
                ax.plot(
                    [r["best_lr"]],
                    [r["per_lr"][r["best_lr"]][1]],
                    linestyle="none",
                    marker="*",
                    markersize=14,
                    color=style["color"],
                    markeredgecolor="black",
                    zorder=5,
                )
            values += [v for p in pts for v in p[1:]]
            lrs.update(p[0] for p in pts)
        ax.plot(
            [],
            [],
            linestyle="none",
            marker="*",
            markersize=10,
            color="white",
            markeredgecolor="black",
            label="chosen LR (best validation)",
        )
        ax.set_xscale("log")
        ax.set_xticks(sorted(lrs), [f"{lr:g}" for lr in sorted(lrs)])
        ax.minorticks_off()
        ax.set_xlabel("fine-tuning learning rate")
        _score_axis(ax, values, trivial_baseline(rows, task), f"mean test {task_rows[0]['metric']}")
        ax.set_title(f"{task}: score vs learning rate{_at_scale(task_rows)}")
        _legend(ax)
        written.append(
            _save(
                fig,
                output / f"learning_rate_{task}.png",
                "Mean test score over seeds at each fine-tuning learning rate, with its 95% CI over "
                "seeds (Student t); star: the LR each model's row reports (best mean validation score); "
                + _baseline_words(rows, [task], "dashed: trivial baseline")
                + ". A best LR at the grid's edge means the optimum may lie outside it.",
            )
        )
    return written


PAPER_PFS_SHARES = (0.25, 0.5, 0.75)  # the paper's CLM shares of a PFS budget


def plot_pfs(rows, output: Path) -> list[Path]:
    """PFS: score vs share of CLM steps, one line per total budget (pure MLM40 = 0, pure CLM = 1 when present)."""
    final = [p for r in rows if (p := names.try_parse_name(r["model"])) is not None and p.paper_step is None]
    budgets = {p.total_steps for p in final if p.kind == "pfs"}

    def points(r):
        p = names.try_parse_name(r["model"])
        if p is None or p.paper_step is not None:
            return None
        if p.kind == "pfs" and p.objective_label == "mlm40":
            return f"{_size(p)} {p.total_steps // 1000}k", p.switch_step / p.total_steps
        if p.kind == "single" and p.total_steps in budgets and p.objective_label in ("clm", "mlm40"):
            return f"{_size(p)} {p.total_steps // 1000}k", 1.0 if p.objective == "clm" else 0.0
        return None

    shares = sorted({x for r in rows if (placed := points(r)) for x in [placed[1]]})
    missing = [share for share in PAPER_PFS_SHARES if not any(abs(share - x) < 0.01 for x in shares)]
    shown = ", ".join(f"{x:.0%}" for x in shares)
    return _lines_per_task(
        rows,
        output,
        "pfs.png",
        points,
        "share of CLM steps (0 = MLM40 only, 1 = CLM only)",
        "PFS split at a fixed budget",
        "Two-phase pretraining (CLM then MLM40) at a fixed step budget: mean test score (95% CI "
        f"over seeds) against the share of CLM steps. These results have the shares {shown}; "
        + (
            f"they cannot show the paper's {', '.join(f'{x:.0%}' for x in missing)} split(s), so "
            "no claim about those splits reads from this figure"
            if missing
            else "every split of the paper (25, 50, 75%) is here"
        )
        + ". {baseline}.",
        baseline="Dashed grey: trivial baseline",
    )


def plot_cpt(rows, output: Path) -> list[Path]:
    """CPT: score vs total steps of MLM40 continued pretraining, one line per base objective."""

    def points(r):
        p = names.try_parse_name(r["model"])
        cpt = p is not None and p.kind == "cpt" and p.paper_step is None
        return (f"{_size(p)} {p.base} base", p.total_steps) if cpt else None

    return _lines_per_task(
        rows,
        output,
        "cpt.png",
        points,
        "total steps (base + CPT, paper scale)",
        "CPT curves",
        "MLM40 continued pretraining from a decayed CLM or MLM40 base: mean test score (95% CI "
        "over seeds) against the total number of steps; {baseline}.",
    )


def plot_gap(gap: list[dict], tests: list[dict], output: Path) -> list[Path]:
    """The CLM - MLM40 gap against tokens per parameter (log), one subplot per task: the stable-phase checkpoints
    joined, the decayed final apart, the paper's crossover interval shaded, and the slope test (`tests`) over the
    checkpoints it was fitted on."""
    from matplotlib.ticker import NullFormatter

    from analysis import findings

    tasks = sorted({r["task"] for r in gap if sum(g["task"] == r["task"] for g in gap) > 1})
    if not tasks:
        return []
    fig, axes = _axes(len(tasks))
    for ax, task in zip(axes, tasks):
        curve = [r for r in gap if r["task"] == task]
        for points, hollow in (([r for r in curve if not r["final"]], False), ([r for r in curve if r["final"]], True)):
            if not points:
                continue
            ax.errorbar(
                [r["tokens_per_parameter"] for r in points],
                [r["delta"] for r in points],
                yerr=_errors([(None, r["delta"], r["ci_low"], r["ci_high"]) for r in points]),
                capsize=3,
                color="black",
                marker=MARKERS[0],
                linestyle="none" if hollow else STYLES[0],
                markersize=9 if hollow else 6,
                markerfacecolor="white" if hollow else "black",
                label="final checkpoint (decayed), 95% CI" if hollow else "stable phase, 95% CI",
            )
        xs = [r["tokens_per_parameter"] for r in curve]
        if interval := findings.crossover_interval(curve[0]["family"]):
            ax.axvspan(
                *interval,
                color="grey",
                alpha=0.15,
                label=f"paper's crossover interval ({interval[0]:.0f}-{interval[1]:.0f})",
            )
        test = next((t for t in tests if t["task"] == task), None)
        if test is not None and not math.isnan(test["delta"]):
            used = [r for r in curve if not r["final"] and r["tokens_per_parameter"] in test["checkpoints"]]
            x = np.log2([r["tokens_per_parameter"] for r in used])
            centre = float(np.mean([r["delta"] for r in used]))
            ax.plot(
                [r["tokens_per_parameter"] for r in used],
                centre + test["delta"] * (x - x.mean()),
                color="C3",
                linestyle=STYLES[1],
                linewidth=2,
                label=f"slope {test['delta']:+.3f} per doubling, p (Holm) {findings.format_p(test['p_holm'])}"
                + (" (not testable)" if test["untestable"] else ""),
            )
        ax.axhline(0.0, color="black", linewidth=1)
        reach = max(abs(v) for r in curve for v in (r["ci_low"], r["ci_high"], r["delta"]) if not math.isnan(v))
        ax.set_ylim(-1.15 * reach, 1.15 * reach)  # symmetric about 0: which objective is ahead reads at a glance
        ax.set_xscale("log")
        ends = [*xs, *(interval or ())]
        ax.set_xlim(min(ends) / 1.5, max(ends) * 1.5)
        ticks = sorted(set(xs))  # the checkpoints, labelled plainly (the interval's ends are in the legend); a tick
        # within 20% of the next one (the last stable-phase checkpoint beside the final) is left unlabelled: no overlap
        ax.set_xticks(
            ticks, [f"{t:.3g}" if t == ticks[-1] or ticks[i + 1] / t > 1.2 else "" for i, t in enumerate(ticks)]
        )
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("pretraining tokens per parameter (input embedding in, LM head out)")
        ax.set_ylabel(f"CLM - MLM40, test {curve[0]['measure']}")
        ax.set_title(f"{task}: the gap over pretraining{_at_scale([{'model': r['a']} for r in curve])}")
        _legend(ax, columns=1)
    return [
        _save(
            fig,
            output / "gap.png",
            "The CLM - MLM40 gap in test score (mean at each model's best learning "
            "rate) at each checkpoint both runs saved, against the tokens per parameter seen; above 0 CLM is "
            "ahead. Error bars: the 95% CIs of the gap table (Student t over seeds or pretraining runs and test "
            "instances), descriptive, not tests. The test is the slope (red, over the stable-phase checkpoints "
            "before the crossover interval; its p is the findings table's, Holm within the finding). Shaded: "
            "the paper's crossover interval (between the released checkpoints bracketing it); open marker: "
            "the final checkpoint, after the learning-rate decay, not joined to the stable-phase curve.",
        )
    ]


def plot_all(rows: list[dict], output: Path, tokens_per_step: float | None = None) -> list[Path]:
    """Every figure the results have data for; returns the files written."""
    return [
        *plot_objectives(rows, output),
        *plot_pretraining_steps(rows, output, tokens_per_step),
        *plot_learning_rates(rows, output),
        *plot_pfs(rows, output),
        *plot_cpt(rows, output),
    ]
