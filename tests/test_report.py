"""The report on synthetic-but-realistic result files: LR choice, t-interval, stability, paired test, figures."""

import csv

import numpy as np
import pytest
from scipy import stats

from analysis import report, statistics
from core import artifacts, cli, names, store

LRS = (1e-5, 5e-5, 1e-4)
N_TEST = 40


def write_run(
    root,
    model,
    task,
    lr,
    seed,
    val,
    test_scores,
    status="ok",
    family="sc",
    metric="accuracy",
    protocol=None,
    test_extra=None,
):
    record = {
        "format": store.RESULT_FORMAT,
        "kind": "grid",
        "model": model,
        "task": task,
        "family": family,
        "lr": lr,
        "seed": seed,
        "pretrain_seed": store.pretrain_seed(model),
        "status": status,
        "main_metric": metric,
        "validation": {},
        "test": {},
        "per_instance": {"validation": [], "test": []},
        "config": {},
        "versions": {},
        "identity": {
            "model": {"config": model},
            "task": {"definition": task},
            "protocol": protocol or {"max_steps": 1000},
        },
        "trivial_baseline": {"validation": {metric: 0.5}, "test": {metric: 0.5}},
    }
    if status == "ok":
        record["validation"] = {metric: val}
        record["test"] = {metric: float(np.mean(test_scores)), **(test_extra or {})}
        record["per_instance"]["test"] = [{metric: float(s)} for s in test_scores]
    artifacts.write_json_atomic(store.result_path(root, model, task, lr, seed), record)
    return record


@pytest.fixture
def results(tmp_path):
    """Study-named models on one SC task: 3 LRs x 5 seeds; 5e-5 is best on validation for every model."""
    rng = np.random.default_rng(0)
    models = {
        "610m-clm-42k": 0.80,
        "610m-mlm40-42k": 0.85,
        "610m-clm-42k-1000": 0.70,
        "610m-clm-21k-mlm40-42k": 0.87,
        "610m-clm-dec42k-mlm40-44k": 0.86,
        "610m-clm-dec42k-mlm40-54k": 0.88,
    }
    for model, level in models.items():
        for lr in LRS:
            for seed in range(5):
                bonus = 0.05 if lr == 5e-5 else 0.0
                correct = rng.random(N_TEST) < level + bonus
                write_run(tmp_path, model, "sst2", lr, seed, level + bonus + 0.01 * seed, correct.astype(float))
    return tmp_path


def test_model_kinds_and_name_parts():
    kind = statistics.model_kind
    assert [
        kind(n)
        for n in (
            "610m-mlm40-42k",
            "610m-clm-21k-mlm40-42k",
            "610m-mlm40-dec42k-mlm40-64k",
            "610m-clm-42k-5000",
            "bert-base-uncased",
        )
    ] == ["single", "pfs", "cpt", "intermediate", "other"]
    pfs = names.parse_name("610m-clm-21k-mlm40-42k")
    assert (pfs.switch_step, pfs.total_steps, pfs.objective_label) == (21000, 42000, "mlm40")
    cpt = names.parse_name("610m-mlm40-dec42k-mlm40-64k")
    assert (cpt.kind, cpt.base, cpt.base_steps, cpt.total_steps) == ("cpt", "mlm40", 42000, 64000)
    inter = names.parse_name("610m-clm-42k-5000")
    assert (inter.kind, inter.run_name, inter.paper_step) == ("single", "610m-clm-42k", 5000)
    assert names.try_parse_name("bert-base-uncased") is None


def test_best_lr_and_t_interval(results):
    records = statistics.load_results(results)
    rows = {r["model"]: r for r in statistics.summarize(records)}
    row = rows["610m-mlm40-42k"]
    assert row["best_lr"] == 5e-5 and row["n_seeds"] == 5 and row["n_diverged"] == 0
    test = [r["test"]["accuracy"] for r in records if r["model"] == "610m-mlm40-42k" and r["lr"] == 5e-5]
    mean, sem = np.mean(test), np.std(test, ddof=1) / np.sqrt(5)
    half = stats.t.ppf(0.975, df=4) * sem  # by hand: mean +- t(0.975, n-1) * s / sqrt(n)
    assert row["mean"] == pytest.approx(mean)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((mean - half, mean + half))
    every = [r["test"]["accuracy"] for r in records if r["model"] == "610m-mlm40-42k"]
    assert row["stability_std"] == pytest.approx(np.std(every, ddof=1))


def test_diverged_lr_is_not_picked(results):
    # 1e-3 has the best validation score but one diverged seed: it must rank below every LR without divergence.
    for seed in range(4):
        write_run(results, "610m-mlm40-42k", "sst2", 1e-3, seed, 0.99, np.ones(N_TEST))
    write_run(results, "610m-mlm40-42k", "sst2", 1e-3, 4, None, None, status="diverged")
    row = {r["model"]: r for r in statistics.summarize(statistics.load_results(results))}["610m-mlm40-42k"]
    assert row["best_lr"] == 5e-5 and row["n_diverged"] == 1 and row["n_runs"] == 20


def test_bootstrap_interval_contains_mean(results):
    rows = statistics.summarize(statistics.load_results(results), bootstrap=True)
    row = {r["model"]: r for r in rows}["610m-clm-42k"]
    assert row["ci_low"] <= row["mean"] <= row["ci_high"]


def test_paired_comparison(results):
    records = statistics.load_results(results)
    rows = statistics.summarize(records)
    (cmp,) = statistics.compare(records, rows, "610m-mlm40-42k", "610m-clm-42k")

    def pick(m):
        kept = [store.kept_scores(r)[store.main_metric(r)][0] for r in records if r["model"] == m and r["lr"] == 5e-5]
        return np.mean(kept, axis=0)

    a, b = pick("610m-mlm40-42k"), pick("610m-clm-42k")
    assert cmp["delta"] == pytest.approx(a.mean() - b.mean())
    assert (cmp["wins"], cmp["losses"]) == (int((a > b).sum()), int((a < b).sum()))
    assert cmp["ci_low"] <= cmp["delta"] <= cmp["ci_high"]


