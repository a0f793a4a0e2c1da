"""Evaluation task registry and dataset loaders: one YAML per task, one normalised layout per family.

A task is a YAML file in `evaluation/tasks/` (or any path passed to `load_task`); a dataset in a standard format
needs no code (docs/evaluation.md, "Adding a dataset": where files are found, splits, subsets, identity).

    from evaluation.tasks import list_tasks, load_task, load_splits
    task = load_task("sst2")                    # or load_task("path/to/mytask.yaml")
    splits = load_splits(task, max_train=2000)  # offline bundle by default; source="hub" for the Hub datasets
    splits["train"][0]                          # {"text": "...", "label": 1}

YAML fields (the `Task` dataclass; unknown keys raise): name, family (sc | tc | qa | ir), metric (main score key of
`evaluation.metrics`), budget ({max_steps: N} or {epochs: N}), labels (sc: class names; tc: IOB2 tag names, in id
order), template (sc: str.format template over the input fields, e.g. "Premise: {premise}\\nHypothesis:
{hypothesis}"), query_prefix / document_prefix (ir), squad_version (qa: "v1.1" scores with the v1.1 script's rules
and always predicts a span; "v2.0" predicts and scores no-answer), tc_labelling (tc, required: "all", the paper's,
or "first", see `evaluation/token_classification.py`), description, notes (caveats printed next to results), hub,
offline.
Offline source (`offline:`, an `OfflineSource`): format (tsv | jsonl | conll | squad | beir) and its reader's
options (columns, header, token_column, tag_column, separator, comment_prefix, docstart, token_prefix; beir: corpus,
queries, qrels, doc_template; docs/evaluation.md says what each does), root (the folder file paths are relative to,
itself relative to the YAML's folder; default: the bundle), files ({train: [...], validation: [...], test: [...]}),
derive ({role: {from: role, fraction: f, seed: s, group: field}}: carve a split out of another, in the order
written; a missing validation is {from: train, fraction: 0.05, seed: 42}, the paper's
`train_test_split(train_size=0.95, seed=42)`; with `group`, and always for ir by query id, whole groups move, sampled
as EncodEval's split_retrieval_dataset), label_values (raw label values in the order of `labels` when the file does
not store the names), scheme (tc: iob1 | iob2, IOB1 converted on load), unavailable + stand_in (not in the bundle:
loading offline raises, naming the stand-in task).
Hub source (`hub:`, a `HubSource`, read by `readers.read_hub` / `readers.read_hub_retrieval`): path (required), name,
revision, splits {role: hub split}, columns, label_values, derive, scheme; for ir: corpus/queries {name, split},
qrels {name, splits}, train_pairs {path, name, split, columns}, doc_template.

Normalised columns (`load_splits` output), so trainers need no per-dataset code:
    sc: "text" (template applied), "label" (ClassLabel over task.labels)
    tc: "tokens" (list[str], words), "tags" (list of ClassLabel over task.labels, IOB2; IOB1 converted on load)
    qa: "id", "title", "question", "context", "answers" {"text": [...], "answer_start": [...]} ([] = no answer)
    ir: "train" is a Dataset of pairs {"query", "positive"} (prefixes not applied: see task.query_prefix);
        "validation"/"test" are `RetrievalSplit`s {corpus, queries, qrels}.

Which data a task's test scores come from, as the model cards and the results dataset name it (a Hub split, the
bundle file that copies one, a carve, a stand-in): `describe_test_data(name, source)`.

Splits follow docs/protocol.md (each task's YAML `notes` says its own); Hub sources follow the harness
(`encodeval/datasets.py`, MLM_vs_CLM branch) where its datasets load with datasets>=4, and mteb's copies for IR;
offline tests exercise them through a local-folder stand-in only.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import math
import os
import random
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import yaml

from core import artifacts
from core.paths import DATA_ENV_VAR, resolve_data_dir
from evaluation import readers
from evaluation.metrics import METRICS, SQUAD_VERSIONS, iob1_to_iob2

if TYPE_CHECKING:  # datasets is imported where splits are built: task definitions (the cards) load without it
    from datasets import Dataset, DatasetDict

TASKS_DIR = Path(__file__).resolve().parent / "tasks"
FAMILIES = ("sc", "tc", "qa", "ir")
TC_LABELLINGS = ("first", "all")
SCHEMES = ("iob1", "iob2")
ROLES = ("train", "validation", "test")
SUBSET_SEED = 42
DEFAULT_VALIDATION = {"from": "train", "fraction": 0.05, "seed": 42}
MIN_VALIDATION = 30  # a carved validation split with fewer instances (ir: queries) is warned about: the LR rides on it
FORMATS = tuple(readers.READERS)


class _Source:
    """What the two source settings share: built from a task YAML's mapping, and written back as one."""

    @classmethod
    def keys(cls) -> set[str]:
        """The settings a YAML may write in this block."""
        return {f.name for f in dataclasses.fields(cls)} - {"written"}

    @classmethod
    def from_yaml(cls, raw: Any, path: Path, block: str):
        """The settings of YAML block `block` of task file `path` from its mapping `raw`; a bad key raises one line."""
        if not isinstance(raw, dict):
            raise ValueError(f"{path}: {block} must be a mapping of settings, got {raw!r}")
        allowed = cls.keys()
        unknown = set(raw) - allowed
        if unknown:
            raise ValueError(f"{path}: unknown {block} key(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
        missing = [f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING and f.name not in raw]
        if missing:
            raise ValueError(f"{path}: {block} needs {missing}")
        return cls(**raw, written=tuple(raw))

    def as_dict(self) -> dict:
        """The settings as a YAML mapping: those the YAML wrote (even at their default value), and any other that
        differs from its default. A task identity hashes this, so it is the mapping the YAML gave."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name != "written" and (f.name in self.written or getattr(self, f.name) != f.default)
        }


@dataclasses.dataclass(frozen=True)
class OfflineSource(_Source):
    """The `offline:` block of a task YAML (module docstring), as written; `written`: its keys, in order."""

    format: str | None = None
    root: str | None = None
    files: dict[str, str | list[str]] | None = None
    derive: dict[str, dict] | None = None
    columns: dict[str, str | int] | None = None
    label_values: list | None = None
    header: bool = True
    token_column: int = 0
    tag_column: int = -1
    separator: str | None = None
    comment_prefix: str | None = None
    docstart: str | None = "-DOCSTART-"
    token_prefix: str | None = None
    scheme: str = "iob2"
    corpus: str | None = None
    queries: str | None = None
    qrels: dict[str, str] | None = None
    doc_template: str = "{text}"
    unavailable: str | None = None
    stand_in: str | None = None
    written: tuple[str, ...] = dataclasses.field(default=(), repr=False, compare=False)


@dataclasses.dataclass(frozen=True)
class HubSource(_Source):
    """The `hub:` block of a task YAML (module docstring); `written`: the keys the YAML wrote, in order."""

    path: str
    name: str | None = None
    revision: str | None = None
    splits: dict[str, str] | None = None
    columns: dict[str, str] | None = None
    label_values: list | None = None
    derive: dict[str, dict] | None = None
    scheme: str = "iob2"
    corpus: dict | None = None
    queries: dict | None = None
    qrels: dict | None = None
    train_pairs: dict | None = None
    doc_template: str = "{text}"
    written: tuple[str, ...] = dataclasses.field(default=(), repr=False, compare=False)


@dataclasses.dataclass
class Task:
    """One evaluation task, as written in its YAML file (see the module docstring for every field)."""

    name: str
    family: str
    metric: str
    budget: dict
    labels: list[str] | None = None
    template: str | None = None
    query_prefix: str = ""
    document_prefix: str = ""
    squad_version: str = "v1.1"
    tc_labelling: str = "first"  # required of a tc YAML (`_validate_task`); other families carry this, unread
    description: str = ""
    notes: str = ""
    hub: HubSource | None = None
    offline: OfflineSource | None = None
    path: Path | None = None

    def as_dict(self) -> dict:
        """Every field (a copy), each source as the mapping its YAML wrote: what the task identity hashes
        (`evaluation.identity`), equal to `dataclasses.asdict` of a task whose sources are those mappings."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        sources = {block: fields[block].as_dict() for block in ("offline", "hub") if fields[block] is not None}
        return copy.deepcopy({**fields, **sources})


@dataclasses.dataclass
class RetrievalSplit:
    """An ir evaluation split: texts by id and graded judgements."""

    corpus: dict[str, str]  # {doc id: text}, `doc_template` applied, prefix not applied
    queries: dict[str, str]  # {query id: text}, exactly the queries of `qrels`
    qrels: dict[str, dict[str, int]]  # {query id: {doc id: relevance}}

    def __len__(self) -> int:
        return len(self.queries)


def list_tasks() -> list[str]:
    """Names of the registered tasks (the YAML files in evaluation/tasks/), sorted."""
    return sorted(p.stem for p in TASKS_DIR.glob("*.yaml"))


def load_task(name_or_path: str | os.PathLike) -> Task:
    """The validated `Task` of a registered name (`list_tasks()`) or of a task YAML path."""
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml") or candidate.is_file():
        if not candidate.is_file():
            raise FileNotFoundError(f"task file {candidate} does not exist")
        path = candidate.resolve()
    else:
        path = TASKS_DIR / f"{name_or_path}.yaml"
        if not path.is_file():
            raise ValueError(
                f"unknown task {str(name_or_path)!r}; known tasks: {', '.join(list_tasks())} (or pass a task YAML path)"
            )
    try:
        raw = artifacts.load_yaml(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise ValueError(f"{path} is not valid YAML ({' '.join(str(error).split())}); fix it") from None
    return _validate_task(raw, path)


def _validate_task(raw: Any, path: Path) -> Task:
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: a task YAML must be a mapping of fields")
    fields = {f.name for f in dataclasses.fields(Task)} - {"path"}
    unknown = set(raw) - fields
    if unknown:
        raise ValueError(f"{path}: unknown task field(s) {sorted(unknown)}; allowed: {sorted(fields)}")
    missing = [k for k in ("name", "family", "metric", "budget") if k not in raw]
    if missing:
        raise ValueError(f"{path}: missing required task field(s) {missing}")
    task = Task(**{k: v for k, v in raw.items() if k not in ("offline", "hub")}, path=path)
    if not artifacts.is_folder_name(task.name):
        raise ValueError(
            f"{path}: name {task.name!r} cannot name a results folder (a string with no '/' or '\\' "
            "and no leading '.'); results and caches are filed by task name"
        )
    if task.family not in FAMILIES:
        raise ValueError(f"{path}: family must be one of {FAMILIES}, got {task.family!r}")
    budget = task.budget
    if not isinstance(budget, dict) or len(set(budget) & {"max_steps", "epochs"}) != 1 or len(budget) != 1:
        raise ValueError(f"{path}: budget must be exactly one of {{max_steps: N}} or {{epochs: N}}, got {budget}")
    ((kind, amount),) = budget.items()
    if isinstance(amount, bool) or not isinstance(amount, int if kind == "max_steps" else (int, float)) or amount <= 0:
        raise ValueError(
            f"{path}: budget {kind} must be a positive {'integer' if kind == 'max_steps' else 'number'}, got {amount!r}"
        )
    if task.metric not in METRICS[task.family]:
        raise ValueError(
            f"{path}: metric {task.metric!r} is not a {task.family} score; use one of {list(METRICS[task.family])}"
        )
    if task.squad_version not in SQUAD_VERSIONS:
        raise ValueError(f"{path}: squad_version must be one of {SQUAD_VERSIONS}, got {task.squad_version!r}")
    if task.family == "tc" and "tc_labelling" not in raw:
        raise ValueError(
            f"{path}: a tc task needs `tc_labelling`: all (the paper's: every sub-token tagged, a vote per word) or "
            "first (each word's first sub-token); add `tc_labelling: all` for the paper's protocol"
        )
    if task.tc_labelling not in TC_LABELLINGS:
        raise ValueError(f"{path}: tc_labelling must be one of {TC_LABELLINGS}, got {task.tc_labelling!r}")
    if task.family in ("sc", "tc") and not task.labels:
        raise ValueError(f"{path}: an {task.family} task needs a `labels` list")
    _check_label_names(path, "labels", task.labels, strings=True)
    if raw.get("hub") is None and raw.get("offline") is None:
        raise ValueError(f"{path}: give at least one source, `hub` or `offline`")
    for block, settings in (("offline", OfflineSource), ("hub", HubSource)):
        if raw.get(block) is None:
            continue
        source = settings.from_yaml(raw[block], path, block)
        setattr(task, block, source)
        for role, rule in (source.derive or {}).items():
            _check_derive_rule(path, block, role, rule)
        _check_label_names(path, f"{block}.label_values", source.label_values, strings=False)
        if source.scheme not in SCHEMES:
            raise ValueError(f"{path}: {block}.scheme must be one of {SCHEMES}, got {source.scheme!r}")
    if task.offline and task.offline.unavailable is None and task.offline.format not in FORMATS:
        raise ValueError(f"{path}: offline.format must be one of {FORMATS}, got {task.offline.format!r}")
    return task


def _check_label_names(path: Path, key: str, values, strings: bool) -> None:
    """Refuse what YAML reads in place of the text written: booleans (unquoted yes/no...), numbers in `labels`."""
    if values is None:
        return
    if not isinstance(values, list):
        raise ValueError(f"{path}: {key} must be a list, got {values!r}")
    bad = [v for v in values if isinstance(v, bool) or (strings and not isinstance(v, str))]
    if bad:
        raise ValueError(
            f"{path}: {key} holds {bad}, not the text written: YAML reads unquoted yes/no/"
            f"true/false/on/off as booleans and digits as numbers; quote each value, e.g. "
            f'["yes", "no"]'
        )


def _check_derive_rule(path: Path, block: str, role: str, rule) -> None:
    example = "{from: train, fraction: 0.05, seed: 42}"
    if role not in ROLES or not isinstance(rule, dict):
        raise ValueError(
            f"{path}: {block}.derive.{role} must be a split name ({ROLES}) mapped to a rule like {example}"
        )
    missing = [k for k in ("from", "fraction", "seed") if k not in rule]
    unknown = sorted(set(rule) - {"from", "fraction", "seed", "group"})
    if missing or unknown:
        raise ValueError(
            f"{path}: {block}.derive.{role} needs from, fraction and seed (optional: group); "
            f"missing {missing}, unknown {unknown}; e.g. {example}"
        )
    fraction, seed = rule["fraction"], rule["seed"]
    if not isinstance(fraction, (int, float)) or not 0 < fraction < 1 or not isinstance(seed, int):
        raise ValueError(f"{path}: {block}.derive.{role}: fraction must be in (0, 1) and seed an integer, got {rule}")


def load_splits(
    task: Task | str,
    data_dir: str | os.PathLike | None = None,
    max_train: int | None = None,
    max_eval: int | None = None,
    source: str = "offline",
    corpus: str = "pooled",
    relevance: str = "binary",
    pair_encoding: str = "joined",
) -> DatasetDict | dict:
    """A task's (a `Task`, or a name or YAML path for `load_task`) train / validation / test splits in the family's
    normalised layout (module docstring): a `DatasetDict`; for ir a dict of the pairs `Dataset` and `RetrievalSplit`s.

    Args:
        data_dir: the data bundle; resolution: this argument > $MLM_VS_CLM_DATA > ../shared/data.
        max_train, max_eval: keep at most N training (ir: pairs) / validation and test (ir: evaluated queries)
            examples, a seed-42 shuffle's first N (ir queries: sampled with seed 42 among those evaluated), after
            validation is carved from train.
        source: "offline" (the data bundle) or "hub" (the Hugging Face datasets of the paper; needs network).
        corpus (ir): "pooled" (the harness: the documents judged in validation or test), "judged" (each split's own
            judged documents) or "full". relevance (ir): "binary" (the harness: a judgement >= 1 is relevant, gain 1,
            lower ones dropped) or "graded" (the qrels scores are the gains). In both, a query with no judgement
            >= 1 is not evaluated (the harness's rule; a warning gives the count).
        pair_encoding (sc): "joined" (the paper: the template applied) or "segments" (a two-field template gives
            "text" and "text_pair", the fields' values).
    """
    task = task if isinstance(task, Task) else load_task(task)
    with _naming_yaml(task):
        choices = {
            "source": (source, "offline", "hub"),
            "corpus": (corpus, "pooled", "judged", "full"),
            "relevance": (relevance, "binary", "graded"),
            "pair_encoding": (pair_encoding, "joined", "segments"),
        }
        for name, (value, *allowed) in choices.items():
            if value not in allowed:
                quoted = [repr(a) for a in allowed]
                raise ValueError(f"{name} must be {', '.join(quoted[:-1])} or {quoted[-1]}, got {value!r}")
        for name, value in (("max_train", max_train), ("max_eval", max_eval)):
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a positive integer or None, got {value!r}")
        spec = _source_spec(task, source)
        if task.family == "ir":
            return _load_retrieval(task, spec, source, data_dir, max_train, max_eval, corpus, relevance)
        if source == "hub" and "train" not in (spec.splits or {}):
            raise ValueError(f"task {task.name!r}: hub.splits needs a train role")
        records = (
            _read_offline(task, spec, data_dir)
            if source == "offline"
            else readers.read_hub(spec.path, spec.name, spec.revision, spec.splits, spec.columns)
        )
        if task.family == "tc" and spec.scheme == "iob1":  # any reader: tags become IOB2 here
            records = {role: [{**r, "tags": iob1_to_iob2(r["tags"])} for r in rows] for role, rows in records.items()}
        _check_inputs(task, records, spec)  # every row of every split, before any split is carved
        records = _derive_splits(task, records, spec.derive)
        if missing := [r for r in ROLES if r not in records]:
            raise ValueError(f"task {task.name!r}: no {missing} split; add it to files/splits or derive it")
        limits = {"train": max_train, "validation": max_eval, "test": max_eval}
        from datasets import DatasetDict

        return DatasetDict(
            {role: _to_dataset(task, _subset(records[role], limits[role]), spec, pair_encoding) for role in ROLES}
        )


@contextlib.contextmanager
def _naming_yaml(task: Task):
    """Inside the block, a one-line error (ValueError, FileNotFoundError) about a task's data names its YAML."""
    try:
        yield
    except (ValueError, FileNotFoundError) as error:
        if task.path is None or str(task.path) in str(error):
            raise
        raise type(error)(f"{error} (task YAML {task.path})") from None


def _source_spec(task: Task, source: str) -> OfflineSource | HubSource:
    spec = task.offline if source == "offline" else task.hub
    if spec is None:
        other = "hub" if source == "offline" else "offline"
        raise ValueError(f"task {task.name!r} has no {source} source; use source={other!r}")
    if source == "offline" and spec.unavailable is not None:
        stand_in = f"; use the stand-in task {spec.stand_in!r}" if spec.stand_in else ""
        raise ValueError(f"task {task.name!r} has no offline data ({spec.unavailable}){stand_in}, or source='hub'")
    return spec


def data_files(task: Task, source: str = "offline", data_dir=None) -> list[Path]:
    """Every local file a task reads (offline source; [] for the Hub, whose data is named by path and revision)."""
    if source != "offline":
        return []
    with _naming_yaml(task):
        spec = _source_spec(task, source)
        if spec.format == "beir":
            corpus, queries, qrels = _beir_files(task, spec, data_dir)
            return sorted({corpus, queries, *qrels.values()})
        files = _resolve_files(task, spec.files or {}, *_data_root(task, spec, data_dir))
    return sorted({p for paths in files.values() for p in paths})


# Offline test files that are not a copy of the split their task's `hub:` maps to the test role (every other one is,
# e.g. sc/sst2/dev.tsv is GLUE SST-2's validation split; source: the bundle's README): `split`, the Hub split the file
# is instead; `stand_in`, what the file is when it is not that Hub dataset at all (its results carry this note).
OFFLINE_TEST_FILES = {
    "sc/qqp/test.tsv.gz": {
        "stand_in": "the test half of a balanced random split of the raw Quora release (5k duplicates, 5k not), not "
        "GLUE QQP; not comparable with published QQP numbers"
    },
    "sc/mrpc/test.tsv": {"split": "test"},  # the labelled MSR Paraphrase test set, which GLUE ships without labels
}


def _carve(rule: dict) -> str:
    by = f"by {rule['group']}, " if rule.get("group") else ""
    return f"{float(rule['fraction']):.0%} ({by}seed {rule['seed']})"


def _role_split(mapping: dict, derive: dict, role: str, name_of=str, outer: bool = True) -> str:
    """What a role of a task source is: a named split (`mapping`) or a carve of another role, less what later carves
    take out of it."""
    if role in mapping:
        text = name_of(mapping[role])
    elif role in derive:
        text = f"{_carve(derive[role])} of {_role_split(mapping, derive, derive[role]['from'], name_of, False)}"
    else:
        raise ValueError(f"no {role!r} split in {mapping} (derive: {derive})")
    taken = [f"{_carve(rule)} carved out as {other}" for other, rule in derive.items() if rule["from"] == role]
    return f"{text}, less {' and '.join(taken)}" if taken and outer else text


def _file_split(paths) -> str:
    """The split a bundle file holds, by its name: `sc/sst2/dev.tsv` -> `dev`, `tc/conll2003/eng.testb.gz` ->
    `eng.testb`."""
    suffixes = (".gz", ".json", ".jsonl", ".tsv", ".iob2", ".txt")
    return " + ".join(
        functools.reduce(str.removesuffix, suffixes, Path(path).name)
        for path in ([paths] if isinstance(paths, str) else paths)
    )


def _hub_splits(hub) -> dict:
    """The Hub splits of a task's `HubSource` by role (ir: its qrels splits)."""
    return hub.splits or (hub.qrels or {}).get("splits") or {}


@functools.cache
def describe_test_data(task_name: str, source: str) -> dict:
    """Which data the test scores of registered task `task_name` come from (`source`: "hub" or "offline", as a
    result's identity records it), as the model-index and the cards name it: the Hub dataset, config and split the
    test role maps to, or the split an offline file copies, a carved split, or a stand-in (`OFFLINE_TEST_FILES`).

    Returns:
        {"dataset": a Hub id (the task name when not a Hub split), "config", "split", "revision", "origin", "stand_in":
        None or what the data is instead, "label": one line for tables, "notes": the task's notes on its offline data
        ("" for the Hub)}.
    """
    try:
        task = load_task(task_name)
    except (ValueError, FileNotFoundError):
        raise ValueError(
            f"task {task_name!r} of the results is not in evaluation/tasks/: which data its scores come from is "
            "unknown; add its YAML there"
        ) from None
    hub, out = task.hub, {"config": None, "revision": None, "stand_in": None, "notes": ""}
    spec = hub if source == "hub" else task.offline
    if spec is None or (isinstance(spec, OfflineSource) and spec.unavailable is not None):
        raise ValueError(f"task {task_name!r} has no {source} data, yet results claim it: check their identity")
    if source == "hub":
        out.update(
            dataset=hub.path,
            config=hub.name,
            revision=hub.revision,
            origin="Hub",
            split=_role_split(_hub_splits(hub), hub.derive or {}, "test"),
        )
    elif source == "offline":
        files, derive = spec.files or spec.qrels or {}, spec.derive or {}
        out.update(origin="offline bundle", notes=" ".join(task.notes.split()))
        test_files = [] if "test" not in files else [files["test"]] if isinstance(files["test"], str) else files["test"]
        facts = [OFFLINE_TEST_FILES.get(f) or {} for f in test_files]
        stand_in = "; ".join(f["stand_in"] for f in facts if "stand_in" in f) or None
        if not test_files:  # carved out of another file: not an official split
            stand_in = "a split carved from the bundle's files, not an official split of the dataset"
        if hub and "test" in _hub_splits(hub) and not stand_in:  # the file is a copy of the Hub split
            hub_split = next((f["split"] for f in facts if "split" in f), _hub_splits(hub)["test"])
            out.update(dataset=hub.path, config=hub.name, split=_role_split(files, derive, "test", lambda _: hub_split))
        else:
            out.update(dataset=task.name, split=_role_split(files, derive, "test", _file_split), stand_in=stand_in)
    else:
        raise ValueError(f"unknown data source {source!r} for task {task_name!r}: expected 'hub' or 'offline'")
    where = f"`{out['dataset']}`" + (f" ({out['config']})" if out["config"] else "")
    note = (
        f" (stand-in: {out['stand_in']})"
        if out["stand_in"]
        else " (offline bundle copy)"
        if source == "offline"
        else ""
    )
    out["label"] = f"{where}, {out['split']}{note}"
    return out


def _data_root(task: Task, spec: OfflineSource, data_dir) -> tuple[Path, str]:
    """The folder offline paths are relative to, and a phrase saying where it came from."""
    if spec.root is not None:
        root = Path(spec.root)
        root = root if root.is_absolute() else Path(task.path).parent / root
        return root.resolve(), f"offline.root of {task.path}"
    if data_dir is not None:
        where = "the data_dir argument"
    elif os.environ.get(DATA_ENV_VAR):
        where = f"${DATA_ENV_VAR}"
    else:
        where = "the default ../shared/data"
    return resolve_data_dir(data_dir), where


def _resolve_files(task: Task, files: dict[str, Any], root: Path, where: str) -> dict[str, list[Path]]:
    """Every file of every role, checked to exist before anything is parsed."""
    resolved = {}
    for role, names in files.items():
        if role not in ROLES:
            raise ValueError(f"task {task.name!r}: files role {role!r} must be one of {ROLES}")
        names = [names] if isinstance(names, str) else list(names)
        resolved[role] = [root / name for name in names]
        for name, path in zip(names, resolved[role]):
            if path.is_file():
                continue
            if Path(name).is_absolute():  # an absolute path ignores the data dir: do not blame it
                raise FileNotFoundError(
                    f"task {task.name!r}: missing dataset file {path} (an absolute path in {task.path})"
                )
            raise FileNotFoundError(
                f"task {task.name!r}: missing dataset file {path} (data dir {root} from {where}; "
                f"resolution: data_dir argument > ${DATA_ENV_VAR} > ../shared/data)"
            )
    return resolved


def _read_offline(task: Task, spec: OfflineSource, data_dir) -> dict[str, list[dict]]:
    files = _resolve_files(task, spec.files or {}, *_data_root(task, spec, data_dir))
    if "train" not in files:
        raise ValueError(f"task {task.name!r}: offline.files needs a train role")
    options = {name: getattr(spec, name) for name in readers.READERS[spec.format].options}  # the reader's settings
    return {
        role: [row for path in paths for row in readers.read_records(spec.format, path, options)]
        for role, paths in files.items()
    }


def _label_index(task: Task, spec: OfflineSource | HubSource) -> dict[str, int]:
    """Map a raw label value (as a string) to its index in task.labels."""
    values = spec.label_values or task.labels
    if len(values) != len(task.labels):
        raise ValueError(f"task {task.name!r}: label_values has {len(values)} entries for {len(task.labels)} labels")
    return {str(v): i for i, v in enumerate(values)}


def _check_inputs(task: Task, records: dict[str, list[dict]], spec: OfflineSource | HubSource) -> None:
    """Refuse an unknown label, a template field with no input column, or a QA answer not at its offset."""
    for role, rows in records.items():
        if not rows:
            raise ValueError(f"task {task.name!r}: the {role} split is empty; check its files/splits")
        if task.family == "sc":
            missing = {f for f in _template_fields(task.template or "{text}") if f not in rows[0]}
            if missing:
                raise ValueError(
                    f"task {task.name!r}: template field(s) {sorted(missing)} are not input columns {sorted(rows[0])}"
                )
            seen = {str(r["label"]) for r in rows}
        elif task.family == "tc":
            seen = {str(t) for r in rows for t in r["tags"]}
        elif task.family == "qa":  # training takes a question's first answer at its offset: a wrong one is no span
            for r in rows:
                for start, text in zip(r["answers"]["answer_start"], r["answers"]["text"]):
                    if r["context"][int(start) : int(start) + len(text)] != text:
                        raise ValueError(
                            f"task {task.name!r}: question {r['id']!r} of the {role} split: answer "
                            f"{text!r} is not at its answer_start {start} in the context (0-based "
                            "character offsets); fix the offsets in the data"
                        )
            continue
        else:
            continue
        known = _label_index(task, spec)
        if unknown := sorted(seen - known.keys()):
            raise ValueError(
                f"task {task.name!r}: label(s) {unknown} in the {role} split are not in the task's label "
                f"set {list(known)}; fix `labels` / `label_values` in {task.path}"
            )


def _template_fields(template: str) -> list[str]:
    """The input fields a template names, in order, each once."""
    import string

    return list(dict.fromkeys(field for _, field, _, _ in string.Formatter().parse(template) if field))


def _to_dataset(task: Task, rows: list[dict], spec: OfflineSource | HubSource, pair_encoding: str) -> Dataset:
    """Build the family's normalised Dataset (labels already checked by `_check_inputs`)."""
    from datasets import ClassLabel, Dataset, Features, Sequence, Value

    if task.family == "sc":
        index, template = _label_index(task, spec), task.template or "{text}"
        fields = _template_fields(template)
        if pair_encoding == "segments" and len(fields) == 2:  # two segments: the fields' values, no template text
            data = {"text": [str(r[fields[0]]) for r in rows], "text_pair": [str(r[fields[1]]) for r in rows]}
        else:
            data = {"text": [template.format(**r) for r in rows]}
        data["label"] = [index[str(r["label"])] for r in rows]
        features = Features(
            {
                **{column: Value("string") for column in data if column != "label"},
                "label": ClassLabel(names=task.labels),
            }
        )
    elif task.family == "tc":
        index = _label_index(task, spec)
        data = {"tokens": [list(r["tokens"]) for r in rows], "tags": [[index[str(t)] for t in r["tags"]] for r in rows]}
        features = Features({"tokens": Sequence(Value("string")), "tags": Sequence(ClassLabel(names=task.labels))})
    else:  # qa
        data = {
            "id": [str(r["id"]) for r in rows],
            "title": [r.get("title") or "" for r in rows],
            "question": [r["question"] for r in rows],
            "context": [r["context"] for r in rows],
            "answers": [
                {"text": list(r["answers"]["text"]), "answer_start": [int(s) for s in r["answers"]["answer_start"]]}
                for r in rows
            ],
        }
        features = Features(
            {
                "id": Value("string"),
                "title": Value("string"),
                "question": Value("string"),
                "context": Value("string"),
                "answers": {"text": Sequence(Value("string")), "answer_start": Sequence(Value("int32"))},
            }
        )
    return Dataset.from_dict(data, features=features)


def _derive_splits(task: Task, records: dict[str, list], derive: dict | None, ir: bool = False) -> dict[str, list]:
    """Carve missing splits out of others, in YAML order (a missing validation: 5% of train, seed 42); `ir`: the
    records are (query id, judgements) pairs, whole queries move."""
    records, derive = dict(records), dict(derive or {})
    if "validation" not in records and "validation" not in derive:
        derive["validation"] = DEFAULT_VALIDATION
    for role, rule in derive.items():
        source, fraction, seed = rule["from"], float(rule["fraction"]), int(rule["seed"])
        if role in records or source not in records:
            where = "qrels" if ir else "files/splits"
            raise ValueError(f"task {task.name!r}: cannot derive {role!r} from {source!r} (check {where}/derive)")
        rows = records[source]
        if ir or rule.get("group"):
            keep, carved = _group_split([r[0] if ir else r[rule["group"]] for r in rows], fraction, seed)
        else:
            keep, carved = carve_indices(len(rows), fraction, seed)
        records[source], records[role] = [rows[i] for i in keep], [rows[i] for i in carved]
        _warn_small_validation(task, role, rule, len(carved), len(rows), "queries" if ir else "instances")
    return records


def _warn_small_validation(task: Task, role: str, rule: dict, carved: int, total: int, unit: str) -> None:
    """One line on stderr when a carved validation split is too small (< MIN_VALIDATION) to choose an LR on, with
    the fraction that carves enough (or, when none leaves a training split, a validation file)."""
    if role != "validation" or carved >= MIN_VALIDATION:
        return
    enough = math.ceil(100 * MIN_VALIDATION / total) / 100  # carves >= MIN_VALIDATION of `total` (by row or id)
    fix = (
        f"carve more (derive: {{validation: {{from: {rule['from']}, fraction: {enough:g}, seed: {rule['seed']}}}}})"
        " or give a validation file"
        if rule["fraction"] < enough < 0.5
        else "give a validation file"
    )
    print(
        f"warning: task {task.name!r}: the validation split carved from {rule['from']} holds {carved} {unit} "
        f"({rule['fraction']:g} of {total}, seed {rule['seed']}), too few to choose a learning rate on; {fix}",
        file=sys.stderr,
    )


def carve_indices(n: int, fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """(kept, carved) row indices as `Dataset.train_test_split(train_size=1 - fraction, seed=seed)`, no Dataset."""
    n_train = math.floor(round(1.0 - fraction, 10) * n)
    n_test = n - n_train
    permutation = np.random.default_rng(seed).permutation(n)
    return permutation[n_test : n_test + n_train].tolist(), permutation[:n_test].tolist()


def _group_split(groups: list, fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """Row indices kept and carved when whole groups move (EncodEval's split_retrieval_dataset recipe)."""
    unique = sorted(set(groups))
    kept = set(random.Random(seed).sample(unique, round((1.0 - fraction) * len(unique))))
    return [i for i, g in enumerate(groups) if g in kept], [i for i, g in enumerate(groups) if g not in kept]


def _subset(rows: list, limit: int | None) -> list:
    """The first `limit` rows of a seed-42 shuffle, as `Dataset.shuffle(seed=42).select(range(limit))`."""
    if limit is None or limit >= len(rows):
        return rows
    return [rows[i] for i in np.random.default_rng(SUBSET_SEED).permutation(len(rows))[:limit]]


def _load_retrieval(task, spec, source, data_dir, max_train, max_eval, corpus_mode, relevance) -> dict:
    if source == "offline":
        corpus, queries, qrels = _beir_files(task, spec, data_dir)
        docs, queries, qrels = readers.read_beir(
            str(corpus), str(queries), {r: str(p) for r, p in qrels.items()}, spec.doc_template
        )
        pairs = None
    else:
        if not spec.corpus or not spec.queries or not (spec.qrels or {}).get("splits"):
            raise ValueError(
                f"task {task.name!r}: a hub ir source needs corpus {{name}}, queries {{name}} and qrels "
                "{name, splits: {role: split}}"
            )
        docs, queries, qrels, pairs = readers.read_hub_retrieval(
            spec.path, spec.revision, spec.corpus, spec.queries, spec.qrels, spec.train_pairs, spec.doc_template
        )
    if "train" not in qrels and "train" not in (spec.derive or {}) and pairs is None:
        raise ValueError(
            f"task {task.name!r} has qrels for {sorted(qrels)} only: fine-tuning needs training pairs; add a train "
            f"qrels file to {task.path}, or carve one out, e.g. `derive: {{train: {{from: {sorted(qrels)[0]}, "
            "fraction: 0.5, seed: 42}}` (validation is then carved from train)"
        )
    carved = _derive_splits(task, {role: list(judged.items()) for role, judged in qrels.items()}, spec.derive, ir=True)
    qrels = {role: dict(items) for role, items in carved.items()}
    missing = [r for r in ("validation", "test") if r not in qrels]
    if "train" not in qrels and pairs is None:
        missing.append("train")
    if missing:
        raise ValueError(f"task {task.name!r}: no {missing} qrels; add them to qrels or derive them")
    if pairs is None:
        pairs = _pairs_from_qrels(task, qrels["train"], queries, docs)
    result = {"train": pairs.select(_subset(list(range(len(pairs))), max_train))}
    evaluated, judged = {}, {}
    for role in ("validation", "test"):
        relevant = [q for q, judgements in qrels[role].items() if max(judgements.values(), default=0) >= 1]
        if qrels[role] and not relevant:
            raise ValueError(
                f"task {task.name!r}: no {role} query judges a document relevant (score >= 1); check its qrels"
            )
        _warn_dropped_queries(task, role, len(qrels[role]) - len(relevant), len(qrels[role]))
        evaluated[role] = {q: dict(qrels[role][q]) for q in sample_ids(relevant, max_eval)}
        pooled_from = qrels[role] if max_eval is None else evaluated[role]  # the harness pools every judged doc
        judged[role] = {d for judgements in pooled_from.values() for d in judgements}
    pooled = judged["validation"] | judged["test"]
    _check_ids(task, "evaluation", {q for role in evaluated for q in evaluated[role]}, queries, pooled, docs)
    for role in ("validation", "test"):
        documents = {"full": set(docs), "pooled": pooled, "judged": judged[role]}[corpus_mode]
        result[role] = _retrieval_split(evaluated[role], queries, docs, documents, relevance)
    return result


def _warn_dropped_queries(task: Task, role: str, dropped: int, total: int) -> None:
    """One line on stderr when queries of an ir evaluation split judge no document relevant (every score below 1):
    they are not evaluated, in either relevance mode, as the paper's harness keeps only qrels scored >= 1."""
    if dropped:
        print(
            f"warning: task {task.name!r}: {dropped} of {total} {role} queries judge no document relevant (every "
            "score below 1) and are not evaluated, as in the paper's harness (docs/evaluation.md, \"Retrieval "
            'evaluation")',
            file=sys.stderr,
        )


def sample_ids(ids, limit: int | None) -> list:
    """The ids evaluated when at most `limit` are (ir queries, here and in `evaluation.mteb`): seed 42's, sorted."""
    ids = sorted(ids)
    return sorted(random.Random(SUBSET_SEED).sample(ids, limit)) if limit is not None and limit < len(ids) else ids


def _pairs_from_qrels(task, qrels, queries, docs) -> Dataset:
    rows = [(qid, did) for qid, judged in qrels.items() for did, rel in judged.items() if rel > 0]
    _check_ids(task, "train", {q for q, _ in rows}, queries, {d for _, d in rows}, docs)
    from datasets import Dataset

    return Dataset.from_dict({"query": [queries[q] for q, _ in rows], "positive": [docs[d] for _, d in rows]})


def _retrieval_split(kept, queries, docs, documents, relevance) -> RetrievalSplit:
    if relevance == "binary":  # the original keeps judgements >= 1 only (every kept query has one)
        kept = {q: {d: 1 for d, rel in judged_docs.items() if rel >= 1} for q, judged_docs in kept.items()}
    return RetrievalSplit(
        corpus={d: docs[d] for d in sorted(documents)}, queries={q: queries[q] for q in kept}, qrels=kept
    )


def _check_ids(task, role, qids, queries, dids, docs) -> None:
    unknown_q, unknown_d = sorted(qids - queries.keys()), sorted(dids - docs.keys())
    if unknown_q or unknown_d:
        raise ValueError(
            f"task {task.name!r}: {role} qrels name {len(unknown_q)} unknown query id(s) {unknown_q[:3]} and "
            f"{len(unknown_d)} unknown doc id(s) {unknown_d[:3]}; check the corpus/queries/qrels files"
        )


def _beir_files(task: Task, spec: OfflineSource, data_dir) -> tuple[Path, Path, dict[str, Path]]:
    """A beir source's corpus and queries files and {role: qrels file}, each checked to exist."""
    root, where = _data_root(task, spec, data_dir)
    if not spec.qrels or spec.corpus is None or spec.queries is None:
        raise ValueError(f"task {task.name!r}: a beir source needs corpus, queries and qrels {{role: file}}")
    corpus, queries = _resolve_files(task, {"train": [spec.corpus, spec.queries]}, root, where)["train"]
    qrels = _resolve_files(task, {r: [p] for r, p in spec.qrels.items()}, root, where)
    return corpus, queries, {role: paths[0] for role, paths in qrels.items()}
