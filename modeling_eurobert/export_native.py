"""Export a checkpoint of this project to transformers' native EuroBERT classes (no remote code):

    python -m modeling_eurobert.export_native out/610m-mlm40-42k out/610m-mlm40-42k-native
    python -m modeling_eurobert.export_native out/610m-clm-42k out/610m-clm-42k-native --bidirectional

The result loads with `AutoModel*.from_pretrained(path)` WITHOUT `trust_remote_code` into the native class of its
head (`NATIVE_CLASSES`), with the same weights and outputs: only config.json changes (model_type "eurobert", native
architectures, no auto_map, no `is_causal`); the tokenizer is copied when there is one. A causal checkpoint needs
`--bidirectional` (docs/models.md): its LM head becomes native `EuroBertForMaskedLM`, and config.json records
`"pretraining_attention": "causal"`. Refused in one line (`check_exportable`): the QA head, the converted-decoder
switches native EuroBERT lacks (`qkv_bias`, `qk_norm`, `mlp_bias` on an LM head), and pad_token_id equal to eos (the
native `padding_idx` row never gets a gradient: eos, the document separator, would stop learning). A checkpoint
without a pad id exports with `pad_token_id: null`, not the native default 128001, which is eos.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import transformers  # light until a class of it is reached: the input is checked before torch loads

import modeling_eurobert as ours  # light too: its classes load on first use
from core import artifacts, cli, model_folders
from core.model_folders import is_causal_checkpoint
from core.paths import missing_path

from .tokenizer_settings import configure_tokenizer

# Our head -> the native class with the same parameters and the same forward.
NATIVE_CLASSES = {
    "EuroBertClmMlmModel": "EuroBertModel",
    "EuroBertClmMlmForMaskedLM": "EuroBertForMaskedLM",
    "EuroBertClmMlmForSequenceClassification": "EuroBertForSequenceClassification",
    "EuroBertClmMlmForTokenClassification": "EuroBertForTokenClassification",
}
# Keys of our config that the native one must not carry.
DROPPED_KEYS = ("model_type", "architectures", "auto_map", "is_causal", "transformers_version")
CAUSAL_RECORD = {"pretraining_attention": "causal"}  # written into the config of a --bidirectional export
# The decoder switch -> the transformers config class (by name) that holds a causal converted decoder with it,
# identically (Qwen2: q/k/v biases and no o bias; Qwen3: q/k RMSNorm before RoPE); same parameter names as ours.
DECODER_TYPES = {"qkv_bias": "Qwen2Config", "qk_norm": "Qwen3Config"}


def _fields(config_class) -> set[str]:
    """The fields a transformers config class reads."""
    return {field.name for field in dataclasses.fields(config_class)}


class ExportError(ValueError):
    """A checkpoint that cannot be exported to the native classes; the message says why."""


def check_exportable(raw: dict, bidirectional: bool = False) -> str:
    """The name of the native class to export a checkpoint (`raw`: its config.json) to; a one-line ExportError for
    one the native classes cannot reproduce (a causal one unless `bidirectional`)."""
    if not is_ours(raw):
        expected = ours.EuroBertClmMlmConfig.model_type
        raise ExportError(f"model_type={raw.get('model_type')!r}; expected a {expected!r} checkpoint of this project")
    architecture = (raw.get("architectures") or ["EuroBertClmMlmModel"])[0]
    if architecture == "EuroBertClmMlmForQuestionAnswering":
        raise ExportError("native transformers EuroBERT has no question-answering head; export another head")
    if is_causal_checkpoint(raw) and not bidirectional:
        raise ExportError(
            f"{architecture} with is_causal={str(raw.get('is_causal')).lower()} is a causal checkpoint "
            "(CLM run or converted decoder) and native EuroBERT is bidirectional only; pass "
            "--bidirectional to export it as a bidirectional encoder on purpose (how the paper "
            "fine-tunes CLM checkpoints)"
        )
    if architecture not in NATIVE_CLASSES and architecture != "EuroBertClmMlmForCausalLM":
        raise ExportError(
            f"architecture {architecture!r} has no native EuroBERT class; supported: {', '.join(NATIVE_CLASSES)}"
        )
    if raw.get("qkv_bias") and not raw.get("attention_bias"):
        raise ExportError(
            "qkv_bias=true (q/k/v biases without an o bias, a converted Qwen2) has no native EuroBERT "
            "form: its attention_bias puts biases on q, k, v and o; use it with trust_remote_code"
        )
    if raw.get("qk_norm"):
        raise ExportError(
            "qk_norm=true (q/k RMSNorm, a converted Qwen3) has no native EuroBERT form; use it with trust_remote_code"
        )
    if raw.get("mlp_bias") and architecture in ("EuroBertClmMlmForMaskedLM", "EuroBertClmMlmForCausalLM"):
        raise ExportError(
            "mlp_bias=true gives native EuroBertForMaskedLM an LM-head bias this checkpoint lacks; "
            "export its backbone or a task head, or use it with trust_remote_code"
        )
    # Our config fields that native EuroBERT has no field for: each must hold our default, or native EuroBERT would
    # silently compute something else. `is_causal` is the exception (native EuroBERT is bidirectional only: above).
    defaults = ours.EuroBertClmMlmConfig().to_dict()
    ours_only = set(raw) & set(defaults) - _fields(transformers.EuroBertConfig) - {"is_causal", "model_type"}
    unknown = {key: raw[key] for key in sorted(ours_only) if raw[key] != defaults[key]}
    if unknown:
        raise ExportError(f"native EuroBERT has no setting for {unknown}; it would compute another model")
    eos = raw.get("eos_token_id")
    eos_ids = set(eos) if isinstance(eos, list) else {eos}
    if raw.get("pad_token_id") is not None and raw["pad_token_id"] in eos_ids:
        raise ExportError(
            f"pad_token_id={raw['pad_token_id']} equals eos; the native embedding freezes the pad row "
            "(padding_idx), so set a distinct pad_token_id in config.json first"
        )
    return NATIVE_CLASSES.get(architecture, "EuroBertForMaskedLM")  # the causal LM head: the same parameters


def is_ours(raw: dict) -> bool:
    """A config.json saved by this project: our model_type, or one transformers knows (native EuroBERT, Qwen2,
    Qwen3) with our remote code in `auto_map` (`make_plain_loadable`)."""
    if raw.get("model_type") == ours.EuroBertClmMlmConfig.model_type:
        return True
    auto_config = (raw.get("auto_map") or {}).get("AutoConfig", "")
    plain_types = {getattr(transformers, name).model_type for name in ("EuroBertConfig", *DECODER_TYPES.values())}
    return raw.get("model_type") in plain_types and auto_config.endswith(ours.EuroBertClmMlmConfig.__name__)


def make_plain_loadable(directory: str | Path) -> bool:
    """Give a checkpoint of ours the model_type transformers knows, when native EuroBERT can hold it (the rule is
    `check_exportable(bidirectional=True)`); returns True when config.json now names it, False when it keeps ours.

    config.json then says `model_type: "eurobert"` and keeps our `auto_map`: plain `AutoModel*.from_pretrained(dir)`,
    `AutoTokenizer` and `SentenceTransformer(dir)` load transformers' own EuroBERT classes with no flag and no
    prompt, bidirectional as the paper fine-tunes, with the same outputs; `trust_remote_code=True` still gives this
    project's classes (also the causal LM and QA heads). A causal checkpoint says `is_causal: false` (native EuroBERT
    would attend causally; our config class reads it alike, so the task heads load alike with and without remote
    code) and `"pretraining_attention": "causal"` (`evaluation.run --attention checkpoint`). Every field is written
    out, so no native default (pad 128001 = eos, 8192 positions) fills a gap.
    """
    raw = artifacts.read_json(Path(directory) / "config.json", "model config")
    try:
        check_exportable(raw, bidirectional=True)
    except ExportError:
        return _as_decoder_type(directory, raw)
    fields = ours.EuroBertClmMlmConfig.from_pretrained(directory).to_dict()
    causal = dict(is_causal=False, **CAUSAL_RECORD) if fields["is_causal"] else {}
    return _write_as(directory, raw, fields, transformers.EuroBertConfig, "native EuroBertConfig", causal)


def _as_decoder_type(directory: str | Path, raw: dict) -> bool:
    """`make_plain_loadable` for a causal converted Qwen2/Qwen3 decoder (its LM head or backbone), which native
    EuroBERT cannot hold: config.json names transformers' `qwen2` / `qwen3`, whose causal classes compute what ours
    do with the same parameter names (tested: identical hidden states and logits). Anything else (bidirectional,
    another head, both switches, Qwen2 with an o bias, an MLP bias) keeps our model_type (returns False)."""
    fields = ours.EuroBertClmMlmConfig.from_pretrained(directory).to_dict()
    switches = [switch for switch in DECODER_TYPES if fields.get(switch)]
    architecture = (raw.get("architectures") or ["EuroBertClmMlmModel"])[0]
    if (
        len(switches) != 1
        or not fields["is_causal"]
        or fields["mlp_bias"]
        or architecture not in ("EuroBertClmMlmForCausalLM", "EuroBertClmMlmModel")
        or switches == ["qkv_bias"]
        and fields["attention_bias"]
    ):
        return False
    config_class = getattr(transformers, DECODER_TYPES[switches[0]])
    return _write_as(directory, raw, fields, config_class, f"transformers' {config_class.__name__}")


def _write_as(
    directory: str | Path, raw: dict, fields: dict, config_class, what: str, record: dict | None = None
) -> bool:
    """Rewrite config.json with `config_class`'s model_type, our `auto_map` kept and `record` set, once `what` (that
    class) reads every field as written and has no sliding window."""
    path = Path(directory) / "config.json"
    fields = {
        **{key: value for key, value in fields.items() if key != "_name_or_path"},
        **{key: raw[key] for key in ("auto_map", "architectures") if key in raw},
        "model_type": config_class.model_type,
        **(record or {}),
    }
    plain = config_class(**{k: v for k, v in fields.items() if k != "model_type"}).to_dict()
    differ = sorted(key for key in _fields(config_class) & set(fields) if plain.get(key) != fields[key])
    if differ or plain.get("sliding_window") is not None:
        raise ExportError(f"{what} reads {differ or ['sliding_window']} differently from {path}")
    artifacts.write_json_atomic(path, fields)
    return True


def native_config(config: dict) -> transformers.EuroBertConfig:
    """Our config dict -> native EuroBertConfig. pad_token_id is passed even when None, so the native default
    (128001, eos) never applies; a causal checkpoint's config records `CAUSAL_RECORD`."""
    fields = {key: value for key, value in config.items() if key not in DROPPED_KEYS}
    fields["pad_token_id"] = config.get("pad_token_id")
    if is_causal_checkpoint(config):
        fields.update(CAUSAL_RECORD)
    return transformers.EuroBertConfig(**fields)


