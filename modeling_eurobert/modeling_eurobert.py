"""EuroBERT-architecture transformer with a switchable attention pattern: one backbone for CLM and MLM.

Reference: Gisserot-Boukhlef, Boizard, Alves et al., "Should We Still Pretrain Encoders with Masked Language
Modeling?", ICLR 2026 (arXiv 2507.00994); architecture of EuroBERT (Boizard et al., 2025).

How it differs from Llama (`transformers.LlamaForCausalLM`):
- attention is causal or bidirectional, decided once in `EuroBertClmMlmModel.forward` from `config.is_causal` or a
  per-call `is_causal=` override; everything else (RMSNorm, RoPE rotate-half, SwiGLU, GQA, no biases, untied
  embeddings) is Llama's, with Llama's parameter names, so a CLM checkpoint loads into `EuroBertClmMlmForMaskedLM`
  unchanged and converted Llama decoders need no key mapping;
- for converted decoders only, off in the study's models: `qkv_bias` (Qwen2's q/k/v biases) and `qk_norm` (Qwen3's
  per-head q/k RMSNorm, parameters `self_attn.q_norm`/`k_norm`), with the source's names again;
- the embedding has no `padding_idx` (a pad id equal to eos would freeze the document separator);
- LM heads project only the positions that carry a label (`labels != -100`) when a loss is asked for: same loss
  and gradients as full-vocabulary logits, far less compute at 20-50% masking; with `mlm_positions` (a fixed
  number of positions per row, from the pretraining collator) and in causal mode the head has static shapes, so
  it compiles and needs no host sync;
- task heads: sequence classification (bos/mean/late pooling, EuroBERT's dense+GELU head), token classification
  and extractive QA (start/end logits).
No KV cache: the study trains and fine-tunes; text generation is out of scope.

This file is shipped beside every checkpoint as remote code, so it imports only stable public transformers pieces.
"""

import copy
from collections.abc import Callable

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.activations import ACT2FN
from transformers.masking_utils import create_bidirectional_mask, create_causal_mask
from transformers.modeling_outputs import (
    BaseModelOutput,
    CausalLMOutput,
    MaskedLMOutput,
    QuestionAnsweringModelOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from .configuration_eurobert import EuroBertClmMlmConfig


class EuroBertClmMlmRMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        # Normalise in float32: bf16 loses too much precision in the mean of squares.
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class EuroBertClmMlmRotaryEmbedding(nn.Module):
    def __init__(self, config: EuroBertClmMlmConfig):
        super().__init__()
        self.config = config
        self.rope_type = config.rope_parameters.get("rope_type", "default")
        init_fn = (
            self.compute_default_rope_parameters if self.rope_type == "default" else ROPE_INIT_FUNCTIONS[self.rope_type]
        )
        inv_freq, self.attention_scaling = init_fn(config)
        self.inv_freq = nn.Buffer(inv_freq, persistent=False)
        self.original_inv_freq = nn.Buffer(inv_freq.clone(), persistent=False)

    @staticmethod
    def compute_default_rope_parameters(
        config: EuroBertClmMlmConfig, device=None, **kwargs
    ) -> tuple[torch.Tensor, float]:
        base, dim = config.rope_parameters["rope_theta"], config.head_dim
        exponents = torch.arange(0, dim, 2, dtype=torch.int64).to(device=device, dtype=torch.float) / dim
        inv_freq = 1.0 / (base**exponents)
        return inv_freq, 1.0

    @torch.no_grad()
    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # Angles in float32 even under autocast: bf16 positions above 256 collide.
        freqs = position_ids[..., None].float() * self.inv_freq.to(device=x.device, dtype=torch.float)  # (B, T, hd/2)
        emb = torch.cat((freqs, freqs), dim=-1)  # rotate-half layout
        return (emb.cos() * self.attention_scaling).to(x.dtype), (emb.sin() * self.attention_scaling).to(x.dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin):
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # broadcast over heads
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def repeat_kv(hidden_states: torch.Tensor, n_rep: int) -> torch.Tensor:
    """(B, kv_heads, T, hd) -> (B, kv_heads * n_rep, T, hd), as torch.repeat_interleave on dim 1."""
    batch, kv_heads, seq_len, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None].expand(batch, kv_heads, n_rep, seq_len, head_dim)
    return hidden_states.reshape(batch, kv_heads * n_rep, seq_len, head_dim)


