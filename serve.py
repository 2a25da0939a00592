"""Server entry point: ``streamlit run serve.py`` (``make run``; Community Cloud's main file).

Streamlit's ASGI app (``st.App``) runs ``app.py`` for every reader, as ``streamlit run app.py`` would, and
gives the server a start-up hook: while the server starts, a background thread imports PyTorch and the page
modules and freezes them (``engine.startup.prepare_process``), so the first reader after a deploy or a
restart no longer waits for the imports. A reader who arrives before the thread is done waits on its lock,
as they would have waited for the imports. ``streamlit run app.py`` still works; it only prepares the
process on the first reader's run (and without the upload caps below).

Uploads are capped on the server, not only by the browser's widget. Streamlit refuses one file over
``server.maxUploadSize`` (``.streamlit/config.toml``) from its Content-Length or while it streams; it does
not limit how many files a session sends, and the file ids in the upload URL are the client's to choose, so
one reader could park any number of 40 MB files in the server's memory. :class:`UploadCap`, the app's one
middleware, refuses an upload (HTTP 413) from its declared length, before a byte of its body is read, when it
would take the session past ``engine.budget.MAX_SESSION_UPLOAD_BYTES`` or ``MAX_SESSION_UPLOAD_FILES``, or
every session together past ``MAX_UPLOADS_HELD_BYTES``, counting what Streamlit holds and what is on its way;
an upload without a declared length (chunked) gets 411, a file id that is not a UUID (Streamlit's own form)
gets 400.

Uploads also go when their reader does. Streamlit keeps a closed tab's session for
``server.disconnectedSessionTTL`` seconds (120) so that a reconnect finds it, then drops it from its store
without shutting it down, so the files it uploaded stayed in the upload manager for good (and would in time
fill the cap above for everyone). :func:`forget_orphan_uploads` removes the files of sessions the runtime no
longer knows; the start-up hook runs it every ``REAP_EVERY_S`` seconds, and every upload request runs it first.

The hook also collects the garbage of readers' runs every ``engine.startup.COLLECT_EVERY_S`` seconds, in a worker
thread (:func:`engine.startup.collect_garbage`): Streamlit's collection after every run is off (it stalled every
slider move), and without one the garbage of a class's runs piled up.

No client locks the class out. ``streamlit run`` serves an ``st.App`` with uvicorn (not Tornado), which keeps a
connection that never sends a byte, or sends its request head one byte at a time (slowloris), open for as long as
the client likes: uvicorn has a keep-alive timeout after a response, none before the first request. A flood of
such connections took every file descriptor the process had, and ``socket.accept()`` failed with ``OSError:
[Errno 24] Too many open files`` for every reader after them. :class:`ConnectionGuard` wraps the protocol of
every connection the server accepts (the lifespan hook puts it around the event loop's ``create_server``, which
uvicorn calls after the lifespan has started): a connection must send its whole request head within
``HEADER_TIMEOUT_S``; one address may hold ``MAX_PENDING_PER_ADDRESS`` connections that have not yet done so,
every address together ``MAX_PENDING``, and one address ``MAX_OPEN_PER_ADDRESS`` connections in all (websockets
and kept-alive ones included); a connection over a cap is closed as soon as it is accepted. :class:`BodyTimeout`
ends a request whose body stalls for ``BODY_TIMEOUT_S``. At start-up the process raises its own soft limit of open
files to its hard limit (:func:`raise_open_files_limit`). What a proxy in front should cap: docs/operations.md,
"Connections".
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from collections.abc import Callable
from contextlib import asynccontextmanager

import streamlit as st
from starlette.middleware import Middleware

from engine import budget
from engine.startup import COLLECT_EVERY_S, collect_garbage, prepare_process

#: Seconds between two sweeps for the uploads of sessions that ended.
REAP_EVERY_S = 30.0
#: Seconds a new connection has to send its whole first request head (a browser sends it in one packet).
HEADER_TIMEOUT_S = 10.0
#: Connections of one address that have not yet sent a whole request head (a browser opens at most 6 at once).
MAX_PENDING_PER_ADDRESS = 32
#: Such connections of every address together.
MAX_PENDING = 256
#: Connections one address may hold open in all, websockets and kept-alive ones included (a class of 30 behind one
#: school address holds about 30 websockets and, while pages load, a few requests each).
MAX_OPEN_PER_ADDRESS = 256
#: Connections the server accepts in one turn of its event loop, and the length of its listen queue (uvicorn asks
#: for 2 048). A refused connection holds its file until the loop's next turns close it, so a burst of 1 000 accepted
#: at once held 1 000 files for a moment; a few turns of this many stay far below the open-files limit.
MAX_ACCEPT_BACKLOG = 64
#: Seconds a request's body may go without a byte before the request is ended (uploads come in 64 KB chunks).
BODY_TIMEOUT_S = 30.0
_log = logging.getLogger(__name__)
_UPLOAD_PATH = re.compile(r"/_stcore/upload_file/([^/]+)/([^/]+)$")
_FILE_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _runtime():
    from streamlit.runtime import Runtime

    return Runtime.instance() if Runtime.exists() else None


def forget_orphan_uploads(runtime=None) -> int:
    """Removes the uploaded files of every session the runtime no longer knows (neither connected nor kept for a
    reconnect); returns how many sessions' files went. Their files could never be read again.

    Args:
        runtime: Streamlit's ``Runtime`` (default: the running one; nothing is done without one).
    """
    runtime = runtime or _runtime()
    if runtime is None:
        return 0
    manager = runtime.uploaded_file_mgr
    # Streamlit's session manager: active sessions, then those kept for a reconnect (no public accessor in 1.67)
    known = getattr(getattr(runtime, "_session_mgr", None), "get_session_info", None)
    if known is None:
        return 0
    gone = [sid for sid in list(getattr(manager, "file_storage", {})) if known(sid) is None]
    for sid in gone:
        manager.remove_session_files(sid)
    return len(gone)


def held_uploads(session_id: str, file_id: str) -> tuple[int, int, int]:
    """What Streamlit's upload manager holds: ``(bytes of this session, files of this session, bytes of all)``.

    The files of sessions that ended are removed first (:func:`forget_orphan_uploads`); the file ``file_id``
    is left out (an upload to the same id replaces it). Zeros before the runtime exists.
    """
    runtime = _runtime()
    if runtime is None:
        return 0, 0, 0
    forget_orphan_uploads(runtime)
    storage = getattr(runtime.uploaded_file_mgr, "file_storage", {})
    session_bytes = session_files = total = 0
    for sid, files in list(storage.items()):
        for fid, rec in list(files.items()):
            if sid == session_id and fid == file_id:
                continue
            total += len(rec.data)
            if sid == session_id:
                session_bytes += len(rec.data)
                session_files += 1
    return session_bytes, session_files, total


class UploadCap:
    """ASGI middleware: a cap per session and for all sessions on what uploads may hold, checked before the body.

    Args:
        app: the ASGI app it wraps.
        per_session: bytes one session may hold in uploaded files, those on the way included.
        per_session_files: files one session may hold (the one being replaced left out).
        total: bytes every session together may hold, those on the way included.
        held: ``(session_id, file_id) -> (session bytes, session files, all bytes)`` held now
            (:func:`held_uploads`, Streamlit's upload manager).
    """

    def __init__(self, app, per_session: int = budget.MAX_SESSION_UPLOAD_BYTES,
                 per_session_files: int = budget.MAX_SESSION_UPLOAD_FILES, total: int = budget.MAX_UPLOADS_HELD_BYTES,
                 held: Callable[[str, str], tuple[int, int, int]] = held_uploads):
        self.app = app
        self.per_session, self.per_session_files, self.total = per_session, per_session_files, total
        self._held = held
        self._lock = threading.Lock()
        self._in_flight: dict[str, int] = {}  # session id -> bytes declared by its uploads now streaming

    async def __call__(self, scope, receive, send):
        found = _UPLOAD_PATH.search(scope.get("path", "")) if scope["type"] == "http" else None
        if found is None or scope.get("method") != "PUT":
            return await self.app(scope, receive, send)
        session_id, file_id = found.groups()
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        declared = headers.get(b"content-length", b"")
        if not _FILE_ID.fullmatch(file_id):
            return await _refuse(send, 400, "not an upload id this server gives")
        if not declared or b"chunked" in headers.get(b"transfer-encoding", b"").lower():
            return await _refuse(send, 411, "an upload must declare its length")
        if not declared.isdigit() or len(declared) > 15:
            return await _refuse(send, 400, "invalid Content-Length")
        length = int(declared)
        session_bytes, session_files, all_bytes = self._held(session_id, file_id)
        with self._lock:
            on_the_way = self._in_flight.get(session_id, 0)
            if (session_bytes + on_the_way + length > self.per_session or session_files >= self.per_session_files
                    or all_bytes + sum(self._in_flight.values()) + length > self.total):
                refused = True
            else:
                refused = False
                self._in_flight[session_id] = on_the_way + length
        if refused:
            return await _refuse(send, 413, "this upload would take the session past the server's limit")
        try:
            await self.app(scope, receive, send)
        finally:
            with self._lock:
                left = self._in_flight.pop(session_id, 0) - length
                if left > 0:
                    self._in_flight[session_id] = left


async def _refuse(send, status: int, text: str) -> None:
    body = text.encode("ascii")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", b"%d" % len(body)),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


class BodyTimeout:
    """ASGI middleware: a request whose body stalls for ``timeout_s`` seconds between two chunks is ended, as if
    the client had gone (the app reads ``http.disconnect``).

    Args:
        app: the ASGI app it wraps.
        timeout_s: the longest wait for the next chunk of a body, in seconds.
    """

    def __init__(self, app, timeout_s: float = BODY_TIMEOUT_S):
        self.app, self.timeout_s = app, timeout_s

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        done = False

        async def bounded():
            nonlocal done
            if done:
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), self.timeout_s)
            except TimeoutError:
                done = True
                return {"type": "http.disconnect"}
            done = message["type"] == "http.request" and not message.get("more_body", False)
            return message

        return await self.app(scope, bounded, send)


class ConnectionGuard:
    """Bounds what connections that have not yet sent a request may hold: time, and count per address.

    :meth:`protocol` wraps each new connection's protocol (uvicorn's HTTP one) in a :class:`_GuardedProtocol` that
    counts it, closes it at once when it would take its address or the server over a cap, and closes it
    ``header_timeout_s`` after it was accepted unless its first request head (up to the blank line) has arrived.
    After that the connection is uvicorn's (its keep-alive timeout, the websocket's ping timeout) and counts only
    toward ``max_open_per_address``, until it is closed.

    Args:
        header_timeout_s: seconds to send the first request head.
        max_pending_per_address: connections one address may hold that have not sent it.
        max_pending: such connections of every address together.
        max_open_per_address: connections one address may hold open in all.

    Attributes:
        refused: connections closed on arrival (over a cap), since the start.
        timed_out: connections closed for a head not sent in time, since the start.
    """

    def __init__(self, header_timeout_s: float = HEADER_TIMEOUT_S,
                 max_pending_per_address: int = MAX_PENDING_PER_ADDRESS, max_pending: int = MAX_PENDING,
                 max_open_per_address: int = MAX_OPEN_PER_ADDRESS):
        self.header_timeout_s = header_timeout_s
        self.max_pending_per_address, self.max_pending = max_pending_per_address, max_pending
        self.max_open_per_address = max_open_per_address
        self.pending: dict[str, int] = {}
        self.open: dict[str, set] = {}
        self.refused = self.timed_out = 0

    def protocol(self, factory: Callable[..., asyncio.Protocol]) -> Callable[..., asyncio.Protocol]:
        """A protocol factory like ``factory`` whose protocols are guarded."""
        return lambda *args, **kwargs: _GuardedProtocol(self, factory(*args, **kwargs))

    def admit(self, address: str, transport) -> bool:
        """Count a new connection from ``address``; False (and nothing counted) when it would pass a cap."""
        held = self.open.setdefault(address, set())
        held -= {t for t in held if t.is_closing()}  # a websocket's transport: closed without telling the guard
        if (self.pending.get(address, 0) >= self.max_pending_per_address
                or sum(self.pending.values()) >= self.max_pending or len(held) >= self.max_open_per_address):
            self.refused += 1
            if not held:
                del self.open[address]
            return False
        self.pending[address] = self.pending.get(address, 0) + 1
        held.add(transport)
        return True

    def headed(self, address: str) -> None:
        """The connection from ``address`` sent its request head, or went: it no longer counts as pending."""
        left = self.pending.get(address, 0) - 1
        if left > 0:
            self.pending[address] = left
        else:
            self.pending.pop(address, None)

    def closed(self, address: str, transport) -> None:
        """The connection is closed: it no longer counts toward its address's open connections."""
        held = self.open.get(address, set())
        held.discard(transport)
        if not held:
            self.open.pop(address, None)


