"""A local model hub for tests: serves repositories built in the test, over the routes the real
``huggingface_hub`` 2.4 client and the controller's resolution call (docs/weights.md,
"Resolution").

Hugging Face routes (``HubServer.url`` is the endpoint):

- ``GET /api/models/<repo>/revision/<rev>``: the model info, ``sha`` the commit the revision
  names: a branch, a tag (stored peeled), a full or short (7+ hex) commit, ``refs/pr/<n>``; the
  revision is one path segment (``refs%2Fpr%2F1``). An unknown one: 404 with
  ``X-Error-Code: RevisionNotFound``.
- ``GET /api/models/<repo>/tree/<rev>[/<path>]?recursive=…``: the listing, ``page_size`` entries
  a page, the next page named by ``Link: <…>; rel="next"`` (a cursor in the query). Files carry
  ``oid`` (the git blob sha1; for an LFS file, the pointer's) and, for LFS files,
  ``lfs{oid: sha256, size, pointerSize}``.
- ``HEAD``/``GET /<repo>/resolve/<rev>/<path>``: ``X-Repo-Commit``, ``ETag`` (an LFS file's
  sha256, another file's git blob sha1), ``Content-Length``, ``Accept-Ranges``; a ``Range``
  GET answers 206. Never ``X-Xet-Hash`` (the client would switch to Xet storage).
- ``GET /api/whoami-v2``: 200 for a token some repository accepts, else 401.

ModelScope routes (served by the same app, over HTTPS when the server is given a certificate):

- ``GET /api/v1/models/<id>/commits?Ref=<rev>``: ``{"Code": 200, "Data": {"Commit": {"Id": …}}}``
  (``Commit: null`` for an unknown ref);
- ``GET /<id>.git/info/refs?service=git-upload-pack``: the git smart-HTTP ref advertisement
  (branch heads and peeled tags);
- ``GET /api/v1/models/<id>/repo/files?Revision=<commit>&Recursive=true[&Root=<dir>]``: the
  listing, cut at ``model_scope_limit`` entries as ModelScope cuts at 3000;
- ``HEAD``/``GET /api/v1/models/<id>/repo?Revision=<commit>&FilePath=<path>``: the file;
- ``GET /openapi/v1/users/me``: 200 for a token some repository accepts, else 401.

Per repository error modes (:class:`HubRepo`): a token it requires (401 without it), gated (403,
``X-Error-Code: GatedRepo``), a status every request answers (a 5xx), LFS object ids hidden as
64 ``*``, a ``Link`` that points at another host. Every request is recorded
(:attr:`HubServer.requests`) with its ``Authorization`` header, so a test can check what was
sent.
"""

from __future__ import annotations

import base64
import hashlib
import json
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, quote, unquote

from aiohttp import web

LFS_POINTER = "version https://git-lfs.github.com/spec/v1\noid sha256:{sha}\nsize {size}\n"


def git_blob_sha1(content: bytes) -> str:
    """git's object id of a blob: SHA-1 over ``blob <size>\\0`` and the content."""
    return hashlib.sha1(b"blob %d\x00" % len(content) + content).hexdigest()


@dataclass(frozen=True)
class HubFile:
    """One file of a commit; ``lfs``: stored in LFS (the tree names it by its sha256)."""

    path: str
    content: bytes
    lfs: bool = False

    @property
    def size(self) -> int:
        return len(self.content)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.content).hexdigest()

    @property
    def git_sha1(self) -> str:
        return git_blob_sha1(self.content)

    @property
    def oid(self) -> str:
        """The tree's ``oid``: the blob the repository holds (an LFS file's pointer)."""
        if self.lfs:
            pointer = LFS_POINTER.format(sha=self.sha256, size=self.size).encode()
            return git_blob_sha1(pointer)
        return self.git_sha1

    @property
    def etag(self) -> str:
        return self.sha256 if self.lfs else self.git_sha1


def commit_of(files: Mapping[str, HubFile], salt: str = "") -> str:
    """A commit id for a set of files (deterministic, 40 hex)."""
    digest = hashlib.sha1(salt.encode())
    for path in sorted(files):
        digest.update(f"{path}\x00{files[path].oid}\x00".encode())
    return digest.hexdigest()


