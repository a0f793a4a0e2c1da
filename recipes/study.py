"""The whole study in one command: tokenizer -> pretraining runs -> evaluation grid -> report -> model cards -> Hub
export folders; for a decoder study: the converted decoder -> its CPT arms -> each arm's held-out scores and probes
-> report.

    python -m recipes.study smoke --output study/smoke   # the README's main job: minutes on 2 CPU cores
    python -m recipes.study mini --output study/mini --docs docs/mini-study   # the paper's comparisons (docs/)
    python -m recipes.study real-decoder --output study/real-decoder   # MLM CPT of SmolLM2-135M (docs/)
    python -m recipes.study paper --output study/paper   # trains nothing: the plan + launch scripts

The studies are defined in `recipes.studies`; `recipes.study_docs` writes a finished one into docs/. Every stage is
idempotent: a pretraining run is done when its `run_info.json` exists (an interrupted one resumes), an evaluation run
or a measure when its result file is current for what made it (`store.result_state`); the report, cards and Hub
folders are rebuilt from those. `<output>/study.json` records which study a directory holds, its whole definition
(a decoder study's decoder included): a rerun with another is refused. Pretraining runs and the grid are
subprocesses (logs in `<output>/logs/`); the held-out loss, a decoder study's measures and the report run in this
process (`run_here`), their torch imports deferred until the arguments are checked.
"""

import argparse
import contextlib
import dataclasses
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from tqdm.auto import tqdm

from core import artifacts, cli, model_folders, names, run_folders, store
from core.paths import REPO_ROOT, resolve_data_dir
from evaluation.resolve import checkpoint_name
from model_cards import push
from model_cards.generate import build_model_card, write_card
from model_cards.public import PLACEHOLDER_ORG, local_roots
from model_cards.push import PushError, check_repo_id
from recipes import manifest, real_models
from recipes.studies import STUDIES, STUDY_NAMES, TOY_VOCAB_SIZE, Arm, Study, read_study_marker, regime, study_marker
from recipes.study_docs import RESULTS_ARCHIVE, check_docs_dir, read_archive, write_docs

STEP = re.compile(r"pretraining: step (\d+)/(\d+)")  # core.progress's line in a log: "pretraining: step 12/30, ..."
STAGES = ("tokenizer", "pretraining", "held-out loss", "evaluation", "report", "model cards", "hub export")


# --------------------------------------------------------------------------------------------------- planning
def run_settings(
    recipe: manifest.Recipe, study: Study, output: Path, data_dir: str | None, pretrain_seed: int | None = None
) -> dict:
    """The manifest's config for `recipe`, its paths under the study directory, the study's one tokenizer; for
    replicate `pretrain_seed`: its run name, seeds (weights and masks; the block order too with
    `Study.pretrain_data_order`) and the base runs of the same replicate."""
    config = manifest.run_config(recipe, study.scale)
    models, name = output / "models", names.replicate_name(recipe.name, pretrain_seed)
    config.update(
        output_dir=str(models / name),
        data_cache_dir=str(output / "cache"),
        tokenizer_name_or_path=str(output / "tokenizer"),
        data_dir=data_dir,
        run_name=name,
    )
    if pretrain_seed is not None:
        config.update(seed=pretrain_seed, masking_seed=pretrain_seed)
        if study.pretrain_data_order:
            config["data_seed"] = pretrain_seed
    if recipe.branch_from:
        config["branch_from"] = str(models / names.replicate_name(recipe.branch_from, pretrain_seed))
    if recipe.cpt_base:
        config["model_name_or_path"] = str(models / names.replicate_name(recipe.cpt_base, pretrain_seed))
    return config


def training_runs(study: Study) -> list[tuple[manifest.Recipe, int | None]]:
    """(recipe, pretraining seed) of every pretraining run, bases before the runs that start from them."""
    return [(recipe, k) for recipe in manifest.training_order(study.models) for k in study.pretrain_seeds or (None,)]


STUDY_LOCK = ".study.lock"  # held by the process that runs a study in its output directory


@contextlib.contextmanager
def study_lock(output: Path):
    """One study process per output directory: a second is refused (LockHeld); a killed study's lock dies with it."""
    output.mkdir(parents=True, exist_ok=True)
    with artifacts.exclusive_lock(output / STUDY_LOCK, f"study directory {output}"):
        yield


def check_device(study_name: str, study: Study) -> None:
    """Refuse a study whose scale trains in bf16 (`mini-gpu`, a decoder study on cuda) on a machine without a CUDA GPU
    that has bf16."""
    if not (study.device == "cuda" if study.arms else manifest.SCALES[study.scale].bf16):
        return
    import torch  # only for a study that needs a GPU: a refusal before it is seconds, not torch's import

    if not (torch.cuda.is_available() and torch.cuda.is_bf16_supported()):
        raise ValueError(
            f"the {study_name} study trains in bf16 and needs a CUDA GPU with bf16, which this machine "
            "lacks; run it on a GPU, or run the mini study (the same comparisons sized for CPU cores)"
        )


def check_study_dir(output: Path, study_name: str, definition: dict) -> None:
    """Refuse an output directory that holds another study (one line, before anything is written)."""
    artifacts.check_output_dir(output, "--output")
    if (output / "study.json").is_file():
        stored = study_marker(output)
        if stored.get("study") != study_name or stored.get("definition") != definition:
            changed = store.identity_diff(stored.get("definition") or {}, definition)[:2]
            raise ValueError(
                f"{output} holds a different study (study {stored.get('study')!r}"
                + (f"; {', '.join(changed)}" if stored.get("study") == study_name else "")
                + "); pass another --output or delete that directory"
            )
    elif output.is_dir() and any(p.name != STUDY_LOCK for p in output.iterdir()):
        raise ValueError(f"{output} is not empty and holds no study.json; pass an empty or new --output directory")


