"""A loopback Hugging Face Hub for tests: enough of the Hub's HTTP protocol for huggingface_hub's real `HfApi`.

Start it, point the client at it (`HF_ENDPOINT=server.endpoint` in a subprocess, or `HfApi(endpoint=...)`
in-process), push, then download back through the client. Routes follow huggingface_hub 2.4.0
(`hf_api.py`, `_commit_api.py`, `file_download.py`):

    GET  /api/whoami-v2                                   whoami
    POST /api/repos/create                                create_repo (409 when it exists)
    POST /api/validate-yaml                               README metadata check done by create_commit
    POST /api/{type}s/{org}/{name}/preupload/{rev}        upload modes: always "regular", so no LFS and no Xet
    POST /api/{type}s/{org}/{name}/commit/{rev}           NDJSON commit, base64 file contents
    POST /api/{type}s/{org}/{name}/branch/{branch}        create_branch (409 when it exists)
    GET  /api/{type}s/{org}/{name}/refs                   list_repo_refs
    GET  /api/{type}s/{org}/{name}/commits/{rev}          list_repo_commits
    GET  /api/{type}s/{org}/{name}/tree/{rev}[/path]      list_repo_tree / list_repo_files / snapshot_download
    GET  /api/{type}s/{org}/{name}[/revision/{rev}]       model_info / dataset_info / repo_info
    HEAD|GET /[{type}s/]{org}/{name}/resolve/{rev}/{path}  hf_hub_download

Why "regular" for every file: the client then sends contents inline in the commit (`_prepare_commit_payload`)
and never calls `_upload_files`, the only place that uses hf_xet or the LFS batch API. Any request to a route
not listed above is answered 404 and recorded in `unknown_requests`, so a test can prove xet/LFS were not used.

Commits are atomic and stored in memory (`commits`), so tests can count them. Fault injection
(`fail_commit(n, mode)`) makes the n-th commit request fail: "500" answers HTTP 500 and stores nothing,
"drop" closes the connection without storing, "drop_after_store" stores the commit and then closes the
connection (the client never learns that it succeeded).
"""

import base64
import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

GITATTRIBUTES = b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n"


