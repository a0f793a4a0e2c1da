"""LoRA through peft, for CPT of a decoder too large to train fully (`recipes.cpt --lora`) and for fine-tuning
(`evaluation.run --peft lora`).

A LoRA run trains adapters on the attention and MLP projections (and, if asked, full copies of other modules: peft's
`modules_to_save`). Every model a run publishes is saved merged, so it loads without peft; the Trainer checkpoints
(`checkpoint-N`) hold the adapters, the config and the optimizer state for resuming, and are not loadable models.
"""

import copy
import os
import warnings

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

# The projections of a EuroBERT (and Llama-family) decoder layer.
TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def wrap(
    model,
    rank: int,
    alpha: float,
    dropout: float = 0.0,
    target_modules=TARGET_MODULES,
    modules_to_save=(),
    seed: int = 0,
) -> PeftModel:
    """`model` with LoRA adapters (their initialisation seeded by `seed`); only the adapters and `modules_to_save`
    train."""
    config = LoraConfig(
        r=rank,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules=list(target_modules),
        modules_to_save=list(modules_to_save) or None,
    )
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        torch.manual_seed(seed)  # peft asks the deprecated `is_gradient_checkpointing` (transformers 5 warns)
        warnings.filterwarnings("ignore", "`is_gradient_checkpointing` is deprecated", FutureWarning)
        return get_peft_model(model, config)


def merged(model):
    """A copy of `model` with its adapters merged into the base weights (a plain transformers model); a model
    without adapters is returned as is."""
    if not isinstance(model, PeftModel):
        return model
    return copy.deepcopy(model).merge_and_unload()


def head_modules(model) -> list[str]:
    """The task head of a `*For{SequenceClassification,TokenClassification,QuestionAnswering}` model: its top-level
    modules with parameters outside the encoder (`base_model_prefix`), trained fully beside the adapters."""
    return [
        name
        for name, child in model.named_children()
        if name != model.base_model_prefix and any(True for _ in child.parameters())
    ]


def save_trainer_model(trainer, directory: str | os.PathLike) -> None:
    """`Trainer.save_model` for a LoRA run: the merged weights, the tokenizer and `training_args.bin` (no adapter
    files: the directory is a plain checkpoint)."""
    model = merged(trainer.model)
    if trainer.args.should_save:
        os.makedirs(directory, exist_ok=True)
        model.save_pretrained(directory)
        trainer.processing_class.save_pretrained(directory)
        torch.save(trainer.args, os.path.join(directory, "training_args.bin"))


class CheckpointConfigCallback(TrainerCallback):
    """Writes the model's config.json into every Trainer checkpoint `checkpoint-N`, beside the adapters the Trainer
    saved there (what `run_info.json` and the sentence-transformers files read). No merged weights there: the
    Trainer's resume would load a `model.safetensors` into the peft model instead of the adapters."""

    def __init__(self, trainer):
        self.trainer = trainer

    def on_save(self, args, state, control, **kwargs):
        if args.should_save:
            path = os.path.join(args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")
            self.trainer.model.get_base_model().config.save_pretrained(path)
