"""Pretraining data pipeline (pretraining/data.py) on a subset of the bundle's corpus, a small BPE and small blocks."""

import gzip
import json
import os
from pathlib import Path

import datasets
import numpy as np
import pytest
import torch
from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, trainers
from torch.utils.data import DataLoader, SequentialSampler
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from pretraining.collator import PretrainingCollator, masked_positions_bound
from pretraining.data import (
    BOS,
    EOS,
    MASK,
    PAD,
    build_packed_dataset,
    cached_toy_tokenizer,
    data_fingerprint,
    load_corpus,
    load_pretraining_tokenizer,
    tokenize_corpus,
    tokenizer_hash,
    train_toy_tokenizer,
)

NUM_DOCS = 400  # ~300k tokens with a 1000-token vocabulary
VOCAB_SIZE = 1000
BLOCK_SIZE = 64
RATIO_TOKENS = 100_000  # tokens used by the statistical masking tests


@pytest.fixture(scope="module")
def corpus(data_dir):
    return load_corpus("bundle", data_dir=data_dir).select(range(NUM_DOCS))


@pytest.fixture(scope="module")
def tokenizer_dir(corpus, tmp_path_factory):
    path = tmp_path_factory.mktemp("toy_tokenizer")
    train_toy_tokenizer(corpus, VOCAB_SIZE, path)
    return path


@pytest.fixture(scope="module")
def tokenizer(tokenizer_dir):
    return load_pretraining_tokenizer(tokenizer_dir, objective="mlm")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("data_cache")


@pytest.fixture(scope="module")
def blocks(tokenizer, corpus, cache_dir):
    return build_packed_dataset(tokenizer, corpus, BLOCK_SIZE, data_seed=0, cache_dir=cache_dir)


def _ratio_blocks(blocks):
    """Enough blocks for ~100k tokens."""
    return blocks.select(range(RATIO_TOKENS // BLOCK_SIZE))


def _collate_all(blocks, collator, batch_size=8, num_workers=0):
    """Run a real DataLoader with a SequentialSampler; return the concatenated input_ids and labels."""
    loader = DataLoader(
        blocks, batch_size=batch_size, sampler=SequentialSampler(blocks), collate_fn=collator, num_workers=num_workers
    )
    batches = list(loader)
    return torch.cat([b["input_ids"] for b in batches]), torch.cat([b["labels"] for b in batches])


# --------------------------------------------------------------------------------------------------------- tokenizer
def test_toy_tokenizer_is_deterministic_with_llama3_roles(corpus, tokenizer_dir, tmp_path):
    again = train_toy_tokenizer(corpus, VOCAB_SIZE, tmp_path)
    assert (tmp_path / "tokenizer.json").read_bytes() == (tokenizer_dir / "tokenizer.json").read_bytes()
    # Documented ids: bos 0, eos 1, mask 2, pad 3 (Llama-3 roles, pad distinct from eos).
    assert (again.bos_token, again.eos_token, again.mask_token, again.pad_token) == (BOS, EOS, MASK, PAD)
    assert (again.bos_token_id, again.eos_token_id, again.mask_token_id, again.pad_token_id) == (0, 1, 2, 3)
    assert len(again) == VOCAB_SIZE
    text = corpus[0]["text"]
    ids = again(text)["input_ids"]
    assert BOS not in again.convert_ids_to_tokens(ids) and EOS not in again.convert_ids_to_tokens(ids)
    assert again.decode(ids) == text  # byte-level BPE is lossless


def test_tokenizer_round_trips_through_save_pretrained(tokenizer_dir, corpus):
    trained = PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_dir / "tokenizer.json"))
    loaded = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    text = corpus[1]["text"]
    assert loaded(text)["input_ids"] == trained(text)["input_ids"]
    assert (loaded.mask_token_id, loaded.pad_token_id, loaded.eos_token_id) == (2, 3, 1)


