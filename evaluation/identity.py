"""What decides a fine-tuning result, so a result is never reused for something else.

A result file `<output>/<model>/<task>/lr<lr>-seed<seed>.json` records the identity of what produced it:

- `model`: its config (content hash) and every weights, tokenizer and remote-code `*.py` file (size and sha256),
  hashed once per model and process (a 1B-parameter checkpoint takes seconds), never per run;
- `task`: its definition (the task YAML minus free text) and the sha256 of every local data file it reads;
- `protocol`: every fine-tuning setting that can change a score (steps, batch, lengths, subsets, precision...).
- `code`: the sha256 of each of this project's files that fine-tune and score (`FINETUNE_CODE`): an edit to any of
  them makes every stored result "changed" (library versions and the git commit are recorded, not compared);
- `inputs`: what the protocol resolves to on this model (`common.resolve_inputs`): the input length cap
  (round(0.99 * min(positions, 2048)) unless --max_length), the QA window and stride, the attention used.

How the grid runs (`--workers`, `--save_models`) is not part of it: neither changes a score. `ir_training_key` says
which retrieval tasks train the same model, so the grid trains it once for all of them.

The grid compares a finished result's identity with the current one: equal -> the run is skipped; different ->
refused with the differing fields named, unless `--rerun_changed` (then the old file is moved aside and the run
redone). The report refuses to average results of different identities in one row. `diff` names the fields.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os

from core import artifacts
from core.paths import REPO_ROOT
from evaluation import tasks

# Settings that never change a score: where files live, how often the loss is logged, how many workers run.
NOT_PROTOCOL = {"data_dir", "scratch_dir", "logging_steps", "workers"}
TASK_FREE_TEXT = {"description", "notes", "path"}
# The project's code that decides a score: data reading, fine-tuning, the four families, metrics, baselines, LoRA.
FINETUNE_CODE = ("core/lora.py", "evaluation/baselines.py", "evaluation/common.py", "evaluation/extractive_qa.py",
                 "evaluation/metrics.py", "evaluation/readers.py", "evaluation/retrieval.py",
                 "evaluation/sequence_classification.py", "evaluation/tasks.py", "evaluation/token_classification.py")


def _sha256_json(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def model_identity(model_path: str | os.PathLike) -> dict:
    """Content identity of a checkpoint directory: config, weights and tokenizer files
    (`artifacts.checkpoint_identity`)."""
    return artifacts.checkpoint_identity(model_path)


@functools.lru_cache(maxsize=None)
def _file_hash(path: str, size: int, mtime_ns: int) -> str:
    return artifacts.file_sha256(path)  # cached per (path, size, mtime)


def code_identity() -> dict:
    """The sha256 of each project file that fine-tunes and scores (`FINETUNE_CODE`), by path in the repository."""
    return {name: _file_hash(str(REPO_ROOT / name), *_stamp(REPO_ROOT / name)) for name in FINETUNE_CODE}


def _stamp(path) -> tuple[int, int]:
    stat = os.stat(path)
    return stat.st_size, stat.st_mtime_ns


def task_identity(task: tasks.Task, source: str, data_dir) -> dict:
    """Identity of a task: its definition (YAML fields that decide the data and the metric) and its data files.

    The definition is `Task.as_dict()`: every field, each source as the mapping its YAML wrote, so the typed source
    settings hash as the YAML mappings did (`tests/test_tasks.py` pins this).
    """
    definition = {k: v for k, v in task.as_dict().items() if k not in TASK_FREE_TEXT}
    files = {}
    for path in tasks.data_files(task, source, data_dir):
        stat = path.stat()
        key = path.name if path.name not in files else str(path)
        files[key] = _file_hash(str(path), stat.st_size, stat.st_mtime_ns)
    return {"definition": _sha256_json(definition), "source": source, "data": files}


def protocol_identity(protocol) -> dict:
    """Every protocol setting that can change a score (paths and logging excluded). The LoRA settings only with
    `--peft lora`, the pair encoding only with `--pair_encoding segments`: other results keep the identity they had
    before those settings existed."""
    skip = NOT_PROTOCOL | {"lr", "seed"} | ({"peft", "lora_rank", "lora_alpha"} if protocol.peft == "none" else set())
    skip |= {"pair_encoding"} if protocol.pair_encoding == "joined" else set()
    return {k: v for k, v in dataclasses.asdict(protocol).items() if k not in skip}


def ir_training_key(task: tasks.Task, pairs, schedule) -> str:
    """What an ir task's fine-tuning depends on besides the model, the protocol, the learning rate and the seed: the
    content of its (query, positive) training pairs, its prompts and its budget.

    Tasks with equal keys train the very same model (MS MARCO, NQ and MLDR all train on MS MARCO pairs), so the grid
    trains once and scores each of them. Hashing the pairs themselves (not the file names or Hub ids) also matches
    tasks that read the same pairs through different sources, and never matches tasks whose carved validation
    queries leave different pairs for training.

    Args:
        task: an ir task.
        pairs: its training `Dataset` (columns "query", "positive"), as `tasks.load_splits` returns it.
        schedule: (max_steps, epochs) of the task under the grid's protocol (`common.schedule`).

    Returns:
        A sha256 hex digest.
    """
    digest = hashlib.sha256(json.dumps([task.query_prefix, task.document_prefix, list(schedule), len(pairs)]).encode())
    for column in ("query", "positive"):
        digest.update(b"\x01" + "\x00".join(pairs[column]).encode())
    return digest.hexdigest()
