"""The pretraining collators: `PretrainingCollator` (CLM or MLM batches from packed blocks, MLM masks seeded per
block) and `ObjectiveCollator` (`build_collator`: CLM or MLM for a batch from the step its blocks belong to, which is
how PFS switches objective inside one run, whatever the number of workers, processes or resumes).
"""

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from transformers import PreTrainedTokenizerBase

from pretraining.data import OBJECTIVES

MASKED_POSITIONS_STD = 4.0  # default margin of `masked_positions_bound`, in standard deviations of the mask count


@dataclass
class PretrainingCollator:
    """Turn packed blocks into a CLM or MLM batch (no padding, so no attention_mask).

    CLM: labels = input_ids (the model shifts them). MLM: the semantics of `DataCollatorForLanguageModeling` (special
    tokens never masked; each other token selected with probability `mlm_probability`, then replaced by `<|mask|>`
    with probability `mask_replace_prob`, by a random non-special token with `random_replace_prob`, kept otherwise;
    labels -100 except at selected positions), but the random stream of each block is a torch generator seeded from
    (`seed`, block_index), so a block gets the same mask whatever the workers, processes or batch it lands in.

    `positions_per_block`: K for a fixed-shape MLM head (`masked_positions_bound`), or None. When set, an MLM batch
    also holds `mlm_positions` (B, K) long (`padded_positions`), unless a row has more than K masked tokens; then the
    key is absent and the model takes its exact path (never truncated). The masks themselves do not depend on it.
    """

    objective: str
    tokenizer: PreTrainedTokenizerBase
    mlm_probability: float = 0.4
    mask_replace_prob: float = 1.0
    random_replace_prob: float = 0.0
    seed: int = 0
    positions_per_block: int | None = None
    _is_special: np.ndarray = field(init=False, repr=False)  # lookup table: token id -> never masked
    _random_ids: np.ndarray = field(init=False, repr=False)  # ids a random replacement may take

    def __post_init__(self):
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective={self.objective!r} is unknown; use one of {OBJECTIVES}")
        if not 0.0 < self.mlm_probability < 1.0:
            raise ValueError(f"mlm_probability={self.mlm_probability} must be in (0, 1) (paper: 0.2 to 0.5)")
        probs = (self.mask_replace_prob, self.random_replace_prob)
        if min(probs) < 0.0 or sum(probs) > 1.0 + 1e-9:
            raise ValueError(f"mask_replace_prob + random_replace_prob = {sum(probs)} must be within [0, 1], each >= 0")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed={self.seed!r} must be a non-negative integer")
        if self.objective == "mlm" and self.tokenizer.mask_token_id is None:
            raise ValueError(
                "the tokenizer has no mask token, so it cannot be used for MLM; see load_pretraining_tokenizer"
            )
        if self.positions_per_block is not None and self.positions_per_block < 1:
            raise ValueError(
                f"positions_per_block={self.positions_per_block} must be >= 1 (see masked_positions_bound)"
            )
        special_ids = set(self.tokenizer.all_special_ids)
        special_ids |= {i for i, token in self.tokenizer.added_tokens_decoder.items() if token.special}
        size = max(len(self.tokenizer), max(special_ids) + 1)
        self._is_special = np.zeros(size, dtype=bool)
        self._is_special[sorted(special_ids)] = True
        self._random_ids = np.flatnonzero(~self._is_special[: len(self.tokenizer)])

    def __call__(self, examples: list[dict]) -> dict[str, torch.Tensor]:
        """Stack blocks into `input_ids` and build `labels` for the objective."""
        input_ids = np.stack([np.asarray(example["input_ids"], dtype=np.int64) for example in examples])
        if self.objective == "clm":
            return {"input_ids": torch.from_numpy(input_ids), "labels": torch.from_numpy(input_ids.copy())}
        if "block_index" not in examples[0]:
            raise ValueError("MLM examples need 'block_index' to seed their masks; set remove_unused_columns=False")
        block_indices = [int(example["block_index"]) for example in examples]
        selection, action, random_ids = self._draw(block_indices, input_ids.shape)
        # numpy, not torch, for the batch-wide ops: torch's intra-op threads cost milliseconds on such small tensors.
        selected = (selection < self.mlm_probability) & ~self._is_special[input_ids]
        labels = np.where(selected, input_ids, -100)
        # One uniform splits the selected tokens into <|mask|> / random token / kept, as the mask_replace_prob and
        # random_replace_prob of DataCollatorForLanguageModeling do with two Bernoulli draws.
        input_ids[selected & (action < self.mask_replace_prob)] = self.tokenizer.mask_token_id
        if random_ids is not None:
            randomized = selected & (action >= self.mask_replace_prob)
            randomized &= action < self.mask_replace_prob + self.random_replace_prob
            input_ids[randomized] = random_ids[randomized]
        batch = {"input_ids": torch.from_numpy(input_ids), "labels": torch.from_numpy(labels)}
        if self.positions_per_block is not None and selected.sum(axis=1).max() <= self.positions_per_block:
            batch["mlm_positions"] = torch.from_numpy(padded_positions(selected, self.positions_per_block))
        return batch

    def _draw(self, block_indices: list[int], shape: tuple[int, int]):
        """Uniforms (selection, action) and random token ids, from one torch generator per block seeded by its index."""
        uniforms = torch.empty(len(block_indices), 2, shape[1], dtype=torch.float64)
        random_ids = torch.empty(shape, dtype=torch.long) if self.random_replace_prob > 0 else None
        generator = torch.Generator()
        for row, block_index in enumerate(block_indices):
            generator.manual_seed(_mix_seed(self.seed, block_index))
            torch.rand(2, shape[1], generator=generator, out=uniforms[row], dtype=torch.float64)
            if random_ids is not None:
                torch.randint(len(self._random_ids), (shape[1],), generator=generator, out=random_ids[row])
        uniforms = uniforms.numpy()
        random_ids = None if random_ids is None else self._random_ids[random_ids.numpy()]
        return uniforms[:, 0], uniforms[:, 1], random_ids


