"""Fine-tuning and evaluation of encoders on SC, TC, QA and IR with the paper's LR x seed grid."""
