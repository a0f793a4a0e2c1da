"""Hub publishing through huggingface_hub's real client against the loopback Hub of tests/hub_server.py."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import huggingface_hub
import pytest
from datasets import load_dataset
from hub_server import HubServer
from huggingface_hub import DatasetCard, HfApi, ModelCard, snapshot_download
from test_model_cards import make_checkpoint, write_report, write_results, write_summary

from model_cards.push import (
    PushError,
    main,
    make_parser,
    push_commits,
    stage_commits,
    stage_run,
    write_dry_run,
)

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "hf_loopbackSecretToken0123456789"
RUN = "610m-mlm40-42k"
REPO = f"toy-{RUN}"  # a toy-scale run is published with its scale (a paper name is refused)


def sha256_tree(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def hub():
    server = HubServer(TOKEN).start()
    yield server
    server.stop()


@pytest.fixture
def online(monkeypatch, tmp_path):
    """Let the in-process client talk to the loopback Hub: conftest switched the Hub off at import time."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)  # read at import: patch the constant
    monkeypatch.setattr(huggingface_hub.constants, "HF_TOKEN_PATH", str(tmp_path / "no-login" / "token"))
    monkeypatch.setenv("HF_TOKEN", TOKEN)


@pytest.fixture
def study(tmp_path):
    """A run folder with two intermediate checkpoints, and an evaluation report (results in report/results)."""
    run_dir = make_checkpoint(tmp_path / "runs" / RUN, RUN)
    for step in (1000, 2000):
        make_checkpoint(run_dir / "intermediate" / f"step-{step}", f"{RUN}-{step}", steps=step)
    report = write_report(tmp_path / "report", {RUN: run_dir})
    return run_dir, report


def plans_for(run_dir, report, workdir, repo_id="org/" + REPO):
    workdir.mkdir(exist_ok=True)
    args = make_parser().parse_args([str(run_dir), "--repo_id", repo_id, "--results", str(report)])
    return stage_commits(args, workdir)


def download(hub, repo_id, revision, repo_type, cache_dir) -> Path:
    return Path(
        snapshot_download(
            repo_id, revision=revision, repo_type=repo_type, endpoint=hub.endpoint, token=TOKEN, cache_dir=cache_dir
        )
    )


def test_push_is_byte_identical_to_dry_run_with_branches_and_results(hub, online, study, tmp_path):
    run_dir, report = study
    commits = plans_for(run_dir, report, tmp_path / "work")
    write_dry_run(commits, tmp_path / "dry")
    push_commits(commits, TOKEN, endpoint=hub.endpoint, log=lambda _: None)

    api = HfApi(endpoint=hub.endpoint, token=TOKEN)
    refs = api.list_repo_refs("org/" + REPO)
    assert sorted(b.name for b in refs.branches) == ["main", "step-1000", "step-2000"]
    # One commit per revision on top of the Hub's initial commit.
    assert len(hub.repo("org/" + REPO).commits) == 1 + 3
    assert len(hub.repo(f"org/{REPO}-results", "dataset").commits) == 1 + 1
    assert len(api.list_repo_commits("org/" + REPO, revision="step-1000")) == 3  # initial, main, branch commit

    for commit in commits:
        fetched = sha256_tree(download(hub, commit.repo_id, commit.revision, commit.repo_type, tmp_path / "cache"))
        assert fetched.pop(".gitattributes")
        assert fetched == sha256_tree(tmp_path / "dry" / commit.folder), commit.folder
    # The dry run holds the checkpoint's Hub files byte for byte, and none of the trainer leftovers.
    main_dir = tmp_path / "dry" / "models" / "org" / REPO / "main"
    local = sha256_tree(run_dir)
    assert {p: h for p, h in sha256_tree(main_dir).items() if p not in ("README.md", "run_info.json")} == {
        p: local[p]
        for p in (
            "config.json",
            "model.safetensors",
            "tokenizer.json",
            "tokenizer_config.json",
            "configuration_eurobert.py",
            "modeling_eurobert.py",
        )
    }
    # run_info.json is published with its local paths replaced, and otherwise as recorded.
    local_info, public_info = (json.loads((d / "run_info.json").read_text()) for d in (run_dir, main_dir))
    assert local_info["training_args"]["output_dir"] == str(run_dir)
    assert public_info["training_args"]["output_dir"] == f"<local>/{RUN}"
    assert public_info["run_config"]["run_settings"]["tokenizer_name_or_path"] == "<local>/tokenizer"
    assert {k: v for k, v in public_info.items() if k not in ("run_config", "training_args")} == {
        k: v for k, v in local_info.items() if k not in ("run_config", "training_args")
    }
    card = ModelCard.load(main_dir / "README.md")
    assert "| `step-1000` | 1,000 |" in card.text and "| `step-2000` | 2,000 |" in card.text  # the run's branches
    step_card = (tmp_path / "dry" / "models" / "org" / REPO / "step-1000" / "README.md").read_text()
    assert f"# toy-{RUN}-1000" in step_card and 'revision="step-1000"' in step_card  # a toy run says its scale
    assert "| SC | sst2 | `nyu-mll/glue` (sst2), validation" in card.text  # card filled from --results
    results_dir = tmp_path / "dry" / "datasets" / "org" / f"{REPO}-results" / "main"
    published = sha256_tree(results_dir)
    assert {
        "summary.csv",
        "runs.jsonl",
        f"predictions/toy-{RUN}.jsonl",
        f"results/{RUN}/sst2/lr5e-05-seed0.json",
    } <= published.keys()  # the rows name the model as the report does; the result files stay as recorded
    assert {json.loads(line)["model"] for line in (results_dir / "runs.jsonl").read_text().splitlines()} == {
        f"toy-{RUN}"
    }
    # Nothing published names a local folder: not the checkpoints', the report's, nor the test's.
    for path in (tmp_path / "dry").rglob("*"):
        assert not path.is_file() or str(tmp_path).encode() not in path.read_bytes(), path
    # Every file went inline in a commit: no LFS batch, no Xet token, nothing outside the implemented routes.
    assert hub.unknown_requests == []


