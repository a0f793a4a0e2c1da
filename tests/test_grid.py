"""The grid runner: one atomic file per run, finished runs skipped, divergence recorded, bad input refused early."""

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import huggingface_hub
import pytest

from analysis import report
from core import store
from evaluation import common, finetune_args, identity, model_inputs, resolve, run, tasks
from tests.fixtures.tiny_models import (
    build_tiny_bert,
    build_tiny_eurobert,
    build_tiny_native_eurobert,
    build_tiny_tokenizer,
)

SMOKE = dict(
    max_steps=6,
    batch_size=8,
    eval_batch_size=32,
    max_train=48,
    max_eval=16,
    max_length=48,
    logging_steps=1,
    precision="fp32",
)


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def models(tmp_path_factory, data_dir):
    root = tmp_path_factory.mktemp("grid-models")
    tokenizer = build_tiny_tokenizer(data_dir)
    return {
        "eurobert": build_tiny_eurobert(root / "tiny-mlm", tokenizer),
        "bert": build_tiny_bert(root / "tiny-bert", tokenizer),
        "native": build_tiny_native_eurobert(root / "tiny-native", tokenizer),
        "tokenizer": tokenizer,
    }


def grid(model, output, tasks="sst2", lrs="1e-3,1e6", seeds="0,1"):
    return run.GridArgs(model=str(model), tasks=tasks, lrs=lrs, seeds=seeds, output=str(output))


def protocol(data_dir, **overrides):
    return finetune_args.ProtocolArgs(**{**SMOKE, "data_dir": str(data_dir), **overrides})


def test_grid_writes_skips_and_records_divergence(models, data_dir, tmp_path):
    # lr=1e6 makes the loss overflow within a few steps: a real divergence, not an injected one.
    written = run.run_grid(grid(models["eurobert"], tmp_path), protocol(data_dir))
    files = sorted((tmp_path / "tiny-mlm" / "sst2").glob("*.json"))
    assert sorted(written) == files and len(files) == 4
    records = {p.name: json.loads(p.read_text()) for p in files}
    assert {n: r["status"] for n, r in records.items()} == {
        "lr0.001-seed0.json": "ok",
        "lr0.001-seed1.json": "ok",
        "lr1e+06-seed0.json": "diverged",
        "lr1e+06-seed1.json": "diverged",
    }
    good = records["lr0.001-seed0.json"]
    assert {
        "format",
        "model",
        "task",
        "family",
        "lr",
        "seed",
        "status",
        "main_metric",
        "validation",
        "test",
        "per_instance",
        "trivial_baseline",
        "config",
        "identity",
        "versions",
        "git_commit",
    } <= set(good)
    assert str(tmp_path) not in json.dumps(good) and str(models["eurobert"]) not in json.dumps(good)  # no local paths
    assert 0.0 <= good["test"]["accuracy"] <= 1.0 and len(good["per_instance"]["test"]) == 16
    assert good["config"]["attention"] == "bidirectional" and good["config"]["adam_beta2"] == 0.95
    mtimes = {p: p.stat().st_mtime_ns for p in files}
    assert run.run_grid(grid(models["eurobert"], tmp_path), protocol(data_dir)) == []
    assert {p: p.stat().st_mtime_ns for p in files} == mtimes
    assert not list(tmp_path.rglob("*.tmp"))


@pytest.mark.parametrize("name, model_type", [("bert", "bert"), ("native", "eurobert")])
def test_other_encoders_run_through_the_grid(models, data_dir, tmp_path, name, model_type):
    written = run.run_grid(grid(models[name], tmp_path, lrs="1e-3", seeds="0"), protocol(data_dir))
    record = json.loads(Path(written[0]).read_text())
    assert record["status"] == "ok" and record["config"]["model_config"] == model_type


def test_tokenized_datasets_are_built_once_per_tokenizer(models, data_dir):
    from evaluation import sequence_classification

    args = finetune_args.FinetuneArgs(**SMOKE, data_dir=str(data_dir))
    sst2, load = tasks.load_task("sst2"), model_inputs.load_finetuning_tokenizer
    first = sequence_classification.tokenize(sst2, load(models["eurobert"]), args)
    again = sequence_classification.tokenize(sst2, load(models["bert"]), args)
    assert first is again  # same tokenizer content, same task and length: one tokenization for the whole grid


