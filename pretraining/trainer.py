"""The model, the Trainer and its callbacks, shared by `recipes/pretrain.py` and `recipes/cpt.py` (`docs/protocol.md`
"Pretraining"). One model object serves both objectives: each batch says `is_causal` (`ObjectiveCollator`). CLM runs
use `EuroBertClmMlmForCausalLM`, the others `…ForMaskedLM`: same state-dict keys, and the head class decides the
attention pattern config.json records (a PFS run's checkpoints say bidirectional, also during its CLM phase). A stable
run with `decay_branches: [12000, 22000]` keeps full checkpoints at budget - decay steps; a branch (`branch_from`,
`max_steps: 12000`) resumes from one under the WSD schedule of a 12000-step run, whose decay starts exactly there.
"""

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path

import torch
from transformers import ProgressCallback, Trainer, TrainerCallback, set_seed
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from core import artifacts, model_folders
from core.progress import StepProgress
from core.run_folders import INTERMEDIATE_DIR
from core.sentence_transformers_files import write_sentence_transformers_files
from modeling_eurobert import EuroBertClmMlmForCausalLM, EuroBertClmMlmForMaskedLM, load_architecture
from modeling_eurobert.export_native import make_plain_loadable
from modeling_eurobert.modeling_eurobert import EuroBertClmMlmDecoderLayer
from pretraining import flops
from pretraining.collator import ObjectiveCollator
from pretraining.provenance import write_run_info
from pretraining.settings import PretrainArguments

logger = logging.getLogger(__name__)


def build_model(run_args: PretrainArguments, tokenizer, seed: int) -> EuroBertClmMlmForMaskedLM:
    """A fresh model of the named architecture whose special ids come from the tokenizer, or existing weights (CPT).
    The head class is the run's: causal for CLM runs, bidirectional for the others (what config.json records)."""
    model_class = EuroBertClmMlmForCausalLM if run_args.objective == "clm" else EuroBertClmMlmForMaskedLM
    if run_args.model_name_or_path:
        model_folders.check_loadable(run_args.model_name_or_path)
        try:
            model, loading = model_class.from_pretrained(
                run_args.model_name_or_path, dtype=torch.float32, output_loading_info=True
            )
        except OSError as error:
            raise model_folders.hub_load_error(run_args.model_name_or_path, "the base model", error) from None
        if missing := sorted(loading["missing_keys"]):
            raise ValueError(
                f"{run_args.model_name_or_path} lacks {len(missing)} weights of a language model "
                f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}), which would start from "
                "random values (a fine-tuned classifier?); continue a pretraining checkpoint instead"
            )
        return model
    config = load_architecture(
        run_args.architecture,
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        mask_token_id=tokenizer.mask_token_id,
    )
    set_seed(seed)  # the initial weights depend on the run seed only
    return model_class(config)


def finish_checkpoint(path: str | Path, info: dict) -> None:
    """What every saved checkpoint holds besides weights and tokenizer: `run_info.json`, the sentence-transformers
    files, and a config.json that plain transformers loads natively when native EuroBERT can hold the model.
    `run_info.json` comes last: a checkpoint without it was interrupted (`checks.checkpoint_problem`)."""
    write_sentence_transformers_files(path, overwrite=True)
    make_plain_loadable(path)
    artifacts.follow_umask(path)  # the weights (and a LoRA checkpoint's adapters) are written 0600
    write_run_info(path, info)


def compile_decoder_layers(model: torch.nn.Module) -> None:
    """Compile every `EuroBertClmMlmDecoderLayer` of `model` in place (`nn.Module.compile`).

    The layers are identical, so dynamo compiles one graph they all reuse; the embedding, final norm and LM head stay
    eager. In place rather than `torch.compile(model)`: parameter names get no `_orig_mod.` prefix (state dicts and
    resume are an eager model's) and accelerate's FSDP2 wrapping still finds the layers. The attention pattern is a
    Python bool that dynamo guards on: a PFS run recompiles once, at the switch.
    """
    layers = [module for module in model.modules() if isinstance(module, EuroBertClmMlmDecoderLayer)]
    if not layers:
        raise ValueError(f"{type(model).__name__} has no EuroBertClmMlmDecoderLayer to compile")
    for layer in layers:
        layer.compile()


