"""Model cards: the name grammar, card contents for MLM / CLM / PFS / CPT checkpoints, model-index metadata."""

import csv
import json

import pytest
import torch
from huggingface_hub import DatasetCard, ModelCard
from safetensors.torch import save_file
from tokenizers import Tokenizer, models, pre_tokenizers

from model_cards.generate import build_model_card, build_results_card, describe_name, main, parse_name

SUMMARY_COLUMNS = ["model", "task", "family", "metric", "best_lr", "n_seeds", "mean", "ci_low", "ci_high", "std",
                   "n_diverged"]
TASKS = [("sst2", "sc", "accuracy"), ("conll2003", "tc", "token_micro_f1"), ("squad", "qa", "f1"), ("scifact", "ir", "ndcg@10")]  # as evaluation.report writes them


def make_checkpoint(path, name, objective="mlm", mlm_probability=0.4, steps=200, pfs_switch_step=None,
                    cpt_base=None, preset="toy", extra_files=True):
    """A small but complete `save_pretrained` folder as recipes/pretrain.py writes it (contract in the brief)."""
    path.mkdir(parents=True)
    auto_map = {"AutoConfig": "configuration_eurobert.EuroBertConfig", "AutoModel": "modeling_eurobert.EuroBertModel",
                "AutoModelForMaskedLM": "modeling_eurobert.EuroBertForMaskedLM"}
    config = {"architectures": ["EuroBertForMaskedLM"], "model_type": "mlm_vs_clm_eurobert", "auto_map": auto_map,
              "vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "intermediate_size": 37, "torch_dtype": "float32"}
    (path / "config.json").write_text(json.dumps(config, indent=2))
    weights = {"model.embed_tokens.weight": torch.randn(99, 32), "lm_head.weight": torch.randn(99, 32),
               "model.layers.0.self_attn.q_proj.weight": torch.randn(32, 32)}
    save_file(weights, str(path / "model.safetensors"), metadata={"format": "pt"})
    vocab = {tok: i for i, tok in enumerate(["<unk>", "<|begin_of_text|>", "<|end_of_text|>", "<|mask|>",
                                            "the", "encoder", "still", "matters", "."])}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|begin_of_text|>",
         "eos_token": "<|end_of_text|>", "mask_token": "<|mask|>", "unk_token": "<unk>"}))
    (path / "configuration_eurobert.py").write_text("class EuroBertConfig:  # fixture stand-in\n    pass\n")
    (path / "modeling_eurobert.py").write_text("class EuroBertModel:  # fixture stand-in\n    pass\n")
    if extra_files:  # trainer leftovers that must stay local
        (path / "optimizer.pt").write_bytes(b"\x00optimizer state")
        (path / "training_args.bin").write_bytes(b"\x80pickle")
        (path / "trainer_state.json").write_text("{}")
    run_info = {
        "name": name, "size": name.split("-")[0], "objective": objective, "mlm_probability": mlm_probability,
        "steps": steps, "pfs_switch_step": pfs_switch_step, "cpt_base": cpt_base, "preset": preset,
        "run_config": {"objective": objective, "mlm_probability": mlm_probability, "mask_replace_prob": 1.0,
                       "random_replace_prob": 0.0, "max_seq_length": 64},
        "training_args": {"learning_rate": 5e-4, "lr_scheduler_type": "warmup_stable_decay", "warmup_steps": 20,
                          "max_steps": steps, "weight_decay": 0.1, "adam_beta2": 0.95, "hub_token": "<HUB_TOKEN>"},
        "versions": {"torch": "2.13.0", "transformers": "5.24.0"}, "git_commit": "448d4bc",
        "data": {"source": "enwiki (stand-in for FineWeb-Edu)", "fingerprint": "abc123"}, "tokens_seen": 409600}
    (path / "run_info.json").write_text(json.dumps(run_info, indent=2))
    return path


