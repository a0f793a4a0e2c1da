"""Model cards: the name grammar, card contents for MLM / CLM / PFS / CPT checkpoints and for any other run,
model-index metadata, the test data behind each score."""

import csv
import json

import pytest
import torch
from huggingface_hub import DatasetCard, ModelCard
from safetensors.torch import save_file
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import TrainingArguments

from analysis.report import REPORT_MARK, shown_at_scale
from analysis.statistics import confidence_interval, load_results, summarize
from core import artifacts, model_folders, run_folders, store
from core.formatting import table_cell
from core.names import scaled_name
from evaluation.tasks import describe_test_data
from model_cards.generate import build_model_card, describe_name, main, parse_name
from model_cards.results_card import build_results_card
from pretraining.inputs import CptStart
from pretraining.provenance import make_run_info
from pretraining.settings import PretrainArguments

TASKS = [
    ("sst2", "sc", "accuracy"),
    ("conll2003", "tc", "sentence_macro_f1"),
    ("squad", "qa", "f1"),
    ("scifact", "ir", "ndcg@10"),
]  # as analysis.report writes them
# Per-instance records as each family's evaluate() writes them (core.store.result_body).
INSTANCES = {
    "sc": [
        {"prediction": "positive", "reference": "positive", "accuracy": 1.0},
        {"prediction": "positive", "reference": "negative", "accuracy": 0.0},
    ],
    "tc": [
        {
            "prediction": ["B-PER", "O"],
            "reference": ["B-PER", "O"],
            "sentence_macro_f1": 1.0,
            "entity_f1": 1.0,
            "entity_tp": 1,
            "entity_pred": 1,
            "entity_gold": 1,
            "token_correct": 2,
            "token_count": 2,
        }
    ],
    "qa": [
        {"prediction": "1/2 of it", "reference": ["half", "1/2 of it"], "id": "q1", "exact_match": 1.0, "f1": 1.0},
        {"prediction": "", "reference": ["Paris"], "id": "q2", "exact_match": 0.0, "f1": 0.0},
    ],
    "ir": [
        {"ranking": ["d2", "d1"], "relevance": {"d1": 1}, "qid": "7", "ndcg@10": 0.63, "mrr@10": 0.5, "recall@100": 1.0}
    ],
}


def make_checkpoint(
    path,
    name,
    objective="mlm",
    mlm_probability=0.4,
    steps=200,
    switch_step=None,
    cpt_base=None,
    scale="toy",
    extra_files=True,
    is_causal=None,
    branch_from=None,
    tokens_before_cpt=400 * 8 * 64,
):
    """A small but complete `save_pretrained` folder whose run_info.json is written by the real
    `pretraining.provenance.make_run_info`, with the local paths a real run records (output_dir, tokenizer, base...)."""
    path.mkdir(parents=True)
    auto_map = {
        "AutoConfig": "configuration_eurobert.EuroBertConfig",
        "AutoModel": "modeling_eurobert.EuroBertModel",
        "AutoModelForMaskedLM": "modeling_eurobert.EuroBertForMaskedLM",
    }
    config = {
        "architectures": ["EuroBertForMaskedLM"],
        "model_type": "mlm_vs_clm_eurobert",
        "auto_map": auto_map,
        "vocab_size": 99,
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 37,
        "torch_dtype": "float32",
        "is_causal": objective == "clm" if is_causal is None else is_causal,
    }
    (path / "config.json").write_text(json.dumps(config, indent=2))
    weights = {
        "model.embed_tokens.weight": torch.randn(99, 32),
        "lm_head.weight": torch.randn(99, 32),
        "model.layers.0.self_attn.q_proj.weight": torch.randn(32, 32),
    }
    save_file(weights, str(path / "model.safetensors"), metadata={"format": "pt"})
    vocab = {
        tok: i
        for i, tok in enumerate(
            ["<unk>", "<|begin_of_text|>", "<|end_of_text|>", "<|mask|>", "the", "encoder", "still", "matters", "."]
        )
    }
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": "<|begin_of_text|>",
                "eos_token": "<|end_of_text|>",
                "mask_token": "<|mask|>",
                "unk_token": "<unk>",
            }
        )
    )
    (path / "configuration_eurobert.py").write_text("class EuroBertConfig:  # fixture stand-in\n    pass\n")
    (path / "modeling_eurobert.py").write_text("class EuroBertModel:  # fixture stand-in\n    pass\n")
    if extra_files:  # trainer leftovers that must stay local
        (path / "optimizer.pt").write_bytes(b"\x00optimizer state")
        (path / "training_args.bin").write_bytes(b"\x80pickle")
        (path / "trainer_state.json").write_text("{}")
    settings = dict(
        objective=objective,
        mlm_probability=mlm_probability or 0.4,
        switch_step=switch_step,
        scale=scale,
        tokenizer_name_or_path=str(path.parent / "tokenizer"),
        corpus_source="bundle",
        max_docs=2000,
        block_size=64,
        branch_from=branch_from,
    )
    if cpt_base:
        run_args = PretrainArguments(
            cpt=True, model_name_or_path=str(path.parent / cpt_base), keep_optimizer_state=True, **settings
        )
    else:
        run_args = PretrainArguments(architecture="tiny", **settings)
    training_args = TrainingArguments(
        output_dir=str(path),
        run_name=name,
        max_steps=steps,
        learning_rate=5e-4,
        lr_scheduler_type="warmup_stable_decay",
        warmup_steps=20,
        weight_decay=0.1,
        adam_beta2=0.95,
        per_device_train_batch_size=8,
        data_seed=0,
        report_to="none",
        use_cpu=True,
    )
    info = make_run_info(
        run_args,
        training_args,
        step=steps,
        identity={"fingerprint": "abc123", "tokenizer": "t0"},
        start=CptStart(cpt_base, 0, None, tokens_before_cpt if cpt_base else 0),
        parameters={"total": 615232, "input_embedding": 524288},
    )
    (path / "run_info.json").write_text(json.dumps(info, indent=2))
    return path


