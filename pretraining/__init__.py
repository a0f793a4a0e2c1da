"""The pretraining library: corpus, tokenizers and packed blocks, the CLM / MLM collators, run settings and their
checks, the trainer, provenance, FLOPs and the held-out loss; one training loop for CLM, MLM, PFS and CPT."""
