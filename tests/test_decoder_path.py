"""The paper's recommendation end to end, as a newcomer walks it: a decoder you have -> `modeling_eurobert.convert`
-> LoRA CPT (`recipes.cpt --config recipes/configs/cpt-debug.yaml --lora true`) -> `evaluation.run` (plain and
`--peft lora`) -> `analysis.report` -> `model_cards.generate` -> `model_cards.push --dry_run`, for a tiny Mistral (no
pad token), a tiny Qwen3 (pad = eos) and a tiny Llama-3-style model converted without `--mask_token/--pad_token`.
The attention each step records is checked, and every folder the path writes loads in a fresh process with stdin
closed: no trust_remote_code prompt, no "model of type ``" warning."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
from transformers import AutoModelForSequenceClassification, PreTrainedTokenizerFast

from analysis import report
from evaluation import run
from evaluation.attention import probe, resolved_attention
from model_cards import generate, push
from modeling_eurobert.convert import convert
from recipes import cpt
from tests.fixtures.tiny_models import bundle_sentences
from tests.test_convert import save_llama

pytestmark = pytest.mark.usefixtures("one_thread")

# family -> (special tokens, bos, eos, pad, config overrides): the real tokenizers' conventions, in miniature
DECODERS = {
    "mistral": (["<unk>", "<s>", "</s>"], "<s>", "</s>", None, {}),
    "qwen3": (
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        None,
        "<|endoftext|>",
        "<|endoftext|>",
        {"head_dim": 16},
    ),
    "llama": (
        ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|finetune_right_pad_id|>"],
        "<|begin_of_text|>",
        "<|end_of_text|>",
        None,
        {
            "rope_parameters": {
                "rope_type": "llama3",
                "rope_theta": 500000.0,
                "factor": 32.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 64,
            },
            "tie_word_embeddings": True,
        },
    ),
}
LOADER = """
import sys
from transformers import AutoConfig, AutoModel, AutoTokenizer
from transformers.models.auto.configuration_auto import CONFIG_MAPPING
import json, pathlib
for path in sys.argv[1:]:
    known = json.loads((pathlib.Path(path) / "config.json").read_text())["model_type"] in CONFIG_MAPPING
    flag = {} if known else {"trust_remote_code": True}  # as the card's usage snippet says
    tokenizer = AutoTokenizer.from_pretrained(path, **flag)
    model = AutoModel.from_pretrained(path, **flag)
    print(path, type(model).__name__, tokenizer.mask_token)
"""


def decoder_tokenizer(texts, specials, bos, eos, pad) -> PreTrainedTokenizerFast:
    """A byte-level BPE with the family's special tokens; bos (when the family has one) added before every text."""
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.train_from_iterator(
        texts,
        trainers.BpeTrainer(
            vocab_size=400,
            special_tokens=specials,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    if bos:
        backend.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A $B", special_tokens=[(bos, backend.token_to_id(bos))]
        )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=bos,
        eos_token=eos,
        pad_token=pad,
        unk_token=specials[0] if specials[0] == "<unk>" else None,
    )


def config_of(path) -> dict:
    return json.loads((Path(path) / "config.json").read_text())


@pytest.mark.slow  # ~40 s: three decoders, each converted, LoRA-CPT'd, fine-tuned twice, reported, carded, pushed
@pytest.mark.parametrize("family", list(DECODERS))
def test_a_decoder_walks_the_whole_path_with_its_recorded_attention(family, tmp_path, data_dir, tmp_path_factory):
    specials, bos, eos, pad, overrides = DECODERS[family]
    tokenizer = decoder_tokenizer(bundle_sentences(data_dir, per_source=50), specials, bos, eos, pad)
    ids = {
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }
    save_llama(tmp_path / family, tokenizer, family=family, **ids, **overrides)

    converted = convert(str(tmp_path / family), tmp_path / f"{family}-eurobert")  # default <|mask|> and <|pad|>
    assert config_of(converted)["is_causal"] is True or config_of(converted).get("pretraining_attention") == "causal"
    assert resolved_attention(converted, "checkpoint") == "causal"
    # the added <|mask|> and <|pad|> rows are identical (means): a probe on them would call this model causal
    model = AutoModelForSequenceClassification.from_pretrained(
        converted, num_labels=2, is_causal=False, trust_remote_code=True
    )
    assert probe(model) == "bidirectional"

    out = tmp_path / f"{family}-cpt"
    cpt.main(
        [
            "--config",
            "recipes/configs/cpt-debug.yaml",
            "--model_name_or_path",
            str(converted),
            "--lora",
            "true",
            "--max_steps",
            "2",
            "--data_cache_dir",
            str(tmp_path_factory.getbasetemp() / "pretrain-cache"),
            "--output_dir",
            str(out),
        ]
    )
    settings = json.loads((out / "run_info.json").read_text())["run_config"]["run_settings"]
    assert config_of(out)["is_causal"] is False and settings["lora"]
    assert resolved_attention(out, "checkpoint") == "bidirectional"

    results = tmp_path / "results"
    grid = [
        "--model",
        str(out),
        "--tasks",
        "sst2",
        "--lrs",
        "1e-3",
        "--seeds",
        "0",
        "--max_steps",
        "2",
        "--max_train",
        "16",
        "--max_eval",
        "8",
        "--max_length",
        "32",
        "--batch_size",
        "8",
        "--precision",
        "fp32",
        "--data_dir",
        str(data_dir),
    ]
    run.main([*grid, "--output", str(results), "--save_models", "sst2:0.001:0"])
    run.main([*grid, "--output", str(tmp_path / "results-lora"), "--peft", "lora"])
    for folder in (results, tmp_path / "results-lora"):
        record = json.loads((folder / out.name / "sst2" / "lr0.001-seed0.json").read_text())
        assert record["status"] == "ok" and record["config"]["attention"] == "bidirectional"
    saved = results / out.name / "sst2" / "lr0.001-seed0.model"
    assert config_of(saved)["is_causal"] is False

    report.main([str(results), "--output", str(tmp_path / "report")])
    summary = (tmp_path / "report" / "summary.csv").read_text()
    assert out.name in summary
    card = generate.build_model_card(out, tmp_path / "report" / "summary.csv", results_dir=results).content
    assert "is_causal" not in card  # recorded bidirectional: nothing to override
    flag = "" if config_of(out)["model_type"] == "eurobert" else ", trust_remote_code=True"  # qwen3: qk_norm
    assert f'AutoTokenizer.from_pretrained("<your-org>/{out.name}"{flag})' in card
    push.main(
        [
            str(out),
            "--repo_id",
            f"my-org/{out.name}",
            "--results",
            str(tmp_path / "report"),
            "--results_dir",
            str(results),
            "--dry_run",
            str(tmp_path / "dry"),
        ]
    )
    staged = tmp_path / "dry" / "models" / "my-org" / out.name / "main"
    assert config_of(staged)["is_causal"] is False

    loaded = subprocess.run(
        [sys.executable, "-c", LOADER, str(converted), str(out), str(saved)],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert "Do you wish" not in loaded.stderr and "model of type" not in loaded.stderr, loaded.stderr[-2000:]
    assert len(loaded.stdout.splitlines()) == 3 and torch.__version__