def write_summary(path, results_dir, scale="toy", rows=(), edits=None):
    """summary.csv as `analysis.report --scale` writes it from the results in `results_dir`, `rows` appended and
    `edits` {task: {column: value}} applied to that task's rows (a hand-edited summary)."""
    computed = shown_at_scale(summarize(load_results(results_dir)), scale)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, run_folders.SUMMARY_COLUMNS, restval="", extrasaction="ignore")
        writer.writeheader()
        for row in computed:
            edited = (edits or {}).get(row["task"], {})
            writer.writerow({**{k: table_cell(row[k]) for k in run_folders.SUMMARY_COLUMNS}, **edited})
        for row in rows:
            writer.writerow(row)
    return path


BASELINE = 0.5  # every task's trivial baseline in `write_results` (below every `score`)


def score(m: int, t: int, seed: int) -> float:
    """The test score `write_results` records for the m-th checkpoint on the t-th task with `seed`: scores differ per
    model, task and seed, so that rows cannot be mixed up and intervals have a width."""
    return round(0.55 + 0.1 * m + 0.01 * t + 0.02 * seed, 6)


def write_results(
    results_dir,
    checkpoints,
    tasks=TASKS,
    source="offline",
    capped=False,
    seeds=(0, 1),
    lr=5e-5,
    scores=None,
    validation=0.6,
    baseline=BASELINE,
    budget=None,
):
    """Per-run result files as evaluation.run writes them, each with the identity of its checkpoint's weights
    (`capped`: the test splits cut by `--max_eval` to the instances kept; `scores` {(task, seed): test score}
    instead of `score`'s; `baseline`: every task's trivial baseline; `budget`: config fields of a cut budget)."""
    for m, (model, checkpoint) in enumerate(checkpoints.items()):
        identity = model_folders.checkpoint_identity(checkpoint)
        for t, (task, family, metric) in enumerate(tasks):
            for seed in seeds:
                diverged = seed == 1 and task == "squad"
                instances = [] if diverged else INSTANCES[family]
                value = (scores or {}).get((task, seed), score(m, t, seed))
                recorded = {} if diverged else {metric: value, **({"entity_f1": 0.25} if family == "tc" else {})}
                run = {
                    "format": store.RESULT_FORMAT,
                    "model": model,
                    "task": task,
                    "family": family,
                    "lr": lr,
                    "seed": seed,
                    "status": "diverged" if diverged else "ok",
                    "main_metric": metric,
                    "validation": recorded and {metric: validation},
                    "test": recorded,
                    "per_instance": {"validation": instances[:1], "test": instances},
                    "trivial_baseline": {role: {metric: baseline} for role in ("validation", "test")},
                    "config": {
                        "batch_size": 32,
                        "source": source,
                        "max_length": 128,
                        "max_steps": None,
                        "max_train": None,
                        "max_eval": len(INSTANCES[family]) if capped else None,
                        "schedule": {"max_steps": 1000, "epochs": None},
                        "train_examples": 40,
                        **(budget or {}),
                    },
                    "identity": {
                        "model": identity,
                        "protocol": {"batch_size": 32},
                        "task": {
                            "definition": "d" * 64,
                            "source": source,
                            "data": {"dev.tsv": "h" * 64, str(results_dir / "x" / "dev.tsv"): "h"},
                        },
                    },
                    "versions": {"transformers": "5.24.0"},
                    "git_commit": "448d4bc",
                }
                out = store.result_path(results_dir, model, task, lr, seed)
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(json.dumps(run))
    return results_dir


def write_report(report_dir, checkpoints, results_dir=None, scale="toy"):
    """An evaluation report folder (summary.csv, its names at `scale` as `analysis.report --scale` writes them,
    and its marker) and the per-run results behind it: `<report_dir>/results` by default, or `results_dir` (the
    study's layout: study/<study>/report beside study/<study>/results)."""
    report_dir.mkdir(parents=True)
    write_results(results_dir or report_dir / "results", checkpoints)
    write_summary(report_dir / "summary.csv", results_dir or report_dir / "results", scale)
    artifacts.write_json_atomic(report_dir / REPORT_MARK, {"files": ["summary.csv"], "scale": scale})
    return report_dir


# ----- the name grammar -----

RELEASED_NAMES = (
    [f"{s}-{o}-42k" for s in ("210m", "610m", "1b") for o in ("clm", "mlm20", "mlm30", "mlm40", "mlm50")]
    + ["610m-clm-12k", "610m-clm-22k", "610m-mlm40-12k", "610m-mlm40-22k"]
    + [
        f"610m-clm-{k}k-mlm40-{t}"
        for t, ks in (("12k", (3, 6, 9)), ("22k", (5, 11, 17)), ("42k", (10, 21, 32)))
        for k in ks
    ]
    + [f"610m-clm-40k-mlm{r}-42k" for r in (20, 30, 40, 50)]
    + [f"610m-{b}-dec42k-mlm40-{t}" for b in ("clm", "mlm40") for t in ("44k", "54k", "64k")]
    + [f"610m-{o}-42k-{s}" for o in ("clm", "mlm40") for s in (1000, 2000, 5000, 10000, 20000, 40000)]
)


def test_every_spec_name_parses_to_its_kind():
    kinds = [parse_name(n).kind + ("+step" if parse_name(n).paper_step else "") for n in RELEASED_NAMES]
    assert len(set(RELEASED_NAMES)) == 50  # 38 models + 12 intermediate checkpoints
    assert {k: kinds.count(k) for k in set(kinds)} == {"single": 19, "pfs": 13, "cpt": 6, "single+step": 12}


