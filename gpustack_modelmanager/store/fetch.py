"""The hub side of a download: the listing at the commit, and each file streamed, hashed and
checked against its manifest line (docs/node-store.md, "Materialization").

Hugging Face only, over aiohttp: ``GET <endpoint>/api/models/<repo>/tree/<commit>``
(``recursive=true``, every page, the endpoint's own ``Link`` only), then
``GET <endpoint>/<repo>/resolve/<commit>/<path>`` for each file the patterns keep, with a
``Range`` to go on from the bytes a crashed download left. The listing becomes the manifest by
the resolution's own rules (:func:`gpustack_render.weights.resolution.hugging_face_manifest`),
so the node checks exactly the digest the controller resolved.
"""

from __future__ import annotations

import asyncio
import json
import os
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import aiohttp

from gpustack_render.weights import resolution as rules
from gpustack_render.weights import store as store_rules
from gpustack_render.weights.manifest import MAX_ENTRIES, Manifest, ManifestEntry
from gpustack_render.weights.resolution import HubProblem, HubRequest

from .types import TreeRequest

#: Bytes handed to a worker thread at once (hash and write off the event loop).
BUFFER_BYTES = 1024 * 1024
READ_BYTES = 1024 * 1024
TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=120)
USER_AGENT = "gpustack-model-manager"


@dataclass(frozen=True)
class HubClient:
    """The HTTP session and the proxy a hub's endpoint is reached through (``None``: none)."""

    session: aiohttp.ClientSession
    proxy: str | None = None

    def get(self, url: str, **kwargs: Any) -> Any:
        return self.session.get(url, proxy=self.proxy, **kwargs)


def proxy_for(endpoint: str, https_proxy: str, no_proxy: str) -> str | None:
    """The Settings' proxy for ``endpoint``, unless its host is in the no-proxy list (as the
    controller's resolution reaches the hubs)."""
    if not https_proxy:
        return None
    host = urlsplit(endpoint).hostname or ""
    if no_proxy and urllib.request.proxy_bypass_environment(  # type: ignore[attr-defined]
        host, {"no": no_proxy}
    ):
        return None
    return https_proxy


class FileProblem(Exception):  # noqa: N818 (a value: why a file is refused)
    """A file's bytes are not its manifest line's (``DigestMismatch``), or it could not be
    written (``InsufficientStorage``, ``DownloadFailed``)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(reason, message)
        self.reason = reason
        self.message = message


def headers_of(request: TreeRequest) -> dict[str, str]:
    """Both hubs take the token as a bearer token; no token at all without a Secret."""
    headers = {"User-Agent": USER_AGENT}
    if request.token:
        headers["Authorization"] = f"Bearer {request.token}"
    return headers


def problem_of(
    request: TreeRequest, hub: HubRequest, response: aiohttp.ClientResponse
) -> HubProblem | None:
    """What a hub's answer to a file request means, by that hub's table."""
    if request.hub == "modelScope":
        return rules.model_scope_problem(hub, response.status)
    return rules.hugging_face_problem(hub, response.status, response.headers)


def hub_request(request: TreeRequest, step: str) -> HubRequest:
    return HubRequest(
        hub=request.hub,
        endpoint=request.endpoint,
        repository=request.repository,
        revision=request.commit,
        step=step,
    )


def _same_origin(url: str, endpoint: str) -> bool:
    a, b = urlsplit(url), urlsplit(endpoint)
    return (a.scheme, a.netloc) == (b.scheme, b.netloc)


def _transport(request: HubRequest, exc: BaseException) -> HubProblem:
    return rules.unreachable(request, f"{type(exc).__name__}: {exc}".strip(": "))


async def hugging_face_listing(client: HubClient, request: TreeRequest) -> Manifest:
    """The manifest of the commit's files the patterns keep; :class:`HubProblem` else."""
    hub = hub_request(request, "listing")
    endpoint = request.endpoint.rstrip("/")
    url: str | None = (
        f"{endpoint}/api/models/{request.repository}/tree/{quote(request.commit, safe='')}"
    )
    params: dict[str, str] | None = {"recursive": "true"}
    items: list[dict[str, Any]] = []
    while url is not None:
        try:
            async with client.get(
                url, params=params, headers=headers_of(request), timeout=TIMEOUT
            ) as response:
                problem = rules.hugging_face_problem(hub, response.status, response.headers)
                if problem is not None:
                    raise problem
                if (response.content_length or 0) > rules.MAX_BODY_BYTES:
                    raise rules.unusable(hub, "the listing page is too large")
                page = await response.json(content_type=None)
                next_link = response.links.get("next")
                url = str(next_link.get("url")) if next_link else None
        except HubProblem:
            raise
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise _transport(hub, exc) from exc
        except ValueError as exc:
            raise rules.unusable(hub, f"the listing is not JSON: {exc}") from exc
        if not isinstance(page, list) or not all(isinstance(i, dict) for i in page):
            raise rules.unusable(hub, "the listing is not a list of entries")
        items.extend(page)
        if len(items) > MAX_ENTRIES:
            break
        params = None
        if url is not None and not _same_origin(url, endpoint):
            raise rules.unusable(
                hub, f"the listing's next page is on another host ({url}); not followed"
            )
    return rules.hugging_face_manifest(
        items,
        hub,
        allow=list(request.allow_patterns) or None,
        ignore=list(request.ignore_patterns) or None,
    )


