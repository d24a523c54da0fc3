"""The controller's calls to the model hubs: resolution, revalidation and the token check
(docs/weights.md, "Resolution" and "Revalidation").

The rules are the library's (:mod:`gpustack_render.weights.resolution`): what each answer means,
what a listing must hold, the manifest. This module makes the requests, hands the library each
answer's status code and headers (or body code), and returns the library's
:class:`~gpustack_render.weights.resolution.Outcome`.

Hugging Face goes through ``huggingface_hub`` (pinned: the same client the engines download
with): ``HfApi.model_info`` for the commit a revision names, ``HfApi.whoami`` for the token
check, and the client's own HTTP session for the listing and the revalidation ``HEAD``:

- **the listing** is paged here, over the same ``GET …/tree/<commit>?recursive=true`` and
  ``Link: <…>; rel="next"`` header that ``HfApi.list_repo_tree`` follows, because that method
  turns every entry that is not a file into a folder (an unknown entry type must fail the
  manifest) and follows a ``Link`` to any host (only the endpoint's own is followed here);
- **the revalidation HEAD** asks for one file at the commit without following redirects (a
  redirect to the file store passes).

Every call runs in a worker thread (:func:`asyncio.to_thread`: the client is synchronous) and one
resolution, every request included, is bounded to five minutes. Without a token the calls carry
none (``token=False``): never the process's own (``HF_TOKEN``, a cached login).

The transport honours the Settings, not the process environment: the https proxy (unless the
endpoint's host is in the no-proxy list) and the CA bundle (PEM, read by the caller from the
ConfigMap the Setting names) added to the system's trust. ``huggingface_hub`` keeps one HTTP
session per process; it is rebuilt when those values change.

ModelScope has no call in its SDK for the commit a ref names, and its file listing drops the
``Sha256`` a manifest needs, so its requests are made here with aiohttp
(:class:`ModelScopeClient`); the SDK (69 MB) is not a dependency of the image.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import ssl
import threading
import time
import urllib.request
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar
from urllib.parse import quote, urlsplit

import aiohttp
import httpx2
from huggingface_hub import HfApi, get_session, hf_hub_url, set_client_factory
from huggingface_hub.errors import HfHubHTTPError, HFValidationError, OfflineModeIsEnabled
from huggingface_hub.utils._headers import build_hf_headers
from huggingface_hub.utils._http import hf_request_event_hook

from gpustack_render.core.settings import Settings
from gpustack_render.weights import resolution as rules
from gpustack_render.weights.manifest import MAX_ENTRIES
from gpustack_render.weights.resolution import (
    HubProblem,
    HubRequest,
    Outcome,
    Resolution,
)

log = logging.getLogger(__name__)

#: How the controller names itself to the hubs.
LIBRARY_NAME: Final = "gpustack-controller"
#: One request's connect and read bounds (a resolution as a whole: five minutes).
CONNECT_TIMEOUT: Final = 15.0
READ_TIMEOUT: Final = 60.0

T = TypeVar("T")


@dataclass(frozen=True)
class HubAccess:
    """How the hubs are reached: the endpoint, the proxy, and the CA bundle (PEM) the Settings
    name (docs/weights.md, "Resolution")."""

    endpoint: str
    https_proxy: str = ""
    no_proxy: str = ""
    ca_pem: str = ""

    @classmethod
    def of(cls, settings: Settings, hub: str, *, ca_pem: str = "") -> HubAccess:
        endpoint = (
            settings.modelscope_endpoint if hub == "modelScope" else settings.huggingface_endpoint
        )
        return cls(
            endpoint=endpoint.rstrip("/"),
            https_proxy=settings.artifact_https_proxy,
            no_proxy=settings.artifact_no_proxy,
            ca_pem=ca_pem,
        )

    @property
    def host(self) -> str:
        return urlsplit(self.endpoint).netloc

    def proxy(self) -> str | None:
        """The proxy for the endpoint (``None``: none, or its host is in the no-proxy list)."""
        if not self.https_proxy:
            return None
        host = urlsplit(self.endpoint).hostname or ""
        if self.no_proxy and urllib.request.proxy_bypass_environment(  # type: ignore[attr-defined]
            host, {"no": self.no_proxy}
        ):
            return None
        return self.https_proxy

    def ssl_context(self) -> ssl.SSLContext:
        """The system's trust (as ``huggingface_hub`` builds it), plus the CA bundle."""
        context = httpx2.create_ssl_context()
        if self.ca_pem.strip():
            context.load_verify_locations(cadata=self.ca_pem)
        return context