# ------------------------------------------------------------------------------------------------------ stages
class Progress:
    """One bar over the whole study's jobs with the time left: a grid's runs at that grid's measured time per run,
    every other job at the mean of its kind (`kind`). A kind with no job timed yet is not counted and the estimate
    says it is a lower bound (`left > ...`). Jobs found done move the bar untimed."""

    def __init__(self, units: dict[str, int], clock=time.monotonic):
        self.units, self.moved, self.stage, self.clock = units, {}, "", clock
        self.spent: dict[str, list[float]] = {}  # kind, and each grid's key -> [seconds, jobs] of its jobs timed
        self.last = clock()  # when the bar last moved: the time since goes to the next jobs done
        self.bar = tqdm(
            total=sum(units.values()),
            unit="job",
            desc="study",
            dynamic_ncols=True,
            bar_format="{desc} |{bar}| {n}/{total} jobs [{elapsed}{postfix}]",
        )

    @staticmethod
    def kind(key: str) -> str:
        """`pretrain:<run>` -> pretrain, `evaluation <i>` -> evaluation; a stage's own name otherwise."""
        return key.split(":")[0].rstrip(" 0123456789")

    def start(self, stage: str, what: str) -> None:
        self.stage = f"[{STAGES.index(stage) + 1}/{len(STAGES)} {stage}]"
        self.bar.set_description_str(f"{self.stage} {what}")

    def steps(self, what: str, log: Path):
        """A poll for `run_logged` that shows the running job's last logged step ("step 12/40"), else its log."""

        def poll():
            with contextlib.suppress(OSError):
                with open(log, "rb") as file:
                    file.seek(max(0, log.stat().st_size - 4096))
                    found = STEP.findall(file.read().decode(errors="replace"))
                    shown = f"step {found[-1][0]}/{found[-1][1]}" if found else f"log {log}"
                    self.bar.set_description_str(f"{self.stage} {what}: {shown}")

        return poll

    def add(self, key: str, jobs: int) -> None:
        """Count `jobs` more under `key` (the fine-tuning runs, known once pretraining has saved its checkpoints)."""
        self.units[key] = jobs
        self.bar.total += jobs
        self.show_left()

    def follow(self, key: str, done: int, total: int, what: str) -> None:
        """Move the bar to `done` of the `total` result files a grid process of `key` writes; the first report of a
        key counts the jobs done before it started (untimed)."""
        done_here = done + self.units[key] - total
        jobs, timed = done_here - self.moved.get(key, 0), key in self.moved
        self.moved[key] = done_here
        self.move(key, jobs, timed, refresh=False)
        rate = self.spent.get(key)
        self.bar.set_description_str(
            f"{self.stage} {what}: {done}/{total} runs" + (f", {rate[0] / rate[1]:.0f} s/run" if rate else "")
        )

    def done(self, key: str, timed: bool = True) -> None:
        """The rest of `key`'s jobs are done; `timed=False`: they were found done, not run (a resumed study)."""
        self.move(key, self.units.pop(key, 0) - self.moved.pop(key, 0), timed)

    def move(self, key: str, jobs: int, timed: bool, refresh: bool = True) -> None:
        """`jobs` more of `key` done; timed: the time since the bar last moved was spent on them (a poll that saw no
        new job moves nothing, so a run's time counts from the result before it)."""
        now = self.clock()
        if jobs == 0 and timed:
            return self.show_left(refresh)
        if timed:
            for spent in {self.kind(key): None, key: None}:
                self.spent.setdefault(spent, [0.0, 0])
                self.spent[spent][0] += now - self.last
                self.spent[spent][1] += jobs
        self.last = now
        self.bar.update(jobs)
        self.show_left(refresh)

    def left(self) -> tuple[float, bool]:
        """(seconds the jobs not done yet will take at their kind's mean, whether every kind left has a mean)."""
        seconds, known = 0.0, True
        for key, jobs in self.units.items():
            spent = self.spent.get(key) or self.spent.get(self.kind(key))
            remaining = jobs - self.moved.get(key, 0)
            if spent and remaining > 0:
                seconds += remaining * spent[0] / spent[1]
            elif remaining > 0:
                known = False
        return seconds, known

    def show_left(self, refresh: bool = True) -> None:
        seconds, known = self.left()
        shown = ("left ~" if known else "left > ") + tqdm.format_interval(seconds) if seconds or known else ""
        self.bar.set_postfix_str(shown, refresh=refresh)

    def close(self):
        self.bar.close()


@contextlib.contextmanager
def _stage_log(log_path: Path, command: str):
    """`log_path` opened for appending, the command that writes to it on its first line."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "a") as log:
        log.write(f"\n$ {command}\n")
        log.flush()
        yield log


def run_logged(command: list[str], log_path: Path, cwd: Path = REPO_ROOT, poll=None, every: float = 2) -> None:
    """Run a stage command with its output in `log_path`, calling `poll()` every `every` seconds while it runs (the
    progress bar); on failure raise with the log's last lines."""
    # the stage's progress lines as often as the bar reads them (core.progress), unless the user set their own pace
    env = {"MLM_VS_CLM_PROGRESS_SECONDS": str(every), **os.environ}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    with _stage_log(log_path, " ".join(command)) as log:
        process = subprocess.Popen(
            command, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=artifacts.die_with_parent()
        )
        try:
            while True:
                try:
                    code = process.wait(timeout=every)  # returns as soon as the stage ends
                    break
                except subprocess.TimeoutExpired:
                    if poll:
                        poll()
        except BaseException:  # Ctrl-C (or a failing poll): the stage ends with the study, never left running
            process.terminate()
            process.wait()
            raise
    if code != 0:
        stage_failed(" ".join(command[:3]), code, log_path)


