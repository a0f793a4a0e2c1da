"""Where things are: the repository, the offline data bundle, and whether a source names a Hub id or a local path.

Resolution order: an explicit path (a command-line flag), then the environment variable `MLM_VS_CLM_DATA`, then
`../shared/data` beside the repository. Online runs use Hub dataset ids instead and never call this.
"""

import os
from pathlib import Path

DATA_ENV_VAR = "MLM_VS_CLM_DATA"
REPO_ROOT = Path(__file__).resolve().parents[1]


def is_hub_id(source: str) -> bool:
    """A corpus source that names a Hub dataset (not "bundle", not a local path)."""
    return source != "bundle" and not looks_like_path(source)


def looks_like_path(source: str) -> bool:
    """A Hub id is "owner/name"; anything that exists, is absolute/relative-looking or has a file suffix is a path."""
    path = Path(source).expanduser()
    return path.exists() or source.startswith((".", "/", "~")) or source.count("/") != 1 or bool(path.suffix)


def resolve_data_dir(path: str | os.PathLike | None = None) -> Path:
    """Return the data bundle directory, raising a one-line error if it does not exist.

    Args:
        path: explicit directory (from a flag); falls back to `$MLM_VS_CLM_DATA`, then `../shared/data`.
    """
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
