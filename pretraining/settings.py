"""Run settings and their parser, for `recipes/pretrain.py` and `recipes/cpt.py` (`docs/protocol.md` "Pretraining"):
`PretrainArguments` (the study-specific settings of every run, CLM, MLM, PFS or CPT; everything else is
`TrainingArguments`), `RecipeParser` (`--config FILE.yaml` + CLI overrides; `load_config` checks the YAML's keys and
value types before any work), and `decay_steps`, `global_batch` of a `TrainingArguments`.
"""

import json
import os
import sys
import types
import typing
from dataclasses import MISSING, dataclass, field, fields

import yaml
from transformers import HfArgumentParser, TrainingArguments

from core import artifacts, cli
from core.lora import TARGET_MODULES
from core.paths import is_hub_id
from modeling_eurobert import ARCHITECTURES
from pretraining import data
from pretraining.collator import MASKED_POSITIONS_STD
from pretraining.preflight import config_file, flag_value

COMPILE_MODES = ("none", "regional")
# Settings of CPT runs only (`cpt: true`): refused in other runs, and left out of their run_config.json
CPT_SETTINGS = (
    "cpt",
    "keep_optimizer_state",
    "data_start_block",
    "lora",
    "lora_rank",
    "lora_alpha",
    "lora_dropout",
    "lora_target_modules",
    "lora_train_embeddings",
)
WEIGHT_DECAY_SCOPES = ("all", "no_norms_biases")


def setting(default, help: str):
    """A run setting's dataclass field with its `--help` text; a list default is copied for each instance."""
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata={"help": help})
    return field(default=default, metadata={"help": help})


