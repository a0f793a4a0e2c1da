"""Exact resume: a PFS run SIGKILLed twice (once right after the switch) and resumed by re-running the same command
ends with weights bit-identical to an uninterrupted run (CPU, fp32)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from pretraining import pretrain

ROOT = Path(__file__).resolve().parents[1]


def argv(output_dir, cache_dir):
    return [
        "--config",
        "recipes/configs/debug.yaml",
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
        "8",
        "--switch_step",
        "3",
        "--intermediate_steps",
        "2",
        "--warmup_steps",
        "2",
        "--lr_scheduler_kwargs",
        '{"num_decay_steps": 2, "decay_type": "linear"}',
        "--logging_steps",
        "1",
        "--save_strategy",
        "steps",
        "--save_steps",
        "1",
        "--disable_tqdm",
        "true",
    ]


def run_until(output_dir, cache_dir, kill_after_checkpoint: int | None):
    """Run the recipe in a subprocess; SIGKILL it once checkpoint-N is complete (None: let it finish)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "recipes.pretrain", *argv(output_dir, cache_dir)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    marker = Path(output_dir) / f"checkpoint-{kill_after_checkpoint}" / "trainer_state.json"
    deadline = time.time() + 240
    while kill_after_checkpoint is not None and not marker.exists():
        if process.poll() is not None or time.time() > deadline:
            process.kill()
            stderr = process.stderr.read().decode()[-2000:]
            pytest.fail(f"run ended before checkpoint-{kill_after_checkpoint}: {stderr}")
        time.sleep(0.05)
    if kill_after_checkpoint is not None:
        process.send_signal(signal.SIGKILL)
    _, stderr = process.communicate(timeout=240)
    if kill_after_checkpoint is None:
        assert process.returncode == 0, stderr.decode()[-3000:]
    else:
        assert process.returncode == -signal.SIGKILL


@pytest.mark.slow
def test_sigkill_and_resume_is_bit_identical(tmp_path, tmp_path_factory):
    cache_dir = tmp_path_factory.getbasetemp() / "pretrain-cache"
    reference = tmp_path / "reference"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # same kernels as the subprocesses (OMP_NUM_THREADS=1)
    try:
        pretrain.pretrain(*pretrain.make_parser().parse_args_and_config(argv(reference, cache_dir)))
    finally:
        torch.set_num_threads(threads)

    killed = tmp_path / "killed"
    run_until(killed, cache_dir, kill_after_checkpoint=3)  # the last CLM step; the next one is MLM
    assert not (killed / "run_info.json").exists()
    run_until(killed, cache_dir, kill_after_checkpoint=5)
    assert not (killed / "run_info.json").exists()
    run_until(killed, cache_dir, kill_after_checkpoint=None)  # same command: auto-resume from the newest checkpoint

    expected, got = load_file(str(reference / "model.safetensors")), load_file(str(killed / "model.safetensors"))
    assert expected.keys() == got.keys()
    assert all(torch.equal(expected[k], got[k]) for k in expected)
    assert (killed / "intermediate" / "step-2" / "model.safetensors").is_file()


@pytest.mark.slow
def test_a_save_out_of_room_is_one_line_and_leaves_no_complete_checkpoint(tmp_path):
    """`ulimit -f` (RLIMIT_FSIZE) below the optimizer state's size: the first checkpoint's save fails like on a full
    disk; the run ends with one line saying so and what is intact (here: nothing yet), exit 1, no traceback."""
    import resource

    from pretraining.checks import last_complete_checkpoint

    limit = 6_000_000  # above the data cache and the tiny model's weights (4.5 MB), below its optimizer.pt (9 MB)
    result = subprocess.run(
        [sys.executable, "-m", "recipes.pretrain", *argv(tmp_path / "out", tmp_path / "cache")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)),
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: a save ran out of disk space or hit the file size limit"), last
    assert "no checkpoint was complete yet: free space and rerun the same command to resume" in last
    assert (tmp_path / "out" / "checkpoint-1").is_dir() and last_complete_checkpoint(tmp_path / "out") is None
