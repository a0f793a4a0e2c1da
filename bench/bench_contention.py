"""Thread policies on a shared CPU: one fine-tuning run and one pretraining run, each alone and beside N busy
processes (N = the cores), under OpenMP's default and each candidate policy, in one invocation (issue 55;
docs/benchmarks.md, "Threads on a shared CPU").

    python -m bench.bench_contention --markdown contention.md   # the figures of docs/benchmarks.md (quiet machine)
    python -m bench.bench_contention --dry_run                  # tiny runs, the default policy, 1 busy process (CI)

Each run is the real command line in a fresh process (`evaluation.run`, `recipes.pretrain`), timed from start to
exit (wall clock, and the user CPU it used), with the candidate's variables in its environment and nothing else:
the thread variables of this shell are removed and the project's own policy (`core.threads.POLICY`) is switched off
in the child, so `default` is OpenMP's own. The busy processes are `python -c "while True: pass"`. Every setting is
measured `--repeat` times, interleaved; the median is reported. Ratios: beside the busy processes / alone (the same
policy); to the fair share: the default alone times (N + C) / C on C cores (the machine split evenly between the
run's C threads and the N busy processes: 2x when N = C); alone / the default alone (what the policy costs an idle
run).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from bench.bench_grid import random_model
from core import cli, threads
from core.paths import resolve_data_dir

ROOT = Path(__file__).resolve().parents[1]
POLICIES = {
    "default": {},  # OpenMP's own: a waiting thread spins (about 300,000 turns in libgomp) before it sleeps
    "passive": {"OMP_WAIT_POLICY": "PASSIVE"},  # a waiting thread sleeps at once
    "one-thread": {"OMP_NUM_THREADS": "1"},  # nothing to wait for, one core used
    "short-spin": {"GOMP_SPINCOUNT": "10000"},  # libgomp: a short spin, then sleep
}
THREAD_VARIABLES = {"OMP_NUM_THREADS", "MKL_NUM_THREADS", *threads.POLICY, *(k for p in POLICIES.values() for k in p)}
# The child: the project's policy off (its packages apply it on import), then the module as `python -m` runs it.
CHILD = (
    "import runpy, sys; from core import threads; threads.POLICY.clear(); sys.argv = sys.argv[1:]; "
    "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)"
)


def workloads(args, model: Path, data_dir: Path, cache: Path) -> dict[str, list[str]]:
    """The two command lines (module and arguments; the output folder is added per run)."""
    finetune = ["evaluation.run", "--model", str(model), "--tasks", "sst2", "--lrs", "1e-4", "--seeds", args.seeds]
    finetune += ["--max_steps", str(args.finetune_steps), "--max_train", str(args.max_train)]
    finetune += ["--max_eval", str(args.max_eval), "--data_dir", str(data_dir)]
    pretrain = ["recipes.pretrain", "--config", "recipes/configs/debug.yaml", "--max_steps", str(args.pretrain_steps)]
    pretrain += ["--data_dir", str(data_dir), "--data_cache_dir", str(cache)]
    return {"fine-tuning": finetune, "pretraining": pretrain}


def timed(command: list[str], output: Path, policy: dict, busy: int) -> tuple[float, float]:
    """(wall seconds, user CPU seconds) of one run of `command` under `policy`, beside `busy` spinning processes."""
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES} | policy | {"TQDM_DISABLE": "1"}
    flag = "--output" if command[0] == "evaluation.run" else "--output_dir"
    spinning = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        time.sleep(0.5 if busy else 0)  # the busy processes are running before the run starts
        start = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-c", CHILD, *command, flag, str(output)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        with process.stdout:
            log = process.stdout.read()  # until the run exits: its output, for a failure
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
    finally:
        for spinner in spinning:
            spinner.kill()
            spinner.wait()
    if process.returncode != 0:
        sys.exit(f"error: {command[0]} under {policy or 'the default'} failed:\n{log.decode()[-3000:]}")
    return wall, usage.ru_utime


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--policies", default=",".join(POLICIES), help=f"of {', '.join(POLICIES)}")
    add("--busy", type=int, default=len(os.sched_getaffinity(0)), help="busy processes (the cores)")
    add("--repeat", type=int, default=2, help="measurements of each setting, interleaved (median)")
    add("--seeds", default="0,1,2", help="fine-tuning: the seeds of its one task and LR (sst2, 1e-4)")
    add("--finetune_steps", type=int, default=60)
    add("--max_train", type=int, default=500)
    add("--max_eval", type=int, default=200)
    add("--pretrain_steps", type=int, default=60, help="steps of the debug recipe (above 10: PFS)")
    add(
        "--dry_run",
        action="store_true",
        help="tiny: 1 seed, 2 fine-tuning and 12 pretraining steps, the default policy, 1 busy process, once, "
        "no warm-up",
    )
    add("--markdown", help="also write the table to this file (docs/benchmarks.md)")
    add("--json", help="also write the figures to this JSON file")
    add("--data_dir")
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = make_parser().parse_args(argv)
    if args.dry_run:
        args.policies, args.busy, args.repeat, args.seeds = "default", 1, 1, "0"
        args.finetune_steps, args.max_train, args.max_eval, args.pretrain_steps = 2, 32, 16, 12
    with cli.bad_input_exits():
        data_dir = resolve_data_dir(args.data_dir)
        policies = cli.split_list(args.policies)
        if unknown := [p for p in policies if p not in POLICIES]:
            raise ValueError(f"--policies {args.policies}: {unknown} unknown; choose among {', '.join(POLICIES)}")
        if "default" not in policies:
            raise ValueError(f"--policies {args.policies} must hold default: every ratio is to the default alone")
    cores, load = len(os.sched_getaffinity(0)), os.getloadavg()[0]
    fair = (args.busy + cores) / cores
    header = (
        f"CPU, {cores} cores, load average {load:.2f} at the start"
        f"{' (busy: the figures measure that load too)' if load > 0.5 else ''}; busy processes: {args.busy}; "
        f"fair share {fair:.2f}x the default alone"
    )
    print(header)
    with tempfile.TemporaryDirectory(prefix="bench-contention-") as tmp:
        model = random_model(Path(tmp) / "tiny", SimpleNamespace(architecture="tiny", vocab_size=None), data_dir)
        commands = workloads(args, model, data_dir, Path(tmp) / "cache")
        if not args.dry_run:  # an untimed run of each first: the pretraining data cache, the disk cache
            for name, command in commands.items():
                timed(command, Path(tmp) / f"warmup-{name}", POLICIES["default"], 0)
        times = {}
        for attempt in range(args.repeat):
            for name, command in commands.items():
                for policy in policies:
                    for busy in (0, args.busy):
                        output = Path(tmp) / f"{name}-{policy}-{busy}-{attempt}"
                        times.setdefault((name, policy, busy), []).append(
                            timed(command, output, POLICIES[policy], busy)
                        )
    rows, medians = [], {key: [statistics.median(v) for v in zip(*runs)] for key, runs in times.items()}  # wall, user
    for name in commands:
        default_alone = medians[(name, "default", 0)][0]
        for policy in policies:
            (alone, user_alone), (busy, user_busy) = (medians[(name, policy, n)] for n in (0, args.busy))
            rows.append(
                {
                    "workload": name,
                    "policy": policy,
                    "variables": POLICIES[policy],
                    "alone_s": round(alone, 2),
                    "busy_s": round(busy, 2),
                    "to_alone": round(busy / alone, 2),
                    "to_fair_share": round(busy / (default_alone * fair), 2),
                    "idle_cost": round(alone / default_alone, 3),
                    "user_cpu_alone_s": round(user_alone, 2),
                    "user_cpu_busy_s": round(user_busy, 2),
                }
            )
    markdown = [
        header,
        "",
        f"| run | policy | alone | beside {args.busy} busy | x alone | x fair share | alone / default alone "
        "| user CPU alone, beside |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        variables = " ".join(f"{k}={v}" for k, v in row["variables"].items()) or "OpenMP's own"
        markdown.append(
            f"| {row['workload']} | {row['policy']} (`{variables}`) | {row['alone_s']:.1f} s | {row['busy_s']:.1f} s "
            f"| {row['to_alone']:.2f} | {row['to_fair_share']:.2f} | {row['idle_cost']:.3f} "
            f"| {row['user_cpu_alone_s']:.1f} s, {row['user_cpu_busy_s']:.1f} s |"
        )
    print("\n".join(markdown[1:]))
    figures = {"cores": cores, "load_average": load, "busy": args.busy, "fair_share": fair, "settings": vars(args)}
    figures["rows"] = rows
    if args.markdown:
        Path(args.markdown).write_text("\n".join(markdown) + "\n")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return figures


if __name__ == "__main__":
    main()
