"""The shipped FSDP launch config (`recipes/accelerate/fsdp.yaml`).

accelerate 1.15 enables FSDP on accelerators only: on a CPU its state is MULTI_CPU and the FSDP plugin is dropped,
so `accelerate launch --config_file fsdp.yaml` would quietly train with DDP (torch's own `fully_shard` does run
on CPU with gloo; accelerate does not route to it). So on the CPU: the launcher accepts the config and hands the
FSDP settings to the process, they name a layer class of our model, and `recipes.pretrain` refuses to start
instead of training without FSDP. On a GPU: a real FSDP run (2 processes when 2 GPUs exist, else 1, which still
takes the sharded save/load path) with save, resume and loading the result like any other checkpoint.
"""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForMaskedLM

from pretraining import pretrain
from pretraining.checks import check_run_settings

ROOT = Path(__file__).resolve().parents[1]
CONFIG = "recipes/accelerate/fsdp.yaml"

PROBE = """
import json, os
from accelerate.utils import FullyShardedDataParallelPlugin
from modeling_eurobert import EuroBertClmMlmForMaskedLM, load_architecture

plugin = FullyShardedDataParallelPlugin()  # built from the FSDP_* variables `accelerate launch` set
layers = {type(m).__name__ for m in EuroBertClmMlmForMaskedLM(load_architecture("tiny")).modules()}
print(json.dumps({"use_fsdp": os.environ.get("ACCELERATE_USE_FSDP"), "version": plugin.fsdp_version,
                  "state_dict_type": plugin.state_dict_type.name, "wrap": plugin.transformer_cls_names_to_wrap,
                  "wrap_found": all(name in layers for name in plugin.transformer_cls_names_to_wrap),
                  "mixed_precision": os.environ.get("ACCELERATE_MIXED_PRECISION")}))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_launcher_accepts_the_fsdp_config(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-m", "accelerate.commands.launch", "--config_file", CONFIG,
                             "--num_processes", "1", "--main_process_ip", "127.0.0.1",
                             "--main_process_port", str(free_port()), str(probe)],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    settings = json.loads(result.stdout.strip().splitlines()[-1])
    assert settings == {"use_fsdp": "true", "version": 2, "state_dict_type": "FULL_STATE_DICT",
                        "wrap": ["EuroBertClmMlmDecoderLayer"], "wrap_found": True, "mixed_precision": "bf16"}


def test_pretrain_refuses_fsdp_on_the_cpu(monkeypatch):
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")  # what `accelerate launch --config_file fsdp.yaml` sets
    run_args, training_args = pretrain.make_parser().parse_args_and_config(["--config", "recipes/configs/debug.yaml"])
    with pytest.raises(ValueError, match="asks for FSDP, which accelerate runs on GPUs only"):
        check_run_settings(run_args, training_args)


RUN = ["--config", "recipes/configs/debug.yaml", "--use_cpu", "false", "--max_docs", "200", "--block_size", "64",
       "--max_steps", "4", "--switch_step", "2", "--intermediate_steps", "2", "--warmup_steps", "1",
       "--lr_scheduler_kwargs", '{"num_decay_steps": 1}', "--report_to", "none", "--disable_tqdm", "true",
       "--save_strategy", "steps", "--save_steps", "1", "--global_batch_size", "4"]


@pytest.mark.slow
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="accelerate runs FSDP on GPUs only (device check)")
def test_fsdp_trains_saves_resumes_and_loads(tmp_path):
    processes = min(2, torch.cuda.device_count())

    def launch(output_dir: Path, *extra: str) -> None:
        command = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", CONFIG,
                   "--num_processes", str(processes), "--main_process_ip", "127.0.0.1",
                   "--main_process_port", str(free_port()),
                   "--mixed_precision", "no", "-m", "recipes.pretrain", *RUN, "--output_dir", str(output_dir),
                   "--data_cache_dir", str(tmp_path / "cache"), "--per_device_train_batch_size", str(4 // processes),
                   *extra]
        result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600,
                                env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert result.returncode == 0, result.stderr[-4000:]

    reference, resumed = tmp_path / "reference", tmp_path / "resumed"
    launch(reference)
    checkpoint = reference / "checkpoint-2"
    assert (checkpoint / "pytorch_model_fsdp.bin").is_file() and (checkpoint / "optimizer.bin").is_file()
    launch(resumed, "--resume_from_checkpoint", str(checkpoint))

    expected, got = load_file(str(reference / "model.safetensors")), load_file(str(resumed / "model.safetensors"))
    assert expected.keys() == got.keys()
    for key in expected:  # GPU kernels need not be bitwise deterministic
        torch.testing.assert_close(got[key], expected[key], rtol=1e-4, atol=1e-5)
    ids = torch.arange(10).unsqueeze(0)
    for directory in (reference, checkpoint, reference / "intermediate" / "step-2"):  # like any other checkpoint
        model = AutoModelForMaskedLM.from_pretrained(directory, trust_remote_code=True)
        saved = load_file(str(directory / "model.safetensors"))
        assert all(torch.equal(saved[k], v) for k, v in model.state_dict().items() if k in saved)
        assert torch.isfinite(model(input_ids=ids).logits).all()
    info = json.loads((reference / "run_info.json").read_text())
    assert info["steps"] == 4 and info["run_config"]["training_args"]["world_size"] == processes
