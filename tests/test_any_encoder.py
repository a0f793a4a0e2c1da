"""Any encoder is evaluated right: whatever its tokenizer's padding side, its attention switch, its positions.

Tiny random models of four families share one bundle-trained tokenizer: BERT and RoBERTa (absolute positions), a raw
Llama decoder (no `is_causal` in its config, 131,072 positions, a left-padding tokenizer as decoders ship) and the
project's own tiny EuroBERT.
"""

import json
import shutil

import pytest
import torch
from transformers import (
    AutoModelForSequenceClassification,
    AutoTokenizer,
    BertConfig,
    BertForMaskedLM,
    LlamaConfig,
    LlamaForCausalLM,
    RobertaConfig,
    RobertaForMaskedLM,
)
from transformers.modeling_outputs import TokenClassifierOutput

from evaluation import (
    common,
    extractive_qa,
    finetune_args,
    model_inputs,
    retrieval,
    run,
    sequence_classification,
    tasks,
    token_classification,
)
from evaluation.attention import pattern, resolved_attention
from tests.fixtures.tiny_models import build_tiny_eurobert, build_tiny_tokenizer

pytestmark = pytest.mark.usefixtures("one_thread")

SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37)


def _save(model, tokenizer, path, padding_side="right"):
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    if padding_side == "left":
        _pad_left(path)
    return path


def _pad_left(path):
    """The tokenizer config says `padding_side: left`, as decoders' and converted checkpoints' do."""
    config = json.loads((path / "tokenizer_config.json").read_text())
    (path / "tokenizer_config.json").write_text(json.dumps({**config, "padding_side": "left"}))
    assert AutoTokenizer.from_pretrained(path).padding_side == "left"


@pytest.fixture(scope="module")
def models(tmp_path_factory, data_dir):
    root = tmp_path_factory.mktemp("families")
    tok = build_tiny_tokenizer(data_dir)
    ids = dict(
        vocab_size=len(tok), pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id
    )
    out = {}
    for positions in (512, 256):
        torch.manual_seed(0)
        bert = BertForMaskedLM(BertConfig(**SMALL, **ids, max_position_embeddings=positions))
        name = "bert" if positions == 512 else "bert256"
        out[name] = _save(bert, tok, root / name)
        if positions == 512:  # the same weights, a tokenizer that pads on the left
            out["bert-left"] = _save(bert, tok, root / "bert-left", "left")
    torch.manual_seed(0)
    out["roberta"] = _save(
        RobertaForMaskedLM(RobertaConfig(**SMALL, **ids, max_position_embeddings=514)), tok, root / "roberta"
    )
    torch.manual_seed(0)
    llama = LlamaForCausalLM(LlamaConfig(**SMALL, **ids, num_key_value_heads=2, max_position_embeddings=131072))
    out["llama"] = _save(llama, tok, root / "llama", "left")
    out["eurobert"] = build_tiny_eurobert(root / "eurobert", tok)
    shutil.copytree(out["eurobert"], root / "eurobert-left")
    out["eurobert-left"] = _pad_left(root / "eurobert-left") or root / "eurobert-left"
    return out


def smoke(data_dir, **overrides):
    settings = dict(
        lr=1e-3,
        seed=0,
        max_steps=2,
        batch_size=8,
        eval_batch_size=8,
        max_train=32,
        max_eval=16,
        max_length=64,
        qa_max_length=96,
        doc_stride=32,
        data_dir=str(data_dir),
        precision="fp32",
    )
    return finetune_args.FinetuneArgs(**{**settings, **overrides})


class PerfectTagger(torch.nn.Module):
    """Predicts every token's gold label (the collator passes the labels in): a perfect tagger, whatever the model."""

    def __init__(self, config):
        super().__init__()
        self.config, self.unused = config, torch.nn.Parameter(torch.zeros(()))

    def forward(self, labels=None, **kwargs):
        logits = 10.0 * torch.nn.functional.one_hot(labels.clamp(min=0), self.config.num_labels).float()
        return TokenClassifierOutput(loss=0.0 * self.unused, logits=logits)


def test_left_padding_tokenizer_is_padded_on_the_right(models):
    tokenizer = model_inputs.load_finetuning_tokenizer(models["llama"])
    assert tokenizer.padding_side == tokenizer.truncation_side == "right"
    assert tokenizer(["a", "a b c d"], padding=True)["attention_mask"][0][0] == 1


FAMILY = {
    "sc": (sequence_classification, "sst2", "bert"),
    "tc": (token_classification, "conll2003", "bert"),
    "qa": (extractive_qa, "squad", "eurobert"),
    "ir": (retrieval, "scifact", "bert"),
}


