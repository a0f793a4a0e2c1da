"""The CPU thread policy every process of the project starts with (docs/benchmarks.md, "Threads on a shared CPU").

OpenMP's threads (torch's intra-op pool on CPU) by default spin while they wait for each other; on a machine shared
with other work (a laptop, a CI runner, the grid's `--workers`, a study's processes) they spin for a core someone else
holds, and a run took 2.9-3.7x its alone time beside two busy processes where a fair share is 2x (issue 55). Under
`POLICY` they sleep instead. Measured by `bench/bench_contention.py`.
"""

import os

POLICY = {"OMP_WAIT_POLICY": "PASSIVE"}  # OpenMP reads it once, when torch loads its runtime


def use_thread_policy() -> None:
    """Set each variable of `POLICY` in this process's environment unless it is already set (a variable the user set
    wins). Called first by every package that loads torch (their `__init__`), so it runs before torch loads; child
    processes inherit it with the environment."""
    for name, value in POLICY.items():
        os.environ.setdefault(name, value)
