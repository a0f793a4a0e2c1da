"""Where the offline data bundle lives.

Resolution order: an explicit path (a command-line flag), then the environment variable `MLM_VS_CLM_DATA`, then
`../shared/data` beside the repository. Online runs use Hub dataset ids instead and never call this.
"""

import os
from pathlib import Path

DATA_ENV_VAR = "MLM_VS_CLM_DATA"
REPO_ROOT = Path(__file__).resolve().parents[1]


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
