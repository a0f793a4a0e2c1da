"""Hub publishing through huggingface_hub's real client against the loopback Hub of tests/hub_server.py."""

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import huggingface_hub
import pytest
from huggingface_hub import HfApi, snapshot_download

from hub_server import HubServer
from model_cards.push import PushError, build_plans, make_parser, plan_run, push_plans, write_dry_run
from test_model_cards import make_checkpoint, write_report

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "hf_loopbackSecretToken0123456789"
RUN = "610m-mlm40-42k"


def sha256_tree(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


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
    """A run folder with two intermediate checkpoints, and an evaluation report."""
    run_dir = make_checkpoint(tmp_path / "runs" / RUN, RUN)
    for step in (1000, 2000):
        make_checkpoint(run_dir / "intermediate" / f"step-{step}", RUN, steps=step)
    report = write_report(tmp_path / "report", [RUN])
    return run_dir, report


def plans_for(run_dir, report, repo_id="org/" + RUN):
    args = make_parser().parse_args([str(run_dir), "--repo-id", repo_id, "--results", str(report)])
    return build_plans(args)


def download(hub, repo_id, revision, repo_type, cache_dir) -> Path:
    return Path(snapshot_download(repo_id, revision=revision, repo_type=repo_type, endpoint=hub.endpoint,
                                  token=TOKEN, cache_dir=cache_dir))


def test_push_is_byte_identical_to_dry_run_with_branches_and_results(hub, online, study, tmp_path):
    run_dir, report = study
    plans = plans_for(run_dir, report)
    write_dry_run(plans, tmp_path / "dry")
    push_plans(plans, TOKEN, endpoint=hub.endpoint, log=lambda _: None)

    api = HfApi(endpoint=hub.endpoint, token=TOKEN)
    refs = api.list_repo_refs("org/" + RUN)
    assert sorted(b.name for b in refs.branches) == ["main", "step-1000", "step-2000"]
    # One commit per revision on top of the Hub's initial commit.
    assert len(hub.repo("org/" + RUN).commits) == 1 + 3
    assert len(hub.repo(f"org/{RUN}-results", "dataset").commits) == 1 + 1
    assert len(api.list_repo_commits("org/" + RUN, revision="step-1000")) == 3  # initial, main, branch commit

    for plan in plans:
        fetched = sha256_tree(download(hub, plan.repo_id, plan.revision, plan.repo_type, tmp_path / "cache"))
        assert fetched.pop(".gitattributes")
        assert fetched == sha256_tree(tmp_path / "dry" / plan.folder), plan.folder
    # The dry run holds the checkpoint's Hub files byte for byte, and none of the trainer leftovers.
    main_dir = tmp_path / "dry" / "models" / "org" / RUN / "main"
    local = sha256_tree(run_dir)
    assert {p: h for p, h in sha256_tree(main_dir).items() if p != "README.md"} == {
        p: local[p] for p in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                              "configuration_eurobert.py", "modeling_eurobert.py", "run_info.json")}
    step_card = (tmp_path / "dry" / "models" / "org" / RUN / "step-1000" / "README.md").read_text()
    assert f"# {RUN}-1000" in step_card and 'revision="step-1000"' in step_card
    assert "| SC | sst2 | accuracy |" in main_dir.joinpath("README.md").read_text()  # card filled from --results
    results_dir = tmp_path / "dry" / "datasets" / "org" / f"{RUN}-results" / "main"
    assert "summary.csv" in sha256_tree(results_dir) and (results_dir / "results" / RUN / "sst2").is_dir()
    # Every file went inline in a commit: no LFS batch, no Xet token, nothing outside the implemented routes.
    assert hub.unknown_requests == []


def test_repush_identical_files_makes_no_commit(hub, online, study):
    run_dir, report = study
    push_plans(plans_for(run_dir, report), TOKEN, endpoint=hub.endpoint, log=lambda _: None)
    n_commits = len(hub.repo("org/" + RUN).commits)
    n_requests = len(hub.requests)
    push_plans(plans_for(run_dir, report), TOKEN, endpoint=hub.endpoint, log=lambda _: None)
    assert len(hub.repo("org/" + RUN).commits) == n_commits
    # The client saw every remote oid match and skipped the commit request altogether.
    assert not [p for m, p in hub.requests[n_requests:] if m == "POST" and "/commit/" in p]


def test_removed_file_is_deleted_in_the_next_commit(hub, online, tmp_path):
    ckpt = make_checkpoint(tmp_path / RUN, RUN, extra_files=False)
    (ckpt / "generation_config.json").write_text("{}")
    push_plans(plan_run(ckpt, "org/m"), TOKEN, endpoint=hub.endpoint, log=lambda _: None)
    (ckpt / "generation_config.json").unlink()
    push_plans(plan_run(ckpt, "org/m"), TOKEN, endpoint=hub.endpoint, log=lambda _: None)
    head = hub.commits("org/m")[0]
    assert "generation_config.json" not in head.files and len(hub.commits("org/m")) == 3


