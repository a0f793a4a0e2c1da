"""`modeling_eurobert.export_native`: our bidirectional heads -> transformers' native EuroBERT, no remote code."""

import json

import pytest
import torch
import transformers
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (
    AutoModel,
    AutoModelForMaskedLM,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    AutoTokenizer,
    PreTrainedTokenizerFast,
)

from modeling_eurobert import (
    EuroBertClmMlmConfig,
    EuroBertClmMlmForCausalLM,
    EuroBertClmMlmForMaskedLM,
    EuroBertClmMlmForQuestionAnswering,
    EuroBertClmMlmForSequenceClassification,
    EuroBertClmMlmForTokenClassification,
    EuroBertClmMlmModel,
)
from modeling_eurobert.export_native import ExportError, export_native, main, make_plain_loadable
from tests.fixtures.file_modes import not_following_umask


def tiny_config(**overrides) -> EuroBertClmMlmConfig:
    fields = dict(
        vocab_size=99,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=37,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        mask_token_id=3,
        num_labels=3,
    )
    return EuroBertClmMlmConfig(**(fields | overrides))


def padded_batch():
    torch.manual_seed(1)
    input_ids = torch.randint(4, 99, (3, 7))
    attention_mask = torch.ones_like(input_ids)
    input_ids[1, 5:], attention_mask[1, 5:] = 0, 0  # right padding
    input_ids[2, :2], attention_mask[2, :2] = 0, 0  # left padding
    return input_ids, attention_mask


LLAMA3_ROPE = {
    "rope_type": "llama3",
    "rope_theta": 500000.0,
    "factor": 32.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 64,
}  # a converted Llama-3.x decoder
SC = (EuroBertClmMlmForSequenceClassification, AutoModelForSequenceClassification)
# (our class, native Auto class, config overrides, output field to compare)
HEADS = {
    "base": (EuroBertClmMlmModel, AutoModel, {}, "last_hidden_state"),
    "mlm": (EuroBertClmMlmForMaskedLM, AutoModelForMaskedLM, {}, "logits"),
    "mlm-llama3-rope": (EuroBertClmMlmForMaskedLM, AutoModelForMaskedLM, {"rope_parameters": LLAMA3_ROPE}, "logits"),
    **{f"sc-{pooling}": (*SC, {"classifier_pooling": pooling}, "logits") for pooling in ("bos", "mean", "late")},
    "tc": (EuroBertClmMlmForTokenClassification, AutoModelForTokenClassification, {}, "logits"),
}


@pytest.mark.parametrize("head", list(HEADS))
def test_export_loads_natively_with_identical_outputs(tmp_path, head):
    our_class, auto_class, overrides, field = HEADS[head]
    ours = our_class(tiny_config(**overrides)).eval()
    ours.save_pretrained(tmp_path / "ours")
    export_native(tmp_path / "ours", tmp_path / "native")
    assert not_following_umask(tmp_path / "native") == []  # R4: the weights follow the umask (were 0600)

    native = auto_class.from_pretrained(tmp_path / "native").eval()  # no trust_remote_code
    assert type(native) is getattr(transformers, our_class.__name__.replace("ClmMlm", ""))
    assert type(native).__module__.startswith("transformers.models.eurobert")
    assert native.config.model_type == "eurobert" and native.config.pad_token_id == 0
    backbone = native if head == "base" else native.model
    assert backbone.embed_tokens.padding_idx == 0  # native embedding: padding_idx = pad_token_id, not eos
    if head.startswith("sc"):
        assert native.config.classifier_pooling == overrides["classifier_pooling"]
    input_ids, attention_mask = padded_batch()
    with torch.no_grad():
        expected = getattr(ours(input_ids, attention_mask=attention_mask), field)
        actual = getattr(native(input_ids, attention_mask=attention_mask), field)
    torch.testing.assert_close(actual, expected, rtol=0, atol=0)


def test_plain_loadable_llama3_rope_checkpoint_loads_natively_with_identical_outputs(tmp_path):
    """make_plain_loadable on a converted Llama-3.x's RoPE (llama3 scaling): plain AutoModelForMaskedLM (no remote
    code) computes the same logits as our class."""
    ours = EuroBertClmMlmForMaskedLM(tiny_config(rope_parameters=LLAMA3_ROPE)).eval()
    ours.save_pretrained(tmp_path / "ours")
    assert make_plain_loadable(tmp_path / "ours")
    native = AutoModelForMaskedLM.from_pretrained(tmp_path / "ours").eval()
    assert type(native) is transformers.EuroBertForMaskedLM and native.config.rope_parameters["rope_type"] == "llama3"
    input_ids, attention_mask = padded_batch()
    with torch.no_grad():
        expected = ours(input_ids, attention_mask=attention_mask).logits
        actual = native(input_ids, attention_mask=attention_mask).logits
    torch.testing.assert_close(actual, expected, rtol=0, atol=0)


def test_export_writes_no_remote_code_and_copies_labels_and_tokenizer(tmp_path):
    config = tiny_config(id2label={0: "neg", 1: "neu", 2: "pos"}, label2id={"neg": 0, "neu": 1, "pos": 2})
    EuroBertClmMlmForSequenceClassification(config).save_pretrained(tmp_path / "ours")
    vocab = {token: i for i, token in enumerate(["<pad>", "<s>", "</s>", "<|mask|>", "good", "bad"])}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", mask_token="<|mask|>").save_pretrained(
        tmp_path / "ours"
    )
    export_native(tmp_path / "ours", tmp_path / "native")
    exported = AutoTokenizer.from_pretrained(tmp_path / "native")
    assert exported("good bad")["input_ids"] == [4, 5] and exported.model_max_length == config.max_position_embeddings
    saved = json.loads((tmp_path / "native" / "config.json").read_text())
    assert "auto_map" not in saved and "is_causal" not in saved
    assert saved["architectures"] == ["EuroBertForSequenceClassification"]
    assert saved["id2label"] == {"0": "neg", "1": "neu", "2": "pos"}
    assert not list((tmp_path / "native").glob("*.py"))


