"""Data pipeline bench: collator time per batch and DataLoader throughput for CLM and MLM (toy setup by default).

    .venv/bin/python -m bench.bench_data                                    # tiny toy setup, well under a minute
    .venv/bin/python -m bench.bench_data --block_size 2048 --batch_size 8 --tokenizer path/to/llama3  # paper blocks
    .venv/bin/python -m bench.bench_data --json out/bench_data.json         # also write the figures as JSON

Measures, on a subset of the bundle's corpus: building the packed blocks (tokens/s), the collator alone on batches in
memory (ms per batch), and a real sequential DataLoader through the collator (blocks/s, tokens/s), for each objective
and worker count.
"""

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from torch.utils.data import DataLoader, SequentialSampler

from core import artifacts, cli
from pretraining.collator import PretrainingCollator
from pretraining.data import build_packed_dataset, load_corpus, load_pretraining_tokenizer, train_toy_tokenizer

OBJECTIVES = {  # name -> collator arguments
    "clm": dict(objective="clm"),
    "mlm40": dict(objective="mlm", mlm_probability=0.4),
    "mlm40-80/10/10": dict(objective="mlm", mlm_probability=0.4, mask_replace_prob=0.8, random_replace_prob=0.1),
}


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--data_dir", help="data bundle (flag > $MLM_VS_CLM_DATA > ../shared/data)")
    add("--num_docs", type=int, default=1000, help="documents of the bundle corpus to use")
    add("--tokenizer", help="existing tokenizer path; default: train a toy BPE")
    add("--vocab_size", type=int, default=8192, help="toy BPE vocabulary size")
    add("--block_size", type=int, default=128)
    add("--batch_size", type=int, default=32)
    add("--num_batches", type=int, default=100, help="batches per measurement")
    add("--num_workers", default="0,2", help="DataLoader worker counts, comma-separated")
    add("--num_proc", type=int, default=1, help="tokenization processes")
    add("--cache_dir", help="packed-block cache (default: a temporary directory)")
    add("--json", help="also write the results to this JSON file")
    return parser


def bench_collator(collator, examples: list[dict], batch_size: int, num_batches: int) -> float:
    """Milliseconds per batch for the collator alone, on examples already in memory."""
    batches = [examples[i * batch_size : (i + 1) * batch_size] for i in range(num_batches)]
    collator(batches[0])  # warm-up
    start = time.perf_counter()
    for batch in batches:
        collator(batch)
    return 1000 * (time.perf_counter() - start) / num_batches


def bench_loader(blocks, collator, batch_size: int, num_batches: int, num_workers: int) -> float:
    """Blocks per second through a real DataLoader (sequential order, as the Trainer reads it)."""
    subset = blocks.select(range(batch_size * num_batches))
    loader = DataLoader(
        subset, batch_size=batch_size, sampler=SequentialSampler(subset), collate_fn=collator, num_workers=num_workers
    )
    start = time.perf_counter()
    count = sum(len(batch["input_ids"]) for batch in loader)  # includes worker start-up, as in a real epoch
    return count / (time.perf_counter() - start)


def measure(args: argparse.Namespace) -> dict:
    cache_dir = Path(args.cache_dir or tempfile.mkdtemp(prefix="bench_data_"))
    corpus = load_corpus("bundle", data_dir=args.data_dir).select(range(args.num_docs))
    start = time.perf_counter()
    tokenizer = (
        load_pretraining_tokenizer(args.tokenizer, objective="mlm")
        if args.tokenizer
        else train_toy_tokenizer(corpus, args.vocab_size, cache_dir / "tokenizer")
    )
    tokenizer_s = time.perf_counter() - start
    cached_before = set(cache_dir.glob("packed-*.arrow"))
    start = time.perf_counter()
    blocks = build_packed_dataset(tokenizer, corpus, args.block_size, 0, cache_dir, num_proc=args.num_proc)
    build_s = time.perf_counter() - start
    num_batches = min(args.num_batches, len(blocks) // args.batch_size)
    if num_batches == 0:
        raise ValueError(f"only {len(blocks)} blocks for batch_size={args.batch_size}; raise --num_docs")
    results = {
        "setup": {**vars(args), "num_blocks": len(blocks), "num_batches": num_batches, "vocab": len(tokenizer)},
        "tokenizer_s": tokenizer_s,
        "build_s": build_s,
        "build_cached": Path(blocks.cache_files[0]["filename"]) in cached_before,
        "build_tokens_per_s": len(blocks) * args.block_size / build_s,
        "objectives": {},
    }
    examples = [blocks[i] for i in range(num_batches * args.batch_size)]
    for name, kwargs in OBJECTIVES.items():
        collator = PretrainingCollator(tokenizer=tokenizer, **kwargs)
        entry = {"collate_ms_per_batch": bench_collator(collator, examples, args.batch_size, num_batches)}
        for workers in [int(n) for n in cli.split_list(args.num_workers)]:
            blocks_per_s = bench_loader(blocks, collator, args.batch_size, num_batches, workers)
            entry[f"workers={workers}"] = {"blocks_per_s": blocks_per_s, "tokens_per_s": blocks_per_s * args.block_size}
        results["objectives"][name] = entry
    return results


def print_results(results: dict) -> None:
    setup = results["setup"]
    print(
        f"setup: {setup['num_docs']} docs, vocab {setup['vocab']}, block {setup['block_size']}, "
        f"batch {setup['batch_size']}, {setup['num_blocks']} blocks, {setup['num_batches']} batches per measurement"
    )
    cached = " (read from cache)" if results["build_cached"] else ""
    print(
        f"tokenizer {results['tokenizer_s']:.1f} s; tokenize+pack {results['build_s']:.1f} s{cached} "
        f"({results['build_tokens_per_s']:,.0f} tokens/s)"
    )
    print(f"{'objective':<16}{'collate ms/batch':>18}{'workers':>9}{'blocks/s':>12}{'tokens/s':>14}")
    for name, entry in results["objectives"].items():
        for key, loader in (item for item in entry.items() if item[0].startswith("workers=")):
            print(
                f"{name:<16}{entry['collate_ms_per_batch']:>18.2f}{key.split('=')[1]:>9}"
                f"{loader['blocks_per_s']:>12,.0f}{loader['tokens_per_s']:>14,.0f}"
            )


def main(argv: list[str] | None = None) -> dict:
    args = make_parser().parse_args(argv)
    figures = measure(args)
    print_results(figures)
    if args.json:
        artifacts.write_text_atomic(args.json, json.dumps(figures, indent=2))
    return figures


if __name__ == "__main__":
    main()
