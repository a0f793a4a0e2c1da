"""What every task family shares: the fine-tuning protocol, model/tokenizer loading, the Trainer set-up with
divergence detection, the tokenized-dataset cache and atomic result files.

Protocol defaults are the paper's (EncodEval's; `docs/protocol.md` "Evaluation"): batch 32, linear schedule with 10%
warmup, AdamW (0.9, 0.95) eps 1e-5, weight decay 0.1, steps or epochs from the task, the last checkpoint evaluated,
bf16 weights on GPU, inputs up to 99% of the model's positions (at most 2048: 2028 tokens), IR on the pooled judged
corpus with binary relevance. Whatever the tokenizer ships, inputs are padded and truncated on the right, and the
attention a run uses is probed on the model itself (`attention_pattern`), never assumed from its config.
Scores are fractions in [0, 1] everywhere (as `evaluation.metrics` returns them), never percentages.
"""

from __future__ import annotations

import dataclasses
import math
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import torch
from transformers import (
    AutoConfig,
    AutoTokenizer,
    Trainer,
    TrainerCallback,
    TrainingArguments,
    set_seed,
)
from transformers.trainer_callback import PrinterCallback

import modeling_eurobert  # noqa: F401  (registers our Auto classes, so our checkpoints load in-process)
from core import artifacts, lora

ATTENTION_CHOICES = ("bidirectional", "causal", "checkpoint")
PRECISIONS = ("auto", "bf16_weights", "bf16_autocast", "fp32")
IR_CORPORA = ("pooled", "judged", "full")
PAIR_ENCODINGS = ("joined", "segments")  # SC sentence pairs: the template's one text, or two segments
IR_POOLINGS = ("mean", "cls", "last")
LENGTH_MARGIN = 0.99  # the original harness: max length = round(0.99 * min(the model's positions, 2048))
LENGTH_LIMIT = 2048  # the original harness's default max_length (EncodEval): 2028 tokens at most
QA_STRIDE_SHARE = 3  # a QA window shorter than --qa_max_length overlaps by at most a third of it (128 / 384)
PEFT_CHOICES = ("none", "lora")
# The paper's evaluation grid: its 12 tasks (registry names), 6 learning rates, 5 seeds.
PAPER_TASKS = ("sst2", "mnli", "qqp", "conll2003", "ontonotes", "uner", "squad", "squad_v2", "record", "msmarco", "nq",
               "mldr")
PAPER_LRS = (1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4)
PAPER_SEEDS = (0, 1, 2, 3, 4)


