"""The study's model-name grammar (the released checkpoints' names), parsed in one place for recipes, evaluation and
cards.

    <size>-<objective>[ratio]-<steps>            610m-mlm40-42k, 610m-clm-42k          single objective
    <size>-clm-<k1>-mlm<ratio>-<total>           610m-clm-10k-mlm40-42k                 two-phase (PFS)
    <size>-<base>-dec<steps>-mlm<ratio>-<total>  610m-clm-dec42k-mlm40-44k              CPT from a decayed run
    <name>-<paper step>                          610m-clm-42k-1000                      intermediate checkpoint
    <name>-pseed<k>[-<paper step>]               610m-clm-42k-pseed1-1000               pretraining run k (replicate)
    <scale>-<name>                               mini-610m-clm-42k                      that recipe at a manifest scale

A model trained at a scale other than the paper's carries that scale before its name wherever a reader sees it
(tables, figure legends, cards, Hub repo ids): `scaled_name("610m-clm-42k", "mini") == "mini-610m-clm-42k"`, a
valid Hub repo name that parses back (a scale's words start with a letter, a size with a digit). Paper-scale
names are exactly the paper's.

Two steps, two names (docs/pretraining.md): an intermediate checkpoint's name carries its **paper step**, its
directory `<run>/intermediate/step-<N>` and Hub branch the **step** the run took (the paper step / `step_divisor`).

A study that trains each model several times with different pretraining seeds (`pretrain_seeds`) names run k
`<name>-pseed<k>`: the replicates of one model share `replicate_group` (the name without `-pseed<k>`), which the
analysis treats as one model with the pretraining run as a random effect. A name without `-pseed` is a single run.
"""

import re
from dataclasses import dataclass

PAPER_SCALE = "paper"
_SCALE = r"(?:(?P<scale>[a-z][a-z0-9]*(?:-[a-z][a-z0-9]*)*)-)?"  # words that start with a letter (mini, mini-gpu)
_SIZE = _SCALE + r"(?P<size>\d+(?:\.\d+)?[mb])"
_STEP_DIR = re.compile(r"step-\d+")  # an intermediate checkpoint's directory and Hub branch
_STEP = r"(?:-pseed(?P<pseed>\d+))?(?:-(?P<paper_step>\d+))?"  # pretraining replicate, then a plain step count
_PATTERNS = {
    "single": re.compile(rf"^{_SIZE}-(?P<objective>clm|mlm(?P<ratio>\d+))-(?P<total>\d+k){_STEP}$"),
    "pfs": re.compile(rf"^{_SIZE}-clm-(?P<switch>\d+k)-mlm(?P<ratio>\d+)-(?P<total>\d+k){_STEP}$"),
    "cpt": re.compile(
        rf"^{_SIZE}-(?P<base>clm|mlm\d+)-dec(?P<base_steps>\d+k)-mlm(?P<ratio>\d+)-(?P<total>\d+k){_STEP}$"
    ),
}


def _steps(text: str) -> int:
    return int(text[:-1]) * 1000


