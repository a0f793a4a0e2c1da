"""The sentence-transformers files a model directory ships so that it works as a sentence-embedding model as is:

    from core.sentence_transformers_files import write_sentence_transformers_files
    write_sentence_transformers_files("out/610m-mlm40-42k")      # after save_pretrained (model + tokenizer)

    from sentence_transformers import SentenceTransformer          # then, anywhere:
    model = SentenceTransformer("out/610m-mlm40-42k", trust_remote_code=True)
    model.encode_query(["what is MLM?"]); model.encode_document(["Masked language modeling is ..."])

The pipeline is the evaluation's for retrieval (`evaluation/retrieval.py::build_model`, same embeddings: tested): the
encoder bidirectional (even for a CLM checkpoint, as the paper fine-tunes every model), masked mean pooling over every
token, cosine similarity, the paper's prompts. The pretraining recipes write these files into every checkpoint.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from core import artifacts

PROMPTS = {"query": "Query: ", "document": "Document: "}  # the paper's IR prefixes
POOLING_DIR = "1_Pooling"
SENTENCE_TRANSFORMERS_FILES = (
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
    f"{POOLING_DIR}/config.json",
)  # what a Hub upload of a checkpoint must include


def sentence_transformers_files(
    config: dict, max_seq_length: int | None = None, prompts: dict | None = None
) -> dict[str, dict | list]:
    """The contents of the files, {relative path: JSON payload}, for a model whose config.json is `config`:
    `max_seq_length` defaults to its `max_position_embeddings`, `prompts` to `PROMPTS`; a config with an `is_causal`
    field (this project's) is loaded bidirectional, as the evaluation's encoder."""
    prompts = dict(PROMPTS if prompts is None else prompts)
    if not prompts or not all(isinstance(k, str) and isinstance(v, str) for k, v in prompts.items()):
        raise ValueError(f"prompts={prompts!r} must map prompt names to strings, e.g. {PROMPTS}")
    dimension = config.get("hidden_size")
    if not isinstance(dimension, int) or dimension < 1:
        raise ValueError(f"config.json has no hidden_size ({dimension!r}); the pooling needs the embedding dimension")
    if max_seq_length is None:
        max_seq_length = config.get("max_position_embeddings")
    if not isinstance(max_seq_length, int) or max_seq_length < 1:
        raise ValueError(
            f"max_seq_length={max_seq_length!r}: pass a positive integer (config.json has no max_position_embeddings)"
        )
    transformer = {"max_seq_length": max_seq_length, "do_lower_case": False}
    if "is_causal" in config:  # other encoders (BERT, native EuroBERT) have no such field
        transformer["config_args"] = {"is_causal": False}
    return {
        "modules.json": [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": POOLING_DIR, "type": "sentence_transformers.models.Pooling"},
        ],
        "sentence_bert_config.json": transformer,
        "config_sentence_transformers.json": {
            "model_type": "SentenceTransformer",
            "prompts": prompts,
            "default_prompt_name": None,
            "similarity_fn_name": "cosine",
        },
        f"{POOLING_DIR}/config.json": {
            "word_embedding_dimension": dimension,
            "pooling_mode_cls_token": False,
            "pooling_mode_mean_tokens": True,
            "pooling_mode_max_tokens": False,
            "pooling_mode_mean_sqrt_len_tokens": False,
            "pooling_mode_weightedmean_tokens": False,
            "pooling_mode_lasttoken": False,
            "include_prompt": True,
        },
    }


def write_sentence_transformers_files(
    directory: str | os.PathLike,
    max_seq_length: int | None = None,
    prompts: dict | None = None,
    overwrite: bool = False,
) -> list[Path]:
    """Write the sentence-transformers files into a `save_pretrained` directory (each atomically; the same contents
    left as they are) and return the paths written. A file with other contents is replaced with `overwrite` (a
    caller that owns the directory: the pretraining recipes), else refused (FileExistsError)."""
    directory = Path(directory)
    config = artifacts.read_json(directory / "config.json", "model config")
    payloads = sentence_transformers_files(config, max_seq_length, prompts)
    texts = {name: json.dumps(payload, indent=2) + "\n" for name, payload in payloads.items()}
    changed = [
        name
        for name, text in texts.items()
        if not (directory / name).is_file() or (directory / name).read_text(encoding="utf-8") != text
    ]
    clashes = [name for name in changed if (directory / name).is_file()]
    if clashes and not overwrite:
        raise FileExistsError(
            f"{directory} already holds {', '.join(clashes)} with other contents; remove them or pass overwrite=True"
        )
    return [artifacts.write_text_atomic(directory / name, texts[name]) for name in changed]


__all__ = ["PROMPTS", "SENTENCE_TRANSFORMERS_FILES", "sentence_transformers_files", "write_sentence_transformers_files"]
