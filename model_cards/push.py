"""Publish checkpoints and evaluation results to the Hugging Face Hub (docs/hub.md: what each repo holds).

    python -m model_cards.push RUN_DIR --repo_id ORG/610m-mlm40-42k [--results REPORT_DIR [--results_dir DIR]] \
        [--dry_run OUT]
    python -m model_cards.push --results REPORT_DIR --results_dir RESULTS_DIR --results_repo_id ORG/mlm-vs-clm-results

Every repo revision is staged and checked first (`stage_commits`: one `RepoCommit` each, intermediate checkpoints on
branches `step-<N>`, the files a branch no longer has deleted), then written as folders (`write_dry_run`) or pushed
as one `HfApi.create_commit` each (`upload_folder` may split big folders into several; a commit is atomic on the Hub,
so transient failures are retried). The token (HF_TOKEN or the login) is passed to the client only, never written.
"""

import argparse
import json
import shutil
import tempfile
import time
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

import httpx2
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi, constants, get_token
from huggingface_hub.errors import HfHubHTTPError

from core import artifacts, cli, model_folders, run_folders, store
from core.names import PAPER_SCALE, run_scale, scaled_name, try_parse_name
from core.sentence_transformers_files import SENTENCE_TRANSFORMERS_FILES
from model_cards import public, results_dataset
from model_cards.generate import build_model_card, load_run_info
from model_cards.public import PLACEHOLDER_ORG, local_roots, without_local_paths
from model_cards.results_card import build_results_card

# What a checkpoint repo holds (a `save_pretrained` folder); trainer state, optimizer and pickles stay local.
CHECKPOINT_PATTERNS = (
    "config.json",
    "generation_config.json",
    "*.safetensors",
    "model.safetensors.index.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "tokenizer.model",
    "vocab.*",
    "merges.txt",
    "chat_template.jinja",
    "*.py",
    "run_info.json",
)
KEPT_REMOTE_FILES = {".gitattributes"}  # created by the Hub with the repo; never deleted
TEXT_SUFFIXES = (".json", ".jsonl", ".md", ".csv", ".txt", ".py", ".jinja", ".yaml")  # searched for local paths


class PushError(ValueError):
    """A push that cannot start; the message is one line saying what is wrong and how to fix it."""


@dataclass
class RepoCommit:
    """Exactly what one commit to one repo revision will hold."""

    repo_id: str
    repo_type: str  # "model" | "dataset"
    revision: str  # "main" or "step-<N>"
    files: dict  # path in repo -> local Path or bytes (generated cards)
    commit_message: str

    @property
    def folder(self) -> Path:
        """Where the dry run writes this revision: <repo_type>s/<org>/<name>/<revision>."""
        return Path(f"{self.repo_type}s", *self.repo_id.split("/"), self.revision)


