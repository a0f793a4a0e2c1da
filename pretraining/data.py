"""Pretraining data: corpus, tokenizers and packed blocks (`docs/protocol.md` "Pretraining").

Every objective reads the same blocks in the same order; only the collator (`pretraining.collator`) changes:

    corpus = load_corpus("bundle")                            # or a local path, or "HuggingFaceFW/fineweb-edu"
    tokenizer = train_toy_tokenizer(corpus, 8192, out_dir)    # toy; paper: load_pretraining_tokenizer(path, "mlm")
    blocks = build_packed_dataset(tokenizer, corpus, block_size=2048, data_seed=0, cache_dir="cache/")

The toy BPE has Llama-3's pre-tokenizer regex and special-token roles at ids bos `<|begin_of_text|>` 0, eos
`<|end_of_text|>` 1, mask `<|mask|>` 2, pad `<|pad|>` 3 (Llama-3: 128000, 128001, 128002; pad differs from eos, or eos
would be treated as padding). Blocks have columns "input_ids" (block_size int32), "block_index" (row = position in the
fixed order) and "stream_index" (position in the unshuffled token stream), numpy format, memory-mapped from
`cache_dir`; `data_fingerprint(blocks)` names them beside checkpoints. The Trainer reads them sequentially with
`remove_unused_columns=False`: masks depend only on (collator seed, block_index), and a block read again in a later
epoch gets a fresh mask, its `block_index` being its position in the run's stream (`BlockStream`).
"""

import hashlib
import logging
import os
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa
import torch
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerBase, PreTrainedTokenizerFast

from core import artifacts, cli, model_folders
from core.paths import is_hub_id, is_local_path, resolve_data_dir
from modeling_eurobert.tokenizer_settings import configure_tokenizer

logger = logging.getLogger(__name__)

# offline stand-ins, relative to the data bundle: "bundle" (enwiki: train and valid) and "bundle_more" (3x more
# documents of the same dump, disjoint from enwiki; train only) for runs that must not repeat data
BUNDLE_CORPORA = {"bundle": Path("pretrain") / "enwiki", "bundle_more": Path("pretrain") / "enwiki_more"}
OBJECTIVES = ("clm", "mlm")
BOS, EOS, MASK, PAD = "<|begin_of_text|>", "<|end_of_text|>", "<|mask|>", "<|pad|>"
TOY_SPECIAL_TOKENS = (BOS, EOS, MASK, PAD)  # trained first, so their ids are 0, 1, 2, 3
# Non-eos pad tokens tried in order when a loaded tokenizer has no pad or pads with eos. Llama-3.1 ships
# <|finetune_right_pad_id|> (128004); <|reserved_special_token_1|> is 128003 in both Llama-3 and 3.1.
PAD_CANDIDATES = (PAD, "<|finetune_right_pad_id|>", "<|reserved_special_token_1|>")
# Llama-3's pre-tokenizer split (tokenizer.json of meta-llama/Meta-Llama-3-8B), so toy BPE words look like the paper's.
LLAMA3_SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_BUILDERS = {".jsonl": "json", ".json": "json", ".txt": "text"}
PACKING_VERSION = 1  # bump when the packed layout changes, so old caches are not reused
_BLANK_CHECK_DOCS = 10_000  # documents read to refuse an all-blank corpus before tokenizing it
_BLOCKS_PER_WRITE = 1024  # rows per arrow record batch when writing packed blocks (bounded memory)


