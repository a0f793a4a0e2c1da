"""EuroBERT-architecture models for the MLM-vs-CLM study.

Importing this package registers every class with the transformers Auto classes (in-process use) and marks them
for `auto_map`, so `save_pretrained` writes the modeling code beside the weights and any process can load a
checkpoint with `AutoModel*.from_pretrained(path, trust_remote_code=True)`, without this project installed.
"""

from pathlib import Path

import transformers
from transformers import AutoConfig

from . import modeling_eurobert as _modeling
from .configuration_eurobert import EuroBertClmMlmConfig
from .modeling_eurobert import (
    AUTO_MAP,
    EuroBertForCausalLM,
    EuroBertForMaskedLM,
    EuroBertForQuestionAnswering,
    EuroBertForSequenceClassification,
    EuroBertForTokenClassification,
    EuroBertModel,
    EuroBertPreTrainedModel,
    pool,
)

PRESETS_DIR = Path(__file__).parent / "presets"
PRESETS = ("tiny", "small", "210m", "610m", "1b")

# One list of heads: the `auto_map` every checkpoint carries ("AutoModelForMaskedLM": "modeling_eurobert.X").
AUTO_CLASSES = {
    getattr(transformers, auto_name): getattr(_modeling, target.split(".")[-1])
    for auto_name, target in AUTO_MAP.items() if auto_name != "AutoConfig"
}

AutoConfig.register(EuroBertClmMlmConfig.model_type, EuroBertClmMlmConfig, exist_ok=True)
EuroBertClmMlmConfig.register_for_auto_class()
for _auto_class, _model_class in AUTO_CLASSES.items():
    _auto_class.register(EuroBertClmMlmConfig, _model_class, exist_ok=True)
    _model_class.register_for_auto_class(_auto_class.__name__)


def load_preset(name: str, **overrides) -> EuroBertClmMlmConfig:
    """Load a committed architecture preset (`tiny`, `210m`, `610m`, `1b`), optionally overriding fields.

    Raises:
        ValueError: unknown preset name.
    """
    if name not in PRESETS:
        raise ValueError(f"unknown model preset {name!r}; choose one of {', '.join(PRESETS)}")
    return EuroBertClmMlmConfig.from_pretrained(PRESETS_DIR / name, **overrides)


__all__ = [
    "EuroBertClmMlmConfig",
    "EuroBertPreTrainedModel",
    "EuroBertModel",
    "EuroBertForMaskedLM",
    "EuroBertForCausalLM",
    "EuroBertForSequenceClassification",
    "EuroBertForTokenClassification",
    "EuroBertForQuestionAnswering",
    "PRESETS",
    "load_preset",
    "pool",
]
