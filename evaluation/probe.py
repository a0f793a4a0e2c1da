"""Frozen-feature probes: what an encoder's features already hold, without fine-tuning it.

A probe fits only a linear classifier on the last hidden states of a frozen model (any transformers encoder, or a
decoder with the attention it is asked to use): forward passes alone, what a CPU affords for a 135M-parameter model
(a decoder study of `recipes.study`).
sc: mean token state -> logistic regression -> accuracy; tc: each word's first-token state
-> logistic regression over the tags -> `metrics.token_classification_scores`; ir: mean-pooled, L2-normalised states
ranked by cosine -> `metrics.retrieval_scores` (nothing fitted, no seed). Features are computed once per model and
split; a seed draws the classifier's `n_train` training subset of the encoded pool; the test instances are the same
for every model and seed.
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler
from tqdm.auto import tqdm

from evaluation import baselines, metrics, tasks
from evaluation.token_classification import align_labels


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


def mean_pooled(states: list[np.ndarray], normalise: bool = False) -> np.ndarray:
    pooled = np.stack([s.mean(axis=0) for s in states])
    return pooled / np.linalg.norm(pooled, axis=1, keepdims=True) if normalise else pooled


def fit_predict(train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray, where: str) -> np.ndarray:
    """A standardised multinomial logistic regression (L2, C=1): the probe's one classifier; a training subset of
    one class is refused in one line naming the probe (`where`: its task and seed)."""
    if len(np.unique(train_y)) < 2:
        raise ValueError(
            f"the {where} probe's training subset holds one class only ({train_y[0]!r}); give the probe a larger "
            "training subset (`Probe.train`) or pool"
        )
    scaler = StandardScaler().fit(train_x)
    classifier = LogisticRegression(max_iter=1000).fit(scaler.transform(train_x), train_y)
    return classifier.predict(scaler.transform(test_x))


def subsets(n_pool: int, n_train: int, seeds) -> dict[int, np.ndarray]:
    """The training subset of each seed: `n_train` of the pool's indices, drawn without replacement."""
    if n_train > n_pool:
        raise ValueError(f"a probe's training subset ({n_train}) cannot exceed its encoded pool ({n_pool})")
    return {seed: np.sort(np.random.default_rng(seed).choice(n_pool, n_train, replace=False)) for seed in seeds}


def probe_sc(encode, splits, n_train: int, seeds, task: str, text_column: str = "text") -> dict[int, dict]:
    """{seed: {"accuracy", "per_instance": {"accuracy", "prediction", "reference"}}} of the SC task `task`'s probe;
    `encode(texts)` returns token states per text, `splits` holds the "train" pool and "test"."""
    train_x = mean_pooled(encode(splits["train"][text_column]))
    test_x = mean_pooled(encode(splits["test"][text_column]))
    train_y, test_y = np.array(splits["train"]["label"]), list(splits["test"]["label"])
    out = {}
    for seed, rows in subsets(len(train_y), n_train, seeds).items():
        predicted = fit_predict(train_x[rows], train_y[rows], test_x, f"{task} seed {seed}").tolist()
        out[seed] = with_predictions(metrics.accuracy(predicted, test_y), predicted, test_y)
    return out


def word_features(encode, tokenizer, split, max_length: int) -> tuple[list[np.ndarray], list[list[int]]]:
    """Per sentence, the states of each word's first token and the word indices they belong to."""
    encoded = align_labels(split, tokenizer, max_length, "first")
    states = encode(encoded["input_ids"])
    features, words = [], []
    for state, labels, word_ids in zip(states, encoded["labels"], encoded["word_ids"]):
        firsts = [j for j, label in enumerate(labels) if label != -100]
        features.append(state[firsts])
        words.append([word_ids[j] for j in firsts])
    return features, words


def with_predictions(scores: dict, predicted: list, gold: list) -> dict:
    """`scores` with the predictions and references beside its per-instance scores."""
    return {**scores, "per_instance": {**scores["per_instance"], "prediction": predicted, "reference": gold}}


def probe_tc(
    encode, tokenizer, splits, labels: list[str], n_train: int, seeds, max_length: int, task: str
) -> dict[int, dict]:
    """{seed: the TC scores, "per_instance" predicted and gold tags beside them} of the TC task `task`'s probe (a
    word without a token: "O")."""
    train_f, train_words = word_features(encode, tokenizer, splits["train"], max_length)
    test_f, test_words = word_features(encode, tokenizer, splits["test"], max_length)
    train_tags = [np.array(tags, dtype=int)[words] for tags, words in zip(splits["train"]["tags"], train_words)]
    gold = [[labels[t] for t in tags] for tags in splits["test"]["tags"]]
    test_x = np.concatenate(test_f)
    out = {}
    for seed, rows in subsets(len(train_f), n_train, seeds).items():
        predicted_flat = fit_predict(
            np.concatenate([train_f[i] for i in rows]),
            np.concatenate([train_tags[i] for i in rows]),
            test_x,
            f"{task} seed {seed}",
        )
        predicted, at = [], 0
        for words, tags in zip(test_words, gold):
            sentence = ["O"] * len(tags)
            for w in words:
                sentence[w] = labels[predicted_flat[at]]
                at += 1
            predicted.append(sentence)
        out[seed] = with_predictions(metrics.token_classification_scores(predicted, gold), predicted, gold)
    return out


def probe_ir(encode, split, query_prefix: str = "", document_prefix: str = "") -> dict:
    """Retrieval scores of a frozen encoder on a `tasks.RetrievalSplit`: cosine of mean-pooled states."""
    doc_ids, query_ids = sorted(split.corpus), sorted(split.queries)
    docs = mean_pooled(encode([document_prefix + split.corpus[d] for d in doc_ids]), normalise=True)
    queries = mean_pooled(encode([query_prefix + split.queries[q] for q in query_ids]), normalise=True)
    similarity = queries @ docs.T
    run = {q: dict(zip(doc_ids, map(float, row))) for q, row in zip(query_ids, similarity)}
    return metrics.retrieval_scores(run, split.qrels)


def probe_task(model, tokenizer, task, data_dir, spec: dict, causal: bool, desc: str) -> tuple[dict, dict]:
    """({seed: scores}, the trivial baseline's test scores) of the probe `spec` (`recipes.studies.Probe`'s fields,
    "max_length", "seeds") of `task` on a frozen `model` (its states with `causal` attention): a classifier per seed on
    `train` of `pool` encoded training examples, tested on `test` instances; retrieval: `test` queries ranked against
    the documents judged for them (seed 0)."""

    def encode(texts_or_ids):
        ids = [
            t if isinstance(t, list) else tokenizer(t, truncation=True, max_length=spec["max_length"])["input_ids"]
            for t in texts_or_ids
        ]
        return token_states(model, ids, tokenizer.pad_token_id, desc=desc, is_causal=causal)

    if task.family == "ir":
        splits = {"test": tasks.load_splits(task, data_dir, max_eval=spec["test"], corpus="judged")["test"]}
        scores = {0: probe_ir(encode, splits["test"], task.query_prefix, task.document_prefix)}
    else:
        splits = tasks.load_splits(task, data_dir, max_train=spec["pool"], max_eval=spec["test"])
        scores = (
            probe_sc(encode, splits, spec["train"], spec["seeds"], task.name)
            if task.family == "sc"
            else probe_tc(
                encode, tokenizer, splits, task.labels, spec["train"], spec["seeds"], spec["max_length"], task.name
            )
        )
    return scores, baselines.trivial_baseline(task, {**splits, "validation": splits["test"]})["test"]
