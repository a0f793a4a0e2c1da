"""The CPU thread policy every process of the project starts with (docs/benchmarks.md, "Threads on a shared CPU").

OpenMP's threads (torch's intra-op pool on CPU) by default spin while they wait for each other; on a machine shared
with other work (a laptop, a CI runner, the grid's `--workers`, a study's processes) they spin for a core someone else
holds, and a run took 2.9-3.7x its alone time beside two busy processes where a fair share is 2x (issue 55). Under
`POLICY` they spin briefly, then sleep. Measured by `bench/bench_contention.py`.
"""

import os

# libgomp (torch's OpenMP on Linux) reads it once, when torch loads its runtime: a waiting thread spins 10,000 turns
# (its default: 300,000) before it sleeps. Chosen over OMP_WAIT_POLICY=PASSIVE, which sleeps at once and cost an idle
# fine-tuning run 37% in the bench (docs/benchmarks.md); other OpenMP runtimes ignore the variable.
POLICY = {"GOMP_SPINCOUNT": "10000"}


def use_thread_policy() -> None:
    """Set each variable of `POLICY` in this process's environment unless it is already set (a variable the user set
    wins). Called first by every package that loads torch (their `__init__`), so it runs before torch loads; child
    processes inherit it with the environment."""
    for name, value in POLICY.items():
        os.environ.setdefault(name, value)
