"""Uploads capped on the server: the UploadCap middleware alone, then real HTTP requests to a running server.

The browser's widget refuses files over its ``max_upload_size``, but anyone can PUT to Streamlit's upload
endpoint directly, with a file id of their choosing. These tests send what such a client would: files over the
per-file cap, several large files to one session, uploads in parallel, a chunked body without a length. The
server must answer 413/411/400 from the request's headers, before it reads (and holds) the body, and its
resident memory must stay near what the accepted files weigh.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import os
import time
import urllib.request
import uuid

import pytest

import serve
from engine import budget

MB = 1_000_000


# --- the middleware alone ---------------------------------------------------------------------------------------------


def upload_scope(length: int | None, session="s1", file_id=None, chunked=False, method="PUT") -> dict:
    headers = [] if length is None else [(b"content-length", str(length).encode())]
    if chunked:
        headers.append((b"transfer-encoding", b"chunked"))
    return {"type": "http", "method": method, "headers": headers,
            "path": f"/_stcore/upload_file/{session}/{file_id or uuid.uuid4()}"}


class Inner:
    """A stand-in for Streamlit's app: records the requests that reached it; can hold one open until released."""

    def __init__(self):
        self.calls, self.release = [], asyncio.Event()
        self.hold = False

    async def __call__(self, scope, receive, send):
        self.calls.append(scope["path"])
        if self.hold:
            await self.release.wait()
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})


async def call(cap, scope) -> int:
    sent = []

    async def receive():
        pytest.fail("the body must not be read before the request is accepted")

    async def send(message):
        sent.append(message)

    await cap(scope, receive, send)
    return sent[0]["status"]


def test_the_cap_refuses_from_the_headers_alone():
    held = {"s1": (40 * MB, 1, 40 * MB)}
    inner = Inner()
    cap = serve.UploadCap(inner, per_session=45 * MB, per_session_files=4, total=90 * MB,
                          held=lambda sid, fid: held.get(sid, (0, 0, 40 * MB)))

    async def scenario():
        assert await call(cap, upload_scope(100 * MB, "s2")) == 413  # over the session cap at once
        assert await call(cap, upload_scope(6 * MB)) == 413  # 40 held + 6 > 45
        assert await call(cap, upload_scope(None)) == 411
        assert await call(cap, upload_scope(5, chunked=True)) == 411
        assert await call(cap, upload_scope(10, file_id="..")) == 400
        assert await call(cap, upload_scope(10, file_id="x" * 36)) == 400
        assert await call(cap, upload_scope(-1)) == 400
        assert await call(cap, upload_scope(10**30)) == 400
        assert inner.calls == []
        assert await call(cap, upload_scope(4 * MB)) == 204  # within the cap: passed on
        assert await call(cap, upload_scope(0, method="DELETE")) == 204  # other requests pass untouched
        assert len(inner.calls) == 2

    asyncio.run(scenario())


def test_uploads_on_the_way_count_until_they_end():
    inner = Inner()
    cap = serve.UploadCap(inner, per_session=45 * MB, per_session_files=4, total=60 * MB,
                          held=lambda sid, fid: (0, 0, 0))

    async def scenario():
        inner.hold = True
        first = asyncio.create_task(call(cap, upload_scope(40 * MB, "a")))
        await asyncio.sleep(0.01)
        assert await call(cap, upload_scope(10 * MB, "a")) == 413  # 40 streaming + 10 > 45 for session a
        assert await call(cap, upload_scope(30 * MB, "b")) == 413  # 40 + 30 > 60 for every session together
        inner.release.set()
        assert await first == 204
        inner.hold = False
        assert await call(cap, upload_scope(30 * MB, "b")) == 204  # the first ended: nothing on the way

    asyncio.run(scenario())


def test_a_session_holds_a_bounded_number_of_files():
    cap = serve.UploadCap(Inner(), per_session=45 * MB, per_session_files=4, total=90 * MB,
                          held=lambda sid, fid: (4, 4, 4))
    assert asyncio.run(call(cap, upload_scope(1))) == 413


