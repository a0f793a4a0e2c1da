"""The study's 38 trained models (+ 12 intermediate checkpoints) as recipes, at the paper scale and at toy scales.

Each name follows the released model-card grammar (`core.names`): `<size>-<objective>[ratio]-<steps>`, two-phase
`<size>-clm-<k1>-mlm40-<total>`, CPT `<size>-<base>-dec<steps>-mlm40-<total>`, intermediate `<name>-<paper step>`.
`recipes(scale)` returns every model's `Recipe`; `run_config(recipe, scale)` the YAML settings that reproduce it.

Scales: `SCALES` below (the studies run at them: docs/studies.md). The choices the paper leaves open (decay branches,
batch, CPT warmup and decay, weight-decay scope) are settings of the YAML, each in docs/protocol.md's table. Paper
configs also set GPU speed settings that leave the losses unchanged (`compile: regional`, `mlm_fixed_shape`).

Write the YAML files: `python -m recipes.manifest --write_configs paper` (-> recipes/configs/paper/, committed);
other scales to a chosen folder: `--write_configs mini,toy --output out/configs` (-> out/configs/<scale>/; the study
writes its own into `<output>/configs/`).
"""

import argparse
import dataclasses
from dataclasses import dataclass
from pathlib import Path

import yaml

from core import cli, names
from core.paper import PAPER_BLOCK, PAPER_CHECKPOINTS, PAPER_GLOBAL_BATCH, PAPER_PFS_SWITCHES

SIZES = ("210m", "610m", "1b")
RATIOS = (20, 30, 40, 50)
TOTAL, DECAY, WARMUP = 42_000, 2_000, 2_000
DECAY_ONLY_SWITCH = 40_000  # 610m-clm-40k-mlm{p}-42k: CLM, then MLM during the decay only
CPT_EXTRA = (2_000, 12_000, 22_000)
# FineWeb-Edu config of the paper scale: the 42k runs read 99B tokens and the longest CPT 151B (42k + 22k steps x
# 2.36M); a Llama-3 tokenisation of sample-100BT (100B GPT-2 tokens) falls short, sample-350BT does not.
PAPER_CORPUS_CONFIG = "sample-350BT"
CPT_WARMUP_SHARE = 0.01  # Optimus's pct_start default, which its resume path (CPT) uses
CONFIGS_DIR = Path(__file__).parent / "configs"
COMMITTED_SCALES = ("paper",)  # recipes/configs/<scale>/ (tests keep them equal to what write_configs writes)


@dataclass(frozen=True)
class Scale:
    """How the manifest's recipes are sized at one scale: paper steps divided by `step_divisor`; toy scales use the
    tiny model and the bundle corpus."""

    step_divisor: int
    block_size: int
    per_device_train_batch_size: int
    model: str | None = "tiny"  # the architecture of every recipe; None: each recipe's own size (the paper)
    gradient_accumulation_steps: int = 1
    global_batch_size: int | None = None
    max_docs: int | None = None  # the first documents of the corpus only
    vocab_size: int | None = None  # the toy BPE's vocabulary (None: the study's default)
    corpus_source: str = "bundle"
    epochs: int = 1  # more tokens than the offline bundle holds: documented repetition
    bf16: bool = False


# the horizon studies (docs/horizon-study): to 97 tokens per parameter (21.5M tokens) without repeating data, from the
# bundle corpus and its 3x larger companion (about 58M tokens with the 2k vocabulary)
_HORIZON = Scale(
    step_divisor=4, block_size=128, per_device_train_batch_size=16, vocab_size=2048, corpus_source="bundle,bundle_more"
)
SCALES = {
    "paper": Scale(
        step_divisor=1,
        model=None,
        block_size=PAPER_BLOCK,
        per_device_train_batch_size=8,
        gradient_accumulation_steps=18,
        global_batch_size=PAPER_GLOBAL_BATCH,
        bf16=True,
    ),
    "toy": Scale(step_divisor=100, block_size=128, per_device_train_batch_size=16, max_docs=6000),
    "smoke": Scale(step_divisor=200, block_size=64, per_device_train_batch_size=8, max_docs=2000),
    # the mini study (docs/mini-study): the smallest scale where the paper's comparisons can show on 2 CPU cores
    # (the tiny architecture: docs/mini-study/PILOT.md shows a 4-layer variant cost 1.6x per fine-tuning run)
    "mini": Scale(step_divisor=40, block_size=128, per_device_train_batch_size=16),
    # the mini study on one GPU (about 10 minutes on an H100 by estimate): a bigger model, 4 epochs of the bundle
    "mini-gpu": Scale(
        step_divisor=10, model="small", block_size=256, per_device_train_batch_size=32, epochs=4, bf16=True
    ),
    "horizon-replicated": _HORIZON,
    # 14 blocks a step instead of 16, so paper step 5k (24.6 tokens per parameter without embeddings) is a third
    # checkpoint before SC's crossover interval under both conventions; 40k and the final (81, 85 counted) past it
    "horizon-tested": dataclasses.replace(_HORIZON, per_device_train_batch_size=14),
}


