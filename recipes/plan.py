"""The paper-scale plan: every run by name with steps, tokens, FLOPs and GPU-hours, plus launch scripts.

    python -m recipes.study paper --output study/paper [--gpu H100] [--mfu 0.4]

Writes `plan.md` (with the disk space the checkpoints and the data cache take), `plan.csv` and the SLURM launch
folder `launch/` (`recipes.launch`: `submit.sh` submits data preparation, the pretraining runs with their
dependencies and the evaluation grid; `pretrain.sh` runs the pretraining on one machine without SLURM).

The compute and memory models (FLOPs per step, evaluation FLOPs, bytes per GPU) are in docs/cluster.md.
"""

import csv
import io
import math
from pathlib import Path

from core import artifacts, cli, names
from core.paper import PAPER_LRS, PAPER_SEEDS, PAPER_TASKS
from modeling_eurobert import load_architecture
from pretraining.flops import BF16_PEAK_FLOPS, PLAN_MFU, training_flops_per_token
from recipes import launch, manifest

GPUS = BF16_PEAK_FLOPS  # dense bf16 peak FLOP/s
PAPER_GPU_HOURS = 110_000  # the paper: about 110k GPU hours for the whole study
EVAL_TASKS = len(PAPER_TASKS)
# Paper tasks that train on the same pairs (`hub.train_pairs` of their task YAMLs: MS MARCO pairs): one fine-tuning
# per (model, LR, seed) serves all of them. tests/test_grid_models.py checks this against the YAMLs.
SHARED_IR_TRAINING = ("msmarco", "nq", "mldr")
EVAL_FINETUNINGS_PER_LR_SEED = EVAL_TASKS - len(SHARED_IR_TRAINING) + 1
EVAL_RUNS_PER_TASK = len(PAPER_LRS) * len(PAPER_SEEDS)
EVAL_TOKENS_PER_RUN = 1_000 * 32 * 512

# Activation memory per trained token at block 2048 (bytes): one forward + backward of the recipe's model under bf16
# autocast with the gradients already allocated, measured on CPU by bench/bench_real_shapes.py on 2026-12-03
# (docs/benchmarks.md, "The paper's shapes on CPU"). The 1b is not measured (its weights, gradients and AdamW state
# alone, 22.6 GB, outgrow the 24 GB machine): `activation_bytes_per_token` extrapolates it.
ACTIVATION_BYTES_PER_TOKEN = {
    ("210m", "clm"): 2_362_768,
    ("210m", "mlm40"): 1_505_038,
    ("610m", "clm"): 3_936_116,
    ("610m", "mlm40"): 3_078_572,
}
MEMORY_OBJECTIVES = ("clm", "mlm40")
GPU_MEMORY_GB = {"H100": 80, "H200": 141}
FSDP_GPUS = 8
STATE_BYTES_PER_PARAMETER = 16
MEMORY_RESERVE = 0.10  # of each GPU: CUDA context, workspace, fragmentation


def flops_per_token(size: str, projected_share: float) -> float:
    """Training FLOPs per token of one model size; `projected_share` = share of tokens through the LM head."""
    return training_flops_per_token(load_architecture(size), manifest.SCALES["paper"].block_size, projected_share)


def parameter_counts(size: str) -> tuple[int, int, int]:
    """(all parameters, the FSDP root unit's: embeddings, final norm and LM head, one decoder layer's) of a size."""
    total, layers = launch.count_parameters(size), launch.meta_model(size).model.layers
    layer = sum(p.numel() for p in layers[0].parameters())
    return total, total - layer * len(layers), layer


def accelerate_training_bytes(size: str) -> int:
    """What `accelerate estimate-memory` reports as "Training using Adam" in float32 for a size, by its own functions
    on our meta-device model (the command itself looks the name up on the Hub, which a local architecture is not)."""
    from accelerate.commands.estimate import estimate_training_usage
    from accelerate.utils import calculate_maximum_sizes

    return max(estimate_training_usage(calculate_maximum_sizes(launch.meta_model(size))[0], "float32").values())


