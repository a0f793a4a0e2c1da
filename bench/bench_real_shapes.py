"""The paper's real shapes through the recipe, once: one optimizer step of `recipes/pretrain.py` per architecture and
objective at vocabulary 128,256 and block 2048, its peak resident memory, step time and activation bytes per token,
and the checkpoint it saves reloaded in a fresh process.

    python -m bench.bench_real_shapes --sizes 210m,610m --json docs/real_shapes.json    # CPU, one run at a time
    python -m bench.bench_real_shapes --dry_run                                          # tiny, what CI runs

Each (size, objective) runs in its own process (its peak RSS is its own; docs/benchmarks.md: what runs and the
figures). After the step, one more forward + backward on the same model and batch, with the gradients allocated and
AdamW's moments dropped, adds the activations' memory (`activation_bytes_per_token`, what `recipes.plan.memory_rows`
uses; freed memory goes back to the system, `MALLOC_MMAP_THRESHOLD_`).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from core import artifacts, cli

ROOT = Path(__file__).resolve().parents[1]
OBJECTIVES = {"clm": "clm", "mlm40": "mlm40"}  # name -> the paper config's objective part
RELOAD = """
import json, sys, time
import torch
from safetensors.torch import load_file
from transformers import AutoModelForMaskedLM
start = time.perf_counter()
model = AutoModelForMaskedLM.from_pretrained(sys.argv[1], trust_remote_code=True).eval()
seconds = time.perf_counter() - start
saved = load_file(sys.argv[1] + "/model.safetensors")
same = all(torch.equal(saved[k], v) for k, v in model.state_dict().items() if k in saved)
with torch.no_grad():
    finite = bool(torch.isfinite(model(input_ids=torch.arange(5, 37).unsqueeze(0)).logits).all())
print(json.dumps({"load_seconds": round(seconds, 1), "weights_equal": same and len(saved) > 0,
                  "logits_finite": finite}))
"""


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add(
        "--sizes",
        help="architectures, comma-separated (default 210m,610m; the dry run 210m); 1b: "
        "its weights, gradients and AdamW states alone take 22.6 GB",
    )
    add("--objectives", default="clm,mlm40", help=f"comma-separated: {', '.join(OBJECTIVES)}")
    add("--batch", type=int, default=1, help="blocks per step")
    add("--block_size", type=int, default=2048)
    add("--vocab_size", type=int, default=128256)
    add("--max_docs", type=int, default=400, help="bundle documents tokenized (enough for the blocks of one step)")
    add("--fp32", action="store_true", help="train in fp32 instead of the config's bf16 autocast")
    add("--dry_run", action="store_true", help="tiny: architecture tiny, block 64, vocabulary 8192 + 64")
    add("--cache_dir", default=".cache/pretrain")
    add("--data_dir", help="the data bundle (default: $MLM_VS_CLM_DATA or ../shared/data)")
    add("--output_dir", help="default: a temporary directory")
    add("--json", help="also write the figures to this JSON file")
    add("--one", nargs=2, metavar=("SIZE", "OBJECTIVE"), help=argparse.SUPPRESS)  # the child process
    return parser


def rss_bytes(field: str) -> int:
    """VmRSS or VmHWM (peak) of this process, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def recipe_argv(args, size: str, objective: str, output_dir: Path, tokenizer: Path) -> list[str]:
    """The paper config less its 42k-step budgets (decay branches, intermediate checkpoints), then one step here."""
    import yaml

    config = yaml.safe_load((ROOT / f"recipes/configs/paper/{size}-{OBJECTIVES[objective]}-42k.yaml").read_text())
    for key in ("decay_branches", "intermediate_steps"):
        config.pop(key, None)
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir.parent / f"{output_dir.name}.yaml").write_text(yaml.safe_dump(config))
    return [
        *cli.flags(
            config=output_dir.parent / f"{output_dir.name}.yaml",
            output_dir=output_dir,
            run_name=output_dir.name,
            data_cache_dir=args.cache_dir,
            corpus_source="bundle",
            corpus_name="null",
            global_batch_size="null",
            max_docs=args.max_docs,
            block_size=args.block_size,
            num_proc=1,
            tokenizer_name_or_path=tokenizer,
            per_device_train_batch_size=args.batch,
            gradient_accumulation_steps=1,
            max_steps=1,
            warmup_steps=0,
            lr_scheduler_kwargs='{"num_decay_steps": 1}',
            logging_steps=1,
            use_cpu="true",
            compile="none",
            dataloader_num_workers=0,
            report_to="none",
            disable_tqdm="true",
        ),
        *(["--bf16", "false"] if args.fp32 else []),
        *(["--architecture", "tiny"] if args.dry_run else []),
    ]