def eager_attention_forward(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    key, value = repeat_kv(key, module.num_key_value_groups), repeat_kv(value, module.num_key_value_groups)
    attn_weights = torch.matmul(query, key.transpose(2, 3)) * scaling  # (B, nh, T, T)
    if attention_mask is not None:
        attn_weights = attn_weights + attention_mask
    attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)
    attn_weights = nn.functional.dropout(attn_weights, p=dropout, training=module.training)
    attn_output = torch.matmul(attn_weights, value).transpose(1, 2).contiguous()  # (B, T, nh, hd)
    return attn_output, attn_weights


class EuroBertClmMlmAttention(nn.Module):
    def __init__(self, config: EuroBertClmMlmConfig, layer_idx: int):
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.head_dim = config.head_dim
        self.num_key_value_groups = config.num_attention_heads // config.num_key_value_heads
        self.scaling = self.head_dim**-0.5
        self.is_causal = config.is_causal  # default only: the per-call `is_causal` kwarg wins
        bias = config.attention_bias
        qkv_bias = bias or config.qkv_bias  # Qwen2: biases on q, k, v but not o
        self.q_proj = nn.Linear(config.hidden_size, config.num_attention_heads * self.head_dim, bias=qkv_bias)
        self.k_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * self.head_dim, bias=qkv_bias)
        self.v_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * self.head_dim, bias=qkv_bias)
        self.o_proj = nn.Linear(config.num_attention_heads * self.head_dim, config.hidden_size, bias=bias)
        if config.qk_norm:  # Qwen3: per-head RMSNorm of queries and keys, before RoPE
            self.q_norm = EuroBertClmMlmRMSNorm(self.head_dim, eps=config.rms_norm_eps)
            self.k_norm = EuroBertClmMlmRMSNorm(self.head_dim, eps=config.rms_norm_eps)

    def forward(self, hidden_states, position_embeddings, attention_mask, is_causal: bool, **kwargs):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        query = self.q_proj(hidden_states).view(hidden_shape)  # (B, T, nh, hd)
        key = self.k_proj(hidden_states).view(hidden_shape)  # (B, T, nkv, hd)
        if self.config.qk_norm:
            query, key = self.q_norm(query), self.k_norm(key)
        query, key = query.transpose(1, 2), key.transpose(1, 2)  # (B, nh, T, hd), (B, nkv, T, hd)
        value = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        query, key = apply_rotary_pos_emb(query, key, *position_embeddings)

        attention_interface: Callable = ALL_ATTENTION_FUNCTIONS.get_interface(
            self.config._attn_implementation, eager_attention_forward
        )
        attn_output, attn_weights = attention_interface(
            self,
            query,
            key,
            value,
            attention_mask,
            dropout=self.config.attention_dropout if self.training else 0.0,
            scaling=self.scaling,
            is_causal=is_causal,
            **kwargs,
        )
        return self.o_proj(attn_output.reshape(*input_shape, -1).contiguous()), attn_weights


class EuroBertClmMlmMLP(nn.Module):
    def __init__(self, config: EuroBertClmMlmConfig):
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=config.mlp_bias)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=config.mlp_bias)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=config.mlp_bias)
        self.act_fn = ACT2FN[config.hidden_act]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))  # SwiGLU


class EuroBertClmMlmDecoderLayer(nn.Module):
    def __init__(self, config: EuroBertClmMlmConfig, layer_idx: int):
        super().__init__()
        self.self_attn = EuroBertClmMlmAttention(config, layer_idx)
        self.mlp = EuroBertClmMlmMLP(config)
        self.input_layernorm = EuroBertClmMlmRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = EuroBertClmMlmRMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(self, hidden_states, position_embeddings, attention_mask, is_causal: bool, **kwargs):
        attn_output, _ = self.self_attn(
            self.input_layernorm(hidden_states), position_embeddings, attention_mask, is_causal, **kwargs
        )
        hidden_states = hidden_states + attn_output
        return hidden_states + self.mlp(self.post_attention_layernorm(hidden_states))