@pytest.mark.parametrize("family", ["sc", "tc", "qa", "ir"])
def test_left_and_right_padding_tokenizers_give_identical_scores(models, data_dir, family):
    """~3 s per family, the guarantee of the issue through the real fine-tuning and scoring: BERT (absolute
    positions, CLS pooling) for SC, TC and IR, the RoPE EuroBERT for QA; TC also scores a perfect tagger (1.0 with
    either tokenizer) and QA checks that the padded batch keeps each window's tokens where its labels index them."""
    module, name, model = FAMILY[family]
    task = tasks.load_task(name)
    args = smoke(data_dir, max_length=256) if family == "tc" else smoke(data_dir)
    results = []
    for path in (models[model], models[f"{model}-left"]):
        finetuned = module.finetune(path, task, args)
        results.append(module.score(finetuned, task, args))
        if family == "tc":
            finetuned.trainer.model = PerfectTagger(finetuned.trainer.model.config)
            assert token_classification.score(finetuned, task, args)["test"]["entity_f1"] == 1.0
        if family == "qa":
            _, windows = extractive_qa.tokenize(task, finetuned.trainer.processing_class, args)
            rows = [windows["train"][i] for i in range(16)]
            batch = finetuned.trainer.data_collator(rows)
            for i, row in enumerate(rows):  # each window's tokens first, the padding after
                assert batch["input_ids"][i, : len(row["input_ids"])].tolist() == row["input_ids"]
    assert results[0]["test"] == results[1]["test"] and results[0]["validation"] == results[1]["validation"]
    assert results[0]["per_instance"] == results[1]["per_instance"]


def test_attention_is_what_the_model_really_does(models):
    resolved = {
        name: resolved_attention(models[name], "checkpoint") for name in ("bert", "roberta", "llama", "eurobert")
    }
    assert resolved == {
        "bert": "bidirectional",
        "roberta": "bidirectional",
        "llama": "causal",
        "eurobert": "bidirectional",
    }
    for name in ("llama", "eurobert"):  # both switch either way
        for attention in ("bidirectional", "causal"):
            assert resolved_attention(models[name], attention) == attention


def test_raw_decoder_is_finetuned_bidirectionally_for_real(models, data_dir):
    task = tasks.load_task("sst2")
    tokenizer = model_inputs.load_finetuning_tokenizer(models["llama"])
    for attention in ("bidirectional", "causal"):
        model = common.load_for_finetuning(
            AutoModelForSequenceClassification,
            models["llama"],
            tokenizer,
            smoke(data_dir, attention=attention),
            **model_inputs.label_kwargs(task),
        )
        # the mask the decoder really uses, with padding and without: does the first token see the third?
        ids = torch.tensor([[10, 11, 12, 13], [10, 11, 14, 13]])
        for mask in (torch.tensor([[1, 1, 1, 0], [1, 1, 1, 0]]), torch.ones_like(ids)):
            hidden = model.base_model(input_ids=ids, attention_mask=mask).last_hidden_state
            assert torch.allclose(hidden[0, 0], hidden[1, 0]) == (attention == "causal")
        assert pattern(model) == attention
    # retrieval and mteb (a plain encoder: mean pooling built by `retrieval.build_model`) too
    from evaluation import mteb

    encoder = retrieval.build_model(models["llama"], tasks.load_task("scifact"), smoke(data_dir))
    assert mteb.encoder_settings(encoder)["attention"] == "bidirectional"


def test_result_records_the_attention_used_and_the_length_cap(models, data_dir, tmp_path):
    """One grid run of the raw decoder: `--attention checkpoint` is recorded as the causal attention it used."""
    run.main(
        [
            "--model",
            str(models["llama"]),
            "--tasks",
            "sst2",
            "--lrs",
            "1e-3",
            "--seeds",
            "0",
            "--output",
            str(tmp_path),
            "--data_dir",
            str(data_dir),
            "--max_steps",
            "1",
            "--max_train",
            "16",
            "--max_eval",
            "8",
            "--batch_size",
            "8",
            "--attention",
            "checkpoint",
            "--precision",
            "fp32",
        ]
    )
    record = json.loads(next(tmp_path.rglob("*.json")).read_text())
    assert record["config"]["attention"] == "causal"
    assert record["identity"]["inputs"] == {"max_length": 2028, "attention": "causal"}  # the QA window: QA's only
    assert record["config"]["max_length"] == 2028


def test_inputs_are_capped_like_the_original_harness(models):
    # round(0.99 * min(max_position_embeddings, 2048)); a 131,072-position decoder gets 2028, not 129,761
    lengths = {
        name: model_inputs.max_length(finetune_args.ProtocolArgs(), models[name])
        for name in ("bert", "bert256", "roberta", "llama", "eurobert")
    }
    assert lengths == {"bert": 507, "bert256": 253, "roberta": 509, "llama": 2028, "eurobert": 507}
    with pytest.raises(ValueError, match="exceeds the 256 positions"):
        model_inputs.max_length(finetune_args.ProtocolArgs(max_length=300), models["bert256"])


