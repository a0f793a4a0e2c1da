"""The whole study in one command: a shortened smoke study (same stages, a few steps), idempotence, the paper plan."""

import concurrent.futures
import csv
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from core.paths import REPO_ROOT
from recipes import manifest
from recipes.study import STUDIES, eval_batches, main, run_study


@pytest.fixture(scope="module")
def short_study(tmp_path_factory):
    """The smoke study's models, tasks, 2 LRs x 2 seeds and every stage, at the `ci` scale (a few steps)."""
    study = dataclasses.replace(
        STUDIES["smoke"], scale="ci",
        eval_args={"max_length": 64, "qa_max_length": 96, "doc_stride": 32, "batch_size": 8, "eval_batch_size": 32,
                   "max_steps": 3, "max_train": 64, "max_eval": 24})
    output = tmp_path_factory.mktemp("study") / "smoke"
    report = run_study("smoke", output, study=study)
    return study, output, report


@pytest.mark.slow
def test_short_smoke_study_runs_every_stage(short_study):
    study, output, report = short_study
    for name in study.models:  # pretraining: CLM, MLM40, PFS, CPT
        info = json.loads((output / "models" / name / "run_info.json").read_text())
        assert info["name"] == name and info["scale"] == "ci"
        assert (output / "models" / name / "README.md").read_text().count(name) >= 2  # model card
    cpt = json.loads((output / "models" / "610m-clm-dec42k-mlm40-44k" / "run_info.json").read_text())
    assert cpt["cpt_base"] == "610m-clm-42k"
    results = list((output / "results").rglob("*.json"))
    assert len(results) == len(study.models) * len(study.tasks) * len(study.lrs) * len(study.seeds)
    with open(report / "summary.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["family"] for r in rows} == {"sc", "tc", "qa", "ir"}
    assert {r["model"] for r in rows} == {f"ci-{m}" for m in study.models} and all(r["n_seeds"] == "2" for r in rows)
    assert "ci_low" in rows[0] and list(report.glob("*.png"))
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
def as_format_1(info: dict) -> dict:
    """run_info.json as the recipes wrote it before the architecture / scale / switch_step names."""
    old = {("pfs_switch_step" if k == "switch_step" else "preset" if k == "scale" else k): v
           for k, v in info.items() if k != "format"}
    renamed = {"architecture": "model_preset", "scale": "study_preset"}
    settings = {renamed.get(k, k): v for k, v in info["run_config"]["run_settings"].items()}
    return {**old, "run_config": {**info["run_config"], "run_settings": settings}}


def test_rerun_redoes_nothing_finished(short_study):
    """Also when the study directory was written by the version before the study vocabulary (study.json's key
    `preset`, run_info.json format 1): it resumes, and the cards read the old run_info files."""
    study, output, _ = short_study
    finished = {p: p.stat().st_mtime_ns for p in (output / "results").rglob("*.json")}
    finished.update({p: p.stat().st_mtime_ns for p in (output / "models").glob("*/model.safetensors")})
    marker = json.loads((output / "study.json").read_text())
    (output / "study.json").write_text(json.dumps({"preset": marker["study"], "definition": marker["definition"]}))
    for path in (output / "models").glob("*/run_info.json"):
        path.write_text(json.dumps(as_format_1(json.loads(path.read_text()))))
    run_study("smoke", output, study=study)
    assert {p: p.stat().st_mtime_ns for p in finished} == finished
    assert json.loads((output / "study.json").read_text())["study"] == "smoke"


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


def test_docs_regenerate_from_their_results_archive(short_study, tmp_path, capsys):
    """--docs writes the results archive beside the report; --from_results rebuilds the same docs from it alone
    (into a new directory, nothing trained), and the archive it writes again has the same bytes."""
    from recipes.study import RESULTS_ARCHIVE, write_docs

    _, output, _ = short_study
    docs = write_docs("smoke", output, tmp_path / "docs")
    archive = docs / RESULTS_ARCHIVE
    assert "lr0.0005-seed1.json" in subprocess.run(["tar", "tJf", str(archive)], capture_output=True,
                                                   text=True).stdout
    main(["smoke", "--from_results", str(archive), "--output", str(tmp_path / "again"), "--docs",
          str(tmp_path / "docs-again")])
    same_docs(docs, tmp_path / "docs-again")
    assert (tmp_path / "docs-again" / RESULTS_ARCHIVE).read_bytes() == archive.read_bytes()
    assert not (tmp_path / "again" / "models").exists()
    # Bad input: one line, nothing written.
    for argv, message in ((["mini", "--from_results", str(archive), "--output", str(tmp_path / "x")],
                           "holds the 'smoke' study, not 'mini'"),
                          (["smoke", "--from_results", str(archive), "--output", str(tmp_path / "again")],
                           "is not empty"),
                          (["smoke", "--from_results", str(tmp_path / "none.tar.xz"), "--output",
                            str(tmp_path / "x")], "not found")):
        with pytest.raises(SystemExit) as error:
            main(argv)
        assert error.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_docs_dir_with_files_it_did_not_write_is_refused(tmp_path, capsys):
    """--docs never replaces a file recipes.study did not write: refused in one line before any work starts."""
    from recipes.study import check_docs_dir

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "README.md").write_text("# my notes\n")
    with pytest.raises(SystemExit) as error:
        main(["smoke", "--output", str(tmp_path / "x"), "--docs", str(docs)])
    assert error.value.code == 2
    assert "holds README.md, which recipes.study did not write" in capsys.readouterr().err
    assert not (tmp_path / "x").exists() and (docs / "README.md").read_text() == "# my notes\n"
    (docs / "README.md").unlink()
    (docs / "pfs.png").write_bytes(b"not ours")
    with pytest.raises(ValueError, match="holds pfs.png"):
        check_docs_dir(docs)
    check_docs_dir(REPO_ROOT / "docs" / "mini-study")  # written by an earlier --docs: may be rewritten
    check_docs_dir(tmp_path / "new")


