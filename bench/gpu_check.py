"""The sections of `bench/gpu_check.sh` (one H200, about 7 minutes) and its report; standard library only at import.

    python -m bench.gpu_check sections [--dry_run]            # "name budget_s" lines, for the shell script
    python -m bench.gpu_check section NAME --work DIR [--dry_run] [--dry_compile]   # one section (NAME=all: every one)
    python -m bench.gpu_check report --work DIR --out OUT      # OUT/gpu_check.json and OUT/gpu_check.md

Each section (`SECTIONS`; docs/benchmarks.md says what each measures) is a benchmark's own `main(argv)` with the
device's settings (or, with `--dry_run`, a tiny CPU run of the same code), writing its figures to DIR/NAME.json.
"""

import argparse
import json
import sys
import time
from pathlib import Path

A210M = "--vocab 128256 --hidden 768 --layers 12 --heads 12 --kv_heads 12 --seq 2048 --batch 8".split()
GPU_MODEL = (
    "--device cuda --dtype bfloat16 --steps 5 --warmup 2 --compile regional --compile_table off --mfu on "
    "--mfu_batch 8,16,max --memory_gb 80"
).split()
DRY_MODEL = (
    "--vocab 512 --hidden 32 --layers 1 --heads 2 --kv_heads 2 --batch 2 --seq 32 --steps 1 --warmup 0 --mfu on "
    "--mfu_architecture tiny --mfu_seq 32 --compile_table off --peak_size 512"
).split()
PAPER_210M = "recipes/configs/paper/210m-mlm40-42k.yaml"
GPU_PRETRAIN = (
    f"--config {PAPER_210M} --runs pfs --steps 40 --log_every 5 --block_size 2048 --batch_size 8 --accumulation 2 "
    "--vocab_size 128256 --max_docs 6000 --compare_eager"
).split()
DRY_PRETRAIN = (
    f"--config {PAPER_210M} --runs pfs --steps 4 --log_every 1 --block_size 64 --batch_size 2 --max_docs 200 "
    "--vocab_size 9000 --compare_eager --loss_rtol 1e-4 --architecture tiny --bf16 false --use_cpu true "
    "--num_proc 1 --dataloader_num_workers 0"
).split()
# -n 0: in this process (pyproject.toml runs the suite with one worker per core; the GPU tests share one device)
GPU_TESTS = "tests/test_fsdp.py tests/test_modeling.py -k gpu -q -p no:cacheprovider -n 0".split()

# name -> (time budget on the device in seconds, module, device arguments, dry-run arguments); the dry run's budget
# is the same (a slow shared CPU), the device's sum plus the install stays under 8 minutes.
SECTIONS = {
    "model_210m": (
        95,
        "bench.bench_model",
        [*GPU_MODEL, *A210M, "--pairs", "mlm", "--mfu_architecture", "210m"],
        [*DRY_MODEL, "--pairs", "mlm", "--mfu_batch", "2,4,max"],
    ),
    "model_610m": (
        80,
        "bench.bench_model",
        [*GPU_MODEL, "--pairs", "", "--mfu_architecture", "610m"],
        [*DRY_MODEL, "--pairs", "", "--mfu_batch", "2,max"],
    ),
    "pretrain": (110, "bench.bench_pretrain", GPU_PRETRAIN, DRY_PRETRAIN),
    "gpu_tests": (50, "pytest", GPU_TESTS, GPU_TESTS),
    "grid": (
        85,
        "bench.bench_grid",
        "--architecture 210m --vocab_size 128256 --tasks sst2 --lrs 1e-4,5e-4 --seeds 0,1 --max_steps 100 "
        "--workers 1,2,4".split(),
        "--tasks sst2 --lrs 1e-4 --seeds 0 --max_steps 2 --max_train 64 --max_eval 32 --workers 1".split(),
    ),  # each worker count costs a process start-up
}
INSTALL_BUDGET = 30  # the staged wheels, installed into .site by gpu_check.sh