def export_native(checkpoint: str | Path, output: str | Path, bidirectional: bool = False) -> Path:
    """Write `checkpoint` (one of our heads, saved by this project) as a native transformers EuroBERT checkpoint at
    `output` (which must not exist), returned; `bidirectional`: export a causal checkpoint (module docstring)."""
    if not Path(checkpoint).is_dir():
        raise missing_path(checkpoint, "CHECKPOINT")
    checkpoint, output = Path(checkpoint), Path(output)
    if not (checkpoint / "config.json").is_file():
        raise ExportError(f"missing config.json in {checkpoint}; CHECKPOINT must be a saved model directory")
    if output.exists():
        raise ExportError(f"OUTPUT {output} already exists; remove it or choose another path")
    artifacts.check_output_dir(output, "OUTPUT")  # under a file or a folder this user cannot write to
    raw = artifacts.read_json(checkpoint / "config.json", "model config")
    model_folders.check_loadable(checkpoint)  # before the checks of its config: a LoRA checkpoint-N is no model
    native_class = getattr(transformers, check_exportable(raw, bidirectional))

    model, info = native_class.from_pretrained(
        checkpoint, config=native_config(raw), dtype="auto", output_loading_info=True
    )
    if any(info[key] for key in ("missing_keys", "unexpected_keys", "mismatched_keys")):
        raise ExportError(f"weights of {checkpoint} do not match {native_class.__name__}: {info}")
    with artifacts.atomic_directory(output, expected=None) as staging:  # never over what appeared meanwhile
        model.save_pretrained(staging)
        if any((checkpoint / name).is_file() for name in model_folders.TOKENIZER_FILES):
            tokenizer = transformers.AutoTokenizer.from_pretrained(checkpoint)
            configure_tokenizer(tokenizer, raw.get("max_position_embeddings")).save_pretrained(staging)
    return output


@cli.exit_on_write_failure
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", help="a checkpoint saved by this project")
    parser.add_argument("output", help="directory to create (must not exist)")
    parser.add_argument(
        "--bidirectional",
        action="store_true",
        help="export a causal checkpoint (CLM run, converted decoder) as a bidirectional encoder, "
        "on purpose: native EuroBERT is bidirectional only",
    )
    args = parser.parse_args(argv)
    with cli.bad_input_exits():
        out = export_native(args.checkpoint, args.output, args.bidirectional)
    note = ""
    if is_causal_checkpoint(artifacts.read_json(Path(args.checkpoint) / "config.json", "model config")):
        note = " (pretrained causally, exported bidirectional: config.json says pretraining_attention=causal)"
    print(f"wrote {out}{note}; load it with transformers' AutoModel* classes, no trust_remote_code needed")


if __name__ == "__main__":
    main()
