"""The results store: where a fine-tuning or mteb result is filed, how it is read, locked, replaced and written, and
the `finetune_info.json` beside a saved fine-tuned model. The grid (`evaluation.run`), `evaluation.mteb`, the study,
the report, the cards and the results dataset all go through here.

Layout: `<results>/<model>/<task>/lr<lr>-seed<seed>.json`; while a process works on a result it holds the lock
`.<file>.lock` beside it (`lock`); a result of another identity that is redone is first moved aside as
`<file>.replaced-<time>` (`move_aside`); a result is written atomically, after removing the temp files a killed
writer of the same file left (`write_result`).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

from core import artifacts

RESULT_FORMAT = 2  # 2: identity (model, task, protocol), predictions and git commit in every result file
RESULT_GLOB = "*/*/lr*-seed*.json"  # under a results directory: <model>/<task>/lr<lr>-seed<seed>.json
FINETUNE_INFO_NAME = "finetune_info.json"  # beside a saved fine-tuned model: its result's identity and scores
FINETUNE_INFO_FORMAT = 1


def result_path(output: str | os.PathLike, model: str, task: str, lr: float, seed: int) -> Path:
    """Where the grid files the result of one (model, task, learning rate, seed) run."""
    return Path(output) / model / task / f"lr{lr:g}-seed{seed}.json"


def result_files(results_dir: str | os.PathLike) -> list[Path]:
    """Every result file under a results directory (temp files of interrupted writes and moved-aside files are not)."""
    return sorted(p for p in Path(results_dir).glob(RESULT_GLOB) if not p.name.startswith("."))


def read_result(path: str | os.PathLike) -> dict:
    """A result file, refused in one line when corrupt or written by an older format."""
    record = artifacts.read_json(path, "result file")
    if not isinstance(record, dict) or record.get("format") != RESULT_FORMAT:
        found = record.get("format", 1) if isinstance(record, dict) else "unknown"
        raise ValueError(f"result file {path} has format {found}, this version reads {RESULT_FORMAT}: re-run its grid "
                         "with `python -m evaluation.run ... --rerun_changed` to replace it")
    return record


@contextlib.contextmanager
def lock(path: str | os.PathLike, what: str) -> Iterator[Path]:
    """Hold the lock of one result file (`.<file>.lock` beside it) for the block.

    Raises:
        artifacts.LockHeld: another process is working on this result.
    """
    path = Path(path)
    with artifacts.exclusive_lock(path.with_name(f".{path.name}.lock"), f"{what} {path}") as held:
        yield held


def move_aside(path: str | os.PathLike) -> Path:
    """Rename a result (or the model saved with it) to `<name>.replaced-<time>`, so it is kept but no longer read."""
    path = Path(path)
    aside = path.with_name(f"{path.name}.replaced-{time.strftime('%Y%m%dT%H%M%S')}")
    path.rename(aside)
    return aside


def write_result(path: str | os.PathLike, record: dict) -> Path:
    """Write a result atomically (one JSON line; `artifacts.atomic_file` first removes the temp files a killed writer
    of this very file left). Call it holding the result's `lock`."""
    return artifacts.write_json_atomic(path, record, indent=None)


def write_finetune_info(directory: str | os.PathLike, info: dict) -> Path:
    """Write the `finetune_info.json` of a saved fine-tuned model, with its format."""
    return artifacts.write_json_atomic(Path(directory) / FINETUNE_INFO_NAME, {"format": FINETUNE_INFO_FORMAT, **info})


def read_finetune_info(directory: str | os.PathLike) -> dict | None:
    """The `finetune_info.json` of a saved fine-tuned model, or None when the directory has none.

    Raises:
        ValueError: corrupt, or of another format (one line: what to do).
    """
    path = Path(directory) / FINETUNE_INFO_NAME
    if not path.is_file():
        return None
    info = artifacts.read_json(path, "fine-tuned model info")
    if not isinstance(info, dict) or info.get("format") != FINETUNE_INFO_FORMAT:
        found = info.get("format") if isinstance(info, dict) else "unknown"
        raise ValueError(f"{path} is finetune_info format {found}, this code reads format {FINETUNE_INFO_FORMAT}: "
                         "save the model again (`python -m evaluation.run ... --save_models`)")
    return info


def flatten(value, prefix: str = "") -> dict:
    """{"model": {"weights": {...}}} -> {"model.weights....": leaf}."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value}


def identity_diff(old: dict, new: dict) -> list[str]:
    """The fields where two identities differ, as "field: old -> new" (hashes shortened)."""
    a, b = flatten(old), flatten(new)
    out = []
    for key in sorted(a.keys() | b.keys()):
        if a.get(key) != b.get(key):
            out.append(f"{key}: {_short(a.get(key))} -> {_short(b.get(key))}")
    return out


def _short(value) -> str:
    if isinstance(value, str) and len(value) == 64:
        return value[:10]
    return repr(value)
