"""One training loop for every run: CLM, MLM at any masking ratio, CLM then MLM (PFS), a decay branch, and CPT
(`cpt: true`) from a decayed run or a converted decoder. `prepare` checks everything and builds tokenizer, blocks
and model before anything is written to `output_dir`; `train` locks it, trains (resuming from the newest complete
checkpoint) and saves. The commands are `recipes/pretrain.py` and `recipes/cpt.py` (their docstrings show them).
"""

import contextlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from transformers import TrainingArguments

from core import artifacts, cli, lora, model_folders, run_folders
from modeling_eurobert.tokenizer_settings import configure_tokenizer
from pretraining import data
from pretraining.checks import (
    check_data_identity,
    check_output_dir,
    check_run_settings,
    check_sources,
    last_complete_checkpoint,
    tensorboard_name,
)
from pretraining.collator import ObjectiveCollator, build_collator
from pretraining.inputs import CptStart, cpt_start, select_blocks, training_blocks
from pretraining.provenance import data_identity, make_run_info, parameter_counts, resolved_config
from pretraining.settings import PretrainArguments, RecipeParser, decay_steps, global_batch
from pretraining.trainer import (
    LoadOptimizerStateCallback,
    PretrainingTrainer,
    SchedulePlanCallback,
    build_model,
    compile_decoder_layers,
    finish_checkpoint,
    step_flops_per_token,
)


def make_parser(cpt: bool = False) -> RecipeParser:
    """Parser over (run settings, TrainingArguments); `--config FILE.yaml`, the CLI overrides the file. `cpt`: the
    default of the `cpt` setting (`recipes/cpt.py`)."""
    parser = RecipeParser((PretrainArguments, TrainingArguments))
    parser.set_defaults(cpt=cpt)
    return parser


@dataclass
class PreparedRun:
    """Everything a run needs once every check has passed; nothing of it is written to `output_dir` yet."""

    run_args: PretrainArguments
    training_args: TrainingArguments
    resume: str | None  # checkpoint to resume from
    tokenizer: object
    train_blocks: data.BlockStream  # the blocks this run reads, in order
    identity: dict  # data_identity(blocks, tokenizer), recorded in run_config.json and run_info.json
    model: object
    parameters: dict  # parameter_counts(model), recorded in run_info.json
    collator: ObjectiveCollator
    start: CptStart  # a CPT run's base, first block, kept optimizer state and tokens before it


class RunFinished(Exception):
    """`output_dir` holds this very run, finished: same settings and data, its final weights and run_info.json."""


def finished_steps(training_args: TrainingArguments) -> int | None:
    """The steps of the finished run in `output_dir` (its run_info.json, written last, at `max_steps`, beside the
    weights), or None. Called once `check_output_dir` and `check_data_identity` found the same settings and data."""
    output_dir = Path(training_args.output_dir)
    info = run_folders.read_run_info(output_dir)
    weights = any(any(output_dir.glob(pattern)) for pattern in model_folders.WEIGHT_PATTERNS)
    return info["steps"] if info and weights and info["steps"] == training_args.max_steps else None


