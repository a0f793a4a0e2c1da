"""LoRA through peft: CPT `--lora` (recipes.cpt) and `--peft lora` fine-tuning (evaluation.run), on tiny models."""

import json
import shutil
from pathlib import Path

import pytest
import torch
from peft import PeftModel
from safetensors.torch import load_file
from transformers import AutoModelForMaskedLM

from core import run_folders
from pretraining import pretrain
from recipes import cpt
from tests.fixtures.file_modes import not_following_umask
from tests.fixtures.tiny_models import build_tiny_eurobert, build_tiny_tokenizer

STEPS = 4


@pytest.fixture(scope="module")
def base(data_dir, tmp_path_factory):
    tokenizer = build_tiny_tokenizer(data_dir, vocab_size=500)
    return build_tiny_eurobert(tmp_path_factory.mktemp("lora") / "base", tokenizer)


def cpt_argv(base, output_dir, cache_dir, *extra):
    return [
        "--config",
        "recipes/configs/debug.yaml",
        "--architecture",
        "null",
        "--model_name_or_path",
        str(base),
        "--switch_step",
        "null",
        "--intermediate_steps",
        "2",
        "--max_steps",
        str(STEPS),
        "--max_docs",
        "50",
        "--block_size",
        "32",
        "--per_device_train_batch_size",
        "2",
        "--warmup_steps",
        "1",
        "--report_to",
        "none",
        "--save_strategy",
        "steps",
        "--save_steps",
        "2",
        "--data_cache_dir",
        str(cache_dir),
        "--lr_scheduler_kwargs",
        '{"num_decay_steps": 1, "decay_type": "linear"}',
        "--learning_rate",
        "1e-2",
        "--lora",
        "true",
        "--lora_rank",
        "4",
        "--output_dir",
        str(output_dir),
        *extra,
    ]


@pytest.fixture(scope="module")
def runs(base, tmp_path_factory):
    cache_dir = tmp_path_factory.getbasetemp() / "pretrain-cache"  # shared with the other recipe tests
    out = tmp_path_factory.mktemp("lora-runs")
    captured = {}
    for name, extra in (("frozen", ()), ("embeddings", ("--lora_train_embeddings", "true"))):
        argv = cpt_argv(base, out / name, cache_dir, *extra)
        trainer = pretrain.pretrain(*cpt.make_parser().parse_args_and_config(argv))
        captured[name] = trainer
    return {"out": out, "cache_dir": cache_dir, **captured}


def changed_keys(before: dict, after: dict) -> set[str]:
    assert before.keys() == after.keys()
    return {key for key in before if not torch.equal(before[key], after[key])}