def test_report_writes_tables_and_figures(results, tmp_path):
    out = report.main([str(results), "--output", str(tmp_path / "report"), "--compare", "610m-mlm40-42k,610m-clm-42k"])
    header = (out / "summary.csv").read_text().splitlines()[0].split(",")
    assert header[:12] == [
        "model",
        "task",
        "family",
        "metric",
        "best_lr",
        "n_seeds",
        "mean",
        "ci_low",
        "ci_high",
        "trivial_baseline",
        "entity_f1",
        "std",
    ]
    text = (out / "summary.md").read_text()
    assert "Paired comparisons" in text
    table = text.split("\n\n")[2]  # the page starts with the results table: mean ± CI half-width per model
    assert table.startswith("| model | parameters | step | sst2 (accuracy) |")
    assert "| *trivial baseline* |  |  | 0.5 |" in table
    for name in ("objective_sc.png", "pretraining_steps.png", "learning_rate_sst2.png", "pfs.png", "cpt.png"):
        assert (out / name).stat().st_size > 1000, name


def test_report_shows_the_scale_first_in_every_name(results, tmp_path, monkeypatch):
    """At a non-paper scale (--scale, what recipes.study passes) no table, finding, figure title or legend shows a
    bare paper name; at the paper scale the names are the paper's, untouched."""
    import re

    import matplotlib.pyplot as plt

    drawn, close = [], plt.close
    monkeypatch.setattr(plt, "close", lambda fig: (drawn.append(fig), close(fig)))
    pair = ["--compare", "610m-mlm40-42k,610m-clm-42k"]
    regime = ["--tokens_per_step", "51.2", "--parameters", "615232"]  # the mini scale's: below the crossover
    out = report.main([str(results), "--output", str(tmp_path / "mini"), "--scale", "mini", *pair, *regime])
    axes = [ax for fig in drawn for ax in fig.axes if ax.get_visible()]
    lines = {label for ax in axes for label in ax.get_legend_handles_labels()[1]} - {
        "trivial baseline",
        "chosen LR (best validation)",
    }
    assert len(drawn) == 5 and lines and all(label.startswith("mini-610m") for label in lines), lines
    assert all(ax.get_title().endswith("(mini scale)") for ax in axes)
    rows = list(csv.DictReader(open(out / "summary.csv", newline="")))
    assert {r["model"] for r in rows} == {f"mini-{m}" for m in {r["model"] for r in statistics.load_results(results)}}
    text = (out / "summary.md").read_text() + (out / "findings.csv").read_text()
    assert "| mini-610m-clm-42k | " in text and "mini-610m-clm-42k saw " in text  # tables and the reasons
    assert not re.search(r"(?<![\w-])610m-", text)  # every model name carries the scale
    assert report.report_scale(out) == "mini"
    paper = report.main([str(results), "--output", str(tmp_path / "paper"), "--scale", "paper", *pair])
    assert "| 610m-clm-42k | " in (paper / "summary.md").read_text() and report.report_scale(paper) == "paper"
    assert "mini-" not in (paper / "summary.md").read_text()


def test_entity_f1_beside_the_main_metric_for_tc(results, tmp_path):
    """A TC model predicting no entity scores well on the lenient sentence_macro_f1; entity_f1 shows it."""
    for lr, val in ((1e-5, 0.4), (5e-5, 0.5)):
        for seed in range(3):
            entity = 0.0 if lr == 5e-5 else 0.3 + 0.1 * seed  # the best LR (5e-5) predicts no entity at all
            write_run(
                results,
                "610m-clm-42k",
                "conll2003",
                lr,
                seed,
                val,
                np.full(10, 0.88 + 0.01 * seed),
                family="tc",
                metric="sentence_macro_f1",
                test_extra={"entity_f1": entity, "token_micro_f1": 0.8},
            )
    rows = {(r["model"], r["task"]): r for r in statistics.summarize(statistics.load_results(results))}
    tc_row = rows[("610m-clm-42k", "conll2003")]
    assert tc_row["best_lr"] == 5e-5 and tc_row["mean"] == pytest.approx(0.89) and tc_row["entity_f1"] == 0.0
    assert rows[("610m-clm-42k", "sst2")]["entity_f1"] is None
    out = report.main([str(results), "--output", str(tmp_path / "report")])
    with open(out / "summary.csv", encoding="utf-8") as f:
        csv_rows = {(r["model"], r["task"]): r for r in csv.DictReader(f)}
    assert csv_rows[("610m-clm-42k", "conll2003")]["entity_f1"] == "0"
    assert csv_rows[("610m-clm-42k", "sst2")]["entity_f1"] == ""
    md = (out / "summary.md").read_text()
    assert "| entity_f1 |" in md
    assert "| 610m-clm-42k | 608M | 42,000 | conll2003 | tc | sentence_macro_f1 | 5e-05 | 3 | 0.89 |" in md
    assert "| model | parameters | step | conll2003 |\n|---|---|---|---|\n| 610m-clm-42k | 608M | 42,000 | 0 |" in md


def test_figures_without_data_are_skipped(tmp_path):
    write_run(tmp_path, "bert-tiny", "sst2", 1e-5, 0, 0.5, np.ones(4))
    out = report.main([str(tmp_path), "--output", str(tmp_path / "report")])
    assert sorted(p.name for p in out.glob("*.png")) == ["objective_sc.png"]
    row = statistics.summarize(statistics.load_results(tmp_path))[0]
    assert row["n_seeds"] == 1 and np.isnan(row["ci_low"])  # one seed: no interval, not a fake one


def test_report_cli(results, tmp_path, call_main):
    cli = [results, "--output", tmp_path / "cli"]
    assert call_main(report.main, *cli).returncode == 0
    assert (tmp_path / "cli" / "summary.md").is_file()
    bad = call_main(report.main, *cli, "--compare", "610m-mlm40-42k,nope")
    assert bad.returncode == 2 and "--compare needs two model names" in bad.stderr


def test_scale_is_refused_on_results_that_name_their_own(tmp_path, call_main):
    """Results filed outside a study under the scale their model was trained at (smoke-610m-mlm40-42k: the grid's
    name for a smoke checkpoint) already say it: `--scale` on them is refused in one line, nothing written."""
    for seed in range(2):
        write_run(tmp_path, "smoke-610m-mlm40-42k", "sst2", 5e-5, seed, 0.8, np.ones(N_TEST))
    bad = call_main(report.main, tmp_path, "--output", tmp_path / "report", "--scale", "mini")
    assert bad.returncode == 2 and "already name the scale" in bad.stderr and not (tmp_path / "report").exists()
    assert call_main(report.main, tmp_path, "--output", tmp_path / "report").returncode == 0


