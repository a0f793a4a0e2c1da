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
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)

from modeling_eurobert import EuroBertClmMlmForCausalLM, EuroBertClmMlmForMaskedLM
from modeling_eurobert import export_native as export_native_cli
from modeling_eurobert.convert import ConversionError, convert, main
from tests.fixtures.file_modes import not_following_umask

ROOT = Path(__file__).resolve().parents[1]
FAMILY_CLASSES = {
    "llama": (LlamaConfig, LlamaForCausalLM),
    "mistral": (MistralConfig, MistralForCausalLM),
    "qwen2": (Qwen2Config, Qwen2ForCausalLM),
    "qwen3": (Qwen3Config, Qwen3ForCausalLM),
}
WORDS = "the cat sat on a mat and dog ran to house big small red blue".split()
LLAMA3_ROPE = {
    "rope_type": "llama3",
    "rope_theta": 500000.0,
    "factor": 32.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 64,
}


def build_tokenizer(extra_tokens=()) -> PreTrainedTokenizerFast:
    specials = ["<unk>", "<s>", "</s>", *extra_tokens]
    vocab = {token: i for i, token in enumerate(specials + WORDS)}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", bos_token="<s>", eos_token="</s>")


def save_llama(path, tokenizer, vocab_size=None, family="llama", **config_overrides):
    """Save a tiny random decoder of `family` (4 heads / 2 kv heads) and its tokenizer at `path`."""
    config_class, model_class = FAMILY_CLASSES[family]
    fields = dict(
        vocab_size=vocab_size or len(tokenizer),
        hidden_size=32,
        intermediate_size=37,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        bos_token_id=1,
        eos_token_id=2,
    )
    config = config_class(**(fields | config_overrides))
    torch.manual_seed(0)
    llama = model_class(config).eval()
    with torch.no_grad():  # biases and q/k norms start at 0 and 1: make them random so that a dropped one shows
        for name, parameter in llama.named_parameters():
            if name.endswith("bias") or "_norm" in name:
                parameter.normal_(1.0 if "_norm" in name else 0.0, 0.1)
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
    [
        {},
        {"rope_parameters": LLAMA3_ROPE, "tie_word_embeddings": True},
        {"rope_parameters": {"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0}},
    ],
    ids=["default-rope", "llama3-rope-tied", "linear-rope"],
)
def test_converted_clm_matches_llama(tmp_path, overrides):
    llama = save_llama(tmp_path / "llama", build_tokenizer(), **overrides)
    out = convert(str(tmp_path / "llama"), tmp_path / "out")
    assert not_following_umask(out) == []  # R4: the weights follow the umask (were 0600)

    ours = EuroBertClmMlmForCausalLM.from_pretrained(out).eval()
    assert isinstance(ours, EuroBertClmMlmForCausalLM) and ours.config.is_causal
    input_ids, attention_mask = random_batch(llama.config.vocab_size)
    with torch.no_grad():
        expected = llama(input_ids, attention_mask=attention_mask).logits
        actual = ours(input_ids, attention_mask=attention_mask).logits
    # The converted vocabulary has two more rows (mask, pad); the source rows must match exactly.
    assert actual.shape[-1] == expected.shape[-1] + 2
    assert (actual[..., : expected.shape[-1]] - expected).abs().max() <= 1e-5


LINEAR_ROPE = {"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0}
# family -> (source config overrides, the switches the converted config must have, native export error or None).
# Each has something Llama lacks: biases, an explicit head_dim (heads * head_dim != hidden_size), a sliding window
# that never binds within the positions, tied embeddings, RoPE scaling.
FAMILIES = {
    "llama-biases": (
        "llama",
        {"attention_bias": True, "mlp_bias": True, "rope_parameters": LLAMA3_ROPE},
        {"attention_bias": True, "mlp_bias": True},
        "mlp_bias=true",
    ),
    "llama-attention-bias": ("llama", {"attention_bias": True}, {"attention_bias": True, "mlp_bias": False}, None),
    "mistral": (
        "mistral",
        {"head_dim": 16, "sliding_window": 128, "rope_parameters": LINEAR_ROPE},
        {"head_dim": 16},
        None,
    ),
    "qwen2": (
        "qwen2",
        {"tie_word_embeddings": True, "rope_parameters": LLAMA3_ROPE},
        {"qkv_bias": True, "attention_bias": False},
        "qkv_bias=true",
    ),
    "qwen3": (
        "qwen3",
        {"head_dim": 16, "tie_word_embeddings": True, "rope_parameters": LINEAR_ROPE},
        {"qk_norm": True, "head_dim": 16},
        "qk_norm=true",
    ),
}


def long_padded_batch(vocab_size):
    """80 positions (past llama3's original_max_position_embeddings=64), right padding in two rows."""
    torch.manual_seed(1)
    input_ids = torch.randint(0, vocab_size, (3, 80))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 70:] = 0
    attention_mask[2, 20:] = 0
    return input_ids, attention_mask


@pytest.mark.parametrize("case", list(FAMILIES))
def test_decoder_families_convert_exactly(tmp_path, case):
    family, overrides, switches, export_error = FAMILIES[case]
    source = save_llama(tmp_path / "source", build_tokenizer(), family=family, **overrides)
    out = convert(str(tmp_path / "source"), tmp_path / "out")
    ours = EuroBertClmMlmForCausalLM.from_pretrained(out).eval()
    assert {key: getattr(ours.config, key) for key in switches} == switches
    input_ids, attention_mask = long_padded_batch(source.config.vocab_size)
    with torch.no_grad():
        expected = source(input_ids, attention_mask=attention_mask).logits
        actual = ours(input_ids, attention_mask=attention_mask).logits[..., : expected.shape[-1]]
    keep = attention_mask.bool()
    assert (actual - expected)[keep].abs().max() <= 1e-5

    if family in ("qwen2", "qwen3"):  # issue 46 item 13: plain transformers holds it as its own Qwen, identically
        assert json.loads((out / "config.json").read_text())["model_type"] == family
        plain = AutoModelForCausalLM.from_pretrained(out).eval()  # no trust_remote_code
        assert type(plain) is type(source)
        with torch.no_grad():
            hidden = [m.model(input_ids, attention_mask=attention_mask).last_hidden_state for m in (plain, ours)]
            logits = plain(input_ids, attention_mask=attention_mask).logits[..., : expected.shape[-1]]
        assert torch.equal(hidden[0][keep], hidden[1][keep]) and torch.equal(logits[keep], actual[keep])
    if export_error:  # what native EuroBERT cannot hold is refused in one line, nothing written
        with pytest.raises(SystemExit, match=f"^error: {export_error} .* trust_remote_code$"):
            export_native_cli.main([str(out), str(tmp_path / "native"), "--bidirectional"])
        assert not (tmp_path / "native").exists()
        return
    export_native_cli.export_native(out, tmp_path / "native", bidirectional=True)
    native = AutoModelForMaskedLM.from_pretrained(tmp_path / "native").eval()  # no remote code
    assert type(native).__name__ == "EuroBertForMaskedLM"
    with torch.no_grad():
        bidirectional = ours(input_ids, attention_mask=attention_mask, is_causal=False).logits
        exported = native(input_ids, attention_mask=attention_mask).logits
    assert (exported - bidirectional)[keep].abs().max() <= 1e-5


def test_binding_sliding_window_is_refused_or_made_explicit(tmp_path):
    """A window shorter than the positions is refused; `--max_position_embeddings` at the window converts exactly."""
    source = save_llama(tmp_path / "mistral", build_tokenizer(), family="mistral", sliding_window=16)
    with pytest.raises(
        SystemExit,
        match="error: sliding_window=16 binds within max_position_embeddings=128 .*--max_position_embeddings 16",
    ):
        main([str(tmp_path / "mistral"), str(tmp_path / "refused")])
    assert not (tmp_path / "refused").exists()
    main([str(tmp_path / "mistral"), str(tmp_path / "out"), "--max_position_embeddings", "16"])
    ours = EuroBertClmMlmForCausalLM.from_pretrained(tmp_path / "out").eval()
    assert ours.config.max_position_embeddings == AutoTokenizer.from_pretrained(tmp_path / "out").model_max_length == 16
    input_ids = long_padded_batch(source.config.vocab_size)[0][:, :16]
    with torch.no_grad():
        expected = source(input_ids).logits
        assert (ours(input_ids).logits[..., : expected.shape[-1]] - expected).abs().max() <= 1e-5
    with pytest.raises(SystemExit, match="error: --max_position_embeddings 200 must be in"):
        main([str(tmp_path / "mistral"), str(tmp_path / "refused"), "--max_position_embeddings", "200"])


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


NOISE = """
import sys, warnings
from transformers import AutoModel
from core import lora
from modeling_eurobert import EuroBertClmMlmForMaskedLM
from modeling_eurobert.convert import main
main([sys.argv[1], sys.argv[2]])
print("-- loads", file=sys.stderr)
AutoModel.from_pretrained(sys.argv[2], trust_remote_code=True)
warnings.simplefilter("always")
lora.wrap(EuroBertClmMlmForMaskedLM.from_pretrained(sys.argv[2]), rank=4, alpha=8)
"""


def test_the_noise_the_project_handles_is_not_printed(tmp_path):
    """Issue 46 item 11, as a user's shell shows it: convert printed transformers' LOAD REPORT (a tied source's
    lm_head.weight "MISSING ... newly initialized") before its own line on untying; the remote-code backbone of an
    LM checkpoint reported "lm_head.weight UNEXPECTED"; LoRA wrapping warned that `is_gradient_checkpointing` is
    deprecated."""
    save_llama(tmp_path / "llama", build_tokenizer(), tie_word_embeddings=True)
    done = subprocess.run(
        [sys.executable, "-c", NOISE, str(tmp_path / "llama"), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    converting, loading = done.stderr.split("-- loads")
    assert "LOAD REPORT" not in converting and "MISSING" not in converting, converting
    assert "lm_head.weight set to a copy of embed_tokens (untied)" in converting  # one line of its own instead
    assert "UNEXPECTED" not in loading and "is_gradient_checkpointing" not in loading, loading


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


@pytest.mark.parametrize("flag", ["mask_token", "pad_token"])
def test_an_ordinary_word_is_refused_as_mask_or_pad_token(llama_dir, tmp_path, flag):
    with pytest.raises(ConversionError, match=f"--{flag} 'the' is an ordinary token"):
        convert(str(llama_dir), tmp_path / "out", **{flag: "the"})
    assert not (tmp_path / "out").exists()


def test_mlm_class_loads_the_converted_checkpoint(llama_dir, tmp_path):
    out = convert(str(llama_dir), tmp_path / "out")
    mlm, info = EuroBertClmMlmForMaskedLM.from_pretrained(out, output_loading_info=True)
    assert type(mlm).__name__ == "EuroBertClmMlmForMaskedLM"
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    config = json.loads((out / "config.json").read_text())
    assert config["auto_map"]["AutoModelForMaskedLM"].endswith("EuroBertClmMlmForMaskedLM")
    assert (out / "modeling_eurobert.py").is_file()


REFUSALS = {
    "rope_yarn": ({"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0}}, "rope_type 'yarn'"),
    "legacy_rope_scaling": (
        {"rope_parameters": None, "rope_scaling": {"type": "dynamic", "factor": 2.0}},
        "rope_type 'dynamic'",
    ),
    "activation": ({"hidden_act": "gelu"}, "hidden_act"),
    "gemma": (  # issue 54: the refusal names what the architecture lacks, as docs/models.md says
        {"model_type": "gemma2"},
        r"model_type='gemma2'; supported: llama, mistral, qwen2, qwen3 .*; gemma2 has an RMSNorm scaled by 1 \+ its "
        r"weight, an embedding scaled by sqrt\(hidden_size\), attention and final-logit soft-capping, local",
    ),
    "architectures": ({"architectures": ["LlamaForSequenceClassification"]}, "LlamaForSequenceClassification"),
    "qwen2_window": (
        {
            "model_type": "qwen2",
            "architectures": ["Qwen2ForCausalLM"],
            "use_sliding_window": True,
            "sliding_window": 32,
            "max_window_layers": 1,
        },
        "sliding_window=32 binds",
    ),
    "kv_heads": ({"num_key_value_heads": 3}, "invalid source config: .*num_key_value_heads"),
    "quantized": ({"quantization_config": {"quant_method": "gptq"}}, "quantization_config"),
    # issue 43: a config that disagrees with its weights was transformers' traceback ("ignore_mismatched_sizes")
    "disagrees": (
        {"intermediate_size": 40},
        r"mismatched \['model.layers.0.mlp.down_proj.weight: \(32, 37\) in the "
        r"weights, \(32, 40\) by config.json', .*'4 more'\]: its config.json disagrees with its weights",
    ),
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
    [
        ("config.json", "missing config.json"),
        ("model.safetensors", "missing weights"),
        ("tokenizer*", "missing tokenizer"),
    ],
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
    with pytest.raises(SystemExit, match="dir: no such directory"):
        main([str(tmp_path / "no" / "such" / "dir"), str(tmp_path / "out2")])


@pytest.mark.slow  # the process boundary: the Hub client configured from the environment (HF_ENDPOINT, HF_TOKEN)
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
        gemma = shutil.copytree(llama_dir, tmp_path / "gemma")
        edit_config(gemma, model_type="gemma2", architectures=["Gemma2ForCausalLM"])
        for repo_id, folder in [("org/tiny-llama", llama_dir), ("org/tiny-gemma", gemma)]:
            api.create_repo(repo_id)
            api.upload_folder(repo_id=repo_id, folder_path=folder)
        script = (
            "import sys\nfrom modeling_eurobert.convert import ConversionError, convert\n"
            "convert('org/tiny-llama', sys.argv[1])\n"
            "try:\n    convert('org/tiny-gemma', sys.argv[2])\nexcept ConversionError as error:\n    print(error)\n"
        )
        env = {
            **os.environ,
            "HF_ENDPOINT": hub.endpoint,
            "HF_HUB_OFFLINE": "0",
            "HF_TOKEN": token,
            "HF_HOME": str(tmp_path / "hf-home"),
        }
        result = subprocess.run(
            [sys.executable, "-c", script, str(tmp_path / "out"), str(tmp_path / "out2")],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr[-2000:]
        assert "model_type='gemma2'" in result.stdout and not (tmp_path / "out2").exists()
        fetched = [path for method, path in hub.requests if method == "GET" and "/resolve/" in path]
        assert any("tiny-llama" in path and path.endswith("model.safetensors") for path in fetched)
        assert not any("tiny-gemma" in path and path.endswith(".safetensors") for path in fetched)
    finally:
        hub.stop()
    assert EuroBertClmMlmForCausalLM.from_pretrained(tmp_path / "out").config.is_causal


def test_converted_qwen_decoders_load_as_the_models_page_says(tmp_path):
    """docs/models.md, "Which loads need trust_remote_code": a converted Qwen2 or Qwen3 decoder is written as
    transformers' own `qwen2` / `qwen3` (issue 46 item 13: it kept this project's model_type), so in a fresh process
    with stdin closed plain `AutoTokenizer` and `AutoModel` load it with no flag and no prompt, as transformers' Qwen
    classes, with the hidden states this project's classes give through `trust_remote_code=True`. A model made from
    it that those classes cannot hold (a bidirectional MLM head, as CPT saves) keeps this project's model_type:
    `PreTrainedTokenizerFast` needs no flag, and `AutoModel` without the flag stops asking for it (after
    transformers' own [y/N] question, which closed stdin answers no)."""
    paths = []
    for family, overrides in [("qwen2", {}), ("qwen3", {"head_dim": 16})]:
        save_llama(tmp_path / family, build_tokenizer(), family=family, **overrides)
        paths.append(convert(str(tmp_path / family), tmp_path / f"{family}-eurobert"))
        assert json.loads((paths[-1] / "config.json").read_text())["model_type"] == family
    mlm = tmp_path / "qwen3-mlm"
    EuroBertClmMlmForMaskedLM.from_pretrained(paths[-1]).save_pretrained(mlm)
    shutil.copy(paths[-1] / "tokenizer.json", mlm)
    shutil.copy(paths[-1] / "tokenizer_config.json", mlm)
    assert not export_native_cli.make_plain_loadable(mlm)  # bidirectional: transformers' Qwen3 would attend causally
    script = (
        "import sys, torch\nfrom transformers import AutoModel, AutoTokenizer, PreTrainedTokenizerFast\n"
        "ids = torch.tensor([[5, 6, 7, 8]])\n"
        "for path in sys.argv[1:3]:\n"
        "    AutoTokenizer.from_pretrained(path)\n"
        "    plain = AutoModel.from_pretrained(path).eval()\n"
        "    ours = AutoModel.from_pretrained(path, trust_remote_code=True).eval()\n"
        "    with torch.no_grad():\n"
        "        same = torch.equal(plain(ids).last_hidden_state, ours(ids).last_hidden_state)\n"
        "    print(type(plain).__name__, type(ours).__name__, same, flush=True)\n"
        "print(PreTrainedTokenizerFast.from_pretrained(sys.argv[3]).mask_token, flush=True)\n"
        "try:\n    AutoModel.from_pretrained(sys.argv[3])\n"
        "except ValueError as error:\n    print('refused', 'trust_remote_code=True' in str(error))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, *map(str, paths), str(mlm)],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[:3] == ["Qwen2Model EuroBertClmMlmModel True", "Qwen3Model EuroBertClmMlmModel True", "<|mask|>"]
    assert "Do you wish" not in done.stderr and "model of type" not in done.stderr, done.stderr[-2000:]
    assert done.stdout.count("Do you wish to run the custom code? [y/N] refused True") == 1, done.stdout
    page = " ".join((ROOT / "docs" / "models.md").read_text().split())
    assert (
        "Which loads need `trust_remote_code=True`" in page and "`PreTrainedTokenizerFast.from_pretrained(dir)`" in page
    )


@pytest.mark.slow  # ~20 s: two CPT runs, two fine-tuning runs, one fresh process (the end-to-end check)
def test_converted_qwen2_and_qwen3_run_cpt_and_the_grid(tmp_path, data_dir, tmp_path_factory):
    """Converted tiny Qwen2- and Qwen3-style decoders: a 2-step CPT (`recipes.cpt`), then a 2-step fine-tuning run
    (`evaluation.run`), in-process; the CPT output loads in a fresh process with the weights it saved."""
    from evaluation import run
    from recipes import cpt
    from tests.fixtures.tiny_models import build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer(data_dir, vocab_size=500)
    cache_dir = tmp_path_factory.getbasetemp() / "pretrain-cache"  # shared with the other recipe tests
    outputs = []
    for family, overrides in [("qwen2", {"tie_word_embeddings": True}), ("qwen3", {"head_dim": 16})]:
        save_llama(
            tmp_path / family,
            tokenizer,
            family=family,
            eos_token_id=tokenizer.eos_token_id,
            bos_token_id=tokenizer.bos_token_id,
            **overrides,
        )
        converted = convert(str(tmp_path / family), tmp_path / f"{family}-eurobert", mask_token="<mask>")
        before = EuroBertClmMlmForMaskedLM.from_pretrained(converted).state_dict()
        out = tmp_path / f"{family}-cpt"
        cpt.main(
            [
                "--config",
                "recipes/configs/debug.yaml",
                "--architecture",
                "null",
                "--model_name_or_path",
                str(converted),
                "--switch_step",
                "null",
                "--intermediate_steps",
                "1",
                "--max_steps",
                "2",
                "--max_docs",
                "50",
                "--block_size",
                "32",
                "--per_device_train_batch_size",
                "2",
                "--warmup_steps",
                "1",
                "--report_to",
                "none",
                "--data_cache_dir",
                str(cache_dir),
                "--lr_scheduler_kwargs",
                '{"num_decay_steps": 1, "decay_type": "linear"}',
                "--output_dir",
                str(out),
            ]
        )
        trained = EuroBertClmMlmForMaskedLM.from_pretrained(out)
        info = json.loads((out / "run_info.json").read_text())
        assert info["tokens_before_cpt"] is None and info["tokens_seen"] == 2 * 2 * 32  # the decoder's: unknown
        assert trained.config.is_causal is False and trained.config.qkv_bias == (family == "qwen2")
        assert trained.config.qk_norm == (family == "qwen3")
        changed = {key for key, value in trained.state_dict().items() if not torch.equal(value, before[key])}
        assert any(".q_norm." in key for key in changed) == (family == "qwen3")
        assert any("q_proj.bias" in key for key in changed) == (family == "qwen2")
        run.main(
            [
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
                "--output",
                str(tmp_path / "results"),
            ]
        )
        result = json.loads((tmp_path / "results" / f"{family}-cpt" / "sst2" / "lr0.001-seed0.json").read_text())
        assert result["status"] == "ok"
        outputs.append(out)
    script = (
        "import sys, torch\nfrom safetensors.torch import load_file\n"
        "from transformers import AutoModelForMaskedLM\n"
        "for path in sys.argv[1:]:\n"
        "    model = AutoModelForMaskedLM.from_pretrained(path, trust_remote_code=True)\n"
        "    saved = load_file(path + '/model.safetensors')\n"
        "    assert type(model).__module__.startswith('transformers_modules'), type(model).__module__\n"
        "    assert all(torch.equal(model.state_dict()[key], value) for key, value in saved.items())\n"
        "    assert model(torch.tensor([[0, 5, 6, 1]])).logits.isfinite().all()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, *map(str, outputs)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