def checkpoint_files(checkpoint_dir: Path) -> dict[str, Path]:
    """The files of a checkpoint folder that go to the Hub (path in repo -> local path), checked for completeness."""
    checkpoint_dir = Path(checkpoint_dir)
    if not checkpoint_dir.is_dir():
        raise PushError(f"{checkpoint_dir} is not a folder: pass a checkpoint or run folder holding run_info.json")
    try:
        model_folders.check_loadable(checkpoint_dir)
    except ValueError as error:
        raise PushError(str(error)) from None
    files = {
        p.name: p
        for p in sorted(checkpoint_dir.iterdir())
        if p.is_file() and any(fnmatch(p.name, pat) for pat in CHECKPOINT_PATTERNS)
    }
    # the sentence-transformers files (prompts, pooling): SentenceTransformer(repo_id) loads as the local folder
    sentence_files = {
        name: checkpoint_dir / name for name in SENTENCE_TRANSFORMERS_FILES if (checkpoint_dir / name).is_file()
    }
    if sentence_files and len(sentence_files) < len(SENTENCE_TRANSFORMERS_FILES):
        missing = sorted(set(SENTENCE_TRANSFORMERS_FILES) - set(sentence_files))
        raise PushError(
            f"{checkpoint_dir} has incomplete sentence-transformers files (no {', '.join(missing)}): "
            "write them with core.sentence_transformers_files.write_sentence_transformers_files"
        )
    files.update(sentence_files)
    problems = [f for f in ("config.json", "run_info.json") if f not in files]
    if "model.safetensors" not in files and "model.safetensors.index.json" not in files:
        problems.append("*.safetensors weights (model.safetensors)")
    if "tokenizer.json" not in files and "tokenizer_config.json" not in files:
        problems.append("tokenizer files")
    if not any(f.endswith(".py") for f in files):
        problems.append("modeling code (configuration_*.py, modeling_*.py)")
    if problems == ["run_info.json"]:  # a converted decoder, or a model saved outside this project's runs
        raise PushError(
            f"{checkpoint_dir} has no run_info.json, which this project's pretraining runs write beside "
            "every checkpoint (recipes.pretrain, recipes.cpt): push a run's output_dir; a converted "
            "decoder gets one once continued with recipes.cpt"
        )
    if problems:
        raise PushError(
            f"{checkpoint_dir} is not a complete checkpoint: missing {', '.join(problems)}; "
            "save it with model.save_pretrained + tokenizer.save_pretrained"
        )
    return files


def stage_checkpoint(
    checkpoint_dir: Path,
    repo_id: str,
    revision: str,
    summary_csv: Path | None,
    results_dir: Path | None = None,
    base_model: str | None = None,
) -> RepoCommit:
    """The commit of one checkpoint folder to `repo_id@revision`: its files, public run_info and generated card."""
    files = checkpoint_files(checkpoint_dir)
    card = build_model_card(
        checkpoint_dir,
        summary_csv,
        repo_id=repo_id,
        revision=None if revision == "main" else revision,
        results_dir=results_dir,
        base_model=base_model,
    )
    public_info = without_local_paths(load_run_info(checkpoint_dir))
    files[run_folders.RUN_INFO_NAME] = (json.dumps(public_info, indent=2, allow_nan=False) + "\n").encode("utf-8")
    files["README.md"] = str(card).encode("utf-8")
    return RepoCommit(repo_id, "model", revision, files, f"Upload {card.data.model_name}")


