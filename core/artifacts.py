"""The files this project writes, and how it writes them: names, atomic writes, locks and provenance.

Every file a tool of this project writes goes through here, so that a kill at any point (even SIGKILL) leaves either
the old file or the new one, never half of one:

- `atomic_file` (and `write_json_atomic` / `write_text_atomic`): a temp file in the same directory, then
  `os.replace`;
- `atomic_directory`: build a whole directory (a tokenizer, a checkpoint export) in a hidden sibling, then rename;
  it never removes a folder that appeared or changed while it was being built (`DirectoryChanged`);
- files and folders get the modes the umask gives (0644 / 0755 under umask 022), as any other writer's, the weights
  that safetensors writes 0600 included (`follow_umask`);
- both first remove the temp files and folders a killed writer of the same target left (`remove_stale_temp_files`:
  only `.<name>.<random>.tmp` beside it that no live writer holds locked);
- `read_json`: a one-line error naming the file when it is missing or not valid JSON;
- `exclusive_lock`: an advisory `flock` on a lock file, so two processes never write the same run or result;
- `git_commit` / `package_versions`: recorded beside every checkpoint and result.

File names shared by the pretraining recipes, the study, the evaluation grid and the cards live here too.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import glob
import hashlib
import json
import os
import platform
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

from core import names
from core.paths import REPO_ROOT, is_hub_id, is_local_path, missing_path

RUN_CONFIG_NAME = "run_config.json"  # resolved settings of a pretraining run, compared on resume
RUN_INFO_NAME = "run_info.json"  # provenance beside every saved model
INTERMEDIATE_DIR = "intermediate"  # <output_dir>/intermediate/step-<N>
LOCK_NAME = ".lock"  # held by the process that trains into an output_dir
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json")  # any one: a tokenizer folder

# run_info.json (pretraining.provenance.make_run_info): what a checkpoint is and how it was made; read by the cards, the
# study, the held-out loss and the CPT and resume checks. Format 2 named the PFS switch `switch_step` and the
# manifest scale `scale`; format 3 adds `tokens_before_cpt`, the tokens the starting model had seen before the run
# (0 from scratch, the base's own plus its bases' for CPT, null for a base without run_info). `tokens_seen` is the
# run's own. Older formats are refused: retrain or re-save.
RUN_INFO_FORMAT = 3
# study.json (recipes.study): which study an output directory holds. A file without "format" is format 1: the
# committed docs/mini-study archive's predates the key.
STUDY_FORMAT = 1
RUN_INFO_KEYS = ("format", "name", "size", "objective", "mlm_probability", "steps", "switch_step", "cpt_base", "scale",
                 "run_config", "training_args", "versions", "git_commit", "data", "tokens_seen",
                 "tokens_before_cpt")
# summary.csv (analysis.report): one row per model x task; the model cards read it back.
SUMMARY_COLUMNS = ("model", "task", "family", "metric", "best_lr", "n_seeds", "mean", "ci_low", "ci_high",
                   "trivial_baseline", "entity_f1", "std", "val_mean", "stability_std", "lr_range", "n_runs",
                   "n_diverged")


class LockHeld(RuntimeError):
    """Another live process holds the lock."""


class WriteFailed(OSError):
    """A write that failed (disk full, quota, `ulimit -f`, permissions), raised by the atomic writers once what they
    were writing is removed: `str()` is one line naming the file; `errno` is the failure's (`out_of_room` reads it)."""

    def __init__(self, path: str | os.PathLike, error: BaseException):
        super().__init__(getattr(error, "errno", None) or errno.EIO, str(error))
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        why = ("it ran out of disk space or hit the file size limit: free space and rerun" if out_of_room(error)
               else "nothing was written there: fix that and rerun")
        self.message = f"cannot write {path} ({first}); {why}"

    def __str__(self) -> str:
        return self.message


def _write_failure(path: Path, error: BaseException) -> BaseException | None:
    """The `WriteFailed` to raise for `error` raised while writing `path` (None: not a write failure)."""
    if isinstance(error, WriteFailed) or not (isinstance(error, OSError) or out_of_room(error)):
        return None
    return WriteFailed(path, error)