def test_qa_windows_fit_the_model(models, data_dir, tmp_path):
    windows = {
        name: model_inputs.qa_windows(finetune_args.ProtocolArgs(), models[name])
        for name in ("bert", "bert256", "llama")
    }
    assert windows == {"bert": (384, 128), "bert256": (253, 84), "llama": (384, 128)}
    # a BERT with 256 positions runs QA with the default windows (it crashed past the pre-flight checks before)
    run.main(
        [
            "--model",
            str(models["bert256"]),
            "--tasks",
            "squad",
            "--lrs",
            "1e-3",
            "--seeds",
            "0",
            "--output",
            str(tmp_path),
            "--data_dir",
            str(data_dir),
            "--max_steps",
            "1",
            "--max_train",
            "8",
            "--max_eval",
            "4",
            "--batch_size",
            "4",
            "--precision",
            "fp32",
        ]
    )
    record = json.loads(next(tmp_path.rglob("*.json")).read_text())
    assert record["status"] == "ok" and record["identity"]["inputs"]["qa_max_length"] == 253


@pytest.mark.parametrize("pooling", ["mean", "cls", "last"])
def test_ir_pooling_and_prompts_are_options_recorded(models, data_dir, pooling):
    from evaluation import identity, mteb

    task = tasks.load_task("scifact")
    args = smoke(data_dir, ir_pooling=pooling, query_prompt="q: ")
    encoders = [retrieval.build_model(models[name], task, args) for name in ("bert", "bert-left")]
    settings = mteb.encoder_settings(encoders[0])
    assert settings["prompts"] == {"query": "q: ", "document": "Document: "}
    assert settings["pooling"]["pooling_mode"] == {"mean": "mean", "cls": "cls", "last": "lasttoken"}[pooling]
    texts = ["a short one", "a much longer text with many more words in it than the first"]
    embeddings = [encoder.encode_query(texts, convert_to_tensor=True) for encoder in encoders]
    assert torch.equal(embeddings[0], embeddings[1])  # the same whatever the tokenizer's padding side
    recorded = identity.protocol_identity(args, "ir")
    assert (recorded["ir_pooling"], recorded["query_prompt"], recorded["document_prompt"]) == (pooling, "q: ", None)


def test_sentence_pairs_as_two_segments_reach_a_bert(models, data_dir):
    """`--pair_encoding segments`: a BERT (token-type embeddings) gets MNLI's two fields as two segments, typed 1 on
    the second, through the real fine-tuning; EuroBERT (no token types) keeps the joined text; both recorded."""
    from evaluation import identity

    task, joined, segments = tasks.load_task("mnli"), smoke(data_dir), smoke(data_dir, pair_encoding="segments")
    bert, eurobert = (model_inputs.resolve_inputs(segments, models[name]) for name in ("bert", "eurobert"))
    assert (bert.pair_encoding, eurobert.pair_encoding) == ("segments", "joined")
    raw = common.task_splits(task, joined)["train"][0]
    pair = common.task_splits(task, bert)["train"][0]
    assert raw["text"] == f"Premise: {pair['text']}\nHypothesis: {pair['text_pair']}"
    tokenizer = model_inputs.load_finetuning_tokenizer(models["bert"])
    seen = []
    trainer = sequence_classification.build_trainer(
        models["bert"], task, bert, tokenizer, sequence_classification.tokenize(task, tokenizer, bert)["train"]
    )
    trainer.model.bert.embeddings.register_forward_pre_hook(
        lambda module, args, kwargs: seen.append((kwargs["input_ids"], kwargs["token_type_ids"])), with_kwargs=True
    )
    common.train(trainer)
    ids, types = seen[0]
    for row_ids, row_types in zip(ids.tolist(), types.tolist()):
        real = [(i, t) for i, t in zip(row_ids, row_types) if i != tokenizer.pad_token_id]
        first_end = [i for i, _ in real].index(tokenizer.eos_token_id)  # <s> A </s> | B </s>, then the padding
        assert {t for _, t in real[: first_end + 1]} == {0} and {t for _, t in real[first_end + 1 :]} == {1}
    # EuroBERT: exactly today's inputs, and the joined identity has no pair_encoding entry
    eurobert_tokenizer = model_inputs.load_finetuning_tokenizer(models["eurobert"])
    encoded = sequence_classification.tokenize(task, eurobert_tokenizer, eurobert)["train"][0]
    assert encoded["input_ids"] == eurobert_tokenizer(raw["text"], truncation=True, max_length=64)["input_ids"]
    assert "pair_encoding" not in identity.protocol_identity(
        joined, "sc"
    ) and "pair_encoding" not in model_inputs.inputs_identity(eurobert, "sc")
    assert (
        identity.protocol_identity(segments, "sc")["pair_encoding"]
        == model_inputs.inputs_identity(bert, "sc")["pair_encoding"]
        == "segments"
    )