def test_mask_token_strips_the_space_before_it(tokenizer_dir):
    """ "is <|mask|>" -> [Ġis, <|mask|>]: no stray "Ġ" token, which pretraining never put before a mask."""
    loaded = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    mask = loaded.added_tokens_decoder[loaded.mask_token_id]
    assert (mask.lstrip, mask.rstrip, mask.special) == (True, False, True)
    text_ids = loaded("The capital is", add_special_tokens=False)["input_ids"]
    masked_ids = loaded("The capital is <|mask|>.", add_special_tokens=False)["input_ids"]
    assert masked_ids == text_ids + [loaded.mask_token_id, loaded.convert_tokens_to_ids(".")]
    assert loaded.convert_tokens_to_ids("Ġ") not in masked_ids


def _without_mask_lstrip(tokenizer_dir):
    """The toy tokenizer as it was saved before `<|mask|>` had lstrip (a copy)."""
    old = PreTrainedTokenizerFast.from_pretrained(str(tokenizer_dir))
    old.add_special_tokens({"mask_token": AddedToken(MASK, lstrip=False, rstrip=False, normalized=False, special=True)})
    return old


def test_mask_lstrip_changes_neither_packed_blocks_nor_tokenizer_identity(
    tokenizer_dir, tokenizer, corpus, blocks, tmp_path
):
    """The flag only matters where `<|mask|>` is matched as a token; pretraining keeps special-token text as text, so
    blocks built before the change are byte-identical, and the tokenizer hash (caches, resume) is unchanged."""
    old = _without_mask_lstrip(tokenizer_dir)
    assert old.backend_tokenizer.to_str() != tokenizer.backend_tokenizer.to_str()
    assert old("is <|mask|>")["input_ids"] != tokenizer("is <|mask|>")["input_ids"]  # the flag does act on text
    assert tokenizer_hash(old) == tokenizer_hash(tokenizer)
    old_blocks = build_packed_dataset(old, corpus, BLOCK_SIZE, data_seed=0, cache_dir=tmp_path)  # tokenized again
    np.testing.assert_array_equal(old_blocks[:]["input_ids"], blocks[:]["input_ids"])
    assert data_fingerprint(old_blocks) == data_fingerprint(blocks)
    literal = datasets.Dataset.from_dict({"text": [f"The capital is {MASK}. {MASK}{MASK} x {EOS}"]})
    assert (
        tokenize_corpus(old, literal, tmp_path / "old")[:]["input_ids"]
        == tokenize_corpus(tokenizer, literal, tmp_path / "new")[:]["input_ids"]
    )


def _save_tokenizer_without_mask(corpus, path, pad_token):
    """A tokenizer whose vocabulary has bos/eos only (no <|mask|>, no <|pad|>), padding with `pad_token`."""
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=[BOS, EOS], show_progress=False)
    backend.train_from_iterator(corpus.select(range(20))["text"], trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token=BOS, eos_token=EOS, pad_token=pad_token)
    tokenizer.save_pretrained(str(path))


def test_load_tokenizer_replaces_eos_padding(tokenizer_dir, tmp_path):
    padded_with_eos = PreTrainedTokenizerFast.from_pretrained(str(tokenizer_dir))
    padded_with_eos.pad_token = EOS
    padded_with_eos.save_pretrained(str(tmp_path))
    tokenizer = load_pretraining_tokenizer(tmp_path, objective="clm")
    assert tokenizer.pad_token == PAD and tokenizer.pad_token_id != tokenizer.eos_token_id


def test_load_tokenizer_refuses_mlm_without_mask(corpus, tmp_path):
    _save_tokenizer_without_mask(corpus, tmp_path / "no_mask", pad_token=None)
    with pytest.raises(ValueError, match="no mask token"):
        load_pretraining_tokenizer(tmp_path / "no_mask", objective="mlm")
    with pytest.raises(ValueError, match="non-eos pad"):  # no candidate pad token in that vocabulary either
        load_pretraining_tokenizer(tmp_path / "no_mask", objective="clm")
    with pytest.raises(ValueError, match="objective"):
        load_pretraining_tokenizer(tmp_path / "no_mask", objective="mlm50")


