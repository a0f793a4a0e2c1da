"""Turn a decoder causal LM (local dir or Hub id) into an `EuroBertClmMlmForCausalLM` checkpoint, the start of MLM
continued pretraining (CPT) from an existing decoder:

    python -m modeling_eurobert.convert meta-llama/Llama-3.2-1B out/llama-3.2-1b-eurobert
    python -m modeling_eurobert.convert Qwen/Qwen2.5-0.5B out/qwen2.5-0.5b-eurobert
    python -m modeling_eurobert.convert ./my-llama out/my-eurobert --mask_token "<|reserved_special_token_0|>" \
        --pad_token "<|finetune_right_pad_id|>" --dtype bfloat16

The families that convert exactly are `FAMILIES` (Llama's parameter names in all: no key mapping; their real
checkpoints: docs/models.md). The output is causal, loads unchanged into `EuroBertClmMlmForMaskedLM`, and its
config.json names a model type transformers knows (`export_native.make_plain_loadable`). The conversion unties tied
embeddings (`lm_head` starts as a copy of the input embedding); adds `<|mask|>` (or `--mask_token`) when missing,
refusing an ordinary token that text encodes to (`the`: once special it would be matched inside words), and a pad
distinct from eos (the source's unless it is eos, else `--pad_token`); sets every added token's embedding and LM-head
rows to the mean of the source's; accepts a sliding window only where it does not bind (`--max_position_embeddings`
at most the window). Anything else (Gemma, OLMo, Phi-3, other RoPE types or activations, quantised checkpoints) is
refused in one line before anything is written; the output appears only when complete (renamed into place).
"""

from __future__ import annotations

import argparse
import logging
import shutil
from pathlib import Path

import transformers  # light until a class of it is reached: the input is checked before torch loads
from huggingface_hub.errors import StrictDataclassError

import modeling_eurobert as ours  # light too: its classes load on first use
from core import artifacts, cli, model_folders
from core.model_folders import SOURCE_RECORD

from .export_native import make_plain_loadable
from .tokenizer_settings import configure_tokenizer

SUPPORTED_ROPE_TYPES = ("default", "linear", "llama3")
# model_type -> (the causal LM class its checkpoints are saved from, its transformers config class), by name
FAMILIES = {
    "llama": ("LlamaForCausalLM", "LlamaConfig"),
    "mistral": ("MistralForCausalLM", "MistralConfig"),
    "qwen2": ("Qwen2ForCausalLM", "Qwen2Config"),
    "qwen3": ("Qwen3ForCausalLM", "Qwen3Config"),
}
# what known decoders outside FAMILIES compute that this architecture does not represent (docs/models.md)
_NORM_OFFSET_AND_SCALE = "an RMSNorm scaled by 1 + its weight, an embedding scaled by sqrt(hidden_size)"
LACKS = {
    "gemma": f"{_NORM_OFFSET_AND_SCALE}, a GeGLU MLP",
    "gemma2": f"{_NORM_OFFSET_AND_SCALE}, attention and final-logit soft-capping, local (sliding-window) layers "
    "between global ones, norms after attention and MLP",
    "gemma3_text": f"{_NORM_OFFSET_AND_SCALE}, q/k norms, local (sliding-window) layers with their own RoPE base, "
    "norms after attention and MLP",
    "olmo": "a LayerNorm without weights (and clipped q/k/v where clip_qkv is set)",
    "olmo2": "norms after attention and MLP instead of before, q/k norms",
    "mixtral": "mixture-of-experts MLPs",
    "qwen2_moe": "mixture-of-experts MLPs",
    "qwen3_moe": "mixture-of-experts MLPs",
}
LACKS["gemma3"] = LACKS["gemma3_text"]
# how a GGUF release becomes a checkpoint this converter reads
GGUF_HINT = (
    "a GGUF release is no transformers checkpoint: dequantise it into one first, then convert that folder "
    "(`recipes.real_models.dequantise_gguf(GGUF_FILE, FOLDER)` for a Llama-architecture GGUF, with the `real` extra; "
    "`python -m recipes.real_models` does it for SmolLM2-135M-Instruct)"
)
WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin")
DTYPES = ("float32", "bfloat16")
logger = logging.getLogger(__name__)


