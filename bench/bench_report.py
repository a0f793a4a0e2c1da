"""Peak memory and wall time of `analysis.report` over an imported tree of the paper's shape, before and after a
change, side by side in one run.

    python -m bench.bench_report --scale 0.05 --before main [--json bench_report.json]

The tree, its import and the two reports (each in its own process; both must be the same file for file):
docs/benchmarks.md. `--dry_run`: 4 models, 2 datasets, before = HEAD (what tests/test_bench.py runs).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from core import artifacts, names, paper
from recipes import manifest

ROOT = Path(__file__).resolve().parents[1]
MODELS = manifest.model_names() + manifest.intermediate_names()  # the paper's 38 models and 12 checkpoints
# EncodEval dataset -> (its task folder, test instances: the public test/dev sizes, approximately)
DATASETS = {
    "sst2": ("SC", 1821),
    "mnli_m": ("SC", 9815),
    "qqp": ("SC", 40430),
    "conll2003_en": ("TC", 3453),
    "ontonotes": ("TC", 8262),
    "uner_en": ("TC", 1000),
    "squad": ("QA", 10570),
    "squad_v2": ("QA", 11873),
    "record": ("QA", 10000),
    "qed": ("QA", 1500),
    "msmarco": ("IR", 6980),
    "nq": ("IR", 3452),
    "mldr_en": ("IR", 800),
}
REPORT_FILES = ("summary.csv", "summary.md", "findings.csv")


def generate(root: Path, scale: float, models: list[str], datasets: list[str], seed: int = 0) -> int:
    """Write an EncodEval tree: every model x dataset x the paper's LR x seed grid; return the instances per run
    summed over the tree's test splits. Scores are 0/1 for SC (accuracy), fractions otherwise; the best LR is
    interior (2e-5 .. 1e-4) and models differ by a little, so the findings have something to test."""
    rng = np.random.default_rng(seed)
    total = 0
    for i, model in enumerate(models):
        for dataset in datasets:
            folder, size = DATASETS[dataset]
            n = max(8, round(size * scale))
            level = 0.55 + 0.3 * rng.random() + 0.002 * i
            for j, lr in enumerate(paper.PAPER_LRS):
                for sd in paper.PAPER_SEEDS:
                    mean = level - 0.04 * abs(j - 2.5) + 0.01 * rng.standard_normal()
                    run = {}
                    for split, count in (("validation", max(8, n // 4)), ("test", n)):
                        p = np.clip(mean + 0.2 * rng.standard_normal(count), 0, 1)
                        scores = (rng.random(count) < p).astype(float) if folder == "SC" else p
                        values = scores.tolist()
                        run[split] = {"score": sum(values) / len(values), "scores_i": values}
                    prefix = "msmarco_pairs_" if folder == "IR" else ""
                    path = root / model / folder / dataset / f"{prefix}lr{lr:.0e}_sd{sd}" / "results.json"
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(json.dumps(run))
                    total += n
    return total


def measured(command: list[str], cwd: Path, env: dict, log: Path) -> dict:
    """Run `command` in its own process (output to `log`); its wall time and its own peak RSS (wait4); refused,
    with the log's end, when it fails."""
    start = time.perf_counter()
    with open(log, "w") as out:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {log.read_text()[-2000:]}")
    return {"seconds": round(seconds, 2), "peak_rss_gb": round(usage.ru_maxrss / 2**20, 3)}


def export(revision: str, into: Path) -> Path:
    """The tracked files of `revision` under `into` (git archive: no worktree, no ref of the repository changes)."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", "--format=tar", revision], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def report(code: Path, imported: Path, output: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(code), "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    figures = measured(
        [sys.executable, "-m", "analysis.report", str(imported), "--output", str(output)],
        code,
        env,
        output.with_suffix(".log"),
    )
    return {
        **figures,
        "files": {name: (output / name).read_text() if (output / name).is_file() else None for name in REPORT_FILES},
    }


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add(
        "--scale",
        type=float,
        default=0.05,
        help="fraction of each dataset's test size (1.0: the paper's, about 165 million instances)",
    )
    add("--models", type=int, default=len(MODELS), help="the first N models of the 50")
    add("--datasets", default=",".join(DATASETS), help="EncodEval dataset names")
    add("--before", default="main", help="git revision whose report is measured beside this checkout's ('' to skip)")
    add("--workdir", help="where the trees go (default: a temporary folder, removed)")
    add("--json", help="write the figures here")
    add("--dry_run", action="store_true", help="4 models, 2 datasets, scale 0.005, before = HEAD")
    args = parser.parse_args(argv)
    models, datasets = MODELS[: args.models], args.datasets.split(",")
    if args.dry_run:
        models, datasets, args.scale, args.before = (
            ["610m-clm-42k", "610m-mlm40-42k", *MODELS[44:46]],
            ["sst2", "mldr_en"],
            0.005,
            "HEAD",
        )
    assert all(names.parse_name(m) for m in models) and len(set(MODELS)) == 50
    with tempfile.TemporaryDirectory(dir=args.workdir) as work:
        work = Path(work)
        start = time.perf_counter()
        instances = generate(work / "encodeval", args.scale, models, datasets)
        generated = round(time.perf_counter() - start, 1)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
        imported = measured(
            [
                sys.executable,
                "-m",
                "analysis.import_encodeval",
                str(work / "encodeval"),
                "--output",
                str(work / "imported"),
            ],
            ROOT,
            env,
            work / "import.log",
        )
        runs = {"after": report(ROOT, work / "imported", work / "report_after")}
        if args.before:
            runs["before"] = report(export(args.before, work / "before"), work / "imported", work / "report_before")
    figures = {
        "scale": args.scale,
        "models": len(models),
        "datasets": len(datasets),
        "runs": len(models) * len(datasets) * 30,
        "test_instances": instances,
        "generate_seconds": generated,
        "import": {k: imported[k] for k in ("seconds", "peak_rss_gb")},
        **{label: {k: r[k] for k in ("seconds", "peak_rss_gb")} for label, r in runs.items()},
    }
    if "before" in runs:
        figures["same_report"] = runs["before"]["files"] == runs["after"]["files"]
    print(f"{figures['runs']} runs, {instances:,} test instances (scale {args.scale}); generated in {generated} s")
    print(f"{'':8} {'seconds':>8} {'peak RSS GB':>12}")
    for label in ("import", "before", "after"):
        if label in figures:
            print(f"{label:8} {figures[label]['seconds']:>8} {figures[label]['peak_rss_gb']:>12}")
    if "same_report" in figures:
        print(f"same report before and after: {figures['same_report']}")
    if args.json:
        artifacts.write_json_atomic(args.json, figures, indent=1)
    return figures


if __name__ == "__main__":
    main()