def _refused(models, data_dir, tmp_path, match, **grid_kwargs):
    with pytest.raises((ValueError, FileNotFoundError), match=match):
        run.run_grid(
            grid(grid_kwargs.pop("model", models["eurobert"]), tmp_path / "out", **grid_kwargs), protocol(data_dir)
        )
    assert not (tmp_path / "out").exists()  # refused before any run started


def test_unknown_task_is_refused(models, data_dir, tmp_path):
    _refused(models, data_dir, tmp_path, "unknown task 'sst3'", tasks="sst3")


def test_missing_task_head_is_refused(models, data_dir, tmp_path):
    _refused(models, data_dir, tmp_path, "no AutoModelForQuestionAnswering", model=models["native"], tasks="sst2,squad")


def test_empty_grid_is_refused(models, data_dir, tmp_path):
    _refused(models, data_dir, tmp_path, "empty grid", lrs="")


def test_help_renders_every_flag():
    text = run.make_parser().format_help()  # argparse %-formats help strings: a bare "%" would crash --help
    assert all(f"--{flag}" in text for flag in ("workers", "save_models", "max_length", "rerun_changed"))
    assert "99% of the model's max_position_embeddings" in " ".join(text.split())


def test_bad_input_is_refused_once_before_any_worker_starts(models, data_dir, tmp_path):
    with pytest.raises(ValueError, match="--workers 0 must be >= 1"):
        run.run_grid(dataclasses_replace(grid(models["eurobert"], tmp_path / "out"), workers=0), protocol(data_dir))
    with pytest.raises(ValueError, match="unknown task 'sst3'"):
        run.run_grid(
            dataclasses_replace(grid(models["eurobert"], tmp_path / "out", tasks="sst2,sst3"), workers=2),
            protocol(data_dir),
        )
    assert not (tmp_path / "out").exists()


def test_model_without_tokenizer_is_refused(models, data_dir, tmp_path):
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "config.json").write_text((models["eurobert"] / "config.json").read_text())
    _refused(models, data_dir, tmp_path, "no tokenizer", model=bare)


def test_missing_dataset_files_are_refused(models, data_dir, tmp_path):
    yaml_path = tmp_path / "mysst.yaml"
    text = (Path(run.tasks.TASKS_DIR) / "sst2.yaml").read_text().replace("name: sst2", "name: mysst")
    yaml_path.write_text(text.replace("sc/sst2/dev.tsv", "sc/sst2/missing.tsv"))
    _refused(models, data_dir, tmp_path, "missing dataset file", tasks=str(yaml_path))


def test_label_set_mismatch_is_refused(models, data_dir, tmp_path):
    from transformers import AutoModelForSequenceClassification

    finetuned = tmp_path / "finetuned"
    model = AutoModelForSequenceClassification.from_pretrained(
        models["eurobert"], num_labels=3, id2label={0: "entailment", 1: "neutral", 2: "contradiction"}
    )
    model.save_pretrained(finetuned)
    models["tokenizer"].save_pretrained(finetuned)
    _refused(models, data_dir, tmp_path, "label set mismatch", model=finetuned)


# ---------------------------------------------------------------------------------------------- result identity
ROOT = Path(__file__).resolve().parents[1]


