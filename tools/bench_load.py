"""A class at once: N readers on one server, its resident memory and the time of their control moves.

Started by ``python -m engine.bench load`` (``engine`` never imports Streamlit; this client speaks Streamlit's
protocol, so it lives here). For each reader count of ``--readers``, a fresh ``streamlit run serve.py`` (from
``--app-root``) is started, every page is opened once (a class arrives at an app that is already up), and
then the readers arrive over ``--arrival-s`` seconds and work for ``--minutes``:

- **essay readers** are websocket clients that send what a browser sends (Streamlit's ``BackMsg`` protobufs
  on ``/_stcore/stream``, with the XSRF cookie the health check sets): a first run of a page in their
  language, then, after a pause of ``--think-s`` seconds (uniform from half to one and a half times it), a
  move of one of the page's sliders or number inputs by one step (``rerun_script`` with every widget state
  the reader has set, scoped to the widget's fragment as the browser scopes it; the browser also writes a bound
  control's value into its address bar, which only a reload reads, and this client does not), and now and then
  (``--switch-every`` moves) a switch to another essay page by its script hash. They report the cache hashes
  of the large messages they hold (``cached_message_hashes``, dropped after the server's
  ``max_cached_message_age`` runs, as the browser's cache drops them), so the server sends references, and they
  rerun a fragment that asks to be rerun (``auto_rerun``).
- **trainers** (``--trainers``, default 2) open the Lab with a seed of their own, press Train (the quick
  preset, the page's defaults) and follow the polled progress until it is full; then they train again with
  the next seed until the time is up. Each training's time runs from the click to the full bar, and to the
  page's notice that the validation loss went below the bigram line (``bigram_s``; None when it did not).
  With ``--settings same`` they all keep the page's defaults, seed
  included, as a class told to keep them: the first click starts the training and the others follow it
  (``LabRunner.submit``), and so on for each next seed; ``--settings own same`` measures one class of each,
  side by side.
- one **Chromium reader** (``--browser``) moves every control of one essay page after another, timed as
  ``tools.bench_pages_browser`` times it (from the key press to the last change of a chart).

A move's time runs from sending its ``BackMsg`` to the ``script_finished`` of the run it started (a run that
ends early for a newer rerun does not count). The server's resident memory (``VmRSS``) is sampled every
0.2 s: the peak, and the peak and last value of every minute (memory that stays flat while the class works,
or climbs), and the CPU seconds the server used while the class worked. Every reader's first session id and
any exception element or failed run are kept; a training still queued or running when the class ends is
counted as unfinished. With ``--memory-limit-mb`` the server runs in a memory cgroup with that hard limit, as a
container (Community Cloud's, a teacher's Docker) holds it, after emptying the page cache (as root) so that the
files the server reads are charged to it as in a fresh container: the row adds the group's charged peak, the
times it hit the limit and the processes the kernel killed in it. With ``--busy-cores N``, N processes each keep
one core busy with a matmul loop from before the machine's matmul ceiling is measured to the end, as on a machine
shared with other work; the ceiling then says what speed the class had. With ``--profile``, py-spy samples the
server while the class works, only the thread that holds the interpreter lock (the one resource every page's run
and the training's Python side share): the row adds the share of the class's time the lock was held and where it
went (``SCRIPT_AREAS``: Plotly's charts, tables, Babel's numbers, PyTorch, Streamlit; the training; the server's
own work). py-spy reads another process's memory, so it needs root or ``ptrace`` rights.

With ``--variant LABEL ROOT [NAME=VALUE ...]`` (repeated) a run compares server setups: each class runs once on each
in turn, from its checkout and with its variables in the server's environment (as ``ATTENTION_TRAINING_NICE=0``), and
its row names the variant. Every row also gives the moves' times by page (``moves_by_page``).

The whole run's peak includes the first visit of every page (the process-wide caches filled once, on a fresh
server); the class's peak counts from its arrival. Prints one table row per reader count and writes ``--json``
(default ``runs/bench_load.json``) with ``engine.bench.machine.machine_info()`` and the load average before
and after each count.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from tools.bench_pages_browser import CONTROLS_JS, LAUNCH_ARGS, free_port, redraw_times, wait_idle
from ui.i18n import LANGUAGES
from ui.nav import PAGES

ROOT = Path(__file__).resolve().parent.parent
LANGS = tuple(LANGUAGES)
#: Essay pages a reader opens and switches between (url paths; Home is "").
ESSAY_PATHS = tuple(p.url_path for p in PAGES if p.group == "essay")
#: Seconds a single run may take before the reader gives up on it (a busy two-core machine is slow).
RUN_TIMEOUT_S = 180.0
#: Seconds between two samples of the server's resident memory.
SAMPLE_S = 0.2
_EARLY = ForwardMsg.ScriptFinishedStatus.Value("FINISHED_EARLY_FOR_RERUN")
_COMPILE_ERROR = ForwardMsg.ScriptFinishedStatus.Value("FINISHED_WITH_COMPILE_ERROR")


def say(line: str) -> None:
    print(f"  [{time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)


# --- one reader's websocket session ----------------------------------------------------------------------------------


@dataclass
class Control:
    """A widget of the page as the server described it: enough to move it one step as the browser would."""

    id: str
    kind: str  # "slider", "select_slider" or "number"
    fragment_id: str
    value: float  # the number, or the option's index for a select slider
    low: float
    high: float
    step: float
    options: tuple[str, ...] = ()
    url_key: str = ""


def _control(element, fragment_id: str) -> Control | None:
    """The movable control an element describes, or None (another element, a disabled or a range widget)."""
    kind = element.WhichOneof("type")
    if kind == "slider":
        s = element.slider
        values = list(s.value) if s.set_value else list(s.default)
        if s.disabled or len(values) != 1:
            return None
        if s.options:
            return Control(s.id, "select_slider", fragment_id, values[0], 0, len(s.options) - 1, 1,
                           tuple(s.options), s.query_param_key)
        return Control(s.id, "slider", fragment_id, values[0], s.min, s.max, s.step, url_key=s.query_param_key)
    if kind == "number_input":
        n = element.number_input
        if n.disabled or not (n.has_min and n.has_max):
            return None
        return Control(n.id, "number", fragment_id, n.value if n.set_value else n.default, n.min, n.max,
                       n.step or 1, url_key=n.query_param_key)
    return None


class Session:
    """One reader's websocket session, speaking Streamlit's protocol as the browser's client does.

    ``errors`` collects every exception element, failed run or protocol problem; ``session_id`` is the id of the
    server's session (the first one, kept to check that readers stay apart).
    """

    def __init__(self, base: str, name: str):
        self.base, self.name = base, name
        self.session_id: str | None = None
        self.errors: list[str] = []
        self.query_string = ""
        self.page_hashes: dict[str, str] = {}  # url path -> page script hash, from the navigation message
        self.page_hash = ""
        self.page_names: set[tuple[str, ...]] = set()  # the navigation's page titles of every run (translated)
        self.controls: dict[str, Control] = {}
        self.buttons: dict[str, str] = {}  # user key -> widget id
        self.progress: int | None = None  # the last progress bar's value (0-100)
        self.crossed_at: float | None = None  # when the page first said the val loss went below the bigram line
        self.reused = False  # the page said it took a model trained before (ui.lab.controls's reuse notice)
        self.set_values: dict[str, WidgetState] = {}  # widget id -> the state this reader set
        self._cached: dict[str, int] = {}  # message hash -> the run it was last seen in
        self._max_age = 2
        self._runs = 0
        self._finished = 0
        self._changed = asyncio.Condition()
        self._ws = None
        self._tasks: list[asyncio.Task] = []
        self._auto: dict[str, asyncio.Task] = {}

    async def open(self, path: str, query: str) -> float:
        """Connect (cookie, websocket) and run the page at ``path`` with ``query``; returns the run's seconds."""
        def cookie() -> str:
            with urllib.request.urlopen(f"{self.base}/_stcore/health", timeout=RUN_TIMEOUT_S) as r:
                header = next(v for k, v in r.headers.items() if k.lower() == "set-cookie" and "_streamlit_xsrf" in v)
            return header.split(";")[0].split("=", 1)[1]

        xsrf = await asyncio.to_thread(cookie)
        self._ws = await connect(self.base.replace("http://", "ws://") + "/_stcore/stream",
                                 subprotocols=["streamlit"], origin=self.base, max_size=None,
                                 additional_headers={"Cookie": f"_streamlit_xsrf={xsrf}"},
                                 open_timeout=RUN_TIMEOUT_S, ping_interval=None)  # no keepalive: a busy server is slow
        self._tasks.append(asyncio.create_task(self._receive()))
        self.query_string = query
        return await self.rerun(page_name=path)

    async def close(self) -> None:
        for task in [*self._auto.values(), *self._tasks]:
            task.cancel()
        if self._ws is not None:
            await self._ws.close()

    async def rerun(self, *, page_name: str = "", page_hash: str | None = None, fragment_id: str = "",
                    extra: WidgetState | None = None, auto: bool = False) -> float:
        """Send one ``rerun_script`` and wait for the end of the run it starts; returns its seconds."""
        msg = BackMsg()
        state = msg.rerun_script
        state.query_string = self.query_string
        state.page_name = page_name
        state.page_script_hash = self.page_hash if page_hash is None else page_hash
        state.fragment_id = fragment_id
        state.is_auto_rerun = auto
        for widget in self.set_values.values():
            state.widget_states.widgets.append(widget)
        if extra is not None:
            state.widget_states.widgets.append(extra)
        state.cached_message_hashes.extend(self._cached)
        async with self._changed:
            seen = self._finished
        start = time.perf_counter()
        await self._ws.send(msg.SerializeToString())
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: self._finished > seen), RUN_TIMEOUT_S)
        return time.perf_counter() - start

    async def move(self, rng: random.Random, jump_share: float = 0.0) -> tuple[float, str] | None:
        """Move one of the page's controls: by a step, or with probability ``jump_share`` to any value of its range;
        ``(seconds, control id)``, or None on a page without a control."""
        if not self.controls:
            return None
        control = rng.choice(sorted(self.controls.values(), key=lambda c: c.id))
        if rng.random() < jump_share:  # a click on the track, or a typed number: anywhere on the step grid
            value = control.low + control.step * rng.randint(0, int((control.high - control.low) / control.step))
        else:  # an arrow key: one step, turned back at the range's end
            up = rng.random() < 0.5
            value = control.value + (control.step if up else -control.step)
            if not control.low <= value <= control.high:
                value = control.value - (control.step if up else -control.step)
        value = min(max(value, control.low), control.high)
        state = WidgetState(id=control.id)
        if control.kind == "select_slider":
            state.string_array_value.data.append(control.options[round(value)])
        elif control.kind == "slider":
            state.double_array_value.data.append(value)
        else:
            state.double_value = value
        control.value = value
        self.set_values[control.id] = state
        return await self.rerun(fragment_id=control.fragment_id), control.id

    async def set_value(self, url_key: str, value: float) -> float:
        """Set the number input or slider bound to ``url_key`` to ``value`` (one rerun), once the page has drawn it
        enabled.

        The run that draws it may still be under way: after a training, the page's fragment sees the full bar and
        asks for a full run, which clears the controls and draws them again, enabled. A value sent for a control
        the server still has disabled would be dropped (Streamlit enforces ``disabled`` on the server).
        """
        def find() -> Control | None:
            return next((c for c in self.controls.values() if c.url_key == url_key and c.kind != "select_slider"),
                        None)

        deadline = time.monotonic() + RUN_TIMEOUT_S
        while find() is None and time.monotonic() < deadline and not self.errors:
            await asyncio.sleep(0.1)
        control = find()
        if control is None:
            raise LookupError(f"{self.name}: no control bound to {url_key!r}")
        state = WidgetState(id=control.id)
        if control.kind == "slider":
            state.double_array_value.data.append(value)
        else:
            state.double_value = value
        control.value = value
        self.set_values[control.id] = state
        return await self.rerun(fragment_id=control.fragment_id)

    async def switch(self, path: str) -> float:
        """Open another page of the app as the navigation does (its script hash, no widget states)."""
        self.set_values.clear()
        return await self.rerun(page_hash=self.page_hashes.get(path, ""), page_name=path)

    async def click(self, user_key: str) -> float:
        """Press the button whose key is ``user_key``, once the page has drawn it.

        The run before may still be drawing: :meth:`rerun` returns when any run ends, and a polling fragment's run
        can end first, while the page's full run has cleared the buttons and not yet sent this one again.
        """
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while user_key not in self.buttons and time.monotonic() < deadline and not self.errors:
            await asyncio.sleep(0.1)
        widget_id = self.buttons.get(user_key)
        if widget_id is None:
            raise LookupError(f"{self.name}: no button {user_key!r} on the page")
        return await self.rerun(extra=WidgetState(id=widget_id, trigger_value=True))

    async def _receive(self) -> None:
        try:
            async for data in self._ws:
                msg = ForwardMsg()
                msg.ParseFromString(data)
                await self._handle(msg)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # a dropped connection ends this reader; it is reported, not raised
            self.errors.append(f"connection: {error!r}"[:300])
            async with self._changed:
                self._finished += 1
                self._changed.notify_all()

    async def _handle(self, msg: ForwardMsg) -> None:
        if msg.hash and msg.metadata.cacheable:
            self._cached[msg.hash] = self._runs
        elif msg.ref_hash:
            self._cached[msg.ref_hash] = self._runs
        kind = msg.WhichOneof("type")
        if kind == "new_session":
            self.session_id = self.session_id or msg.new_session.initialize.session_id
            self.page_hash = msg.new_session.page_script_hash
            self._max_age = msg.new_session.config.max_cached_message_age or self._max_age
            if not msg.metadata.run.fragment_ids:  # a full run: the page is drawn anew
                self.controls.clear()
                self.buttons.clear()
                self._stop_auto(self._auto)  # it registers its polling fragments again
        elif kind == "navigation":
            self.page_hash = msg.navigation.page_script_hash or self.page_hash
            self.page_hashes = {p.url_pathname: p.page_script_hash for p in msg.navigation.app_pages}
            self.page_names.add(tuple(p.page_name for p in msg.navigation.app_pages))
        elif kind == "page_info_changed":
            self.query_string = msg.page_info_changed.query_string
        elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
            element = msg.delta.new_element
            which = element.WhichOneof("type")
            if which == "exception":
                self.errors.append(f"exception: {element.exception.type}: {element.exception.message}"[:300])
            elif which == "progress":
                self.progress = element.progress.value
            elif which == "alert" and "trending_down" in element.alert.icon:  # ui.lab.train's crossing notice
                self.crossed_at = self.crossed_at or time.monotonic()
            elif which == "alert" and "recycling" in element.alert.icon:
                self.reused = True
            elif which == "button" and "-" in element.button.id:
                self.buttons[element.button.id.rsplit("-", 1)[1]] = element.button.id
            control = _control(element, msg.delta.fragment_id)
            if control is not None:
                if control.id in self.set_values and control.id in self.controls:
                    control.value = self.controls[control.id].value  # the server re-sends the default, not ours
                self.controls[control.id] = control
        elif kind == "auto_rerun":
            self._start_auto(msg.auto_rerun.fragment_id, msg.auto_rerun.interval)
        elif kind == "stop_auto_rerun":
            self._stop_auto(msg.stop_auto_rerun.fragment_ids)
        elif kind == "script_finished":
            if msg.script_finished == _COMPILE_ERROR:
                self.errors.append("the script did not compile")
            if msg.script_finished != _EARLY:
                self._runs += 1
                self._cached = {h: run for h, run in self._cached.items() if self._runs - run <= self._max_age}
                async with self._changed:
                    self._finished += 1
                    self._changed.notify_all()

    def _start_auto(self, fragment_id: str, interval: float) -> None:
        """Rerun ``fragment_id`` every ``interval`` s, each time after the previous rerun ended."""
        self._stop_auto([fragment_id])

        async def poll():
            while self._ws is not None and self._ws.state is State.OPEN:
                await asyncio.sleep(max(interval, 0.1))
                with contextlib.suppress(ConnectionClosed):  # the reader left; _receive reports a dropped socket
                    await self.rerun(fragment_id=fragment_id, auto=True)

        self._auto[fragment_id] = asyncio.create_task(poll())

    def _stop_auto(self, fragment_ids) -> None:
        for fragment_id in list(fragment_ids):
            task = self._auto.pop(fragment_id, None)
            if task is not None:
                task.cancel()


