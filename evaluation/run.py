"""The fine-tuning grid: every (model, task, learning rate, seed), one result file per run (docs/evaluation.md).

    python -m evaluation.run --model out/610m-mlm40-42k,out/610m-clm-42k --tasks sst2,conll2003,squad,scifact \
        --lrs 1e-5,2e-5,5e-5,1e-4,2e-4,5e-4 --seeds 0,1,2,3,4 --output results/ [--workers 4]
    python -m evaluation.run --model MLMvsCLM/610m-mlm40-42k --tasks sst2 --save_models sst2:5e-5:0   # a Hub id
    python -m evaluation.run --model out/tiny --tasks sst2 --lrs 1e-4 --seeds 0 --max_steps 20 --max_train 500 \
        --max_eval 200 --output /tmp/results        # smoke run

Every input is checked before the first run. Each run writes `<output>/<model>/<task>/lr<lr>-seed<seed>.json`
atomically with the identity of what produced it (`evaluation.identity`): a finished run of the same identity is
skipped, one of another refused unless `--rerun_changed` (then moved aside with its saved model, and redone). Grid
processes of one protocol may share an output: each run is locked while it trains, each `<model>/<task>/` folder
claimed for one protocol (`.protocol`) first. A run whose loss turns NaN/inf is recorded as "diverged". Retrieval
tasks with equal `identity.ir_training_key` are trained once per (model, lr, seed) and scored on each.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import importlib
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import transformers
from tqdm.auto import tqdm
from transformers import HfArgumentParser  # transformers' configs (AutoConfig) import torch: used in a run

from core import artifacts, cli, model_folders, paper, run_folders, store
from core.paths import REPO_ROOT
from evaluation import finetune_args, identity, resolve, tasks

# The module of each task family. The families and the fine-tuning loop load torch and the Trainer, so they are imported
# where a run needs them: arguments, task names and model paths are checked first, in a second rather than a minute.
FAMILIES = {"sc": "sequence_classification", "tc": "token_classification", "qa": "extractive_qa", "ir": "retrieval"}


def family_module(family: str):
    """The module of a task family (`FAMILIES`), imported on first use."""
    return importlib.import_module(f"evaluation.{FAMILIES[family]}")


@dataclass
class GridArgs:
    """What to run: models x tasks x learning rates x seeds, and how (workers, models kept)."""

    model: str = field(
        metadata={
            "help": "Model directories or Hub ids (org/name[@revision]), comma-separated (a "
            "directory whose name holds a comma is one entry); "
            "NAME=DIR or NAME=ID files one under NAME (default: the name in its "
            "run_info.json, else the directory or repo name)."
        }
    )
    tasks: str = field(
        metadata={"help": f"Task names or task YAML paths, comma-separated ({', '.join(tasks.list_tasks())})."}
    )
    lrs: str = field(default=",".join(f"{lr:g}" for lr in paper.PAPER_LRS), metadata={"help": "Learning rates."})
    seeds: str = field(default=",".join(map(str, paper.PAPER_SEEDS)), metadata={"help": "Seeds."})
    output: str = field(default="results", metadata={"help": "Results directory."})
    rerun_changed: bool = field(
        default=False,
        metadata={
            "help": "Re-run finished runs whose identity (model, task, protocol) changed; the old files are "
            "moved aside."
        },
    )
    workers: int = field(
        default=1,
        metadata={
            "help": "Grid processes run side by side (they share the GPU; each gets cores // workers CPU "
            "threads); each "
            "run computes what it computes in a sequential grid."
        },
    )
    save_models: str = field(
        default="",
        metadata={
            "help": "Keep the fine-tuned model of these runs beside their results (<output>/<model>/<task>/"
            "lr<lr>-seed<seed>.model/): 'all', or a comma list of TASK and TASK:LR:SEED entries; default: none. "
            "A finished run whose model is asked for and missing is run again."
        },
    )


@dataclass
class Run:
    """One (model, task, lr, seed) of the grid."""

    model_name: str  # the name results are filed under
    model_path: str  # the local checkpoint directory (a Hub model's snapshot in the Hub cache)
    task: tasks.Task
    lr: float
    seed: int
    identity: dict  # what decides the result (`evaluation.identity`); compared with a finished result's
    source: str | None = None  # a Hub model's "org/name@commit" (recorded in the result)
    training: str | None = None  # ir: `identity.ir_training_key` (equal keys, one model, lr, seed: one fine-tuning)
    save_model: bool = False  # keep the fine-tuned model (`--save_models`); never part of the identity

    def path(self, output: str | os.PathLike) -> Path:
        return store.result_path(output, self.model_name, self.task.name, self.lr, self.seed)

    def model_dir(self, output: str | os.PathLike) -> Path:
        """Where `--save_models` keeps this run's fine-tuned model: beside its result, `lr<lr>-seed<seed>.model/`."""
        return self.path(output).with_suffix(".model")