class EuroBertClmMlmPreTrainedModel(PreTrainedModel):
    config_class = EuroBertClmMlmConfig
    config: EuroBertClmMlmConfig
    base_model_prefix = "model"
    supports_gradient_checkpointing = True
    _no_split_modules = ["EuroBertClmMlmDecoderLayer"]
    _supports_sdpa = True
    _supports_flash_attn = True
    _supports_flex_attn = False
    _supports_attention_backend = True
    # Task heads average their loss themselves; only the LM heads take the Trainer's `num_items_in_batch`.
    accepts_loss_kwargs = False
    # The backbone and the task heads load from LM checkpoints (every pretraining run): their LM head is not an
    # unexpected weight to report (the LM heads themselves load it as usual).
    _keys_to_ignore_on_load_unexpected = [r"^lm_head\."]

    def save_pretrained(self, save_directory, *args, **kwargs):
        # transformers writes only the saved class into `auto_map`; list every head so one checkpoint serves
        # AutoModel, AutoModelForMaskedLM, ..., AutoModelForQuestionAnswering alike.
        if getattr(type(self), "_auto_class", None) is not None:
            self.config.auto_map = {**AUTO_MAP, **(getattr(self.config, "auto_map", None) or {})}
        return super().save_pretrained(save_directory, *args, **kwargs)


class EuroBertClmMlmModel(EuroBertClmMlmPreTrainedModel):
    def __init__(self, config: EuroBertClmMlmConfig):
        super().__init__(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)  # no padding_idx, on purpose
        self.layers = nn.ModuleList([EuroBertClmMlmDecoderLayer(config, i) for i in range(config.num_hidden_layers)])
        self.norm = EuroBertClmMlmRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.rotary_emb = EuroBertClmMlmRotaryEmbedding(config)
        self.gradient_checkpointing = False
        self.post_init()

    def get_input_embeddings(self):
        return self.embed_tokens

    def set_input_embeddings(self, value):
        self.embed_tokens = value

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        is_causal: bool | None = None,
        **kwargs,
    ) -> BaseModelOutput:
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("pass exactly one of input_ids or inputs_embeds")
        if inputs_embeds is None:
            inputs_embeds = self.embed_tokens(input_ids)
        if position_ids is None:
            position_ids = torch.arange(inputs_embeds.shape[1], device=inputs_embeds.device).unsqueeze(0)

        # The one place where CLM and MLM differ: the attention pattern.
        is_causal = self.config.is_causal if is_causal is None else is_causal
        mask_kwargs = {"config": self.config, "inputs_embeds": inputs_embeds, "attention_mask": attention_mask}
        if is_causal:
            if not self.config.is_causal:  # transformers builds a bidirectional mask for a config.is_causal=False
                mask_kwargs["config"] = copy.copy(self.config)
                mask_kwargs["config"].is_causal = True
            mask = create_causal_mask(**mask_kwargs, cache=None, position_ids=position_ids)
        else:
            mask = create_bidirectional_mask(**mask_kwargs)

        hidden_states = inputs_embeds
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        for layer in self.layers:
            if self.gradient_checkpointing and self.training:
                hidden_states = self._gradient_checkpointing_func(
                    layer.__call__, hidden_states, position_embeddings, mask, is_causal
                )
            else:
                hidden_states = layer(hidden_states, position_embeddings, mask, is_causal)
        return BaseModelOutput(last_hidden_state=self.norm(hidden_states))


