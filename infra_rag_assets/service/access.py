"""Who may call and what every response says about the route: API keys, deprecated aliases,
draining.

Keys are optional (none configured: every route is open). With keys, every route but the
probes needs ``Authorization: Bearer <key>``: a kubelet or load balancer checks liveness and
readiness without a secret, nothing else is answered to a caller without one.
"""

from __future__ import annotations

import hmac
from pathlib import Path
from typing import Any

from .middleware import Receive, Scope, Send, send_error

OPEN_PATHS = frozenset({"/livez", "/readyz", "/v1/livez", "/v1/readyz"})


class KeyFileError(ValueError):
    """The configured key file cannot be used; the service refuses to start open by mistake."""


def load_api_keys(path: str, extra: str = "") -> tuple[str, ...]:
    """Keys from ``path`` (one per line, blank lines and ``#`` comments skipped) plus ``extra``.

    A named file that is missing or holds no key is an error, never "no authentication"."""
    keys: list[str] = []
    if path:
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise KeyFileError(f"API key file {path}: {exc.strerror or exc}") from None
        keys = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
        if not keys:
            raise KeyFileError(f"API key file {path} holds no key")
    if extra.strip():
        keys.append(extra.strip())
    return tuple(keys)


class ApiKeyAuth:
    """401 + ``WWW-Authenticate: Bearer`` unless the request carries one of ``keys``.

    Every configured key is compared with ``hmac.compare_digest`` (no early exit on the first
    match either), so the time taken says nothing about how much of a key was right."""

    def __init__(self, app: Any, keys: tuple[str, ...]) -> None:
        self.app = app
        self.keys = tuple(k.encode() for k in keys)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.keys or scope["path"] in OPEN_PATHS:
            return await self.app(scope, receive, send)
        offered = _bearer(scope)
        if offered is None:
            return await self._refuse(send, "missing API key: send Authorization: Bearer <key>")
        matched = False
        for key in self.keys:
            matched |= hmac.compare_digest(offered, key)
        if not matched:
            return await self._refuse(send, "invalid API key")
        await self.app(scope, receive, send)

    async def _refuse(self, send: Send, message: str) -> None:
        challenge = [(b"www-authenticate", b'Bearer realm="infra_rag_assets"')]
        await send_error(send, 401, "unauthorized", message, challenge)


def _bearer(scope: Scope) -> bytes | None:
    for name, value in scope.get("headers") or []:
        if name == b"authorization":
            scheme, _, token = value.partition(b" ")
            return token.strip() if scheme.lower() == b"bearer" and token.strip() else None
    return None


class ResponseHeaders:
    """Headers that depend on the route, not the handler: ``Deprecation`` and a successor
    ``Link`` on the unversioned aliases, ``Connection: close`` while the worker drains."""

    def __init__(self, app: Any, state: Any, aliases: frozenset[str]) -> None:
        self.app, self.state, self.aliases = app, state, aliases

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        extra: list[tuple[bytes, bytes]] = []
        path = scope["path"]
        if path in self.aliases:
            extra += [(b"deprecation", b"true"), (b"link", f'</v1{path}>; rel="successor-version"'.encode())]

        async def send_with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                added = extra + ([(b"connection", b"close")] if self.state.draining else [])
                message = {**message, "headers": [*message.get("headers", []), *added]}
            await send(message)

        await self.app(scope, receive, send_with_headers)