# --- what the readers do ---------------------------------------------------------------------------------------------


@dataclass
class ReaderLog:
    """What one reader did and saw."""

    name: str
    role: str
    lang: str
    session_id: str | None = None
    opens_s: list[float] = field(default_factory=list)
    moves_s: list[float] = field(default_factory=list)
    moves_by_page: dict[str, list[float]] = field(default_factory=dict)  # the same times, by the page's path
    switches_s: list[float] = field(default_factory=list)
    trainings_s: list[float] = field(default_factory=list)
    crossings_s: list[float | None] = field(default_factory=list)  # click to the bigram notice, per training
    unfinished: int = 0  # trainings still queued or running when the class ended
    unfinished_at: list[int | None] = field(default_factory=list)  # their bar's last % (None: never drawn running)
    errors: list[str] = field(default_factory=list)
    page_names: set[tuple[str, ...]] = field(default_factory=set)  # the page titles the server sent this reader


async def essay_reader(base: str, log: ReaderLog, rng: random.Random, until: float, think_s: float,
                       switch_every: int, jump_share: float) -> None:
    """Open an essay page, then move its controls and switch pages until ``until`` (monotonic seconds)."""
    session = Session(base, log.name)
    path = rng.choice([p for p in ESSAY_PATHS if p])  # Home has no control: a reader starts on a chapter page
    try:
        log.opens_s.append(await session.open(path, f"lang={log.lang}"))
        log.session_id = session.session_id
        moves = 0
        while time.monotonic() < until and not session.errors:
            await asyncio.sleep(think_s * rng.uniform(0.5, 1.5))
            if time.monotonic() >= until:
                break
            if moves and moves % switch_every == 0 or not session.controls:
                path = rng.choice([p for p in ESSAY_PATHS if p != path])
                log.switches_s.append(await session.switch(path))
                moves += 1
                continue
            moved = await session.move(rng, jump_share)
            if moved is not None:
                log.moves_s.append(moved[0])
                log.moves_by_page.setdefault(path, []).append(moved[0])
            moves += 1
    except Exception as error:  # a reader that fails is reported with the others, never ends the benchmark
        log.errors.append(f"{type(error).__name__}: {error}"[:300])
    finally:
        log.errors += session.errors
        log.page_names = session.page_names
        await session.close()