def test_repush_identical_files_makes_no_commit(hub, online, study, tmp_path):
    run_dir, report = study
    push_commits(plans_for(run_dir, report, tmp_path / "w1"), TOKEN, endpoint=hub.endpoint, log=lambda _: None)
    n_commits = len(hub.repo("org/" + REPO).commits)
    n_requests = len(hub.requests)
    push_commits(plans_for(run_dir, report, tmp_path / "w2"), TOKEN, endpoint=hub.endpoint, log=lambda _: None)
    assert len(hub.repo("org/" + REPO).commits) == n_commits
    # The client saw every remote oid match and skipped the commit request altogether.
    assert not [p for m, p in hub.requests[n_requests:] if m == "POST" and "/commit/" in p]


def test_removed_file_is_deleted_in_the_next_commit(hub, online, tmp_path):
    ckpt = make_checkpoint(tmp_path / RUN, RUN, extra_files=False)
    (ckpt / "generation_config.json").write_text("{}")
    push_commits(stage_run(ckpt, "org/m"), TOKEN, endpoint=hub.endpoint, log=lambda _: None)
    (ckpt / "generation_config.json").unlink()
    push_commits(stage_run(ckpt, "org/m"), TOKEN, endpoint=hub.endpoint, log=lambda _: None)
    head = hub.commits("org/m")[0]
    assert "generation_config.json" not in head.files and len(hub.commits("org/m")) == 3


@pytest.mark.parametrize("mode", ["500", "drop", "drop_after_store"])
def test_retry_after_injected_failure_ends_with_one_complete_commit(hub, online, tmp_path, mode):
    ckpt = make_checkpoint(tmp_path / RUN, RUN)
    commits = stage_run(ckpt, "org/m")
    write_dry_run(commits, tmp_path / "dry")
    hub.fail_commit(1, mode)
    logs = []
    push_commits(commits, TOKEN, endpoint=hub.endpoint, backoff_s=0, log=logs.append)

    assert any("retrying" in line for line in logs)
    commits = hub.commits("org/m")
    assert len(commits) == 2  # the pushed commit on top of the initial one: no partial, no duplicate
    pushed = {p: hashlib.sha256(c).hexdigest() for p, c in commits[0].files.items() if p != ".gitattributes"}
    assert pushed == sha256_tree(tmp_path / "dry" / "models" / "org" / "m" / "main")


