"""A finished study written into docs/ (`python -m recipes.study NAME --docs DIR`): its README, the report's files,
and the results archive the page is regenerated from (`--from_results`) byte for byte, with its writer and reader.
"""

import json
import lzma
import posixpath
import re
import shutil
import tarfile
from pathlib import Path

from core import artifacts, store
from recipes import manifest
from recipes.studies import regime, study_marker


def intro(study_name: str, definition: dict, tokens_per_step: float, parameters: int, embeddings: int) -> str:
    """The docs README's first paragraph, every number from the study's definition and its scale's regime
    (`recipes.studies.regime`)."""
    final = manifest.TOTAL * tokens_per_step  # the paper steps of the single-objective runs
    grid = _grid_text(definition)
    if study_name == "mini":
        return (
            f"The smallest study where the paper's comparisons can show on 2 CPU cores: the `tiny` architecture "
            f"({parameters / 1e6:.1f}M parameters) pretrained on about {final / 1e6:.1f}M tokens of the offline "
            f"Wikipedia stand-in, fine-tuned with the paper's grid at {grid}. Its report says, finding by "
            "finding, whether this scale can test the paper's claim and why not where it cannot; it does not "
            "reproduce the paper's numbers."
        )
    if study_name.startswith("horizon"):
        steps = definition["intermediate_steps"]
        replicates = definition.get("pretrain_seeds") or []
        varied = (
            "initial weights, masks and block order"
            if definition.get("pretrain_data_order")
            else "initial weights and masks; one block order for all"
        )
        runs = (
            f", each pretrained {len(replicates)} times (seeds {_listed(replicates)}: {varied})" if replicates else ""
        )
        return (
            "**The question: does the CLM - MLM gap shrink as tokens per parameter grow, as the paper's finding 2 "
            f"predicts?** CLM and MLM40 only{runs}: the `tiny` architecture ({parameters / 1e6:.2f}M parameters, "
            f"input embedding in, LM head out) pretrained on {final / 1e6:.1f}M tokens of the offline Wikipedia "
            f"stand-in without repeating data ({final / parameters:.0f} tokens per parameter; "
            f"{final / (parameters - embeddings):.0f} without the embedding), evaluated at "
            f"{_listed([f'{s * tokens_per_step / 1e6:.1f}M' for s in steps])} tokens "
            f"({_listed([f'{s * tokens_per_step / parameters:.1f}' for s in steps])} tokens per parameter, stable "
            f"phase) and at the end (decayed), each fine-tuned on {_listed(definition['tasks'])} at {grid}. "
            "The answer at this scale, per task (generated from the results below):"
        )
    return (
        "Tiny models on the offline bundle: these numbers show the pipeline and the protocol at toy scale, not the "
        "paper's results."
    )