def step_flops_per_token(config, block_size: int, collator: ObjectiveCollator) -> Callable[[int], float]:
    """Training FLOPs per token of a 0-based optimizer step (`pretraining.flops` formula): the LM head projects every
    token on CLM steps and the masked share on MLM steps, so a PFS run changes cost at the switch."""
    clm = flops.training_flops_per_token(config, block_size, 1.0)
    mlm = flops.training_flops_per_token(config, block_size, collator.mlm.mlm_probability) if collator.mlm else clm
    return lambda step: clm if collator.objective_at(step) == "clm" else mlm


class PretrainingTrainer(Trainer):
    """`Trainer` plus throughput logs per logging window: tokens/s, the data pipeline's share of wall time, on CUDA
    `mfu` (`pretraining.flops`), and with the fixed-shape MLM head `mlm_overflow_batches` (micro-batches over all
    processes that took the exact path). Takes the batches' `block_index` out of the model inputs, appending it to
    `<output_dir>/block_order-rank<R>.jsonl` when `log_block_order` is set. Its console shows steps, loss and time
    left (`core.progress.StepProgress`) with every log line, unless `disable_tqdm` (then only the log lines).
    """

    def __init__(
        self,
        *args,
        tokens_per_step: int,
        block_order_path: str | None = None,
        flops_per_token: Callable[[int], float] | None = None,
        weight_decay_scope: str = "all",
        **kwargs,
    ):
        self.weight_decay_scope = weight_decay_scope
        super().__init__(*args, **kwargs)
        if not self.args.disable_tqdm:  # transformers' bar writes each update into a log file; ours a line per 30 s
            self.remove_callback(ProgressCallback)
            self.add_callback(StepProgress("pretraining", log_lines=True))
        self.tokens_per_step, self.block_order_path = tokens_per_step, block_order_path
        self.data_seconds = 0.0  # time spent fetching + collating batches since the last log
        self._window = None  # (start time, global step): opened by the first batch, so a resumed run starts there
        mlm = getattr(self.data_collator, "mlm", None)
        self.counts_overflow = getattr(mlm, "positions_per_block", None) is not None
        self.mlm_overflow_batches = 0  # since the last log, this process
        self.flops_per_token, self.peak_flops = flops_per_token, None
        if flops_per_token is not None and self.args.device.type == "cuda":
            device_name = torch.cuda.get_device_name(self.args.device)
            self.peak_flops = flops.bf16_peak_flops(device_name)
            if self.peak_flops is None:
                logger.info("no mfu in the logs: %s has no bf16 peak in pretraining.flops.BF16_PEAK_FLOPS", device_name)

    def get_decay_parameter_names(self, model) -> list[str]:
        """Weight decay on every parameter (`all`: the original AdamW has one parameter group) or on all but norms
        and biases (`no_norms_biases`: the Trainer's default)."""
        if self.weight_decay_scope == "all":
            return [name for name, _ in model.named_parameters()]
        return super().get_decay_parameter_names(model)

    # The one use of transformers' private Trainer API (tests/test_pretrain.py fails loudly when it changes): it counts
    # `labels[..., 1:]` for models whose loss shifts labels, decided once per model (`_loss_shifts_labels`); here the
    # model shifts on CLM steps only, and every micro-batch of a step has the step's objective.
    PRIVATE_API = ("_get_num_items_in_batch", "_loss_shifts_labels")

    def _get_num_items_in_batch(self, batch_samples: list, device):
        self._loss_shifts_labels = bool(batch_samples) and bool(batch_samples[0].get("is_causal"))
        return super()._get_num_items_in_batch(batch_samples, device)

    def get_batch_samples(self, epoch_iterator, num_batches, device):
        start = time.perf_counter()
        if self._window is None:
            self._window = (start, self.state.global_step)
        batches = super().get_batch_samples(epoch_iterator, num_batches, device)
        self.data_seconds += time.perf_counter() - start
        return batches

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        block_index = inputs.pop("block_index")
        self.mlm_overflow_batches += int(inputs.pop("mlm_overflow", False))
        if self.block_order_path is not None and model.training:
            with open(self.block_order_path, "a") as f:
                record = {
                    "step": self.state.global_step + 1,
                    "causal": inputs["is_causal"],
                    "blocks": block_index.tolist(),
                }
                f.write(json.dumps(record) + "\n")
        return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)

    def log(self, logs: dict, start_time: float | None = None) -> None:
        if "loss" in logs:
            started, first_step = self._window
            seconds = max(time.perf_counter() - started, 1e-9)
            logs["tokens_per_second"] = round((self.state.global_step - first_step) * self.tokens_per_step / seconds, 1)
            logs["data_time_share"] = round(self.data_seconds / seconds, 4)
            if self.peak_flops is not None:
                window_flops = self.tokens_per_step * sum(
                    map(self.flops_per_token, range(first_step, self.state.global_step))
                )
                logs["mfu"] = round(window_flops / seconds / (self.peak_flops * self.args.world_size), 4)
            if self.counts_overflow:  # a collective: every process logs at the same steps
                count = torch.tensor(self.mlm_overflow_batches, device=self.args.device)
                logs["mlm_overflow_batches"] = int(self.accelerator.reduce(count, reduction="sum"))
                self.mlm_overflow_batches = 0
            self._window, self.data_seconds = (time.perf_counter(), self.state.global_step), 0.0
        super().log(logs, start_time)


