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
    EuroBertClmMlmForCausalLM,
    EuroBertClmMlmForMaskedLM,
    EuroBertClmMlmForQuestionAnswering,
    EuroBertClmMlmForSequenceClassification,
    EuroBertClmMlmForTokenClassification,
    EuroBertClmMlmModel,
    EuroBertClmMlmPreTrainedModel,
    pool,
)

ARCHITECTURES_DIR = Path(__file__).parent / "architectures"
ARCHITECTURES = ("tiny", "small", "210m", "610m", "1b")

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


def load_architecture(name: str, **overrides) -> EuroBertClmMlmConfig:
    """Load a committed architecture (`tiny`, `210m`, `610m`, `1b`), optionally overriding fields.

    Raises:
        ValueError: unknown architecture name.
    """
    if name not in ARCHITECTURES:
        raise ValueError(f"unknown architecture {name!r}; choose one of {', '.join(ARCHITECTURES)}")
    return EuroBertClmMlmConfig.from_pretrained(ARCHITECTURES_DIR / name, **overrides)


__all__ = [
    "EuroBertClmMlmConfig",
    "EuroBertClmMlmPreTrainedModel",
    "EuroBertClmMlmModel",
    "EuroBertClmMlmForMaskedLM",
    "EuroBertClmMlmForCausalLM",
    "EuroBertClmMlmForSequenceClassification",
    "EuroBertClmMlmForTokenClassification",
    "EuroBertClmMlmForQuestionAnswering",
    "ARCHITECTURES",
    "load_architecture",
    "pool",
]
