"""What decides a fine-tuning result, so a result is never reused for something else (docs/protocol.md, "What a
result's identity covers"): `model` (config, weights, tokenizer and remote-code files), `task` (definition and data
files), `protocol` and `inputs` (the settings its family reads, `finetune_args.SETTINGS`, and what they resolve to on
the model) and `scoring`, the declared versions below: a change that moves a family's outputs fails its golden test
(tests/test_scoring.py) until its version is bumped. `python -m evaluation.identity --migrate RESULTS_DIR` makes older
results current (`migrate`).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os

from core import artifacts, cli, store
from evaluation import finetune_args, tasks

TASK_FREE_TEXT = {"description", "notes", "path"}
# Bump a family's version when its per-instance outputs or scores move (its reader, inputs, head, post-processing or
# metric), PROTOCOL_VERSION when the shared fine-tuning loop moves every family's; then regenerate the golden files.
# ir 2: a query with no judgement >= 1 is not evaluated under graded relevance either, and --max_eval samples among
# the evaluated queries (issue 54; the same outputs where every query has a relevant document, as the bundle's).
SCORING_VERSIONS = {"sc": 1, "tc": 1, "qa": 1, "ir": 2}
PROTOCOL_VERSION = 1
FORMAT2_VERSION = 1  # what `--migrate` gives a format-2 result: the versions of the code that wrote format 2


@functools.lru_cache(maxsize=None)
def _file_hash(path: str, size: int, mtime_ns: int) -> str:
    return artifacts.file_sha256(path)  # cached per (path, size, mtime)


def scoring_identity(family: str) -> dict:
    """The declared versions of the code that fine-tunes and scores a family: {"protocol": .., family: ..}."""
    return {"protocol": PROTOCOL_VERSION, family: SCORING_VERSIONS[family]}


def task_identity(task: tasks.Task, source: str, data_dir) -> dict:
    """A task's definition (`Task.as_dict()`, free text left out) hashed, and its data files' hashes."""
    definition = {k: v for k, v in task.as_dict().items() if k not in TASK_FREE_TEXT}
    paths = tasks.data_files(task, source, data_dir)
    files = {_data_key(p, paths): _file_hash(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in paths}
    definition_hash = hashlib.sha256(json.dumps(definition, sort_keys=True, default=str).encode()).hexdigest()
    return {"definition": definition_hash, "source": source, "data": files}


def _data_key(path, paths) -> str:
    """How a task's identity names one of its data files `paths`: its file name, or its path from the common folder
    of its namesakes (a/train.tsv, b/train.tsv); never where the data sits, so moved data keeps the identity."""
    namesakes = [str(p) for p in paths if p.name == path.name]
    return path.name if len(namesakes) == 1 else os.path.relpath(path, os.path.commonpath(namesakes))


# The protocol settings that can change the score of a `family` result: `protocol_identity(protocol, family)`.
protocol_identity = finetune_args.identity_settings


def scoped(family: str, ident: dict) -> dict:
    """A recorded identity without the protocol and input settings `family` does not read."""
    return {
        part: {k: v for k, v in value.items() if finetune_args.reads(family, k)}
        if part in ("protocol", "inputs") and isinstance(value, dict)
        else value
        for part, value in ident.items()
    }


def ir_training_key(task: tasks.Task, pairs, schedule) -> str:
    """A sha256 digest of what an ir task's fine-tuning depends on besides the model, protocol, lr and seed
    (training pairs, prompts, `schedule`): equal keys (MS MARCO, NQ, MLDR) train one model."""
    digest = hashlib.sha256(json.dumps([task.query_prefix, task.document_prefix, list(schedule), len(pairs)]).encode())
    for column in ("query", "positive"):
        digest.update(b"\x01" + "\x00".join(pairs[column]).encode())
    return digest.hexdigest()


def _migrated_identity(record: store.Result) -> dict:
    """A recorded identity made current: format 2's `code` replaced by `FORMAT2_VERSION`s, `scoped`."""
    ident = {k: v for k, v in (store.record_identity(record) or {}).items() if k != "code"}
    if record["format"] == 2:
        ident["scoring"] = {"protocol": FORMAT2_VERSION, record["family"]: FORMAT2_VERSION}
    return scoped(record["family"], ident)


def migrate(results_dir: str | os.PathLike) -> int:
    """Make every result under `results_dir` (and its saved model's `finetune_info.json`) current, once (format
    3, `scoped`, its folder claimed) and return how many were rewritten; everything is checked before anything
    is written (a corrupt or unknown file, an unclaimed folder of several protocols stop it)."""
    paths = store.result_files(results_dir)
    if not paths:
        raise FileNotFoundError(f"no result files under {results_dir} (<model>/<task>/lr<lr>-seed<seed>.json)")
    records = {path: store.read_result(path, migrating=True) for path in paths}
    current = {}
    for path, record in records.items():
        try:
            current[path] = store.migrated(record, _migrated_identity(record))
        except ValueError as error:
            raise ValueError(f"result file {path}: {error}; re-run its grid") from None
    new = {path: store.record_identity(record) for path, record in current.items()}
    old = [path for path in paths if current[path] != records[path]]
    unclaimed: dict = {}
    for path in paths:
        if not (path.parent / store.PROTOCOL_NAME).is_file() and new[path].get("protocol") is not None:
            unclaimed.setdefault(path.parent, {})[json.dumps(new[path]["protocol"], sort_keys=True)] = new[path]
    if mixed := next((folder for folder, protocols in unclaimed.items() if len(protocols) > 1), None):
        raise ValueError(
            f"{mixed} holds results of {len(unclaimed[mixed])} protocols: one folder holds one; move "
            "the results of all but one out, then migrate again"
        )
    infos = {path: store.read_finetune_info(path.with_suffix(".model")) for path in old}
    for path in old:
        with store.lock(path, "migration of"):
            if info := infos[path]:
                store.write_finetune_info(
                    path.with_suffix(".model"),
                    {**{k: v for k, v in info.items() if k != "format"}, "identity": new[path]},
                )
            store.write_result(path, current[path])
    for folder, protocols in unclaimed.items():
        store.claim_protocol(folder, next(iter(protocols.values()))["protocol"])
    return len(old)


@cli.exit_on_write_failure
def main(argv: list[str] | None = None) -> None:
    """`python -m evaluation.identity --migrate RESULTS_DIR`: older results made current, once (`migrate`)."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--migrate", required=True, metavar="RESULTS_DIR", help="the grid's --output directory")
    args = parser.parse_args(argv)
    with cli.bad_input_exits():
        count = migrate(args.migrate)
    print(f"migrated {count} result file(s) under {args.migrate} to format {store.RESULT_FORMAT}")


if __name__ == "__main__":
    main()