def test_the_app_is_served_with_the_cap():
    assert any(m.cls is serve.UploadCap for m in serve.app._user_middleware)


def test_the_files_of_ended_sessions_are_forgotten():
    """Streamlit drops a closed tab's session from its store after disconnectedSessionTTL without shutting it down;
    its uploads must not stay behind."""
    import types

    from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
    from streamlit.runtime.uploaded_file_manager import UploadedFileRec

    manager = MemoryUploadedFileManager("/_stcore/upload_file")
    for sid in ("connected", "kept-for-reconnect", "expired"):
        manager.add_file(sid, UploadedFileRec(file_id=str(uuid.uuid4()), name="a.txt", type="text/plain",
                                              data=b"x" * 1000))
    known = {"connected": object(), "kept-for-reconnect": object()}
    runtime = types.SimpleNamespace(uploaded_file_mgr=manager,
                                    _session_mgr=types.SimpleNamespace(get_session_info=known.get))
    assert serve.forget_orphan_uploads(runtime) == 1
    assert set(manager.file_storage) == {"connected", "kept-for-reconnect"}
    assert serve.forget_orphan_uploads(runtime) == 0
    assert serve.forget_orphan_uploads(types.SimpleNamespace(uploaded_file_mgr=manager)) == 0  # no session manager


# --- a running server -------------------------------------------------------------------------------------------------


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024


@contextlib.contextmanager
def open_session(port: int):
    """A reader's session as the browser opens one: the XSRF cookie (the health check sets it), the websocket."""
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    from websockets.sync.client import connect

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=30) as r:  # sets the cookie
        cookie = next(v for k, v in r.headers.items() if k.lower() == "set-cookie" and "_streamlit_xsrf" in v)
    xsrf = cookie.split(";")[0].split("=", 1)[1]
    with connect(f"ws://127.0.0.1:{port}/_stcore/stream", subprotocols=["streamlit"],
                 origin=f"http://127.0.0.1:{port}", additional_headers={"Cookie": f"_streamlit_xsrf={xsrf}"},
                 max_size=None, open_timeout=120, ping_interval=None) as ws:  # no keepalive: a busy machine is slow
        rerun = BackMsg()
        rerun.rerun_script.query_string = ""
        rerun.rerun_script.page_script_hash = ""
        ws.send(rerun.SerializeToString())
        deadline, session_id = time.monotonic() + 180, None
        while time.monotonic() < deadline:
            msg = ForwardMsg()
            msg.ParseFromString(ws.recv(timeout=180))
            kind = msg.WhichOneof("type")
            if kind == "new_session":
                session_id = msg.new_session.initialize.session_id
            elif kind == "script_finished" and session_id is not None:
                # the page's first run is over: what it allocates is not counted as an upload's memory
                yield session_id, xsrf  # the session lasts while the socket is open
                return
        raise AssertionError(f"no finished first run (session {session_id})")


def put(port: int, session_id: str, xsrf: str, size: int, *, send_body: bool = True, file_id: str | None = None,
        chunked: bool = False) -> int:
    """PUTs a file of ``size`` bytes as the widget does (multipart form, XSRF header); returns the status."""
    boundary = "----capcheck" + uuid.uuid4().hex
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.txt\"\r\n"
            "Content-Type: text/plain\r\n\r\n").encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300 if send_body else 120)  # a refusal is quick
    conn.putrequest("PUT", f"/_stcore/upload_file/{session_id}/{file_id or uuid.uuid4()}")
    conn.putheader("Content-Type", f"multipart/form-data; boundary={boundary}")
    conn.putheader("X-Xsrftoken", xsrf)
    conn.putheader("Cookie", f"_streamlit_xsrf={xsrf}")
    if chunked:
        conn.putheader("Transfer-Encoding", "chunked")
    else:
        conn.putheader("Content-Length", str(len(head) + size + len(tail)))
    conn.endheaders()
    if send_body and not chunked:
        conn.send(head)
        chunk = b"a" * MB
        for start in range(0, size, MB):
            conn.send(chunk[: min(MB, size - start)])
        conn.send(tail)
    elif chunked:
        conn.send(b"10\r\n" + b"a" * 16 + b"\r\n")  # a first chunk; the answer comes without the rest
    status = conn.getresponse().status
    conn.close()
    return status


