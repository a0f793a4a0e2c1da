"""Every benchmark under bench/ runs one tiny step: `bench/gpu_check.sh --dry_run` (the device's prepared call, on
the CPU) runs bench_model, bench_pretrain and bench_grid as its sections; bench_data, bench_eval, bench_real_shapes,
bench_report and bench_contention run here through their `main(argv)` (and the plan's memory table, from
bench_real_shapes' figures, is checked). Nothing else runs the benchmarks, so a rename they use
(`transformers.EuroBertForMaskedLM`) would otherwise break them unseen."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import (
    bench_contention,
    bench_data,
    bench_eval,
    bench_real_models,
    bench_real_shapes,
    bench_report,
    gpu_check,
)
from bench.bench_model import fitting_batch
from recipes import plan

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # the process boundary: bench/gpu_check.sh in its own process
def test_gpu_check_dry_run_writes_every_section(tmp_path):
    """The dry run in one process (one start-up; the sections' code and arguments are the device's, tiny):
    every section ends ok and its figures reach gpu_check.json and gpu_check.md."""
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "PYTHON": sys.executable, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        ["bash", "bench/gpu_check.sh", "--dry_run", "--one_process"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    log = (out / "gpu_check.log").read_text() if (out / "gpu_check.log").is_file() else ""
    assert done.returncode == 0, done.stdout[-2000:] + log[-4000:]
    summary = json.loads((out / "gpu_check.json").read_text())
    assert list(summary["sections"]) == list(gpu_check.SECTIONS)
    assert all(s["status"] == "ok" and s["figures"] for s in summary["sections"].values()), summary["sections"]
    figures = {name: s["figures"] for name, s in summary["sections"].items()}
    assert figures["model_210m"]["pairs"]["mlm"]["best"] > 0  # ours vs transformers.EuroBertForMaskedLM
    rows = figures["model_210m"]["mfu"]
    assert [row["batch"] for row in rows] == [2, 4, "max"] and rows[0]["tokens_per_s"] > 0
    assert [row["batch"] for row in figures["model_610m"]["mfu"]] == [2, "max"]
    pfs = figures["pretrain"]["results"]["pfs"]
    assert pfs["losses_match"] and pfs["switch_step"] == 2 and len(pfs["windows"]) == 4
    assert pfs["tokens_per_second"] > 0 and pfs["frames_compiled"] == 0  # dry run: compile none
    assert "tests.test_fsdp::test_fsdp_trains_saves_resumes_and_loads" in figures["gpu_tests"]["tests"]
    assert figures["grid"]["best"]["runs_per_hour"] > 0 and figures["grid"]["rows"][0]["results_identical"]
    markdown = (out / "gpu_check.md").read_text()
    assert all(f"## {name}" in markdown for name in gpu_check.SECTIONS)
    assert sorted(p.name for p in out.iterdir()) == ["gpu_check.json", "gpu_check.log", "gpu_check.md"]


def test_gpu_check_outside_the_environment_names_what_is_missing(tmp_path):
    """Run without the project's environment (its `python3` a bare interpreter: no site-packages), the script says
    which dependencies are missing and how to get them, in one line, exit 2, before writing anything; likewise for
    an interpreter that does not exist."""
    bare = tmp_path / "bin" / "python3"
    bare.parent.mkdir()
    bare.write_text(f'#!/bin/sh\nexec "{sys.executable}" -I -S "$@"\n')
    bare.chmod(0o755)
    out, none = tmp_path / "out", tmp_path / "none"
    for env, problem in (
        (
            {"PATH": f"{bare.parent}:/usr/bin:/bin"},
            "torch, transformers, datasets, accelerate, peft, pytest not found by python3",
        ),
        ({"PATH": "/usr/bin:/bin", "PYTHON": str(none)}, f"{none} not found"),
    ):
        done = subprocess.run(
            ["bash", "bench/gpu_check.sh", "--dry_run"],
            cwd=ROOT,
            env={**env, "OUT": str(out)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2 and done.stdout == "", done.stdout + done.stderr
        assert done.stderr.splitlines() == [
            f"error: {problem}: activate the environment (source .venv/bin/activate) "
            "or run the setup (README, Quickstart); PYTHON=.venv/bin/python picks "
            "its interpreter"
        ]
        assert not out.exists()


def test_gpu_check_budget_fits_one_device_call():
    assert sum(budget for budget, *_ in gpu_check.SECTIONS.values()) + gpu_check.INSTALL_BUDGET <= 8 * 60


def test_largest_batch_is_extrapolated_from_two_peaks():
    gb = 1e9
    # 20 GB fixed (weights, gradients, AdamW) + 2 GB per sequence: 80 GB holds 30 -> 24 (a multiple of 8)
    assert fitting_batch({8: 36 * gb, 16: 52 * gb}, 80 * gb) == 24
    assert fitting_batch({8: 36 * gb}, 80 * gb) is None  # one point: no slope
    assert fitting_batch({8: 60 * gb, 16: 76 * gb}, 80 * gb) == 16  # nothing above the measured (the bench says so)


def test_bench_data_runs_one_tiny_step(data_dir, tmp_path, one_thread):
    figures = bench_data.main(
        [
            "--num_docs",
            "60",
            "--vocab_size",
            "300",
            "--block_size",
            "32",
            "--batch_size",
            "2",
            "--num_batches",
            "1",
            "--num_workers",
            "0",
            "--cache_dir",
            str(tmp_path),
            "--json",
            str(tmp_path / "bench_data.json"),
        ]
    )
    assert set(figures["objectives"]) == set(bench_data.OBJECTIVES)
    assert json.loads((tmp_path / "bench_data.json").read_text())["build_tokens_per_s"] > 0


def test_bench_eval_runs_one_tiny_step(data_dir, capsys, one_thread):
    bench_eval.main(["--max_steps", "1", "--max_train", "32", "--max_eval", "16", "--max_length", "32"])
    out = capsys.readouterr().out
    assert "share of wall time outside optimizer steps" in out and "a full collection" in out


@pytest.mark.slow  # 3 processes: the import, then the report with HEAD's code and with this checkout's
def test_bench_report_dry_run_measures_both_reports_and_finds_them_the_same(tmp_path):
    figures = bench_report.main(["--dry_run", "--workdir", str(tmp_path), "--json", str(tmp_path / "b.json")])
    assert figures["runs"] == 4 * 2 * 30 and figures["same_report"]
    assert all(figures[k]["peak_rss_gb"] > 0 and figures[k]["seconds"] > 0 for k in ("import", "before", "after"))
    assert json.loads((tmp_path / "b.json").read_text()) == figures
    assert list(tmp_path.iterdir()) == [tmp_path / "b.json"]  # the trees and the exported code are removed


@pytest.mark.slow  # 2 processes per run: the recipe's step, then the reload
def test_bench_real_shapes_dry_run_steps_saves_and_reloads(data_dir, tmp_path):
    figures = bench_real_shapes.main(
        [
            "--dry_run",
            "--objectives",
            "mlm40",
            "--data_dir",
            str(data_dir),
            "--cache_dir",
            str(tmp_path / "cache"),
            "--output_dir",
            str(tmp_path / "out"),
        ]
    )
    [run] = figures["runs"]
    assert (run["size"], run["objective"], run["tokens_per_step"]) == ("210m", "mlm40", 64) and run["mlm_fixed_shape"]
    assert run["weights_equal"] and run["logits_finite"] and {"model.safetensors", "optimizer.pt"} <= set(run["files"])
    assert run["step_seconds"] > 0 and run["peak_rss_gb"] >= run["resident_after_step_gb"] > 0
    assert run["activation_bytes_per_token"] > 0


def test_memory_table_follows_the_measured_activations_and_accelerates_state_estimate():
    rows = {(r["size"], r["objective"]): r for r in plan.memory_rows()}
    assert set(rows) == {(s, o) for s in ("210m", "610m", "1b") for o in plan.MEMORY_OBJECTIVES}
    for (size, objective), row in rows.items():
        assert row["measured"] == (size != "1b") and row["activation_bytes_per_token"] > 0
        assert row["state_bytes"] == pytest.approx(row["accelerate_bytes"], rel=1e-6)  # 16 bytes per parameter
        assert row["H200_ddp"] >= row["H100_ddp"] and row["H100_fsdp"] >= row["H100_ddp"]
    r = rows["210m", "clm"]
    room = 80e9 * (1 - plan.MEMORY_RESERVE) - 16 * r["parameters"]
    assert r["H100_ddp"] == int(room // (plan.ACTIVATION_BYTES_PER_TOKEN["210m", "clm"] * 2048))
    assert rows["1b", "clm"]["activation_bytes_per_token"] > rows["610m", "clm"]["activation_bytes_per_token"]
    assert rows["1b", "clm"]["H200_ddp"] <= rows["610m", "clm"]["H200_ddp"]


@pytest.mark.real
def test_bench_real_models_dry_run_scores_minilm_and_times_converted_smollm2(real, converted, tmp_path):
    figures = bench_real_models.main(
        [
            "--real_models",
            str(real["all-minilm-l6-v2"].parent),
            "--dry_run",
            "--converted",
            str(converted),
            "--json",
            str(tmp_path / "real.json"),
        ]
    )
    scifact = figures["minilm_scifact"]
    assert scifact["queries"] == 10 and abs(scifact["project_minus_mteb"]) <= 1e-6  # one ranking, two scorers
    assert scifact["mteb_ndcg@10"] > 0.5  # a real encoder, far above chance on its judged documents
    assert set(figures["throughput"]["pairs"]) == {"mlm", "clm"}
    assert all(pair["best"] > 0 for pair in figures["throughput"]["pairs"].values())


@pytest.mark.slow  # 4 processes: each run alone and beside a busy process
def test_bench_contention_dry_run_times_each_run_alone_and_beside_busy_processes(data_dir, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    figures = bench_contention.main(
        ["--dry_run", "--data_dir", str(data_dir), "--json", str(out / "c.json"), "--markdown", str(out / "c.md")]
    )
    rows = figures["rows"]
    assert [(row["workload"], row["policy"]) for row in rows] == [
        (workload, policy) for workload in ("fine-tuning", "pretraining") for policy in ("default",)
    ]
    assert all(row["alone_s"] > 0 and row["busy_s"] > 0 and row["user_cpu_busy_s"] > 0 for row in rows)
    for row in rows:
        assert row["to_alone"] == pytest.approx(row["busy_s"] / row["alone_s"], abs=0.02)  # of rounded figures
        assert row["idle_cost"] == 1.0 or row["policy"] != "default"
    assert figures["busy"] == 1 and figures["fair_share"] == (1 + figures["cores"]) / figures["cores"]
    table = (out / "c.md").read_text().splitlines()
    assert sum(line.startswith("| fine-tuning |") or line.startswith("| pretraining |") for line in table) == 2
    assert "default (`OpenMP's own`)" in table[-1] and json.loads((out / "c.json").read_text()) == figures