# ----------------------------------------------------------------------------------------------------------- packing
def test_packed_blocks_reproduce_the_eos_separated_stream(tokenizer, corpus, blocks, cache_dir):
    tokenized = tokenize_corpus(tokenizer, corpus, cache_dir)
    docs = [np.asarray(ids) for ids in tokenized[:]["input_ids"]]
    assert len(docs) == NUM_DOCS and all(doc[-1] == tokenizer.eos_token_id for doc in docs)
    assert all((doc[:-1] != tokenizer.eos_token_id).all() for doc in docs)
    stream = np.concatenate(docs)
    num_blocks = len(stream) // BLOCK_SIZE
    assert len(blocks) == num_blocks and len(stream) % BLOCK_SIZE != 0  # the incomplete tail is dropped
    input_ids = blocks[:]["input_ids"]
    assert input_ids.shape == (num_blocks, BLOCK_SIZE)
    assert blocks.features["input_ids"].feature.dtype == "int32"  # stored as int32 on disk (Llama-3: 128k ids)
    assert (blocks[:]["block_index"] == np.arange(num_blocks)).all()
    in_stream_order = input_ids[np.argsort(blocks[:]["stream_index"])]
    np.testing.assert_array_equal(in_stream_order.ravel(), stream[: num_blocks * BLOCK_SIZE])
    assert not (blocks[:]["stream_index"] == np.arange(num_blocks)).all()  # the data seed did shuffle the blocks
    assert type(blocks.data).__name__ == "MemoryMappedTable"  # bounded memory: read from disk, not held in RAM


def test_literal_special_token_text_stays_text(tokenizer, tmp_path):
    corpus = datasets.Dataset.from_dict({"text": [f"before {EOS} after {MASK}", ""]})
    ids = tokenize_corpus(tokenizer, corpus, tmp_path)[:]["input_ids"]
    assert ids[0].count(tokenizer.eos_token_id) == 1 and ids[0][-1] == tokenizer.eos_token_id
    assert tokenizer.mask_token_id not in ids[0]
    assert list(ids[1]) == [tokenizer.eos_token_id]  # an empty document still ends with eos


def test_same_data_seed_gives_identical_blocks_other_seed_reorders(tokenizer, corpus, blocks, cache_dir, tmp_path):
    rebuilt = build_packed_dataset(tokenizer, corpus, BLOCK_SIZE, data_seed=0, cache_dir=tmp_path)
    packed = [f["filename"] for f in blocks.cache_files] + [f["filename"] for f in rebuilt.cache_files]
    assert packed[0] != packed[1]  # two separate builds, not one cached file read twice
    assert open(packed[0], "rb").read() == open(packed[1], "rb").read()
    assert data_fingerprint(rebuilt) == data_fingerprint(blocks)

    reordered = build_packed_dataset(tokenizer, corpus, BLOCK_SIZE, data_seed=1, cache_dir=cache_dir)
    assert not (reordered[:]["stream_index"] == blocks[:]["stream_index"]).all()
    assert sorted(reordered[:]["stream_index"]) == sorted(blocks[:]["stream_index"])  # same blocks, other order
    assert data_fingerprint(reordered) != data_fingerprint(blocks)


def test_tokenization_with_several_processes_gives_the_same_blocks(tokenizer, corpus, tmp_path):
    small = corpus.select(range(60))
    one = build_packed_dataset(tokenizer, small, BLOCK_SIZE, data_seed=3, cache_dir=tmp_path / "one")
    two = build_packed_dataset(tokenizer, small, BLOCK_SIZE, data_seed=3, cache_dir=tmp_path / "two", num_proc=2)
    np.testing.assert_array_equal(one[:]["input_ids"], two[:]["input_ids"])


def test_cached_blocks_are_reused(tokenizer, corpus, blocks, cache_dir):
    path = blocks.cache_files[0]["filename"]
    mtime = os.stat(path).st_mtime_ns
    again = build_packed_dataset(tokenizer, corpus, BLOCK_SIZE, data_seed=0, cache_dir=cache_dir)
    assert again.cache_files[0]["filename"] == path and os.stat(path).st_mtime_ns == mtime


