"""Model cards, result cards and Hub publishing."""

from core.threads import use_thread_policy

use_thread_policy()  # the CPU thread policy, before anything here loads torch
