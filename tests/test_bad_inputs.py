"""The bad-input table: every row is refused in one line `error: ...`, exit status 2, before anything is written.

Rows are (CLI main, argv, expected message fragment); `{out}` is replaced by a fresh output path. Every row must be
refused before work starts (no training), so the table stays fast. A new flag ships with its row here.
"""

import json

import pytest

from core.cli import BadInput
from core.paths import REPO_ROOT
from evaluation import run as grid

ROWS = [
    (grid.main, ["--model", "x", "--tasks", "sst2", "--lrs", "0", "--seeds", "0", "--output", "{out}"], "--lrs"),
    (grid.main, ["--model", "x", "--tasks", "sst2", "--lrs=-1e-5", "--seeds", "0", "--output", "{out}"], "--lrs"),
    (grid.main, ["--model", "x", "--tasks", "sst2", "--lrs", "1e-5", "--seeds", "0", "--warmup_ratio", "2",
                 "--output", "{out}"], "--warmup_ratio"),
    (grid.main, ["--model", "x", "--tasks", "sst2,sst2", "--lrs", "1e-5", "--seeds", "0", "--output", "{out}"],
     "more than once"),
]


@pytest.mark.parametrize("main, argv, fragment", ROWS, ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(main, argv, fragment, tmp_path, capsys):
    out = tmp_path / "out"
    with pytest.raises(BadInput) as refused:
        main([a.replace("{out}", str(out)) for a in argv])
    assert refused.value.code == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and fragment in err[0]
    assert not out.exists()


# ------------------------------------------------------------------------------------------------------------------
# Writers, models and plans (issue 24, points 4-6): placeholders name prepared inputs (the `inputs` fixture): {file}
# an existing file, {dir} an existing empty folder, {ckpt} a complete small checkpoint, {trunc} one whose
# model.safetensors is truncated ({trunc_llama}: a Llama one), {badtok} / {badcfg} one whose tokenizer.json /
# config.json is corrupt, {badyaml} a recipe YAML that is not UTF-8. Nothing under the test's folders may change.
# ------------------------------------------------------------------------------------------------------------------
def _writer_rows():
    from evaluation import inspect
    from model_cards import generate, push
    from modeling_eurobert import convert, export_native
    from recipes import heldout, launch, plan, prepare_data, pretrain, study

    debug = ["--config", str(REPO_ROOT / "recipes" / "configs" / "debug.yaml")]
    return [
        (inspect.main, ["--model", "{ckpt}", "--task", "sst2", "--max_length", "0"], "--max_length"),
        (inspect.main, ["--model", "{badtok}", "--task", "sst2"], "tokenizer.json"),
        (inspect.main, ["--model", "{badcfg}", "--task", "sst2"], "config.json"),
        (generate.main, ["{ckpt}", "--repo_id", "org/bad repo id!!", "--output", "{out}"], "refused by the Hub"),
        (generate.main, ["{ckpt}", "--output", "{dir}"], "is a directory"),
        (generate.main, ["{ckpt}", "--output", "{file}/README.md"], "is a file"),
        (generate.main, ["{trunc}", "--output", "{out}"], "truncated or corrupt"),
        (push.main, ["{ckpt}", "--repo_id", "org/m", "--dry_run", "{out}", "--retries=-1"], "--retries"),
        (push.main, ["{ckpt}", "--repo_id", "org/m", "--dry_run", "{file}"], "--dry_run"),
        (push.main, ["{trunc}", "--repo_id", "org/m", "--dry_run", "{out}"], "truncated or corrupt"),
        (export_native.main, ["{trunc}", "{out}"], "truncated or corrupt"),
        (convert.main, ["{trunc_llama}", "{out}"], "truncated or corrupt"),
        (plan.main, [], "python -m recipes.study paper"),
        (launch.main, [], "python -m recipes.study paper"),
        (pretrain.main, [*debug, "--output_dir", "{out}", "--block_size", "0"], "block_size"),
        (pretrain.main, [*debug, "--output_dir", "{out}", "--block_size=-5"], "block_size"),
        (pretrain.main, [*debug, "--output_dir", "{file}"], "output_dir"),
        (pretrain.main, [*debug, "--output_dir", "{out}", "--data_cache_dir", "{file}"], "data_cache_dir"),
        (pretrain.main, ["--config", "{badyaml}", "--output_dir", "{out}"], "not valid YAML"),
        (prepare_data.main, ["pretraining", *debug, "--block_size=-5", "--data_cache_dir", "{out}"], "block_size"),
        (heldout.main, ["--model", "{ckpt}", "--tokenizer", "{ckpt}", "--block_size", "0", "--output", "{out}"],
         "--block_size"),
        (study.main, ["smoke", "--output", "{file}"], "--output"),
        (study.main, ["smoke", "--output", "{out}", "--docs", "{file}"], "--docs"),
    ]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    import shutil

    from transformers import LlamaConfig

    from modeling_eurobert import load_architecture
    from tests.test_model_cards import make_checkpoint

    root = tmp_path_factory.mktemp("bad-inputs")
    (root / "file").write_text("a user's file\n")
    (root / "dir").mkdir()
    paths = {"file": root / "file", "dir": root / "dir", "ckpt": make_checkpoint(root / "ckpt", "610m-mlm40-42k")}
    for name in ("trunc", "badtok", "badcfg"):
        paths[name] = make_checkpoint(root / name, "610m-mlm40-42k")
    config = load_architecture("tiny", vocab_size=99, bos_token_id=1, eos_token_id=2, mask_token_id=3,
                               pad_token_id=0).to_dict()
    (paths["trunc"] / "config.json").write_text(json.dumps({**config, "architectures": ["EuroBertClmMlmForMaskedLM"]}))
    weights = paths["trunc"] / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    paths["trunc_llama"] = shutil.copytree(paths["trunc"], root / "trunc_llama")
    llama = LlamaConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, intermediate_size=37, bos_token_id=1, eos_token_id=2)
    (paths["trunc_llama"] / "config.json").write_text(llama.to_json_string())
    (paths["badtok"] / "tokenizer.json").write_text('{"version": "1.0", "trunc')
    (paths["badcfg"] / "config.json").write_text('{"model_type": ')
    paths["badyaml"] = root / "bad.yaml"
    paths["badyaml"].write_bytes(b"objective: mlm\nname: \xff\xfe\n")
    return paths