def decoder_intro(definition: dict) -> str:
    """The docs README's first paragraph of a decoder study, every number from its definition (a study with CPT
    replicates, `pretrain_seeds`: what its intervals cover, its readouts, its BM25 row and its causal arms' held-out
    score as well)."""
    cpt = definition["cpt"]
    tokens = cpt["max_steps"] * cpt["per_device_train_batch_size"] * cpt["block_size"]
    replicates = definition.get("pretrain_seeds", ())
    arms = [
        f"`{a['name']}` ({'LoRA' if a['cpt'].get('lora') else 'full'} "
        f"{'CLM' if a['cpt'].get('objective') == 'clm' else 'MLM'} CPT of {a['cpt_of']})"
        if a["cpt_of"]
        else f"`{a['name']}` (the converted decoder, {'causal' if a['causal'] else 'bidirectional'} attention)"
        for a in definition["arms"]
    ]
    first = (
        f"The paper's recommendation, MLM continued pretraining of a CLM model, tried on a real pretrained decoder "
        f"({definition['decoder']}; SmolLM2-135M-Instruct is its 4-bit GGUF release dequantised: docs/models.md), "
        f"converted with `modeling_eurobert.convert`. Arms: {_listed(arms)}; CPT of {tokens:,} tokens of the "
    )
    if not replicates:  # the first real-decoder study's page, as it was
        return first + (
            "bundle's English Wikipedia (40% masking; the paper's CPT reads about 50B): a CPU-sized probe of its "
            f"recommendation, not its scale. Each arm is scored on {definition['heldout_blocks']} held-out blocks and "
            f"by frozen-feature probes (`evaluation.probe`) of {_listed([p['task'] for p in definition['probes']])}, "
            f"{len(definition['seeds'])} seeds of each fitted probe's training subset (the units of its intervals, "
            "the test instances resampled too, paired); the definition below gives every size. One conversion and one "
            "CPT run per arm: no interval covers CPT's own run-to-run variance. The paired comparisons are one family, "
            "their p-values Holm-adjusted (p_holm). The tables are `analysis.report`'s: a probe has no learning rate "
            "(filed as lr 0) and its seeds are its training subsets."
        )
    steps = f"{cpt['max_steps']} steps of {cpt['per_device_train_batch_size']} x {cpt['block_size']} tokens"
    comparisons = len(definition["family"]) * len(definition["probes"])
    return first + (
        f"bundle's English Wikipedia for every CPT arm ({steps}, the same schedule; MLM masks 40%; the paper's CPT "
        "reads about 50B): a CPU-sized probe of its recommendation, not its scale, with CLM CPT on the same tokens as "
        f"the control for further training of any kind. Each CPT arm is trained {len(replicates)} times (`<arm>-pseed"
        "<k>`: seed k sets its initialisation where it has one (LoRA), its masks and its block order). Each arm is "
        f"scored on {definition['heldout_blocks']} held-out blocks (next-token loss; masked-token loss and accuracy "
        "only for an arm that attends bidirectionally) and by frozen-feature probes (`evaluation.probe`) of "
        f"{_listed([p['task'] for p in definition['probes']])}, each read out two ways (sentences: mean or last "
        "token; words: first or last sub-token) and reported with the readout of the higher mean validation score "
        f"(the Readouts table); {len(definition['seeds'])} seeds of each fitted probe's training subset; retrieval "
        "ranks the protocol's pooled corpus (the documents judged for its validation and test queries), with BM25 "
        "(`bm25s`, the library mteb's BM25 baseline uses) as a lexical reference row. What an interval covers: for a "
        "CPT arm the CPT runs (its units, each run's mean over the probe's seeds), for an arm without CPT the probe's "
        "seeds, and in both the test instances (resampled, paired between arms). The "
        f"{comparisons} paired comparisons are one family, their p-values Holm-adjusted (p_holm): a difference is "
        "claimed where p_holm < 0.05, which holds the family-wise error rate at 5%. The tables are "
        "`analysis.report`'s; a probe has no learning rate (filed as lr 0)."
    )


def _grid_text(definition: dict) -> str:
    """ "3 learning rates x 3 seeds", or each task's own grid when they differ."""
    grids = {task: definition.get("task_lrs", {}).get(task, definition["lrs"]) for task in definition["tasks"]}
    seeds = f"{len(definition['seeds'])} seed{'s' * (len(definition['seeds']) != 1)}"
    if len({tuple(g) for g in grids.values()}) == 1:
        return f"{len(next(iter(grids.values())))} learning rates x {seeds}"
    per_task = "; ".join(f"{task} {_listed([f'{lr:g}' for lr in lrs])}" for task, lrs in grids.items())
    return f"each task's own learning rates ({per_task}) x {seeds}"


def _listed(items) -> str:
    items = [str(i) for i in items]
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


GAP_SECTION = "## The CLM - MLM40 gap over pretraining"  # analysis.report's; its bullets answer the horizon question


RESULTS_ARCHIVE = "results.tar.xz"  # written beside a study's docs: what its report is regenerated from


def _heldout_files(output: Path) -> list[Path]:
    """The held-out losses of a study (csv + figure), where that stage ran."""
    return [p for p in (output / "heldout" / "heldout.csv", output / "heldout" / "heldout.png") if p.is_file()]


def _archived_files(output: Path) -> list[Path]:
    """What a study's report is made from: study.json, every result file and the held-out losses."""
    return [output / "study.json", *store.result_files(output / "results"), *_heldout_files(output)]


