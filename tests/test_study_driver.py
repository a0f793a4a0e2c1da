"""The study driver apart from a study run: the committed studies regenerated from their archives, the paper plan,
the task groups, bad input and the stages run in process. (tests/test_study.py runs the shortened study; apart, the
two files run side by side under pytest -n.)"""

import csv
import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from core import names, run_folders
from core.paths import REPO_ROOT
from recipes import manifest
from recipes.studies import STUDIES, regime
from recipes.study import Progress, eval_batches, main
from tests.test_study import same_docs


def test_docs_dir_with_files_it_did_not_write_is_refused(tmp_path, capsys):
    """--docs never replaces a file recipes.study did not write: refused in one line before any work starts."""
    from recipes.study_docs import check_docs_dir

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
@pytest.mark.parametrize(
    "study_name, folder, models",
    [
        ("mini", "mini-study", 12),
        ("horizon-replicated", "horizon-study", 10),
        ("horizon-tested", "horizon-tested-study", 10),
    ],
)
def test_committed_study_regenerates_from_its_results(tmp_path, study_name, folder, models):
    """docs/<folder> is what the report stage makes of the results committed beside it, number for number."""
    committed = REPO_ROOT / "docs" / folder
    main(
        [
            study_name,
            "--from_results",
            str(committed / "results.tar.xz"),
            "--output",
            str(tmp_path / study_name),
            "--docs",
            str(tmp_path / "docs"),
        ]
    )
    same_docs(committed, tmp_path / "docs")
    summary = list(csv.DictReader(open(committed / "summary.csv", newline="")))
    assert len({r["model"] for r in summary}) == models
    assert {r["task"] for r in summary} == set(STUDIES[study_name].tasks)