@dataclass(frozen=True)
class Recipe:
    """How one released model is trained, in paper-scale steps (`run_config` divides them for a toy scale)."""

    name: str
    size: str  # 210m, 610m, 1b
    objective: str  # "clm" or "mlm" (for PFS runs: the objective after the switch)
    mlm_probability: float | None  # masking ratio (None for CLM)
    steps: int  # optimizer steps of the run (for CPT: the extra steps only); an intermediate checkpoint's step
    switch_step: int | None = None  # PFS switch step
    branch_from: str | None = None  # the stable run this run is a decay branch of (12k/22k budgets)
    decay_branches: tuple[int, ...] = ()  # the budgets branching off this stable run
    cpt_base: str | None = None  # the decayed run CPT starts from
    intermediate_of: str | None = None  # for an intermediate checkpoint: the run that saves it

    @property
    def module(self) -> str:
        """The entry point that trains it: `accelerate launch -m <module> --config <yaml>`."""
        return "recipes.cpt" if self.cpt_base else "recipes.pretrain"


def _stable_name(size: str, objective: str) -> str:
    return names.compose(size, objective, TOTAL)


def recipe_of(name: str) -> Recipe:
    """Recipe of a released model name (paper scale). Raises ValueError on a name outside the grammar or the
    study's sizes (the grammar itself is `core.names`)."""
    p = names.parse_name(name)
    if p.size not in SIZES:
        raise ValueError(f"{name!r}: size {p.size} is not one of the study's {SIZES}")
    size, ratio = p.size, (p.ratio / 100 if p.ratio else None)
    if p.paper_step is not None:  # intermediate checkpoint of a 42k run
        parent = recipe_of(p.run_name)
        return Recipe(name, size, parent.objective, parent.mlm_probability, p.paper_step, intermediate_of=parent.name)
    if p.kind == "cpt":
        extra = p.total_steps - p.base_steps
        return Recipe(name, size, "mlm", ratio, extra, cpt_base=_stable_name(size, p.base))
    if p.kind == "pfs":
        return Recipe(name, size, "mlm", ratio, p.total_steps, switch_step=p.switch_step)
    steps = p.total_steps
    branch_from = _stable_name(size, p.objective_label) if steps < TOTAL else None
    return Recipe(name, size, p.objective, ratio, steps, branch_from=branch_from)


def model_names() -> list[str]:
    """The 38 released names, block by block."""
    out = [_stable_name(s, o) for s in SIZES for o in ("clm", *(f"mlm{r}" for r in RATIOS))]
    out += [names.compose("610m", o, steps) for o in ("clm", "mlm40") for steps in (12_000, 22_000)]
    out += [names.compose("610m", "mlm40", b, switch_step=k) for b, ks in PAPER_PFS_SWITCHES.items() for k in ks]
    out += [names.compose("610m", f"mlm{r}", TOTAL, switch_step=DECAY_ONLY_SWITCH) for r in RATIOS]
    out += [
        names.compose("610m", "mlm40", TOTAL + e, base=base, base_steps=TOTAL)
        for base in ("clm", "mlm40")
        for e in CPT_EXTRA
    ]
    return out


def intermediate_names() -> list[str]:
    return [names.compose("610m", o, TOTAL, paper_step=s) for o in ("clm", "mlm40") for s in PAPER_CHECKPOINTS]


def recipes() -> dict[str, Recipe]:
    """Every model (38 + 12 intermediate) at paper scale; stable 42k runs list the budgets that branch off them."""
    table = {name: recipe_of(name) for name in model_names() + intermediate_names()}
    for recipe in list(table.values()):
        if recipe.branch_from:
            stable = table[recipe.branch_from]
            table[stable.name] = dataclasses.replace(
                stable, decay_branches=tuple(sorted({*stable.decay_branches, recipe.steps}))
            )
    return table


