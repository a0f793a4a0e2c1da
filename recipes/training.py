"""Shared pretraining machinery for `recipes/pretrain.py` and `recipes/cpt.py` (SPEC "Optimisation").

What lives here, in reading order:
- `PretrainArguments` / `CptArguments`: the study-specific run settings (everything else is `TrainingArguments`);
- `RecipeParser`: `--config FILE.yaml` + CLI overrides, unknown keys raise;
- checks that run before anything is written (`check_run_settings`, `check_output_dir`);
- `build_*`: tokenizer, blocks, model (thin wrappers over `recipes.data` and `modeling_eurobert`);
- `ObjectiveCollator`: picks CLM or MLM for a batch from the step its blocks belong to (this is how PFS switches
  objective inside one run, whatever the number of workers, processes or resumes);
- `PretrainingTrainer` and the callbacks: tokens/s and data-pipeline share in the logs, planned checkpoints
  (decay-branch points, final step), intermediate checkpoints, optimizer reset at the PFS switch, `run_info.json`
  and the sentence-transformers files (`core.sentence_transformers_files`) in every saved checkpoint;
- `compile_decoder_layers` (`compile: regional`) and, with `mlm_fixed_shape`, MLM batches whose masked positions
  have a fixed count per block (a static-shape LM head; overflow batches counted in the logs);
- `train(run_args, training_args)`: the storyboard both recipes call.

Design choices (documented in the README):
- One model object for both objectives: the LM head, called with `is_causal=True` and the input ids as labels for
  CLM steps (the model shifts them: next-token prediction goes with causal attention, in the model only) and
  `is_causal=False` with MLM labels for MLM steps; each batch says which (`ObjectiveCollator`). CLM runs use
  `EuroBertClmMlmForCausalLM`, MLM, PFS and CPT runs `EuroBertClmMlmForMaskedLM`: same parameters and state-dict
  keys, so every checkpoint loads into either, and the head class decides the attention pattern a checkpoint's
  config.json records (a PFS run's checkpoints say bidirectional, also during its CLM phase).
- Budgets: a stable run with `decay_branches: [12000, 22000]` keeps full Trainer checkpoints at 10000 and 20000
  (budget - decay steps); a branch run (`branch_from: <stable output_dir>`, `max_steps: 12000`) resumes from that
  checkpoint (weights, optimizer, scheduler step, data position, RNG) under the WSD schedule of a 12000-step run,
  whose decay starts exactly there. The 42k stable run's own last 2000 steps are its decay branch.
- The WSD schedule is transformers' `warmup_stable_decay` (`lr_scheduler_kwargs`: num_decay_steps, decay_type
  linear, min_lr_ratio 0), not a hand-written one.
"""

import json
import logging
import os
import time
import types
import typing
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import datasets
import torch
import yaml
from transformers import (
    HfArgumentParser,
    Trainer,
    TrainerCallback,
    TrainingArguments,
    set_seed,
)
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from core import artifacts, cli, paths
from core.sentence_transformers_files import write_sentence_transformers_files
from modeling_eurobert import ARCHITECTURES, EuroBertClmMlmForCausalLM, EuroBertClmMlmForMaskedLM, load_architecture
from modeling_eurobert.modeling_eurobert import EuroBertClmMlmDecoderLayer
from recipes import data, flops

logger = logging.getLogger(__name__)

RUN_CONFIG_NAME, RUN_INFO_NAME, INTERMEDIATE_DIR = artifacts.RUN_CONFIG_NAME, artifacts.RUN_INFO_NAME, artifacts.INTERMEDIATE_DIR
# Run settings that do not change the trained weights (paths, workers, logging); ignored when comparing configs.
# How the computation runs (compiled layers, fixed-shape head) is also ignored: same losses up to rounding.
_NOT_RESULT_SETTINGS = {"data_dir", "data_cache_dir", "num_proc", "log_block_order", "step_divisor", "compile", "mlm_fixed_shape",
                        "mlm_fixed_shape_std"}
COMPILE_MODES = ("none", "regional")
WEIGHT_DECAY_SCOPES = ("all", "no_norms_biases")
# TrainingArguments fields that decide the trained weights; a resumed run must match them exactly.
_RESULT_TRAINING_ARGS = (
    "learning_rate", "weight_decay", "adam_beta1", "adam_beta2", "adam_epsilon", "max_grad_norm", "optim",
    "lr_scheduler_type", "lr_scheduler_kwargs", "warmup_steps", "max_steps", "per_device_train_batch_size",
    "gradient_accumulation_steps", "seed", "data_seed", "bf16", "fp16", "average_tokens_across_devices",
)
# How a step's blocks are spread over processes and micro-batches; a resume may change it (`check_batch_layout`).
_LAYOUT_KEYS = ("world_size", "per_device_train_batch_size", "gradient_accumulation_steps")


