"""Share of the fine-tuning grid's wall time spent outside optimizer steps (target <= 15%).

    python -m bench.bench_eval                      # tiny architecture, sst2, 2 LRs x 2 seeds, 300 steps per run
    python -m bench.bench_eval --task conll2003 --max_steps 100

Runs the real grid runner on the tiny architecture (a small BPE trained on the bundle), 2 LRs x 2 seeds, and times
every optimizer step with a Trainer callback; everything else (input checks, data, model loading, prediction,
metrics, result files) is overhead. It also times the full collection every Trainer.train starts with, with the
grid's start-up heap frozen out of the collector (`evaluation.run.run_all`) and unfrozen.
"""

import argparse
import gc
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch
import transformers
from transformers import TrainerCallback

from core.paths import resolve_data_dir
from evaluation import finetune_args, run
from tests.fixtures.finetuning_callback import on_every_finetuning
from tests.fixtures.tiny_models import build_tiny_eurobert, build_tiny_tokenizer


class StepTimer(TrainerCallback):
    """Wall time inside optimizer steps (on_step_begin -> on_step_end, CUDA synchronised)."""

    def __init__(self):
        self.seconds, self.steps, self._start = 0.0, 0, None

    def _now(self):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        return time.perf_counter()

    def on_step_begin(self, args, state, control, **kwargs):
        self._start = self._now()

    def on_step_end(self, args, state, control, **kwargs):
        self.seconds += self._now() - self._start
        self.steps += 1


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--task", default="sst2")
    add("--max_steps", type=int, default=300)
    add("--max_train", type=int, default=20000)
    add("--max_eval", type=int, default=500)
    add("--max_length", type=int, default=128)
    add("--data_dir")
    args = parser.parse_args(argv)
    transformers.logging.set_verbosity_error()
    data_dir = resolve_data_dir(args.data_dir)
    with on_every_finetuning(StepTimer()) as timer, tempfile.TemporaryDirectory() as tmp:
        model = build_tiny_eurobert(Path(tmp) / "tiny", build_tiny_tokenizer(data_dir))
        grid = run.GridArgs(model=str(model), tasks=args.task, lrs="1e-4,5e-4", seeds="0,1", output=f"{tmp}/results")
        protocol = finetune_args.ProtocolArgs(
            max_steps=args.max_steps,
            max_train=args.max_train,
            max_eval=args.max_eval,
            max_length=args.max_length,
            data_dir=str(data_dir),
        )
        start = time.perf_counter()
        run.run_grid(grid, protocol)
        wall = time.perf_counter() - start
    outside = wall - timer.seconds
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else f"CPU ({torch.get_num_threads()} threads)"
    print(
        f"device: {device}; task {args.task}; 4 runs x {args.max_steps} steps, batch 32, max_length {args.max_length}"
    )
    print(
        f"wall {wall:.1f} s; optimizer steps {timer.seconds:.1f} s over {timer.steps} steps "
        f"({1000 * timer.seconds / max(timer.steps, 1):.1f} ms/step)"
    )
    print(f"share of wall time outside optimizer steps: {100 * outside / wall:.1f}% (target <= 15%)")
    frozen = timed_collection()
    gc.unfreeze()
    unfrozen = timed_collection()
    gc.freeze()
    print(
        f"a full collection (Trainer.train starts with one): {1000 * frozen:.1f} ms with the grid's start-up heap "
        f"frozen, {1000 * unfrozen:.0f} ms without ({unfrozen / max(frozen, 1e-9):.0f}x)"
    )


def timed_collection() -> float:
    start = time.perf_counter()
    gc.collect()
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
