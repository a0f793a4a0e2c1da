"""What is recorded beside every checkpoint: `run_config.json` in `output_dir` and `run_info.json` in every saved
checkpoint (intermediate ones included).

- `resolved_config`: the settings that decide the trained weights (`run_config.json`, and `run_config` inside
  `run_info.json`), with the data identity (`data_identity`: the packed blocks' fingerprint, the tokenizer hash);
  what a resume, a decay branch or CPT checks (`pretraining.checks`);
- `make_run_info` / `write_run_info`: what a checkpoint is and how it was made (format: `core.run_folders`), read by
  the cards, the study, the held-out loss and the CPT and resume checks.
"""

import json
import os
from dataclasses import asdict
from pathlib import Path

import datasets
from transformers import TrainingArguments

from core import artifacts, run_folders
from core.model_folders import SOURCE_RECORD
from core.run_folders import RUN_INFO_NAME
from pretraining import data
from pretraining.settings import CPT_SETTINGS, PretrainArguments, global_batch

# 2: run_config.json records the data identity (packed blocks + tokenizer) checked on resume; 3: the run settings
# `architecture` and `scale` (were `model_preset` and `study_preset`).
RUN_CONFIG_FORMAT = 3

# Run settings that do not change the trained weights (paths, workers, logging); ignored when comparing configs.
# How the computation runs (compiled layers, fixed-shape head) is also ignored: same losses up to rounding.
_NOT_RESULT_SETTINGS = {
    "data_dir",
    "data_cache_dir",
    "num_proc",
    "log_block_order",
    "step_divisor",
    "compile",
    "mlm_fixed_shape",
    "mlm_fixed_shape_std",
}

# TrainingArguments fields that decide the trained weights; a resumed run must match them exactly.
_RESULT_TRAINING_ARGS = (
    "learning_rate",
    "weight_decay",
    "adam_beta1",
    "adam_beta2",
    "adam_epsilon",
    "max_grad_norm",
    "optim",
    "lr_scheduler_type",
    "lr_scheduler_kwargs",
    "warmup_steps",
    "max_steps",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "seed",
    "data_seed",
    "bf16",
    "fp16",
    "average_tokens_across_devices",
)


def resolved_config(
    run_args: PretrainArguments, training_args: TrainingArguments, data_identity: dict | None = None
) -> dict:
    """The settings that decide the trained weights, as stored in `run_config.json`.

    `data_identity` (`data_identity(blocks, tokenizer)`) is added once the blocks are built; it is what a resume,
    a decay branch or CPT checks so that a run never continues on other data or another tokenizer.
    """
    ignored = _NOT_RESULT_SETTINGS | (set() if run_args.cpt else set(CPT_SETTINGS))  # unset outside CPT
    settings = {k: v for k, v in asdict(run_args).items() if k not in ignored}
    optimisation = {k: getattr(training_args, k) for k in _RESULT_TRAINING_ARGS}
    optimisation["world_size"] = training_args.world_size
    config = {"format": RUN_CONFIG_FORMAT, "run_settings": settings, "training_args": optimisation}
    if data_identity is not None:
        config["data"] = data_identity
    return json.loads(json.dumps(config, default=str))


def data_identity(blocks: datasets.Dataset, tokenizer) -> dict:
    """What a run reads: a content fingerprint of its packed blocks and a hash of its tokenizer."""
    return {"fingerprint": data.data_fingerprint(blocks), "tokenizer": data.tokenizer_hash(tokenizer)}


def run_size(run_args: PretrainArguments) -> str | None:
    """Model size name: the architecture, or the base run's size for CPT (None for a converted decoder without one)."""
    if run_args.architecture:
        return run_args.architecture
    base = run_folders.read_run_info(run_args.model_name_or_path)
    return base.get("size") if base else None


def base_source(run_args) -> dict | None:
    """What a CPT run's starting weights were made from, when its base records it: the base run's own `base_source`,
    or a converted real model's record (`recipes.real_models` -> `modeling_eurobert.convert`: a GGUF release
    dequantised); None otherwise."""
    if not run_args.cpt:
        return None
    if (base := run_folders.read_run_info(run_args.model_name_or_path)) is not None:
        return base.get("base_source")  # absent from run_info written before it was recorded
    record = Path(run_args.model_name_or_path) / SOURCE_RECORD
    return artifacts.read_json(record, "real model record") if record.is_file() else None


def parameter_counts(model) -> dict:
    """The model's parameters as the paper counts them: its encoder with the input embedding, without the LM head
    (`total`), and the input embedding's (`input_embedding`). Counted before LoRA adapters are added."""
    return {
        "total": sum(p.numel() for p in model.base_model.parameters()),
        "input_embedding": model.get_input_embeddings().weight.numel(),
    }


def make_run_info(
    run_args, training_args, *, step: int, identity: dict, start, parameters: dict, intermediate: bool = False
) -> dict:
    """Everything needed to know what a checkpoint is and how it was made (written as `run_info.json`).

    Args:
        run_args, training_args: the resolved settings.
        step: optimizer steps done (this run's global step).
        identity: `data_identity(blocks, tokenizer)`: the packed blocks' fingerprint and the tokenizer hash.
        start: `pretraining.inputs.CptStart`: the CPT base's name (None unless CPT) and the tokens the starting model
            had seen before this run (`tokens_before_cpt`: 0 from scratch, None for a base without run_info).
        parameters: `parameter_counts(model)`.
        intermediate: an intermediate checkpoint (saved in `intermediate/step-<step>`), named `<run>-<paper step>`:
            the step times `step_divisor`, so a toy run's checkpoints carry the names of the paper's.
    """
    name = training_args.run_name or Path(training_args.output_dir).name
    if intermediate:
        paper_step = step * run_args.step_divisor
        name += f"-{paper_step}"
    training = json.loads(training_args.to_json_string())
    return {
        "format": run_folders.RUN_INFO_FORMAT,
        "name": name,
        "size": run_size(run_args),
        "objective": run_args.objective,
        "mlm_probability": run_args.mlm_probability if run_args.objective == "mlm" else None,
        "steps": step,
        "switch_step": run_args.switch_step,
        "cpt_base": start.base,
        "scale": run_args.scale,
        "run_config": resolved_config(run_args, training_args, identity),
        "training_args": training,
        "versions": run_folders.package_versions(),
        "git_commit": run_folders.git_commit(),
        "data": {"source": run_args.corpus_source, **identity},
        "tokens_seen": step * global_batch(training_args) * run_args.block_size,  # this run's, after its start
        "tokens_before_cpt": start.tokens_before,
        "parameters": parameters,
        "base_source": base_source(run_args),
    }


def write_run_info(directory: str | os.PathLike, info: dict) -> None:
    artifacts.write_json_atomic(Path(directory) / RUN_INFO_NAME, info)
