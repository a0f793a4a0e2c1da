"""What every checkpoint the pretraining recipe saves ships besides weights and config: the tokenizer settings
(`modeling_eurobert.tokenizer_settings`) and the sentence-transformers files (`core.sentence_transformers_files`),
checked on a real CLM run (final dir, `checkpoint-N`, `intermediate/step-N`) and loaded in fresh processes that
cannot import this project, as a user of the published checkpoint would."""

import json
import textwrap
from pathlib import Path

import pytest
import torch

from core import artifacts
from core.sentence_transformers_files import (
    PROMPTS,
    SENTENCE_TRANSFORMERS_FILES,
    sentence_transformers_files,
    write_sentence_transformers_files,
)
from evaluation import finetune_args, retrieval, tasks
from pretraining import pretrain
from tests.fixtures.fresh_process import run_fresh

DEBUG = "recipes/configs/debug.yaml"
TEXT = "The capital is <|mask|>."
QUERIES = ["what is the capital of france", "who wrote the book"]
DOCUMENTS = ["Paris is the capital and largest city of France.", "The novel was written in 1851.", "x"]
REMOTE_CODE_NOTICES = ("custom code", "trust_remote_code", "[y/N]", "to instantiate a model of type")


@pytest.fixture(scope="module")
def clm_run(tmp_path_factory, one_thread):
    """A 4-step CLM run of the tiny architecture: final dir, checkpoint-4 and intermediate/step-2."""
    output_dir = tmp_path_factory.mktemp("clm_run") / "610m-clm-42k"
    cache_dir = tmp_path_factory.getbasetemp() / "pretrain-cache"  # shared with tests/test_pretrain.py
    argv = [
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
        "--objective",
        "clm",
        "--switch_step",
        "null",
        "--intermediate_steps",
        "2",
        "--max_steps",
        "4",
        "--warmup_steps",
        "1",
        "--logging_steps",
        "1",
        "--lr_scheduler_kwargs",
        '{"num_decay_steps": 1, "decay_type": "linear"}',
    ]
    pretrain.pretrain(*pretrain.make_parser().parse_args_and_config(argv))
    return output_dir


def saved_dirs(output_dir: Path) -> list[Path]:
    return [output_dir, output_dir / "checkpoint-4", output_dir / "intermediate" / "step-2"]


def test_every_saved_checkpoint_ships_tokenizer_settings_and_sentence_transformers_files(clm_run):
    for directory in saved_dirs(clm_run):
        config = json.loads((directory / "config.json").read_text())
        # a CLM checkpoint, loadable natively: is_causal is false for native EuroBERT, the causal pretraining recorded
        assert config["is_causal"] is False and config["pretraining_attention"] == "causal"
        for name in SENTENCE_TRANSFORMERS_FILES:
            assert (directory / name).is_file(), directory / name
        sbert = json.loads((directory / "sentence_bert_config.json").read_text())
        assert sbert == {
            "max_seq_length": config["max_position_embeddings"],
            "do_lower_case": False,
            "config_args": {"is_causal": False},
        }
        assert json.loads((directory / "config_sentence_transformers.json").read_text())["prompts"] == PROMPTS
        pooling = json.loads((directory / "1_Pooling" / "config.json").read_text())
        assert pooling["pooling_mode_mean_tokens"] and pooling["word_embedding_dimension"] == config["hidden_size"]
        tokenizer_config = json.loads((directory / "tokenizer_config.json").read_text())
        assert tokenizer_config["model_max_length"] == config["max_position_embeddings"]
        assert "local_files_only" not in tokenizer_config and "is_local" not in tokenizer_config
        added = {t["content"]: t for t in json.loads((directory / "tokenizer.json").read_text())["added_tokens"]}
        assert added["<|mask|>"]["lstrip"] is True and added["<|mask|>"]["rstrip"] is False


@pytest.fixture(scope="module")
def fresh_process(clm_run, tmp_path_factory):
    """One fresh process loads the final checkpoint's tokenizer (without and with remote code) and every saved
    directory as `SentenceTransformer(dir, trust_remote_code=True)`; returns (its report, embeddings, output)."""
    work = tmp_path_factory.mktemp("fresh")
    dirs = [str(d) for d in saved_dirs(clm_run)]
    script = textwrap.dedent(f"""
        import json, sys, time, torch
        from transformers import AutoTokenizer, PreTrainedTokenizerFast
        report, final = {{}}, {dirs[0]!r}
        loaders = {{"no_remote_code": lambda: PreTrainedTokenizerFast.from_pretrained(final),
                    "auto": lambda: AutoTokenizer.from_pretrained(final, trust_remote_code=True)}}
        for name, load in loaders.items():
            start = time.perf_counter()
            tok = load()
            report[name] = {{
                "seconds": time.perf_counter() - start, "is_fast": tok.is_fast,
                "model_max_length": tok.model_max_length, "ids": tok({TEXT!r}, add_special_tokens=False)["input_ids"],
                "prefix": tok("The capital is", add_special_tokens=False)["input_ids"],
                "mask": tok.mask_token_id, "dot": tok.convert_tokens_to_ids("."),
                "space": tok.convert_tokens_to_ids("Ġ"),
                "remote_modules": sorted(m for m in sys.modules if m.startswith("transformers_modules")),
            }}
        from sentence_transformers import SentenceTransformer
        embeddings = {{}}
        for directory in {dirs!r}:
            model = SentenceTransformer(directory, trust_remote_code=True, device="cpu")
            report[directory] = {{"prompts": model.prompts, "max_seq_length": model.max_seq_length,
                                  "is_causal": model[0].model.config.is_causal}}
            embeddings[directory] = {{"query": model.encode_query({QUERIES!r}, convert_to_tensor=True),
                                      "document": model.encode_document({DOCUMENTS!r}, convert_to_tensor=True)}}
        torch.save(embeddings, "embeddings.pt")
        print("REPORT " + json.dumps(report))
    """)
    result = run_fresh(script, work, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.split("REPORT ", 1)[1])
    return report, torch.load(work / "embeddings.pt"), result.stdout + result.stderr