class SchedulePlanCallback(TrainerCallback):
    """Saves full checkpoints at the decay-branch points and the last step (what a later CPT with
    keep_optimizer_state reads); resets AdamW at the PFS switch if asked; saves intermediate weights; writes
    `run_info.json` and the sentence-transformers files into every checkpoint."""

    def __init__(
        self,
        save_model: Callable[[str], None],
        save_steps: set[int],
        intermediate_steps: set[int],
        reset_at: int | None,
        info: Callable[..., dict],
        save_last: bool = True,
    ):
        """save_model: the trainer's `save_model` (gathers sharded weights); info(step, intermediate=False): the
        run_info.json of a checkpoint saved at `step`; save_last: a `checkpoint-<max_steps>` too (off for a LoRA run
        with save_strategy "no": its adapters resume nothing once the run is done)."""
        self.save_model, self.save_steps, self.intermediate_steps = save_model, save_steps, intermediate_steps
        self.reset_at, self.info, self.save_last = reset_at, info, save_last

    def on_step_begin(self, args, state, control, optimizer=None, **kwargs):
        if self.reset_at is not None and state.global_step == self.reset_at:
            inner = getattr(optimizer, "optimizer", optimizer)  # accelerate wraps the torch optimizer
            inner.state.clear()  # AdamW re-initialises its moments and step count lazily
            logger.info("PFS switch at step %d: optimizer state reset", state.global_step)

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step in self.save_steps or self.save_last and state.global_step == state.max_steps:
            control.should_save = True
        if state.global_step in self.intermediate_steps:
            path = Path(args.output_dir) / INTERMEDIATE_DIR / f"step-{state.global_step}"
            self.save_model(str(path))
            if state.is_world_process_zero:
                finish_checkpoint(path, self.info(state.global_step, intermediate=True))
        return control

    def on_save(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            path = Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
            finish_checkpoint(path, self.info(state.global_step))


class LoadOptimizerStateCallback(TrainerCallback):
    """CPT `keep_optimizer_state`: load AdamW moments and steps from the base run's checkpoint at the start of a fresh
    run (a resumed one has its own); the learning rates of the new schedule are kept."""

    def __init__(self, optimizer_file: str):
        self.optimizer_file = optimizer_file

    def on_train_begin(self, args, state, control, optimizer=None, **kwargs):
        inner = getattr(optimizer, "optimizer", optimizer)
        saved = torch.load(self.optimizer_file, map_location="cpu", weights_only=True)
        schedule = [{k: group[k] for k in ("lr", "initial_lr") if k in group} for group in inner.param_groups]
        inner.load_state_dict(saved)
        for group, keep in zip(inner.param_groups, schedule):
            group.update(keep)
        logger.info("CPT: optimizer state loaded from %s", self.optimizer_file)
