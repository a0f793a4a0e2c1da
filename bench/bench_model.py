"""Training-step throughput of our heads against transformers' reference classes, side by side in one process.

    .venv/bin/python -m bench.bench_model          # CPU, 1 thread, about 1 minute
    .venv/bin/python -m bench.bench_model --compile regional   # + eager vs compiled decoder layers (CPU: a few minutes)
    .venv/bin/python -m bench.bench_model --device cuda --dtype bfloat16 --vocab 128256 --hidden 768 --layers 12 \
        --heads 12 --kv_heads 12 --batch 8 --seq 2048 --compile regional
    # (210m shapes on a GPU; adds the 210m bf16 MFU)

Pairs, same weights and batch, steps (forward + backward + fused AdamW) interleaved ABAB..., warmup excluded: (a) MLM
40%: our `EuroBertClmMlmForMaskedLM` vs native `EuroBertForMaskedLM`, target >= 1.8x; (b) CLM: ours vs
`LlamaForCausalLM`, target >= 1.0x (docs/benchmarks.md: the figures and why). FLOPs per step are
`pretraining/flops.py`'s; achieved FLOP/s is compared to a large matmul timed in the same process (fp32 on CPU, bf16
on GPU). The bf16 MFU (on CUDA, or `--mfu on`) divides by the GPU's dense bf16 spec peak, as the trainer's log;
`--mfu_batch max` is the largest multiple of 8 whose peak memory, extrapolated from the eager rows, fits in
`--memory_gb`. Steps are reported as the best of N (the interference-free time on a shared machine) and the median.
`--threads` defaults to 1: on 2 shared cores two OpenMP threads ran about 10x slower than one; with one thread on
CPU, steps are timed in process CPU time.
"""

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import transformers
from safetensors.torch import load_file