def section_argv(name: str, work: Path, dry_run: bool, dry_compile: bool) -> tuple[str, list[str]]:
    """The module and arguments of one section, its figures going to `work/<name>.json`."""
    _, module, device_argv, dry_argv = SECTIONS[name]
    argv = list(dry_argv if dry_run else device_argv)
    if module == "pytest":
        return module, [*argv, "--junitxml", str(work / f"{name}.xml")]
    if dry_run and dry_compile and module == "bench.bench_model":
        argv += ["--compile", "regional"]
    if module == "bench.bench_pretrain":
        argv += [
            *(["--compile", "regional" if dry_compile else "none"] if dry_run else []),
            "--cache_dir",
            str(work / "pretrain-cache"),
            "--output_dir",
            str(work / "pretrain-runs"),
        ]
    return module, [*argv, "--json", str(work / f"{name}.json")]


def junit_figures(path: Path) -> dict:
    """{test id: passed | failed | skipped (reason)} of a pytest junit file."""
    import xml.etree.ElementTree as ElementTree

    tests = {}
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed: " + (child.get("message") or "")[:300]
            elif child.tag == "skipped":
                outcome = "skipped: " + (child.get("message") or "")[:200]
        tests[f"{case.get('classname')}::{case.get('name')}"] = outcome
    return {"tests": tests}


def run_section(name: str, work: Path, dry_run: bool, dry_compile: bool) -> int:
    """Run one section in this process; 0 when it finished, 1 when it raised or its tests failed."""
    import importlib

    module, argv = section_argv(name, work, dry_run, dry_compile)
    print(f"== {name}: python -m {module} {' '.join(argv)}", flush=True)
    if module == "pytest":
        import pytest

        code = int(pytest.main(argv))
        (work / f"{name}.json").write_text(json.dumps(junit_figures(work / f"{name}.xml"), indent=2))
        return 0 if code in (0, 5) else 1  # 5: nothing selected
    importlib.import_module(module).main(argv)
    return 0


def run_all(work: Path, dry_run: bool, dry_compile: bool) -> int:
    """Every section in this one process (the CI test of the dry run: one start-up instead of five), each
    recording its status as the shell script does."""
    import traceback

    failed = 0
    for name in SECTIONS:
        start = time.perf_counter()
        try:
            code = run_section(name, work, dry_run, dry_compile)
        except (Exception, SystemExit):
            traceback.print_exc()
            code = 1
        (work / f"{name}.status").write_text(json.dumps({"rc": code, "seconds": round(time.perf_counter() - start, 1)}))
        failed |= code
    return failed


def fmt(value, spec: str = ".1f", scale: float = 1.0) -> str:
    return "" if value is None else format(value * scale, spec)


