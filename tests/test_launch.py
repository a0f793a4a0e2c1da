"""The paper's SLURM launch, run for real on this machine: the generated scripts parse (`bash -n`), `submit.sh`
submits in the manifest's order with the right dependencies (stub `sbatch` records what it would submit), a
pretraining job is a real 2-node accelerate launch on loopback (stub `srun` starts one task per "node"), an
evaluation array task runs its line of the grid, and a run resumes exactly on another number of processes."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForMaskedLM

from pretraining import pretrain
from pretraining.checks import check_batch_layout, check_output_dir
from recipes import manifest, prepare_data
from recipes.plan import write_plan

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable

STUB_SBATCH = """#!/usr/bin/env bash
# records its arguments, one per line, in $STUB_LOG/sbatch-<n>; prints a job id as `--parsable` does on a federation
n=$(( $(ls "$STUB_LOG" | grep -c '^sbatch-') + 1 ))
printf '%s\\n' "$@" > "$STUB_LOG/sbatch-$n"
echo "$((1000 + n));stubcluster"
"""
STUB_SCONTROL = """#!/usr/bin/env bash
case "$1 $2" in
  "show hostnames") printf '%s\\n' $STUB_HOSTS ;;
  requeue*) echo "$*" >> "$STUB_LOG/scontrol" ;;
  *) exit 1 ;;
esac
"""
STUB_SRUN = """#!/usr/bin/env bash
# records its arguments, then runs the command once per task with its SLURM_NODEID (every "node" is this host)
printf '%s\\n' "$@" > "$STUB_LOG/srun"
ntasks=1
while [[ $1 == -* ]]; do
  case $1 in
    --ntasks) ntasks=$2; shift 2 ;;
    --nodes|--ntasks-per-node|--cpus-per-task) shift 2 ;;
    *) shift ;;
  esac
done
[[ -n ${STUB_SRUN_SLEEP:-} ]] && exec sleep "$STUB_SRUN_SLEEP"
pids=()
for ((i = 0; i < ntasks; i++)); do SLURM_NODEID=$i SLURM_PROCID=$i "$@" & pids+=($!); done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
exit $status
"""
# a run small enough for 2 CPU processes: 4 steps of 4 blocks, CLM then MLM (PFS), a checkpoint per step
RUN = [
    "--max_docs",
    "200",
    "--block_size",
    "64",
    "--max_steps",
    "4",
    "--switch_step",
    "2",
    "--intermediate_steps",
    "2",
    "--warmup_steps",
    "1",
    "--lr_scheduler_kwargs",
    '{"num_decay_steps": 1}',
    "--report_to",
    "none",
    "--disable_tqdm",
    "true",
    "--save_strategy",
    "steps",
    "--save_steps",
    "1",
    "--log_block_order",
    "true",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(command, env, cwd, timeout=300, **kwargs):
    """Run `command` in its own process group, killing the whole group if it outlives `timeout`."""
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        **kwargs,
    )
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        pytest.fail(f"{command[:3]} timed out: {err[-3000:]}")
    return subprocess.CompletedProcess(command, process.returncode, out, err)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A repository root with stub SLURM commands, and the paper plan's launch folder."""
    base = tmp_path_factory.mktemp("cluster")
    repo = base / "repo"
    repo.mkdir()
    for name in ("core", "recipes", "evaluation", "modeling_eurobert", "model_cards"):
        (repo / name).symlink_to(ROOT / name)
    stubs = base / "bin"
    stubs.mkdir()
    for name, text in (("sbatch", STUB_SBATCH), ("scontrol", STUB_SCONTROL), ("srun", STUB_SRUN)):
        (stubs / name).write_text(text)
        (stubs / name).chmod(0o755)
    setup = base / "setup.sh"  # what a cluster's module load / conda activate does
    setup.write_text(f"export PATH={Path(PYTHON).parent}:$PATH\n")
    write_plan(base / "plan")
    return {"repo": repo, "stubs": stubs, "setup": setup, "launch": base / "plan" / "launch", "base": base}


def slurm_env(cluster, log: Path, **extra) -> dict:
    log.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "NODES_", "SKIP_PREPARE"))}
    env.update(
        {
            "PATH": f"{cluster['stubs']}:{env['PATH']}",
            "STUB_LOG": str(log),
            "SETUP": str(cluster["setup"]),
            "OMP_NUM_THREADS": "1",
            **extra,
        }
    )
    return env


def sbatch_calls(log: Path) -> list[list[str]]:
    files = sorted(log.glob("sbatch-*"), key=lambda p: int(p.name.split("-")[1]))
    return [p.read_text().splitlines() for p in files]