from core import artifacts, cli
from modeling_eurobert import (
    EuroBertClmMlmConfig,
    EuroBertClmMlmForCausalLM,
    EuroBertClmMlmForMaskedLM,
    load_architecture,
)
from modeling_eurobert.export_native import native_config
from pretraining.collator import masked_positions_bound, padded_positions
from pretraining.flops import bf16_peak_flops, training_flops_per_token
from pretraining.trainer import compile_decoder_layers


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add(
        "--checkpoint",
        help="a checkpoint of ours (a converted decoder): its shapes and weights instead "
        "of --vocab/--hidden/--layers/--heads/--kv_heads",
    )
    add("--vocab", type=int, default=32768, help="vocabulary size")
    add("--hidden", type=int, default=256, help="hidden size")
    add("--layers", type=int, default=8, help="transformer layers")
    add("--heads", type=int, default=4, help="attention heads")
    add("--kv_heads", type=int, default=4, help="key/value heads")
    add("--batch", type=int, default=4, help="sequences per step")
    add("--seq", type=int, default=128, help="tokens per sequence")
    add("--steps", type=int, default=8, help="timed steps per model")
    add("--warmup", type=int, default=2, help="untimed steps per model")
    add("--mask_ratio", type=float, default=0.4, help="MLM masking ratio")
    add("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    add("--dtype", default="float32", choices=["float32", "bfloat16"], help="autocast dtype (weights stay fp32)")
    add("--threads", type=int, default=1, help="torch CPU threads (1: see the note on shared cores)")
    add(
        "--clock",
        default="auto",
        choices=["auto", "wall", "cpu"],
        help="step timer; auto = process CPU time on CPU with 1 thread, else wall time (synchronised on CUDA)",
    )
    add("--attn", default="sdpa", help="attn_implementation for every model")
    add("--pairs", default="mlm,clm", help="which pairs to time: mlm, clm or both")
    add(
        "--compile",
        default="none",
        choices=["none", "regional"],
        help="regional: also time our models with every decoder layer compiled, beside the eager ones",
    )
    add(
        "--mfu",
        default="auto",
        choices=["auto", "on", "off"],
        help="report an architecture's bf16 MFU (MLM 40%%); auto = only on CUDA",
    )
    add(
        "--mfu_architecture",
        default="210m",
        help="architectures for the MFU runs, comma-separated (tiny: a quick CPU smoke check)",
    )
    add("--mfu_seq", type=int, default=2048, help="sequence length of the MFU runs")
    add(
        "--mfu_batch",
        default="8",
        help="micro-batches of the MFU runs, comma-separated; max = the largest multiple "
        "of 8 that fits in --memory_gb (extrapolated from the eager peaks of the others)",
    )
    add(
        "--memory_gb",
        type=float,
        help="cap CUDA memory at this many GB (80: an H100's memory, on an H200); the bound of --mfu_batch max",
    )
    add(
        "--compile_table",
        default="on",
        choices=["on", "off"],
        help="with --compile regional: the eager vs compiled table at the pair config (off: MFU rows only)",
    )
    add("--json", help="also write the figures to this JSON file (rewritten after each measurement)")
    add(
        "--peak_size",
        type=int,
        help="side of the square matmul timed as the peak (default: 8192 on CUDA, 2048 on CPU)",
    )
    return parser


def bench_config(args) -> EuroBertClmMlmConfig:
    if args.checkpoint:
        return EuroBertClmMlmConfig.from_pretrained(args.checkpoint)
    return EuroBertClmMlmConfig(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        intermediate_size=4 * args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads,
        max_position_embeddings=max(args.seq, 2048),
        pad_token_id=3,
        bos_token_id=0,
        eos_token_id=1,
        mask_token_id=2,
    )


def build_pair(kind: str, config: EuroBertClmMlmConfig, args) -> dict[str, torch.nn.Module]:
    """Our head and its reference, with identical weights."""
    if kind == "mlm":
        ours = EuroBertClmMlmForMaskedLM(config)
        reference = transformers.EuroBertForMaskedLM(native_config(config.to_dict()))
        names = ("ours EuroBertClmMlmForMaskedLM", "native EuroBertForMaskedLM")
    else:
        ours = EuroBertClmMlmForCausalLM(config)
        dropped = ("model_type", "is_causal", "mask_token_id", "classifier_pooling")
        llama = transformers.LlamaConfig(**{k: v for k, v in config.to_dict().items() if k not in dropped})
        reference = transformers.LlamaForCausalLM(llama)
        names = ("ours EuroBertClmMlmForCausalLM", "LlamaForCausalLM")
    if args.checkpoint:
        ours.load_state_dict(load_file(str(Path(args.checkpoint) / "model.safetensors")), strict=True)
    reference.load_state_dict(ours.state_dict(), strict=True)
    models = {}
    for name, model in zip(names, (ours, reference)):
        model.set_attn_implementation(args.attn)  # raises if the backend is not available
        models[name] = model.to(args.device).train()
    return models


def make_batch(kind: str, config, args, fixed_shape: bool = False) -> dict[str, torch.Tensor]:
    """`args.batch` x `args.seq` random ids on `args.device`; MLM masks `args.mask_ratio` of them and labels only
    those (`fixed_shape`: with the `mlm_positions` of the recipe's `mlm_fixed_shape`), CLM labels all."""
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(4, config.vocab_size, (args.batch, args.seq), generator=generator)
    if kind == "clm":
        return {"input_ids": input_ids.to(args.device), "labels": input_ids.clone().to(args.device)}
    masked = torch.rand(args.batch, args.seq, generator=generator) < args.mask_ratio
    labels = torch.where(masked, input_ids, torch.full_like(input_ids, -100))
    input_ids = torch.where(masked, torch.full_like(input_ids, config.mask_token_id), input_ids)
    out = {"input_ids": input_ids.to(args.device), "labels": labels.to(args.device)}
    if fixed_shape:
        positions = padded_positions(masked.numpy(), masked_positions_bound(args.seq, args.mask_ratio))
        out["mlm_positions"] = torch.from_numpy(positions).to(args.device)
    return out


def sync(device: str) -> None:
    """Wait for the device's queued work (CUDA); a CPU has none."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def train_step(model, optimizer, batch, args, dtype: torch.dtype) -> float:
    """One forward + backward + AdamW step; returns its time in seconds on `args.timer`."""
    sync(args.device)
    start = args.timer()
    with torch.autocast(args.device.split(":")[0], dtype=dtype, enabled=dtype != torch.float32):
        loss = model(**batch).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    sync(args.device)
    return args.timer() - start


def step_flops(config, args, kind: str, every_token: bool = False) -> float:
    """`pretraining.flops` FLOPs of one step of `args.batch` x `args.seq` tokens whose LM head projects the masked
    ones (MLM), all but each sequence's last (CLM), or every one (`every_token`: the native MLM head)."""
    tokens = args.batch * args.seq
    projected = round(tokens * args.mask_ratio) if kind == "mlm" else args.batch * (args.seq - 1)
    return tokens * training_flops_per_token(config, args.seq, (tokens if every_token else projected) / tokens)


def matmul_peak(device: str, dtype: torch.dtype, size: int, timer, repeats: int = 2, trials: int = 10) -> float:
    """FLOP/s of a large square matmul (best of `trials`), the roofline the achieved FLOP/s is compared with."""
    a, b = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(2))
    a @ b
    best = float("inf")
    for _ in range(trials):
        sync(device)
        start = timer()
        for _ in range(repeats):
            a @ b
        sync(device)
        best = min(best, timer() - start)
    return 2 * size**3 * repeats / best