def _tree(*roots) -> dict:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for root in roots for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("index", range(len(_writer_rows())),
                         ids=lambda i: f"{i}-{_writer_rows()[i][0].__module__}-{_writer_rows()[i][2]}")
def test_writer_bad_input_is_one_line_exit_2_and_writes_nothing(index, inputs, tmp_path, capsys, monkeypatch):
    main, argv, fragment = _writer_rows()[index]
    monkeypatch.setenv("HF_TOKEN", "")  # push without --dry_run would need one; every row here is refused first
    out = tmp_path / "out"
    values = {**{k: str(v) for k, v in inputs.items()}, "out": str(out)}
    before = _tree(inputs["file"].parent, tmp_path)
    with pytest.raises(BadInput) as refused:
        main([a.format(**values) for a in argv])
    assert refused.value.code == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and fragment in err[0], err
    assert not out.exists() and _tree(inputs["file"].parent, tmp_path) == before


def test_second_study_on_one_output_is_refused_naming_the_lock_and_a_dead_holders_lock_is_taken_over(tmp_path, capsys):
    """One study process per --output: a second is refused in one line naming the lock (nothing written); the lock
    dies with its process, so one left by a killed study (its pid still in the file) does not block the next."""
    import subprocess
    import sys

    from core import artifacts
    from recipes import study

    output = tmp_path / "study"
    with artifacts.exclusive_lock(output / study.STUDY_LOCK, "a running study"):
        with pytest.raises(BadInput) as refused:
            study.main(["smoke", "--output", str(output)])
    assert refused.value.code == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and f"lock {output / study.STUDY_LOCK}" in err[0], err
    assert [p.name for p in output.iterdir()] == [study.STUDY_LOCK]  # no study.json: nothing started
    held = subprocess.run([sys.executable, "-c", "import sys, fcntl; f = open(sys.argv[1], 'a+'); "
                           "fcntl.flock(f, fcntl.LOCK_EX); f.write('123'); f.flush(); import os; os._exit(9)",
                           str(output / study.STUDY_LOCK)], timeout=60)
    assert held.returncode == 9  # died holding the lock
    with study.study_lock(output):  # taken over
        assert (output / study.STUDY_LOCK).read_text().strip() == str(__import__("os").getpid())