async def trainer(base: str, log: ReaderLog, seed: int, until: float, default_seed: int) -> None:
    """Open the Lab with ``seed``, press Train, follow the progress to the end; again with the next seed."""
    session = Session(base, log.name)
    try:
        seed_query = "" if seed == default_seed else f"&lab_seed={seed}"  # the default: the page's own link
        log.opens_s.append(await session.open("lab", f"lang={log.lang}{seed_query}"))
        log.session_id = session.session_id
        while time.monotonic() < until and not session.errors:
            session.progress = session.crossed_at = None
            session.reused = False
            start = time.monotonic()
            await session.click("lab_train")
            # the run after the click may still draw the previous training's full bar and its bigram notice: the new
            # one counts from its first bar below 100 on
            running = False
            while not (running and session.progress >= 100) and not session.errors:
                if time.monotonic() > until + RUN_TIMEOUT_S:  # queued behind the other, or slow: not an error
                    log.unfinished += 1
                    log.unfinished_at.append(session.progress if running else None)
                    return
                if not running and session.progress is not None and session.progress < 100:
                    running, session.crossed_at = True, None
                if not running and session.reused:  # the model of a seed trained before: the new seed did not take
                    raise RuntimeError(f"Train took the model of a training done before, for seed {seed}")
                await asyncio.sleep(0.5)
            log.trainings_s.append(time.monotonic() - start)
            log.crossings_s.append(None if session.crossed_at is None else session.crossed_at - start)
            say(f"{log.name}: trained seed {seed} in {log.trainings_s[-1]:.0f} s")
            seed += 1
            await session.set_value("lab_seed", seed)
    except Exception as error:
        log.errors.append(f"{type(error).__name__}: {error}"[:300])
    finally:
        log.errors += session.errors
        log.page_names = session.page_names
        await session.close()