def run_here(entry_point, argv: list[str], log_path: Path) -> None:
    """`python -m <module> ARGV` run in this process as `entry_point(argv)` (a process of its own would import torch
    again: more than the stage costs), logged as `run_logged` logs; on failure raise with the log's last lines."""
    module = entry_point.__module__
    with _stage_log(log_path, f"python -m {module} {' '.join(argv)}") as log:
        try:
            with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                entry_point(argv)
            code = 0
        except SystemExit as exit:  # bad input: its one line is in the log
            code = exit.code
    if code not in (0, None):
        stage_failed(f"python -m {module}", code, log_path)


def stage_failed(command: str, code, log_path: Path):
    tail = "".join(log_path.read_text().splitlines(keepends=True)[-25:])
    raise RuntimeError(f"{command} failed (exit {code}); log {log_path}:\n{tail}")


def train_tokenizer(study: Study, output: Path, data_dir: str | None) -> None:
    """The toy BPE every run of the study shares, trained on the study's pretraining corpus."""
    from pretraining import data

    corpus = data.load_corpus("bundle", data_dir, split="train")
    max_docs = manifest.SCALES[study.scale].max_docs
    if max_docs:
        corpus = corpus.select(range(min(max_docs, len(corpus))))
    data.cached_toy_tokenizer(corpus, vocab_size(study), output / "tokenizer")  # trained when absent or unreadable


def vocab_size(study: Study) -> int:
    """The toy BPE's vocabulary at the study's scale."""
    return manifest.SCALES[study.scale].vocab_size or TOY_VOCAB_SIZE


def pretrain(name: str, module: str, settings: dict, output: Path, poll=None) -> None:
    """One pretraining run of the study (`module`: recipes.pretrain or recipes.cpt) from its `settings`, written as
    `configs/<name>.yaml`; done when its run_info.json is there (a killed run resumes from its checkpoints);
    `poll(log)`: what follows its log while it runs (`Progress.steps`)."""
    if (Path(settings["output_dir"]) / run_folders.RUN_INFO_NAME).is_file():
        return
    config_path = output / "configs" / f"{name}.yaml"
    artifacts.write_text_atomic(config_path, yaml.safe_dump(settings, sort_keys=False))
    log = output / "logs" / f"{name}.log"
    run_logged([sys.executable, "-m", module, "--config", str(config_path)], log, poll=poll and poll(log))


def evaluated_models(study: Study, output: Path) -> list[Path]:
    """Checkpoint dirs to evaluate: the study's models, then their intermediate checkpoints (those at the study's
    `intermediate_steps`, paper scale, when it names some)."""
    paths = [output / "models" / name for name in study.trained_names()]
    for name in study.trained_names() if study.evaluate_intermediate else ():
        for step_dir in run_folders.intermediate_checkpoints(output / "models" / name):  # step-<real step>
            paper_step = names.split_step(checkpoint_name(step_dir))[1]  # its name: <run>-<paper step>
            if not study.intermediate_steps or paper_step in study.intermediate_steps:
                paths.append(step_dir)
    return paths


def is_evaluated(model: Path, tasks: list[str], study: Study, output: Path) -> bool:
    """Every grid result of this checkpoint on `tasks` is current (`store.result_state`) for these weights and the
    scoring versions of the task's family."""
    from evaluation import identity
    from evaluation.tasks import load_task

    model_id, name = model_folders.checkpoint_identity(model), checkpoint_name(model)
    expected = {
        task: {"model": model_id, "scoring": identity.scoring_identity(load_task(task).family)} for task in tasks
    }
    return all(
        store.result_state(store.result_path(output / "results", name, task, lr, seed), expected[task])[0] == "done"
        for task in tasks
        for lr in study.lrs_of(task)
        for seed in study.seeds
    )


def eval_batches(models: list[Path], study: Study) -> list[tuple[list[Path], list[str], dict]]:
    """The evaluation as grid processes: (checkpoints, tasks, evaluation arguments). A checkpoint's tasks that share
    their arguments and LR grid form one group (an intermediate checkpoint's are `intermediate_tasks` when set);
    checkpoints with the same group go to one process, whose workers then stay busy from one to the next."""
    batches: dict[str, tuple[list[Path], list[str], dict]] = {}
    for model in models:
        intermediate = model.parent.name == run_folders.INTERMEDIATE_DIR and study.intermediate_tasks
        groups: dict[str, tuple[list[str], dict]] = {}
        for task in study.intermediate_tasks if intermediate else study.tasks:
            args = {**study.eval_args, **study.task_eval_args.get(task, {})}
            groups.setdefault(json.dumps([args, study.lrs_of(task)], sort_keys=True), ([], args))[0].append(task)
        for tasks, args in groups.values():
            batches.setdefault(json.dumps([tasks, args], sort_keys=True), ([], tasks, args))[0].append(model)
    return list(batches.values())


