"""The result record as one contract (`core.store`): one constructor, one reader that finds results by what they
record, one "current for this identity" predicate, and the one-time migration of format-2 results."""

import json
import shutil
import tarfile

import pytest

from analysis import statistics
from core import store
from core.paths import REPO_ROOT
from evaluation import identity
from tests.test_scoring import FORMAT2_CODE

ARCHIVED = "results/610m-clm-21k-mlm40-42k/conll2003/lr0.0002-seed0.json"  # the mini study's first result


def write(root, model="610m-clm-42k-pseed1", task="sst2", lr=1e-4, seed=0, ident=None):
    path = store.result_path(root, model, task, lr, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = store.new_result(
        model,
        task,
        "sc",
        lr,
        seed,
        store.result_body("accuracy", {"test": {"accuracy": 1.0}}),
        ident or {"scoring": identity.scoring_identity("sc")},
        {},
        store.pretrain_seed(model),
    )
    return store.write_result(path, record)


def test_the_record_carries_the_pretraining_replicate(tmp_path):
    path = write(tmp_path)
    assert store.read_result(path)["pretrain_seed"] == 1
    assert store.read_result(write(tmp_path, model="bert-base"))["pretrain_seed"] is None


def test_the_record_body_is_declared_and_checked_in_core_store():
    """`new_result` files only a declared body (`BODY`, `OPTIONAL_BODY`), of a status in `STATUSES`, scored with
    its main metric, of a kind in `KINDS` (`record_kind`); tests/test_layout.py checks nothing else reads it raw."""
    body = store.result_body("accuracy", {"test": {"accuracy": 1.0}})
    for fields, refused in [
        ({**body, "main_metric": "f1"}, "no test score of its main metric"),
        ({**body, "scores": {}}, r"has \['scores'\]"),
        ({"status": "ok"}, "lacks"),
        ({**body, "evaluation": "other"}, "not one of"),
    ]:
        with pytest.raises(ValueError, match=refused):
            store.new_result("m", "sst2", "sc", 1e-4, 0, fields, {}, {})
    for status in ("done", None):
        with pytest.raises(ValueError, match="is not one of"):
            store.new_result("m", "sst2", "sc", 1e-4, 0, {"status": status}, {}, {})
    marks = (
        {},
        {"evaluation": "mteb"},
        {"source": {"kind": "encodeval"}},
        {"evaluation": "probe"},
        {"evaluation": "heldout"},
    )
    assert [store.marked_kind(r) for r in marks] == list(store.KINDS)
    assert store.new_result("m", "sst2", "sc", 1e-4, 0, body, {}, {})["kind"] == "grid"  # stored
    assert list(store.Result.__annotations__)[:5] == list(store.BODY)


def test_the_stored_kind_is_checked_and_a_result_filed_before_it_was_stored_gets_its_kind(tmp_path):
    path = write(tmp_path)
    record = json.loads(path.read_text())
    assert record["kind"] == "grid" and store.record_kind(store.read_result(path)) == "grid"
    path.write_text(json.dumps({k: v for k, v in record.items() if k != "kind"}))  # filed before kinds were stored
    assert store.record_kind(store.read_result(path)) == "grid"
    path.write_text(json.dumps({**record, "kind": "mteb"}))
    with pytest.raises(ValueError, match="is of kind 'mteb', its markers say 'grid'"):
        store.read_result(path)


def test_a_copy_or_a_moved_result_is_refused_in_one_line(tmp_path):
    original = write(tmp_path)
    copy = shutil.copy(original, original.with_name("lr0.0001-seed0 (copy).json"))
    moved = original.parent.parent / "mnli" / original.name
    moved.parent.mkdir()
    shutil.copy(original, moved)
    assert store.result_files(tmp_path) == sorted([original, copy, moved])  # found, so they cannot hide
    for path in (copy, moved):
        with pytest.raises(ValueError, match=r"records .*sst2/lr0.0001-seed0.json: a copy or a moved file") as error:
            store.read_result(path)
        assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match="a copy or a moved file"):
        statistics.load_results(tmp_path)  # the report never counts it
    copy.unlink(), shutil.rmtree(moved.parent)
    assert [r["_path"] for r in statistics.load_results(tmp_path)] == [str(original)]


def format2_result(root) -> tuple:
    """A result of the committed mini study (migrated from format 2), as format 2 wrote it: source hashes
    (`identity.code`) and not its scoring versions, every protocol setting, no `pretrain_seed`."""
    with tarfile.open(REPO_ROOT / "docs" / "mini-study" / "results.tar.xz", "r:xz") as tar:
        record = json.load(tar.extractfile(ARCHIVED))
    assert record["format"] == 3 and record["family"] == "tc" and record.pop("pretrain_seed") is None
    record["format"], record["identity"]["code"] = 2, {name: "0" * 64 for name in FORMAT2_CODE}
    del record["identity"]["scoring"]
    record["identity"]["protocol"] |= {"doc_stride": 128, "ir_pooling": "mean"}  # QA's and IR's
    path = root / ARCHIVED.removeprefix("results/")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(record))
    return path, record