class GridFailed(RuntimeError):
    """A worker process of a `--workers` grid failed; the message holds the end of its log."""


def _split(value: str, cast, what: str) -> list:
    items = cli.split_list(value)
    try:
        return [cast(x) for x in items]
    except ValueError:
        raise ValueError(f"--{what} must be a comma-separated list of numbers, got {value!r}") from None


def models_to_save(selection: str, task_list: list, lrs: list[float], seeds: list[int]) -> set[tuple[str, float, int]]:
    """The (task, lr, seed) whose fine-tuned model `--save_models` keeps for every model: `selection` is "" (none),
    "all", or a comma list of TASK and TASK:LR:SEED entries; one naming no run of the grid raises ValueError."""
    names = [task.name for task in task_list]
    grid = {(t, lr, s) for t in names for lr in lrs for s in seeds}
    entries = cli.split_list(selection)
    if entries == ["all"]:
        return grid
    chosen = set()
    for entry in entries:
        task, *point = entry.split(":")
        try:
            key = (task, float(point[0]), int(point[1])) if len(point) == 2 else None
        except ValueError:
            key = None
        if not (matched := {run for run in grid if run[0] == task and (not point or run == key)}):
            raise ValueError(
                f"--save_models entry {entry!r} names no run of this grid: use 'all' or TASK / "
                f"TASK:LR:SEED with a task of {names}, an LR of {[f'{x:g}' for x in lrs]} and a "
                f"seed of {seeds}"
            )
        chosen |= matched
    return chosen


def check_study_folder(output, models: list[tuple[str, str, str]]) -> None:
    """Refuse a model that is not the study's own checkpoint in a study's results folder."""
    if (study := run_folders.study_of(output)) is None:
        return
    root = Path(output).resolve().parent
    for name, model, _ in models:
        if root not in Path(model).resolve().parents or not run_folders.is_study_model(study, name):
            raise ValueError(
                f"--output {output} is the {study['study']} study's results folder, for its own "
                f"checkpoints; {name} is not one of them: evaluate it into a folder of its own "
                f"(--output mine/) and report both (python -m analysis.report {output} mine/ --output "
                "DIR)"
            )