def test_results_of_different_protocols_are_never_averaged_in_one_row(results, call_main):
    # one seed of one LR re-run with another protocol (e.g. --max_steps 500) in the same results directory
    write_run(results, "610m-mlm40-42k", "sst2", 5e-5, 4, 0.9, np.ones(N_TEST), protocol={"max_steps": 500})
    with pytest.raises(ValueError, match=r"made differently \(protocol\.max_steps: 1000 -> 500\)"):
        statistics.summarize(statistics.load_results(results))
    proc = call_main(report.main, results)
    assert proc.returncode == 2 and "made differently" in proc.stderr.splitlines()[-1]


def test_paired_comparison_resamples_seeds_too(results):
    """Two models whose seeds disagree wildly: resampling only instances would call a seed-level fluke
    significant; resampling seeds as well widens the interval to include 0."""
    rng = np.random.default_rng(1)
    for model, flips in (("a-model", (0.95, 0.55)), ("b-model", (0.55, 0.95))):
        for seed, level in enumerate(flips):
            write_run(results, model, "sst2", 5e-5, seed, 0.5, (rng.random(400) < level).astype(float))
    records = statistics.load_results(results)
    rows = statistics.summarize(records)
    (cmp,) = statistics.compare(records, rows, "a-model", "b-model")
    assert cmp["ci_low"] < 0 < cmp["ci_high"] and cmp["p_bootstrap"] > 0.05


def write_levels(root, levels, task="sst2", lrs=(1e-5, 5e-5, 1e-4), n=1000, **kwargs):
    """3 seeds per LR of each model; `levels[model]` = (score at 5e-5, score at the other LRs): 5e-5 is best."""
    rng = np.random.default_rng(0)
    for model, (best, other) in levels.items():
        for lr in lrs:
            level = best if lr == 5e-5 else other
            for seed in range(3):
                write_run(root, model, task, lr, seed, level, (rng.random(n) < level).astype(float), **kwargs)
    records = statistics.load_results(root)
    return records, statistics.summarize(records)


KNOWN = {
    "610m-clm-42k": (0.70, 0.68),
    "610m-mlm40-42k": (0.80, 0.60),
    "610m-clm-21k-mlm40-42k": (0.90, 0.85),
    "610m-clm-dec42k-mlm40-54k": (0.90, 0.85),
    "610m-mlm40-dec42k-mlm40-54k": (0.75, 0.7),
    "610m-clm-42k-1000": (0.75, 0.65),
    "610m-mlm40-42k-1000": (0.55, 0.45),
    "610m-clm-42k-2000": (0.75, 0.65),
    "610m-mlm40-42k-2000": (0.70, 0.6),
    "610m-clm-42k-4000": (0.75, 0.65),
    "610m-mlm40-42k-4000": (0.73, 0.6),
}


def test_findings_give_a_verdict_per_paper_claim(tmp_path):
    """Paper-scale names (163 tokens per parameter), every optimum inside the LR grid: MLM40 beats CLM on SC, CLM
    leads at the earliest checkpoint and the gap closes (+0.20 at 1k steps, +0.05 at 2k, +0.02 at 4k), CLM is flat
    over LRs relative to its gain, PFS and CPT win: every finding agrees; no TC task: the TC finding is not testable."""
    from analysis import findings

    records, rows = write_levels(tmp_path, KNOWN)
    tested = findings.comparisons(records, rows)
    verdict = {v["finding"]: v["verdict"] for v in findings.verdicts(tested, {"sc"})}
    assert verdict == {
        **{
            f"{f}_{claim}": f"not testable at this scale: no {f.upper()} task"
            for f, claim in (("tc", "clm_on_par"), ("qa", "mlm_better"), ("ir", "mlm_better"), ("ir", "gap_narrows"))
        },
        **{
            k: "agrees at this scale"
            for k in (
                "sc_mlm_better",
                "data_efficiency",
                "stability",
                "pfs_vs_mlm",
                "pfs_vs_clm",
                "cpt_vs_mlm_cpt",
                "cpt_vs_base",
            )
        },
    }
    flipped = next(r for r in tested if r["finding"] == "sc_mlm_better")
    assert (flipped["a"], flipped["b"]) == ("610m-mlm40-42k", "610m-clm-42k") and flipped["delta"] > 0
    for finding in findings.CLAIMS:  # one Holm family per finding
        mine = [r for r in tested if r["finding"] == finding]
        assert [r["p_holm"] for r in mine] == pytest.approx(statistics.holm([r["p"] for r in mine]))
    assert min(r["p"] for r in tested) > 0
    out = report.main([str(tmp_path), "--output", str(tmp_path / "report")])
    text = (out / "summary.md").read_text()
    assert "## The paper's findings at this scale" in text and report.UNITS in text
    assert "Holm families (one per finding, each comparison counted once): tc_clm_on_par" not in text
    assert (
        "sc_mlm_better: 1 test(s) of A - B > 0 (sst2); data_efficiency: 2 test(s) of CLM - MLM40 > 0 at the "
        "earliest checkpoint; and slope of CLM - MLM40 per doubling < 0 (sst2 lead, sst2 slope)" in text
    )
    assert (
        (out / "findings.csv")
        .read_text()
        .startswith("finding,task,a,b,parameters,step,measure,hypothesis,delta,ci_low,ci_high,p,p_holm,p_other_holm")
    )


