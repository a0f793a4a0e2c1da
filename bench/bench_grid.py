"""Fine-tuning grid throughput: runs per hour with 1 vs N worker processes (`evaluation.run --workers N`).

    python -m bench.bench_grid [--single_thread]   # tiny architecture, sst2, 2 LRs x 2 seeds, workers 1 and 2
    python -m bench.bench_grid --model out/610m-mlm40-42k --tasks sst2 --max_steps 0 --max_length 0 \
        --max_train 0 --workers 1,2,4,8                         # a GPU, the paper's budget and input lengths
    python -m bench.bench_grid --architecture 210m --vocab_size 128256 --max_steps 100 --workers 1,2,4
    # a GPU without a trained checkpoint: a random 210m model with the paper's vocabulary size

Runs the real command line once per worker count, each into a fresh output folder, timed from start to exit (what a
user waits for); one worker has every CPU thread (`--single_thread` adds one with one thread), N workers cores // N
each. Every setting's scores and predictions are compared with the first one's. On a GPU, the figure for the plan
(`recipes.plan.write_plan(eval_runs_per_gpu_hour=...)`) is the best runs/hour with the paper's settings.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from core import artifacts, cli, store  # standard library only: nothing loads tokenizers before the line below
from core.paths import resolve_data_dir

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def run_grid(model: str, output: Path, workers: int, args, data_dir: Path, threads: int | None = None) -> float:
    """Wall seconds of one `evaluation.run` command line with `workers` workers (one worker: `threads` CPU threads,
    default every core)."""
    command = [
        sys.executable,
        "-m",
        "evaluation.run",
        *cli.flags(
            model=model,
            tasks=args.tasks,
            lrs=args.lrs,
            seeds=args.seeds,
            output=output,
            workers=workers,
            data_dir=data_dir,
            max_eval=args.max_eval,
        ),
    ]
    for flag in ("max_train", "max_steps", "max_length"):  # 0: the command's own default
        command += [f"--{flag}", str(getattr(args, flag))] if getattr(args, flag) else []
    # One grid process gets every core (an inherited OMP_NUM_THREADS=1 would handicap it); workers get cores // N.
    env = {**os.environ, "OMP_NUM_THREADS": str(threads or len(os.sched_getaffinity(0))), "TQDM_DISABLE": "1"}
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"error: the grid with --workers {workers} failed:\n{done.stderr[-3000:]}")
    return wall


def scores(output: Path) -> dict:
    """{result file: (scores, per-instance records) of each split} of a results folder."""
    records = {str(p.relative_to(output)): store.read_result(p) for p in store.result_files(output)}
    return {
        name: [(store.split_scores(r, s), store.instances(r, s)) for s in store.SPLITS] for name, r in records.items()
    }


def random_model(output_dir: Path, args, data_dir: Path) -> Path:
    """A randomly initialised MLM checkpoint of `args.architecture` with the tests' small bundle tokenizer; the
    vocabulary is `args.vocab_size` rows (ids above the tokenizer's are never used) or the tokenizer's."""
    import torch

    import modeling_eurobert
    from tests.fixtures.tiny_models import build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer(data_dir)
    config = modeling_eurobert.load_architecture(
        args.architecture,
        vocab_size=max(args.vocab_size or 0, len(tokenizer)),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        mask_token_id=tokenizer.mask_token_id,
    )
    torch.manual_seed(0)
    modeling_eurobert.EuroBertClmMlmForMaskedLM(config).save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)
    return output_dir


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--model", help="checkpoint directory or Hub id (default: the tiny architecture)")
    add("--tasks", default="sst2")
    add("--lrs", default="1e-4,5e-4")
    add("--seeds", default="0,1")
    add("--workers", default="1,2", help="worker counts to compare, comma-separated")
    add("--max_steps", type=int, default=200, help="0: each task's own budget (the paper's)")
    add("--max_train", type=int, default=20000, help="0: the whole training split")
    add("--max_eval", type=int, default=500)
    add("--max_length", type=int, default=128, help="0: 99%% of the model's positions")
    add(
        "--single_thread",
        action="store_true",
        help="also time one worker with one CPU thread "
        "(on a busy machine, two threads of one process can wait on each other far more than two "
        "single-thread workers do)",
    )
    add(
        "--repeat",
        type=int,
        default=1,
        help="measure every worker count this many times, "
        "interleaved; the median wall time is reported (shared machines are noisy)",
    )
    add(
        "--architecture",
        default="tiny",
        help="without --model: a random model of this architecture (with the tests' small tokenizer)",
    )
    add(
        "--vocab_size",
        type=int,
        help="without --model: the model's vocabulary size (paper: 128256; default the tokenizer's)",
    )
    add("--json", help="also write the figures to this JSON file")
    add("--data_dir")
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = make_parser().parse_args(argv)
    data_dir = resolve_data_dir(args.data_dir)
    counts = [int(n) for n in cli.split_list(args.workers)]
    settings = [(n, None) for n in counts] + ([(1, 1)] if args.single_thread else [])  # (workers, threads of one)
    n_runs = len(cli.split_list(args.tasks)) * len(cli.split_list(args.lrs)) * len(cli.split_list(args.seeds))
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or str(random_model(Path(tmp) / args.architecture, args, data_dir))
        import torch

        cpu = f"CPU, {len(os.sched_getaffinity(0))} cores"
        device = torch.cuda.get_device_name() if torch.cuda.is_available() else cpu
        print(
            f"device: {device}; model {args.model or args.architecture + ' architecture'}; tasks {args.tasks}; "
            f"{n_runs} runs of {args.max_steps or 'the task budget'} steps, batch 32, max_length "
            f"{args.max_length or 'default'}"
        )
        walls, results = {setting: [] for setting in settings}, {}
        for attempt in range(args.repeat):
            for workers, threads in settings:
                output = Path(tmp) / f"workers-{workers}-{threads}-{attempt}"
                walls[(workers, threads)].append(run_grid(model, output, workers, args, data_dir, threads))
                results[(workers, threads, attempt)] = scores(output)
        base, reference = None, results[(*settings[0], 0)]
        figures = {
            "device": device,
            "model": args.model or f"random {args.architecture}",
            "runs": n_runs,
            "settings": vars(args),
            "rows": [],
        }
        for workers, threads in settings:
            wall = statistics.median(walls[(workers, threads)])
            rate = n_runs / wall * 3600
            base = base or rate
            same = all(r == reference for (n, t, _), r in results.items() if (n, t) == (workers, threads))
            label = f"--workers {workers}" + (" (1 thread)" if threads else "")
            print(
                f"{label:<22}: {wall:7.1f} s wall (median of "
                f"{', '.join(f'{w:.1f}' for w in walls[(workers, threads)])}), {rate:8.1f} runs/hour "
                f"({rate / base:.2f}x), results {'identical' if same else 'DIFFERENT'} to the first row's"
            )
            figures["rows"].append(
                {
                    "workers": workers,
                    "threads": threads,
                    "wall_s": wall,
                    "runs_per_hour": rate,
                    "results_identical": same,
                }
            )
    best = figures["best"] = max(figures["rows"], key=lambda row: row["runs_per_hour"])
    print(
        f"best: --workers {best['workers']}, {best['runs_per_hour']:.1f} runs/hour "
        f"({best['runs_per_hour'] / figures['rows'][0]['runs_per_hour']:.2f}x the first row)"
    )
    if args.json:
        artifacts.write_text_atomic(args.json, json.dumps(figures, indent=2))
    return figures


if __name__ == "__main__":
    main()