# ----------------------------------------------------------------------------------------------------------- corpus
def load_corpus(
    source: str = "bundle",
    data_dir: str | os.PathLike | None = None,
    split: str = "train",
    name: str | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> datasets.Dataset:
    """The pretraining corpus, one document per row, as a memory-mapped `datasets.Dataset` with one column "text".

    Args:
        source: "bundle" (the offline bundle's Wikipedia, `<data_dir>/pretrain/enwiki/{split}.jsonl.gz`),
            "bundle_more" (its disjoint 3x larger companion, train only), a local .jsonl/.json/.txt file (optionally
            .gz; .txt: one document per line) or a directory of `<split>.*` files, or a Hub dataset id (online).
        data_dir: data bundle directory for "bundle" (flag > $MLM_VS_CLM_DATA > ../shared/data).
        split: "train" or "valid" for the bundle and local directories; any split expression for Hub datasets.
        name: Hub dataset config name (e.g. "sample-100BT"); only for Hub ids.
        cache_dir: `datasets` cache directory for the Arrow copy (default: the `datasets` cache).
    """
    if source in BUNDLE_CORPORA:
        files = [resolve_data_dir(data_dir) / BUNDLE_CORPORA[source] / f"{split}.jsonl.gz"]
    elif is_local_path(source) or not is_hub_id(source):
        files = _local_corpus_files(Path(source).expanduser(), split)
    else:
        try:
            corpus = datasets.load_dataset(source, name=name, split=split, cache_dir=cache_dir)
        except (OSError, ValueError, ConnectionError) as error:
            raise model_folders.hub_load_error(source, "the corpus", error) from None
        return _only_text(corpus, source)
    for path in files:
        if not path.is_file():
            raise FileNotFoundError(f"corpus file {path} does not exist; pass an existing file or --data_dir")
        if path.stat().st_size == 0:
            raise ValueError(f"corpus file {path} is empty; give a corpus with at least one document")
    builders = {_BUILDERS[_corpus_suffix(path)] for path in files}
    if len(builders) > 1:
        raise ValueError(f"corpus files mix formats {sorted(builders)}; keep one format per corpus: {files}")
    corpus = datasets.load_dataset(
        builders.pop(), data_files=[str(p) for p in files], split="train", cache_dir=cache_dir
    )
    return _only_text(corpus, source)


def load_corpora(
    sources: str, data_dir=None, split: str = "train", name: str | None = None, cache_dir=None
) -> datasets.Dataset:
    """One or several corpora, concatenated in the order given: `sources` holds comma-separated entries, each as
    `load_corpus` takes it (a Hub entry may name its config after a colon, `HuggingFaceFW/fineweb-edu:sample-100BT`,
    else `name` applies); the other arguments are `load_corpus`'s."""
    entries = cli.split_list(sources)
    if not entries:
        raise ValueError("corpus_source is empty; give 'bundle', a local path or a Hub id (several: comma-separated)")
    corpora = []
    for entry in entries:
        source, _, config = entry.partition(":") if is_hub_id(entry.partition(":")[0]) else (entry, "", "")
        corpora.append(load_corpus(source, data_dir, split, config or name, cache_dir))
    return corpora[0] if len(corpora) == 1 else datasets.concatenate_datasets(corpora)


def _corpus_suffix(path: Path) -> str:
    """The format suffix of a corpus file, ignoring a trailing .gz; '' when unsupported."""
    suffixes = [s for s in path.suffixes if s != ".gz"]
    return suffixes[-1] if suffixes and suffixes[-1] in _BUILDERS else ""


def _local_corpus_files(path: Path, split: str) -> list[Path]:
    """One supported file, or the files of a directory named `<split>.<ext>[.gz]` (sorted)."""
    if not path.exists():
        raise FileNotFoundError(f"corpus path {path} does not exist; pass an existing file or directory")
    if path.is_file():
        if not _corpus_suffix(path):
            raise ValueError(f"corpus file {path} is not .jsonl/.json/.txt (optionally .gz); convert it first")
        return [path]
    files = sorted(p for p in path.iterdir() if p.name.split(".")[0] == split and _corpus_suffix(p))
    if not files:
        raise FileNotFoundError(f"no {split}.jsonl/.json/.txt[.gz] file in corpus directory {path}; add one")
    return files


def _only_text(corpus: datasets.Dataset, source: str) -> datasets.Dataset:
    """Keep the "text" column; refuse a corpus without one or without documents."""
    if "text" not in corpus.column_names:
        raise ValueError(f"corpus {source} has no 'text' column (columns: {corpus.column_names}); rename it to 'text'")
    if len(corpus) == 0:
        raise ValueError(f"corpus {source} has no documents; give a corpus with at least one document")
    head = corpus.select(range(min(len(corpus), _BLANK_CHECK_DOCS)))["text"]
    if not any(text and text.strip() for text in head):
        raise ValueError(
            f"corpus {source} holds only blank documents (checked the first {len(head)}); give a corpus "
            "with text in its 'text' column"
        )
    return corpus.select_columns(["text"])


# ------------------------------------------------------------------------------------------------------- tokenizers
TOY_MIN_VOCAB = 256 + len(TOY_SPECIAL_TOKENS) + 1  # the byte alphabet, the special tokens and one merge


def train_toy_tokenizer(
    corpus: datasets.Dataset, vocab_size: int, output_dir: str | os.PathLike
) -> PreTrainedTokenizerFast:
    """Train the toy scales' byte-level BPE on `corpus` (a "text" column) and save it to `output_dir`.

    Deterministic: the same corpus and `vocab_size` (the 4 special tokens and 256 byte symbols included; toy: 8k-16k)
    give a byte-identical tokenizer.json. It adds no bos/eos itself (packing appends eos to every document);
    `<|mask|>` strips the space before it, as RoBERTa's `<mask>`.
    """
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    if vocab_size < TOY_MIN_VOCAB:
        raise ValueError(
            f"vocab_size={vocab_size} is too small for byte-level BPE; use at least {TOY_MIN_VOCAB} (toy: 8k-16k)"
        )
    if "text" not in corpus.column_names or len(corpus) == 0:
        raise ValueError("train_toy_tokenizer needs a corpus with a 'text' column and at least one document")
    backend = Tokenizer(models.BPE())
    # Llama-3 splits with its regex, then maps bytes to printable symbols (no regex of ByteLevel's own).
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(LLAMA3_SPLIT_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(TOY_SPECIAL_TOKENS),
        initial_alphabet=alphabet,
        min_frequency=2,
        show_progress=False,
    )
    texts = (batch["text"] for batch in corpus.select_columns(["text"]).iter(batch_size=1000))  # bounded memory
    backend.train_from_iterator(texts, trainer=trainer, length=len(corpus))
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token=BOS, eos_token=EOS, mask_token=MASK, pad_token=PAD
    )
    configure_tokenizer(tokenizer)  # mask lstrip; model_max_length is set by the model that ships it
    with artifacts.atomic_directory(output_dir) as staging:  # a kill mid-save never leaves a truncated tokenizer
        tokenizer.save_pretrained(str(staging))
    return tokenizer


