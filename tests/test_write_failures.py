"""Issue 43, item 4: a write that fails as on a full disk (a small `ulimit -f`, RLIMIT_FSIZE, in a forked child) ends
every writer with one line naming what it was writing, exit status 1 and no traceback, and leaves nothing
half-written: no partial file, no temp file, no half report, card, export or conversion."""

import json

import pytest

from analysis import import_encodeval, report
from core import store
from evaluation import identity
from model_cards import generate, push
from modeling_eurobert import convert
from tests.fixtures.full_disk import run_with_file_limit
from tests.test_convert import build_tokenizer, save_llama
from tests.test_import_encodeval import REAL
from tests.test_model_cards import make_checkpoint
from tests.test_report import write_run
from tests.test_store import format2_result


def _results(tmp):
    for model in ("610m-clm-42k", "610m-mlm40-42k"):
        for lr in (1e-5, 1e-4):
            for seed in (0, 1):
                write_run(tmp / "results", model, "sst2", lr, seed, 0.8, [1.0, 0.0, 1.0, 1.0] * 20)
    return (
        report.main,
        [tmp / "results", "--output", tmp / "out"],
        tmp / "out" / "summary.md",
        400,
    )  # the first file over 400 bytes


def _card(tmp):
    ckpt = make_checkpoint(tmp / "ckpt", "610m-mlm40-42k")
    return generate.main, [ckpt, "--output", tmp / "out" / "README.md"], tmp / "out" / "README.md", 1000


def _dry_run(tmp):
    ckpt = make_checkpoint(tmp / "ckpt", "610m-mlm40-42k")
    return push.main, [ckpt, "--repo_id", "org/m", "--dry_run", tmp / "out"], tmp / "out", 4000


def _convert(tmp):
    save_llama(tmp / "llama", build_tokenizer())
    return convert.main, [tmp / "llama", tmp / "out"], tmp / "out", 4000


def _import(tmp):
    return import_encodeval.main, [REAL, "--output", tmp / "out"], tmp / "out" / "610m-clm-42k", 4000


def _migrate(tmp):
    path, _ = format2_result(tmp / "out")
    return identity.main, ["--migrate", tmp / "out"], path, 1000


@pytest.mark.parametrize(
    "case", [_results, _card, _dry_run, _convert, _import, _migrate], ids=lambda case: case.__name__.strip("_")
)
def test_a_full_disk_is_one_line_naming_the_file_and_leaves_nothing_half_written(tmp_path, case):
    main, argv, target, limit = case(tmp_path)
    out = tmp_path / "out"
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} if out.exists() else {}
    code, err = run_with_file_limit(main, argv, limit)
    assert code == 1 and "Traceback" not in err, err
    lines = [line for line in err.strip().splitlines() if not line.startswith("Loading weights")]  # tqdm's bar
    assert len(lines) == 1 and lines[0].startswith(f"error: cannot write {target}"), lines
    assert "hit the file size limit: free space and rerun" in lines[0]
    left = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} if out.exists() else {}
    assert not [p for p in left if p.name.endswith(".tmp")]  # no temp file of the failed write
    for path, data in left.items():  # nothing changed but whole files: a result reads, as before or migrated
        assert before.get(path) == data or json.loads(data), path
    if case in (_results, _card, _dry_run, _convert):  # one artifact: nothing of it is left
        assert left == before
    for path in store.result_files(out) if out.is_dir() and case is not _migrate else []:  # (format 2 is unread)
        store.read_result(path)
