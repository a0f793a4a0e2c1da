"""Each finding's rule on synthetic result sets whose right verdict is known: a true equivalence, a true difference,
nulls with many tests, a rising and a falling gap, a grid-edge optimum, and replicated pretraining."""

import numpy as np
import pytest
from scipy import stats

from analysis import findings, statistics

LRS = (1e-4, 3e-4, 1e-3)  # 3e-4 is every model's best: an interior optimum unless a test says otherwise


def grid(
    levels: dict,
    task="conll2003",
    family="tc",
    metric="sentence_macro_f1",
    n=400,
    noise=0.025,
    seed_sd=0.002,
    best=3e-4,
    rng=None,
):
    """In-memory result records: every model of `levels` {name: test level} on `task`, LRS x 3 seeds; the LR
    `best` scores `level`, the others 0.1 less; per-instance scores level + N(0, noise), a seed shift N(0, seed_sd)."""
    rng = rng or np.random.default_rng(0)
    out = []
    for model, level in levels.items():
        for lr in LRS:
            for seed in range(3):
                mean = level - (0.0 if lr == best else 0.1) + seed_sd * rng.standard_normal()
                scores = np.clip(mean + noise * rng.standard_normal(n), 0, 1)
                out.append(
                    {
                        "kind": "grid",
                        "model": model,
                        "task": task,
                        "family": family,
                        "lr": lr,
                        "seed": seed,
                        "status": "ok",
                        "main_metric": metric,
                        "validation": {metric: mean},
                        "test": {metric: float(scores.mean())},
                        "per_instance": {"test": [{metric: float(s)} for s in scores]},
                        "identity": {"model": {"config": model}},
                        "_path": f"{model}/{lr}/{seed}",
                        "trivial_baseline": {"test": {metric: 0.2}},
                    }
                )
    return out


def verdicts(records, regime=None):
    rows = statistics.summarize(records)
    tested = findings.comparisons(records, rows, regime)
    return tested, {v["finding"]: v["verdict"] for v in findings.verdicts(tested)}


FINALS = ("610m-clm-42k", "610m-mlm40-42k")  # paper scale: 163 tokens per parameter, past every crossover interval


def test_tc_on_par_is_shown_by_equivalence_never_by_non_significance():
    """A true equivalence (tight CI inside the margin) agrees; a null measured too noisily to tell (CI wider than
    the margin) is inconclusive, not "agrees" as non-significance read as support would have it; a true deficit
    beyond the margin disagrees. The margin is in the rule and in every row."""
    tested, verdict = verdicts(grid(dict.fromkeys(FINALS, 0.80)))
    (tc,) = [r for r in tested if r["finding"] == "tc_clm_on_par"]
    assert tc["ci_low"] > -findings.TC_MARGIN and tc["hypothesis"] == f"A - B > -{findings.TC_MARGIN:g}"
    assert tc["verdict"] == "supports" and verdict["tc_clm_on_par"] == "agrees at this scale"

    noisy = grid(dict.fromkeys(FINALS, 0.80), n=40, noise=0.3, seed_sd=0.03)
    tested, verdict = verdicts(noisy)
    (tc,) = [r for r in tested if r["finding"] == "tc_clm_on_par"]
    assert tc["ci_low"] < -findings.TC_MARGIN and tc["verdict"] == "not significant"
    assert verdict["tc_clm_on_par"] == "inconclusive at this scale"

    _, verdict = verdicts(grid({FINALS[0]: 0.70, FINALS[1]: 0.80}))
    assert verdict["tc_clm_on_par"] == "disagrees at this scale"


def test_a_null_with_many_tests_gives_no_spurious_agreement():
    """Six TC tasks where CLM and MLM40 are the same model, measured noisily: more tests never make "on par"
    easier; and six SC tasks under the null: Holm within the finding, no task "supports" MLM."""
    rng = np.random.default_rng(1)
    records = []
    for i in range(6):
        records += grid(dict.fromkeys(FINALS, 0.75), task=f"ner{i}", n=40, noise=0.3, seed_sd=0.03, rng=rng)
        records += grid(
            dict.fromkeys(FINALS, 0.75),
            task=f"cls{i}",
            family="sc",
            metric="accuracy",
            n=40,
            noise=0.3,
            seed_sd=0.03,
            rng=rng,
        )
    tested, verdict = verdicts(records)
    assert verdict["tc_clm_on_par"] == "inconclusive at this scale"
    assert verdict["sc_mlm_better"] == "inconclusive at this scale"
    sc = [r for r in tested if r["finding"] == "sc_mlm_better"]
    assert len(sc) == 6 and [r["p_holm"] for r in sc] == pytest.approx(statistics.holm([r["p"] for r in sc]))
    # one Holm family per finding: the TC tests are not in the SC family
    tc = [r for r in tested if r["finding"] == "tc_clm_on_par"]
    assert [r["p_holm"] for r in tc] == pytest.approx(statistics.holm([r["p"] for r in tc]))


