"""The benchmarks (docs/benchmarks.md), each a command: `python -m bench.bench_model`, ..."""

from core.threads import use_thread_policy

use_thread_policy()  # the CPU thread policy, before anything here loads torch