def test_each_reason_a_finding_is_not_testable(tmp_path):
    from analysis import findings

    # tokens per parameter: the mini study's regime (2048 tokens per 40 paper steps, 0.6M parameters): 3.5
    records, rows = write_levels(tmp_path / "a", KNOWN)
    toy = findings.Regime(tokens_per_step=2048 / 40, parameters=615232)
    tested = findings.comparisons(records, rows, toy)
    # the gap's slope is tested before the crossover (where the toy scale is); every other comparison past it
    assert {r["verdict"] for r in tested if r["finding"] != "data_efficiency"} == {"not testable"}
    assert [r["verdict"] for r in tested if r["finding"] == "data_efficiency"] == ["supports", "supports"]
    sc = next(v for v in findings.verdicts(tested) if v["finding"] == "sc_mlm_better")["verdict"]
    assert sc.startswith(
        "not testable at this scale: below the paper's crossover interval: 610m-mlm40-42k saw 3.5 "
        "tokens per parameter; the paper's SC crossover lies in 19-78 (26-103 without embeddings)"
    )
    # the LR grid's edge: every best LR is the largest of the grid
    records, rows = write_levels(
        tmp_path / "b", {m: KNOWN[m] for m in ("610m-clm-42k", "610m-mlm40-42k")}, lrs=(1e-5, 2e-5, 5e-5)
    )
    (mlm_vs_clm, stability) = [
        v["verdict"]
        for v in findings.verdicts(findings.comparisons(records, rows))
        if v["finding"] in ("sc_mlm_better", "stability")
    ]
    for verdict in (mlm_vs_clm, stability):
        assert verdict.startswith("not testable at this scale: best LR on the grid's edge: 610m-")
        assert verdict.endswith("'s optimum is not bracketed (best LR 5e-05, grid 1e-05-5e-05)")
    # the budget: a PFS run at 11k steps (43 tokens per parameter) on a TC task (no crossover interval), below the
    # paper's 12k; on SC the same run is inside the crossover interval as well
    levels = {"610m-clm-11k": (0.7, 0.6), "610m-mlm40-11k": (0.8, 0.6), "610m-clm-5k-mlm40-11k": (0.9, 0.6)}
    write_levels(tmp_path / "c", levels)
    records, rows = write_levels(tmp_path / "c", levels, task="conll2003", family="tc", metric="sentence_macro_f1")
    pfs = {(r["finding"], r["task"]): r["untestable"] for r in findings.comparisons(records, rows)}
    assert pfs[("pfs_vs_mlm", "conll2003")] == "budget of 42.7 tokens per parameter, below the paper's smallest (47)"
    assert pfs[("pfs_vs_mlm", "sst2")].startswith("inside the crossover interval: 610m-clm-5k-mlm40-11k saw 42.7")
    assert pfs[("pfs_vs_mlm", "sst2")].endswith(
        "; budget of 42.7 tokens per parameter, below the paper's smallest (47)"
    )


def test_tc_claim_is_never_supported_by_non_significance_and_p_is_never_zero(tmp_path):
    """TC: CLM and MLM at one level, measured on 1,000 instances and 3 seeds: the CI is wider than the margin, so
    the claim "on par or better" is not significant (today's rule called that support); a bootstrap p with no
    sample past 0 prints as "< 1/2000", never 0."""
    from analysis import findings

    records, rows = write_levels(
        tmp_path,
        {"610m-clm-42k": (0.80, 0.7), "610m-mlm40-42k": (0.80, 0.7)},
        task="conll2003",
        family="tc",
        metric="sentence_macro_f1",
    )
    (tc,) = [r for r in findings.comparisons(records, rows) if r["finding"] == "tc_clm_on_par"]
    assert tc["verdict"] == "not significant" and tc["p_holm"] > 0.05 and tc["ci_low"] < -findings.TC_MARGIN
    assert report._fmt_p(0.0005, bound=True) == "< 1/2000" and report._fmt_p(1e-9) == "< 1e-06"


def test_stability_does_not_call_a_model_that_learns_more_less_stable(tmp_path):
    """Two models whose per-LR curves have the same shape relative to the baseline, one learning twice as much: the
    same relative spread (the raw std over LRs would call the better learner twice as unstable)."""
    from analysis import findings

    baseline = 0.5
    for model, gain in (("weak", 0.1), ("strong", 0.2)):
        for lr, share in ((1e-5, 0.5), (5e-5, 1.0), (1e-4, 0.75)):
            for seed in range(3):
                write_run(tmp_path, model, "sst2", lr, seed, share, np.full(10, baseline + gain * share))
    records = statistics.load_results(tmp_path)
    spread = {
        m: findings.relative_lr_spread([r for r in records if r["model"] == m], baseline, 5e-5)[0]
        for m in ("weak", "strong")
    }
    raw = {m: np.std([baseline + g * s for s in (0.5, 1.0, 0.75)]) for m, g in (("weak", 0.1), ("strong", 0.2))}
    assert spread["weak"] == pytest.approx(spread["strong"]) and raw["strong"] == pytest.approx(2 * raw["weak"])


def test_every_figure_shows_its_baseline_and_labels(tmp_path, monkeypatch):
    """Each figure from a small result set: the trivial baseline inside every score axis, axes labelled, bars from
    0, the chosen LR starred on LR curves, data efficiency in tokens seen."""
    import matplotlib.pyplot as plt

    from analysis import figures

    records, rows = write_levels(tmp_path, KNOWN, n=50)
    drawn, close = {}, plt.close
    monkeypatch.setattr(plt, "close", lambda fig: (drawn.setdefault(len(drawn), fig), close(fig)))
    paths = figures.plot_all(rows, tmp_path, tokens_per_step=2048 / 40)  # CPT: one point per base, no curve
    assert sorted(p.name for p in paths) == [
        "learning_rate_sst2.png",
        "objective_sc.png",
        "pfs.png",
        "pretraining_steps.png",
    ]
    for path, fig in zip(paths, drawn.values()):
        for ax in [a for a in fig.axes if a.get_visible()]:
            low, high = ax.get_ylim()
            assert (
                low <= 0.5 <= high
                and ax.get_ylabel()
                and ax.get_xlabel() + "".join(t.get_text() for t in ax.get_xticklabels())
            ), path.name
            labels = ax.get_legend_handles_labels()[1]
            assert "trivial baseline" in labels and ax.get_legend() is not None, path.name
            if path.name == "objective_sc.png":
                assert low == 0.0
            if path.name == "learning_rate_sst2.png":
                assert "chosen LR (best validation)" in labels
            if path.name == "pretraining_steps.png":
                assert ax.get_xlabel() == "pretraining tokens seen (millions)"
        assert (
            fig.texts
            and max(len(line) for line in fig.texts[-1].get_text().splitlines())
            <= fig.get_figwidth() * figures.CHARS_PER_INCH
        ), path.name