def test_format2_results_are_migrated_once(tmp_path, call_main):
    path, old = format2_result(tmp_path)
    saved = path.with_suffix(".model")
    store.write_finetune_info(saved, {"task": "conll2003", "identity": old["identity"]})
    current = identity.scoped(
        "tc", {**{k: v for k, v in old["identity"].items() if k != "code"}, "scoring": identity.scoring_identity("tc")}
    )  # no QA or IR setting: a TC result
    refusal = (
        f"result file {path} has format 2, this version reads format 3: run `python -m evaluation.identity "
        "--migrate RESULTS_DIR` once"
    )
    with pytest.raises(ValueError) as error:  # the report, the cards, the grid: only the migration reads format 2
        statistics.load_results(tmp_path)
    assert str(error.value) == refusal and store.result_state(path, current) == ("changed", [refusal])
    done = call_main(identity.main, "--migrate", tmp_path)
    assert done.returncode == 0 and "migrated 1 result file(s)" in done.stdout
    assert store.result_state(path, current) == ("done", [])
    record = store.read_result(path)
    assert record["format"] == 3 and record["pretrain_seed"] is None and "code" not in record["identity"]
    assert "doc_stride" in old["identity"]["protocol"] and "doc_stride" not in record["identity"]["protocol"]
    assert {k: v for k, v in record.items() if k not in ("format", "identity", "pretrain_seed", "kind")} == {
        k: v for k, v in old.items() if k not in ("format", "identity")
    }
    assert store.read_finetune_info(saved)["identity"] == record["identity"]
    assert "migrated 0 result file(s)" in call_main(identity.main, "--migrate", tmp_path).stdout
    with tarfile.open(REPO_ROOT / "docs" / "mini-study" / "results.tar.xz", "r:xz") as tar:
        assert record == {**json.load(tar.extractfile(ARCHIVED)), "kind": "grid"}  # what the archive's migration made
    # its folder, written before folders were claimed, is claimed for its protocol
    assert json.loads((path.parent / store.PROTOCOL_NAME).read_text()) == record["identity"]["protocol"]


def test_a_second_migration_leaves_what_one_migration_of_both_leaves(tmp_path, call_main):
    """Item 2 of issue 43: migrated, then given another format-2 result and migrated again, a folder holds what one
    migration of both gives (no lock file beside every result: `.lr...json.lock` were left)."""

    def tree(root):
        return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}

    path, record = format2_result(tmp_path / "twice")
    other = path.with_name("lr0.0003-seed0.json")
    assert call_main(identity.main, "--migrate", tmp_path / "twice").returncode == 0
    other.write_text(json.dumps({**record, "lr": 3e-4}))
    assert call_main(identity.main, "--migrate", tmp_path / "twice").returncode == 0
    format2_result(tmp_path / "once")[0].with_name(other.name).write_text(json.dumps({**record, "lr": 3e-4}))
    assert call_main(identity.main, "--migrate", tmp_path / "once").returncode == 0
    assert tree(tmp_path / "twice") == tree(tmp_path / "once")
    assert sorted(tree(tmp_path / "once")) == [
        f"610m-clm-21k-mlm40-42k/conll2003/{name}"
        for name in (store.PROTOCOL_NAME, "lr0.0002-seed0.json", "lr0.0003-seed0.json")
    ]  # no .lr...json.lock


def test_the_migration_files_only_a_declared_body(tmp_path, call_main):
    path, record = format2_result(tmp_path)
    path.write_text(json.dumps({**record, "scores": {}}))  # not a key of `store.Result`
    done = call_main(identity.main, "--migrate", tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and f"{path}: a result body" in done.stderr
    assert json.loads(path.read_text())["format"] == 2 and not (path.parent / store.PROTOCOL_NAME).exists()


def test_the_migration_writes_nothing_when_a_file_is_refused(tmp_path, call_main):
    path, _ = format2_result(tmp_path)
    shutil.copy(path, path.with_name("lr0.0002-seed0.json.json"))  # a backup the glob finds
    before = path.read_bytes()
    done = call_main(identity.main, "--migrate", tmp_path)
    assert done.returncode == 2 and done.stderr.startswith("error: result file") and done.stderr.count("\n") == 1
    assert path.read_bytes() == before
    assert call_main(identity.main, "--migrate", tmp_path / "none").returncode == 2