def git_blob_oid(content: bytes) -> str:
    """Git's blob id (sha1 of "blob <len>\\0" + content), what the Hub calls a regular file's oid."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


@dataclass
class Commit:
    oid: str
    parent: str | None
    title: str
    message: str
    files: dict[str, bytes]  # the whole tree after this commit
    date: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()))


@dataclass
class Repo:
    repo_id: str
    repo_type: str
    branches: dict[str, str] = field(default_factory=dict)  # branch name -> commit oid
    commits: dict[str, Commit] = field(default_factory=dict)

    def resolve(self, revision: str) -> Commit | None:
        oid = self.branches.get(revision, revision)
        return self.commits.get(oid)

    def history(self, revision: str) -> list[Commit]:
        """Commits reachable from `revision`, newest first."""
        out, commit = [], self.resolve(revision)
        while commit is not None:
            out.append(commit)
            commit = self.commits.get(commit.parent) if commit.parent else None
        return out


class HubServer:
    """In-memory Hub on 127.0.0.1 (free port), served from a background thread.

    Args:
        token: the only token accepted on authenticated routes (`Authorization: Bearer <token>`).
        user: the user name returned by whoami.
    """

    def __init__(self, token: str, user: str = "tester"):
        self.token = token
        self.user = user
        self.repos: dict[tuple[str, str], Repo] = {}
        self.requests: list[tuple[str, str]] = []  # (method, path) of every request
        self.unknown_requests: list[tuple[str, str]] = []
        self._faults: dict[int, str] = {}  # commit request number (1-based) -> mode
        self._commit_requests = 0
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._httpd.daemon_threads = True
        # A short poll interval keeps stop() (test teardown) fast.
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def endpoint(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "HubServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def fail_commit(self, n: int, mode: str = "500") -> None:
        """Make the n-th commit request from now on fail ("500", "drop" or "drop_after_store")."""
        if mode not in ("500", "drop", "drop_after_store"):
            raise ValueError(f"unknown fault mode {mode!r}; use '500', 'drop' or 'drop_after_store'")
        self._faults[self._commit_requests + n] = mode

    def repo(self, repo_id: str, repo_type: str = "model") -> Repo:
        return self.repos[(repo_type, repo_id)]

    def commits(self, repo_id: str, repo_type: str = "model", revision: str = "main") -> list[Commit]:
        """Commits on `revision`, newest first (the repo's initial commit last)."""
        return self.repo(repo_id, repo_type).history(revision)

    # ----- state changes (called by the handler, under the lock) -----

    def create_repo(self, repo_id: str, repo_type: str) -> bool:
        if (repo_type, repo_id) in self.repos:
            return False
        repo = Repo(repo_id, repo_type)
        # The Hub starts every repo with one commit holding .gitattributes.
        self._add_commit(repo, None, "initial commit", "", {".gitattributes": GITATTRIBUTES})
        repo.branches["main"] = next(iter(repo.commits))
        self.repos[(repo_type, repo_id)] = repo
        return True

    def _add_commit(self, repo: Repo, parent: Commit | None, title: str, message: str, files: dict) -> Commit:
        seed = f"{repo.repo_id}|{parent.oid if parent else ''}|{len(repo.commits)}|{title}|{time.time_ns()}"
        commit = Commit(hashlib.sha1(seed.encode()).hexdigest(), parent.oid if parent else None, title, message, files)
        repo.commits[commit.oid] = commit
        return commit

    def apply_commit(self, repo: Repo, branch: str, lines: list[dict]) -> Commit:
        header = lines[0]["value"]
        files = dict(repo.resolve(branch).files)
        for line in lines[1:]:
            key, value = line["key"], line["value"]
            if key == "file":
                files[value["path"]] = base64.b64decode(value["content"])
            elif key == "deletedFile":
                files.pop(value["path"])
            elif key == "deletedFolder":
                prefix = value["path"].rstrip("/") + "/"
                files = {p: c for p, c in files.items() if not p.startswith(prefix)}
            else:  # lfsFile would need an LFS store: preupload never asks for it
                raise ValueError(f"unsupported commit operation {key!r}")
        commit = self._add_commit(repo, repo.resolve(branch), header["summary"], header.get("description", ""), files)
        repo.branches[branch] = commit.oid
        return commit


def _make_handler(hub: HubServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the real Hub

        def log_message(self, *args):  # keep test output clean
            pass

        # ----- plumbing -----

        def _send(self, status: int, body=b"", headers: dict | None = None, head_only: bool = False):
            if not isinstance(body, bytes):
                body = json.dumps(body).encode()
                headers = {"Content-Type": "application/json", **(headers or {})}
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head_only:
                self.wfile.write(body)

        def _error(self, status: int, code: str | None = None, message: str = ""):
            headers = {"X-Error-Code": code} if code else {}
            self._send(status, {"error": message or code or "error"}, headers)

        def _body(self) -> bytes:
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _authorized(self) -> bool:
            return self.headers.get("Authorization") == f"Bearer {hub.token}"

        def _drop(self):
            """Close the connection without answering: the client sees a transport error."""
            self.close_connection = True

        def _route(self, method: str):
            raw_path = urlsplit(self.path).path
            with hub._lock:
                hub.requests.append((method, raw_path))
            parts = [unquote(p) for p in raw_path.strip("/").split("/")]
            handled = _dispatch(hub, self, method, parts)
            if handled is False:
                with hub._lock:
                    hub.unknown_requests.append((method, raw_path))
                self._error(404, None, f"route not implemented by the test Hub: {method} {raw_path}")

        def do_GET(self):
            self._route("GET")

        def do_HEAD(self):
            self._route("HEAD")

        def do_POST(self):
            self._route("POST")

    return Handler


def _repo_type(segment: str) -> str | None:
    return {"models": "model", "datasets": "dataset", "spaces": "space"}.get(segment)


def _dispatch(hub: HubServer, h, method: str, parts: list[str]):
    """Route one request; returns False when no route matches."""
    if parts[:1] == ["api"]:
        return _dispatch_api(hub, h, method, parts[1:])
    # File download: /{org}/{name}/resolve/... or /{type}s/{org}/{name}/resolve/...
    repo_type = _repo_type(parts[0]) if parts else None
    if repo_type:
        parts = parts[1:]
    if len(parts) >= 5 and parts[2] == "resolve" and method in ("GET", "HEAD"):
        return _resolve_file(hub, h, repo_type or "model", "/".join(parts[:2]), parts[3], "/".join(parts[4:]), method)
    return False


def _dispatch_api(hub: HubServer, h, method: str, parts: list[str]):
    if parts == ["whoami-v2"] and method == "GET":
        if not h._authorized():
            return h._error(401, None, "Invalid credentials")
        return h._send(200, {"type": "user", "name": hub.user, "auth": {"type": "access_token"}})
    if parts == ["validate-yaml"] and method == "POST":
        h._body()
        return h._send(200, {"errors": [], "warnings": []})
    if parts == ["repos", "create"] and method == "POST":
        return _create_repo(hub, h)
    repo_type = _repo_type(parts[0]) if parts else None
    if repo_type is None or len(parts) < 3:
        return False
    key = (repo_type, f"{parts[1]}/{parts[2]}")
    action, rest = (parts[3] if len(parts) > 3 else None), parts[4:]
    with hub._lock:
        repo = hub.repos.get(key)
    if repo is None:
        if method == "POST":
            h._body()
        return h._error(404, "RepoNotFound", f"repository {key[1]} not found")
    if method == "POST":
        if action == "preupload" and len(rest) == 1:
            return _preupload(hub, h, repo, rest[0])
        if action == "commit" and len(rest) == 1:
            return _commit(hub, h, repo, rest[0])
        if action == "branch" and len(rest) == 1:
            return _create_branch(hub, h, repo, rest[0])
        return False
    if method != "GET":
        return False
    if action is None:
        return _repo_info(hub, h, repo, "main")
    if action == "revision" and len(rest) == 1:
        return _repo_info(hub, h, repo, rest[0])
    if action == "refs" and not rest:
        return _refs(hub, h, repo)
    if action == "commits" and len(rest) == 1:
        return _list_commits(hub, h, repo, rest[0])
    if action == "tree" and rest:
        return _tree(hub, h, repo, rest[0], "/".join(rest[1:]))
    return False


def _create_repo(hub: HubServer, h):
    if not h._authorized():
        h._body()
        return h._error(401, None, "Invalid credentials")
    payload = json.loads(h._body())
    repo_type = payload.get("type") or "model"
    repo_id = f"{payload['organization']}/{payload['name']}" if payload.get("organization") else payload["name"]
    with hub._lock:
        created = hub.create_repo(repo_id, repo_type)
    prefix = "" if repo_type == "model" else f"{repo_type}s/"
    url = f"{hub.endpoint}/{prefix}{repo_id}"
    if not created:  # the Hub's 409 body also carries the url (create_repo(exist_ok=True) reads it)
        return h._send(409, {"error": "You already created this repo", "url": url})
    return h._send(200, {"url": url, "name": repo_id})


def _preupload(hub: HubServer, h, repo: Repo, revision: str):
    payload = json.loads(h._body())
    if not h._authorized():
        return h._error(401, None, "Invalid credentials")
    commit = repo.resolve(revision)
    if commit is None:
        return h._error(404, "RevisionNotFound", f"revision {revision} not found")
    files = []
    for item in payload["files"]:
        existing = commit.files.get(item["path"])
        files.append(
            {
                "path": item["path"],
                "uploadMode": "regular",
                "shouldIgnore": False,
                # The client drops unchanged files (remote oid == git blob oid of the local file): idempotent pushes.
                "oid": git_blob_oid(existing) if existing is not None else None,
            }
        )
    return h._send(200, {"files": files, "commitOid": commit.oid})


def _commit(hub: HubServer, h, repo: Repo, branch: str):
    body = h._body()
    if not h._authorized():
        return h._error(401, None, "Invalid credentials")
    with hub._lock:
        hub._commit_requests += 1
        fault = hub._faults.pop(hub._commit_requests, None)
    if fault == "500":
        return h._error(500, None, "injected failure")
    if fault == "drop":
        return h._drop()
    lines = [json.loads(line) for line in body.splitlines() if line.strip()]
    if not lines or lines[0].get("key") != "header":
        return h._error(400, None, "commit payload must start with a header line")
    with hub._lock:
        if branch not in repo.branches:
            return h._error(404, "RevisionNotFound", f"branch {branch} not found")
        parent = lines[0]["value"].get("parentCommit")
        if parent is not None and parent != repo.branches[branch]:
            return h._error(412, None, "parent commit is not the head of the branch")
        try:
            commit = hub.apply_commit(repo, branch, lines)
        except (KeyError, ValueError) as exc:
            return h._error(400, None, f"bad commit: {exc}")
    if fault == "drop_after_store":
        return h._drop()
    prefix = "" if repo.repo_type == "model" else f"{repo.repo_type}s/"
    return h._send(
        200,
        {
            "commitUrl": f"{hub.endpoint}/{prefix}{repo.repo_id}/commit/{commit.oid}",
            "commitOid": commit.oid,
            "success": True,
        },
    )


def _create_branch(hub: HubServer, h, repo: Repo, branch: str):
    payload = json.loads(h._body() or b"{}")
    if not h._authorized():
        return h._error(401, None, "Invalid credentials")
    with hub._lock:
        if branch in repo.branches:
            return h._error(409, None, f"branch {branch} already exists")
        start = repo.resolve(payload.get("startingPoint") or "main")
        if start is None:
            return h._error(404, "RevisionNotFound", "starting point not found")
        repo.branches[branch] = start.oid
    return h._send(200, {})


def _repo_info(hub: HubServer, h, repo: Repo, revision: str):
    commit = repo.resolve(revision)
    if commit is None:
        return h._error(404, "RevisionNotFound", f"revision {revision} not found")
    siblings = [{"rfilename": p, "size": len(c), "blobId": git_blob_oid(c)} for p, c in sorted(commit.files.items())]
    return h._send(
        200,
        {"id": repo.repo_id, "sha": commit.oid, "private": False, "siblings": siblings, "lastModified": commit.date},
    )


def _refs(hub: HubServer, h, repo: Repo):
    branches = [{"name": n, "ref": f"refs/heads/{n}", "targetCommit": oid} for n, oid in sorted(repo.branches.items())]
    return h._send(200, {"branches": branches, "converts": [], "tags": [], "pullRequests": []})


def _list_commits(hub: HubServer, h, repo: Repo, revision: str):
    if repo.resolve(revision) is None:
        return h._error(404, "RevisionNotFound", f"revision {revision} not found")
    items = [
        {"id": c.oid, "authors": [{"user": hub.user}], "date": c.date, "title": c.title, "message": c.message}
        for c in repo.history(revision)
    ]
    return h._send(200, items)


def _tree(hub: HubServer, h, repo: Repo, revision: str, path: str):
    commit = repo.resolve(revision)
    if commit is None:
        return h._error(404, "RevisionNotFound", f"revision {revision} not found")
    recursive = "recursive=true" in urlsplit(h.path).query.lower()
    prefix = path.rstrip("/") + "/" if path else ""
    entries, folders = [], set()
    for file_path, content in sorted(commit.files.items()):
        if not file_path.startswith(prefix):
            continue
        rest = file_path[len(prefix) :]
        if "/" in rest and not recursive:
            folders.add(prefix + rest.split("/")[0])
            continue
        for i in range(rest.count("/")):  # parent folders of a nested file, listed in recursive mode
            folders.add(prefix + "/".join(rest.split("/")[: i + 1]))
        entries.append({"type": "file", "path": file_path, "size": len(content), "oid": git_blob_oid(content)})
    entries += [{"type": "directory", "path": f, "oid": git_blob_oid(f.encode())} for f in sorted(folders)]
    return h._send(200, entries)


def _resolve_file(hub: HubServer, h, repo_type: str, repo_id: str, revision: str, path: str, method: str):
    with hub._lock:
        repo = hub.repos.get((repo_type, repo_id))
    if repo is None:
        return h._error(404, "RepoNotFound", f"repository {repo_id} not found")
    commit = repo.resolve(revision)
    if commit is None:
        return h._error(404, "RevisionNotFound", f"revision {revision} not found")
    if path not in commit.files:
        return h._error(404, "EntryNotFound", f"{path} not found")
    content = commit.files[path]
    headers = {
        "X-Repo-Commit": commit.oid,
        "ETag": f'"{git_blob_oid(content)}"',
        "Content-Type": "application/octet-stream",
    }
    return h._send(200, content, headers, head_only=(method == "HEAD"))