def prepare(run_args: PretrainArguments, training_args: TrainingArguments) -> PreparedRun:
    """Check the settings and build tokenizer, blocks and model. Writes nothing to `output_dir`.

    Raises:
        ValueError / FileNotFoundError: one line naming the bad setting, path or data and how to fix it.
        RunFinished: `output_dir` already holds this run, finished (the command line says so and exits 0).
    """
    # 1. settings and where to start
    check_run_settings(run_args, training_args)
    if training_args.hub_token:  # never pickled into training_args.bin: huggingface_hub reads it from the environment
        os.environ["HF_TOKEN"] = training_args.hub_token
        training_args.hub_token = None
    check_sources(run_args)
    resume = check_output_dir(run_args, training_args)
    start = cpt_start(run_args)
    first_block = start.first_block

    # 2. tokenizer -> token budget (estimated before anything is downloaded or tokenized) -> blocks in the fixed
    #    order (the same data as a resumed or branched run) -> model
    blocks_per_step = global_batch(training_args)
    needed = training_args.max_steps * blocks_per_step
    tokenizer, blocks = training_blocks(
        run_args, training_args.data_seed, training_args.main_process_first, first_block + needed, first_block
    )
    identity = data_identity(blocks, tokenizer)
    check_data_identity(run_args, training_args, identity, resume)
    if steps := finished_steps(training_args):
        raise RunFinished(
            f"{training_args.output_dir} already holds this run, finished at step {steps} (its "
            f"{run_folders.RUN_INFO_NAME} and weights); nothing to do: pass a new --output_dir to train "
            "it again"
        )
    train_blocks = select_blocks(blocks, first_block, needed, run_args.epochs)
    model = build_model(run_args, tokenizer, training_args.seed)
    parameters = parameter_counts(model)
    if run_args.lora:  # CPT --lora: adapters on the frozen base (core/lora.py)
        model = lora.wrap(
            model,
            run_args.lora_rank,
            run_args.lora_alpha,
            run_args.lora_dropout,
            run_args.lora_target_modules,
            ("embed_tokens", "lm_head") * run_args.lora_train_embeddings,
            seed=training_args.seed,
        )
    configure_tokenizer(tokenizer, model.config.max_position_embeddings)  # what every checkpoint's tokenizer says
    if run_args.compile == "regional":
        compile_decoder_layers(model)  # in place: parameter names, checkpoints and resume as in an eager run

    # 3. the collator picks CLM or MLM from each batch's step (PFS flips inside the run)
    collator = build_collator(run_args, tokenizer, blocks_per_step, first_block)
    return PreparedRun(
        run_args, training_args, resume, tokenizer, train_blocks, identity, model, parameters, collator, start
    )


def name_tensorboard_run(trainer: PretrainingTrainer, run_args, training_args: TrainingArguments) -> None:
    """Log TensorBoard into `<output_dir>/runs/<name as shown>` (`mini-610m-clm-42k`: `core.names.scaled_name`), not
    transformers' `runs/<date>_<host>`: the scale shows there, and a resumed run logs on into the same folder.
    TENSORBOARD_LOGGING_DIR, when set, still decides."""
    from transformers.integrations import TensorBoardCallback

    name = tensorboard_name(run_args, training_args)
    for callback in trainer.callback_handler.callbacks:
        if isinstance(callback, TensorBoardCallback) and callback.logging_dir is None:
            callback.logging_dir = str(Path(training_args.output_dir) / "runs" / name)


class OutputChanged(ValueError):
    """`output_dir` changed between `prepare` and taking its lock: another run wrote there meanwhile."""


def check_unchanged(run: PreparedRun) -> None:
    """With the output_dir lock held: the checks of `prepare` again, since another launch may have trained there
    while this one prepared (this one would overwrite it); raises `OutputChanged`, one line saying what changed."""
    try:
        resume = check_output_dir(run.run_args, run.training_args)
        check_data_identity(run.run_args, run.training_args, run.identity, resume)
    except ValueError as error:
        raise OutputChanged(f"another run wrote to the output_dir while this one was being prepared: {error}") from None
    if resume != run.resume:
        raise OutputChanged(
            f"another run wrote to output_dir {run.training_args.output_dir} while this one was being "
            f"prepared (it would now start from {resume or 'step 0'}, not from "
            f"{run.resume or 'step 0'}); rerun the same command"
        )


