"""The command-line convention every entry point of this project follows (README, "One CLI convention"): a list is
one comma-separated value (`split_list`, `split_paths`); bad input ends with one line `error: ...` on stderr and exit
status 2 (`bad_input_exits`, `exit_on_bad_input`); a failed write with one line naming the file and exit status 1
(`exit_on_write_failure`); any other failure while working keeps its traceback (exit status 1).
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import time

from core.artifacts import LockHeld, WriteFailed, write_json_atomic

BAD_INPUT = (ValueError, FileNotFoundError, LockHeld)


class BadInput(SystemExit):
    """Exit status 2 whose message (`error: ...`) has already been printed to stderr; `str()` gives the message,
    so a test can match it."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(code)
        self.message = message

    def __str__(self) -> str:
        return self.message


def bad_input(error: Exception, code: int = 2) -> BadInput:
    """Print `error: <error>` to stderr and return the `BadInput` (exit status `code`) to raise. Under a launcher of
    several processes per machine (`accelerate launch`, torchrun: LOCAL_RANK), the first process of each machine
    prints it: one line per machine, not one per process; torchrun's failure summary shows it as the root cause
    (its error file, TORCHELASTIC_ERROR_FILE) instead of "To enable traceback see ..."."""
    message = f"error: {error}".encode("utf-8", "backslashreplace").decode()  # a path that is not UTF-8: \udcff
    if os.environ.get("LOCAL_RANK", "0") == "0":
        print(message, file=sys.stderr)
    if error_file := os.environ.get("TORCHELASTIC_ERROR_FILE"):
        write_json_atomic(error_file, {"message": message, "timestamp": int(time.time())})
    return BadInput(message, code)


@contextlib.contextmanager
def bad_input_exits():
    """Inside the block, a ValueError, FileNotFoundError or held lock becomes one line on stderr and exit status 2
    (`BadInput`). For the checking part of an entry point whose later work must keep its tracebacks."""
    try:
        yield
    except BAD_INPUT as error:
        raise bad_input(error) from None


def exit_on_bad_input(main):
    """`bad_input_exits` around a whole `main(argv)`: for entry points that check, then do work whose own
    ValueErrors are bad input too (reports, cards, plans)."""
    return bad_input_exits()(main)  # a contextmanager is also a decorator (contextlib.ContextDecorator)


def exit_on_write_failure(main):
    """Around a whole `main(argv)` that writes files: a write that failed (disk full, `ulimit -f`, permissions;
    `artifacts.WriteFailed`, raised once what was being written is removed) ends with one line naming the file and
    exit status 1, instead of a traceback."""

    @functools.wraps(main)
    def wrapper(*args, **kwargs):
        try:
            return main(*args, **kwargs)
        except WriteFailed as error:
            raise bad_input(error, code=1) from None

    return wrapper


@contextlib.contextmanager
def sigterm_exits():
    """Inside the block, SIGTERM (`kill`, a scheduler stopping a job, a grid stopping its workers) ends the process as
    `sys.exit(143)` (128 + 15) does, so that `finally` blocks and `with` exits run: locks removed, temporary folders
    cleaned up (the default action ends it at once and leaves them behind). The handler before is restored after."""

    def stop(signum, frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def not_a_command(module: str, command: str, does: str) -> None:
    """`main` of a library module run with `python -m` (which would otherwise exit 0 doing nothing): one line naming
    the command that does the job, exit status 2."""
    raise bad_input(ValueError(f"{module} is a library module, not a command: `{command}` {does}"))


def parse_dataclasses(parser, argv: list[str] | None, **kwargs) -> tuple:
    """`HfArgumentParser.parse_args_into_dataclasses` whose leftover arguments are one line naming the convention:
    `--tasks sst2 conll2003` -> "--tasks takes one value: a list is comma-separated (--tasks sst2,conll2003)"
    (transformers says only "not used by the HfArgumentParser: ['conll2003']")."""
    *parsed, rest = parser.parse_args_into_dataclasses(args=argv, return_remaining_strings=True, **kwargs)
    if rest:
        raise ValueError(stray_arguments(list(sys.argv[1:] if argv is None else argv), rest))
    return tuple(parsed)


def stray_arguments(argv: list[str], rest: list[str]) -> str:
    """The message for arguments no flag takes: those after a flag's value are read as a space-separated list."""
    first = argv.index(rest[0]) if rest[0] in argv else 0
    at = next((i for i in range(first - 1, -1, -1) if argv[i].startswith("--")), None)
    if at is None or "=" in argv[at] or first - at < 2:
        return f"unexpected argument(s) {rest}: every value follows its --flag (see --help)"
    end = next((i for i in range(at + 1, len(argv)) if argv[i].startswith("--")), len(argv))
    return (
        f"{argv[at]} takes one value, and {rest} follow(s) it: a list is one comma-separated value "
        f"({argv[at]} {','.join(argv[at + 1 : end])})"
    )


def flags(**values) -> list[str]:
    """A command line's `--name value` pairs, each value written with `str`."""
    return [item for name, value in values.items() for item in (f"--{name}", str(value))]


def split_list(value: str | None) -> list[str]:
    """The items of a comma-separated flag value, stripped, empty items dropped (`"sst2, mnli,"` -> 2 items)."""
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def split_paths(value: str | None) -> list[str]:
    """`split_list` for a list of paths (`--model a,b`, NAME=DIR entries), where a path holding a comma is one item
    when it exists as a whole (`--model "runs/bs8,lr1e-4"` or `--model "x=runs/bs8,lr1e-4"`)."""
    pieces, items, i = (value or "").split(","), [], 0
    while i < len(pieces):
        for j in range(len(pieces), i, -1):  # the longest run of pieces naming an existing path
            joined = ",".join(pieces[i:j]).strip()
            if j == i + 1 or os.path.exists(joined) or "=" in joined and os.path.exists(joined.split("=", 1)[1]):
                break
        items += [joined] if joined else []
        i = j
    return items