def test_changed_protocol_is_refused_then_rerun_with_old_file_moved_aside(models, data_dir, tmp_path):
    first = run.run_grid(grid(models["eurobert"], tmp_path, lrs="1e-3", seeds="0"), protocol(data_dir))
    before = json.loads(first[0].read_text())
    with pytest.raises(ValueError, match=r"made by something else.*protocol\.max_steps: 6 -> 5.*--rerun_changed"):
        run.run_grid(grid(models["eurobert"], tmp_path, lrs="1e-3", seeds="0"), protocol(data_dir, max_steps=5))
    assert json.loads(first[0].read_text()) == before  # refused: nothing touched
    rerun = dataclasses_replace(grid(models["eurobert"], tmp_path, lrs="1e-3", seeds="0"), rerun_changed=True)
    again = run.run_grid(rerun, protocol(data_dir, max_steps=5))
    assert again == first and json.loads(first[0].read_text())["identity"]["protocol"]["max_steps"] == 5
    aside = list(first[0].parent.glob(f"{first[0].name}.replaced-*"))
    assert len(aside) == 1 and json.loads(aside[0].read_text()) == before
    assert store.result_files(tmp_path) == first  # the moved-aside file is not a result any more


def dataclasses_replace(obj, **changes):
    import dataclasses

    return dataclasses.replace(obj, **changes)


def test_same_task_name_with_other_data_is_refused(models, data_dir, tmp_path):
    run.run_grid(grid(models["eurobert"], tmp_path, lrs="1e-3", seeds="0"), protocol(data_dir))
    other = tmp_path / "tasks" / "sst2.yaml"  # same name "sst2", other test file
    other.parent.mkdir()
    text = (Path(run.tasks.TASKS_DIR) / "sst2.yaml").read_text()
    other.write_text(text.replace("test: sc/sst2/dev.tsv", "test: sc/sst2/train.tsv.gz"))
    with pytest.raises(ValueError, match=r"task\.(data|definition)"):
        run.run_grid(grid(models["eurobert"], tmp_path, tasks=str(other), lrs="1e-3", seeds="0"), protocol(data_dir))


def test_another_model_under_the_same_name_is_refused(models, data_dir, tmp_path):
    run.run_grid(grid(models["eurobert"], tmp_path, lrs="1e-3", seeds="0"), protocol(data_dir))
    impostor = tmp_path / "elsewhere" / "tiny-mlm"  # same directory name, other weights
    build_tiny_eurobert(impostor, models["tokenizer"], is_causal=True)
    with pytest.raises(ValueError, match=r"model\.(weights|config)"):
        run.run_grid(grid(impostor, tmp_path, lrs="1e-3", seeds="0"), protocol(data_dir))


def test_edited_model_code_is_refused_not_reused(models, data_dir, tmp_path):
    """The checkpoint's remote code (modeling_eurobert.py) and the project's declared scoring versions are in the
    identity: a stored result made by other code is refused as "changed", never silently reused."""
    import shutil

    from evaluation import identity

    model = shutil.copytree(models["eurobert"], tmp_path / "models" / "tiny-mlm")
    first = run.run_grid(grid(model, tmp_path / "out", lrs="1e-3", seeds="0"), protocol(data_dir))
    assert json.loads(first[0].read_text())["identity"]["scoring"] == identity.scoring_identity("sc")
    with open(model / "modeling_eurobert.py", "a") as f:
        f.write("\n# edited\n")
    with pytest.raises(ValueError, match=r"model\.code\.modeling_eurobert\.py\.sha256: .* -> .*--rerun_changed"):
        run.run_grid(grid(model, tmp_path / "out", lrs="1e-3", seeds="0"), protocol(data_dir))


def test_checkpoint_directories_are_named_after_their_run(tmp_path):
    for path in (tmp_path / "runA" / "intermediate" / "step-1000", tmp_path / "runA" / "checkpoint-500"):
        path.mkdir(parents=True)
    step = tmp_path / "runA" / "intermediate" / "step-1000"
    assert resolve.model_name(str(step)) == ("runA-1000", str(step))
    assert resolve.model_name(str(tmp_path / "runA" / "checkpoint-500"))[0] == "runA-checkpoint-500"
    assert resolve.model_name(f"mine={tmp_path / 'runA'}") == ("mine", str(tmp_path / "runA"))
    (step / "run_info.json").write_text(json.dumps({"name": "610m-clm-42k-1000"}))
    assert resolve.checkpoint_name(step) == "610m-clm-42k-1000"  # a study files it under the recorded name
    # outside a study, a run that records nothing of its size or length never claims the paper's name
    assert resolve.model_name(str(step))[0] == "custom-610m-clm-42k-1000"


