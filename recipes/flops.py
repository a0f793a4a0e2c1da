"""Training FLOPs per token and the bf16 peaks MFU divides by: one formula for the paper plan (`recipes/plan.py`)
and the trainer's `mfu` log (`recipes/training.py`).

    FLOPs per token = 6 * (N_body + L * T * d) + 6 * d * V * s

N_body = parameters without the input embedding and the LM head (the embedding is a lookup, no matmul), L layers,
T the block size, d the hidden size, V the vocabulary and s the share of tokens the LM head projects: 1 for CLM,
the masking ratio p for MLM (the labelled-positions head; padding of the fixed-shape head is not useful work and
is not counted). The attention term 6 * L * T * d counts the T x T score and value products at half of PaLM's
12 * L * T * d (which `bench/bench_model.py` uses); it is kept so the plan's published figures do not move.

MFU = achieved FLOP/s per device / the device's dense bf16 spec peak (`BF16_PEAK_FLOPS`: H100 and H200 SXM
989 TFLOP/s, as in the plan). `bench/bench_model.py` divides by a bf16 matmul peak it measures instead (about
780 TFLOP/s on an H200), so its utilisation reads higher: MFU(measured peak) = MFU(spec) * 989 / 780, about 1.27x.
"""

import copy

import torch

from modeling_eurobert import EuroBertModel

BF16_PEAK_FLOPS = {"H100": 989e12, "A100": 312e12, "H200": 989e12, "MI250X": 383e12}  # dense bf16 spec, SXM parts


def training_flops_per_token(config, block_size: int, projected_share: float) -> float:
    """Forward + backward FLOPs per trained token (module docstring formula).

    Args:
        config: the model's `EuroBertClmMlmConfig`.
        block_size: tokens per packed block (the attention span T).
        projected_share: share of tokens the LM head projects (CLM 1.0, MLM the masking ratio).
    """
    with torch.device("meta"):  # count parameters without allocating them
        body = sum(p.numel() for p in EuroBertModel(copy.deepcopy(config)).parameters())
    body -= config.vocab_size * config.hidden_size  # the input embedding does no matmul
    attention = config.num_hidden_layers * block_size * config.hidden_size
    return 6 * (body + attention) + 6 * config.hidden_size * config.vocab_size * projected_share


def bf16_peak_flops(device_name: str) -> float | None:
    """The dense bf16 spec peak of a device named like `torch.cuda.get_device_name()` ("NVIDIA H100 80GB HBM3"),
    or None for a device missing from `BF16_PEAK_FLOPS`."""
    return next((peak for name, peak in BF16_PEAK_FLOPS.items() if name in device_name), None)