@dataclass(frozen=True)
class ModelName:
    """A model name of the study's grammar, read part by part (the one vocabulary recipes, evaluation and cards use)."""

    name: str
    kind: str  # "single" (one objective), "pfs" (CLM then MLM) or "cpt" (MLM continued from a decayed base)
    size: str  # "610m"
    objective: str  # of the last phase: "clm" | "mlm"
    ratio: int | None  # masking ratio in percent (None for CLM)
    total_steps: int
    switch_step: int | None = None  # PFS: the last CLM step
    base: str | None = None  # CPT: "clm" | "mlm40"
    base_steps: int | None = None  # CPT
    paper_step: int | None = None  # an intermediate checkpoint's step at paper scale (None for a final one)
    run_name: str = ""  # the name without the paper step
    scale: str | None = None  # the manifest scale a `<scale>-` prefix names (None without one: the paper's)
    pretrain_seed: int | None = None  # k of a `-pseed<k>` replicate (None for a single run)

    @property
    def replicate_group(self) -> str:
        """The name without its `-pseed<k>` part: what the replicates of one model (its pretraining runs) share."""
        return self.name if self.pretrain_seed is None else self.name.replace(f"-pseed{self.pretrain_seed}", "", 1)

    @property
    def unscaled(self) -> str:
        """The name without its `<scale>-` prefix: the paper's name of the recipe (`scaled_name` reversed)."""
        return self.name[len(self.scale) + 1 :] if self.scale else self.name

    @property
    def objective_label(self) -> str:
        """ "clm" or "mlm<ratio>", as the names write the (last) objective."""
        return "clm" if self.objective == "clm" else f"mlm{self.ratio}"

    @property
    def base_run(self) -> str | None:
        """A CPT's base run as its `run_info.json` records it (`610m-clm-42k`, no scale), None for another kind."""
        return compose(self.size, self.base, self.base_steps) if self.kind == "cpt" else None

    def format(self) -> str:
        """The name these parts make (`parse_name` reversed; after `dataclasses.replace`, the name of the variant)."""
        name = compose(
            self.size,
            self.objective_label,
            self.total_steps,
            switch_step=self.switch_step,
            base=self.base,
            base_steps=self.base_steps,
            paper_step=self.paper_step,
            pretrain_seed=self.pretrain_seed,
        )
        return scaled_name(name, self.scale)


def compose(
    size: str,
    objective: str,
    total_steps: int,
    *,
    switch_step: int | None = None,
    base: str | None = None,
    base_steps: int | None = None,
    paper_step: int | None = None,
    pretrain_seed: int | None = None,
) -> str:
    """A name of the grammar from its parts, the one place names are built: `objective` as names write it ("clm",
    "mlm40"); a PFS gives its `switch_step`, a CPT its `base` ("clm" | "mlm40") and `base_steps`; then the replicate
    (`replicate_name`) and the intermediate checkpoint (`step_name`)."""
    phase = f"clm-{switch_step // 1000}k-" if switch_step else f"{base}-dec{base_steps // 1000}k-" if base else ""
    return step_name(replicate_name(f"{size}-{phase}{objective}-{total_steps // 1000}k", pretrain_seed), paper_step)


def replicate_name(name: str, pretrain_seed: int | None) -> str:
    """The run name of pretraining replicate `pretrain_seed` of model `name` (`name` itself for None)."""
    return name if pretrain_seed is None else f"{name}-pseed{pretrain_seed}"


def step_name(run: str, paper_step: int | None) -> str:
    """The name of `run`'s intermediate checkpoint at `paper_step` (`run` itself for None), any run's name."""
    return run if paper_step is None else f"{run}-{paper_step}"


def revision_name(run: str, label: str) -> str:
    """The name of `run`'s checkpoint saved as `label` (a directory `checkpoint-N` or `step-N`, a Hub branch or tag):
    `<run>-N` for `step-N` (the step the run took), else `<run>-<label>`."""
    return f"{run}-{label[len('step-') :] if _STEP_DIR.fullmatch(label) else label}"


def finetuned_name(base_model: str, task: str, lr: float, seed: int) -> str:
    """The name a fine-tuned model saved by the grid is evaluated under: its base model, task, lr and seed."""
    return f"{base_model}-{task}-lr{lr:g}-seed{seed}"


def split_step(name: str) -> tuple[str, int | None]:
    """(run, paper step) of an intermediate checkpoint's name `<run>-<step>` (`step_name` reversed), (name, None)
    for a name without a step; any run's name, in the grammar or not."""
    run, _, step = name.rpartition("-")
    return (run, int(step)) if run and step.isdigit() else (name, None)