def evaluate(
    models: list[Path],
    tasks: list[str],
    eval_args: dict,
    study: Study,
    output: Path,
    data_dir: str | None,
    progress=None,
) -> bool:
    """One grid process over the checkpoints of `models` not yet evaluated on `tasks`; returns whether one ran.
    `progress(done, total)` follows its result files: once before it starts, then while it runs."""
    todo = [model for model in models if not is_evaluated(model, tasks, study, output)]
    if not todo:
        return False
    lrs = study.lrs_of(tasks[0])  # one LR grid for the whole group (`eval_batches`)
    results = [
        store.result_path(output / "results", checkpoint_name(model), task, lr, seed)
        for model in todo
        for task in tasks
        for lr in lrs
        for seed in study.seeds
    ]
    poll = progress and (lambda: progress(sum(path.is_file() for path in results), len(results)))
    args = [
        sys.executable,
        "-m",
        "evaluation.run",
        "--model",
        ",".join(f"{checkpoint_name(model)}={model}" for model in todo),
        "--tasks",
        ",".join(tasks),
        "--lrs",
        ",".join(f"{lr:g}" for lr in lrs),
        "--seeds",
        ",".join(map(str, study.seeds)),
        "--output",
        str(output / "results"),
        "--workers",
        str(study.workers),
    ]
    for key, value in {**eval_args, "data_dir": data_dir}.items():
        if value is not None:
            args += [f"--{key}", str(value)]
    if poll:
        poll()
    run_logged(args, output / "logs" / f"eval-{'+'.join(tasks)}.log", poll=poll)
    return True


def heldout_loss(study: Study, output: Path, data_dir: str | None) -> None:
    """Held-out CLM and MLM losses of every trained checkpoint, final and intermediate (`pretraining.heldout`):
    `<output>/heldout/heldout.csv` and `.png`, recomputed only when a checkpoint changed."""
    if not study.heldout_blocks:
        return
    runs = [output / "models" / name for name in study.trained_names()]
    models = runs + [p for run in runs for p in run_folders.intermediate_checkpoints(run)]
    target = output / "heldout" / "heldout.csv"
    stamp = {str(m.relative_to(output)): model_folders.checkpoint_identity(m)["weights"] for m in models}
    stamp_path = target.with_suffix(".identity.json")
    if target.is_file() and stamp_path.is_file() and artifacts.read_json(stamp_path, "held-out stamp") == stamp:
        return
    args = [
        "--tokenizer",
        str(output / "tokenizer"),
        "--block_size",
        str(manifest.SCALES[study.scale].block_size),
        "--blocks",
        str(study.heldout_blocks),
        "--cache_dir",
        str(output / "cache"),
        "--output",
        str(target),
        "--model",
        ",".join(map(str, models)),
    ]
    if data_dir is not None:
        args += ["--data_dir", data_dir]
    from pretraining import heldout  # torch: imported where the stage runs, after the arguments are checked

    run_here(heldout.main, args, output / "logs" / "heldout.log")
    artifacts.write_json_atomic(stamp_path, stamp)


def record_parameters(study: Study, output: Path) -> None:
    """Record in study.json the one parameter count of a toy scale's models, from their `run_info.json` (what
    `regime` reads)."""
    if manifest.SCALES[study.scale].model is None:
        return
    counts = {
        json.dumps(run_folders.read_run_info(output / "models" / name)["parameters"], sort_keys=True)
        for name in study.trained_names()
    }
    if len(counts) != 1:
        raise ValueError(
            f"the models in {output / 'models'} recorded {len(counts)} parameter counts; a study at a "
            "toy scale trains every name at its one architecture"
        )
    artifacts.write_json_atomic(output / "study.json", {**study_marker(output), "parameters": json.loads(counts.pop())})


def report(study: Study, output: Path) -> None:
    args = [str(output / "results"), "--output", str(output / "report")]
    if not study.arms and manifest.SCALES[study.scale].model is not None:  # a toy scale: the paper's otherwise
        tokens_per_step, parameters, embeddings = regime(study_marker(output))
        args += [
            "--tokens_per_step",
            f"{tokens_per_step:g}",
            "--parameters",
            str(parameters),
            "--embedding_parameters",
            str(embeddings),
            "--step_divisor",
            str(manifest.SCALES[study.scale].step_divisor),
        ]
    if study.compare or study.family:  # a decoder study's comparisons: one family (Holm)
        args += ["--compare", ";".join(",".join(pair) for pair in study.family or (study.compare,))]
    if study.bracketed_by:
        args += ["--bracketed_by", bracketed_by_arg(study)]
    from analysis import report as analysis_report
    from pretraining import heldout

    run_here(analysis_report.main, args + ["--scale", study.scale] * (not study.arms), output / "logs" / "report.log")
    if (csv := output / "heldout" / "heldout.csv").is_file():  # the curves redrawn from the CSV: always in step
        heldout.plot(heldout.read_csv(csv), csv.with_suffix(".png"), study.scale)


def bracketed_by_arg(study: Study) -> str:
    """`Study.bracketed_by` as `analysis.report --bracketed_by` reads it: "conll2003=0.001,0.03;mnli=..."."""
    return ";".join(f"{task}={low:g},{high:g}" for task, (low, high) in sorted(study.bracketed_by.items()))


def hub_id(org: str, name: str, study: Study) -> str:
    """A study model's Hub repo id, the study's scale first (`org/mini-610m-clm-42k`): never a paper model's id."""
    return f"{org}/{names.scaled_name(name, study.scale)}"


def model_cards(study: Study, output: Path, org: str) -> None:
    summary, results = output / "report" / "summary.csv", output / "results"
    for name in study.trained_names():
        checkpoint = output / "models" / name
        card = build_model_card(checkpoint, summary, repo_id=hub_id(org, name, study), results_dir=results)
        write_card(card, checkpoint / "README.md")


