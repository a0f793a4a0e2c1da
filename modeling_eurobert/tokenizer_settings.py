"""The settings every tokenizer saved beside a model of this project carries (`configure_tokenizer`): the mask token
strips the space before it, as RoBERTa's `<mask>` ("The capital is <|mask|>." gives [..., "Ġis", <|mask|>, "."], with
no stray "Ġ" the model never saw: pretraining masks whole tokens, space included); `model_max_length` is the model's
`max_position_embeddings` (a tokenizer trained here or a Llama's has none, or 131072); loader bookkeeping
(`is_local`, `local_files_only`) is dropped from a published tokenizer_config.json. Pretraining tokenizes
special-token text as plain text, so the strip flags never change a packed block.
"""

from tokenizers import AddedToken

LOADER_KEYS = ("is_local", "local_files_only")  # written back by save_pretrained after a local load; not settings


def mask_added_token(content: str) -> AddedToken:
    """The mask token as the tokenizer should hold it: special, unnormalized, eats the space before it."""
    return AddedToken(content, lstrip=True, rstrip=False, single_word=False, normalized=False, special=True)


def configure_tokenizer(tokenizer, model_max_length: int | None = None):
    """Set the mask token's strip flags (if it has one) and `model_max_length` (the model's `max_position_embeddings`;
    None keeps the tokenizer's own) on a fast tokenizer, in place; returns it, vocabulary and ids unchanged."""
    if model_max_length is not None:
        if not isinstance(model_max_length, int) or model_max_length < 1:
            raise ValueError(
                f"model_max_length={model_max_length!r} must be a positive integer (max_position_embeddings)"
            )
        tokenizer.model_max_length = model_max_length
    if tokenizer.mask_token is not None:
        size, mask_id = len(tokenizer), tokenizer.mask_token_id
        # Re-adding an existing token updates its flags in the backend (same id, nothing added).
        tokenizer.add_special_tokens({"mask_token": mask_added_token(str(tokenizer.mask_token))})
        if len(tokenizer) != size or tokenizer.mask_token_id != mask_id:
            raise ValueError(f"setting the flags of mask token {tokenizer.mask_token!r} changed the vocabulary")
    for key in LOADER_KEYS:
        tokenizer.init_kwargs.pop(key, None)
    return tokenizer


__all__ = ["configure_tokenizer", "mask_added_token"]