def labelled_positions_loss(
    hidden_states,
    lm_head,
    labels,
    shift: bool,
    num_items_in_batch=None,
    mlm_positions=None,
    all_positions: bool = False,
):
    """Cross-entropy of the LM head evaluated only where `labels != -100`.

    Equal to full-vocabulary logits + `ForMaskedLMLoss`/`ForCausalLMLoss` (same reduction, same gradients), but the
    (tokens x vocab) projection runs on the labelled tokens only: 40% of them under MLM 40%. The labelled rows are
    found in one of three ways, all giving the same loss:
    - `mlm_positions` (B, K), padded with -1: every labelled position of each row (after the shift), a shape fixed
      for the whole run, so no host sync and the head compiles;
    - `all_positions`: project every position and let the loss skip -100 (causal steps on packed blocks, where
      every position but the last carries a label: static shape, 1/T of the head wasted);
    - otherwise `labels != -100` selects them exactly, a data-dependent shape (one device sync per call).
    The sum is divided by `num_items_in_batch` (the Trainer's count over the whole accumulated batch) if given,
    else by this batch's labelled tokens.
    """
    if shift:  # CLM: position t predicts token t + 1, the last position nothing (as transformers' ForCausalLMLoss)
        labels = nn.functional.pad(labels[:, 1:], (0, 1), value=-100)
    labels = labels.to(hidden_states.device)
    hidden_flat = hidden_states.reshape(-1, hidden_states.shape[-1])  # (B*T, H)
    if mlm_positions is not None:
        mlm_positions = mlm_positions.to(hidden_states.device)
        row_start = torch.arange(labels.shape[0], device=labels.device).unsqueeze(1) * labels.shape[1]
        flat = (row_start + mlm_positions.clamp(min=0)).reshape(-1)  # (B*K,) padding points at each row's start
        hidden = hidden_flat.index_select(0, flat)
        targets = labels.reshape(-1).index_select(0, flat).masked_fill(mlm_positions.reshape(-1) < 0, -100)
    elif all_positions:
        hidden, targets = hidden_flat, labels.reshape(-1)
    else:
        targets = labels.reshape(-1)
        keep = targets != -100
        hidden, targets = hidden_flat[keep], targets[keep]
    logits = lm_head(hidden).float()  # (rows, V)
    loss = nn.functional.cross_entropy(logits, targets, ignore_index=-100, reduction="sum")
    denominator = num_items_in_batch if num_items_in_batch is not None else (targets != -100).sum()
    if torch.is_tensor(denominator):
        denominator = denominator.to(loss.device)
    return loss / denominator


class EuroBertClmMlmForMaskedLM(EuroBertClmMlmPreTrainedModel):
    """LM head over the shared backbone: MLM by default, CLM when called with `is_causal=True` (causal attention and
    next-token labels: `labels` are the input ids, shifted here as in `LlamaForCausalLM`), so one model object
    trains both phases of a PFS run. With `labels`, only labelled positions are projected and `logits` is None
    (memory); without labels, full logits are returned. Loads CLM checkpoints unchanged (same keys).

    `mlm_positions` (B, K) long, optional with `labels`: the positions of every label of each row, padded with -1 to
    a K fixed for the run (the pretraining collator's), so the head has static shapes. Causal calls without it
    project every position (static too; in packed blocks all but the last are labelled)."""

    _tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"}
    causal = False  # the attention this head trains with when a call does not say
    accepts_loss_kwargs = True

    def __init__(self, config: EuroBertClmMlmConfig):
        # The one place the saved attention pattern is decided: the LM head records the pattern it trains with, so
        # config.json says what was trained (a CLM checkpoint loaded here and saved becomes a bidirectional MLM
        # checkpoint). On a copy: the caller's config (maybe shared with another model) is never changed.
        config = copy.deepcopy(config)
        config.is_causal = self.causal
        super().__init__(config)
        self.model = EuroBertClmMlmModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, new_embeddings):
        self.lm_head = new_embeddings

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        position_ids=None,
        inputs_embeds=None,
        labels=None,
        is_causal: bool | None = None,
        num_items_in_batch=None,
        mlm_positions=None,
        **kwargs,
    ):
        if is_causal is None:
            is_causal = self.causal
        hidden = self.model(
            input_ids, attention_mask, position_ids, inputs_embeds, is_causal=is_causal
        ).last_hidden_state
        output_class = CausalLMOutput if self.causal else MaskedLMOutput
        if labels is None:
            return output_class(logits=self.lm_head(hidden))
        # causal attention means next-token prediction: the labels are shifted here, and only here
        loss = labelled_positions_loss(
            hidden, self.lm_head, labels, is_causal, num_items_in_batch, mlm_positions, all_positions=is_causal
        )
        return output_class(loss=loss, logits=None)


class EuroBertClmMlmForCausalLM(EuroBertClmMlmForMaskedLM):
    """CLM head: causal attention and next-token labels unless a call says otherwise, whatever `config.is_causal`
    says. Same parameters as `EuroBertClmMlmForMaskedLM`; `labels` are the input ids (shifted inside, as in
    `LlamaForCausalLM`)."""

    causal = True