@dataclass(frozen=True)
class HubTarget:
    """What to resolve: the hub (``huggingFace`` or ``modelScope``), the repository, the
    revision, the token (``""``: none) and the patterns."""

    hub: str
    repository: str
    revision: str
    token: str = ""
    allow: Sequence[str] = field(default_factory=tuple)
    ignore: Sequence[str] = field(default_factory=tuple)

    def request(self, access: HubAccess, step: str, revision: str | None = None) -> HubRequest:
        return HubRequest(
            self.hub, access.endpoint, self.repository, revision or self.revision, step
        )


class BodyTooLarge(Exception):  # noqa: N818 (what the response hook raises)
    """An answer declared a body over the bound; it is not read."""


def _bound_body(response: httpx2.Response) -> None:
    if response.request.method == "HEAD":
        return
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > rules.MAX_BODY_BYTES:
        raise BodyTooLarge(f"the answer's body is {declared} bytes, over {rules.MAX_BODY_BYTES}")


# ---- huggingface_hub's session ----------------------------------------------------------------

_SESSION_LOCK = threading.Lock()
_session_key: tuple[str, str, str, str] | None = None


def _use_access(access: HubAccess) -> None:
    """Point ``huggingface_hub``'s process-wide session at ``access`` (rebuilt only when the
    proxy, the no-proxy list, the CA bundle or the endpoint's host changed)."""
    global _session_key
    key = (access.https_proxy, access.no_proxy, access.ca_pem, access.host)
    with _SESSION_LOCK:
        if key == _session_key:
            return

        def factory() -> httpx2.Client:
            return httpx2.Client(
                event_hooks={"request": [hf_request_event_hook], "response": [_bound_body]},
                follow_redirects=True,
                timeout=httpx2.Timeout(READ_TIMEOUT, connect=CONNECT_TIMEOUT),
                verify=access.ssl_context(),
                proxy=access.proxy(),
                trust_env=False,
            )

        set_client_factory(factory)
        _session_key = key


def _token(target: HubTarget) -> str | bool:
    """The token a call carries: the Secret's, else none at all (never the process's own)."""
    return target.token if target.token else False


def _headers(target: HubTarget) -> dict[str, str]:
    return build_hf_headers(token=_token(target), library_name=LIBRARY_NAME)


def _same_origin(url: str, endpoint: str) -> bool:
    a, b = urlsplit(url), urlsplit(endpoint)
    return (a.scheme, a.netloc) == (b.scheme, b.netloc)


def _transport_problem(request: HubRequest, exc: BaseException) -> HubProblem:
    """A request that got no usable answer, as the library words it."""
    if isinstance(exc, HubProblem):
        return exc
    if isinstance(exc, HfHubHTTPError) and exc.response is not None:
        problem = rules.hugging_face_problem(
            request, exc.response.status_code, exc.response.headers
        )
        if problem is not None:
            return problem
    if isinstance(exc, BodyTooLarge):
        return rules.unusable(request, str(exc))
    if isinstance(exc, httpx2.TransportError | OfflineModeIsEnabled | TimeoutError):
        return rules.unreachable(request, f"{type(exc).__name__}: {exc}".strip(": "))
    return rules.unusable(request, f"{type(exc).__name__}: {exc}")