def test_a_model_path_with_an_equals_sign_is_a_path(models, data_dir, tmp_path):
    """`--model out/sweep lr=1e-4/tiny-mlm` is a directory, not NAME=DIR (it was split at its '='), also through the
    NAME=DIR entries the grid hands its workers; a name that would not survive that round trip is refused."""
    import shutil

    model = tmp_path / "sweep lr=1e-4" / "tiny-mlm"
    shutil.copytree(models["eurobert"], model)
    assert resolve.resolve_model(str(model))[:2] == ("tiny-mlm", str(model))
    assert resolve.resolve_model(f"mine={model}")[:2] == ("mine", str(model))
    todo, _ = run.check(grid(model, tmp_path / "out", lrs="1e-3", seeds="0"), protocol(data_dir))
    (entry,) = [
        arg.removeprefix("--model=")
        for arg in run.worker_command(todo, grid(model, tmp_path / "out", lrs="1e-3", seeds="0"), protocol(data_dir))
        if arg.startswith("--model=")
    ]
    assert resolve.resolve_model(entry)[:2] == ("tiny-mlm", str(model))
    unnamed = tmp_path / "a=b"
    shutil.copytree(models["eurobert"], unnamed)
    with pytest.raises(ValueError, match=r"'a=b' cannot name a results folder .*use NAME=DIR"):
        resolve.resolve_model(str(unnamed))


def test_corrupt_or_old_result_is_never_reused(models, data_dir, tmp_path, call_main):
    written = run.run_grid(grid(models["eurobert"], tmp_path, lrs="1e-3", seeds="0"), protocol(data_dir))
    written[0].write_text(written[0].read_text()[:50])  # damaged by something else
    with pytest.raises(ValueError, match=f"{written[0]} is not valid JSON"):
        run.run_grid(grid(models["eurobert"], tmp_path, lrs="1e-3", seeds="0"), protocol(data_dir))
    result = call_main(report.main, tmp_path)
    assert result.returncode == 2 and f"{written[0]} is not valid JSON" in result.stderr.splitlines()[-1]
    written[0].write_text(json.dumps({"status": "ok", "model": "tiny-mlm"}))  # a format-1 file
    with pytest.raises(ValueError, match="has format 1"):
        run.run_grid(grid(models["eurobert"], tmp_path, lrs="1e-3", seeds="0"), protocol(data_dir))


def test_stale_temp_file_of_a_killed_writer_is_removed(models, data_dir, tmp_path):
    target = store.result_path(tmp_path, "tiny-mlm", "sst2", 1e-3, 0)
    target.parent.mkdir(parents=True)
    stale = target.with_name(f".{target.name}.k1ll3d.tmp")
    stale.write_text('{"half": ')
    run.run_grid(grid(models["eurobert"], tmp_path, lrs="1e-3", seeds="0"), protocol(data_dir))
    assert target.is_file() and not stale.exists()