def test_better_is_one_sided_and_contradicts_only_when_significant():
    """MLM40 truly better on SC: supports. CLM truly better: contradicts. CLM better by a noisy, non-significant
    margin: not significant (a point estimate on the other side never contradicts)."""
    sc = {"task": "mnli", "family": "sc", "metric": "accuracy"}
    _, verdict = verdicts(grid({FINALS[0]: 0.70, FINALS[1]: 0.80}, **sc))
    assert verdict["sc_mlm_better"] == "agrees at this scale"
    _, verdict = verdicts(grid({FINALS[0]: 0.80, FINALS[1]: 0.70}, **sc))
    assert verdict["sc_mlm_better"] == "disagrees at this scale"
    tested, verdict = verdicts(grid({FINALS[0]: 0.76, FINALS[1]: 0.75}, n=40, noise=0.3, seed_sd=0.03, **sc))
    (row,) = [r for r in tested if r["finding"] == "sc_mlm_better"]
    assert row["verdict"] == "not significant" and verdict["sc_mlm_better"] == "inconclusive at this scale"
    # the one-sided p is half the two-sided one on the claim's side
    (cmp,) = statistics.compare(
        *(lambda r: (r, statistics.summarize(r)))(grid({FINALS[0]: 0.70, FINALS[1]: 0.72}, **sc)), FINALS[1], FINALS[0]
    )
    assert statistics.one_sided(cmp["delta"], cmp["se"], cmp["df"]) == pytest.approx(cmp["p"] / 2)


def gap_levels(gaps: list[float], final_gap: float, steps=(1000, 2000, 4000)) -> dict:
    """CLM and MLM40 checkpoints (before the SC crossover interval: 3.9-15.5 tokens per parameter) whose CLM - MLM40
    differences are `gaps`, and the finals'."""
    levels = {}
    for step, gap in zip(steps, gaps):
        levels |= {f"{FINALS[0]}-{step}": 0.6 + gap, f"{FINALS[1]}-{step}": 0.6}
    return levels | {FINALS[0]: 0.75 + final_gap, FINALS[1]: 0.75}


@pytest.mark.parametrize(
    "gaps, final_gap, expected",
    [
        ((0.15, 0.10, 0.05), -0.05, "agrees at this scale"),  # CLM leads early and the gap closes
        ((0.02, 0.06, 0.10), -0.05, "disagrees at this scale"),  # CLM leads and the gap widens: the final MLM lead is
    ],
)  # another phase, not the slope
def test_the_gap_is_one_slope_test_per_task(gaps, final_gap, expected):
    records = grid(gap_levels(gaps, final_gap), task="mnli", family="sc", metric="accuracy")
    tested, verdict = verdicts(records)
    (slope,) = [r for r in tested if r["finding"] == "data_efficiency" and r["part"] == "slope"]
    assert verdict["data_efficiency"] == expected
    per_doubling = (gaps[-1] - gaps[0]) / 2  # log2(4000 / 1000) = 2 doublings
    assert slope["delta"] == pytest.approx(per_doubling, abs=0.01)
    assert slope["ci_low"] < slope["delta"] < slope["ci_high"] and slope["checkpoints"] == pytest.approx(
        [step * findings.PAPER_TOKENS_PER_STEP / 607.9e6 for step in (1000, 2000, 4000)]
    )
    # the finals' CLM - MLM comparison is counted once: in the SC finding, not as a data-efficiency point
    assert [r["finding"] for r in tested if r["a"] == FINALS[1] or r["b"] == FINALS[1]].count("sc_mlm_better") == 1
    assert sum(r["finding"] == "data_efficiency" for r in tested) == 2  # the early lead and the slope