@pytest.mark.slow  # a fresh process (the `fresh_process` fixture)
def test_tokenizer_loads_in_a_fresh_process_without_prompt_with_max_length_and_mask_lstrip(clm_run, fresh_process):
    report, _, output = fresh_process
    max_positions = json.loads((clm_run / "config.json").read_text())["max_position_embeddings"]
    for name in ("no_remote_code", "auto"):
        loaded = report[name]
        assert loaded["is_fast"] and loaded["seconds"] < 10 and loaded["model_max_length"] == max_positions
        # "is <|mask|>" -> [..., Ġis, <|mask|>, .]: no stray space token before the mask
        assert loaded["ids"] == loaded["prefix"] + [loaded["mask"], loaded["dot"]]
        assert loaded["space"] not in loaded["ids"]
    assert report["no_remote_code"]["remote_modules"] == []  # PreTrainedTokenizerFast runs no checkpoint code
    assert not [notice for notice in REMOTE_CODE_NOTICES if notice in output], output[-3000:]


def test_plain_autotokenizer_without_trust_remote_code_prints_no_prompt(clm_run, tmp_path):
    # config.json names transformers' own model_type (modeling_eurobert.export_native.make_plain_loadable), so
    # AutoConfig, which AutoTokenizer reads first, never asks before running the checkpoint's code
    script = f"from transformers import AutoTokenizer\nAutoTokenizer.from_pretrained({str(clm_run)!r})\nprint('loaded')"
    result = run_fresh(script, tmp_path)
    assert result.returncode == 0 and "loaded" in result.stdout, result.stderr[-2000:]
    output = result.stdout + result.stderr
    assert not [notice for notice in REMOTE_CODE_NOTICES if notice in output], output[-2000:]


@pytest.mark.slow  # a fresh process (the `fresh_process` fixture)
def test_sentence_transformers_zero_shot_equals_the_evaluation_pipeline(clm_run, fresh_process):
    """`SentenceTransformer(checkpoint, trust_remote_code=True)` in a fresh process gives the embeddings of
    `evaluation.retrieval.build_model` (bidirectional, mean pooling, "Query: " / "Document: " prompts)."""
    report, embeddings, _ = fresh_process
    task = tasks.load_task("scifact")
    for directory in saved_dirs(clm_run):
        loaded = report[str(directory)]
        assert loaded["prompts"] == {"query": task.query_prefix, "document": task.document_prefix} == PROMPTS
        assert loaded["is_causal"] is False
        evaluation_model = retrieval.build_model(directory, task, finetune_args.FinetuneArgs()).eval()
        expected = {
            "query": evaluation_model.encode_query(QUERIES, convert_to_tensor=True),
            "document": evaluation_model.encode_document(DOCUMENTS, convert_to_tensor=True),
        }
        for role in ("query", "document"):
            torch.testing.assert_close(embeddings[str(directory)][role], expected[role], atol=1e-6, rtol=1e-6)
    # The attention setting matters: the CLM checkpoint's own causal attention gives other embeddings.
    causal = retrieval.build_model(clm_run, task, finetune_args.FinetuneArgs(attention="checkpoint")).eval()
    assert not torch.allclose(
        causal.encode_query(QUERIES, convert_to_tensor=True), embeddings[str(clm_run)]["query"], atol=1e-4
    )


def test_writer_keeps_what_it_did_not_write_and_skips_configs_without_is_causal(tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps({"model_type": "bert", "hidden_size": 8, "max_position_embeddings": 16})
    )
    written = write_sentence_transformers_files(tmp_path, prompts={"query": "q: ", "document": "d: "})
    assert sorted(p.relative_to(tmp_path).as_posix() for p in written) == sorted(SENTENCE_TRANSFORMERS_FILES)
    assert "config_args" not in json.loads((tmp_path / "sentence_bert_config.json").read_text())  # BERT has no field
    assert write_sentence_transformers_files(tmp_path, prompts={"query": "q: ", "document": "d: "}) == []  # same
    with pytest.raises(FileExistsError, match="modules.json|config_sentence_transformers.json"):
        write_sentence_transformers_files(tmp_path)  # other prompts: refused, nothing replaced
    assert json.loads((tmp_path / "config_sentence_transformers.json").read_text())["prompts"]["query"] == "q: "
    assert write_sentence_transformers_files(tmp_path, overwrite=True)
    assert json.loads((tmp_path / "config_sentence_transformers.json").read_text())["prompts"] == PROMPTS
    with pytest.raises(ValueError, match="hidden_size"):
        sentence_transformers_files({"max_position_embeddings": 16})
    with pytest.raises(FileNotFoundError, match="config.json"):
        write_sentence_transformers_files(tmp_path / "missing")