def test_persistent_failure_raises_after_retries(hub, online, tmp_path):
    ckpt = make_checkpoint(tmp_path / RUN, RUN)
    for n in range(1, 4):
        hub.fail_commit(n, "500")
    with pytest.raises(huggingface_hub.errors.HfHubHTTPError, match="500"):
        push_commits(stage_run(ckpt, "org/m"), TOKEN, endpoint=hub.endpoint, retries=2, backoff_s=0, log=lambda _: None)
    assert len(hub.commits("org/m")) == 1  # only the Hub's initial commit


def test_file_containing_the_token_is_refused_before_any_request(hub, online, tmp_path):
    ckpt = make_checkpoint(tmp_path / RUN, RUN)
    (ckpt / "tokenizer_config.json").write_text(f'{{"hub_token": "{TOKEN}"}}')
    with pytest.raises(PushError, match="tokenizer_config.json contains your Hugging Face token"):
        push_commits(stage_run(ckpt, "org/m"), TOKEN, endpoint=hub.endpoint)
    assert hub.requests == []


def test_dry_run_makes_the_token_scan_of_a_push(tmp_path, call_main, monkeypatch):
    """K1: the folders a dry run writes are what a push would publish: a file holding the token is refused too."""
    ckpt = make_checkpoint(tmp_path / RUN, RUN)
    (ckpt / "tokenizer_config.json").write_text(f'{{"hub_token": "{TOKEN}"}}')
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    proc = call_main(main, ckpt, "--repo_id", "org/m", "--dry_run", tmp_path / "dry")
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "error: org/m:tokenizer_config.json contains your Hugging Face token: remove it before pushing"
    ]
    assert not (tmp_path / "dry").exists()


def test_incomplete_checkpoint_is_refused(tmp_path):
    ckpt = make_checkpoint(tmp_path / RUN, RUN)
    (ckpt / "model.safetensors").unlink()
    with pytest.raises(PushError, match=r"missing \*\.safetensors weights"):
        stage_run(ckpt, "org/m")


def test_dry_run_refuses_a_non_empty_folder(tmp_path):
    ckpt = make_checkpoint(tmp_path / RUN, RUN)
    (tmp_path / "dry").mkdir()
    (tmp_path / "dry" / "old.txt").write_text("x")
    with pytest.raises(PushError, match="is not empty"):
        write_dry_run(stage_run(ckpt, "org/m"), tmp_path / "dry")


def test_placeholder_namespace_is_never_pushed(hub, online, tmp_path):
    ckpt = make_checkpoint(tmp_path / RUN, RUN)
    commits = stage_run(ckpt, "your-org/" + REPO)
    write_dry_run(commits, tmp_path / "dry")  # a dry run may use it: it writes folders only
    with pytest.raises(PushError, match="placeholder namespace 'your-org'"):
        push_commits(commits, TOKEN, endpoint=hub.endpoint)
    assert hub.requests == []


def test_a_file_holding_a_local_path_is_refused(tmp_path):
    ckpt = make_checkpoint(tmp_path / "runs" / RUN, RUN)
    (ckpt / "tokenizer_config.json").write_text(json.dumps({"name_or_path": str(ckpt.parent / "tokenizer")}))
    args = make_parser().parse_args([str(ckpt), "--repo_id", "org/m"])
    with pytest.raises(PushError, match=rf"org/m:tokenizer_config.json contains the local path {tmp_path}"):
        stage_commits(args, tmp_path / "work")


def test_any_checkpoint_can_be_published(tmp_path):
    """My own encoder, named outside the study's grammar, with its own intermediate checkpoint."""
    ckpt = make_checkpoint(tmp_path / "my-encoder", "my-encoder", objective="clm", mlm_probability=None, scale=None)
    make_checkpoint(
        ckpt / "intermediate" / "step-100",
        "my-encoder-100",
        objective="clm",
        mlm_probability=None,
        steps=100,
        scale=None,
    )
    commits = stage_run(ckpt, "me/my-encoder")
    assert [(p.revision, p.commit_message) for p in commits] == [
        ("main", "Upload my-encoder"),
        ("step-100", "Upload my-encoder-100"),
    ]
    readme = commits[0].files["README.md"].decode()
    assert "my-encoder: a `tiny`-size encoder trained for 200 steps with causal" in readme


# ----- the CLI -----