# ------------------------------------------------------------------------------------------------------ writing
@contextlib.contextmanager
def atomic_file(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temp file path beside `path` for any writer (text, Arrow); on success it replaces `path` in one
    rename, on any error it is removed: readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temp_files(path)
    tmp, held = _claimed_temp(path, directory=False)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException as error:
        tmp.unlink(missing_ok=True)
        if failed := _write_failure(path, error):
            raise failed from error
        raise
    finally:
        os.close(held)


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write `text` to `path` atomically (`atomic_file`), fsynced before the rename."""
    with atomic_file(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    return Path(path)


def save_figure(fig, path: str | os.PathLike) -> Path:
    """Save a matplotlib figure (PNG, 100 dpi, tight) atomically (`atomic_file`), then close it."""
    import matplotlib.pyplot as plt

    try:
        with atomic_file(path) as tmp:
            fig.savefig(tmp, format=Path(path).suffix[1:], dpi=100, bbox_inches="tight")
    finally:
        plt.close(fig)
    return Path(path)


def write_json_atomic(path: str | os.PathLike, payload, indent: int | None = 2) -> Path:
    """Write `payload` as JSON atomically (NaN/inf refused: they are not JSON)."""
    return write_text_atomic(path, json.dumps(payload, indent=indent, allow_nan=False, default=str) + "\n")


def _claimed_temp(path: Path, directory: bool) -> tuple[Path, int]:
    """Create a temp file or folder `.<name>.<random>.tmp` beside `path` and hold an exclusive `flock` on it while
    it is written, so that `remove_stale_temp_files` of a concurrent writer of `path` leaves it alone; returns
    (temp, the descriptor that holds the lock)."""
    while True:
        if directory:
            tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
        else:
            fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            os.close(fd)
            tmp = Path(name)
        tmp.chmod((0o777 if directory else 0o666) & ~_umask())  # mkstemp's 0600 / mkdtemp's 0700 would stay
        held = os.open(tmp, os.O_RDONLY)
        fcntl.flock(held, fcntl.LOCK_EX)
        if tmp.exists() and os.stat(tmp).st_ino == os.fstat(held).st_ino:
            return tmp, held
        os.close(held)  # removed as stale in the instant before the lock: make another


def follow_umask(directory: str | os.PathLike) -> None:
    """Give every file under `directory` the mode the umask gives (0644 under umask 022): safetensors' writer (model
    weights, LoRA adapters, in every `save_pretrained` and Trainer checkpoint) creates 0600 files that a teammate
    cannot load. Called once a folder is written: by `atomic_directory` and on every saved checkpoint."""
    mode = 0o666 & ~_umask()
    for path in Path(directory).rglob("*"):
        if path.is_file() and not path.is_symlink() and path.stat().st_mode & 0o777 != mode:
            path.chmod(mode)


def _umask() -> int:
    """The process's file mode creation mask (reading it means setting it: set back at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def remove_stale_temp_files(path: str | os.PathLike) -> list[Path]:
    """Remove the temp files and folders that a killed `atomic_file` / `atomic_directory` writer of `path` left
    (`.<name>.<random>.tmp` beside it, not locked by a live writer); both call it before writing, so a rerun leaves
    no half-written copy behind. Returns what it removed."""
    path = Path(path)
    removed = []
    for stale in sorted(path.parent.glob(f".{glob.escape(path.name)}.*.tmp")):
        try:
            handle = os.open(stale, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:  # gone meanwhile (renamed into place), or a link: not ours
            continue
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if not stale.exists() or os.stat(stale).st_ino != os.fstat(handle).st_ino:
                continue  # its writer finished (renamed it into place) meanwhile
            if stale.is_dir():
                shutil.rmtree(stale)
            else:
                stale.unlink()
            removed.append(stale)
        except BlockingIOError:  # a live writer's
            continue
        finally:
            os.close(handle)
    return removed


class DirectoryChanged(ValueError):
    """The folder an `atomic_directory` was to replace appeared or changed while it was being written."""


_AT_ENTRY = object()


def tree_state(path: str | os.PathLike) -> dict | None:
    """What is at `path` now, to tell later whether anything appeared or changed there: None when nothing is, else
    {relative path: (size, mtime_ns)} of it and everything under it."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return None
    found = [path, *path.rglob("*")] if path.is_dir() and not path.is_symlink() else [path]
    return {str(p.relative_to(path)): (p.lstat().st_size, p.lstat().st_mtime_ns) if not p.is_dir() else None
            for p in found}


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike, expected=_AT_ENTRY) -> Iterator[Path]:
    """Yield a hidden staging directory beside `path`; on success it replaces `path` in one rename.

    On any error (or a kill) the staging directory is what is left, never a half-written `path`. An existing `path`
    is replaced only when it is as it was when the block started, or as `expected` (a `tree_state` taken when the
    command started; None: `path` must not exist): a folder that appeared or changed meanwhile is never removed.

    Raises:
        DirectoryChanged: `path` appeared or changed; the new content is discarded and `path` left as it is.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if expected is _AT_ENTRY:
        expected = tree_state(path)
    remove_stale_temp_files(path)
    staging, held = _claimed_temp(path, directory=True)
    try:
        yield staging
        follow_umask(staging)
        if tree_state(path) != expected:
            raise DirectoryChanged(f"{path} appeared or changed while this command was writing it (another process or "
                                   "a person wrote there); it was left as it is and nothing was written: rerun with a "
                                   "new path, or once the other writer is done")
        if path.exists():
            old = path.with_name(f".{path.name}.{os.getpid()}.old.tmp")
            path.rename(old)  # moved aside, then removed once the new one is in place: never a missing `path`
            staging.rename(path)
            shutil.rmtree(old)
        else:
            staging.rename(path)
    except BaseException as error:
        shutil.rmtree(staging, ignore_errors=True)
        if failed := _write_failure(path, error):
            raise failed from error
        raise
    finally:
        os.close(held)


def write_tar_xz(archive: str | os.PathLike, files: dict[str, Path]) -> Path:
    """Pack {name in the archive: file} into a tar.xz whose bytes depend only on the names and contents (sorted, no
    times or owners), atomically: the same files always give the same archive."""
    with atomic_file(archive) as tmp, tarfile.open(tmp, "w:xz", preset=6, format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size, info.mode = files[name].stat().st_size, 0o644
            with files[name].open("rb") as f:
                tar.addfile(info, f)
    return Path(archive)


def is_folder_name(name) -> bool:
    """Whether `name` (a model or task name) can name a folder under an output directory: a non-empty string with
    no path separator that is not hidden (no leading '.', so neither '.' nor '..')."""
    return isinstance(name, str) and bool(name) and not any(sep in name for sep in "/\\") and not name.startswith(".")


def check_output_dir(path: str | os.PathLike, flag: str) -> Path:
    """Refuse, before anything is written, an output directory that cannot be one: an existing file, or a path under
    a file or under a directory this user cannot write to.

    Raises:
        ValueError: one line naming `flag` and what is wrong.
    """
    path = Path(path).expanduser()
    if path.exists() and not path.is_dir():
        raise ValueError(f"{flag} {path} is a file, not a directory; pass a directory (new or one this tool wrote)")
    parent = path
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ValueError(f"{flag} {path} is under {parent}, which is a file; pass a directory path")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"{flag} {path}: {parent} is not writable by this user; pass a directory you can write to")
    return path


# How a write that ran out of room fails: OSError's errno, or the message of torch's zip writer (a short write is
# "unexpected pos"), of safetensors ("os error 28") and of others that drop the errno.
_NO_ROOM_ERRNOS = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT}
_NO_ROOM_TEXT = ("No space left", "File too large", "Disk quota", "os error 28", "os error 27", "os error 122",
                 "PytorchStreamWriter failed writing", "unexpected pos")


