"""The pretraining command line as a user meets it: every bad input ends in one line and exit status 2 with nothing
written; runs never continue on other data, another tokenizer or into someone else's directory; two processes
never train into one output_dir; a killed cache write is rebuilt, a killed study leaves no orphan."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pretraining import checks, data, pretrain
from recipes import cpt
from tests.fixtures.in_process import run_main

ROOT = Path(__file__).resolve().parents[1]
DEBUG = "recipes/configs/debug.yaml"
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.getbasetemp() / "pretrain-cache"  # shared with the other recipe tests of the session


def small(output_dir, cache_dir, *extra):
    """A 2-step run of the debug recipe on 200 documents."""
    return [
        "--config",
        DEBUG,
        "--output_dir",
        str(output_dir),
        "--data_cache_dir",
        str(cache_dir),
        "--max_docs",
        "200",
        "--block_size",
        "64",
        "--per_device_train_batch_size",
        "2",
        "--report_to",
        "none",
        "--max_steps",
        "2",
        "--switch_step",
        "null",
        "--intermediate_steps",
        "1",
        "--warmup_steps",
        "1",
        "--save_strategy",
        "steps",
        "--save_steps",
        "1",
        "--disable_tqdm",
        "true",
        "--lr_scheduler_kwargs",
        '{"num_decay_steps": 1, "decay_type": "linear"}',
        *extra,
    ]


def run_cli(module, *argv, capsys):
    """`python -m <module> argv` in this process (its `main(argv)`, as the shell calls it): (exit status, stderr).
    The process boundary itself: test_scripts_launch_by_path_from_the_root_and_from_another_directory."""
    done = run_main({"recipes.pretrain": pretrain.main, "recipes.cpt": cpt.main}[module], argv, capsys)
    return done.returncode, done.stderr


def assert_one_line_error(result, *fragments, code=2):
    status, stderr = result
    assert status == code, stderr[-3000:]
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("error: "), stderr[-3000:]
    for fragment in fragments:
        assert fragment in lines[-1], (fragment, lines[-1])


@pytest.fixture(scope="module")
def base(tmp_path_factory, cache_dir):
    """A trained 2-step MLM run (with checkpoints), the base of the CPT and resume checks."""
    output_dir = tmp_path_factory.mktemp("cli") / "base"
    pretrain.pretrain(*pretrain.make_parser().parse_args_and_config(small(output_dir, cache_dir, "--objective", "mlm")))
    return output_dir


@pytest.mark.slow
def test_scripts_launch_by_path_from_the_root_and_from_another_directory(tmp_path):
    """`accelerate launch recipes/pretrain.py` (repository root, the shipped CPU config) and `accelerate launch
    /abs/path/recipes/cpt.py` (another directory) run the scripts, as the design card and README write them: the
    project is an installed package (requirements.txt: `-e .`), not a folder on sys.path. Both at once (2 cores)."""
    accelerate = str(Path(sys.executable).parent / "accelerate")
    launches = {
        "pretrain": (
            [accelerate, "launch", "--config_file", "recipes/accelerate/cpu.yaml", "recipes/pretrain.py", "--help"],
            ROOT,
        ),
        "cpt": (
            [accelerate, "launch", "--num_processes", "1", "--cpu", str(ROOT / "recipes" / "cpt.py"), "--help"],
            tmp_path,
        ),
    }
    env = {k: v for k, v in ENV.items() if k != "PYTHONPATH"}
    running = {
        name: subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, (command, cwd) in launches.items()
    }
    for name, process in running.items():
        out, err = process.communicate(timeout=180)
        assert process.returncode == 0, f"{name}: {err[-3000:]}"
        assert f"usage: {name}.py" in out and "--model_name_or_path" in out, out[-2000:]
    assert "--keep_optimizer_state" in out  # the CPT settings: cpt.py's own parser ran


@pytest.mark.slow
def test_a_refusal_under_accelerate_launch_is_one_project_line(tmp_path):
    """Issue 54: under `accelerate launch` a refusal of recipes/cpt.py is the project's one line, once (2 processes:
    the first of the machine says it; torchrun's failure summary gives it as the root cause), nothing written.
    accelerate then reports the exit status its own way, a traceback it prints after the child has ended (no child
    can prevent it); with its `-q` (one process) the project's line is the last line, as docs/pretraining.md says."""
    accelerate = str(Path(sys.executable).parent / "accelerate")
    refusal = "error: CPT starts from existing weights: pass --model_name_or_path"
    recipe = ["recipes/cpt.py", "--config", "recipes/configs/debug.yaml", "--output_dir", str(tmp_path / "out")]
    launches = {
        "quiet": [accelerate, "launch", "-q", "--cpu", "--num_processes", "1", *recipe],
        "two": [accelerate, "launch", "--config_file", "recipes/accelerate/cpu.yaml", *recipe],
    }
    running = {
        name: subprocess.Popen(command, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, command in launches.items()
    }
    done = {name: (process.communicate(timeout=240)[1], process.returncode) for name, process in running.items()}
    err, code = done["quiet"]
    assert code == 1 and err.strip().splitlines()[-1].startswith(refusal), err[-3000:]
    err, code = done["two"]
    assert code == 1 and sum(line.startswith(refusal) for line in err.splitlines()) == 1, err[-3000:]
    assert f"traceback : {refusal}" in err  # torchrun's summary names it as the root cause
    assert not (tmp_path / "out").exists()


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "case",
    [
        "unknown_yaml_key",
        "yaml_list",
        "scalar_for_list",
        "missing_tokenizer",
        "missing_base",
        "blank_corpus",
        "truncated_weights",
        "bad_resume_checkpoint",
        "output_is_base",
        "foreign_output_dir",
        "other_tokenizer",
        "truncated_run_config",
        "tensorboard_dir_is_file",
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(case, base, tmp_path, cache_dir, capsys, monkeypatch):
    out = tmp_path / "out"
    script, argv, expect = "recipes.pretrain", small(out, cache_dir), []
    if case == "unknown_yaml_key":
        config = _write(tmp_path / "c.yaml", Path(DEBUG).read_text() + "masking_ratio: 0.3\n")
        argv, expect = ["--config", config, "--output_dir", out], [str(config), "masking_ratio"]
    elif case == "yaml_list":
        config = _write(tmp_path / "c.yaml", "- architecture: tiny\n")
        argv, expect = ["--config", config, "--output_dir", out], [str(config), "mapping"]
    elif case == "scalar_for_list":
        text = Path(DEBUG).read_text().replace("intermediate_steps: [5]", "intermediate_steps: 5")
        config = _write(tmp_path / "c.yaml", text)
        argv, expect = ["--config", config, "--output_dir", out], ["intermediate_steps must be a list"]
    elif case == "missing_tokenizer":
        argv += ["--tokenizer_name_or_path", tmp_path / "no" / "such-tokenizer"]
        expect = ["tokenizer_name_or_path", "no such directory"]
    elif case == "missing_base":
        script = "recipes.cpt"
        argv += ["--architecture", "null", "--model_name_or_path", tmp_path / "no-such-model"]
        expect = ["model_name_or_path", "no-such-model: no such directory"]
    elif case == "blank_corpus":
        corpus = _write(tmp_path / "blank.txt", "\n   \n\n\t\n")
        argv += ["--corpus_source", corpus]
        expect = ["only blank documents"]
    elif case == "truncated_weights":
        broken = tmp_path / "broken"
        shutil.copytree(base, broken, ignore=shutil.ignore_patterns("checkpoint-*", "intermediate", "run_config.json"))
        weights = broken / "model.safetensors"
        with open(weights, "r+b") as f:
            f.truncate(weights.stat().st_size // 2)
        script = "recipes.cpt"
        argv += ["--architecture", "null", "--model_name_or_path", broken]
        expect = [str(weights), "truncated or corrupt"]
    elif case == "bad_resume_checkpoint":
        argv += ["--resume_from_checkpoint", tmp_path / "nowhere" / "checkpoint-5"]
        expect = ["resume_from_checkpoint", "not a complete Trainer checkpoint"]
    elif case == "output_is_base":
        script = "recipes.cpt"
        argv = small(base, cache_dir, "--architecture", "null", "--model_name_or_path", base)
        out = base
        expect = ["also the model_name_or_path"]
    elif case == "foreign_output_dir":
        _write(out / "model.safetensors", "someone else's weights")
        expect = ["not empty", "run_config.json"]
    elif case == "other_tokenizer":
        other = tmp_path / "other-tokenizer"
        corpus = data.load_corpus("bundle", split="valid").select(range(100))
        data.train_toy_tokenizer(corpus, 600, other)
        script = "recipes.cpt"
        argv += ["--architecture", "null", "--model_name_or_path", base, "--tokenizer_name_or_path", other]
        expect = ["differs from the base model's own"]
    elif case == "truncated_run_config":  # the advice must keep the checkpoints (not "delete it")
        shutil.copytree(base, out)
        (out / "run_config.json").write_text((out / "run_config.json").read_text()[:40])
        expect = [
            str(out / "run_config.json"),
            "not valid JSON",
            "Do not delete it",
            str(out / "run_info.json"),
            "or pass a new --output_dir",
        ]
    elif case == "tensorboard_dir_is_file":
        logs = _write(tmp_path / "tb-logs", "a user's file\n")
        monkeypatch.setenv("TENSORBOARD_LOGGING_DIR", str(logs))
        argv += ["--report_to", "tensorboard"]
        expect = [f"TENSORBOARD_LOGGING_DIR {logs} is a file", "unset TENSORBOARD_LOGGING_DIR"]
    before = sorted(p.name for p in out.iterdir()) if out.exists() else None
    result = run_cli(script, *argv, capsys=capsys)
    assert_one_line_error(result, *expect)
    assert (sorted(p.name for p in out.iterdir()) if out.exists() else None) == before  # nothing written


def test_the_advice_for_a_truncated_run_config_restores_it(base, tmp_path):
    """The command the one-line error gives writes back the very settings the run recorded, in a folder whose name
    has a space and a quote (the paths in the command are shell-quoted)."""
    out = tmp_path / "Bob's runs" / "out 1"
    shutil.copytree(base, out)
    config = out / "run_config.json"
    original = json.loads(config.read_text())
    config.write_text(config.read_text()[:40])
    with pytest.raises(ValueError) as refused:
        checks._read_run_config(config)
    command = str(refused.value).split(" with python -c ")[1].split(", then rerun")[0]
    subprocess.run(f"{sys.executable} -c {command}", shell=True, check=True, cwd=tmp_path)
    assert checks._read_run_config(config) == original


def test_rerunning_a_finished_run_says_so_and_changes_nothing(base, cache_dir, capsys):
    """The same command again on a finished run: one line saying it is done, exit 0, and no file of the run or of
    the data cache rewritten (it used to resume at the last step, log train_loss 0 and save everything again)."""
    files = [p for root in (base, cache_dir) for p in root.rglob("*") if p.is_file()]
    before = {p: p.stat().st_mtime_ns for p in files}
    done = run_main(pretrain.main, small(base, cache_dir, "--objective", "mlm"), capsys)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines() == [
        f"{base} already holds this run, finished at step 2 (its run_info.json and weights); nothing to do: pass a "
        "new --output_dir to train it again"
    ]
    assert "train_loss" not in done.stdout + done.stderr
    assert {p: p.stat().st_mtime_ns for p in files} == before
    assert {p for root in (base, cache_dir) for p in root.rglob("*") if p.is_file()} == set(files)


def test_cpt_refuses_blocks_longer_than_the_base_model_positions(base, tmp_path, cache_dir):
    argv = small(
        tmp_path / "out", cache_dir, "--architecture", "null", "--model_name_or_path", base, "--block_size", "1024"
    )
    run_args, _ = cpt.make_parser().parse_args_and_config(list(map(str, argv)))
    with pytest.raises(ValueError, match="block_size 1024 exceeds the 512 positions"):
        checks.check_sources(run_args)


def test_cpt_defaults_to_the_base_tokenizer(base, tmp_path, cache_dir):
    out = tmp_path / "cpt"
    argv = small(out, cache_dir, "--architecture", "null", "--model_name_or_path", str(base))
    pretrain.pretrain(*cpt.make_parser().parse_args_and_config(argv))
    assert (out / "tokenizer.json").read_bytes() == (base / "tokenizer.json").read_bytes()
    info = json.loads((out / "run_info.json").read_text())
    assert info["data"]["tokenizer"] == json.loads((base / "run_info.json").read_text())["data"]["tokenizer"]


@pytest.mark.slow
def test_resume_on_other_data_is_refused(base, tmp_path, cache_dir, capsys):
    """Same command and settings, but `--data_dir` points at a bundle whose corpus differs: refused, untouched."""
    other = tmp_path / "bundle"
    corpus = other / "pretrain" / "enwiki" / "train.jsonl.gz"
    corpus.parent.mkdir(parents=True)
    shutil.copy(Path(data.resolve_data_dir()) / "pretrain" / "enwiki" / "valid.jsonl.gz", corpus)
    before = {p: p.stat().st_mtime_ns for p in base.rglob("*") if p.is_file()}
    result = run_cli(
        "recipes.pretrain", *small(base, cache_dir, "--objective", "mlm", "--data_dir", other), capsys=capsys
    )
    assert_one_line_error(result, "reads other data", "data.fingerprint")
    assert {p: p.stat().st_mtime_ns for p in base.rglob("*") if p.is_file()} == before
    # the same data found through another path is the same data: the finished run resumes and does nothing
    copy = tmp_path / "bundle-copy"
    shutil.copytree(data.resolve_data_dir() / "pretrain", copy / "pretrain")
    status, stderr = run_cli(
        "recipes.pretrain", *small(base, cache_dir, "--objective", "mlm", "--data_dir", copy), capsys=capsys
    )
    assert status == 0, stderr[-3000:]


@pytest.mark.slow
def test_second_process_on_one_output_dir_is_refused(tmp_path, cache_dir, capsys):
    out = tmp_path / "locked"
    argv = small(out, cache_dir, "--max_steps", "400", "--save_steps", "1000")
    first = subprocess.Popen(
        [sys.executable, "-m", "recipes.pretrain", *argv],
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.time() + 180
        while not (out / "run_config.json").is_file():  # written while the lock is held
            assert first.poll() is None and time.time() < deadline, first.stderr.read()[-3000:]
            time.sleep(0.1)
        second = run_cli("recipes.pretrain", *argv, capsys=capsys)  # this process: the lock is the other's
        assert_one_line_error(second, "in use by another process", str(out))
    finally:
        first.kill()
        first.wait()


@pytest.mark.slow
def test_truncated_toy_tokenizer_cache_is_rebuilt(tmp_path):
    corpus = data.load_corpus("bundle", split="valid").select(range(100))
    path = tmp_path / "toy"
    reference = data.cached_toy_tokenizer(corpus, 600, path)
    (path / "tokenizer.json").write_text((path / "tokenizer.json").read_text()[:100])  # a kill mid-write
    rebuilt = data.cached_toy_tokenizer(corpus, 600, path)
    assert rebuilt.get_vocab() == reference.get_vocab()
    assert json.loads((path / "tokenizer.json").read_text())  # complete again
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging directory left


@pytest.mark.slow
def test_killed_study_takes_its_pretraining_child_with_it(tmp_path):
    """SIGKILL the study while it pretrains: its child run ends too (no orphan keeps training)."""
    # the smoke study at a scale of 1,500 CLM steps of 32-token blocks (more than the kill needs)
    code = (
        "import dataclasses, sys; from pathlib import Path; from recipes import manifest; "
        "from recipes.studies import STUDIES; from recipes.study import run_study; "
        "manifest.SCALES['kill'] = manifest.Scale(step_divisor=28, block_size=32, per_device_train_batch_size=2, "
        "max_docs=300); "
        "run_study('smoke', Path(sys.argv[1]), study=dataclasses.replace(STUDIES['smoke'], scale='kill'))"
    )
    study = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path / "study")],
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline, child = time.time() + 240, None
        while child is None:
            assert study.poll() is None and time.time() < deadline, "the study ended before pretraining"
            found = subprocess.run(["pgrep", "-P", str(study.pid)], capture_output=True, text=True).stdout.split()
            log = tmp_path / "study" / "logs" / "610m-clm-42k.log"
            child = int(found[0]) if found and log.is_file() else None
            time.sleep(0.2)
        study.send_signal(signal.SIGKILL)
        study.wait()
        deadline = time.time() + 60
        while Path(f"/proc/{child}").exists() and _state(child) != "Z":
            assert time.time() < deadline, f"pretraining child {child} outlived the killed study"
            time.sleep(0.2)
    finally:
        study.kill()


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].split()[0]
    except (FileNotFoundError, IndexError):
        return "gone"


def test_documented_decoder_cpt_command_trains_a_converted_llama_under_its_own_name(tmp_path, cache_dir):
    """docs/pretraining.md's convert -> CPT commands, exactly, on a tiny converted Llama (paths swapped for the tiny
    ones, CPU-sized overrides appended): no optimizer state asked for, the run named after its output_dir with the
    decoder as its CPT base, never as the paper recipe whose settings it borrows."""
    import re
    import shlex

    import yaml

    from modeling_eurobert import convert
    from tests.test_convert import build_tokenizer, save_llama

    page = (ROOT / "docs" / "pretraining.md").read_text()
    block = page.split("**CPT from a decayed run or any decoder.**", 1)[1].split("```bash\n", 1)[1].split("```")[0]
    convert_line, cpt_command = [" ".join(part.split()) for part in block.replace("\\\n", " ").strip().split("\n")]
    llama = tmp_path / "llama"
    save_llama(llama, build_tokenizer())
    convert.main([str(llama), str(tmp_path / "llama-3.2-1b-eurobert")])
    assert convert_line.endswith("out/llama-3.2-1b-eurobert")
    argv = shlex.split(re.sub(r"\bout/", f"{tmp_path}/", cpt_command))
    assert argv[:3] == ["accelerate", "launch", "recipes/cpt.py"]
    cpu = [
        "--corpus_source",
        "bundle",
        "--corpus_name",
        "null",
        "--max_docs",
        "200",
        "--block_size",
        "32",
        "--num_proc",
        "1",
        "--global_batch_size",
        "2",
        "--per_device_train_batch_size",
        "2",
        "--gradient_accumulation_steps",
        "1",
        "--max_steps",
        "2",
        "--warmup_steps",
        "1",
        "--lr_scheduler_kwargs",
        '{"num_decay_steps": 1}',
        "--bf16",
        "false",
        "--compile",
        "none",
        "--mlm_fixed_shape",
        "false",
        "--report_to",
        "none",
        "--dataloader_num_workers",
        "0",
        "--save_steps",
        "2",
        "--data_cache_dir",
        str(cache_dir),
    ]
    cpt.main(
        [arg.replace("recipes/", str(ROOT / "recipes") + "/", 1) if arg.endswith(".yaml") else arg for arg in argv[3:]]
        + cpu
    )
    output = tmp_path / "llama-3.2-1b-eurobert-mlm40-cpt"
    info = json.loads((output / "run_info.json").read_text())
    assert info["name"] == output.name and info["cpt_base"] == "llama-3.2-1b-eurobert" and info["scale"] is None
    assert info["run_config"]["run_settings"]["keep_optimizer_state"] is False
    # the decoder config is the paper CPT recipe less what only the study's own bases have
    paper = yaml.safe_load((ROOT / "recipes/configs/paper/610m-clm-dec42k-mlm40-44k.yaml").read_text())
    decoder = yaml.safe_load((ROOT / "recipes/configs/cpt-from-decoder.yaml").read_text())
    assert decoder == {
        k: v
        for k, v in paper.items()
        if k not in ("model_name_or_path", "keep_optimizer_state", "scale", "output_dir", "run_name")
    }
    assert decoder["warmup_steps"] == decoder["max_steps"] // 100  # "warmup over 1%", as documented


def test_model_name_or_path_on_the_command_line_replaces_the_configs_starting_point():
    """`recipes.cpt --config debug.yaml --model_name_or_path DIR` needs no `--architecture null --switch_step null`:
    the command line's base drops the config's architecture and, for CPT, its PFS switch; pretraining keeps the
    switch (a PFS run may continue from weights) and a config's own base is untouched."""
    argv = ["--config", "recipes/configs/debug.yaml", "--model_name_or_path", "out/debug", "--output_dir", "o"]
    run_args, _ = cpt.make_parser().parse_args_and_config(argv)
    assert (run_args.architecture, run_args.switch_step, run_args.model_name_or_path) == (None, None, "out/debug")
    run_args, _ = pretrain.make_parser().parse_args_and_config(argv)
    assert (run_args.architecture, run_args.switch_step) == (None, 10)
    with pytest.raises(ValueError, match="CPT starts from existing weights"):
        cpt.make_parser().parse_args_and_config([*argv[:2], "--output_dir", "o"])