def check_arguments(grid: GridArgs, protocol: finetune_args.ProtocolArgs) -> tuple:
    """The grid's inputs checked without torch: (tasks, LRs, seeds, [(name, path, source)], saved runs)."""
    if grid.workers < 1:
        raise ValueError(f"--workers {grid.workers} must be >= 1")
    artifacts.check_output_dir(grid.output, "--output")
    specs = cli.split_paths(grid.model)
    task_list = [tasks.load_task(t) for t in cli.split_list(grid.tasks)]
    lrs, seeds = _split(grid.lrs, float, "lrs"), _split(grid.seeds, int, "seeds")
    if not (specs and task_list and lrs and seeds):
        raise ValueError("empty grid: give at least one --model, --tasks entry, --lrs value and --seeds value")
    if bad := [lr for lr in lrs if not 0 < lr < math.inf]:
        raise ValueError(f"--lrs {bad} must be finite and > 0 (paper: 1e-5 to 5e-4)")
    if bad := [seed for seed in seeds if not 0 <= seed < 2**32]:
        raise ValueError(f"--seeds {bad} must be in [0, 2**32) (numpy's and torch's seed range; paper: 0,1,2)")
    if not 0 <= protocol.warmup_ratio < 1:
        raise ValueError(f"--warmup_ratio {protocol.warmup_ratio} must be in [0, 1) (paper: 0.1)")
    names = [task.name for task in task_list]
    if dupes := sorted({n for n in names if names.count(n) > 1}):
        files = [str(task.path) for task in task_list if task.name == dupes[0]]
        raise ValueError(
            f"--tasks names task {dupes[0]!r} more than once ({', '.join(files)}); results and caches "
            "are filed by task name: give each task YAML a unique name"
        )
    if protocol.peft != "none" and (ir := [task.name for task in task_list if task.family == "ir"]):
        raise ValueError(
            f"--peft {protocol.peft} covers SC/TC/QA tasks; ir task {ir[0]} fine-tunes fully only: run "
            "the ir tasks in a grid without --peft"
        )
    saved = models_to_save(grid.save_models, task_list, lrs, seeds)
    models = [resolve.resolve_model(spec)[:3] for spec in specs]
    names = [name for name, _, _ in models]
    if len(set(names)) != len(names):
        raise ValueError(f"two models share a name ({names}); results are filed by name: use NAME=DIR for one")
    check_study_folder(grid.output, models)
    return task_list, lrs, seeds, models, saved


def list_runs(grid: GridArgs, protocol: finetune_args.ProtocolArgs) -> tuple[list[Run], dict]:
    """Check every input and list the runs with their identities, before any training: (runs in model, task,
    lr, seed order; {model path: tokenizer})."""
    task_list, lrs, seeds, models, saved = check_arguments(grid, protocol)
    from evaluation import common, model_inputs  # torch: once the arguments, tasks and model paths are checked

    tokenizers, model_ids, inputs = {}, {}, {}
    for _, model, _ in models:
        if not (Path(model) / "config.json").is_file():
            raise FileNotFoundError(f"model directory {model} has no config.json; pass a saved checkpoint directory")
        model_folders.check_loadable(model)
        tokenizers[model] = model_inputs.load_finetuning_tokenizer(model)
        resolved = model_inputs.resolve_inputs(protocol, model)  # refuses what cannot fit
        if any(task.family == "qa" for task in task_list) and 2 * resolved.doc_stride >= resolved.qa_max_length:
            raise ValueError(
                f"--doc_stride {protocol.doc_stride} must be below half the QA window of "
                f"{resolved.qa_max_length} tokens (--qa_max_length, capped for {model}): a window holds "
                f"the question, the overlap and new context; pass at most "
                f"{(resolved.qa_max_length - 1) // 2} (paper: 128 of 384)"
            )
        inputs[model] = resolved
        for task in task_list:
            model_inputs.check_head(model, task.family)
            model_inputs.check_labels(model, task)
            if task.family in ("tc", "qa") and not tokenizers[model].is_fast:
                raise ValueError(f"{task.name} needs a fast tokenizer (word ids / offsets); {model} has a slow one")
        model_ids[model] = model_folders.checkpoint_identity(model)
    task_ids, training = {}, {}
    for task in task_list:  # loads (and caches) every dataset: missing files and bad labels raise here
        splits = common.task_splits(task, protocol.for_run())
        task_ids[task.name] = identity.task_identity(task, protocol.source, protocol.data_dir)
        if task.family == "ir":
            budget = finetune_args.schedule(task, protocol)
            training[task.name] = identity.ir_training_key(task, splits["train"], budget)
    runs = [
        Run(
            name,
            m,
            t,
            lr,
            s,
            {
                "model": model_ids[m],
                "task": task_ids[t.name],
                "protocol": identity.protocol_identity(protocol, t.family),
                "scoring": identity.scoring_identity(t.family),
                "inputs": model_inputs.inputs_identity(inputs[m], t.family),
            },
            source=source,
            training=training.get(t.name),
            save_model=(t.name, lr, s) in saved,
        )
        for name, m, source in models
        for t in task_list
        for lr in lrs
        for s in seeds
    ]
    return runs, tokenizers