@dataclass
class PretrainArguments:
    """Study-specific run settings; optimisation and logging stay in `TrainingArguments`, whose `data_seed` (required:
    every objective must share it) seeds the fixed block order.

    Groups: model (`architecture` | `model_name_or_path`, `tokenizer_name_or_path`, `toy_vocab_size`); data
    (`corpus_source`, `corpus_name`, `data_dir`, `max_docs`, `block_size`, `data_cache_dir`, `num_proc`, `epochs`,
    `global_batch_size`); objective (`objective`, `mlm_probability`, `mask_replace_prob`, `random_replace_prob`,
    `masking_seed`, PFS `switch_step`, `reset_optimizer_at_switch`); optimiser (`weight_decay_scope`); budgets
    (`decay_branches`, `branch_from`, `intermediate_steps`); provenance (`scale`, `log_block_order`); speed, same
    losses (`compile`, `mlm_fixed_shape`, `mlm_fixed_shape_std`); CPT (`cpt`, `keep_optimizer_state`,
    `data_start_block`, `lora*`).
    """

    architecture: str | None = setting(None, f"architecture for a run from scratch: {', '.join(ARCHITECTURES)}")
    model_name_or_path: str | None = setting(None, "start from these weights instead (CPT, converted decoder)")
    tokenizer_name_or_path: str | None = setting(
        None, "tokenizer dir or Hub id (paper: Llama-3 with <|mask|>); none = train the toy BPE"
    )
    toy_vocab_size: int = setting(8192, "vocabulary of the toy BPE trained when no tokenizer is given")
    corpus_source: str = setting(
        "bundle",
        "'bundle' (offline Wikipedia), 'bundle_more' (3x more of it), a local file/dir, or a Hub id "
        "(paper: "
        "HuggingFaceFW/fineweb-edu); "
        "several, comma-separated, are concatenated in order (a Hub id may name its config: id:config)",
    )
    corpus_name: str | None = setting(None, "Hub dataset config (paper: sample-350BT, see docs/protocol.md)")
    data_dir: str | None = setting(None, "data bundle dir (default: $MLM_VS_CLM_DATA, then ../shared/data)")
    max_docs: int | None = setting(None, "keep only the first N documents of the corpus (toy and test runs)")
    block_size: int = setting(2048, "tokens per packed block (paper: 2048)")
    data_cache_dir: str = setting(".cache/pretrain", "where tokenized/packed Arrow files and toy tokenizers are cached")
    num_proc: int = setting(1, "tokenization processes")
    epochs: int = setting(
        1,
        "times the fixed block order may be read (a run needing more blocks than one pass wraps "
        "around to the "
        "start; each block then gets a fresh mask); 1 = never repeat data",
    )
    global_batch_size: int | None = setting(
        None, "blocks per optimizer step; if set, devices x per-device batch x accumulation must equal it"
    )
    objective: str = setting("mlm", "clm or mlm (with switch_step: the objective after the switch, mlm)")
    mlm_probability: float = setting(0.4, "masking ratio p in (0, 1) (paper: 0.2-0.5; 0.4 for PFS and CPT)")
    mask_replace_prob: float = setting(1.0, "share of masked tokens replaced by <|mask|> (original code: 1.0)")
    random_replace_prob: float = setting(0.0, "share of masked tokens replaced by a random token (BERT: 0.1)")
    masking_seed: int = setting(0, "seed of the MLM masks, combined with each block's index")
    switch_step: int | None = setting(None, "PFS: steps 1..switch_step are CLM, later steps MLM, in one run")
    weight_decay_scope: str = setting(
        "all",
        "all: weight decay on every parameter, one AdamW group (the original Optimus code); "
        "no_norms_biases: "
        "the Trainer's default, norms and biases undecayed",
    )
    reset_optimizer_at_switch: bool = setting(
        False, "PFS: clear AdamW moments at the switch (default: carry them over)"
    )
    decay_branches: list[int] = setting(
        [], "budgets (steps) that branch a decay off this stable run; keeps checkpoints at budget - decay"
    )
    branch_from: str | None = setting(
        None, "output_dir of the stable run this decay branch starts from (max_steps = the budget)"
    )
    intermediate_steps: list[int] = setting(
        [],
        "steps whose weights are saved to <output_dir>/intermediate/step-<N> (paper: 1000 2000 5000 10000 20000 40000)",
    )
    step_divisor: int = setting(
        1,
        "toy scales: paper steps / this run's steps; "
        "intermediate checkpoints are named with paper steps (step x step_divisor)",
    )
    scale: str | None = setting(None, "manifest scale this run belongs to (paper, toy, smoke); provenance only")
    log_block_order: bool = setting(
        False, "append the block indices of every step to <output_dir>/block_order-rank<R>.jsonl (audit)"
    )
    compile: str = setting(
        "none",
        "none, or regional: torch.compile each decoder layer in place (same parameter names and "
        "checkpoints; "
        "a PFS switch costs one recompile). Paper configs on GPU use regional; CPU runs and tests: none",
    )
    mlm_fixed_shape: bool = setting(
        False,
        "MLM batches carry each block's masked positions padded to a fixed K, so the LM head has static "
        "shapes (no host sync, compilable); a batch with a row above K takes the exact path, counted as "
        "mlm_overflow_batches in the logs. Same loss. Paper configs: true",
    )
    mlm_fixed_shape_std: float = setting(
        MASKED_POSITIONS_STD,
        "margin of K in standard deviations of the binomial mask count: "
        "K = ceil(T p + std sqrt(T p (1 - p))), T = block_size (pretraining.collator.masked_positions_bound)",
    )
    # CPT: continued MLM pretraining of existing weights (`cpt: true`; the other settings below need it)
    cpt: bool = setting(
        False,
        "continued MLM pretraining (CPT) of model_name_or_path: the data continue after the base "
        "run's blocks; "
        "recipes/cpt.py sets it",
    )
    keep_optimizer_state: bool = setting(
        False, "load AdamW moments from the base's last Trainer checkpoint (default: fresh optimizer)"
    )
    data_start_block: int | None = setting(
        None,
        "first block of the fixed order to read; default: continue after the base run's blocks (0 for a "
        "converted decoder)",
    )
    lora: bool = setting(
        False,
        "train LoRA adapters (peft) instead of every weight, for a decoder too large to train fully; every "
        "saved model is merged (loads without peft), Trainer checkpoints hold the adapters (core/lora.py)",
    )
    lora_rank: int = setting(16, "LoRA rank r")
    lora_alpha: float = setting(32.0, "LoRA alpha (the update is scaled by alpha / r)")
    lora_dropout: float = setting(0.0, "dropout on the LoRA branch")
    lora_target_modules: list[str] = setting(
        list(TARGET_MODULES), "module names that get adapters (default: every attention and MLP projection)"
    )
    lora_train_embeddings: bool = setting(
        False, "also train the embeddings and the LM head fully (peft modules_to_save); default: frozen"
    )

    def __post_init__(self):
        for name, choices in (
            ("objective", data.OBJECTIVES),
            ("compile", COMPILE_MODES),
            ("weight_decay_scope", WEIGHT_DECAY_SCOPES),
        ):
            if getattr(self, name) not in choices:
                raise ValueError(f"{name}={getattr(self, name)!r} is unknown; use one of {choices}")
        if not 0.0 < self.mlm_probability < 1.0:
            raise ValueError(f"mlm_probability={self.mlm_probability} must be in (0, 1) (paper: 0.2 to 0.5)")
        if (self.architecture is None) == (self.model_name_or_path is None):
            raise ValueError("give exactly one of --architecture (from scratch) or --model_name_or_path (continue)")
        if self.architecture is not None and self.architecture not in ARCHITECTURES:
            raise ValueError(f"architecture={self.architecture!r} is unknown; choose one of {', '.join(ARCHITECTURES)}")
        if self.switch_step is not None and self.objective != "mlm":
            raise ValueError("switch_step flips CLM to MLM; set objective: mlm (the objective after the switch)")
        if self.mlm_fixed_shape_std < 0:
            raise ValueError(f"mlm_fixed_shape_std={self.mlm_fixed_shape_std} must be >= 0 (default 4)")
        for name, low in (
            ("epochs", 1),
            ("max_docs", 1),
            ("toy_vocab_size", data.TOY_MIN_VOCAB),
            ("num_proc", 1),
            ("masking_seed", 0),
            ("step_divisor", 1),
        ):
            if getattr(self, name) is not None and getattr(self, name) < low:
                raise ValueError(f"{name}={getattr(self, name)} must be >= {low}")
        shares = (self.mask_replace_prob, self.random_replace_prob)
        if not (0 <= shares[0] <= 1 and 0 <= shares[1] <= 1 and sum(shares) <= 1):
            raise ValueError(
                f"mask_replace_prob={shares[0]} and random_replace_prob={shares[1]} must each be in "
                "[0, 1] and sum to at most 1 (the rest of the masked tokens stay as they are)"
            )
        if self.corpus_name is not None and not any(is_hub_id(s.split(":")[0]) for s in self.corpus_source.split(",")):
            raise ValueError(
                f"corpus_name={self.corpus_name!r} names a config of a Hub dataset, but corpus_source="
                f"{self.corpus_source!r} is not one; drop corpus_name"
            )
        for name in LIST_SETTINGS:
            items = getattr(self, name) or []
            if twice := sorted({str(item) for item in items if items.count(item) > 1}):
                raise ValueError(f"{name} {items} names {twice[0]} more than once; give each once")
        if self.cpt:
            self._check_cpt()
        elif changed := [
            f.name for f in fields(self) if f.name in CPT_SETTINGS and getattr(self, f.name) != _default(f)
        ]:
            raise ValueError(f"{changed[0]} is a CPT setting: set cpt: true (or launch recipes/cpt.py)")

    def _check_cpt(self):
        if self.model_name_or_path is None:
            raise ValueError(
                "CPT starts from existing weights: pass --model_name_or_path (a decayed run or a converted decoder)"
            )
        if self.switch_step is not None or self.branch_from or self.decay_branches:  # MLM, or CLM as a control
            raise ValueError("CPT is one objective: drop switch_step/branch_from/decay_branches from the CPT config")
        if self.lora and self.keep_optimizer_state:
            raise ValueError(
                "keep_optimizer_state loads full-model AdamW moments, which LoRA adapters have no use "
                "for; drop keep_optimizer_state or lora"
            )
        if self.lora and not (self.lora_rank >= 1 and self.lora_alpha > 0 and 0 <= self.lora_dropout < 1):
            raise ValueError(
                f"lora_rank={self.lora_rank} must be >= 1, lora_alpha={self.lora_alpha} > 0 and "
                f"lora_dropout={self.lora_dropout} in [0, 1)"
            )
        if self.lora and not set(self.lora_target_modules or ["none"]) <= set(TARGET_MODULES):
            raise ValueError(
                f"lora_target_modules={self.lora_target_modules}: name projections of the EuroBERT "
                f"layers, some of {list(TARGET_MODULES)}"
            )