class _GuardedProtocol(asyncio.Protocol):
    """One connection's protocol, passed through to ``inner`` once :class:`ConnectionGuard` admits it."""

    def __init__(self, guard: ConnectionGuard, inner: asyncio.Protocol):
        self.guard, self.inner = guard, inner
        self.transport = self.timer = None
        self.address, self.admitted, self.pending, self.tail = "", False, False, b""

    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.address = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
        if not self.guard.admit(self.address, transport):
            transport.abort()
            return
        self.admitted = self.pending = True
        self.timer = asyncio.get_running_loop().call_later(self.guard.header_timeout_s, self._too_slow)
        self.inner.connection_made(transport)

    def _too_slow(self) -> None:
        if self.pending:
            self.guard.timed_out += 1
            self._unpend()
            self.transport.abort()

    def _unpend(self) -> None:
        if self.pending:
            self.pending = False
            self.guard.headed(self.address)
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def data_received(self, data: bytes) -> None:
        if not self.admitted:
            return
        if self.pending:
            seen = self.tail + data
            if b"\r\n\r\n" in seen:
                self._unpend()
            self.tail = seen[-3:]
        self.inner.data_received(data)

    def eof_received(self):
        return self.inner.eof_received() if self.admitted else None

    def connection_lost(self, exc) -> None:
        if not self.admitted:
            return
        self._unpend()
        self.guard.closed(self.address, self.transport)
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.admitted:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.admitted:
            self.inner.resume_writing()