def test_a_rebuild_removes_what_its_killed_writer_left(tokenizer, corpus, tmp_path):
    small = corpus.select(range(40))
    first = build_packed_dataset(tokenizer, small, BLOCK_SIZE, data_seed=0, cache_dir=tmp_path / "cache")
    packed = Path(first.cache_files[0]["filename"])
    expected = first[:]["input_ids"]
    del first
    packed.unlink()
    half = packed.with_name(f".{packed.name}.k1ll3d00.tmp")  # a build killed mid-write (SIGKILL: no cleanup)
    half.write_bytes(b"ARROW1 half a file")
    again = build_packed_dataset(tokenizer, small, BLOCK_SIZE, data_seed=0, cache_dir=tmp_path / "cache")
    assert not half.exists() and [p.name for p in packed.parent.glob(".*.tmp")] == []
    np.testing.assert_array_equal(again[:]["input_ids"], expected)
    staging = tmp_path / ".toy-tokenizer.k1ll3d00.tmp"  # a toy tokenizer save killed mid-write
    staging.mkdir()
    (staging / "tokenizer.json").write_text('{"version": ')
    cached_toy_tokenizer(small, 300, tmp_path / "toy-tokenizer")
    assert not staging.exists() and (tmp_path / "toy-tokenizer" / "tokenizer.json").is_file()


