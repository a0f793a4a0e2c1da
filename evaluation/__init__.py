"""Fine-tuning and evaluation of encoders on SC, TC, QA and IR with the paper's LR x seed grid."""

from core.threads import use_thread_policy

use_thread_policy()  # the CPU thread policy, before anything here loads torch
