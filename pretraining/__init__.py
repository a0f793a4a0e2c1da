"""The pretraining library: corpus, tokenizers and packed blocks, the CLM / MLM collators, run settings and their
checks, the trainer, provenance, FLOPs and the held-out loss; one training loop for CLM, MLM, PFS and CPT."""

from core.threads import use_thread_policy

use_thread_policy()  # the CPU thread policy, before anything here loads torch
