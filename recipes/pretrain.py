"""Pretrain a EuroBERT-architecture model with CLM, MLM, or CLM then MLM (PFS), on a fixed block order.

CPU smoke run (toy BPE, tiny model, bundle corpus):
    python recipes/pretrain.py --config recipes/configs/debug.yaml --output_dir out/debug
Two CPU processes (gloo):
    accelerate launch --config_file recipes/accelerate/cpu.yaml --num_processes 2 recipes/pretrain.py --config recipes/configs/debug.yaml --output_dir out/debug-ddp
One of the study's 38 models (regenerate configs with `python -m recipes.manifest --write-configs paper`):
    accelerate launch --config_file recipes/accelerate/fsdp.yaml recipes/pretrain.py --config recipes/configs/paper/610m-clm-10k-mlm40-42k.yaml
A 12k decay branch of the 42k stable run (its config has `branch_from: out/paper/610m-clm-42k`):
    accelerate launch --config_file recipes/accelerate/multi_gpu.yaml recipes/pretrain.py --config recipes/configs/paper/610m-clm-12k.yaml
Resume after a crash: run the same command again (auto-resume from the newest complete checkpoint in output_dir),
or pass `--resume_from_checkpoint <output_dir>/checkpoint-N`.
"""

import json
import sys
from pathlib import Path

if __package__ in (None, ""):  # `python recipes/pretrain.py` / `accelerate launch recipes/pretrain.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from transformers import TrainingArguments  # noqa: E402

from recipes import data  # noqa: E402
from recipes.training import (  # noqa: E402
    RUN_CONFIG_NAME, LoadOptimizerStateCallback, PretrainArguments, PretrainingTrainer, RecipeParser,
    SchedulePlanCallback, build_blocks, build_collator, load_training_corpus, build_model, build_tokenizer, check_output_dir,
    check_run_settings, compile_decoder_layers, cpt_start, decay_steps, global_batch, make_run_info, resolved_config,
    select_blocks, step_flops_per_token, write_run_info,
)


def make_parser(run_settings=PretrainArguments) -> RecipeParser:
    """Parser over (run settings, TrainingArguments); `--config FILE.yaml`, the CLI overrides the file."""
    return RecipeParser((run_settings, TrainingArguments))


def main(run_args: PretrainArguments, training_args: TrainingArguments) -> PretrainingTrainer:
    """Train one run (pretraining, PFS, decay branch or CPT) and save it to `training_args.output_dir`.

    Every check runs before anything is written to `output_dir`.

    Returns:
        The trainer, after training and saving (tests read its state and model).
    """
    # 1. settings and where to start (raise before writing anything)
    check_run_settings(run_args, training_args)
    resume = check_output_dir(run_args, training_args)
    cpt_base, first_block, optimizer_file = cpt_start(run_args)
    first_process = training_args.main_process_first

    # 2. tokenizer -> blocks in the fixed order -> model
    corpus = load_training_corpus(run_args)
    tokenizer = build_tokenizer(run_args, corpus, first_process)
    blocks = build_blocks(run_args, tokenizer, corpus, training_args.data_seed, first_process)
    fingerprint = data.data_fingerprint(blocks)
    blocks_per_step = global_batch(training_args)
    train_blocks = select_blocks(blocks, first_block, training_args.max_steps * blocks_per_step)
    model = build_model(run_args, tokenizer, training_args.seed)
    if run_args.compile == "regional":
        compile_decoder_layers(model)  # in place: parameter names, checkpoints and resume as in an eager run

    # 3. the collator picks CLM or MLM from each batch's step (PFS flips inside the run)
    collator = build_collator(run_args, tokenizer, blocks_per_step, first_block)

    # 4. trainer with the planned checkpoints, intermediate weights and provenance
    output_dir = Path(training_args.output_dir)
    if training_args.should_save:
        output_dir.mkdir(parents=True, exist_ok=True)
        (output_dir / RUN_CONFIG_NAME).write_text(json.dumps(resolved_config(run_args, training_args), indent=2) + "\n")

    def info(step, suffix=""):
        return make_run_info(run_args, training_args, step=step, fingerprint=fingerprint, cpt_base=cpt_base, suffix=suffix)

    trainer_ref = {}
    callbacks = [SchedulePlanCallback(
        trainer_ref,
        save_steps={b - decay_steps(training_args) for b in run_args.decay_branches},
        intermediate_steps=set(run_args.intermediate_steps),
        reset_at=run_args.switch_step if run_args.reset_optimizer_at_switch else None,
        info=info,
        objective_at=collator.objective_at,
    )]
    if optimizer_file:
        callbacks.append(LoadOptimizerStateCallback(optimizer_file, resuming=resume is not None))
    block_log = output_dir / f"block_order-rank{training_args.process_index}.jsonl" if run_args.log_block_order else None
    trainer = PretrainingTrainer(
        model=model, args=training_args, train_dataset=train_blocks, data_collator=collator,
        processing_class=tokenizer, callbacks=callbacks,
        tokens_per_step=blocks_per_step * run_args.block_size, block_order_path=block_log,
        flops_per_token=step_flops_per_token(model.config, run_args.block_size, collator),
    )
    trainer_ref["trainer"] = trainer

    # 5. train (resuming if a checkpoint exists) and save the final weights + tokenizer + run_info
    trainer.train(resume_from_checkpoint=resume)
    trainer.save_model(str(output_dir))
    if trainer.is_world_process_zero():
        write_run_info(output_dir, info(trainer.state.global_step))
    return trainer


if __name__ == "__main__":
    main(*make_parser().parse_args_and_config())