def cached_toy_tokenizer(corpus: datasets.Dataset, vocab_size: int, output_dir: str | os.PathLike):
    """The toy BPE saved in `output_dir`, trained there first when it is absent or unreadable (a cache)."""
    output_dir = Path(output_dir)
    if output_dir.is_dir():
        try:
            return PreTrainedTokenizerFast.from_pretrained(str(output_dir))
        except (OSError, ValueError, TypeError) as error:  # a truncated tokenizer.json is a JSONDecodeError
            logger.warning("toy tokenizer cache %s is unreadable (%s): training it again", output_dir, error)
    return train_toy_tokenizer(corpus, vocab_size, output_dir)


def load_pretraining_tokenizer(
    name_or_path: str | os.PathLike, objective: str | None = None
) -> PreTrainedTokenizerBase:
    """A fast tokenizer (directory or Hub id) with eos, a non-eos pad and, for `objective` "mlm", a mask token.

    Paper scale: the Llama-3 tokenizer with `<|mask|>` = 128002 (e.g. EuroBERT's). A vocabulary's `<|mask|>` becomes
    the mask token if there is none. With no pad, or eos as pad (eos would then be treated as padding), pad becomes
    the first of `PAD_CANDIDATES` in the vocabulary, logged. (Fine-tuning's `load_finetuning_tokenizer` does the
    opposite: it pads with eos, as the attention mask hides padded positions there.)
    """
    if objective is not None and objective not in OBJECTIVES:
        raise ValueError(f"objective={objective!r} is unknown; use one of {OBJECTIVES}")
    source = model_folders.local_or_hub(name_or_path, "tokenizer")
    if Path(source).is_dir() and not any((Path(source) / name).is_file() for name in model_folders.TOKENIZER_FILES):
        raise ValueError(
            f"{source} holds no tokenizer ({' / '.join(model_folders.TOKENIZER_FILES)}); pass --tokenizer_name_or_path"
        )
    model_folders.check_json_files(source)  # a corrupt tokenizer file is named
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
    except (OSError, ValueError) as error:
        raise model_folders.hub_load_error(source, "the tokenizer", error) from None
    if not tokenizer.is_fast:
        raise ValueError(f"tokenizer {name_or_path} is not a fast tokenizer; packing needs a tokenizers-backed one")
    if tokenizer.eos_token_id is None:
        raise ValueError(f"tokenizer {name_or_path} has no eos token; packing appends eos to every document")
    vocab = tokenizer.get_vocab()
    if tokenizer.mask_token is None and MASK in vocab:
        tokenizer.mask_token = MASK
    if objective == "mlm" and tokenizer.mask_token_id is None:
        raise ValueError(f"tokenizer {name_or_path} has no mask token for MLM; use one with {MASK} (Llama-3: 128002)")
    if tokenizer.pad_token_id is None or tokenizer.pad_token_id == tokenizer.eos_token_id:
        candidate = next((token for token in PAD_CANDIDATES if token in vocab), None)
        if candidate is None:
            raise ValueError(f"tokenizer {name_or_path} has no non-eos pad token; add one of {PAD_CANDIDATES}")
        logger.warning(
            "tokenizer %s: pad token %r -> %r (pad must differ from eos)", name_or_path, tokenizer.pad_token, candidate
        )
        tokenizer.pad_token = candidate
    return tokenizer


