"""The fine-tuning protocol: `ProtocolArgs` (the grid's flags, defaults the paper's: `docs/protocol.md`),
`FinetuneArgs` (one run's: plus its learning rate and seed), `SETTINGS` (what each decides) and `schedule`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from evaluation.tasks import FAMILIES

ATTENTION_CHOICES = ("bidirectional", "causal", "checkpoint")
PRECISIONS = ("auto", "bf16_weights", "bf16_autocast", "fp32")
IR_CORPORA = ("pooled", "judged", "full")
PAIR_ENCODINGS = ("joined", "segments")  # SC sentence pairs: the template's one text, or two segments
IR_POOLINGS = ("mean", "cls", "last")
PEFT_CHOICES = ("none", "lora")


def check_positive(settings, *names: str) -> None:
    """Refuse a setting among `names` that is set and below 1, in one line."""
    for name in names:
        if (value := getattr(settings, name)) is not None and value < 1:
            raise ValueError(f"{name}={value} must be >= 1")


@dataclass
class ProtocolArgs:
    """Fine-tuning settings shared by every run of a grid (flags of `evaluation.run`); defaults: the paper's."""

    batch_size: int = field(default=32, metadata={"help": "Train batch size (paper: 32)."})
    eval_batch_size: int = field(default=64, metadata={"help": "Batch size for prediction and encoding."})
    warmup_ratio: float = field(default=0.1, metadata={"help": "Linear warmup share of the steps (paper: 0.1)."})
    adam_beta1: float = 0.9
    adam_beta2: float = 0.95
    adam_epsilon: float = 1e-5
    weight_decay: float = 0.1
    max_steps: int | None = field(default=None, metadata={"help": "Override the task's steps/epochs (smoke runs)."})
    precision: str = field(
        default="auto",
        metadata={
            "help": "bf16_weights: the model cast to bf16, so weights and AdamW states are bf16, as the "
            "original harness "
            "does (small updates round away); bf16_autocast: fp32 weights and states under bf16 autocast; fp32. "
            "auto (default): bf16_weights on a GPU, fp32 on CPU.",
            "choices": PRECISIONS,
        },
    )
    attention: str = field(
        default="bidirectional",
        metadata={
            "help": "Fine-tuning attention: bidirectional (paper default, also for CLM checkpoints), causal, or "
            "checkpoint (the checkpoint's own config.is_causal).",
            "choices": ATTENTION_CHOICES,
        },
    )
    max_length: int | None = field(
        default=None,
        metadata={
            "help": "Max tokens per SC/TC/IR input, at most the model's max_position_embeddings; default: 99%% of "
            "the model's max_position_embeddings counted up to 2048, as the original harness (2028 for 2048 "
            "positions or more)."
        },
    )
    qa_max_length: int = field(
        default=384,
        metadata={
            "help": "Max tokens per QA window (question + context); capped at the default input length (99%% of "
            "the model's positions counted up to 2048)."
        },
    )
    doc_stride: int = field(
        default=128,
        metadata={
            "help": "QA: overlap between consecutive context windows; at most a third of a window cut to fit the model."
        },
    )
    n_best: int = field(default=20, metadata={"help": "QA: start/end candidates kept per window."})
    max_answer_length: int = field(default=30, metadata={"help": "QA: longest answer span in tokens."})
    ir_corpus: str = field(
        default="pooled",
        metadata={
            "help": "IR corpus: pooled = the documents judged in validation or test, one corpus for both (the "
            "original); "
            "judged = each split's own judged documents; full = the whole corpus.",
            "choices": IR_CORPORA,
        },
    )
    ir_relevance: str = field(
        default="binary",
        metadata={
            "help": "IR relevance: binary = a judgement >= 1 counts as relevant with gain 1 (the original); graded = "
            "the qrels scores as gains.",
            "choices": ("binary", "graded"),
        },
    )
    tc_labelling: str | None = field(
        default=None,
        metadata={
            "help": "TC sub-token labelling: first or all (majority vote per word); default: the task's own.",
            "choices": ("first", "all"),
        },
    )
    pair_encoding: str = field(
        default="joined",
        metadata={
            "help": "SC sentence pairs (MNLI, QQP, MRPC): joined = one text, the task's template (the paper); "
            "segments = "
            "the template's two fields as two segments, the tokenizer's pair encoding with token_type_ids (as "
            "run_glue), for models with token-type embeddings (type_vocab_size > 1); a model without them keeps "
            "the joined text, and its result's inputs identity says which it got.",
            "choices": PAIR_ENCODINGS,
        },
    )
    ir_pooling: str = field(
        default="mean",
        metadata={
            "help": "IR embedding pooling: mean over the tokens (the original), cls (the first token) or last "
            "(the last "
            "real token, as decoder embedders do).",
            "choices": IR_POOLINGS,
        },
    )
    query_prompt: str | None = field(
        default=None, metadata={"help": 'IR: the text put before every query; default: the task\'s ("Query: ").'}
    )
    document_prompt: str | None = field(
        default=None, metadata={"help": 'IR: the text put before every document; default: the task\'s ("Document: ").'}
    )
    peft: str = field(
        default="none",
        metadata={
            "help": "none (paper: full fine-tuning) or lora: LoRA adapters (core/lora.py) on the attention and MLP "
            "projections, the task head trained fully (SC/TC/QA; saved models merged)",
            "choices": PEFT_CHOICES,
        },
    )
    lora_rank: int = field(default=8, metadata={"help": "--peft lora: rank r"})
    lora_alpha: float = field(default=16.0, metadata={"help": "--peft lora: alpha (updates scaled by alpha / r)"})
    logging_steps: int = field(default=10, metadata={"help": "Steps between loss checks for divergence."})
    source: str = field(
        default="offline",
        metadata={"help": "Task data: the offline bundle or each task's Hub source.", "choices": ("offline", "hub")},
    )
    data_dir: str | None = field(
        default=None, metadata={"help": "Data bundle (default: $MLM_VS_CLM_DATA, ../shared/data)."}
    )
    max_train: int | None = field(default=None, metadata={"help": "Keep at most N training examples (smoke runs)."})
    max_eval: int | None = field(default=None, metadata={"help": "Keep at most N validation/test examples."})
    scratch_dir: str | None = field(default=None, metadata={"help": "Scratch dir for the Trainer (temp if None)."})

    def __post_init__(self):
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(
                f"max_steps={self.max_steps} must be >= 1; leave it unset for the task's own budget "
                "(1,000 steps, or one epoch for CoNLL and UNER)"
            )
        check_positive(
            self,
            "batch_size",
            "eval_batch_size",
            "max_length",
            "qa_max_length",
            "max_train",
            "max_eval",
            "n_best",
            "max_answer_length",
            "lora_rank",
            "logging_steps",
        )
        for name, ok, rule in (
            ("adam_beta1", 0 <= self.adam_beta1 < 1, "in [0, 1)"),
            ("adam_beta2", 0 <= self.adam_beta2 < 1, "in [0, 1)"),
            ("adam_epsilon", self.adam_epsilon > 0, "> 0"),
            ("weight_decay", self.weight_decay >= 0, ">= 0"),
            ("doc_stride", self.doc_stride >= 0, ">= 0"),
            ("lora_alpha", self.lora_alpha > 0, "> 0"),
        ):
            if not ok:
                raise ValueError(f"{name}={getattr(self, name)} must be {rule}")
        for f in dataclasses.fields(self):  # the flags' choices (tc_labelling's default None too)
            choices = (f.default, *f.metadata.get("choices", ()))
            if len(choices) > 1 and getattr(self, f.name) not in choices:
                raise ValueError(f"{f.name}={getattr(self, f.name)!r}: use one of {choices[1:]}")

    def resolved_precision(self) -> str:
        """The precision a run uses: `precision`, with auto resolved (bf16_weights on a GPU, fp32 on CPU)."""
        if self.precision != "auto":
            return self.precision
        import torch  # here, not at import: a command line checks its arguments before loading torch

        return "bf16_weights" if torch.cuda.is_available() else "fp32"

    def model_dtype(self):
        """The torch dtype the model is loaded in: bf16 for bf16_weights, else fp32 (explicit in both cases: a bf16
        checkpoint must not silently train in bf16 under autocast)."""
        import torch

        return torch.bfloat16 if self.resolved_precision() == "bf16_weights" else torch.float32

    def for_run(self, **changes) -> FinetuneArgs:
        """One run's settings: this protocol with `changes` (lr, seed, scratch_dir...) as `FinetuneArgs`."""
        return FinetuneArgs(**{**dataclasses.asdict(self), **changes})


