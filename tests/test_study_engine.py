"""The study engine on a decoder study (`python -m recipes.study real-decoder`): its pipeline on a tiny random Llama
(convert -> LoRA and full MLM CPT -> held-out scores and probes per arm, filed through `core.store` -> the report of
`analysis.report` -> the archive and the page regenerated from it), its one resume rule, and every case issue 52 tried
as a user: each refused in one line with nothing changed, or giving the right result. The real SmolLM2 run itself is
docs/real-decoder-study, regenerated here from its archive."""

import csv
import dataclasses
import io
import json
import shutil
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from transformers import BertConfig, LlamaConfig, LlamaForCausalLM

from analysis.statistics import rows_mismatch
from core import artifacts, store
from evaluation import probe
from evaluation.token_classification import align_labels
from recipes import study
from recipes.studies import STUDIES, Probe
from recipes.study_docs import write_docs
from tests.fixtures.full_disk import run_with_file_limit
from tests.fixtures.tiny_models import build_tiny_eurobert, build_tiny_tokenizer, bundle_sentences
from tests.fixtures.tokenizer_families import llama3_bpe

DOCS = Path(__file__).resolve().parents[1] / "docs"
PILOT = dataclasses.replace(
    STUDIES["real-decoder"],
    scale="real-pilot",
    heldout_blocks=4,
    seeds=(0, 1),
    cpt={
        **STUDIES["real-decoder"].cpt,
        "max_steps": 2,
        "per_device_train_batch_size": 2,
        "warmup_steps": 1,
        "lr_scheduler_kwargs": {"num_decay_steps": 0},
    },
    probes=(
        Probe("sst2", "accuracy", test=32, pool=32, train=16),
        Probe("conll2003", "entity_f1", test=24, pool=24, train=12),
        Probe("scifact", "ndcg@10", test=8),
    ),
)


def refused(argv: list[str], capsys) -> str:
    """The one line `recipes.study` refuses `argv` with (exit status 2)."""
    capsys.readouterr()  # what the test's own setup printed
    with pytest.raises(SystemExit) as error:
        study.main(argv)
    assert error.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    return err


def tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def tiny_decoder(data_dir, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("decoder") / "tiny-llama"
    tokenizer = llama3_bpe(bundle_sentences(data_dir, per_source=200), vocab_size=600)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    LlamaForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def finished(tiny_decoder, data_dir, tmp_path_factory) -> Path:
    """The pilot decoder study, run once, with its docs beside it (`<dir>/docs`)."""
    output = tmp_path_factory.mktemp("rd") / "study"
    study.run_study("real-decoder", output, str(data_dir), study=PILOT, decoder=str(tiny_decoder))
    write_docs("real-decoder", output, output.parent / "docs")
    return output


def rerun(output: Path, decoder: Path, data_dir, **changes) -> Path:
    return study.run_study(
        "real-decoder", output, str(data_dir), study=dataclasses.replace(PILOT, **changes), decoder=str(decoder)
    )


def records(output: Path) -> dict:
    return {
        (r["model"], r["task"], r["seed"]): r for r in map(store.read_result, store.result_files(output / "results"))
    }


@pytest.mark.slow
def test_a_decoder_study_files_every_measure_through_the_store(finished):
    found = records(finished)
    assert len(found) == 4 * (1 + 2 + 2 + 1) + 1  # arms x (held-out, SST-2 and CoNLL seeds, SciFact), BM25
    assert {store.record_kind(r) for r in found.values()} == {"probe", "heldout"}
    assert found["cpt-full", "heldout", 0]["config"] == {"attention": "bidirectional", "cpt_steps": 2}
    assert found["decoder-causal", "heldout", 0]["config"] == {"attention": "causal", "cpt_steps": 0}
    # the two untrained arms share weights, not features: their attentions differ
    assert store.main_score(found["decoder-causal", "heldout", 0]) != store.main_score(
        found["decoder-bidirectional", "heldout", 0]
    )
    assert all(rows_mismatch(r) is None for r in found.values())  # every score is its per-instance rows'
    assert len(store.instances(found["cpt-lora", "sst2", 1])) == 32
    summary = (finished / "report" / "summary.md").read_text()
    assert "## Held-out text" in summary and "p_holm" in summary


@pytest.mark.slow
def test_a_rerun_redoes_nothing_and_a_removed_result_comes_back_the_same(finished, tiny_decoder, data_dir, tmp_path):
    output = shutil.copytree(finished, tmp_path / "study")
    removed = output / "results" / "cpt-lora" / "sst2" / "lr0-seed1.json"
    before = store.read_result(removed)
    removed.unlink()
    stamps = {p: p.stat().st_mtime_ns for p in store.result_files(output / "results")}
    rerun(output, tiny_decoder, data_dir)
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps
    again = store.read_result(removed)
    assert store.instances(again) == store.instances(before) and store.main_score(again) == store.main_score(before)


@pytest.mark.slow
def test_a_cpt_run_that_did_not_finish_is_trained_again(finished, tiny_decoder, data_dir, tmp_path):
    """Killed between CPT's final save and its run_info.json, or a CPT folder with config.json and no weights: the
    rerun trains it again (the old folder moved aside), never reports its scores as 0 CPT steps."""
    output = shutil.copytree(finished, tmp_path / "study")
    (output / "models" / "cpt-full" / "run_info.json").unlink()
    config = (output / "models" / "cpt-lora" / "config.json").read_bytes()
    shutil.rmtree(output / "models" / "cpt-lora")
    artifacts.write_text_atomic(output / "models" / "cpt-lora" / "config.json", config.decode())
    rerun(output, tiny_decoder, data_dir)
    for arm in ("cpt-full", "cpt-lora"):
        assert len(list((output / "models").glob(f"{arm}.replaced-*"))) == 1
        assert store.run_config(records(output)[arm, "heldout", 0])["cpt_steps"] == 2
        assert (output / "models" / arm / "run_info.json").is_file()


@pytest.mark.slow
@pytest.mark.parametrize(
    "change, field",
    [
        ({"cpt": {**PILOT.cpt, "max_steps": 3}}, "cpt.max_steps: 2 -> 3"),
        ({"scale": "real-other"}, "scale: 'real-pilot' -> 'real-other'"),
        ({}, "decoder: 'tiny-llama@"),
    ],
)
def test_a_study_rerun_with_another_definition_or_decoder_is_refused(
    change, field, finished, tiny_decoder, data_dir, tmp_path
):
    """Killed after CPT and rerun with another scale, another CPT or another --decoder: refused in one line, nothing
    changed (the old models are never reported under the new definition)."""
    before = tree(finished)
    decoder = tiny_decoder
    if not change:  # another decoder: the same architecture and tokenizer, other weights
        decoder = shutil.copytree(tiny_decoder, tmp_path / "other-llama")
        model = LlamaForCausalLM.from_pretrained(decoder)
        torch.nn.init.zeros_(model.model.norm.weight)
        model.save_pretrained(decoder)
    with pytest.raises(ValueError, match="holds a different study") as error:
        rerun(finished, decoder, data_dir, **change)
    assert field in str(error.value)
    assert tree(finished) == before


@pytest.mark.slow
def test_the_archive_alone_regenerates_the_page(finished, tmp_path):
    archive = finished.parent / "docs" / "results.tar.xz"
    study.main(
        [
            "real-decoder",
            "--from_results",
            str(archive),
            "--output",
            str(tmp_path / "re"),
            "--docs",
            str(tmp_path / "docs"),
        ]
    )
    assert (tmp_path / "docs" / "README.md").read_text() == (finished.parent / "docs" / "README.md").read_text()


def test_the_committed_study_regenerates_from_its_archive(tmp_path):
    """The page of docs/real-decoder-study (migrated once from recipes.real_decoder's format: the same scores and
    per-instance predictions), regenerated from its archive, byte for byte."""
    committed = DOCS / "real-decoder-study"
    study.main(
        [
            "real-decoder",
            "--from_results",
            str(committed / "results.tar.xz"),
            "--output",
            str(tmp_path / "re"),
            "--docs",
            str(tmp_path / "docs"),
        ]
    )
    for name in ("README.md", "summary.md", "summary.csv"):
        assert (tmp_path / "docs" / name).read_text() == (committed / name).read_text(), name
    rows = (committed / "summary.csv").read_text()
    # the means of the page recipes.real_decoder wrote (SST-2 0.7085 and 0.6525, CoNLL 0.3226, SciFact 0.5419)
    assert all(f",{mean}," in rows for mean in ("0.7085", "0.6525", "0.3226", "0.5419"))


def edited_archive(source: Path, target: Path, edit) -> Path:
    """`source` with each member's bytes passed through `edit(name, data)`."""
    with tarfile.open(source) as old, tarfile.open(target, "w:xz") as new:
        for member in old:
            data = edit(member.name, old.extractfile(member).read())
            member.size = len(data)
            new.addfile(member, io.BytesIO(data))
    return target


def test_an_archive_with_an_edited_score_is_refused_before_anything_is_unpacked(tmp_path, capsys):
    def edit(name, data):
        if name != "results/cpt-full/sst2/lr0-seed0.json":
            return data
        record = json.loads(data)
        record["test"]["accuracy"] = 0.99
        return json.dumps(record).encode()

    archive = edited_archive(DOCS / "real-decoder-study" / "results.tar.xz", tmp_path / "edited.tar.xz", edit)
    err = refused(["real-decoder", "--from_results", str(archive), "--output", str(tmp_path / "out")], capsys)
    assert "cpt-full/sst2/lr0-seed0.json" in err and "accuracy is 0.99" in err and "rows give 0.68" in err
    assert not (tmp_path / "out").exists()


def test_from_results_into_an_existing_study_is_refused(finished_like, capsys):
    output, before = finished_like
    archive = DOCS / "real-decoder-study" / "results.tar.xz"
    err = refused(["real-decoder", "--from_results", str(archive), "--output", str(output)], capsys)
    assert "is not empty" in err and tree(output) == before


@pytest.fixture
def finished_like(tmp_path) -> tuple[Path, dict]:
    """A study folder with a result in it (what --from_results must never replace)."""
    output = tmp_path / "study"
    result = output / "results" / "cpt-full" / "sst2" / "lr0-seed0.json"
    artifacts.write_text_atomic(result, "{}")
    artifacts.write_json_atomic(output / "study.json", {"format": 2, "study": "real-decoder"})
    return output, tree(output)


def test_docs_holding_a_users_readme_is_refused(tmp_path, capsys):
    docs = tmp_path / "docs"
    artifacts.write_text_atomic(docs / "README.md", "# my notes\n")
    archive = DOCS / "real-decoder-study" / "results.tar.xz"
    err = refused(
        ["real-decoder", "--from_results", str(archive), "--output", str(tmp_path / "o"), "--docs", str(docs)], capsys
    )
    assert "holds README.md, which recipes.study did not write" in err
    assert tree(docs) == {"README.md": b"# my notes\n"} and not (tmp_path / "o").exists()


@pytest.mark.parametrize("kind", ["bert", "config only", "this project's checkpoint", "a file"])
def test_a_decoder_that_cannot_be_converted_is_refused_in_one_line(kind, tiny_decoder, data_dir, tmp_path, capsys):
    folder = tmp_path / "decoder"
    if kind == "bert":
        BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64).save_pretrained(
            folder
        )
    elif kind == "config only":
        folder.mkdir()
        shutil.copy(tiny_decoder / "config.json", folder)
    elif kind == "a file":
        folder.write_text("x")
    else:
        build_tiny_eurobert(folder, build_tiny_tokenizer(data_dir, vocab_size=300))
    err = refused(["real-decoder", "--output", str(tmp_path / "out"), "--decoder", str(folder)], capsys)
    assert f"--decoder {folder}" in err
    assert not (tmp_path / "out").exists()