def test_missing_pad_id_exports_as_null_not_eos(tmp_path):
    EuroBertClmMlmForMaskedLM(tiny_config(pad_token_id=None)).save_pretrained(tmp_path / "ours")
    export_native(tmp_path / "ours", tmp_path / "native")
    native = AutoModelForMaskedLM.from_pretrained(tmp_path / "native")
    assert native.config.pad_token_id is None and native.model.embed_tokens.padding_idx is None


CAUSAL_REFUSAL = "is a causal checkpoint .*; pass --bidirectional to export it as a bidirectional encoder on purpose"
REFUSALS = {
    "qa": (EuroBertClmMlmForQuestionAnswering, {}, "no question-answering head"),
    "causal-lm": (
        EuroBertClmMlmForCausalLM,
        {"is_causal": True},
        "EuroBertClmMlmForCausalLM with is_causal=true " + CAUSAL_REFUSAL,
    ),
    "causal-classifier": (EuroBertClmMlmForSequenceClassification, {"is_causal": True}, CAUSAL_REFUSAL),
    "pad-is-eos": (EuroBertClmMlmForMaskedLM, {"pad_token_id": 2}, "pad_token_id=2 equals eos"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_unexportable_checkpoints_are_refused_and_nothing_written(tmp_path, case):
    our_class, overrides, message = REFUSALS[case]
    our_class(tiny_config(**overrides)).save_pretrained(tmp_path / "ours")
    with pytest.raises(ExportError, match=message):
        export_native(tmp_path / "ours", tmp_path / "native")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ours"]


def test_cli_refuses_existing_output_and_foreign_checkpoints(tmp_path):
    EuroBertClmMlmForMaskedLM(tiny_config()).save_pretrained(tmp_path / "ours")
    (tmp_path / "taken").mkdir()
    with pytest.raises(SystemExit, match="error: OUTPUT .* already exists"):
        main([str(tmp_path / "ours"), str(tmp_path / "taken")])
    transformers.LlamaConfig(vocab_size=99, hidden_size=32, num_attention_heads=4).save_pretrained(tmp_path / "llama")
    with pytest.raises(SystemExit, match="model_type='llama'"):
        main([str(tmp_path / "llama"), str(tmp_path / "out")])


def clm_run_checkpoint(path):
    """A causal checkpoint of the MLM class (is_causal=true in config.json, as recipes before run_info format 2
    saved CLM runs)."""
    torch.manual_seed(0)
    model = EuroBertClmMlmForMaskedLM(tiny_config()).eval()
    model.config.is_causal = True
    model.save_pretrained(path)
    return model


@pytest.mark.parametrize("source", ["clm-run", "converted-decoder"])
def test_causal_checkpoint_exports_bidirectional_on_purpose(tmp_path, source):
    if source == "clm-run":
        ours = clm_run_checkpoint(tmp_path / "ours")
    else:  # modeling_eurobert.convert's output: EuroBertClmMlmForCausalLM, is_causal=true
        ours = EuroBertClmMlmForCausalLM(tiny_config()).eval()
        ours.save_pretrained(tmp_path / "ours")
    assert json.loads((tmp_path / "ours" / "config.json").read_text())["is_causal"] is True
    with pytest.raises(SystemExit, match="error: .* is a causal checkpoint .* pass --bidirectional"):
        main([str(tmp_path / "ours"), str(tmp_path / "refused")])
    assert not (tmp_path / "refused").exists()

    main([str(tmp_path / "ours"), str(tmp_path / "native"), "--bidirectional"])
    native = AutoModelForMaskedLM.from_pretrained(tmp_path / "native").eval()  # no trust_remote_code
    assert type(native) is transformers.EuroBertForMaskedLM
    saved = json.loads((tmp_path / "native" / "config.json").read_text())
    assert saved["pretraining_attention"] == "causal" and "is_causal" not in saved
    input_ids, attention_mask = padded_batch()
    with torch.no_grad():
        bidirectional = ours(input_ids, attention_mask=attention_mask, is_causal=False).logits
        causal = ours(input_ids, attention_mask=attention_mask, is_causal=True).logits
        exported = native(input_ids, attention_mask=attention_mask).logits
    torch.testing.assert_close(exported, bidirectional, rtol=0, atol=0)
    assert not torch.allclose(exported, causal)


def test_bidirectional_export_keeps_the_other_refusals(tmp_path):
    EuroBertClmMlmForCausalLM(tiny_config(pad_token_id=2)).save_pretrained(tmp_path / "pad-is-eos")
    with pytest.raises(ExportError, match="pad_token_id=2 equals eos"):
        export_native(tmp_path / "pad-is-eos", tmp_path / "native", bidirectional=True)
    EuroBertClmMlmForQuestionAnswering(tiny_config(is_causal=True)).save_pretrained(tmp_path / "qa")
    with pytest.raises(ExportError, match="no question-answering head"):
        export_native(tmp_path / "qa", tmp_path / "native", bidirectional=True)
    assert not (tmp_path / "native").exists()