@pytest.mark.slow
def test_committed_mini_study_regenerates_from_its_results(tmp_path):
    """docs/mini-study is what the report stage makes of the results committed beside it, number for number."""
    committed = REPO_ROOT / "docs" / "mini-study"
    main(["mini", "--from_results", str(committed / "results.tar.xz"), "--output", str(tmp_path / "mini"),
          "--docs", str(tmp_path / "docs")])
    same_docs(committed, tmp_path / "docs")
    summary = list(csv.DictReader(open(committed / "summary.csv", newline="")))
    assert len({r["model"] for r in summary}) == 12 and {r["task"] for r in summary} == set(STUDIES["mini"].tasks)


def test_unknown_study_is_one_clear_error(tmp_path):
    result = subprocess.run([sys.executable, "-m", "recipes.study", "huge", "--output", str(tmp_path / "x")],
                            cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode != 0 and "unknown study 'huge'" in result.stderr
    assert not (tmp_path / "x").exists()


def test_bad_org_is_one_clear_error(tmp_path):
    result = subprocess.run([sys.executable, "-m", "recipes.study", "smoke", "--output", str(tmp_path / "x"),
                             "--org", "my org"], cwd=REPO_ROOT, capture_output=True, text=True)
    last_line = result.stderr.strip().splitlines()[-1]
    assert result.returncode != 0 and last_line.startswith("error: --org 'my org': repo id")
    assert not (tmp_path / "x").exists()


def test_training_order_puts_prerequisites_first():
    names = [r.name for r in manifest.training_order(manifest.model_names())]
    assert len(names) == 38
    for recipe in manifest.recipes().values():
        for needed in (recipe.branch_from, recipe.cpt_base):
            if needed and recipe.name in names:
                assert names.index(needed) < names.index(recipe.name)


def test_paper_plan_lists_every_run_with_compute_and_launch_scripts(tmp_path, capsys):
    main(["paper", "--output", str(tmp_path), "--gpu", "H100", "--mfu", "0.4"])
    with open(tmp_path / "plan.csv", newline="") as f:
        rows = {r["name"]: r for r in csv.DictReader(f)}
    assert set(rows) == set(manifest.model_names())
    full = rows["610m-mlm40-42k"]
    assert int(full["steps"]) == 42_000 and int(full["tokens"]) == 42_000 * 1152 * 2048
    # MLM projects 40% of tokens through the LM head, CLM all of them: CLM costs more per step.
    assert float(rows["610m-clm-42k"]["flops"]) > float(full["flops"]) > float(rows["210m-mlm40-42k"]["flops"])
    assert int(rows["610m-clm-12k"]["steps"]) == 2_000  # a decay branch adds only its decay
    plan = (tmp_path / "plan.md").read_text()
    assert "GPU-hours" in capsys.readouterr().out and "110,000" in plan
    # disk: one checkpoint per 1,000 steps a run trains itself (a decay branch only its 2k), none deleted
    checkpoints = sum(-(-int(r["steps"]) // 1000) for r in rows.values())
    assert f"{checkpoints:,} checkpoints" in plan and "12 bytes per parameter" in plan and "64,000 steps" in plan
    # launch/: SLURM scripts (tests/test_launch.py runs them) and the same runs in order without SLURM
    assert {p.name for p in (tmp_path / "launch").iterdir()} == {
        "submit.sh", "prepare_data.sbatch", "pretrain.sbatch", "eval_grid.sbatch", "eval_grid.tsv", "pretrain.sh"}
    script = (tmp_path / "launch" / "pretrain.sh").read_text().splitlines()
    order = [line.split("pretrain.sbatch\" ")[-1].split()[0] for line in script if "pretrain.sbatch\" recipes/" in line]
    assert order == [f"recipes/configs/paper/{r.name}.yaml" for r in manifest.training_order(manifest.model_names())]
    grid = (tmp_path / "launch" / "eval_grid.tsv").read_text().splitlines()
    assert len(grid) == (38 + 12) * 12 * 30  # the intermediate checkpoints too (data-efficiency figure)
    assert "610m-clm-42k-5000=out/paper/610m-clm-42k/intermediate/step-5000\tsst2\t1e-05\t0" in grid


def test_mini_evaluation_runs_as_one_grid_process_per_task_group():
    """The checkpoints that share their tasks and evaluation arguments are evaluated by one grid process: the mini
    study's six final models in three (QA and IR have their own budgets), its six intermediate checkpoints in one."""
    mini = STUDIES["mini"]
    finals = [Path("/s/models") / name for name in mini.models]
    intermediates = [Path("/s/models") / name / "intermediate" / f"step-{step}"
                     for name in ("610m-clm-42k", "610m-mlm40-42k") for step in (125, 250, 500)]
    batches = eval_batches(finals + intermediates, mini)
    assert [(models, tasks) for models, tasks, _ in batches] == [
        (finals, ["sst2", "mnli", "conll2003"]), (finals, ["squad"]), (finals, ["scifact"]),
        (intermediates, ["conll2003"])]
    assert [args.get("max_steps") for _, _, args in batches] == [None, 500, 300, None]
    assert batches[0][2] == mini.eval_args


@pytest.mark.slow
def test_shortened_mini_study_is_deterministic(tmp_path_factory):
    """The mini study's structure (intermediate checkpoints on their own tasks, per-task budgets, two grid workers,
    the held-out loss stage) at the ci scale, run twice: the same seeds give the same numbers, file for file."""
    study = dataclasses.replace(
        STUDIES["mini"], scale="ci", models=("610m-clm-42k", "610m-mlm40-42k"), tasks=("sst2", "conll2003"),
        lrs=(5e-4,), seeds=(0, 1), intermediate_steps=(20000,), intermediate_tasks=("sst2",), heldout_blocks=4,
        eval_args={"max_length": 32, "batch_size": 8, "eval_batch_size": 32, "max_train": 48, "max_eval": 16,
                   "max_steps": 3}, task_eval_args={}, workers=1)  # two workers: tests/test_grid.py
    outputs = [tmp_path_factory.mktemp(f"mini-{copy}") / "mini" for copy in ("a", "b")]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:  # the two studies side by side: mostly subprocesses
        list(pool.map(lambda output: run_study("mini", output, study=study), outputs))
    results = [sorted(p.relative_to(o / "results") for p in (o / "results").rglob("lr*.json")) for o in outputs]
    assert results[0] == results[1] and len(results[0]) == 2 * 2 * 2 + 2 * 1 * 2  # finals + one step of each run
    assert any("610m-clm-42k-20000" in str(p) for p in results[0])  # intermediates named with paper steps
    for name in results[0]:
        a, b = (json.loads((o / "results" / name).read_text()) for o in outputs)
        assert (a["validation"], a["test"], a["per_instance"]) == (b["validation"], b["test"], b["per_instance"]), name
    heldout = [(o / "heldout" / "heldout.csv").read_text() for o in outputs]
    assert heldout[0] == heldout[1] and heldout[0].count("\n") == 1 + 2 + 2 * 6  # finals + every intermediate
    summary = [(o / "report" / "summary.csv").read_text() for o in outputs]
    assert summary[0] == summary[1] and "trivial_baseline" in summary[0].splitlines()[0]