def hub_export(study_name: str, study: Study, output: Path, org: str) -> None:
    """The exact repo folders a push would upload (`model_cards.push --dry_run`), rebuilt each time; without --org
    in the placeholder namespace, which `model_cards.push` refuses."""
    summary, results = output / "report" / "summary.csv", output / "results"
    commits = [
        commit
        for name in study.trained_names()
        for commit in push.stage_run(output / "models" / name, hub_id(org, name, study), summary, results)
    ]
    with tempfile.TemporaryDirectory(prefix="hub-export-") as workdir:
        commits.append(
            push.stage_results(output / "report", f"{org}/{study_name}-study-results", results, Path(workdir))
        )
        push.check_no_local_paths(commits, local_roots(output / "models", output / "report", results))
        push.write_dry_run(commits, output / "hub", replace=True)


def report_from_archive(study_name: str, archive: Path, output: Path) -> Path:
    """Unpack a results archive written by `--docs` into a new `output` and run the report stage on it, nothing
    trained or fine-tuned; under the study lock of `output`, replacing nothing that appeared there meanwhile."""

    def check_empty():
        if output.exists() and any(p.name != STUDY_LOCK for p in output.iterdir()):
            raise ValueError(f"{output} is not empty; --from_results unpacks into a new directory")

    artifacts.check_output_dir(output, "--output")
    check_empty()
    files = read_archive(archive)
    stored = read_study_marker(json.loads(files["study.json"]), f"{archive}:study.json")
    if stored.get("study") != study_name:
        raise ValueError(f"{archive} holds the {stored.get('study')!r} study, not {study_name!r}")
    definition = stored.get("definition")
    if not isinstance(definition, dict) or "scale" not in definition:
        raise ValueError(f"{archive}:study.json has no study definition; pass an archive written by --docs")
    compare, family = definition.get("compare"), definition.get("family", ())
    study = dataclasses.replace(
        STUDIES[study_name],
        compare=tuple(compare) if compare else None,
        scale=definition["scale"],
        family=tuple(map(tuple, family)),
    )  # the report reads the scale's regime
    if not study.arms and manifest.SCALES[study.scale].model is not None:
        check_parameters(stored, files, f"{archive}:study.json")
    with study_lock(output):
        check_empty()
        with artifacts.atomic_directory(output) as staging:  # a failed report leaves no half-made study directory
            for name, data in files.items():
                (staging / name).parent.mkdir(parents=True, exist_ok=True)
                (staging / name).write_bytes(data)
            report(study, staging)
    return output / "report"


# ------------------------------------------------------------------------------------------ a decoder study's arms
CONVERTED = "converted"  # under models/: the converted decoder, the arms without CPT (each with its attention)
CPT_CONFIG = Path(__file__).parent / "configs" / "real-decoder-cpt.yaml"


def arm_runs(study: Study) -> list[tuple[Arm, str, int | None]]:
    """(arm, run name, CPT seed) of every model a decoder study measures: an arm without CPT once (the converted
    decoder's weights), a CPT arm once per `pretrain_seeds` seed (`<arm>-pseed<k>`, the replicates of
    `core.names`), or once when it names none."""
    return [
        (arm, names.replicate_name(arm.name, k), k)
        for arm in study.arms
        for k in (study.pretrain_seeds or (None,) if arm.cpt_of else (None,))
    ]


def arm_dir(output: Path, arm: Arm, name: str | None = None) -> Path:
    """The folder of `arm`'s run `name` (`arm_runs`; the arm's name by default), the converted decoder's for an arm
    without CPT."""
    return output / "models" / ((name or arm.name) if arm.cpt_of else CONVERTED)


def check_decoder(folder: str) -> str:
    """Refuse (one line) a `--decoder` that is not a Llama, Mistral or Qwen decoder's folder with weights and
    tokenizer; return what the study's definition records of it: its folder's name and content hash."""
    from modeling_eurobert import convert

    if not Path(folder).is_dir():
        raise FileNotFoundError(f"--decoder {folder} is not a folder; pass a saved Llama, Mistral or Qwen decoder")
    try:
        convert.check_source_config(convert.read_config(Path(folder)))
        convert.check_source_files(Path(folder))
    except convert.ConversionError as error:
        raise ValueError(f"--decoder {folder}: {error}") from None
    digest = hashlib.sha256(json.dumps(model_folders.checkpoint_identity(folder), sort_keys=True).encode())
    return f"{Path(folder).name}@{digest.hexdigest()[:12]}"


def prepare_arms(study: Study, output: Path, data_dir: str | None, decoder, progress: Progress) -> None:
    """The converted decoder (`decoder()`: its folder) and each CPT run (`recipes/configs/real-decoder-cpt.yaml`, the
    study's `cpt` settings, the arm's own), each made once: a CPT folder without its run_info.json (a run killed
    before its last file), or trained from a base whose content has changed since (`configs/<run>.base.json`: a
    `models/converted` replaced by hand), is moved aside and trained again."""
    from modeling_eurobert.convert import convert

    progress.start("pretraining", f"{study.decoder} converted")
    if not (output / "models" / CONVERTED).is_dir():
        convert(str(decoder()), output / "models" / CONVERTED)  # written whole or not at all
    progress.done(f"pretrain:{CONVERTED}", timed=False)
    for arm, name, k in (run for run in arm_runs(study) if run[0].cpt_of):
        directory, what = arm_dir(output, arm, name), f"{name} (CPT of {arm.cpt_of})"
        progress.start("pretraining", what)
        base = next(a for a in study.arms if a.name == arm.cpt_of)
        base_identity = model_folders.checkpoint_identity(arm_dir(output, base))
        stamp = output / "configs" / f"{name}.base.json"
        done = (directory / run_folders.RUN_INFO_NAME).is_file()
        if done and stamp.is_file() and artifacts.read_json(stamp, "CPT base identity") != base_identity:
            done = False  # its base was replaced since: its weights are not CPT of this base
        if directory.exists() and not done:
            store.move_aside(directory)
        artifacts.write_json_atomic(stamp, base_identity)
        settings = {
            **yaml.safe_load(CPT_CONFIG.read_text()),
            **study.cpt,
            **arm.cpt,
            "model_name_or_path": str(arm_dir(output, base)),
            "output_dir": str(directory),
            "data_cache_dir": str(output / "cache"),
            "data_dir": data_dir,
            "run_name": name,
        }
        if k is not None:  # replicate k: its own weights' initialisation (LoRA), masks and, asked, block order
            settings.update(seed=k, masking_seed=k, **({"data_seed": k} if study.pretrain_data_order else {}))
        pretrain(name, "recipes.cpt", settings, output, lambda log, what=what: progress.steps(what, log))
        progress.done(f"pretrain:{name}", timed=not done)