class _Deadline:
    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds

    def check(self, request: HubRequest) -> None:
        if time.monotonic() > self.at:
            raise rules.unreachable(request, "the resolution ran out of time")


def _hf_commit(target: HubTarget, access: HubAccess) -> str:
    """The commit the revision names (``GET …/revision/<rev>``); raises :class:`HubProblem`."""
    request = target.request(access, "revision")
    api = HfApi(endpoint=access.endpoint, token=_token(target), library_name=LIBRARY_NAME)
    try:
        info = api.model_info(target.repository, revision=target.revision, token=_token(target))
    except HFValidationError as exc:
        raise HubProblem(
            rules.UNSUPPORTED_SOURCE,
            f"spec.source.huggingFace.repository {target.repository!r} is not a repository "
            f"name the hub accepts ({exc}); create a new ModelArtifact",
        ) from exc
    except Exception as exc:
        raise _transport_problem(request, exc) from exc
    problem = rules.revision_problem(request, info.sha)
    if problem is not None:
        raise problem
    assert info.sha is not None
    return info.sha


def _hf_pages(
    target: HubTarget,
    access: HubAccess,
    commit: str,
    *,
    recursive: bool,
    deadline: _Deadline,
    one_page: bool = False,
) -> list[dict[str, Any]]:
    """The tree at ``commit``, every page (the endpoint's own ``Link`` only), or the first one;
    stops past :data:`MAX_ENTRIES` entries (the library refuses that many)."""
    request = target.request(access, "listing", commit)
    url: str | None = (
        f"{access.endpoint}/api/models/{target.repository}/tree/{quote(commit, safe='')}"
    )
    params: dict[str, str] | None = {"recursive": "true" if recursive else "false"}
    items: list[dict[str, Any]] = []
    session = get_session()
    while url is not None:
        deadline.check(request)
        try:
            response = session.get(url, params=params, headers=_headers(target))
        except Exception as exc:
            raise _transport_problem(request, exc) from exc
        problem = rules.hugging_face_problem(request, response.status_code, response.headers)
        if problem is not None:
            raise problem
        try:
            page = response.json()
        except ValueError as exc:
            raise rules.unusable(request, f"the listing is not JSON: {exc}") from exc
        if not isinstance(page, list) or not all(isinstance(i, dict) for i in page):
            raise rules.unusable(request, "the listing is not a list of entries")
        items.extend(page)
        if one_page or len(items) > MAX_ENTRIES:
            break
        url = response.links.get("next", {}).get("url")
        params = None
        if url is not None and not _same_origin(url, access.endpoint):
            raise rules.unusable(
                request, f"the listing's next page is on another host ({url}); not followed"
            )
    return items


def _hf_resolve(target: HubTarget, access: HubAccess, deadline: _Deadline) -> Outcome:
    _use_access(access)
    commit = _hf_commit(target, access)
    return _hf_listing_outcome(target, access, commit, deadline)


def _hf_listing_outcome(
    target: HubTarget, access: HubAccess, commit: str, deadline: _Deadline
) -> Outcome:
    items = _hf_pages(target, access, commit, recursive=True, deadline=deadline)
    manifest = rules.hugging_face_manifest(
        items,
        target.request(access, "listing", commit),
        allow=list(target.allow),
        ignore=list(target.ignore),
    )
    return Outcome.passed(Resolution(commit, manifest))


def _hf_relist(target: HubTarget, access: HubAccess, commit: str, deadline: _Deadline) -> Outcome:
    _use_access(access)
    return _hf_listing_outcome(target, access, commit, deadline)