def test_checkpoints_inside_the_crossover_interval_are_not_in_the_slope():
    """The slope uses only the checkpoints before the interval: with one such checkpoint it is not testable."""
    records = grid(gap_levels((0.15, 0.10), -0.05, steps=(2000, 10000)), task="mnli", family="sc", metric="accuracy")
    tested, _ = verdicts(records)
    (slope,) = [r for r in tested if r["finding"] == "data_efficiency" and r["part"] == "slope"]
    assert slope["verdict"] == "not testable"
    assert slope["untestable"].startswith(
        "1 stable-phase checkpoint(s) before the crossover interval under both conventions: a slope needs 3"
    )
    gap = findings.gap_over_pretraining(records, statistics.summarize(records), findings.Regime())
    assert [r["phase"] for r in gap] == ["before", "inside", "past"]


def test_the_crossover_is_an_interval_under_two_conventions():
    """19-78 tokens per parameter (counted) for SC, 39-155 for IR, none for TC; a final inside the interval, or past
    it under one convention only, is not testable, and both numbers are named."""
    assert [round(v) for v in findings.crossover_interval("sc")] == [19, 78]
    assert [round(v) for v in findings.crossover_interval("ir")] == [39, 155]
    assert findings.crossover_interval("tc") is None
    # the horizon study's regime: 256 tokens per step, 222,016 parameters of which 131,072 the input embedding
    horizon = findings.Regime(256, 222016, "horizon", 131072)
    assert round(horizon.tokens_per_parameter("610m-clm-42k")) == 48
    assert round(horizon.tokens_per_parameter("610m-clm-42k", "no embeddings")) == 118
    assert findings.phase(horizon, "610m-clm-42k", "sc") == "inside (counted) / past (no embeddings)"
    assert findings.phase(horizon, "610m-clm-42k", "ir") == "inside"
    records = grid(dict.fromkeys(FINALS, 0.8), task="mnli", family="sc", metric="accuracy")
    tested, verdict = verdicts(records, horizon)
    assert verdict["sc_mlm_better"].startswith(
        "not testable at this scale: past the crossover interval under one parameter convention only: "
        "horizon-610m-mlm40-42k saw 48.4 (118 without embeddings) tokens per parameter"
    )
    _, verdict = verdicts(grid(dict.fromkeys(FINALS, 0.8)), horizon)  # TC: no crossover, testable at any scale
    assert verdict["tc_clm_on_par"] == "agrees at this scale"


def test_a_grid_edge_optimum_is_named_beside_every_other_reason():
    """Every model's best LR is the grid's smallest, and the mini regime is below the crossover: both reasons are
    named, the grid's edge as its own."""
    mini = findings.Regime(2048 / 40, 615232, "mini", 524288)
    records = grid(dict.fromkeys(FINALS, 0.8), task="mnli", family="sc", metric="accuracy", best=LRS[0])
    tested, _ = verdicts(records, mini)
    (sc,) = [r for r in tested if r["finding"] == "sc_mlm_better"]
    reasons = sc["untestable"].split("; ")
    assert reasons[0].startswith("below the paper's crossover interval: mini-610m-mlm40-42k saw 3.5")
    assert (
        "best LR on the grid's edge: mini-610m-clm-42k's optimum is not bracketed (best LR 0.0001, grid "
        "0.0001-0.001)" in reasons
    )
    # at the paper's scale the edge alone makes it not testable, and the slope's checkpoints are checked too
    records = grid(gap_levels((0.15, 0.10, 0.05), -0.05), task="mnli", family="sc", metric="accuracy", best=LRS[-1])
    tested, verdict = verdicts(records)
    assert {r["verdict"] for r in tested} == {"not testable"}
    (slope,) = [r for r in tested if r["finding"] == "data_efficiency" and r["part"] == "slope"]
    assert "best LR on the grid's edge: 610m-clm-42k-1000's optimum" in slope["untestable"]
    assert verdict["data_efficiency"].startswith("not testable at this scale: best LR on the grid's edge")