def browser_reader(base: str, until: float, out: dict, stop: threading.Event) -> None:
    """One Chromium reader (a thread): every control of one essay page after another, until ``until``."""
    from playwright.sync_api import sync_playwright

    times, errors = [], []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=LAUNCH_ARGS)
            page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
            paths = [p for p in ESSAY_PATHS if p]
            i = 0
            while time.monotonic() < until and not stop.is_set():
                page.goto(f"{base}/{paths[i % len(paths)]}?lang=en")
                wait_idle(page)
                for control in page.evaluate(CONTROLS_JS):
                    if time.monotonic() >= until or stop.is_set():
                        break
                    try:
                        moved, _chart = redraw_times(page, control, 2)
                        times += [t / 1000 for t in moved]
                    except Exception as error:  # one control's failure is reported, the reader goes on
                        errors.append(f"/{paths[i % len(paths)]} {control.get('key')}: {error}"[:300])
                i += 1
            browser.close()
    except Exception as error:
        errors.append(f"{type(error).__name__}: {error}"[:300])
    out.update(moves_s=times, errors=errors)


# --- the server and its memory ---------------------------------------------------------------------------------------


class RSSSampler:
    """The resident memory (MB) of one process, sampled every :data:`SAMPLE_S` seconds in a thread."""

    def __init__(self, pid: int):
        self.pid, self.samples = pid, []  # (seconds since start, MB)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._start = time.monotonic()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with open(f"/proc/{self.pid}/status") as f:
                    kb = next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))
                self.samples.append((time.monotonic() - self._start, kb / 1024))
            except (OSError, StopIteration):
                pass
            self._stop.wait(SAMPLE_S)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def mark(self) -> float:
        return time.monotonic() - self._start

    def cpu_s(self) -> float:
        """CPU seconds (user + system) the process has used so far, 0 when it cannot be read."""
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime in clock ticks
        except (OSError, IndexError, ValueError):
            return 0.0

    def summary(self, since: float) -> dict:
        """The peak of the whole run (the first visits of every page included), the class's peak (from ``since``,
        its arrival), the value just before it, and per minute of the class the peak and last value, MB."""
        work = [(t - since, mb) for t, mb in self.samples if t >= since]
        minutes: dict[int, list[float]] = {}
        for t, mb in work:
            minutes.setdefault(int(t // 60), []).append(mb)
        return {"peak_mb": round(max((mb for _t, mb in self.samples), default=0.0), 1),
                "class_peak_mb": round(max((mb for _t, mb in work), default=0.0), 1),
                "before_class_mb": round(next((mb for t, mb in reversed(self.samples) if t < since), 0.0), 1),
                "per_minute_peak_mb": [round(max(v), 1) for _m, v in sorted(minutes.items())],
                "per_minute_last_mb": [round(v[-1], 1) for _m, v in sorted(minutes.items())]}


def memory_split(pid: int) -> dict:
    """The process's resident memory by kind (MB): anonymous (heap, tensors, Python objects) and file-backed
    (mapped libraries), from ``/proc/<pid>/status``; {} when it cannot be read."""
    try:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f if line.startswith(("RssAnon", "RssFile", "Threads")))
    except OSError:
        return {}
    return {"rss_anon_mb": round(int(fields["RssAnon"].split()[0]) / 1024, 1),
            "rss_file_mb": round(int(fields["RssFile"].split()[0]) / 1024, 1),
            "threads": int(fields["Threads"])}


def cache_sizes(base: str) -> dict[str, dict[str, int]]:
    """What Streamlit's caches hold, from its own ``/_stcore/metrics`` (OpenMetrics text): the bytes of every
    ``st.cache_data`` and ``st.cache_resource`` cache and of the session states, measured by walking their objects
    (``server.enableExpensiveMemoryStats``, which the benchmark's server turns on: it costs only when the endpoint
    is asked, once per class). {} when the endpoint does not answer."""
    try:
        with urllib.request.urlopen(f"{base}/_stcore/metrics?families=cache_memory_bytes", timeout=30) as r:
            text = r.read().decode("utf-8", "replace")
    except OSError:
        return {}
    out: dict[str, dict[str, int]] = {}
    for line in text.splitlines():
        if not line.startswith("cache_memory_bytes{"):
            continue
        labels, value = line[len("cache_memory_bytes{"):].rsplit("}", 1)
        parts = dict(item.split("=", 1) for item in labels.split(","))
        kind, name = parts.get("cache_type", "").strip('"'), parts.get("cache", "").strip('"')
        out.setdefault(kind, {})[name or "(all sessions)"] = int(float(value))
    return out


#: Run in a child interpreter: the machine, its matmul ceiling, the lines every benchmark prints, the Lab's seed.
FACTS = ("import json\n"
         "from engine.bench import machine\n"
         "from engine.lab import settings\n"
         "info, ceiling = machine.machine_info(), machine.matmul_ceiling()\n"
         "print(json.dumps({'machine': info, 'ceiling': ceiling, 'header': machine.header_lines(info, ceiling),\n"
         "                  'default_seed': settings.DEFAULT_SEED}))")


def machine_facts() -> dict:
    """``engine.bench.machine``'s machine record (``machine``), fp32 matmul ceiling in GFLOP/s (``ceiling``) and
    header lines (``header``), and the Lab's default seed (``default_seed``), from a child interpreter: this
    process never imports PyTorch, so no page of its library stays mapped here, and the server's reads of it are
    charged to the server (to its memory cgroup under ``--memory-limit-mb``).

    Raises:
        subprocess.CalledProcessError: if the child fails (its error output is in the exception).
    """
    done = subprocess.run([sys.executable, "-c", FACTS], cwd=ROOT, capture_output=True, text=True, check=True,
                          timeout=RUN_TIMEOUT_S, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return json.loads(done.stdout.strip().splitlines()[-1])


#: One core of other work: an fp32 matmul in a loop on one thread, as another program busy with numbers.
BUSY_LOOP = ("import torch; torch.set_num_threads(1); a = torch.randn(512, 512); b = torch.empty(512, 512)\n"
             "while True: torch.mm(a, a, out=b)")


@contextlib.contextmanager
def busy_cores(count: int):
    """``count`` processes that each keep one core busy while the block runs (none for 0); stopped after it."""
    procs = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for _ in range(count)]
    try:
        yield procs
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(timeout=30)


class MemoryLimit:
    """A memory cgroup with a hard limit, for the server alone, as a container's limit holds an app.

    cgroup v2 (``memory.max`` under ``/sys/fs/cgroup``) where its memory controller is enabled, else v1
    (``memory.limit_in_bytes`` under ``/sys/fs/cgroup/memory``); creating one needs root or a delegated
    hierarchy. The kernel charges the group for the pages its processes touch, the library files mapped from
    disk included, and reclaims those before it kills a process for want of memory.

    Raises:
        RuntimeError: if no writable memory cgroup hierarchy exists (the message says which paths were tried).
    """

    V2, V1 = Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/memory")

    def __init__(self, limit_mb: int, name: str):
        self.limit_mb = limit_mb
        controllers = self.V2 / "cgroup.controllers"
        if controllers.exists() and "memory" in controllers.read_text().split():
            self.version, self.path = 2, self.V2 / name
            limit_file = "memory.max"
        elif (self.V1 / "memory.limit_in_bytes").exists():
            self.version, self.path = 1, self.V1 / name
            limit_file = "memory.limit_in_bytes"
        else:
            raise RuntimeError(f"no memory cgroup hierarchy at {self.V2} or {self.V1}")
        try:
            self.path.mkdir(exist_ok=True)
            (self.path / limit_file).write_text(str(limit_mb * 2**20))
            if self.version == 1:  # no swap either: the limit is the memory the app may hold
                with contextlib.suppress(OSError):
                    (self.path / "memory.memsw.limit_in_bytes").write_text(str(limit_mb * 2**20))
        except OSError as err:
            raise RuntimeError(f"cannot set a memory limit in {self.path}: {err}") from err

    def charge_files_to_group(self) -> None:
        """Empty the kernel's page cache (root only), so that the library files the server reads next are charged
        to its group, as in a container that has just started: a page already cached stays charged to the group
        that read it first. Without root the cache stays as it is and the charged peak misses those pages."""
        with contextlib.suppress(OSError):
            os.sync()
            Path("/proc/sys/vm/drop_caches").write_text("3")

    def enter(self) -> None:
        """Move the calling process into the group (run in the server's child before it execs)."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def summary(self) -> dict:
        """The limit, the group's charged peak (MB, the page cache it touched included), how often it hit the
        limit and how many processes the kernel killed in it."""
        def read(name: str) -> str:
            return (self.path / name).read_text()

        if self.version == 2:
            events = dict(line.split() for line in read("memory.events").splitlines())
            peak = int(read("memory.peak")) if (self.path / "memory.peak").exists() else None
            hits, kills = int(events.get("max", 0)), int(events.get("oom_kill", 0))
        else:
            control = dict(line.split() for line in read("memory.oom_control").splitlines())
            peak, hits, kills = int(read("memory.max_usage_in_bytes")), int(read("memory.failcnt")), \
                int(control.get("oom_kill", 0))
        return {"limit_mb": self.limit_mb, "cgroup": f"v{self.version}",
                "charged_peak_mb": None if peak is None else round(peak / 2**20, 1), "limit_hits": hits,
                "oom_kills": kills}

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            self.path.rmdir()


def start_server(app_root: Path, port: int, log: Path, limit: MemoryLimit | None = None,
                 env: dict[str, str] | None = None) -> subprocess.Popen:
    """``streamlit run serve.py`` in ``app_root`` on ``port``, its output in ``log``, inside ``limit``'s memory
    cgroup when one is given, with ``env`` added to this process's environment; returns once it is healthy."""
    entry = "serve.py" if (app_root / "serve.py").exists() else "app.py"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", entry, "--server.port", str(port), "--server.headless",
             "true", "--server.address", "127.0.0.1", "--server.enableExpensiveMemoryStats", "true"],
            cwd=app_root, stdout=out, stderr=subprocess.STDOUT, preexec_fn=None if limit is None else limit.enter,
            env={**os.environ, **(env or {}), "PYTHONPATH": str(app_root), "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited: {log.read_text(errors='replace')[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2):
                return proc
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError(f"the server did not become healthy within {RUN_TIMEOUT_S:.0f} s")


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=30)