@pytest.fixture(scope="module")
def server():
    from tests.browser.test_browser import free_port, start_server, stop_server

    port = free_port()
    proc = start_server(port)
    try:
        yield port, proc.pid
    finally:
        stop_server(proc)


def test_a_direct_put_of_huge_files_is_refused_before_its_body(server):
    """Three PUTs declaring 100 MB each, to a real session: each refused from its headers (the client never sends
    the body), and the server's memory does not move. Before, all three were accepted (+300 MB in 1.4 s)."""
    port, pid = server
    with open_session(port) as (session_id, xsrf):
        before = rss_mb(pid)
        started = time.monotonic()
        assert [put(port, session_id, xsrf, 100 * MB, send_body=False) for _ in range(3)] == [413, 413, 413]
        assert time.monotonic() - started < 60
        assert put(port, session_id, xsrf, 16, chunked=True) == 411
        assert put(port, session_id, xsrf, 16, file_id="my-own-id") == 400
        assert rss_mb(pid) - before < 20


def test_one_session_holds_one_large_file_and_a_text_no_more(server):
    """The largest legitimate checkpoint and a text are accepted; a second large file to the same session is
    refused before its body, and resident memory grows by about what was accepted, not by what was sent."""
    port, pid = server
    with open_session(port) as (session_id, xsrf):
        before = rss_mb(pid)
        assert put(port, session_id, xsrf, 40 * MB) == 204
        assert put(port, session_id, xsrf, budget.MAX_TEXT_BYTES) == 204
        assert [put(port, session_id, xsrf, 40 * MB, send_body=False) for _ in range(3)] == [413, 413, 413]
        grown = rss_mb(pid) - before
        held = (40 * MB + budget.MAX_TEXT_BYTES) / 2**20
        assert grown < held + 60, (grown, held)  # the accepted 42 MB, parsing's copies returned (not 120 MB more)
        with open_session(port) as (other_id, other_xsrf):  # another reader still has a session's worth
            assert put(port, other_id, other_xsrf, budget.MAX_TEXT_BYTES) == 204


def test_without_a_session_nothing_is_accepted(server):
    port, _ = server
    assert put(port, "no-such-session", "2|00|00|0", 16) in (400, 403)
    assert os.path.exists(f"/proc/{server[1]}")  # the server is still up


def test_uploads_of_readers_who_left_are_released(tmp_path):
    """Two readers upload 40 MB each and close their tabs; once Streamlit has let their sessions go (a 2 s
    disconnectedSessionTTL here, 120 s by default), a third reader's 40 MB fits under the all-sessions cap, and
    the server holds one file's worth less than with the two (before, their files stayed for good)."""
    import subprocess
    import sys

    from tests.browser.test_browser import ROOT, free_port, stop_server

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "serve.py", "--server.port", str(port),
                             "--server.headless", "true", "--server.address", "127.0.0.1",
                             "--server.disconnectedSessionTTL", "2"], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2)
                break
            except OSError:
                time.sleep(0.3)
        with open_session(port) as (third, third_xsrf):
            with contextlib.ExitStack() as readers:  # both stay connected until the refusal is checked
                for _ in range(2):
                    sid, xsrf = readers.enter_context(open_session(port))
                    assert put(port, sid, xsrf, 40 * MB) == 204
                assert put(port, third, third_xsrf, 40 * MB, send_body=False) == 413  # 80 MB held + 40 > 90
                with_two = rss_mb(proc.pid)
            time.sleep(4)  # past the 2 s that Streamlit keeps a closed tab's session for a reconnect
            assert put(port, third, third_xsrf, 40 * MB) == 204
            # 80 MB went, 40 MB came: no higher than with the two (kept, they would add the third's 38 MiB)
            assert rss_mb(proc.pid) < with_two + 10, (with_two, rss_mb(proc.pid))
    finally:
        stop_server(proc)
