"""Guards on the requests to a model endpoint: each attempt is bounded in time and
in size (:func:`http_client`), and the requests in flight adapt to what the endpoint
can take (:class:`Limiter`).

Why the bound on an attempt sits below httpx, on the socket: httpx's timeouts apply
to each socket operation, so a server that sends one byte a second never trips a 2 s
read timeout and an attempt can last as long as the server likes. Here every socket
operation of an attempt (connect, TLS handshake, each send and each receive) gets as
its timeout at most the time left until the attempt's deadline, and none starts after
it. The attempt therefore ends at its deadline in the thread that made it, whatever the
server sends: no watchdog thread is needed, and httpcore closes the connection on that
timeout as on any other, so no thread or socket is left behind. The same stream counts
the bytes received (status line, headers and body, as sent on the wire) and stops the
attempt past :data:`MAX_REPLY_BYTES`; compressed replies are refused (``identity`` is
the only encoding asked for), so that bound also bounds what is decoded. Not bounded:
name resolution, which the system resolver times out itself.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import threading
import time
import urllib.request
from collections.abc import Iterable, Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal


def _http_modules() -> tuple[ModuleType, ModuleType]:
    """``(httpx, httpcore)`` as the installed openai client is built on: ``httpx2`` and
    ``httpcore2`` in recent releases, ``httpx`` and ``httpcore`` in earlier ones. The
    two pairs have the same API; an ``http_client`` of the other one is refused."""
    import openai

    roots = {base.__module__.split(".")[0] for base in openai.DefaultHttpxClient.__mro__}
    suffix = "2" if "httpx2" in roots else ""
    return importlib.import_module(f"httpx{suffix}"), importlib.import_module(f"httpcore{suffix}")


if TYPE_CHECKING:  # the pair the openai client of this environment is built on
    import httpcore2 as httpcore
    import httpx2 as httpx
else:
    httpx, httpcore = _http_modules()

#: Bytes one reply may take on the wire (status line, headers and body): a summary of
#: a few hundred tokens is a few kilobytes of JSON, so 1 MiB is ample and a larger
#: reply is a broken or hostile endpoint.
MAX_REPLY_BYTES = 1 << 20

Outcome = Literal["ok", "slow", "overload", "failed"]


class ReplyRejected(Exception):
    """An attempt stopped because of what the endpoint sent (too large, compressed);
    ``reason`` is for people and never quotes the reply."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Attempt(threading.local):
    """The deadline (``time.monotonic()`` seconds) and byte allowance of the attempt
    the current thread is making; without one, no bound."""

    deadline = math.inf
    allowance = math.inf
    max_bytes = 0

    def start(self, seconds: float, max_bytes: int) -> None:
        self.deadline = time.monotonic() + seconds
        self.allowance = self.max_bytes = max_bytes

    def timeout(self, timeout: float | None, expired: type[Exception]) -> float | None:
        """``timeout`` capped at the time left; raises ``expired`` when none is."""
        if self.deadline == math.inf:
            return timeout
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise expired("the attempt's deadline passed")
        return left if timeout is None else min(timeout, left)

    def received(self, size: int) -> None:
        self.allowance -= size
        if self.allowance < 0:
            raise ReplyRejected(f"the model reply is over {self.max_bytes // 1024} KiB")


class _Stream(httpcore.NetworkStream):
    """A network stream whose operations keep to the current attempt's bounds."""

    def __init__(self, inner: httpcore.NetworkStream, attempt: _Attempt) -> None:
        self._inner = inner
        self._attempt = attempt

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data = self._inner.read(max_bytes, self._attempt.timeout(timeout, httpcore.ReadTimeout))
        self._attempt.received(len(data))
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, self._attempt.timeout(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: Any,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        bounded = self._attempt.timeout(timeout, httpcore.ConnectTimeout)
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, bounded), self._attempt)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    """httpcore's own blocking backend, its streams wrapped in :class:`_Stream`."""

    def __init__(self, attempt: _Attempt) -> None:
        self._inner = httpcore.SyncBackend()
        self._attempt = attempt

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        bounded = self._attempt.timeout(timeout, httpcore.ConnectTimeout)
        stream = self._inner.connect_tcp(host, port, bounded, local_address, socket_options)
        return _Stream(stream, self._attempt)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _Body(httpx.SyncByteStream):
    def __init__(self, response: httpcore.Response) -> None:
        self._response = response

    def __iter__(self) -> Iterator[bytes]:
        with _as_httpx():
            yield from self._response.iter_stream()

    def close(self) -> None:
        self._response.close()