def test_a_scaled_name_parses_back_as_a_hub_repo_id():
    """One rule (core.names.scaled_name): `<scale>-<name>` at every non-paper scale, the name itself at the paper's;
    it reads back to the same run and scale and is a valid Hub repo name."""
    from huggingface_hub.utils import validate_repo_id

    from recipes.manifest import SCALES

    for scale in [s for s in SCALES if s != "paper"]:
        for name in RELEASED_NAMES:
            shown = scaled_name(name, scale)
            p, plain = parse_name(shown), parse_name(name)
            assert shown == f"{scale}-{name}" and p.scale == scale and validate_repo_id(f"org/{shown}") is None
            assert (p.kind, p.size, p.ratio, p.total_steps, p.paper_step) == (
                plain.kind,
                plain.size,
                plain.ratio,
                plain.total_steps,
                plain.paper_step,
            )
            assert p.run_name == scaled_name(plain.run_name, scale)
    assert scaled_name("610m-clm-42k", "paper") == scaled_name("610m-clm-42k", None) == "610m-clm-42k"
    assert parse_name("610m-clm-42k").scale is None and scaled_name("my-encoder", "mini") == "my-encoder"
    for bad, message in (("Mini", "lower-case words"), ("1x", "lower-case words")):
        with pytest.raises(ValueError, match=message):
            scaled_name("610m-clm-42k", bad)
    with pytest.raises(ValueError, match="already carries the scale 'mini'"):
        scaled_name("mini-610m-clm-42k", "toy")
    with pytest.raises(ValueError, match="paper-scale names carry no scale prefix"):
        parse_name("paper-610m-clm-42k")


def test_a_study_name_trained_outside_the_study_does_not_claim_the_papers_run(tmp_path):
    """No scale recorded (not a manifest config) and a tiny model of 200 steps named 610m-clm-42k: `custom-`."""
    ckpt = make_checkpoint(tmp_path / "c", "610m-clm-42k", objective="clm", mlm_probability=None, scale=None)
    card = build_model_card(ckpt)
    assert card.data.model_name == "custom-610m-clm-42k"
    assert (
        card.text.split("# custom-610m-clm-42k\n", 1)[1]
        .lstrip()
        .startswith("> **Not a study run: 4,192 parameters trained on 102,400 tokens (200 steps).**")
    )


@pytest.mark.parametrize(
    "name, expected",
    [
        ("610m-mlm40-42k", ["610m encoder", "42,000 steps", "masked language modeling (MLM) with a 40% masking ratio"]),
        ("1b-clm-42k", ["1b encoder", "causal language modeling (CLM"]),
        ("610m-clm-10k-mlm40-42k", ["two phases (PFS)", "CLM for the first 10,000 steps", "remaining 32,000"]),
        ("610m-clm-40k-mlm20-42k", ["CLM for the first 40,000 steps", "20% masking ratio", "remaining 2,000"]),
        ("610m-clm-dec42k-mlm40-64k", ["continued pretraining (CPT)", "decayed 42,000-step CLM", "22,000 more steps"]),
        ("610m-mlm40-dec42k-mlm40-44k", ["decayed 42,000-step MLM40 checkpoint", "2,000 more steps", "44,000 in all"]),
        ("610m-clm-42k-1000", ["intermediate checkpoint at step 1,000 of the run 610m-clm-42k", "42,000 steps"]),
    ],
)
def test_describe_name_explains_every_kind(name, expected):
    text = describe_name(name)
    assert text.startswith(name + ":")
    for part in expected:
        assert part in text, (part, text)


@pytest.mark.parametrize(
    "name, error",
    [
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
    ],
)
def test_bad_names_raise(name, error):
    with pytest.raises(ValueError, match=error):
        describe_name(name)


# ----- model cards -----

FIXTURES = {  # name -> run_info fields
    "610m-mlm40-42k": {"objective": "mlm", "mlm_probability": 0.4},
    "610m-clm-42k": {"objective": "clm", "mlm_probability": None},
    "610m-clm-10k-mlm40-42k": {"objective": "mlm", "mlm_probability": 0.4, "switch_step": 50},
    "610m-clm-dec42k-mlm40-44k": {"objective": "mlm", "mlm_probability": 0.4, "cpt_base": "610m-clm-42k"},
}


def toy(name: str) -> str:
    """A toy-scale run's name as the report, the cards and the Hub show it: the scale first."""
    return scaled_name(name, "toy")


@pytest.fixture
def summary_csv(tmp_path):
    """A report's summary.csv at --scale toy, of another checkpoint than the test's (results in tmp_path/results)."""
    ckpt = make_checkpoint(tmp_path / "evaluated" / "610m-mlm40-42k", "610m-mlm40-42k")
    return write_summary(tmp_path / "summary.csv", write_results(tmp_path / "results", {"610m-mlm40-42k": ckpt}))


def evaluated(tmp_path, name, **fields):
    """A checkpoint, the per-run results of its weights and the summary: (checkpoint, summary.csv, results dir)."""
    ckpt = make_checkpoint(tmp_path / "models" / name, name, **fields)
    results = write_results(tmp_path / "results", {name: ckpt})
    return ckpt, write_summary(tmp_path / "summary.csv", results, fields.get("scale", "toy")), results


def load(card, tmp_path) -> ModelCard:
    (tmp_path / "README.md").write_text(str(card))
    return ModelCard.load(tmp_path / "README.md")  # what the Hub parses


