"""What is published of the files a run wrote: the same records with every local path (`output_dir`, a local
`corpus_source`, a data file...) written `<local>/<last component>`, so a record keeps its keys and shape and still
says which run or file it was, without exposing the machine's layout. Hub ids, URLs and bare names are kept.
"""

import hashlib
from pathlib import Path

from core.paths import is_local_path

LOCAL = "<local>"
PLACEHOLDER_ORG = "your-org"  # namespace of repo ids when no --org/--repo_id is given; model_cards.push refuses it


def _public_text(text: str) -> str:
    parts = text.split(",") if "," in text and not any(c.isspace() for c in text) else [text]  # corpus_source lists
    return ",".join(f"{LOCAL}/{Path(p.rstrip('/')).name}" if is_local_path(p) else p for p in parts)


def without_local_paths(value):
    """A copy of a JSON-like value with every local path replaced, dict keys too (two keys that become equal are kept
    apart by a short hash of the original)."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            new_key = _public_text(key) if isinstance(key, str) else key
            if new_key in out:
                new_key = f"{new_key}#{hashlib.sha1(key.encode()).hexdigest()[:8]}"
            out[new_key] = without_local_paths(item)
        return out
    if isinstance(value, list):
        return [without_local_paths(item) for item in value]
    return _public_text(value) if isinstance(value, str) else value


def public_result(record: dict) -> dict:
    """A result record as published: its `config` and `identity` without local paths. Scores, predictions and
    references are data (an answer may contain a slash) and are never rewritten."""
    return {**record, **{k: without_local_paths(record[k]) for k in ("config", "identity") if k in record}}


def local_roots(*paths) -> list[str]:
    """Absolute local folders that must not appear in published files: the inputs, their parent and grandparent, the
    working and the home directory (roots of under two components, such as `/tmp`, are too short to search for)."""
    roots = {Path.cwd().resolve(), Path.home().resolve()}
    for path in filter(None, paths):
        resolved = Path(path).resolve()
        roots.update((resolved, resolved.parent, resolved.parent.parent))
    return sorted({str(r) for r in roots if len(r.parts) > 2}, key=len, reverse=True)


def check_repo_id(repo_id: str) -> None:
    """Refuse, in one line, a repo id the Hub would refuse (ORG/NAME, `huggingface_hub.utils.validate_repo_id`)."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise ValueError(f"repo id {repo_id!r} must be ORG/NAME")
    try:
        validate_repo_id(repo_id)
    except HFValidationError as error:
        raise ValueError(f"repo id {repo_id!r} would be refused by the Hub: {str(error).splitlines()[0]}") from None
