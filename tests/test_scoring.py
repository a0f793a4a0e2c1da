"""Scoring versions (`evaluation.identity.SCORING_VERSIONS`, `PROTOCOL_VERSION`) instead of source hashes.

Golden outputs: per family, a tiny model fine-tuned 4 steps on a fixed slice of the bundle gives per-instance outputs
and scores equal to tests/golden/scoring-<family>.json. A change that moves them fails here until the family's
version (or the protocol's) is bumped in evaluation/identity.py and the golden files regenerated, with

    GOLDEN_UPDATE=1 python -m pytest tests/test_scoring.py

which refuses to rewrite a golden file whose outputs moved while its versions did not.
"""

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import transformers

from core import store
from core.paths import REPO_ROOT
from evaluation import (
    extractive_qa,
    finetune_args,
    identity,
    metrics,
    retrieval,
    run,
    sequence_classification,
    tasks,
    token_classification,
)
from tests.fixtures.tiny_models import build_tiny_eurobert, build_tiny_tokenizer

pytestmark = pytest.mark.usefixtures("one_thread")

GOLDEN = Path(__file__).parent / "golden"
FAMILIES = {
    "sc": ("sst2", sequence_classification),
    "tc": ("conll2003", token_classification),
    "qa": ("squad", extractive_qa),
    "ir": ("scifact", retrieval),
}
# The files whose sha256 was a result's identity before scoring versions (format 2's `identity.code`).
FORMAT2_CODE = (
    "core/lora.py",
    "evaluation/baselines.py",
    "evaluation/common.py",
    "evaluation/extractive_qa.py",
    "evaluation/metrics.py",
    "evaluation/readers.py",
    "evaluation/retrieval.py",
    "evaluation/sequence_classification.py",
    "evaluation/tasks.py",
    "evaluation/token_classification.py",
)
SETTINGS = dict(
    lr=1e-3,
    seed=0,
    max_steps=4,
    batch_size=8,
    eval_batch_size=16,
    max_train=64,
    max_eval=16,
    max_length=64,
    qa_max_length=96,
    doc_stride=32,
    precision="fp32",
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, data_dir):
    return build_tiny_eurobert(tmp_path_factory.mktemp("golden") / "tiny-mlm", build_tiny_tokenizer(data_dir))


@pytest.fixture(scope="module")
def finetuned(tiny, data_dir):
    """family -> (task, args, the fine-tuned model), each trained once in this module."""
    cache = {}

    def get(family):
        if family not in cache:
            name, module = FAMILIES[family]
            task = tasks.load_task(name)
            args = finetune_args.FinetuneArgs(**SETTINGS, data_dir=str(data_dir))
            cache[family] = task, args, module.finetune(tiny, task, args)
        return cache[family]

    return get


def outputs(family, finetuned) -> dict:
    task, args, model = finetuned(family)
    return json.loads(json.dumps(FAMILIES[family][1].score(model, task, args)))  # as a result file stores it


def moved(got, want, where="") -> list[str]:
    """Where two JSON values differ (floats: relative 1e-5, so another BLAS does not count as a change)."""
    if isinstance(want, dict) and isinstance(got, dict):
        return [
            m for key in sorted(want.keys() | got.keys()) for m in moved(got.get(key), want.get(key), f"{where}.{key}")
        ]
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        return [m for i, (a, b) in enumerate(zip(got, want)) for m in moved(a, b, f"{where}[{i}]")]
    if isinstance(want, float) and isinstance(got, (int, float)) and not isinstance(got, bool):
        return [] if math.isclose(got, want, rel_tol=1e-5, abs_tol=1e-7) else [f"{where}: {want} -> {got}"]
    return [] if got == want else [f"{where}: {str(want)[:60]} -> {str(got)[:60]}"]


def check_golden(family: str, result: dict, update: bool = False) -> None:
    path = GOLDEN / f"scoring-{family}.json"
    versions = identity.scoring_identity(family)
    golden = json.loads(path.read_text()) if path.is_file() else {"versions": None, "result": None}
    changes = moved(result, golden["result"])
    if update and (changes or versions != golden["versions"]):
        assert not changes or versions != golden["versions"], (
            f"{family} outputs moved ({changes[0]}) but its versions did not: bump SCORING_VERSIONS[{family!r}] (its "
            "scorer or reader) or PROTOCOL_VERSION (the fine-tuning loop) in evaluation/identity.py first"
        )
        path.write_text(
            json.dumps(
                {
                    "what": "per-instance outputs and scores of a tiny model fine-tuned 4 steps on "
                    f"{FAMILIES[family][0]} "
                    "(tests/test_scoring.py), CPU fp32",
                    "command": "GOLDEN_UPDATE=1 python -m pytest tests/test_scoring.py",
                    "recorded_with": {"torch": torch.__version__, "transformers": transformers.__version__},
                    "versions": versions,
                    "result": result,
                },
                indent=1,
            )
            + "\n"
        )
        return
    assert not changes, (
        f"{family} outputs moved ({len(changes)} values, e.g. {'; '.join(changes[:3])}): bump "
        f"SCORING_VERSIONS[{family!r}] or PROTOCOL_VERSION in evaluation/identity.py and regenerate "
        "with `GOLDEN_UPDATE=1 python -m pytest tests/test_scoring.py`"
    )
    assert versions == golden["versions"], (
        f"{family} versions {versions} but the golden file holds "
        f"{golden['versions']}: regenerate with `GOLDEN_UPDATE=1 python -m pytest "
        "tests/test_scoring.py`"
    )