@pytest.mark.parametrize("name", list(FIXTURES))
def test_model_card_contents(tmp_path, name):
    ckpt, summary, results = evaluated(tmp_path, name, **FIXTURES[name])
    loaded = load(build_model_card(ckpt, summary, repo_id=f"org/{name}", results_dir=results), tmp_path)
    text, shown = loaded.text, toy(name)

    assert loaded.data.library_name == "transformers" and loaded.data.model_name == shown
    assert loaded.data.license == "apache-2.0" and loaded.data.pipeline_tag
    assert loaded.data.datasets is None  # toy runs read the bundle's Wikipedia, not a Hub dataset
    # The title and the first line say the scale, then the parameters and tokens really trained.
    assert (
        text.split(f"# {shown}\n", 1)[1]
        .lstrip()
        .startswith(
            "> **Toy-scale reproduction (`toy` scale), not a paper model: 4,192 parameters trained on 102,400 tokens"
        )
    )
    assert describe_name(shown) in text and "a stand-in for FineWeb-Edu" in text
    # Evaluation table: this model's rows only, with 95% CIs and the data of each test score.
    mean, (low, high) = 0.56, confidence_interval([score(0, 0, 0), score(0, 0, 1)])
    assert (
        f"| SC | sst2 | `nyu-mll/glue` (sst2), validation (offline bundle copy); scored: all 2 instances | "
        f"accuracy | {mean:.4f} | [{low:.4f}, {high:.4f}] | {BASELINE:.4f} | 1,000 steps x batch 32 on 40 training "
        "examples |"
    ) in text
    results = loaded.data.eval_results
    # in the report's order (by task)
    assert [r.dataset_type for r in results] == [
        "hgissbkh/conll2003-en",
        "hgissbkh/conll2003-en",
        "scifact",
        "rajpurkar/squad",
        "nyu-mll/glue",
    ]
    # The split actually used: GLUE's and SQuAD's official validation splits are the test sets.
    assert [r.dataset_split for r in results] == ["test", "test", "test", "validation", "validation"]
    assert [r.metric_type for r in results] == ["sentence_macro_f1", "entity_f1", "ndcg@10", "f1", "accuracy"]
    assert [r.task_type for r in results] == [
        "token-classification",
        "token-classification",
        "sentence-similarity",
        "question-answering",
        "text-classification",
    ]
    first = results[-1]
    assert first.metric_value == pytest.approx(mean) and first.dataset_name == "sst2" and first.dataset_config == "sst2"
    assert first.metric_name == "accuracy"  # the CI is a metric field, not part of the name
    assert first.metric_args == {
        "ci95_low": pytest.approx(low, abs=1e-4),
        "ci95_high": pytest.approx(high, abs=1e-4),
        "n_seeds": 2,
        "learning_rate": 5e-05,
        "n_test_instances": 2,
        "trivial_baseline": BASELINE,
        "finetune_steps": 1000,
        "finetune_batch_size": 32,
        "train_examples": 40,
        "reduced_budget": False,
    }
    # Hyperparameters: grouped tables, each setting once, no local path.
    for group in ("**Model**", "**Data**", "**Objective**", "**Optimisation**"):
        assert group in text
    assert text.count("| learning_rate | `0.0005` |") == 1 and "| max_steps | `200` |" in text
    assert "| tokenizer_name_or_path | `<local>/tokenizer` |" in text and str(tmp_path) not in text
    assert "hub_token" not in text and "output_dir" not in text  # only the settings that decide the weights
    assert f'AutoModel.from_pretrained("org/{name}", trust_remote_code=True' in text
    assert "2507.00994" in text
    if "switch_step" in FIXTURES[name]:
        assert "| PFS switch | CLM until step 50, then MLM |" in text and "| switch_step | `50` |" in text
    if "cpt_base" in FIXTURES[name]:  # the base is the study's own run, published beside it
        assert loaded.data.base_model == "org/toy-610m-clm-42k"  # published under its shown name
        assert "| starting point | continued pretraining (CPT) started from [`org/toy-610m-clm-42k`]" in text
    else:
        assert loaded.data.base_model is None
    if name == "610m-clm-42k":
        assert loaded.data.pipeline_tag == "feature-extraction" and "mlm_probability" not in text
        assert "trust_remote_code=True, is_causal=False)" in text  # how the study loads a CLM checkpoint
        assert "attend causally unless told otherwise" in text and "bidirectionally" in text
        assert "python -m modeling_eurobert.export_native --bidirectional" in text
    else:
        assert "is_causal=False" not in text and "export_native" not in text


def test_paper_scale_card_has_no_toy_caveats(tmp_path):
    ckpt = make_checkpoint(tmp_path / "c", "610m-mlm40-42k", steps=42000, scale="paper")
    info = json.loads((ckpt / "run_info.json").read_text())
    info["data"]["source"] = "HuggingFaceFW/fineweb-edu"
    info["run_config"]["run_settings"].update(corpus_source="HuggingFaceFW/fineweb-edu", corpus_name="sample-350BT")
    (ckpt / "run_info.json").write_text(json.dumps(info))
    card = build_model_card(ckpt)
    assert "Toy-scale" not in card.text and card.data.datasets == ["HuggingFaceFW/fineweb-edu"]
    assert "`HuggingFaceFW/fineweb-edu` (config `sample-350BT`)" in card.text
    assert card.text.split("# 610m-mlm40-42k\n", 1)[1].lstrip().startswith("610m-mlm40-42k: a 610m encoder")


def test_confidence_intervals_stay_in_the_unit_interval(tmp_path):
    """A t-interval over 2 seeds reaching past 1 (as an older report wrote it) is shown clipped to [0, 1]."""
    name = "610m-mlm40-42k"
    ckpt = make_checkpoint(tmp_path / "models" / name, name)
    results = write_results(tmp_path / "results", {name: ckpt}, scores={("sst2", 0): 0.94, ("sst2", 1): 1.0})
    summary = write_summary(tmp_path / "wide.csv", results, edits={"sst2": {"ci_high": "1.351"}})
    card = build_model_card(ckpt, summary, results_dir=results)
    result, (low, _) = card.data.eval_results[-1], confidence_interval([0.94, 1.0])  # sst2: the report's last task
    assert result.metric_args["ci95_low"] == round(low, 4) and result.metric_args["ci95_high"] == 1.0
    assert f"| 0.9700 | [{low:.4f}, 1.0000] |" in card.text


