"""No client locks the class out: a flood of 1 000 connections that never send a request, to 127.0.0.1, while a
reader opens a page and moves a control (issue 37).

The server runs as ``make run`` runs it (``streamlit run serve.py``) under a hard open-files limit of
:data:`HARD_LIMIT`, soft :data:`SOFT_LIMIT`, so that 1 000 held connections and the server's own files would
exhaust it: before ``serve.ConnectionGuard`` such a flood made ``socket.accept()`` fail with ``OSError: [Errno 24]
Too many open files`` for every reader who came after. The flood comes from three loopback addresses other than
the reader's (an attacker's machines): idle TCP connections that send nothing, slowloris ones that send a request
head a line a second and never end it, and websockets that complete their handshake on ``/_stcore/stream`` and
then say nothing; each flood connection the server closes is opened again after :data:`RECONNECT_S`, until the
flood ends (at most :data:`FLOOD_S` seconds). Meanwhile a reader in Chromium opens page 4 and moves its first
slider; the page must answer, the server's open files stay under its limit, and once the flood ends the server
answers a new page load. Numbers are printed (``-s``).
"""

from __future__ import annotations

import asyncio
import base64
import os
import re
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

import serve
from tests.browser.test_browser import (
    CHART,
    CHROMIUM,
    LAUNCH_ARGS,
    free_port,
    start_server,
    stop_server,
    wait_ready,
)

pytestmark = pytest.mark.browser

#: The flood: connections from each address, by kind (1 000 in all).
FLOOD = {"idle": ("127.0.0.2", 600), "slowloris": ("127.0.0.3", 300), "websocket": ("127.0.0.4", 100)}
#: The server's open-files limits: the flood alone would take more than the hard one.
SOFT_LIMIT, HARD_LIMIT = 512, 1024
#: Seconds before a closed flood connection is opened again, and the longest the flood lasts.
RECONNECT_S, FLOOD_S = 2.0, 240.0
READER_TIMEOUT_MS = 180_000


def start_limited_server(port: int, log: Path) -> subprocess.Popen:
    """``streamlit run serve.py`` on 127.0.0.1:``port`` with the open-files limits above, its log in ``log``."""
    def limits():
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (SOFT_LIMIT, HARD_LIMIT))

    return start_server(port, log, preexec_fn=limits, timeout_s=180)


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def soft_limit(pid: int) -> int:
    (line,) = [x for x in Path(f"/proc/{pid}/limits").read_text().splitlines() if x.startswith("Max open files")]
    return int(line.split()[3])


class Flood:
    """The flood's connections, run on an event loop in a thread of their own until :meth:`stop` (or FLOOD_S)."""

    def __init__(self, port: int):
        self.port = port
        self.opened = self.closed_by_server = self.upgraded = 0
        self.held = 0
        self.max_held = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
        assert not self._thread.is_alive()

    async def _main(self) -> None:
        deadline = time.monotonic() + FLOOD_S
        workers = [asyncio.create_task(self._worker(kind, address, deadline))
                   for kind, (address, count) in FLOOD.items() for _ in range(count)]
        while not self._stop.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        for worker in workers:
            worker.cancel()
        await asyncio.gather(*workers, return_exceptions=True)

    async def _worker(self, kind: str, address: str, deadline: float) -> None:
        while time.monotonic() < deadline:
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", self.port, local_addr=(address, 0))
            except OSError:
                await asyncio.sleep(RECONNECT_S)
                continue
            self.opened += 1
            self.held += 1
            self.max_held = max(self.max_held, self.held)
            try:
                await self._hold(kind, reader, writer)
            finally:
                self.held -= 1
                writer.transport.abort()
            await asyncio.sleep(RECONNECT_S)

    async def _hold(self, kind: str, reader, writer) -> None:
        """Hold one connection the flood's way until the server closes it."""
        if kind == "websocket":
            key = base64.b64encode(os.urandom(16)).decode()
            writer.write((f"GET /_stcore/stream HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nUpgrade: websocket\r\n"
                          f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                          "Sec-WebSocket-Protocol: streamlit\r\n\r\n").encode())
            head = await reader.readuntil(b"\r\n\r\n")
            self.upgraded += head.startswith(b"HTTP/1.1 101")
            while await reader.read(65536):  # the server's pings go unanswered: silent
                pass
        elif kind == "slowloris":
            writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            while not reader.at_eof():
                await asyncio.sleep(1.0)
                writer.write(b"X-Wait: 1\r\n")
                try:
                    await asyncio.wait_for(reader.read(1), 0.01)
                except TimeoutError:
                    continue
        else:
            await reader.read(1)  # nothing sent: the server's close ends it
        self.closed_by_server += 1


