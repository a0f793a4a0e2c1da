"""The manifest against the paper's table of the 38 trained models (+ 12 intermediate checkpoints)."""

import pytest

from core import names
from recipes import manifest

PAPER_BLOCKS = {  # the paper's 38 trained models, block by block
    "single objective 42k": [
        f"{s}-{o}-42k" for s in ("210m", "610m", "1b") for o in ("clm", "mlm20", "mlm30", "mlm40", "mlm50")
    ],
    "smaller budgets": ["610m-clm-12k", "610m-clm-22k", "610m-mlm40-12k", "610m-mlm40-22k"],
    "pfs": [
        "610m-clm-3k-mlm40-12k",
        "610m-clm-6k-mlm40-12k",
        "610m-clm-9k-mlm40-12k",
        "610m-clm-5k-mlm40-22k",
        "610m-clm-11k-mlm40-22k",
        "610m-clm-17k-mlm40-22k",
        "610m-clm-10k-mlm40-42k",
        "610m-clm-21k-mlm40-42k",
        "610m-clm-32k-mlm40-42k",
    ],
    "mlm in decay only": [f"610m-clm-40k-mlm{r}-42k" for r in (20, 30, 40, 50)],
    "cpt": [f"610m-{b}-dec42k-mlm40-{t}k" for b in ("clm", "mlm40") for t in (44, 54, 64)],
}


def test_paper_names_match_spec():
    assert sorted(manifest.model_names()) == sorted(n for block in PAPER_BLOCKS.values() for n in block)
    assert [len(b) for b in PAPER_BLOCKS.values()] == [15, 4, 9, 4, 6] and len(manifest.model_names()) == 38
    assert len(manifest.intermediate_names()) == 12 and len(manifest.recipes()) == 50


def test_paper_recipes_match_spec_numbers():
    table = manifest.recipes()
    switches = {n: table[n].switch_step for n in PAPER_BLOCKS["pfs"] + PAPER_BLOCKS["mlm in decay only"]}
    assert sorted(set(switches.values())) == [3000, 5000, 6000, 9000, 10000, 11000, 17000, 21000, 32000, 40000]
    assert all(table[n].objective == "mlm" and table[n].mlm_probability == 0.4 for n in PAPER_BLOCKS["pfs"])
    assert [table[n].steps for n in PAPER_BLOCKS["pfs"]] == [12000] * 3 + [22000] * 3 + [42000] * 3
    assert [table[n].steps for n in PAPER_BLOCKS["cpt"]] == [2000, 12000, 22000] * 2
    assert {table[n].cpt_base for n in PAPER_BLOCKS["cpt"]} == {"610m-clm-42k", "610m-mlm40-42k"}
    assert table["610m-clm-12k"].branch_from == "610m-clm-42k" and table["610m-mlm40-22k"].steps == 22000
    assert table["610m-clm-42k"].decay_branches == (12000, 22000) and table["1b-mlm50-42k"].mlm_probability == 0.5
    assert (
        table["610m-mlm40-42k-5000"].intermediate_of == "610m-mlm40-42k" and table["610m-mlm40-42k-5000"].steps == 5000
    )


def test_paper_run_config_uses_spec_optimisation():
    config = manifest.run_config(manifest.recipes()["610m-clm-21k-mlm40-42k"], "paper")
    assert config["switch_step"] == 21000 and config["max_steps"] == 42000 and config["warmup_steps"] == 2000
    assert (config["adam_beta1"], config["adam_beta2"], config["adam_epsilon"]) == (0.9, 0.95, 1e-5)
    assert (config["weight_decay"], config["max_grad_norm"], config["learning_rate"], config["bf16"]) == (
        0.1,
        1.0,
        5e-4,
        True,
    )
    assert config["lr_scheduler_type"] == "warmup_stable_decay"
    assert config["lr_scheduler_kwargs"] == {"num_decay_steps": 2000, "decay_type": "linear", "min_lr_ratio": 0.0}
    assert config["block_size"] == 2048 and config["architecture"] == "610m"
    assert config["weight_decay_scope"] == "all"  # the original's single AdamW group
    assert (config["corpus_source"], config["corpus_name"]) == ("HuggingFaceFW/fineweb-edu", "sample-350BT")


def test_paper_cpt_follows_the_original_resume_path():
    """CPT keeps the base's AdamW state and warms up over 1% of its steps (Optimus's pct_start default), with the
    base model's own tokenizer."""
    for name, steps, warmup in (("610m-clm-dec42k-mlm40-44k", 2000, 20), ("610m-mlm40-dec42k-mlm40-64k", 22000, 220)):
        config = manifest.run_config(manifest.recipes()[name], "paper")
        assert (
            config["keep_optimizer_state"] is True and config["max_steps"] == steps and config["warmup_steps"] == warmup
        )
        assert config["lr_scheduler_kwargs"]["num_decay_steps"] == min(2000, steps - warmup)
        assert "tokenizer_name_or_path" not in config and config["weight_decay_scope"] == "all"