def train(run: PreparedRun) -> PretrainingTrainer:
    """Lock `output_dir`, record the config, train (resuming if a checkpoint exists) and save weights, tokenizer,
    `run_info.json` and the sentence-transformers files."""
    run_args, training_args = run.run_args, run.training_args
    output_dir = Path(training_args.output_dir)

    def info(step, intermediate=False):
        return make_run_info(
            run_args,
            training_args,
            step=step,
            identity=run.identity,
            start=run.start,
            parameters=run.parameters,
            intermediate=intermediate,
        )

    fresh_cpt = run.start.optimizer_file and run.resume is None  # a resume has the optimizer state of its own
    callbacks = [LoadOptimizerStateCallback(run.start.optimizer_file)] if fresh_cpt else []
    block_log = (
        output_dir / f"block_order-rank{training_args.process_index}.jsonl" if run_args.log_block_order else None
    )

    # Rank 0 holds the output_dir lock for the whole run: a second launch on the same directory is refused.
    lock = artifacts.exclusive_lock(output_dir / run_folders.LOCK_NAME, f"output_dir {output_dir}")
    with lock if training_args.should_save else contextlib.nullcontext():
        if training_args.should_save:
            check_unchanged(run)
            artifacts.write_json_atomic(
                output_dir / run_folders.RUN_CONFIG_NAME, resolved_config(run_args, training_args, run.identity)
            )
        trainer = PretrainingTrainer(
            model=run.model,
            args=training_args,
            train_dataset=run.train_blocks,
            data_collator=run.collator,
            processing_class=run.tokenizer,
            callbacks=callbacks,
            tokens_per_step=global_batch(training_args) * run_args.block_size,
            block_order_path=block_log,
            flops_per_token=step_flops_per_token(run.model.config, run_args.block_size, run.collator),
            weight_decay_scope=run_args.weight_decay_scope,
        )
        name_tensorboard_run(trainer, run_args, training_args)
        save = (lambda path: lora.save_trainer_model(trainer, path)) if run_args.lora else trainer.save_model
        if run_args.lora:  # checkpoint-N: the adapters (what resume reads) and config.json; saved models are merged
            trainer.add_callback(lora.CheckpointConfigCallback(trainer))
        trainer.add_callback(
            SchedulePlanCallback(
                save,
                save_steps={b - decay_steps(training_args) for b in run_args.decay_branches},
                intermediate_steps=set(run_args.intermediate_steps),
                reset_at=run_args.switch_step if run_args.reset_optimizer_at_switch else None,
                info=info,
                save_last=not (run_args.lora and training_args.save_strategy == "no"),
            )
        )
        trainer.train(resume_from_checkpoint=run.resume)
        save(str(output_dir))
        if trainer.is_world_process_zero():
            finish_checkpoint(output_dir, info(trainer.state.global_step))
        # Every rank waits for the saves, then leaves the process group: a rank that exits with the group still
        # alive can abort in its C++ destructors ("terminate called without an active exception").
        trainer.accelerator.wait_for_everyone()
        trainer.accelerator.end_training()
    return trainer


def pretrain(run_args: PretrainArguments, training_args: TrainingArguments) -> PretrainingTrainer:
    """Train one run (pretraining, PFS, decay branch or CPT), save it to `training_args.output_dir`; returns the
    trainer (tests read its state and model)."""
    return train(prepare(run_args, training_args))


def main(argv: list[str] | None = None, cpt: bool = False) -> None:
    """The command line: exit 2 with one line for bad input (nothing written), 1 for a failure while training."""
    try:
        with cli.bad_input_exits():
            run = prepare(*make_parser(cpt).parse_args_and_config(argv))
    except RunFinished as done:  # a rerun of a finished run changes nothing
        print(done)
        return
    try:
        train(run)
    except (artifacts.LockHeld, OutputChanged) as error:  # refused before anything was written
        raise cli.bad_input(error) from None
    except Exception as error:  # disk full, permissions: one line; other failures keep their traceback
        if not (isinstance(error, OSError) or artifacts.out_of_room(error)):
            raise
        print(f"error: {_write_failure(error, run.training_args.output_dir)}", file=sys.stderr)
        sys.exit(1)


def _write_failure(error: Exception, output_dir: str) -> str:
    """One line for a failed write; for a save that ran out of room (disk, quota, `ulimit -f`), what it left: the
    newest complete checkpoint is intact (a half-written newer one lacks run_info.json, written last: resume skips
    it)."""
    first = str(error).strip().splitlines()[0]
    if not artifacts.out_of_room(error):
        return first
    intact = last_complete_checkpoint(output_dir)
    kept = f"the newest complete checkpoint {intact} is intact" if intact else "no checkpoint was complete yet"
    return (
        f"a save ran out of disk space or hit the file size limit ({first}); {kept}: free space and rerun the "
        "same command to resume"
    )
