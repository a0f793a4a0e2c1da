"""Configuration of the EuroBERT-architecture model used for both objectives of the MLM-vs-CLM study.

Field names are Llama's, so weights map one-to-one onto `LlamaForCausalLM` and transformers' native
`EuroBertForMaskedLM` (`export_native.py`). The only objective-dependent field is `is_causal`: CLM checkpoints set it
to True, MLM checkpoints to False, and any forward call may override it.
"""

from huggingface_hub.dataclasses import strict
from transformers import PreTrainedConfig

POOLINGS = ("bos", "mean", "late")
DECODER_SWITCHES = ("qkv_bias", "qk_norm")  # converted decoders only; written to config.json only when on


@strict
class EuroBertClmMlmConfig(PreTrainedConfig):
    r"""
    Args:
        is_causal (`bool`, defaults to `False`):
            Default attention pattern: causal (CLM) or bidirectional (MLM, fine-tuning). Forward calls can override it.
        mask_token_id (`int`, defaults to 128002):
            Id of `<|mask|>`, the token that replaces masked positions under MLM.
        classifier_pooling (`str`, defaults to `"late"`):
            Sequence-classification pooling: `bos` (first token), `mean` (masked mean of hidden states) or `late`
            (classify every token, then average the logits), as in EuroBERT.
        rope_parameters (`dict`, *optional*):
            RoPE settings; `{"rope_type": "default", "rope_theta": 10000.0}` for the study. `linear` and `llama3`
            scaling are also supported so converted Llama-3.x decoders keep their positions.
        qkv_bias (`bool`, defaults to `False`):
            Biases on the query, key and value projections only, as Qwen2/Qwen2.5 (`attention_bias` puts them on
            q, k, v and o, as Llama). For converted decoders; the study's models have none.
        qk_norm (`bool`, defaults to `False`):
            RMSNorm over each head's queries and keys before RoPE (`self_attn.q_norm`, `self_attn.k_norm`), as Qwen3.
            For converted decoders; the study's models have none.
    """

    model_type = "eurobert_clm_mlm"
    keys_to_ignore_at_inference = ["past_key_values"]

    vocab_size: int = 128256
    hidden_size: int = 768
    intermediate_size: int = 3072
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    hidden_act: str = "silu"
    max_position_embeddings: int = 2048
    initializer_range: float = 0.02
    rms_norm_eps: float = 1e-5
    rope_parameters: dict | None = None
    attention_bias: bool = False
    attention_dropout: float = 0.0
    mlp_bias: bool = False
    tie_word_embeddings: bool = False
    use_cache: bool = False
    pad_token_id: int | None = None
    bos_token_id: int | None = 128000
    eos_token_id: int | list[int] | None = 128001
    mask_token_id: int | None = 128002
    is_causal: bool = False
    classifier_pooling: str = "late"
    qkv_bias: bool = False
    qk_norm: bool = False

    @classmethod
    def get_config_dict(cls, *args, **kwargs):
        # A checkpoint that transformers' native EuroBERT can hold is saved as model_type "eurobert" (plain Auto
        # classes load it natively, bidirectional; `auto_map` names this class for trust_remote_code), its causal
        # pretraining recorded as `pretraining_attention` beside `is_causal: false`. Read as ours, it attends as the
        # plain load does (one checkpoint, one default attention, with or without remote code: issue 46 item 10);
        # the record stays on the config (`pretraining_attention`), for `AutoModelForCausalLM`, `is_causal=True`
        # or `evaluation.run --attention checkpoint` to give the causal pattern it was pretrained with.
        # A causal converted Qwen2/Qwen3 decoder is saved as transformers' `qwen2` / `qwen3` (plain loads are
        # transformers' Qwen classes, causal, identical): read as ours the same way.
        config_dict, kwargs = super().get_config_dict(*args, **kwargs)
        auto_config = (config_dict.get("auto_map") or {}).get("AutoConfig", "")
        if config_dict.get("model_type") != cls.model_type and auto_config.endswith(cls.__name__):
            config_dict = {**config_dict, "model_type": cls.model_type}
        return config_dict, kwargs

    def __post_init__(self, **kwargs):
        # Derived defaults live here and nowhere else.
        if self.num_key_value_heads is None:
            self.num_key_value_heads = self.num_attention_heads
        if self.head_dim is None and self.num_attention_heads and self.hidden_size % self.num_attention_heads == 0:
            self.head_dim = self.hidden_size // self.num_attention_heads
        if self.rope_parameters is None:
            self.rope_parameters = {"rope_type": "default", "rope_theta": 10000.0}
        super().__post_init__(**kwargs)

    def to_diff_dict(self) -> dict:
        # The study's config.json files stay as they were: a decoder switch that is off is not written. The record of
        # a loaded CLM checkpoint's pretraining is not passed on to what is saved from it (a CPT run, a fine-tuned
        # model): `export_native.make_plain_loadable` writes it for the causal checkpoints it rewrites.
        return {
            key: value
            for key, value in super().to_diff_dict().items()
            if (key not in DECODER_SWITCHES or value) and key != "pretraining_attention"
        }

    def validate_architecture(self):
        """Raise a one-line error on head counts that cannot form a valid attention layer."""
        if self.hidden_size % self.num_attention_heads != 0:
            raise ValueError(
                f"hidden_size ({self.hidden_size}) is not divisible by num_attention_heads "
                f"({self.num_attention_heads}); pick a head count that divides it"
            )
        if self.num_attention_heads % self.num_key_value_heads != 0:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) is not a multiple of num_key_value_heads "
                f"({self.num_key_value_heads}); grouped-query attention needs whole groups"
            )
        if self.classifier_pooling not in POOLINGS:
            raise ValueError(f"classifier_pooling={self.classifier_pooling!r} is not one of {POOLINGS}")
        rope_type = self.rope_parameters.get("rope_type", "default")
        if rope_type not in ("default", "linear", "llama3"):
            raise ValueError(f"rope_type {rope_type!r} is not supported; use 'default', 'linear' or 'llama3'")


__all__ = ["EuroBertClmMlmConfig"]