# ---------------------------------------------------------------------------------------------------- settings
@dataclass
class PretrainArguments:
    """Study-specific run settings; optimisation and logging stay in `TrainingArguments`.

    The seed of the fixed block order is `TrainingArguments.data_seed` (required: every objective must share it).

    Groups: model (`architecture` | `model_name_or_path`, `tokenizer_name_or_path`, `toy_vocab_size`);
    data (`corpus_source`, `corpus_name`, `data_dir`, `max_docs`, `block_size`, `data_cache_dir`,
    `num_proc`, `epochs`, `global_batch_size`); objective (`objective`, `mlm_probability`, `mask_replace_prob`,
    `random_replace_prob`, `masking_seed`, PFS `switch_step`, `reset_optimizer_at_switch`); optimiser
    (`weight_decay_scope`); budgets
    (`decay_branches`, `branch_from`, `intermediate_steps`); provenance (`scale`, `log_block_order`);
    speed, same losses (`compile`, `mlm_fixed_shape`, `mlm_fixed_shape_std`).
    """

    architecture: str | None = field(default=None, metadata={"help": f"architecture for a run from scratch: {', '.join(ARCHITECTURES)}"})
    model_name_or_path: str | None = field(default=None, metadata={"help": "start from these weights instead (CPT, converted decoder)"})
    tokenizer_name_or_path: str | None = field(default=None, metadata={"help": "tokenizer dir or Hub id (paper: Llama-3 with <|mask|>); none = train the toy BPE"})
    toy_vocab_size: int = field(default=8192, metadata={"help": "vocabulary of the toy BPE trained when no tokenizer is given"})
    corpus_source: str = field(default="bundle", metadata={"help": "'bundle' (offline Wikipedia), a local file/dir, or a Hub id (paper: HuggingFaceFW/fineweb-edu); several, comma-separated, are concatenated in order (a Hub id may name its config: id:config)"})
    corpus_name: str | None = field(default=None, metadata={"help": "Hub dataset config (paper: sample-350BT, see docs/protocol.md)"})
    data_dir: str | None = field(default=None, metadata={"help": "data bundle dir (default: $MLM_VS_CLM_DATA, then ../shared/data)"})
    max_docs: int | None = field(default=None, metadata={"help": "keep only the first N documents of the corpus (toy and test runs)"})
    block_size: int = field(default=2048, metadata={"help": "tokens per packed block (paper: 2048)"})
    data_cache_dir: str = field(default=".cache/pretrain", metadata={"help": "where tokenized/packed Arrow files and toy tokenizers are cached"})
    num_proc: int = field(default=1, metadata={"help": "tokenization processes"})
    epochs: int = field(default=1, metadata={"help": "times the fixed block order may be read (a run needing more blocks than one pass wraps around to the start; each block then gets a fresh mask); 1 = never repeat data"})
    global_batch_size: int | None = field(default=None, metadata={"help": "blocks per optimizer step; if set, devices x per-device batch x accumulation must equal it"})
    objective: str = field(default="mlm", metadata={"help": "clm or mlm (with switch_step: the objective after the switch, mlm)"})
    mlm_probability: float = field(default=0.4, metadata={"help": "masking ratio p in (0, 1) (paper: 0.2-0.5; 0.4 for PFS and CPT)"})
    mask_replace_prob: float = field(default=1.0, metadata={"help": "share of masked tokens replaced by <|mask|> (original code: 1.0)"})
    random_replace_prob: float = field(default=0.0, metadata={"help": "share of masked tokens replaced by a random token (BERT: 0.1)"})
    masking_seed: int = field(default=0, metadata={"help": "seed of the MLM masks, combined with each block's index"})
    switch_step: int | None = field(default=None, metadata={"help": "PFS: steps 1..switch_step are CLM, later steps MLM, in one run"})
    weight_decay_scope: str = field(default="all", metadata={"help": "all: weight decay on every parameter, one AdamW group (the original Optimus code); no_norms_biases: the Trainer's default, norms and biases undecayed"})
    reset_optimizer_at_switch: bool = field(default=False, metadata={"help": "PFS: clear AdamW moments at the switch (default: carry them over)"})
    decay_branches: list[int] = field(default_factory=list, metadata={"help": "budgets (steps) that branch a decay off this stable run; keeps checkpoints at budget - decay"})
    branch_from: str | None = field(default=None, metadata={"help": "output_dir of the stable run this decay branch starts from (max_steps = the budget)"})
    intermediate_steps: list[int] = field(default_factory=list, metadata={"help": "steps whose weights are saved to <output_dir>/intermediate/step-<N> (paper: 1000 2000 5000 10000 20000 40000)"})
    step_divisor: int = field(default=1, metadata={"help": "toy scales: paper steps / this run's steps; intermediate checkpoints are named with paper steps (step x step_divisor)"})
    scale: str | None = field(default=None, metadata={"help": "manifest scale this run belongs to (paper, toy, smoke); provenance only"})
    log_block_order: bool = field(default=False, metadata={"help": "append the block indices of every step to <output_dir>/block_order-rank<R>.jsonl (audit)"})
    compile: str = field(default="none", metadata={"help": "none, or regional: torch.compile each decoder layer in place (same parameter names and checkpoints; a PFS switch costs one recompile). Paper configs on GPU use regional; CPU runs and tests: none"})
    mlm_fixed_shape: bool = field(default=False, metadata={"help": "MLM batches carry each block's masked positions padded to a fixed K, so the LM head has static shapes (no host sync, compilable); a batch with a row above K takes the exact path, counted as mlm_overflow_batches in the logs. Same loss. Paper configs: true"})
    mlm_fixed_shape_std: float = field(default=data.MASKED_POSITIONS_STD, metadata={"help": "margin of K in standard deviations of the binomial mask count: K = ceil(T p + std sqrt(T p (1 - p))), T = block_size (see recipes.data.masked_positions_bound)"})

    def __post_init__(self):
        if self.objective not in data.OBJECTIVES:
            raise ValueError(f"objective={self.objective!r} is unknown; use one of {data.OBJECTIVES}")
        if not 0.0 < self.mlm_probability < 1.0:
            raise ValueError(f"mlm_probability={self.mlm_probability} must be in (0, 1) (paper: 0.2 to 0.5)")
        if (self.architecture is None) == (self.model_name_or_path is None):
            raise ValueError("give exactly one of --architecture (from scratch) or --model_name_or_path (continue)")
        if self.architecture is not None and self.architecture not in ARCHITECTURES:
            raise ValueError(f"architecture={self.architecture!r} is unknown; choose one of {', '.join(ARCHITECTURES)}")
        if self.switch_step is not None and self.objective != "mlm":
            raise ValueError("switch_step flips CLM to MLM; set objective: mlm (the objective after the switch)")
        if self.weight_decay_scope not in WEIGHT_DECAY_SCOPES:
            raise ValueError(f"weight_decay_scope={self.weight_decay_scope!r}: use one of {WEIGHT_DECAY_SCOPES}")
        if self.epochs < 1:
            raise ValueError(f"epochs={self.epochs} must be >= 1")
        if self.max_docs is not None and self.max_docs < 1:
            raise ValueError(f"max_docs={self.max_docs} must be >= 1")
        if self.compile not in COMPILE_MODES:
            raise ValueError(f"compile={self.compile!r} is unknown; use one of {COMPILE_MODES}")
        if self.mlm_fixed_shape_std < 0:
            raise ValueError(f"mlm_fixed_shape_std={self.mlm_fixed_shape_std} must be >= 0 (default 4)")


@dataclass
class CptArguments(PretrainArguments):
    """MLM continued pretraining (CPT) from a decayed checkpoint or a converted decoder.

    Adds `keep_optimizer_state` and `data_start_block` to `PretrainArguments`; `model_name_or_path` is required.
    """

    keep_optimizer_state: bool = field(default=False, metadata={"help": "load AdamW moments from the base's last Trainer checkpoint (default: fresh optimizer)"})
    data_start_block: int | None = field(default=None, metadata={"help": "first block of the fixed order to read; default: continue after the base run's blocks (0 for a converted decoder)"})

    def __post_init__(self):
        super().__post_init__()
        if self.model_name_or_path is None:
            raise ValueError("CPT starts from existing weights: pass --model_name_or_path (a decayed run or a converted decoder)")
        if self.objective != "mlm" or self.switch_step is not None or self.branch_from or self.decay_branches:
            raise ValueError("CPT is MLM only: drop objective/switch_step/branch_from/decay_branches from the CPT config")