# --- where the interpreter lock goes ---------------------------------------------------------------------------------

#: Samples per second of ``--profile``'s py-spy (``--gil``: only the thread that holds the interpreter lock).
PROFILE_RATE_HZ = 50
#: What a sample of a page's run is spent in, by the folders of its frames (see :func:`profile_area`).
SCRIPT_AREAS = (
    ("charts (Plotly: building figures, writing their JSON)", ("plotly/", "_plotly_utils/")),
    ("tables and data (pandas, Arrow)", ("pandas/", "pyarrow/", "jinja2/", "narwhals/")),
    ("numbers (Babel)", ("babel/",)),
    ("tensor computations (PyTorch)", ("torch/",)),
    ("messages (protobuf)", ("google/protobuf/",)),
    ("Streamlit's elements and session state", ("streamlit/",)),
    ("the engine's Python code", ("engine/",)),
)
#: Where a run's sample goes when none of its frames is in :data:`SCRIPT_AREAS` (py-spy names a page's own
#: module, ``views/``, by its bare file name, since Streamlit puts its folder on ``sys.path``).
PAGE_CODE = "the pages' own Python code (views, ui)"
#: A frame of the script thread: everything under it is a page's run.
SCRIPT_FRAME = "exec_func_with_error_handling"


def _frame_path(frame: str) -> str:
    """``ui/numbers.py`` of py-spy's ``num (ui/numbers.py:94)``, with a leading ``/`` to match folder names."""
    inner = frame[frame.rfind("(") + 1:]
    return "/" + inner.rpartition(":")[0]


