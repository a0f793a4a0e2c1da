"""Training FLOPs per token, the bf16 peaks MFU divides by, and the MFU measured so far: one definition for the
paper plan (`recipes/plan.py`), the trainer's `mfu` log (`pretraining/trainer.py`) and `bench/bench_model.py`.

    FLOPs per token = 6 * N_body + 12 * L * T * d + 6 * d * V * s

N_body = parameters without the input embedding (a lookup, no matmul) and the LM head, L layers, T the block size, d
the hidden size, V the vocabulary and s the share of tokens the LM head projects: 1 for CLM, the masking ratio for
MLM (the fixed-shape head's padding is not counted). 12 * L * T * d: attention scores and values (PaLM's count).
MFU = achieved FLOP/s per device / the device's dense bf16 spec peak (`BF16_PEAK_FLOPS`); the share of a measured
bf16 matmul peak (about 780 TFLOP/s on an H200) that `bench/bench_model.py` prints is about 1.27 x MFU there.
"""

import copy

import torch

from modeling_eurobert import EuroBertClmMlmModel

BF16_PEAK_FLOPS = {"H100": 989e12, "A100": 312e12, "H200": 989e12, "MI250X": 383e12}  # dense bf16 spec, SXM parts


def training_flops_per_token(config, block_size: int, projected_share: float) -> float:
    """Forward + backward FLOPs per trained token (module docstring) of an `EuroBertClmMlmConfig` at `block_size`
    (T), the LM head projecting `projected_share` of the tokens (s)."""
    with torch.device("meta"):  # count parameters without allocating them
        body = sum(p.numel() for p in EuroBertClmMlmModel(copy.deepcopy(config)).parameters())
    body -= config.vocab_size * config.hidden_size  # the input embedding does no matmul
    attention = 12 * config.num_hidden_layers * block_size * config.hidden_size
    return 6 * body + attention + 6 * config.hidden_size * config.vocab_size * projected_share


def bf16_peak_flops(device_name: str) -> float | None:
    """The dense bf16 spec peak of a device named like `torch.cuda.get_device_name()` ("NVIDIA H100 80GB HBM3"),
    or None for a device missing from `BF16_PEAK_FLOPS`."""
    return next((peak for name, peak in BF16_PEAK_FLOPS.items() if name in device_name), None)


# MFU (spec peak) of `recipes/pretrain.py`-shaped training measured on one H200 (torch 2.11 + CUDA 13, bf16, sdpa,
# fused AdamW, seq 2048, MLM 40%, every decoder layer compiled, micro-batch 16): 46.8% (210m) and 57.7% (610m) of
# the matmul peak measured in the same process (about 780 TFLOP/s), times 780 / 989; before regional compilation, the
# fixed-shape head and the `mfu` log.
MEASURED_PEAK_H200 = 780e12
MEASURED_MFU = {
    "210m": 0.468 * MEASURED_PEAK_H200 / BF16_PEAK_FLOPS["H200"],
    "610m": 0.577 * MEASURED_PEAK_H200 / BF16_PEAK_FLOPS["H200"],
}
# The paper plan's default MFU per size (`--mfu` overrides it): the measured figures, and for the unmeasured 1b an
# assumption, the 610m figure.
PLAN_MFU = {**MEASURED_MFU, "1b": MEASURED_MFU["610m"]}