def measure_specs(study: Study) -> list[dict]:
    """What each measure's results depend on besides the arm: held-out text as task "heldout", then the probes,
    each with the seeds it is filed under (a retrieval probe fits nothing: seed 0) and how it is read out (`method`:
    a result made another way, the first real-decoder study's one readout, is made again)."""
    held = {"task": "heldout", "blocks": study.heldout_blocks, "block_size": study.cpt["block_size"], "seeds": [0]}
    held["method"] = "next-token loss; masked-token loss and accuracy for bidirectional attention only"
    probes = [
        {
            **dataclasses.asdict(p),
            "max_length": study.probe_max_length,
            "seeds": list(study.seeds if p.train else [0]),
            "method": "the readout of the higher mean validation score (evaluation.probe.READOUTS); ir: pooled corpus",
        }
        for p in study.probes
    ]
    return [held] * bool(study.heldout_blocks) + probes


def measure_arms(study: Study, output: Path, data_dir: str | None, progress: Progress) -> None:
    """Every measure of every arm's run (`arm_runs`), and BM25 on each retrieval probe, whose results are not current
    for their identity (`store.result_state`: the run's checkpoint and attention, the measure, the scale), made and
    filed through `core.store` (kinds "probe" and "heldout"); a changed one is made again, a current one is kept as it
    is. A probe's result is its readout chosen on validation (`evaluation.probe.choose`), named in its config."""
    runs = [(arm, name, k, arm_dir(output, arm, name)) for arm, name, k in arm_runs(study)]
    for arm, name, k, directory in [
        *runs,
        *([(None, run_folders.BM25, None, None)] * any(is_ir(p) for p in study.probes)),
    ]:
        progress.start("evaluation", f"{name}: held-out text and probes" if arm else "BM25 (bm25s) on retrieval")
        identity = {
            "model": model_folders.checkpoint_identity(directory) if arm else bm25_identity(),
            **({"attention": "causal" if arm.causal else "bidirectional"} if arm else {}),
            "scale": study.scale,
        }
        todo = {}  # task -> {seed: the path of a result not current}
        specs = [spec for spec in measure_specs(study) if arm or spec.get("metric") == "ndcg@10"]
        for spec in specs:
            paths = {seed: store.result_path(output / "results", name, spec["task"], 0, seed) for seed in spec["seeds"]}
            todo[spec["task"]] = {
                seed: path
                for seed, path in paths.items()
                if store.result_state(path, {**identity, "measure": spec})[0] != "done"
            }
        info = arm and run_folders.read_run_info(directory)
        config = (
            {"attention": identity["attention"], "cpt_steps": info["steps"] if info else 0}
            if arm
            else {"reference": "BM25"}
        )
        specs = [spec for spec in specs if todo[spec["task"]]]
        for spec, family, chosen, baseline in measure_arm(study, arm, directory, output, data_dir, specs):
            for seed, path in todo[spec["task"]].items():
                metric = spec.get("metric") or ("clm_loss" if arm.causal else "mlm_loss")
                chose = (
                    {"readout": chosen["readout"], "readout_validation": chosen["validation"]}
                    if arm and baseline
                    else {}
                )
                fields = {
                    **store.result_body(metric, chosen["scores"][seed]),
                    "evaluation": "probe" if baseline else "heldout",
                    "config": {**config, **chose},
                    **({"trivial_baseline": {"test": baseline}} if baseline else {}),
                }
                versions, made_by = run_folders.package_versions("sklearn"), {**identity, "measure": spec}
                record = store.new_result(name, spec["task"], family, 0, seed, fields, made_by, versions, k)
                store.write_result(path, record)
        progress.done(f"measure:{name}", timed=bool(specs))


def is_ir(probe) -> bool:
    return probe.metric == "ndcg@10"


def bm25_identity() -> dict:
    from evaluation import probe

    return probe.bm25_identity()


def measure_arm(study: Study, arm: Arm | None, directory: Path, output: Path, data_dir: str | None, todo: list[dict]):
    """(spec, family, the scores `evaluation.probe.choose` returns, trivial baseline or None) of each measure in
    `todo`, the arm's model loaded once; `arm` None: BM25 on the retrieval probes."""
    from evaluation import baselines, probe, tasks

    if not todo:
        return
    if arm is None:
        for spec in todo:
            task = tasks.load_task(spec["task"])
            splits = probe.probe_splits(task, data_dir, spec)
            scores = {"readout": None, "validation": None, "scores": probe.probe_bm25(splits)}
            yield spec, task.family, scores, baselines.trivial_baseline(task, splits)["test"]
        return
    import torch

    from evaluation.model_inputs import load_finetuning_tokenizer
    from modeling_eurobert import EuroBertClmMlmForMaskedLM
    from pretraining import data, heldout

    torch.manual_seed(0)
    model = EuroBertClmMlmForMaskedLM.from_pretrained(str(directory), dtype=torch.float32).eval().to(study.device)
    for spec in todo:
        if spec["task"] == "heldout":
            tokenizer = data.load_pretraining_tokenizer(directory, objective="mlm")
            blocks = heldout.heldout_blocks(tokenizer, spec["block_size"], spec["blocks"], output / "cache", data_dir)
            scores = heldout.masked_token_scores(model, blocks, tokenizer, 0.4, arm.causal)
            yield spec, "heldout", {"scores": {0: {"validation": None, "test": scores}}}, None
            continue
        task = tasks.load_task(spec["task"])
        chosen, baseline = probe.probe_task(
            model.model,
            load_finetuning_tokenizer(directory),
            task,
            data_dir,
            spec,
            arm.causal,
            f"{arm.name} {task.name}",
        )
        yield spec, task.family, chosen, baseline