class ConversionError(ValueError):
    """A source that cannot be converted; the message names the problem and how to fix it."""


def resolve_source(source: str, max_positions: int | None = None) -> Path:
    """The local dir holding `source` (a directory, or a Hub id's snapshot: its config.json is fetched and checked,
    with the `--max_position_embeddings` override `max_positions`, before any weights)."""
    path = Path(source)
    if path.is_dir():
        return path
    if path.exists():
        gguf = f": {GGUF_HINT}" if path.suffix == ".gguf" else ""
        raise ConversionError(f"SOURCE {source} is a file; pass the directory of a saved transformers model{gguf}")
    model_folders.local_or_hub(source, "SOURCE")  # a missing local path: "no such directory", its nearest sibling
    from huggingface_hub import hf_hub_download, snapshot_download

    try:
        config_file = hf_hub_download(source, "config.json")
    except Exception as error:  # offline and not cached, unknown repo, gated: say which, in one line
        raise model_folders.hub_load_error(source, "the decoder", error) from None
    check_source_config(read_config(Path(config_file).parent), max_positions)
    patterns = ["*.json", "tokenizer.model", *WEIGHT_PATTERNS]
    return Path(snapshot_download(source, allow_patterns=patterns))


def read_config(source_dir: Path) -> dict:
    config_file = source_dir / "config.json"
    if not config_file.is_file():
        gguf = f" ({next(source_dir.glob('*.gguf')).name}): {GGUF_HINT}" if any(source_dir.glob("*.gguf")) else ""
        raise ConversionError(f"missing config.json in {source_dir}; SOURCE must be a saved transformers model{gguf}")
    return artifacts.read_json(config_file, "model config")


def check_source_config(raw: dict, max_positions: int | None = None) -> transformers.PreTrainedConfig:
    """The source config (`raw`: its config.json), as its family's transformers config class reads it; a one-line
    ConversionError names the first incompatibility (`max_positions`: `--max_position_embeddings`, if given)."""
    model_type = raw.get("model_type")
    if model_type not in FAMILIES:
        lacks = (
            f"; {model_type} has {LACKS[model_type]}, which this architecture does not represent"
            if model_type in LACKS
            else ""
        )
        raise ConversionError(
            f"unsupported source architecture: model_type={model_type!r}; supported: "
            f"{', '.join(FAMILIES)} (each with its *ForCausalLM class){lacks}"
        )
    causal_lm, config_class = FAMILIES[model_type]
    architectures = raw.get("architectures") or [causal_lm]
    if architectures != [causal_lm]:
        raise ConversionError(
            f"architectures={architectures} is not supported; a {model_type} source must be a {causal_lm} checkpoint"
        )
    if raw.get("quantization_config"):
        raise ConversionError("quantized checkpoints (quantization_config) are not supported; use unquantized weights")
    # transformers 5 writes `rope_parameters`; older config.json files (Llama 3.x on the Hub) say `rope_scaling`.
    for rope in (raw.get("rope_parameters") or {}, raw.get("rope_scaling") or {}):
        rope_type = rope.get("rope_type", rope.get("type", "default"))
        if rope_type not in SUPPORTED_ROPE_TYPES:
            raise ConversionError(
                f"rope_type {rope_type!r} is not supported; supported: {', '.join(SUPPORTED_ROPE_TYPES)}"
            )
    try:  # head counts etc. are validated by the strict configs; report their message on one line
        source = getattr(transformers, config_class).from_dict(raw)
    except (ValueError, TypeError, StrictDataclassError) as error:
        raise ConversionError(f"invalid source config: {error.__cause__ or error}") from error
    if source.hidden_act != "silu":
        raise ConversionError(f"hidden_act={source.hidden_act!r} is not supported: the MLP is SwiGLU (silu)")
    if max_positions is not None and not 0 < max_positions <= source.max_position_embeddings:
        raise ConversionError(
            f"--max_position_embeddings {max_positions} must be in [1, the source's "
            f"max_position_embeddings={source.max_position_embeddings}]"
        )
    positions = max_positions or source.max_position_embeddings
    window = sliding_window(source)
    if window is not None and window < positions:
        raise ConversionError(
            f"sliding_window={window} binds within max_position_embeddings={positions} (queries "
            f"would not see tokens {window} or more positions back) and this architecture has no "
            f"sliding window; pass --max_position_embeddings {window} to convert a model whose "
            "context the window never limits"
        )
    return source