@dataclass
class HubRepo:
    """A repository: its commits (files by path), its refs, and its error modes."""

    repo_id: str
    commits: dict[str, dict[str, HubFile]] = field(default_factory=dict)
    #: Branches, tags (peeled: the commit they name) and ``refs/pr/<n>``.
    refs: dict[str, str] = field(default_factory=dict)
    #: Tags among ``refs`` (the ModelScope ref advertisement peels them).
    tags: set[str] = field(default_factory=set)
    #: A token every request must carry (``Authorization: Bearer <token>``); else 401.
    token: str | None = None
    #: Every request is answered 403 with ``X-Error-Code: GatedRepo``.
    gated: bool = False
    #: Every request is answered this status (a 5xx: the hub is down for this repository).
    fail_status: int | None = None
    #: The tree shows every LFS object id as 64 ``*``.
    hide_lfs: bool = False
    #: The listing's ``Link`` names this host instead of the server's own.
    link_host: str | None = None
    #: ModelScope: the git ref advertisement names these commits instead (a hub whose two
    #: answers disagree).
    git_refs: dict[str, str] | None = None

    def add_commit(
        self, files: Mapping[str, bytes | tuple[bytes, bool]], *, ref: str | None = None
    ) -> str:
        """Add a commit holding ``files`` (``(content, lfs)`` for LFS files); point ``ref`` at
        it; return its id."""
        built = {
            path: HubFile(path, *(value if isinstance(value, tuple) else (value, False)))
            for path, value in files.items()
        }
        commit = commit_of(built, salt=f"{self.repo_id}:{len(self.commits)}")
        self.commits[commit] = built
        if ref is not None:
            self.refs[ref] = commit
        return commit

    def resolve(self, revision: str) -> str | None:
        """The commit a revision names (``None``: none)."""
        if revision in self.refs:
            return self.refs[revision]
        if revision in self.commits:
            return revision
        if len(revision) >= 7 and all(c in "0123456789abcdef" for c in revision):
            found = [c for c in self.commits if c.startswith(revision)]
            if len(found) == 1:
                return found[0]
        return None


def _tree(files: Mapping[str, HubFile], under: str, recursive: bool) -> list[dict[str, Any]]:
    """The entries under ``under`` (``""``: the root), directories included."""
    prefix = f"{under}/" if under else ""
    directories: set[str] = set()
    entries: list[dict[str, Any]] = []
    for path, hub_file in files.items():
        if not path.startswith(prefix):
            continue
        rest = path[len(prefix) :]
        parts = rest.split("/")
        for depth in range(1, len(parts)):
            if depth > 1 and not recursive:
                break
            directories.add(prefix + "/".join(parts[:depth]))
        if recursive or len(parts) == 1:
            entries.append({"path": path, "file": hub_file})
    for directory in directories:
        entries.append({"path": directory, "file": None})
    entries.sort(key=lambda e: e["path"].encode())
    return entries


