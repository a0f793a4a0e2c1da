"""The attention pattern ("causal" or "bidirectional") a fine-tuning run uses: known where the checkpoint records it,
measured where it does not.

- Our checkpoints (`eurobert_clm_mlm`: the study's models, converted decoders, their CPT results, native exports of
  them read with remote code) attend as `config.is_causal` says (an LM head as its class says): `recorded`.
- Any other transformers model (BERT, RoBERTa, a raw Llama or Qwen decoder, native EuroBERT) is probed (`probe`): a
  causal model's outputs before the last position do not move when only the last token changes.
"""

from __future__ import annotations

import os

import torch
from transformers import AutoConfig

RECORDING_TYPES = ("eurobert_clm_mlm",)  # model types whose forward reads config.is_causal (modeling_eurobert)
PROBE_LENGTH = 6
_RESOLVED: dict = {}


def recorded(model) -> str | None:
    """The pattern a model of ours attends with (an LM head: its class's `causal`), else None (then `probe`)."""
    if model.config.model_type not in RECORDING_TYPES:
        return None
    return "causal" if getattr(model, "causal", model.config.is_causal) else "bidirectional"


@torch.no_grad()
def probe(model) -> str:
    """How `model` really attends: "causal" when no earlier output moves between two inputs of mid-vocabulary tokens
    differing in their last token only, whose input embeddings differ (`convert` adds equal rows)."""
    embeddings = model.get_input_embeddings().weight
    vocab = embeddings.shape[0]
    candidates = torch.linspace(vocab // 4, vocab - 1 - vocab // 4, 4 * PROBE_LENGTH).long().unique().tolist()
    ids, others = candidates[:PROBE_LENGTH], candidates[PROBE_LENGTH:]
    last = next((i for i in others if not torch.equal(embeddings[i], embeddings[ids[-1]])), None)
    if last is None:
        raise ValueError(
            f"cannot probe the attention of {model.config.model_type}: its input embeddings of tokens "
            f"{candidates} are identical; pass --attention checkpoint with a model that records it"
        )
    batch = torch.tensor([ids, ids[:-1] + [last]], device=embeddings.device)
    base = getattr(model, "base_model", model)
    training = base.training
    base.eval()
    try:
        hidden = base(input_ids=batch, attention_mask=torch.ones_like(batch)).last_hidden_state.float()
    finally:
        base.train(training)
    return "causal" if torch.allclose(hidden[0, :-1], hidden[1, :-1], atol=1e-4) else "bidirectional"


def pattern(model) -> str:
    """ "causal" or "bidirectional": how `model` (any transformers model) attends, recorded or else probed."""
    return recorded(model) or probe(model)


def set_attention(model, attention: str) -> None:
    """Give a loaded model the fine-tuning attention pattern (`config.is_causal`) and check it attends so (else
    ValueError); `checkpoint` keeps the model as it is, except that one of ours recording a causal
    pretraining (`pretraining_attention`, beside native EuroBERT's `is_causal: false`) attends causally."""
    if attention == "checkpoint":
        if (
            model.config.model_type in RECORDING_TYPES
            and getattr(model.config, "pretraining_attention", None) == "causal"
        ):
            model.config.is_causal = True
        return
    model.config.is_causal = attention == "causal"
    used = pattern(model)
    if used != attention:
        raise ValueError(
            f"--attention {attention}: {model.config.model_type} models attend {used}ly whatever "
            f"config.is_causal says; use --attention {used} (or checkpoint)"
        )


def resolved_attention(model_path: str | os.PathLike, attention: str) -> str:
    """The pattern ("bidirectional" or "causal") a run with `--attention attention` uses on `model_path`, from
    `set_attention` (and its ValueError) on a one-layer random copy of the model (no weights read)."""
    key = (str(model_path), attention)
    if key not in _RESOLVED:
        from transformers import AutoModel

        config = AutoConfig.from_pretrained(model_path, trust_remote_code=True)
        for name in ("num_hidden_layers", "n_layers", "num_layers"):
            if isinstance(getattr(config, name, None), int):
                setattr(config, name, 1)
        if isinstance(getattr(config, "layer_types", None), list):
            config.layer_types = config.layer_types[:1]
        model = AutoModel.from_config(config, trust_remote_code=True)
        set_attention(model, attention)
        _RESOLVED[key] = pattern(model)
    return _RESOLVED[key]