def time_pair(models: dict, batch: dict, args, dtype) -> dict[str, list[float]]:
    """Interleave the models step by step (ABAB...) so machine noise hits both alike; drop warmup steps."""
    optimizers = {
        name: torch.optim.AdamW(m.parameters(), lr=1e-4, betas=(0.9, 0.95), eps=1e-5, weight_decay=0.1, fused=True)
        for name, m in models.items()
    }
    times = {name: [] for name in models}
    for step in range(args.warmup + args.steps):
        for name, model in models.items():
            seconds = train_step(model, optimizers[name], batch, args, dtype)
            if step >= args.warmup:
                times[name].append(seconds)
    return times


def report_pair(kind, models, times, config, args, peak) -> dict[str, float]:
    """Print one row per model; return the ours / reference throughput ratios (best step and median step)."""
    flops = [step_flops(config, args, kind, every_token) for every_token in (False, kind == "mlm")]
    for name, model_flops in zip(models, flops):
        print_row(name, 28, times[name], args.batch * args.seq, model_flops, peak)
    return {**speedup(*(times[name] for name in reversed(models))), "flops": flops[1] / flops[0]}


def table_header(width: int) -> None:
    print(
        f"| {'model':<{width}} | {'tokens/s':>10} | {'best ms':>9} | {'median ms':>9} | {'GFLOP/s':>9} | {'%peak':>7} |"
    )
    print(f"|{'-' * (width + 2)}|{'-' * 12}|{'-' * 11}|{'-' * 11}|{'-' * 11}|{'-' * 9}|")


def print_row(name: str, width: int, times: list[float], tokens: int, flops: float, peak: float) -> None:
    """One model's row: throughput and FLOP/s of its best step, its best and median step times."""
    best, median = min(times), statistics.median(times)
    print(
        f"| {name:<{width}} | {tokens / best:>10,.0f} | {1e3 * best:>9.1f} | {1e3 * median:>9.1f} "
        f"| {flops / best / 1e9:>9.1f} | {100 * flops / best / peak:>6.1f}% |"
    )


def speedup(slow: list[float], fast: list[float]) -> dict[str, float]:
    """How much faster `fast`'s steps are than `slow`'s: on best steps and on medians."""
    return {"best": min(slow) / min(fast), "median": statistics.median(slow) / statistics.median(fast)}