class HubServer:
    """The hub: add repositories, ``await start()``, use :attr:`url`, ``await stop()``."""

    def __init__(
        self,
        *,
        page_size: int = 1000,
        model_scope_limit: int = 3000,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.repos: dict[str, HubRepo] = {}
        self.page_size = page_size
        self.model_scope_limit = model_scope_limit
        self.ssl_context = ssl_context
        #: (method, path with query, Authorization header or "") of every request.
        self.requests: list[tuple[str, str, str]] = []
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.host = "127.0.0.1"

    def add(self, repo: HubRepo) -> HubRepo:
        self.repos[repo.repo_id] = repo
        return repo

    def repo(self, repo_id: str, **kwargs: Any) -> HubRepo:
        return self.add(HubRepo(repo_id, **kwargs))

    @property
    def url(self) -> str:
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://{self.host}:{self.port}"

    async def start(self) -> str:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, 0, ssl_context=self.ssl_context)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # ---- dispatch --------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = request.raw_path
        path, _, query = raw.partition("?")
        self.requests.append((request.method, raw, request.headers.get("Authorization", "")))
        params = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
        segments = [unquote(s) for s in path.strip("/").split("/")]
        if path in ("/api/whoami-v2", "/openapi/v1/users/me"):
            return self._whoami(request)
        if segments[:3] == ["api", "v1", "models"]:
            return await self._model_scope(request, segments[3:], params)
        if segments[:2] == ["api", "models"]:
            return self._hf_api(request, segments[2:], params)
        if path.endswith(".git/info/refs"):
            return self._git_refs(request, path)
        return self._hf_resolve(request, segments)

    def _split_repo(
        self, segments: list[str], markers: tuple[str, ...]
    ) -> tuple[HubRepo | None, str, list[str]]:
        """The repository named before the first marker segment, that marker, the rest."""
        for i, segment in enumerate(segments):
            if segment in markers and i > 0:
                repo_id = "/".join(segments[:i])
                return self.repos.get(repo_id), segment, segments[i + 1 :]
        return None, "", []

    def _gate(self, request: web.Request, repo: HubRepo | None) -> web.Response | None:
        """The repository's error modes, in the order the Hub applies them."""
        if repo is None:
            return _error(404, "RepoNotFound", "Repository not found")
        if repo.fail_status is not None:
            return web.Response(status=repo.fail_status, text="the hub is down")
        if repo.token is not None:
            sent = request.headers.get("Authorization", "")
            if sent != f"Bearer {repo.token}":
                if sent:
                    return _error(401, "", "Invalid credentials in Authorization header")
                return _error(401, "RepoNotFound", "Invalid username or password.")
        if repo.gated:
            return _error(403, "GatedRepo", "Access to this model is restricted")
        return None

    def _whoami(self, request: web.Request) -> web.Response:
        sent = request.headers.get("Authorization", "")
        tokens = {f"Bearer {r.token}" for r in self.repos.values() if r.token}
        if sent in tokens:
            return web.json_response({"type": "user", "name": "tester", "auth": {}})
        return _error(401, "", "Invalid credentials in Authorization header")

    # ---- Hugging Face ------------------------------------------------------------------------

    def _hf_api(
        self, request: web.Request, segments: list[str], params: Mapping[str, str]
    ) -> web.Response:
        repo, marker, rest = self._split_repo(segments, ("revision", "tree"))
        if marker == "":
            repo = self.repos.get("/".join(segments))
            rest = ["main"]
            marker = "revision"
        refused = self._gate(request, repo)
        if refused is not None:
            return refused
        assert repo is not None
        if not rest:
            return _error(404, "RevisionNotFound", "Revision not found")
        commit = repo.resolve(rest[0])
        if commit is None:
            return _error(404, "RevisionNotFound", f"Invalid rev id: {rest[0]}")
        files = repo.commits[commit]
        if marker == "revision":
            return web.json_response(
                {
                    "_id": repo.repo_id,
                    "id": repo.repo_id,
                    "modelId": repo.repo_id,
                    "sha": commit,
                    "private": repo.token is not None,
                    "gated": False,
                    "disabled": False,
                    "siblings": [{"rfilename": p} for p in sorted(files)],
                }
            )
        under = "/".join(rest[1:])
        recursive = params.get("recursive", "").lower() == "true"
        return self._hf_tree(request, repo, rest[0], files, under, recursive, params)

    def _hf_tree(
        self,
        request: web.Request,
        repo: HubRepo,
        revision: str,
        files: Mapping[str, HubFile],
        under: str,
        recursive: bool,
        params: Mapping[str, str],
    ) -> web.Response:
        if under and not any(p.startswith(f"{under}/") or p == under for p in files):
            return _error(404, "EntryNotFound", f"{under} does not exist")
        entries = _tree(files, under, recursive)
        start = int(params.get("cursor") or 0)
        page = entries[start : start + self.page_size]
        body = [self._hf_item(repo, e) for e in page]
        headers = {}
        if start + self.page_size < len(entries):
            host = repo.link_host or f"{self.host}:{self.port}"
            scheme = "https" if self.ssl_context is not None else "http"
            tail = "/" + quote(under, safe="/") if under else ""
            link = (
                f"{scheme}://{host}/api/models/{repo.repo_id}/tree/{quote(revision, safe='')}"
                f"{tail}?recursive={'true' if recursive else 'false'}&expand=false"
                f"&cursor={start + self.page_size}"
            )
            headers["Link"] = f'<{link}>; rel="next"'
        return web.json_response(body, headers=headers)

    @staticmethod
    def _hf_item(repo: HubRepo, entry: Mapping[str, Any]) -> dict[str, Any]:
        hub_file: HubFile | None = entry["file"]
        if hub_file is None:
            oid = hashlib.sha1(entry["path"].encode()).hexdigest()
            return {"type": "directory", "oid": oid, "size": 0, "path": entry["path"]}
        item: dict[str, Any] = {
            "type": "file",
            "oid": hub_file.oid,
            "size": hub_file.size,
            "path": hub_file.path,
        }
        if hub_file.lfs:
            item["lfs"] = {
                "oid": "*" * 64 if repo.hide_lfs else hub_file.sha256,
                "size": hub_file.size,
                "pointerSize": 134,
            }
        return item

    def _hf_resolve(self, request: web.Request, segments: list[str]) -> web.StreamResponse:
        repo, _, rest = self._split_repo(segments, ("resolve",))
        refused = self._gate(request, repo)
        if refused is not None:
            return refused
        assert repo is not None
        if len(rest) < 2:
            return _error(404, "EntryNotFound", "no file named")
        commit = repo.resolve(rest[0])
        if commit is None:
            return _error(404, "RevisionNotFound", f"Invalid rev id: {rest[0]}")
        hub_file = repo.commits[commit].get("/".join(rest[1:]))
        if hub_file is None:
            return _error(404, "EntryNotFound", "Entry not found", commit=commit)
        headers = {
            "X-Repo-Commit": commit,
            "ETag": f'"{hub_file.etag}"',
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
        }
        return _serve_bytes(request, hub_file.content, headers)

    # ---- ModelScope ----------------------------------------------------------------------------

    async def _model_scope(
        self, request: web.Request, segments: list[str], params: Mapping[str, str]
    ) -> web.Response:
        repo, marker, rest = self._split_repo(segments, ("commits", "repo"))
        refused = self._ms_gate(request, repo)
        if refused is not None:
            return refused
        assert repo is not None
        if marker == "commits":
            commit = repo.resolve(params.get("Ref", ""))
            return _ms_json({"Commit": {"Id": commit} if commit else None})
        commit = repo.resolve(params.get("Revision", ""))
        if commit is None:
            return _ms_error(404, 10990101004, "file tree not found")
        files = repo.commits[commit]
        if rest == ["files"]:
            root = params.get("Root", "")
            recursive = params.get("Recursive", "").lower() == "true"
            entries = _tree(files, root, recursive)[: self.model_scope_limit]
            return _ms_json(
                {
                    "Files": [
                        {
                            "Name": e["path"].rsplit("/", 1)[-1],
                            "Path": e["path"],
                            "Type": "tree" if e["file"] is None else "blob",
                            "Size": 0 if e["file"] is None else e["file"].size,
                            "Sha256": "" if e["file"] is None else e["file"].sha256,
                            "Revision": commit,
                        }
                        for e in entries
                    ]
                }
            )
        hub_file = files.get(params.get("FilePath", ""))
        if hub_file is None:
            return _ms_error(404, 10010205001, "file not found")
        headers = {"Content-Type": "application/octet-stream", "Accept-Ranges": "bytes"}
        return _serve_bytes(request, hub_file.content, headers)

    def _ms_gate(self, request: web.Request, repo: HubRepo | None) -> web.Response | None:
        if repo is None:
            return _ms_error(404, 10010200001, "model not found")
        if repo.fail_status is not None:
            return web.Response(status=repo.fail_status, text="the hub is down")
        if repo.token is not None:
            cookie = request.headers.get("Cookie", "")
            sent = request.headers.get("Authorization", "")
            if f"m_session_id={repo.token}" not in cookie and sent != f"Bearer {repo.token}":
                return _ms_error(401, 10010205001, "no access")
        return None

    def _git_refs(self, request: web.Request, path: str) -> web.Response:
        repo_id = unquote(path.strip("/").removesuffix(".git/info/refs"))
        repo = self.repos.get(repo_id)
        if repo is None:
            return web.Response(status=404, text="not found")
        if repo.token is not None and not _basic_token(request, repo.token):
            return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="git"'})
        lines = ["# service=git-upload-pack\n"]
        body = _pkt(lines[0]) + "0000"
        refs: list[str] = []
        for name, commit in sorted((repo.git_refs or repo.refs).items()):
            if name.startswith("refs/"):
                continue
            if name in repo.tags:
                # An annotated tag: the tag object, then the commit it peels to.
                tag_object = hashlib.sha1(f"tag {name}".encode()).hexdigest()
                refs.append(f"{tag_object} refs/tags/{name}\n")
                refs.append(f"{commit} refs/tags/{name}^{{}}\n")
            else:
                refs.append(f"{commit} refs/heads/{name}\n")
        for i, ref in enumerate(refs):
            body += _pkt(ref if i else ref.replace("\n", "\x00side-band-64k\n", 1))
        body += "0000"
        return web.Response(
            body=body.encode(), content_type="application/x-git-upload-pack-advertisement"
        )


