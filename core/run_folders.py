"""Run folders: the files a pretraining run and a study leave (names, formats), and the provenance recorded beside
every checkpoint and result (`git_commit`, `package_versions`)."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

from core import names
from core.artifacts import read_json
from core.paths import REPO_ROOT

RUN_CONFIG_NAME = "run_config.json"  # resolved settings of a pretraining run, compared on resume
RUN_INFO_NAME = "run_info.json"  # provenance beside every saved model
INTERMEDIATE_DIR = "intermediate"  # <output_dir>/intermediate/step-<N>
LOCK_NAME = ".lock"  # held by the process that trains into an output_dir
# run_info.json (pretraining.provenance.make_run_info): what a checkpoint is and how it was made. `tokens_seen` is the
# run's own, `tokens_before_cpt` the starting model's (0 from scratch, its bases' for CPT, null for a base without
# run_info); `parameters`: `total` (the encoder's with the input embedding, without the LM head), `input_embedding`.
# Older formats are refused: retrain or re-save.
RUN_INFO_FORMAT = 4
# study.json (recipes.study): which study an output directory holds; format 2 adds `parameters` (a toy scale's one
# count, as its runs recorded it in run_info.json) once its models are pretrained.
STUDY_FORMAT = 2
RUN_INFO_KEYS = (
    "format",
    "name",
    "size",
    "objective",
    "mlm_probability",
    "steps",
    "switch_step",
    "cpt_base",
    "scale",
    "run_config",
    "training_args",
    "versions",
    "git_commit",
    "data",
    "tokens_seen",
    "tokens_before_cpt",
    "parameters",
)
# summary.csv (analysis.report): one row per model x task; the model cards read it back.
SUMMARY_COLUMNS = (
    "model",
    "task",
    "family",
    "metric",
    "best_lr",
    "n_seeds",
    "mean",
    "ci_low",
    "ci_high",
    "trivial_baseline",
    "entity_f1",
    "std",
    "val_mean",
    "stability_std",
    "lr_range",
    "n_runs",
    "n_diverged",
)


def intermediate_checkpoints(run_dir: str | os.PathLike) -> list[Path]:
    """The intermediate checkpoints a run saved, `<run_dir>/intermediate/step-<N>`, in step order ([] if none);
    ValueError for a folder there named `step-*` but not `step-<N>`."""
    folder = Path(run_dir) / INTERMEDIATE_DIR
    found = [p for p in folder.glob("step-*") if p.is_dir()] if folder.is_dir() else []
    if bad := sorted(p.name for p in found if intermediate_step(p) is None):
        raise ValueError(f"{folder} holds {bad}: intermediate checkpoints must be named step-<N>")
    return sorted(found, key=intermediate_step)


def intermediate_step(checkpoint_dir: str | os.PathLike) -> int | None:
    """N for an intermediate checkpoint `.../intermediate/step-<N>`, else None."""
    path = Path(checkpoint_dir)
    step = path.name.removeprefix("step-")
    return (
        int(step) if path.name.startswith("step-") and step.isdigit() and path.parent.name == INTERMEDIATE_DIR else None
    )


STUDY_RESULTS = "results"  # <study>/results: where a study's grid files its results, beside its study.json


def study_of(results_dir: str | os.PathLike) -> dict | None:
    """The study.json content of the study whose results folder `results_dir` is (`<study>/results`, study.json
    beside it), None for any other folder: a study's folder holds its own models' results only."""
    results_dir = Path(results_dir).resolve()
    marker = results_dir.parent / "study.json"
    if results_dir.name != STUDY_RESULTS or not marker.is_file():
        return None
    return read_json(marker, "study marker")


BM25 = "bm25"  # the model name a decoder study files its retrieval probes' lexical reference under


def is_study_model(study: dict, model: str) -> bool:
    """Whether `model` is a name a study files its own checkpoints' results under: one of its models (a replicate
    `-pseed<k>`, an intermediate checkpoint `-<paper step>`), unscaled (`core.names`); a decoder study's arms (a CPT
    arm's replicates `-pseed<k>`) and, with a retrieval probe, its BM25 reference (`BM25`)."""
    p = names.try_parse_name(model)
    run = p and p.scale is None and names.try_parse_name(p.replicate_group)
    definition = study.get("definition", {})
    arms = {arm["name"] for arm in definition.get("arms", ())}  # a decoder study's models
    arms |= {BM25} if any(probe["metric"] == "ndcg@10" for probe in definition.get("probes", ())) else set()
    return bool(run) and run.run_name in definition.get("models", ()) or names.split_replicate(model)[0] in arms


def read_run_info(directory: str | os.PathLike | None) -> dict | None:
    """The `run_info.json` of a saved model directory, None when it has none (a converted decoder, another encoder);
    ValueError (one line) when it is of another format or lacks keys."""
    if directory is None or not (Path(directory) / RUN_INFO_NAME).is_file():
        return None
    path = Path(directory) / RUN_INFO_NAME
    info = read_json(path, "run info")
    if not isinstance(info, dict) or info.get("format", 1) != RUN_INFO_FORMAT:
        found = info.get("format", 1) if isinstance(info, dict) else "unknown"
        raise ValueError(
            f"{path} is run_info format {found}, this code reads format {RUN_INFO_FORMAT}: retrain or "
            "re-save the checkpoint with the current recipes, or use the commit that wrote it"
        )
    missing = [key for key in RUN_INFO_KEYS if key not in info]
    if missing:
        raise ValueError(f"{path} lacks {missing}: re-save the checkpoint with the current recipes/pretrain.py")
    return info


def git_commit() -> str:
    """HEAD of the repository, with "-dirty" when tracked files have changes; "unknown" outside a git checkout."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def package_versions(*names: str) -> dict:
    """Versions of python, torch, transformers, datasets, accelerate and any other imported package named."""
    import importlib

    versions = {"python": platform.python_version()}
    for name in ("torch", "transformers", "datasets", "accelerate", *names):
        versions[name] = getattr(importlib.import_module(name), "__version__", "unknown")
    return versions