def one_run(args, size: str, objective: str, output_dir: Path) -> dict:
    """The child: one step of the recipe, then the activation measurement (module docstring)."""
    import torch

    from bench.bench_pretrain import padded_toy_tokenizer
    from pretraining import pretrain

    torch.manual_seed(0)
    tokenizer = padded_toy_tokenizer(args, Path(args.cache_dir) / f"padded-toy-{args.vocab_size}")
    run_args, training_args = pretrain.make_parser().parse_args_and_config(
        recipe_argv(args, size, objective, output_dir, tokenizer)
    )
    run = pretrain.prepare(run_args, training_args)
    model = run.model
    parameters = sum(p.numel() for p in model.parameters())
    start = time.perf_counter()
    trainer = pretrain.train(run)
    train_seconds = time.perf_counter() - start
    peak = rss_bytes("VmHWM")
    step_log = next(log for log in trainer.state.log_history if "tokens_per_second" in log)
    tokens = args.batch * args.block_size

    batch = run.collator([run.train_blocks[i] for i in range(args.batch)])
    batch.pop("block_index"), batch.pop("mlm_overflow", None)
    getattr(trainer.optimizer, "optimizer", trainer.optimizer).state.clear()  # AdamW's moments: not needed below
    for p in model.parameters():  # allocated, as under gradient accumulation: the backward adds nothing of its own
        p.grad = torch.zeros_like(p)
    model.train()
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    resident = rss_bytes("VmRSS")
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=training_args.bf16):
        loss = model(**batch).loss
    loss.backward()
    activations = rss_bytes("VmHWM") - resident
    checkpoint = output_dir / "checkpoint-1"
    return {
        "size": size,
        "objective": objective,
        "parameters": parameters,
        "bf16": training_args.bf16,
        "mlm_fixed_shape": run_args.mlm_fixed_shape,
        "tokens_per_step": tokens,
        "loss": step_log.get("loss", trainer.state.log_history[-1].get("train_loss")),
        "step_seconds": round(tokens / step_log["tokens_per_second"], 4),  # a tiny dry-run step: ms
        "train_seconds": round(train_seconds, 1),
        "peak_rss_gb": round(peak / 1e9, 2),
        "resident_after_step_gb": round(resident / 1e9, 2),
        "activation_gb": round(activations / 1e9, 2),
        "activation_bytes_per_token": round(activations / tokens),
        "checkpoint_gb": round(sum(f.stat().st_size for f in checkpoint.iterdir()) / 1e9, 2),
        "files": sorted(f.name for f in checkpoint.iterdir() if f.suffix in (".safetensors", ".pt")),
    }


def run_child(args, size: str, objective: str, output_dir: Path) -> dict:
    """`one_run` in its own process, then the reload in another."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "MALLOC_MMAP_THRESHOLD_": "131072",
        "TOKENIZERS_PARALLELISM": "false",
    }
    command = [
        sys.executable,
        "-m",
        "bench.bench_real_shapes",
        "--one",
        size,
        objective,
        *cli.flags(
            output_dir=output_dir,
            batch=args.batch,
            block_size=args.block_size,
            vocab_size=args.vocab_size,
            max_docs=args.max_docs,
            cache_dir=args.cache_dir,
        ),
        *(["--fp32"] if args.fp32 else []),
        *(["--dry_run"] if args.dry_run else []),
        *(["--data_dir", args.data_dir] if args.data_dir else []),
    ]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{size} {objective} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    reload = subprocess.run(
        [sys.executable, "-c", RELOAD, str(output_dir)], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if reload.returncode != 0:
        raise RuntimeError(f"{size} {objective}: the saved model does not load:\n{reload.stderr[-3000:]}")
    return {**result, **json.loads(reload.stdout.strip().splitlines()[-1])}


def main(argv: list[str] | None = None) -> dict:
    args = make_parser().parse_args(argv)
    if args.dry_run:
        args.block_size, args.vocab_size, args.max_docs = 64, 8192 + 64, 60
    args.sizes = args.sizes or ("210m" if args.dry_run else "210m,610m")
    if args.one:
        print(json.dumps(one_run(args, *args.one, Path(args.output_dir))))
        return {}
    root = Path(args.output_dir or tempfile.mkdtemp(prefix="bench_real_shapes-"))
    figures = {"settings": {k: v for k, v in vars(args).items() if k != "one"}, "machine": machine(), "runs": []}
    for size in args.sizes.split(","):
        for objective in args.objectives.split(","):
            result = run_child(args, size, objective, root / f"{size}-{objective}")
            figures["runs"].append(result)
            print(json.dumps(result))
            if args.json:
                artifacts.write_json_atomic(args.json, figures)
    return figures


def machine() -> dict:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "unknown",
    )
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {
        "cpu": cpu,
        "cores": len(os.sched_getaffinity(0)),
        "memory_gb": round(memory / 1e9, 1),
        "date": time.strftime("%Y-%m-%d"),
    }


if __name__ == "__main__":
    main()