@dataclass(frozen=True)
class Setting:
    """What one protocol setting decides (`SETTINGS`): `families`, those that read it (an SC result does not depend on
    `--ir_pooling`); `identity`, whether it can change a score, or a (setting, value) pair it is left out at (results
    keep the identity they had before it existed); `data`, the `tasks.load_splits` argument it sets."""

    families: tuple = FAMILIES
    identity: bool | tuple = True
    data: str | None = None


# Every `ProtocolArgs` field not listed here is read by every family, enters the identity and leaves the data as it is.
SETTINGS = {
    "max_length": Setting(families=("sc", "tc", "ir")),
    **dict.fromkeys(("qa_max_length", "doc_stride", "n_best", "max_answer_length"), Setting(families=("qa",))),
    "ir_corpus": Setting(families=("ir",), data="corpus"),
    "ir_relevance": Setting(families=("ir",), data="relevance"),
    **dict.fromkeys(("ir_pooling", "query_prompt", "document_prompt"), Setting(families=("ir",))),
    "tc_labelling": Setting(families=("tc",)),
    "pair_encoding": Setting(families=("sc",), identity=("pair_encoding", "joined"), data="pair_encoding"),
    **dict.fromkeys(("peft", "lora_rank", "lora_alpha"), Setting(identity=("peft", "none"))),
    **dict.fromkeys(("logging_steps", "scratch_dir"), Setting(identity=False)),
    "data_dir": Setting(identity=False, data="data_dir"),
    **dict.fromkeys(("lr", "seed"), Setting(identity=False)),  # a run's own (`FinetuneArgs`): its result's file name
    **{name: Setting(data=name) for name in ("source", "max_train", "max_eval")},
}