def test_a_rerun_removes_the_temp_files_its_killed_writer_left_and_only_those(tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps({"model_type": "bert", "hidden_size": 8, "max_position_embeddings": 16})
    )
    stale = tmp_path / ".modules.json.k1ll3d00.tmp"  # what a writer killed before its rename leaves
    stale.write_text('[{"idx": 0, ')
    others = [
        tmp_path / ".modules.json.tmp",
        tmp_path / "modules.json.k1ll3d00.tmp",
        tmp_path / ".config.json.k1ll3d00.tmp",
    ]  # not this writer's pattern for this file: kept
    for other in others:
        other.write_text("mine")
    write_sentence_transformers_files(tmp_path)
    assert not stale.exists() and json.loads((tmp_path / "modules.json").read_text())[0]["idx"] == 0
    assert all(other.read_text() == "mine" for other in others)
    target = tmp_path / "state.json"
    with artifacts.atomic_file(target) as live:  # a live writer's temp survives a concurrent writer's cleanup
        live.write_text("{}")
        artifacts.write_json_atomic(target, {"other": 1})
        assert live.exists()
    assert json.loads(target.read_text()) == {}


def test_atomic_directory_never_removes_a_folder_that_appeared_or_changed_while_it_was_written(tmp_path):
    """L1/O2: what appeared at the target (or changed there) while the new folder was built stays as it is; the
    new content is discarded in one line (`DirectoryChanged`), no staging folder left behind."""
    target = tmp_path / "out"
    with pytest.raises(artifacts.DirectoryChanged, match=f"{target} appeared or changed while"):
        with artifacts.atomic_directory(target) as staging:
            (staging / "report.md").write_text("new")
            target.mkdir()  # a running study, a user's notes: created after the writer started
            (target / "NOTES.txt").write_text("mine")
    assert [p.name for p in target.iterdir()] == ["NOTES.txt"] and [p.name for p in tmp_path.iterdir()] == ["out"]
    with pytest.raises(artifacts.DirectoryChanged):
        with artifacts.atomic_directory(target) as staging:  # it existed when the writer started, then changed
            (target / "NOTES.txt").write_text("mine, edited")
    assert (target / "NOTES.txt").read_text() == "mine, edited"
    with pytest.raises(artifacts.DirectoryChanged):
        with artifacts.atomic_directory(tmp_path / "empty", expected=None):  # must not exist: not even empty
            (tmp_path / "empty").mkdir()
    with artifacts.atomic_directory(target) as staging:  # unchanged while written: replaced
        (staging / "report.md").write_text("new")
    assert [p.name for p in target.iterdir()] == ["report.md"] and len(list(tmp_path.iterdir())) == 2


@pytest.mark.parametrize("umask, file_mode, dir_mode", [(0o022, 0o644, 0o755), (0o027, 0o640, 0o750)])
def test_atomic_writers_follow_the_umask(tmp_path, umask, file_mode, dir_mode):
    """S18: a teammate reads what this project writes as what any other tool writes (mkstemp would give 0600)."""
    import os

    old = os.umask(umask)
    try:
        artifacts.write_json_atomic(tmp_path / "run_info.json", {})
        with artifacts.atomic_directory(tmp_path / "export") as staging:
            (staging / "a.txt").write_text("x")
    finally:
        os.umask(old)
    assert (tmp_path / "run_info.json").stat().st_mode & 0o777 == file_mode
    assert (tmp_path / "export").stat().st_mode & 0o777 == dir_mode


def test_the_hub_export_loads_in_sentence_transformers_as_the_local_checkpoint(clm_run, tmp_path):
    """S9: the exported repo folder carries the sentence-transformers files (prompts, pooling), so
    `SentenceTransformer(export)` gives the local checkpoint's embeddings (on main and on a step branch)."""
    from sentence_transformers import SentenceTransformer

    from model_cards import push

    push.write_dry_run(push.stage_run(clm_run, "org/m"), tmp_path / "dry")
    for local, revision in ((clm_run, "main"), (clm_run / "intermediate" / "step-2", "step-2")):
        export = tmp_path / "dry" / "models" / "org" / "m" / revision
        assert all((export / name).is_file() for name in SENTENCE_TRANSFORMERS_FILES)
        models = [SentenceTransformer(str(path), trust_remote_code=True, device="cpu") for path in (local, export)]
        assert models[1].prompts == models[0].prompts == PROMPTS
        embeddings = [model.encode_query(QUERIES, convert_to_tensor=True) for model in models]
        assert torch.equal(embeddings[0], embeddings[1])
