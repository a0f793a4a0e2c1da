"""Where things are: the repository, the offline data bundle, and whether a source names a Hub id or a local path
(`is_local_path` / `is_hub_id`: the one rule every loader, check and card uses).

Resolution order: an explicit path (a command-line flag), then the environment variable `MLM_VS_CLM_DATA`, then
`../shared/data` beside the repository. Online runs use Hub dataset ids instead and never call this.
"""

import difflib
import os
from pathlib import Path

DATA_ENV_VAR = "MLM_VS_CLM_DATA"
REPO_ROOT = Path(__file__).resolve().parents[1]


def is_local_path(source: str) -> bool:
    """The one rule for "local path or Hub id?": a string is a local path when it exists, starts with `/`, `~`, `./`
    or `../` (or is `.` / `..`), has more than one `/`, or has one `/` and either cannot be a Hub repo id or names a
    folder that exists here (`out/my-decoder-cp`, a typo under `out/`, is a missing path, not a Hub id). A URL is
    not."""
    if Path(source).expanduser().exists() or source.startswith(("/", "~", "./", "../")) or source in (".", ".."):
        return True
    if "://" in source or "/" not in source:
        return False
    return source.count("/") > 1 or Path(source).parent.is_dir() or not _valid_repo_id(source)


def is_hub_id(source: str) -> bool:
    """A Hub repo id (`org/name`, dots allowed: `mlfoundations/dclm-baseline-1.0`; or a bare `name`): not a local
    path by `is_local_path`, accepted by `huggingface_hub`'s `validate_repo_id`, and not the word "bundle" (the
    offline data bundle)."""
    return source != "bundle" and not is_local_path(source) and _valid_repo_id(source)


def missing_path(source: str | os.PathLike, what: str) -> FileNotFoundError:
    """The one-line error for a local path that does not exist: `<what> <path>: no such directory`, with the nearest
    existing sibling when one is close (a typo: `out/my-decoder-cp` -> `did you mean out/my-decoder-cpt?`)."""
    text = str(source).rstrip("/")
    parent = Path(text).expanduser().parent
    hint = ""
    if parent.is_dir():
        siblings = [child.name for child in parent.iterdir() if not child.name.startswith(".")]
        if close := difflib.get_close_matches(Path(text).name, siblings, n=1, cutoff=0.6):
            hint = f" (did you mean {os.path.join(os.path.dirname(text), close[0])}?)"
    else:
        hint = f" (its folder {parent} does not exist either)"
    return FileNotFoundError(f"{what} {text}: no such directory{hint}")


def _valid_repo_id(source: str) -> bool:
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(source)
    except HFValidationError:
        return False
    return True


def resolve_data_dir(path: str | os.PathLike | None = None) -> Path:
    """The data bundle directory: `path` (from a flag), else `$MLM_VS_CLM_DATA`, else `../shared/data`; a one-line
    FileNotFoundError when it does not exist."""
    if path is not None:
        source, candidate = "the --data_dir flag", Path(path)
    elif os.environ.get(DATA_ENV_VAR):
        source, candidate = f"${DATA_ENV_VAR}", Path(os.environ[DATA_ENV_VAR])
    else:
        source, candidate = "the default ../shared/data", REPO_ROOT.parent / "shared" / "data"
    candidate = candidate.expanduser().resolve()
    if not candidate.is_dir():
        raise FileNotFoundError(
            f"data bundle not found at {candidate} (from {source}); pass --data_dir or set ${DATA_ENV_VAR}"
        )
    return candidate
