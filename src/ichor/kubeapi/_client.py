"""The client: one HTTPS request per call, JSON in and out, discovery cached per client."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import ssl
from typing import Any
from urllib.parse import quote

from ichor.kubeapi._errors import (
    KubeAlreadyExistsError,
    KubeAPIError,
    KubeconfigInvalidError,
    KubeConnectionError,
    KubeNotFoundError,
    KubeResponseError,
    KubeStatusError,
    KubeUnknownKindError,
)
from ichor.kubeapi._kubeconfig import Kubeconfig
from ichor.machinery.errors import PKIError
from ichor.machinery.pki import load_into_ssl_context

__all__ = ["DEFAULT_MAX_RESPONSE_BYTES", "DEFAULT_TIMEOUT", "APIResource", "KubeClient"]

DEFAULT_TIMEOUT = 10.0
"""Seconds for one request: connect, send and read the whole reply."""
DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024
"""A reply body over this is refused (discovery of a big cluster is a few hundred KiB)."""
_MAX_HEADER_BYTES = 64 * 1024

PATCH_MERGE = "application/merge-patch+json"
PATCH_STRATEGIC = "application/strategic-merge-patch+json"


@dataclasses.dataclass(frozen=True)
class APIResource:
    """Where objects of one kind live: ``/api/v1`` or ``/apis/<group>/<version>``, plural, scope."""

    group_version: str
    kind: str
    plural: str
    namespaced: bool

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        base = "/api/v1" if self.group_version == "v1" else f"/apis/{self.group_version}"
        if self.namespaced:
            base += f"/namespaces/{quote(namespace or 'default', safe='')}"
        base += f"/{self.plural}"
        return base + (f"/{quote(name, safe='')}" if name else "")


def _status_error(code: int, body: bytes, method: str, path: str) -> KubeStatusError:
    reason, message = "", body[:300].decode("utf-8", "replace").strip()
    try:
        status = json.loads(body)
        if isinstance(status, dict) and status.get("kind") == "Status":
            reason, message = str(status.get("reason") or ""), str(status.get("message") or message)
    except ValueError:
        pass
    text = f"{method} {path}: {code} {reason or 'error'}: {message}"
    cls = {
        404: KubeNotFoundError,
        409: KubeAlreadyExistsError if reason == "AlreadyExists" else KubeStatusError,
    }
    hint = "the client certificate is not accepted by the API server" if code in (401, 403) else None
    return cls.get(code, KubeStatusError)(text, code=code, reason=reason, hint=hint)


class KubeClient:
    """Talks to the API server of ``config``; cheap to create, holds no connection between calls."""

    def __init__(
        self,
        config: Kubeconfig,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        field_manager: str | None = None,
        server_name: str | None = None,
    ) -> None:
        """``server_name``: the name the server's certificate must carry when it is not the URL's
        host (a kubelet asked at ``127.0.0.1`` serves a certificate for its node name)."""
        self.config = config
        self.server_name = server_name
        self.timeout = timeout
        self.max_response_bytes = max_response_bytes
        self.field_manager = field_manager
        self._ssl = self._ssl_context(config)
        self._resources: dict[tuple[str, str], APIResource] = {}
        self._discovered: set[str] = set()

    @staticmethod
    def _ssl_context(config: Kubeconfig) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        hint = "regenerate the kubeconfig (talosctl kubeconfig)"
        try:
            ctx.load_verify_locations(cadata=config.ca.decode("ascii"))
        except (ssl.SSLError, UnicodeDecodeError, ValueError) as exc:
            raise KubeconfigInvalidError(
                f"kubeconfig CA is not a PEM certificate: {exc}", hint=hint
            ) from None
        try:
            load_into_ssl_context(ctx, config.cert, config.key)
        except (PKIError, ssl.SSLError) as exc:
            raise KubeconfigInvalidError(
                f"kubeconfig client certificate/key unusable: {exc}", hint=hint
            ) from None
        return ctx

    # -- raw requests --------------------------------------------------------------------------

    async def request(
        self, method: str, path: str, body: Any = None, *, content_type: str = "application/json"
    ) -> Any:
        """Send one request; the decoded JSON reply (None for an empty one), or a :class:`KubeAPIError`."""
        payload = b"" if body is None else json.dumps(body).encode()
        target = path
        if self.field_manager and method in ("POST", "PATCH", "PUT"):
            target += ("&" if "?" in path else "?") + f"fieldManager={quote(self.field_manager)}"
        code, data = await self._timed_exchange(method, path, target, payload, content_type)
        if code >= 400:
            raise _status_error(code, data, method, path)
        if not data:
            return None
        try:
            return json.loads(data)
        except ValueError:
            raise KubeResponseError(f"{method} {path}: reply is not JSON: {data[:100]!r}") from None

    async def readyz(self) -> str | None:
        """None once ``GET /readyz`` answers 200, else why not: the status and the checks that failed
        (``[-]...`` lines). A server that does not answer is a :class:`KubeConnectionError`."""
        code, data = await self._timed_exchange("GET", "/readyz", "/readyz", b"", "application/json")
        if code == 200:
            return None
        text = data.decode("utf-8", "replace")
        failed = [line[3:].strip() for line in text.splitlines() if line.startswith("[-]")]
        return f"GET /readyz: {code}" + (f" ({'; '.join(failed)})" if failed else f" {text.strip()[:200]}")

    async def _timed_exchange(
        self, method: str, path: str, target: str, payload: bytes, content_type: str
    ) -> tuple[int, bytes]:
        try:
            async with asyncio.timeout(self.timeout):
                return await self._exchange(method, target, payload, content_type)
        except TimeoutError:
            raise KubeConnectionError(
                f"{method} {path}: no answer from {self.config.server} within {self.timeout:g}s",
                hint="is kube-apiserver running and reachable?",
            ) from None

    async def _exchange(
        self, method: str, target: str, payload: bytes, content_type: str
    ) -> tuple[int, bytes]:
        host, port = self.config.host, self.config.port
        try:
            reader, writer = await asyncio.open_connection(
                host, port, ssl=self._ssl, limit=_MAX_HEADER_BYTES, server_hostname=self.server_name
            )
        except ssl.SSLError as exc:
            raise KubeConnectionError(
                f"TLS with {self.config.server} failed: {exc.reason or exc}",
                hint="the kubeconfig's CA must be the cluster's Kubernetes CA",
            ) from None
        except OSError as exc:
            raise KubeConnectionError(
                f"cannot connect to {self.config.server}: {exc.strerror or exc}",
                hint="is kube-apiserver running and reachable?",
            ) from None
        try:
            head = (
                f"{method} {target} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: ichor\r\n"
                f"Accept: application/json\r\nConnection: close\r\nContent-Length: {len(payload)}\r\n"
                + (f"Content-Type: {content_type}\r\n" if payload else "")
                + "\r\n"
            )
            writer.write(head.encode() + payload)
            await writer.drain()
            return await self._read_reply(reader, method)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
            if isinstance(exc, KubeAPIError):
                raise
            raise KubeConnectionError(
                f"{method} {target}: connection to {self.config.server} broke: {exc}"
            ) from None
        finally:
            writer.close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await writer.wait_closed()

    async def _read_reply(self, reader: asyncio.StreamReader, method: str) -> tuple[int, bytes]:
        raw_head = await reader.readuntil(b"\r\n\r\n")
        lines = raw_head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise KubeResponseError(f"{method}: not an HTTP reply: {lines[0][:80]!r}")
        headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:] if h)}
        limit = self.max_response_bytes
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body = bytearray()
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
                if len(body) + size > limit:
                    raise self._too_big(method)
                body += await reader.readexactly(size + 2)
                del body[len(body) - 2 :]
                if size == 0:
                    return int(parts[1]), bytes(body)
        length = headers.get("content-length")
        if length is not None:
            if int(length) > limit:
                raise self._too_big(method)
            return int(parts[1]), await reader.readexactly(int(length))
        data = await reader.read(limit + 1)
        if len(data) > limit:
            raise self._too_big(method)
        return int(parts[1]), data

    def _too_big(self, method: str) -> KubeResponseError:
        return KubeResponseError(
            f"{method}: reply from {self.config.server} is over the {self.max_response_bytes:,}-byte bound",
            hint="ask for less (a label selector or limit)",
        )

    async def get(self, path: str) -> Any:
        return await self.request("GET", path)

    async def post(self, path: str, body: Any) -> Any:
        return await self.request("POST", path, body)

    async def patch(self, path: str, body: Any, *, content_type: str = PATCH_MERGE) -> Any:
        return await self.request("PATCH", path, body, content_type=content_type)

    async def put(self, path: str, body: Any) -> Any:
        return await self.request("PUT", path, body)

    async def delete(self, path: str) -> Any:
        return await self.request("DELETE", path)

    # -- discovery -----------------------------------------------------------------------------

    async def _discover(self, group_version: str) -> None:
        path = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
        listing = await self.get(path)
        for res in listing.get("resources") or [] if isinstance(listing, dict) else []:
            name = str(res.get("name", ""))
            if "/" in name or not res.get("kind"):
                continue  # subresources (pods/log, deployments/scale)
            api = APIResource(group_version, str(res["kind"]), name, bool(res.get("namespaced")))
            self._resources[(group_version, api.kind)] = api
        self._discovered.add(group_version)

    async def group_versions(self) -> list[str]:
        """Every served ``group/version`` (``v1`` for the core group), preferred versions first."""
        core = await self.get("/api")
        found = [str(v) for v in (core or {}).get("versions", [])]
        groups = await self.get("/apis")
        for group in (groups or {}).get("groups", []):
            found.extend(str(v.get("groupVersion")) for v in group.get("versions", []))
        return found

    async def resource_for(self, api_version: str, kind: str, *, refresh: bool = False) -> APIResource:
        """Where objects of ``apiVersion``/``kind`` live (discovered once per group/version)."""
        key = (api_version, kind)
        if key not in self._resources and (refresh or api_version not in self._discovered):
            try:
                await self._discover(api_version)
            except KubeNotFoundError:
                self._discovered.add(api_version)
        found = self._resources.get(key)
        if found is None:
            raise KubeUnknownKindError(
                f"the API server does not serve kind {kind!r} in {api_version!r}",
                hint="install its CustomResourceDefinition first, or fix apiVersion/kind",
            )
        return found

    async def _where(self, obj: dict[str, Any]) -> tuple[APIResource, dict[str, Any]]:
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        raw_meta = obj.get("metadata")
        meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        if not isinstance(api_version, str) or not isinstance(kind, str) or not meta.get("name"):
            raise KubeUnknownKindError(
                "object has no apiVersion, kind or metadata.name",
                hint="every manifest object needs all three",
            )
        return await self.resource_for(api_version, kind), meta

    async def create(self, obj: dict[str, Any]) -> Any:
        """POST ``obj`` to its collection (discovered from apiVersion/kind and metadata.namespace)."""
        res, meta = await self._where(obj)
        return await self.post(res.path(meta.get("namespace")), obj)

    async def exists(self, obj: dict[str, Any]) -> bool:
        """Whether an object of ``obj``'s kind, namespace and name is stored."""
        res, meta = await self._where(obj)
        try:
            await self.get(res.path(meta.get("namespace"), str(meta["name"])))
        except KubeNotFoundError:
            return False
        return True