def report_compile(config, args, dtype, peak) -> dict[str, float]:
    """Eager vs regional compile of our models (MLM with the fixed-shape head, CLM): one table, compiled / eager
    throughput ratios (best step, median step)."""
    print()
    table_header(36)
    tokens, ratios = args.batch * args.seq, {}
    for kind in cli.split_list(args.pairs):
        eager = (EuroBertClmMlmForMaskedLM if kind == "mlm" else EuroBertClmMlmForCausalLM)(config)
        eager.set_attn_implementation(args.attn)
        eager = eager.to(args.device).train()
        label = f"ours {kind.upper()}{', fixed-shape head' if kind == 'mlm' else ''}"
        compiled = copy.deepcopy(eager)  # same weights, every decoder layer compiled in place as `compile: regional`
        compile_decoder_layers(compiled)
        models = {f"{label}, eager": eager, f"{label}, regional": compiled}
        batch = make_batch(kind, config, args, fixed_shape=kind == "mlm")
        times = time_pair(models, batch, args, dtype)
        for name in models:
            print_row(name, 36, times[name], tokens, step_flops(config, args, kind), peak)
        ratios[kind] = speedup(*times.values())
        del models, eager
    print()
    for kind, ratio in ratios.items():
        print(
            f"{kind.upper()} throughput regional compile / eager: {ratio['best']:.2f}x on best steps, "
            f"{ratio['median']:.2f}x on medians"
        )
    return ratios


def fitting_batch(peaks: dict[int, float], limit: float, multiple: int = 8) -> int | None:
    """The largest micro-batch (a multiple of `multiple`) whose peak memory fits in `limit` bytes, extrapolated
    linearly from the two largest measured `peaks` ({batch: peak bytes}: weights, gradients and AdamW states are the
    fixed part, activations grow with the batch); None when fewer than two batches were measured or none fits."""
    if len(peaks) < 2:
        return None
    (b1, m1), (b2, m2) = sorted(peaks.items())[-2:]
    per_sequence = (m2 - m1) / (b2 - b1)
    if per_sequence <= 0:
        return None
    batch = int((limit - (m2 - per_sequence * b2)) / per_sequence) // multiple * multiple
    return batch if batch >= multiple else None


def mfu_row(config, architecture: str, mode: str, batch_size: int, attn: str, args, peak: float) -> dict:
    """One MFU measurement: a fresh model (compiled anew for `regional`, so each batch size gets its own static
    graph), MLM 40% with the fixed-shape head, bf16 autocast, `args.warmup` untimed steps first, and its peak CUDA
    memory; a step that fails (out of memory, a compile failure) is a row with `error`, the other rows still run."""
    run = argparse.Namespace(**{**vars(args), "seq": args.mfu_seq, "batch": batch_size})
    row = {"architecture": architecture, "mode": mode, "batch": batch_size, "seq": run.seq, "attn": attn}
    on_gpu, model = args.device.startswith("cuda"), None
    try:
        torch.manual_seed(0)
        model = EuroBertClmMlmForMaskedLM(config)
        model.set_attn_implementation(attn)
        model = model.to(args.device).train()
        if mode == "regional":
            torch._dynamo.reset()
            compile_decoder_layers(model)
        batch = make_batch("mlm", config, run, fixed_shape=True)
        if on_gpu:
            torch.cuda.reset_peak_memory_stats()
        times = time_pair({"model": model}, batch, run, torch.bfloat16)["model"]
        memory_gb = torch.cuda.max_memory_allocated() / 1e9 if on_gpu else None
    except Exception as error:
        row["error"] = (
            "out of memory"
            if isinstance(error, torch.OutOfMemoryError)
            else f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        )
        return row
    finally:
        del model
        if on_gpu:
            torch.cuda.empty_cache()
    tokens, best = run.batch * run.seq, min(times)
    flops = step_flops(config, run, "mlm")
    spec = bf16_peak_flops(torch.cuda.get_device_name()) if on_gpu else None
    row.update(
        tokens_per_s=tokens / best,
        step_ms_best=1e3 * best,
        step_ms_median=1e3 * statistics.median(times),
        tflops=flops / best / 1e12,
        mfu=flops / best / spec if spec else None,
        share_of_measured_peak=flops / best / peak,
        peak_memory_gb=memory_gb,
    )
    return row