def activation_bytes_per_token(size: str, objective: str) -> tuple[float, bool]:
    """(bytes per token, measured): measured for 210m and 610m; the 1b extrapolated linearly in layers x hidden
    size through the two measured sizes (the LM head's share, the same at every size, is the intercept)."""
    if (size, objective) in ACTIVATION_BYTES_PER_TOKEN:
        return ACTIVATION_BYTES_PER_TOKEN[size, objective], True
    width = {
        s: load_architecture(s).num_hidden_layers * load_architecture(s).hidden_size for s in ("210m", "610m", size)
    }
    small, large = (ACTIVATION_BYTES_PER_TOKEN[s, objective] for s in ("210m", "610m"))
    slope = (large - small) / (width["610m"] - width["210m"])
    return small + slope * (width[size] - width["210m"]), False


def memory_rows(block_size: int = 2048) -> list[dict]:
    """Per size and objective: the state and activation bytes and the largest micro-batch (blocks per GPU) that fits
    each GPU of `GPU_MEMORY_GB`, without and with FSDP over `FSDP_GPUS` (module docstring)."""
    rows = []
    for size in manifest.SIZES:
        total, root, layer = parameter_counts(size)
        state = STATE_BYTES_PER_PARAMETER * total
        fixed = {"ddp": state, "fsdp": state / FSDP_GPUS + 8 * (root + layer)}
        for objective in MEMORY_OBJECTIVES:
            per_token, measured = activation_bytes_per_token(size, objective)
            row = {
                "size": size,
                "objective": objective,
                "parameters": total,
                "state_bytes": state,
                "accelerate_bytes": accelerate_training_bytes(size),
                "activation_bytes_per_token": per_token,
                "measured": measured,
            }
            for gpu, gb in GPU_MEMORY_GB.items():
                for mode, held in fixed.items():
                    room = gb * 1e9 * (1 - MEMORY_RESERVE) - held
                    row[f"{gpu}_{mode}"] = max(0, math.floor(room / (per_token * block_size)))
            rows.append(row)
    return rows


def memory_lines(rows: list[dict]) -> list[str]:
    """The plan.md table of `memory_rows`."""
    gpus = list(GPU_MEMORY_GB)
    lines = [
        "",
        f"## Memory per GPU: largest micro-batch of 2048-token blocks (bf16 autocast, AdamW; FSDP over "
        f"{FSDP_GPUS} GPUs)",
        "",
        "| size | objective | parameters | weights+grads+AdamW (GB) | accelerate estimate-memory, Adam fp32 (GB) "
        "| activations (MB/token) | "
        + " | ".join(f"{g} {gb} GB, {m}" for g, gb in GPU_MEMORY_GB.items() for m in ("DDP", "FSDP"))
        + " |",
        "|---" * (6 + 2 * len(gpus)) + "|",
    ]
    for r in rows:
        note = "" if r["measured"] else " (extrapolated)"
        lines.append(
            f"| {r['size']} | {r['objective']} | {r['parameters'] / 1e6:,.1f}M | {r['state_bytes'] / 1e9:.1f} "
            f"| {r['accelerate_bytes'] / 1e9:.1f} | {r['activation_bytes_per_token'] / 1e6:.3f}{note} | "
            + " | ".join(str(r[f"{g}_{m}"]) for g in gpus for m in ("ddp", "fsdp"))
            + " |"
        )
    micro = manifest.SCALES["paper"].per_device_train_batch_size
    short = [
        f"{r['size']} {r['objective']} on {g} {m.upper()}"
        for r in rows
        for g in gpus
        for m in ("ddp", "fsdp")
        if r[f"{g}_{m}"] < micro
    ]
    verdict = (
        f"The paper configs' micro-batch of {micro} does not fit: {'; '.join(short)} (lower "
        "`per_device_train_batch_size` and raise `gradient_accumulation_steps` by the same factor: the global "
        "batch stays)."
        if short
        else f"The paper configs' micro-batch of {micro} fits everywhere."
    )
    return lines + [
        "",
        verdict,
        "Activation bytes per token measured on CPU under bf16 autocast "
        "(bench/bench_real_shapes.py; docs/benchmarks.md): a CUDA step's kernels differ, so check the "
        "batch with bench/gpu_check.sh before a long run. 10% of each GPU is left free.",
    ]


