"""The fine-tuning grid: every (model, task, learning rate, seed), one result file per run.

    python -m evaluation.run --model out/610m-mlm40-42k,out/610m-clm-42k --tasks sst2,conll2003,squad,scifact \
        --lrs 1e-5,2e-5,5e-5,1e-4,2e-4,5e-4 --seeds 0,1,2,3,4 --output results/
    python -m evaluation.run --model out/tiny --tasks sst2 --lrs 1e-4 --seeds 0 --max_steps 20 --max_train 500 \
        --max_eval 200 --output /tmp/results        # smoke run

Any Hugging Face encoder directory with a tokenizer works (our checkpoints, a BERT, the native EuroBERT): models
load through the Auto classes. A model is filed under the name its `run_info.json` records (intermediate
checkpoints: `<run>-<step>`), else its directory name, or under `NAME` with `--model NAME=DIR`.

Every input is checked before the first run (unknown task, missing dataset files, model without tokenizer or with
unreadable weights, label set mismatch, empty grid). Results go to `<output>/<model>/<task>/lr<lr>-seed<seed>.json`,
written atomically, with the identity of what produced them (`evaluation.identity`: model weights, task
definition and data, protocol), the predictions, the library versions and the git commit. A finished run with the
same identity is skipped; one with another identity is refused, naming what changed, unless `--rerun_changed`
(the old file is then moved aside as `<file>.replaced-<time>` and the run redone). Several grid processes (or SLURM
array tasks) may share one output directory: each run is locked while it trains.
A run whose loss turns NaN/inf stops early and is recorded with status "diverged"; the grid goes on.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import transformers
from tqdm.auto import tqdm
from transformers import AutoConfig, HfArgumentParser

from evaluation import (baselines, common, extractive_qa, identity, retrieval, sequence_classification, tasks,
                        token_classification)
from recipes import artifacts

FAMILIES = {
    "sc": sequence_classification,
    "tc": token_classification,
    "qa": extractive_qa,
    "ir": retrieval,
}


@dataclass
class GridArgs:
    """What to run: models x tasks x learning rates x seeds."""

    model: str = field(metadata={"help": "Model directories, comma-separated; NAME=DIR files one under NAME (default: "
                                         "the name in its run_info.json, else the directory name)."})
    tasks: str = field(metadata={"help": f"Task names or task YAML paths, comma-separated ({', '.join(tasks.list_tasks())})."})
    lrs: str = field(default=",".join(f"{lr:g}" for lr in common.PAPER_LRS), metadata={"help": "Learning rates."})
    seeds: str = field(default=",".join(map(str, common.PAPER_SEEDS)), metadata={"help": "Seeds."})
    output: str = field(default="results", metadata={"help": "Results directory."})
    rerun_changed: bool = field(default=False, metadata={
        "help": "Re-run finished runs whose identity (model, task, protocol) changed; the old files are moved aside."})


@dataclass
class Run:
    model_name: str
    model_path: str
    task: tasks.Task
    lr: float
    seed: int
    identity: dict

    def path(self, output: str | os.PathLike) -> Path:
        return artifacts.result_path(output, self.model_name, self.task.name, self.lr, self.seed)


def _split(value: str, cast, what: str) -> list:
    items = [x.strip() for x in value.split(",") if x.strip()]
    try:
        return [cast(x) for x in items]
    except ValueError:
        raise ValueError(f"--{what} must be a comma-separated list of numbers, got {value!r}") from None


_GENERIC_DIR = re.compile(r"(checkpoint|step)-(\d+)")


def model_name(spec: str) -> tuple[str, str]:
    """(name, directory) of one `--model` entry: `NAME=DIR`, else run_info.json's name, else the directory name.

    A bare `checkpoint-N` / `step-N` directory is named after its run (`<run>-checkpoint-N`, `<run>-N`), so two
    runs' checkpoints never share a name.
    """
    name, sep, path = spec.partition("=")
    if not sep:
        name, path = "", spec
    path = path.rstrip("/")
    if not name:
        info = Path(path) / artifacts.RUN_INFO_NAME
        recorded = artifacts.read_json(info, "run info").get("name") if info.is_file() else None
        name = recorded or Path(path).name
        if not recorded and (match := _GENERIC_DIR.fullmatch(name)):
            run_dir = Path(path).resolve().parent
            run_dir = run_dir.parent if run_dir.name == artifacts.INTERMEDIATE_DIR else run_dir
            name = f"{run_dir.name}-{name if match[1] == 'checkpoint' else match[2]}"
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"--model {spec!r}: {name!r} cannot name a results folder; use NAME=DIR")
    return name, path


def plan(grid: GridArgs, protocol: common.ProtocolArgs) -> tuple[list[Run], dict]:
    """Check every input and list the runs with their identities, before any training.

    Returns:
        (runs in model, task, lr, seed order; {model path: tokenizer}).

    Raises:
        ValueError / FileNotFoundError: one line naming the bad input and the fix.
    """
    models = [model_name(m.strip()) for m in grid.model.split(",") if m.strip()]
    task_list = [tasks.load_task(t.strip()) for t in grid.tasks.split(",") if t.strip()]
    lrs, seeds = _split(grid.lrs, float, "lrs"), _split(grid.seeds, int, "seeds")
    if not (models and task_list and lrs and seeds):
        raise ValueError("empty grid: give at least one --model, --tasks entry, --lrs value and --seeds value")
    names = [name for name, _ in models]
    if len(set(names)) != len(names):
        raise ValueError(f"two models share a name ({names}); results are filed by name: use NAME=DIR for one")
    tokenizers, model_ids = {}, {}
    for _, model in models:
        if not (Path(model) / "config.json").is_file():
            raise FileNotFoundError(f"model directory {model} has no config.json; pass a saved checkpoint directory")
        artifacts.check_weights(model)
        tokenizers[model] = common.load_tokenizer(model)
        common.model_kwargs(model, protocol.attention)  # refuses --attention causal on encoders without the switch
        for task in task_list:
            common.check_head(model, task.family)
            common.check_labels(model, task)
            if task.family in ("tc", "qa") and not tokenizers[model].is_fast:
                raise ValueError(f"{task.name} needs a fast tokenizer (word ids / offsets); {model} has a slow one")
        model_ids[model] = identity.model_identity(model)
    task_ids = {}
    for task in task_list:  # loads (and caches) every dataset: missing files and bad labels raise here
        common.task_splits(task, common.FinetuneArgs(**dataclasses.asdict(protocol)))
        task_ids[task.name] = identity.task_identity(task, protocol.source, protocol.data_dir)
    protocol_id = identity.protocol_identity(protocol)
    runs = [Run(name, m, t, lr, s, {"model": model_ids[m], "task": task_ids[t.name], "protocol": protocol_id})
            for name, m in models for t in task_list for lr in lrs for s in seeds]
    return runs, tokenizers


def status(run: Run, output: str | os.PathLike) -> tuple[str, list[str]]:
    """("todo" | "done" | "changed", what differs) for one run's result file.

    "changed" covers a result of another identity, an older format and a corrupt file (results are written
    atomically, so a corrupt one was damaged by something else): none of them is ever silently reused.
    """
    path = run.path(output)
    if not path.is_file():
        return "todo", []
    try:
        record = artifacts.read_result(path)
    except ValueError as error:
        return "changed", [str(error)]
    if record.get("status") not in ("ok", "diverged"):
        return "changed", [f"status {record.get('status')!r}"]
    differences = identity.diff(record.get("identity", {}), run.identity)
    return ("changed", differences) if differences else ("done", [])


def execute(run: Run, protocol: common.ProtocolArgs, tokenizer, scratch: str) -> dict:
    """Fine-tune and score one run; return the complete result record."""
    args = common.FinetuneArgs(**{**dataclasses.asdict(protocol), "scratch_dir": scratch}, lr=run.lr, seed=run.seed)
    args = dataclasses.replace(args, max_length=common.max_length(args, run.model_path))
    result = FAMILIES[run.task.family].evaluate(run.model_path, run.task, args, tokenizer=tokenizer)
    max_steps, epochs = common.schedule(run.task, args)
    config = {**{k: v for k, v in common.args_dict(args).items() if k not in ("scratch_dir", "data_dir")},
              "schedule": {"max_steps": max_steps, "epochs": epochs},
              "model_config": AutoConfig.from_pretrained(run.model_path, trust_remote_code=True).model_type}
    baseline = baselines.trivial_baseline(run.task, common.task_splits(run.task, args))
    return {"format": artifacts.RESULT_FORMAT, "model": run.model_name, "task": run.task.name,
            "family": run.task.family, "lr": run.lr, "seed": run.seed, **result, "trivial_baseline": baseline,
            "config": config, "identity": run.identity, "versions": common.versions(),
            "git_commit": artifacts.git_commit()}


def _move_aside(path: Path) -> Path:
    aside = path.with_name(f"{path.name}.replaced-{time.strftime('%Y%m%dT%H%M%S')}")
    path.rename(aside)
    return aside


def check(grid: GridArgs, protocol: common.ProtocolArgs) -> tuple[list[Run], dict]:
    """Plan the grid and refuse finished results made by something else; returns (runs to do, tokenizers)."""
    runs, tokenizers = plan(grid, protocol)
    states = {id(run): status(run, grid.output) for run in runs}
    changed = [run for run in runs if states[id(run)][0] == "changed"]
    if changed and not grid.rerun_changed:
        run = changed[0]
        raise ValueError(f"{len(changed)} finished result(s) were made by something else, e.g. {run.path(grid.output)}: "
                         f"{'; '.join(states[id(run)][1][:4])}; pass --rerun_changed to redo them (old files are "
                         "moved aside) or another --output")
    todo = [run for run in runs if states[id(run)][0] != "done"]
    print(f"{len(runs)} runs in the grid, {len(runs) - len(todo)} already finished, {len(todo)} to run", file=sys.stderr)
    return todo, tokenizers


def run_all(todo: list[Run], tokenizers: dict, grid: GridArgs, protocol: common.ProtocolArgs) -> list[Path]:
    """Train and score every run of `todo` (each locked while it runs); return the result files written."""
    written = []
    with tempfile.TemporaryDirectory(prefix="finetune-") as scratch:
        progress = tqdm(todo, desc="grid", unit="run")
        for run in progress:
            progress.set_postfix_str(f"{run.model_name} {run.task.name} lr={run.lr:g} seed={run.seed}")
            path = run.path(grid.output)
            try:
                with artifacts.exclusive_lock(path.with_name(f".{path.name}.lock"), f"run {path}"):
                    state, _ = status(run, grid.output)  # another worker may have finished it meanwhile
                    if state == "done":
                        continue
                    for stale in artifacts.stale_temp_files(path):  # left by a killed writer of this very file
                        stale.unlink()
                    if state == "changed":
                        _move_aside(path)
                    record = execute(run, protocol, tokenizers[run.model_path], scratch)
                    artifacts.write_json_atomic(path, record, indent=None)
                    written.append(path)
            except artifacts.LockHeld:  # another grid process is running it
                continue
    print(f"wrote {len(written)} result file(s) to {grid.output}", file=sys.stderr)
    return written


def main(grid: GridArgs, protocol: common.ProtocolArgs) -> list[Path]:
    """Run the grid; return the result files written by this call (finished runs are skipped).

    Args:
        grid: models, tasks, learning rates, seeds, output directory.
        protocol: the fine-tuning settings shared by every run.
    """
    return run_all(*check(grid, protocol), grid, protocol)


def make_parser() -> HfArgumentParser:
    return HfArgumentParser((GridArgs, common.ProtocolArgs))


def cli(argv: list[str] | None = None) -> None:
    """The command line: bad input -> one line and exit status 2, before any run starts."""
    transformers.logging.set_verbosity_error()  # per-run load reports would drown the progress bar
    parser = make_parser()
    try:
        grid_args, protocol_args = parser.parse_args_into_dataclasses(args=argv)
        todo, tokenizers = check(grid_args, protocol_args)
    except (ValueError, FileNotFoundError) as error:
        parser.error(str(error))
    run_all(todo, tokenizers, grid_args, protocol_args)


if __name__ == "__main__":
    cli()
