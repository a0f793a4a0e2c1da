"""Held-out pretraining loss: CLM and MLM losses of checkpoints on blocks no run trains on.

    python -m pretraining.heldout --model out/610m-clm-42k --model out/610m-mlm40-42k --tokenizer out/610m-clm-42k \
        --block_size 128 --blocks 64 --output heldout.csv

Every checkpoint is scored with both objectives on the same blocks of the corpus's validation split (the bundle's
`valid`), packed exactly as training packs (eos after every document, `block_size` blocks, the `data_seed` order):
the next-token loss with causal attention and the MLM loss at `mlm_probability` with bidirectional attention and
masks seeded per block (`pretraining.collator.PretrainingCollator`), so every model is scored on the same masked
positions. A checkpoint and its intermediate checkpoints give a learning curve.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

from core import artifacts, cli, colours, model_folders, names, run_folders
from core.formatting import table_cell
from core.paths import missing_path, resolve_data_dir

# heldout.csv: one row per checkpoint. `tokens_seen` counts every token the checkpoint saw, a CPT run's base included;
# `tokens_before_cpt` is the part before this run (0 from scratch). For a CPT run from a base without run_info (a
# converted decoder) both say `unknown`. The column `step` (a recorded name, kept) holds the paper step: an
# intermediate checkpoint's name's, a final one's total steps, at every scale.
CSV_COLUMNS = (
    "model",
    "step",
    "tokens_seen",
    "tokens_before_cpt",
    "clm_loss",
    "mlm_loss",
    "mlm_probability",
    "blocks",
    "block_size",
)


def _batches(blocks, tokenizer, mlm_probability: float, batch_size: int, masking_seed: int):
    """(CLM batch, MLM batch) of every `batch_size` blocks; the MLM masks are seeded per block (`masking_seed`), so
    every model is scored on the same masked positions."""
    from pretraining import collator

    clm = collator.PretrainingCollator("clm", tokenizer)
    mlm = collator.PretrainingCollator("mlm", tokenizer, mlm_probability=mlm_probability, seed=masking_seed)
    for start in range(0, len(blocks), batch_size):
        examples = [blocks[i] for i in range(start, min(start + batch_size, len(blocks)))]
        yield clm(examples), mlm(examples)


def heldout_losses(
    model_dir: str | Path, blocks, tokenizer, mlm_probability: float = 0.4, batch_size: int = 16, masking_seed: int = 0
) -> dict:
    """Mean per-token CLM and MLM losses of one checkpoint (loaded with `EuroBertClmMlmForMaskedLM`; CLM checkpoints
    load unchanged) on packed `blocks`, through the model's own loss; `tokenizer` packed them."""
    import torch

    from modeling_eurobert import EuroBertClmMlmForMaskedLM

    model = EuroBertClmMlmForMaskedLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    totals = {"clm": [0.0, 0], "mlm": [0.0, 0]}
    with torch.no_grad():
        for batches in _batches(blocks, tokenizer, mlm_probability, batch_size, masking_seed):
            for objective, batch in zip(("clm", "mlm"), batches):
                labels = batch["labels"]  # CLM: the input ids, shifted by the model (position t predicts t + 1)
                count = int((labels[:, 1:] if objective == "clm" else labels).ne(-100).sum())
                loss = model(input_ids=batch["input_ids"], labels=labels, is_causal=objective == "clm").loss
                totals[objective][0] += float(loss) * count
                totals[objective][1] += count
    return {f"{k}_loss": total / max(count, 1) for k, (total, count) in totals.items()}