def profile_area(frames: list[str]) -> str:
    """The area a py-spy sample belongs to, from its frames (outermost first, ``func (path:line)``, the paths as
    py-spy shortens them): a page's run by :data:`SCRIPT_AREAS` from the innermost frame outwards (frames of
    Python's own library are skipped, so a ``copy.deepcopy`` Plotly calls counts as Plotly's; ``ui/`` stops the
    search as the pages' code; the script runner's frames around the run are not searched), a module imported,
    the Lab's training thread, or the server's own work."""
    if any("_find_and_load" in f for f in frames):
        return "importing modules (a first visit)"
    if not any(SCRIPT_FRAME in f for f in frames):
        return "the Lab's training (its Python side)" if any("/engine/lab/" in _frame_path(f) for f in frames) \
            else "the server (websocket, sessions, sending messages)"
    inside = max(i for i, f in enumerate(frames) if SCRIPT_FRAME in f)  # the run's own frames follow this one
    for frame in reversed(frames[inside + 1:]):
        path = _frame_path(frame)
        for area, markers in SCRIPT_AREAS:
            if any("/" + m in path for m in markers):
                return area
        if "/ui/" in path or "/views/" in path:
            return PAGE_CODE
    return PAGE_CODE


def profile_summary(raw: str, wall_s: float, rate_hz: float = PROFILE_RATE_HZ) -> dict:
    """py-spy's raw output (``frame;frame;… count`` lines) summed by :func:`profile_area`: the seconds the
    interpreter lock was held, that share of the class's ``wall_s``, and each area's share of the held time."""
    by_area: dict[str, int] = {}
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        area = profile_area(stack.split(";"))
        by_area[area] = by_area.get(area, 0) + int(count)
    samples = sum(by_area.values())
    return {"rate_hz": rate_hz, "samples": samples, "held_s": round(samples / rate_hz, 1),
            "held_share": round(samples / rate_hz / wall_s, 3) if wall_s > 0 else None,
            "by_area": {a: round(n / samples, 3) for a, n in sorted(by_area.items(), key=lambda kv: -kv[1])}
            if samples else {}}