def masked_positions_bound(block_size: int, mlm_probability: float, num_std: float = MASKED_POSITIONS_STD) -> int:
    """K, the masked positions per block a fixed-shape MLM head makes room for, fixed for a whole run.

    The masked count of a block is at most Binomial(T = block_size, p = mlm_probability), so
    K = min(T, ceil(T p + num_std * sqrt(T p (1 - p)))). Paper MLM 40%, T = 2048, the default 4 standard deviations:
    K = 908 for a mean of 819 (10% of the head's rows are padding) and a row overflows with probability 3e-5, so
    about 1 micro-batch of 8 blocks in 4,000 takes the exact path (one host sync, not a recompile). 6 standard
    deviations: K = 953, 14% padding, 1e-9.
    """
    mean = block_size * mlm_probability
    return min(block_size, math.ceil(mean + num_std * math.sqrt(mean * (1 - mlm_probability))))


def padded_positions(selected: np.ndarray, width: int) -> np.ndarray:
    """(B, width) int64: the column indices of each row's True entries in increasing order, then -1."""
    positions = np.full((selected.shape[0], width), -1, dtype=np.int64)
    filled = min(width, selected.shape[1])
    first_selected = np.argsort(~selected, axis=1, kind="stable")[:, :filled]  # selected entries sort first
    counts = selected.sum(axis=1, keepdims=True)
    positions[:, :filled] = np.where(np.arange(filled) < counts, first_selected, -1)
    return positions


def _mix_seed(seed: int, block_index: int) -> int:
    """A well-spread 63-bit generator seed for (seed, block_index): splitmix64 applied to each part in turn."""
    state = 0
    for part in (seed, block_index):
        state = (state ^ part) + 0x9E3779B97F4A7C15 & 0xFFFFFFFFFFFFFFFF
        state = (state ^ (state >> 30)) * 0xBF58476D1CE4E5B9 & 0xFFFFFFFFFFFFFFFF
        state = (state ^ (state >> 27)) * 0x94D049BB133111EB & 0xFFFFFFFFFFFFFFFF
        state ^= state >> 31
    return state >> 1


@dataclass
class ObjectiveCollator:
    """Collate a batch for the objective of the step its blocks belong to (`clm` / `mlm`: None in a pure MLM / CLM run).

    The blocks are read sequentially, so a block's step is `(block_index - first_block) // blocks_per_step`
    (0-based; `blocks_per_step` is the global batch, `first_block` the first this run reads); steps `< switch_step`
    are CLM in a PFS run. The choice depends on the data position only, so it is the same with any number of
    dataloader workers, processes, prefetching or resumes. Each batch carries `is_causal`, the one per-step decision
    the model reads.
    """

    clm: PretrainingCollator | None
    mlm: PretrainingCollator | None
    switch_step: int | None
    blocks_per_step: int
    first_block: int = 0

    def objective_at(self, step_index: int) -> str:
        """Objective of the 0-based optimizer step `step_index`."""
        before_switch = self.clm is not None and self.switch_step is not None and step_index < self.switch_step
        return "clm" if self.mlm is None or before_switch else "mlm"

    def __call__(self, examples: list[dict]) -> dict:
        block_index = torch.tensor([int(example["block_index"]) for example in examples])
        objective = self.objective_at((int(block_index[0]) - self.first_block) // self.blocks_per_step)
        batch = (self.clm if objective == "clm" else self.mlm)(examples)
        if objective == "mlm" and self.mlm.positions_per_block is not None:  # fixed shape: did a row exceed K?
            batch["mlm_overflow"] = "mlm_positions" not in batch  # counted by PretrainingTrainer, not the model
        batch["is_causal"] = objective == "clm"
        batch["block_index"] = block_index  # consumed by PretrainingTrainer.compute_loss (logs), never by the model
        return batch


def build_collator(run_args, tokenizer, blocks_per_step: int, first_block: int = 0) -> ObjectiveCollator:
    """The run's CLM and/or MLM `PretrainingCollator`s, wrapped by `ObjectiveCollator`."""
    positions_per_block = (
        masked_positions_bound(
            run_args.block_size,
            run_args.mlm_probability,  # K, for the run
            run_args.mlm_fixed_shape_std,
        )
        if run_args.mlm_fixed_shape
        else None
    )

    def make(objective):
        return PretrainingCollator(
            objective,
            tokenizer,
            run_args.mlm_probability,
            run_args.mask_replace_prob,
            run_args.random_replace_prob,
            run_args.masking_seed,
            positions_per_block,
        )

    needs_clm = run_args.objective == "clm" or run_args.switch_step is not None
    return ObjectiveCollator(
        clm=make("clm") if needs_clm else None,
        mlm=make("mlm") if run_args.objective == "mlm" else None,
        switch_step=run_args.switch_step,
        blocks_per_step=blocks_per_step,
        first_block=first_block,
    )