# ---------------------------------------------------------------------------------------------- token budget
ESTIMATE_SAMPLE = 2000  # documents tokenized to estimate a corpus's tokens


def estimate_tokens(
    corpus: datasets.Dataset, tokenizer: PreTrainedTokenizerBase, sample: int = ESTIMATE_SAMPLE
) -> dict:
    """Tokens (eos included) the corpus will yield, {"documents", "sampled", "tokens_per_document", "tokens"}, from
    `sample` evenly spaced documents tokenized: cheap at any size, so a run that cannot meet its budget is refused
    before the corpus is tokenized."""
    rows = sorted({int(i) for i in np.linspace(0, len(corpus) - 1, num=min(len(corpus), sample))})
    return _estimate(len(corpus), list(corpus.select(rows)["text"]), tokenizer)


def estimate_hub_tokens(
    source: str, name: str | None, split: str, tokenizer, sample: int = ESTIMATE_SAMPLE
) -> dict | None:
    """`estimate_tokens` for a Hub corpus before downloading it: documents from the dataset's metadata, tokens per
    document from the first `sample` streamed; None when the Hub gives no document count for that split."""
    builder = datasets.load_dataset_builder(source, name)
    splits = builder.info.splits or {}
    if split not in splits or not splits[split].num_examples:
        return None
    texts = [row["text"] for row in datasets.load_dataset(source, name, split=split, streaming=True).take(sample)]
    return _estimate(splits[split].num_examples, texts, tokenizer)


def _estimate(n: int, texts: list[str], tokenizer) -> dict:
    per_document = float(np.mean([len(ids) for ids in _tokenize_batch({"text": texts}, tokenizer)["input_ids"]]))
    return {"documents": n, "sampled": len(texts), "tokens_per_document": per_document, "tokens": int(n * per_document)}


class BlockStream(torch.utils.data.Dataset):
    """`length` blocks of the fixed order from position `start`, wrapping around for runs of several epochs: item k
    is block `(start + k) % len(blocks)` with `block_index = start + k` (a fresh MLM mask in a later epoch)."""

    def __init__(self, blocks: datasets.Dataset, start: int, length: int):
        self.blocks, self.start, self.length = blocks.select_columns(["input_ids"]), start, length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, k: int) -> dict:
        if not 0 <= k < self.length:
            raise IndexError(k)
        position = self.start + k
        return {"input_ids": self.blocks[position % len(self.blocks)]["input_ids"], "block_index": position}


# -------------------------------------------------------------------------------------------------------- packing
def build_packed_dataset(
    tokenizer: PreTrainedTokenizerBase,
    corpus: datasets.Dataset,
    block_size: int,
    data_seed: int,
    cache_dir: str | os.PathLike,
    num_proc: int = 1,
) -> datasets.Dataset:
    """Tokenize, append eos to every document, pack greedily into `block_size` blocks, fix their order by `data_seed`.

    Documents are concatenated in corpus order and cut into blocks (documents split across blocks, no padding, the
    incomplete tail dropped); the blocks are permuted with `np.random.default_rng(data_seed)` and written in that
    order. Tokens and blocks are Arrow files under `cache_dir`, named by a hash of (tokenizer, corpus fingerprint,
    block_size, data_seed) and reused; memory stays bounded (memory-mapped reads, a few blocks written at a time).
    Literal special-token strings in documents stay plain text. Returns the blocks (module docstring).
    """
    if not getattr(tokenizer, "is_fast", False) or tokenizer.eos_token_id is None:
        raise ValueError(
            "build_packed_dataset needs a fast tokenizer with an eos token (see load_pretraining_tokenizer)"
        )
    if "text" not in corpus.column_names or len(corpus) == 0:
        raise ValueError("build_packed_dataset needs a corpus with a 'text' column and at least one document")
    if not isinstance(block_size, int) or block_size < 2:
        raise ValueError(f"block_size={block_size!r} must be an integer >= 2 (paper: 2048)")
    if not isinstance(data_seed, int) or data_seed < 0:
        raise ValueError(f"data_seed={data_seed!r} must be a non-negative integer")
    if num_proc < 1:
        raise ValueError(f"num_proc={num_proc} must be >= 1")
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    tokenizer_key = tokenizer_hash(tokenizer)
    packed_key = _hash(tokenizer_key, corpus._fingerprint, block_size, data_seed, PACKING_VERSION)
    packed_path = cache_dir / f"packed-{packed_key}.arrow"
    blocks = _read_packed_cache(packed_path)
    if blocks is None:
        tokenized = tokenize_corpus(tokenizer, corpus, cache_dir, num_proc, tokenizer_key)
        _write_packed_blocks(tokenized, block_size, data_seed, packed_path)
        blocks = datasets.Dataset.from_file(str(packed_path))
    return blocks.with_format("numpy")