def replicated(levels: dict, run_sd: float, runs=3, rng=None, **kwargs) -> list[dict]:
    """`runs` pretraining runs (`-pseed<k>`) of each model, each shifted by N(0, run_sd)."""
    rng = rng or np.random.default_rng(2)
    out = []
    for name, level in levels.items():
        for k in range(runs):
            shift = run_sd * rng.standard_normal()
            p = name.split("-")
            pseed = "-".join(p[:3] + [f"pseed{k}"] + p[3:])  # 610m-clm-42k-pseed1[-1000]
            out += grid({pseed: level + shift}, rng=rng, **kwargs)
    return out


def test_replicates_are_one_model_with_the_run_as_unit():
    """Three pretraining runs per model: one summary row per model (the group's name, 3 runs), its CI Student t
    over the run means, the pretraining-run SD estimated near the truth; a difference between objectives that a
    run-to-run spread of 0.05 swamps is not called significant, as seeds alone would call it."""
    records = replicated(dict.fromkeys(FINALS, 0.8), run_sd=0.05, runs=3, task="mnli", family="sc", metric="accuracy")
    rows = {r["model"]: r for r in statistics.summarize(records)}
    assert set(rows) == set(FINALS)
    row = rows[FINALS[0]]
    run_means = [
        np.mean([r["test"]["accuracy"] for r in records if r["model"] == f"610m-clm-42k-pseed{k}" and r["lr"] == 3e-4])
        for k in range(3)
    ]
    half = stats.t.ppf(0.975, 2) * np.std(run_means, ddof=1) / np.sqrt(3)
    assert (row["n_pretrain_runs"], row["n_seeds"], row["mean"]) == (3, 3, pytest.approx(np.mean(run_means)))
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((np.mean(run_means) - half, np.mean(run_means) + half))
    assert 0.01 < row["pretrain_sd"] < 0.15 and row["seed_sd"] < 0.01
    (cmp,) = statistics.compare(records, list(rows.values()), FINALS[1], FINALS[0])
    assert cmp["ci_high"] - cmp["ci_low"] > 0.05  # the runs' spread, not the seeds'
    seeds_only = [
        dict(r, model=(group := statistics.replicate_group(r["model"])), identity={"model": group}) for r in records
    ]
    (narrow,) = statistics.compare(seeds_only, statistics.summarize(seeds_only), FINALS[1], FINALS[0])
    assert narrow["ci_high"] - narrow["ci_low"] < (cmp["ci_high"] - cmp["ci_low"]) / 2


def test_the_paired_bootstrap_resamples_pretraining_runs():
    """Run-to-run spread large (run shifts 0.04 apart), seed spread small: the difference of two replicated models
    (0.04, one SE of the runs' means) is not significant by the runs. Resampling records pooled across runs (the
    old scheme, and what the same records give as one run) calls it significant: its interval is too narrow. The
    two-stage bootstrap (runs, then seeds within each) covers 0, as the Student t over runs does."""
    rng, records = np.random.default_rng(3), []
    for name, shifts in ((FINALS[0], (0.0, 0.04, 0.08)), (FINALS[1], (-0.04, 0.0, 0.04))):
        for k, shift in enumerate(shifts):
            records += grid(
                {name.replace("-42k", f"-42k-pseed{k}"): 0.7 + shift},
                rng=rng,
                task="mnli",
                family="sc",
                metric="accuracy",
                n=200,
                seed_sd=0.002,
                noise=0.02,
            )
    (cmp,) = statistics.compare(records, statistics.summarize(records), FINALS[0], FINALS[1])
    assert cmp["delta"] == pytest.approx(0.04, abs=0.005) and cmp["p"] > 0.1
    assert cmp["p_bootstrap"] > 0.05  # 0 inside the bootstrap's 95% interval
    pooled = [
        dict(r, model=(group := statistics.replicate_group(r["model"])), identity={"model": group}) for r in records
    ]
    (old,) = statistics.compare(pooled, statistics.summarize(pooled), FINALS[0], FINALS[1])
    assert old["delta"] == pytest.approx(cmp["delta"]) and old["p_bootstrap"] < 0.05


def test_the_slope_over_replicated_runs_takes_runs_as_units():
    """A gap that closes by 0.05 per doubling in every run pair, with a run-to-run spread of the slope: the slope
    estimate is the mean of the run slopes and its CI Welch over them."""
    levels = gap_levels((0.15, 0.10, 0.05), -0.05)
    records = replicated(levels, run_sd=0.0, runs=3, task="mnli", family="sc", metric="accuracy")
    tested, verdict = verdicts(records)
    (slope,) = [r for r in tested if r["finding"] == "data_efficiency" and r["part"] == "slope"]
    assert slope["delta"] == pytest.approx(-0.05, abs=0.01) and verdict["data_efficiency"] == "agrees at this scale"
    assert slope["n_seeds"] == "3 checkpoints"


