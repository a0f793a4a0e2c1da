"""`recipes.real_decoder`: the study's whole pipeline on a tiny random Llama (convert -> LoRA and full MLM CPT -> the
held-out measure and the three probes per arm -> report -> archive -> regenerated pages), its comparison rule, and
the committed study regenerating from its archive. The real SmolLM2 run itself is in docs/real-decoder-study."""

import json
import tarfile
from pathlib import Path

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from core.cli import BadInput
from recipes import real_decoder
from tests.fixtures.tiny_models import bundle_sentences
from tests.fixtures.tokenizer_families import llama3_bpe

DOCS = Path(__file__).resolve().parents[1] / "docs" / "real-decoder-study"


@pytest.fixture(scope="module")
def tiny_decoder(data_dir, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("decoder") / "tiny-llama"
    tokenizer = llama3_bpe(bundle_sentences(data_dir, per_source=200), vocab_size=600)
    torch.manual_seed(0)
    LlamaForCausalLM(
        LlamaConfig(
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
    ).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.mark.slow
def test_the_study_runs_on_a_decoder_resumes_and_regenerates_from_its_archive(tiny_decoder, data_dir, tmp_path):
    argv = [
        "--output",
        str(tmp_path / "rd"),
        "--scale",
        "pilot",
        "--decoder",
        str(tiny_decoder),
        "--data_dir",
        str(data_dir),
    ]
    real_decoder.main([*argv, "--docs", str(tmp_path / "docs")])
    results = sorted((tmp_path / "rd" / "results").glob("*/*.json"))
    assert len(results) == len(real_decoder.ARMS) * len(real_decoder.MEASURES)
    records = real_decoder.read_results(tmp_path / "rd" / "results")
    assert records["decoder-causal", "heldout"]["attention"] == "causal"
    assert records["cpt-full", "heldout"]["cpt_steps"] == real_decoder.SCALES["pilot"].cpt_steps
    assert records["decoder-causal", "heldout"]["cpt_steps"] == 0
    # the two untrained arms share weights, not features: their attentions differ
    causal = records["decoder-causal", "sst2"]["scores"]["seeds"]["0"]["per_instance"]
    assert records["decoder-causal", "heldout"]["scores"] != records["decoder-bidirectional", "heldout"]["scores"]
    assert len(causal["prediction"]) == real_decoder.SCALES["pilot"].sst2_test
    # a rerun redoes nothing; a removed result is made again, the same
    stamp = {p: p.stat().st_mtime_ns for p in results}
    removed = tmp_path / "rd" / "results" / "cpt-lora" / "sst2.json"
    before = json.loads(removed.read_text())["scores"]
    removed.unlink()
    real_decoder.main(argv)
    kept = [p for p in results if p != removed]
    assert {p: p.stat().st_mtime_ns for p in kept} == {p: stamp[p] for p in kept}
    assert json.loads(removed.read_text())["scores"] == before
    # the archive alone regenerates the pages
    real_decoder.main(["--from_results", str(tmp_path / "docs" / "results.tar.xz"), "--output", str(tmp_path / "re")])
    for name in ("README.md", "results.csv"):
        assert (tmp_path / "re" / "report" / name).read_text() == (tmp_path / "docs" / name).read_text()
    # another scale's definition into the same folder is refused before anything runs
    with pytest.raises(BadInput, match="another definition"):
        real_decoder.main([*argv[:3], "cpu", *argv[4:]])


def _records(sst2_scores: dict[str, list[float]]) -> dict:
    """Synthetic results: the four arms with the given SST-2 accuracies per seed, every other measure equal."""
    base = {
        "format": 1,
        "study": "real-decoder",
        "decoder": "x",
        "scale": "cpu",
        "scale_key": "k",
        "settings": {},
        "attention": "bidirectional",
        "cpt_steps": 0,
    }
    records = {}
    for arm, accuracies in sst2_scores.items():
        reference = [0, 1, 1, 1]  # majority 0.75
        seeds = {
            str(i): {"accuracy": a, "per_instance": {"prediction": reference, "reference": reference}}
            for i, a in enumerate(accuracies)
        }
        records[arm, "sst2"] = {**base, "arm": arm, "measure": "sst2", "scores": {"seeds": seeds}}
        tc = {str(i): {"entity_f1": 0.5 + 0.01 * i} for i in range(len(accuracies))}
        records[arm, "conll2003"] = {**base, "arm": arm, "measure": "conll2003", "scores": {"seeds": tc}}
        ir = {"per_instance": {"ndcg@10": [0.8, 0.9, 0.7]}, "random_ndcg@10": 0.2}
        records[arm, "scifact"] = {**base, "arm": arm, "measure": "scifact", "scores": ir}
    return records


def test_a_comparison_is_made_only_where_both_arms_clear_the_trivial_baseline():
    learned = [0.90, 0.91, 0.92, 0.93, 0.94]
    records = _records(
        {
            "decoder-causal": [0.74, 0.76, 0.75, 0.75, 0.76],
            "decoder-bidirectional": learned,
            "cpt-lora": [x + 0.02 for x in learned],
            "cpt-full": learned,
        }
    )
    baselines = {task: real_decoder.trivial(records, task) for task, _, _ in real_decoder.TASKS}
    assert baselines["sst2"] == 0.75
    verdicts = {(t["task"], t["a"], t["b"]): t["verdict"] for t in real_decoder.comparisons(records, baselines)}
    assert (
        verdicts["sst2", "decoder-bidirectional", "decoder-causal"]
        == "not testable: decoder-causal not shown above the trivial baseline"
    )
    assert verdicts["sst2", "cpt-lora", "decoder-bidirectional"] == "cpt-lora higher"
    assert verdicts["sst2", "cpt-full", "decoder-bidirectional"] == "cpt-full higher" or verdicts[
        "sst2", "cpt-full", "decoder-bidirectional"
    ].startswith("no difference")
    assert verdicts["scifact", "cpt-lora", "decoder-causal"].startswith("no difference")


def test_an_archive_with_a_member_outside_the_results_is_refused(tmp_path):
    archive = tmp_path / "bad.tar.xz"
    payload = tmp_path / "x.json"
    payload.write_text("{}")
    with tarfile.open(archive, "w:xz") as tar:
        tar.add(payload, arcname="./results/cpt-lora/sst2.json")
    with pytest.raises(BadInput, match="not a real-decoder archive"):
        real_decoder.main(["--from_results", str(archive), "--output", str(tmp_path / "out")])
    assert not (tmp_path / "out" / "results").exists()


def test_the_committed_study_regenerates_byte_for_byte(tmp_path):
    real_decoder.main(["--from_results", str(DOCS / "results.tar.xz"), "--output", str(tmp_path)])
    for name in ("README.md", "results.csv"):
        assert (tmp_path / "report" / name).read_text() == (DOCS / name).read_text(), name