async def listing(client: HubClient, request: TreeRequest) -> Manifest:
    """The manifest of the commit's files the patterns keep, from the request's hub."""
    if request.hub == "modelScope":
        return await model_scope_listing(client, request)
    return await hugging_face_listing(client, request)


async def _model_scope_files(
    client: HubClient, request: TreeRequest, root: str, *, recursive: bool
) -> list[dict[str, Any]]:
    hub = hub_request(request, "listing")
    params = {"Revision": request.commit, "Recursive": "true" if recursive else "false"}
    if root:
        params["Root"] = root
    url = f"{request.endpoint.rstrip('/')}/api/v1/models/{request.repository}/repo/files"
    try:
        async with client.get(
            url, params=params, headers=headers_of(request), timeout=TIMEOUT
        ) as response:
            if (response.content_length or 0) > rules.MAX_BODY_BYTES:
                raise rules.unusable(hub, "the listing is too large")
            body = await response.read()
            status = response.status
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise _transport(hub, exc) from exc
    try:
        parsed = json.loads(body) if body else None
    except ValueError:
        parsed = None
    code = parsed.get("Code") if isinstance(parsed, dict) else None
    problem = rules.model_scope_problem(hub, status, code)
    if problem is not None:
        raise problem
    data = parsed.get("Data") if isinstance(parsed, dict) else None
    files = data.get("Files") if isinstance(data, dict) else None
    if not isinstance(files, list) or not all(isinstance(f, dict) for f in files):
        raise rules.unusable(hub, "the listing holds no list of Files")
    return files


async def _model_scope_tree(
    client: HubClient, request: TreeRequest, root: str = "", seen: int = 0
) -> list[dict[str, Any]]:
    """Every entry under ``root``: one recursive listing, or, when ModelScope cut it short,
    the direct children and each child directory on its own (as resolution lists it)."""
    whole = await _model_scope_files(client, request, root, recursive=True)
    if not rules.model_scope_truncated(len(whole)):
        return whole
    direct = await _model_scope_files(client, request, root, recursive=False)
    if len(direct) >= rules.MODEL_SCOPE_PAGE_LIMIT:
        raise rules.model_scope_unenumerable(hub_request(request, "listing"), root)
    out = list(direct)
    for entry in direct:
        if entry.get("Type") == "tree" and isinstance(entry.get("Path"), str):
            if seen + len(out) > MAX_ENTRIES:
                break
            out += await _model_scope_tree(client, request, entry["Path"], seen + len(out))
    return out


async def model_scope_listing(client: HubClient, request: TreeRequest) -> Manifest:
    """``GET <endpoint>/api/v1/models/<id>/repo/files?Revision=<commit>&Recursive=true``
    becomes the manifest by resolution's rules (every file named by its ``Sha256``)."""
    items = await _model_scope_tree(client, request)
    return rules.model_scope_manifest(
        items,
        hub_request(request, "listing"),
        allow=list(request.allow_patterns) or None,
        ignore=list(request.ignore_patterns) or None,
    )


def file_url(request: TreeRequest, entry: ManifestEntry) -> str:
    endpoint = request.endpoint.rstrip("/")
    if request.hub == "modelScope":
        return (
            f"{endpoint}/api/v1/models/{request.repository}/repo?Revision="
            f"{quote(request.commit, safe='')}&FilePath={quote(entry.path, safe='')}"
        )
    return (
        f"{endpoint}/{request.repository}/resolve/{quote(request.commit, safe='')}/"
        f"{quote(entry.path, safe='/')}"
    )


def _absorb(handle: Any, hasher: store_rules.Hasher, data: bytes) -> None:
    hasher.update(data)
    handle.write(data)


def _rehash(path: Path, entry: ManifestEntry) -> tuple[store_rules.Hasher, int]:
    """The hash of what a previous attempt left in ``path`` (cut back to the manifest's size
    when longer), and how many bytes that is."""
    hasher = store_rules.new_hasher(entry)
    size = path.stat().st_size
    if size > entry.size:
        os.truncate(path, 0)
        return hasher, 0
    with path.open("rb") as handle:
        while chunk := handle.read(BUFFER_BYTES):
            hasher.update(chunk)
    return hasher, size


def _finish(handle: Any) -> None:
    handle.flush()
    os.fsync(handle.fileno())
    handle.close()