def write_summary(path, models):
    """summary.csv with one row per (model, task); scores differ per model so rows cannot be mixed up."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, SUMMARY_COLUMNS)
        writer.writeheader()
        for m, model in enumerate(models):
            for t, (task, family, metric) in enumerate(TASKS):
                mean = 0.5 + 0.1 * m + 0.01 * t
                writer.writerow({"model": model, "task": task, "family": family, "metric": metric,
                                 "best_lr": "5e-05", "n_seeds": 3, "mean": mean, "ci_low": mean - 0.02,
                                 "ci_high": mean + 0.02, "std": 0.01, "n_diverged": t % 2})
    return path


def write_report(report_dir, models):
    """An evaluation report folder: summary.csv + results/<model>/<task>/lr<lr>-seed<seed>.json."""
    report_dir.mkdir(parents=True)
    write_summary(report_dir / "summary.csv", models)
    for model in models:
        for task, family, metric in TASKS:
            for seed in (0, 1):
                run = {"format": 2, "model": model, "task": task, "family": family, "lr": 5e-5, "seed": seed,
                       "status": "diverged" if seed == 1 and task == "squad" else "ok", "main_metric": metric,
                       "validation": {metric: 0.6}, "test": {metric: 0.55}, "per_instance": {"ids": [0, 1]},
                       "config": {"batch_size": 32}, "versions": {"transformers": "5.24.0"}}
                out = report_dir / "results" / model / task / f"lr5e-05-seed{seed}.json"
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(json.dumps(run))
    return report_dir


# ----- the name grammar -----

SPEC_NAMES = (
    [f"{s}-{o}-42k" for s in ("210m", "610m", "1b") for o in ("clm", "mlm20", "mlm30", "mlm40", "mlm50")]
    + ["610m-clm-12k", "610m-clm-22k", "610m-mlm40-12k", "610m-mlm40-22k"]
    + [f"610m-clm-{k}k-mlm40-{t}" for t, ks in (("12k", (3, 6, 9)), ("22k", (5, 11, 17)), ("42k", (10, 21, 32)))
       for k in ks]
    + [f"610m-clm-40k-mlm{r}-42k" for r in (20, 30, 40, 50)]
    + [f"610m-{b}-dec42k-mlm40-{t}" for b in ("clm", "mlm40") for t in ("44k", "54k", "64k")]
    + [f"610m-{o}-42k-{s}" for o in ("clm", "mlm40") for s in (1000, 2000, 5000, 10000, 20000, 40000)])


def test_every_spec_name_parses_to_its_kind():
    kinds = [parse_name(n)["kind"] + ("+step" if parse_name(n)["step"] else "") for n in SPEC_NAMES]
    assert len(set(SPEC_NAMES)) == 50  # 38 models + 12 intermediate checkpoints
    assert {k: kinds.count(k) for k in set(kinds)} == {"single": 19, "two_phase": 13, "cpt": 6, "single+step": 12}


@pytest.mark.parametrize("name, expected", [
    ("610m-mlm40-42k", ["610m encoder", "42,000 steps", "masked language modeling (MLM) with a 40% masking ratio"]),
    ("1b-clm-42k", ["1b encoder", "causal language modeling (CLM"]),
    ("610m-clm-10k-mlm40-42k", ["two phases (PFS)", "CLM for the first 10,000 steps", "remaining 32,000"]),
    ("610m-clm-40k-mlm20-42k", ["CLM for the first 40,000 steps", "20% masking ratio", "remaining 2,000"]),
    ("610m-clm-dec42k-mlm40-64k", ["continued pretraining (CPT)", "decayed 42,000-step CLM", "22,000 more steps"]),
    ("610m-mlm40-dec42k-mlm40-44k", ["decayed 42,000-step MLM40 checkpoint", "2,000 more steps", "44,000 in all"]),
    ("610m-clm-42k-1000", ["intermediate checkpoint at step 1,000 of the run 610m-clm-42k", "42,000 steps"]),
])
def test_describe_name_explains_every_kind(name, expected):
    text = describe_name(name)
    assert text.startswith(name + ":")
    for part in expected:
        assert part in text, (part, text)


@pytest.mark.parametrize("name, error", [
    ("610m-mlm-42k", "outside the study's grammar"),  # MLM needs its masking ratio
    ("610m-bert-42k", "outside the study's grammar"),
    ("610m-mlm40", "outside the study's grammar"),
    ("mlm40-610m-42k", "outside the study's grammar"),
    ("610M-MLM40-42K", "outside the study's grammar"),
    ("610m-mlm40-42000", "outside the study's grammar"),  # steps are written in k
    ("", "outside the study's grammar"),
    ("610m-mlm0-42k", "masking ratio 0%"),
    ("610m-clm-42k-mlm40-42k", "fewer than the 42000 total"),  # the CLM phase cannot fill the whole run
    ("610m-clm-dec44k-mlm40-44k", "fewer than the 44000 total"),
    ("610m-mlm40-42k-42000", "intermediate step 42000"),
])
def test_bad_names_raise(name, error):
    with pytest.raises(ValueError, match=error):
        describe_name(name)


# ----- model cards -----

FIXTURES = {  # name -> run_info fields
    "610m-mlm40-42k": {"objective": "mlm", "mlm_probability": 0.4},
    "610m-clm-42k": {"objective": "clm", "mlm_probability": None},
    "610m-clm-10k-mlm40-42k": {"objective": "mlm", "mlm_probability": 0.4, "pfs_switch_step": 50},
    "610m-clm-dec42k-mlm40-44k": {"objective": "mlm", "mlm_probability": 0.4, "cpt_base": "610m-clm-42k"},
}


@pytest.fixture
def summary_csv(tmp_path):
    return write_summary(tmp_path / "summary.csv", list(FIXTURES))


@pytest.mark.parametrize("name", list(FIXTURES))
def test_model_card_contents(tmp_path, summary_csv, name):
    ckpt = make_checkpoint(tmp_path / name, name, **FIXTURES[name])
    card = build_model_card(ckpt, summary_csv, repo_id=f"org/{name}")
    (tmp_path / "README.md").write_text(str(card))
    loaded = ModelCard.load(tmp_path / "README.md")  # what the Hub parses
    text = loaded.text

    assert loaded.data.library_name == "transformers" and loaded.data.model_name == name
    assert describe_name(name) in text
    assert "**This is a `toy`-scale reproduction:**" in text  # the name keeps the paper's grammar
    # Evaluation table: this model's rows only, with 95% CIs.
    m = list(FIXTURES).index(name)
    mean = 0.5 + 0.1 * m
    assert f"| SC | sst2 | accuracy | {mean:.4f} | [{mean - 0.02:.4f}, {mean + 0.02:.4f}] |" in text
    results = loaded.data.eval_results
    assert [r.dataset_type for r in results] == [t for t, _, _ in TASKS]
    assert [r.task_type for r in results] == ["text-classification", "token-classification",
                                             "question-answering", "sentence-similarity"]
    assert results[0].metric_value == pytest.approx(mean) and results[0].dataset_name == "sst2 (stand-in)"
    # Usage, limitations, citation.
    assert f'AutoModel.from_pretrained("org/{name}", trust_remote_code=True)' in text
    assert "Toy scale" in text and "stand-in" in text
    assert "2507.00994" in text and "| `training_args.learning_rate` | 0.0005 |" in text
    assert "hub_token" not in text  # only whitelisted TrainingArguments reach the card
    if "pfs_switch_step" in FIXTURES[name]:
        assert "| PFS switch | CLM until step 50, then MLM |" in text
    if "cpt_base" in FIXTURES[name]:
        assert "| CPT base | `610m-clm-42k` (decayed checkpoint) |" in text
    if name == "610m-clm-42k":
        assert "| masking ratio | none (CLM) |" in text and loaded.data.pipeline_tag == "feature-extraction"


def test_paper_preset_card_has_no_toy_caveats(tmp_path, summary_csv):
    ckpt = make_checkpoint(tmp_path / "c", "610m-mlm40-42k", steps=42000, preset="paper")
    card = build_model_card(ckpt, summary_csv)
    assert "Toy scale" not in card.text and card.data.datasets == ["HuggingFaceFW/fineweb-edu"]
    assert card.data.eval_results[0].dataset_name == "sst2"


def test_intermediate_checkpoint_card(tmp_path, summary_csv):
    ckpt = make_checkpoint(tmp_path / "run" / "intermediate" / "step-1000", "610m-clm-42k", objective="clm",
                           mlm_probability=None, steps=1000)
    card = build_model_card(ckpt, summary_csv, repo_id="org/610m-clm-42k", revision="step-1000")
    assert card.data.model_name == "610m-clm-42k-1000"
    assert 'AutoModel.from_pretrained("org/610m-clm-42k", revision="step-1000", trust_remote_code=True)' in card.text
    assert "was not evaluated" in card.text and card.data.eval_results is None


def test_run_info_contradicting_the_name_raises(tmp_path):
    ckpt = make_checkpoint(tmp_path / "c", "610m-mlm40-42k", mlm_probability=0.3)
    with pytest.raises(ValueError, match="contradicts its name: mlm_probability 0.3"):
        build_model_card(ckpt)


def test_missing_run_info_key_raises(tmp_path):
    ckpt = make_checkpoint(tmp_path / "c", "610m-mlm40-42k")
    info = json.loads((ckpt / "run_info.json").read_text())
    del info["tokens_seen"]
    (ckpt / "run_info.json").write_text(json.dumps(info))
    with pytest.raises(ValueError, match=r"lacks \['tokens_seen'\]"):
        build_model_card(ckpt)


def test_results_card(tmp_path):
    report = write_report(tmp_path / "report", ["610m-mlm40-42k", "610m-clm-42k"])
    card = build_results_card(report / "results", report / "summary.csv", repo_id="org/results")
    (tmp_path / "README.md").write_text(str(card))
    loaded = DatasetCard.load(tmp_path / "README.md")
    assert [c["config_name"] for c in loaded.data.configs] == ["summary", "runs"]
    assert "16 runs\n(2 diverged) of 2 models on 4 tasks" in loaded.text
    assert "| 610m-clm-42k | IR | scifact | ndcg@10 | 0.6300 | [0.6100, 0.6500] |" in loaded.text


def test_cli_writes_a_loadable_card(tmp_path, summary_csv):
    ckpt = make_checkpoint(tmp_path / "c", "610m-mlm40-42k")
    main([str(ckpt), "--summary", str(summary_csv), "--output", str(tmp_path / "README.md")])
    assert len(ModelCard.load(tmp_path / "README.md").data.eval_results) == 4


# ----- the CLI as a user meets it -----

def _generate(*args):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    return subprocess.run([sys.executable, "-m", "model_cards.generate", *map(str, args)], cwd=root,
                          capture_output=True, text=True, timeout=120)


def test_cli_writes_into_the_checkpoint_and_never_over_a_file_it_did_not_write(tmp_path, summary_csv):
    ckpt = make_checkpoint(tmp_path / "c", "610m-mlm40-42k")
    project_readme = tmp_path / "README.md"
    project_readme.write_text("# my project\n")
    proc = _generate(ckpt, "--summary", summary_csv)  # the README's own command: no --output
    assert proc.returncode == 0, proc.stderr
    assert project_readme.read_text() == "# my project\n"
    assert ModelCard.load(ckpt / "README.md").data.model_name == "610m-mlm40-42k"
    assert _generate(ckpt, "--summary", summary_csv).returncode == 0  # its own card: regenerated
    refused = _generate(ckpt, "--summary", summary_csv, "--output", project_readme)
    assert refused.returncode == 2 and "was not written by model_cards.generate; pass --force" in refused.stderr
    assert project_readme.read_text() == "# my project\n"
    assert _generate(ckpt, "--output", project_readme, "--force").returncode == 0
    assert "610m-mlm40-42k" in project_readme.read_text()


@pytest.mark.parametrize("case", ["no_run_info", "bad_summary"])
def test_cli_bad_input_is_one_line(tmp_path, case):
    ckpt = make_checkpoint(tmp_path / "c", "610m-mlm40-42k")
    args = [ckpt]
    if case == "no_run_info":
        (ckpt / "run_info.json").unlink()
    else:
        (tmp_path / "summary.csv").write_text("model,task\nx,y\n")
        args += ["--summary", tmp_path / "summary.csv"]
    proc = _generate(*args)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert ("run_info.json not found" if case == "no_run_info" else "lacks columns") in lines[-1]
    assert not (ckpt / "README.md").exists()
