"""Retrieval (MS MARCO, NQ, MLDR, SciFact): a sentence-embedding model trained with in-batch negatives, NDCG@10.

The encoder becomes a `SentenceTransformer` (`Transformer` + `Pooling`, `--ir_pooling`), trained on (query, positive)
pairs with `MultipleNegativesRankingLoss` (in-batch negatives only, as in the paper) and the `NO_DUPLICATES` sampler
(a paragraph answering two queries of a batch would be a false negative). Queries and documents carry the run's
prompts in training and at evaluation, which ranks the corpus by cosine similarity.
"""

from __future__ import annotations

import torch
from sentence_transformers import (
    SentenceTransformer,
    SentenceTransformerTrainer,
    SentenceTransformerTrainingArguments,
)
from sentence_transformers.base.sampler import BatchSamplers
from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
from transformers import set_seed

from core import store
from evaluation import attention, common, finetune_args, metrics, model_inputs

TOP_K = 100  # documents kept per query: enough for recall@100 and NDCG@10
POOLING_MODES = {"mean": "mean", "cls": "cls", "last": "lasttoken"}  # `--ir_pooling` -> sentence-transformers' mode


def prompts(task, args: finetune_args.FinetuneArgs) -> dict[str, str]:
    """The query and document prompts of a run: `--query_prompt`/`--document_prompt`, else the task's prefixes."""
    return {
        "query": task.query_prefix if args.query_prompt is None else args.query_prompt,
        "document": task.document_prefix if args.document_prompt is None else args.document_prompt,
    }


def build_model(model_path, task, args: finetune_args.FinetuneArgs) -> SentenceTransformer:
    """A SentenceTransformer over any Hugging Face encoder: `--ir_pooling` (mean by default) and the run's prompts."""
    set_seed(args.seed)
    transformer = Transformer(
        str(model_path),
        model_kwargs={"trust_remote_code": True, "dtype": args.model_dtype()},
        processor_kwargs={"trust_remote_code": True},
        config_kwargs={"trust_remote_code": True},
        max_seq_length=args.max_length,
    )
    tokenizer = model_inputs.pad_right(transformer.tokenizer)  # absolute positions count from the first token
    if tokenizer.pad_token is None:  # Llama-3 tokenizers: padded positions are masked, any valid id will do
        tokenizer.pad_token = tokenizer.eos_token
    attention.set_attention(transformer.auto_model, args.attention)
    pooling = Pooling(transformer.get_embedding_dimension(), pooling_mode=POOLING_MODES[args.ir_pooling])
    return SentenceTransformer(modules=[transformer, pooling], prompts=prompts(task, args))


def rank(model: SentenceTransformer, split, batch_size: int = 64, top_k: int = TOP_K) -> dict[str, dict[str, float]]:
    """{query id: {doc id: cosine score}} of the `top_k` best documents per query of a `tasks.RetrievalSplit`."""
    doc_ids, query_ids = list(split.corpus), list(split.queries)
    docs = model.encode_document([split.corpus[d] for d in doc_ids], batch_size=batch_size, convert_to_tensor=True)
    queries = model.encode_query([split.queries[q] for q in query_ids], batch_size=batch_size, convert_to_tensor=True)
    scores = model.similarity(queries.float(), docs.float())  # (n_queries, n_docs), cosine by default
    values, indices = torch.topk(scores, k=min(top_k, len(doc_ids)), dim=1)
    return {
        qid: {doc_ids[j]: float(v) for v, j in zip(values[i].tolist(), indices[i].tolist())}
        for i, qid in enumerate(query_ids)
    }


def finetune(model_path, task, args: finetune_args.FinetuneArgs, tokenizer=None) -> common.Finetuned:
    """Fine-tune a checkpoint as a sentence-embedding model on an ir task's (query, positive) pairs."""
    if args.peft != "none":
        raise ValueError(f"--peft {args.peft} covers SC/TC/QA tasks; ir task {task.name} fine-tunes fully only")
    splits = common.task_splits(task, args)
    model = build_model(model_path, task, args)
    training_args = common.training_arguments(
        args,
        task,
        cls=SentenceTransformerTrainingArguments,
        batch_sampler=BatchSamplers.NO_DUPLICATES,
        prompts={"query": prompts(task, args)["query"], "positive": prompts(task, args)["document"]},
    )
    trainer = SentenceTransformerTrainer(
        model=model,
        args=training_args,
        train_dataset=splits["train"].select_columns(["query", "positive"]),
        loss=MultipleNegativesRankingLoss(model),
    )
    return common.train(trainer)


def score(finetuned: common.Finetuned, task, args: finetune_args.FinetuneArgs) -> dict:
    """`store.result_body(...)` of a fine-tuned model's ranking for the validation and test queries: ndcg@10,
    mrr@10, recall@100, per query too, with the top-100 document ids and the judged documents."""
    if finetuned.diverged:
        return store.result_body(task.metric)
    model = finetuned.trainer.model
    model.eval()
    splits = common.task_splits(task, args)
    scores, predictions = {}, {}
    for role in ("validation", "test"):
        run = rank(model, splits[role], args.eval_batch_size)
        qrels = splits[role].qrels
        scores[role] = metrics.retrieval_scores(run, qrels)
        qids = scores[role]["per_instance"]["qid"]  # sorted query ids, the per-instance order
        predictions[role] = {
            "ranking": [metrics.ranked_ids(run.get(q, {})) for q in qids],
            "relevance": [qrels[q] for q in qids],
        }
    return store.result_body(task.metric, scores, predictions)


def save(finetuned: common.Finetuned, directory) -> None:
    """Save the sentence-transformers folder: `SentenceTransformer(directory)` (`trust_remote_code=True` for ours)
    encodes as the evaluation did; no model card: it would look Hub ids guessed from local paths up."""
    finetuned.trainer.model.save_pretrained(str(directory), create_model_card=False)
