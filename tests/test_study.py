"""The whole study in one command: a shortened smoke study (same stages, a few steps), idempotence, the paper plan."""

import csv
import dataclasses
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from analysis.report import count_cell
from core import model_folders, run_folders
from pretraining import heldout as heldout_csv
from recipes import manifest
from recipes.studies import STUDIES, regime, study_marker
from recipes.study import main, run_study

# The test suite's scale: the smoke study's structure at a few steps per run (the manifest's scales are the studies').
CI_SCALE = manifest.Scale(step_divisor=1000, block_size=32, per_device_train_batch_size=2, max_docs=300)
# The smoke study's models (CLM, MLM40, PFS, CPT), tasks (one per family) and 2 seeds, one LR (a task with its own grid
# of 2, as the horizon study's MNLI and CoNLL: the best-LR choice runs too), with the mini study's stages too:
# intermediate checkpoints evaluated on their own task (named with paper steps) and the held-out loss.
CI_STUDY = dataclasses.replace(
    STUDIES["smoke"],
    scale="ci",
    lrs=(5e-4,),
    eval_args={
        "max_length": 64,
        "qa_max_length": 96,
        "doc_stride": 32,
        "batch_size": 8,
        "eval_batch_size": 32,
        "max_steps": 3,
        "max_train": 64,
        "max_eval": 24,
    },
    evaluate_intermediate=True,
    intermediate_steps=(20000,),
    intermediate_tasks=("sst2",),
    heldout_blocks=4,
    task_lrs={"scifact": (2e-4, 1e-3)},
)


def runs_of(study, task: str) -> int:
    """A model's fine-tuning runs on one task: its LRs x the seeds."""
    return len(study.task_lrs.get(task, study.lrs)) * len(study.seeds)


INTERMEDIATE = ("610m-clm-42k-20000", "610m-mlm40-42k-20000")  # step 20 of the two runs that save intermediates


@pytest.fixture(scope="module")
def ci_scale():
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(manifest.SCALES, "ci", CI_SCALE)
        yield


@pytest.fixture(scope="module")
def short_study(tmp_path_factory, ci_scale):
    """The one study run of this file (every stage); tests that change its directory work on a copy."""
    output = tmp_path_factory.mktemp("study") / "smoke"
    report = run_study("smoke", output, study=CI_STUDY)
    return CI_STUDY, output, report


def copy_of(output: Path, tmp_path: Path) -> Path:
    """A copy of a study directory (modification times kept)."""
    return Path(shutil.copytree(output, tmp_path / output.name, symlinks=True))


