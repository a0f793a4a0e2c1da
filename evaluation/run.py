"""The fine-tuning grid: every (model, task, learning rate, seed), one result file per run.

    python -m evaluation.run --model out/610m-mlm40-42k,out/610m-clm-42k --tasks sst2,conll2003,squad,scifact \
        --lrs 1e-5,2e-5,5e-5,1e-4,2e-4,5e-4 --seeds 0,1,2,3,4 --output results/
    python -m evaluation.run --model out/tiny --tasks sst2 --lrs 1e-4 --seeds 0 --max_steps 20 --max_train 500 \
        --max_eval 200 --output /tmp/results        # smoke run

Any Hugging Face encoder directory with a tokenizer works (our checkpoints, a BERT, the native EuroBERT): models
load through the Auto classes. Every input is checked before the first run (unknown task, missing dataset files,
model without tokenizer, label set mismatch, empty grid). Results go to
`<output>/<model name>/<task>/lr<lr>-seed<seed>.json`, written atomically; finished runs are skipped on a re-run.
A run whose loss turns NaN/inf stops early and is recorded with status "diverged"; the grid goes on.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import transformers
from tqdm.auto import tqdm
from transformers import AutoConfig, HfArgumentParser

from evaluation import common, extractive_qa, retrieval, sequence_classification, tasks, token_classification

FAMILIES = {
    "sc": sequence_classification,
    "tc": token_classification,
    "qa": extractive_qa,
    "ir": retrieval,
}


@dataclass
class GridArgs:
    """What to run: models x tasks x learning rates x seeds."""

    model: str = field(metadata={"help": "Model directories, comma-separated (the directory name names the model)."})
    tasks: str = field(metadata={"help": f"Task names or task YAML paths, comma-separated ({', '.join(tasks.list_tasks())})."})
    lrs: str = field(default=",".join(f"{lr:g}" for lr in common.PAPER_LRS), metadata={"help": "Learning rates."})
    seeds: str = field(default=",".join(map(str, common.PAPER_SEEDS)), metadata={"help": "Seeds."})
    output: str = field(default="results", metadata={"help": "Results directory."})


@dataclass
class Run:
    model_name: str
    model_path: str
    task: tasks.Task
    lr: float
    seed: int

    def path(self, output: str | os.PathLike) -> Path:
        return Path(output) / self.model_name / self.task.name / f"lr{self.lr:g}-seed{self.seed}.json"


def _split(value: str, cast, what: str) -> list:
    items = [x.strip() for x in value.split(",") if x.strip()]
    try:
        return [cast(x) for x in items]
    except ValueError:
        raise ValueError(f"--{what} must be a comma-separated list of numbers, got {value!r}") from None


def plan(grid: GridArgs, protocol: common.ProtocolArgs) -> tuple[list[Run], dict]:
    """Check every input and list the runs, before any training.

    Returns:
        (runs in model, task, lr, seed order; {model path: tokenizer}).

    Raises:
        ValueError / FileNotFoundError: one line naming the bad input and the fix.
    """
    models = [m.rstrip("/") for m in grid.model.split(",") if m.strip()]
    task_list = [tasks.load_task(t.strip()) for t in grid.tasks.split(",") if t.strip()]
    lrs, seeds = _split(grid.lrs, float, "lrs"), _split(grid.seeds, int, "seeds")
    if not (models and task_list and lrs and seeds):
        raise ValueError("empty grid: give at least one --model, --tasks entry, --lrs value and --seeds value")
    names = [Path(m).name for m in models]
    if len(set(names)) != len(names):
        raise ValueError(f"two models share a directory name ({names}); results are filed by name, rename one")
    tokenizers = {}
    for model in models:
        if not (Path(model) / "config.json").is_file():
            raise FileNotFoundError(f"model directory {model} has no config.json; pass a saved checkpoint directory")
        tokenizers[model] = common.load_tokenizer(model)
        common.model_kwargs(model, protocol.attention)  # refuses --attention causal on encoders without the switch
        for task in task_list:
            common.check_head(model, task.family)
            common.check_labels(model, task)
            if task.family in ("tc", "qa") and not tokenizers[model].is_fast:
                raise ValueError(f"{task.name} needs a fast tokenizer (word ids / offsets); {model} has a slow one")
    for task in task_list:  # loads (and caches) every dataset: missing files and bad labels raise here
        common.task_splits(task, common.FinetuneArgs(**dataclasses.asdict(protocol)))
    runs = [Run(Path(m).name, m, t, lr, s) for m in models for t in task_list for lr in lrs for s in seeds]
    return runs, tokenizers


def is_finished(path: Path) -> bool:
    """A result file exists and parses (an interrupted write never leaves one: writes are atomic)."""
    if not path.is_file():
        return False
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("status") in ("ok", "diverged")
    except json.JSONDecodeError:
        return False


def execute(run: Run, protocol: common.ProtocolArgs, tokenizer, scratch: str) -> dict:
    """Fine-tune and score one run; return the complete result record."""
    args = common.FinetuneArgs(**{**dataclasses.asdict(protocol), "scratch_dir": scratch}, lr=run.lr, seed=run.seed)
    result = FAMILIES[run.task.family].evaluate(run.model_path, run.task, args, tokenizer=tokenizer)
    max_steps, epochs = common.schedule(run.task, args)
    config = {**common.args_dict(args), "scratch_dir": None, "schedule": {"max_steps": max_steps, "epochs": epochs},
              "model_config": AutoConfig.from_pretrained(run.model_path, trust_remote_code=True).model_type}
    return {"model": run.model_name, "model_path": str(Path(run.model_path).resolve()), "task": run.task.name,
            "family": run.task.family, "lr": run.lr, "seed": run.seed, **result, "config": config,
            "versions": common.versions()}


def main(grid: GridArgs, protocol: common.ProtocolArgs) -> list[Path]:
    """Run the grid; return the result files written by this call (finished runs are skipped).

    Args:
        grid: models, tasks, learning rates, seeds, output directory.
        protocol: the fine-tuning settings shared by every run.
    """
    runs, tokenizers = plan(grid, protocol)
    todo = [r for r in runs if not is_finished(r.path(grid.output))]
    print(f"{len(runs)} runs in the grid, {len(runs) - len(todo)} already finished, {len(todo)} to run", file=sys.stderr)
    written = []
    with tempfile.TemporaryDirectory(prefix="finetune-") as scratch:
        progress = tqdm(todo, desc="grid", unit="run")
        for run in progress:
            progress.set_postfix_str(f"{run.model_name} {run.task.name} lr={run.lr:g} seed={run.seed}")
            record = execute(run, protocol, tokenizers[run.model_path], scratch)
            common.write_json_atomic(run.path(grid.output), record)
            written.append(run.path(grid.output))
    return written


def make_parser() -> HfArgumentParser:
    return HfArgumentParser((GridArgs, common.ProtocolArgs))


if __name__ == "__main__":
    transformers.logging.set_verbosity_error()  # per-run load reports would drown the progress bar
    parser = make_parser()
    try:
        grid_args, protocol_args = parser.parse_args_into_dataclasses()
        main(grid_args, protocol_args)
    except (ValueError, FileNotFoundError) as error:  # bad input: one line, no traceback, exit status 2
        parser.error(str(error))