@dataclass
class ProtocolArgs:
    """Fine-tuning settings shared by every run of a grid (command-line flags of `evaluation.run`).

    Protocol: `batch_size`, `warmup_ratio`, `adam_beta1/2`, `adam_epsilon`, `weight_decay`,
    `max_steps` (overrides the task's steps/epochs), `precision`. Inputs: `max_length`, `doc_stride` (QA),
    `max_answer_length`/`n_best` (QA post-processing), `ir_corpus`, `ir_relevance`, `ir_pooling`,
    `query_prompt`/`document_prompt` (override the task's), `tc_labelling` (overrides the task's), `pair_encoding`
    (SC sentence pairs). Data: `source`,
    `data_dir`, `max_train`, `max_eval`. Every default is the paper's protocol (`docs/protocol.md`).
    """

    batch_size: int = field(default=32, metadata={"help": "Train batch size (paper: 32)."})
    eval_batch_size: int = field(default=64, metadata={"help": "Batch size for prediction and encoding."})
    warmup_ratio: float = field(default=0.1, metadata={"help": "Linear warmup share of the steps (paper: 0.1)."})
    adam_beta1: float = 0.9
    adam_beta2: float = 0.95
    adam_epsilon: float = 1e-5
    weight_decay: float = 0.1
    max_steps: int | None = field(default=None, metadata={"help": "Override the task's steps/epochs (smoke runs)."})
    precision: str = field(default="auto", metadata={
        "help": "bf16_weights: the model cast to bf16, so weights and AdamW states are bf16, as the original harness "
                "does (small updates round away); bf16_autocast: fp32 weights and states under bf16 autocast; fp32. "
                "auto (default): bf16_weights on a GPU, fp32 on CPU.", "choices": PRECISIONS})
    attention: str = field(default="bidirectional", metadata={
        "help": "Fine-tuning attention: bidirectional (paper default, also for CLM checkpoints), causal, or "
                "checkpoint (the checkpoint's own config.is_causal).", "choices": ATTENTION_CHOICES})
    max_length: int | None = field(default=None, metadata={
        "help": "Max tokens per SC/TC/IR input, at most the model's max_position_embeddings; default: 99%% of "
                "the model's max_position_embeddings counted up to 2048, as the original harness (2028 for 2048 "
                "positions or more)."})
    qa_max_length: int = field(default=384, metadata={
        "help": "Max tokens per QA window (question + context); capped at the default input length (99%% of "
                "the model's positions counted up to 2048)."})
    doc_stride: int = field(default=128, metadata={
        "help": "QA: overlap between consecutive context windows; at most a third of a window cut to fit the model."})
    n_best: int = field(default=20, metadata={"help": "QA: start/end candidates kept per window."})
    max_answer_length: int = field(default=30, metadata={"help": "QA: longest answer span in tokens."})
    ir_corpus: str = field(default="pooled", metadata={
        "help": "IR corpus: pooled = the documents judged in validation or test, one corpus for both (the original); "
                "judged = each split's own judged documents; full = the whole corpus.", "choices": IR_CORPORA})
    ir_relevance: str = field(default="binary", metadata={
        "help": "IR relevance: binary = a judgement >= 1 counts as relevant with gain 1 (the original); graded = "
                "the qrels scores as gains.", "choices": ("binary", "graded")})
    tc_labelling: str | None = field(default=None, metadata={
        "help": "TC sub-token labelling: first or all (majority vote per word); default: the task's own.",
        "choices": ("first", "all")})
    pair_encoding: str = field(default="joined", metadata={
        "help": "SC sentence pairs (MNLI, QQP, MRPC): joined = one text, the task's template (the paper); segments = "
                "the template's two fields as two segments, the tokenizer's pair encoding with token_type_ids (as "
                "run_glue), for models with token-type embeddings (type_vocab_size > 1); a model without them keeps "
                "the joined text, and its result's inputs identity says which it got.", "choices": PAIR_ENCODINGS})
    ir_pooling: str = field(default="mean", metadata={
        "help": "IR embedding pooling: mean over the tokens (the original), cls (the first token) or last (the last "
                "real token, as decoder embedders do).", "choices": IR_POOLINGS})
    query_prompt: str | None = field(default=None, metadata={
        "help": "IR: the text put before every query; default: the task's (\"Query: \")."})
    document_prompt: str | None = field(default=None, metadata={
        "help": "IR: the text put before every document; default: the task's (\"Document: \")."})
    peft: str = field(default="none", metadata={
        "help": "none (paper: full fine-tuning) or lora: LoRA adapters (core/lora.py) on the attention and MLP "
                "projections, the task head trained fully (SC/TC/QA; saved models merged)", "choices": PEFT_CHOICES})
    lora_rank: int = field(default=8, metadata={"help": "--peft lora: rank r"})
    lora_alpha: float = field(default=16.0, metadata={"help": "--peft lora: alpha (updates scaled by alpha / r)"})
    logging_steps: int = field(default=10, metadata={"help": "Steps between loss checks for divergence."})
    source: str = field(default="offline", metadata={"help": "Task data: the offline bundle or each task's Hub source.",
                                                     "choices": ("offline", "hub")})
    data_dir: str | None = field(default=None,
                                 metadata={"help": "Data bundle (default: $MLM_VS_CLM_DATA, ../shared/data)."})
    max_train: int | None = field(default=None, metadata={"help": "Keep at most N training examples (smoke runs)."})
    max_eval: int | None = field(default=None, metadata={"help": "Keep at most N validation/test examples."})
    scratch_dir: str | None = field(default=None, metadata={"help": "Scratch dir for the Trainer (temp if None)."})

    def __post_init__(self):
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"max_steps={self.max_steps} must be >= 1; leave it unset for the task's own budget "
                             "(1,000 steps, or one epoch for CoNLL and UNER)")
        for name in ("batch_size", "eval_batch_size", "max_length", "qa_max_length", "max_train", "max_eval",
                     "n_best", "max_answer_length", "lora_rank", "logging_steps"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name}={value} must be >= 1")
        for name, ok, rule in (("adam_beta1", 0 <= self.adam_beta1 < 1, "in [0, 1)"),
                               ("adam_beta2", 0 <= self.adam_beta2 < 1, "in [0, 1)"),
                               ("adam_epsilon", self.adam_epsilon > 0, "> 0"),
                               ("weight_decay", self.weight_decay >= 0, ">= 0"),
                               ("doc_stride", self.doc_stride >= 0, ">= 0"),
                               ("lora_alpha", self.lora_alpha > 0, "> 0")):
            if not ok:
                raise ValueError(f"{name}={getattr(self, name)} must be {rule}")
        if self.attention not in ATTENTION_CHOICES:
            raise ValueError(f"attention={self.attention!r} is not one of {ATTENTION_CHOICES}")
        for name, choices in (("precision", PRECISIONS), ("ir_corpus", IR_CORPORA),
                              ("ir_relevance", ("binary", "graded")), ("tc_labelling", (None, "first", "all")),
                              ("ir_pooling", IR_POOLINGS), ("peft", PEFT_CHOICES), ("pair_encoding", PAIR_ENCODINGS)):
            if getattr(self, name) not in choices:
                raise ValueError(f"{name}={getattr(self, name)!r}: use one of {choices}")

    def resolved_precision(self) -> str:
        """The precision a run uses: `precision`, with auto resolved (bf16_weights on a GPU, fp32 on CPU)."""
        if self.precision != "auto":
            return self.precision
        return "bf16_weights" if torch.cuda.is_available() else "fp32"

    def model_dtype(self) -> torch.dtype:
        """The dtype the model is loaded in: bf16 for bf16_weights, else fp32 (explicit in both cases: a bf16
        checkpoint must not silently train in bf16 under autocast)."""
        return torch.bfloat16 if self.resolved_precision() == "bf16_weights" else torch.float32

    def use_bf16(self) -> bool:
        """bf16 autocast in the Trainer (only for bf16_autocast: bf16 weights need none)."""
        return self.resolved_precision() == "bf16_autocast"

    def for_run(self, **changes) -> FinetuneArgs:
        """One run's settings: this protocol with `changes` (lr, seed, scratch_dir...) as `FinetuneArgs`."""
        return FinetuneArgs(**{**dataclasses.asdict(self), **changes})