@pytest.mark.parametrize("family", FAMILIES)
def test_outputs_match_the_golden_file_of_their_version(family, finetuned):
    result = outputs(family, finetuned)
    assert result["status"] == "ok" and len(result["per_instance"]["test"]) == 16
    check_golden(family, result, update=bool(os.environ.get("GOLDEN_UPDATE")))


def test_a_changed_metric_fails_the_golden_test(finetuned, monkeypatch):
    real = metrics.accuracy
    monkeypatch.setattr(metrics, "accuracy", lambda p, r: real(p, [1 - x for x in r]))  # a "fix" that flips labels
    with pytest.raises(AssertionError, match="sc outputs moved .* bump SCORING_VERSIONS"):
        check_golden("sc", outputs("sc", finetuned))
    monkeypatch.setattr(identity, "SCORING_VERSIONS", {**identity.SCORING_VERSIONS, "sc": 2})  # bumped, not regenerated
    with pytest.raises(AssertionError, match="golden file holds"):
        check_golden("sc", json.loads((GOLDEN / "scoring-sc.json").read_text())["result"])


def test_a_bumped_version_refuses_old_results_in_one_line(tmp_path, monkeypatch):
    ident = {"model": {"config": "c"}, "scoring": identity.scoring_identity("sc")}
    path = store.result_path(tmp_path, "tiny", "sst2", 1e-4, 0)
    path.parent.mkdir(parents=True)
    fields = store.result_body("accuracy", {"test": {"accuracy": 1.0}})
    store.write_result(path, store.new_result("tiny", "sst2", "sc", 1e-4, 0, fields, ident, {}))
    assert store.result_state(path, ident) == ("done", [])
    monkeypatch.setattr(identity, "SCORING_VERSIONS", {**identity.SCORING_VERSIONS, "sc": 2})
    state, why = store.result_state(path, {**ident, "scoring": identity.scoring_identity("sc")})
    assert (state, why) == ("changed", ["scoring.sc: 1 -> 2"])


GRID = dict(tasks="sst2,conll2003,squad,scifact", lrs="1e-4", seeds="0")


def grid_identities(model: Path, data_dir, root: Path | None = None) -> list[dict]:
    """The identities `evaluation.run` gives a grid's runs: in this process, or in a fresh one on the code under
    `root`."""
    protocol = dict(max_train=64, max_eval=16, data_dir=str(data_dir))
    if root is None:
        runs = run.list_runs(run.GridArgs(model=str(model), **GRID), finetune_args.ProtocolArgs(**protocol))[0]
        return json.loads(json.dumps([r.identity for r in runs]))
    code = (
        "import json, sys; from evaluation import finetune_args, run; runs = run.list_runs(run.GridArgs("
        f"model=sys.argv[1], **{GRID!r}), finetune_args.ProtocolArgs(**{protocol!r}))[0]; "
        "print(json.dumps([r.identity for r in runs]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(model)],
        cwd=root,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.slow
def test_comment_edits_to_the_scoring_code_keep_stored_results_current(tmp_path, tiny, data_dir):
    """Every file whose bytes decided a format-2 identity, edited (a docstring and a comment): the grid's identities
    computed by the edited copy of the project are those computed by this one, so its stored results stay current."""
    copy = tmp_path / "copy"
    for package in ("core", "evaluation", "modeling_eurobert"):
        shutil.copytree(REPO_ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__"))
    for name in FORMAT2_CODE:
        text = (copy / name).read_text()
        (copy / name).write_text(text.replace('"""', '"""Reworded. ', 1) + "\n# a comment added by a refactor\n")
    assert all((copy / name).read_bytes() != (REPO_ROOT / name).read_bytes() for name in FORMAT2_CODE)
    assert grid_identities(tiny, data_dir, root=copy) == grid_identities(tiny, data_dir)
