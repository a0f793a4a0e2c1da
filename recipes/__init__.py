"""Recipes: what the study chooses and how it is launched: the run manifest and configs, the accelerate configs, the
entry points (`pretrain.py`, `cpt.py`), the study driver, the paper-scale plan, launch scripts and data preparation."""

from core.threads import use_thread_policy

use_thread_policy()  # the CPU thread policy, before anything here loads torch