def option(args: list[str], name: str) -> str | None:
    return (
        args[args.index(name) + 1]
        if name in args
        else next((a.split("=", 1)[1] for a in args if a.startswith(name + "=")), None)
    )


def test_generated_scripts_parse(cluster):
    scripts = sorted(p for p in cluster["launch"].iterdir() if p.suffix in (".sh", ".sbatch"))
    assert [p.name for p in scripts] == [
        "eval_grid.sbatch",
        "prepare_data.sbatch",
        "pretrain.sbatch",
        "pretrain.sh",
        "submit.sh",
    ]
    for script in scripts:
        result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert result.returncode == 0, f"{script.name}: {result.stderr}"
        assert os.access(script, os.X_OK)
        assert str(cluster["base"]) not in script.read_text()  # no path of the machine that wrote the plan
    assert "#SBATCH --signal=B:USR1@600" in (cluster["launch"] / "pretrain.sbatch").read_text()


def test_submit_orders_jobs_by_dependencies(cluster, tmp_path):
    repo, log = cluster["repo"], tmp_path / "stub"
    trained = repo / "out" / "paper" / "210m-mlm50-42k"  # trained by an earlier submission: not submitted again
    trained.mkdir(parents=True, exist_ok=True)
    (trained / "run_info.json").write_text("{}")
    env = slurm_env(cluster, log, PARTITION="gpu", ACCOUNT="proj", NODES_1B="2", LOG_DIR=str(tmp_path / "logs"))
    result = run(["bash", str(cluster["launch"] / "submit.sh")], env, repo, timeout=60)
    assert result.returncode == 0, result.stderr
    calls = sbatch_calls(log)
    ids = dict(line.split("\t") for line in result.stdout.splitlines() if line.split("\t")[1].isdigit())
    names = [option(call, "--job-name") for call in calls]
    order = [r.name for r in manifest.training_order(manifest.model_names())]
    assert names[0] == "prepare-data" and "--dependency" not in " ".join(calls[0])
    assert names[1:38] == [n for n in order if n != "210m-mlm50-42k"]
    assert "210m-mlm50-42k\ttrained, not submitted" in result.stdout
    table = manifest.recipes()
    for call, name in zip(calls[1:38], names[1:38], strict=True):
        needs = table[name].branch_from or table[name].cpt_base
        expected = [ids["prepare-data"]] + ([ids[needs]] if needs else [])
        assert option(call, "--dependency") == "afterok:" + ":".join(expected), name
        assert option(call, "--nodes") == ("2" if name.startswith("1b") else "1")
        assert option(call, "--partition") == "gpu" and option(call, "--account") == "proj"
        assert option(call, "--gres") == "gpu:8" and "--requeue" in call and option(call, "--open-mode") == "append"
        assert option(call, "--kill-on-invalid-dep") == "yes"  # cancelled if its prerequisite fails
        config, module, accelerate, global_batch, per_device = call[-5:]
        assert config == f"recipes/configs/paper/{name}.yaml" and module == table[name].module
        assert (accelerate, global_batch, per_device) == ("recipes/accelerate/multi_gpu.yaml", "1152", "8")
    arrays = calls[38:]
    assert len(arrays) == 18  # 18,000 grid lines in arrays of at most 1,000 tasks
    pretraining = [ids[n] for n in names[1:38]]
    for k, call in enumerate(arrays):
        assert option(call, "--dependency") == "afterok:" + ":".join([ids["prepare-data"], *pretraining])
        assert option(call, "--array") == "0-999%256" and call[-1] == str(1 + 1000 * k)
        assert call[-2] == str(cluster["launch"] / "eval_grid.tsv")
    assert (tmp_path / "logs").is_dir()


def test_submit_refuses_bad_settings_before_any_job(cluster, tmp_path):
    for k, (extra, message) in enumerate(
        (
            ({"NODES_1B": "4"}, "NODES_1B=4: the global batch of 1152 blocks does not split"),
            ({"GPUS_PER_NODE": "eight"}, "GPUS_PER_NODE=eight must be a positive integer"),
            ({"SETUP": str(tmp_path / "none.sh")}, "is not a file"),
            ({"TIME_PRETRAIN": "two days"}, "TIME_PRETRAIN=two days is not a SLURM time"),
        )
    ):
        log = tmp_path / f"stub-{k}"
        result = run(
            ["bash", str(cluster["launch"] / "submit.sh")],
            slurm_env(cluster, log, **extra),
            cluster["repo"],
            timeout=60,
        )
        assert result.returncode == 2 and result.stderr.strip().startswith("error:") and message in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and not sbatch_calls(log)