def test_a_two_lr_grid_is_bracketed_only_by_a_declared_earlier_grid():
    """A 2-LR grid (3e-4, 1e-3; 3e-4 best) never brackets an optimum by itself: every comparison is not testable.
    A study that declares an earlier grid measured 1e-4 and 3e-3 worse makes it testable, and every row relying on
    it names the bracket as declared, not measured; a declared bracket that does not enclose the grid does not."""
    records = [r for r in grid(dict.fromkeys(FINALS, 0.80)) if r["lr"] != LRS[0]]
    rows = statistics.summarize(records)
    tested = findings.comparisons(records, rows)
    assert {r["verdict"] for r in tested} == {"not testable"} and not any(r["bracket"] for r in tested)
    assert all("LR grid has 2 finished LR(s)" in r["untestable"] for r in tested)

    declared = findings.Regime(bracketed_by=findings.parse_brackets("conll2003=0.0001,0.003"))
    tested = findings.comparisons(records, rows, declared)
    (tc,) = [r for r in tested if r["finding"] == "tc_clm_on_par"]
    assert tc["untestable"] == "" and tc["verdict"] == "supports"
    assert {r["bracket"] for r in tested} == {
        "bracketed by an earlier grid (conll2003: 0.0001 and 0.003 measured worse than this grid's 0.0003-0.001 in "
        "an earlier run; declared, not measured in this study)"
    }

    beside = findings.Regime(bracketed_by={"conll2003": (3e-4, 3e-3)})  # 3e-4 is in the grid: no bracket
    (tc,) = [r for r in findings.comparisons(records, rows, beside) if r["finding"] == "tc_clm_on_par"]
    assert tc["verdict"] == "not testable" and not tc["bracket"]
    assert "the declared earlier grid's 0.0003 and 0.003 do not lie on either side of this grid" in tc["untestable"]
    # another task's bracket is not this one's
    other = findings.Regime(bracketed_by={"mnli": (1e-4, 3e-3)})
    assert {r["verdict"] for r in findings.comparisons(records, rows, other)} == {"not testable"}


@pytest.mark.parametrize(
    "text",
    [
        "conll2003=0.03,0.001",
        "conll2003=0.001",
        "=0.001,0.03",
        "conll2003=a,b",
        "conll2003=0.001,0.03;conll2003=0.001,0.03",
        "conll2003=0,0.03",
    ],
)
def test_a_declared_bracket_is_refused_unless_well_formed(text):
    with pytest.raises(ValueError, match="give each task once as TASK=LOW,HIGH"):
        findings.parse_brackets(text)
    assert findings.parse_brackets(" conll2003=0.001,0.03; mnli=1e-4,3e-3;") == {
        "conll2003": (0.001, 0.03),
        "mnli": (1e-4, 3e-3),
    }


def test_data_efficiency_needs_clm_ahead_early_as_well_as_a_closing_gap():
    """MLM40 ahead from the start and pulling further ahead: the slope of CLM - MLM40 is below 0 as in "the gap
    closes", but CLM never led: the early lead contradicts the claim, so the finding disagrees (a slope alone
    called it agreement)."""
    records = grid(gap_levels((-0.02, -0.06, -0.10), -0.12), task="mnli", family="sc", metric="accuracy")
    tested, verdict = verdicts(records)
    rows = {r["part"]: r for r in tested if r["finding"] == "data_efficiency"}
    assert rows["slope"]["verdict"] == "supports" and rows["lead"]["verdict"] == "contradicts"
    assert rows["lead"]["hypothesis"] == findings.LEAD and rows["lead"]["delta"] == pytest.approx(-0.02, abs=0.01)
    assert verdict["data_efficiency"] == "disagrees at this scale"


