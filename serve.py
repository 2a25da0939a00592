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
"""

from __future__ import annotations

import asyncio
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
    """Start preparing the process when the server starts; until it stops, sweep ended sessions' uploads and
    collect the garbage of readers' runs (``engine.startup.collect_garbage``, in a worker thread)."""
    threading.Thread(target=prepare_process, name="prepare-process", daemon=True).start()
    tasks = [asyncio.create_task(_sweep_uploads()), asyncio.create_task(_collect_garbage())]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()


app = st.App("app.py", lifespan=lifespan, middleware=[Middleware(UploadCap)])