class RecipeParser(HfArgumentParser):
    """`HfArgumentParser` over (run settings, `TrainingArguments`) with `--config FILE.yaml`; CLI overrides YAML.

    Optional run settings also accept `null` on the command line, to unset a value the YAML sets.
    """

    def __init__(self, dataclass_types, **kwargs):
        super().__init__(dataclass_types, **kwargs)
        optional = {f.name for f in fields(dataclass_types[0]) if f.default is None}  # HfArgumentParser strips None from f.type
        for action in self._actions:
            if action.dest in optional and callable(action.type):
                action.type = _nullable(action.type)

    def parse_args_and_config(self, argv: list[str] | None = None) -> tuple:
        """Parse `argv` (default: sys.argv[1:]), reading `--config` first.

        Returns:
            (run settings, TrainingArguments).

        Raises:
            ValueError: the YAML holds keys no dataclass knows.
        """
        import sys

        argv = list(sys.argv[1:] if argv is None else argv)
        if "--config" in argv:
            at = argv.index("--config")
            config_path, argv = argv[at + 1], argv[:at] + argv[at + 2 :]
            self.set_defaults(**load_config(config_path, self.dataclass_types))
        return tuple(self.parse_args_into_dataclasses(args=argv, look_for_args_file=False))


def _nullable(convert):
    def parse(text: str):
        return None if text.lower() in ("null", "none") else convert(text)
    parse.__name__ = getattr(convert, "__name__", "value")  # argparse names the type in its errors
    return parse