def test_pretrain_job_requeues_itself_near_the_time_limit(cluster, tmp_path):
    log = tmp_path / "stub"
    env = slurm_env(
        cluster,
        log,
        SLURM_JOB_ID="4243",
        SLURM_NNODES="1",
        SLURM_JOB_NODELIST="node-a",
        STUB_HOSTS="node-a",
        STUB_SRUN_SLEEP="3",
    )
    process = subprocess.Popen(
        [
            "bash",
            str(cluster["launch"] / "pretrain.sbatch"),
            "recipes/configs/debug.yaml",
            "recipes.pretrain",
            "recipes/accelerate/cpu.yaml",
            "8",
            "1",
        ],
        cwd=cluster["repo"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 30
    while not (log / "srun").exists():  # srun started: the trap is set
        assert process.poll() is None and time.time() < deadline, process.stderr.read() if process.stderr else ""
        time.sleep(0.05)
    process.send_signal(signal.SIGUSR1)  # what --signal=B:USR1@600 sends
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err  # the exit status of srun, not of the interrupted wait
    assert (log / "scontrol").read_text().split() == ["requeue", "4243"]
    assert "time limit near" in out


# --------------------------------------------------------------------------------- real launches (2 CPU processes)
@pytest.fixture(scope="module")
def two_node_run(cluster):
    """The data prepared once (`recipes.prepare_data`), then the generated pretrain.sbatch as a 2-node SLURM job
    of 1 process per node: stub srun starts both nodes' `accelerate launch` on this host."""
    repo, cache = cluster["repo"], cluster["base"] / "pretrain-cache"
    log = cluster["base"] / "stub-two-nodes"
    env = slurm_env(
        cluster,
        log,
        SLURM_JOB_ID="4242",
        SLURM_NNODES="2",
        SLURM_JOB_NODELIST="node-[a-b]",
        STUB_HOSTS="127.0.0.1 127.0.0.2",
        GPUS_PER_NODE="1",
        DATA_CACHE=str(cache),
        MASTER_PORT=str(free_port()),
    )
    prepared = prepare_data.prepare_pretraining(
        [
            "--config",
            "recipes/configs/debug.yaml",
            "--data_cache_dir",
            str(cache),
            *RUN[:4],
            "--max_steps",
            "4",
            "--global_batch_size",
            "4",
        ]
    )
    cached = {p.name: p.stat().st_mtime_ns for p in cache.rglob("*") if p.is_file()}
    output_dir = repo / "out" / "two-nodes"
    result = run(
        [
            "bash",
            str(cluster["launch"] / "pretrain.sbatch"),
            "recipes/configs/debug.yaml",
            "recipes.pretrain",
            "recipes/accelerate/cpu.yaml",
            "4",
            "2",
            *RUN,
            "--output_dir",
            str(output_dir),
        ],
        env,
        repo,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return {
        "output_dir": output_dir,
        "log": log,
        "cache": cache,
        "cached": cached,
        "prepared": prepared,
        "result": result,
        "env": env,
    }


@pytest.mark.slow
def test_pretrain_job_launches_one_accelerate_per_node(two_node_run):
    output_dir, srun = two_node_run["output_dir"], (two_node_run["log"] / "srun").read_text().splitlines()
    assert srun[:6] == ["--nodes", "2", "--ntasks", "2", "--ntasks-per-node", "1"]
    command = srun[-1]  # bash -c "<launcher> --machine_rank "$SLURM_NODEID" <program>", expanded on each node
    assert srun[-3:-1] == ["bash", "-c"] and '--machine_rank "$SLURM_NODEID"' in command
    for expected in (
        "--num_machines 2",
        "--num_processes 2",
        "--main_process_ip 127.0.0.1",
        f"--main_process_port {two_node_run['env']['MASTER_PORT']}",
        "--gradient_accumulation_steps 1",
        "--per_device_train_batch_size 2",
    ):
        assert expected in command
    # the data prepared once: the job read the cache and wrote nothing to it
    cache = {p.name: p.stat().st_mtime_ns for p in two_node_run["cache"].rglob("*") if p.is_file()}
    assert cache == two_node_run["cached"]
    assert two_node_run["prepared"]["steps"] >= 4
    # node r reads micro-batch r of every step: together they read blocks 0..15 once, in order
    ranks = [
        [json.loads(line) for line in (output_dir / f"block_order-rank{r}.jsonl").read_text().splitlines()]
        for r in (0, 1)
    ]
    assert [rec["blocks"] for rec in ranks[0]] == [[0, 1], [4, 5], [8, 9], [12, 13]]
    assert [rec["blocks"] for rec in ranks[1]] == [[2, 3], [6, 7], [10, 11], [14, 15]]
    assert [rec["causal"] for rec in ranks[0]] == [rec["causal"] for rec in ranks[1]] == [True, True, False, False]
    info = json.loads((output_dir / "run_info.json").read_text())
    assert info["steps"] == 4 and info["run_config"]["training_args"]["world_size"] == 2
    assert info["tokens_seen"] == 4 * 4 * 64
    model = AutoModelForMaskedLM.from_pretrained(output_dir / "checkpoint-4", trust_remote_code=True)
    assert torch.isfinite(model(input_ids=torch.arange(10).unsqueeze(0)).logits).all()
    assert "find_unused_parameters=True" not in two_node_run["result"].stderr  # ddp_find_unused_parameters: false


def weights(directory: Path) -> dict:
    return load_file(str(directory / "model.safetensors"))


def assert_same_weights(a: Path, b: Path) -> None:
    # Bit-identical: the same blocks and masks per step, and the loss divided by the step's token count over all
    # processes; with 2 processes DDP's sum of 2 x each half-gradient, halved, is the sum of the halves exactly.
    expected, got = weights(a), weights(b)
    assert expected.keys() == got.keys() and all(torch.equal(expected[k], got[k]) for k in expected)


@pytest.mark.slow
def test_resume_on_one_process_is_exact(two_node_run, tmp_path, tmp_path_factory):
    """A 2-process run's checkpoint resumed by 1 process with 2 accumulation steps (same global batch of 4)."""
    reference = two_node_run["output_dir"]
    resumed = tmp_path / "resumed"
    result = run(
        [
            PYTHON,
            "-m",
            "recipes.pretrain",
            "--config",
            "recipes/configs/debug.yaml",
            *RUN,
            "--data_cache_dir",
            str(two_node_run["cache"]),
            "--output_dir",
            str(resumed),
            "--per_device_train_batch_size",
            "2",
            "--gradient_accumulation_steps",
            "2",
            "--resume_from_checkpoint",
            str(reference / "checkpoint-2"),
        ],
        two_node_run["env"],
        ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    steps = [json.loads(line) for line in (resumed / "block_order-rank0.jsonl").read_text().splitlines()]
    assert [(s["step"], s["blocks"]) for s in steps] == [(3, [8, 9]), (3, [10, 11]), (4, [12, 13]), (4, [14, 15])]
    assert_same_weights(reference, resumed)


@pytest.mark.slow
def test_killed_run_resumes_exactly_on_two_processes(two_node_run, tmp_path):
    """A 1-process run (2 accumulation steps) SIGKILLed after checkpoint 2, resumed by the same command on 2
    processes (1 accumulation step): auto-resume from its own output_dir."""
    env, killed = two_node_run["env"], tmp_path / "killed"
    common = [
        "--config",
        "recipes/configs/debug.yaml",
        *RUN,
        "--data_cache_dir",
        str(two_node_run["cache"]),
        "--output_dir",
        str(killed),
        "--per_device_train_batch_size",
        "2",
    ]
    process = subprocess.Popen(
        [PYTHON, "-m", "recipes.pretrain", *common, "--gradient_accumulation_steps", "2"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    marker, deadline = killed / "checkpoint-2" / "trainer_state.json", time.time() + 240
    while not marker.exists():
        if process.poll() is not None or time.time() > deadline:
            process.kill()
            pytest.fail(f"run ended before checkpoint-2: {process.stderr.read().decode()[-2000:]}")
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=60)
    assert not (killed / "run_info.json").exists()
    result = run(
        [
            PYTHON,
            "-m",
            "accelerate.commands.launch",
            "--config_file",
            "recipes/accelerate/cpu.yaml",
            "--num_processes",
            "2",
            "--main_process_port",
            str(free_port()),
            "-m",
            "recipes.pretrain",
            *common,
            "--gradient_accumulation_steps",
            "1",
        ],
        env,
        ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((killed / "run_config.json").read_text())["training_args"]["world_size"] == 2
    assert_same_weights(two_node_run["output_dir"], killed)


def parse(argv: list[str]):
    return pretrain.make_parser().parse_args_and_config(["--config", "recipes/configs/debug.yaml", *RUN, *argv])


@pytest.mark.slow
def test_resume_with_another_global_batch_is_refused(two_node_run):
    output_dir = str(two_node_run["output_dir"])
    message = (
        r"trained with a global batch of 4 blocks \(2 processes x 2 per device x 1 accumulation steps\) "
        r"but this launch gives 2 .*gradient_accumulation_steps 2"
    )
    with pytest.raises(ValueError, match=message):
        check_output_dir(*parse(["--output_dir", output_dir, "--per_device_train_batch_size", "2"]))
    with pytest.raises(ValueError, match="belongs to a run with other settings .*average_tokens_across_devices"):
        check_output_dir(
            *parse(
                [
                    "--output_dir",
                    output_dir + "-other",
                    "--per_device_train_batch_size",
                    "4",
                    "--average_tokens_across_devices",
                    "false",
                    "--resume_from_checkpoint",
                    output_dir + "/checkpoint-2",
                ]
            )
        )
    # the same global batch on 1 process is accepted: auto-resume from the newest checkpoint
    resume = check_output_dir(*parse(["--output_dir", output_dir, "--per_device_train_batch_size", "4"]))
    assert resume == output_dir + "/checkpoint-4"
    # a decay branch (3 steps, its 1-step decay from step 2) follows the same rule against its stable run
    branch = ["--output_dir", output_dir + "-branch", "--branch_from", output_dir, "--max_steps", "3"]
    assert check_output_dir(*parse([*branch, "--per_device_train_batch_size", "4"])) == output_dir + "/checkpoint-2"
    with pytest.raises(ValueError, match="the stable run .* trained with a global batch of 4 blocks"):
        check_output_dir(*parse([*branch, "--per_device_train_batch_size", "2"]))


def test_layout_change_needs_the_loss_over_all_processes():
    stored = {
        "training_args": {
            "world_size": 2,
            "per_device_train_batch_size": 2,
            "gradient_accumulation_steps": 1,
            "average_tokens_across_devices": False,
        }
    }
    same_batch = {"training_args": {**stored["training_args"], "world_size": 1, "gradient_accumulation_steps": 2}}
    with pytest.raises(ValueError, match="average_tokens_across_devices is false"):
        check_batch_layout(stored, same_batch, "out/x")
    check_batch_layout(stored, stored, "out/x")  # unchanged layout: nothing to check


@pytest.mark.slow
def test_eval_array_task_runs_its_grid_line(two_node_run, cluster, tmp_path):
    model = two_node_run["output_dir"]
    grid = tmp_path / "grid.tsv"
    grid.write_text(f"first={model}\tsst2\t0.0001\t0\ntiny={model}\tsst2\t0.0002\t1\n")
    env = slurm_env(
        cluster,
        tmp_path / "stub",
        SLURM_ARRAY_TASK_ID="1",
        RESULTS=str(tmp_path / "results"),
        EVAL_SOURCE="offline",
        EVAL_ARGS="--max_steps 2 --max_train 32 --max_eval 16 --max_length 64",
    )
    result = run(["bash", str(cluster["launch"] / "eval_grid.sbatch"), str(grid), "1"], env, cluster["repo"])
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads((tmp_path / "results" / "tiny" / "sst2" / "lr0.0002-seed1.json").read_text())
    assert record["model"] == "tiny" and record["seed"] == 1 and not (tmp_path / "results" / "first").exists()
    beyond = run(
        ["bash", str(cluster["launch"] / "eval_grid.sbatch"), str(grid), "2"], env, cluster["repo"], timeout=60
    )
    assert beyond.returncode == 2 and f"{grid} has no line 3" in beyond.stderr


def test_prepare_refuses_too_few_blocks(cluster, capsys):
    with pytest.raises(SystemExit) as exit_status:
        prepare_data.main(
            [
                "pretraining",
                "--config",
                "recipes/configs/debug.yaml",
                "--data_cache_dir",
                str(cluster["base"] / "pretrain-cache"),
                *RUN[:4],
                "--max_steps",
                "100000",
                "--global_batch_size",
                "4",
            ]
        )
    error = capsys.readouterr().err.strip()
    assert exit_status.value.code == 2 and error.startswith("error: ") and len(error.splitlines()) == 1
    assert "the run needs 400,000 blocks (25,600,000 tokens, from block 0)" in error


def test_prepare_loads_every_evaluation_task_once(capsys):
    prepare_data.main(["evaluation", "--tasks", "sst2,scifact", "--source", "offline"])  # the array reads --source hub
    out = capsys.readouterr().out
    assert out.startswith("sst2: train ") and "\nscifact: train " in out
    with pytest.raises(SystemExit) as exit_status:  # every name is checked before anything is loaded
        prepare_data.main(["evaluation", "--tasks", "sst2,nope"])
    assert exit_status.value.code == 2 and "unknown task 'nope'" in capsys.readouterr().err