@pytest.mark.parametrize("steps", ["0", "-1"])
def test_cli_refuses_a_grid_that_would_not_train(models, tmp_path, steps, call_main):
    result = call_main(
        run.main, "--model", models["eurobert"], "--tasks", "sst2", "--max_steps", steps, "--output", tmp_path / "out"
    )
    assert result.returncode == 2 and f"max_steps={steps} must be >= 1" in result.stderr.splitlines()[-1]
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_two_grid_processes_share_one_output_directory(models, data_dir, tmp_path):
    """Two workers (as two SLURM array tasks would) on the same grid: every run is done once, by one of them."""
    command = [
        sys.executable,
        "-m",
        "evaluation.run",
        "--model",
        str(models["eurobert"]),
        "--tasks",
        "sst2",
        "--lrs",
        "1e-3,2e-3",
        "--seeds",
        "0,1",
        "--output",
        str(tmp_path),
        "--data_dir",
        str(data_dir),
        *[f"--{k}={v}" for k, v in SMOKE.items()],
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    workers = [
        subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
        for _ in range(2)
    ]
    outputs = [w.communicate(timeout=600)[1] for w in workers]
    assert [w.returncode for w in workers] == [0, 0], outputs
    counts = [int(re.search(r"wrote (\d+) result file", out).group(1)) for out in outputs]
    assert sum(counts) == 4 and len(store.result_files(tmp_path)) == 4  # no run done twice, none missing


@pytest.mark.slow
def test_a_grid_stopped_by_sigterm_leaves_no_lock_behind(models, data_dir, tmp_path):
    """Issue 54: SIGTERM to `evaluation.run` while a run trains (its `.<result>.json.lock` held) ends it with exit
    status 143 and removes the lock; no result is written for the stopped run."""
    import signal
    import time

    command = [sys.executable, "-m", "evaluation.run", "--model", str(models["eurobert"]), "--tasks", "sst2"]
    command += ["--lrs", "1e-3", "--seeds", "0", "--output", str(tmp_path), "--data_dir", str(data_dir)]
    command += [f"--{k}={v}" for k, v in {**SMOKE, "max_steps": 100000, "max_train": 4000}.items()]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    grid_process = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 240
        while not list(tmp_path.rglob(".*.lock")) and grid_process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert list(tmp_path.rglob(".*.lock")), "the run never took its lock"
        time.sleep(2)  # training
        grid_process.send_signal(signal.SIGTERM)
        err = grid_process.communicate(timeout=120)[1]
    finally:
        if grid_process.poll() is None:
            grid_process.kill()
    assert grid_process.returncode == 143, err
    assert not list(tmp_path.rglob("*.lock")) and not store.result_files(tmp_path)


# ------------------------------------------------------------------------------------- workers and Hub ids
def plant_hub_snapshot(cache: Path, repo_id: str, model_dir: Path) -> str:
    """Put a model into a Hub cache folder as `huggingface_hub` lays it out (snapshots/<commit>/ + refs/main)."""
    import shutil

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    shutil.copytree(model_dir, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    return commit


def scored(record: dict) -> dict:
    """What a result says about the model: status, scores, predictions and identity (not provenance)."""
    return {k: record[k] for k in ("status", "validation", "test", "per_instance", "identity", "config")}


@pytest.mark.slow  # two worker processes
def test_workers_on_a_hub_id_give_the_results_of_a_sequential_grid(models, data_dir, tmp_path, call_main, monkeypatch):
    """`--workers 2` on a Hub id (read from the Hub cache, offline) writes the results a sequential grid writes for
    the same model from its directory: same scores, predictions and identity (the snapshot's files)."""
    sequential = run.run_grid(
        grid(f"tiny-mlm={models['eurobert']}", tmp_path / "sequential", lrs="1e-3,2e-3"), protocol(data_dir)
    )
    commit = plant_hub_snapshot(tmp_path / "hub", "org/tiny-mlm", models["eurobert"])
    # HF_HUB_CACHE: read at import by huggingface_hub here (its constant), from the environment by the workers
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    result = call_main(
        run.main,
        "--model",
        "org/tiny-mlm",
        "--tasks",
        "sst2",
        "--lrs",
        "1e-3,2e-3",
        "--seeds",
        "0,1",
        "--workers",
        "2",
        "--output",
        tmp_path / "workers",
        "--data_dir",
        data_dir,
        *[f"--{k}={v}" for k, v in SMOKE.items()],
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "2 workers, " in result.stderr and "wrote 4 result file(s)" in result.stderr
    parallel = store.result_files(tmp_path / "workers")
    assert [p.relative_to(tmp_path / "workers") for p in parallel] == [
        p.relative_to(tmp_path / "sequential") for p in sorted(sequential)
    ]  # filed under the repo name
    for ours, theirs in zip(sorted(sequential), parallel):
        a, b = json.loads(ours.read_text()), json.loads(theirs.read_text())
        assert a["status"] == "ok" and scored(a) == scored(b), ours.name
        assert b["model_source"] == f"org/tiny-mlm@{commit}" and "model_source" not in a
    with pytest.raises(ValueError, match=r"cannot load model 'org/not-cached' from the Hub.*HF_HUB_OFFLINE"):
        run.run_grid(grid("org/not-cached", tmp_path / "none"), protocol(data_dir))  # conftest: HF_HUB_OFFLINE=1
    assert not (tmp_path / "none").exists()


@pytest.mark.slow  # two worker processes
def test_a_failing_worker_fails_the_grid_with_its_log(models, data_dir, tmp_path, call_main):
    """A run that fails while training (8-token QA windows cannot hold the questions) fails the grid: exit 1 and
    the end of the worker's log, no result written."""
    result = call_main(
        run.main,
        "--model",
        models["eurobert"],
        "--tasks",
        "squad",
        "--lrs",
        "1e-3",
        "--seeds",
        "0,1",
        "--workers",
        "2",
        "--output",
        tmp_path,
        "--data_dir",
        data_dir,
        *[f"--{k}={v}" for k, v in SMOKE.items()],
        "--qa_max_length",
        "8",
        "--doc_stride",
        "3",
    )
    assert result.returncode == 1, result.stderr[-3000:]
    assert re.search(r"error: worker \d of 2 failed \(exit status 1\); the grid stopped", result.stderr)
    assert "Truncation error" in result.stderr  # the worker's own traceback, from its log
    assert store.result_files(tmp_path) == []


def test_finetune_info_carries_its_format(tmp_path):
    store.write_finetune_info(tmp_path, {"base_model": "m", "task": "sst2"})
    assert store.read_finetune_info(tmp_path)["format"] == store.FINETUNE_INFO_FORMAT
    (tmp_path / store.FINETUNE_INFO_NAME).write_text('{"base_model": "m"}')  # written before the format existed
    with pytest.raises(ValueError, match="finetune_info format None, this code reads format 1"):
        store.read_finetune_info(tmp_path)
    assert store.read_finetune_info(tmp_path / "none") is None


def test_a_dotted_hub_id_is_resolved_as_a_hub_id():
    """Offline and not cached: the Hub is named as what failed, not a missing local path."""
    with pytest.raises(ValueError, match=r"cannot load model 'org/model-1\.0@step-5' from the Hub"):
        resolve.resolve_model("org/model-1.0@step-5")
    with pytest.raises(ValueError, match="cannot load model 'gpt2' from the Hub"):
        resolve.resolve_model("gpt2")


# ------------------------------------------------------------------------- settings a family does not read
def test_settings_another_family_reads_leave_results_current_and_comparable(models, data_dir, tmp_path):
    """An SC result does not depend on the IR pooling or the QA stride: a grid differing only there reuses it, and
    the report averages the seeds of two such grids (the identity of each family holds only what it reads)."""
    first = run.run_grid(
        grid(models["eurobert"], tmp_path, lrs="1e-3", seeds="0"),
        protocol(data_dir, ir_pooling="cls", doc_stride=64, n_best=5, query_prompt="Q: "),
    )
    recorded = json.loads(first[0].read_text())["identity"]
    assert not {"ir_pooling", "doc_stride", "n_best", "query_prompt"} & set(recorded["protocol"])
    assert set(recorded["inputs"]) == {"max_length", "attention"}
    assert run.run_grid(grid(models["eurobert"], tmp_path, lrs="1e-3", seeds="0"), protocol(data_dir)) == []
    second = run.run_grid(
        grid(models["eurobert"], tmp_path, lrs="1e-3", seeds="1"),
        protocol(data_dir, ir_pooling="last", qa_max_length=64),
    )
    assert len(second) == 1
    (row,) = report.summarize(report.load_results(tmp_path))
    assert row["n_runs"] == 2
    # a result written before identities left such settings out (they recorded every setting) is refused, naming
    # --migrate, which makes it current
    record = json.loads(first[0].read_text())
    record["identity"]["protocol"] |= {"ir_pooling": "cls", "doc_stride": 64}
    record["identity"]["inputs"] |= {"qa_max_length": 48, "doc_stride": 16}
    store.write_result(first[0], record)
    with pytest.raises(ValueError, match="settings its family does not read.*--migrate"):
        run.run_grid(grid(models["eurobert"], tmp_path, lrs="1e-3", seeds="0,1"), protocol(data_dir))
    assert identity.migrate(tmp_path) == 1 and identity.migrate(tmp_path) == 0
    assert run.run_grid(grid(models["eurobert"], tmp_path, lrs="1e-3", seeds="0,1"), protocol(data_dir)) == []
    # what an SC task reads still counts
    with pytest.raises(ValueError, match=r"protocol\.max_length: 48 -> 40"):
        run.run_grid(grid(models["eurobert"], tmp_path, lrs="1e-3", seeds="0"), protocol(data_dir, max_length=40))


def test_a_new_setting_is_declared_once_and_identity_and_data_cache_follow(models, data_dir, monkeypatch):
    """A setting is its field plus one `SETTINGS` declaration: the identity of the families that read it holds it (the
    others' do not), and it keys the data cache of exactly those families (before: the cache key was listed by hand,
    and a data setting missing from it silently returned splits built for another value)."""

    @dataclasses.dataclass
    class WithWindow(finetune_args.ProtocolArgs):
        window: int = 3

    monkeypatch.setitem(finetune_args.SETTINGS, "window", finetune_args.Setting(families=("sc",), data="window"))
    args = [WithWindow(**{**SMOKE, "data_dir": str(data_dir), "window": w}) for w in (3, 4)]
    assert [identity.protocol_identity(a, "sc")["window"] for a in args] == [3, 4]
    assert "window" not in identity.protocol_identity(args[0], "tc")
    assert [finetune_args.data_settings(a, "sc")["window"] for a in args] == [3, 4]
    assert "window" not in finetune_args.data_settings(args[0], "tc")
    conll = tasks.load_task("conll2003")  # a family that does not read it shares its splits whatever its value
    assert common.task_splits(conll, args[0]) is common.task_splits(conll, args[1])
    assert common.task_splits(conll, args[0]) is not common.task_splits(conll, dataclasses.replace(args[0], max_eval=7))
    tokenizer, sst2 = model_inputs.load_finetuning_tokenizer(models["eurobert"]), tasks.load_task("sst2")
    tokenized = [common.cached(tokenizer, task, a, object) for task in (sst2, conll) for a in args]
    assert tokenized[0] is not tokenized[1] and tokenized[2] is tokenized[3]  # the tokenized splits' cache too
    # a declared identity-only setting enters no data key; one declared off the identity enters no identity
    monkeypatch.setitem(finetune_args.SETTINGS, "window", finetune_args.Setting(identity=False))
    assert "window" not in identity.protocol_identity(args[0], "sc") and "window" not in finetune_args.data_settings(
        args[0], "sc"
    )


def test_two_grids_of_other_protocols_started_together_leave_no_mix(models, data_dir, tmp_path, monkeypatch):
    """Grid B (max_steps 5) starts while grid A (max_steps 6) trains its first run, before A has written anything:
    B is refused whole, A finishes, and the folder holds A's protocol only (before: B wrote its run, A then stopped
    on it, both exited 2 and the folder held a mix). The interleaving is a hook in A's first training, not a sleep."""
    todo_a, tokenizers = run.check(grid(models["eurobert"], tmp_path, lrs="1e-3,2e-3", seeds="0"), protocol(data_dir))
    grid_b, protocol_b = grid(models["eurobert"], tmp_path, lrs="3e-3", seeds="0"), protocol(data_dir, max_steps=5)
    todo_b, _ = run.check(grid_b, protocol_b)  # both grids past their checks: nothing written yet
    real_execute, refused = run.execute, []

    def execute_with_b_starting(unit, *args):
        if not refused:
            with pytest.raises(run.GridMixed, match=r"claimed by another grid.*max_steps: 6 -> 5.*nothing was run"):
                run.run_all(todo_b, tokenizers, grid_b, protocol_b)
            refused.append(True)
        return real_execute(unit, *args)

    monkeypatch.setattr(run, "execute", execute_with_b_starting)
    written = run.run_all(
        todo_a, tokenizers, grid(models["eurobert"], tmp_path, lrs="1e-3,2e-3", seeds="0"), protocol(data_dir)
    )
    assert refused and len(written) == 2 and store.result_files(tmp_path) == sorted(written)
    assert {store.read_result(p)["identity"]["protocol"]["max_steps"] for p in written} == {6}
    # a folder written before folders were claimed is refused before anything is claimed, naming --migrate, which
    # claims it for its results' protocol (A's: B is then refused as another protocol)
    folder = written[0].parent
    (folder / store.PROTOCOL_NAME).unlink()
    with pytest.raises(
        run.GridMixed,
        match="written before folders were claimed: run `python -m evaluation.identity --migrate RESULTS_DIR` once",
    ):
        run.run_all(todo_b, tokenizers, grid_b, protocol_b)
    assert not (folder / store.PROTOCOL_NAME).exists()
    assert identity.migrate(tmp_path) == 0 and (folder / store.PROTOCOL_NAME).is_file()
    with pytest.raises(run.GridMixed, match=r"is claimed by another grid with another protocol.*max_steps: 6 -> 5"):
        run.run_all(todo_b, tokenizers, grid_b, protocol_b)


def test_a_protocol_folder_beside_results_gets_one_fix_from_the_grid_and_the_migration(
    models, data_dir, tmp_path, call_main
):
    """Issue 54: a `.protocol` folder beside results: the grid said run `--migrate`, `--migrate` said remove it. Both
    now say: remove it, then run `--migrate`; done, the migration claims the folder."""
    from tests.test_store import format2_result

    fix = "is a folder, not the claim a grid writes: remove it, then run `python -m evaluation.identity --migrate"
    claim = tmp_path / "grid" / "tiny-mlm" / "sst2" / store.PROTOCOL_NAME
    claim.mkdir(parents=True)
    (claim.parent / "lr0.5-seed9.json").write_text("{}")  # a result of another grid
    argv = ["--model", models["eurobert"], "--tasks", "sst2", "--lrs", "1e-3", "--seeds", "0"]
    out = call_main(run.main, *argv, "--output", tmp_path / "grid", "--data_dir", data_dir)
    assert out.returncode == 2 and out.stderr.count("error:") == 1 and fix in out.stderr, out.stderr
    path, _ = format2_result(tmp_path / "old")
    (path.parent / store.PROTOCOL_NAME).mkdir()
    out = call_main(identity.main, "--migrate", tmp_path / "old")
    assert out.returncode == 2 and out.stderr.count("error:") == 1 and fix in out.stderr, out.stderr
    (path.parent / store.PROTOCOL_NAME).rmdir()
    assert call_main(identity.main, "--migrate", tmp_path / "old").returncode == 0
    assert (path.parent / store.PROTOCOL_NAME).is_file()


@pytest.mark.parametrize("damage", ["corrupt", "empty", "folder"])
def test_a_damaged_protocol_claim_is_one_line_and_nothing_runs(models, data_dir, tmp_path, call_main, damage):
    """Issue 43: a `.protocol` that is corrupt, empty or a folder was a traceback (exit 1); now one line naming it,
    exit 2, nothing trained or written."""
    claim = tmp_path / "tiny-mlm" / "sst2" / store.PROTOCOL_NAME
    claim.parent.mkdir(parents=True)
    {
        "corrupt": lambda: claim.write_text('{"max_steps": '),
        "empty": lambda: claim.write_text(""),
        "folder": claim.mkdir,
    }[damage]()
    out = call_main(
        run.main,
        "--model",
        models["eurobert"],
        "--tasks",
        "sst2",
        "--lrs",
        "1e-3",
        "--seeds",
        "0",
        "--output",
        tmp_path,
        "--data_dir",
        data_dir,
    )
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert out.returncode == 2 and len(errors) == 1 and str(claim) in errors[0] and "Traceback" not in out.stderr
    assert sorted(p.name for p in claim.parent.iterdir()) == [store.PROTOCOL_NAME]