_ARROW_END_OF_STREAM = b"\xff\xff\xff\xff\x00\x00\x00\x00"  # the last 8 bytes of a finished Arrow stream


def _read_packed_cache(path: Path) -> datasets.Dataset | None:
    """The packed blocks cached at `path`, or None when there are none to reuse: absent, or unreadable (a copy cut
    short, a full disk), which is then removed so that it is written again. A finished stream ends with Arrow's
    end-of-stream mark, so a file cut at a record-batch boundary (readable, but short of blocks) is caught too."""
    if not path.exists():
        return None
    try:
        with open(path, "rb") as file:
            file.seek(max(0, path.stat().st_size - len(_ARROW_END_OF_STREAM)))
            if file.read() != _ARROW_END_OF_STREAM:
                raise ValueError("it does not end with the Arrow end-of-stream mark")
        return datasets.Dataset.from_file(str(path))
    except (OSError, ValueError, pa.ArrowException) as error:  # pa.ArrowInvalid is a ValueError
        logger.warning("packed data cache %s is unreadable (%s): removing it and packing again", path, error)
        path.unlink(missing_ok=True)
        return None


def tokenize_corpus(
    tokenizer: PreTrainedTokenizerBase,
    corpus: datasets.Dataset,
    cache_dir: str | os.PathLike,
    num_proc: int = 1,
    tokenizer_key: str | None = None,
) -> datasets.Dataset:
    """One "input_ids" row per document (int32, no bos, ending with eos; literal special-token text kept as text),
    in corpus order, cached under `cache_dir`; `tokenizer_key` is a precomputed `tokenizer_hash(tokenizer)`."""
    tokenizer_key = tokenizer_key or tokenizer_hash(tokenizer)
    key = _hash(tokenizer_key, corpus._fingerprint, PACKING_VERSION)
    return corpus.select_columns(["text"]).map(
        _tokenize_batch,
        batched=True,
        num_proc=num_proc if num_proc > 1 else None,
        remove_columns=["text"],
        fn_kwargs={"tokenizer": tokenizer},
        features=datasets.Features({"input_ids": datasets.List(datasets.Value("int32"))}),
        cache_file_name=str(Path(cache_dir) / f"tokenized-{key}.arrow"),
        new_fingerprint=key,
        desc="Tokenizing",
    )  # the key names the tokenizer: hashing it with dill is slow


def _tokenize_batch(batch: dict, tokenizer: PreTrainedTokenizerBase) -> dict:
    """Token ids of each document followed by eos (the document separator the model learns)."""
    # verbose=False: documents longer than the model's context are expected here (they are packed, not truncated)
    encoded = tokenizer(
        batch["text"], add_special_tokens=False, split_special_tokens=True, return_attention_mask=False, verbose=False
    )
    eos = tokenizer.eos_token_id
    return {"input_ids": [ids + [eos] for ids in encoded["input_ids"]]}