def test_a_slope_needs_three_checkpoints_before_the_crossover():
    """Two checkpoints before the crossover interval (3.9 and 7.8 tokens per parameter): a line through two points
    is not a test; both halves of the claim are not testable, and the verdict says why."""
    records = grid(gap_levels((0.15, 0.05), -0.05, steps=(1000, 2000)), task="mnli", family="sc", metric="accuracy")
    tested, verdict = verdicts(records)
    rows = [r for r in tested if r["finding"] == "data_efficiency"]
    assert [r["verdict"] for r in rows] == ["not testable", "not testable"]
    assert verdict["data_efficiency"] == (
        "not testable at this scale: 2 stable-phase checkpoint(s) before the "
        "crossover interval under both conventions: a slope needs 3"
    )


def test_no_verdict_where_a_model_has_not_learned_the_task():
    """MLM40 scores the trivial baseline (0.2) on mnli and conll2003: CLM "beats" a model that learned nothing, which
    says nothing about the claim; every comparison using it is not testable, naming the model and the task. Without
    a known baseline the verdict says that instead."""
    levels = {FINALS[0]: 0.8, FINALS[1]: 0.2}
    records = grid(levels, task="mnli", family="sc", metric="accuracy", noise=0.0, seed_sd=0.0)
    records += grid(levels, noise=0.0, seed_sd=0.0)
    tested, verdict = verdicts(records)
    assert {r["verdict"] for r in tested if r["b" if r["finding"] != "sc_mlm_better" else "a"] == FINALS[1]} == {
        "not testable"
    }
    assert verdict["sc_mlm_better"] == (
        "not testable at this scale: 610m-mlm40-42k not above chance on mnli (at the trivial baseline 0.2)"
    )
    assert verdict["tc_clm_on_par"].startswith(
        "not testable at this scale: 610m-mlm40-42k not above chance on conll2003"
    )
    unknown = [{k: v for k, v in r.items() if k != "trivial_baseline"} for r in grid(dict.fromkeys(FINALS, 0.8))]
    _, verdict = verdicts(unknown)
    assert verdict["tc_clm_on_par"] == (
        "not testable at this scale: conll2003 has no known trivial baseline: "
        "whether its models learned it is not known"
    )


def test_each_test_decides_at_2_5_percent_per_side():
    """A three-way decision at 5% per side called 10% of nulls "agrees" or "disagrees"; at 2.5% per side a
    one-sided p of 0.04 is not significant, 0.02 supports."""
    rows = [{"finding": "sc_mlm_better", "untestable": "", "p": p, "p_other": 1 - p} for p in (0.04,)]
    assert findings._corrected(rows)[0]["verdict"] == "not significant"
    rows = [{"finding": "sc_mlm_better", "untestable": "", "p": 0.02, "p_other": 0.98}]
    assert findings._corrected(rows)[0]["verdict"] == "supports" and findings.ALPHA == 0.025


def stability_row(rng, levels=(0.7, 0.7), lrs_off=0.0):
    """The stability test on CLM and MLM40 fine-tuned at 3 LRs x 3 seeds; CLM's off-optimum LRs `lrs_off` closer to
    its best (a smaller spread)."""
    records = grid(dict(zip(FINALS, levels)), n=20, noise=0.1, seed_sd=0.02, rng=rng)
    for r in records:
        if r["model"] == FINALS[0] and r["lr"] != 3e-4:
            r["test"]["sentence_macro_f1"] += lrs_off
    (row,) = findings.stability(records, statistics.summarize(records), findings.Regime(), "conll2003", *FINALS)
    return row


def test_stability_rejects_a_true_null_at_its_nominal_rate():
    """400 replications of two identical models (3 LRs x 3 seeds each): the test calls a difference (either side,
    2.5% each) in 2-8% of them, near the nominal 5% (the bootstrap over LRs drawn apart rejected about 1%)."""
    rng = np.random.default_rng(0)
    rows = [stability_row(rng) for _ in range(400)]
    rate = np.mean([r["p"] < findings.ALPHA or r["p_other"] < findings.ALPHA for r in rows])
    assert 0.02 <= rate <= 0.08 and all(r["untestable"] == "" and r["n_seeds"] == "3/3 LRs, 3/3 units" for r in rows)
    assert abs(np.mean([r["delta"] for r in rows])) < 0.01  # unbiased under the null
    # a true difference (CLM's spread about half MLM40's) is found more often than a null is
    power = np.mean([stability_row(rng, lrs_off=0.05)["p"] < findings.ALPHA for _ in range(100)])
    assert power > 0.1