def out_of_room(error: BaseException) -> bool:
    """Whether `error` is a write that failed for disk space, quota or the file size limit (`ulimit -f`)."""
    if isinstance(error, OSError) and error.errno in _NO_ROOM_ERRNOS:
        return True
    kind_fits = isinstance(error, (OSError, RuntimeError)) or type(error).__name__ == "SafetensorError"
    return kind_fits and any(text in str(error) for text in _NO_ROOM_TEXT)


def intermediate_checkpoints(run_dir: str | os.PathLike) -> list[Path]:
    """The intermediate checkpoints a run saved, `<run_dir>/intermediate/step-<N>`, in step order ([] if none).

    Raises:
        ValueError: a folder there is named `step-*` but not `step-<N>` (one line).
    """
    folder = Path(run_dir) / INTERMEDIATE_DIR
    found = [p for p in folder.glob("step-*") if p.is_dir()] if folder.is_dir() else []
    if bad := sorted(p.name for p in found if intermediate_step(p) is None):
        raise ValueError(f"{folder} holds {bad}: intermediate checkpoints must be named step-<N>")
    return sorted(found, key=intermediate_step)


def intermediate_step(checkpoint_dir: str | os.PathLike) -> int | None:
    """N for an intermediate checkpoint `.../intermediate/step-<N>`, else None."""
    path = Path(checkpoint_dir)
    step = path.name.removeprefix("step-")
    return int(step) if path.name.startswith("step-") and step.isdigit() and path.parent.name == INTERMEDIATE_DIR \
        else None


