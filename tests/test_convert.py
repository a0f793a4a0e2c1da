"""`modeling_eurobert.convert`: a tiny random LlamaForCausalLM and tokenizer, built here, converted and compared."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
)

from modeling_eurobert import EuroBertClmMlmForCausalLM, EuroBertClmMlmForMaskedLM
from modeling_eurobert.convert import ConversionError, convert, main

ROOT = Path(__file__).resolve().parents[1]
WORDS = "the cat sat on a mat and dog ran to house big small red blue".split()
LLAMA3_ROPE = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 64}


def build_tokenizer(extra_tokens=()) -> PreTrainedTokenizerFast:
    specials = ["<unk>", "<s>", "</s>", *extra_tokens]
    vocab = {token: i for i, token in enumerate(specials + WORDS)}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", bos_token="<s>", eos_token="</s>")


def save_llama(path, tokenizer, vocab_size=None, **config_overrides):
    """Save a tiny random LlamaForCausalLM (4 heads / 2 kv heads) and its tokenizer at `path`."""
    config = LlamaConfig(
        vocab_size=vocab_size or len(tokenizer), hidden_size=32, intermediate_size=37, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128, bos_token_id=1, eos_token_id=2,
        **config_overrides,
    )
    torch.manual_seed(0)
    llama = LlamaForCausalLM(config).eval()
    llama.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return llama


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("llama")
    save_llama(path, build_tokenizer())
    return path


def edit_config(path, **changes):
    config = json.loads((path / "config.json").read_text())
    config.update(changes)
    (path / "config.json").write_text(json.dumps(config))


def random_batch(vocab_size):
    torch.manual_seed(1)
    input_ids = torch.randint(0, vocab_size, (3, 9))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 6:] = 0  # right padding: every query still sees its own prefix
    attention_mask[2, 3:] = 0
    return input_ids, attention_mask


@pytest.mark.parametrize(
    "overrides",
    [{}, {"rope_parameters": LLAMA3_ROPE, "tie_word_embeddings": True},
     {"rope_parameters": {"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0}}],
    ids=["default-rope", "llama3-rope-tied", "linear-rope"],
)
def test_converted_clm_matches_llama(tmp_path, overrides):
    llama = save_llama(tmp_path / "llama", build_tokenizer(), **overrides)
    out = convert(str(tmp_path / "llama"), tmp_path / "out")

    ours = EuroBertClmMlmForCausalLM.from_pretrained(out).eval()
    assert isinstance(ours, EuroBertClmMlmForCausalLM) and ours.config.is_causal
    input_ids, attention_mask = random_batch(llama.config.vocab_size)
    with torch.no_grad():
        expected = llama(input_ids, attention_mask=attention_mask).logits
        actual = ours(input_ids, attention_mask=attention_mask).logits
    # The converted vocabulary has two more rows (mask, pad); the source rows must match exactly.
    assert actual.shape[-1] == expected.shape[-1] + 2
    assert (actual[..., : expected.shape[-1]] - expected).abs().max() <= 1e-5


def test_mask_and_pad_tokens_are_added_with_mean_rows(llama_dir, tmp_path):
    source = LlamaForCausalLM.from_pretrained(llama_dir)
    out = convert(str(llama_dir), tmp_path / "out")
    tokenizer, model = AutoTokenizer.from_pretrained(out), EuroBertClmMlmForCausalLM.from_pretrained(out)

    assert tokenizer.mask_token == "<|mask|>" and tokenizer.pad_token == "<|pad|>"
    assert model.config.mask_token_id == tokenizer.mask_token_id == source.config.vocab_size
    assert model.config.pad_token_id == tokenizer.pad_token_id
    assert tokenizer.pad_token_id not in (tokenizer.eos_token_id, model.config.eos_token_id)
    assert model.config.vocab_size == len(tokenizer) == source.config.vocab_size + 2
    new_ids = [tokenizer.mask_token_id, tokenizer.pad_token_id]
    for ours, theirs in [(model.model.embed_tokens, source.model.embed_tokens), (model.lm_head, source.lm_head)]:
        torch.testing.assert_close(ours.weight[new_ids], theirs.weight.mean(0).expand(2, -1))
    assert tokenizer("the cat <|mask|>")["input_ids"][-1] == tokenizer.mask_token_id
    # The saved tokenizer knows the model's context, and the mask eats the space before it (RoBERTa's <mask>).
    assert tokenizer.model_max_length == source.config.max_position_embeddings == 128
    assert tokenizer.added_tokens_decoder[tokenizer.mask_token_id].lstrip
    saved = json.loads((out / "tokenizer_config.json").read_text())
    assert saved["model_max_length"] == 128 and "local_files_only" not in saved and "is_local" not in saved


def test_tied_embeddings_are_untied(tmp_path):
    save_llama(tmp_path / "llama", build_tokenizer(), tie_word_embeddings=True)
    out = convert(str(tmp_path / "llama"), tmp_path / "out", dtype="bfloat16")
    model = EuroBertClmMlmForCausalLM.from_pretrained(out)
    assert model.config.tie_word_embeddings is False and model.lm_head.weight.dtype == torch.bfloat16
    embed, head = model.model.embed_tokens.weight, model.lm_head.weight
    assert embed.data_ptr() != head.data_ptr()
    torch.testing.assert_close(head, embed)  # a copy, trained separately from here on


def test_existing_tokens_add_nothing(tmp_path):
    """A source that already has the mask token and a non-eos pad keeps its vocabulary and ids."""
    tokenizer = build_tokenizer(extra_tokens=["<|mask|>", "<pad>"])
    tokenizer.add_special_tokens({"pad_token": "<pad>"})
    save_llama(tmp_path / "llama", tokenizer, vocab_size=len(tokenizer) + 5)  # padded vocab, as many decoders
    out = convert(str(tmp_path / "llama"), tmp_path / "out")
    model = EuroBertClmMlmForCausalLM.from_pretrained(out)
    assert model.config.vocab_size == len(tokenizer) + 5
    assert (model.config.mask_token_id, model.config.pad_token_id) == (3, 4)
    mask = AutoTokenizer.from_pretrained(out).added_tokens_decoder[3]
    assert str(mask) == "<|mask|>" and mask.lstrip and not mask.rstrip  # an existing mask token gets the flag too


def test_mlm_class_loads_the_converted_checkpoint(llama_dir, tmp_path):
    out = convert(str(llama_dir), tmp_path / "out")
    mlm, info = EuroBertClmMlmForMaskedLM.from_pretrained(out, output_loading_info=True)
    assert type(mlm).__name__ == "EuroBertClmMlmForMaskedLM"
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    config = json.loads((out / "config.json").read_text())
    assert config["auto_map"]["AutoModelForMaskedLM"].endswith("EuroBertClmMlmForMaskedLM")
    assert (out / "modeling_eurobert.py").is_file()


REFUSALS = {
    "attention_bias": ({"attention_bias": True}, "attention_bias"),
    "mlp_bias": ({"mlp_bias": True}, "mlp_bias"),
    "sliding_window": ({"sliding_window": 4096}, "sliding-window"),
    "rope_yarn": ({"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0}}, "rope_type 'yarn'"),
    "legacy_rope_scaling": ({"rope_parameters": None, "rope_scaling": {"type": "dynamic", "factor": 2.0}},
                            "rope_type 'dynamic'"),
    "activation": ({"hidden_act": "gelu"}, "hidden_act"),
    "head_dim": ({"head_dim": 16}, "head_dim=16"),
    "model_type": ({"model_type": "mistral"}, "model_type='mistral'"),
    "architectures": ({"architectures": ["LlamaForSequenceClassification"]}, "LlamaForSequenceClassification"),
    "kv_heads": ({"num_key_value_heads": 3}, "invalid source config: .*num_key_value_heads"),
    "quantized": ({"quantization_config": {"quant_method": "gptq"}}, "quantization_config"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_incompatible_config_is_refused_and_nothing_written(llama_dir, tmp_path, case):
    changes, message = REFUSALS[case]
    source = shutil.copytree(llama_dir, tmp_path / "llama")
    edit_config(source, **changes)
    with pytest.raises(ConversionError, match=message):
        convert(str(source), tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["llama"]  # no output, no staging dir


@pytest.mark.parametrize(
    "remove, message",
    [("config.json", "missing config.json"), ("model.safetensors", "missing weights"),
     ("tokenizer*", "missing tokenizer")],
)
def test_missing_source_files_are_refused(llama_dir, tmp_path, remove, message):
    source = shutil.copytree(llama_dir, tmp_path / "llama")
    for path in source.glob(remove):
        path.unlink()
    with pytest.raises(ConversionError, match=message):
        convert(str(source), tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["llama"]


def test_cli_reports_one_line_error(tmp_path, llama_dir):
    (tmp_path / "out").mkdir()
    with pytest.raises(SystemExit, match="error: OUTPUT .* already exists"):
        main([str(llama_dir), str(tmp_path / "out")])
    with pytest.raises(SystemExit, match="neither a directory nor a Hub id"):
        main([str(tmp_path / "no" / "such" / "dir"), str(tmp_path / "out2")])


def test_hub_id_source_is_checked_before_weights_are_downloaded(llama_dir, tmp_path, monkeypatch):
    """Hub ids go through huggingface_hub's real client against the loopback Hub of tests/hub_server.py."""
    import huggingface_hub
    from hub_server import HubServer
    from huggingface_hub import HfApi

    token = "hf_loopbackSecretToken0123456789"
    hub = HubServer(token).start()
    try:
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)  # conftest switched it off
        api = HfApi(endpoint=hub.endpoint, token=token)
        mistral = shutil.copytree(llama_dir, tmp_path / "mistral")
        edit_config(mistral, model_type="mistral", architectures=["MistralForCausalLM"])
        for repo_id, folder in [("org/tiny-llama", llama_dir), ("org/tiny-mistral", mistral)]:
            api.create_repo(repo_id)
            api.upload_folder(repo_id=repo_id, folder_path=folder)
        script = (
            "import sys\nfrom modeling_eurobert.convert import ConversionError, convert\n"
            "convert('org/tiny-llama', sys.argv[1])\n"
            "try:\n    convert('org/tiny-mistral', sys.argv[2])\nexcept ConversionError as error:\n    print(error)\n"
        )
        env = {**os.environ, "HF_ENDPOINT": hub.endpoint, "HF_HUB_OFFLINE": "0", "HF_TOKEN": token,
               "HF_HOME": str(tmp_path / "hf-home")}
        result = subprocess.run([sys.executable, "-c", script, str(tmp_path / "out"), str(tmp_path / "out2")],
                                cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr[-2000:]
        assert "model_type='mistral'" in result.stdout and not (tmp_path / "out2").exists()
        fetched = [path for method, path in hub.requests if method == "GET" and "/resolve/" in path]
        assert any("tiny-llama" in path and path.endswith("model.safetensors") for path in fetched)
        assert not any("tiny-mistral" in path and path.endswith(".safetensors") for path in fetched)
    finally:
        hub.stop()
    assert EuroBertClmMlmForCausalLM.from_pretrained(tmp_path / "out").config.is_causal
