"""Real weights, measured: all-MiniLM-L6-v2 against its published MTEB SciFact score, and a training step of
converted SmolLM2-135M against transformers' Llama, each in one run.

    python -m bench.bench_real_models --real_models ~/real-models --json docs/bench_real_models.json   # ~10 min
    python -m bench.bench_real_models --real_models ~/real-models --dry_run                           # CI: a step

- `minilm_scifact`: `evaluation.mteb`'s path (mteb's own encoding, search and pytrec_eval) on the bundle's SciFact
  test split with the full corpus, and this project's IR scorer on the same ranking, each against the published
  NDCG@10 0.6451 (MTEB leaderboard).
- `throughput`: `bench.bench_model --checkpoint <converted SmolLM2>` (the real shapes and weights), 2 threads, wall
  clock, batch 4 x 128: best-step ratios of our MLM 40% head vs native `EuroBertForMaskedLM`, our CLM vs Llama.
The dry run scores 10 queries against their judged documents and times one step of each pair at batch 1 x 32 on
the checkpoint's widths with 2 random layers.
"""

import argparse
import json
import tempfile
import time
from pathlib import Path

from core import artifacts, cli

PUBLISHED_SCIFACT_NDCG10 = 0.6451  # sentence-transformers/all-MiniLM-L6-v2, MTEB SciFact test (leaderboard)


def minilm_scifact(model_dir: Path, dry_run: bool) -> dict:
    from evaluation import metrics, mteb

    argv = [
        *cli.flags(
            model=f"all-minilm-l6-v2={model_dir}",
            tasks="scifact",
            ir_corpus="judged" if dry_run else "full",
            output=tempfile.mkdtemp(prefix="bench-real-"),
        ),
        *(["--max_eval", "10"] if dry_run else []),
    ]
    (args,) = mteb.make_parser().parse_args_into_dataclasses(args=argv)
    (job,) = mteb.list_jobs(args)
    started = time.perf_counter()
    encoder = mteb.load_encoder(job.model, job.target.prompts, args)
    evaluated = mteb.evaluate(encoder, job.target, args.batch_size)
    ours = metrics.retrieval_scores(evaluated["run"], evaluated["qrels"])["ndcg@10"]
    theirs = evaluated["scores"]["ndcg_at_10"]
    return {
        "queries": len(evaluated["qrels"]),
        "documents": evaluated["corpus_size"],
        "mteb_ndcg@10": theirs,
        "project_ndcg@10": ours,
        "published_ndcg@10": PUBLISHED_SCIFACT_NDCG10,
        "mteb_minus_published": theirs - PUBLISHED_SCIFACT_NDCG10,
        "project_minus_mteb": ours - theirs,
        "seconds": round(time.perf_counter() - started, 1),
    }


def throughput(converted: Path, dry_run: bool) -> dict:
    from bench import bench_model

    if dry_run:  # the checkpoint's widths and vocabulary, 2 random layers: one step of each pair, in seconds
        config = json.loads((converted / "config.json").read_text())
        shape = cli.flags(
            vocab=config["vocab_size"],
            hidden=config["hidden_size"],
            layers=2,
            heads=config["num_attention_heads"],
            kv_heads=config["num_key_value_heads"],
            batch=1,
            seq=32,
            steps=1,
            warmup=0,
        )
    else:
        shape = cli.flags(checkpoint=converted, batch=4, seq=128, steps=3, warmup=1)
    figures = bench_model.main(["--threads", "2", "--clock", "wall", *shape])
    return {"pairs": figures["pairs"], "setup": figures["setup"]}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--real_models", required=True, help="the folder of `python -m recipes.real_models`")
    add(
        "--converted",
        help="SmolLM2 converted by modeling_eurobert.convert (default: "
        "converted now into <real_models>/smollm2-135m-eurobert)",
    )
    add("--sections", default="minilm_scifact,throughput")
    add("--dry_run", action="store_true")
    add("--json")
    args = parser.parse_args(argv)
    from modeling_eurobert.convert import convert
    from recipes import real_models

    with cli.bad_input_exits():
        made = real_models.main(["--output", args.real_models])
    figures = {"dry_run": args.dry_run}
    sections = cli.split_list(args.sections)
    if "minilm_scifact" in sections:
        figures["minilm_scifact"] = minilm_scifact(made["all-minilm-l6-v2"], args.dry_run)
        print(json.dumps(figures["minilm_scifact"], indent=1))
    if "throughput" in sections:
        converted = Path(args.converted or Path(args.real_models) / "smollm2-135m-eurobert")
        if not converted.exists():
            convert(str(made["smollm2-135m-instruct"]), converted)
        figures["throughput"] = throughput(converted, args.dry_run)
    if args.json:
        artifacts.write_json_atomic(args.json, figures)
    return figures


if __name__ == "__main__":
    main()