def test_a_model_has_one_colour_in_every_figure_and_subplot(tmp_path, monkeypatch):
    """Two tasks, so the PFS and data-efficiency figures have two subplots each: every line or bar label has one
    colour in all of them, a model of the study's grammar its objective's (`core.colours`) whatever its scale, size
    or step, and the objectives of one figure each their own."""
    import matplotlib.colors
    import matplotlib.pyplot as plt

    from analysis import figures
    from core import colours

    write_levels(tmp_path, KNOWN)
    _, rows = write_levels(tmp_path, KNOWN, task="mnli")
    drawn, close = [], plt.close
    monkeypatch.setattr(plt, "close", lambda fig: (drawn.append(fig), close(fig)))
    paths = figures.plot_all(rows, tmp_path, tokens_per_step=2048 / 40)
    assert {"pfs.png", "pretraining_steps.png", "learning_rate_mnli.png", "objective_sc.png"} <= {p.name for p in paths}
    seen = {}
    for fig in drawn:
        subplots = [a for a in fig.axes if a.get_visible()]
        for ax in subplots:
            for handle, label in zip(*ax.get_legend_handles_labels()):
                if label in ("trivial baseline", "chosen LR (best validation)"):
                    continue
                artist = handle.patches[0] if hasattr(handle, "patches") else handle[0]
                colour = matplotlib.colors.to_hex(
                    artist.get_facecolor() if hasattr(handle, "patches") else artist.get_color()
                )
                key = label if colours.objective_key(label) else (id(fig), label)  # others: one look per figure
                assert seen.setdefault(key, colour) == colour, (label, fig.axes[0].get_title())
    grammar = {label: colour for label, colour in seen.items() if isinstance(label, str)}
    assert grammar and all(colour == matplotlib.colors.to_hex(colours.of(label)) for label, colour in grammar.items())
    assert len(set(grammar.values())) == len({colours.objective_key(label) for label in grammar})
    assert colours.of("mini-610m-clm-42k-1000") == colours.of("210m-clm-10k") != colours.of("610m-mlm40-42k")
    assert (
        len(
            {
                colours.of(n)
                for n in (
                    "610m-clm-42k",
                    "610m-mlm20-42k",
                    "610m-mlm40-42k",
                    "610m-clm-21k-mlm40-42k",
                    "610m-clm-dec42k-mlm40-54k",
                    "610m-mlm40-dec42k-mlm40-54k",
                )
            }
        )
        == 6
    )


def test_seeds_needed_is_the_fewest_seeds_for_the_target_half_width():
    for std in (0.005, 0.0125, 0.03, 0.1):
        n = statistics.seeds_needed(std)
        half = lambda k: stats.t.ppf(0.975, k - 1) * std / np.sqrt(k)  # noqa: E731
        assert half(n) <= statistics.TARGET_HALF_WIDTH and (n == 2 or half(n - 1) > statistics.TARGET_HALF_WIDTH)
    assert statistics.seeds_needed(0.0125) == 4 and statistics.seeds_needed(float("nan")) is None


def test_report_names_means_below_the_baseline_and_too_wide_for_the_target(tmp_path):
    """One model learns sst2 (tight, well above the 0.5 baseline); one sits on the baseline with a wide spread:
    the report lists the second under both checks, with the seeds its spread would need."""
    for model, level, spread in (("610m-clm-42k", 0.9, 0.002), ("610m-mlm40-42k", 0.5, 0.04)):
        for seed in range(3):
            score = level + spread * (seed - 1)
            write_run(tmp_path, model, "sst2", 1e-4, seed, score, np.full(N_TEST, score))
    out = report.main([str(tmp_path), "--output", str(tmp_path / "report")])
    text = (out / "summary.md").read_text()
    below = text.split("## Above the trivial baseline")[1].split("##")[0]
    assert "1 of 2 model x task means with a known baseline do not clear it" in below
    assert "| 610m-mlm40-42k | 608M | 42,000 | sst2 |" in below and "610m-clm-42k" not in below
    assert "| 0.5 | at the baseline: not learned |" in below
    wide = text.split("## Seeds for a ±0.02 interval (SC and TC)")[1].split("##")[0]
    # std 0.04 over seeds: t(0.975, n-1) * 0.04 / sqrt(n) <= 0.02 first at n = 18
    assert "| 610m-mlm40-42k | 608M | 42,000 | sst2 | 3 |" in wide and wide.rstrip().endswith("| 0.04 | 18 |")
    assert "610m-clm-42k" not in wide


def test_report_never_replaces_files_it_did_not_write_and_leaves_nothing_stale(results, tmp_path, capsys):
    user = tmp_path / "mine"
    user.mkdir()
    (user / "summary.md").write_text("my notes")
    with pytest.raises(SystemExit) as exit_info:
        report.main([str(results), "--output", str(user)])
    assert exit_info.value.code == 2 and "did not write" in capsys.readouterr().err
    assert [p.name for p in user.iterdir()] == ["summary.md"] and (user / "summary.md").read_text() == "my notes"
    (tmp_path / "afile").write_text("x")
    with pytest.raises(SystemExit):
        report.main([str(results), "--output", str(tmp_path / "afile")])
    with pytest.raises(SystemExit):  # a comparison of a model with itself
        report.main([str(results), "--output", str(tmp_path / "new"), "--compare", "610m-clm-42k,610m-clm-42k"])
    assert not (tmp_path / "new").exists()

    out = tmp_path / "report"
    report.main([str(results), "--output", str(out)])
    first = {p.name for p in out.iterdir()}
    assert "findings.csv" in first and any(name.endswith(".png") for name in first)
    other = tmp_path / "other"
    write_run(other, "bert-tiny", "sst2", 1e-5, 0, 0.5, np.ones(4))
    report.main([str(other), "--output", str(out)])  # an earlier report's folder: rewritten, nothing stale left
    assert sorted(p.name for p in out.glob("*.png")) == ["objective_sc.png"]
    assert not (out / "findings.csv").exists() and "bert-tiny" in (out / "summary.md").read_text()


# a report SIGKILLed at sys.argv[1]: while drawing its figures (its tables written) or once it moved one file in
KILLED_REPORT = """
import os, signal, sys
from analysis import report

def kill(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

replace = os.replace

def move_one_then_kill(source, target):  # a file of the report moved in from its staging folder
    replace(source, target)
    if os.path.basename(os.path.dirname(source)).startswith(".report.") and "/.report." not in str(target):
        kill()

if sys.argv[1] == "figures":
    report.figures.plot_all = kill
else:
    report.os.replace = move_one_then_kill
report.main(sys.argv[2:])
"""