def test_stability_needs_three_lrs_fine_tuned_in_the_study():
    """A 2-LR grid declared bracketed by an earlier one: the comparisons of means become testable, the spread across
    LRs does not (the declared LRs never enter it)."""
    records = [r for r in grid({FINALS[0]: 0.8, FINALS[1]: 0.7}) if r["lr"] != LRS[0]]
    declared = findings.Regime(bracketed_by={"conll2003": (1e-4, 3e-3)})
    tested = findings.comparisons(records, statistics.summarize(records), declared)
    (row,) = [r for r in tested if r["finding"] == "stability"]
    assert row["verdict"] == "not testable" and row["untestable"] == (
        "610m-clm-42k was fine-tuned at 2 LR(s) in this study: a spread across LRs needs 3; 610m-mlm40-42k was "
        "fine-tuned at 2 LR(s) in this study: a spread across LRs needs 3"
    )


def test_a_replicated_slope_keeps_the_test_instances_variance():
    """Three pretraining runs that are the same model (identical scores): the run slopes do not vary, yet the test
    set is one sample of instances; the slope's interval keeps that part (it was 0, every slope significant)."""
    records = grid(
        gap_levels((0.01, 0.0, -0.01), 0.0), task="mnli", family="sc", metric="accuracy", n=200, noise=0.3, seed_sd=0.0
    )
    copies = [
        dict(r, model=r["model"].replace("-42k", f"-42k-pseed{k}"), _path=f"{k}/{r['_path']}")
        for k in range(3)
        for r in records
    ]
    tested, _ = verdicts(copies)
    (slope,) = [r for r in tested if r["finding"] == "data_efficiency" and r["part"] == "slope"]
    assert slope["ci_high"] - slope["ci_low"] > 0.01 and slope["verdict"] == "not significant"


def test_the_tc_verdict_shows_entity_f1_beside_the_main_metric():
    """CLM on par on sentence_macro_f1 but finding fewer entities (entity F1 0.6 against 0.7): the strict metric is
    shown in the TC row and its verdict, with its interval, described rather than tested."""
    records = grid(dict.fromkeys(FINALS, 0.80))
    for r in records:
        tp = 6 if r["model"] == FINALS[0] else 7
        for i, row in enumerate(r["per_instance"]["test"]):
            row.update(entity_tp=tp if i % 2 else tp + 1, entity_pred=10, entity_gold=10)
    tested, verdict = verdicts(records)
    (tc,) = [r for r in tested if r["finding"] == "tc_clm_on_par"]
    assert tc["entity_f1"] == "-0.1000 [-0.1096, -0.0904]"  # the test instances' part: tp varies by instance
    assert verdict["tc_clm_on_par"] == (
        "agrees at this scale; entity F1, CLM - MLM40 (95% CI, not a test): conll2003 -0.1000 [-0.1096, -0.0904]"
    )


IR = {"task": "scifact", "family": "ir", "metric": "ndcg@10"}


def sizes(gaps: dict, clm=0.6) -> dict:
    """CLM and MLM40 finals at each size of `gaps` {size: MLM40 - CLM}, at the paper's 42k budget (past the IR
    crossover interval at 210m and 610m)."""
    return {
        name: level
        for size, gap in gaps.items()
        for name, level in ((f"{size}-clm-42k", clm), (f"{size}-mlm40-42k", clm + gap))
    }


@pytest.mark.parametrize(
    "gaps, expected",
    [
        ({"210m": 0.10, "610m": 0.02}, "agrees at this scale"),  # MLM's lead shrinks from 0.10 to 0.02
        ({"210m": 0.02, "610m": 0.10}, "disagrees at this scale"),  # it grows
        ({"210m": 0.05, "410m": 0.0, "610m": 0.05}, "inconclusive at this scale"),  # 210m to 610m: the same gap
    ],
)
def test_the_ir_gap_across_sizes_is_the_largest_minus_the_smallest(gaps, expected):
    """The IR claim's second clause, tested where two or more sizes exist at one budget: (MLM40 - CLM) at the
    largest size minus at the smallest, paired by task, with its interval; the middle size does not enter."""
    tested, verdict = verdicts(grid(sizes(gaps), **IR))
    (row,) = [r for r in tested if r["finding"] == "ir_gap_narrows"]
    largest, smallest = max(gaps, key=findings.size_value), min(gaps, key=findings.size_value)
    assert (row["a"], row["b"]) == (f"{largest}-mlm40-42k", f"{smallest}-mlm40-42k") and row["untestable"] == ""
    assert row["delta"] == pytest.approx(gaps[largest] - gaps[smallest], abs=0.01)
    assert row["ci_low"] < row["delta"] < row["ci_high"] and row["n_seeds"] == "3/3/3/3"
    assert verdict["ir_gap_narrows"] == expected
    # the four models share one test set: the gap's difference is the difference of the two paired comparisons
    pair = {r["a"]: r["delta"] for r in tested if r["finding"] == "ir_mlm_better"}
    assert row["delta"] == pytest.approx(pair[row["a"]] - pair[row["b"]])


