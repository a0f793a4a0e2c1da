"""MLM continued pretraining (CPT) from a decayed checkpoint or a converted decoder (the paper's CPT runs).

From one of the study's decayed runs (regenerate configs with `python -m recipes.manifest --write_configs paper`):
    accelerate launch --config_file recipes/accelerate/fsdp.yaml -m recipes.cpt \
        --config recipes/configs/paper/610m-clm-dec42k-mlm40-44k.yaml
From any decoder: convert it, then continue with MLM 40% (its own warmup and decay, a fresh optimizer):
    python -m modeling_eurobert.convert meta-llama/Llama-3.2-1B out/llama-3.2-1b-eurobert
    accelerate launch recipes/cpt.py --config recipes/configs/cpt-from-decoder.yaml \
        --model_name_or_path out/llama-3.2-1b-eurobert --output_dir out/llama-3.2-1b-eurobert-mlm40-cpt
(the paper CPT recipe's settings without keep_optimizer_state, run_name or scale: named after its output_dir)
CPU smoke run on top of the debug run, or of a converted decoder (`--lora true` for LoRA CPT):
    python -m recipes.cpt --config recipes/configs/cpt-debug.yaml --model_name_or_path out/debug \
        --output_dir out/debug-cpt

The tokenizer is the base model's own unless `--tokenizer_name_or_path` names one with the same ids (checked).
`--keep_optimizer_state` takes the AdamW moments from the base run's last Trainer checkpoint (the paper does not say;
the original's resume path keeps them, `docs/protocol.md`; default: fresh optimizer). The data continue after the
blocks the base run consumed (`--data_start_block` to choose). The same loop as `recipes/pretrain.py`
(`pretraining.pretrain`) with `cpt: true`, which a config may also set.
"""

from recipes import pretrain


def make_parser():
    """The run settings' parser with `cpt: true` by default."""
    from pretraining.pretrain import make_parser

    return make_parser(cpt=True)


def main(argv: list[str] | None = None) -> None:
    """The command line (exit 2 with one line for bad input, 1 for a failure while training)."""
    pretrain.main(argv, cpt=True)


if __name__ == "__main__":
    main()
