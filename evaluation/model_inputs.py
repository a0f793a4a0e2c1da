"""What a model is given: its tokenizer for fine-tuning (padding and truncating on the right), the input lengths and
QA windows the protocol resolves to on it (`resolve_inputs`, recorded in a result's identity), and the checks that
it can take a task (a head for the family, no classifier of another label set).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from transformers import AutoConfig, AutoTokenizer

from core import model_folders
from evaluation.attention import resolved_attention
from evaluation.finetune_args import ProtocolArgs, identity_settings

LENGTH_MARGIN = 0.99  # the original harness: max length = round(0.99 * min(the model's positions, 2048))
LENGTH_LIMIT = 2048  # the original harness's default max_length (EncodEval): 2028 tokens at most
QA_STRIDE_SHARE = 3  # a QA window shorter than --qa_max_length overlaps by at most a third of it (128 / 384)


def load_finetuning_tokenizer(model_path: str | os.PathLike):
    """A model directory's tokenizer, `pad_right`, one without a pad token (Llama-3) padding with eos
    (padded positions are masked); a one-line error when there is none."""
    directory = Path(model_path)
    if directory.is_dir() and not any((directory / name).is_file() for name in model_folders.TOKENIZER_FILES):
        raise ValueError(
            f"no tokenizer found in {model_path} (none of {', '.join(model_folders.TOKENIZER_FILES)}); "
            "save one beside the model (tokenizer.save_pretrained)"
        )
    model_folders.check_json_files(model_path)  # a corrupt config or tokenizer file is named
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_path, trust_remote_code=True)
    except (OSError, ValueError, TypeError) as error:
        raise model_folders.hub_load_error(str(model_path), "the tokenizer", error) from None
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise ValueError(f"tokenizer of {model_path} has neither a pad nor an eos token; set pad_token")
        tokenizer.pad_token = tokenizer.eos_token
    return pad_right(tokenizer)


def pad_right(tokenizer):
    """The tokenizer, padding and truncating on the right whatever it ships (decoders often pad left): TC labels, QA
    positions, CLS pooling and absolute position embeddings all count tokens from the start of the text."""
    tokenizer.padding_side = tokenizer.truncation_side = "right"
    return tokenizer


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
    """`--max_length` (at most the model's positions), or `default_length`."""
    if args.max_length is None:
        return default_length(model_path)
    if args.max_length > (limit := positions(model_path)):
        raise ValueError(
            f"--max_length {args.max_length} exceeds the {limit} positions of {model_path}; pass at "
            f"most {limit} or leave it unset"
        )
    return args.max_length


def qa_windows(args: ProtocolArgs, model_path) -> tuple[int, int]:
    """(window length, stride) of the QA windows on `model_path`: `--qa_max_length` capped at `default_length`,
    `--doc_stride` at most a third of a window that had to be cut (BERT with 256 positions: 253 and 84)."""
    length = min(args.qa_max_length, default_length(model_path))
    stride = args.doc_stride if length == args.qa_max_length else min(args.doc_stride, length // QA_STRIDE_SHARE)
    return length, stride


def resolved_pair_encoding(model_path: str | os.PathLike, pair_encoding: str) -> str:
    """`segments` only for a model with token-type embeddings (`type_vocab_size` > 1), else `joined`."""
    if pair_encoding == "joined":
        return "joined"
    config = AutoConfig.from_pretrained(model_path, trust_remote_code=True).get_text_config()
    return "segments" if (getattr(config, "type_vocab_size", None) or 0) > 1 else "joined"


def resolve_inputs(args: ProtocolArgs, model_path) -> ProtocolArgs:
    """`args` with what a run on `model_path` really uses: max_length, QA windows, attention, pair encoding."""
    length, stride = qa_windows(args, model_path)
    return dataclasses.replace(
        args,
        max_length=max_length(args, model_path),
        qa_max_length=length,
        doc_stride=stride,
        attention=resolved_attention(model_path, args.attention),
        pair_encoding=resolved_pair_encoding(model_path, args.pair_encoding),
    )


def inputs_identity(args: ProtocolArgs, family: str) -> dict:
    """The settings of `resolve_inputs` a `family` result's identity holds (`finetune_args.SETTINGS`)."""
    return identity_settings(args, family, ("max_length", "qa_max_length", "doc_stride", "attention", "pair_encoding"))


def check_labels(model_path: str | os.PathLike, task) -> None:
    """Refuse a checkpoint with a classifier for another label set (untouched LABEL_0... names are fine)."""
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

    auto, mapping = {
        "sc": ("AutoModelForSequenceClassification", MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING),
        "tc": ("AutoModelForTokenClassification", MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING),
        "qa": ("AutoModelForQuestionAnswering", MODEL_FOR_QUESTION_ANSWERING_MAPPING),
        "ir": ("AutoModel", MODEL_MAPPING),
    }[family]
    config = AutoConfig.from_pretrained(model_path, trust_remote_code=True)
    if type(config) not in mapping and auto not in (getattr(config, "auto_map", None) or {}):
        raise ValueError(f"{model_path} ({config.model_type}) has no {auto} class; drop its {family} tasks")


def label_kwargs(task) -> dict:
    """num_labels / id2label / label2id for a classification head over `task.labels`."""
    return {
        "num_labels": len(task.labels),
        "id2label": dict(enumerate(task.labels)),
        "label2id": {name: i for i, name in enumerate(task.labels)},
    }
