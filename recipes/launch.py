"""SLURM launch scripts and the checkpoint disk estimate of the paper plan (`recipes.plan.write_plan` calls them).

`write_launch_scripts` fills `<plan>/launch/` (docs/cluster.md): `submit.sh`, `prepare_data.sbatch`,
`pretrain.sbatch`, `eval_grid.sbatch` and `pretrain.sh` (one machine, no SLURM), each described in its header. No
absolute path: they run from the repository root; what differs between clusters is an environment variable.
"""

import copy
import functools
import shlex
from pathlib import Path

import torch

from core import artifacts, cli, paper
from modeling_eurobert import EuroBertClmMlmForMaskedLM, load_architecture
from recipes import manifest

ACCELERATE_CONFIG = "recipes/accelerate/multi_gpu.yaml"  # DDP; see `write_launch_scripts` for why not FSDP
# Bytes per parameter: fp32 weights (the Trainer keeps fp32 master weights under bf16 autocast); a DDP Trainer
# checkpoint adds AdamW's two fp32 moments (optimizer.pt); an FSDP FULL_STATE_DICT one also writes the weights a
# second time for resuming (pytorch_model_fsdp.bin, optimizer.bin).
WEIGHT_BYTES, DDP_CHECKPOINT_BYTES, FSDP_CHECKPOINT_BYTES = 4, 12, 16
TOKEN_CACHE_BYTES = 8  # int32 tokenized documents + int32 packed blocks, per corpus token

_ENV_SETUP = """\
set -eo pipefail
# environment: $SETUP if set (a script that loads modules, activates conda, ...), else the repository's .venv
if [[ -n "${SETUP:-}" ]]; then source "$SETUP"; else source .venv/bin/activate; fi
set -u"""


@functools.cache
def meta_model(size: str) -> EuroBertClmMlmForMaskedLM:
    """A paper-size model on the meta device (nothing allocated), to count and size."""
    with torch.device("meta"):
        return EuroBertClmMlmForMaskedLM(copy.deepcopy(load_architecture(size)))


def count_parameters(size: str) -> int:
    """Parameters of a paper-size model, LM head included."""
    return sum(p.numel() for p in meta_model(size).parameters())


def _configs(rows: list[dict]) -> dict[str, dict]:
    return {row["name"]: manifest.run_config(manifest.recipes()[row["name"]], "paper") for row in rows}