def test_a_summary_the_results_do_not_give_is_refused(tmp_path, generate):
    """S7, S8: a card publishes no number its results do not give: a hand-edited mean beside its own CI, and a
    stale summary (2 seeds, best LR 5e-05) of results that now hold 3 seeds with another best LR, are refused in
    one line naming the model and task; the regenerated summary is used."""
    name = "610m-mlm40-42k"
    ckpt, _, results = evaluated(tmp_path, name)
    edited = write_summary(tmp_path / "edited.csv", results, edits={"sst2": {"mean": "0.9938"}})
    refused(generate, ckpt, edited, results, f"on toy-{name} / sst2: mean 0.9938 (the results give 0.5600):")
    stale = write_summary(tmp_path / "stale.csv", results)
    write_results(results, {name: ckpt}, lr=1e-4, seeds=(0, 1, 2), validation=0.7)  # a better LR, 3 seeds
    refused(
        generate,
        ckpt,
        stale,
        results,
        f"on toy-{name} / conll2003: mean",
        "; n_seeds 2 (the results give 3); best_lr 5e-05 (the results give 0.0001): regenerate it",
    )
    report = write_summary(tmp_path / "summary.csv", results)  # regenerated: used
    assert generate(ckpt, "--summary", report, "--results", results).returncode == 0
    with pytest.raises(ValueError, match="stale.csv disagrees with"):
        build_results_card(results, stale, scale="toy")


def refused(generate, ckpt, summary, results, *expected):
    proc = generate(ckpt, "--summary", summary, "--results", results)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert f"{summary} disagrees with {results} " in line and all(e in line for e in expected), line
    assert not (ckpt / "README.md").exists()


def test_run_card_lists_its_step_branches(tmp_path):
    run = make_checkpoint(tmp_path / "610m-clm-42k", "610m-clm-42k", objective="clm", mlm_probability=None)
    for step in (20, 5):
        make_checkpoint(
            run / "intermediate" / f"step-{step}",
            f"610m-clm-42k-{step}",
            objective="clm",
            mlm_probability=None,
            steps=step,
        )
    text = build_model_card(run, repo_id="org/610m-clm-42k").text
    assert "| `step-5` | 5 |\n| `step-20` | 20 |" in text
    assert 'revision="step-5", trust_remote_code=True, is_causal=False)' in text
    (run / "intermediate" / "step-last").mkdir()  # the one listing of intermediate checkpoints refuses it
    with pytest.raises(ValueError, match=r"\['step-last'\]: intermediate checkpoints must be named step-<N>"):
        build_model_card(run, repo_id="org/610m-clm-42k")


def test_intermediate_checkpoint_card(tmp_path, summary_csv):
    ckpt = make_checkpoint(
        tmp_path / "run" / "intermediate" / "step-1000",
        "610m-clm-42k-1000",
        objective="clm",
        mlm_probability=None,
        steps=1000,
    )  # run_info names an intermediate <run>-<paper step>
    card = build_model_card(
        ckpt, summary_csv, repo_id="org/610m-clm-42k", revision="step-1000", results_dir=tmp_path / "results"
    )
    assert card.data.model_name == "toy-610m-clm-42k-1000"
    # the card's usage snippet, as text: nothing is downloaded or loaded
    assert (
        'AutoModel.from_pretrained("org/610m-clm-42k", revision="step-1000", trust_remote_code=True, is_causal=False)'
    ) in card.text
    assert "was not evaluated" in card.text and card.data.eval_results is None
    assert "lives on the `step-1000` branch" in card.text


def test_decay_branch_and_its_base_model(tmp_path):
    stable = tmp_path / "models" / "610m-clm-42k"
    ckpt = make_checkpoint(
        tmp_path / "models" / "610m-clm-12k",
        "610m-clm-12k",
        objective="clm",
        mlm_probability=None,
        branch_from=str(stable),
    )
    card = build_model_card(ckpt, repo_id="me/toy-610m-clm-12k")
    assert card.data.base_model == "me/toy-610m-clm-42k"  # a toy-scale base: the scale in its repo id too
    assert "this decay branch started from the stable phase of [`me/toy-610m-clm-42k`]" in card.text
    assert "| branch_from | `<local>/610m-clm-42k` |" in card.text and str(tmp_path) not in card.text
    assert build_model_card(ckpt).data.base_model is None  # no org known: the text names the base instead
    cpt = make_checkpoint(tmp_path / "models" / "cpt", "610m-clm-dec42k-mlm40-64k", cpt_base="610m-clm-42k")
    step = make_checkpoint(
        cpt / "intermediate" / "step-10", "610m-clm-dec42k-mlm40-64k-10", steps=10, cpt_base="610m-clm-42k"
    )
    card = build_model_card(step, repo_id="me/toy-610m-clm-dec42k-mlm40-64k", revision="step-10")
    assert card.data.base_model == "me/toy-610m-clm-42k"  # an intermediate checkpoint keeps its run's starting point
    assert "| tokens seen | 5,120 tokens after 204,800 in its base (209,920 in all) |" in card.text


def test_any_run_is_described_from_its_run_info(tmp_path):
    """A checkpoint named outside the grammar (my own encoder) gets a card, described from run_info.json."""
    ckpt = make_checkpoint(tmp_path / "my-encoder", "my-encoder", mlm_probability=0.3, scale=None)
    card = build_model_card(ckpt, repo_id="me/my-encoder")
    assert card.data.model_name == "my-encoder" and "## What the name means" not in card.text
    assert (
        "my-encoder: a `tiny`-size encoder trained for 200 steps with masked language modeling (MLM) with a 30% "
        "masking ratio."
    ) in card.text
    assert "Toy-scale" not in card.text and "made with the recipes of a reimplementation" in card.text


def test_cpt_from_another_base_is_named_and_described_as_what_it_is(tmp_path):
    """CPT from a converted Llama with the 610m-clm-dec42k-mlm40-44k config: run_info keeps the recipe's name."""
    ckpt = make_checkpoint(
        tmp_path / "llama-cpt",
        "610m-clm-dec42k-mlm40-44k",
        cpt_base="llama-3.2-1b-eurobert",
        scale=None,
        tokens_before_cpt=None,
    )  # a converted decoder: no run_info, tokens unknown
    card = build_model_card(ckpt, repo_id="me/llama-3.2-1b-mlm40-cpt")
    assert "| tokens seen | 102,400 tokens after a base of unknown pretraining |" in card.text
    assert card.data.model_name == "llama-3.2-1b-mlm40-cpt" and "## What the name means" not in card.text
    assert "continued pretraining (CPT) of `llama-3.2-1b-eurobert`" in card.text
    assert "calls this run `610m-clm-dec42k-mlm40-44k`, the study's name for a run it is not" in card.text
    assert "decayed 42,000-step CLM checkpoint" not in card.text
    assert (
        card.data.base_model is None
        and (
            "`llama-3.2-1b-eurobert` (not published under a known Hub id; `--base_model ORG/NAME` names the one it has)"
        )
        in card.text
    )
    assert "LoRA" not in card.text
    card = build_model_card(ckpt, repo_id="me/llama-3.2-1b-mlm40-cpt", base_model="meta-llama/Llama-3.2-1B")
    assert card.data.base_model == "meta-llama/Llama-3.2-1B"
    assert build_model_card(ckpt).data.model_name == "llama-cpt"  # no repo id: the run folder's name
    with pytest.raises(ValueError, match="publish it under a name that says what it is"):
        build_model_card(ckpt, repo_id="me/610m-clm-dec42k-mlm40-44k")