def stage_run(
    run_dir: Path,
    repo_id: str,
    summary_csv: Path | None = None,
    results_dir: Path | None = None,
    base_model: str | None = None,
) -> list[RepoCommit]:
    """Stage a run folder: the final checkpoint on `main`, each `intermediate/step-<N>` on branch `step-<N>`."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise PushError(f"{run_dir} is not a folder: pass a checkpoint or run folder holding run_info.json")
    commits = [stage_checkpoint(run_dir, repo_id, "main", summary_csv, results_dir, base_model)]
    check_scale_in_repo_name(repo_id, load_run_info(run_dir))
    try:
        step_dirs = run_folders.intermediate_checkpoints(run_dir)
    except ValueError as error:
        raise PushError(str(error)) from None
    return commits + [
        stage_checkpoint(step_dir, repo_id, step_dir.name, summary_csv, results_dir, base_model)
        for step_dir in step_dirs
    ]


def resolve_results_dir(report_dir: Path, results_dir: Path | None) -> Path:
    """The per-run results folder: `results_dir`, or `REPORT_DIR/results` when not given (refused if absent)."""
    results = Path(results_dir) if results_dir is not None else Path(report_dir) / "results"
    if not results.is_dir():
        raise PushError(
            f"no per-run results folder {results}: pass --results_dir (the --output of evaluation.run; "
            "for a study, study/<study>/results)"
        )
    return results


def stage_results(report_dir: Path, repo_id: str, results_dir: Path | None, workdir: Path) -> RepoCommit:
    """The results dataset commit: the report folder, the published result files, the `runs` and `predictions` tables
    and the card; the derived files are written to `workdir`, a scratch folder that outlives the staging."""
    report_dir = Path(report_dir)
    results = resolve_results_dir(report_dir, results_dir)
    summary = report_dir / "summary.csv"
    if not summary.is_file():
        raise PushError(f"{report_dir} is not an evaluation report: expected summary.csv in it")
    from analysis.report import report_scale

    scale = report_scale(report_dir)  # the scale the report's names carry: the dataset's rows carry it too
    card = build_results_card(results, summary, repo_id=repo_id, scale=scale)
    inside = results.resolve().is_relative_to(report_dir.resolve())
    files = {}
    for p in sorted(report_dir.rglob("*")):
        parts = p.relative_to(report_dir).parts
        if not p.is_file() or any(part.startswith(".") or part == "__pycache__" for part in parts):
            continue
        if inside and p.resolve().is_relative_to(results.resolve()):
            continue  # published below from the result files themselves, without local paths
        files[p.relative_to(report_dir).as_posix()] = p
    derived = results_dataset.write_tables(store.result_files(results), Path(workdir), scale)
    derived.update(results_dataset.write_summary_table(summary, Path(workdir)))
    if clash := sorted(set(files) & set(derived)):
        raise PushError(f"{report_dir} holds {clash[0]}, a name the results dataset generates: move it away")
    files.update(derived)
    files["README.md"] = str(card).encode("utf-8")
    return RepoCommit(repo_id, "dataset", "main", files, "Upload evaluation results")


def _read(source) -> bytes:
    return source if isinstance(source, bytes) else Path(source).read_bytes()


def check_no_token(commits: list[RepoCommit], token: str) -> None:
    """Refuse to publish a file that contains the token (e.g. a stray training_args dump)."""
    _refuse_found(commits, [token], "", "your Hugging Face token: remove it before pushing")


def check_no_local_paths(commits: list[RepoCommit], roots: list[str]) -> None:
    """Refuse to publish a text file that contains one of the local folders `roots`."""
    _refuse_found(
        commits, roots, TEXT_SUFFIXES, "the local path {}: local paths are never published; remove it from that file"
    )


def _refuse_found(commits: list[RepoCommit], needles: list[str], suffixes, why: str) -> None:
    """Refuse the first file whose path ends with one of `suffixes` and holds one of `needles`: `why` names it."""
    for commit in commits:
        for path, source in commit.files.items():
            content = _read(source) if path.endswith(suffixes) else b""
            if (found := next((n for n in needles if n.encode() in content), None)) is not None:
                raise PushError(f"{commit.repo_id}:{path} contains {why.format(found)}")


def write_dry_run(commits: list[RepoCommit], out_dir: Path, replace: bool = False) -> None:
    """Write every staged repo revision as a folder under `out_dir`: new or empty, or with `replace` an earlier dry
    run's (`models/`, `datasets/`). Nothing that appears there meanwhile is removed (`artifacts.atomic_directory`); a
    file holding the Hub token is refused, as by a push."""
    out_dir = Path(out_dir)
    found = sorted(p.name for p in out_dir.iterdir()) if out_dir.is_dir() else []
    if found and not (replace and set(found) <= {"models", "datasets"}):
        raise PushError(f"--dry_run folder {out_dir} is not empty (it holds {found[0]}): pass a new folder")
    if token := get_token():  # the scan a push makes: a dry run's folders are what would be published
        check_no_token(commits, token)
    with artifacts.atomic_directory(out_dir) as staging:  # a failure leaves nothing half-written
        for commit in commits:
            for path, source in commit.files.items():
                target = staging / commit.folder / path
                target.parent.mkdir(parents=True, exist_ok=True)
                if isinstance(source, bytes):
                    target.write_bytes(source)
                else:
                    shutil.copyfile(source, target)


def resolve_token() -> str:
    """The Hub token from HF_TOKEN or the huggingface_hub login; a one-line error when there is none."""
    if not (token := get_token()):
        raise PushError(
            "no Hugging Face token: set HF_TOKEN or run `hf auth login` "
            "(or use --dry_run OUT to write the repo folders without pushing)"
        )
    return token


def _is_transient(exc: Exception) -> bool:
    if isinstance(exc, HfHubHTTPError):
        return exc.response is not None and exc.response.status_code >= 500
    return isinstance(exc, httpx2.TransportError)


def _commit_once(api: HfApi, commit: RepoCommit) -> str:
    if commit.revision != "main":
        api.create_branch(commit.repo_id, branch=commit.revision, repo_type=commit.repo_type, exist_ok=True)
    remote = set(api.list_repo_files(commit.repo_id, repo_type=commit.repo_type, revision=commit.revision))
    operations = [CommitOperationDelete(path) for path in sorted(remote - set(commit.files) - KEPT_REMOTE_FILES)]
    operations += [CommitOperationAdd(path, source) for path, source in commit.files.items()]
    return api.create_commit(
        commit.repo_id,
        operations,
        commit_message=commit.commit_message,
        repo_type=commit.repo_type,
        revision=commit.revision,
    ).oid


def push_commits(
    commits: list[RepoCommit],
    token: str,
    endpoint: str | None = None,
    retries: int = 3,
    backoff_s: float = 2.0,
    log=print,
) -> list[str]:
    """Push every staged repo revision, one commit each, retrying transient failures `retries` times (waiting
    `backoff_s`, doubled each time); returns each revision's head commit id."""
    if constants.HF_HUB_OFFLINE:
        raise PushError("HF_HUB_OFFLINE is set: unset it to push (or use --dry_run OUT)")
    for commit in commits:
        check_not_placeholder(commit.repo_id)
    check_no_token(commits, token)
    api = HfApi(endpoint=endpoint, token=token)
    heads = []
    for commit in commits:
        api.create_repo(commit.repo_id, repo_type=commit.repo_type, exist_ok=True)
        for attempt in range(retries + 1):
            try:
                heads.append(_commit_once(api, commit))
                break
            except Exception as exc:  # noqa: BLE001 - only transient errors are retried, the rest re-raised
                if attempt == retries or not _is_transient(exc):
                    raise
                wait = backoff_s * 2**attempt
                log(f"{commit.repo_id}@{commit.revision}: {type(exc).__name__}, retrying in {wait:.0f}s")
                time.sleep(wait)
        log(
            f"pushed {commit.repo_type} {commit.repo_id}@{commit.revision}: "
            f"{len(commit.files)} files, head {heads[-1][:10]}"
        )
    return heads


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Publish checkpoints and results to the Hugging Face Hub.")
    parser.add_argument(
        "checkpoint",
        nargs="?",
        type=Path,
        help="checkpoint or run folder (run_info.json; intermediate/step-<N>/ become branches)",
    )
    parser.add_argument("--repo_id", help="model repo ORG/NAME for the checkpoint")
    parser.add_argument("--results", type=Path, help="evaluation report folder (summary.csv, summary.md, figures)")
    parser.add_argument(
        "--results_dir",
        type=Path,
        help="per-run results of that report, evaluation.run's --output (default: REPORT_DIR/results; "
        "a study's: study/<study>/results)",
    )
    parser.add_argument("--results_repo_id", help="dataset repo for --results (default: <repo-id>-results)")
    parser.add_argument(
        "--base_model",
        help="Hub id of the model a CPT run or decay branch started from (default for a study base: ORG/<base name>)",
    )
    parser.add_argument("--dry_run", type=Path, metavar="OUT", help="write the repo folders here; push nothing")
    parser.add_argument("--retries", type=int, default=3, help="retries per commit on 5xx / dropped connection")
    return parser