def _basic_token(request: web.Request, token: str) -> bool:
    sent = request.headers.get("Authorization", "")
    if not sent.startswith("Basic "):
        return False
    try:
        user, _, password = base64.b64decode(sent[6:]).decode().partition(":")
    except ValueError:
        return False
    return user == "oauth2" and password == token


def _pkt(line: str) -> str:
    return f"{len(line.encode()) + 4:04x}{line}"


def _error(status: int, code: str, message: str, *, commit: str = "") -> web.Response:
    headers = {"X-Error-Message": message}
    if code:
        headers["X-Error-Code"] = code
    if commit:
        headers["X-Repo-Commit"] = commit
    return web.json_response({"error": message}, status=status, headers=headers)


def _ms_json(data: Mapping[str, Any]) -> web.Response:
    return web.json_response({"Code": 200, "Data": dict(data), "Success": True, "Message": ""})


def _ms_error(status: int, code: int, message: str) -> web.Response:
    return web.Response(
        status=status,
        text=json.dumps({"Code": code, "Message": message, "Success": False}),
        content_type="application/json",
    )


def _serve_bytes(request: web.Request, content: bytes, headers: dict[str, str]) -> web.Response:
    """The file, whole or the ``Range`` asked for (one ``bytes=a-b`` range)."""
    status = 200
    body = content
    wanted = request.headers.get("Range", "")
    if wanted.startswith("bytes="):
        first, _, last = wanted[6:].partition("-")
        start = int(first) if first else max(0, len(content) - int(last))
        end = int(last) if first and last else len(content) - 1
        end = min(end, len(content) - 1)
        if start >= len(content):
            return web.Response(status=416, headers={"Content-Range": f"bytes */{len(content)}"})
        body = content[start : end + 1]
        status = 206
        headers = {**headers, "Content-Range": f"bytes {start}-{end}/{len(content)}"}
    # aiohttp sends a HEAD answer's headers (Content-Length included) without the body.
    return web.Response(status=status, body=body, headers=headers)


# ---- a CA the test trusts (the ModelScope SDK speaks HTTPS only) --------------------------------


@dataclass(frozen=True)
class HubCA:
    """A throw-away CA and a serving certificate for 127.0.0.1 signed by it."""

    ca_pem: str
    server_context: ssl.SSLContext


def throwaway_ca() -> HubCA:
    import datetime
    import ipaddress
    import tempfile
    from pathlib import Path

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test hub CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    with tempfile.TemporaryDirectory() as folder:
        cert_file, key_file = Path(folder, "tls.crt"), Path(folder, "tls.key")
        cert_file.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
        key_file.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        context.load_cert_chain(cert_file, key_file)
    return HubCA(ca.public_bytes(serialization.Encoding.PEM).decode(), context)