def _hf_revalidate(
    target: HubTarget, access: HubAccess, commit: str, deadline: _Deadline
) -> Outcome:
    """One file at the commit: the first root file of one page of the tree (else of the whole
    listing), then its ``HEAD`` without following redirects; 2xx and 3xx pass."""
    _use_access(access)
    request = target.request(access, "revalidation", commit)
    first = rules.first_root_file(
        _hf_pages(target, access, commit, recursive=False, deadline=deadline, one_page=True)
    )
    if first is None:
        first = rules.first_root_file(
            _hf_pages(target, access, commit, recursive=True, deadline=deadline)
        )
    if first is None:
        raise HubProblem(
            rules.EMPTY_MANIFEST,
            f"Hugging Face repository {target.repository!r} at {commit} holds no file any more",
        )
    url = hf_hub_url(target.repository, first, revision=commit, endpoint=access.endpoint)
    try:
        response = get_session().head(url, headers=_headers(target), follow_redirects=False)
    except Exception as exc:
        raise _transport_problem(request, exc) from exc
    problem = rules.hugging_face_problem(request, response.status_code, response.headers)
    if problem is not None:
        raise problem
    return Outcome.passed()


def _hf_token_valid(token: str, access: HubAccess) -> bool | None:
    _use_access(access)
    api = HfApi(endpoint=access.endpoint, token=token, library_name=LIBRARY_NAME)
    try:
        api.whoami(token=token)
    except HfHubHTTPError as exc:
        if exc.response is not None and exc.response.status_code == 401:
            return False
        return None
    except Exception:
        return None
    return True


class HubClient:
    """Resolution, revalidation and the token check, each in a worker thread, each resolution
    bounded to :data:`~gpustack_render.weights.resolution.RESOLUTION_TIMEOUT_SECONDS`."""

    def __init__(self, *, timeout: float = rules.RESOLUTION_TIMEOUT_SECONDS) -> None:
        self.timeout = timeout
        self._model_scope = ModelScopeClient()

    async def _run(
        self,
        request: HubRequest,
        call: Callable[[_Deadline], Outcome],
    ) -> Outcome:
        deadline = _Deadline(self.timeout)
        try:
            return await asyncio.wait_for(asyncio.to_thread(call, deadline), self.timeout)
        except HubProblem as problem:
            return Outcome.of(problem)
        except TimeoutError:
            return Outcome.of(
                rules.unreachable(request, f"no answer within {self.timeout:.0f} seconds")
            )
        except Exception as exc:
            log.warning("hub request for %s failed unexpectedly", request.repository, exc_info=True)
            return Outcome.of(_transport_problem(request, exc))

    async def resolve(self, target: HubTarget, access: HubAccess) -> Outcome:
        """A first resolution: the commit, the listing, the manifest."""
        request = target.request(access, "revision")
        if target.hub == "modelScope":
            return await self._model_scope.resolve(target, access, self.timeout)
        return await self._run(request, lambda d: _hf_resolve(target, access, d))

    async def relist(self, target: HubTarget, access: HubAccess, commit: str) -> Outcome:
        """An anchored revalidation: the listing at ``commit`` and its manifest again."""
        request = target.request(access, "listing", commit)
        if target.hub == "modelScope":
            return await self._model_scope.relist(target, access, commit, self.timeout)
        return await self._run(request, lambda d: _hf_relist(target, access, commit, d))

    async def revalidate(self, target: HubTarget, access: HubAccess, commit: str) -> Outcome:
        """A revalidation: one file at ``commit`` is still served."""
        request = target.request(access, "revalidation", commit)
        if target.hub == "modelScope":
            return await self._model_scope.revalidate(target, access, commit, self.timeout)
        return await self._run(request, lambda d: _hf_revalidate(target, access, commit, d))

    async def token_valid(self, hub: str, token: str, access: HubAccess) -> bool | None:
        """Whether the hub accepts ``token`` (``None``: it could not tell)."""
        if hub == "modelScope":
            return await self._model_scope.token_valid(token, access)
        try:
            return await asyncio.wait_for(
                asyncio.to_thread(_hf_token_valid, token, access), READ_TIMEOUT
            )
        except TimeoutError:
            return None


# ---- ModelScope ------------------------------------------------------------------------------


