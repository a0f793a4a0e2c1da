"""The results store: where a fine-tuning or mteb result is filed, how it is read, locked, replaced and written, and
the `finetune_info.json` beside a saved fine-tuned model. The grid (`evaluation.run`), `evaluation.mteb`, the study,
the report, the cards and the results dataset all go through here.

Layout: `<results>/<model>/<task>/lr<lr>-seed<seed>.json`, with `.<file>.lock` beside a result being worked on
(`lock`) and `<file>.replaced-<time>` for one of another identity that was redone (`move_aside`).
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import TypedDict

from core import artifacts, names, run_folders

RESULT_FORMAT = 3  # 3: declared scoring versions in the identity (2: source hashes, `identity.code`), `pretrain_seed`
MIGRATE_COMMAND = "python -m evaluation.identity --migrate RESULTS_DIR"  # format 2 -> 3 (read by it alone), once
RESULT_GLOB = "*/*/lr*-seed*.json"  # under a results directory: <model>/<task>/lr<lr>-seed<seed>.json
FINETUNE_INFO_NAME = "finetune_info.json"  # beside a saved fine-tuned model: its result's identity and scores
FINETUNE_INFO_FORMAT = 1
OK, DIVERGED = "ok", "diverged"  # a finished result: scored, or stopped when its loss turned NaN/inf (nothing scored)
STATUSES = (OK, DIVERGED)
SPLITS = ("validation", "test")  # the splits a result scores (mteb: test only, its validation None)
KINDS = ("grid", "mteb", "imported", "probe", "heldout")  # who made a result: evaluation.run, evaluation.mteb,
# analysis.import_encodeval, and a decoder study's measures (`recipes.study`): a frozen-feature probe (lr 0, a seed per
# training subset) or held-out masked-token and next-token scores (task "heldout", rows per block)
MEASURE_KINDS = ("probe", "heldout")
IMPORTED_SOURCE = "encodeval"  # `source.kind` of an imported result (the paper's own runs)
PROTOCOL_NAME = ".protocol"  # JSON in <results>/<model>/<task>/: the protocol of its results (`claim_protocol`)


class ResultBody(TypedDict):
    """Every result's body (`result_body`): whether it scored, what it is ranked by, its aggregate scores per split
    ({} diverged; None: not evaluated, an mteb result's validation) and per-instance rows ({split: [row]})."""

    status: str  # one of STATUSES
    main_metric: str
    validation: dict | None
    test: dict | None
    per_instance: dict


class OptionalBody(TypedDict, total=False):
    """What a kind adds to the body: mteb's marker, zero-shot flag and mteb's own scores; the grid's trivial
    baseline ({split: {metric: score}}) and run config."""

    evaluation: str
    zero_shot: bool
    mteb_scores: dict
    trivial_baseline: dict
    config: dict


class Provenance(TypedDict, total=False):
    """What `new_result`'s writers add last: where the model came from (a Hub revision, the model it was fine-tuned
    from), the tasks of one shared fine-tuning, an imported result's `source` (`IMPORTED_SOURCE`, its path)."""

    model_source: str
    shared_training: list
    finetuned_from: str
    source: dict


class Result(ResultBody, OptionalBody, Provenance):
    """A result record, as `new_result` files it and `read_result` reads it; `kind` (one of `KINDS`) is stored."""

    format: int
    kind: str
    model: str
    task: str
    family: str
    lr: float
    seed: int
    pretrain_seed: int | None
    identity: dict
    versions: dict
    git_commit: str | None


class LoadedResult(Result, total=False):
    """A result as the report holds it (`analysis.statistics.load_results`), never filed: where it was read, and
    instead of its per-instance rows the test scores `compact` kept, {metric: scores}."""

    _path: str
    instance_scores: dict


BODY = tuple(ResultBody.__annotations__)  # every result's body (`new_result`'s fields)
OPTIONAL_BODY = tuple(OptionalBody.__annotations__)
RECORD_FIELDS = tuple(key for key in Result.__annotations__ if key not in (*BODY, *OPTIONAL_BODY))  # around it


def result_path(output: str | os.PathLike, model: str, task: str, lr: float, seed: int) -> Path:
    """Where the grid files the result of one (model, task, learning rate, seed) run."""
    return Path(output) / model / task / f"lr{lr:g}-seed{seed}.json"


def result_files(results_dir: str | os.PathLike) -> list[Path]:
    """Every result file under a results directory (temp files of interrupted writes and moved-aside files are not;
    a copy such as `lr0.0001-seed0 (copy).json` is, and `read_result` refuses it)."""
    return sorted(p for p in Path(results_dir).glob(RESULT_GLOB) if not p.name.startswith("."))


def new_result(
    model: str,
    task: str,
    family: str,
    lr: float,
    seed: int,
    fields: dict,
    identity: dict,
    versions: dict,
    pretrain_seed: int | None = None,
    **extra,
) -> Result:
    """The record of one result as its writers file it: where (`result_path`'s arguments), the task family, the body
    (`fields`: `result_body`'s and `OPTIONAL_BODY`), what decides it (`identity`, compared by `differences`), the
    library `versions` (recorded, not compared), the replicate's `pretrain_seed`, and `extra` optional fields written
    last (model_source, shared_training, finetuned_from; an imported result's `source`, which marks its kind)."""
    _check_body(fields)
    record = {
        "format": RESULT_FORMAT,
        "kind": None,
        "model": model,
        "task": task,
        "family": family,
        "lr": lr,
        "seed": seed,
        "pretrain_seed": pretrain_seed,
        **fields,
        "identity": identity,
        "versions": versions,
        "git_commit": run_folders.git_commit(),
        **{k: v for k, v in extra.items() if v is not None},
    }
    record["kind"] = marked_kind(record)  # refuses a kind marker outside KINDS
    return record


def _check_body(fields: dict) -> None:
    """Refuse a body other than `ResultBody` and some of `OptionalBody`, a status outside `STATUSES`, or a scored
    result without a test score of its main metric."""
    if fields.get("status") not in STATUSES:
        raise ValueError(f"result status {fields.get('status')!r} is not one of {STATUSES}")
    missing, unknown = [key for key in BODY if key not in fields], sorted(fields.keys() - {*BODY, *OPTIONAL_BODY})
    if missing or unknown:
        raise ValueError(
            f"a result body holds {', '.join(BODY)} (`result_body`) and some of "
            f"{', '.join(OPTIONAL_BODY)}: this one lacks {missing} and has {unknown}"
        )
    if fields["status"] == OK and fields["main_metric"] not in (fields["test"] or {}):
        raise ValueError(f"a scored result has no test score of its main metric {fields['main_metric']!r}")


def migrated(record: Result, identity: dict) -> Result:
    """A result of an older format or identity made current (`evaluation.identity --migrate`): this format, `identity`,
    its replicate's `pretrain_seed`; its body checked as `new_result` checks it."""
    _check_body({key: value for key, value in record.items() if key not in RECORD_FIELDS})
    return {**record, "format": RESULT_FORMAT, "identity": identity, "pretrain_seed": pretrain_seed(record["model"])}


def result_body(main_metric: str, scores: dict | None = None, predictions: dict | None = None) -> ResultBody:
    """The body of a result (`BODY`): status, aggregate scores per split and per-instance rows (prediction, reference,
    scores), so every metric can be recomputed from the file alone. `scores`: {split: `evaluation.metrics` dict, or
    None when not evaluated}, None when the run diverged; `predictions`: {split: {column: list}} aligned with them."""
    predictions = predictions or {}
    out = {"status": DIVERGED if scores is None else OK, "main_metric": main_metric}
    per_instance = {}
    for role in SPLITS:
        metric = {} if scores is None else scores.get(role, {})
        out[role] = None if metric is None else {k: v for k, v in metric.items() if k != "per_instance"}
        columns = {
            **(predictions.get(role) or {}),
            **{k: v for k, v in ((metric or {}).get("per_instance") or {}).items() if v is not None},
        }
        n = len(next(iter(columns.values()))) if columns else 0
        if any(len(v) != n for v in columns.values()):
            lengths = {k: len(v) for k, v in columns.items()}
            raise ValueError(f"per-instance columns of {role} have different lengths: {lengths}")
        per_instance[role] = [{k: v[i] for k, v in columns.items()} for i in range(n)]
    out["per_instance"] = per_instance
    return out


def marked_kind(record: dict) -> str:
    """Who made a result (`KINDS`), as its markers say: "mteb", "probe" or "heldout" (`"evaluation": <kind>`),
    "imported" (`source.kind` "encodeval"), else "grid"; another marker is refused. `new_result` stores it,
    `read_result` checks it."""
    marks = (record.get("evaluation"), (record.get("source") or {}).get("kind"))
    kind = {
        (None, None): "grid",
        ("mteb", None): "mteb",
        (None, IMPORTED_SOURCE): "imported",
        **{(measure, None): measure for measure in MEASURE_KINDS},
    }.get(marks)
    if kind is None:
        raise ValueError(
            f"result of {record.get('model')} on {record.get('task')} is marked evaluation {marks[0]!r}, "
            f"source {marks[1]!r}: not one of {KINDS}"
        )
    return kind


def record_kind(record: Result) -> str:
    """Who made a result (`KINDS`)."""
    return record["kind"]


def record_identity(record: Result) -> dict:
    """What decides a result (compared by `differences`): model, task, protocol, scoring."""
    return record["identity"]


def scored(record: dict) -> bool:
    """Whether a result finished scored (status "ok"), not diverged."""
    return record["status"] == OK


def main_metric(record: dict) -> str:
    """The metric a result is ranked and compared by (its task's)."""
    return record["main_metric"]


def split_scores(record: dict, split: str) -> dict | None:
    """A result's aggregate scores on `split` ({} diverged; None: not evaluated, an mteb result's validation)."""
    return record[split]


def main_score(record: dict, split: str = "test") -> float:
    """A result's main metric on `split`; NaN for a split not evaluated (mteb records have no validation)."""
    if record[split] is None:
        return math.nan
    return float(record[split][record["main_metric"]])


def instances(record: dict, split: str = "test") -> list[dict]:
    """A result's per-instance rows of `split` (`result_body`); [] when it kept none, or after `compact`."""
    return (record.get("per_instance") or {}).get(split) or []


def compact(record: Result, columns: dict) -> LoadedResult:
    """`record` without its per-instance rows, holding instead `columns` {metric: its per-instance test scores}
    (read back by `kept_scores`): how the report holds a results tree of the paper's size."""
    record.pop("per_instance", None)
    record["instance_scores"] = columns
    return record


def kept_scores(record: LoadedResult) -> dict | None:
    """The per-instance test scores a compacted result kept, {metric: scores} (`compact`); None when it was not."""
    return record.get("instance_scores")


def baseline_score(record: dict) -> float | None:
    """The task's trivial baseline test score in the result's main metric (`evaluation.baselines`), None when the
    result records none (an imported dataset without a known one)."""
    baseline = record.get("trivial_baseline")
    return None if baseline is None else baseline["test"][record["main_metric"]]


def run_config(record: dict) -> dict:
    """The settings a result was made with: the grid's fine-tuning arguments, mteb's protocol ({} when none)."""
    return record.get("config") or {}


def pretrain_seed(model: str) -> int | None:
    """k of a model named as a pretraining replicate (`<name>-pseed<k>`, `core.names.split_replicate`), else None."""
    return names.split_replicate(model)[1]


def filed_path(record) -> Path | None:
    """Where a result record belongs under a results directory (`<model>/<task>/lr<lr>-seed<seed>.json`, from what
    it records), None when it does not record its model, task, lr and seed: what tells a result from a copy."""
    try:
        return result_path("", record["model"], record["task"], float(record["lr"]), int(record["seed"]))
    except (KeyError, TypeError, ValueError):
        return None


def read_result(path: str | os.PathLike, migrating: bool = False) -> Result:
    """A result file (`pretrain_seed` None when it has none), refused in one line when corrupt, of another format
    (format 2 is read by the migration alone, `migrating`), or filed where its content does not say (a copy or a
    backup never counts as a result)."""
    record = artifacts.read_json(path, "result file")
    found = record.get("format", 1) if isinstance(record, dict) else "unknown"
    if found != RESULT_FORMAT and not (migrating and found == 2):
        fix = (
            f"run `{MIGRATE_COMMAND}` once"
            if found == 2
            else "re-run its grid with `python -m evaluation.run ... --rerun_changed` to replace it"
        )
        raise ValueError(f"result file {path} has format {found}, this version reads format {RESULT_FORMAT}: {fix}")
    if (filed := filed_path(record)) is None:
        raise ValueError(f"result file {path} does not record its model, task, lr and seed")
    if Path(path).parts[-3:] != filed.parts:
        raise ValueError(
            f"result file {path} records {filed}: a copy or a moved file is not a result; move it out of "
            "the results directory"
        )
    if missing := [key for key in ("family", "status", "main_metric", "identity") if key not in record]:
        raise ValueError(
            f"result file {path} lacks {', '.join(missing)}: it was not written whole by evaluation.run "
            "(edited?); re-run its grid with --rerun_changed, or move it out of the results directory"
        )
    if record["status"] not in STATUSES:
        raise ValueError(f"result file {path} has status {record['status']!r}, not one of {STATUSES}: re-run it")
    kind = marked_kind(record)
    if record.setdefault("kind", kind) != kind:  # results filed before the kind was stored have none
        raise ValueError(f"result file {path} is of kind {record['kind']!r}, its markers say {kind!r}: re-run it")
    record.setdefault("pretrain_seed", None)
    return record


def differences(record: dict, identity: dict) -> list[str]:
    """Why a result is not current for `identity` ([] when it is): the identity fields that differ ("field: old ->
    new"). `identity` may hold only some fields (the study checks model and scoring)."""
    recorded = record.get("identity") or {}
    return identity_diff({key: recorded.get(key) for key in identity}, identity)


def result_state(path: str | os.PathLike, identity: dict) -> tuple[str, list[str]]:
    """("todo" | "done" | "changed", why) of the result filed at `path` for `identity`: none yet; current; or made by
    something else, unreadable or of another format (never silently reused)."""
    if not Path(path).is_file():
        return "todo", []
    try:
        record = read_result(path)
    except ValueError as error:
        return "changed", [str(error)]
    why = differences(record, identity)
    return ("changed", why) if why else ("done", [])


def lock(path: str | os.PathLike, what: str):
    """The lock of one result file (`.<file>.lock` beside it), held for a `with` block; `artifacts.LockHeld` when
    another process is working on this result."""
    path = Path(path)
    return artifacts.exclusive_lock(path.with_name(f".{path.name}.lock"), f"{what} {path}", remove=True)


def claim_protocol(folder: str | os.PathLike, protocol: dict, replace: bool = False) -> list[str]:
    """Claim a results folder (`<results>/<model>/<task>/`) for the grid `protocol` before any of its runs trains:
    one folder holds the results of one protocol. The first grid writes `.protocol` (created whole and exclusively:
    of two grids started together exactly one claims it). Returns [] when the folder is this protocol's, else the
    fields that differ ("field: theirs -> ours"); `replace` (a grid redoing changed results) claims it regardless."""
    path = Path(folder) / PROTOCOL_NAME
    if path.is_dir() or path.is_file() and not path.stat().st_size:  # the grid and --migrate both say this fix
        then = (
            f", then run `{MIGRATE_COMMAND}` (it claims the folder for its results' protocol)"
            if any(Path(folder).glob("lr*-seed*.json"))
            else " (the next grid claims the folder again)"
        )
        raise ValueError(
            f"results folder protocol {path} is {'a folder' if path.is_dir() else 'empty'}, not the "
            f"claim a grid writes: remove it{then}"
        )
    if replace:
        artifacts.write_json_atomic(path, protocol)
        return []
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = artifacts.write_json_atomic(path.with_name(f"{PROTOCOL_NAME}.{os.getpid()}.tmp"), protocol)
        try:
            os.link(temp, path)  # fails when another grid claimed it first
        except FileExistsError:
            pass
        finally:
            temp.unlink()
    claimed = artifacts.read_json(path, "results folder protocol")
    if not isinstance(claimed, dict):
        raise ValueError(
            f"results folder protocol {path} is not the claim a grid writes (a JSON object): remove it "
            "(the next grid claims the folder again)"
        )
    return identity_diff(claimed, protocol)


def move_aside(path: str | os.PathLike) -> Path:
    """Rename a result (or the model saved with it) to `<name>.replaced-<time>`, so it is kept but no longer read."""
    path = Path(path)
    aside = path.with_name(f"{path.name}.replaced-{time.strftime('%Y%m%dT%H%M%S')}")
    path.rename(aside)
    return aside


def write_result(path: str | os.PathLike, record: dict) -> Path:
    """Write a result atomically, as one JSON line; call it holding the result's `lock`."""
    return artifacts.write_json_atomic(path, record, indent=None)


def model_info(record: Result) -> dict:
    """What a saved fine-tuned model's `finetune_info.json` repeats of its result: main metric, scores, the tasks of a
    shared fine-tuning, run config, identity, versions and git commit."""
    return {
        "main_metric": main_metric(record),
        **{split: split_scores(record, split) for split in SPLITS},
        "shared_training": record.get("shared_training"),
        "config": run_config(record),
        **{key: record[key] for key in ("identity", "versions", "git_commit")},
    }


def write_finetune_info(directory: str | os.PathLike, info: dict) -> Path:
    """Write the `finetune_info.json` of a saved fine-tuned model, with its format."""
    return artifacts.write_json_atomic(Path(directory) / FINETUNE_INFO_NAME, {"format": FINETUNE_INFO_FORMAT, **info})


def read_finetune_info(directory: str | os.PathLike) -> dict | None:
    """The `finetune_info.json` of a saved fine-tuned model, None when the directory has none; corrupt or of another
    format: ValueError (one line: what to do)."""
    path = Path(directory) / FINETUNE_INFO_NAME
    if not path.is_file():
        return None
    info = artifacts.read_json(path, "fine-tuned model info")
    if not isinstance(info, dict) or info.get("format") != FINETUNE_INFO_FORMAT:
        found = info.get("format") if isinstance(info, dict) else "unknown"
        raise ValueError(
            f"{path} is finetune_info format {found}, this code reads format {FINETUNE_INFO_FORMAT}: "
            "save the model again (`python -m evaluation.run ... --save_models`)"
        )
    return info


def flatten(value, prefix: str = "") -> dict:
    """{"model": {"weights": {...}}} -> {"model.weights....": leaf}."""
    if not isinstance(value, dict):
        return {prefix: value}
    return {
        k: v for key, item in value.items() for k, v in flatten(item, f"{prefix}.{key}" if prefix else str(key)).items()
    }


def identity_diff(old: dict, new: dict) -> list[str]:
    """The fields where two identities differ, as "field: old -> new" (hashes shortened)."""
    a, b = flatten(old), flatten(new)
    return [
        f"{key}: {_short(a.get(key))} -> {_short(b.get(key))}"
        for key in sorted(a.keys() | b.keys())
        if a.get(key) != b.get(key)
    ]


def _short(value) -> str:
    if isinstance(value, str) and len(value) == 64:
        return value[:10]
    return repr(value)