def print_mfu_row(row: dict) -> None:
    where = (
        f"{row['architecture']} architecture, {row['mode']}, MLM 40%, bf16 autocast, {row['attn']}, "
        f"batch {row['batch']} x {row['seq']}"
    )
    if "error" in row:
        print(f"{where}: {row['error']}")
        return
    mfu = f"MFU {100 * row['mfu']:.1f}% of the bf16 spec peak, " if row["mfu"] is not None else ""
    memory = f", peak memory {row['peak_memory_gb']:.1f} GB" if row["peak_memory_gb"] is not None else ""
    print(
        f"{where}: {row['tokens_per_s']:,.0f} tokens/s, {row['tflops']:.2f} TFLOP/s, {mfu}"
        f"{100 * row['share_of_measured_peak']:.1f}% of the measured bf16 matmul peak{memory}"
    )


def report_mfu(args, peak: float, figures: dict) -> None:
    """bf16-autocast MFU of each `--mfu_architecture` training MLM 40% (fixed-shape head) at `--mfu_seq`, for each
    `--mfu_batch`, eager and, with `--compile regional`, compiled; flash_attention_2 when importable, else sdpa. Rows
    go to `figures["mfu"]` (and `--json`) as they are measured."""
    try:
        import flash_attn  # noqa: F401

        attn = "flash_attention_2"
    except ImportError:
        attn = "sdpa"
    modes = ["eager"] + (["regional"] if args.compile == "regional" else [])
    rows = figures.setdefault("mfu", [])
    for architecture in cli.split_list(args.mfu_architecture):
        config = load_architecture(architecture)
        batches = cli.split_list(args.mfu_batch)
        numbered = [int(b) for b in batches if b != "max"]
        peaks, largest = {}, None
        for mode in modes:  # every eager row first: a compile that runs out of time loses only compiled rows
            for batch_size in numbered:
                row = mfu_row(config, architecture, mode, batch_size, attn, args, peak)
                if mode == "eager" and row.get("peak_memory_gb") is not None:
                    peaks[batch_size] = row["peak_memory_gb"] * 1e9
                rows.append(row)
                print_mfu_row(row)
                write_json(args.json, figures)
            if mode == "eager" and "max" in batches:
                largest = fitting_batch(peaks, args.memory_gb * 1e9) if args.memory_gb else None
                if largest is None or largest <= max(numbered, default=0):
                    why = (
                        f"no multiple of 8 above {max(numbered, default=0)} fits in {args.memory_gb} GB"
                        if largest
                        else "needs the CUDA peak memory of two numbered batches and --memory_gb"
                    )
                    rows.append({"architecture": architecture, "mode": "eager", "batch": "max", "error": why})
                    print(f"{architecture} architecture, largest batch: {why}")
                    largest = None
                    write_json(args.json, figures)
            if largest:
                size = largest
                while True:  # the extrapolation may be a little optimistic: step down on out-of-memory
                    row = mfu_row(config, architecture, mode, size, attn, args, peak)
                    if row.get("error") != "out of memory" or size - 8 <= max(numbered):
                        break
                    size -= 8
                row["largest_in_gb"] = args.memory_gb
                rows.append(row)
                print_mfu_row(row)
                write_json(args.json, figures)
    for architecture in cli.split_list(args.mfu_architecture):
        done = {(r["mode"], r["batch"]): r for r in rows if r["architecture"] == architecture and "mfu" in r}
        for (mode, batch_size), row in done.items():
            eager = done.get(("eager", batch_size))
            if mode == "regional" and eager:
                print(
                    f"{architecture} batch {batch_size} regional compile / eager: "
                    f"{eager['step_ms_best'] / row['step_ms_best']:.2f}x"
                )