def guard_loop(loop: asyncio.AbstractEventLoop, guard: ConnectionGuard) -> Callable[[], None]:
    """Make every server ``loop.create_server`` starts from now on guard its connections and accept at most
    :data:`MAX_ACCEPT_BACKLOG` of them per turn of the loop (its ``backlog``); returns the undo."""
    original = loop.create_server

    async def create_server(protocol_factory, *args, **kwargs):
        kwargs["backlog"] = min(int(kwargs.get("backlog") or MAX_ACCEPT_BACKLOG), MAX_ACCEPT_BACKLOG)
        return await original(guard.protocol(protocol_factory), *args, **kwargs)

    loop.create_server = create_server

    def undo() -> None:
        if loop.create_server is create_server:
            del loop.create_server

    return undo


def raise_open_files_limit() -> tuple[int, int]:
    """Raise this process's soft limit of open files (RLIMIT_NOFILE) to its hard limit; returns ``(soft, hard)``
    after. Nothing is changed where the platform has no such limit (Windows) or refuses the change."""
    try:
        import resource
    except ImportError:
        return -1, -1
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard and hard != resource.RLIM_INFINITY:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as exc:
            _log.warning("could not raise the open-files limit from %s to %s: %s", soft, hard, exc)
    return resource.getrlimit(resource.RLIMIT_NOFILE)


async def _sweep_uploads() -> None:
    while True:
        await asyncio.sleep(REAP_EVERY_S)
        forget_orphan_uploads()


async def _collect_garbage() -> None:
    while True:
        await asyncio.sleep(COLLECT_EVERY_S)
        await asyncio.to_thread(collect_garbage)


@asynccontextmanager
async def lifespan(_app):
    """Start preparing the process when the server starts; guard the connections of the server uvicorn starts
    next (:class:`ConnectionGuard`); until it stops, sweep ended sessions' uploads and collect the garbage of
    readers' runs (``engine.startup.collect_garbage``, in a worker thread)."""
    raise_open_files_limit()
    undo = guard_loop(asyncio.get_running_loop(), GUARD)
    threading.Thread(target=prepare_process, name="prepare-process", daemon=True).start()
    tasks = [asyncio.create_task(_sweep_uploads()), asyncio.create_task(_collect_garbage())]
    try:
        yield
    finally:
        undo()
        for task in tasks:
            task.cancel()


#: The guard of this process's server.
GUARD = ConnectionGuard()
app = st.App("app.py", lifespan=lifespan, middleware=[Middleware(UploadCap), Middleware(BodyTimeout)])