def units(runs: list[Run]) -> list[list[Run]]:
    """The runs grouped by fine-tuning (ir runs of one model, lr, seed and training key form one), in run order."""
    groups: dict = {}
    for run in runs:
        key = (run.model_path, run.lr, run.seed, run.training) if run.training else id(run)
        groups.setdefault(key, []).append(run)
    return list(groups.values())


def status(run: Run, output: str | os.PathLike) -> tuple[str, list[str]]:
    """("todo" | "done" | "changed", what differs) of one run's result file (`store.result_state`); "todo" too
    when its model is asked for (`run.save_model`) and not saved beside it with the same identity."""
    state, why = store.result_state(run.path(output), run.identity)
    if state == "changed" and why[0].startswith(("protocol.", "inputs.")):
        recorded = store.record_identity(store.read_result(run.path(output)))
        if recorded != identity.scoped(run.task.family, recorded):
            why = [
                f"it records settings its family does not read (written before identities left them out): run "
                f"`{store.MIGRATE_COMMAND}` once"
            ]
    if (
        state == "done"
        and run.save_model
        and not _model_saved(run, output)
        and store.scored(store.read_result(run.path(output)))
    ):
        return "todo", ["fine-tuned model asked for (--save_models) but not saved"]
    return state, why


def _model_saved(run: Run, output) -> bool:
    try:
        info = store.read_finetune_info(run.model_dir(output))
    except ValueError:  # unreadable or of another format: the model is saved again
        return False
    return info is not None and not store.identity_diff(info.get("identity") or {}, run.identity)


def execute(
    unit: list[Run], protocol: finetune_args.ProtocolArgs, tokenizer, scratch: str
) -> list[tuple[Run, dict, object]]:
    """Fine-tune once for `unit` and score each of its runs: (run, result record, `common.Finetuned`) per run."""
    from transformers import AutoConfig

    from evaluation import baselines, common, model_inputs

    first = unit[0]
    args = model_inputs.resolve_inputs(
        protocol.for_run(scratch_dir=scratch, lr=first.lr, seed=first.seed), first.model_path
    )
    family = family_module(first.task.family)
    finetuned = family.finetune(first.model_path, first.task, args, tokenizer=tokenizer)
    max_steps, epochs = finetune_args.schedule(first.task, args)
    config = {
        **{k: v for k, v in dataclasses.asdict(args).items() if k not in ("scratch_dir", "data_dir")},
        "schedule": {"max_steps": max_steps, "epochs": epochs},
        "train_examples": len(common.task_splits(first.task, args)["train"]),  # the budget a card publishes
        "model_config": AutoConfig.from_pretrained(first.model_path, trust_remote_code=True).model_type,
        "model_run": model_run(first.model_path),
    }
    out = []
    for run in unit:
        fields = {
            **family.score(finetuned, run.task, args),
            "trivial_baseline": baselines.trivial_baseline(run.task, common.task_splits(run.task, args)),
            "config": config,
        }
        record = store.new_result(
            run.model_name,
            run.task.name,
            run.task.family,
            run.lr,
            run.seed,
            fields,
            run.identity,
            run_folders.package_versions("sentence_transformers"),
            store.pretrain_seed(run.model_name),
            model_source=run.source,
            shared_training=[r.task.name for r in unit] if len(unit) > 1 else None,
        )  # one fine-tuning, several tasks
        out.append((run, record, finetuned))
    return out