def masked_token_scores(model, blocks, tokenizer, mlm_probability: float = 0.4, causal: bool = False) -> dict:
    """The next-token loss (causal attention) of a loaded `EuroBertClmMlmForMaskedLM` on `blocks` and, for a model
    that attends bidirectionally (`causal` False), its masked-token loss and accuracy (a masked token predicted at its
    own position, as MLM does: a question a causal model's head, which predicts the next token, is not asked), with
    their sums and counts per block ("per_instance": what `analysis.statistics.instance_columns` reads)."""
    import torch
    from torch.nn.functional import cross_entropy

    keys = ("clm_loss_sum", "clm_count") + ("mlm_loss_sum", "mlm_correct", "mlm_count") * (not causal)
    rows = {key: [] for key in keys}
    with torch.no_grad():
        for clm_batch, mlm_batch in _batches(blocks, tokenizer, mlm_probability, 1, 0):  # a row per block
            ids = clm_batch["input_ids"].to(model.device)
            clm = model.lm_head(model.model(input_ids=ids, is_causal=True).last_hidden_state[:, :-1]).float()
            values = [
                float(cross_entropy(clm.flatten(0, 1), ids[:, 1:].flatten(), reduction="sum")),
                ids[:, 1:].numel(),
            ]
            if not causal:
                ids, labels = (mlm_batch[key].to(model.device) for key in ("input_ids", "labels"))
                keep = labels != -100
                logits = model.lm_head(model.model(input_ids=ids, is_causal=False).last_hidden_state[keep]).float()
                values += [
                    float(cross_entropy(logits, labels[keep], reduction="sum")),
                    int((logits.argmax(-1) == labels[keep]).sum()),
                    int(keep.sum()),
                ]
            for key, value in zip(rows, values):
                rows[key].append(value)
    sums = {key: sum(values) for key, values in rows.items()}
    scores = {"clm_loss": sums["clm_loss_sum"] / sums["clm_count"], "next_tokens": sums["clm_count"]}
    if not causal:
        scores |= {
            "mlm_loss": sums["mlm_loss_sum"] / sums["mlm_count"],
            "mlm_accuracy": sums["mlm_correct"] / sums["mlm_count"],
            "masked_tokens": sums["mlm_count"],
        }
    return {**scores, "per_instance": rows}


def heldout_blocks(
    tokenizer,
    block_size: int,
    n_blocks: int,
    cache_dir: str | Path,
    data_dir=None,
    data_seed: int = 0,
    source: str = "bundle",
):
    """The first `n_blocks` packed blocks of the corpus's validation split (fewer if it holds fewer)."""
    from pretraining import data

    corpus = data.load_corpora(source, data_dir, split="valid")
    blocks = data.build_packed_dataset(tokenizer, corpus, block_size, data_seed, cache_dir)
    return blocks.select(range(min(n_blocks, len(blocks))))


def score_checkpoints(
    models: list[str | Path],
    tokenizer_dir: str | Path,
    block_size: int,
    n_blocks: int,
    cache_dir: str | Path,
    data_dir=None,
    mlm_probability: float = 0.4,
) -> list[dict]:
    """One row per checkpoint: its run_info name, paper-scale step, tokens seen (a CPT base's included) and both
    held-out losses."""
    from pretraining import data

    tokenizer = data.load_pretraining_tokenizer(tokenizer_dir, objective="mlm")
    blocks = heldout_blocks(tokenizer, block_size, n_blocks, cache_dir, data_dir)
    rows = []
    for model in models:
        info = run_folders.read_run_info(model)
        run, step = names.split_step(info["name"])
        paper_step = step if Path(model).parent.name == run_folders.INTERMEDIATE_DIR else None
        losses = heldout_losses(model, blocks, tokenizer, mlm_probability)
        shown = names.scaled_name(run if paper_step else info["name"], info["scale"])  # the scale first
        before = info["tokens_before_cpt"]
        rows.append(
            {
                "model": shown,
                "step": paper_step or _final_step(info),
                "tokens_seen": "unknown" if before is None else before + info["tokens_seen"],
                "tokens_before_cpt": "unknown" if before is None else before,
                **losses,
                "mlm_probability": mlm_probability,
                "blocks": len(blocks),
                "block_size": block_size,
            }
        )
    return rows


def _final_step(info: dict) -> int:
    """The paper-scale step of a final checkpoint: the total steps its name says."""
    try:
        return names.parse_name(info["name"]).total_steps
    except ValueError:
        return info["steps"]