def reads(family: str, name: str) -> bool:
    """Whether results of `family` depend on the protocol setting `name` (`SETTINGS`)."""
    return family in SETTINGS.get(name, Setting()).families


def identity_settings(args: ProtocolArgs, family: str, names=None) -> dict:
    """{setting: value} of the settings among `names` (default: all) entering a `family` result's identity."""
    out = {}
    for name in names or [f.name for f in dataclasses.fields(args)]:
        declared = SETTINGS.get(name, Setting())
        condition = declared.identity
        enters = getattr(args, condition[0]) != condition[1] if isinstance(condition, tuple) else condition
        if enters and family in declared.families:
            out[name] = getattr(args, name)
    return out


def data_settings(args: ProtocolArgs, family: str) -> dict:
    """The `tasks.load_splits` arguments of a `family` task under `args`: what its loaded splits depend on."""
    return {
        declared.data: getattr(args, name)
        for name, declared in SETTINGS.items()
        if declared.data and family in declared.families
    }


@dataclass
class FinetuneArgs(ProtocolArgs):
    """One run's settings: the grid's protocol plus the learning rate and seed the grid runner fills in."""

    lr: float = 5e-5
    seed: int = 0


def schedule(task, args: FinetuneArgs) -> tuple[int | None, float | None]:
    """(max_steps, epochs) of a task: `--max_steps` wins, then the task's steps, then its epochs."""
    if args.max_steps is not None:
        return args.max_steps, None
    if "max_steps" in task.budget:
        return int(task.budget["max_steps"]), None
    return None, float(task.budget["epochs"])
