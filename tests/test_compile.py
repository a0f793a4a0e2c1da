"""Speed settings of the pretraining recipe that must not change what is trained: `compile: regional` (decoder
layers compiled in place) and `mlm_fixed_shape` (a static-shape MLM head), on real tiny-architecture runs across a PFS
switch; and the FLOPs per token behind the `mfu` log."""

import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from torch._dynamo.utils import counters
from transformers import AutoModelForMaskedLM

from core import run_folders
from modeling_eurobert import load_architecture
from pretraining import flops, pretrain
from pretraining.checks import check_run_settings
from pretraining.collator import build_collator
from pretraining.trainer import step_flops_per_token
from recipes import plan

DEBUG = "recipes/configs/debug.yaml"
STEPS, SWITCH = 6, 3  # steps 1-3 CLM, 4-6 MLM 40%


def parse(output_dir, cache_dir, *extra):
    argv = [
        "--config",
        DEBUG,
        "--output_dir",
        str(output_dir),
        "--data_cache_dir",
        str(cache_dir),
        "--max_docs",
        "200",
        "--block_size",
        "64",
        "--per_device_train_batch_size",
        "2",
        "--report_to",
        "none",
        "--max_steps",
        str(STEPS),
        "--switch_step",
        str(SWITCH),
        "--intermediate_steps",
        "2",
        "--warmup_steps",
        "1",
        "--logging_steps",
        "1",
        "--disable_tqdm",
        "true",
        "--lr_scheduler_kwargs",
        '{"num_decay_steps": 1, "decay_type": "linear"}',
        *extra,
    ]
    return pretrain.make_parser().parse_args_and_config(argv)


def losses(trainer) -> list[float]:
    return [log["loss"] for log in trainer.state.log_history if "loss" in log]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, one_thread):
    """An eager PFS run with the exact head, the same run as the paper configs run it (regional compile and the
    fixed-shape head, checkpoints every 2 steps, compiles counted), and an eager run with K at the mean mask count."""
    root = tmp_path_factory.mktemp("compile")
    cache_dir = tmp_path_factory.getbasetemp() / "pretrain-cache"
    eager = pretrain.pretrain(*parse(root / "eager", cache_dir))
    torch._dynamo.reset()  # count this run's compiles only
    counters.clear()
    compiled = pretrain.pretrain(
        *parse(
            root / "compiled",
            cache_dir,
            "--compile",
            "regional",
            "--mlm_fixed_shape",
            "true",
            "--save_strategy",
            "steps",
            "--save_steps",
            "2",
        )
    )
    compiles = {"frames": counters["frames"]["ok"], "graph_breaks": sum(counters["graph_break"].values())}
    overflow = pretrain.pretrain(
        *parse(root / "overflow", cache_dir, "--mlm_fixed_shape", "true", "--mlm_fixed_shape_std", "0")
    )
    return {"eager": eager, "compiled": compiled, "overflow": overflow, "compiles": compiles, "cache_dir": cache_dir}


@pytest.mark.slow  # three pretraining runs, one compiled (the `runs` fixture)
def test_regional_compile_gives_the_eager_losses_across_the_pfs_switch(runs):
    eager, compiled = losses(runs["eager"]), losses(runs["compiled"])
    assert len(eager) == len(compiled) == STEPS
    assert compiled == pytest.approx(eager, rel=1e-4)
    layers = load_architecture("tiny").num_hidden_layers
    # one graph per attention pattern, shared by every layer: the switch costs one compile, not one per step
    assert runs["compiles"]["frames"] == 2 and runs["compiles"]["graph_breaks"] == 0
    compiled_layers = [m for m in runs["compiled"].model.modules() if getattr(m, "_compiled_call_impl", None)]
    assert len(compiled_layers) == layers


@pytest.mark.slow  # three pretraining runs, one compiled (the `runs` fixture)
def test_compiled_checkpoints_have_eager_keys_and_reload(runs):
    eager_keys = list(runs["eager"].model.state_dict())
    trained = runs["compiled"].model.state_dict()
    assert list(trained) == eager_keys and not any("_orig_mod" in key for key in trained)
    output_dir = Path(runs["compiled"].args.output_dir)
    for directory in (output_dir, output_dir / "checkpoint-4", output_dir / "intermediate" / "step-2"):
        eager_keys = set(load_file(str(Path(runs["eager"].args.output_dir) / "model.safetensors")))
        assert set(load_file(str(directory / "model.safetensors"))) == eager_keys
    reloaded = AutoModelForMaskedLM.from_pretrained(output_dir, trust_remote_code=True).state_dict()
    assert all(torch.equal(reloaded[key], trained[key].detach()) for key in trained)