@pytest.mark.parametrize("kill_at", ["figures", "moving"])
def test_a_report_killed_mid_write_is_rerun_into_its_folder_keeping_what_a_person_added(results, tmp_path, kill_at):
    """Issue 54: a report killed while it writes (a real SIGKILL: no cleanup), then a person adds NOTES.md and a
    figure of their own to its folder, then the same command again: the rerun replaces the report and keeps both,
    and the file that was there before; it leaves what a fresh report leaves, and its marker names exactly its
    files. (The killed run wrote into a staging folder, so at most the files it was moving in were its own.)"""
    import signal
    import subprocess
    import sys

    from core.paths import REPO_ROOT

    out = tmp_path / "report"
    report.main([str(results), "--output", str(out)])  # an earlier, complete report
    fresh = {p.name for p in out.iterdir()}
    (out / "notes.txt").write_text("kept")  # added to its folder since: not the report's own
    argv = [sys.executable, "-c", KILLED_REPORT, kill_at, str(results), "--output", str(out)]
    killed = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    moved_in = {p.name for p in out.iterdir() if not p.name.startswith(".")} - {"notes.txt"}
    assert len(moved_in) == (1 if kill_at == "moving" else 0) and any(out.glob(".report.*.tmp"))
    (out / "NOTES.md").write_text("a person's notes")
    (out / "mine.png").write_text("a person's figure")
    report.main([str(results), "--output", str(out)])
    assert (out / "notes.txt").read_text() == "kept" and (out / "NOTES.md").read_text() == "a person's notes"
    assert (out / "mine.png").read_text() == "a person's figure"
    assert {p.name for p in out.iterdir()} == fresh | {"notes.txt", "NOTES.md", "mine.png"}  # no staging folder
    marker = artifacts.read_json(out / report.REPORT_MARK)
    assert marker["files"] == sorted(fresh - {report.REPORT_MARK})


def test_gap_over_pretraining_is_one_slope_test_and_its_figure(tmp_path, monkeypatch):
    """Known curves at paper scale (tokens per parameter 3.9, 7.8, 15.5 before the SC crossover interval, then the
    decayed final at 163): on sst2 the gap falls by about 0.1 per doubling, on mrpc CLM leads by a steady margin.
    The bullets state each slope test with the findings table's numbers; the figure draws the stable-phase points
    joined, the decayed final apart, the crossover interval and the slope, symmetric about 0."""
    import matplotlib.pyplot as plt

    from analysis import figures, findings

    levels = {
        "610m-clm-42k-1000": (0.85, 0.7),
        "610m-mlm40-42k-1000": (0.60, 0.55),
        "610m-clm-42k-2000": (0.80, 0.7),
        "610m-mlm40-42k-2000": (0.65, 0.55),
        "610m-clm-42k-4000": (0.75, 0.7),
        "610m-mlm40-42k-4000": (0.70, 0.65),
        "610m-clm-42k": (0.70, 0.65),
        "610m-mlm40-42k": (0.85, 0.8),
    }
    write_levels(tmp_path, levels, n=300)
    write_levels(tmp_path, {m: (0.8 if "clm" in m else 0.7, 0.6) for m in levels}, task="mrpc", n=300)
    records = statistics.load_results(tmp_path)
    rows = statistics.summarize(records)
    tested = findings.comparisons(records, rows)
    gap = findings.gap_over_pretraining(records, rows, findings.Regime())
    sst2 = [r for r in gap if r["task"] == "sst2"]
    assert [round(r["tokens_per_parameter"], 1) for r in sst2] == [3.9, 7.8, 15.5, 163.0]
    assert [r["phase"] for r in sst2] == ["before"] * 3 + ["past"] and [r["final"] for r in sst2] == [0, 0, 0, 1]
    slopes = {r["task"]: r for r in tested if r["finding"] == "data_efficiency" and r["part"] == "slope"}
    leads = {r["task"]: r for r in tested if r["finding"] == "data_efficiency" and r["part"] == "lead"}
    assert slopes["sst2"]["verdict"] == "supports" and slopes["sst2"]["delta"] == pytest.approx(-0.1, abs=0.05)
    assert slopes["mrpc"]["verdict"] == "not significant"
    assert leads["sst2"]["verdict"] == leads["mrpc"]["verdict"] == "supports"  # CLM ahead at 1k steps on both
    text = findings.gap_trend(sst2, slopes["sst2"], leads["sst2"])
    assert (
        text.startswith("CLM - MLM40 at the earliest checkpoint (3.88): +0.2")
        and "CLM leads; slope of CLM - "
        "MLM40 per doubling of tokens per parameter over 3 stable-phase checkpoints (3.88-15.5): -0."
        in text
    )
    assert ": the gap closes; final (decayed) at 163: -0.1" in text
    out = report.main([str(tmp_path), "--output", str(tmp_path / "report")])
    page = (out / "summary.md").read_text()
    assert f"- **sst2** (accuracy): {text}." in page and (out / "gap.png").is_file()
    drawn, close = [], plt.close
    monkeypatch.setattr(plt, "close", lambda fig: (drawn.append(fig), close(fig)))
    figures.plot_gap(gap, list(slopes.values()), tmp_path)
    for ax in [a for a in drawn[0].axes if a.get_visible()]:
        low, high = ax.get_ylim()
        assert low < 0 < high and low == pytest.approx(-high)
        labels = ax.get_legend_handles_labels()[1]
        assert "paper's crossover interval (19-78)" in labels and any(label.startswith("slope ") for label in labels)
        assert ax.get_xscale() == "log" and ax.get_title().endswith("(paper scale)")
        joined = [line for line in ax.get_lines() if line.get_linestyle() == "-" and len(line.get_xdata()) == 3]
        assert len(joined) == 1 and max(joined[0].get_xdata()) < 20  # the decayed final (163) is not on the curve