@dataclass
class FinetuneArgs(ProtocolArgs):
    """One run's settings: the grid's protocol plus the learning rate and seed the grid runner fills in."""

    lr: float = 5e-5
    seed: int = 0


def load_tokenizer(model_path: str | os.PathLike):
    """Load a model directory's tokenizer, with a one-line error when it has none, padding and truncating on the
    right (`pad_right`).

    A tokenizer without a pad token (Llama-3) pads with eos: padded positions are masked out by the attention mask,
    so the id only has to be a valid one.
    """
    directory = Path(model_path)
    if directory.is_dir() and not any((directory / name).is_file() for name in artifacts.TOKENIZER_FILES):
        raise ValueError(f"no tokenizer found in {model_path} (none of {', '.join(artifacts.TOKENIZER_FILES)}); "
                         "save one beside the model (tokenizer.save_pretrained)")
    artifacts.check_json_files(model_path)  # a corrupt config or tokenizer file is named
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_path, trust_remote_code=True)
    except (OSError, ValueError, TypeError) as error:
        raise artifacts.hub_load_error(str(model_path), "the tokenizer", error) from None
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise ValueError(f"tokenizer of {model_path} has neither a pad nor an eos token; set pad_token")
        tokenizer.pad_token = tokenizer.eos_token
    return pad_right(tokenizer)