def run_decoder_study(
    study_name: str, study: Study, output: Path, data_dir: str | None, decoder, until: str | None
) -> Path:
    """A decoder study's stages: the converted decoder and its CPT arms, every arm's measures, the report."""
    runs = [name for _, name, _ in arm_runs(study)]
    cpt_runs = [name for arm, name, _ in arm_runs(study) if arm.cpt_of]
    references = [run_folders.BM25] * any(is_ir(p) for p in study.probes)
    progress = Progress(
        {
            **{f"pretrain:{name}": 1 for name in (CONVERTED, *cpt_runs)},
            **{f"measure:{name}": 1 for name in (*runs, *references)},
            "report": 1,
        }
    )
    try:
        prepare_arms(study, output, data_dir, decoder, progress)
        if until == "pretraining":
            return output / "report"
        measure_arms(study, output, data_dir, progress)
        if until == "evaluation":
            return output / "report"
        progress.start("report", "")
        report(study, output)
        progress.done("report")
    finally:
        progress.close()
    print(f"study {study_name} finished: report in {output / 'report'}")
    return output / "report"


def check_parameters(stored: dict, files: dict[str, bytes], where: str) -> None:
    """Refuse an archive's study.json without the parameter counts of its models, or with counts their weights cannot
    hold: a result records its checkpoint's weights file sizes, 2 to 4 bytes a parameter (LM head in), and a study at
    a toy scale trains every model at its one architecture (`record_parameters`)."""
    counts = stored.get("parameters") or {}
    if not {"total", "input_embedding"} <= counts.keys():
        raise ValueError(
            f"{where} records no parameter counts (`parameters`, which a study writes once its models are "
            "pretrained): it was edited or is not a finished study's; pass an archive written by --docs"
        )
    total, embedding = counts["total"], counts["input_embedding"]
    name = next((name for name in files if name.startswith("results/")), None)  # one model: they are all alike
    size = name and sum(f["size"] for f in json.loads(files[name])["identity"]["model"]["weights"].values())
    if name and not 2 * total <= size <= 4 * (total + embedding) + 2**20:
        raise ValueError(
            f"{where} says the models have {total:,} parameters, but {name} was made from a checkpoint of "
            f"{size:,} bytes of weights (2 to 4 bytes a parameter); it was edited: pass an archive of --docs"
        )


# ---------------------------------------------------------------------------------------------------- driver
def run_study(
    study_name: str,
    output: Path,
    data_dir: str | None = None,
    org: str | None = None,
    study: Study | None = None,
    until: str | None = None,
    decoder: str | None = None,
    real_models_dir: str | None = None,
) -> Path:
    """Run (or resume in `output`) the study `study_name`; return the report directory. `org`: the Hub namespace of
    the exported folders and cards; `study`: a custom definition (the suite's shortened smoke study); `until`: stop
    after "pretraining" or "evaluation"; a decoder study's `decoder` (a local folder instead of its own, whose
    identity its definition then records) and `real_models_dir` (where `recipes.real_models` keeps its own)."""
    org = org or PLACEHOLDER_ORG
    study = study or STUDIES[study_name]
    if decoder is not None:
        study = dataclasses.replace(study, decoder=check_decoder(decoder))
    definition = study.definition()
    check_study_dir(output, study_name, definition)
    with study_lock(output):
        check_study_dir(output, study_name, definition)  # again under the lock: another study may have started
        artifacts.write_json_atomic(
            output / "study.json", {"format": run_folders.STUDY_FORMAT, "study": study_name, "definition": definition}
        )
        if study.arms:
            models = Path(real_models_dir or output / "real-models")
            source = (lambda: Path(decoder)) if decoder else (lambda: real_models.fetch(study.decoder, models))
            return run_decoder_study(study_name, study, output, data_dir, source, until)
        return _run_study(study_name, study, output, data_dir, org, until)