def model_run(model_path) -> dict | None:
    """The model's parameters and step as its run_info.json records them (the report's parameters and step columns
    for a name outside the study's grammar); None for a model without one, or with one of another format."""
    try:
        info = run_folders.read_run_info(model_path)
    except ValueError:  # an older run_info: the report shows "?", as for a model without one
        return None
    return info and {
        "parameters": info["parameters"]["total"],
        "steps": info["steps"],
        "max_steps": info["run_config"]["training_args"]["max_steps"],
    }


def save_model(run: Run, record: store.Result, finetuned, output) -> Path:
    """Keep a run's fine-tuned model at `run.model_dir(output)`, atomically, with its `finetune_info.json`."""
    info = {
        "base_model": run.model_name,
        "base_model_source": run.source,
        "task": run.task.name,
        "family": run.task.family,
        "lr": run.lr,
        "seed": run.seed,
        "result": run.path(output).name,
        **store.model_info(record),
    }
    with artifacts.atomic_directory(run.model_dir(output)) as staging:
        family_module(run.task.family).save(finetuned, staging)
        store.write_finetune_info(staging, info)
    return run.model_dir(output)


def check(grid: GridArgs, protocol: finetune_args.ProtocolArgs) -> tuple[list[Run], dict]:
    """Plan the grid and refuse finished results made by something else: (runs to do, tokenizers)."""
    runs, tokenizers = list_runs(grid, protocol)
    states = {id(run): status(run, grid.output) for run in runs}
    changed = [run for run in runs if states[id(run)][0] == "changed"]
    if changed and not grid.rerun_changed:
        run = changed[0]
        raise ValueError(
            f"{len(changed)} finished result(s) were made by something else, "
            f"e.g. {run.path(grid.output)}: {'; '.join(states[id(run)][1][:4])}; "
            "pass --rerun_changed to redo them (old files are moved aside) or another --output"
        )
    todo = [run for run in runs if states[id(run)][0] != "done"]
    for run in todo:  # --save_models replaces <result>.model/: only one this grid saved (it holds finetune_info.json)
        model_dir = run.model_dir(grid.output)
        if run.save_model and model_dir.exists() and not (model_dir / store.FINETUNE_INFO_NAME).is_file():
            raise ValueError(
                f"{model_dir} exists and was not saved by the grid (no {store.FINETUNE_INFO_NAME}); move "
                "it away or use another --output (nothing was written)"
            )
    shared = (
        f" ({len(units(todo))} fine-tunings: retrieval tasks with the same training pairs share one)"
        if len(units(todo)) < len(todo)
        else ""
    )
    print(
        f"{len(runs)} runs in the grid, {len(runs) - len(todo)} already finished, {len(todo)} to run{shared}",
        file=sys.stderr,
    )
    return todo, tokenizers


class GridMixed(ValueError):
    """A concurrent grid of another identity wrote into this grid's output: stop rather than mix or redo its runs."""


def _claim(unit: list[Run], output, stack: contextlib.ExitStack, rerun_changed: bool = False) -> list[Run]:
    """Lock the unit's runs that no other process holds and that are still to do, re-checking identity now; move
    aside changed results only with `rerun_changed`, else raise GridMixed (a concurrent grid wrote since the check)."""
    mine = []
    for run in unit:
        path = run.path(output)
        try:
            stack.enter_context(store.lock(path, "run"))
        except artifacts.LockHeld:  # another grid process is running it
            continue
        state, why = status(run, output)  # another process may have finished it meanwhile
        if state == "done":
            continue
        if state == "changed" and not rerun_changed:  # finished since the grid's check by a grid of another identity
            raise GridMixed(
                f"{path} was just written by another grid with another identity ({'; '.join(why[:4])}); "
                "one --output holds one protocol: use another --output"
            )
        if not rerun_changed and (why := store.claim_protocol(path.parent, run.identity["protocol"])):
            raise GridMixed(
                f"{path.parent} was claimed since by another grid with another protocol "
                f"({'; '.join(why[:4])}); one --output holds one protocol: use another --output"
            )
        if state == "changed":
            store.move_aside(path)
            if run.model_dir(output).is_dir():  # the model saved with the old result goes with it
                store.move_aside(run.model_dir(output))
        mine.append(run)
    return mine