def model_markdown(figures: dict) -> list[str]:
    lines = []
    for kind, ratio in figures.get("pairs", {}).items():
        lines.append(
            f"- {kind.upper()} ours / native full-vocabulary head: {ratio['best']:.2f}x best step, "
            f"{ratio['median']:.2f}x median (FLOP ratio {ratio['flops']:.2f}x)"
        )
    setup = figures.get("setup", {})
    lines.append(
        f"- device {setup.get('device')}, torch {setup.get('torch')}, measured bf16 matmul peak "
        f"{fmt(setup.get('bf16_matmul_peak_tflops'))} TFLOP/s"
    )
    lines += [
        "",
        "| architecture | mode | micro-batch | tokens/s | MFU % | % of measured peak | peak GB | note |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in figures.get("mfu", []):
        lines.append(
            f"| {row['architecture']} | {row.get('mode', '')} | {row['batch']} | "
            f"{fmt(row.get('tokens_per_s'), ',.0f')} | {fmt(row.get('mfu'), '.1f', 100)} | "
            f"{fmt(row.get('share_of_measured_peak'), '.1f', 100)} | {fmt(row.get('peak_memory_gb'))} | "
            f"{row.get('error', '')} |"
        )
    return lines


def pretrain_markdown(figures: dict) -> list[str]:
    lines = [
        "| run | compile | tokens/s | MFU % | frames compiled | graph breaks | losses vs eager |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in figures.get("results", {}).items():
        for label, run in [(name, r)] + ([(f"{name} eager", r["eager"])] if "eager" in r else []):
            match = (
                f"{'match' if r['losses_match'] else 'DIFFER'} (max rel {r['loss_max_rel_diff']:.1e})"
                if label == name and "losses_match" in r
                else ""
            )
            lines.append(
                f"| {label} | {run['compile']} | {fmt(run['tokens_per_second'], ',.0f')} | "
                f"{fmt(run['mfu'], '.1f', 100)} | {run['frames_compiled']} | {run['graph_breaks']} | "
                f"{match} |"
            )
    return lines


def grid_markdown(figures: dict) -> list[str]:
    lines = [
        f"- {figures.get('model')}, {figures.get('runs')} runs on {figures.get('device')}",
        "",
        "| --workers | wall s | runs/hour | results identical |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {r['workers']} | {r['wall_s']:.1f} | {r['runs_per_hour']:.1f} | {r['results_identical']} |"
        for r in figures.get("rows", [])
    ]
    return lines


def tests_markdown(figures: dict) -> list[str]:
    return [f"- `{test}`: {outcome}" for test, outcome in figures.get("tests", {}).items()] or ["- no test selected"]


MARKDOWN = {
    "model_210m": model_markdown,
    "model_610m": model_markdown,
    "pretrain": pretrain_markdown,
    "gpu_tests": tests_markdown,
    "grid": grid_markdown,
}


def report(work: Path, out: Path, dry_run: bool, started: float | None) -> dict:
    """Gather every section's status and figures into OUT/gpu_check.json and OUT/gpu_check.md (a section that
    failed or ran out of time is there with its status and whatever figures it wrote)."""
    summary = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "dry_run": dry_run, "sections": {}}
    if started:
        summary["wall_s"] = round(time.time() - started, 1)
    lines = [
        f"# gpu_check {'(dry run, CPU) ' if dry_run else ''}{summary['date']}",
        "",
        "| section | status | seconds | budget s |",
        "|---|---|---|---|",
    ]
    body = []
    for name, (budget, *_rest) in SECTIONS.items():
        status_file, figures_file = work / f"{name}.status", work / f"{name}.json"
        status = json.loads(status_file.read_text()) if status_file.is_file() else {"rc": None, "seconds": None}
        status["status"] = {None: "not run", 0: "ok", 124: "timed out", 137: "killed (time or memory)"}.get(
            status["rc"], f"failed (exit {status['rc']})"
        )
        status["figures"] = json.loads(figures_file.read_text()) if figures_file.is_file() else None
        summary["sections"][name] = status
        lines.append(f"| {name} | {status['status']} | {status['seconds']} | {budget} |")
        body += ["", f"## {name}", ""]
        body += MARKDOWN[name](status["figures"]) if status["figures"] else ["- no figures written"]
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_check.json").write_text(json.dumps(summary, indent=2))
    (out / "gpu_check.md").write_text("\n".join(lines + body) + "\n")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("command", choices=["sections", "section", "report"])
    add("name", nargs="?", help="section name, or all")
    add("--work", type=Path, help="folder of the sections' figures and statuses")
    add("--out", type=Path, help="report: where gpu_check.json and gpu_check.md go")
    add("--dry_run", action="store_true", help="tiny CPU settings of the same sections")
    add("--dry_compile", action="store_true", help="dry run with regional compile (slow on CPU)")
    add("--started", type=float, help="report: epoch seconds the check began")
    args = parser.parse_args(argv)
    if args.command == "sections":
        print("\n".join(f"{name} {budget}" for name, (budget, *_rest) in SECTIONS.items()))
        return 0
    if (
        args.work is None
        or (args.command == "section" and args.name not in (*SECTIONS, "all"))
        or (args.command == "report" and args.out is None)
    ):
        parser.error(f"section needs NAME ({', '.join(SECTIONS)} or all) and --work; report needs --work and --out")
    args.work.mkdir(parents=True, exist_ok=True)
    if args.command == "section":
        if args.name == "all":
            return run_all(args.work, args.dry_run, args.dry_compile)
        return run_section(args.name, args.work, args.dry_run, args.dry_compile)
    summary = report(args.work, args.out, args.dry_run, args.started)
    print((args.out / "gpu_check.md").read_text())
    return 0 if all(s["rc"] == 0 for s in summary["sections"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