def _os_problem(entry: ManifestEntry, exc: OSError) -> FileProblem:
    import errno

    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return FileProblem(
            store_rules.INSUFFICIENT_STORAGE,
            f"{entry.path!r}: the store's filesystem is full ({exc.strerror})",
        )
    return FileProblem(store_rules.DOWNLOAD_FAILED, f"{entry.path!r}: {exc}")


async def fetch_file(
    client: HubClient,
    request: TreeRequest,
    entry: ManifestEntry,
    target: Path,
    progress: Callable[[int, int], None],
) -> None:
    """Stream ``entry`` into ``target``, hashing every byte, and check it against the line.

    ``progress(verified, fetched)`` is told of bytes that count towards the tree (``verified``:
    also those found on disk from an earlier attempt) and of bytes that came over the network.
    Goes on from what an earlier attempt left (a ``Range`` request; a hub that answers the whole
    file starts it over); a resumed file that fails the check is fetched once more from its
    first byte. Raises :class:`HubProblem` or :class:`FileProblem`.
    """
    problem, resumed = await _fetch_once(client, request, entry, target, progress, resume=True)
    if problem and resumed:
        problem, _ = await _fetch_once(client, request, entry, target, progress, resume=False)
    if problem:
        raise FileProblem(store_rules.DIGEST_MISMATCH, problem)


class _Attempt:
    """One attempt at one file: the hash so far, the bytes read, the bytes counted."""

    def __init__(
        self, entry: ManifestEntry, target: Path, progress: Callable[[int, int], None]
    ) -> None:
        self.entry = entry
        self.target = target
        self.progress = progress
        self.hasher = store_rules.new_hasher(entry)
        self.size = 0
        self.reported = 0
        #: Whether the bytes checked went on from an earlier attempt's.
        self.resumed = False

    def report(self, verified: int, fetched: int) -> None:
        self.reported += verified
        self.progress(verified, fetched)

    async def absorb(self, handle: Any, data: bytes) -> None:
        await asyncio.to_thread(_absorb, handle, self.hasher, data)
        self.report(len(data), len(data))

    async def stream(self, response: aiohttp.ClientResponse, handle: Any, offset: int) -> None:
        """Read the answer into ``handle`` (from ``offset``; the whole file when the hub did
        not answer the range), hashing every byte; stop past the manifest's size."""
        if offset and response.status != 206:
            # The hub sent the whole file: start it over.
            self.report(-offset, 0)
            await asyncio.to_thread(handle.seek, 0)
            await asyncio.to_thread(handle.truncate)
            self.hasher, self.size = store_rules.new_hasher(self.entry), 0
            self.resumed = False
        buffer = bytearray()
        async for chunk in response.content.iter_chunked(READ_BYTES):
            self.size += len(chunk)
            if self.size > self.entry.size:
                return
            buffer += chunk
            if len(buffer) >= BUFFER_BYTES:
                data = bytes(buffer)
                buffer.clear()
                await self.absorb(handle, data)
        if buffer:
            await self.absorb(handle, bytes(buffer))


async def _fetch_once(
    client: HubClient,
    request: TreeRequest,
    entry: ManifestEntry,
    target: Path,
    progress: Callable[[int, int], None],
    *,
    resume: bool,
) -> tuple[str, bool]:
    """One attempt: why the file is refused (``""``: it checks out; a refused file is removed),
    and whether the attempt went on from an earlier one's bytes."""
    hub = hub_request(request, "download")
    attempt = _Attempt(entry, target, progress)
    offset = 0
    existed = False
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        existed = resume and target.exists()
        if existed:
            # A tree sealed (read-only) but not yet renamed when its process died.
            os.chmod(target, 0o644)
            attempt.hasher, offset = await asyncio.to_thread(_rehash, target, entry)
        else:
            target.unlink(missing_ok=True)
        handle = await asyncio.to_thread(target.open, "ab" if offset else "wb")
    except OSError as exc:
        raise _os_problem(entry, exc) from exc
    attempt.size = offset
    attempt.resumed = offset > 0
    if offset:
        attempt.report(offset, 0)
    try:
        if offset < entry.size or not existed:
            headers = headers_of(request)
            if offset:
                headers["Range"] = f"bytes={offset}-"
            async with client.get(
                file_url(request, entry), headers=headers, timeout=TIMEOUT
            ) as response:
                problem = problem_of(request, hub, response)
                if problem is not None:
                    raise problem
                await attempt.stream(response, handle, offset)
        await asyncio.to_thread(_finish, handle)
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise _transport(hub, exc) from exc
    except OSError as exc:
        raise _os_problem(entry, exc) from exc
    finally:
        handle.close()
    refusal = store_rules.verify(entry, attempt.size, attempt.hasher.hexdigest())
    if refusal:
        # Refused: the bad bytes go, so nothing of them can be published or resumed from.
        target.unlink(missing_ok=True)
        attempt.report(-attempt.reported, 0)
    return refusal, attempt.resumed