def sliding_window(source: transformers.PreTrainedConfig) -> int | None:
    """The window any layer of the source attends within, or None: Mistral's applies to every layer, Qwen2/3's to
    the layers `layer_types` marks (none unless `use_sliding_window`), Llama has none."""
    layer_types = getattr(source, "layer_types", None)
    if layer_types is not None and "sliding_attention" not in layer_types:
        return None
    return getattr(source, "sliding_window", None)


def check_source_files(source_dir: Path) -> None:
    """Raise when the weights or the tokenizer are missing or a JSON file of the source (tokenizer.json, config.json,
    ...) is corrupt, naming the file in one line (before anything is loaded)."""
    model_folders.check_json_files(source_dir)
    if not any(any(source_dir.glob(pattern)) for pattern in WEIGHT_PATTERNS):
        raise ConversionError(f"missing weights in {source_dir}: no *.safetensors or pytorch_model*.bin")
    if not any((source_dir / name).is_file() for name in model_folders.TOKENIZER_FILES):
        raise ConversionError(f"missing tokenizer in {source_dir}: none of {', '.join(model_folders.TOKENIZER_FILES)}")
    model_folders.check_weights(source_dir)


def eurobert_config(
    source: transformers.PreTrainedConfig, dtype: str, max_positions: int | None = None
) -> ours.EuroBertClmMlmConfig:
    """The causal EuroBERT config with the source's architecture fields copied over (ids are set later)."""
    copied = (
        "vocab_size",
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "initializer_range",
        "rms_norm_eps",
        "bos_token_id",
        "eos_token_id",
    )
    return ours.EuroBertClmMlmConfig(
        **{name: getattr(source, name) for name in copied},
        head_dim=getattr(source, "head_dim", None) or source.hidden_size // source.num_attention_heads,
        max_position_embeddings=max_positions or source.max_position_embeddings,
        rope_parameters=dict(source.rope_parameters),
        attention_bias=bool(getattr(source, "attention_bias", False)),  # Llama, Qwen3: q, k, v and o
        mlp_bias=bool(getattr(source, "mlp_bias", False)),
        qkv_bias=source.model_type == "qwen2",  # Qwen2/2.5: q, k, v always, o never
        qk_norm=source.model_type == "qwen3",
        attention_dropout=float(source.attention_dropout or 0.0),
        pad_token_id=None,
        mask_token_id=None,  # mask and pad ids come from the tokenizer, once the vocabulary is final
        tie_word_embeddings=False,  # untied below, explicitly
        is_causal=True,
        dtype=dtype,
    )