@pytest.mark.parametrize("mode", ["500", "drop", "drop_after_store"])
def test_retry_after_injected_failure_ends_with_one_complete_commit(hub, online, tmp_path, mode):
    ckpt = make_checkpoint(tmp_path / RUN, RUN)
    plans = plan_run(ckpt, "org/m")
    write_dry_run(plans, tmp_path / "dry")
    hub.fail_commit(1, mode)
    logs = []
    push_plans(plans, TOKEN, endpoint=hub.endpoint, backoff_s=0, log=logs.append)

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
        push_plans(plan_run(ckpt, "org/m"), TOKEN, endpoint=hub.endpoint, retries=2, backoff_s=0, log=lambda _: None)
    assert len(hub.commits("org/m")) == 1  # only the Hub's initial commit


def test_file_containing_the_token_is_refused_before_any_request(hub, online, tmp_path):
    ckpt = make_checkpoint(tmp_path / RUN, RUN)
    (ckpt / "tokenizer_config.json").write_text(f'{{"hub_token": "{TOKEN}"}}')
    with pytest.raises(PushError, match="tokenizer_config.json contains your Hugging Face token"):
        push_plans(plan_run(ckpt, "org/m"), TOKEN, endpoint=hub.endpoint)
    assert hub.requests == []


def test_incomplete_checkpoint_is_refused(tmp_path):
    ckpt = make_checkpoint(tmp_path / RUN, RUN)
    (ckpt / "model.safetensors").unlink()
    with pytest.raises(PushError, match=r"missing \*\.safetensors weights"):
        plan_run(ckpt, "org/m")


def test_dry_run_refuses_a_non_empty_folder(tmp_path):
    ckpt = make_checkpoint(tmp_path / RUN, RUN)
    (tmp_path / "dry").mkdir()
    (tmp_path / "dry" / "old.txt").write_text("x")
    with pytest.raises(PushError, match="is not empty"):
        write_dry_run(plan_run(ckpt, "org/m"), tmp_path / "dry")


# ----- the CLI in a subprocess: the environment is read at import, as for a user -----

def run_cli(args, tmp_path, **env_overrides):
    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_ENDPOINT")}
    env.update(HF_HOME=str(tmp_path / "hf_home"), HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_VERBOSITY="debug",
               HF_HUB_DISABLE_PROGRESS_BARS="1", PYTHONPATH=str(ROOT), **env_overrides)
    return subprocess.run([sys.executable, "-m", "model_cards.push", *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_cli_without_token_fails_in_one_line_and_pushes_nothing(hub, study, tmp_path):
    run_dir, report = study
    proc = run_cli([run_dir, "--repo-id", "org/m", "--results", report], tmp_path, HF_ENDPOINT=hub.endpoint)
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == [
        "error: no Hugging Face token: set HF_TOKEN or run `hf auth login` "
        "(or use --dry-run OUT to write the repo folders without pushing)"]
    assert hub.requests == [] and hub.repos == {}


def test_cli_push_never_writes_the_token(hub, study, tmp_path):
    run_dir, report = study
    proc = run_cli([run_dir, "--repo-id", "org/m", "--results", report], tmp_path,
                   HF_ENDPOINT=hub.endpoint, HF_TOKEN=TOKEN)
    assert proc.returncode == 0, proc.stderr
    assert "pushed model org/m@step-2000" in proc.stdout and "pushed dataset org/m-results@main" in proc.stdout
    dry = run_cli([run_dir, "--repo-id", "org/m", "--results", report, "--dry-run", tmp_path / "dry"], tmp_path,
                  HF_TOKEN=TOKEN, HF_HUB_OFFLINE="1")  # a dry run needs no network
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
        push_plans(plan_run(ckpt, "org/m"), TOKEN, endpoint=hub.endpoint)
    assert hub.requests == []


@pytest.mark.parametrize("repo_id", ["org/na me", "org/-name", "org/a--b", "org/x.", "org/" + "a" * 97, "noslash", "a/b/c"])
def test_dry_run_refuses_repo_ids_the_hub_refuses(study, tmp_path, repo_id):
    run_dir, _ = study
    proc = run_cli([run_dir, "--repo-id", repo_id, "--dry-run", tmp_path / "dry"], tmp_path, HF_HUB_OFFLINE="1")
    assert proc.returncode != 0 and proc.stderr.strip().splitlines()[-1].startswith(f"error: repo id {repo_id!r}")
    assert not (tmp_path / "dry").exists()