class BoundedTransport(httpx.BaseTransport):
    """An httpx transport over httpcore whose every request is one attempt bounded by
    ``timeout`` seconds (from handing it the request to the last byte of the reply)
    and ``max_bytes`` bytes received; see the module docstring. An http(s) proxy named
    by ``HTTP(S)_PROXY`` / ``ALL_PROXY`` (and not bypassed by ``NO_PROXY``) for
    ``base_url`` is used, as httpx would."""

    def __init__(self, base_url: str, *, timeout: float, max_bytes: int = MAX_REPLY_BYTES):
        self.timeout = timeout
        self.max_bytes = max_bytes
        self._attempt = _Attempt()
        backend = _Backend(self._attempt)
        ssl_context = httpx.create_ssl_context()
        proxy = _proxy_for(base_url)
        self._pool: httpcore.ConnectionPool = (
            httpcore.HTTPProxy(proxy_url=proxy, ssl_context=ssl_context, network_backend=backend)
            if proxy
            else httpcore.ConnectionPool(ssl_context=ssl_context, network_backend=backend)
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self._attempt.start(self.timeout, self.max_bytes)
        url = request.url
        core = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _as_httpx():
            response = self._pool.handle_request(core)
        encoding = dict((k.lower(), v) for k, v in response.headers).get(b"content-encoding")
        if encoding not in (None, b"", b"identity"):
            response.close()
            raise ReplyRejected("the model endpoint sent a compressed reply")
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_Body(response),
            extensions=response.extensions,
        )

    def close(self) -> None:
        self._pool.close()


def http_client(base_url: str, *, timeout: float) -> httpx.Client:
    """An httpx client for ``base_url`` on a :class:`BoundedTransport`, asking for
    uncompressed replies."""
    return httpx.Client(
        transport=BoundedTransport(base_url, timeout=timeout),
        timeout=timeout,
        headers={"Accept-Encoding": "identity"},
        trust_env=False,  # the transport applies the proxy settings itself
        follow_redirects=True,
    )


@contextlib.contextmanager
def _as_httpx() -> Iterator[None]:
    """httpcore's errors as httpx's, which the openai client sorts into timeouts and
    connection errors."""
    try:
        yield
    except httpcore.TimeoutException as exc:
        raise httpx.TimeoutException(str(exc)) from exc
    except (httpcore.NetworkError, httpcore.ProtocolError, httpcore.ProxyError) as exc:
        raise httpx.TransportError(str(exc)) from exc


def _proxy_for(base_url: str) -> str | None:
    """The http(s) proxy the environment names for ``base_url``, or ``None``."""
    url = httpx.URL(base_url)
    proxies = urllib.request.getproxies()
    proxy = proxies.get(url.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(url.host):
        return None
    return proxy if proxy.startswith(("http://", "https://")) else None


class Limiter:
    """A gate on requests in flight whose limit adapts to the endpoint, AIMD-style as
    TCP's congestion window (RFC 5681). An ``overload`` (a timeout, HTTP 429 or 503)
    halves the limit, down to 1, once per round: a request started before the last cut
    does not cut again. A run of ``max(limit, GROWTH_RUN)`` ``ok`` outcomes in a row
    raises it by one, up to ``ceiling``; a ``slow`` success (one that took long enough
    to show a queue at the server) ends the run without a cut, and ``failed`` neither
    cuts nor counts. The limit starts at ``ceiling``. Against a server that runs one
    request at a time it falls to what the server answers well within the timeout, and
    the other requests wait here, first come first served, where the wait does not
    count against their attempts. Thread-safe.

    :meth:`readings` gives, since the previous reading: ``concurrency_max`` the most
    requests in flight at once, ``concurrency_min`` the lowest limit; and
    ``concurrency_final`` the limit now.
    """

    #: The fewest successes in a row that raise the limit: so that a request that lost
    #: a probe (a 429 past what the server takes) and waits for a slot again finds the
    #: limit cut, not raised again (at most ``ceiling`` requests wait here at once).
    GROWTH_RUN = 4

    def __init__(self, ceiling: int) -> None:
        self.ceiling = ceiling
        self._limit = ceiling
        self._run = 0  # ``ok`` outcomes since the limit last changed
        self._in_flight = 0
        self._round = 0
        self._tickets = self._serving = 0
        self._most = 0
        self._least = ceiling
        self._changed = threading.Condition()

    @contextlib.contextmanager
    def slot(self) -> Iterator[list[Outcome]]:
        """Wait for room (in order of arrival), hold it for the ``with`` block and
        release it. The block appends its outcome to the yielded list; none appended
        (an exception) counts as ``failed``."""
        with self._changed:
            ticket = self._tickets
            self._tickets += 1
            self._changed.wait_for(
                lambda: self._serving == ticket and self._in_flight < self._limit
            )
            self._serving += 1
            self._in_flight += 1
            self._most = max(self._most, self._in_flight)
            started = self._round
            self._changed.notify_all()  # the next ticket may fit too
        outcome: list[Outcome] = []
        try:
            yield outcome
        finally:
            self._release(started, outcome[-1] if outcome else "failed")

    def _release(self, started: int, outcome: Outcome) -> None:
        with self._changed:
            self._in_flight -= 1
            if outcome == "overload" and started == self._round:
                self._limit, self._run = max(1, self._limit // 2), 0
                self._round += 1
            elif outcome == "ok":
                self._run += 1
                if self._run >= max(self._limit, self.GROWTH_RUN) and self._limit < self.ceiling:
                    self._limit, self._run = self._limit + 1, 0
            elif outcome == "slow":
                self._run = 0
            self._least = min(self._least, self._limit)
            self._changed.notify_all()

    def readings(self) -> dict[str, int]:
        """See the class docstring; starts a new window for the first two."""
        with self._changed:
            readings = {
                "concurrency_max": self._most,
                "concurrency_min": self._least,
                "concurrency_final": self._limit,
            }
            self._most, self._least = self._in_flight, self._limit
        return readings