@pytest.mark.parametrize("scale, divisor", [("toy", 100), ("smoke", 200)])
def test_toy_scales_keep_the_structure(scale, divisor):
    for recipe in manifest.recipes().values():
        if recipe.intermediate_of:
            continue
        config = manifest.run_config(recipe, scale)
        assert config["max_steps"] == recipe.steps // divisor and config.get("architecture", "tiny") == "tiny"
        if recipe.switch_step:
            assert config["switch_step"] == recipe.switch_step // divisor


def spelled(recipe: manifest.Recipe) -> str:
    """A recipe's name written back from its fields alone (not from the name it stores)."""
    if recipe.intermediate_of:
        return f"{recipe.intermediate_of}-{recipe.steps}"
    label = "clm" if recipe.objective == "clm" else f"mlm{round(recipe.mlm_probability * 100)}"
    if recipe.cpt_base:
        base = manifest.recipe_of(recipe.cpt_base)
        return (
            f"{recipe.size}-{base.name.split('-')[1]}-dec{base.steps // 1000}k-{label}-"
            f"{(base.steps + recipe.steps) // 1000}k"
        )
    switch = f"clm-{recipe.switch_step // 1000}k-" if recipe.switch_step else ""
    return f"{recipe.size}-{switch}{label}-{recipe.steps // 1000}k"


def test_names_parse_back():
    """Each name's recipe (size, objective, ratio, steps, switch, CPT base, parent) spells that name again."""
    for name in manifest.model_names() + manifest.intermediate_names():
        assert spelled(manifest.recipe_of(name)) == name


def test_names_are_composed_and_split_in_core_only():
    """A name's parts compose it again (`ModelName.format`, `core.names.compose`), scaled and replicated included; a
    CPT names its base run; `split_step` reverses `step_name` for any run's name."""
    paper = manifest.model_names() + manifest.intermediate_names()
    for name in paper + [f"mini-{n}" for n in paper] + ["toy-610m-clm-42k-pseed2-1000", "610m-mlm40-42k-pseed1"]:
        assert names.parse_name(name).format() == name
    assert names.parse_name("mini-610m-mlm40-dec42k-mlm40-44k").base_run == "610m-mlm40-42k"
    assert names.parse_name("610m-clm-42k").base_run is None
    assert names.split_step("my-bert-1000") == ("my-bert", 1000) and names.split_step("610m-clm-42k") == (
        "610m-clm-42k",
        None,
    )
    assert names.split_step(names.step_name("610m-clm-42k-pseed1", 2000)) == ("610m-clm-42k-pseed1", 2000)
    # a checkpoint saved as a folder or Hub revision; a model the grid fine-tuned and saved
    assert [names.revision_name("run", label) for label in ("step-500", "checkpoint-500", "main", "step-x")] == [
        "run-500",
        "run-checkpoint-500",
        "run-main",
        "run-step-x",
    ]
    assert names.finetuned_name("610m-clm-42k", "sst2", 5e-05, 1) == "610m-clm-42k-sst2-lr5e-05-seed1"


@pytest.mark.parametrize("bad", ["610m-mlm-42k", "610m-clm40-42k", "2b-clm-42k", "610m-clm-42", "610m-clm-dec42k-44k"])
def test_bad_names_raise(bad):
    with pytest.raises(ValueError):
        manifest.recipe_of(bad)


@pytest.mark.parametrize("scale", manifest.COMMITTED_SCALES)
def test_committed_configs_are_what_the_manifest_writes(scale, tmp_path):
    """recipes/configs/<scale>/ holds exactly the manifest's output: a hand edit or a manifest change without
    regenerated configs fails here."""
    written = {path.name: path.read_text() for path in manifest.write_configs(scale, tmp_path)}
    committed = {path.name: path.read_text() for path in (manifest.CONFIGS_DIR / scale).glob("*.yaml")}
    assert sorted(committed) == sorted(written), f"regenerate: python -m recipes.manifest --write_configs {scale}"
    stale = [name for name in written if committed[name] != written[name]]
    assert not stale, f"{stale} differ from the manifest: python -m recipes.manifest --write_configs {scale}"


def test_list_is_a_readable_table(call_main):
    """`--list`: the count (38 models + 12 intermediate checkpoints), a header, one aligned row per recipe."""
    lines = call_main(manifest.main, "--list").stdout.splitlines()
    assert lines[0] == "38 models + 12 intermediate checkpoints = 50 on the Hub" and len(lines) == 2 + 50
    assert lines[1].split() == ["name", "size", "objective", "steps", "how"] and "Recipe(" not in "".join(lines)
    assert "610m-clm-dec42k-mlm40-44k        610m  mlm40        2000  CPT from 610m-clm-42k" in lines
