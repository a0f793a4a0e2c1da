"""The model resolver of `evaluation.run` and `evaluation.mteb`: one `--model` entry (`DIR`, `org/name[@revision]`,
`NAME=DIR|ID`, split at the first '=' unless the entry is an existing path) to the name its results are filed
under, a local directory and, for a Hub model, its pinned source. A model saved by the grid (`--save_models`, it
holds `finetune_info.json`) is named `<base model>-<task>-lr<lr>-seed<seed>` unless `NAME=DIR`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import NamedTuple

from core import artifacts, model_folders, names, run_folders, store


class Resolved(NamedTuple):
    """One resolved `--model` entry."""

    name: str  # the results folder's name
    path: str  # the local directory (a Hub model: its snapshot in the Hub cache)
    source: str | None  # "org/name@commit" for a Hub model, None for a local directory
    finetune_info: dict | None  # the `finetune_info.json` of a model saved by the grid


_GENERIC_DIR = re.compile(r"(checkpoint|step)-(\d+)")
_COMMIT = re.compile(r"[0-9a-f]{40}")


def checkpoint_name(path: str | os.PathLike) -> str:
    """The name a study or a card files a checkpoint directory's results under: `model_name`, unscaled."""
    return model_name(str(path), scaled=False)[0]


def model_name(spec: str, scaled: bool = True) -> tuple[str, str]:
    """(name, directory) of one local `--model` entry: `NAME=DIR`, else run_info.json's name, else the directory
    name (`checkpoint-N` / `step-N`: `<run>-checkpoint-N`, `<run>-N`). With `scaled`, a study name carries the
    scale the run records, or `custom` (`core.names.run_scale`), so it never claims the paper's run."""
    name, path = split_spec(spec)
    path = path.rstrip("/")
    if not name:
        info_file = Path(path) / run_folders.RUN_INFO_NAME
        info = artifacts.read_json(info_file, "run info") if info_file.is_file() else {}
        recorded = info.get("name")
        name = recorded or Path(path).name
        if recorded and scaled and (parsed := names.try_parse_name(recorded)) and parsed.scale is None:
            name = names.scaled_name(recorded, names.run_scale(info, parsed))
        if not recorded and _GENERIC_DIR.fullmatch(name):
            run_dir = Path(path).resolve().parent
            run_dir = run_dir.parent if run_dir.name == run_folders.INTERMEDIATE_DIR else run_dir
            name = names.revision_name(run_dir.name, name)
    _check_name(name, spec)
    return name, path


def split_spec(spec: str) -> tuple[str, str]:
    """(NAME, location) of a `--model` entry split at its first '=', or ("", spec) without a name or when the whole
    entry is an existing path (`out/lr=1e-4/model`)."""
    name, sep, location = spec.partition("=")
    if not sep or Path(spec).expanduser().exists():
        return "", spec
    return name, location


def _check_name(name: str, spec: str) -> None:
    if not artifacts.is_folder_name(name) or "=" in name:  # a name is passed on as NAME=DIR (grid workers)
        raise ValueError(
            f"--model {spec!r}: {name!r} cannot name a results folder (no '/', '=' or leading '.'); use NAME=DIR"
        )


def resolve_model(spec: str) -> Resolved:
    """One `--model` entry resolved: a local directory, or a Hub id `org/name[@revision]` through the Hub cache,
    filed under its repo name (`@step-N`: `<repo>-N`; a branch or tag: `<repo>-<revision>`) unless `NAME=ID`."""
    name, location = split_spec(spec)
    repo_id, _, revision = location.partition("@")
    if Path(location).expanduser().exists() or Path(repo_id).expanduser().exists():
        info = store.read_finetune_info(location)
        if info and not name:
            spec = f"{names.finetuned_name(info['base_model'], info['task'], info['lr'], info['seed'])}={location}"
        return Resolved(*model_name(spec), None, info)
    model_folders.local_or_hub(repo_id, "model")  # a path that does not exist, or a malformed id: one line
    from huggingface_hub import snapshot_download

    try:  # the whole repo: its weights, config, tokenizer and modeling code
        path = snapshot_download(repo_id, revision=revision or None)
    except (OSError, ValueError) as error:  # offline and not cached, unknown repo or revision, network failure
        raise model_folders.hub_load_error(location, "model", error) from None
    if not name:
        name = repo_id.split("/")[-1]  # a bare id ("gpt2") is its own name
        if revision and not _COMMIT.fullmatch(revision):
            name = names.revision_name(name, revision)
    _check_name(name, spec)
    return Resolved(name, path, f"{repo_id}@{Path(path).name}", None)  # snapshot folders are named by commit