def test_a_lora_cpt_card_says_lora_in_prose(tmp_path):
    """Issue 46 item 9: a LoRA CPT run's card mentioned LoRA only in its hyperparameter table."""
    ckpt = make_checkpoint(
        tmp_path / "my-decoder-cpt",
        "my-decoder-cpt",
        cpt_base="my-decoder-eurobert",
        scale=None,
        tokens_before_cpt=None,
    )
    info = json.loads((ckpt / "run_info.json").read_text())
    info["run_config"]["run_settings"].update(lora=True, lora_rank=4, lora_alpha=8.0, lora_train_embeddings=False)
    (ckpt / "run_info.json").write_text(json.dumps(info))
    prose = "\n".join(line for line in build_model_card(ckpt).text.splitlines() if not line.startswith("|"))
    assert (
        "my-decoder-cpt: an encoder made by LoRA continued pretraining (CPT with LoRA adapters of rank 4, alpha 8, "
        "on the frozen base; the adapters are merged into these weights) of `my-decoder-eurobert`"
    ) in prose


def test_a_contradicted_study_name_is_not_used(tmp_path):
    ckpt = make_checkpoint(tmp_path / "c", "610m-mlm40-42k", mlm_probability=0.3)
    card = build_model_card(ckpt)
    assert card.data.model_name == "c" and "mlm_probability 0.3 (name says 40%)" in card.text
    assert "with a 30% masking ratio" in card.text


def test_missing_run_info_key_raises(tmp_path):
    ckpt = make_checkpoint(tmp_path / "c", "610m-mlm40-42k")
    info = json.loads((ckpt / "run_info.json").read_text())
    del info["tokens_seen"]
    (ckpt / "run_info.json").write_text(json.dumps(info))
    with pytest.raises(ValueError, match=r"lacks \['tokens_seen'\]"):
        build_model_card(ckpt)


def test_recordedof_other_weights_are_refused(tmp_path):
    name = "610m-mlm40-42k"
    ckpt, summary, results = evaluated(tmp_path, name)
    with pytest.raises(ValueError, match="needs its per-run results folder too"):
        build_model_card(ckpt, summary)
    retrained = make_checkpoint(tmp_path / "retrained" / name, name)  # same name, other weights
    with pytest.raises(ValueError, match="was made from other weights than"):
        build_model_card(retrained, summary, results_dir=results)


@pytest.mark.parametrize(
    "task, source, dataset, split, stand_in",
    [
        ("sst2", "offline", "nyu-mll/glue", "validation", False),  # dev.tsv is GLUE's validation split
        ("mnli", "hub", "nyu-mll/glue", "validation_matched", False),
        ("conll2003", "offline", "hgissbkh/conll2003-en", "test", False),
        ("mrpc", "offline", "nyu-mll/glue", "test", False),  # the labelled MSR test set, not the mapped validation
        ("qqp", "offline", "qqp", "test", True),  # a balanced Quora split, not GLUE
        ("squad_v2", "offline", "squad_v2", "50% (by title, seed 42) of dev-half-cs224n-v2.0", True),
        ("nq", "hub", "mteb/nq", "test, less 50% (seed 42) carved out as validation", False),
        ("scifact", "offline", "scifact", "test", False),
    ],
)
def test_test_data_follows_the_task_definition(task, source, dataset, split, stand_in):
    data = describe_test_data(task, source)
    assert (data["dataset"], data["split"], bool(data["stand_in"])) == (dataset, split, stand_in)


def test_results_card(tmp_path):
    ckpts = {n: make_checkpoint(tmp_path / "models" / n, n, **FIXTURES[n]) for n in ("610m-mlm40-42k", "610m-clm-42k")}
    report = write_report(tmp_path / "report", ckpts)
    card = build_results_card(report / "results", report / "summary.csv", repo_id="org/results", scale="toy")
    (tmp_path / "README.md").write_text(str(card))
    loaded = DatasetCard.load(tmp_path / "README.md")
    assert [c["config_name"] for c in loaded.data.configs] == ["runs", "predictions", "summary"]
    assert loaded.data.license == "cc-by-sa-4.0"
    assert "16 runs\n(2 diverged) of 2 models on 4 tasks" in loaded.text
    low, high = confidence_interval([score(1, 3, 0), score(1, 3, 1)])
    assert f"| toy-610m-clm-42k | IR | scifact | ndcg@10 | 0.6900 | [{low:.4f}, {high:.4f}] |" in loaded.text
    assert "| sst2 | offline | `nyu-mll/glue` (sst2), validation (offline bundle copy) |" in loaded.text
    assert 'load_dataset("org/results", "predictions", split="train")' in loaded.text


