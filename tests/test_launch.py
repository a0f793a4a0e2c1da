"""A real 2-process CPU launch (accelerate, gloo) of the recipe: ranks split the fixed block order, the saved
checkpoint loads."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForMaskedLM

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_two_process_cpu_launch(tmp_path, tmp_path_factory):
    output_dir = tmp_path / "ddp"
    command = [
        sys.executable, "-m", "accelerate.commands.launch", "--config_file", "recipes/accelerate/cpu.yaml",
        "--num_processes", "2", "--main_process_port", "29517", "recipes/pretrain.py",
        "--config", "recipes/configs/debug.yaml", "--output_dir", str(output_dir),
        "--data_cache_dir", str(tmp_path_factory.getbasetemp() / "pretrain-cache"), "--max_docs", "200",
        "--block_size", "64", "--per_device_train_batch_size", "2", "--max_steps", "3", "--switch_step", "1",
        "--intermediate_steps", "2", "--warmup_steps", "1", "--lr_scheduler_kwargs", '{"num_decay_steps": 1}',
        "--report_to", "none", "--log_block_order", "true", "--global_batch_size", "4", "--disable_tqdm", "true",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-4000:]

    # rank r reads micro-batch r of every step: together they read blocks 0..11 once, in order
    ranks = [[json.loads(line) for line in (output_dir / f"block_order-rank{r}.jsonl").read_text().splitlines()] for r in (0, 1)]
    assert [rec["blocks"] for rec in ranks[0]] == [[0, 1], [4, 5], [8, 9]]
    assert [rec["blocks"] for rec in ranks[1]] == [[2, 3], [6, 7], [10, 11]]
    assert [rec["causal"] for rec in ranks[0]] == [rec["causal"] for rec in ranks[1]] == [True, False, False]

    model = AutoModelForMaskedLM.from_pretrained(output_dir / "checkpoint-3", trust_remote_code=True)
    info = json.loads((output_dir / "run_info.json").read_text())
    assert info["steps"] == 3 and info["run_config"]["training_args"]["world_size"] == 2
    assert info["tokens_seen"] == 3 * 4 * 64
    ids = torch.arange(10).unsqueeze(0)
    assert torch.isfinite(model(input_ids=ids).logits).all()
