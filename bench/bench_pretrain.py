"""Throughput of the pretraining recipe: tokens/s (and on CUDA MFU) for CLM, MLM and across the PFS switch, and the
data pipeline's share of step time (fetching + collating batches / wall time; target <= 5%).

    python -m bench.bench_pretrain                       # CPU, tiny architecture, 30 steps per run, block 128, batch 8
    python -m bench.bench_pretrain --steps 100 --block_size 512 --batch_size 16 --output_dir /tmp/bench
    python -m bench.bench_pretrain --config recipes/configs/paper/210m-mlm40-42k.yaml --runs pfs --steps 40 \
        --block_size 2048 --batch_size 8 --accumulation 2 --vocab_size 128256 --max_docs 6000 --compare_eager
    # one GPU: the 210m paper config (bf16, regional compile, fixed-shape head) through a PFS switch, offline

Runs the real `recipes/pretrain.py` and averages what the trainer logs per logging window, leaving out the first
window of each objective (compilation and warm-up). Any config runs offline: the corpus is the bundle, the global
batch this machine's (`--batch_size` x `--accumulation`), the vocabulary the toy BPE's padded to `--vocab_size`
(`padded_toy_tokenizer`). Compiles are counted per run (a PFS run compiles one graph per attention pattern). Other
arguments go to the recipe unchanged (`--bf16 false`).
"""

import argparse
import json
import tempfile
from pathlib import Path

from core import artifacts, cli
from pretraining import data, pretrain

