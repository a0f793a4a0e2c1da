"""Download and prepare the study's data once, before the jobs that read it (the paper launch's first SLURM job).

Pretraining: the tokenizer and the corpus are downloaded, tokenized and packed into the cache a run reads
(`data_cache_dir`), and the blocks are checked to cover `max_steps` steps of the config's global batch:
    python -m recipes.prepare_data pretraining --config recipes/configs/paper/210m-clm-42k.yaml --max_steps 64000
Evaluation: every task's datasets are downloaded into the `datasets` cache:
    python -m recipes.prepare_data evaluation --tasks sst2,mnli,qqp,conll2003 --source hub

Afterwards the jobs run with `HF_HUB_OFFLINE=1` and never call the Hub; preparing twice reuses the caches. Every paper
run reads the same pretraining data (one corpus, tokenizer, block size and block order): pass the config of a run from
scratch, with `max_steps` the furthest step any run reads (a CPT run continues after its base's blocks).
"""

import argparse
import sys

from core import cli
from pretraining.preflight import check_command_line


def prepare_pretraining(argv: list[str]) -> dict:
    """Build the packed blocks of a run's config (`--config FILE.yaml` plus overrides, as `recipes/pretrain.py`):
    {"blocks": packed blocks, "steps": steps they cover at the global batch, **data identity}. ValueError or
    FileNotFoundError for bad settings, a run that continues other weights, or too few blocks."""
    from pretraining import pretrain
    from pretraining.checks import check_data_settings, check_sources
    from pretraining.inputs import select_blocks, training_blocks
    from pretraining.provenance import data_identity
    from pretraining.settings import global_batch

    # data work runs on the CPU whatever the run's precision (a bf16 config would refuse a node without a GPU)
    cpu_argv = [*argv, "--use_cpu", "true", "--bf16", "false"]
    run_args, training_args = pretrain.make_parser().parse_args_and_config(cpu_argv)
    if run_args.model_name_or_path:
        raise ValueError(
            "pass the config of a run from scratch (architecture): a run from existing weights reads "
            "the data of the run that made them"
        )
    if training_args.max_steps <= 0:
        raise ValueError("set max_steps > 0: the furthest step any run reads from this data")
    check_data_settings(run_args)
    check_sources(run_args)
    blocks_per_step = run_args.global_batch_size or global_batch(training_args)  # the launch's, not this process's
    needed = training_args.max_steps * blocks_per_step
    tokenizer, blocks = training_blocks(run_args, training_args.data_seed, training_args.main_process_first, needed)
    select_blocks(blocks, 0, needed, run_args.epochs)  # the exact count: one line if it falls short
    return {
        "blocks": len(blocks),
        "steps": len(blocks) * run_args.epochs // blocks_per_step,
        **data_identity(blocks, tokenizer),
    }


def prepare_evaluation(task_names: list[str], source: str, data_dir: str | None) -> dict[str, dict[str, int]]:
    """Load every split of each task once (from the Hub with `source="hub"`, filling the `datasets` cache):
    {task: {split: examples}}."""
    from evaluation import tasks

    loaded = [tasks.load_task(name) for name in task_names]  # every name is checked before any download
    return {
        task.name: {
            split: len(rows) for split, rows in tasks.load_splits(task, data_dir=data_dir, source=source).items()
        }
        for task in loaded
    }


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="what", required=True)
    commands.add_parser(
        "pretraining", add_help=False, help="--config FILE.yaml [recipes/pretrain.py overrides, e.g. --max_steps 64000]"
    )
    evaluation = commands.add_parser("evaluation", help="download the evaluation tasks' datasets")
    evaluation.add_argument("--tasks", required=True, help="task names or YAML paths, comma-separated")
    evaluation.add_argument("--source", default="hub", choices=("hub", "offline"), help="hub (default) or the bundle")
    evaluation.add_argument("--data_dir", help="data bundle for --source offline")
    return parser


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args, rest = make_parser().parse_known_args(argv)
    with cli.bad_input_exits():
        if args.what == "pretraining":
            check_command_line(rest)  # before torch and datasets load
            result = prepare_pretraining(rest)
            print(
                f"pretraining data ready: {result['blocks']:,} blocks ({result['steps']:,} steps); data "
                f"fingerprint {result['fingerprint']}, tokenizer {result['tokenizer']}"
            )
        else:
            if rest:
                raise ValueError(f"unknown arguments {rest}")
            for name, splits in prepare_evaluation(cli.split_list(args.tasks), args.source, args.data_dir).items():
                print(f"{name}: " + ", ".join(f"{split} {n:,}" for split, n in splits.items()))


if __name__ == "__main__":
    main()