def load_config(path: str | os.PathLike, dataclass_types) -> dict:
    """Read a recipe YAML: a mapping whose keys some dataclass of `dataclass_types` defines, with values of the
    field's type (a list where a list is expected, a number where a number is), each checked before any work."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config file {path} does not exist")
    try:
        config = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise ValueError(f"{path} is not valid YAML: {str(error).splitlines()[0]}") from None
    config = {} if config is None else config
    if not isinstance(config, dict):
        raise ValueError(f"{path} must be a mapping of settings (key: value), not a {type(config).__name__}")
    # the class annotations, not `fields()`: HfArgumentParser rewrites field types in place (dict -> str)
    annotations = {name: kind for cls in dataclass_types for name, kind in typing.get_type_hints(cls).items()}
    unknown = sorted(set(config) - set(annotations))
    if unknown:
        raise ValueError(f"{path}: unknown keys {unknown}; see `--help` for the run settings and TrainingArguments")
    for key, value in config.items():
        expected = _expected_kinds(annotations[key])
        wrong = expected and (not isinstance(value, expected) or (isinstance(value, bool) and bool not in expected))
        if isinstance(value, list) and annotations[key] == list[int]:
            wrong = any(not isinstance(item, int) or isinstance(item, bool) for item in value)
            expected = ("a list of integers",)
        if wrong:
            words = {int: "an integer", float: "a number", bool: "true or false", str: "a string", list: "a list",
                     type(None): "null"}
            names = " or ".join(dict.fromkeys(words.get(k, k) for k in expected if not (k is int and float in expected)))
            raise ValueError(f"{path}: {key} must be {names}, got {value!r}")
    return config


def _expected_kinds(annotation) -> tuple[type, ...]:
    """The YAML value types a dataclass field accepts; () when the annotation is too loose to check."""
    if isinstance(annotation, str):  # postponed annotations ("int | None")
        kinds = {"int": (int,), "float": (int, float), "bool": (bool,), "str": (str,)}
        parts = [part.strip() for part in annotation.split("|")]
        if any(part.startswith(("list", "List")) for part in parts):
            return (list,) + ((type(None),) if "None" in parts else ())
        found = [kind for part in parts for kind in kinds.get(part, ())]
        if len(found) != sum(len(kinds[p]) for p in parts if p in kinds) or not found:
            return ()
        return tuple(found) + ((type(None),) if "None" in parts else ())
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is bool:
        return (bool,)
    if annotation is int:
        return (int,)
    if annotation is float:
        return (int, float)
    if annotation is str:
        return (str,)
    if origin is list:
        return (list,)
    if origin in (typing.Union, types.UnionType):
        kinds = [_expected_kinds(a) for a in args if a is not type(None)]
        if not kinds or any(not k for k in kinds):
            return ()
        return tuple({k for group in kinds for k in group}) + ((type(None),) if type(None) in args else ())
    return ()


# ------------------------------------------------------------------------------------------------------ checks
def decay_steps(training_args: TrainingArguments) -> int:
    """Length of the WSD decay phase (`lr_scheduler_kwargs.num_decay_steps`), 0 without a WSD schedule."""
    if training_args.lr_scheduler_type != "warmup_stable_decay":
        return 0
    return int(training_args.lr_scheduler_kwargs.get("num_decay_steps", 0))


def global_batch(training_args: TrainingArguments) -> int:
    """Blocks per optimizer step over all devices."""
    return training_args.per_device_train_batch_size * training_args.world_size * training_args.gradient_accumulation_steps


def check_run_settings(run_args: PretrainArguments, training_args: TrainingArguments) -> None:
    """Refuse contradictory settings before any file is written (one-line errors)."""
    total = training_args.max_steps
    if total is None or total <= 0:
        raise ValueError("set max_steps > 0: budgets are counted in optimizer steps (paper: 42000)")
    if training_args.train_sampling_strategy != "sequential":
        raise ValueError("set train_sampling_strategy: sequential (every objective must read the blocks in the same order)")
    if training_args.remove_unused_columns:
        raise ValueError("set remove_unused_columns: false (the collator needs each block's block_index)")
    if training_args.data_seed is None:
        raise ValueError("set data_seed: it fixes the block order that every objective shares (paper: one seed for all runs)")
    if run_args.compile != "none" and training_args.torch_compile:
        raise ValueError("compile: regional compiles the decoder layers already; drop torch_compile (it would compile the whole model on top)")
    if os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true" and training_args.device.type == "cpu":
        # accelerate enables FSDP on accelerators only; on the CPU it would quietly train with DDP instead
        raise ValueError("the accelerate config asks for FSDP, which accelerate runs on GPUs only (on the CPU it "
                         "would train with DDP instead); launch CPU runs with recipes/accelerate/cpu.yaml")
    if run_args.switch_step is not None and not 0 < run_args.switch_step < total:
        raise ValueError(f"switch_step={run_args.switch_step} must be strictly between 0 and max_steps={total}")
    bad = [s for s in run_args.intermediate_steps if not 0 < s <= total]
    if bad:
        raise ValueError(f"intermediate_steps {bad} fall outside (0, max_steps={total}]")
    if run_args.global_batch_size is not None and run_args.global_batch_size != global_batch(training_args):
        raise ValueError(
            f"global_batch_size={run_args.global_batch_size} but devices x per_device_train_batch_size x "
            f"gradient_accumulation_steps = {global_batch(training_args)}; adjust the per-device batch or accumulation"
        )
    if run_args.decay_branches or run_args.branch_from:
        _check_budgets(run_args, training_args)


def _check_budgets(run_args: PretrainArguments, training_args: TrainingArguments) -> None:
    decay = decay_steps(training_args)
    if decay <= 0:
        raise ValueError("decay branches need lr_scheduler_type: warmup_stable_decay with lr_scheduler_kwargs.num_decay_steps > 0")
    bad = [b for b in run_args.decay_branches if not training_args.warmup_steps + decay < b <= training_args.max_steps]
    if bad:
        raise ValueError(f"decay_branches {bad} must lie in (warmup + decay, max_steps={training_args.max_steps}]")
    if run_args.decay_branches and training_args.save_total_limit is not None:
        raise ValueError("save_total_limit would delete the decay-branch checkpoints; unset it for a stable run")
    if run_args.branch_from and run_args.decay_branches:
        raise ValueError("a run is either a stable run (decay_branches) or a decay branch (branch_from), not both")


RUN_CONFIG_FORMAT = 2  # 2: run_config.json records the data identity (packed blocks + tokenizer) checked on resume
_BUDGET_KEYS = {"max_steps", "decay_branches", "branch_from", "intermediate_steps"}  # differ between a run's branches


def resolved_config(run_args: PretrainArguments, training_args: TrainingArguments, data_identity: dict | None = None) -> dict:
    """The settings that decide the trained weights, as stored in `run_config.json`.

    `data_identity` (`data_identity(blocks, tokenizer)`) is added once the blocks are built; it is what a resume,
    a decay branch or CPT checks so that a run never continues on other data or another tokenizer.
    """
    settings = {k: v for k, v in asdict(run_args).items() if k not in _NOT_RESULT_SETTINGS}
    optimisation = {k: getattr(training_args, k) for k in _RESULT_TRAINING_ARGS}
    optimisation["lr_scheduler_type"] = str(getattr(training_args.lr_scheduler_type, "value", training_args.lr_scheduler_type))
    optimisation["optim"] = str(getattr(training_args.optim, "value", training_args.optim))
    optimisation["world_size"] = training_args.world_size
    config = {"format": RUN_CONFIG_FORMAT, "run_settings": settings, "training_args": optimisation}
    if data_identity is not None:
        config["data"] = data_identity
    return json.loads(json.dumps(config, default=str))


def data_identity(blocks: datasets.Dataset, tokenizer) -> dict:
    """What a run reads: a content fingerprint of its packed blocks and a hash of its tokenizer."""
    return {"fingerprint": data.data_fingerprint(blocks), "tokenizer": data.tokenizer_hash(tokenizer)}


def _config_diff(stored: dict, current: dict, ignore: set[str] = frozenset(), groups=("run_settings", "training_args")) -> list[str]:
    diff = []
    for group in groups:
        for key in sorted(set(stored.get(group, {})) | set(current.get(group, {}))):
            old, new = stored.get(group, {}).get(key), current.get(group, {}).get(key)
            if key not in ignore and old != new:
                diff.append(f"{group + '.' if group == 'data' else ''}{key}: {old!r} -> {new!r}")
    return diff


def _read_run_config(path: Path) -> dict:
    stored = artifacts.read_json(path, "run config")
    if stored.get("format") != RUN_CONFIG_FORMAT:
        raise ValueError(f"{path} was written by an older version of the recipes (format {stored.get('format', 1)}, "
                         f"now {RUN_CONFIG_FORMAT}) and lacks the data identity a resume checks; use a new output_dir")
    return stored


def last_complete_checkpoint(directory: str | os.PathLike) -> str | None:
    """Newest `checkpoint-N` under `directory` whose trainer_state.json exists (the Trainer writes it last)."""
    directory = Path(directory)
    if not directory.is_dir():
        return None
    done = [p for p in directory.glob(f"{PREFIX_CHECKPOINT_DIR}-*") if (p / "trainer_state.json").is_file()]
    return str(max(done, key=lambda p: int(p.name.split("-")[-1]))) if done else None


def check_sources(run_args: PretrainArguments) -> None:
    """The paths a run reads exist (a Hub id is checked for its form only; loading it tells the rest)."""
    for what, source in (("model_name_or_path", run_args.model_name_or_path),
                         ("tokenizer_name_or_path", run_args.tokenizer_name_or_path)):
        if source:
            artifacts.local_or_hub(source, what)
    if run_args.branch_from and not Path(run_args.branch_from).is_dir():
        raise FileNotFoundError(f"branch_from {run_args.branch_from} does not exist; train the stable run first")


def check_output_dir(run_args: PretrainArguments, training_args: TrainingArguments) -> str | None:
    """Decide where training starts, refusing to mix runs or to write over what this recipe did not make. Reads only.

    Returns:
        The checkpoint to resume from: `--resume_from_checkpoint`, else the newest complete checkpoint in
        `output_dir` (auto-resume), else the stable checkpoint of a decay branch, else None.

    Raises:
        ValueError: `output_dir` is an input of the run, holds files of something else, or a run made with other
            settings; the resume checkpoint is not a complete one of this run; the branch's stable run is missing.
    """
    output_dir = Path(training_args.output_dir)
    for role, source in (("model_name_or_path", run_args.model_name_or_path), ("branch_from", run_args.branch_from),
                         ("tokenizer_name_or_path", run_args.tokenizer_name_or_path)):
        if source and Path(source).expanduser().resolve() == output_dir.resolve():
            raise ValueError(f"output_dir {output_dir} is also the {role}: training would overwrite its own input; "
                             "choose another output_dir")
    current = resolved_config(run_args, training_args)
    config_path = output_dir / RUN_CONFIG_NAME
    if config_path.is_file():
        stored = _read_run_config(config_path)
        diff = _config_diff(stored, current, ignore=set(_LAYOUT_KEYS))
        if diff:
            raise ValueError(f"{output_dir} was made by a different config ({'; '.join(diff)}); use a new output_dir")
        check_batch_layout(stored, current, str(output_dir))
    elif output_dir.is_dir() and any(p.name != artifacts.LOCK_NAME for p in output_dir.iterdir()):
        raise ValueError(f"{output_dir} is not empty and has no {RUN_CONFIG_NAME}, so this recipe did not make it; "
                         "choose a new or empty output_dir (nothing was written)")
    if training_args.resume_from_checkpoint:
        return _check_resume_checkpoint(training_args.resume_from_checkpoint, current)
    if resume := last_complete_checkpoint(output_dir):
        return resume
    if run_args.branch_from:
        return _branch_checkpoint(run_args, training_args, current)
    return None


def _check_resume_checkpoint(checkpoint: str, current: dict) -> str:
    """An explicit `--resume_from_checkpoint` must be a complete Trainer checkpoint of a run with these settings."""
    path = Path(checkpoint)
    if not (path / "trainer_state.json").is_file():
        raise ValueError(f"--resume_from_checkpoint {checkpoint} is not a complete Trainer checkpoint (no "
                         "trainer_state.json); pass <output_dir>/checkpoint-N")
    info = artifacts.read_run_info(path)
    if info is not None:
        diff = _config_diff(info.get("run_config", {}), current, ignore=_BUDGET_KEYS | set(_LAYOUT_KEYS))
        if diff:
            raise ValueError(f"--resume_from_checkpoint {checkpoint} belongs to a run with other settings "
                             f"({'; '.join(diff)}); resume from a checkpoint of this run")
        check_batch_layout(info.get("run_config", {}), current, f"--resume_from_checkpoint {checkpoint}")
    return str(path)


def _branch_checkpoint(run_args: PretrainArguments, training_args: TrainingArguments, current: dict) -> str:
    """The stable checkpoint a decay branch starts from, after checking the stable run used the same settings."""
    start = training_args.max_steps - decay_steps(training_args)
    checkpoint = Path(run_args.branch_from) / f"{PREFIX_CHECKPOINT_DIR}-{start}"
    if not (checkpoint / "trainer_state.json").is_file():
        raise ValueError(f"decay branch needs the stable checkpoint {checkpoint}; run the stable run with decay_branches including {training_args.max_steps}")
    stable = _read_run_config(Path(run_args.branch_from) / RUN_CONFIG_NAME)
    diff = _config_diff(stable, current, ignore=_BUDGET_KEYS | set(_LAYOUT_KEYS))
    if diff:
        raise ValueError(f"decay branch differs from its stable run {run_args.branch_from}: {'; '.join(diff)}")
    check_batch_layout(stable, current, f"the stable run {run_args.branch_from}")
    return str(checkpoint)


def check_batch_layout(stored: dict, current: dict, where: str) -> None:
    """Allow a run to continue on another number of processes, per-device batch or accumulation when its optimizer
    steps stay the same; refuse otherwise, naming the numbers.

    The update is the same when (1) the global batch (processes x per-device batch x accumulation) is unchanged:
    the blocks are read in order, so step s reads blocks [s G, (s + 1) G) whatever the layout, the Trainer skips
    s x G blocks on resume, and each block's MLM mask is seeded by its index; and (2) the loss of a step is the sum
    over its labelled tokens divided by their count over all processes (`average_tokens_across_devices: true`, the
    default; the LM heads take the Trainer's `num_items_in_batch`). At most the order of floating-point sums changes
    (2 processes <-> 1 is bit-identical: tests/test_launch.py). The RNG states of the old ranks are not needed:
    masks come from block indices and the architectures have no dropout. A DDP checkpoint holds the whole optimizer state;
    an FSDP one resumed on another world size is untested.

    Args:
        stored: the `run_config.json` (or a checkpoint's `run_info.json` run_config) of the run continued.
        current: `resolved_config` of this launch.
        where: what `stored` came from, for the message.
    """
    old = {k: stored.get("training_args", {}).get(k) for k in _LAYOUT_KEYS}
    new = {k: current["training_args"][k] for k in _LAYOUT_KEYS}
    if old == new:
        return

    def layout(v):
        return (f"{v['world_size']} processes x {v['per_device_train_batch_size']} per device x "
                f"{v['gradient_accumulation_steps']} accumulation steps")

    old_batch, new_batch = (v["world_size"] * v["per_device_train_batch_size"] * v["gradient_accumulation_steps"]
                            for v in (old, new))
    if old_batch != new_batch:
        per_step = new["world_size"] * new["per_device_train_batch_size"]
        hint = (f"gradient_accumulation_steps {old_batch // per_step}" if old_batch % per_step == 0 else
                f"a per-device batch and accumulation whose product with {new['world_size']} processes is {old_batch}")
        raise ValueError(f"{where} trained with a global batch of {old_batch} blocks ({layout(old)}) but this launch "
                         f"gives {new_batch} ({layout(new)}): its steps would read other blocks; keep {old_batch} "
                         f"blocks per step (here: {hint})")
    if not current["training_args"].get("average_tokens_across_devices") and max(old["world_size"], new["world_size"]) > 1:
        raise ValueError(f"{where} trained with {layout(old)} and this launch uses {layout(new)}, but "
                         "average_tokens_across_devices is false: each process divides its loss by its own token "
                         "count, so the update depends on the split; resume with the original layout")


def check_data_identity(run_args: PretrainArguments, training_args: TrainingArguments, identity: dict,
                        resume: str | None) -> None:
    """Refuse to continue a run (resume, decay branch, CPT) on other blocks or with another tokenizer.

    Compared with: the output_dir's own `run_config.json` (resume), the stable run's (decay branch), the resume
    checkpoint's `run_info.json`, and for CPT the base's `run_info.json` unless `data_start_block` says where to
    start in data the base did not see.
    """
    stored = []
    if (Path(training_args.output_dir) / RUN_CONFIG_NAME).is_file():
        stored.append((training_args.output_dir, _read_run_config(Path(training_args.output_dir) / RUN_CONFIG_NAME).get("data")))
    if run_args.branch_from:
        stored.append((run_args.branch_from, _read_run_config(Path(run_args.branch_from) / RUN_CONFIG_NAME).get("data")))
    if resume and (info := artifacts.read_run_info(resume)) is not None:
        stored.append((resume, info.get("data")))
    base = artifacts.read_run_info(run_args.model_name_or_path) if isinstance(run_args, CptArguments) else None
    if base is not None and run_args.data_start_block is None:
        stored.append((run_args.model_name_or_path, base.get("data")))
    for where, recorded in stored:
        diff = _config_diff({"data": {k: (recorded or {}).get(k) for k in identity}}, {"data": identity}, groups=("data",))
        if diff:
            raise ValueError(f"this run reads other data than {where} ({'; '.join(diff)}): a different corpus, "
                             "data_dir, max_docs or tokenizer; use the original data, or a new output_dir"
                             + (" (CPT on new data: set data_start_block)" if where == run_args.model_name_or_path else ""))


# ------------------------------------------------------------------------------------------------------ builders
def given_tokenizer(run_args: PretrainArguments):
    """The run's tokenizer when it does not depend on the corpus: the given one, else for a run that continues
    existing weights (CPT, a converted decoder) the base model's own; None for the toy BPE."""
    source = run_args.tokenizer_name_or_path or run_args.model_name_or_path
    if not source:
        return None
    tokenizer = data.load_tokenizer(source, objective=run_args.objective)
    if run_args.model_name_or_path:
        check_tokenizer_matches_base(tokenizer, run_args)
    return tokenizer


def toy_tokenizer(run_args: PretrainArguments, corpus: datasets.Dataset, main_process_first):
    """The toy BPE of a run from scratch without a tokenizer, trained once and cached by corpus and vocabulary."""
    path = Path(run_args.data_cache_dir) / f"toy-tokenizer-{corpus._fingerprint}-{run_args.toy_vocab_size}"
    with main_process_first(desc="toy tokenizer"):
        data.cached_toy_tokenizer(corpus, run_args.toy_vocab_size, path)
    return data.load_tokenizer(path, objective=run_args.objective)


def hub_token_estimate(run_args: PretrainArguments, tokenizer) -> dict | None:
    """For a single Hub corpus, `data.estimate_hub_tokens` before anything is downloaded; None otherwise."""
    entries = cli.split_list(run_args.corpus_source)
    if tokenizer is None or len(entries) != 1 or not paths.is_hub_id(entries[0].partition(":")[0]):
        return None
    if datasets.config.HF_HUB_OFFLINE:  # a launch after `recipes.prepare_data`: the corpus is in the cache and is
        return None  # estimated once loaded (streaming a sample needs the network)
    source, _, config = entries[0].partition(":")
    return data.estimate_hub_tokens(source, config or run_args.corpus_name, "train", tokenizer)


def check_tokenizer_matches_base(tokenizer, run_args: PretrainArguments) -> None:
    """Refuse a tokenizer whose ids do not mean what the base model's embeddings learned.

    The base's embedding rows must cover the tokenizer, and when the base directory ships its own tokenizer, the
    given one must map every token to the same id (a new toy BPE would keep a few hundred ids of 8192).
    """
    from transformers import AutoConfig

    base = run_args.model_name_or_path
    try:
        vocab_size = AutoConfig.from_pretrained(base, trust_remote_code=True).vocab_size
    except (OSError, ValueError) as error:
        raise artifacts.hub_load_error(base, "the base model's config", error) from None
    if len(tokenizer) > vocab_size:
        raise ValueError(f"the tokenizer has {len(tokenizer)} tokens but {base} has {vocab_size} embeddings; use the "
                         "base model's own tokenizer (drop --tokenizer_name_or_path)")
    if run_args.tokenizer_name_or_path and Path(base).is_dir() and any((Path(base) / f).is_file() for f in artifacts.TOKENIZER_FILES):
        own, given = data.load_tokenizer(base).get_vocab(), tokenizer.get_vocab()
        differ = sum(own.get(token) != i for token, i in given.items()) + len(own.keys() - given.keys())
        if differ:
            raise ValueError(f"tokenizer {run_args.tokenizer_name_or_path} differs from the base model's own ({differ} "
                             f"of {len(own)} tokens change id), so the embeddings of {base} would mean other tokens; "
                             "drop --tokenizer_name_or_path to use the base's")


def load_training_corpus(run_args: PretrainArguments) -> datasets.Dataset:
    """The training corpus (several sources concatenated in order), capped at `max_docs` documents."""
    corpus = data.load_corpora(run_args.corpus_source, run_args.data_dir, split="train", name=run_args.corpus_name)
    if run_args.max_docs is not None:
        corpus = corpus.select(range(min(run_args.max_docs, len(corpus))))
    return corpus


def build_blocks(run_args: PretrainArguments, tokenizer, corpus: datasets.Dataset, data_seed: int,
                 main_process_first) -> datasets.Dataset:
    """The corpus's packed blocks in the `data_seed` order (built once, by the main process first)."""
    with main_process_first(desc="packing"):
        return data.build_packed_dataset(
            tokenizer, corpus, run_args.block_size, data_seed, run_args.data_cache_dir, run_args.num_proc
        )


def build_model(run_args: PretrainArguments, tokenizer, seed: int) -> EuroBertClmMlmForMaskedLM:
    """A fresh model of the named architecture whose special ids come from the tokenizer, or existing weights (CPT).
    The head class is the run's: causal for CLM runs, bidirectional for the others (what config.json records)."""
    model_class = EuroBertClmMlmForCausalLM if run_args.objective == "clm" else EuroBertClmMlmForMaskedLM
    if run_args.model_name_or_path:
        artifacts.check_weights(run_args.model_name_or_path)
        try:
            return model_class.from_pretrained(run_args.model_name_or_path, dtype=torch.float32)
        except OSError as error:
            raise artifacts.hub_load_error(run_args.model_name_or_path, "the base model", error) from None
    config = load_architecture(
        run_args.architecture, vocab_size=len(tokenizer), bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, mask_token_id=tokenizer.mask_token_id,
    )
    set_seed(seed)  # the initial weights depend on the run seed only
    return model_class(config)


def compile_decoder_layers(model: torch.nn.Module) -> int:
    """Compile every `EuroBertClmMlmDecoderLayer` of `model` in place with `nn.Module.compile` (inductor); returns how many.

    Regional compilation: the layers are identical, so dynamo compiles one graph that every layer reuses (with
    inlined nn modules the parameters are graph inputs); the embedding, the final norm and the LM head stay eager.
    In place rather than `torch.compile(model)`: parameter names get no `_orig_mod.` prefix, so state dicts,
    checkpoints and resume are those of an eager model, and accelerate's FSDP2 wrapping still finds the layers (its
    own regional path, `compile_regions_fsdp2`, compiles the same way). The attention pattern reaches the layers as
    a Python bool that dynamo guards on, so a PFS run compiles one graph per pattern: one recompile at the switch.
    """
    layers = [module for module in model.modules() if isinstance(module, EuroBertClmMlmDecoderLayer)]
    if not layers:
        raise ValueError(f"{type(model).__name__} has no EuroBertClmMlmDecoderLayer to compile")
    for layer in layers:
        layer.compile()
    return len(layers)


def step_flops_per_token(config, block_size: int, collator: "ObjectiveCollator") -> Callable[[int], float]:
    """Training FLOPs per token of a 0-based optimizer step (`recipes.flops` formula): the LM head projects every
    token on CLM steps and the masked share on MLM steps, so a PFS run changes cost at the switch."""
    clm = flops.training_flops_per_token(config, block_size, 1.0)
    mlm = flops.training_flops_per_token(config, block_size, collator.mlm.mlm_probability) if collator.mlm else clm
    return lambda step: clm if collator.objective_at(step) == "clm" else mlm


@dataclass
class ObjectiveCollator:
    """Collate a batch for the objective of the step its blocks belong to.

    The blocks are read sequentially, so a block's step is `(block_index - first_block) // blocks_per_step`
    (0-based); steps `< switch_step` are CLM in a PFS run. The choice depends on the data position only, so it is
    the same with any number of dataloader workers, processes, prefetching or resumes. Each batch carries
    `is_causal`, the one per-step decision the model reads; CLM labels are the input ids (the model shifts them).

    Args:
        clm: CLM collator (None for a pure MLM run).
        mlm: MLM collator (None for a pure CLM run).
        switch_step: PFS switch step, or None.
        blocks_per_step: global batch in blocks.
        first_block: block_index of the first block this run reads (CPT continues after its base).
    """

    clm: data.PretrainingCollator | None
    mlm: data.PretrainingCollator | None
    switch_step: int | None
    blocks_per_step: int
    first_block: int = 0

    def objective_at(self, step_index: int) -> str:
        """Objective of the 0-based optimizer step `step_index`."""
        if self.mlm is None:
            return "clm"
        if self.clm is None or self.switch_step is None or step_index >= self.switch_step:
            return "mlm"
        return "clm"

    def __call__(self, examples: list[dict]) -> dict:
        block_index = torch.tensor([int(example["block_index"]) for example in examples])
        objective = self.objective_at((int(block_index[0]) - self.first_block) // self.blocks_per_step)
        if objective == "clm":
            batch = self.clm(examples)
        else:
            batch = self.mlm(examples)
            if self.mlm.positions_per_block is not None:  # fixed-shape head: did a row exceed K (exact path)?
                batch["mlm_overflow"] = "mlm_positions" not in batch  # counted by PretrainingTrainer, not the model
        batch["is_causal"] = objective == "clm"
        batch["block_index"] = block_index  # consumed by PretrainingTrainer.compute_loss (logs), never by the model
        return batch


def build_collator(run_args: PretrainArguments, tokenizer, blocks_per_step: int, first_block: int = 0) -> ObjectiveCollator:
    """CLM and/or MLM collators over `recipes.data.PretrainingCollator`, wrapped by `ObjectiveCollator`."""
    positions_per_block = None  # K of the fixed-shape MLM head, one value for the whole run
    if run_args.mlm_fixed_shape:
        positions_per_block = data.masked_positions_bound(run_args.block_size, run_args.mlm_probability,
                                                          run_args.mlm_fixed_shape_std)

    def make(objective):
        return data.PretrainingCollator(
            objective, tokenizer, run_args.mlm_probability, run_args.mask_replace_prob,
            run_args.random_replace_prob, run_args.masking_seed, positions_per_block,
        )

    needs_clm = run_args.objective == "clm" or run_args.switch_step is not None
    return ObjectiveCollator(
        clm=make("clm") if needs_clm else None,
        mlm=make("mlm") if run_args.objective == "mlm" else None,
        switch_step=run_args.switch_step,
        blocks_per_step=blocks_per_step,
        first_block=first_block,
    )


# ------------------------------------------------------------------------------------------------------- trainer
class PretrainingTrainer(Trainer):
    """`Trainer` plus throughput logs: tokens/s and the data pipeline's share of wall time, per logging window;
    on CUDA also `mfu` (`recipes.flops`: FLOPs per token x tokens/s / (devices x the GPU's dense bf16 spec peak));
    with the fixed-shape MLM head, `mlm_overflow_batches` (micro-batches of the window, over all processes, that
    took the exact path because a block had more masked tokens than K).

    Also takes the `block_index` tensor that `ObjectiveCollator` adds to each batch out of the model inputs, and
    appends it to `<output_dir>/block_order-rank<R>.jsonl` when `log_block_order` is set.
    """

    def __init__(self, *args, tokens_per_step: int, block_order_path: str | None = None,
                 flops_per_token: Callable[[int], float] | None = None, weight_decay_scope: str = "all", **kwargs):
        self.weight_decay_scope = weight_decay_scope
        super().__init__(*args, **kwargs)
        self.tokens_per_step = tokens_per_step
        self.block_order_path = block_order_path
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
                logger.info("no mfu in the logs: %s has no bf16 peak in recipes.flops.BF16_PEAK_FLOPS", device_name)

    def get_decay_parameter_names(self, model) -> list[str]:
        """Weight decay on every parameter (`all`: the original AdamW has one parameter group) or on all but norms
        and biases (`no_norms_biases`: the Trainer's default)."""
        if self.weight_decay_scope == "all":
            return [name for name, _ in model.named_parameters()]
        return super().get_decay_parameter_names(model)

    def _get_num_items_in_batch(self, batch_samples: list, device):
        # The Trainer counts `labels[..., 1:]` for models whose loss shifts labels, decided once per model; here the
        # model shifts on CLM steps only, and every micro-batch of a step has the step's objective.
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
                record = {"step": self.state.global_step + 1, "causal": inputs["is_causal"], "blocks": block_index.tolist()}
                f.write(json.dumps(record) + "\n")
        return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)

    def log(self, logs: dict, start_time: float | None = None) -> None:
        if "loss" in logs:
            started, first_step = self._window
            seconds = max(time.perf_counter() - started, 1e-9)
            logs["tokens_per_second"] = round((self.state.global_step - first_step) * self.tokens_per_step / seconds, 1)
            logs["data_time_share"] = round(self.data_seconds / seconds, 4)
            if self.peak_flops is not None:
                window_flops = self.tokens_per_step * sum(map(self.flops_per_token, range(first_step, self.state.global_step)))
                logs["mfu"] = round(window_flops / seconds / (self.peak_flops * self.args.world_size), 4)
            if self.counts_overflow:  # a collective: every process logs at the same steps
                count = torch.tensor(self.mlm_overflow_batches, device=self.args.device)
                logs["mlm_overflow_batches"] = int(self.accelerator.reduce(count, reduction="sum"))
                self.mlm_overflow_batches = 0
            self._window, self.data_seconds = (time.perf_counter(), self.state.global_step), 0.0
        super().log(logs, start_time)


class SchedulePlanCallback(TrainerCallback):
    """Saves full checkpoints at the decay-branch points and the last step; resets AdamW at the PFS switch if asked;
    saves intermediate weights; writes `run_info.json` and the sentence-transformers files into every checkpoint."""

    def __init__(self, save_model: Callable[[str], None], save_steps: set[int], intermediate_steps: set[int],
                 reset_at: int | None, info: Callable[..., dict]):
        """save_model: the trainer's `save_model` (gathers sharded weights); info(step, intermediate=False): the
        run_info.json of a checkpoint saved at `step`."""
        self.save_model, self.save_steps, self.intermediate_steps = save_model, save_steps, intermediate_steps
        self.reset_at, self.info = reset_at, info

    def on_step_begin(self, args, state, control, optimizer=None, **kwargs):
        if self.reset_at is not None and state.global_step == self.reset_at:
            inner = getattr(optimizer, "optimizer", optimizer)  # accelerate wraps the torch optimizer
            inner.state.clear()  # AdamW re-initialises its moments and step count lazily
            logger.info("PFS switch at step %d: optimizer state reset", state.global_step)

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step in self.save_steps or state.global_step == state.max_steps:
            control.should_save = True
        if state.global_step in self.intermediate_steps:
            path = Path(args.output_dir) / INTERMEDIATE_DIR / f"step-{state.global_step}"
            self.save_model(str(path))
            if state.is_world_process_zero:
                write_run_info(path, self.info(state.global_step, intermediate=True))
                write_sentence_transformers_files(path, overwrite=True)
        return control

    def on_save(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            path = Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
            write_run_info(path, self.info(state.global_step))
            write_sentence_transformers_files(path, overwrite=True)


class LoadOptimizerStateCallback(TrainerCallback):
    """CPT `keep_optimizer_state`: load AdamW moments from the base run's checkpoint at the start of a fresh run.

    The learning rates of the new schedule are kept: only the per-parameter state (moments, step) is taken over.
    """

    def __init__(self, optimizer_file: str, resuming: bool):
        self.optimizer_file, self.resuming = optimizer_file, resuming

    def on_train_begin(self, args, state, control, optimizer=None, **kwargs):
        if self.resuming:  # the run's own checkpoint already holds the optimizer state
            return
        inner = getattr(optimizer, "optimizer", optimizer)
        saved = torch.load(self.optimizer_file, map_location="cpu", weights_only=True)
        schedule = [{k: group[k] for k in ("lr", "initial_lr") if k in group} for group in inner.param_groups]
        inner.load_state_dict(saved)
        for group, keep in zip(inner.param_groups, schedule):
            group.update(keep)
        logger.info("CPT: optimizer state loaded from %s", self.optimizer_file)


# ----------------------------------------------------------------------------------------------------- provenance
def run_size(run_args: PretrainArguments) -> str | None:
    """Model size name: the architecture, or the base run's size for CPT (None for a converted decoder without one)."""
    if run_args.architecture:
        return run_args.architecture
    base = artifacts.read_run_info(run_args.model_name_or_path)
    return base.get("size") if base else None


def make_run_info(run_args, training_args, *, step: int, identity: dict, cpt_base: str | None,
                  intermediate: bool = False) -> dict:
    """Everything needed to know what a checkpoint is and how it was made (written as `run_info.json`).

    Args:
        run_args, training_args: the resolved settings.
        step: optimizer steps done (this run's global step).
        identity: `data_identity(blocks, tokenizer)`: the packed blocks' fingerprint and the tokenizer hash.
        cpt_base: name of the CPT base model (None unless CPT).
        intermediate: an intermediate checkpoint, named `<run>-<step>` with the step at paper scale (the step times
            `step_divisor`, so a toy run's checkpoints carry the names of the paper's).
    """
    name = training_args.run_name or Path(training_args.output_dir).name
    if intermediate:
        name += f"-{step * run_args.step_divisor}"
    training = json.loads(training_args.to_json_string())
    return {
        "format": artifacts.RUN_INFO_FORMAT,
        "name": name,
        "size": run_size(run_args),
        "objective": run_args.objective,
        "mlm_probability": run_args.mlm_probability if run_args.objective == "mlm" else None,
        "steps": step,
        "switch_step": run_args.switch_step,
        "cpt_base": cpt_base,
        "scale": run_args.scale,
        "run_config": resolved_config(run_args, training_args, identity),
        "training_args": training,
        "versions": artifacts.package_versions(),
        "git_commit": artifacts.git_commit(),
        "data": {"source": run_args.corpus_source, **identity},
        "tokens_seen": step * global_batch(training_args) * run_args.block_size,
    }


def write_run_info(directory: str | os.PathLike, info: dict) -> None:
    artifacts.write_json_atomic(Path(directory) / RUN_INFO_NAME, info)


# ---------------------------------------------------------------------------------------------------------- CPT
def cpt_start(run_args: PretrainArguments) -> tuple[str | None, int, str | None]:
    """For a CPT run: (base name, first block to read, optimizer file to keep); (None, 0, None) otherwise.

    The first block continues after the blocks the base run consumed (its `tokens_seen` / block size), so CPT
    sees unseen data; a converted decoder (no run_info) starts at block 0 unless `data_start_block` says otherwise.
    """
    if not isinstance(run_args, CptArguments):
        return None, 0, None
    base = artifacts.read_run_info(run_args.model_name_or_path) or {}
    base_name = base.get("name") or Path(run_args.model_name_or_path).name
    first_block = run_args.data_start_block
    if first_block is None:
        first_block = base.get("tokens_seen", 0) // run_args.block_size
    optimizer_file = None
    if run_args.keep_optimizer_state:
        candidates = [Path(run_args.model_name_or_path)]
        if last := last_complete_checkpoint(run_args.model_name_or_path):
            candidates.append(Path(last))
        found = [c / "optimizer.pt" for c in candidates if (c / "optimizer.pt").is_file()]
        if not found:
            raise ValueError(f"keep_optimizer_state: no optimizer.pt in {run_args.model_name_or_path} or its last checkpoint; drop the option")
        optimizer_file = str(found[-1])
    return base_name, first_block, optimizer_file


def select_blocks(blocks: datasets.Dataset, first_block: int, needed: int, epochs: int = 1) -> data.BlockStream:
    """`needed` blocks of the fixed order from `first_block`; with `epochs` > 1 the order is read again from its
    start (documented repetition), otherwise a run that needs more blocks than the corpus packs into is refused."""
    if first_block + needed > epochs * len(blocks):
        raise ValueError(
            f"the run needs {needed} blocks from block {first_block} but the corpus packs into {len(blocks)} "
            f"(x {epochs} epoch(s)); add documents (max_docs, more corpus_source entries, a bigger config), set "
            "epochs, or lower max_steps / the batch size"
        )
    return data.BlockStream(blocks, first_block, needed)


def check_token_budget(run_args: PretrainArguments, training_args: TrainingArguments, first_block: int,
                       estimate: dict | None) -> None:
    """Refuse, before the corpus is tokenized, a run whose blocks the corpus cannot fill (an estimate from a
    tokenized sample: `recipes.data.estimate_tokens`); the exact count is checked again once the blocks exist."""
    if estimate is None:
        return
    needed = first_block + training_args.max_steps * global_batch(training_args)
    available = estimate["tokens"] // run_args.block_size * run_args.epochs
    if available < needed:
        raise ValueError(
            f"corpus {run_args.corpus_source} yields about {estimate['tokens']:,} tokens ({estimate['documents']:,} "
            f"documents x {estimate['tokens_per_document']:.0f} tokens, estimated from {estimate['sampled']:,}), about "
            f"{available:,} blocks of {run_args.block_size} over {run_args.epochs} epoch(s), but the run needs "
            f"{needed:,} blocks ({needed * run_args.block_size:,} tokens, from block {first_block}); add corpus_source "
            "entries (comma-separated) or a bigger corpus_name, set epochs (repeats the data), or lower max_steps")