def test_a_study_declares_its_lr_grid_bracketed_by_an_earlier_one(tmp_path):
    """A study whose grid has 2 LRs (`Study.bracketed_by`, passed by `recipes.study.report` as --bracketed_by):
    the report counts the optimum as bracketed, says so above the findings table and in its bracket column and
    findings.csv; the same results without it leave every comparison not testable; a task without results is
    refused."""
    import dataclasses

    from recipes import study as driver
    from recipes.studies import STUDIES

    levels = {m: KNOWN[m] for m in ("610m-clm-42k", "610m-mlm40-42k")}
    write_levels(tmp_path / "results", levels, lrs=(5e-5, 1e-4))
    study = dataclasses.replace(STUDIES["smoke"], scale="paper", compare=None, bracketed_by={"sst2": (1e-5, 5e-4)})
    assert "bracketed_by" not in study.definition()  # how the report reads the grid, not what the study runs
    assert driver.bracketed_by_arg(study) == "sst2=1e-05,0.0005"
    driver.report(study, tmp_path)
    text = (tmp_path / "report" / "summary.md").read_text()
    note = (
        "bracketed by an earlier grid (sst2: 1e-05 and 0.0005 measured worse than this grid's 5e-05-0.0001 in "
        "an earlier run; declared, not measured in this study)"
    )
    assert "counted as bracketed because the study declares (`--bracketed_by`)" in text and note in text
    assert "| **agrees at this scale** |" in text and "never bracketed" not in text
    with open(tmp_path / "report" / "findings.csv") as f:
        rows = list(csv.DictReader(f))
    assert {r["bracket"] for r in rows} == {note}
    assert {r["untestable"] for r in rows if r["finding"] != "stability"} == {""}
    # a declared bracket never makes a spread across LRs: stability needs 3 LRs fine-tuned in the study itself
    (spread,) = [r for r in rows if r["finding"] == "stability"]
    assert spread["untestable"].startswith(
        "610m-clm-42k was fine-tuned at 2 LR(s) in this study: a spread across LRs needs 3"
    )

    plain = report.main([str(tmp_path / "results"), "--output", str(tmp_path / "plain")])
    text = (plain / "summary.md").read_text()
    assert "an optimum is never bracketed by fewer than 3" in text and "bracketed by an earlier grid" not in text
    assert "bracket" not in (plain / "findings.csv").read_text().splitlines()[0].split(",")


def test_a_declared_bracket_names_a_task_with_results(results, call_main):
    proc = call_main(report.main, results, "--bracketed_by", "mnli=1e-5,1e-3")
    assert proc.returncode == 2 and "--bracketed_by names task(s) with no results: mnli" in proc.stderr
    proc = call_main(report.main, results, "--bracketed_by", "sst2=1e-3")
    assert proc.returncode == 2 and "give each task once as TASK=LOW,HIGH" in proc.stderr


def test_a_report_over_an_earlier_one_leaves_what_a_fresh_report_leaves(tmp_path):
    """Item 2 of issue 43: a report written into the folder of an earlier report of other results (other models,
    another task, a comparison) holds exactly what the same report into a new folder holds: nothing of the earlier one
    stays (its comparison, findings or figures)."""
    rng = np.random.default_rng(0)
    for root, models, task in (
        (tmp_path / "first", ("610m-clm-42k", "610m-mlm40-42k"), "mnli"),
        (tmp_path / "second", ("610m-clm-42k",), "sst2"),
    ):
        for model in models:
            for lr in LRS:
                for seed in range(3):
                    write_run(root, model, task, lr, seed, 0.8, (rng.random(40) < 0.8).astype(float))
    report.main(
        [str(tmp_path / "first"), "--output", str(tmp_path / "report"), "--compare", "610m-mlm40-42k,610m-clm-42k"]
    )
    report.main([str(tmp_path / "second"), "--output", str(tmp_path / "report")])
    report.main([str(tmp_path / "second"), "--output", str(tmp_path / "fresh")])

    def tree(root):
        return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}

    assert tree(tmp_path / "report") == tree(tmp_path / "fresh")


def test_a_plain_run_is_never_pooled_with_replicates_nor_a_seed_counted_twice(tmp_path):
    """R2: `610m-clm-42k` beside `610m-clm-42k-pseed0/1` was one row of 3 pretraining runs (the plain run most
    likely is pseed0 again, so its CI narrowed with no warning); `-pseed1` and `-pseed2` both recording
    pretrain_seed 5 were two runs. Both are refused in one line naming the results, nothing written."""
    rng = np.random.default_rng(0)
    for model in ("610m-clm-42k-pseed0", "610m-clm-42k-pseed1", "610m-clm-42k"):
        for seed in range(2):
            write_run(tmp_path / "mixed", model, "sst2", 1e-5, seed, 0.8, (rng.random(50) < 0.8).astype(float))
    with pytest.raises(
        cli.BadInput,
        match=r"results of 610m-clm-42k \(one pretraining run\) and of "
        r"610m-clm-42k-pseed0 \(a replicate\) would be pooled in one row",
    ):
        report.main([str(tmp_path / "mixed"), "--output", str(tmp_path / "r1")])
    for k in (1, 2):
        record = write_run(tmp_path / "relabelled", f"610m-clm-42k-pseed{k}", "sst2", 1e-5, 0, 0.8, np.ones(50))
        record["pretrain_seed"] = 5
        artifacts.write_json_atomic(
            store.result_path(tmp_path / "relabelled", record["model"], "sst2", 1e-5, 0), record
        )
    with pytest.raises(
        cli.BadInput,
        match=r"lr1e-05-seed0.json records pretrain_seed 5 but is filed under "
        r"610m-clm-42k-pseed1 \(pretraining seed 1\)",
    ):
        report.main([str(tmp_path / "relabelled"), "--output", str(tmp_path / "r2")])
    assert not (tmp_path / "r1").exists() and not (tmp_path / "r2").exists()


def test_compare_names_the_replicated_models_as_their_rows_do(tmp_path):
    """Pretraining replicates (`<name>-pseed<k>`) are one row named <name>: `--compare` takes those names (it
    refused them, asking for a run's name, and stopped the replicated horizon study's report)."""
    rng = np.random.default_rng(0)
    for model, level in (("610m-clm-42k", 0.8), ("610m-mlm40-42k", 0.7)):
        for k in range(3):
            for lr in (1e-5, 5e-5, 1e-4):
                for seed in range(2):
                    write_run(
                        tmp_path,
                        f"{model}-pseed{k}",
                        "sst2",
                        lr,
                        seed,
                        level + (lr == 5e-5) * 0.05,
                        (rng.random(200) < level).astype(float),
                    )
    out = report.main([str(tmp_path), "--output", str(tmp_path / "report"), "--compare", "610m-mlm40-42k,610m-clm-42k"])
    assert (
        "| sst2 | 610m-mlm40-42k | 610m-clm-42k | 608M / 608M | 42,000 / 42,000 | accuracy |"
        in (out / "summary.md").read_text()
    )
    with pytest.raises(
        cli.BadInput,
        match=r"--compare needs two model names from the results \(\['610m-clm-42k', "
        r"'610m-mlm40-42k'\]\)",
    ):
        report.main(
            [str(tmp_path), "--output", str(tmp_path / "r2"), "--compare", "610m-mlm40-42k-pseed0,610m-clm-42k"]
        )