# ------------------------------------------------------------------------------------------------------ reading
def read_json(path: str | os.PathLike, what: str = "file"):
    """Parse a JSON file, with a one-line error naming it when it is missing, unreadable or not JSON."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} {path} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{what} {path} is not valid JSON ({error}); it is corrupt or truncated: delete it or "
                         "restore it") from None


STUDY_RESULTS = "results"  # <study>/results: where a study's grid files its results, beside its study.json


def study_of(results_dir: str | os.PathLike) -> dict | None:
    """The study.json content of the study whose results folder `results_dir` is (`<study>/results`, study.json
    beside it), None for any other folder: a study's folder holds its own models' results only."""
    results_dir = Path(results_dir).resolve()
    marker = results_dir.parent / "study.json"
    if results_dir.name != STUDY_RESULTS or not marker.is_file():
        return None
    return read_json(marker, "study marker")


def is_study_model(study: dict, model: str) -> bool:
    """Whether `model` is a name a study files its own checkpoints' results under: one of its models (a replicate
    `-pseed<k>`, an intermediate checkpoint `-<paper step>`), unscaled (`core.names`)."""
    p = names.try_parse_name(model)
    run = p and p.scale is None and names.try_parse_name(p.replicate_group)
    return bool(run) and run.run_name in study.get("definition", {}).get("models", ())


def load_yaml(text: str):
    """`yaml.safe_load` that refuses a mapping with a key given twice (yaml keeps the last silently, so a task YAML
    with `name` twice would file its results under the second). Raises `yaml.YAMLError` naming the key and line."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if isinstance(key, (str, int, float, bool)) and key in seen:
                    raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
                seen.add(key if isinstance(key, (str, int, float, bool)) else id(key_node))
            return super().construct_mapping(node, deep)

    return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader


MODEL_JSON_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                    "generation_config.json")  # what loading a model or tokenizer directory parses


def check_json_files(directory: str | os.PathLike) -> None:
    """Parse the JSON files of a model or tokenizer directory (`MODEL_JSON_FILES`), so a corrupt one is named in one
    line (`read_json`) rather than reported by transformers as a missing tokenizer or an anonymous JSON error."""
    directory = Path(directory)
    for name in MODEL_JSON_FILES if directory.is_dir() else ():
        if (directory / name).is_file():
            read_json(directory / name, "model file")


