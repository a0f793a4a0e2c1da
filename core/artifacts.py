"""How this project writes and reads its files: atomic writes, locks, one-line read errors.

Every file a tool of this project writes goes through here, so that a kill at any point (even SIGKILL) leaves either
the old file or the new one, never half of one (`atomic_file`, `atomic_directory`), with the modes the umask gives
(`follow_umask`). `read_json` fails in one line naming the file; `exclusive_lock` keeps two processes from writing the
same run or result.
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
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path


class LockHeld(RuntimeError):
    """Another live process holds the lock."""


class WriteFailed(OSError):
    """A write that failed (disk full, quota, `ulimit -f`, permissions), raised by the atomic writers once what they
    were writing is removed: `str()` is one line naming the file (`path`); `errno` is the failure's (`out_of_room` reads
    it)."""

    def __init__(self, path: str | os.PathLike, error: BaseException):
        super().__init__(getattr(error, "errno", None) or errno.EIO, str(error))
        self.path = Path(path)
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        why = (
            "it ran out of disk space or hit the file size limit: free space and rerun"
            if out_of_room(error)
            else "nothing was written there: fix that and rerun"
        )
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
    """(a temp file or folder `.<name>.<random>.tmp` beside `path`, the descriptor of the `flock` held on it while it
    is written, so that `remove_stale_temp_files` of a concurrent writer of `path` leaves it alone), once the ones a
    killed writer left are removed."""
    remove_stale_temp_files(path)
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
    """Give every file under `directory` the mode the umask gives (0644 under umask 022): safetensors writes 0600
    files (weights, LoRA adapters) that a teammate cannot load. Called by `atomic_directory` and on every checkpoint."""
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
    """Remove (and return) the temp files and folders a killed `atomic_file` / `atomic_directory` writer of `path`
    left (`.<name>.<random>.tmp` beside it, not locked by a live writer); both call it before writing."""
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
    return {
        str(p.relative_to(path)): (p.lstat().st_size, p.lstat().st_mtime_ns) if not p.is_dir() else None for p in found
    }


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike, expected=_AT_ENTRY) -> Iterator[Path]:
    """Yield a hidden staging directory beside `path`; on success it replaces `path` in one rename, on any error (or
    a kill) `path` is left as it was. An existing `path` is replaced only when it is as it was when the block started,
    or as `expected` (a `tree_state` taken earlier; None: it must not exist); else `DirectoryChanged`, nothing
    written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if expected is _AT_ENTRY:
        expected = tree_state(path)
    try:
        with staging_directory(path) as staging:  # removed on any error
            yield staging
            follow_umask(staging)
            if tree_state(path) != expected:
                raise DirectoryChanged(
                    f"{path} appeared or changed while this command was writing it (another process or "
                    "a person wrote there); it was left as it is and nothing was written: rerun with a "
                    "new path, or once the other writer is done"
                )
            if path.exists():
                old = path.with_name(f".{path.name}.{os.getpid()}.old.tmp")
                path.rename(old)  # moved aside, then removed once the new one is in place: never a missing `path`
                staging.rename(path)
                shutil.rmtree(old)
            else:
                staging.rename(path)
    except BaseException as error:
        if failed := _write_failure(path, error):
            raise failed from error
        raise


@contextlib.contextmanager
def staging_directory(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a hidden folder beside `path` (`.<name>.<random>.tmp`, locked while in use) to write files into before
    they are moved into place, removed when the block ends; one that a killed writer left is removed by the next
    (`remove_stale_temp_files`)."""
    path = Path(path)
    staging, held = _claimed_temp(path, directory=True)
    try:
        yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)
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
    """Refuse (ValueError, one line naming `flag`), before anything is written, an output directory that cannot be
    one: an existing file, or a path under a file or under a directory this user cannot write to."""
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
_NO_ROOM_TEXT = (
    "No space left",
    "File too large",
    "Disk quota",
    "os error 28",
    "os error 27",
    "os error 122",
    "PytorchStreamWriter failed writing",
    "unexpected pos",
)


def out_of_room(error: BaseException) -> bool:
    """Whether `error` is a write that failed for disk space, quota or the file size limit (`ulimit -f`)."""
    if isinstance(error, OSError) and error.errno in _NO_ROOM_ERRNOS:
        return True
    kind_fits = isinstance(error, (OSError, RuntimeError)) or type(error).__name__ == "SafetensorError"
    return kind_fits and any(text in str(error) for text in _NO_ROOM_TEXT)


# ------------------------------------------------------------------------------------------------------ reading
def read_json(path: str | os.PathLike, what: str = "file"):
    """Parse a JSON file, with a one-line error naming it when it is missing, unreadable or not JSON."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} {path} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(
            f"{what} {path} is not valid JSON ({error}); it is corrupt or truncated: delete it or restore it"
        ) from None


def load_yaml(text: str):
    """`yaml.safe_load` that refuses (`yaml.YAMLError` naming the key and line) a mapping with a key given twice, which
    yaml would keep the last of silently."""
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


# -------------------------------------------------------------------------------------------------------- locks
@contextlib.contextmanager
def exclusive_lock(path: str | os.PathLike, what: str, remove: bool = False) -> Iterator[Path]:
    """Hold an exclusive `flock` on `path` (created if needed) for the block, or raise `LockHeld` naming `what`; it
    dies with its process (even on SIGKILL). `remove`: the file is removed when the block ends, still held."""
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


def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 hex digest of a file's bytes (checkpoints, data files, sentence-transformers files)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


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
