"""Frozen-feature probes: what an encoder's features already hold, without fine-tuning it.

A probe fits only a linear classifier on the last hidden states of a frozen model (any transformers encoder, or a
decoder with the attention it is asked to use): forward passes alone, what a CPU affords for a 135M-parameter model
(a decoder study of `recipes.study`). Each probe is read out in two ways (`READOUTS`) and the one with the higher mean
validation score over seeds is the probe's result: sc: a sentence's mean or last token state -> logistic regression ->
accuracy; tc: each word's first or last sub-token state -> logistic regression over the tags ->
`metrics.token_classification_scores`; ir: the mean or last token state, L2-normalised, queries ranked by cosine
against the protocol's pooled corpus -> `metrics.retrieval_scores` (nothing fitted, no seed), with BM25 (`bm25s`, as
mteb's baseline) as its lexical reference. Features are computed once per model and split; a seed draws the
classifier's `n_train` training subset of the encoded pool; the validation and test instances are the same for every
model and seed.
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler
from tqdm.auto import tqdm

from evaluation import baselines, metrics, tasks
from evaluation.token_classification import align_labels

READOUTS = {"sc": ("mean", "last"), "ir": ("mean", "last"), "tc": ("first", "last")}  # first listed wins a tie
EVALUATED = ("validation", "test")


@torch.no_grad()
def token_states(
    model, encodings: list[list[int]], pad_id: int, batch_size: int = 16, desc: str = "encoding", **forward_kwargs
) -> list[np.ndarray]:
    """The last hidden state of every token of each encoded text (a float32 array (tokens, hidden) per text), in
    batches of similar lengths, right-padded with `pad_id`; `forward_kwargs` go to the model (`is_causal=`)."""
    order = sorted(range(len(encodings)), key=lambda i: len(encodings[i]))
    states: list[np.ndarray | None] = [None] * len(encodings)
    for start in tqdm(range(0, len(order), batch_size), desc=desc, unit="batch", leave=False):
        batch = [encodings[i] for i in order[start : start + batch_size]]
        width = max(len(ids) for ids in batch)
        ids = torch.tensor([e + [pad_id] * (width - len(e)) for e in batch], device=model.device)
        mask = torch.tensor([[1] * len(e) + [0] * (width - len(e)) for e in batch], device=model.device)
        hidden = model(input_ids=ids, attention_mask=mask, **forward_kwargs).last_hidden_state.float().cpu().numpy()
        for row, i in enumerate(order[start : start + batch_size]):
            states[i] = hidden[row, : len(encodings[i])]
    return states


def pooled(states: list[np.ndarray], readout: str, normalise: bool = False) -> np.ndarray:
    """One vector per text: its tokens' mean state ("mean") or its last token's ("last")."""
    vectors = np.stack([s.mean(axis=0) if readout == "mean" else s[-1] for s in states])
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True) if normalise else vectors


def fit_predict(train_x: np.ndarray, train_y: np.ndarray, evaluated: list[np.ndarray], where: str) -> list:
    """A standardised multinomial logistic regression (L2, C=1), the probe's one classifier, fitted once and applied
    to each of `evaluated`; a training subset of one class is refused in one line naming the probe (`where`: its task
    and seed)."""
    if len(np.unique(train_y)) < 2:
        raise ValueError(
            f"the {where} probe's training subset holds one class only ({train_y[0]!r}); give the probe a larger "
            "training subset (`Probe.train`) or pool"
        )
    scaler = StandardScaler().fit(train_x)
    classifier = LogisticRegression(max_iter=1000).fit(scaler.transform(train_x), train_y)
    return [classifier.predict(scaler.transform(x)) for x in evaluated]


def subsets(n_pool: int, n_train: int, seeds) -> dict[int, np.ndarray]:
    """The training subset of each seed: `n_train` of the pool's indices, drawn without replacement."""
    if n_train > n_pool:
        raise ValueError(f"a probe's training subset ({n_train}) cannot exceed its encoded pool ({n_pool})")
    return {seed: np.sort(np.random.default_rng(seed).choice(n_pool, n_train, replace=False)) for seed in seeds}


def choose(by_readout: dict[str, dict[int, dict]], metric: str) -> dict:
    """{"readout", "validation" {readout: mean validation `metric` over seeds}, "scores" {seed: {"validation",
    "test"}}}: of the readouts' results, the one with the highest mean validation score (the first listed on a tie);
    the test scores play no part."""
    means = {r: float(np.mean([s["validation"][metric] for s in seeds.values()])) for r, seeds in by_readout.items()}
    readout = max(means, key=lambda r: (means[r], -list(means).index(r)))
    return {"readout": readout, "validation": means, "scores": by_readout[readout]}