def read_run_info(directory: str | os.PathLike | None) -> dict | None:
    """The `run_info.json` of a saved model directory, or None when it has none (a converted decoder, another
    encoder).

    Raises:
        ValueError: the file is not of the current format or lacks keys (one line: what to do).
    """
    if directory is None or not (Path(directory) / RUN_INFO_NAME).is_file():
        return None
    path = Path(directory) / RUN_INFO_NAME
    info = read_json(path, "run info")
    if not isinstance(info, dict) or info.get("format", 1) != RUN_INFO_FORMAT:
        found = info.get("format", 1) if isinstance(info, dict) else "unknown"
        raise ValueError(f"{path} is run_info format {found}, this code reads format {RUN_INFO_FORMAT}: retrain or "
                         "re-save the checkpoint with the current recipes, or use the commit that wrote it")
    missing = [key for key in RUN_INFO_KEYS if key not in info]
    if missing:
        raise ValueError(f"{path} lacks {missing}: re-save the checkpoint with the current recipes/pretrain.py")
    return info


# -------------------------------------------------------------------------------------------------------- locks
@contextlib.contextmanager
def exclusive_lock(path: str | os.PathLike, what: str, remove: bool = False) -> Iterator[Path]:
    """Hold an exclusive `flock` on `path` (created if needed) for the duration of the block.

    The lock dies with the process that holds it (even on SIGKILL), so a crashed run never blocks the next one.
    `remove`: the lock file is removed when the block ends (still held, so a process that opened it meanwhile finds
    it gone once it gets the lock, and takes a new one): no lock file is left beside a result.

    Raises:
        LockHeld: another process holds it; the message names `what` and the lock file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        handle = open(path, "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            handle.close()
            if error.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            raise LockHeld(f"{what} is in use by another process (lock {path}); wait for it to finish") from None
        try:
            if os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino:
                break
        except FileNotFoundError:
            pass
        handle.close()  # its holder removed it meanwhile: lock the new one
    try:
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        yield path
    finally:
        if remove:
            path.unlink(missing_ok=True)
        handle.close()  # releases the lock


# --------------------------------------------------------------------------------------------------- provenance
def git_commit() -> str:
    """HEAD of the repository, with "-dirty" when tracked files have changes; "unknown" outside a git checkout."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT,
                               capture_output=True, text=True, check=True)
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


# ------------------------------------------------------------------------------------------------------ sources
def local_or_hub(source: str | os.PathLike, what: str) -> str:
    """Check a model/tokenizer/dataset source before loading it: an existing local path, or a Hub id
    (`core.paths.is_hub_id`).

    Without this, transformers reports a missing local directory as "Repo id must be in the form ..." or as a
    failed Hub connection.

    Raises:
        FileNotFoundError: `source` looks like a path (or cannot be a Hub id) and does not exist: "no such
            directory", with the nearest existing sibling (`core.paths.missing_path`).
    """
    text = str(source)
    if Path(text).expanduser().exists():
        return str(Path(text).expanduser())
    if is_local_path(text):
        raise missing_path(text, what)
    if not is_hub_id(text):
        raise FileNotFoundError(f"{what} {text} does not exist (it is neither a local path nor a Hub id org/name)")
    return text


def hub_load_error(source: str, what: str, error: Exception) -> ValueError:
    """One line for a source that failed to load: say whether it was read as a local path or as a Hub id."""
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    if Path(source).expanduser().exists():
        return ValueError(f"cannot load {what} from {source}: {first}")
    if is_local_path(source.partition("@")[0]):  # a missing local path (not `org/name@revision`): not a Hub problem
        return ValueError(missing_path(source, what))
    if os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE"):
        return ValueError(f"cannot load {what} {source!r} from the Hub: HF_HUB_OFFLINE is set and it is not in the "
                          "local Hub cache; pass a local path, or unset HF_HUB_OFFLINE to download it")
    return ValueError(f"cannot load {what} {source!r} from the Hub ({first}); pass a local directory, or go online "
                      "(HF_HUB_OFFLINE unset) to download it")