def test_a_flood_of_silent_connections_does_not_lock_a_reader_out(tmp_path):
    if CHROMIUM is None:
        pytest.fail("Chromium is not installed: run `make test` (apt-get install chromium)")
    port = free_port()
    log = tmp_path / "server.log"
    proc = start_limited_server(port, log)
    flood = Flood(port)
    peak_files = [0]
    watching = threading.Event()

    def watch() -> None:
        while not watching.is_set():
            peak_files[0] = max(peak_files[0], open_files(proc.pid))
            time.sleep(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    try:
        assert soft_limit(proc.pid) == HARD_LIMIT  # serve.raise_open_files_limit at start-up
        watcher.start()
        flood.start()
        time.sleep(3 * RECONNECT_S)  # the flood is up: every connection tried at least once
        assert flood.opened >= sum(count for _address, count in FLOOD.values())
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            t0 = time.monotonic()
            page.goto(f"http://127.0.0.1:{port}/dropout?lang=en", wait_until="commit", timeout=READER_TIMEOUT_MS)
            wait_ready(page, READER_TIMEOUT_MS)
            opened_s = time.monotonic() - t0
            slider = page.locator('[data-testid="stMain"] [data-testid="stSlider"] input[type="range"]').first
            charts = f"() => [...document.querySelectorAll('{CHART}')].map(c => c.innerHTML).join('')"
            before_value, before_chart = slider.input_value(), page.evaluate(charts)
            t1 = time.monotonic()
            slider.focus()
            page.keyboard.press("ArrowRight")
            page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')",
                                   timeout=READER_TIMEOUT_MS)
            page.wait_for_function(f"(before) => ({charts})() !== before", arg=before_chart,
                                   timeout=READER_TIMEOUT_MS)  # the server ran the move: a chart was drawn again
            moved_s = time.monotonic() - t1
            assert slider.input_value() != before_value
            assert page.locator('[data-testid="stException"]').count() == 0
            during = (flood.opened, flood.closed_by_server, flood.max_held, flood.upgraded)
            flood.stop()
            t2 = time.monotonic()
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=10) as r:
                assert r.status == 200
            page.reload(wait_until="commit")
            wait_ready(page, READER_TIMEOUT_MS)
            recovered_s = time.monotonic() - t2
            browser.close()
        watching.set()
        watcher.join()
        after_files = open_files(proc.pid)
    finally:
        watching.set()
        flood._stop.set()
        stop_server(proc)
    text = log.read_text(errors="replace")
    print(f"\nflood of {sum(c for _a, c in FLOOD.values())} connections from 3 addresses: {during[0]} opened, "
          f"{during[1]} closed by the server, at most {during[2]} open at once on the flood's side, "
          f"{during[3]} websockets upgraded; server: at most {peak_files[0]} open files (limit {HARD_LIMIT}), "
          f"{after_files} after; reader: page in {opened_s:.1f} s, slider move drawn in {moved_s:.1f} s, "
          f"page again {recovered_s:.1f} s after the flood")
    assert "Too many open files" not in text and not re.search(r"Errno 24", text)
    assert peak_files[0] < HARD_LIMIT - 100
    assert during[1] > 0  # the server closed flood connections (caps and the header timeout), none held for good
    assert after_files < peak_files[0]


def test_the_guard_counts_and_times_out_pending_connections():
    """The guard on its own, on an event loop with a real listening socket: one address gets its pending cap and
    no more, a connection that sends its head in time is passed through and no longer pending, one that does not
    is closed after the header timeout, and the counts go back to zero."""
    async def main():
        guard = serve.ConnectionGuard(header_timeout_s=0.5, max_pending_per_address=3, max_pending=100,
                                      max_open_per_address=50)
        served = []

        class Echo(asyncio.Protocol):
            def connection_made(self, transport):
                self.transport = transport

            def data_received(self, data):
                served.append(data)
                self.transport.write(b"ok")

        loop = asyncio.get_running_loop()
        undo = serve.guard_loop(loop, guard)
        server = await loop.create_server(Echo, "127.0.0.1", 0)
        undo()
        port = server.sockets[0].getsockname()[1]
        conns = [await asyncio.open_connection("127.0.0.1", port, local_addr=("127.0.0.5", 0)) for _ in range(5)]
        await asyncio.sleep(0.1)
        assert guard.pending == {"127.0.0.5": 3} and guard.refused == 2
        assert [r.at_eof() or (await r.read(1)) == b"" for r, _w in conns[3:]] == [True, True]
        good_r, good_w = conns[0]
        good_w.write(b"GET / HTTP/1.1\r\n\r\n")
        assert await asyncio.wait_for(good_r.read(2), 5) == b"ok"
        assert guard.pending == {"127.0.0.5": 2}
        await asyncio.sleep(1.0)  # past the header timeout: the two silent ones are closed
        assert guard.timed_out == 2 and guard.pending == {}
        assert [await asyncio.wait_for(r.read(1), 5) for r, _w in conns[1:3]] == [b"", b""]
        assert served == [b"GET / HTTP/1.1\r\n\r\n"]
        for _r, w in conns:
            w.transport.abort()
        await asyncio.sleep(0.1)
        assert guard.open == {}
        server.close()
        await server.wait_closed()

    asyncio.run(main())


def test_the_guarded_server_accepts_a_bounded_burst():
    """A server started through the guard asks for a listen queue (and an accept burst per turn of the loop) of at
    most ``serve.MAX_ACCEPT_BACKLOG``, whatever uvicorn asks for: the flood's 1 000 connections cannot all hold a
    file at once before the guard closes them."""
    asked = []

    class Loop:
        async def create_server(self, protocol_factory, *args, **kwargs):
            asked.append(kwargs.get("backlog"))

    loop = Loop()
    undo = serve.guard_loop(loop, serve.ConnectionGuard())
    for backlog in (2048, None, 16):
        asyncio.run(loop.create_server(asyncio.Protocol, backlog=backlog))
    undo()
    assert asked == [serve.MAX_ACCEPT_BACKLOG, serve.MAX_ACCEPT_BACKLOG, 16]
    assert "create_server" not in vars(loop)