@pytest.mark.slow
def test_unknown_study_is_one_clear_error(tmp_path):
    """The entry point's process boundary (`python -m recipes.study`): bad input exits non-zero with its message."""
    result = subprocess.run(
        [sys.executable, "-m", "recipes.study", "huge", "--output", str(tmp_path / "x")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0 and "unknown study 'huge'" in result.stderr
    assert not (tmp_path / "x").exists()


def test_bad_org_is_one_clear_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as error:
        main(["smoke", "--output", str(tmp_path / "x"), "--org", "my org"])
    last_line = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.value.code == 2 and last_line.startswith("error: --org 'my org': repo id")
    assert not (tmp_path / "x").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for a machine without a GPU")
def test_mini_gpu_on_a_cpu_is_refused_before_the_tokenizer(tmp_path, capsys):
    """mini-gpu trains in bf16: on a CPU-only machine one line and exit 2, before the tokenizer or anything is made."""
    with pytest.raises(SystemExit) as error:
        main(["mini-gpu", "--output", str(tmp_path / "x")])
    lines = capsys.readouterr().err.strip().splitlines()
    assert error.value.code == 2 and len(lines) == 1
    assert lines[0].startswith("error: the mini-gpu study trains in bf16 and needs a CUDA GPU") and "mini" in lines[0]
    assert not (tmp_path / "x").exists()


def test_progress_bar_estimates_the_time_left_from_the_jobs_done_per_kind():
    """The study's bar: time left = each kind's remaining jobs at the mean time of its jobs that ran; jobs found done
    (a resumed study) are not timed; a kind with no job run yet makes the estimate a lower bound (`left >`)."""
    now = [0.0]
    progress = Progress(
        {"tokenizer": 1, "pretrain:a": 1, "pretrain:b": 1, "pretrain:c": 1, "report": 1}, clock=lambda: now[0]
    )
    try:
        now[0] = 5.0
        progress.done("tokenizer")
        assert progress.left() == (0.0, False)
        progress.done("pretrain:a", timed=False)  # trained by an earlier run of the study: took no time here
        now[0] = 65.0
        progress.done("pretrain:b")  # 60 s
        assert progress.left() == (60.0, False)  # c at 60 s; the report not timed yet
        assert "left > 01:00" in str(progress.bar)
        now[0] = 125.0
        progress.done("pretrain:c")
        progress.add("evaluation 0", 10)
        now[0] = 130.0
        progress.follow("evaluation 0", 4, 10, "grid")  # 4 result files of an earlier run: the baseline
        now[0] = 150.0
        progress.follow("evaluation 0", 6, 10, "grid")  # 2 runs in 20 s
        assert progress.left() == (40.0, False)
        assert progress.bar.n == 4 + 6
        now[0] = 190.0
        progress.done("evaluation 0")  # 4 more in 40 s: 60 s for 6 runs
        now[0] = 192.0
        progress.add("evaluation 1", 3)
        assert progress.left() == (30.0, False)  # a second grid at 10 s per run
        progress.done("evaluation 1")
        progress.done("report")
        assert progress.left() == (0.0, True) and progress.bar.n == progress.bar.total == 18
    finally:
        progress.close()


def test_progress_times_a_run_from_the_result_before_it_and_each_grid_at_its_own_pace():
    """A grid is polled every few seconds: a poll that finds no new result moves nothing, so a run's time counts
    from the result before it (not from the last poll); each grid's remaining runs go at its own measured time per
    run once it has one, shown beside its runs done (of those its process writes: a resumed grid's other runs were
    found done)."""
    now = [0.0]
    progress = Progress({"report": 1}, clock=lambda: now[0])
    try:
        progress.add("evaluation 0", 6)
        progress.add("evaluation 1", 4)
        progress.start("evaluation", "")
        progress.follow("evaluation 0", 0, 6, "sst2 grid")
        for now[0] in range(2, 60, 2):  # polls, no result yet
            progress.follow("evaluation 0", 0, 6, "sst2 grid")
        now[0] = 60.0
        progress.follow("evaluation 0", 1, 6, "sst2 grid")  # the first run took 60 s
        assert progress.left() == (5 * 60 + 4 * 60, False)  # the second grid at the first's pace until measured
        assert "sst2 grid: 1/6 runs, 60 s/run" in str(progress.bar) and "left > 09:00" in str(progress.bar)
        now[0] = 360.0
        progress.done("evaluation 0")
        progress.follow("evaluation 1", 0, 2, "scifact grid")
        now[0] = 370.0  # a resumed grid: 2 of its 4 runs were done (a checkpoint evaluated before), 2 to run
        progress.follow("evaluation 1", 1, 2, "scifact grid")  # 10 s per run here
        assert progress.left() == (10.0, False) and "scifact grid: 1/2 runs, 10 s/run" in str(progress.bar)
    finally:
        progress.close()


def _processes_naming(text: str) -> list[str]:
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:  # ended meanwhile
            continue
        if text in cmdline:
            found.append(cmdline)
    return found


def test_ctrl_c_ends_the_study_in_one_line_and_leaves_no_stage_running(tmp_path, capsys):
    """Ctrl-C (SIGINT) while a pretraining run is in its own process: exit 130 with one line saying how to resume,
    no traceback, and that process ended with the study."""
    output = tmp_path / "smoke"

    def interrupt():
        deadline = time.monotonic() + 600
        while not (output / "logs").is_dir() and time.monotonic() < deadline:
            time.sleep(0.1)
        while not _processes_naming(str(output)) and time.monotonic() < deadline:  # the first stage process started
            time.sleep(0.1)
        os.kill(os.getpid(), signal.SIGINT)

    thread = threading.Thread(target=interrupt, daemon=True)
    thread.start()
    with pytest.raises(SystemExit) as ended:
        main(["smoke", "--output", str(output)])
    thread.join()
    err = capsys.readouterr().err
    assert ended.value.code == 130 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == "interrupted; rerun the same command to resume"
    assert not _processes_naming(str(output))


def grid_runs(study) -> int:
    """Fine-tuning runs of a study: its final models on its tasks, and the intermediate checkpoints its runs save
    (the manifest's, at the study's steps) on its intermediate tasks, each at the task's LRs x seeds."""

    def runs(tasks):
        return sum(len(study.lrs_of(task)) * len(study.seeds) for task in tasks)

    recipes = manifest.recipes()
    trained = [name.split("-pseed")[0] for name in study.trained_names()]  # each replicate saves its recipe's
    checkpoints = [
        n
        for name in trained
        for n in manifest.intermediate_names()
        if recipes[n].intermediate_of == name
        and (not study.intermediate_steps or recipes[n].steps in study.intermediate_steps)
    ]
    intermediate = runs(study.intermediate_tasks or study.tasks) if study.evaluate_intermediate else 0
    return len(study.trained_names()) * runs(study.tasks) + len(checkpoints) * intermediate


def test_studies_page_gives_each_study_its_grid():
    """docs/studies.md's table: each study's fine-tuning runs (summed over a row's "(N runs)"), and the horizon
    study's per-task LR grids, as the definitions in recipes/studies.py say."""
    page = (REPO_ROOT / "docs" / "studies.md").read_text()
    rows = {line.split("`")[1]: line for line in page.splitlines() if line.startswith("| `")}
    for name in ("smoke", "toy", "mini", "horizon-replicated", "horizon-tested"):
        counted = sum(int(n.replace(",", "")) for n in re.findall(r"\(([\d,]+) runs\)", rows[name]))
        assert counted == grid_runs(STUDIES[name]), name
    for name in ("horizon-replicated", "horizon-tested"):
        for task in STUDIES[name].tasks:
            assert (
                f"{task} ({', '.join(f'{lr:.0e}' for lr in STUDIES[name].lrs_of(task))})".replace("e-0", "e-")
                in rows[name]
            ), (name, task)


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
    printed = capsys.readouterr().out
    assert "GPU-hours" in printed and "110,000" in plan
    # docs/cluster.md gives the GPU-hours this plan prints (pretraining, then the grid), in thousands
    hours = [int(h.replace(",", "")) for h in re.findall(r"([\d,]+) GPU-hours[ .]", printed)[:2]]
    cluster = " ".join((REPO_ROOT / "docs" / "cluster.md").read_text().split())
    assert (
        f"At 40% MFU on H100s (`--gpu H100 --mfu 0.4`) the 38 pretraining runs come to about "
        f"{hours[0] / 1000:.1f}k GPU-hours and the fine-tuning grid, intermediate checkpoints included, to about "
        f"{hours[1] / 1000:.2f}k"
    ) in cluster
    # disk: one checkpoint per 1,000 steps a run trains itself (a decay branch only its 2k), none deleted
    checkpoints = sum(-(-int(r["steps"]) // 1000) for r in rows.values())
    assert f"{checkpoints:,} checkpoints" in plan and "12 bytes per parameter" in plan and "64,000 steps" in plan
    # launch/: SLURM scripts (tests/test_launch.py runs them) and the same runs in order without SLURM
    assert {p.name for p in (tmp_path / "launch").iterdir()} == {
        "submit.sh",
        "prepare_data.sbatch",
        "pretrain.sbatch",
        "eval_grid.sbatch",
        "eval_grid.tsv",
        "pretrain.sh",
    }
    script = (tmp_path / "launch" / "pretrain.sh").read_text().splitlines()
    order = [line.split('pretrain.sbatch" ')[-1].split()[0] for line in script if 'pretrain.sbatch" recipes/' in line]
    assert order == [f"recipes/configs/paper/{r.name}.yaml" for r in manifest.training_order(manifest.model_names())]
    grid = (tmp_path / "launch" / "eval_grid.tsv").read_text().splitlines()
    assert len(grid) == (38 + 12) * 12 * 30  # the intermediate checkpoints too (data-efficiency figure)
    assert "610m-clm-42k-5000=out/paper/610m-clm-42k/intermediate/step-5000\tsst2\t1e-05\t0" in grid


def test_paper_plan_default_mfu_says_where_it_comes_from(tmp_path, capsys):
    """The default MFU is an H200 probe's from before the throughput work, and the 1b's was never measured: the plan
    says so, and never calls it the MFU measured per size (docs/benchmarks.md: no GPU figure of this work yet)."""
    main(["paper", "--output", str(tmp_path)])
    title = (tmp_path / "plan.md").read_text().splitlines()[0]
    assert "an H200 probe's, before the throughput work; the 1b unmeasured, at the 610m's" in title, title
    assert "(measured" not in title
    assert "The only GPU figures are an earlier probe" in (REPO_ROOT / "docs" / "benchmarks.md").read_text()


def test_mini_evaluation_runs_as_one_grid_process_per_task_group():
    """The checkpoints that share their tasks and evaluation arguments are evaluated by one grid process: the mini
    study's six final models in three (QA and IR have their own budgets), its six intermediate checkpoints in one."""
    mini = STUDIES["mini"]
    finals = [Path("/s/models") / name for name in mini.models]
    intermediates = [
        Path("/s/models") / name / "intermediate" / f"step-{step}"
        for name in ("610m-clm-42k", "610m-mlm40-42k")
        for step in (125, 250, 500)
    ]
    batches = eval_batches(finals + intermediates, mini)
    assert [(models, tasks) for models, tasks, _ in batches] == [
        (finals, ["sst2", "mnli", "conll2003"]),
        (finals, ["squad"]),
        (finals, ["scifact"]),
        (intermediates, ["conll2003"]),
    ]
    assert [args.get("max_steps") for _, _, args in batches] == [None, 500, 300, None]
    assert batches[0][2] == mini.eval_args
    horizon = STUDIES["horizon-replicated"]  # a task with its own LR grid has its own grid process
    assert [tasks for _, tasks, _ in eval_batches(finals, horizon)] == [["conll2003"], ["mnli"]]
    assert horizon.lrs_of("mnli") == (3e-4, 1e-3) and horizon.lrs_of("conll2003") == (3e-3, 1e-2)


def test_a_stage_run_in_process_logs_its_output_and_fails_with_its_last_lines(tmp_path, capsys):
    """`run_here` (the held-out loss, the report): output to the stage's log, not the terminal; bad input ends the
    stage with the log's last lines, the one-line error among them, as a failed subprocess stage does."""
    from analysis import report
    from recipes.study import run_here

    log = tmp_path / "logs" / "report.log"
    with pytest.raises(RuntimeError, match=r"python -m analysis.report failed \(exit 2\)") as failure:
        run_here(report.main, [str(tmp_path / "no-results"), "--output", str(tmp_path / "report")], log)
    assert "no-results" in str(failure.value) and "no-results" in log.read_text()
    assert log.read_text().startswith(f"\n$ python -m analysis.report {tmp_path / 'no-results'}")
    assert capsys.readouterr().err == "" and not (tmp_path / "report").exists()


@pytest.mark.slow
def test_pretraining_replicates_differ_by_their_seeds_only(tmp_path):
    """`pretrain_seeds`: each model trained once per seed, named `<name>-pseed<k>`, with k as its weight and mask
    seeds and the study's block order; a CPT run starts from the base of its own replicate."""
    from recipes.study import run_settings, run_study, training_runs

    study = dataclasses.replace(
        STUDIES["smoke"], scale="ci-replicates", models=("610m-mlm40-42k",), pretrain_seeds=(0, 1), heldout_blocks=0
    )
    assert study.trained_names() == ("610m-mlm40-42k-pseed0", "610m-mlm40-42k-pseed1")
    assert names.parse_name("610m-mlm40-42k-pseed1").replicate_group == "610m-mlm40-42k"
    cpt = dataclasses.replace(study, models=("610m-clm-dec42k-mlm40-44k",))
    assert [(r.name, k) for r, k in training_runs(cpt)] == [
        ("610m-clm-42k", 0),
        ("610m-clm-42k", 1),
        ("610m-clm-dec42k-mlm40-44k", 0),
        ("610m-clm-dec42k-mlm40-44k", 1),
    ]
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(
            manifest.SCALES,
            "ci-replicates",
            manifest.Scale(step_divisor=1000, block_size=32, per_device_train_batch_size=2, max_docs=200),
        )
        settings = run_settings(manifest.recipes()["610m-clm-dec42k-mlm40-44k"], cpt, tmp_path, None, 1)
        assert settings["model_name_or_path"] == str(tmp_path / "models" / "610m-clm-42k-pseed1")
        run_study("smoke", tmp_path / "study", study=study, until="pretraining")
    runs = [tmp_path / "study" / "models" / name for name in study.trained_names()]
    infos = [json.loads((run / "run_info.json").read_text()) for run in runs]
    configs = [json.loads((run / "run_config.json").read_text()) for run in runs]
    assert [c["training_args"]["seed"] for c in configs] == [0, 1]
    assert [c["run_settings"]["masking_seed"] for c in configs] == [0, 1]
    assert {c["training_args"]["data_seed"] for c in configs} == {0}  # the same blocks in the same order
    assert [i["name"] for i in infos] == list(study.trained_names())
    from safetensors.torch import load_file

    first, second = (load_file(run / "model.safetensors") for run in runs)
    assert not all(torch.equal(first[k], second[k]) for k in first)  # other initial weights and masks


def _archive(path: Path, members: dict, mode: str = "w:xz") -> Path:
    import io
    import tarfile

    with tarfile.open(path, mode) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_from_results_takes_the_study_lock_and_refuses_bad_archives_in_one_line(tmp_path, capsys):
    """O2/L1: --from_results never runs beside a study in the same --output (it takes the study lock); a bad archive
    (not xz, truncated, no study.json, a member outside the study) is one line naming it, nothing written."""
    from core import artifacts
    from recipes.study import STUDY_LOCK

    parameters = {"total": 2, "input_embedding": 1}  # no result to check them against
    marker = {"format": run_folders.STUDY_FORMAT, "study": "smoke", "definition": {"scale": "smoke"}}
    marker = json.dumps({**marker, "parameters": parameters}).encode()
    good = _archive(tmp_path / "good.tar.xz", {"study.json": marker})
    truncated = tmp_path / "truncated.tar.xz"
    whole = _archive(tmp_path / "big.tar.xz", {"study.json": marker, "results/x.json": bytes(range(256)) * 400})
    truncated.write_bytes(whole.read_bytes()[:300])
    cases = {
        _archive(tmp_path / "plain.tar", {"study.json": marker}, "w"): "is not a readable tar.xz",
        truncated: "is not a readable tar.xz",
        _archive(tmp_path / "nomarker.tar.xz", {"heldout/heldout.csv": b"x"}): "holds no study.json",
        _archive(tmp_path / "escape.tar.xz", {"study.json": marker, "../evil": b"x"}): "holds '../evil'",
    }
    for archive, message in cases.items():
        with pytest.raises(SystemExit) as error:
            main(["smoke", "--from_results", str(archive), "--output", str(tmp_path / "out")])
        err = capsys.readouterr().err.strip().splitlines()
        assert error.value.code == 2 and len(err) == 1 and str(archive) in err[0] and message in err[0], err
    assert not (tmp_path / "out").exists() and not (tmp_path / "evil").exists()
    output = tmp_path / "study"
    with artifacts.exclusive_lock(output / STUDY_LOCK, "a running study"):
        with pytest.raises(SystemExit) as error:
            main(["smoke", "--from_results", str(good), "--output", str(output)])
    assert error.value.code == 2 and f"lock {output / STUDY_LOCK}" in capsys.readouterr().err
    assert [p.name for p in output.iterdir()] == [STUDY_LOCK]


def test_a_study_json_of_an_older_format_is_refused_in_one_line(tmp_path, capsys):
    """study.json format 1 (before the parameter counts its runs record) is refused in one line, as an archive for
    --from_results and as a study directory to resume; nothing is written."""
    old = json.dumps({"format": 1, "study": "smoke", "definition": {"scale": "smoke"}}).encode()
    archive = _archive(tmp_path / "old.tar.xz", {"study.json": old})
    study = tmp_path / "study"
    study.mkdir()
    (study / "study.json").write_bytes(old)
    for argv in (
        ["smoke", "--from_results", str(archive), "--output", str(tmp_path / "out")],
        ["smoke", "--output", str(study)],
    ):
        with pytest.raises(SystemExit) as error:
            main(argv)
        err = capsys.readouterr().err.strip().splitlines()
        assert error.value.code == 2 and len(err) == 1 and "study.json format 1, this code reads format 2" in err[0]
    assert not (tmp_path / "out").exists() and [p.name for p in study.iterdir()] == ["study.json"]


def test_a_study_json_whose_input_embedding_exceeds_its_total_is_one_line_in_its_terms(tmp_path, capsys):
    """Issue 54: study.json parameters whose input embedding exceeds their total ended in a RuntimeError quoting
    the report's --embedding_parameters, a flag the user never passed; now one line naming study.json."""
    marker = {"format": run_folders.STUDY_FORMAT, "study": "smoke", "definition": {"scale": "smoke"}}
    marker["parameters"] = {"total": 1000, "input_embedding": 5000}
    archive = _archive(tmp_path / "edited.tar.xz", {"study.json": json.dumps(marker).encode()})
    with pytest.raises(SystemExit) as error:
        main(["smoke", "--from_results", str(archive), "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert error.value.code == 2 and len(err) == 1 and "--embedding_parameters" not in err[0], err
    assert f"{archive}:study.json records parameters {{'total': 1000, 'input_embedding': 5000}}, where" in err[0]
    assert not (tmp_path / "out").exists()


def _first_result(archive: Path) -> tuple[str, dict]:
    import tarfile

    with tarfile.open(archive, "r:xz") as tar:
        member = next(m for m in tar if m.name.startswith("results/") and m.name.endswith(".json"))
        return member.name, json.loads(tar.extractfile(member).read())


def test_from_results_refuses_an_edited_score_and_a_copied_result(tmp_path, capsys):
    """S5/S6: the archive's aggregates are recomputed from each result's predictions (an edited score is refused),
    and a result filed under a name that is not its own (a copy) is refused: it would count as one more run."""
    name, record = _first_result(REPO_ROOT / "docs" / "horizon-study" / "results.tar.xz")
    marker = json.dumps(
        {
            "format": run_folders.STUDY_FORMAT,
            "study": "horizon-replicated",
            "definition": {"scale": "horizon-replicated"},
        }
    ).encode()
    metric = record["main_metric"]
    edited = {**record, "test": {**record["test"], metric: 0.99}}
    cases = {
        _archive(
            tmp_path / "edited.tar.xz", {"study.json": marker, name: json.dumps(edited).encode()}
        ): f"{name}: its test {metric} is 0.99 but its predictions give {record['test'][metric]}",
        _archive(
            tmp_path / "copy.tar.xz",
            {
                "study.json": marker,
                name: json.dumps(record).encode(),
                name.replace(".json", " (copy).json"): json.dumps(record).encode(),
            },
        ): f"(copy).json holds the result of {name}",
        # R1: a member spelled `./results/...` or `results//...` unpacks onto the checked file: checked by the path
        # it unpacks to, so it is a second copy of that file (or an edited score) and never skips the checks
        _archive(
            tmp_path / "dot.tar.xz",
            {"study.json": marker, name: json.dumps(record).encode(), f"./{name}": json.dumps(edited).encode()},
        ): f"holds {name} twice",
        _archive(
            tmp_path / "slashes.tar.xz",
            {
                "study.json": marker,
                name: json.dumps(record).encode(),
                name.replace("/", "//", 1): json.dumps(edited).encode(),
            },
        ): f"holds {name} twice",
        _archive(
            tmp_path / "dotonly.tar.xz", {"study.json": marker, f"./{name}": json.dumps(edited).encode()}
        ): f"its test {metric} is 0.99 but its predictions give {record['test'][metric]}",
    }
    for archive, message in cases.items():
        with pytest.raises(SystemExit) as error:
            main(["horizon-replicated", "--from_results", str(archive), "--output", str(tmp_path / "out")])
        err = capsys.readouterr().err.strip().splitlines()
        assert error.value.code == 2 and len(err) == 1 and message in err[0], err
    assert not (tmp_path / "out").exists()


def committed_marker(docs: str) -> dict:
    """The study.json of a committed study's archive: its scale and the parameter counts its runs recorded."""
    import tarfile

    with tarfile.open(REPO_ROOT / "docs" / docs / "results.tar.xz", "r:xz") as tar:
        return json.loads(tar.extractfile("study.json").read())


def test_the_replicated_horizon_study_can_test_the_gap_on_both_tasks():
    """horizon-replicated's checkpoints, placed by the findings' own rule: at least two stable-phase checkpoints before
    SC's crossover interval under both parameter conventions (MNLI's slope), and its last checkpoints past it (the
    late gap); CoNLL (TC) has no crossover. Its 2-LR grids are declared bracketed."""
    from analysis import findings

    study = STUDIES["horizon-replicated"]
    tokens_per_step, parameters, embeddings = regime(committed_marker("horizon-study"))
    at = findings.Regime(tokens_per_step, parameters, study.scale, embeddings)
    checkpoints = [f"610m-clm-42k-pseed0-{step}" for step in study.intermediate_steps] + ["610m-clm-42k-pseed0"]
    places = [findings.phase(at, name, "sc") for name in checkpoints]
    assert places.count("before") >= 2 and places[-2:] == ["past", "past"], places
    assert findings.phase(at, checkpoints[0], "tc") == "no crossover"
    assert len(study.trained_names()) == 6 and set(study.bracketed_by) == set(study.tasks)
    assert all(len(study.lrs_of(task)) == 2 for task in study.tasks)


def test_the_horizon_study_redefined_for_the_findings_rules_can_test_them():
    """horizon-tested (docs/horizon-tested-study): 3 checkpoints before SC's crossover interval under both
    conventions (the slope's minimum), 40k and the final past it, 4 LRs a task fine-tuned in the study (stability's 3,
    and an optimum the grid can bracket itself, no declared bracket), replicates whose block order differs by their
    seed."""
    from analysis import findings
    from recipes.study import run_settings

    study = STUDIES["horizon-tested"]
    tokens_per_step, parameters, embeddings = regime(committed_marker("horizon-tested-study"))
    at = findings.Regime(tokens_per_step, parameters, study.scale, embeddings)
    places = [findings.phase(at, f"610m-clm-42k-{step}", "sc") for step in study.intermediate_steps]
    assert places.count("before") >= findings.MIN_SLOPE_CHECKPOINTS and places[-1] == "past"
    assert findings.phase(at, "610m-clm-42k", "sc") == "past"
    assert all(len(study.lrs_of(task)) >= findings.MIN_STABILITY_LRS + 1 for task in study.tasks)
    assert not study.bracketed_by and study.definition()["pretrain_data_order"] is True
    assert "pretrain_data_order" not in STUDIES["horizon-replicated"].definition()  # its archive's study.json holds
    recipe = manifest.recipes()["610m-mlm40-42k"]
    seeds = [run_settings(recipe, study, Path("/tmp/x"), None, k) for k in (0, 1)]
    assert [(s["seed"], s["masking_seed"], s["data_seed"]) for s in seeds] == [(0, 0, 0), (1, 1, 1)]
    same = run_settings(recipe, STUDIES["horizon-replicated"], Path("/tmp/x"), None, 1)
    assert same["data_seed"] == 0