class _Answer:
    """A ModelScope answer: its status, its JSON body (``None``: none or not JSON)."""

    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self.body = body

    @property
    def code(self) -> object:
        return self.body.get("Code") if isinstance(self.body, dict) else None

    @property
    def data(self) -> Any:
        return self.body.get("Data") if isinstance(self.body, dict) else None


def parse_git_refs(payload: bytes) -> dict[str, str]:
    """The refs of a git smart-HTTP advertisement (``info/refs?service=git-upload-pack``):
    ``refs/heads/<b>`` and ``refs/tags/<t>`` to the commit they name, an annotated tag to the
    commit it peels to (its ``^{}`` line)."""
    refs: dict[str, str] = {}
    text = payload.decode("utf-8", "replace")
    i = 0
    while i + 4 <= len(text):
        try:
            size = int(text[i : i + 4], 16)
        except ValueError:
            break
        if size == 0:
            i += 4
            continue
        line = text[i + 4 : i + size].rstrip("\n").split("\x00", 1)[0]
        i += size
        if line.startswith("#"):
            continue
        sha, _, name = line.partition(" ")
        if not rules.is_commit(sha) or not name:
            continue
        if name.endswith("^{}"):
            refs[name[:-3]] = sha  # the peeled commit wins over the tag object
        else:
            refs.setdefault(name, sha)
    return refs


