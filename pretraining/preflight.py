"""What the pretraining command lines check before torch, datasets and the Trainer load (this module imports `core`
only): the `--config` file and the local paths they name. The parsed settings go through the same functions later,
whether a value came from the command line or the YAML (`settings.load_config`, `checks.check_sources`).
"""

import os
from pathlib import Path

from core import model_folders
from core.paths import REPO_ROOT, missing_path


def flag_value(argv: list[str], name: str) -> str | None:
    """The value of `--name VALUE` or `--name=VALUE` in `argv` (the last one given), or None: absent, or null."""
    value = None
    for i, arg in enumerate(argv):
        if arg == f"--{name}" and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(f"--{name}="):
            value = arg.split("=", 1)[1]
    return None if value is None or value.lower() in ("null", "none") else value


def config_file(path: str | os.PathLike) -> Path:
    """The recipe YAML `path`, which must exist: a relative path that does not is said relative to the current
    folder, with the recipe's own file when the repository holds one there (`recipes/configs/debug.yaml` given from
    another folder)."""
    path = Path(path)
    if not path.is_file():
        where = f" (relative to the current folder {Path.cwd()})" if not path.is_absolute() else ""
        if not path.is_absolute() and (REPO_ROOT / path).is_file():
            where += f"; the recipe's own config is {REPO_ROOT / path}: pass that path"
        raise FileNotFoundError(f"config file {path} does not exist{where}")
    return path


def check_paths(model_name_or_path: str | None, tokenizer_name_or_path: str | None, branch_from: str | None) -> None:
    """The paths a run reads exist (a Hub id is checked for its form only; loading it tells the rest)."""
    for what, source in (
        ("model_name_or_path", model_name_or_path),
        ("tokenizer_name_or_path", tokenizer_name_or_path),
    ):
        if source:
            model_folders.local_or_hub(source, what)
    if branch_from and not Path(branch_from).is_dir():
        raise FileNotFoundError(f"branch_from {branch_from} does not exist; train the stable run first")


def check_command_line(argv: list[str]) -> None:
    """Before the heavy imports: the `--config` file and the paths the path flags name exist (the rest of the
    settings is checked once they are parsed, `pretraining.pretrain.prepare`)."""
    if config := flag_value(argv, "config"):
        config_file(config)
    check_paths(*(flag_value(argv, name) for name in ("model_name_or_path", "tokenizer_name_or_path", "branch_from")))
    resume = flag_value(argv, "resume_from_checkpoint")
    if resume and not Path(resume).expanduser().exists():
        raise missing_path(resume, "--resume_from_checkpoint")