@pytest.fixture
def no_login(tmp_path, monkeypatch):
    """No token for the CLI in this process: none in the environment, no login file (HF_HOME is read at import)."""
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_TOKEN_PATH", str(tmp_path / "hf_home" / "token"))


def run_cli(args, tmp_path, **env_overrides):
    """The CLI in its own process, as a user runs it: the environment is read at import (HF_ENDPOINT, HF_TOKEN)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_ENDPOINT")
    }
    env.update(
        HF_HOME=str(tmp_path / "hf_home"),
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HUB_VERBOSITY="debug",
        HF_HUB_DISABLE_PROGRESS_BARS="1",
        PYTHONPATH=str(ROOT),
        **env_overrides,
    )
    return subprocess.run(
        [sys.executable, "-m", "model_cards.push", *map(str, args)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_without_token_fails_in_one_line_and_pushes_nothing(hub, study, call_main, no_login, monkeypatch):
    run_dir, report = study
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", hub.endpoint)  # online, on the loopback Hub
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    proc = call_main(main, run_dir, "--repo_id", "org/m", "--results", report)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: no Hugging Face token: set HF_TOKEN or run `hf auth login` "
        "(or use --dry_run OUT to write the repo folders without pushing)"
    ]
    assert hub.requests == [] and hub.repos == {}


@pytest.mark.slow  # the process boundary: the Hub client configured from the environment, as for a user
def test_cli_push_never_writes_the_token(hub, study, tmp_path, call_main, monkeypatch):
    run_dir, report = study
    proc = run_cli(
        [run_dir, "--repo_id", "org/m", "--results", report], tmp_path, HF_ENDPOINT=hub.endpoint, HF_TOKEN=TOKEN
    )
    assert proc.returncode == 0, proc.stderr
    assert "pushed model org/m@step-2000" in proc.stdout and "pushed dataset org/m-results@main" in proc.stdout
    monkeypatch.setenv("HF_TOKEN", TOKEN)  # a dry run needs no network (conftest: HF_HUB_OFFLINE): in this process
    dry = call_main(main, run_dir, "--repo_id", "org/m", "--results", report, "--dry_run", tmp_path / "dry")
    assert dry.returncode == 0, dry.stderr
    assert len(hub.repos) == 2 and len(hub.repo("org/m").commits) == 4

    # Logs (debug verbosity), every file written under tmp_path (dry run, HF_HOME, inputs) and every pushed file.
    assert TOKEN not in proc.stdout + proc.stderr + dry.stdout + dry.stderr
    for path in tmp_path.rglob("*"):
        assert not path.is_file() or TOKEN.encode() not in path.read_bytes(), path
    for repo in hub.repos.values():
        for commit in repo.commits.values():
            assert all(TOKEN.encode() not in content for content in commit.files.values())


def test_push_refuses_offline_mode(hub, tmp_path):
    """conftest sets HF_HUB_OFFLINE=1 before huggingface_hub is imported: pushing must say so, not hang or fall back."""
    assert huggingface_hub.constants.HF_HUB_OFFLINE
    ckpt = make_checkpoint(tmp_path / RUN, RUN)
    with pytest.raises(PushError, match="HF_HUB_OFFLINE is set"):
        push_commits(stage_run(ckpt, "org/m"), TOKEN, endpoint=hub.endpoint)
    assert hub.requests == []


@pytest.mark.parametrize(
    "repo_id", ["org/na me", "org/-name", "org/a--b", "org/x.", "org/" + "a" * 97, "noslash", "a/b/c"]
)
def test_dry_run_refuses_repo_ids_the_hub_refuses(study, tmp_path, repo_id, call_main):
    run_dir, _ = study
    proc = call_main(main, run_dir, "--repo_id", repo_id, "--dry_run", tmp_path / "dry")  # conftest: HF_HUB_OFFLINE
    assert proc.returncode != 0 and proc.stderr.strip().splitlines()[-1].startswith(f"error: repo id {repo_id!r}")
    assert not (tmp_path / "dry").exists()


def test_results_dataset_of_the_study_layout_loads_with_datasets(study, tmp_path, call_main):
    """The README's publish command on a study's folders (report/ beside results/): every task family in one
    `runs` table and one `predictions` table, read back by `datasets.load_dataset` from the dry-run folder."""
    run_dir, _ = study
    other = make_checkpoint(tmp_path / "runs" / "610m-clm-42k", "610m-clm-42k", objective="clm", mlm_probability=None)
    write_results(tmp_path / "study" / "results", {RUN: run_dir, "610m-clm-42k": other})
    (tmp_path / "study" / "report").mkdir()
    write_summary(tmp_path / "study" / "report" / "summary.csv", tmp_path / "study" / "results", scale=None)
    proc = call_main(
        main,
        run_dir,
        "--repo_id",
        "org/m",
        "--results",
        tmp_path / "study" / "report",
        "--results_dir",
        tmp_path / "study" / "results",
        "--dry_run",
        tmp_path / "dry",
    )  # conftest: HF_HUB_OFFLINE=1
    assert proc.returncode == 0, proc.stderr
    folder = tmp_path / "dry" / "datasets" / "org" / "m-results" / "main"
    assert DatasetCard.load(folder / "README.md").data.license == "cc-by-sa-4.0"

    cache = tmp_path / "hf-datasets-cache"
    runs = load_dataset(str(folder), "runs", split="train", cache_dir=str(cache))
    assert len(runs) == 2 * 4 * 2 and sorted(set(runs["family"])) == ["ir", "qa", "sc", "tc"]
    assert runs.features["lr"].dtype == "float64" and runs.features["main_score_test"].dtype == "float64"
    diverged = [r for r in runs if r["status"] == "diverged"]
    assert len(diverged) == 2 and all(r["main_score_test"] is None for r in diverged)
    sst2 = next(r for r in runs if (r["task"], r["model"], r["seed"]) == ("sst2", RUN, 0))
    assert (sst2["test_dataset"], sst2["test_split"], sst2["data_source"]) == ("nyu-mll/glue", "validation", "offline")
    assert json.loads(sst2["test_scores"]) == {"accuracy": 0.55} and json.loads(sst2["config"])["batch_size"] == 32
    assert str(tmp_path) not in sst2["identity"] and "<local>/dev.tsv" in sst2["identity"]

    predictions = load_dataset(str(folder), "predictions", split="train", cache_dir=str(cache))
    test = {f: [r for r in predictions if r["family"] == f and r["split"] == "test"] for f in ("sc", "tc", "qa", "ir")}
    assert json.loads(test["tc"][0]["prediction"]) == ["B-PER", "O"] and test["tc"][0]["score"] == 1.0
    qa = test["qa"][0]
    assert (qa["id"], json.loads(qa["prediction"]), json.loads(qa["reference"])) == (
        "q1",
        "1/2 of it",
        ["half", "1/2 of it"],
    )
    ir = test["ir"][0]
    assert json.loads(ir["prediction"]) == ["d2", "d1"] and json.loads(ir["scores"])["mrr@10"] == 0.5
    assert ir["id"] == "7" and test["sc"][0]["id"] is None
    summary = load_dataset(str(folder), "summary", split="train", cache_dir=str(cache))
    assert len(summary) == 8 and summary.features["n_seeds"].dtype == "int64"
    assert summary.features["mean"].dtype == "float64" and summary.features["entity_f1"].dtype == "float64"


@pytest.mark.parametrize(
    "scale, steps, shown", [("toy", 200, "toy-610m-mlm40-42k"), (None, 200, "custom-610m-mlm40-42k")]
)
def test_a_paper_name_is_refused_for_a_checkpoint_of_another_scale(tmp_path, call_main, scale, steps, shown):
    """A toy run, or a run outside the study at another size or length, is never pushed under the paper's name: one
    line naming the repo id to use, nothing written; the grid files it under that name too."""
    from evaluation import resolve

    ckpt = make_checkpoint(tmp_path / RUN, RUN, scale=scale, steps=steps)
    proc = call_main(main, ckpt, "--repo_id", "org/" + RUN, "--dry_run", tmp_path / "dry")
    assert proc.returncode == 2 and proc.stderr.strip().endswith(f"push it as org/{shown}")
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "dry").exists()
    assert call_main(main, ckpt, "--repo_id", "org/" + shown, "--dry_run", tmp_path / "dry").returncode == 0
    assert resolve.model_name(str(ckpt))[0] == shown and resolve.model_name(str(ckpt), scaled=False)[0] == RUN
