"""Golden losses: the debug recipe's per-step loss and gradient norm on CPU in fp32 (tests/golden/debug_recipe.json).

A change to the training numerics (masking, label shift, loss normalisation, initialisation, data order, optimiser)
moves these by far more than the tolerance; a refactor that keeps the numerics reproduces them to the last bit on
this machine type. When a change is meant to alter them, regenerate the file and say why in the commit:

    GOLDEN_UPDATE=1 python -m pytest tests/test_golden_loss.py
"""

import json
import os
from pathlib import Path

import pytest
import torch
import transformers

from pretraining import pretrain

GOLDEN = Path(__file__).parent / "golden" / "debug_recipe.json"
DEBUG = str(Path(__file__).resolve().parents[1] / "recipes" / "configs" / "debug.yaml")


@pytest.mark.slow
def test_debug_recipe_reproduces_the_golden_losses(tmp_path):
    argv = [
        "--config",
        DEBUG,
        "--output_dir",
        str(tmp_path / "out"),
        "--data_cache_dir",
        str(tmp_path / "cache"),
        "--logging_steps",
        "1",
        "--report_to",
        "none",
    ]
    trainer = pretrain.pretrain(*pretrain.make_parser().parse_args_and_config(argv))
    steps = [
        {"step": h["step"], "loss": h["loss"], "grad_norm": h["grad_norm"]}
        for h in trainer.state.log_history
        if "loss" in h
    ]
    golden = json.loads(GOLDEN.read_text())
    if os.environ.get("GOLDEN_UPDATE"):
        golden.update(steps=steps, recorded_with={"torch": torch.__version__, "transformers": transformers.__version__})
        GOLDEN.write_text(json.dumps(golden, indent=1) + "\n")
        pytest.skip(f"rewrote {GOLDEN}")
    assert [s["step"] for s in steps] == [s["step"] for s in golden["steps"]]
    for got, want in zip(steps, golden["steps"]):
        assert got["loss"] == pytest.approx(want["loss"], rel=1e-5), f"step {got['step']}: loss {got} vs {want}"
        assert got["grad_norm"] == pytest.approx(want["grad_norm"], rel=1e-4), f"step {got['step']}: {got} vs {want}"