def _run_study(study_name: str, study: Study, output: Path, data_dir: str | None, org: str, until: str | None) -> Path:
    runs = training_runs(study)
    started = time.time()
    progress = Progress(
        {
            "tokenizer": 1,
            **{f"pretrain:{names.replicate_name(r.name, k)}": 1 for r, k in runs},
            "held-out loss": int(bool(study.heldout_blocks)),
            "report": 1,
            "model cards": 1,
            "hub export": 1,
        }
    )
    try:
        progress.start("tokenizer", f"toy BPE ({vocab_size(study)} tokens)")
        train_tokenizer(study, output, data_dir)
        progress.done("tokenizer")
        for i, (recipe, pretrain_seed) in enumerate(runs, 1):
            name = names.replicate_name(recipe.name, pretrain_seed)
            what = f"{name} ({i}/{len(runs)})"
            progress.start("pretraining", what)
            trained = (output / "models" / name / run_folders.RUN_INFO_NAME).is_file()
            settings = run_settings(recipe, study, output, data_dir, pretrain_seed)
            pretrain(name, recipe.module, settings, output, lambda log: progress.steps(what, log))
            progress.done(f"pretrain:{name}", timed=not trained)
        record_parameters(study, output)
        progress.start("held-out loss", f"{study.heldout_blocks} blocks")
        heldout_loss(study, output, data_dir)
        progress.done("held-out loss")
        if until == "pretraining":
            return output / "report"
        batches = eval_batches(evaluated_models(study, output), study)
        for i, (models, tasks, _) in enumerate(batches):
            progress.add(f"evaluation {i}", len(models) * len(tasks) * len(study.lrs_of(tasks[0])) * len(study.seeds))
        for i, (models, tasks, eval_args) in enumerate(batches):
            what = f"{len(models)} checkpoint(s) on {', '.join(tasks)} ({i + 1}/{len(batches)})"
            progress.start("evaluation", what)
            ran = evaluate(
                models,
                tasks,
                eval_args,
                study,
                output,
                data_dir,
                progress=lambda done, total: progress.follow(f"evaluation {i}", done, total, what),
            )
            progress.done(f"evaluation {i}", timed=ran)
        if until == "evaluation":
            return output / "report"
        for stage, action in (
            ("report", lambda: report(study, output)),
            ("model cards", lambda: model_cards(study, output, org)),
            ("hub export", lambda: hub_export(study_name, study, output, org)),
        ):
            progress.start(stage, "")
            action()
            progress.done(stage)
    finally:
        progress.close()
    print(f"study {study_name} finished in {(time.time() - started) / 60:.1f} min: report in {output / 'report'}")
    return output / "report"


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("study", help=f"the study to run: one of {', '.join(STUDY_NAMES)}")
    parser.add_argument("--output", required=True, type=Path, help="study directory (created; resumable)")
    parser.add_argument("--data_dir", default=None, help="data bundle (default: $MLM_VS_CLM_DATA, then ../shared/data)")
    parser.add_argument(
        "--org",
        default=None,
        help="your Hub user or organisation, used in the exported repo folders and cards (default: "
        "the placeholder your-org, which model_cards.push refuses to push to)",
    )
    parser.add_argument("--docs", type=Path, default=None, help="also copy the finished report here (docs/mini-study)")
    parser.add_argument(
        "--until",
        default=None,
        choices=("pretraining", "evaluation"),
        help="stop after this stage (fit a stage into a time-limited job); rerun to continue",
    )
    parser.add_argument(
        "--from_results",
        type=Path,
        default=None,
        help=f"a {RESULTS_ARCHIVE} written by --docs: unpack it into --output (a new directory) and "
        "regenerate the report (and --docs) from it; trains and fine-tunes nothing",
    )
    parser.add_argument(
        "--decoder",
        default=None,
        help="a decoder study: a local Llama, Mistral or Qwen decoder to study instead of its own "
        "(SmolLM2-135M-Instruct, from recipes.real_models)",
    )
    parser.add_argument(
        "--real_models",
        default=None,
        help="a decoder study: where recipes.real_models keeps its checkpoints (default: <output>/real-models)",
    )
    parser.add_argument("--gpu", default="H100", help="paper plan: GPU to estimate GPU-hours for")
    parser.add_argument(
        "--mfu",
        type=float,
        default=None,
        help="paper plan: model FLOPs utilisation of every run (default: per model size, the MFU of an "
        "H200 probe before the throughput work, the 1b unmeasured: pretraining/flops.py)",
    )
    return parser


def main(argv=None) -> None:
    """Run the study; Ctrl-C ends it (and a running stage's process) in one line with exit status 130, what is done
    kept for the same command to resume from."""
    try:
        _main(make_parser().parse_args(argv))
    except KeyboardInterrupt:
        print("interrupted; rerun the same command to resume", file=sys.stderr)
        raise SystemExit(130) from None


@cli.exit_on_write_failure
def _main(args: argparse.Namespace) -> None:
    with cli.bad_input_exits():  # bad input: one line, nothing started
        if args.study not in STUDY_NAMES:
            raise ValueError(f"unknown study {args.study!r}; choose one of {', '.join(STUDY_NAMES)}")
        if args.study == "paper":
            from recipes.plan import write_plan

            write_plan(args.output, gpu=args.gpu, mfu=args.mfu)
            return
        if args.docs is not None:
            check_docs_dir(args.docs)  # before any work: never replace files this tool did not write
        if args.from_results is not None:
            report_dir = report_from_archive(args.study, args.from_results, args.output)
            print(f"report regenerated from {args.from_results} in {report_dir}")
            if args.docs:
                docs = write_docs(args.study, args.output, args.docs, args.from_results)
                print(f"report copied to {docs}")
            return
        study = STUDIES[args.study]
        check_device(args.study, study)
        resolve_data_dir(args.data_dir)  # fail now, not in the first subprocess
        if (args.decoder or args.real_models) and not study.arms:
            raise ValueError(f"--decoder and --real_models are for a decoder study; the {args.study} study has none")
        if args.real_models:
            artifacts.check_output_dir(args.real_models, "--real_models")
        if study.arms and not args.decoder and not (args.output / "models" / CONVERTED).is_dir():
            real_models.check_extras([study.decoder], Path(args.real_models or args.output / "real-models"))
        if args.org is not None:
            try:
                check_repo_id(f"{args.org}/{args.study}-study-results")
            except PushError as error:
                raise ValueError(f"--org {args.org!r}: {error}") from None
        run_study(args.study, args.output, args.data_dir, args.org, None, args.until, args.decoder, args.real_models)
        if args.docs and args.until is None:
            print(f"report copied to {write_docs(args.study, args.output, args.docs)}")


if __name__ == "__main__":
    main()