def holds_exactly(archive: Path, output: Path) -> bool:
    """Whether a results archive holds `_archived_files(output)` and nothing else, byte for byte."""
    files = {path.relative_to(output).as_posix(): path for path in _archived_files(output)}
    with tarfile.open(archive, "r:xz") as tar:
        members = tar.getmembers()
        if sorted(m.name for m in members) != sorted(files) or not all(m.isfile() for m in members):
            return False
        return all(tar.extractfile(m).read() == files[m.name].read_bytes() for m in members)


def write_results_archive(output: Path, archive: Path, reuse: Path | None = None) -> Path:
    """Pack `_archived_files` into a tar.xz whose bytes depend only on their contents (`artifacts.write_tar_xz`).
    `reuse`, an archive the report was regenerated from, is copied instead when it holds exactly those files (xz
    takes half a minute on the mini study's 126 MB; reading it back, a second)."""
    if reuse is not None and reuse.is_file() and holds_exactly(reuse, output):
        if not archive.exists() or not archive.samefile(reuse):
            with artifacts.atomic_file(archive) as tmp:
                shutil.copyfile(reuse, tmp)
        return archive
    return artifacts.write_tar_xz(archive, {p.relative_to(output).as_posix(): p for p in _archived_files(output)})


def read_archive(archive: Path) -> dict[str, bytes]:
    """The files of a results archive ({path under the study: content}), read once and checked: refused in one line
    when it is missing, unreadable, without study.json, or holds a member that is not a plain file under the study, a
    result filed under another name than its own (it would count as one more run), or an edited score."""
    if not archive.is_file():
        raise FileNotFoundError(f"results archive {archive} not found (write one with --docs)")
    files = {}
    try:
        with tarfile.open(archive, "r:xz") as tar:
            for member in tar:  # in order: xz reads forward
                name = posixpath.normpath(member.name)  # `./results/x` and `results//x` unpack to `results/x`
                if not member.isfile() or name.startswith(("/", "../")) or name in (".", ".."):
                    raise ValueError(
                        f"results archive {archive} holds {member.name!r}, not a plain file under the "
                        "study directory; pass an archive written by --docs"
                    )
                if name in files:
                    raise ValueError(
                        f"results archive {archive} holds {name} twice (as {member.name!r} too); pass "
                        "an archive written by --docs"
                    )
                data = files[name] = tar.extractfile(member).read()
                if name == "study.json":
                    json.loads(data)
                elif name.startswith("results/") and name.endswith(".json"):
                    _check_archived_result(f"{archive}:{member.name}", name, json.loads(data))
    except (tarfile.TarError, lzma.LZMAError, EOFError, OSError) as error:
        raise ValueError(
            f"results archive {archive} is not a readable tar.xz ({error}); it is truncated or of "
            "another format: pass the results.tar.xz written by --docs"
        ) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"results archive {archive} holds a file that is not valid JSON ({error})") from None
    if "study.json" not in files:
        raise ValueError(f"results archive {archive} holds no study.json; pass an archive written by --docs")
    return files


def _check_archived_result(where: str, name: str, record) -> None:
    from analysis.statistics import rows_mismatch
    from evaluation import metrics

    filed = store.filed_path(record) if isinstance(record, dict) and "family" in record else None
    if filed is None:
        raise ValueError(f"{where} is not a result file (no model, task, lr, seed and family)")
    own = f"results/{filed.as_posix()}"
    if name != own:
        raise ValueError(
            f"{where} holds the result of {own} (its model, task, lr and seed): a copy or a renamed file "
            "would count as one more run; remove it from the archive"
        )
    measured = store.marked_kind(record) in store.MEASURE_KINDS  # a probe's retrieval rows keep scores, no ranking
    if problem := (rows_mismatch(record) if measured else None) or (
        metrics.rescore_mismatch(record) if record["family"] in ("sc", "tc") or not measured else None
    ):
        raise ValueError(
            f"{where}: {problem} (an edited score?); the report is made from results as the grid wrote them"
        )