@pytest.mark.slow  # three pretraining runs, one compiled (the `runs` fixture)
def test_compiled_run_resumes_from_a_checkpoint_and_finishes(runs, tmp_path):
    """A copy of the compiled run's checkpoint-4, run again with the same settings: it resumes at step 4 and ends
    with the uninterrupted run's weights."""
    source = Path(runs["compiled"].args.output_dir)
    (tmp_path / "resumed").mkdir()
    shutil.copy(source / run_folders.RUN_CONFIG_NAME, tmp_path / "resumed")
    shutil.copytree(source / "checkpoint-4", tmp_path / "resumed" / "checkpoint-4")
    resumed = pretrain.pretrain(
        *parse(
            tmp_path / "resumed",
            runs["cache_dir"],
            "--compile",
            "regional",
            "--mlm_fixed_shape",
            "true",
            "--save_strategy",
            "steps",
            "--save_steps",
            "2",
        )
    )
    assert resumed.state.global_step == STEPS
    assert losses(resumed)[-2:] == pytest.approx(losses(runs["compiled"])[-2:], rel=1e-5)
    expected = load_file(str(source / "model.safetensors"))
    got = load_file(str(tmp_path / "resumed" / "model.safetensors"))
    assert expected.keys() == got.keys()
    for key in expected:
        torch.testing.assert_close(got[key], expected[key], atol=1e-6, rtol=1e-5, msg=key)


@pytest.mark.slow  # three pretraining runs, one compiled (the `runs` fixture)
def test_overflow_batches_take_the_exact_path_and_are_counted(runs):
    """K at the mean mask count: some MLM micro-batches have a row above K. They are computed exactly (the losses
    are the exact head's) and `mlm_overflow_batches` counts them, window by window."""
    trainer = runs["overflow"]
    assert losses(trainer) == pytest.approx(losses(runs["eager"]), rel=1e-5)
    logged = [log["mlm_overflow_batches"] for log in trainer.state.log_history if "loss" in log]
    blocks, per_step = trainer.train_dataset, 2
    expected = [
        0
        if step < SWITCH
        else int(trainer.data_collator([blocks[per_step * step + i] for i in range(per_step)])["mlm_overflow"])
        for step in range(STEPS)
    ]
    assert logged == expected and 0 < sum(logged) < STEPS - SWITCH
    assert "mfu" not in trainer.state.log_history[0]  # CPU: no mfu


@pytest.mark.slow  # three pretraining runs, one compiled (the `runs` fixture)
def test_mfu_flops_follow_the_objective_and_the_plan(runs):
    """The trainer's FLOPs per token are the plan's formula (one function), with the LM head share of the step's
    objective."""
    config = load_architecture("610m")
    assert flops.training_flops_per_token(config, 2048, 0.4) == plan.flops_per_token("610m", 0.4)
    run_args, _ = pretrain.make_parser().parse_args_and_config(["--config", DEBUG])
    collator = build_collator(run_args, runs["eager"].processing_class, blocks_per_step=4)
    per_token = step_flops_per_token(config, 128, collator)
    assert per_token(run_args.switch_step - 1) == flops.training_flops_per_token(config, 128, 1.0)
    assert per_token(run_args.switch_step) == flops.training_flops_per_token(config, 128, run_args.mlm_probability)
    assert flops.bf16_peak_flops("NVIDIA H100 80GB HBM3") == 989e12 and flops.bf16_peak_flops("Tesla T4") is None


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--compile", "full"], "compile='full' is unknown"),
        (["--compile", "regional", "--torch_compile", "true"], "drop torch_compile"),
        (["--mlm_fixed_shape_std", "-1"], "must be >= 0"),
    ],
)
def test_bad_speed_settings_fail_before_writing(tmp_path, extra, message):
    with pytest.raises(ValueError, match=message):
        check_run_settings(*parse(tmp_path / "out", tmp_path / "cache", *extra))
    assert not (tmp_path / "out").exists()