def test_a_write_failure_while_regenerating_the_page_is_one_line_and_leaves_nothing(tmp_path):
    """Out of room while the archive is unpacked (a file size limit under its largest result): one line naming the
    folder, exit status 1, no half-made study or report left."""
    argv = [
        "real-decoder",
        "--from_results",
        DOCS / "real-decoder-study" / "results.tar.xz",
        "--output",
        tmp_path / "o",
    ]
    code, err = run_with_file_limit(study.main, argv, 60_000)
    assert code == 1 and err.startswith(f"error: cannot write {tmp_path / 'o'}") and err.count("\n") == 1, err
    assert [p.name for p in (tmp_path / "o").iterdir()] == [study.STUDY_LOCK]


def test_real_models_a_file_is_refused_before_any_download(tmp_path, capsys):
    (tmp_path / "wheels").write_text("x")
    err = refused(
        ["real-decoder", "--output", str(tmp_path / "out"), "--real_models", str(tmp_path / "wheels")], capsys
    )
    assert "--real_models" in err and "is a file" in err and not (tmp_path / "out").exists()


def test_a_probe_whose_training_subset_holds_one_class_names_task_and_seed():
    evaluated = {"text": ["b"] * 4, "label": [0, 1, 0, 1]}
    splits = {"train": {"text": ["a"] * 8, "label": [1] * 8}, "validation": evaluated, "test": evaluated}

    def encode(texts):
        return [np.ones((2, 3)) * i for i, _ in enumerate(texts)]

    with pytest.raises(ValueError, match=r"^the sst2 seed 0 probe's training subset holds one class only"):
        probe.probe_sc(encode, splits, 2, [0], "sst2")