def check_repo_id(repo_id: str) -> None:
    """`model_cards.public.check_repo_id` as a PushError (one line, before any work, in dry runs too)."""
    try:
        public.check_repo_id(repo_id)
    except ValueError as error:
        raise PushError(str(error)) from None


def check_scale_in_repo_name(repo_id: str, info: dict) -> None:
    """Refuse a paper name (`ORG/610m-mlm40-42k`) for a checkpoint trained at another scale (`core.names.run_scale`):
    the repo must say it (`ORG/smoke-610m-mlm40-42k`)."""
    name = repo_id.split("/")[-1]
    parsed = try_parse_name(name)
    if parsed is None or parsed.scale is not None or (scale := run_scale(info, parsed)) in (None, PAPER_SCALE):
        return
    raise PushError(
        f"--repo_id {repo_id} names the paper's {name}, but this checkpoint is a {info['size']} model "
        f"trained {info['steps']} steps (scale {scale}): push it as "
        f"{repo_id.split('/')[0]}/{scaled_name(name, scale)}"
    )


def check_not_placeholder(repo_id: str) -> None:
    """Refuse to push to the placeholder namespace (dry runs may use it: they only write folders)."""
    if repo_id.split("/")[0] == PLACEHOLDER_ORG:
        raise PushError(
            f"{repo_id} is in the placeholder namespace {PLACEHOLDER_ORG!r}: pass your own organisation "
            "or user name (--repo_id ORG/NAME, or recipes.study --org ORG)"
        )


