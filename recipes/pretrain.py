"""Pretrain a EuroBERT-architecture model with CLM, MLM, or CLM then MLM (PFS), on a fixed block order.

CPU smoke run (toy BPE, tiny model, bundle corpus):
    python -m recipes.pretrain --config recipes/configs/debug.yaml --output_dir out/debug
Two CPU processes (gloo):
    accelerate launch --config_file recipes/accelerate/cpu.yaml --num_processes 2 recipes/pretrain.py \
        --config recipes/configs/debug.yaml --output_dir out/debug-ddp
One of the study's 38 models (regenerate configs with `python -m recipes.manifest --write_configs paper`):
    accelerate launch --config_file recipes/accelerate/fsdp.yaml recipes/pretrain.py \
        --config recipes/configs/paper/610m-clm-10k-mlm40-42k.yaml
By path (from any directory) or as a module (`accelerate launch -m recipes.pretrain`): the setup installs the
repository as a package (`-e .` in requirements.txt).
A 12k decay branch of the 42k stable run (its config has `branch_from: out/paper/610m-clm-42k`):
    accelerate launch --config_file recipes/accelerate/multi_gpu.yaml -m recipes.pretrain \
        --config recipes/configs/paper/610m-clm-12k.yaml
Resume after a crash: run the same command again (auto-resume from the newest complete checkpoint in output_dir),
or pass `--resume_from_checkpoint <output_dir>/checkpoint-N`.

The loop is `pretraining.pretrain` (CPT too: `recipes/cpt.py`). Everything is checked before anything is written to
`output_dir` (docs/testing.md); the `--config` file and the paths it names first, before torch loads.
"""

import sys

from core import cli
from pretraining.preflight import check_command_line


def main(argv: list[str] | None = None, cpt: bool = False) -> None:
    """The command line: `--config` and the paths it names are checked before torch loads, then the loop runs
    (`pretraining.pretrain.main`; `cpt`: the default of the `cpt` setting, `recipes/cpt.py`)."""
    argv = sys.argv[1:] if argv is None else argv
    with cli.bad_input_exits():
        check_command_line(argv)
    from pretraining.pretrain import main as run

    run(argv, cpt)


if __name__ == "__main__":
    main()
