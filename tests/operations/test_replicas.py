"""Several app processes behind nginx with sticky sessions (deploy/nginx.conf), on loopback, without containers.

Two ``streamlit run serve.py`` processes share one ``server.cookieSecret`` and sit behind Debian's nginx, run
with deploy/nginx.conf as shipped except for its ports. Readers speak Streamlit's own protocol (HTTP, then the
``/_stcore/stream`` websocket with protobuf messages): every request and websocket of a reader is answered by
one process (the ``X-Attention-Replica`` header nginx adds), a reader who reconnects gets their own session
back (the same session id, which only that process knows: the other one, asked directly, opens a new
session), and the readers are spread over both processes. In headless Chromium, a Lab training started
through nginx is taken over after a reload.

Bounded: every wait has a timeout, progress lines go to stderr, and the servers are stopped at the end, also
on failure. Only 127.0.0.1 is reached. Run alone with ``python -m pytest -m replicas``.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import requests
import yaml
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from websockets.sync.client import connect

import serve
from tests.browser.test_browser import CHROMIUM, LAUNCH_ARGS, free_port, say, stop_server
from tests.plotly_json import ROOT

pytestmark = pytest.mark.replicas

REPLICAS = 2
READERS = 16
HEADER = "X-Attention-Replica"
COOKIE = "attention_replica"
START_TIMEOUT_S = 180
SCRIPT_TIMEOUT_S = 120
NGINX = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if Path(p).exists()), None)


def start_app(port: int, cookie_secret: str, log: Path) -> subprocess.Popen:
    """``streamlit run serve.py`` on ``port`` (not yet waited for), its output in ``log`` (never a full pipe)."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "serve.py", "--server.port", str(port),
             "--server.headless", "true", "--server.address", "127.0.0.1"],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "STREAMLIT_SERVER_COOKIE_SECRET": cookie_secret},
        )


def tail(log: Path) -> str:
    return log.read_text(errors="replace")[-2000:] if log.exists() else "(no log)"


def wait_healthy(url: str, proc: subprocess.Popen, timeout_s: float, log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url} exited: {tail(log)}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"{url} did not become healthy within {timeout_s} s: {tail(log)}")


def site_config(listen_port: int, app_ports: list[int]) -> str:
    """deploy/nginx.conf with its listening port and its upstream servers replaced, nothing else."""
    text = (ROOT / "deploy" / "nginx.conf").read_text()
    text, n_listen = re.subn(r"^(\s*)listen 80;", rf"\1listen 127.0.0.1:{listen_port};", text, flags=re.M)
    servers = re.findall(r"^\s*server 127\.0\.0\.1:\d+ (.*);$", text, flags=re.M)
    assert n_listen == 1 and servers, "deploy/nginx.conf: one `listen 80;` and `server 127.0.0.1:PORT ...;` lines"
    text = re.sub(r"^\s*server 127\.0\.0\.1:\d+ .*;\n", "", text, flags=re.M)
    upstream = "".join(f"    server 127.0.0.1:{p} {servers[0]};\n" for p in app_ports)
    return re.sub(r"(upstream attention_app \{\n(?:.*\n)*?\s*hash [^\n]*\n)", rf"\1{upstream}", text)