@pytest.mark.slow
def test_short_smoke_study_runs_every_stage(short_study):
    study, output, report = short_study
    for name in study.models:  # pretraining: CLM, MLM40, PFS, CPT
        info = json.loads((output / "models" / name / "run_info.json").read_text())
        assert info["name"] == name and info["scale"] == "ci"
        assert (output / "models" / name / "README.md").read_text().count(name) >= 2  # model card
    cpt = json.loads((output / "models" / "610m-clm-dec42k-mlm40-44k" / "run_info.json").read_text())
    assert cpt["cpt_base"] == "610m-clm-42k"
    results = sorted(p.relative_to(output / "results") for p in (output / "results").rglob("lr*.json"))
    assert len(results) == (
        len(study.models) * sum(runs_of(study, task) for task in study.tasks)
        + len(INTERMEDIATE) * runs_of(study, "sst2")
    )
    # intermediates named with paper steps, evaluated on their own task only
    assert {p.parts[0] for p in results if p.parts[0] not in study.models} == set(INTERMEDIATE)
    assert {p.parts[1] for p in results if p.parts[0] in INTERMEDIATE} == {"sst2"}
    lrs = {
        task: {json.loads((output / "results" / p).read_text())["lr"] for p in results if p.parts[1] == task}
        for task in study.tasks
    }
    assert lrs == {**{task: set(study.lrs) for task in study.tasks}, "scifact": {2e-4, 1e-3}}
    with open(report / "summary.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["family"] for r in rows} == {"sc", "tc", "qa", "ir"}
    assert {r["model"] for r in rows} >= {f"ci-{m}" for m in study.models} and all(r["n_seeds"] == "2" for r in rows)
    assert "ci_low" in rows[0] and "trivial_baseline" in rows[0] and list(report.glob("*.png"))
    # the report's step of a checkpoint is the one its run saved it at (run_info.json), the paper's beside it
    run = output / "models" / "610m-clm-42k"
    (saved,) = [
        info["steps"]
        for p in run.glob("intermediate/step-*/run_info.json")
        if (info := json.loads(p.read_text()))["name"] == "610m-clm-42k-20000"
    ]
    total = json.loads((run / "run_info.json").read_text())["steps"]
    count = count_cell(regime(study_marker(output))[1])  # the study's own count, not the paper's 610m
    assert (
        json.loads((output / "study.json").read_text())["parameters"]
        == json.loads((run / "run_info.json").read_text())["parameters"]
    )  # as the runs recorded it
    assert (
        f"| ci-610m-clm-42k-20000 | {count} | {saved} of {total} (paper 20,000 of 42,000) |"
        in (report / "summary.md").read_text()
    )
    heldout = (output / "heldout" / "heldout.csv").read_text()
    assert heldout.count("\n") == 1 + len(study.models) + 2 * 6  # finals + every intermediate of the two runs
    # The CPT row counts its base's tokens too, as the figure places it: the base's run_info plus the CPT run's.
    base = json.loads((output / "models" / "610m-clm-42k" / "run_info.json").read_text())
    row = next(
        r
        for r in heldout_csv.read_csv(output / "heldout" / "heldout.csv")
        if r["model"] == "ci-610m-clm-dec42k-mlm40-44k"
    )
    assert cpt["tokens_before_cpt"] == row["tokens_before_cpt"] == base["tokens_seen"] > 0
    assert row["tokens_seen"] == base["tokens_seen"] + cpt["tokens_seen"]
    # Without --org the export sits in the placeholder namespace (model_cards.push refuses to push it).
    hub = output / "hub" / "models" / "your-org" / "ci-610m-mlm40-42k" / "main"  # the scale in the repo id
    assert (hub / "model.safetensors").is_file() and (hub / "README.md").is_file()
    assert (output / "hub" / "datasets" / "your-org" / "smoke-study-results" / "main" / "runs.jsonl").is_file()
    # Real run_info.json and result files record the study's absolute paths: none is published, nor in a card.
    published = [p for p in (output / "hub").rglob("*") if p.is_file()]
    published += [output / "models" / name / "README.md" for name in study.models]
    leaks = [p for p in published if str(output).encode() in p.read_bytes()]
    assert len(published) > 50 and leaks == []


@pytest.mark.slow
def test_study_is_deterministic(short_study, tmp_path):
    """The same seeds give the same numbers: in a copy of the study, one run (with its intermediate checkpoints and
    every result of them), the tokenizer, the data cache and the held-out losses deleted and made again by the study
    itself give the same weights, the same results file for file and the same held-out losses."""
    study, output, _ = short_study
    name = "610m-mlm40-42k"  # the MLM run: a leaf (no run starts from it) that saves intermediate checkpoints
    again = copy_of(output, tmp_path)
    for gone in ("tokenizer", "cache", "heldout", f"models/{name}", f"results/{name}", f"results/{name}-20000"):
        shutil.rmtree(again / gone)
    run_study("smoke", again, study=study, until="evaluation")
    for checkpoint in (f"models/{name}", f"models/{name}/intermediate/step-20"):
        assert model_folders.checkpoint_identity(again / checkpoint) == model_folders.checkpoint_identity(
            output / checkpoint
        ), checkpoint
    results = sorted(p.relative_to(output / "results") for p in (output / "results").rglob("lr*.json"))
    assert sorted(p.relative_to(again / "results") for p in (again / "results").rglob("lr*.json")) == results
    redone = [p for p in results if p.parts[0] in (name, f"{name}-20000")]
    assert len(redone) == sum(runs_of(study, task) for task in (*study.tasks, "sst2"))
    for path in redone:
        a, b = (json.loads((o / "results" / path).read_text()) for o in (output, again))
        assert (a["validation"], a["test"], a["per_instance"]) == (b["validation"], b["test"], b["per_instance"]), path
    assert (again / "heldout" / "heldout.csv").read_text() == (output / "heldout" / "heldout.csv").read_text()


@pytest.mark.slow
def test_rerun_redoes_nothing_finished(short_study, tmp_path):
    """A second run of a finished study (in a copy) rewrites no result file and no weights."""
    study, output, _ = short_study
    output = copy_of(output, tmp_path)
    finished = {p: p.stat().st_mtime_ns for p in (output / "results").rglob("*.json")}
    finished.update({p: p.stat().st_mtime_ns for p in (output / "models").glob("*/model.safetensors")})
    run_study("smoke", output, study=study)
    assert {p: p.stat().st_mtime_ns for p in finished} == finished
    assert json.loads((output / "study.json").read_text())["study"] == "smoke"
    assert json.loads((output / "study.json").read_text())["format"] == run_folders.STUDY_FORMAT


@pytest.mark.slow
def test_output_dir_with_another_study_is_refused(short_study, tmp_path):
    _, output, _ = short_study
    with pytest.raises(ValueError, match="holds a different study"):
        run_study("smoke", output)  # same directory, the real smoke definition
    (tmp_path / "stray.txt").write_text("x")
    with pytest.raises(ValueError, match="not empty and holds no study.json"):
        run_study("smoke", tmp_path)
    assert not (tmp_path / "study.json").exists()


REGENERATED = ("summary.csv", "summary.md", "findings.csv", "README.md", "heldout.csv")


def same_docs(a, b) -> None:
    """Two docs folders hold the same report: text files byte for byte, the same figures."""
    for name in REGENERATED:
        assert (a / name).is_file() == (b / name).is_file(), name
        if (a / name).is_file():
            assert (a / name).read_text() == (b / name).read_text(), name
    assert sorted(p.name for p in a.glob("*.png")) == sorted(p.name for p in b.glob("*.png"))


@pytest.mark.slow
def test_docs_regenerate_from_their_results_archive(short_study, tmp_path, capsys):
    """--docs writes the results archive beside the report; --from_results rebuilds the same docs from it alone
    (into a new directory, nothing trained), and the archive it writes again has the same bytes."""
    from recipes.study_docs import RESULTS_ARCHIVE, holds_exactly, write_docs, write_results_archive

    _, output, _ = short_study
    docs = write_docs("smoke", output, tmp_path / "docs")
    archive = docs / RESULTS_ARCHIVE
    assert "lr0.0005-seed1.json" in subprocess.run(["tar", "tJf", str(archive)], capture_output=True, text=True).stdout
    main(
        [
            "smoke",
            "--from_results",
            str(archive),
            "--output",
            str(tmp_path / "again"),
            "--docs",
            str(tmp_path / "docs-again"),
        ]
    )
    same_docs(docs, tmp_path / "docs-again")
    assert (tmp_path / "docs-again" / RESULTS_ARCHIVE).read_bytes() == archive.read_bytes()
    assert not (tmp_path / "again" / "models").exists()
    # The bytes depend only on the files' contents: packed again from a copy with new times, the same archive.
    fresh = Path(shutil.copytree(output, tmp_path / "fresh-times", copy_function=shutil.copy))
    assert write_results_archive(fresh, tmp_path / "packed.tar.xz").read_bytes() == archive.read_bytes()
    # The archive --from_results read is reused only while it holds exactly the study's files: one result changed,
    # it is packed anew.
    changed = next((tmp_path / "again" / "results").rglob("lr*.json"))
    changed.write_text(changed.read_text().replace('"status": "ok"', '"status": "ok" ', 1))
    repacked = write_results_archive(tmp_path / "again", tmp_path / "repacked.tar.xz", reuse=archive)
    assert not holds_exactly(archive, tmp_path / "again") and holds_exactly(repacked, tmp_path / "again")
    assert repacked.read_bytes() != archive.read_bytes()
    # Written again over an earlier --docs whose report had a figure this one lacks: that figure goes (it would sit
    # stale beside the new README); a file the user put there stays.
    readme = docs / "README.md"
    figure = "![learning_rate_mnli](learning_rate_mnli.png)"  # smoke has no MNLI: an earlier study's figure
    readme.write_text(readme.read_text().replace("## Definition", f"{figure}\n\n## Definition"))
    (docs / "learning_rate_mnli.png").write_bytes(b"an earlier report's figure")
    (docs / "notes.png").write_bytes(b"the user's own")
    write_docs("smoke", output, docs)
    assert not (docs / "learning_rate_mnli.png").exists() and (docs / "notes.png").read_bytes() == b"the user's own"
    assert "learning_rate_mnli.png" not in readme.read_text()
    # Bad input: one line, nothing written (item 2 of issue 43: a second unpack into the study directory of the first
    # is refused, and leaves it as the first left it).
    again = {p: p.read_bytes() if p.is_file() else None for p in (tmp_path / "again").rglob("*")}
    for argv, message in (
        (
            ["mini", "--from_results", str(archive), "--output", str(tmp_path / "x")],
            "holds the 'smoke' study, not 'mini'",
        ),
        (["smoke", "--from_results", str(archive), "--output", str(tmp_path / "again")], "is not empty"),
        (["smoke", "--from_results", str(tmp_path / "none.tar.xz"), "--output", str(tmp_path / "x")], "not found"),
    ):
        with pytest.raises(SystemExit) as error:
            main(argv)
        assert error.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
    assert {p: p.read_bytes() if p.is_file() else None for p in (tmp_path / "again").rglob("*")} == again