def set_special_tokens(tokenizer, mask_token: str, pad_token: str, eos_ids: set[int]) -> list[int]:
    """Give the tokenizer a mask token and a pad token that is not eos (each special or reserved already, or new: not
    an ordinary token, module docstring); returns the ids of tokens it added."""
    for role, token in (("mask", mask_token), ("pad", pad_token)):
        added = {str(t) for t in tokenizer.added_tokens_decoder.values()}
        if (
            token in tokenizer.get_vocab()
            and token not in added
            and tokenizer(token, add_special_tokens=False)["input_ids"] == [tokenizer.convert_tokens_to_ids(token)]
        ):
            raise ConversionError(
                f"--{role}_token {token!r} is an ordinary token of the vocabulary (text encodes "
                "to it); pass a special or reserved token (Llama-3: <|reserved_special_token_0|>) "
                f"or a new one (default <|{role}|>)"
            )
    size_before = len(tokenizer)
    tokenizer.add_special_tokens({"mask_token": mask_token})
    if tokenizer.pad_token_id is None or tokenizer.pad_token_id in eos_ids:
        tokenizer.add_special_tokens({"pad_token": pad_token})
    for role in ("mask", "pad"):
        if getattr(tokenizer, f"{role}_token_id") in eos_ids:
            raise ConversionError(f"the {role} token {getattr(tokenizer, f'{role}_token')!r} is eos; choose another")
    if tokenizer.mask_token_id == tokenizer.pad_token_id:
        raise ConversionError(f"mask and pad token are the same ({tokenizer.mask_token!r}); choose distinct tokens")
    return list(range(size_before, len(tokenizer)))


def init_added_rows(model: ours.EuroBertClmMlmForCausalLM, added_ids: list[int]) -> None:
    """Resize to the tokenizer if needed and set every added token's rows to the mean of the source rows."""
    import torch

    if not added_ids:
        return
    with torch.no_grad():
        embed_mean = model.model.embed_tokens.weight.float().mean(dim=0)
        head_mean = model.lm_head.weight.float().mean(dim=0)
        if max(added_ids) >= model.config.vocab_size:
            model.resize_token_embeddings(max(added_ids) + 1, mean_resizing=False)
        model.model.embed_tokens.weight[added_ids] = embed_mean.to(model.dtype)
        model.lm_head.weight[added_ids] = head_mean.to(model.dtype)
    logger.warning(f"added token ids {added_ids}, rows = mean of the source rows; vocab_size {model.config.vocab_size}")


def _shapes(mismatched) -> list[str]:
    """transformers' mismatched keys [(key, shape in the file, shape the config gives)] as 'key: file -> config'."""
    shown = [
        f"{key}: {tuple(found)} in the weights, {tuple(wanted)} by config.json"
        for key, found, wanted in sorted(mismatched or [])
    ]
    return shown[:2] + [f"{len(shown) - 2} more"] * (len(shown) > 2)


def load_weights(source_dir: Path, config: ours.EuroBertClmMlmConfig, tied: bool) -> ours.EuroBertClmMlmForCausalLM:
    """Load the source weights straight into EuroBertClmMlmForCausalLM (same keys) and untie a tied LM head.
    The keys are checked here, so transformers' LOAD REPORT (a tied source's lm_head.weight "MISSING ... newly
    initialized") is not printed: the untying is said in one line."""
    report = logging.getLogger("transformers.modeling_utils")
    level = report.level
    report.setLevel(logging.ERROR)
    try:
        model, info = ours.EuroBertClmMlmForCausalLM.from_pretrained(
            source_dir, config=config, dtype=config.dtype, output_loading_info=True, ignore_mismatched_sizes=True
        )  # a config that disagrees with the weights is reported below, in one line
    finally:
        report.setLevel(level)
    # A tied checkpoint may omit lm_head.weight; anything else missing or extra means the mapping is wrong.
    missing = set(info["missing_keys"]) - ({"lm_head.weight"} if tied else set())
    if missing or info["unexpected_keys"] or info.get("mismatched_keys"):
        raise ConversionError(
            f"weights of {source_dir} do not match the converted layout: missing {sorted(missing)}, "
            f"unexpected {sorted(info['unexpected_keys'])}, mismatched "
            f"{_shapes(info.get('mismatched_keys'))}: its config.json disagrees with its weights, or "
            "the checkpoint is of another family"
        )
    if tied:  # untie: the output embedding starts as a copy of the input one
        import torch

        with torch.no_grad():
            model.lm_head.weight.copy_(model.model.embed_tokens.weight)
        logger.warning("tie_word_embeddings=true in the source: lm_head.weight set to a copy of embed_tokens (untied)")
    return model