def write_csv(rows: list[dict], path: str | Path) -> Path:
    lines = [",".join(CSV_COLUMNS)]
    lines += [",".join(table_cell(r[c], ".5f", missing="nan") for c in CSV_COLUMNS) for r in rows]
    return artifacts.write_text_atomic(path, "\n".join(lines) + "\n")


def read_csv(path: str | Path) -> list[dict]:
    """The rows `write_csv` wrote, typed as `score_checkpoints` made them; ValueError for a file whose header is not
    `CSV_COLUMNS` (another tool's file, or an older held-out CSV)."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    if not lines or lines[0] != ",".join(CSV_COLUMNS):
        raise ValueError(
            f"{path} is not a held-out CSV of this version (header {','.join(CSV_COLUMNS)}); rerun "
            "python -m pretraining.heldout"
        )
    typed = {
        "model": str,
        "step": int,
        "tokens_seen": _count,
        "tokens_before_cpt": _count,
        "clm_loss": float,
        "mlm_loss": float,
        "mlm_probability": float,
        "blocks": int,
        "block_size": int,
    }
    return [{c: typed[c](v) for c, v in zip(CSV_COLUMNS, line.split(","), strict=True)} for line in lines[1:]]


def _count(text: str) -> int | str:
    return text if text == "unknown" else int(text)


def check_output(path: Path) -> None:
    """Refuse an --output this tool would overwrite but did not write: an existing file (or its PNG beside it) whose
    first line is not the held-out CSV header, or a directory."""
    header = ",".join(CSV_COLUMNS)
    if path.is_dir():
        raise ValueError(f"--output {path} is a directory; pass a CSV file path")
    ours = path.is_file() and path.read_text(encoding="utf-8", errors="replace").split("\n", 1)[0] == header
    if path.exists() and not ours:
        raise ValueError(f"--output {path} exists and is not a held-out CSV this tool wrote; pass a new file path")
    if path.with_suffix(".png").exists() and not ours:
        raise ValueError(f"{path.with_suffix('.png')} exists and this tool did not write it; pass another --output")


def trained_on(model: str) -> set[str]:
    """The losses a run was trained on ({"clm", "mlm"}; both for a name outside the grammar): the others are
    off-objective, far above the informative range, and get a panel of their own."""
    p = names.try_parse_name(model)
    if p is None or p.kind == "pfs" or (p.kind == "cpt" and p.base == "clm"):
        return {"clm", "mlm"}
    return {"mlm"} if p.objective == "mlm" else {"clm"}


def plot(rows: list[dict], path: str | Path, scale: str | None = None) -> Path | None:
    """Held-out CLM and MLM loss against the tokens seen (a CPT base's included), one line per run: each loss of the
    runs trained on it in its own panel, the off-objective losses in a third; names carry the study's `scale`. A CPT
    run from a base of unknown tokens is left out (the caption says so). With no curve to draw (one checkpoint per
    run), a figure an earlier run left at `path` is removed (it would show checkpoints the CSV no longer holds)."""
    unplaced = sorted({r["model"] for r in rows if r["tokens_seen"] == "unknown"})
    rows = [r for r in rows if r["tokens_seen"] != "unknown"]
    runs = sorted({r["model"] for r in rows})
    if not any(sum(r["model"] == m for r in rows) > 1 for m in runs):
        Path(path).unlink(missing_ok=True)
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def shown(run):  # the name a reader sees: the scale first, unless the CSV's name carries one already
        p = names.try_parse_name(run)
        return run if p is None or p.scale else names.scaled_name(run, scale)

    scale = scale or next((p.scale for r in runs if (p := names.try_parse_name(r)) and p.scale), None)
    at = f" ({scale or names.PAPER_SCALE} scale)"
    panels = [
        (f"held-out CLM loss, runs trained on CLM{at}", [(r, "clm") for r in runs if "clm" in trained_on(r)]),
        (f"held-out MLM loss, runs trained on MLM{at}", [(r, "mlm") for r in runs if "mlm" in trained_on(r)]),
        (
            f"off-objective losses{at}",
            [(run, loss) for run in runs for loss in ("clm", "mlm") if loss not in trained_on(run)],
        ),
    ]
    panels = [(title, lines) for title, lines in panels if lines]
    cpt = any(int(r.get("tokens_before_cpt") or 0) > 0 for r in rows)  # the x label names a CPT base only with one
    xlabel = "pretraining tokens seen (millions" + ("; a CPT base's included)" if cpt else ")")
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.2), squeeze=False)
    for ax, (title, lines) in zip(axes[0], panels):
        for run, loss in lines:
            points = sorted((int(r["tokens_seen"]) / 1e6, float(r[f"{loss}_loss"])) for r in rows if r["model"] == run)
            ax.plot(
                [p[0] for p in points],
                [p[1] for p in points],
                marker="o",
                color=colours.of(shown(run)),
                linestyle="-" if loss == "clm" else "-.",
                label=shown(run),
            )
        ax.set_xlabel(xlabel)
        ax.set_ylabel("held-out loss (nats/token)")
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), frameon=False, ncol=1)
    mlm_p = rows[0]["mlm_probability"]
    caption = (
        f"Learning curves on {rows[0]['blocks']} held-out blocks of {rows[0]['block_size']} tokens (the "
        "corpus's validation split): next-token loss with causal attention (solid) and masked-token loss at "
        f"{mlm_p:.0%} masking with bidirectional attention, the same masks for every model (dash-dot). Each "
        "panel has its own range: the off-objective losses (an objective the run never trained on) are far "
        "above the others."
        + (f" Not shown (their base's tokens are unknown): {', '.join(unplaced)}." if unplaced else "")
    )
    fig.tight_layout()
    fig.text(
        0.0, -0.02, "\n".join(textwrap.wrap(caption, int(fig.get_figwidth() * 19))), fontsize=7, va="top", ha="left"
    )
    return artifacts.save_figure(fig, path)


@cli.exit_on_write_failure
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="checkpoint directories, comma-separated")
    parser.add_argument("--tokenizer", required=True, help="the tokenizer the models were trained with")
    parser.add_argument("--block_size", type=int, required=True)
    parser.add_argument("--blocks", type=int, default=64, help="held-out blocks to score (default 64)")
    parser.add_argument("--mlm_probability", type=float, default=0.4)
    parser.add_argument("--data_dir", help="data bundle (default: $MLM_VS_CLM_DATA, ../shared/data)")
    parser.add_argument("--cache_dir", default=".cache/pretrain", help="where the packed held-out blocks are cached")
    parser.add_argument("--output", required=True, help="CSV to write (a PNG of the curves is written beside it)")
    args = parser.parse_args(argv)
    models = cli.split_paths(args.model)
    with cli.bad_input_exits():
        if args.block_size < 2 or args.blocks < 1 or not 0 < args.mlm_probability < 1:
            raise ValueError(
                f"--block_size {args.block_size} must be >= 2, --blocks {args.blocks} >= 1 and "
                f"--mlm_probability {args.mlm_probability} in (0, 1)"
            )
        model_folders.local_or_hub(args.tokenizer, "--tokenizer")
        resolve_data_dir(args.data_dir)
        artifacts.check_output_dir(args.cache_dir, "--cache_dir")
        check_output(Path(args.output))
        artifacts.check_output_dir(Path(args.output).parent, f"--output {args.output}: its folder")
        for model in models:
            if not Path(model).is_dir():
                raise missing_path(model, "--model")
            if not (Path(model) / run_folders.RUN_INFO_NAME).is_file():
                raise FileNotFoundError(
                    f"{model} has no {run_folders.RUN_INFO_NAME}; pass checkpoints of recipes.pretrain"
                )
            model_folders.check_loadable(model)
        rows = score_checkpoints(
            models, args.tokenizer, args.block_size, args.blocks, args.cache_dir, args.data_dir, args.mlm_probability
        )
    write_csv(rows, args.output)
    plot(rows, Path(args.output).with_suffix(".png"))
    print(f"held-out losses of {len(rows)} checkpoint(s) written to {args.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