def test_a_contrast_of_two_models_is_their_paired_comparison():
    """`statistics.contrast` with weights (1, -1) is `paired_comparison`: the same estimate, units and df, and the
    test instances' part drawn once for both (a shared instance effect cancels); drawn apart it would not."""
    records = grid(dict.fromkeys(FINALS, 0.7), n=200, noise=0.0, seed_sd=0.01)
    shared = np.random.default_rng(5).normal(0, 0.2, 200)  # every model finds the same instances easy or hard
    for r in records:
        for row, shift in zip(r["per_instance"]["test"], shared):
            row["sentence_macro_f1"] += shift
    runs = [statistics.best_runs(records, statistics.summarize(records), m, "conll2003") for m in FINALS]
    paired = statistics.paired_comparison(*runs, "sentence_macro_f1")
    result = statistics.contrast(runs, [1, -1], "sentence_macro_f1")
    assert result["delta"] == pytest.approx(paired["delta"]) and result["df"] == pytest.approx(paired["df"], rel=0.05)
    # drawn apart, the instances' part alone would be 0.2 x sqrt(2 / 200) = 0.02
    assert result["se"] == pytest.approx(paired["se"], rel=0.05) and result["se"] < 0.01


def test_the_ir_gap_across_sizes_needs_two_sizes_that_learned_the_task():
    """One size: not testable, naming it; a model at the trivial baseline (0.2): not testable, naming it; a toy
    study's names of two sizes trained at one architecture (one parameter count): one size too."""
    _, verdict = verdicts(grid(sizes({"610m": 0.05}), **IR))
    assert verdict["ir_gap_narrows"] == "not testable at this scale: one model size (610m)"
    chance = sizes({"210m": 0.10, "610m": 0.02}) | {"210m-clm-42k": 0.2}
    _, verdict = verdicts(grid(chance, noise=0.0, seed_sd=0.0, **IR))
    assert verdict["ir_gap_narrows"] == (
        "not testable at this scale: 210m-clm-42k not above chance on scifact (at the trivial baseline 0.2)"
    )
    toy = findings.Regime(tokens_per_step=2048.0, parameters=216_000.0)
    _, verdict = verdicts(grid(sizes({"210m": 0.10, "610m": 0.02}), **IR), toy)
    assert verdict["ir_gap_narrows"] == (
        "not testable at this scale: one model size (216,000 parameters: this study "
        "trains its 210m, 610m name(s) at one architecture)"
    )
    # no IR task at all: the clause says so, as the IR finding does
    verdict = {v["finding"]: v["verdict"] for v in findings.verdicts([], {"tc"})}
    assert verdict["ir_gap_narrows"] == verdict["ir_mlm_better"] == "not testable at this scale: no IR task"


def test_the_bootstraps_instance_counts_are_multinomial_draws():
    """`instance_counts` (drawn indices, counted) replaced `rng.multinomial` for speed: each row is n draws with
    replacement from n instances, so it sums to n, and a count has the multinomial's mean 1 and variance 1 - 1/n."""
    rng = np.random.default_rng(0)
    counts = statistics.instance_counts(rng, 50, 4000)
    assert counts.shape == (4000, 50) and (counts.sum(1) == 50).all() and (counts >= 0).all()
    assert abs(counts.mean() - 1) < 1e-12 and abs(counts.var() - (1 - 1 / 50)) < 0.03
    assert not (counts[0] == counts[1]).all()  # rows are independent draws, not one draw repeated