def run_rows() -> list[dict]:
    """One row per trained run of the paper scale, in dependency order (stable runs before what needs them)."""
    scale = manifest.SCALES["paper"]
    tokens_per_step = scale.global_batch_size * scale.block_size
    rows = []
    for recipe in manifest.training_order(manifest.model_names()):
        own_steps = manifest.DECAY if recipe.branch_from else recipe.steps
        clm_steps = recipe.switch_step or (own_steps if recipe.objective == "clm" else 0)  # a branch never switches
        mlm_steps = own_steps - clm_steps
        flops = tokens_per_step * (
            clm_steps * flops_per_token(recipe.size, 1.0)
            + mlm_steps * flops_per_token(recipe.size, recipe.mlm_probability or 0)
        )
        rows.append(
            {
                "name": recipe.name,
                "module": recipe.module,
                "size": recipe.size,
                "objective": recipe.objective,
                "steps": own_steps,
                "tokens": own_steps * tokens_per_step,
                "flops": flops,
                "needs": recipe.branch_from or recipe.cpt_base or "",
            }
        )
    return rows


def eval_flops() -> float:
    """Fine-tuning FLOPs of the evaluation grid: one fine-tuning per (model, task, LR, seed), the three retrieval
    tasks sharing one (`SHARED_IR_TRAINING`); scoring is not counted."""
    sizes = [names.parse_name(n).size for n in evaluated_models()]
    per_token = {size: flops_per_token(size, 0.0) for size in set(sizes)}
    return sum(EVAL_FINETUNINGS_PER_LR_SEED * EVAL_RUNS_PER_TASK * EVAL_TOKENS_PER_RUN * per_token[s] for s in sizes)


def evaluation_line(rate: float, eval_runs_per_gpu_hour: float | None = None) -> tuple[float, str]:
    """(GPU-hours, the plan's evaluation line) of the evaluation grid: at `eval_runs_per_gpu_hour` when measured
    (`write_plan`), else compute only at `rate`, the achieved FLOP/s per GPU (peak x MFU)."""
    n_results = len(evaluated_models()) * EVAL_TASKS * EVAL_RUNS_PER_TASK
    n_finetunings = len(evaluated_models()) * EVAL_FINETUNINGS_PER_LR_SEED * EVAL_RUNS_PER_TASK
    if eval_runs_per_gpu_hour is None:
        hours = eval_flops() / rate / 3600
        throughput = (
            f"{hours:,.0f} GPU-hours (compute only; wall-clock fine-tunings per GPU-hour with "
            "`evaluation.run --workers N`: to be measured with bench/bench_grid.py)"
        )
    else:
        hours = n_finetunings / eval_runs_per_gpu_hour
        throughput = f"{hours:,.0f} GPU-hours at the measured {eval_runs_per_gpu_hour:,.1f} fine-tunings per GPU-hour"
    return hours, (
        f"Evaluation: {n_results:,} results from {n_finetunings:,} fine-tunings "
        f"({', '.join(SHARED_IR_TRAINING)} share one per model, LR and seed), {throughput}."
    )


def evaluated_models() -> list[str]:
    """The 38 models and the 12 intermediate checkpoints (the paper's data-efficiency figure evaluates them)."""
    return manifest.model_names() + manifest.intermediate_names()


def model_dir(name: str) -> str:
    """Where the paper's launch scripts leave a model: `out/paper/<name>`; an intermediate checkpoint
    `<run>-<step>` is `out/paper/<run>/intermediate/step-<step>`."""
    recipe = manifest.recipes()[name]
    if recipe.intermediate_of:
        return f"out/paper/{recipe.intermediate_of}/intermediate/step-{recipe.steps}"
    return f"out/paper/{name}"