LIST_SETTINGS = ("decay_branches", "intermediate_steps", "lora_target_modules")  # one comma list or several values


def comma_lists(argv: list[str], names=LIST_SETTINGS) -> list[str]:
    """`argv` with the values of list settings split at commas, the project's list convention (`core.cli`):
    `--intermediate_steps 5,10` and `--intermediate_steps=5,10` read as `--intermediate_steps 5 10`."""
    out, listing = [], False
    for arg in argv:
        flag, eq, value = arg.partition("=")
        if arg.startswith("--"):
            listing = flag[2:].replace("-", "_") in names
            out += [flag, *[v for v in value.split(",") if v.strip()]] if listing and eq else [arg]
        else:
            out += [v for v in arg.split(",") if v.strip()] if listing and "," in arg else [arg]
    return out


def _default(f):
    return f.default_factory() if f.default_factory is not MISSING else f.default


class RecipeParser(HfArgumentParser):
    """`HfArgumentParser` over (run settings, `TrainingArguments`) with `--config FILE.yaml`; CLI overrides YAML.
    Optional run settings also accept `null` on the command line, to unset a value the YAML sets."""

    def __init__(self, dataclass_types, **kwargs):
        super().__init__(dataclass_types, **kwargs)
        # HfArgumentParser strips None from f.type
        optional = {f.name for f in fields(dataclass_types[0]) if f.default is None}
        for action in self._actions:
            if action.dest in optional and callable(action.type):
                action.type = _nullable(action.type)

    def parse_args_and_config(self, argv: list[str] | None = None) -> tuple:
        """(run settings, TrainingArguments) from `argv` (default: sys.argv[1:]), reading `--config` first; raises
        ValueError on YAML keys no dataclass knows. `--model_name_or_path` on the command line replaces the config's
        starting point: its `architecture` is dropped (and for CPT its PFS `switch_step`), so
        `recipes.cpt --config recipes/configs/debug.yaml --model_name_or_path out/debug` needs no `null`s.
        """
        argv = comma_lists(list(sys.argv[1:] if argv is None else argv))
        if "--config" in argv:
            at = argv.index("--config")
            config_path, argv = argv[at + 1], argv[:at] + argv[at + 2 :]
            config = load_config(config_path, self.dataclass_types)
            if flag_value(argv, "model_name_or_path"):  # the command line's starting point replaces the config's
                config.pop("architecture", None)
                if config.get("cpt", self.get_default("cpt")):  # and CPT has no PFS switch
                    config.pop("switch_step", None)
            self.set_defaults(**config)
        try:
            return cli.parse_dataclasses(self, argv, look_for_args_file=False)
        except json.JSONDecodeError as error:  # TrainingArguments parses its dict settings (lr_scheduler_kwargs, ...)
            given = [a.lstrip("-").split("=")[0] for a in argv if a.lstrip("-").split("=")[0].endswith("kwargs")]
            raise ValueError(
                f"{', '.join(given) or 'a dict setting'} is not a JSON object ({error}); write it as "
                "'{\"key\": value}'"
            ) from None