def parse_name(name: str) -> ModelName:
    """Parse a model name of the study's grammar (module docstring); ValueError when it is outside the grammar or
    internally inconsistent."""
    for kind, pattern in _PATTERNS.items():
        match = pattern.match(name)
        if match:
            break
    else:
        raise ValueError(
            f"model name {name!r} is outside the study's grammar: use <size>-<objective>[ratio]-<steps> "
            "(610m-mlm40-42k), <size>-clm-<k1>-mlm40-<total> (610m-clm-10k-mlm40-42k), "
            "<size>-<base>-dec<steps>-mlm40-<total> (610m-clm-dec42k-mlm40-44k) or <name>-<step>"
        )
    g = match.groupdict()
    if g["scale"] == PAPER_SCALE:
        raise ValueError(f"model name {name!r}: paper-scale names carry no scale prefix ({name[len('paper-') :]!r})")

    def number(key, read=int):  # an optional part of the name
        return read(g[key]) if g.get(key) else None

    parsed = ModelName(
        name=name,
        kind=kind,
        size=g["size"],
        objective="clm" if g.get("objective") == "clm" else "mlm",
        ratio=number("ratio"),
        total_steps=_steps(g["total"]),
        switch_step=number("switch", _steps),
        base=g.get("base"),
        base_steps=number("base_steps", _steps),
        paper_step=number("paper_step"),
        run_name=split_step(name)[0] if g.get("paper_step") else name,
        scale=g["scale"],
        pretrain_seed=number("pseed"),
    )
    if parsed.ratio is not None and not 0 < parsed.ratio < 100:
        raise ValueError(f"model name {name!r}: masking ratio {parsed.ratio}% must be between 1 and 99")
    for value in (parsed.switch_step, parsed.base_steps):
        if value is not None and value >= parsed.total_steps:
            raise ValueError(f"model name {name!r}: {value} steps must be fewer than the {parsed.total_steps} total")
    if parsed.paper_step is not None and not 0 < parsed.paper_step < parsed.total_steps:
        raise ValueError(
            f"model name {name!r}: intermediate step {parsed.paper_step} must be within the "
            f"{parsed.total_steps}-step run (the final checkpoint has no step suffix)"
        )
    return parsed


def scaled_name(name: str, scale: str | None) -> str:
    """The name a reader sees for a model `name` trained at manifest `scale`: `<scale>-<name>`, or `name` itself at
    the paper's scale (or None: no scale recorded), and a name outside the grammar as it is. ValueError when `scale`
    could not be read back (not lower-case words starting with letters) or `name` already carries a scale."""
    if scale in (None, PAPER_SCALE):
        return name
    if not re.fullmatch(_SCALE, f"{scale}-"):
        raise ValueError(f"scale {scale!r} must be lower-case words joined by '-', each starting with a letter")
    parsed = try_parse_name(name)
    if parsed is None:  # a name of its own (a BERT, my-encoder) claims no paper run
        return name
    if parsed.scale is not None:
        raise ValueError(f"model name {name!r} already carries the scale {parsed.scale!r}")
    return f"{scale}-{name}"


CUSTOM_SCALE = "custom"  # a study name trained outside the manifest's scales, at another size or length


def run_scale(info: dict, parsed: ModelName | None) -> str | None:
    """The scale a run's study name is shown at, from its `run_info.json` (`info`): the manifest scale it records;
    for a run outside the study (no scale) whose size or steps are not those its name says, `custom`; else None
    (the name as it is)."""
    if info.get("scale") is not None or parsed is None:
        return info.get("scale")
    steps = parsed.paper_step or parsed.total_steps - (parsed.base_steps or 0)  # a CPT run trains the extra steps
    return None if (info.get("size"), info.get("steps")) == (parsed.size, steps) else CUSTOM_SCALE


def split_replicate(name: str) -> tuple[str, int | None]:
    """(replicate group, k) of any name: a name of the grammar as `parse_name` reads it, another as `<run>-pseed<k>`
    (a decoder study's CPT replicates, `cpt-full-pseed1`); (name, None) for a single run."""
    if (parsed := try_parse_name(name)) is not None:
        return parsed.replicate_group, parsed.pretrain_seed
    match = re.fullmatch(r"(.+)-pseed(\d+)", name)
    return (match[1], int(match[2])) if match else (name, None)


def try_parse_name(name: str) -> ModelName | None:
    """`parse_name`, or None for a name outside the grammar (another encoder: a BERT, a local run)."""
    try:
        return parse_name(name)
    except ValueError:
        return None