def pool(hidden_states: torch.Tensor, attention_mask: torch.Tensor | None, method: str) -> torch.Tensor:
    """Pool (B, T, H) into (B, H): `bos` takes the first token, `mean` the masked mean. Shared by the sequence
    classifier and the sentence embedding."""
    if method == "bos":
        return hidden_states[:, 0]
    if method == "mean":
        if attention_mask is None:
            return hidden_states.mean(dim=1)
        weights = attention_mask.to(hidden_states.dtype).unsqueeze(-1)
        return (hidden_states * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1)
    raise ValueError(f"unknown pooling {method!r}; use 'bos' or 'mean'")


class EuroBertClmMlmForSequenceClassification(EuroBertClmMlmPreTrainedModel):
    def __init__(self, config: EuroBertClmMlmConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.model = EuroBertClmMlmModel(config)
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = nn.GELU()
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        position_ids=None,
        inputs_embeds=None,
        labels=None,
        is_causal: bool | None = None,
        **kwargs,
    ):
        hidden = self.model(
            input_ids, attention_mask, position_ids, inputs_embeds, is_causal=is_causal
        ).last_hidden_state
        if self.config.classifier_pooling == "late":  # classify every token, then average the logits
            logits = pool(self.classifier(self.activation(self.dense(hidden))), attention_mask, "mean")
        else:
            pooled = pool(hidden, attention_mask, self.config.classifier_pooling)
            logits = self.classifier(self.activation(self.dense(pooled)))
        loss = None
        if labels is not None:
            loss = self.loss_function(labels=labels, pooled_logits=logits, config=self.config)
        return SequenceClassifierOutput(loss=loss, logits=logits)


class EuroBertClmMlmForTokenClassification(EuroBertClmMlmPreTrainedModel):
    def __init__(self, config: EuroBertClmMlmConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.model = EuroBertClmMlmModel(config)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        position_ids=None,
        inputs_embeds=None,
        labels=None,
        is_causal: bool | None = None,
        **kwargs,
    ):
        hidden = self.model(
            input_ids, attention_mask, position_ids, inputs_embeds, is_causal=is_causal
        ).last_hidden_state
        logits = self.classifier(hidden)
        loss = None
        if labels is not None:
            loss = nn.functional.cross_entropy(
                logits.view(-1, self.num_labels).float(), labels.view(-1).to(logits.device)
            )
        return TokenClassifierOutput(loss=loss, logits=logits)


class EuroBertClmMlmForQuestionAnswering(EuroBertClmMlmPreTrainedModel):
    """Extractive QA as two-label token classification: a start and an end logit per token (as in the paper)."""

    def __init__(self, config: EuroBertClmMlmConfig):
        super().__init__(config)
        self.model = EuroBertClmMlmModel(config)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        self.post_init()

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        position_ids=None,
        inputs_embeds=None,
        start_positions=None,
        end_positions=None,
        is_causal: bool | None = None,
        **kwargs,
    ):
        hidden = self.model(
            input_ids, attention_mask, position_ids, inputs_embeds, is_causal=is_causal
        ).last_hidden_state
        start_logits, end_logits = self.qa_outputs(hidden).float().unbind(dim=-1)  # (B, T) each
        loss = None
        if start_positions is not None and end_positions is not None:
            loss = self.loss_function(start_logits, end_logits, start_positions, end_positions)
        return QuestionAnsweringModelOutput(loss=loss, start_logits=start_logits, end_logits=end_logits)


AUTO_MAP = {
    "AutoConfig": "configuration_eurobert.EuroBertClmMlmConfig",
    "AutoModel": "modeling_eurobert.EuroBertClmMlmModel",
    "AutoModelForMaskedLM": "modeling_eurobert.EuroBertClmMlmForMaskedLM",
    "AutoModelForCausalLM": "modeling_eurobert.EuroBertClmMlmForCausalLM",
    "AutoModelForSequenceClassification": "modeling_eurobert.EuroBertClmMlmForSequenceClassification",
    "AutoModelForTokenClassification": "modeling_eurobert.EuroBertClmMlmForTokenClassification",
    "AutoModelForQuestionAnswering": "modeling_eurobert.EuroBertClmMlmForQuestionAnswering",
}

__all__ = [
    "EuroBertClmMlmPreTrainedModel",
    "EuroBertClmMlmModel",
    "EuroBertClmMlmForMaskedLM",
    "EuroBertClmMlmForCausalLM",
    "EuroBertClmMlmForSequenceClassification",
    "EuroBertClmMlmForTokenClassification",
    "EuroBertClmMlmForQuestionAnswering",
    "pool",
]