def write_plan(
    output: Path, gpu: str = "H100", mfu: float | None = None, eval_runs_per_gpu_hour: float | None = None
) -> Path:
    """Write the plan and launch scripts to `output`; print the summary. Returns the plan.md path.

    Args:
        output: the plan folder.
        gpu: a GPU of `pretraining.flops.BF16_PEAK_FLOPS` (dense bf16 peak).
        mfu: model FLOPs utilisation of every run; None: per model size, `pretraining.flops.PLAN_MFU`.
        eval_runs_per_gpu_hour: measured fine-tunings per GPU-hour of the evaluation grid (`bench/bench_grid.py`);
            None: the evaluation line gives the compute-only estimate and says so.
    """
    if gpu not in GPUS:
        raise ValueError(f"unknown GPU {gpu!r}; choose one of {', '.join(GPUS)}")
    if mfu is not None and not 0 < mfu <= 1:
        raise ValueError(f"mfu={mfu} must be in (0, 1]")
    if eval_runs_per_gpu_hour is not None and eval_runs_per_gpu_hour <= 0:
        raise ValueError(f"eval_runs_per_gpu_hour={eval_runs_per_gpu_hour} must be > 0")
    size_mfu = {size: mfu or PLAN_MFU[size] for size in manifest.SIZES}
    rows = run_rows()
    for row in rows:
        row["gpu_hours"] = row["flops"] / (GPUS[gpu] * size_mfu[row["size"]]) / 3600
    rate = GPUS[gpu] * min(size_mfu.values())  # fine-tuning: the smaller models' utilisation, the worse case
    pretrain_hours = sum(r["gpu_hours"] for r in rows)
    eval_hours, eval_line = evaluation_line(rate, eval_runs_per_gpu_hour)
    output.mkdir(parents=True, exist_ok=True)
    table = io.StringIO(newline="")
    writer = csv.DictWriter(table, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    artifacts.write_text_atomic(output / "plan.csv", table.getvalue())
    mfu_text = (
        f"{mfu:.0%} MFU"
        if mfu
        else "MFU "
        + ", ".join(f"{s} {m:.0%}" for s, m in size_mfu.items())
        + " (an H200 probe's, before the throughput work; the 1b unmeasured, at the 610m's: pretraining/flops.py)"
    )
    lines = [
        f"# Paper-scale plan ({gpu}, {mfu_text}, {GPUS[gpu] / 1e12:.0f} TFLOP/s peak bf16)",
        "",
        "| run | module | steps | tokens (B) | PFLOPs | GPU-hours | needs |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['name']} | {r['module']} | {r['steps']:,} | {r['tokens'] / 1e9:.1f} | {r['flops'] / 1e15:,.0f} "
        f"| {r['gpu_hours']:,.0f} | {r['needs']} |"
        for r in rows
    ]
    lines += [
        "",
        f"Pretraining: {len(rows)} runs, {sum(r['tokens'] for r in rows) / 1e12:.2f}T tokens, "
        f"{pretrain_hours:,.0f} GPU-hours.",
        eval_line,
        f"Total: {pretrain_hours + eval_hours:,.0f} GPU-hours vs the paper's ~{PAPER_GPU_HOURS:,} "
        f"(its figure includes real utilisation, evaluation overheads, intermediate-checkpoint evaluation "
        f"and failed runs; this plan counts compute at the MFU above, so it is a lower bound).",
    ]
    plan_lines = lines + launch.disk_lines(rows) + memory_lines(memory_rows())
    artifacts.write_text_atomic(output / "plan.md", "\n".join(plan_lines) + "\n")
    _write_launch_scripts(output / "launch", rows)
    print("\n".join(lines[-3:]))
    print(f"plan: {output / 'plan.md'}; launch scripts: {output / 'launch'}")
    return output / "plan.md"


def _write_launch_scripts(launch_dir: Path, rows: list[dict]) -> None:
    """`recipes.launch`'s SLURM scripts, with the evaluation grid: every (model, task, LR, seed) as one line."""
    dirs = {m: model_dir(m) for m in evaluated_models()}  # once per model: model_dir reads the whole manifest
    grid = [
        f"{m}={dirs[m]}\t{t}\t{lr:g}\t{s}" for m in dirs for t in PAPER_TASKS for lr in PAPER_LRS for s in PAPER_SEEDS
    ]
    launch.write_launch_scripts(launch_dir, rows, grid, PAPER_TASKS)


def main(argv: list[str] | None = None) -> None:
    """`python -m recipes.plan` has no job of its own: it names the command that writes the paper plan."""
    cli.not_a_command(
        "recipes.plan",
        "python -m recipes.study paper --output DIR [--gpu H100] [--mfu 0.4]",
        "writes the paper plan (plan.md, plan.csv, launch/) in DIR",
    )


if __name__ == "__main__":
    main()