DOCS_MARK = "Generated by `python -m recipes.study"  # in every README write_docs makes
DOCS_FILES = ("README.md", "summary.*", "findings.csv", "heldout.*", RESULTS_ARCHIVE, "*.png")  # what it may replace


def check_docs_dir(docs: Path) -> None:
    """Refuse a --docs path that cannot be a directory, or one holding files write_docs would replace but did not
    write (its README says so)."""
    artifacts.check_output_dir(docs, "--docs")
    readme = docs / "README.md"
    if readme.is_file() and DOCS_MARK in readme.read_text(errors="replace"):
        return
    clash = sorted(p.name for pattern in DOCS_FILES for p in docs.glob(pattern))
    if clash:
        raise ValueError(
            f"--docs {docs} holds {clash[0]}, which recipes.study did not write; pass a new or empty "
            "directory, or one an earlier --docs wrote"
        )


def written_before(docs: Path) -> set[str]:
    """The figures and tables an earlier --docs wrote into `docs`, as its README lists them (none without a README
    of write_docs): not a file a user put beside them."""
    readme = docs / "README.md"
    if not readme.is_file() or DOCS_MARK not in (text := readme.read_text(errors="replace")):
        return set()
    figures = set(re.findall(r"^!\[[^\]]*\]\(([^)/]+\.png)\)$", text, flags=re.M))
    tables = {"summary.md", "summary.csv", "findings.csv", "heldout.csv"}
    return {name for name in figures | tables if (docs / name).is_file()}


def write_docs(study_name: str, output: Path, docs: Path, from_results: Path | None = None) -> Path:
    """Copy a finished study's report into `docs`: a README (the results table and the findings, the figures, the
    study's definition) and beside it the results archive (`from_results` reused when it holds exactly the study's
    files)."""
    report = output / "report"
    definition = study_marker(output)
    if not (report / "summary.md").is_file():
        raise ValueError(f"{output} has no finished report; run the study first")
    check_docs_dir(docs)
    docs.mkdir(parents=True, exist_ok=True)
    earlier = written_before(docs)
    copied = [
        report / "summary.md",
        report / "summary.csv",
        *sorted(report.glob("findings.csv")),
        *sorted(report.glob("*.png")),
        *_heldout_files(output),
    ]
    for path in copied:
        shutil.copy2(path, docs / path.name)
    for name in sorted(earlier - {path.name for path in copied} - {"README.md", RESULTS_ARCHIVE}):
        (docs / name).unlink()  # an earlier --docs's figure or table this report no longer makes: not left stale
    write_results_archive(output, docs / RESULTS_ARCHIVE, reuse=from_results)
    stored = definition["definition"]
    first = decoder_intro(stored) if "arms" in stored else intro(study_name, stored, *regime(definition))
    summary = (report / "summary.md").read_text().split("\n", 1)[1]  # its own title dropped
    if study_name.startswith("horizon") and GAP_SECTION in summary:  # the answer right under the question
        first += "\n\n" + "\n".join(
            line for line in summary.split(GAP_SECTION, 1)[1].split("\n\n")[2].splitlines() if line.startswith("- ")
        )
    lines = [
        f"# The `{study_name}` study",
        "",
        first,
        "",
        f"Generated by `python -m recipes.study {study_name} --output <dir> --docs <this dir>`; "
        "nothing here is written by hand. The results it is computed from are in "
        f"[`{RESULTS_ARCHIVE}`]({RESULTS_ARCHIVE}) (every result file, with per-instance predictions, and the "
        f"held-out losses); `python -m recipes.study {study_name} --from_results {RESULTS_ARCHIVE} --output "
        "<new dir> --docs <dir>` regenerates this page from them without training anything.",
        summary,
        "",
        "## Figures",
        "",
    ]
    lines += [f"![{p.stem}]({p.name})" for p in copied if p.suffix == ".png"]
    lines += ["", "## Definition", "", "```json", json.dumps(definition["definition"], indent=2), "```"]
    artifacts.write_text_atomic(docs / "README.md", "\n".join(lines) + "\n")
    return docs
