"""The grid runner: one atomic file per run, finished runs skipped, divergence recorded, bad input refused early."""

import json
from pathlib import Path

import pytest

from evaluation import common, run
from tests.fixtures.tiny_models import (
    build_tiny_bert,
    build_tiny_eurobert,
    build_tiny_native_eurobert,
    build_tiny_tokenizer,
)

SMOKE = dict(max_steps=6, batch_size=8, eval_batch_size=32, max_train=48, max_eval=16, max_length=48, logging_steps=1,
             bf16="no")


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def models(tmp_path_factory, data_dir):
    root = tmp_path_factory.mktemp("grid-models")
    tokenizer = build_tiny_tokenizer(data_dir)
    return {"eurobert": build_tiny_eurobert(root / "tiny-mlm", tokenizer),
            "bert": build_tiny_bert(root / "tiny-bert", tokenizer),
            "native": build_tiny_native_eurobert(root / "tiny-native", tokenizer), "tokenizer": tokenizer}


def grid(model, output, tasks="sst2", lrs="1e-3,1e6", seeds="0,1"):
    return run.GridArgs(model=str(model), tasks=tasks, lrs=lrs, seeds=seeds, output=str(output))


def protocol(data_dir, **overrides):
    return common.ProtocolArgs(**{**SMOKE, "data_dir": str(data_dir), **overrides})


def test_grid_writes_skips_and_records_divergence(models, data_dir, tmp_path):
    # lr=1e6 makes the loss overflow within a few steps: a real divergence, not an injected one.
    written = run.main(grid(models["eurobert"], tmp_path), protocol(data_dir))
    files = sorted((tmp_path / "tiny-mlm" / "sst2").glob("*.json"))
    assert sorted(written) == files and len(files) == 4
    records = {p.name: json.loads(p.read_text()) for p in files}
    assert {n: r["status"] for n, r in records.items()} == {
        "lr0.001-seed0.json": "ok", "lr0.001-seed1.json": "ok",
        "lr1e+06-seed0.json": "diverged", "lr1e+06-seed1.json": "diverged"}
    good = records["lr0.001-seed0.json"]
    assert {"model", "model_path", "task", "family", "lr", "seed", "status", "main_metric", "validation", "test",
            "per_instance", "config", "versions"} <= set(good)
    assert 0.0 <= good["test"]["accuracy"] <= 1.0 and len(good["per_instance"]["test"]) == 16
    assert good["config"]["attention"] == "bidirectional" and good["config"]["adam_beta2"] == 0.95
    mtimes = {p: p.stat().st_mtime_ns for p in files}
    assert run.main(grid(models["eurobert"], tmp_path), protocol(data_dir)) == []
    assert {p: p.stat().st_mtime_ns for p in files} == mtimes
    assert not list(tmp_path.rglob("*.tmp"))


@pytest.mark.parametrize("name, model_type", [("bert", "bert"), ("native", "eurobert")])
def test_other_encoders_run_through_the_grid(models, data_dir, tmp_path, name, model_type):
    written = run.main(grid(models[name], tmp_path, lrs="1e-3", seeds="0"), protocol(data_dir))
    record = json.loads(Path(written[0]).read_text())
    assert record["status"] == "ok" and record["config"]["model_config"] == model_type


def test_tokenized_datasets_are_built_once_per_tokenizer(models, data_dir):
    from evaluation import sequence_classification, tasks

    args = common.FinetuneArgs(**SMOKE, data_dir=str(data_dir))
    first = sequence_classification.tokenize(tasks.load_task("sst2"), common.load_tokenizer(models["eurobert"]), args)
    again = sequence_classification.tokenize(tasks.load_task("sst2"), common.load_tokenizer(models["bert"]), args)
    assert first is again  # same tokenizer content, same task and length: one tokenization for the whole grid


def _refused(models, data_dir, tmp_path, match, **grid_kwargs):
    with pytest.raises((ValueError, FileNotFoundError), match=match):
        run.main(grid(grid_kwargs.pop("model", models["eurobert"]), tmp_path / "out", **grid_kwargs),
                 protocol(data_dir))
    assert not (tmp_path / "out").exists()  # refused before any run started


def test_unknown_task_is_refused(models, data_dir, tmp_path):
    _refused(models, data_dir, tmp_path, "unknown task 'sst3'", tasks="sst3")


def test_missing_task_head_is_refused(models, data_dir, tmp_path):
    _refused(models, data_dir, tmp_path, "no AutoModelForQuestionAnswering", model=models["native"], tasks="sst2,squad")


def test_empty_grid_is_refused(models, data_dir, tmp_path):
    _refused(models, data_dir, tmp_path, "empty grid", lrs="")


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
        models["eurobert"], num_labels=3, id2label={0: "entailment", 1: "neutral", 2: "contradiction"})
    model.save_pretrained(finetuned)
    models["tokenizer"].save_pretrained(finetuned)
    _refused(models, data_dir, tmp_path, "label set mismatch", model=finetuned)
