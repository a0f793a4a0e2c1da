"""What a run reads, built once the settings are checked (`pretraining.pretrain`, `recipes/prepare_data.py`) over
`pretraining.data`: `training_blocks` (tokenizer and packed blocks), `select_blocks` (the blocks this run reads) and
`cpt_start` (where a CPT run starts in the data, and the optimizer state it keeps).
"""

from pathlib import Path
from typing import NamedTuple

import datasets

from core import cli, paths, run_folders
from pretraining import data
from pretraining.checks import check_token_budget, check_tokenizer_matches_base, checkpoint_problem
from pretraining.settings import PretrainArguments


def training_blocks(
    run_args: PretrainArguments, data_seed: int, main_process_first, needed: int, first_block: int = 0
) -> tuple:
    """(tokenizer, packed blocks in the `data_seed` order) of a run that reads blocks up to `needed`; the corpus's
    token estimate is checked before any download and again before tokenizing (`check_token_budget`)."""
    tokenizer = given_tokenizer(run_args)
    check_token_budget(run_args, needed, hub_token_estimate(run_args, tokenizer), first_block)
    corpus = data.load_corpora(run_args.corpus_source, run_args.data_dir, split="train", name=run_args.corpus_name)
    if run_args.max_docs is not None:
        corpus = corpus.select(range(min(run_args.max_docs, len(corpus))))
    tokenizer = tokenizer or toy_tokenizer(run_args, corpus, main_process_first)
    check_token_budget(run_args, needed, data.estimate_tokens(corpus, tokenizer), first_block)
    with main_process_first(desc="packing"):
        blocks = data.build_packed_dataset(
            tokenizer, corpus, run_args.block_size, data_seed, run_args.data_cache_dir, run_args.num_proc
        )
    return tokenizer, blocks


def given_tokenizer(run_args: PretrainArguments):
    """The run's tokenizer when it does not depend on the corpus: the given one, else for a run that continues
    existing weights (CPT, a converted decoder) the base model's own; None for the toy BPE."""
    source = run_args.tokenizer_name_or_path or run_args.model_name_or_path
    if not source:
        return None
    tokenizer = data.load_pretraining_tokenizer(source, objective=run_args.objective)
    if run_args.model_name_or_path:
        check_tokenizer_matches_base(tokenizer, run_args)
    return tokenizer


def toy_tokenizer(run_args: PretrainArguments, corpus: datasets.Dataset, main_process_first):
    """The toy BPE of a run from scratch without a tokenizer, trained once and cached by corpus and vocabulary."""
    path = Path(run_args.data_cache_dir) / f"toy-tokenizer-{corpus._fingerprint}-{run_args.toy_vocab_size}"
    with main_process_first(desc="toy tokenizer"):
        data.cached_toy_tokenizer(corpus, run_args.toy_vocab_size, path)
    return data.load_pretraining_tokenizer(path, objective=run_args.objective)


def hub_token_estimate(run_args: PretrainArguments, tokenizer) -> dict | None:
    """For a single Hub corpus, `data.estimate_hub_tokens` before anything is downloaded; None otherwise."""
    entries = cli.split_list(run_args.corpus_source)
    if tokenizer is None or len(entries) != 1 or not paths.is_hub_id(entries[0].partition(":")[0]):
        return None
    if datasets.config.HF_HUB_OFFLINE:  # a launch after `recipes.prepare_data`: the corpus is in the cache and is
        return None  # estimated once loaded (streaming a sample needs the network)
    source, _, config = entries[0].partition(":")
    return data.estimate_hub_tokens(source, config or run_args.corpus_name, "train", tokenizer)


def select_blocks(blocks: datasets.Dataset, first_block: int, needed: int, epochs: int = 1) -> data.BlockStream:
    """`needed` blocks of the fixed order from `first_block`; with `epochs` > 1 the order is read again from its
    start (documented repetition), otherwise a run that needs more blocks than the corpus packs into is refused."""
    if first_block + needed > epochs * len(blocks):
        raise ValueError(
            f"the run needs {needed} blocks from block {first_block} but the corpus packs into "
            f"{len(blocks)} (x {epochs} epoch(s)); add documents (max_docs, more corpus_source entries, a "
            "bigger config), set epochs, or lower max_steps / the batch size"
        )
    return data.BlockStream(blocks, first_block, needed)


class CptStart(NamedTuple):
    """Where a CPT run starts: its base, the first block it reads, the optimizer state it keeps and the tokens the
    base had seen in all (its own and its bases'; None when the base has no run_info, as a converted decoder)."""

    base: str | None
    first_block: int
    optimizer_file: str | None
    tokens_before: int | None


def cpt_start(run_args: PretrainArguments) -> CptStart:
    """Where a CPT run starts (`CptStart(None, 0, None, 0)` for other runs): by default after the blocks the base run
    consumed (its `tokens_seen` / block size), so CPT sees unseen data; a converted decoder (no run_info) at block 0."""
    if not run_args.cpt:
        return CptStart(None, 0, None, 0)
    base = run_folders.read_run_info(run_args.model_name_or_path) or {}
    base_name = base.get("name") or Path(run_args.model_name_or_path).name
    first_block = run_args.data_start_block
    if first_block is None:
        first_block = base.get("tokens_seen", 0) // run_args.block_size
    optimizer_file = kept_optimizer_state(run_args.model_name_or_path, base) if run_args.keep_optimizer_state else None
    known = base and base["tokens_before_cpt"] is not None
    tokens_before = base["tokens_before_cpt"] + base["tokens_seen"] if known else None
    return CptStart(base_name, first_block, optimizer_file, tokens_before)


def kept_optimizer_state(base_dir: str, base_info: dict) -> str:
    """The `optimizer.pt` a CPT run with `keep_optimizer_state` loads: the base folder's own when it is a Trainer
    checkpoint, else `<base>/checkpoint-<steps>` at the step of the base's weights (an older checkpoint's moments
    would not match them). Raises ValueError, in one line, when there is no such complete checkpoint."""
    base = Path(base_dir)
    step = base_info.get("steps")
    if step is None and not (base / "optimizer.pt").is_file():
        raise ValueError(
            f"keep_optimizer_state: {base} has no run_info.json, so the checkpoint of its weights is "
            "unknown (a converted decoder has no optimizer state); drop the option"
        )
    checkpoint = base if (base / "optimizer.pt").is_file() else base / f"checkpoint-{step}"
    if not checkpoint.is_dir():
        raise ValueError(
            f"keep_optimizer_state: the weights of {base} are from step {step} but {checkpoint} does not "
            "exist, and an older checkpoint's optimizer state would not match them; drop the option"
        )
    if problem := checkpoint_problem(checkpoint):
        raise ValueError(
            f"keep_optimizer_state: {checkpoint}, the checkpoint of the base's weights, is not complete "
            f"({problem}); drop the option"
        )
    if (checkpoint / "adapter_model.safetensors").is_file() or not (checkpoint / "optimizer.pt").is_file():
        raise ValueError(
            f"keep_optimizer_state: {checkpoint} holds no full-model optimizer.pt (LoRA adapters' or "
            "FSDP state); drop the option"
        )
    return str(checkpoint / "optimizer.pt")