def training_order(names) -> list[Recipe]:
    """The recipes to train for `names`, prerequisites first (stable runs before their decay branches, CPT bases
    before CPT runs). Intermediate checkpoints are saved by their parent run and are not trained alone."""
    table, order = recipes(), []

    def visit(name):
        recipe = table[name]
        for needed in (recipe.branch_from, recipe.cpt_base, recipe.intermediate_of):
            if needed:
                visit(needed)
        if not recipe.intermediate_of and recipe not in order:
            order.append(recipe)

    for name in names:
        if name not in table:
            raise ValueError(f"{name!r} is not one of the study's models; see `python -m recipes.manifest --list`")
        visit(name)
    return order


def run_config(recipe: Recipe, scale: str) -> dict:
    """YAML settings (run settings + TrainingArguments) reproducing `recipe` at `scale`; ValueError for an unknown
    scale or an intermediate checkpoint (saved by its parent run, not trained alone)."""
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; choose one of {', '.join(SCALES)}")
    if recipe.intermediate_of:
        raise ValueError(f"{recipe.name} is saved by {recipe.intermediate_of} (intermediate_steps), not trained alone")
    p = SCALES[scale]
    div, out = p.step_divisor, f"out/{scale}"
    config = {"architecture": p.model or recipe.size, "block_size": p.block_size, "objective": recipe.objective}
    if scale == "paper":
        config.update(
            tokenizer_name_or_path="EuroBERT/EuroBERT-610m",
            corpus_source="HuggingFaceFW/fineweb-edu",
            corpus_name=PAPER_CORPUS_CONFIG,
            global_batch_size=p.global_batch_size,
            num_proc=16,
        )
        config["compile"] = "regional"  # GPU speed only (same losses): compiled decoder layers ...
        if recipe.objective == "mlm":
            config["mlm_fixed_shape"] = True  # ... and a static-shape MLM head (no host sync)
    else:
        config.update(corpus_source=p.corpus_source)
        if p.max_docs:
            config["max_docs"] = p.max_docs
        if p.epochs > 1:
            config["epochs"] = p.epochs
    if recipe.mlm_probability is not None:
        config["mlm_probability"] = recipe.mlm_probability
    if recipe.switch_step:
        config["switch_step"] = recipe.switch_step // div
    if recipe.decay_branches:
        config["decay_branches"] = [b // div for b in recipe.decay_branches]
    if recipe.branch_from:
        config["branch_from"] = f"{out}/{recipe.branch_from}"
    if recipe.name in {i.intermediate_of for i in recipes().values()}:
        config["intermediate_steps"] = [s // div for s in PAPER_CHECKPOINTS]
    warmup, decay = WARMUP // div, DECAY // div
    if recipe.cpt_base:  # the original's resume path: the base's AdamW state kept, a 1% warmup (pct_start 0.01)
        del config["architecture"]
        config.pop("tokenizer_name_or_path", None)  # the base model's own tokenizer
        config.update(cpt=True, model_name_or_path=f"{out}/{recipe.cpt_base}", keep_optimizer_state=True)
        warmup = max(1, round(CPT_WARMUP_SHARE * recipe.steps / div))
        decay = min(DECAY, recipe.steps - round(CPT_WARMUP_SHARE * recipe.steps)) // div
    config["weight_decay_scope"] = "all"  # the original AdamW decays every parameter (one group)
    if div > 1:
        config["step_divisor"] = div  # intermediate checkpoints keep the paper's names (<run>-<paper step>)
    config["scale"] = scale
    config.update(_training_args(recipe, p, div, warmup, decay, f"{out}/{recipe.name}"))
    return config


def _training_args(recipe: Recipe, p: Scale, div: int, warmup: int, decay: int, output_dir: str) -> dict:
    """The original code's optimiser: AdamW (0.9, 0.95), eps 1e-5, wd 0.1, clip 1.0, WSD peak 5e-4, linear decay,
    bf16."""
    paper = p.step_divisor == 1
    return {
        "output_dir": output_dir,
        "run_name": recipe.name,
        "max_steps": recipe.steps // div,
        "per_device_train_batch_size": p.per_device_train_batch_size,
        "gradient_accumulation_steps": p.gradient_accumulation_steps,
        "learning_rate": 5.0e-4,
        "warmup_steps": warmup,
        "lr_scheduler_type": "warmup_stable_decay",
        "lr_scheduler_kwargs": {"num_decay_steps": decay, "decay_type": "linear", "min_lr_ratio": 0.0},
        "optim": "adamw_torch",
        "adam_beta1": 0.9,
        "adam_beta2": 0.95,
        "adam_epsilon": 1.0e-5,
        "weight_decay": 0.1,
        "max_grad_norm": 1.0,
        "bf16": p.bf16,
        "seed": 0,
        "data_seed": 0,
        "train_sampling_strategy": "sequential",
        "remove_unused_columns": False,
        "save_strategy": "steps",
        "save_steps": 1000 // div if paper else 50,
        "logging_steps": 10 if paper else 5,
        "report_to": "tensorboard",
        "dataloader_num_workers": 4 if paper else 0,
        "ddp_find_unused_parameters": False,  # every parameter takes part in every step (DDP warns otherwise)
        # the barrier where the other ranks wait while the main one loads (or, without `recipes.prepare_data`
        # first, tokenizes and packs) the corpus: 2 h instead of torch's 30 min
        **({"ddp_timeout": 7200} if paper else {}),
    }


def write_configs(scale: str, directory: Path = CONFIGS_DIR) -> list[Path]:
    """Write one YAML per trained model of `scale` to `<directory>/<scale>/<name>.yaml`."""
    written = []
    (directory / scale).mkdir(parents=True, exist_ok=True)
    for recipe in recipes().values():
        if recipe.intermediate_of:
            continue
        path = directory / scale / f"{recipe.name}.yaml"
        header = (
            f"# {recipe.name} ({scale} scale), generated by `python -m recipes.manifest --write_configs {scale}`.\n"
        )
        header += f"#   accelerate launch -m {recipe.module} --config <this file>\n"
        if recipe.branch_from or recipe.cpt_base:
            header += f"# Needs {recipe.branch_from or recipe.cpt_base} trained first.\n"
        path.write_text(header + yaml.safe_dump(run_config(recipe, scale), sort_keys=False))
        written.append(path)
    return written


def listing(table) -> str:
    """`--list`: a count line, then one aligned row per recipe (name, size, objective, steps, how it is trained)."""
    rows = list(table)
    intermediate = sum(r.intermediate_of is not None for r in rows)
    lines = [
        f"{len(rows) - intermediate} models + {intermediate} intermediate checkpoints = {len(rows)} on the Hub",
        f"{'name':<32} {'size':<5} {'objective':<10} {'steps':>6}  how",
    ]
    for r in rows:
        objective = r.objective + (f"{round(r.mlm_probability * 100)}" if r.objective == "mlm" else "")
        how = "; ".join(
            filter(
                None,
                (
                    r.switch_step and f"CLM until {r.switch_step}",
                    r.branch_from and f"decay branch of {r.branch_from}",
                    r.decay_branches and f"branches at {', '.join(map(str, r.decay_branches))}",
                    r.cpt_base and f"CPT from {r.cpt_base}",
                    r.intermediate_of and f"saved by {r.intermediate_of}",
                ),
            )
        )
        lines.append(f"{r.name:<32} {r.size:<5} {objective:<10} {r.steps:>6}  {how}".rstrip())
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--write_configs",
        default="",
        help=f"comma-separated scales to write YAML configs for (committed: {','.join(COMMITTED_SCALES)})",
    )
    parser.add_argument(
        "--output",
        type=Path,
        help="folder the configs go to, one subfolder per scale (default, for the committed scales "
        "only: recipes/configs)",
    )
    parser.add_argument(
        "--list", action="store_true", help="print the 38 models and 12 intermediate checkpoints, one row each"
    )
    args = parser.parse_args(argv)
    with cli.bad_input_exits():
        scales = cli.split_list(args.write_configs)
        unknown = [scale for scale in scales if scale not in SCALES]
        if unknown:
            raise ValueError(f"unknown scale(s) {', '.join(unknown)}; choose from {', '.join(SCALES)}")
        uncommitted = [scale for scale in scales if scale not in COMMITTED_SCALES]
        if uncommitted and args.output is None:
            raise ValueError(
                f"the {', '.join(uncommitted)} configs are not kept in recipes/configs: pass --output "
                "<folder> to write them there"
            )
        if args.output is not None and args.output.exists() and not args.output.is_dir():
            raise ValueError(f"--output {args.output} is a file; pass a folder")
    output = args.output or CONFIGS_DIR
    for scale_name in scales:
        print(f"{scale_name}: {len(write_configs(scale_name, output))} configs in {output / scale_name}")
    if args.list:
        print(listing(recipes().values()))


if __name__ == "__main__":
    main()