def checkpoint_disk(rows: list[dict]) -> list[dict]:
    """What each run of `recipes.plan.run_rows()` writes to disk, in bytes: `checkpoints` (one per save_steps, none
    deleted) and their `checkpoint_bytes`; `weights_bytes` (the exported and intermediate weights); `kept_bytes`
    (those weights and the checkpoints later runs start from: the decay-branch points, a CPT base's last one)."""
    table, configs = manifest.recipes(), _configs(rows)
    cpt_bases = {table[row["name"]].cpt_base for row in rows} - {None}
    out = []
    for row in rows:
        config, params = configs[row["name"]], count_parameters(row["size"])
        checkpoints = -(-row["steps"] // config["save_steps"])
        weights = (1 + len(config.get("intermediate_steps", []))) * params * WEIGHT_BYTES
        needed = len(config.get("decay_branches", [])) + (row["name"] in cpt_bases)
        out.append(
            {
                "name": row["name"],
                "parameters": params,
                "checkpoints": checkpoints,
                "checkpoint_bytes": checkpoints * params * DDP_CHECKPOINT_BYTES,
                "weights_bytes": weights,
                "kept_bytes": weights + needed * params * DDP_CHECKPOINT_BYTES,
            }
        )
    return out


def disk_lines(rows: list[dict]) -> list[str]:
    """The plan.md paragraph on disk space (checkpoints and the data cache)."""
    disk = checkpoint_disk(rows)
    largest = max(disk, key=lambda d: d["checkpoint_bytes"])
    total = sum(d["checkpoint_bytes"] + d["weights_bytes"] for d in disk)
    kept = sum(d["kept_bytes"] for d in disk)
    per_checkpoint = ", ".join(
        f"{size} {count_parameters(size) * DDP_CHECKPOINT_BYTES / 1e9:.1f} GB"
        for size in dict.fromkeys(r["size"] for r in rows)
    )
    save_steps = {c["save_steps"] for c in _configs(rows).values()}
    stream = _furthest_step(rows)
    tokens = stream * paper.PAPER_TOKENS_PER_STEP
    return [
        "",
        "## Disk",
        "",
        f"A Trainer checkpoint holds the fp32 weights and AdamW's two fp32 moments: {DDP_CHECKPOINT_BYTES} bytes per "
        f"parameter under DDP ({per_checkpoint}; {FSDP_CHECKPOINT_BYTES} with FSDP's FULL_STATE_DICT, which also "
        f"saves the weights for resuming). The runs save one every {'/'.join(f'{s:,}' for s in sorted(save_steps))} "
        f"steps and delete none: {sum(d['checkpoints'] for d in disk):,} checkpoints, {total / 1e12:.1f} TB with the "
        f"exported and intermediate weights (the largest run, {largest['name']}, "
        f"{largest['checkpoint_bytes'] / 1e12:.2f} TB). What later steps read (exported and intermediate weights, "
        f"the decay-branch checkpoints, the CPT bases' last checkpoints) is {kept / 1e12:.2f} TB; the other "
        f"checkpoints of a finished run may be deleted.",
        "",
        f"Data cache (`DATA_CACHE`): {TOKEN_CACHE_BYTES} bytes per corpus token (tokenized documents and packed "
        f"blocks, int32) over the whole corpus config ({manifest.PAPER_CORPUS_CONFIG}, about 350B tokens: about "
        f"{350e9 * TOKEN_CACHE_BYTES / 1e12:.1f} TB), plus the `datasets` download; the runs read the first "
        f"{tokens / 1e9:.0f}B tokens of the block order ({stream:,} steps: the longest CPT continues after its base).",
    ]


def _furthest_step(rows: list[dict]) -> int:
    """How far into the shared block order the runs read, in steps (a CPT run continues after its base)."""
    table = manifest.recipes()
    return max(r.steps + (table[r.cpt_base].steps if r.cpt_base else 0) for r in (table[row["name"]] for row in rows))


def write_launch_scripts(launch: Path, rows: list[dict], grid: list[str], tasks: tuple[str, ...]) -> list[Path]:
    """Write the launch scripts into `launch` for `recipes.plan.run_rows()` (prerequisites first), the grid's
    eval_grid.tsv lines (`NAME=DIR\\ttask\\tlr\\tseed`) and the `tasks` prepare_data downloads; return their paths.
    Every run uses DDP (`ACCELERATE_CONFIG`): FSDP has not been run on GPUs yet (`tests/test_fsdp.py`), and CPT with
    `keep_optimizer_state` reads the base's `optimizer.pt`, which an FSDP checkpoint does not have."""
    configs = _configs(rows)
    scratch = [name for name, config in configs.items() if "architecture" in config]
    data_keys = {_data_key(configs[name]) for name in scratch}
    if len(data_keys) != 1:  # the manifest gives every paper run one corpus, tokenizer and order: one preparation
        raise ValueError(f"paper runs read {len(data_keys)} different data settings; prepare_data handles one")
    first = configs[scratch[0]]
    global_batch, per_device = first["global_batch_size"], first["per_device_train_batch_size"]
    if any(
        (c["global_batch_size"], c["per_device_train_batch_size"]) != (global_batch, per_device)
        for c in configs.values()
    ):
        raise ValueError("paper runs differ in global or per-device batch; submit.sh passes one of each")
    prepare = (
        f"python -m recipes.prepare_data pretraining --config recipes/configs/paper/{scratch[0]}.yaml "
        f"--max_steps {_furthest_step(rows)} "
        f'--data_cache_dir "${{DATA_CACHE:-.cache/pretrain}}"\n'
        f"python -m recipes.prepare_data evaluation --tasks {','.join(tasks)} --source hub"
    )
    runs = [(row["name"], configs[row["name"]]["output_dir"], row["module"], row["size"], row["needs"]) for row in rows]
    files = {
        "submit.sh": _submit(runs, global_batch, per_device),
        "prepare_data.sbatch": _PREPARE.replace("@@PREPARE@@", prepare),
        "pretrain.sbatch": _PRETRAIN,
        "eval_grid.sbatch": _EVAL,
        "pretrain.sh": _sequential(runs, global_batch, per_device),
        "eval_grid.tsv": "\n".join(grid) + "\n",
    }
    written = []
    for name, text in files.items():
        text = text.replace("@@ENV_SETUP@@", _ENV_SETUP).replace("@@ACCELERATE@@", ACCELERATE_CONFIG)
        written.append(artifacts.write_text_atomic(launch / name, text))
        (launch / name).chmod(0o644 if name.endswith(".tsv") else 0o755)
    return written


def _data_key(config: dict) -> tuple:
    return tuple(
        str(config.get(k))
        for k in (
            "corpus_source",
            "corpus_name",
            "max_docs",
            "tokenizer_name_or_path",
            "block_size",
            "data_seed",
            "epochs",
        )
    )


def _size_var(size: str) -> str:
    return f"NODES_{size.upper()}"


def _submit(runs: list[tuple], global_batch: int, per_device: int) -> str:
    sizes = list(dict.fromkeys(run[3] for run in runs))
    lines = [
        f'pretrain {shlex.quote(name)} {shlex.quote(output_dir)} {module} "${_size_var(size)}" {shlex.quote(needs)}'
        for name, output_dir, module, size, needs in runs
    ]
    node_defaults = "\n".join(f"{_size_var(s)}=${{{_size_var(s)}:-1}}" for s in sizes)
    return (
        _SUBMIT.replace("@@NODE_DEFAULTS@@", node_defaults)
        .replace("@@NODE_VARS@@", " ".join(_size_var(s) for s in sizes))
        .replace("@@GLOBAL_BATCH@@", str(global_batch))
        .replace("@@PER_DEVICE@@", str(per_device))
        .replace("@@RUNS@@", "\n".join(lines))
        .replace("@@COUNT@@", str(len(runs)))
    )


def _sequential(runs: list[tuple], global_batch: int, per_device: int) -> str:
    lines = [
        f'[[ -f {shlex.quote(output_dir)}/run_info.json ]] || bash "$launch/pretrain.sbatch" '
        f'recipes/configs/paper/{name}.yaml {module} "$accelerate_config" {global_batch} {per_device}'
        for name, output_dir, module, _, _ in runs
    ]
    return _SEQUENTIAL.replace("@@RUNS@@", "\n".join(lines))


_SUBMIT = r"""#!/usr/bin/env bash
# Submit the paper study to SLURM (generated by `python -m recipes.study paper`). From the repository root:
#   bash <plan>/launch/submit.sh
#   e.g. PARTITION=gpu ACCOUNT=proj NODES_1B=2 bash study/paper/launch/submit.sh
# Order: prepare_data (downloads, tokenizes and packs once), then the @@COUNT@@ pretraining runs in the manifest's
# order, each with --dependency=afterok on the preparation and on its prerequisite (a decay branch on its stable
# run, CPT on its base), then the evaluation grid in arrays that wait for every pretraining job. A run already
# trained (run_info.json in its output_dir) is not submitted again, nor is a finished evaluation run redone: after a
# failure (its dependents are cancelled, --kill-on-invalid-dep) fix the cause and run the same command again.
# Prints "<name> <job id>" per job. Settings (environment variables, default in brackets):
#   PARTITION, ACCOUNT, QOS [the cluster's defaults]   EXTRA_SBATCH [none]: more sbatch options for every job
#   GPUS_PER_NODE [8]   NODES_210M, NODES_610M, NODES_1B [1]: nodes of one pretraining run; the global batch
#     (@@GLOBAL_BATCH@@ blocks) must split into nodes x GPUS_PER_NODE x PER_DEVICE_BATCH [@@PER_DEVICE@@]
#     x accumulation steps
#   ACCELERATE_CONFIG [@@ACCELERATE@@]   CPUS_PER_GPU [8]   MASTER_PORT [20000 + job id % 20000]
#   TIME_PREPARE [24:00:00]   TIME_PRETRAIN [48:00:00]: a job requeues itself 10 minutes before and resumes
#   TIME_EVAL [04:00:00]   MAX_RUNNING [256]: running tasks per evaluation array
#   ARRAY_MAX [1000]: tasks per array, at most the cluster's MaxArraySize - 1 (scontrol show config)
#   SETUP [the repository's .venv]: a script every job sources to set up its environment
#   DATA_CACHE [.cache/pretrain]: packed pretraining data   RESULTS [results/paper]   LOG_DIR [logs]
#   SKIP_PREPARE [0]: 1 when prepare_data.sbatch already ran (e.g. with bash on a login node, for clusters whose
#     compute nodes cannot reach the Hub)
set -euo pipefail
launch=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
die() { echo "error: $*" >&2; exit 2; }
[[ -f recipes/pretrain.py ]] || die "run submit.sh from the repository root (no recipes/pretrain.py in $PWD)"

export SETUP=${SETUP:-} DATA_CACHE=${DATA_CACHE:-.cache/pretrain} RESULTS=${RESULTS:-results/paper}
export GPUS_PER_NODE=${GPUS_PER_NODE:-8} PER_DEVICE_BATCH=${PER_DEVICE_BATCH:-@@PER_DEVICE@@}
@@NODE_DEFAULTS@@
ACCELERATE_CONFIG=${ACCELERATE_CONFIG:-@@ACCELERATE@@}
CPUS_PER_GPU=${CPUS_PER_GPU:-8} MAX_RUNNING=${MAX_RUNNING:-256} ARRAY_MAX=${ARRAY_MAX:-1000}
TIME_PREPARE=${TIME_PREPARE:-24:00:00} TIME_PRETRAIN=${TIME_PRETRAIN:-48:00:00} TIME_EVAL=${TIME_EVAL:-04:00:00}
log_dir=${LOG_DIR:-logs}

# every input is checked before the first sbatch
if [[ -n $SETUP ]]; then
  [[ -f $SETUP ]] || die "SETUP=$SETUP is not a file"
else
  [[ -f .venv/bin/activate ]] || die "no .venv in $PWD: create it (README quickstart) or set SETUP=<environment script>"
fi
[[ -f $ACCELERATE_CONFIG ]] || die "ACCELERATE_CONFIG=$ACCELERATE_CONFIG is not a file"
for var in GPUS_PER_NODE PER_DEVICE_BATCH @@NODE_VARS@@ CPUS_PER_GPU MAX_RUNNING ARRAY_MAX; do
  [[ ${!var} =~ ^[1-9][0-9]*$ ]] || die "$var=${!var} must be a positive integer"
done
for var in @@NODE_VARS@@; do
  devices=$((${!var} * GPUS_PER_NODE * PER_DEVICE_BATCH))
  ((@@GLOBAL_BATCH@@ % devices == 0)) ||
    die "$var=${!var}: the global batch of @@GLOBAL_BATCH@@ blocks does not split over ${!var} node(s)" \
      "x $GPUS_PER_NODE GPUs x $PER_DEVICE_BATCH per device"
done
for var in TIME_PREPARE TIME_PRETRAIN TIME_EVAL; do
  [[ ${!var} =~ ^([0-9]+-)?[0-9]+(:[0-9]{2}){0,2}$ ]] ||
    die "$var=${!var} is not a SLURM time ([days-]hours:minutes:seconds)"
done
SKIP_PREPARE=${SKIP_PREPARE:-0}
[[ $SKIP_PREPARE == [01] ]] || die "SKIP_PREPARE=$SKIP_PREPARE must be 0 or 1"
grid_lines=$(wc -l < "$launch/eval_grid.tsv")

common=(--parsable --kill-on-invalid-dep=yes)  # a job whose prerequisite failed is cancelled, not left pending
[[ -n ${PARTITION:-} ]] && common+=(--partition "$PARTITION")
[[ -n ${ACCOUNT:-} ]] && common+=(--account "$ACCOUNT")
[[ -n ${QOS:-} ]] && common+=(--qos "$QOS")
if [[ -n ${EXTRA_SBATCH:-} ]]; then read -r -a extra <<< "$EXTRA_SBATCH"; common+=("${extra[@]}"); fi
mkdir -p "$log_dir"

declare -A job
pretraining=()
submit() {  # KEY SBATCH_ARGS...: submit, record and print the job id
  local key=$1 id
  shift
  id=$(sbatch "${common[@]}" "$@") ||
    die "sbatch refused $key; submitted before it: ${job[*]:-none} (scancel them first)"
  job[$key]=${id%%;*}  # --parsable prints "id" or "id;cluster"
  printf '%s\t%s\n' "$key" "${job[$key]}"
}
after() {  # KEYS...: "--dependency=afterok:<ids>" for those submitted by this call (trained ones need no wait)
  local ids=() key
  for key; do [[ -n $key && -n ${job[$key]:-} ]] && ids+=("${job[$key]}"); done
  if ((${#ids[@]})); then local IFS=:; echo "--dependency=afterok:${ids[*]}"; fi
}
pretrain() {  # NAME OUTPUT_DIR MODULE NODES NEEDS
  local name=$1 output_dir=$2 module=$3 nodes=$4 needs=$5 dependency
  if [[ -f $output_dir/run_info.json ]]; then
    printf '%s\ttrained, not submitted (%s)\n' "$name" "$output_dir"
    return
  fi
  dependency=$(after prepare-data "$needs")
  submit "$name" --job-name "$name" --output "$log_dir/%x-%j.out" --nodes "$nodes" --ntasks-per-node 1 \
    --gres "gpu:$GPUS_PER_NODE" --cpus-per-task $((CPUS_PER_GPU * GPUS_PER_NODE)) --time "$TIME_PRETRAIN" \
    --signal B:USR1@600 --requeue --open-mode append ${dependency:+"$dependency"} \
    "$launch/pretrain.sbatch" "recipes/configs/paper/$name.yaml" "$module" "$ACCELERATE_CONFIG" @@GLOBAL_BATCH@@ \
    "$PER_DEVICE_BATCH"
  pretraining+=("$name")
}

if [[ $SKIP_PREPARE == 0 ]]; then
  submit prepare-data --job-name prepare-data --output "$log_dir/%x-%j.out" --ntasks 1 --cpus-per-task 16 \
    --time "$TIME_PREPARE" "$launch/prepare_data.sbatch"
fi

# NAME OUTPUT_DIR MODULE NODES NEEDS, prerequisites first
@@RUNS@@

# the grid: one array task per line, in arrays of at most ARRAY_MAX tasks, after every pretraining job
dependency=$(after prepare-data ${pretraining[@]+"${pretraining[@]}"})
for ((first = 1; first <= grid_lines; first += ARRAY_MAX)); do
  count=$((grid_lines - first + 1 < ARRAY_MAX ? grid_lines - first + 1 : ARRAY_MAX))
  submit "eval-grid-lines-$first-$((first + count - 1))" --job-name eval-grid --output "$log_dir/%x-%A_%a.out" \
    --array "0-$((count - 1))%$MAX_RUNNING" --ntasks 1 --gres gpu:1 --cpus-per-task "$CPUS_PER_GPU" \
    --time "$TIME_EVAL" \
    ${dependency:+"$dependency"} "$launch/eval_grid.sbatch" "$launch/eval_grid.tsv" "$first"
done
"""

_PREPARE = r"""#!/usr/bin/env bash
#SBATCH --job-name=prepare-data
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=16
#SBATCH --time=24:00:00
#SBATCH --output=logs/%x-%j.out
# Download and prepare every dataset once, before the jobs that read them offline (generated by
# `python -m recipes.study paper`; submit.sh submits it first): the tokenizer and the corpus, tokenized and
# packed into $DATA_CACHE and checked to cover the furthest step a run reads (the longest CPT continues after its
# base's blocks), then the evaluation tasks' datasets into the `datasets` cache. Needs the network: where compute
# nodes have none, run it on a login node from the repository root (bash <plan>/launch/prepare_data.sbatch) and
# submit with SKIP_PREPARE=1.
@@ENV_SETUP@@
@@PREPARE@@
"""

_PRETRAIN = r"""#!/usr/bin/env bash
#SBATCH --job-name=pretrain
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --gres=gpu:8
#SBATCH --cpus-per-task=64
#SBATCH --time=48:00:00
#SBATCH --output=logs/%x-%j.out
#SBATCH --signal=B:USR1@600
#SBATCH --requeue
#SBATCH --open-mode=append
# One pretraining run on SLURM_NNODES nodes x GPUS_PER_NODE GPUs (generated by `python -m recipes.study
# paper`; submit.sh passes the arguments and the nodes, partition, account and time):
#   sbatch pretrain.sbatch CONFIG MODULE ACCELERATE_CONFIG GLOBAL_BATCH PER_DEVICE_BATCH [OVERRIDES...]
# srun starts one `accelerate launch` per node: machine rank SLURM_NODEID, main process the first host of
# SLURM_JOB_NODELIST, SLURM_NNODES machines. Gradient accumulation = GLOBAL_BATCH / (processes x per-device batch),
# so any node count trains the same steps (and a resume may use another one). 10 minutes before the time limit
# the job requeues itself; the run then resumes from its newest checkpoint. Without SLURM (one machine with
# GPUS_PER_NODE GPUs): bash pretrain.sbatch ..., from the repository root.
@@ENV_SETUP@@
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1  # prepare_data filled the caches: no rank of any node calls the Hub
config=$1 module=$2 accelerate_config=$3 global_batch=$4 per_device=${PER_DEVICE_BATCH:-$5}
shift 5
nodes=${SLURM_NNODES:-1} gpus=${GPUS_PER_NODE:-8}
world=$((nodes * gpus))
if ((global_batch % (world * per_device))); then
  echo "error: a global batch of $global_batch blocks does not split over $nodes node(s) x $gpus GPUs" \
    "x $per_device per device" >&2
  exit 2
fi
launcher=(accelerate launch --config_file "$accelerate_config" --num_machines "$nodes" --num_processes "$world")
program=(-m "$module" --config "$config" --per_device_train_batch_size "$per_device"
         --gradient_accumulation_steps $((global_batch / (world * per_device)))
         --data_cache_dir "${DATA_CACHE:-.cache/pretrain}" "$@")
if [[ -z ${SLURM_JOB_ID:-} ]]; then
  exec "${launcher[@]}" --machine_rank 0 --main_process_ip 127.0.0.1 --main_process_port "${MASTER_PORT:-29500}" \
    "${program[@]}"
fi

hosts=$(scontrol show hostnames "$SLURM_JOB_NODELIST")  # one per line (not `| head -n 1`: SIGPIPE under pipefail)
main_ip=${hosts%%$'\n'*}
launcher+=(--main_process_ip "$main_ip" --main_process_port "${MASTER_PORT:-$((20000 + SLURM_JOB_ID % 20000))}")
echo "[$(date -Is)] job $SLURM_JOB_ID: $config, $nodes node(s) x $gpus GPUs, main process on $main_ip"
# --signal=B:USR1@600 reaches this shell: requeue (SLURM stops the job and starts it again; afterok waits for that)
requeue() {
  echo "[$(date -Is)] time limit near: requeue job $SLURM_JOB_ID"
  scontrol requeue "$SLURM_JOB_ID" ||
    echo "requeue refused: the run stops at the time limit; submit it again to resume" >&2
}
trap requeue USR1
# one task per node; each expands its own SLURM_NODEID as the machine rank
srun --nodes "$nodes" --ntasks "$nodes" --ntasks-per-node 1 --kill-on-bad-exit=1 \
  ${SLURM_CPUS_PER_TASK:+--cpus-per-task "$SLURM_CPUS_PER_TASK"} \
  bash -c "$(printf '%q ' "${launcher[@]}")--machine_rank \"\$SLURM_NODEID\" $(printf '%q ' "${program[@]}")" &
child=$!
while true; do
  status=0
  wait "$child" || status=$?
  kill -0 "$child" 2>/dev/null || break  # srun ended (a trapped signal also interrupts wait)
done
exit "$status"
"""

_EVAL = r"""#!/usr/bin/env bash
#SBATCH --job-name=eval-grid
#SBATCH --ntasks=1
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=8
#SBATCH --time=04:00:00
#SBATCH --output=logs/%x-%A_%a.out
# One fine-tuning run per array task (generated by `python -m recipes.study paper`): line
# FIRST + SLURM_ARRAY_TASK_ID of GRID, whose tab-separated columns are NAME=DIR, task, learning rate, seed.
#   sbatch --array=0-999%256 eval_grid.sbatch GRID FIRST           (submit.sh does this, ARRAY_MAX lines per array)
# A finished run is skipped, so a task can be submitted again. EVAL_ARGS adds evaluation.run options.
@@ENV_SETUP@@
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1  # prepare_data downloaded the datasets: no array task calls the Hub
grid=$1
line=$(($2 + SLURM_ARRAY_TASK_ID))
IFS=$'\t' read -r model task lr seed < <(sed -n "${line}p" "$grid") || true
if [[ -z ${seed:-} ]]; then
  echo "error: $grid has no line $line" >&2
  exit 2
fi
read -r -a extra <<< "${EVAL_ARGS:-}"
echo "[$(date -Is)] $model $task lr=$lr seed=$seed"
exec python -m evaluation.run --model "$model" --tasks "$task" --lrs "$lr" --seeds "$seed" \
  --output "${RESULTS:-results/paper}" --source "${EVAL_SOURCE:-hub}" ${extra[@]+"${extra[@]}"}
"""

_SEQUENTIAL = r"""#!/usr/bin/env bash
# Every paper pretraining run on this machine, one after another, prerequisites first, without SLURM (generated by
# `python -m recipes.study paper`; submit.sh is the SLURM route). From the repository root:
#   bash <plan>/launch/pretrain.sh           (GPUS_PER_NODE [8] GPUs; the settings of pretrain.sbatch apply)
# Trained runs (run_info.json in their output_dir) are skipped; an interrupted one resumes from its checkpoint.
set -euo pipefail
launch=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[[ -f recipes/pretrain.py ]] || { echo "error: run pretrain.sh from the repository root" >&2; exit 2; }
accelerate_config=${ACCELERATE_CONFIG:-@@ACCELERATE@@}
bash "$launch/prepare_data.sbatch"
@@RUNS@@
"""


def main(argv: list[str] | None = None) -> None:
    """`python -m recipes.launch` has no job of its own: it names the command that writes the paper plan."""
    cli.not_a_command(
        "recipes.launch",
        "python -m recipes.study paper --output DIR [--gpu H100] [--mfu 0.4]",
        "writes the paper plan with its launch scripts (DIR/launch/)",
    )


if __name__ == "__main__":
    main()