def pad_right(tokenizer):
    """Pad and truncate on the right, whatever the tokenizer ships (decoders often ship `padding_side="left"`):
    TC labels, QA start/end positions and their post-processing index tokens from the start of the text, CLS
    pooling reads position 0, absolute position embeddings count from the first token. Returns the tokenizer."""
    tokenizer.padding_side = tokenizer.truncation_side = "right"
    return tokenizer


def set_attention(model, attention: str) -> None:
    """Give a loaded model the fine-tuning attention pattern and check that it really attends so.

    `bidirectional` or `causal` sets `config.is_causal`, which our checkpoints read at every forward and
    transformers' mask helpers honour for decoders (Llama, Qwen...: `masking_utils.create_causal_mask` builds a
    bidirectional mask when it is False); `checkpoint` keeps the model as it is.

    Raises:
        ValueError: the model does not attend as asked (`attention_pattern`), e.g. an encoder without a causal switch.
    """
    if attention == "checkpoint":
        return
    model.config.is_causal = attention == "causal"
    used = attention_pattern(model)
    if used != attention:
        raise ValueError(f"--attention {attention}: {model.config.model_type} models attend {used}ly whatever "
                         f"config.is_causal says; use --attention {used} (or checkpoint)")


@torch.no_grad()
def attention_pattern(model) -> str:
    """"causal" or "bidirectional": how `model` (any transformers model) really attends, probed on two 3-token
    inputs that differ only in their last token: a causal model's first output does not see the change."""
    base = getattr(model, "base_model", model)
    vocab = model.config.get_text_config().vocab_size
    ids = torch.tensor([[vocab - 4, vocab - 3, vocab - 2], [vocab - 4, vocab - 3, vocab - 1]], device=model.device)
    training = base.training
    base.eval()
    try:
        hidden = base(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state.float()
    finally:
        base.train(training)
    return "causal" if torch.allclose(hidden[0, 0], hidden[1, 0], atol=1e-4) else "bidirectional"


_ATTENTION: dict = {}


def resolved_attention(model_path: str | os.PathLike, attention: str) -> str:
    """The attention pattern ("bidirectional" or "causal") a run with `--attention attention` uses on
    `model_path`: `set_attention` on a one-layer random copy of the model (no weights read); `checkpoint` resolves
    to the model's own pattern. Raises `set_attention`'s ValueError."""
    key = (str(model_path), attention)
    if key not in _ATTENTION:
        from transformers import AutoModel

        config = AutoConfig.from_pretrained(model_path, trust_remote_code=True)
        for name in ("num_hidden_layers", "n_layers", "num_layers"):
            if isinstance(getattr(config, name, None), int):
                setattr(config, name, 1)
        if isinstance(getattr(config, "layer_types", None), list):
            config.layer_types = config.layer_types[:1]
        model = AutoModel.from_config(config, trust_remote_code=True)
        set_attention(model, attention)
        _ATTENTION[key] = attention_pattern(model)
    return _ATTENTION[key]


def positions(model_path: str | os.PathLike) -> int:
    """The model's max_position_embeddings (one line when its config has none)."""
    config = AutoConfig.from_pretrained(model_path, trust_remote_code=True)
    value = getattr(config.get_text_config(), "max_position_embeddings", None)
    if not value:
        raise ValueError(f"{model_path} has no max_position_embeddings in its config; pass --max_length")
    return int(value)


def default_length(model_path: str | os.PathLike) -> int:
    """The original harness's input length: round(0.99 * min(max_position_embeddings, 2048)), 2028 at most."""
    return round(LENGTH_MARGIN * min(positions(model_path), LENGTH_LIMIT))


def max_length(args: ProtocolArgs, model_path) -> int:
    """`--max_length` (at most the model's positions), or `default_length` (the original harness: 2028 for 2048
    positions or more, 507 for 512)."""
    if args.max_length is None:
        return default_length(model_path)
    if args.max_length > (limit := positions(model_path)):
        raise ValueError(f"--max_length {args.max_length} exceeds the {limit} positions of {model_path}; pass at "
                         f"most {limit} or leave it unset")
    return args.max_length


def qa_windows(args: ProtocolArgs, model_path) -> tuple[int, int]:
    """(window length, stride) of the QA windows on `model_path`: `--qa_max_length` capped at `default_length`,
    `--doc_stride` at most a third of a window that had to be cut (BERT with 256 positions: 253 and 84)."""
    length = min(args.qa_max_length, default_length(model_path))
    stride = args.doc_stride if length == args.qa_max_length else min(args.doc_stride, length // QA_STRIDE_SHARE)
    return length, stride


def resolved_pair_encoding(model_path: str | os.PathLike, pair_encoding: str) -> str:
    """The pair encoding a model gets: `segments` only when it has token-type embeddings (`type_vocab_size` > 1, as
    BERT and ELECTRA); a model without them (EuroBERT, RoBERTa, decoders) reads the joined text."""
    if pair_encoding == "joined":
        return "joined"
    config = AutoConfig.from_pretrained(model_path, trust_remote_code=True).get_text_config()
    return "segments" if (getattr(config, "type_vocab_size", None) or 0) > 1 else "joined"


def resolve_inputs(args: ProtocolArgs, model_path) -> ProtocolArgs:
    """`args` with what a run on `model_path` really uses filled in: max_length, the QA window and stride, the
    attention pattern ("bidirectional" or "causal"; `checkpoint` resolved) and the pair encoding. The result records
    these."""
    length, stride = qa_windows(args, model_path)
    return dataclasses.replace(args, max_length=max_length(args, model_path), qa_max_length=length,
                               doc_stride=stride, attention=resolved_attention(model_path, args.attention),
                               pair_encoding=resolved_pair_encoding(model_path, args.pair_encoding))


def inputs_identity(args: ProtocolArgs) -> dict:
    """The resolved input settings of `resolve_inputs` (part of a result's identity; the pair encoding only when
    it is `segments`, so joined-text results keep the identity they had before the setting existed)."""
    names = ("max_length", "qa_max_length", "doc_stride", "attention", *(("pair_encoding",) * (
        args.pair_encoding == "segments")))
    return {name: getattr(args, name) for name in names}


def training_arguments(args: FinetuneArgs, output_dir: str, max_steps: int | None, epochs: float | None,
                       cls=TrainingArguments, **extra) -> TrainingArguments:
    """TrainingArguments of the paper's protocol; nothing is saved (the last step is evaluated in memory).

    Args:
        args: run settings.
        output_dir: scratch directory.
        max_steps: optimizer steps (SC, QA, IR, OntoNotes: 1,000) or None to train `epochs`.
        epochs: epochs when `max_steps` is None (CoNLL, UNER: 1).
        cls: the arguments class (`SentenceTransformerTrainingArguments` for IR).
        extra: more fields (e.g. the sentence-transformers batch sampler and prompts).
    """
    return cls(
        output_dir=output_dir, learning_rate=args.lr, seed=args.seed, data_seed=args.seed,
        per_device_train_batch_size=args.batch_size, per_device_eval_batch_size=args.eval_batch_size,
        max_steps=max_steps if max_steps is not None else -1, num_train_epochs=epochs or 1.0,
        lr_scheduler_type="linear", warmup_steps=args.warmup_ratio,  # a float < 1 is a ratio of the steps
        adam_beta1=args.adam_beta1, adam_beta2=args.adam_beta2, adam_epsilon=args.adam_epsilon,
        weight_decay=args.weight_decay, optim="adamw_torch", bf16=args.use_bf16(),
        save_strategy="no", eval_strategy="no", report_to="none", disable_tqdm=True, dataloader_num_workers=0,
        dataloader_pin_memory=torch.cuda.is_available(),
        # NaN/inf must reach the logs (the default filter hides them) for DivergenceCallback to see them.
        logging_steps=args.logging_steps, logging_nan_inf_filter=False, **extra,
    )


def schedule(task, args: FinetuneArgs) -> tuple[int | None, float | None]:
    """(max_steps, epochs) of a task: `--max_steps` wins, then the task's steps, then its epochs."""
    if args.max_steps is not None:
        return args.max_steps, None
    if getattr(task, "max_steps", None):
        return int(task.max_steps), None
    return None, float(getattr(task, "epochs", None) or 1.0)


# Extra callbacks added to every fine-tuning Trainer (bench/bench_eval.py times optimizer steps with one).
TRAINER_CALLBACKS: list[TrainerCallback] = []


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
    """A fine-tuned model between training and scoring: each family's `finetune` returns one, its `score` reads it
    (once per task, so retrieval tasks that share training data are scored on one trained model), and its `save`
    keeps it (`evaluation.run --save_models`).

    Attributes:
        trainer: the Trainer; `trainer.model` is the fine-tuned model, `trainer.processing_class` its tokenizer.
        diverged: the loss or gradient norm turned NaN/inf (nothing to score or save).
    """

    trainer: Trainer
    diverged: bool


def save_finetuned(finetuned: Finetuned, directory: str | os.PathLike) -> None:
    """Save a fine-tuned transformers model with its tokenizer, loadable like any checkpoint (`AutoModelFor*`,
    `trust_remote_code=True` for ours: `save_pretrained` copies the modeling code beside the weights).

    `Trainer.save_model` is not used: it also writes `training_args.bin`, which holds local paths.
    """
    lora.save_merged(finetuned.trainer.model, directory)  # a LoRA model merged: loads without peft
    finetuned.trainer.processing_class.save_pretrained(directory)


def train(trainer: Trainer) -> bool:
    """Run `trainer.train()` with divergence detection; return True if the run diverged."""
    callback = DivergenceCallback()
    trainer.add_callback(callback)
    for extra in TRAINER_CALLBACKS:
        trainer.add_callback(extra)
    trainer.remove_callback(PrinterCallback)  # the grid has its own progress bar; loss lines would drown it
    output = trainer.train()
    return callback.diverged or not math.isfinite(output.training_loss)


def trainer_dir(args: FinetuneArgs) -> str:
    """Where the Trainer may write. Nothing is saved (save_strategy "no"), but TrainingArguments needs a path."""
    return args.scratch_dir or str(Path(tempfile.gettempdir()) / "mlm-vs-clm-finetune")


# ---------------------------------------------------------------------------------------------------------------
# Caches shared by every run of a grid: raw splits per task, tokenized splits per (tokenizer, task, length)
# ---------------------------------------------------------------------------------------------------------------

_SPLITS: dict = {}
_TOKENIZED: dict = {}


def task_splits(task, args: FinetuneArgs):
    """`tasks.load_splits` once per (task, data dir, subset sizes) in this process."""
    from evaluation import tasks

    key = (str(task.path or task.name), args.source, args.data_dir, args.max_train, args.max_eval, args.ir_corpus,
           args.ir_relevance, args.pair_encoding)
    if key not in _SPLITS:
        extra = {"corpus": args.ir_corpus, "relevance": args.ir_relevance} if task.family == "ir" else {}
        extra = {"pair_encoding": args.pair_encoding} if task.family == "sc" else extra
        _SPLITS[key] = tasks.load_splits(
            task, data_dir=args.data_dir, max_train=args.max_train, max_eval=args.max_eval, source=args.source, **extra
        )
    return _SPLITS[key]


def tokenizer_fingerprint(tokenizer) -> str:
    """Content hash of a tokenizer (vocab, merges, template), so checkpoints sharing one share the cache."""
    from datasets.fingerprint import Hasher

    return Hasher.hash(tokenizer.backend_tokenizer.to_str() if tokenizer.is_fast else tokenizer)


def cached(key: tuple, build):
    """Return `build()` computed once per key in this process (tokenized datasets reused by every grid run)."""
    if key not in _TOKENIZED:
        _TOKENIZED[key] = build()
    return _TOKENIZED[key]


# ---------------------------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------------------------


def result(task, status: str, scores: dict | None = None, predictions: dict | None = None) -> dict:
    """The family-independent part of a run's result: aggregate scores, and per instance the prediction, the
    reference and the instance's scores, so every metric can be recomputed from the result file alone.

    Args:
        task: the Task (its `metric` is the main metric).
        status: "ok" or "diverged".
        scores: {"validation": metrics dict, "test": metrics dict} from `evaluation.metrics` (with "per_instance").
        predictions: {"validation": {column: list}, "test": {column: list}}: predictions and references per
            instance (e.g. {"prediction": [...], "reference": [...]}), aligned with the metric's per-instance lists.

    Returns:
        {"status", "main_metric", "validation", "test", "per_instance": {"validation": [records], "test": [records]}}.
    """
    scores, predictions = scores or {}, predictions or {}
    out = {"status": status, "main_metric": task.metric}
    per_instance = {}
    for role in ("validation", "test"):
        metric = scores.get(role) or {}
        out[role] = {k: v for k, v in metric.items() if k != "per_instance"}
        columns = {**(predictions.get(role) or {}),
                   **{k: v for k, v in (metric.get("per_instance") or {}).items() if v is not None}}
        n = len(next(iter(columns.values()))) if columns else 0
        if any(len(v) != n for v in columns.values()):
            lengths = {k: len(v) for k, v in columns.items()}
            raise ValueError(f"per-instance columns of {role} have different lengths: {lengths}")
        per_instance[role] = [{k: v[i] for k, v in columns.items()} for i in range(n)]
    out["per_instance"] = per_instance
    return out


def args_dict(args: FinetuneArgs) -> dict:
    return dataclasses.asdict(args)


def check_labels(model_path: str | os.PathLike, task) -> None:
    """Refuse a checkpoint that already has a classifier for another label set (e.g. a fine-tuned model).

    Configs whose labels are the untouched defaults (LABEL_0, LABEL_1) are fine: the head is new.
    """
    if task.family not in ("sc", "tc"):
        return
    config = AutoConfig.from_pretrained(model_path, trust_remote_code=True)
    names = [config.id2label[i] for i in sorted(config.id2label)] if config.id2label else []
    if names and any(n != f"LABEL_{i}" for i, n in enumerate(names)) and names != list(task.labels):
        raise ValueError(
            f"label set mismatch: {model_path} was trained for labels {names} but task {task.name!r} "
            f"has {task.labels}; start from a pretrained (not fine-tuned) checkpoint"
        )


def check_head(model_path: str | os.PathLike, family: str) -> None:
    """Refuse a model whose architecture has no head for the task family (e.g. native EuroBERT has no QA head)."""
    from transformers import (  # the public mappings behind the Auto classes (our classes registered in them)
        MODEL_FOR_QUESTION_ANSWERING_MAPPING,
        MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING,
        MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING,
        MODEL_MAPPING,
    )

    auto, mapping = {"sc": ("AutoModelForSequenceClassification", MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING),
                     "tc": ("AutoModelForTokenClassification", MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING),
                     "qa": ("AutoModelForQuestionAnswering", MODEL_FOR_QUESTION_ANSWERING_MAPPING),
                     "ir": ("AutoModel", MODEL_MAPPING)}[family]
    config = AutoConfig.from_pretrained(model_path, trust_remote_code=True)
    if type(config) not in mapping and auto not in (getattr(config, "auto_map", None) or {}):
        raise ValueError(f"{model_path} ({config.model_type}) has no {auto} class; drop its {family} tasks")


def label_kwargs(task) -> dict:
    """num_labels / id2label / label2id for a classification head over `task.labels`."""
    return {"num_labels": len(task.labels), "id2label": dict(enumerate(task.labels)),
            "label2id": {name: i for i, name in enumerate(task.labels)}}


def load_for_finetuning(auto_class, model_path, tokenizer, args: FinetuneArgs, **kwargs):
    """`auto_class.from_pretrained` with the run's seed set first (the new head's init depends on it), the chosen
    attention pattern (checked on the loaded model) and a pad id the head can use."""
    set_seed(args.seed)
    model = auto_class.from_pretrained(model_path, dtype=args.model_dtype(), trust_remote_code=True, **kwargs)
    set_attention(model, args.attention)
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    if args.peft == "lora":  # adapters on the encoder, the task head trained fully
        model = lora.wrap(model, args.lora_rank, args.lora_alpha, modules_to_save=lora.head_modules(model),
                          seed=args.seed)
    return model