@pytest.mark.parametrize("cut", ["half", "all", "end mark"])
def test_a_truncated_packed_cache_is_rebuilt(tokenizer, corpus, tmp_path, cut):
    small = corpus.select(range(40))
    first = build_packed_dataset(tokenizer, small, BLOCK_SIZE, data_seed=0, cache_dir=tmp_path)
    packed = Path(first.cache_files[0]["filename"])
    expected = first[:]["input_ids"]
    del first
    data = packed.read_bytes()
    keep = {"half": len(data) // 2, "all": 0, "end mark": len(data) - 8}[cut]  # "end mark": readable, but cut
    packed.write_bytes(data[:keep])  # a copy cut short (full disk, interrupted sync)
    again = build_packed_dataset(tokenizer, small, BLOCK_SIZE, data_seed=0, cache_dir=tmp_path)
    assert packed.stat().st_size == len(data)
    np.testing.assert_array_equal(again[:]["input_ids"], expected)


# ----------------------------------------------------------------------------------------------------------- collator
def test_clm_and_mlm_see_the_same_blocks_in_the_same_order(tokenizer, blocks):
    subset = blocks.select(range(96))
    clm_ids, clm_labels = _collate_all(subset, PretrainingCollator("clm", tokenizer), batch_size=4)
    mlm_ids, mlm_labels = _collate_all(subset, PretrainingCollator("mlm", tokenizer), batch_size=4)
    assert torch.equal(clm_ids, torch.from_numpy(subset[:]["input_ids"]).long())
    assert torch.equal(clm_labels, clm_ids)  # the model shifts the labels itself
    selected = mlm_labels != -100
    assert torch.equal(torch.where(selected, mlm_labels, mlm_ids), clm_ids)  # unmasking gives back the CLM input
    # PFS: switching the collator mid-stream still reads the next blocks of the same sequence.
    switched = [
        PretrainingCollator("clm" if i < 10 else "mlm", tokenizer)([subset[j] for j in range(4 * i, 4 * i + 4)])
        for i in range(20)
    ]
    assert torch.equal(torch.cat([b["input_ids"] for b in switched[10:]]), mlm_ids[40:80])


@pytest.mark.parametrize("ratio", [0.3, 0.4])
def test_mlm_masks_the_ratio_of_non_special_tokens_with_mask_only(tokenizer, blocks, ratio):
    subset = _ratio_blocks(blocks)
    original = torch.from_numpy(subset[:]["input_ids"]).long()
    input_ids, labels = _collate_all(subset, PretrainingCollator("mlm", tokenizer, mlm_probability=ratio), 64)
    selected = labels != -100
    special = original == tokenizer.eos_token_id  # the only special token inside packed blocks
    assert special.sum() > 100 and not selected[special].any()
    assert torch.equal(input_ids[special], original[special])
    n = int((~special).sum())
    share = selected.sum().item() / n
    assert abs(share - ratio) < 4 * (ratio * (1 - ratio) / n) ** 0.5, share
    assert (input_ids[selected] == tokenizer.mask_token_id).all()  # default: all <|mask|>, as the original code
    assert torch.equal(labels[selected], original[selected]) and torch.equal(input_ids[~selected], original[~selected])


def test_mask_random_keep_split(tokenizer, blocks):
    subset = _ratio_blocks(blocks)
    original = torch.from_numpy(subset[:]["input_ids"]).long()
    collator = PretrainingCollator("mlm", tokenizer, 0.4, mask_replace_prob=0.8, random_replace_prob=0.1)
    input_ids, labels = _collate_all(subset, collator, 64)
    selected = labels != -100
    n = int(selected.sum())
    masked = (input_ids == tokenizer.mask_token_id) & selected
    changed = (input_ids != original) & selected & ~masked
    kept = (input_ids == original) & selected
    tolerance = 4 * (0.1 * 0.9 / n) ** 0.5
    assert abs(masked.sum().item() / n - 0.8) < 4 * (0.8 * 0.2 / n) ** 0.5
    # A random draw equals the original token with probability ~1/996, counted as "kept".
    assert abs(changed.sum().item() / n - 0.1) < tolerance + 0.001
    assert abs(kept.sum().item() / n - 0.1) < tolerance + 0.001
    assert int(input_ids[changed].min()) > 3  # random replacements are never special tokens (ids 0-3)


def test_masks_do_not_depend_on_workers_or_batch_size(tokenizer, blocks):
    subset = blocks.select(range(64))
    collator = PretrainingCollator("mlm", tokenizer, 0.4, mask_replace_prob=0.8, random_replace_prob=0.1, seed=7)
    single = _collate_all(subset, collator, batch_size=4, num_workers=0)
    workers = _collate_all(subset, collator, batch_size=8, num_workers=2)
    assert torch.equal(single[0], workers[0]) and torch.equal(single[1], workers[1])
    reseeded = _collate_all(subset, PretrainingCollator("mlm", tokenizer, 0.4, 0.8, 0.1, seed=8), batch_size=8)
    assert not torch.equal(single[1], reseeded[1])


def test_fixed_positions_list_every_masked_position_and_leave_masks_unchanged(tokenizer, blocks):
    """`positions_per_block` adds `mlm_positions` (B, K): each row's masked positions, padded with -1. The masks are
    today's; a batch with a row over K carries no positions (the model's exact path), never a truncated list."""
    assert masked_positions_bound(2048, 0.4) == 908 and masked_positions_bound(64, 0.4) == 42  # ceil(Tp + 4 sd)
    assert masked_positions_bound(8, 0.5, num_std=100) == 8  # never more than the block
    examples = [blocks[i] for i in range(8)]
    plain = PretrainingCollator("mlm", tokenizer, 0.4, 0.8, 0.1, seed=3)(examples)
    fixed = PretrainingCollator("mlm", tokenizer, 0.4, 0.8, 0.1, seed=3, positions_per_block=42)(examples)
    assert torch.equal(plain["input_ids"], fixed["input_ids"]) and torch.equal(plain["labels"], fixed["labels"])
    positions = fixed["mlm_positions"]
    assert positions.shape == (8, 42) and positions.dtype == torch.long
    for row, labels in zip(positions, fixed["labels"]):
        masked = (labels != -100).nonzero().flatten()
        assert torch.equal(row[: len(masked)], masked) and (row[len(masked) :] == -1).all()
    most = int((plain["labels"] != -100).sum(dim=1).max())
    fits = PretrainingCollator("mlm", tokenizer, 0.4, 0.8, 0.1, seed=3, positions_per_block=most)(examples)
    assert "mlm_positions" in fits
    over = PretrainingCollator("mlm", tokenizer, 0.4, 0.8, 0.1, seed=3, positions_per_block=most - 1)(examples)
    assert "mlm_positions" not in over and torch.equal(over["labels"], plain["labels"])


# --------------------------------------------------------------------------------------------------------- bad input
def test_bad_corpus_inputs_raise_one_line_errors(tmp_path, data_dir, tokenizer, corpus):
    empty = tmp_path / "train.jsonl"
    empty.write_text("")
    with pytest.raises(ValueError, match="empty"):
        load_corpus(str(empty))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_corpus(str(tmp_path / "missing" / "train.jsonl.gz"))
    with pytest.raises(FileNotFoundError, match="valid"):
        load_corpus(str(tmp_path), split="valid")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_corpus("bundle", data_dir=data_dir, split="test")
    with pytest.raises(ValueError, match="fewer than one block"):
        build_packed_dataset(tokenizer, corpus.select(range(1)), 100_000, 0, tmp_path / "too_small")
    assert not list((tmp_path / "too_small").glob("packed-*"))  # nothing half-written


def test_local_corpus_files_load(tmp_path):
    with gzip.open(tmp_path / "train.jsonl.gz", "wt") as f:
        f.writelines(json.dumps({"id": i, "text": f"document {i}"}) + "\n" for i in range(3))
    (tmp_path / "lines.txt").write_text("first document\nsecond document\n")
    assert load_corpus(str(tmp_path))[:]["text"] == ["document 0", "document 1", "document 2"]
    assert load_corpus(str(tmp_path / "lines.txt")).column_names == ["text"]
    assert len(load_corpus(str(tmp_path / "lines.txt"))) == 2


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(objective="mlm50"), "objective"),
        (dict(objective="mlm", mlm_probability=0.0), "mlm_probability"),
        (dict(objective="mlm", mlm_probability=1.5), "mlm_probability"),
        (dict(objective="mlm", mask_replace_prob=0.8, random_replace_prob=0.3), "within"),
    ],
)
def test_bad_collator_arguments_raise(tokenizer, kwargs, message):
    with pytest.raises(ValueError, match=message):
        PretrainingCollator(tokenizer=tokenizer, **kwargs)