def probe_sc(encode, splits, n_train: int, seeds, task: str, text_column: str = "text") -> dict:
    """`choose`'s result of the SC task `task`'s probe, each seed's scores with "per_instance" predictions and
    references; `encode(texts)` returns token states per text, `splits` holds the "train" pool, "validation" and
    "test"."""
    states = {split: encode(splits[split][text_column]) for split in ("train", *EVALUATED)}
    gold = {split: list(splits[split]["label"]) for split in states}
    train_y = np.array(gold["train"])
    by_readout = {}
    for readout in READOUTS["sc"]:
        x = {split: pooled(states[split], readout) for split in states}
        by_readout[readout] = {}
        for seed, rows in subsets(len(train_y), n_train, seeds).items():
            predicted = fit_predict(x["train"][rows], train_y[rows], [x[s] for s in EVALUATED], f"{task} seed {seed}")
            by_readout[readout][seed] = {
                split: with_predictions(metrics.accuracy(p.tolist(), gold[split]), p.tolist(), gold[split])
                for split, p in zip(EVALUATED, predicted)
            }
    return choose(by_readout, "accuracy")


def word_features(encode, tokenizer, split, max_length: int) -> tuple[dict[str, list[np.ndarray]], list[list[int]]]:
    """({readout: per sentence, the states of each word's first or last sub-token}, per sentence the indices of the
    words that have a token)."""
    encoded = align_labels(split, tokenizer, max_length, "first")
    states = encode(encoded["input_ids"])
    features, words = {"first": [], "last": []}, []
    for state, word_ids in zip(states, encoded["word_ids"]):
        first, last = {}, {}
        for j, word in enumerate(word_ids):
            if word != -100:
                first.setdefault(word, j)
                last[word] = j
        words.append(sorted(first))
        for readout, at in (("first", first), ("last", last)):
            features[readout].append(state[[at[w] for w in words[-1]]])
    return features, words


def with_predictions(scores: dict, predicted: list, gold: list) -> dict:
    """`scores` with the predictions and references beside its per-instance scores."""
    return {**scores, "per_instance": {**scores["per_instance"], "prediction": predicted, "reference": gold}}


def probe_tc(encode, tokenizer, splits, labels: list[str], n_train: int, seeds, max_length: int, task: str) -> dict:
    """`choose`'s result of the TC task `task`'s probe, each seed's scores with "per_instance" predicted and gold
    tags (a word without a token: "O")."""
    found = {split: word_features(encode, tokenizer, splits[split], max_length) for split in ("train", *EVALUATED)}
    train_words = found["train"][1]
    train_tags = [np.array(tags, dtype=int)[words] for tags, words in zip(splits["train"]["tags"], train_words)]
    gold = {split: [[labels[t] for t in tags] for tags in splits[split]["tags"]] for split in EVALUATED}
    by_readout = {}
    for readout in READOUTS["tc"]:
        by_readout[readout] = {}
        for seed, rows in subsets(len(train_words), n_train, seeds).items():
            flat = fit_predict(
                np.concatenate([found["train"][0][readout][i] for i in rows]),
                np.concatenate([train_tags[i] for i in rows]),
                [np.concatenate(found[split][0][readout]) for split in EVALUATED],
                f"{task} seed {seed}",
            )
            by_readout[readout][seed] = {
                split: sentence_tags(predicted, found[split][1], gold[split], labels)
                for split, predicted in zip(EVALUATED, flat)
            }
    return choose(by_readout, "entity_f1")


def sentence_tags(predicted_flat, words: list[list[int]], gold: list[list[str]], labels: list[str]) -> dict:
    """The TC scores of one split's flat word predictions, put back into its sentences."""
    predicted, at = [], 0
    for sentence_words, tags in zip(words, gold):
        sentence = ["O"] * len(tags)
        for w in sentence_words:
            sentence[w] = labels[predicted_flat[at]]
            at += 1
        predicted.append(sentence)
    return with_predictions(metrics.token_classification_scores(predicted, gold), predicted, gold)


def probe_ir(encode, splits, query_prefix: str = "", document_prefix: str = "") -> dict:
    """`choose`'s result (seed 0) of a frozen encoder on the "validation" and "test" `tasks.RetrievalSplit`s (`ranked`
    with each readout), every document encoded once."""
    doc_ids = sorted({d for split in EVALUATED for d in splits[split].corpus})
    texts = {d: splits[split].corpus[d] for split in EVALUATED for d in splits[split].corpus}
    doc_states = dict(zip(doc_ids, encode([document_prefix + texts[d] for d in doc_ids])))
    query_states = {
        split: encode([query_prefix + splits[split].queries[q] for q in sorted(splits[split].queries)])
        for split in EVALUATED
    }
    by_readout = {
        readout: {0: {split: ranked(splits[split], doc_states, query_states[split], readout) for split in EVALUATED}}
        for readout in READOUTS["ir"]
    }
    return choose(by_readout, "ndcg@10")