def _nullable(convert):
    def parse(text: str):
        return None if text.lower() in ("null", "none") else convert(text)

    parse.__name__ = getattr(convert, "__name__", "value")  # argparse names the type in its errors
    return parse


def load_config(path: str | os.PathLike, dataclass_types) -> dict:
    """Read a recipe YAML: a mapping whose keys some dataclass of `dataclass_types` defines, with values of the
    field's type (a list where a list is expected, a number where a number is), each checked before any work."""
    path = config_file(path)
    try:
        config = artifacts.load_yaml(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as error:
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
            words = {
                int: "an integer",
                float: "a number",
                bool: "true or false",
                str: "a string",
                list: "a list",
                type(None): "null",
            }
            names = " or ".join(
                dict.fromkeys(words.get(k, k) for k in expected if not (k is int and float in expected))
            )
            raise ValueError(f"{path}: {key} must be {names}, got {value!r}")
    return config


_SCALAR_KINDS = {bool: (bool,), int: (int,), float: (int, float), str: (str,)}


def _expected_kinds(annotation) -> tuple[type, ...]:
    """The YAML value types a (resolved) field annotation accepts; () when it is too loose to check."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation in _SCALAR_KINDS:
        return _SCALAR_KINDS[annotation]
    if origin is list:
        return (list,)
    if origin in (typing.Union, types.UnionType):
        kinds = [_expected_kinds(a) for a in args if a is not type(None)]
        if not kinds or any(not k for k in kinds):
            return ()
        return tuple({k for group in kinds for k in group}) + ((type(None),) if type(None) in args else ())
    return ()


def decay_steps(training_args: TrainingArguments) -> int:
    """Length of the WSD decay phase (`lr_scheduler_kwargs.num_decay_steps`), 0 without a WSD schedule."""
    if training_args.lr_scheduler_type != "warmup_stable_decay":
        return 0
    return int(training_args.lr_scheduler_kwargs.get("num_decay_steps", 0))


def global_batch(training_args: TrainingArguments) -> int:
    """Blocks per optimizer step over all devices."""
    return (
        training_args.per_device_train_batch_size * training_args.world_size * training_args.gradient_accumulation_steps
    )