def _write_packed_blocks(tokenized: datasets.Dataset, block_size: int, data_seed: int, path: Path) -> None:
    """Write the stream's full blocks in the `data_seed` order to `path` (atomically, bounded memory)."""
    pieces = [chunk.flatten().to_numpy() for chunk in tokenized.data.column("input_ids").chunks]  # mmap views
    starts = np.cumsum([0] + [len(piece) for piece in pieces])
    num_blocks = int(starts[-1]) // block_size
    if num_blocks == 0:
        raise ValueError(f"corpus has {starts[-1]} tokens, fewer than one block of {block_size}; add documents")
    order = np.random.default_rng(data_seed).permutation(num_blocks)
    features = datasets.Features(
        {
            "input_ids": datasets.List(datasets.Value("int32"), length=block_size),
            "block_index": datasets.Value("int64"),
            "stream_index": datasets.Value("int64"),
        }
    )
    # a killed build never leaves a half-written cache behind
    with (
        artifacts.atomic_file(path) as tmp_path,
        datasets.arrow_writer.ArrowWriter(features=features, path=str(tmp_path)) as writer,
    ):
        for first in range(0, num_blocks, _BLOCKS_PER_WRITE):
            stream_index = order[first : first + _BLOCKS_PER_WRITE]
            rows = np.stack([_read_span(pieces, starts, i * block_size, block_size) for i in stream_index])
            writer.write_table(
                pa.table(
                    {
                        "input_ids": pa.FixedSizeListArray.from_arrays(pa.array(rows.ravel()), block_size),
                        "block_index": pa.array(np.arange(first, first + len(rows), dtype=np.int64)),
                        "stream_index": pa.array(stream_index.astype(np.int64)),
                    }
                )
            )
        writer.finalize()
    logger.info("packed %d tokens into %d blocks of %d (%s)", starts[-1], num_blocks, block_size, path.name)


def _read_span(pieces: list[np.ndarray], starts: np.ndarray, offset: int, length: int) -> np.ndarray:
    """Tokens [offset, offset + length) of the stream made of the concatenated `pieces`."""
    piece = int(np.searchsorted(starts, offset, side="right")) - 1
    out, filled = np.empty(length, dtype=np.int32), 0
    while filled < length:
        local = offset + filled - starts[piece]
        take = min(length - filled, len(pieces[piece]) - local)
        out[filled : filled + take] = pieces[piece][local : local + take]
        filled, piece = filled + take, piece + 1
    return out


def tokenizer_hash(tokenizer: PreTrainedTokenizerBase) -> str:
    """Identity of a tokenizer (caches, resume checks): its full tokenizer.json and its eos id.

    Special tokens' strip flags are hashed as False: pretraining tokenizes special-token text as text, so they cannot
    change a block, and tokenizers saved before `<|mask|>` got `lstrip=True` keep their identity (runs resume).
    """
    backend = tokenizer.backend_tokenizer
    stripping = [t for t in backend.get_added_tokens_decoder().values() if t.special and (t.lstrip or t.rstrip)]
    if stripping:
        backend = Tokenizer.from_str(backend.to_str())  # a copy: the caller's tokenizer keeps its flags
        backend.add_special_tokens(
            [
                AddedToken(
                    t.content,
                    lstrip=False,
                    rstrip=False,
                    single_word=t.single_word,
                    normalized=t.normalized,
                    special=True,
                )
                for t in stripping
            ]
        )
    return _hash(backend.to_str(), tokenizer.eos_token_id)


def _hash(*parts) -> str:
    return hashlib.sha256("\x1f".join(str(part) for part in parts).encode()).hexdigest()[:16]


FINGERPRINT_SAMPLE = 64  # blocks hashed in full by `data_fingerprint`: the first, the last and evenly spaced ones


def data_fingerprint(blocks: datasets.Dataset) -> str:
    """16 hex characters naming packed blocks (`build_packed_dataset`), recorded beside checkpoints, checked on resume.

    Hashes the number of blocks, their length and the tokens of `FINGERPRINT_SAMPLE` blocks spread over the fixed
    order: another corpus, document cap or tokenizer changes them, while the same data built anywhere (another
    data_dir or machine, a rebuilt cache) does not. 64 memory-mapped rows keep it cheap at any size.
    """
    n = len(blocks)
    if n == 0 or "input_ids" not in blocks.column_names:
        raise ValueError("data_fingerprint needs packed blocks with an 'input_ids' column; see build_packed_dataset")
    rows = sorted({int(i) for i in np.linspace(0, n - 1, num=min(n, FINGERPRINT_SAMPLE))})
    sample = blocks.with_format("numpy").select(rows)["input_ids"]
    digest = hashlib.sha256(np.ascontiguousarray(np.asarray(sample, dtype=np.int32)).tobytes()).hexdigest()
    return _hash(n, len(sample[0]), digest)
