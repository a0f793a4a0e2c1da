"""EuroBERT-architecture models for the MLM-vs-CLM study.

Importing this package is light (no torch), so the command lines check their input first. The classes load on first
use (`from modeling_eurobert import EuroBertClmMlmForMaskedLM`, `load_architecture`), which calls `register()`: they
are registered with the transformers Auto classes and marked for `auto_map`, so `save_pretrained` writes the modeling
code beside the weights and any process loads a checkpoint with `trust_remote_code=True`, without this project.
"""

import functools
from pathlib import Path

from core.threads import use_thread_policy

use_thread_policy()  # the CPU thread policy, before anything here loads torch

ARCHITECTURES_DIR = Path(__file__).parent / "architectures"
ARCHITECTURES = ("tiny", "small", "210m", "610m", "1b")


@functools.cache
def register() -> None:
    """Import the modeling code (torch) and register its classes with the transformers Auto classes, once: our
    checkpoints then load in-process with `AutoModel*.from_pretrained(path)`. Not in modeling_eurobert.py itself:
    that file is copied beside checkpoints, and registering from the remote copy would remap the in-process classes."""
    import transformers

    from . import modeling_eurobert as modeling
    from .configuration_eurobert import EuroBertClmMlmConfig

    transformers.AutoConfig.register(EuroBertClmMlmConfig.model_type, EuroBertClmMlmConfig, exist_ok=True)
    EuroBertClmMlmConfig.register_for_auto_class()
    for auto_name, target in modeling.AUTO_MAP.items():  # one list of heads: the `auto_map` every checkpoint carries
        if auto_name != "AutoConfig":
            model_class = getattr(modeling, target.split(".")[-1])
            getattr(transformers, auto_name).register(EuroBertClmMlmConfig, model_class, exist_ok=True)
            model_class.register_for_auto_class(auto_name)
    globals().update(
        EuroBertClmMlmConfig=EuroBertClmMlmConfig, **{name: getattr(modeling, name) for name in modeling.__all__}
    )


def __getattr__(name: str):
    """The classes and `pool` of `__all__`, loaded (and registered) on first use (PEP 562)."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    register()
    return globals()[name]


def load_architecture(name: str, **overrides):
    """A committed architecture (`ARCHITECTURES`) as an `EuroBertClmMlmConfig`, `overrides` applied; ValueError for
    an unknown name."""
    if name not in ARCHITECTURES:
        raise ValueError(f"unknown architecture {name!r}; choose one of {', '.join(ARCHITECTURES)}")
    from .configuration_eurobert import EuroBertClmMlmConfig

    register()  # so that AutoModel*.from_config of it builds our classes
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
    "register",
    "pool",
]
