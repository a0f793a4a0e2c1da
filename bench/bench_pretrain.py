"""Throughput of the pretraining recipe on the tiny architecture: tokens/s for CLM, MLM and across the PFS switch, and
the data pipeline's share of step time (fetching + collating batches / wall time; target <= 5%).

    python -m bench.bench_pretrain                       # CPU, 30 steps per run, block 128, batch 8
    python -m bench.bench_pretrain --steps 100 --block_size 512 --batch_size 16 --output_dir /tmp/bench
Runs the real `recipes/pretrain.py` main and reads the throughput the trainer logs (`tokens_per_second`,
`data_time_share`, measured per logging window); the first window (warm-up) is left out of the means.
"""

import argparse
import json
import tempfile
from pathlib import Path

from recipes import pretrain


def bench(objective_args: list[str], args, output_dir: Path) -> dict:
    argv = ["--config", "recipes/configs/debug.yaml", "--output_dir", str(output_dir),
            "--data_cache_dir", args.cache_dir, "--max_docs", str(args.max_docs), "--block_size", str(args.block_size),
            "--per_device_train_batch_size", str(args.batch_size), "--max_steps", str(args.steps),
            "--logging_steps", str(args.log_every), "--intermediate_steps", str(args.steps), "--report_to", "none",
            "--disable_tqdm", "true", "--save_strategy", "no", *objective_args]
    trainer = pretrain.pretrain(*pretrain.make_parser().parse_args_and_config(argv))
    logs = [log for log in trainer.state.log_history if "tokens_per_second" in log][1:]
    return {"tokens_per_second": sum(log["tokens_per_second"] for log in logs) / len(logs),
            "data_time_share": sum(log["data_time_share"] for log in logs) / len(logs)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--log_every", type=int, default=5)
    parser.add_argument("--block_size", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--max_docs", type=int, default=2000)
    parser.add_argument("--cache_dir", default=".cache/pretrain")
    parser.add_argument("--output_dir", default=None, help="default: a temporary directory")
    args = parser.parse_args(argv)
    root = Path(args.output_dir or tempfile.mkdtemp(prefix="bench_pretrain-"))
    runs = {
        "clm": ["--objective", "clm", "--switch_step", "null"],
        "mlm40": ["--objective", "mlm", "--mlm_probability", "0.4", "--switch_step", "null"],
        "pfs (switch at half)": ["--objective", "mlm", "--switch_step", str(args.steps // 2)],
    }
    results = {name: bench(extra, args, root / name.split()[0]) for name, extra in runs.items()}
    print(json.dumps({"settings": vars(args), "results": results}, indent=2))
    for name, r in results.items():
        print(f"{name:22s} {r['tokens_per_second']:10.0f} tokens/s   "
              f"data pipeline {100 * r['data_time_share']:.2f}% of step time")


if __name__ == "__main__":
    main()
