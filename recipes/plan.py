"""The paper-scale plan: every run by name with steps, tokens, FLOPs and GPU-hours, plus launch scripts.

    python -m recipes.study --preset paper --output study/paper [--gpu H100 --mfu 0.4]

Writes `plan.md` (with the disk space the checkpoints and the data cache take), `plan.csv` and the SLURM launch
folder `launch/` (`recipes.launch`: `submit.sh` submits data preparation, the pretraining runs with their
dependencies and the evaluation grid; `pretrain.sh` runs the pretraining on one machine without SLURM).

Compute model (per optimizer step, global batch B blocks of T tokens, L layers, width d, vocab V):
    FLOPs = 6 * N_body * B*T  +  6 * L * T * d * B*T  (attention scores and values, full T x T)
            + 6 * d * V * (tokens projected by the LM head)
N_body = parameters without the input embedding and the LM head. The LM head projects every token under CLM and
only the masked ones under MLM (this repository's labelled-positions loss). The formula and the GPU peaks live in
`recipes/flops.py`, shared with the trainer's `mfu` log. Shared work is counted once: decay
branches add only their own 2k decay steps to the stable run they branch from. Evaluation: SPEC's grid (6 LRs x
5 seeds) on the 12 paper tasks for the 38 models and the 12 intermediate checkpoints (the data-efficiency figure),
1,000 steps x 32 x 512 tokens per run (fine-tuning FLOPs only, no overhead).
"""

import csv
import io
from pathlib import Path

from modeling_eurobert import load_preset
from recipes import artifacts, launch, manifest
from recipes.flops import BF16_PEAK_FLOPS, training_flops_per_token

GPUS = BF16_PEAK_FLOPS  # dense bf16 peak FLOP/s
PAPER_GPU_HOURS = 110_000  # SPEC: about 110k GPU hours for the whole study
EVAL_TASKS = 12
EVAL_RUNS_PER_TASK = 6 * 5
EVAL_TOKENS_PER_RUN = 1_000 * 32 * 512


def flops_per_token(size: str, projected_share: float) -> float:
    """Training FLOPs per token of one model size; `projected_share` = share of tokens through the LM head."""
    return training_flops_per_token(load_preset(size), manifest.PRESETS["paper"]["block_size"], projected_share)


def run_rows() -> list[dict]:
    """One row per trained run of the paper preset, in dependency order (stable runs before what needs them)."""
    from recipes.study import training_order

    scale = manifest.PRESETS["paper"]
    tokens_per_step = scale["global_batch_size"] * scale["block_size"]
    rows = []
    for recipe in training_order(manifest.model_names()):
        own_steps = manifest.DECAY if recipe.branch_from else recipe.steps
        clm_steps = recipe.switch_step or (own_steps if recipe.objective == "clm" else 0)
        if recipe.branch_from:
            clm_steps = own_steps if recipe.objective == "clm" else 0
        mlm_steps = own_steps - clm_steps
        flops = tokens_per_step * (clm_steps * flops_per_token(recipe.size, 1.0)
                                   + mlm_steps * flops_per_token(recipe.size, recipe.mlm_probability or 0))
        rows.append({"name": recipe.name, "script": recipe.script, "size": recipe.size, "objective": recipe.objective,
                     "steps": own_steps, "tokens": own_steps * tokens_per_step, "flops": flops,
                     "needs": recipe.branch_from or recipe.cpt_base or ""})
    return rows


def eval_flops() -> float:
    return sum(EVAL_TASKS * EVAL_RUNS_PER_TASK * EVAL_TOKENS_PER_RUN * flops_per_token(n.split("-")[0], 0.0)
               for n in evaluated_models())


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


def write_plan(output: Path, gpu: str = "H100", mfu: float = 0.40) -> Path:
    """Write the plan and launch scripts to `output`; print the summary. Returns the plan.md path."""
    if gpu not in GPUS:
        raise ValueError(f"unknown GPU {gpu!r}; choose one of {', '.join(GPUS)}")
    if not 0 < mfu <= 1:
        raise ValueError(f"mfu={mfu} must be in (0, 1]")
    rate = GPUS[gpu] * mfu
    rows = run_rows()
    for row in rows:
        row["gpu_hours"] = row["flops"] / rate / 3600
    pretrain_hours = sum(r["gpu_hours"] for r in rows)
    eval_hours = eval_flops() / rate / 3600
    output.mkdir(parents=True, exist_ok=True)
    table = io.StringIO(newline="")
    writer = csv.DictWriter(table, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    artifacts.write_text_atomic(output / "plan.csv", table.getvalue())
    lines = [f"# Paper-scale plan ({gpu}, {mfu:.0%} MFU, {GPUS[gpu] / 1e12:.0f} TFLOP/s peak bf16)", "",
             "| run | script | steps | tokens (B) | PFLOPs | GPU-hours | needs |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['name']} | {r['script']} | {r['steps']:,} | {r['tokens'] / 1e9:.1f} | {r['flops'] / 1e15:,.0f} "
              f"| {r['gpu_hours']:,.0f} | {r['needs']} |" for r in rows]
    n_eval = len(evaluated_models()) * EVAL_TASKS * EVAL_RUNS_PER_TASK
    lines += ["", f"Pretraining: {len(rows)} runs, {sum(r['tokens'] for r in rows) / 1e12:.2f}T tokens, "
              f"{pretrain_hours:,.0f} GPU-hours.",
              f"Evaluation: {n_eval:,} fine-tuning runs, {eval_hours:,.0f} GPU-hours (compute only).",
              f"Total: {pretrain_hours + eval_hours:,.0f} GPU-hours vs the paper's ~{PAPER_GPU_HOURS:,} "
              f"(its figure includes real utilisation, evaluation overheads, intermediate-checkpoint evaluation "
              f"and failed runs; at {mfu:.0%} MFU this plan is a lower bound)."]
    artifacts.write_text_atomic(output / "plan.md", "\n".join(lines + launch.disk_lines(rows)) + "\n")
    _write_launch_scripts(output / "launch", rows)
    print("\n".join(lines[-3:]))
    print(f"plan: {output / 'plan.md'}; launch scripts: {output / 'launch'}")
    return output / "plan.md"


def _write_launch_scripts(launch_dir: Path, rows: list[dict]) -> None:
    """`recipes.launch`'s SLURM scripts, with the evaluation grid: every (model, task, LR, seed) as one line."""
    tasks = ("sst2", "mnli", "qqp", "conll2003", "ontonotes", "uner", "squad", "squad_v2", "record",
             "msmarco", "nq", "mldr")
    dirs = {m: model_dir(m) for m in evaluated_models()}  # once per model: model_dir reads the whole manifest
    grid = [f"{m}={dirs[m]}\t{t}\t{lr:g}\t{s}" for m in dirs for t in tasks
            for lr in (1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4) for s in range(5)]
    launch.write_launch_scripts(launch_dir, rows, grid, tasks)