def write_json(path: str | None, figures: dict) -> None:
    """Write the figures so far (each measurement rewrites the file: a run cut short keeps what it measured)."""
    if path:
        artifacts.write_text_atomic(path, json.dumps(figures, indent=2))


def main(argv: list[str] | None = None) -> dict:
    args = make_parser().parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    dtype = getattr(torch, args.dtype)  # float32 or bfloat16 (--dtype's choices)
    on_gpu = args.device.startswith("cuda")
    if on_gpu and args.memory_gb:  # e.g. 80 on an H200: what fits on an H100
        total = torch.cuda.get_device_properties(args.device).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, args.memory_gb * 1e9 / total))
    # On a shared CPU, one thread's CPU time is the step's cost without the other tenants' work in it.
    cpu_clock = args.clock == "cpu" or (args.clock == "auto" and not on_gpu and args.threads == 1)
    args.timer = time.process_time if cpu_clock else time.perf_counter
    size = args.peak_size or (8192 if on_gpu else 2048)
    peak = matmul_peak(args.device, torch.bfloat16 if on_gpu else torch.float32, size, args.timer)
    config = bench_config(args)
    n_head, n_all = config.vocab_size * config.hidden_size, EuroBertClmMlmForMaskedLM(config).num_parameters()
    device = torch.cuda.get_device_name() if on_gpu else "cpu"
    figures = {
        "setup": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "device": device,
            "argv": sys.argv[1:] if argv is None else argv,
            "matmul_peak_tflops": peak / 1e12,
            "matmul_peak_dtype": "bfloat16" if on_gpu else "float32",
        }
    }
    print(
        f"torch {torch.__version__}, transformers {transformers.__version__}, device {args.device}, "
        f"threads {torch.get_num_threads()}, autocast {args.dtype}, attn {args.attn}, "
        f"clock {'process CPU time' if cpu_clock else 'wall time'}"
    )
    print(
        f"config: vocab {config.vocab_size}, hidden {config.hidden_size}, layers {config.num_hidden_layers}, "
        f"batch {args.batch} x seq {args.seq}; {n_all / 1e6:.1f}M params, LM head {100 * n_head / n_all:.0f}%"
    )
    print(
        f"matmul peak ({'bf16' if on_gpu else 'fp32'}): {peak / 1e9:.1f} GFLOP/s; steps {args.steps} timed "
        f"(+{args.warmup} warmup) per model; tokens/s and GFLOP/s from the best step\n"
    )
    ratios = figures["pairs"] = {}
    if cli.split_list(args.pairs):
        table_header(28)
    for kind in cli.split_list(args.pairs):
        models = build_pair(kind, config, args)
        batch = make_batch(kind, config, args)
        ratios[kind] = report_pair(kind, models, time_pair(models, batch, args, dtype), config, args, peak)
        del models
        write_json(args.json, figures)
    print()
    targets = {"mlm": 1.8, "clm": 1.0}
    for kind, ratio in ratios.items():
        verdict = "meets" if ratio["best"] >= targets[kind] else "BELOW"
        print(
            f"{kind.upper()} throughput ours / reference: {ratio['best']:.2f}x on best steps, {ratio['median']:.2f}x "
            f"on medians ({verdict} the {targets[kind]}x target); FLOP ratio {ratio['flops']:.2f}x"
        )
    if args.compile == "regional" and args.compile_table == "on":
        figures["compile"] = report_compile(config, args, dtype, peak)
        write_json(args.json, figures)
    if args.mfu == "on" or (args.mfu == "auto" and on_gpu):
        # a CPU's bf16 matmul is slow and its peak means little: a small one, for a smoke check only
        bf16_peak = peak if on_gpu else matmul_peak(args.device, torch.bfloat16, 256, args.timer, trials=3)
        figures["setup"]["bf16_matmul_peak_tflops"] = bf16_peak / 1e12
        report_mfu(args, bf16_peak, figures)
    write_json(args.json, figures)
    return figures


if __name__ == "__main__":
    main()