def ranked(split, doc_states: dict, query_states: list[np.ndarray], readout: str) -> dict:
    """Retrieval scores of one split: its queries (their token states in sorted id order) ranked against its corpus
    (`doc_states` by id) by cosine of the readout's L2-normalised vectors."""
    corpus = sorted(split.corpus)
    docs = pooled([doc_states[d] for d in corpus], readout, normalise=True)
    similarity = pooled(query_states, readout, normalise=True) @ docs.T
    run = {q: dict(zip(corpus, map(float, row))) for q, row in zip(sorted(split.queries), similarity)}
    return metrics.retrieval_scores(run, split.qrels)


BM25_SETTINGS = {"method": "lucene", "k1": 1.5, "b": 0.75, "stopwords": "en", "stemmer": "english"}  # mteb's


def bm25_identity() -> dict:
    """What a BM25 result depends on: the libraries' versions and BM25's settings."""
    import bm25s
    import Stemmer

    return {"bm25s": bm25s.__version__, "PyStemmer": Stemmer.version(), **BM25_SETTINGS}


def probe_bm25(splits) -> dict:
    """{0: {"validation", "test"}}: BM25 (`bm25s`, English stopwords and Snowball stemmer) ranking every document of
    each split's corpus for its queries, scored as `probe_ir`'s rankings are."""
    import bm25s
    import Stemmer

    stemmer, settings = Stemmer.Stemmer(BM25_SETTINGS["stemmer"]), BM25_SETTINGS
    scores = {}
    for split in EVALUATED:
        corpus, query_ids = sorted(splits[split].corpus), sorted(splits[split].queries)
        tokenize = lambda texts: bm25s.tokenize(  # noqa: E731
            texts, stopwords=settings["stopwords"], stemmer=stemmer, show_progress=False
        )
        retriever = bm25s.BM25(method=settings["method"], k1=settings["k1"], b=settings["b"])
        retriever.index(tokenize([splits[split].corpus[d] for d in corpus]), show_progress=False)
        found, values = retriever.retrieve(
            tokenize([splits[split].queries[q] for q in query_ids]), k=len(corpus), show_progress=False
        )
        run = {
            q: {corpus[i]: float(v) for i, v in zip(rows, row_values)}
            for q, rows, row_values in zip(query_ids, found, values)
        }
        scores[split] = metrics.retrieval_scores(run, splits[split].qrels)
    return {0: scores}


def probe_splits(task, data_dir, spec: dict):
    """The splits a probe reads: the "train" pool (`pool`), "validation" and "test" (`test` each); retrieval: the
    validation and test queries against the protocol's pooled corpus (`tasks.load_splits`)."""
    if task.family == "ir":
        return tasks.load_splits(task, data_dir, max_eval=spec["test"], corpus="pooled")
    return tasks.load_splits(task, data_dir, max_train=spec["pool"], max_eval=spec["test"])


def probe_task(model, tokenizer, task, data_dir, spec: dict, causal: bool, desc: str) -> tuple[dict, dict]:
    """(`choose`'s result, the trivial baseline's test scores) of the probe `spec` (`recipes.studies.Probe`'s fields,
    "max_length", "seeds") of `task` on a frozen `model` (its states with `causal` attention): a classifier per seed on
    `train` of `pool` encoded training examples, validated and tested on `test` instances each; retrieval: `test`
    queries of each split ranked against the protocol's pooled corpus (seed 0)."""

    def encode(texts_or_ids):
        ids = [
            t if isinstance(t, list) else tokenizer(t, truncation=True, max_length=spec["max_length"])["input_ids"]
            for t in texts_or_ids
        ]
        return token_states(model, ids, tokenizer.pad_token_id, desc=desc, is_causal=causal)

    splits = probe_splits(task, data_dir, spec)
    if task.family == "ir":
        chosen = probe_ir(encode, splits, task.query_prefix, task.document_prefix)
    elif task.family == "sc":
        chosen = probe_sc(encode, splits, spec["train"], spec["seeds"], task.name)
    else:
        chosen = probe_tc(
            encode, tokenizer, splits, task.labels, spec["train"], spec["seeds"], spec["max_length"], task.name
        )
    return chosen, baselines.trivial_baseline(task, splits)["test"]