def test_cards_say_how_many_test_instances_were_scored(tmp_path):
    """A grid capped by --max_eval: the model-index and both cards give the count scored and say it is a seeded
    random subset; an uncapped one says all N."""
    name = "610m-mlm40-42k"
    ckpt = make_checkpoint(tmp_path / "models" / name, name, **FIXTURES[name])
    report = write_report(tmp_path / "report", {name: ckpt})
    write_results(report / "results", {name: ckpt}, capped=True)
    card = build_model_card(ckpt, report / "summary.csv", results_dir=report / "results")
    sst2 = card.data.eval_results[-1]
    assert sst2.dataset_name == "sst2 (a seeded random 2 of that split (--max_eval 2))"
    assert sst2.metric_args["n_test_instances"] == 2 and "scored: a seeded random 2 of that split" in card.text
    results = build_results_card(report / "results", report / "summary.csv", scale="toy").text
    assert (
        "| squad | offline | `rajpurkar/squad`, validation (offline bundle copy) | a seeded random 2 of that "
        "split (--max_eval 2) |" in results
    )
    write_results(report / "results", {name: ckpt})
    assert "| all 2 instances |" in build_results_card(report / "results", report / "summary.csv").text


def test_a_score_is_published_with_its_budget_and_baseline_and_never_below_it(tmp_path):
    """Issue 54: a CPT result's card and model-index published an SST-2 accuracy of 0.51 from a 10-step, 200-example
    fine-tune, with neither that budget nor the trivial baseline (0.57). The card's table gives both beside every
    score and marks a mean not above its baseline; model-index leaves such a score out and gives the budget and
    baseline of those it publishes; a summary.csv whose baseline the results do not give is refused."""
    name = "610m-mlm40-42k"
    ckpt = make_checkpoint(tmp_path / "models" / name, name, **FIXTURES[name])
    cut = {"max_steps": 10, "max_train": 200, "schedule": {"max_steps": 10, "epochs": None}, "train_examples": 200}
    scores = {("sst2", 0): 0.51, ("sst2", 1): 0.51}
    results = write_results(tmp_path / "results", {name: ckpt}, scores=scores, baseline=0.57, budget=cut)
    for task, *_ in TASKS[1:]:  # the other tasks above a lower baseline
        write_results(tmp_path / "results", {name: ckpt}, tasks=[t for t in TASKS if t[0] == task], budget=cut)
    summary = write_summary(tmp_path / "summary.csv", results)
    card = build_model_card(ckpt, summary, results_dir=results)
    budget = "10 steps x batch 32 on 200 training examples (set by --max_steps 10, --max_train 200, not the task's own"
    assert f"| accuracy | 0.5100 (not above the trivial baseline) | [0.5100, 0.5100] | 0.5700 | {budget} budget) |" in (
        card.text
    )
    published = {r.metric_type: r for r in card.data.eval_results}
    assert "accuracy" not in published and set(published) == {"sentence_macro_f1", "entity_f1", "f1", "ndcg@10"}
    assert published["f1"].metric_args | {"ci95_low": 0, "ci95_high": 0} == {
        "ci95_low": 0,
        "ci95_high": 0,
        "n_seeds": 1,  # seed 1 diverged on squad
        "learning_rate": 5e-05,
        "n_test_instances": 2,
        "trivial_baseline": 0.5,
        "finetune_steps": 10,
        "finetune_batch_size": 32,
        "train_examples": 200,
        "reduced_budget": True,
    }
    edited = write_summary(tmp_path / "edited.csv", results, edits={"sst2": {"trivial_baseline": "0.4"}})
    with pytest.raises(ValueError, match="trivial_baseline 0.4 \\(the results give 0.5700\\)"):
        build_model_card(ckpt, edited, results_dir=results)


def test_cli_writes_a_loadable_card(tmp_path):
    ckpt, summary, results = evaluated(tmp_path, "610m-mlm40-42k")
    main([str(ckpt), "--summary", str(summary), "--results", str(results), "--output", str(tmp_path / "README.md")])
    assert len(ModelCard.load(tmp_path / "README.md").data.eval_results) == 5


# ----- the CLI as a user meets it -----


@pytest.fixture
def generate(call_main):
    """`python -m model_cards.generate ARGS`, in this process."""
    return lambda *args: call_main(main, *args)


def test_cli_writes_into_the_checkpoint_and_never_over_a_file_it_did_not_write(tmp_path, generate):
    ckpt, summary, results = evaluated(tmp_path, "610m-mlm40-42k")
    project_readme = tmp_path / "README.md"
    project_readme.write_text("# my project\n")
    proc = generate(ckpt, "--summary", summary, "--results", results)  # the README's own command: no --output
    assert proc.returncode == 0, proc.stderr
    assert project_readme.read_text() == "# my project\n"
    assert ModelCard.load(ckpt / "README.md").data.model_name == "toy-610m-mlm40-42k"
    assert generate(ckpt).returncode == 0  # its own card: regenerated
    refused = generate(ckpt, "--output", project_readme)
    assert refused.returncode == 2 and "was not written by model_cards.generate; pass --force" in refused.stderr
    assert project_readme.read_text() == "# my project\n"
    assert generate(ckpt, "--output", project_readme, "--force").returncode == 0
    assert "610m-mlm40-42k" in project_readme.read_text()


@pytest.mark.parametrize("case", ["no_run_info", "bad_summary", "summary_without_results"])
def test_cli_bad_input_is_one_line(tmp_path, case, generate):
    ckpt = make_checkpoint(tmp_path / "c", "610m-mlm40-42k")
    args = [ckpt]
    if case == "no_run_info":
        (ckpt / "run_info.json").unlink()
    else:
        (tmp_path / "summary.csv").write_text("model,task\nx,y\n")
        args += ["--summary", tmp_path / "summary.csv"] + (["--results", tmp_path] if case == "bad_summary" else [])
    proc = generate(*args)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    expected = {
        "no_run_info": "run_info.json not found",
        "bad_summary": "lacks columns",
        "summary_without_results": "--summary and --results go together",
    }[case]
    assert expected in lines[-1]
    assert not (ckpt / "README.md").exists()


