"""The fine-tuning loop every task family shares: the model loaded with its attention pattern, the Trainer and its
arguments, training with divergence detection, and the per-process caches of task splits and tokenized data.
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path
from typing import NamedTuple

import torch
from transformers import (
    Trainer,
    TrainerCallback,
    TrainingArguments,
    set_seed,
)
from transformers.trainer_callback import PrinterCallback

from core import lora
from core.progress import StepProgress
from evaluation.attention import set_attention
from evaluation.finetune_args import FinetuneArgs, data_settings, identity_settings, schedule
from evaluation.model_inputs import label_kwargs
from modeling_eurobert import register
from modeling_eurobert.export_native import make_plain_loadable

register()  # our Auto classes, so that our checkpoints load in-process


def training_arguments(args: FinetuneArgs, task, cls=TrainingArguments, **extra) -> TrainingArguments:
    """`cls` (`SentenceTransformerTrainingArguments` for IR, with `extra`) of the protocol for the task's budget."""
    max_steps, epochs = schedule(task, args)
    return cls(
        output_dir=args.scratch_dir or str(Path(tempfile.gettempdir()) / "mlm-vs-clm-finetune"),
        learning_rate=args.lr,
        seed=args.seed,
        data_seed=args.seed,
        per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=args.eval_batch_size,
        max_steps=max_steps if max_steps is not None else -1,
        num_train_epochs=epochs or 1.0,
        lr_scheduler_type="linear",
        warmup_steps=args.warmup_ratio,  # a float < 1 is a ratio of the steps
        adam_beta1=args.adam_beta1,
        adam_beta2=args.adam_beta2,
        adam_epsilon=args.adam_epsilon,
        weight_decay=args.weight_decay,
        optim="adamw_torch",
        bf16=args.resolved_precision() == "bf16_autocast",  # autocast for bf16_autocast only: bf16 weights need none
        save_strategy="no",
        eval_strategy="no",
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
        dataloader_pin_memory=torch.cuda.is_available(),
        # NaN/inf must reach the logs (the default filter hides them) for DivergenceCallback to see them.
        logging_steps=args.logging_steps,
        logging_nan_inf_filter=False,
        **extra,
    )


def make_trainer(auto_class, model_path, task, args: FinetuneArgs, tokenizer, train_dataset, collator) -> Trainer:
    """The Trainer of an SC, TC or QA run: the model loaded (`load_for_finetuning`; an SC or TC head sized for the
    task's labels) and its `collator` class on the tokenizer."""
    labels = label_kwargs(task) if task.family in ("sc", "tc") else {}
    return Trainer(
        model=load_for_finetuning(auto_class, model_path, tokenizer, args, **labels),
        args=training_arguments(args, task),
        train_dataset=train_dataset,
        data_collator=collator(tokenizer),
        processing_class=tokenizer,
    )


class DivergenceCallback(TrainerCallback):
    """Stop training as soon as a logged loss or gradient norm is NaN/inf (the run is then recorded as diverged)."""

    def __init__(self):
        self.diverged = False

    def on_log(self, args, state, control, logs=None, **kwargs):
        for key in ("loss", "grad_norm"):
            value = (logs or {}).get(key)
            if value is not None and not math.isfinite(float(value)):
                self.diverged = True
                control.should_training_stop = True
        return control


class Finetuned(NamedTuple):
    """A fine-tuned model between a family's `finetune` and its `score` (once per task) and `save`."""

    trainer: Trainer  # `trainer.model` is the fine-tuned model, `trainer.processing_class` its tokenizer
    diverged: bool  # the loss or gradient norm turned NaN/inf (nothing to score or save)


def save_finetuned(finetuned: Finetuned, directory: str | os.PathLike) -> None:
    """Save a fine-tuned transformers model with its tokenizer, loadable like any checkpoint
    (`make_plain_loadable`); not `Trainer.save_model`, whose `training_args.bin` holds local paths."""
    lora.merged(finetuned.trainer.model).save_pretrained(directory)  # a LoRA model merged: loads without peft
    finetuned.trainer.processing_class.save_pretrained(directory)
    make_plain_loadable(directory)


def train(trainer: Trainer) -> Finetuned:
    """Run `trainer.train()` with divergence detection and its steps, loss and time left on the console
    (`core.progress`)."""
    callback = DivergenceCallback()
    trainer.add_callback(callback)
    trainer.remove_callback(PrinterCallback)  # a loss line per log would drown the grid's bar: the bar's postfix has it
    trainer.add_callback(StepProgress(f"fine-tuning lr={trainer.args.learning_rate:g} seed={trainer.args.seed}"))
    output = trainer.train()
    return Finetuned(trainer, callback.diverged or not math.isfinite(output.training_loss))


_SPLITS: dict = {}  # per process, shared by every run of a grid: raw splits per task and data settings
_TOKENIZED: dict = {}  # tokenized splits per tokenizer, task and settings


def task_splits(task, args: FinetuneArgs):
    """`tasks.load_splits` once per task and data settings (`finetune_args.data_settings`) in this process."""
    from evaluation import tasks

    settings = data_settings(args, task.family)
    key = (str(task.path or task.name), *sorted(settings.items()))
    if key not in _SPLITS:
        _SPLITS[key] = tasks.load_splits(task, **settings)
    return _SPLITS[key]


def cached(tokenizer, task, args: FinetuneArgs, build):
    """`build()` (a task's tokenized splits) once per tokenizer content, task and the settings its family's
    results and data depend on (`finetune_args.SETTINGS`) in this process."""
    from datasets.fingerprint import Hasher

    settings = {**identity_settings(args, task.family), **data_settings(args, task.family)}
    fingerprint = Hasher.hash(tokenizer.backend_tokenizer.to_str() if tokenizer.is_fast else tokenizer)
    key = (fingerprint, task.name, task.family, *sorted(settings.items()))
    if key not in _TOKENIZED:
        _TOKENIZED[key] = build()
    return _TOKENIZED[key]


def load_for_finetuning(auto_class, model_path, tokenizer, args: FinetuneArgs, **kwargs):
    """`auto_class.from_pretrained` with the run's seed set first (it draws the new head), the attention
    pattern (checked on the loaded model) and a pad id the head can use."""
    set_seed(args.seed)
    model = auto_class.from_pretrained(model_path, dtype=args.model_dtype(), trust_remote_code=True, **kwargs)
    set_attention(model, args.attention)
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    if args.peft == "lora":  # adapters on the encoder, the task head trained fully
        model = lora.wrap(
            model, args.lora_rank, args.lora_alpha, modules_to_save=lora.head_modules(model), seed=args.seed
        )
    return model