class GilProfiler:
    """py-spy on the server while a class works (``--profile``): samples of the thread holding the interpreter
    lock, without pausing the server (``--nonblocking``); :meth:`stop` returns :func:`profile_summary`'s dict."""

    def __init__(self, pid: int, out: Path):
        exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        self.out, self.start = out, time.monotonic()
        self.proc = subprocess.Popen([exe, "record", "--pid", str(pid), "--gil", "--nonblocking", "--rate",
                                      str(PROFILE_RATE_HZ), "--format", "raw", "--output", str(out)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def stop(self) -> dict:
        wall = time.monotonic() - self.start
        self.proc.send_signal(2)  # py-spy writes its samples on SIGINT
        _, err = self.proc.communicate(timeout=120)
        if not self.out.exists():
            return {"error": err.decode(errors="replace")[-500:]}
        return profile_summary(self.out.read_text(errors="replace"), wall)


# --- one class, and the command --------------------------------------------------------------------------------------


def quantile(values: list[float], q: float) -> float | None:
    """The ``q`` quantile (0-1) of ``values``, by linear interpolation between order statistics; None if empty."""
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


async def warm(base: str) -> None:
    """Open every page once, one after another (the server has been up before the class arrives)."""
    session = Session(base, "warm-up")
    try:
        await session.open("", "lang=en")
        for info in PAGES:
            await session.switch(info.url_path)
    finally:
        await session.close()


async def run_class(base: str, readers: int, trainers: int, minutes: float, think_s: float, switch_every: int,
                    arrival_s: float, seed: int, jump_share: float = 0.5, same_settings: bool = False,
                    default_seed: int = 1337) -> list[ReaderLog]:
    """``readers`` readers (of them ``trainers`` in the Lab) arriving over ``arrival_s`` s, for ``minutes``; the
    trainers with seeds of their own, or all with the page's default seed ``default_seed`` (``same_settings``)."""
    rng = random.Random(seed)
    trainers = min(trainers, readers)
    logs = [ReaderLog(f"reader-{i:02d}", "trainer" if i < trainers else "essay", LANGS[i % len(LANGS)])
            for i in range(readers)]
    until = time.monotonic() + arrival_s + minutes * 60

    async def arrive(i: int, log: ReaderLog) -> None:
        await asyncio.sleep(arrival_s * i / max(1, readers))
        if log.role == "trainer":
            await trainer(base, log, seed=default_seed if same_settings else seed * 100 + i * 10, until=until,
                          default_seed=default_seed)
        else:
            await essay_reader(base, log, random.Random(rng.random()), until, think_s, switch_every, jump_share)

    await asyncio.gather(*(arrive(i, log) for i, log in enumerate(logs)))
    return logs


def summarise(count: int, logs: list[ReaderLog], rss: dict, browser: dict | None, load: dict, wall_s: float) -> dict:
    moves = [t for log in logs for t in log.moves_s]
    switches = [t for log in logs for t in log.switches_s]
    trainings = [t for log in logs for t in log.trainings_s]

    def rounded(v):
        return None if v is None else round(v, 3)

    row = {"readers": count, "wall_s": round(wall_s, 1), **rss, "load_average": load,
           "moves": len(moves), "move_p50_s": rounded(quantile(moves, 0.5)),
           "move_p95_s": rounded(quantile(moves, 0.95)),
           "move_max_s": rounded(max(moves, default=None) if moves else None),
           "moves_over_1s": sum(t > 1 for t in moves), "moves_over_2s": sum(t > 2 for t in moves),
           "switches": len(switches), "switch_p50_s": rounded(quantile(switches, 0.5)),
           "switch_p95_s": rounded(quantile(switches, 0.95)), "trainings_s": [round(t, 1) for t in trainings],
           "trainings_unfinished": sum(log.unfinished for log in logs),
           "trainings_unfinished_at": [p for log in logs for p in log.unfinished_at],
           "bigram_s": [None if t is None else round(t, 1) for log in logs for t in log.crossings_s],
           "sessions": len({log.session_id for log in logs if log.session_id}),
           "errors": [f"{log.name}: {e}" for log in logs for e in log.errors],
           "readers_log": [{"name": log.name, "role": log.role, "lang": log.lang, "session_id": log.session_id,
                            "moves": len(log.moves_s), "page_names": sorted(log.page_names),
                            "errors": log.errors} for log in logs]}
    by_page: dict[str, list[float]] = {}
    for log in logs:
        for path, times in log.moves_by_page.items():
            by_page.setdefault(path, []).extend(times)
    # what a move costs on each page, as the class saw it (the page's own work and its wait for the others)
    row["moves_by_page"] = {path: {"moves": len(times), "p50_s": rounded(quantile(times, 0.5)),
                                   "p95_s": rounded(quantile(times, 0.95)), "over_1s": sum(t > 1 for t in times)}
                            for path, times in sorted(by_page.items())}
    if browser is not None:
        row["browser"] = {"moves": len(browser.get("moves_s", [])),
                          "move_p50_s": rounded(quantile(browser.get("moves_s", []), 0.5)),
                          "move_p95_s": rounded(quantile(browser.get("moves_s", []), 0.95)),
                          "errors": browser.get("errors", [])}
    return row


def measure(app_root: Path, count: int, args, same_settings: bool = False, progress=say,
            variant: Variant | None = None) -> dict:
    """One class of ``count`` readers on a fresh server (its trainers with ``same_settings`` or seeds of their
    own), of ``variant``'s checkout and environment when one is given; the summary row."""
    if variant is not None:
        app_root = variant.root
    # the machine's speed just before this class: a run of several classes compares them, and a shared machine's
    # speed drifts over half an hour
    ceiling = round(machine_facts()["ceiling"], 1)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    tag = "" if variant is None else f"_{variant.label}"
    log_path = ROOT / "runs" / f"bench_load_server_{count}_{'same' if same_settings else 'own'}{tag}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    limit = None if args.memory_limit_mb is None else MemoryLimit(args.memory_limit_mb, f"bench_load_{port}")
    if limit is not None:
        limit.charge_files_to_group()
    server = start_server(app_root, port, log_path, limit, None if variant is None else variant.env)
    try:
        with RSSSampler(server.pid) as sampler:
            progress(f"{count} readers{'' if variant is None else ' (' + variant.label + ')'}: server up, opening "
                     "every page once")
            asyncio.run(warm(base))
            load_before = [round(x, 2) for x in os.getloadavg()]
            since, start, cpu_start = sampler.mark(), time.monotonic(), sampler.cpu_s()
            profiler = None if not args.profile else GilProfiler(
                server.pid, log_path.with_name(log_path.stem.replace("server", "gil") + ".txt"))
            progress(f"{count} readers arriving over {args.arrival_s:.0f} s, then {args.minutes} min "
                     f"(load {load_before[0]})")
            browser, stop, thread = None, threading.Event(), None
            if args.browser:
                browser = {}
                thread = threading.Thread(target=browser_reader, daemon=True,
                                          args=(base, time.monotonic() + args.arrival_s + args.minutes * 60,
                                                browser, stop))
                thread.start()
            try:
                logs = asyncio.run(run_class(base, count, args.trainers, args.minutes, args.think_s,
                                             args.switch_every, args.arrival_s, args.seed, args.jump_share,
                                             same_settings, args.default_seed))
            finally:
                stop.set()
                if thread is not None:
                    thread.join(timeout=RUN_TIMEOUT_S)
            wall = time.monotonic() - start
            gil = None if profiler is None else profiler.stop()
            load = {"before": load_before, "after": [round(x, 2) for x in os.getloadavg()]}
            server_cpu_s = sampler.cpu_s() - cpu_start
            exit_code = server.poll()  # a server killed for want of memory has no /proc entry left to read
            split, caches = ({}, {}) if exit_code is not None else (memory_split(server.pid), cache_sizes(base))
        row = summarise(count, logs, sampler.summary(since), browser, load, wall)
        if exit_code is not None:
            row["errors"].append(f"the server exited during the class with status {exit_code}")
        row["same_settings"] = same_settings
        row["matmul_ceiling_gflops"] = ceiling
        if variant is not None:
            row["variant"] = {"label": variant.label, "app_root": variant.root.name, "env": variant.env}
        row["server_cpu_s"] = round(server_cpu_s, 1)  # of the wall time: the share of a core the server got
        row["end_memory"] = split  # where the resident memory is when the class ends
        row["end_caches"] = caches
        if limit is not None:
            row["memory_limit"] = limit.summary()
        if gil is not None:
            row["gil"] = gil
        return row
    finally:
        stop_server(server)
        if limit is not None:
            limit.remove()


@dataclass(frozen=True)
class Variant:
    """One server setup a run compares with the others: a checkout and environment variables of its own."""

    label: str
    root: Path
    env: dict[str, str]


def parse_variant(words: list[str]) -> Variant:
    """``LABEL ROOT [NAME=VALUE ...]`` of ``--variant``; ValueError with what is wrong."""
    if len(words) < 2:
        raise ValueError("--variant takes a label, a checkout and any NAME=VALUE for the server's environment")
    label, root, *pairs = words
    if not label.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"a variant's label is letters, digits, - and _: {label!r}")
    if not (Path(root) / "app.py").exists():
        raise ValueError(f"no app.py in the variant's checkout {root!r}")
    env = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.isidentifier():
            raise ValueError(f"a variant's environment variable is NAME=VALUE: {pair!r}")
        env[name] = value
    return Variant(label, Path(root).resolve(), env)


def print_table(rows: list[dict]) -> None:
    print(f"{'readers':>7} {'peak MB':>8} {'class MB':>8} {'per-minute peak MB':<36} {'moves':>6} {'p50 s':>6} "
          f"{'p95 s':>6} "
          f"{'>1 s':>5} {'switch p95':>10} {'trainings s':<16} {'load':>11} errors")
    for r in rows:
        if "variant" in r:
            v = r["variant"]
            print(f"variant {v['label']}: {v['app_root']} " + " ".join(f"{k}={x}" for k, x in v["env"].items()))
        minutes = " ".join(f"{mb:.0f}" for mb in r["per_minute_peak_mb"])
        load = f"{r['load_average']['before'][0]}-{r['load_average']['after'][0]}"
        trainings = " ".join(f"{t:.0f}" for t in r["trainings_s"]) or "-"
        print(f"{r['readers']:>7} {r['peak_mb']:>8.0f} {r['class_peak_mb']:>8.0f} {minutes:<36} {r['moves']:>6} "
              f"{r['move_p50_s'] or 0:>6.2f} "
              f"{r['move_p95_s'] or 0:>6.2f} {r['moves_over_1s']:>5} {r['switch_p95_s'] or 0:>10.2f} "
              f"{trainings:<16} {load:>11} {len(r['errors'])}")
        data = r.get("end_caches", {}).get("st_cache_data", {})
        resource = r.get("end_caches", {}).get("st_cache_resource", {})
        split = r.get("end_memory", {})
        if split:
            print(f"{'':>7} at the end: anonymous {split['rss_anon_mb']:.0f} MB, "
                  f"file-backed {split['rss_file_mb']:.0f} MB, {split['threads']} threads; "
                  f"st.cache_data {sum(data.values()) / 2**20:.1f} MB in {len(data)} "
                  f"caches; st.cache_resource {sum(resource.values()) / 2**20:.1f} MB in {len(resource)} caches")
        if "memory_limit" in r:
            m = r["memory_limit"]
            print(f"{'':>7} under a {m['limit_mb']} MB limit (cgroup {m['cgroup']}): "
                  f"charged peak {m['charged_peak_mb']} MB, the limit hit {m['limit_hits']} times, "
                  f"{m['oom_kills']} processes killed")
        if r.get("gil", {}).get("by_area"):
            g = r["gil"]
            print(f"{'':>7} interpreter lock held {g['held_share']:.0%} of the class: "
                  + ", ".join(f"{a} {share:.0%}" for a, share in g["by_area"].items()))
        if r.get("moves_by_page"):
            print(f"{'':>7} moves by page (p50 / p95 s): " + ", ".join(
                f"{path or 'home'} {m['p50_s']} / {m['p95_s']}" for path, m in r["moves_by_page"].items()))
        if "browser" in r:
            b = r["browser"]
            print(f"{'':>7} Chromium reader: {b['moves']} moves, p50 {b['move_p50_s']} s, p95 {b['move_p95_s']} s, "
                  f"{len(b['errors'])} errors")
    for r in rows:
        for error in r["errors"][:10]:
            print(f"  {r['readers']} readers: {error}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.bench load", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--readers", type=int, nargs="+", default=[10, 20, 30], help="reader counts, one class each")
    parser.add_argument("--minutes", type=float, default=2.0, help="how long each class works after arriving")
    parser.add_argument("--trainers", type=int, default=2, help="readers of each class training in the Lab")
    parser.add_argument("--settings", nargs="+", choices=("own", "same"), default=["own"],
                        help="trainers with seeds of their own, or all with the page's defaults (they follow one "
                             "training); both: one class of each")
    parser.add_argument("--browser", action="store_true", help="one Chromium reader besides (needs chromium)")
    parser.add_argument("--think-s", type=float, default=4.0, help="a reader's mean pause between two moves (s)")
    parser.add_argument("--jump-share", type=float, default=0.5,
                        help="share of moves to any value of the control's range (the others are one step)")
    parser.add_argument("--switch-every", type=int, default=8, help="a page switch every this many moves")
    parser.add_argument("--arrival-s", type=float, default=20.0, help="the readers arrive over this many seconds")
    parser.add_argument("--seed", type=int, default=1, help="seed of the readers' choices")
    parser.add_argument("--app-root", default=str(ROOT), help="the checkout whose app is measured")
    parser.add_argument("--variant", nargs="+", action="append", metavar="WORD",
                        help="LABEL ROOT [NAME=VALUE ...]: compare server setups in one run (repeatable): each class "
                             "runs once on each, in turn, from the checkout ROOT with NAME=VALUE in the server's "
                             "environment; replaces --app-root")
    parser.add_argument("--busy-cores", type=int, default=0,
                        help="cores kept busy by other work during the run (a matmul loop each), as on a shared "
                             "machine")
    parser.add_argument("--memory-limit-mb", type=int, default=None,
                        help="run the server in a memory cgroup with this hard limit, as a container runs it "
                             "(needs root or a delegated cgroup)")
    parser.add_argument("--profile", action="store_true",
                        help="sample the server with py-spy while each class works: where the interpreter lock goes")
    parser.add_argument("--json", default="runs/bench_load.json", help="where to write the results")
    args = parser.parse_args(argv)
    if not 0 <= args.busy_cores <= (os.cpu_count() or 1):
        parser.error("--busy-cores counts cores of this machine, from 0 to its number of cores")
    if args.memory_limit_mb is not None and args.memory_limit_mb < 100:
        parser.error("--memory-limit-mb is in MB; the server alone needs a few hundred")
    if min(args.readers) < 1 or args.minutes <= 0 or args.think_s <= 0 or args.switch_every < 1:
        parser.error("reader counts, minutes, think time and switch interval must be positive")
    if not 0 <= args.jump_share <= 1:
        parser.error("--jump-share is a share, from 0 to 1")
    try:
        variants = [parse_variant(words) for words in args.variant or []]
    except ValueError as error:
        parser.error(str(error))
    if len({v.label for v in variants}) < len(variants):
        parser.error("each --variant needs a label of its own")
    with busy_cores(args.busy_cores):
        time.sleep(2 if args.busy_cores else 0)  # the other work under way before the ceiling is measured
        facts = machine_facts()
        info, args.default_seed = facts["machine"], facts["default_seed"]
        for line in facts["header"]:
            print(line, flush=True)
        # the checkout by its folder's name: a results file may be shipped, and holds no machine's path
        result = {"machine": info, "app_root": Path(args.app_root).resolve().name if not variants else None,
                  "minutes": args.minutes,
                  "trainers": args.trainers, "think_s": args.think_s,
                  "jump_share": args.jump_share, "switch_every": args.switch_every, "arrival_s": args.arrival_s,
                  "seed": args.seed, "busy_cores": args.busy_cores, "classes": []}
        rows = result["classes"]
        out = Path(args.json)
        out.parent.mkdir(parents=True, exist_ok=True)
        # with variants, each class once on each in turn, so that a change of the machine's speed over the run
        # falls on all of them alike; the file is written after each class, so an interrupted run keeps them
        for mode in dict.fromkeys(args.settings):
            for count in args.readers:
                for variant in variants or [None]:
                    rows.append(measure(Path(args.app_root).resolve(), count, args, same_settings=mode == "same",
                                        variant=variant))
                    out.write_text(json.dumps(result, indent=2))
        info["matmul_ceiling_gflops"] = {"before": facts["ceiling"], "after": machine_facts()["ceiling"]}
    print_table(rows)
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")
    return 0 if not any(r["errors"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