def claim_folders(todo: list[Run], output, rerun_changed: bool = False) -> None:
    """Claim the results folder of every run of `todo` for its protocol (`store.claim_protocol`) before anything
    trains: of two grids of other protocols started on one --output, the second is refused whole (GridMixed)."""
    for folder, run in {run.path(output).parent: run for run in todo}.items():
        if not rerun_changed and not (folder / store.PROTOCOL_NAME).exists() and any(folder.glob("lr*-seed*.json")):
            raise GridMixed(
                f"{folder} holds results written before folders were claimed: run "
                f"`{store.MIGRATE_COMMAND}` once (nothing was run)"
            )
        try:
            why = store.claim_protocol(folder, run.identity["protocol"], replace=rerun_changed)
        except ValueError as error:  # a corrupt, empty or folder .protocol: nothing was run
            raise GridMixed(str(error)) from None
        if why:
            raise GridMixed(
                f"{folder} is claimed by another grid with another protocol ({'; '.join(why[:4])}); one "
                "--output holds one protocol: use another --output (nothing was run)"
            )


def run_all(todo: list[Run], tokenizers: dict, grid: GridArgs, protocol: finetune_args.ProtocolArgs) -> list[Path]:
    """Train and score every run of `todo` (folders claimed first, each run locked); return the files written."""
    claim_folders(todo, grid.output, grid.rerun_changed)
    if grid.workers > 1 and len(units(todo)) > 1:
        return run_workers(todo, grid, protocol)
    if gc.get_freeze_count() == 0:  # once per process: what is loaded by now lives as long as the process
        gc.collect()
        gc.freeze()  # Trainer.train's full collection (accelerate's free_memory) then skips it: 0.3-0.4 s a run
    written = []
    with tempfile.TemporaryDirectory(prefix="finetune-") as scratch:
        progress = tqdm(units(todo), desc="grid", unit="training")
        for unit in progress:
            tasks_of = "+".join(run.task.name for run in unit)
            progress.set_postfix_str(f"{unit[0].model_name} {tasks_of} lr={unit[0].lr:g} seed={unit[0].seed}")
            with contextlib.ExitStack() as locks:
                mine = _claim(unit, grid.output, locks, grid.rerun_changed)
                if not mine:
                    continue
                for run, record, finetuned in execute(mine, protocol, tokenizers[unit[0].model_path], scratch):
                    if run.save_model and store.scored(record):  # the model first: a result asking for one has it
                        save_model(run, record, finetuned, grid.output)
                    store.write_result(run.path(grid.output), record)
                    written.append(run.path(grid.output))
                    tqdm.write(score_line(record), file=sys.stderr)
    print(f"wrote {len(written)} result file(s) to {grid.output}", file=sys.stderr)
    return written


def score_line(record: dict) -> str:
    """A finished run as the console shows it: `tiny sst2 lr=0.0001 seed=0: accuracy validation 0.8125, test 0.7950`."""
    run = f"{record['model']} {record['task']} lr={record['lr']:g} seed={record['seed']}"
    if not store.scored(record):
        return f"{run}: diverged (the loss turned NaN/inf), no score"
    scores = ", ".join(f"{split} {store.main_score(record, split):.4f}" for split in store.SPLITS)
    return f"{run}: {store.main_metric(record)} {scores}"


def worker_command(todo: list[Run], grid: GridArgs, protocol: finetune_args.ProtocolArgs) -> list[str]:
    """One worker's command line: this grid, sequential, a Hub model pinned to the commit resolved here."""
    models = dict.fromkeys(f"{run.model_name}={run.source or run.model_path}" for run in todo)
    flags = {**dataclasses.asdict(grid), "model": ",".join(models), "workers": 1, **dataclasses.asdict(protocol)}
    return [sys.executable, "-m", "evaluation.run", *[f"--{k}={v}" for k, v in flags.items() if v is not None]]