def test_lora_cpt_changes_only_the_adapted_weights(base, runs):
    """Saved merged: only the targeted projections change (by the merged delta); embeddings and LM head change
    only with `--lora_train_embeddings`. Every saved model loads without peft."""
    before = load_file(str(base / "model.safetensors"))
    projections = {
        key
        for key in before
        if key.split(".")[-2] in {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    }
    embeddings = {key for key in before if "embed_tokens" in key or "lm_head" in key}
    for name, expected in (("frozen", projections), ("embeddings", projections | embeddings)):
        directory = runs["out"] / name
        for saved in (directory, directory / "intermediate" / "step-2"):
            assert not (saved / "adapter_model.safetensors").exists()
            after = load_file(str(saved / "model.safetensors"))
            assert changed_keys(before, after) == expected, (name, saved)
        assert (directory / "checkpoint-4" / "adapter_model.safetensors").is_file()


def test_lora_runs_follow_the_umask(runs):
    """R4: the merged model, its intermediate weights and the adapters of its Trainer checkpoints were 0600."""
    assert (runs["out"] / "frozen" / "checkpoint-2" / "adapter_model.safetensors").is_file()
    assert not_following_umask(runs["out"]) == []


def test_merged_checkpoint_equals_the_peft_model(runs):
    trainer = runs["embeddings"]
    assert isinstance(trainer.model, PeftModel)
    merged = AutoModelForMaskedLM.from_pretrained(trainer.args.output_dir).eval()
    assert not isinstance(merged, PeftModel)
    ids = torch.tensor([[0, 5, 6, 7, 8, 1], [0, 9, 10, 11, 1, 3]])
    with torch.no_grad():
        expected = trainer.model.eval()(input_ids=ids).logits
        got = merged(input_ids=ids).logits
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_killed_lora_run_resumes_exactly(base, runs, tmp_path):
    """The run's checkpoint-2 (adapters, optimizer, scheduler, RNG) copied alone into a new output_dir, as a kill
    after step 2 leaves it: the same command resumes at step 2 and ends with the uninterrupted run's weights."""
    source = runs["out"] / "frozen"
    resumed_dir = tmp_path / "resumed"
    resumed_dir.mkdir()
    shutil.copy(source / run_folders.RUN_CONFIG_NAME, resumed_dir)
    shutil.copytree(source / "checkpoint-2", resumed_dir / "checkpoint-2")
    argv = cpt_argv(base, resumed_dir, runs["cache_dir"])
    resumed = pretrain.pretrain(*cpt.make_parser().parse_args_and_config(argv))
    assert resumed.state.global_step == STEPS
    losses = [log["loss"] for log in resumed.state.log_history if "loss" in log]
    full = [log["loss"] for log in runs["frozen"].state.log_history if "loss" in log]
    assert losses == full[-len(losses) :]
    expected, got = load_file(str(source / "model.safetensors")), load_file(str(resumed_dir / "model.safetensors"))
    diffs = {key: (got[key] - expected[key]).abs().max().item() for key in expected}
    assert all(torch.equal(got[key], expected[key]) for key in expected), {k: v for k, v in diffs.items() if v}


def test_lora_cpt_with_save_strategy_no_writes_no_trainer_checkpoint(base, runs, tmp_path):
    """Issue 46 item 9: `save_strategy: "no"` (cpt-debug.yaml) left a `checkpoint-N` of adapters behind a LoRA run;
    the merged model and its intermediate weights are all it writes."""
    argv = cpt_argv(
        base,
        tmp_path / "out",
        runs["cache_dir"],
        "--save_strategy",
        "no",
        "--max_steps",
        "2",
        "--intermediate_steps",
        "1",
    )
    pretrain.pretrain(*cpt.make_parser().parse_args_and_config(argv))
    out = tmp_path / "out"
    assert not list(out.glob("checkpoint-*"))
    assert (out / "model.safetensors").is_file() and (out / "intermediate" / "step-1").is_dir()


def test_peft_lora_finetuning_runs_and_is_recorded(base, data_dir, tmp_path):
    from evaluation import run

    argv = [
        "--model",
        str(base),
        "--tasks",
        "sst2",
        "--lrs",
        "1e-3",
        "--seeds",
        "0",
        "--max_steps",
        "2",
        "--max_train",
        "16",
        "--max_eval",
        "8",
        "--max_length",
        "32",
        "--batch_size",
        "8",
        "--precision",
        "fp32",
        "--data_dir",
        str(data_dir),
        "--output",
        str(tmp_path / "results"),
    ]
    run.main([*argv, "--peft", "lora", "--lora_rank", "4", "--save_models", "all"])
    path = tmp_path / "results" / "base" / "sst2" / "lr0.001-seed0.json"
    record = json.loads(path.read_text())
    assert record["status"] == "ok"
    protocol = record["identity"]["protocol"]
    assert protocol["peft"] == "lora" and protocol["lora_rank"] == 4
    saved = Path(record.get("model_dir") or next(p.parent for p in (tmp_path / "results").rglob("model.safetensors")))
    assert not (saved / "adapter_model.safetensors").exists()
    with pytest.raises(SystemExit) as error:  # a full fine-tuning grid over the same files: refused, not mixed
        run.main(argv)
    assert error.value.code == 2


def test_lora_finetuning_trains_the_task_head_fully(base):
    from transformers import AutoModelForSequenceClassification

    from core import lora

    model = AutoModelForSequenceClassification.from_pretrained(base, num_labels=3)
    heads = lora.head_modules(model)
    assert heads and all(name != model.base_model_prefix for name in heads)
    wrapped = lora.wrap(model, rank=4, alpha=8, modules_to_save=heads)
    trainable = {name for name, p in wrapped.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in name or "modules_to_save" in name for name in trainable)
    assert any(f"{heads[-1]}.modules_to_save" in name for name in trainable)


def test_a_lora_trainer_checkpoint_is_not_published_as_a_model(runs):
    """S10: checkpoint-N of a LoRA run holds adapters (for resuming), not a loadable model: the Hub export refuses it
    in one line; the run folder (merged weights) is what gets published."""
    from model_cards import push

    checkpoint = runs["out"] / "frozen" / "checkpoint-2"
    assert (checkpoint / "adapter_model.safetensors").is_file()
    with pytest.raises(push.PushError, match="holds LoRA adapters \\(adapter_config.json\\), not a loadable model"):
        push.stage_run(checkpoint, "org/m")
    from model_cards import generate  # R5: nor is a card written for it

    with pytest.raises(ValueError, match="holds LoRA adapters \\(adapter_config.json\\), not a loadable model"):
        generate.build_model_card(checkpoint)
    assert [c.revision for c in push.stage_run(runs["out"] / "frozen", "org/m")] == ["main", "step-2"]