class ModelScopeClient:
    """ModelScope's resolution requests, made with aiohttp (see the module docstring):

    - the commit: a 40-hex revision as is; else ``GET M/api/v1/models/<id>/commits?Ref=<rev>``
      (``Commit: null``: ``RevisionNotFound``), cross-checked with the git refs of
      ``https://<M's host[:port]>/<id>.git`` (the branch head or peeled tag must name the same
      commit; user ``oauth2`` and the token as password for a private repository);
    - the listing: ``GET M/api/v1/models/<id>/repo/files?Revision=<commit>&Recursive=true``; a
      listing of exactly 3000 entries was cut short, so each child directory is listed again
      with ``Root=<dir>``, and a directory with 3000 direct children or more cannot be listed;
    - the revalidation: the first file of one root listing, then
      ``HEAD M/api/v1/models/<id>/repo?Revision=<commit>&FilePath=<file>``;
    - the token check: ``GET M/openapi/v1/users/me``.
    """

    async def _get(
        self,
        session: aiohttp.ClientSession,
        access: HubAccess,
        url: str,
        request: HubRequest,
        *,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        method: str = "GET",
    ) -> tuple[int, bytes]:
        try:
            async with session.request(
                method,
                url,
                params=params,
                headers=headers,
                proxy=access.proxy(),
                allow_redirects=False,
            ) as response:
                if method == "HEAD":
                    return response.status, b""
                chunks: list[bytes] = []
                size = 0
                async for chunk in response.content.iter_chunked(1 << 16):
                    size += len(chunk)
                    if size > rules.MAX_BODY_BYTES:
                        raise rules.unusable(
                            request, f"the answer is over {rules.MAX_BODY_BYTES} bytes"
                        )
                    chunks.append(chunk)
                body = b"".join(chunks)
                return response.status, body
        except HubProblem:
            raise
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise rules.unreachable(request, f"{type(exc).__name__}: {exc}".strip(": ")) from exc

    async def _json(
        self,
        session: aiohttp.ClientSession,
        access: HubAccess,
        url: str,
        request: HubRequest,
        params: Mapping[str, str],
        token: str,
    ) -> _Answer:
        status, body = await self._get(
            session, access, url, request, params=params, headers=_ms_headers(token)
        )
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        answer = _Answer(status, parsed)
        problem = rules.model_scope_problem(request, status, answer.code)
        if problem is not None:
            raise problem
        if not isinstance(parsed, dict):
            raise rules.unusable(request, "the answer is not a JSON object")
        return answer

    def _session(self, access: HubAccess, timeout: float) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=access.ssl_context()),
            timeout=aiohttp.ClientTimeout(
                total=timeout, connect=CONNECT_TIMEOUT, sock_read=READ_TIMEOUT
            ),
            trust_env=False,
        )

    async def _commit(
        self, session: aiohttp.ClientSession, target: HubTarget, access: HubAccess
    ) -> str:
        if rules.is_commit(target.revision):
            return target.revision
        request = target.request(access, "revision")
        base = f"{access.endpoint}/api/v1/models/{target.repository}"
        answer = await self._json(
            session, access, f"{base}/commits", request, {"Ref": target.revision}, target.token
        )
        data = answer.data if isinstance(answer.data, dict) else {}
        commit = data.get("Commit")
        if commit is None:
            raise rules.HubProblem(
                rules.REVISION_NOT_FOUND,
                f"ModelScope has no revision {target.revision!r} in repository "
                f"{target.repository!r} (spec.source.modelScope.revision); name an existing "
                "branch, tag or commit in a new ModelArtifact",
            )
        sha = commit.get("Id") if isinstance(commit, dict) else None
        problem = rules.revision_problem(request, sha)
        if problem is not None:
            raise problem
        assert isinstance(sha, str)
        await self._cross_check(session, target, access, sha)
        return sha

    async def _cross_check(
        self, session: aiohttp.ClientSession, target: HubTarget, access: HubAccess, sha: str
    ) -> None:
        """The git refs of the endpoint's host must name the same commit for the ref."""
        request = target.request(access, "revision")
        url = f"https://{access.host}/{target.repository}.git/info/refs"
        headers = {}
        if target.token:
            basic = base64.b64encode(f"oauth2:{target.token}".encode()).decode()
            headers["Authorization"] = f"Basic {basic}"
        status, body = await self._get(
            session,
            access,
            url,
            request,
            params={"service": "git-upload-pack"},
            headers=headers,
        )
        problem = rules.model_scope_problem(request, status)
        if problem is not None:
            raise problem
        refs = parse_git_refs(body)
        named = refs.get(f"refs/heads/{target.revision}") or refs.get(
            f"refs/tags/{target.revision}"
        )
        if named != sha:
            raise rules.unusable(
                request,
                f"the commits API names {sha} for {target.revision!r} but the git refs name "
                f"{named or 'nothing'}",
            )

    async def _files(
        self,
        session: aiohttp.ClientSession,
        target: HubTarget,
        access: HubAccess,
        commit: str,
        *,
        root: str = "",
        recursive: bool = True,
    ) -> list[dict[str, Any]]:
        request = target.request(access, "listing", commit)
        params = {"Revision": commit, "Recursive": "true" if recursive else "false"}
        if root:
            params["Root"] = root
        url = f"{access.endpoint}/api/v1/models/{target.repository}/repo/files"
        answer = await self._json(session, access, url, request, params, target.token)
        data = answer.data if isinstance(answer.data, dict) else {}
        files = data.get("Files")
        if not isinstance(files, list) or not all(isinstance(f, dict) for f in files):
            raise rules.unusable(request, "the listing holds no list of Files")
        return files

    async def _listing(
        self,
        session: aiohttp.ClientSession,
        target: HubTarget,
        access: HubAccess,
        commit: str,
        root: str = "",
        seen: int = 0,
    ) -> list[dict[str, Any]]:
        """Every entry under ``root``: one recursive listing, or, when it was cut short, the
        direct children and each child directory listed on its own."""
        whole = await self._files(session, target, access, commit, root=root)
        if not rules.model_scope_truncated(len(whole)):
            return whole
        direct = await self._files(session, target, access, commit, root=root, recursive=False)
        if len(direct) >= rules.MODEL_SCOPE_PAGE_LIMIT:
            raise rules.model_scope_unenumerable(target.request(access, "listing", commit), root)
        out = list(direct)
        for entry in direct:
            if entry.get("Type") == "tree" and isinstance(entry.get("Path"), str):
                if seen + len(out) > MAX_ENTRIES:
                    break
                out += await self._listing(
                    session, target, access, commit, entry["Path"], seen + len(out)
                )
        return out

    async def _resolved(
        self, session: aiohttp.ClientSession, target: HubTarget, access: HubAccess, commit: str
    ) -> Outcome:
        items = await self._listing(session, target, access, commit)
        manifest = rules.model_scope_manifest(
            items,
            target.request(access, "listing", commit),
            allow=list(target.allow),
            ignore=list(target.ignore),
        )
        return Outcome.passed(Resolution(commit, manifest))

    async def _bounded(
        self,
        target: HubTarget,
        access: HubAccess,
        timeout: float,
        step: str,
        call: Callable[[aiohttp.ClientSession], Awaitable[Outcome]],
    ) -> Outcome:
        request = target.request(access, step)
        try:
            async with self._session(access, timeout) as session:
                return await asyncio.wait_for(call(session), timeout)
        except HubProblem as problem:
            return Outcome.of(problem)
        except TimeoutError:
            return Outcome.of(rules.unreachable(request, f"no answer within {timeout:.0f} seconds"))
        except (aiohttp.ClientError, OSError, ssl.SSLError) as exc:
            return Outcome.of(rules.unreachable(request, f"{type(exc).__name__}: {exc}"))

    async def resolve(self, target: HubTarget, access: HubAccess, timeout: float) -> Outcome:
        async def call(session: aiohttp.ClientSession) -> Outcome:
            commit = await self._commit(session, target, access)
            return await self._resolved(session, target, access, commit)

        return await self._bounded(target, access, timeout, "revision", call)

    async def relist(
        self, target: HubTarget, access: HubAccess, commit: str, timeout: float
    ) -> Outcome:
        async def call(session: aiohttp.ClientSession) -> Outcome:
            return await self._resolved(session, target, access, commit)

        return await self._bounded(target, access, timeout, "listing", call)

    async def revalidate(
        self, target: HubTarget, access: HubAccess, commit: str, timeout: float
    ) -> Outcome:
        async def call(session: aiohttp.ClientSession) -> Outcome:
            request = target.request(access, "revalidation", commit)
            root = await self._files(session, target, access, commit, recursive=False)
            first = rules.first_root_file(root, path_key="Path", file_type="blob")
            if first is None:
                first = rules.first_root_file(
                    await self._listing(session, target, access, commit),
                    path_key="Path",
                    file_type="blob",
                )
            if first is None:
                raise HubProblem(
                    rules.EMPTY_MANIFEST,
                    f"ModelScope repository {target.repository!r} at {commit} holds no file any "
                    "more",
                )
            status, _ = await self._get(
                session,
                access,
                f"{access.endpoint}/api/v1/models/{target.repository}/repo",
                request,
                params={"Revision": commit, "FilePath": first},
                headers=_ms_headers(target.token),
                method="HEAD",
            )
            problem = rules.model_scope_problem(request, status, head=True)
            if problem is not None:
                raise problem
            return Outcome.passed()

        return await self._bounded(target, access, timeout, "revalidation", call)

    async def token_valid(self, token: str, access: HubAccess) -> bool | None:
        request = HubRequest("modelScope", access.endpoint, "", "", "token check")
        try:
            async with self._session(access, READ_TIMEOUT) as session:
                status, _ = await self._get(
                    session,
                    access,
                    f"{access.endpoint}/openapi/v1/users/me",
                    request,
                    headers=_ms_headers(token),
                )
        except (HubProblem, aiohttp.ClientError, OSError, TimeoutError):
            return None
        if status in (401, 403):
            return False
        return True if 200 <= status < 300 else None


def _ms_headers(token: str) -> dict[str, str]:
    """ModelScope requests carry the token as a bearer token; none without one."""
    return {"Authorization": f"Bearer {token}"} if token else {}