def horizon_archive(tmp_path: Path, stored) -> Path:
    """A small archive: the horizon-tested study's study.json passed through `stored`, and one of its results."""
    files = {}
    with tarfile.open(DOCS / "horizon-tested-study" / "results.tar.xz") as tar:
        for member in tar:
            if member.name == "study.json" or member.name.startswith("results/") and len(files) == 0:
                files[member.name] = tmp_path / "src" / member.name
                files[member.name].parent.mkdir(parents=True, exist_ok=True)
                files[member.name].write_bytes(tar.extractfile(member).read())
            if "study.json" in files:
                break
    files["study.json"].write_text(json.dumps(stored(json.loads(files["study.json"].read_text()))))
    return artifacts.write_tar_xz(tmp_path / "archive.tar.xz", files)


@pytest.mark.parametrize(
    "stored, message",
    [
        (lambda s: {**s, "parameters": {k: v * 100 for k, v in s["parameters"].items()}}, "bytes of weights"),
        (lambda s: {k: v for k, v in s.items() if k != "parameters"}, "records no parameter counts"),
    ],
)
def test_an_archive_whose_study_json_misstates_the_parameters_is_refused(stored, message, tmp_path, capsys):
    archive = horizon_archive(tmp_path, stored)
    err = refused(["horizon-tested", "--from_results", str(archive), "--output", str(tmp_path / "out")], capsys)
    assert message in err and "study.json" in err and "not all pretrained yet" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_the_study_bar_shows_a_changing_step_count_during_a_pretraining_run(tmp_path, data_dir):
    progress = study.Progress({"pretrain:debug": 1})
    progress.start("pretraining", "debug")
    seen = []
    follow = progress.steps("debug", tmp_path / "debug.log")
    command = [sys.executable, "-m", "recipes.pretrain", "--config", "recipes/configs/debug.yaml"]
    command += ["--output_dir", str(tmp_path / "run"), "--max_steps", "60", "--data_dir", str(data_dir)]
    study.run_logged(
        command, tmp_path / "debug.log", poll=lambda: (follow(), seen.append(progress.bar.desc)), every=0.2
    )
    progress.close()
    steps = {desc.split("step ")[1] for desc in seen if "step " in desc}
    assert len(steps) >= 2 and all(s.endswith("/60") for s in steps), seen


# ----------------------------------------------------------------- the controlled study (issue 53) at plumbing scale
ARMS = ("cpt-clm", "cpt-lora", "cpt-full")
CONTROLLED = dataclasses.replace(
    STUDIES["real-decoder-controlled"],
    scale="real-pilot",
    heldout_blocks=4,
    seeds=(0, 1),
    pretrain_seeds=(0, 1),
    cpt=PILOT.cpt,
    probes=PILOT.probes,
)