def check_loadable(directory: str | os.PathLike) -> None:
    """Refuse a folder that is not a loadable model (`check_weights` besides): a LoRA run's `checkpoint-N`, which
    holds the adapters, for resuming only (every command that loads, exports or describes a model calls this).

    Raises:
        ValueError: one line naming the adapter file and the folders to use instead.
    """
    if adapters := sorted(p.name for p in Path(directory).glob("adapter_*") if p.is_file()):
        raise ValueError(f"{directory} holds LoRA adapters ({adapters[0]}), not a loadable model: a LoRA run's "
                         "checkpoint-N is for resuming; use the run folder or an intermediate/step-N (merged weights)")
    check_weights(directory)


def check_weights(directory: str | os.PathLike) -> None:
    """Open the header of every safetensors file of a checkpoint: a truncated or corrupt file is named now, before
    any work, instead of failing deep inside `from_pretrained`."""
    directory = Path(directory)
    if not directory.is_dir():
        return  # a Hub id: the Hub client checks what it downloads
    from safetensors import SafetensorError, safe_open

    for path in sorted(directory.glob("*.safetensors")):
        try:
            with safe_open(str(path), "pt"):
                pass
        except (SafetensorError, OSError) as error:
            raise ValueError(f"weights file {path} is unreadable ({error}); it is truncated or corrupt: re-save or "
                             "re-download the checkpoint") from None


# ------------------------------------------------------------------------------------------- checkpoint identity
WEIGHT_PATTERNS = ("*.safetensors", "model.safetensors.index.json", "pytorch_model*.bin")
TOKENIZER_PATTERNS = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
                      "vocab.*", "merges.txt", "added_tokens.json")
CODE_PATTERNS = ("*.py",)  # the remote code a checkpoint ships (modeling_eurobert.py...): it computes the scores too


def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 hex digest of a file's bytes (checkpoints, data files, sentence-transformers files)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


_IDENTITIES: dict = {}


def checkpoint_identity(directory: str | os.PathLike) -> dict:
    """Content identity of a checkpoint directory: its config and the size and sha256 of every weights, tokenizer
    and remote-code (`*.py`) file. Independent of paths and modification times; computed once per directory state
    and process (hashing a 1B-parameter checkpoint takes seconds)."""
    directory = Path(directory).resolve()
    files = sorted(p for p in directory.iterdir() if p.is_file())
    key = (str(directory), tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files))
    if key not in _IDENTITIES:
        config = read_json(directory / "config.json", "model config")
        config.pop("transformers_version", None)  # written by whichever version saved it
        identity = {"config": hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()}
        for group, patterns in (("weights", WEIGHT_PATTERNS), ("tokenizer", TOKENIZER_PATTERNS),
                                ("code", CODE_PATTERNS)):
            identity[group] = {p.name: {"size": p.stat().st_size, "sha256": file_sha256(p)}
                               for pattern in patterns for p in sorted(directory.glob(pattern)) if p.is_file()}
        _IDENTITIES[key] = identity
    return _IDENTITIES[key]


def is_causal_checkpoint(config: dict) -> bool:
    """A checkpoint whose saved attention is causal (its config.json as a dict): a CLM run, a converted decoder, or
    a causal LM head. Read from the file, so the cards need neither torch nor transformers."""
    return (bool(config.get("is_causal")) or config.get("pretraining_attention") == "causal"
            or (config.get("architectures") or [None])[0] == "EuroBertClmMlmForCausalLM")


# ---------------------------------------------------------------------------------------------- child processes
def die_with_parent(parent_pid: int | None = None):
    """A `preexec_fn` for `subprocess`: the child gets SIGTERM when the process that started it dies, even by
    SIGKILL (Linux `PR_SET_PDEATHSIG`), so a killed study never leaves an orphan training run behind."""
    parent_pid = os.getpid() if parent_pid is None else parent_pid

    def preexec():
        import ctypes
        import signal

        pr_set_pdeathsig = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)

    return preexec if platform.system() == "Linux" else None