RUNS = {  # name -> recipe arguments (PFS switches at half the steps)
    "clm": lambda steps: ["--objective", "clm", "--switch_step", "null"],
    "mlm40": lambda steps: ["--objective", "mlm", "--mlm_probability", "0.4", "--switch_step", "null"],
    "pfs": lambda steps: ["--objective", "mlm", "--switch_step", str(steps // 2)],
}


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--config", default="recipes/configs/debug.yaml", help="the recipe config (e.g. a paper config on a GPU)")
    add("--runs", default="clm,mlm40,pfs", help=f"runs to time, comma-separated: {', '.join(RUNS)}")
    add("--steps", type=int, default=30)
    add("--log_every", type=int, default=5)
    add("--block_size", type=int, default=128)
    add("--batch_size", type=int, default=8, help="micro-batch (per_device_train_batch_size)")
    add("--accumulation", type=int, default=1, help="gradient_accumulation_steps")
    add("--max_docs", type=int, default=2000)
    add(
        "--vocab_size",
        type=int,
        help="pad the toy BPE (8192) to this vocabulary (paper: 128256); default: the config's tokenizer setting",
    )
    add("--compare_eager", action="store_true", help="also run each run with compile: none and compare the losses")
    add("--loss_rtol", type=float, default=0.01, help="largest relative loss difference accepted by --compare_eager")
    add("--cache_dir", default=".cache/pretrain")
    add("--data_dir")
    add("--output_dir", help="default: a temporary directory")
    add("--json", help="also write the figures to this JSON file")
    return parser


def padded_toy_tokenizer(args, path: Path) -> Path:
    """The toy BPE (8192, trained on the run's documents) saved in `path`, its vocabulary padded to `args.vocab_size`
    by entries no merge builds."""
    if (path / "tokenizer.json").is_file():
        return path
    corpus = data.load_corpus("bundle", data_dir=args.data_dir)
    corpus = corpus.select(range(min(args.max_docs, len(corpus))))
    tokenizer = data.train_toy_tokenizer(corpus, 8192, path)
    if args.vocab_size < len(tokenizer):
        raise ValueError(f"--vocab_size {args.vocab_size} is below the toy BPE's {len(tokenizer)}")
    spec = json.loads((path / "tokenizer.json").read_text())
    spec["model"]["vocab"].update({f"<|unused_{i}|>": i for i in range(len(tokenizer), args.vocab_size)})
    (path / "tokenizer.json").write_text(json.dumps(spec, ensure_ascii=False))
    return path


def phases(logs: list[dict], switch_step: int | None) -> list[list[dict]]:
    """The logging windows of each objective, in order (one list without a switch)."""
    if switch_step is None:
        return [logs]
    return [[log for log in logs if log["step"] <= switch_step], [log for log in logs if log["step"] > switch_step]]


def mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def bench(name: str, args, extra: list[str], output_dir: Path, eager: bool = False) -> dict:
    """One run of the recipe; its logged windows, steady-state means and compile counts."""
    import torch
    from torch._dynamo.utils import counters

    argv = [
        *cli.flags(
            config=args.config,
            output_dir=output_dir,
            data_cache_dir=args.cache_dir,
            corpus_source="bundle",
            corpus_name="null",
            global_batch_size="null",
            max_docs=args.max_docs,
            block_size=args.block_size,
            per_device_train_batch_size=args.batch_size,
            gradient_accumulation_steps=args.accumulation,
            max_steps=args.steps,
            logging_steps=args.log_every,
            intermediate_steps=args.steps,
            report_to="none",
            disable_tqdm="true",
            # the config's schedule (2,000 warmup and decay steps) scaled to the benchmark's steps: same throughput
            warmup_steps=max(1, args.steps // 10),
            lr_scheduler_kwargs=json.dumps({"num_decay_steps": max(1, args.steps // 10), "decay_type": "linear"}),
            save_strategy="no",
        ),
        *RUNS[name](args.steps),
        *extra,
        *(["--compile", "none"] if eager else []),
        *(["--data_dir", args.data_dir] if args.data_dir else []),
        "--tokenizer_name_or_path",
        args.tokenizer,
    ]
    run_args, training_args = pretrain.make_parser().parse_args_and_config(argv)
    torch._dynamo.reset()  # count this run's compiles only
    counters.clear()
    trainer = pretrain.pretrain(run_args, training_args)
    logs = [log for log in trainer.state.log_history if "tokens_per_second" in log]
    steady = [log for phase in phases(logs, run_args.switch_step) for log in phase[1:]]
    return {
        "compile": run_args.compile,
        "mlm_fixed_shape": run_args.mlm_fixed_shape,
        "bf16": training_args.bf16,
        "switch_step": run_args.switch_step,
        "windows": [
            {
                key: log.get(key)
                for key in ("step", "loss", "tokens_per_second", "mfu", "data_time_share", "mlm_overflow_batches")
            }
            for log in logs
        ],
        "tokens_per_second": mean([log["tokens_per_second"] for log in steady]),
        "mfu": mean([log["mfu"] for log in steady if "mfu" in log]),
        "data_time_share": mean([log["data_time_share"] for log in steady]),
        "frames_compiled": counters["frames"]["ok"],
        "graph_breaks": sum(counters["graph_break"].values()),
    }


def main(argv: list[str] | None = None) -> dict:
    args, extra = make_parser().parse_known_args(argv)  # the recipe's parser refuses what neither knows
    root = Path(args.output_dir or tempfile.mkdtemp(prefix="bench_pretrain-"))
    args.tokenizer = "null"  # the config's own toy BPE (a paper config's tokenizer is on the Hub)
    if args.vocab_size:
        args.tokenizer = str(padded_toy_tokenizer(args, Path(args.cache_dir) / f"padded-toy-{args.vocab_size}"))
    figures = {"settings": {**vars(args), "recipe_arguments": extra}, "results": {}}
    for name in [run.strip() for run in args.runs.split(",") if run.strip()]:
        result = bench(name, args, extra, root / name)
        if args.compare_eager:
            result["eager"] = bench(name, args, extra, root / f"{name}-eager", eager=True)
            losses = zip(*([w["loss"] for w in r["windows"]] for r in (result, result["eager"])), strict=True)
            result["loss_max_rel_diff"] = max(abs(a - b) / abs(b) for a, b in losses)  # over the logged windows
            result["losses_match"] = result["loss_max_rel_diff"] <= args.loss_rtol
        figures["results"][name] = result
        if args.json:
            artifacts.write_text_atomic(args.json, json.dumps(figures, indent=2))
    for name, r in figures["results"].items():
        if r["tokens_per_second"] is None:
            print(f"{name:8s} no window after the first of each objective: raise --steps or lower --log_every")
            continue
        mfu = f", MFU {100 * r['mfu']:.1f}%" if r["mfu"] is not None else ""
        line = (
            f"{name:8s} compile {r['compile']}: {r['tokens_per_second']:10.0f} tokens/s{mfu}, data pipeline "
            f"{100 * r['data_time_share']:.2f}% of step time, {r['frames_compiled']} frames compiled, "
            f"{r['graph_breaks']} graph breaks"
        )
        if "eager" in r:
            e = r["eager"]
            speedup = r["tokens_per_second"] / e["tokens_per_second"] if e["tokens_per_second"] else float("nan")
            line += (
                f"; eager {e['tokens_per_second'] or 0:.0f} tokens/s ({speedup:.2f}x), losses "
                f"{'match' if r['losses_match'] else 'DIFFER'} (max rel diff {r['loss_max_rel_diff']:.2e})"
            )
        print(line)
    return figures


if __name__ == "__main__":
    main()