def stage_commits(args, workdir: Path) -> list[RepoCommit]:
    """The repo commits the CLI arguments ask for, all checked before anything is written or pushed (`workdir`: scratch
    for the results dataset's derived files, kept until the push)."""
    if args.checkpoint is None and args.results is None:
        raise PushError("nothing to push: give a CHECKPOINT_OR_RUN_DIR and/or --results REPORT_DIR")
    if args.retries < 0:
        raise PushError(f"--retries {args.retries} must be >= 0 (extra attempts per commit; default 3)")
    if args.dry_run is not None:
        artifacts.check_output_dir(args.dry_run, "--dry_run")
    if args.checkpoint is not None and not args.repo_id:
        raise PushError("--repo_id ORG/NAME is required to push a checkpoint")
    results_repo = args.results_repo_id or (f"{args.repo_id}-results" if args.repo_id else None)
    if args.results is not None and not results_repo:
        raise PushError("--results_repo_id ORG/NAME is required to push results without --repo_id")
    for repo_id in filter(None, (args.repo_id, results_repo)):
        check_repo_id(repo_id)
    if args.base_model is not None:  # `--base_model ''` would be written into the card
        check_repo_id(args.base_model)
    if args.results_dir is not None and args.results is None:
        raise PushError("--results_dir needs --results REPORT_DIR (the report made from those results)")
    summary = results = None
    if args.results is not None:
        summary, results = args.results / "summary.csv", resolve_results_dir(args.results, args.results_dir)
    commits = (
        [] if args.checkpoint is None else stage_run(args.checkpoint, args.repo_id, summary, results, args.base_model)
    )
    if args.results is not None:
        commits.append(stage_results(args.results, results_repo, results, workdir))
    check_no_local_paths(commits, local_roots(args.checkpoint, args.results, results))
    return commits


@cli.exit_on_write_failure
def main(argv=None) -> None:
    args = make_parser().parse_args(argv)
    with cli.bad_input_exits():  # bad input: one line, exit 2, nothing pushed
        token = resolve_token() if args.dry_run is None else None  # fail fast, before reading checkpoints
        if token is not None:
            for repo_id in filter(None, (args.repo_id, args.results_repo_id)):
                check_not_placeholder(repo_id)
        with tempfile.TemporaryDirectory(prefix="model-cards-push-") as workdir:
            commits = stage_commits(args, Path(workdir))
            if token is None:
                write_dry_run(commits, args.dry_run)
                for commit in commits:
                    print(f"dry run: {args.dry_run / commit.folder} ({len(commit.files)} files)")
                return
            push_commits(commits, token, retries=args.retries)


if __name__ == "__main__":
    main()