def _stamp(path: Path):
    return (path.stat().st_mtime_ns, path.stat().st_ino) if path.is_file() else None


def _log_tail(path: Path, lines: int = 25) -> str:
    text = path.read_text(errors="replace") if path.is_file() else ""
    return "\n".join([line for line in re.split(r"[\r\n]+", text) if line.strip()][-lines:])


def run_workers(todo: list[Run], grid: GridArgs, protocol: finetune_args.ProtocolArgs) -> list[Path]:
    """Run `todo` with `grid.workers` processes (`worker_command`, splitting the runs through the per-run
    locks); return the result files they wrote. One that fails stops the others (`GridFailed`)."""
    n = min(grid.workers, len(units(todo)))
    threads = max(1, len(os.sched_getaffinity(0)) // n)
    env = {
        **os.environ,
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        "TQDM_DISABLE": "1",
        "TOKENIZERS_PARALLELISM": "false",  # the parent reads the progress; tokenizers must not fork-spawn threads
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
    }
    paths = [run.path(grid.output) for run in todo]
    before = {path: _stamp(path) for path in paths}
    print(f"{n} workers, {threads} CPU thread(s) each", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="grid-workers-") as logs, contextlib.ExitStack() as stack:
        workers = []
        for i in range(n):
            log = stack.enter_context(open(Path(logs) / f"worker-{i}.log", "w"))
            workers.append(
                subprocess.Popen(
                    worker_command(todo, grid, protocol),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    preexec_fn=artifacts.die_with_parent(),
                )
            )
        try:
            shown = set()
            with tqdm(total=len(paths), desc="grid", unit="run") as progress:
                while True:
                    codes = [w.poll() for w in workers]
                    for path in [p for p in paths if p not in shown and _stamp(p) != before[p]]:
                        shown.add(path)  # a worker's run finished: its scores above the bar
                        progress.write(score_line(store.read_result(path)), file=sys.stderr)
                        progress.update(1)
                    if None not in codes or any(code not in (None, 0) for code in codes):
                        break
                    time.sleep(1.0)
            failed = [i for i, w in enumerate(workers) if w.returncode not in (None, 0)]
            if failed:
                i = failed[0]
                raise GridFailed(
                    f"worker {i + 1} of {n} failed (exit status {workers[i].returncode}); the grid "
                    f"stopped. End of its log:\n{_log_tail(Path(logs) / f'worker-{i}.log')}"
                )
        finally:
            for worker in workers:  # on failure or interrupt: no worker outlives the grid
                if worker.poll() is None:
                    worker.terminate()
            for worker in workers:
                worker.wait()
    written = [path for path in paths if _stamp(path) != before[path]]
    print(f"wrote {len(written)} result file(s) to {grid.output}", file=sys.stderr)
    return written


def run_grid(grid: GridArgs, protocol: finetune_args.ProtocolArgs) -> list[Path]:
    """Run the grid; return the result files written by this call (finished runs are skipped)."""
    return run_all(*check(grid, protocol), grid, protocol)


def make_parser() -> HfArgumentParser:
    return HfArgumentParser((GridArgs, finetune_args.ProtocolArgs))


def main(argv: list[str] | None = None) -> None:
    """The command line: bad input -> one line, exit status 2, before any run; a failed run or worker -> 1."""
    transformers.logging.set_verbosity_error()  # per-run load reports would drown the progress bar
    with cli.bad_input_exits():
        grid_args, protocol_args = cli.parse_dataclasses(make_parser(), argv)
        todo, tokenizers = check(grid_args, protocol_args)
    try:
        with cli.sigterm_exits():  # a stopped grid leaves no `.<result>.json.lock` behind
            run_all(todo, tokenizers, grid_args, protocol_args)
    except GridMixed as error:  # refused before this run wrote anything
        raise cli.bad_input(error) from None
    except GridFailed as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