@pytest.mark.parametrize("objective", ["clm", "mlm"])
def test_card_of_a_natively_loadable_checkpoint_shows_plain_transformers(tmp_path, objective):
    """A checkpoint whose config.json names transformers' own EuroBERT (what the recipes save): the usage snippet is
    plain `AutoModel.from_pretrained(repo)`, no flag; a CLM one says how to get its causal attention back."""
    config = {
        "model_type": "eurobert",
        "auto_map": {"AutoConfig": "configuration_eurobert.EuroBertClmMlmConfig"},
        "is_causal": False,
    }
    if objective == "clm":
        config["pretraining_attention"] = "causal"
    ckpt = make_checkpoint(
        tmp_path / "run",
        f"610m-{objective if objective == 'clm' else 'mlm40'}-42k",
        objective=objective,
        mlm_probability=None if objective == "clm" else 0.4,
    )
    (ckpt / "config.json").write_text(json.dumps({**json.loads((ckpt / "config.json").read_text()), **config}))
    text = build_model_card(ckpt, repo_id="org/m").text  # the card's usage snippet, as text: nothing is loaded
    assert 'model = AutoModel.from_pretrained("org/m")\n' in text and "Plain transformers loads it" in text
    assert ("pretraining_attention" in text) == (objective == "clm")
    assert ("bidirectionally with or without `trust_remote_code=True`" in text) == (objective == "clm")  # issue 46


def test_a_toy_scale_checkpoint_card_names_its_own_step(tmp_path):
    """The name of a toy-scale intermediate checkpoint carries the paper's step (1,000); the run saved it at its own
    step (25 here): the card names both, never "saved at step 1,000" for a model that took 25 steps."""
    ckpt = make_checkpoint(
        tmp_path / "run" / "intermediate" / "step-25",
        "610m-clm-42k-1000",
        objective="clm",
        mlm_probability=None,
        steps=25,
    )
    text = build_model_card(ckpt, repo_id="org/610m-clm-42k", revision="step-25").text
    assert "intermediate checkpoint at the paper's step 1,000, saved at its own step 25 at this scale, of" in text
    assert "intermediate checkpoint at the paper's step 1,000 (its own step 25 at this scale) of the run" in text
    assert "saved at step 1,000" not in text


# ----- a newcomer's real model, end to end -----


@pytest.mark.slow  # ~10 s: convert, a 2-step CPT run, a 2-step fine-tuning run, the report and the card
def test_a_fetched_models_provenance_reaches_the_card_and_the_report_shows_its_run(tmp_path, data_dir):
    """Issue 54, the newcomer's path with a tiny Llama standing in for SmolLM2 (a folder `recipes.real_models` made,
    with its `real_model.json`): convert -> CPT -> fine-tuning -> report -> card. The card says the base was a 4-bit
    GGUF release, dequantised (convert carries the record, CPT writes it into run_info.json's `base_source`); the
    report gives the CPT result's parameters and step from its run_info.json (they were "?"); the card gives each
    score's budget and baseline and publishes in model-index only a score above its baseline."""
    from dataclasses import asdict

    from transformers import LlamaConfig, LlamaForCausalLM

    from analysis import report
    from evaluation import run
    from modeling_eurobert.convert import convert
    from recipes import cpt, real_models
    from tests.fixtures.tiny_models import build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer(data_dir, vocab_size=500)
    llama = dict(
        hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2
    )
    torch.manual_seed(0)
    LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(tokenizer),
            max_position_embeddings=128,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            tie_word_embeddings=True,
            **llama,
        )
    ).save_pretrained(tmp_path / "smollm2")
    tokenizer.save_pretrained(tmp_path / "smollm2")
    name = "smollm2-135m-instruct"
    record = {"name": name, **asdict(real_models.MODELS[name]), "versions": {}}  # as `real_models.fetch` writes it
    (tmp_path / "smollm2" / real_models.RECORD).write_text(json.dumps(record))

    converted = convert(str(tmp_path / "smollm2"), tmp_path / "smollm2-eurobert", mask_token="<mask>")
    assert json.loads((converted / real_models.RECORD).read_text()) == record
    flags = "--architecture null --switch_step null --intermediate_steps 1 --max_steps 2 --max_docs 50 --block_size 32"
    cpt.main(
        [
            "--config",
            "recipes/configs/debug.yaml",
            *flags.split(),
            *("--per_device_train_batch_size 2 --warmup_steps 1 --report_to none".split()),
            *("--model_name_or_path", str(converted), "--output_dir", str(tmp_path / "cpt")),
            *("--data_cache_dir", str(tmp_path / "cache")),
            *("--lr_scheduler_kwargs", '{"num_decay_steps": 1, "decay_type": "linear"}'),
        ]
    )
    info = run_folders.read_run_info(tmp_path / "cpt")
    assert info["base_source"] == record and info["name"] == "cpt"
    grid = (
        "--tasks sst2 --lrs 1e-3 --seeds 0,1 --max_steps 2 --max_train 16 --max_eval 8 --max_length 32 --batch_size 8"
    )
    run.main(
        [
            *grid.split(),
            *("--precision", "fp32", "--model", str(tmp_path / "cpt")),
            *("--data_dir", str(data_dir), "--output", str(tmp_path / "results")),
        ]
    )
    report.main([str(tmp_path / "results"), "--output", str(tmp_path / "report")])
    params = f"{info['parameters']['total'] / 1e6:.3g}M"
    assert f"| cpt | {params} | 2 | " in (tmp_path / "report" / "summary.md").read_text()

    card = build_model_card(tmp_path / "cpt", tmp_path / "report" / "summary.csv", results_dir=tmp_path / "results")
    assert "the base was a 4-bit GGUF release, dequantised" in card.text
    assert "| base weights | HuggingFaceTB/SmolLM2-135M-Instruct, GGUF Q4_1 dequantised to float32" in card.text
    (row,) = [r for r in csv.DictReader(open(tmp_path / "report" / "summary.csv")) if r["task"] == "sst2"]
    assert (
        f"| {table_cell(float(row['trivial_baseline']), '.4f')} | 2 steps x batch 8 on 16 training examples (set by "
        "--max_steps 2, --max_train 16, not the task's own budget) |"
    ) in card.text
    learned = float(row["mean"]) > float(row["trivial_baseline"])
    assert ("(not above the trivial baseline)" in card.text) != learned
    assert [r.metric_type for r in card.data.eval_results or []] == (["accuracy"] if learned else [])