def convert(
    source: str,
    output: str | Path,
    mask_token: str = "<|mask|>",
    pad_token: str = "<|pad|>",
    dtype: str = "float32",
    max_positions: int | None = None,
) -> Path:
    """Convert `source` (local dir or Hub id of a `*ForCausalLM` checkpoint of one of `FAMILIES`, with its tokenizer)
    into a causal EuroBERT checkpoint at `output` (which must not exist), returned. `dtype` (`float32`, `bfloat16`):
    of the saved weights; `max_positions`: the converted model's context when shorter than the source's."""
    output = Path(output)
    if output.exists():
        raise ConversionError(f"OUTPUT {output} already exists; remove it or choose another path")
    artifacts.check_output_dir(output, "OUTPUT")  # under a file or a folder this user cannot write to
    if dtype not in DTYPES:
        raise ConversionError(f"--dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    for role, token in (("mask", mask_token), ("pad", pad_token)):
        if not token.strip():
            raise ConversionError(
                f"--{role}_token {token!r} is empty: pass a special or reserved token or a new one (default <|{role}|>)"
            )
    source_dir = resolve_source(source, max_positions)
    source_config = check_source_config(read_config(source_dir), max_positions)
    check_source_files(source_dir)
    try:
        config = eurobert_config(source_config, dtype, max_positions)
    except (ValueError, StrictDataclassError) as error:
        raise ConversionError(f"invalid source config: {error.__cause__ or error}") from error
    tokenizer = transformers.AutoTokenizer.from_pretrained(source_dir)
    eos = source_config.eos_token_id
    eos_ids = {eos} if isinstance(eos, int) else set(eos or [])
    if tokenizer.eos_token_id is not None:
        eos_ids.add(tokenizer.eos_token_id)
    added_ids = set_special_tokens(tokenizer, mask_token, pad_token, eos_ids)
    configure_tokenizer(tokenizer, config.max_position_embeddings)

    model = load_weights(source_dir, config, tied=source_config.tie_word_embeddings)
    init_added_rows(model, added_ids)
    model.config.mask_token_id, model.config.pad_token_id = tokenizer.mask_token_id, tokenizer.pad_token_id

    with artifacts.atomic_directory(output, expected=None) as staging:  # never over what appeared meanwhile
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        make_plain_loadable(staging)
        if (source_dir / SOURCE_RECORD).is_file():  # checked as JSON with the source's files
            shutil.copyfile(source_dir / SOURCE_RECORD, staging / SOURCE_RECORD)
    return output


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="local dir or Hub id of a causal LM of one of: " + ", ".join(FAMILIES))
    parser.add_argument("output", help="directory to create (must not exist)")
    parser.add_argument("--mask_token", default="<|mask|>", help="MLM mask token, added when missing")
    parser.add_argument("--pad_token", default="<|pad|>", help="pad token when the source has none or pads with eos")
    parser.add_argument("--dtype", default="float32", choices=DTYPES, help="dtype of the saved weights")
    parser.add_argument(
        "--max_position_embeddings",
        type=int,
        dest="max_positions",
        help="context of the converted model when shorter than the source's (at most a sliding "
        "window, so that it does not bind)",
    )
    return parser


@cli.exit_on_write_failure
def main(argv: list[str] | None = None) -> None:
    args = make_parser().parse_args(argv)
    with cli.bad_input_exits():
        out = convert(args.source, args.output, args.mask_token, args.pad_token, args.dtype, args.max_positions)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