@pytest.fixture(scope="module")
def controlled(tiny_decoder, data_dir, tmp_path_factory) -> Path:
    """The controlled decoder study at plumbing scale, run once, with its docs beside it (`<dir>/docs`)."""
    output = tmp_path_factory.mktemp("rdc") / "study"
    study.run_study("real-decoder-controlled", output, str(data_dir), study=CONTROLLED, decoder=str(tiny_decoder))
    write_docs("real-decoder-controlled", output, output.parent / "docs")
    return output


@pytest.mark.slow
def test_the_controlled_study_measures_every_cpt_replicate_and_the_bm25_reference(controlled):
    found = records(controlled)
    runs = {"decoder-causal", "decoder-bidirectional", "bm25"}
    runs |= {f"{arm}-pseed{k}" for arm in ("cpt-clm", "cpt-lora", "cpt-full") for k in (0, 1)}
    assert {model for model, _, _ in found} == runs
    assert {task for model, task, _ in found if model == "bm25"} == {"scifact"}
    for k in (0, 1):  # each replicate its own seed, masks and block order; the three CPT arms of one seed the same
        configs = {arm: yaml.safe_load((controlled / "configs" / f"{arm}-pseed{k}.yaml").read_text()) for arm in ARMS}
        assert {(c["seed"], c["masking_seed"], c["data_seed"]) for c in configs.values()} == {(k, k, k)}
        assert configs["cpt-clm"]["objective"] == "clm" and configs["cpt-full"]["objective"] == "mlm"
    weights = {
        name: store.read_result(controlled / "results" / name / "sst2" / "lr0-seed0.json")["identity"]["model"]
        for name in ("cpt-lora-pseed0", "cpt-lora-pseed1")
    }
    assert weights["cpt-lora-pseed0"] != weights["cpt-lora-pseed1"]  # LoRA initialised and trained per seed
    assert found["cpt-clm-pseed0", "heldout", 0]["config"] == {"attention": "causal", "cpt_steps": 2}
    rows = {(r["model"], r["task"]): r for r in csv.DictReader(open(controlled / "report" / "summary.csv"))}
    assert rows["cpt-full", "sst2"]["n_pretrain_runs"] == "2"  # the CPT runs are the units of its interval
    assert rows["decoder-causal", "sst2"]["n_pretrain_runs"] == "1"
    assert float(rows["bm25", "scifact"]["mean"]) == pytest.approx(store.main_score(found["bm25", "scifact", 0]), 1e-3)


@pytest.mark.slow
def test_a_causal_arm_reports_next_token_loss_and_no_masked_token_scores(controlled):
    found = records(controlled)
    for name in ("decoder-causal", "cpt-clm-pseed1"):
        test = store.split_scores(found[name, "heldout", 0], "test")
        assert store.main_metric(found[name, "heldout", 0]) == "clm_loss" and "mlm_loss" not in test
    bidirectional = store.split_scores(found["cpt-full-pseed0", "heldout", 0], "test")
    assert {"mlm_loss", "mlm_accuracy", "clm_loss"} <= bidirectional.keys()
    page = (controlled.parent / "docs" / "summary.md").read_text()
    assert "| decoder-causal | causal | 0 | — | — |" in page and "not measured, for a model that attends" in page


@pytest.mark.slow
def test_each_probe_reports_the_readout_its_validation_scores_chose(controlled):
    found = records(controlled)
    for (model, task, seed), record in found.items():
        if task in ("heldout",) or model == "bm25":
            continue
        config = store.run_config(record)
        family = record["family"]
        assert config["readout"] in probe.READOUTS[family]
        means = config["readout_validation"]
        assert set(means) == set(probe.READOUTS[family]) and means[config["readout"]] == max(means.values())
        assert store.split_scores(record, "validation") is not None
        assert "validation" in record["identity"]["measure"]["method"]  # a result read out another way is redone