def test_mlm_collator_refuses_tokenizer_without_mask(corpus, tmp_path):
    _save_tokenizer_without_mask(corpus, tmp_path, pad_token=None)
    no_mask = AutoTokenizer.from_pretrained(str(tmp_path))
    PretrainingCollator("clm", no_mask)  # CLM needs no mask token
    with pytest.raises(ValueError, match="no mask token"):
        PretrainingCollator("mlm", no_mask)


def test_mlm_collator_needs_block_index(tokenizer, blocks):
    example = {"input_ids": blocks[0]["input_ids"]}  # what the Trainer passes if remove_unused_columns=True
    with pytest.raises(ValueError, match="remove_unused_columns=False"):
        PretrainingCollator("mlm", tokenizer)([example])


def test_bundle_more_is_the_disjoint_companion_corpus_with_a_train_split_only(tmp_path):
    """`bundle_more` reads `pretrain/enwiki_more/` (the horizon study's second source, after `bundle`); it has no
    validation split, and asking for one names the missing file."""
    from core.paths import resolve_data_dir
    from pretraining.data import BUNDLE_CORPORA, load_corpora

    bundle = resolve_data_dir(None)
    with gzip.open(bundle / BUNDLE_CORPORA["bundle_more"] / "train.jsonl.gz", "rt") as f:
        first_more = json.loads(f.readline())["text"]
    with gzip.open(bundle / BUNDLE_CORPORA["bundle"] / "train.jsonl.gz", "rt") as f:
        first = json.loads(f.readline())["text"]
    assert first != first_more
    with pytest.raises(FileNotFoundError, match="enwiki_more/valid.jsonl.gz does not exist"):
        load_corpora("bundle,bundle_more", split="valid", cache_dir=tmp_path)