def test_a_row_at_its_baseline_or_without_one_is_never_counted_a_learner(tmp_path):
    """A model that predicts what the trivial baseline does scores it to the last bits (its stored mean 3e-13 above
    the baseline, kept to 12 decimals): it is at the baseline, not above it; a task without a known baseline is
    named as such, never counted as clearing one (the old check counted both as learners)."""
    at = 0.5 + 3e-13
    for seed in range(3):
        write_run(tmp_path, "610m-clm-42k", "sst2", 1e-4, seed, at, np.full(N_TEST, at))
        write_run(tmp_path, "610m-mlm40-42k", "sst2", 1e-4, seed, 0.9, np.full(N_TEST, 0.9 + 0.01 * seed))
        record = write_run(tmp_path, "610m-clm-42k", "mrpc", 1e-4, seed, 0.8, np.full(N_TEST, 0.8 + 0.01 * seed))
        del record["trivial_baseline"]
        artifacts.write_json_atomic(store.result_path(tmp_path, "610m-clm-42k", "mrpc", 1e-4, seed), record)
    rows = {(r["model"], r["task"]): r for r in statistics.summarize(statistics.load_results(tmp_path))}
    assert rows[("610m-clm-42k", "sst2")]["mean"] > 0.5 and statistics.at_baseline(rows[("610m-clm-42k", "sst2")])
    assert statistics.above_baseline(rows[("610m-clm-42k", "sst2")]) is False
    assert statistics.above_baseline(rows[("610m-clm-42k", "mrpc")]) is None
    text = (report.main([str(tmp_path), "--output", str(tmp_path / "report")]) / "summary.md").read_text()
    below = text.split("## Above the trivial baseline")[1].split("##")[0]
    assert "1 of 2 model x task means with a known baseline do not clear it" in below
    assert "| 610m-clm-42k | 608M | 42,000 | sst2 | 0.5 | 0.5 | 0.5 | at the baseline: not learned |" in below
    assert "1 model x task means have no known trivial baseline (mrpc)" in below and "clear it." not in below


def test_an_interval_that_plus_minus_would_misdescribe_is_shown_itself(tmp_path):
    """ "±" is half the width only of an interval centred on the mean: one clipped to [0, 1] (WNUT's 0.135 with a
    t-interval of ±1.30 was printed "± 0.500") or degenerate (identical seeds: [m, m]) is shown as [low, high], and
    the table says what such a cell means."""
    row = {"best_lr": 1e-4, "mean": 0.135, "ci_low": 0.0, "ci_high": 1.0}
    assert report._cell(row) == "0.135 [0.000, 1.000]"
    assert report._cell({**row, "ci_low": 0.5, "ci_high": 0.5, "mean": 0.5}) == "0.500 [0.500, 0.500]"
    assert report._cell({**row, "ci_low": 0.125, "ci_high": 0.145}) == "0.135 ± 0.010"
    for seed in range(3):
        write_run(tmp_path, "610m-clm-42k", "sst2", 1e-4, seed, 0.5, np.full(N_TEST, 0.05 + 0.1 * (seed == 2)))
    text = (report.main([str(tmp_path), "--output", str(tmp_path / "report")]) / "summary.md").read_text()
    assert "| 610m-clm-42k | 608M | 42,000 | 0.083 [0.000, 0.227] |" in text and "clipped to [0, 1]" in text


def test_every_table_names_a_study_model_with_its_parameters_and_its_own_step(results, tmp_path):
    """A study's names are the paper's (`mini-610m-clm-42k-1000`), its models are not: every table that names a model
    gives the parameters counted for it and the step its run saved it at, the paper's step its name stands for
    beside it; what the report was not told is "?", never the paper's numbers."""
    for lr in LRS:  # MLM40's checkpoint at the paper's step 1,000 too: the gap table
        for seed in range(5):
            write_run(results, "610m-mlm40-42k-1000", "sst2", lr, seed, 0.7, np.ones(N_TEST) * (seed % 2))
    mini = [
        "--scale",
        "mini",
        "--tokens_per_step",
        "51.2",
        "--parameters",
        "615232",
        "--compare",
        "610m-mlm40-42k,610m-clm-42k",
    ]
    out = report.main([str(results), "--output", str(tmp_path / "mini"), *mini, "--step_divisor", "40"])
    text = (out / "summary.md").read_text()
    assert "| mini-610m-clm-42k | 0.615M | 1,050 (paper 42,000) |" in text
    assert "| mini-610m-clm-42k-1000 | 0.615M | 25 of 1,050 (paper 1,000 of 42,000) |" in text
    assert "| mini-610m-clm-dec42k-mlm40-44k | 0.615M | 1,100 (paper 44,000) |" in text
    assert (
        "| sst2 | mini-610m-clm-42k-1000 | 0.615M | 25 of 1,050 (paper 1,000 of 42,000) | 0.0832 | before |" in text
    )  # the gap table, beside the tokens per parameter
    assert (
        "| sst2 | mini-610m-mlm40-42k | mini-610m-clm-42k | 0.615M / 0.615M | 1,050 (paper 42,000) / 1,050 "
        "(paper 42,000) | accuracy |" in text
    )  # the paired comparisons
    (row,) = [r for r in csv.DictReader(open(out / "findings.csv")) if r["finding"] == "sc_mlm_better"]
    assert (row["parameters"], row["step"]) == ("0.615M / 0.615M", "1,050 (paper 42,000) / 1,050 (paper 42,000)")
    tables = [block.splitlines()[0] for block in text.split("\n\n") if block.startswith("| ")]
    named = [h for h in tables if {"model", "a", "checkpoint (CLM)"} & {c.strip() for c in h.split("|")}]
    # results, gap, below the baseline, seeds needed, findings, comparisons, every column
    assert len(named) == 7 and all("| parameters | step |" in h for h in named), named
    untold = report.main([str(results), "--output", str(tmp_path / "untold"), "--scale", "mini"])
    assert "| mini-610m-clm-42k-1000 | ? | ? (paper 1,000 of 42,000) |" in (untold / "summary.md").read_text()