def test_the_readout_is_chosen_on_validation_never_on_test():
    scores = lambda val, test: {0: {"validation": {"accuracy": val}, "test": {"accuracy": test}}}  # noqa: E731
    chosen = probe.choose({"mean": scores(0.6, 0.9), "last": scores(0.7, 0.5)}, "accuracy")
    assert chosen["readout"] == "last" and chosen["scores"][0]["test"]["accuracy"] == 0.5
    assert probe.choose({"mean": scores(0.6, 0.9), "last": scores(0.6, 0.5)}, "accuracy")["readout"] == "mean"


def test_a_words_last_sub_token_is_read_where_the_word_ends(data_dir):
    tokenizer = llama3_bpe(bundle_sentences(data_dir, per_source=50), vocab_size=300)
    split = {"tokens": [["Zanzibarian", "is", "a", "word"]], "tags": [[1, 0, 0, 0]]}
    encoded = align_labels(split, tokenizer, 64, "first")
    word_ids = encoded["word_ids"][0]
    positions = {w: [j for j, x in enumerate(word_ids) if x == w] for w in range(4)}
    assert len(positions[0]) > 1  # the test needs a word of several sub-tokens
    features, words = probe.word_features(
        lambda ids: [np.arange(len(i), dtype=float)[:, None] for i in ids], tokenizer, split, 64
    )
    assert words == [[0, 1, 2, 3]]
    assert features["first"][0][:, 0].tolist() == [positions[w][0] for w in range(4)]
    assert features["last"][0][:, 0].tolist() == [positions[w][-1] for w in range(4)]


def test_bm25_ranks_with_the_library_and_scores_as_the_probes_do(data_dir):
    from evaluation import tasks

    splits = probe.probe_splits(tasks.load_task("scifact"), str(data_dir), {"test": 20})
    scores = probe.probe_bm25(splits)[0]
    assert 0 < scores["test"]["ndcg@10"] <= 1 and len(scores["test"]["per_instance"]["ndcg@10"]) == 20
    # the pooled corpus of the protocol: every judged document of validation and test, shared by both
    assert splits["validation"].corpus == splits["test"].corpus


@pytest.mark.slow
def test_the_controlled_page_says_what_applies_to_probes_and_no_more(controlled):
    page = (controlled.parent / "docs" / "README.md").read_text()
    assert "## Readouts" in page and "| bm25 |" in page and "| cpt-full | sst2 |" in page
    assert "best learning rate" not in page and "| parameters |" not in page and "? / ?" not in page
    assert "`cpt-clm` (full CLM CPT of decoder-causal)" in page and "trained 2 times" in page
    assert "CPT runs (its units" in page and "family-wise error rate at 5%" in page and "4-bit GGUF" in page
    assert "15 paired comparisons are one family" in page and "over these 15 comparisons" in page
    assert "| model | CPT runs |" in page and "## CPT-run variance" in page and "pretraining run" not in page


@pytest.mark.slow
def test_a_converted_decoder_replaced_by_hand_trains_the_cpt_arms_again(finished, tiny_decoder, data_dir, tmp_path):
    """models/converted swapped for other weights after CPT: the CPT runs made from the old weights are moved aside
    and trained again from the new ones, never reported as CPT of them."""
    output = shutil.copytree(finished, tmp_path / "study")
    before = records(output)["cpt-full", "sst2", 0]["identity"]["model"]
    model = LlamaForCausalLM.from_pretrained(tiny_decoder)
    torch.nn.init.zeros_(model.model.norm.weight)
    shutil.rmtree(output / "models" / "converted")
    model.save_pretrained(tmp_path / "other")
    shutil.copy(tiny_decoder / "tokenizer.json", tmp_path / "other")
    shutil.copy(tiny_decoder / "tokenizer_config.json", tmp_path / "other")
    from modeling_eurobert.convert import convert

    convert(str(tmp_path / "other"), output / "models" / "converted")
    rerun(output, tiny_decoder, data_dir)
    for arm in ("cpt-full", "cpt-lora"):
        assert len(list((output / "models").glob(f"{arm}.replaced-*"))) == 1
    assert records(output)["cpt-full", "sst2", 0]["identity"]["model"] != before