def main_config(folder: Path, site: Path) -> str:
    """A main nginx.conf for a private, foreground nginx: its own pid, logs and temp paths in ``folder``."""
    user = "user root;\n" if os.geteuid() == 0 else ""  # workers would run as nobody, who cannot enter folder
    temps = "".join(f"    {kind}_temp_path {folder / kind};\n" for kind in ("client_body", "proxy", "fastcgi",
                                                                              "uwsgi", "scgi"))
    return (f"{user}worker_processes 1;\ndaemon off;\npid {folder / 'nginx.pid'};\n"
            f"error_log {folder / 'error.log'} warn;\nevents {{ worker_connections 512; }}\n"
            f"http {{\n    access_log off;\n{temps}    include {site};\n}}\n")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Two app processes behind nginx: yields ``(nginx_url, [app_url, ...])``; everything stopped afterwards."""
    if NGINX is None:
        pytest.fail("nginx is not installed: run `make test` (apt-get install nginx)")
    folder = tmp_path_factory.mktemp("nginx")
    secret = secrets.token_urlsafe(32)
    app_ports = [free_port() for _ in range(REPLICAS)]
    apps: list[subprocess.Popen] = []
    nginx = None
    try:
        say(f"starting {REPLICAS} app processes on ports {app_ports}")
        logs = [folder / f"app-{port}.log" for port in app_ports]
        apps = [start_app(port, secret, log) for port, log in zip(app_ports, logs, strict=True)]
        for port, proc, log in zip(app_ports, apps, logs, strict=True):
            wait_healthy(f"http://127.0.0.1:{port}", proc, START_TIMEOUT_S, log)
        listen = free_port()
        site = folder / "attention.conf"
        site.write_text(site_config(listen, app_ports))
        conf = folder / "nginx.conf"
        conf.write_text(main_config(folder, site))
        checked = subprocess.run([NGINX, "-t", "-p", str(folder), "-e", str(folder / "error.log"), "-c", str(conf)],
                                 capture_output=True, text=True, timeout=30)
        assert checked.returncode == 0, checked.stderr
        say(f"starting nginx on port {listen}")
        nginx = subprocess.Popen([NGINX, "-p", str(folder), "-e", str(folder / "error.log"), "-c", str(conf)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_healthy(f"http://127.0.0.1:{listen}", nginx, 30, folder / "error.log")
        yield f"http://127.0.0.1:{listen}", [f"http://127.0.0.1:{p}" for p in app_ports]
    finally:
        say("stopping nginx and the app processes")
        if nginx is not None:
            stop_server(nginx)
        for proc in apps:
            stop_server(proc)


def run_script(base: str, cookies: dict, existing_session: str | None = None) -> tuple[str, str | None]:
    """Open the websocket as the browser does, run the home page to its end: ``(session id, replica header)``.

    ``existing_session`` reconnects to that session, as the browser's client does after a dropped connection.
    """
    ws_url = base.replace("http://", "ws://") + "/_stcore/stream"
    # The subprotocol list carries the XSRF token (none here: no login cookie to read) and the session to resume.
    protocols = ["streamlit", "no-xsrf", existing_session] if existing_session else ["streamlit"]
    cookie = "; ".join(f"{k}={v}" for k, v in cookies.items())
    with connect(ws_url, subprotocols=protocols, additional_headers={"Cookie": cookie} if cookie else None,
                 origin=base, open_timeout=30, max_size=None) as ws:
        replica = ws.response.headers.get(HEADER)
        msg = BackMsg()
        msg.rerun_script.query_string = "lang=en"
        ws.send(msg.SerializeToString())
        session_id, deadline = None, time.monotonic() + SCRIPT_TIMEOUT_S
        while time.monotonic() < deadline:
            forward = ForwardMsg()
            forward.ParseFromString(ws.recv(timeout=max(1.0, deadline - time.monotonic())))
            kind = forward.WhichOneof("type")
            if kind == "new_session":
                session_id = forward.new_session.initialize.session_id
            elif kind == "script_finished":
                assert session_id, "the server sent no new_session before script_finished"
                return session_id, replica
        raise TimeoutError(f"the page script did not finish within {SCRIPT_TIMEOUT_S} s")


def test_each_reader_stays_on_one_replica_and_gets_their_session_back(cluster):
    base, apps = cluster
    seen: list[str] = []
    for reader in range(READERS):
        http = requests.Session()
        first = http.get(f"{base}/", timeout=30)
        assert first.status_code == 200 and COOKIE in http.cookies
        replicas = {first.headers[HEADER]}
        for path in ("/_stcore/health", "/_stcore/host-config", "/lab"):
            answer = http.get(f"{base}{path}", timeout=30)
            assert answer.status_code == 200, path
            assert COOKIE not in answer.headers.get("Set-Cookie", ""), "the cookie is set once, on the first answer"
            replicas.add(answer.headers[HEADER])
        session_id, ws_replica = run_script(base, http.cookies.get_dict())
        again, ws_again = run_script(base, http.cookies.get_dict(), existing_session=session_id)
        assert ws_replica and ws_again, "nginx names the process on the websocket's handshake too"
        replicas |= {ws_replica, ws_again}
        assert again == session_id, f"reader {reader} lost their session on reconnecting"
        assert len(replicas) == 1, f"reader {reader} reached {replicas}"
        (replica,) = replicas
        seen.append(replica)
        say(f"reader {reader}: every request and both websockets on {replica}, session kept")
    assert set(seen) == {a.removeprefix("http://") for a in apps}, f"readers spread over {set(seen)}"


def test_the_other_replica_does_not_know_the_session(cluster):
    """The control: a session id from one process names nothing on the other, which opens a new session; so
    a reader sent to the wrong process would lose their session, and the test above can fail."""
    base, apps = cluster
    http = requests.Session()
    http.get(f"{base}/", timeout=30)
    session_id, _ = run_script(base, http.cookies.get_dict())
    home = http.get(f"{base}/_stcore/health", timeout=30).headers[HEADER]
    other = next(a for a in apps if a.removeprefix("http://") != home)
    same_place = next(a for a in apps if a.removeprefix("http://") == home)
    assert run_script(other, {}, existing_session=session_id)[0] != session_id
    assert run_script(same_place, {}, existing_session=session_id)[0] == session_id


@pytest.mark.browser
def test_a_lab_training_started_through_nginx_is_taken_over_after_a_reload(cluster):
    """Chromium through nginx: start a long training, reload, the reloaded page shows it running (its Stop
    button) and stops it; every page load was answered by the same process."""
    if CHROMIUM is None:
        pytest.fail("Chromium is not installed: run `make test` (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    base, _ = cluster
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        try:
            page = browser.new_context(viewport={"width": 1400, "height": 1600}).new_page()
            page.set_default_timeout(180_000)
            first = page.goto(f"{base}/lab?lab_steps=3000&lab_seed=7", wait_until="domcontentloaded")
            page.get_by_role("button", name="Train", exact=True).click()
            stop = page.get_by_role("button", name="Stop", exact=True)
            stop.wait_for()
            page.wait_for_timeout(2000)  # the run that drew Stop also stored the job's token
            say("lab: training running through nginx; reloading")
            again = page.reload(wait_until="domcontentloaded")
            assert again.headers[HEADER.lower()] == first.headers[HEADER.lower()]
            stop.wait_for()
            say("lab: the reloaded page took the training over; stopping it")
            stop.click()
            stop.wait_for(state="detached", timeout=120_000)
            assert page.locator('[data-testid="stException"]').count() == 0
        finally:
            browser.close()


def test_deploy_files_probe_health_share_the_cookie_secret_and_keep_readers_on_one_pod():
    """deploy/k8s.yaml and deploy/Dockerfile (no cluster or Docker engine here: what they declare)."""
    docs = {d["kind"]: d for d in yaml.safe_load_all((ROOT / "deploy" / "k8s.yaml").read_text())}
    container = docs["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    port = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["path"] == "/_stcore/health" and container[probe]["httpGet"]["port"] in port
    env = {e["name"]: e for e in container["env"]}
    assert "secretKeyRef" in env["STREAMLIT_SERVER_COOKIE_SECRET"]["valueFrom"]
    assert docs["Deployment"]["spec"]["replicas"] > 1
    assert docs["Service"]["spec"]["sessionAffinity"] == "ClientIP"
    assert docs["Ingress"]["metadata"]["annotations"]["nginx.ingress.kubernetes.io/affinity"] == "cookie"
    backend = docs["Ingress"]["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend["name"] == docs["Service"]["metadata"]["name"]
    # the proxies cap connections per client address and time out silent clients (docs/operations.md)
    per_address = int(docs["Ingress"]["metadata"]["annotations"]["nginx.ingress.kubernetes.io/limit-connections"])
    nginx = (ROOT / "deploy" / "nginx.conf").read_text()
    zone = re.search(r"^limit_conn_zone \$binary_remote_addr zone=(\w+):\d+m;$", nginx, re.M)
    assert zone and re.search(rf"^\s+limit_conn {zone[1]} {per_address};$", nginx, re.M)
    assert 4 * 30 <= per_address < serve.MAX_OPEN_PER_ADDRESS  # a class of 30 behind one address, below the app's cap
    for directive in ("client_header_timeout", "client_body_timeout", "keepalive_timeout"):
        assert re.search(rf"^\s+{directive} \d+s;$", nginx, re.M), directive

    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    assert re.search(r"^COPY packages\.txt", dockerfile, re.M) and "xargs -a packages.txt apt-get install" in dockerfile
    assert re.search(r"^RUN pip install -r requirements\.txt$", dockerfile, re.M)
    assert re.search(r"^HEALTHCHECK .*\n?.*/_stcore/health", dockerfile, re.M)
    assert re.search(r'^CMD \["streamlit", "run", "serve\.py"', dockerfile, re.M)
