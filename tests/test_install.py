"""The dependency files give PyTorch's CPU wheel and current versions of everything else, under uv and pip.

Streamlit Community Cloud installs ``requirements.txt`` with uv (default settings) and falls back to pip.
This module replays both installs offline: a local HTTP server on 127.0.0.1 stands in for PyPI and for
PyTorch's CPU index (PEP 503 simple indexes holding fake wheels of a few hundred bytes, built here from the
names and versions the dependency files ask for), the files' PyPI and PyTorch addresses are rewritten to the
stand-ins and nothing else, and each install goes into a fresh virtual environment whose installed versions
are then read back. PyTorch's stand-in holds what makes ``--extra-index-url`` go wrong under uv: an old numpy
and an old requests beside the ``+cpu`` torch; the form that requirements.txt used before is installed too, as
the control that shows the stand-ins reproduce that failure.

The fake torch wheel carries the real wheel's tag (CPython 3.11, Linux x86-64), so the installs run on that
platform, the project's and Community Cloud's. Run alone with ``python -m pytest -m install``.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import tomllib
import urllib.parse
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.plotly_json import ROOT

pytestmark = pytest.mark.install

PYTORCH = "https://download.pytorch.org/whl/cpu"
#: What PyTorch's index holds besides torch, older than PyPI's: the copies that uv's first-index strategy takes.
STALE = {"numpy": "1.26.4", "requests": "2.28.1"}
#: requests is no direct requirement: it comes with Streamlit, as in the real dependency tree.
REQUESTS_NEW = "2.34.2"
TIMEOUT_S = 120
#: The environment in which Community Cloud installs the app (Linux x86-64, the Python the README chooses).
CLOUD = {"sys_platform": "linux", "platform_machine": "x86_64", "python_version": "3.11", "platform_system": "Linux",
         "os_name": "posix", "implementation_name": "cpython", "platform_python_implementation": "CPython"}


def requirement_lines(path: Path) -> list[str]:
    """The requirement lines of a requirements file: comments and blank lines dropped; options kept."""
    lines = (line.split(" #")[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def requirements(path: Path) -> list[Requirement]:
    """The requirements of a requirements file, parsed (PEP 508: names, versions, addresses, markers)."""
    return [Requirement(line) for line in requirement_lines(path) if not line.startswith("-")]


def torch_address() -> tuple[str, str, str]:
    """requirements.txt's CPU wheel: (file name, version with its local label, wheel tag)."""
    url = next(r.url for r in requirements(ROOT / "requirements.txt") if r.url)
    name = urllib.parse.unquote(url.rsplit("/", 1)[1])
    version, tag = re.fullmatch(r"torch-([^-]+)-(.+)\.whl", name).groups()
    return name, version, tag


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def fake_wheel(folder: Path, name: str, version: str, tag: str = "py3-none-any", requires: tuple = ()) -> Path:
    """Write a minimal valid wheel of ``name`` ``version`` into ``folder``; it installs a module ``<name>``."""
    module = canonicalize_name(name).replace("-", "_")
    dist = f"{module}-{version}"
    files = {
        f"{module}/__init__.py": f"__version__ = {version!r}\n",
        f"{dist}.dist-info/METADATA": "Metadata-Version: 2.1\n"
        f"Name: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{dist}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: tests.test_install\nRoot-Is-Purelib: true\n"
        f"Tag: {tag}\n",
    }
    record = [f"{path},{_record_hash(text.encode())},{len(text.encode())}" for path, text in files.items()]
    files[f"{dist}.dist-info/RECORD"] = "\n".join([*record, f"{dist}.dist-info/RECORD,,"]) + "\n"
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{dist}-{tag}.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
    return wheel


def write_simple_index(root: Path, wheels: list[Path]) -> None:
    """A PEP 503 simple index in ``root``: one page per project linking its wheels (which lie in ``root``)."""
    projects: dict[str, list[Path]] = {}
    for wheel in wheels:
        projects.setdefault(canonicalize_name(wheel.name.split("-")[0]), []).append(wheel)
    for project, files in projects.items():
        links = "".join(f'<a href="../{urllib.parse.quote(w.name)}">{w.name}</a>\n' for w in files)
        (root / project).mkdir(parents=True, exist_ok=True)
        (root / project / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")
    listing = "".join(f'<a href="{p}/">{p}</a>\n' for p in sorted(projects))
    (root / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{listing}</body></html>\n")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def indexes(tmp_path_factory):
    """Serve a stand-in of PyPI (``/pypi/simple``) and of PyTorch's CPU index (``/pytorch/whl/cpu``).

    Yields ``(base_url, torch_version)``. The wheels are made from the dependency files: every pinned
    requirement of requirements.txt at its version on the PyPI stand-in (torch as PyPI's plain build), the
    ``+cpu`` torch that requirements.txt addresses on PyTorch's stand-in, beside the stale copies.
    """
    root = tmp_path_factory.mktemp("indexes")
    reqs = requirements(ROOT / "requirements.txt")
    _, cpu_version, torch_tag = torch_address()
    plain_version = cpu_version.split("+")[0]

    pypi = root / "pypi" / "simple"
    pypi_wheels = [fake_wheel(pypi, "torch", plain_version, torch_tag), fake_wheel(pypi, "requests", STALE["requests"]),
                   fake_wheel(pypi, "requests", REQUESTS_NEW), fake_wheel(pypi, "numpy", STALE["numpy"])]
    for req in reqs:
        if req.url or req.name == "torch":
            continue
        assert [s.operator for s in req.specifier] == ["=="], f"requirements.txt pins {req.name} with =="
        version = next(iter(req.specifier)).version
        depends = ("requests>=2.27", "numpy>=1.23") if req.name == "streamlit" else ()
        pypi_wheels.append(fake_wheel(pypi, req.name, version, requires=depends))
    write_simple_index(pypi, pypi_wheels)

    pytorch = root / "pytorch" / "whl" / "cpu"
    pytorch_wheels = [fake_wheel(pytorch, "torch", cpu_version, torch_tag)]
    pytorch_wheels += [fake_wheel(pytorch, name, version) for name, version in STALE.items()]
    write_simple_index(pytorch, pytorch_wheels)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", cpu_version
    finally:
        server.shutdown()
        server.server_close()


def localise(text: str, base: str) -> str:
    """The dependency file's text with PyPI's and PyTorch's addresses pointing at the stand-ins."""
    return text.replace(PYTORCH, f"{base}/pytorch/whl/cpu").replace("https://pypi.org/simple", f"{base}/pypi/simple")


def project_copy(tmp_path: Path, base: str, requirements_text: str | None = None) -> Path:
    """A folder holding the project's dependency files, addresses rewritten (uv discovers pyproject.toml here)."""
    folder = tmp_path / "project"
    folder.mkdir(parents=True)
    (folder / "engine").mkdir()
    (folder / "engine" / "__init__.py").write_text("")
    (folder / "README.md").write_text("")
    for name in ("pyproject.toml", "requirements.txt"):
        (folder / name).write_text(localise((ROOT / name).read_text(), base))
    if requirements_text is not None:
        (folder / "requirements.txt").write_text(requirements_text)
    return folder


def clean_env(tmp_path: Path) -> dict:
    """The environment without this machine's pip and uv settings (config files, find-links, caches)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "VIRTUAL_ENV", "PYTHON"))}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", XDG_CONFIG_HOME=str(tmp_path / "config"),
               XDG_CONFIG_DIRS=str(tmp_path / "config"), UV_CACHE_DIR=str(tmp_path / "uv-cache"),
               UV_PYTHON_DOWNLOADS="never")
    return env


def run(cmd: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)


def installed(venv: Path, env: dict) -> dict[str, str]:
    """Name -> version of what the virtual environment holds, read by its own interpreter."""
    code = "import importlib.metadata as m, json; print(json.dumps({d.metadata['Name'].lower(): d.version " \
           "for d in m.distributions()}))"
    out = run([str(venv / "bin" / "python"), "-c", code], venv, env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def uv_install(tmp_path: Path, base: str, folder: Path, spec: str) -> tuple[subprocess.CompletedProcess, dict]:
    """``uv pip install -r <spec>`` into a fresh venv, run in ``folder`` with uv's default settings.

    The only option is ``--index-url``, PyPI's address rewritten to its stand-in (uv's default index).
    """
    from uv import find_uv_bin

    env, venv = clean_env(tmp_path), tmp_path / "venv-uv"
    made = run([sys.executable, "-m", "venv", "--without-pip", str(venv)], folder, env)
    assert made.returncode == 0, made.stderr
    out = run([find_uv_bin(), "pip", "install", "--python", str(venv / "bin" / "python"),
               "--index-url", f"{base}/pypi/simple", "-r", spec], folder, env)
    return out, (installed(venv, env) if out.returncode == 0 else {})


def pip_install(tmp_path: Path, base: str, folder: Path, spec: str) -> tuple[subprocess.CompletedProcess, dict]:
    """``pip install -r <spec>`` into a fresh venv with that venv's own pip, no config file, PyPI's stand-in."""
    env, venv = clean_env(tmp_path), tmp_path / "venv-pip"
    made = run([sys.executable, "-m", "venv", str(venv)], folder, env)
    assert made.returncode == 0, made.stderr
    out = run([str(venv / "bin" / "python"), "-m", "pip", "install", "--no-cache-dir",
               "--index-url", f"{base}/pypi/simple", "-r", spec], folder, env)
    return out, (installed(venv, env) if out.returncode == 0 else {})


def expected(cpu_version: str) -> dict[str, str]:
    """What a right install holds: the +cpu torch, requirements.txt's pins, the newest requests."""
    pins = {r.name.lower(): next(iter(r.specifier)).version for r in requirements(ROOT / "requirements.txt")
            if not r.url and r.name != "torch"}
    return {"torch": cpu_version, **pins, "requests": REQUESTS_NEW}


def _check(out: subprocess.CompletedProcess, got: dict, want: dict) -> None:
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert {name: got.get(name) for name in want} == want


def test_uv_installs_requirements_txt_with_the_cpu_wheel_and_current_packages(tmp_path, indexes):
    base, cpu_version = indexes
    folder = project_copy(tmp_path, base)
    out, got = uv_install(tmp_path, base, folder, "requirements.txt")
    _check(out, got, expected(cpu_version))


def test_pip_installs_requirements_txt_with_the_cpu_wheel_and_current_packages(tmp_path, indexes):
    base, cpu_version = indexes
    folder = project_copy(tmp_path, base)
    out, got = pip_install(tmp_path, base, folder, "requirements.txt")
    _check(out, got, expected(cpu_version))


def test_uv_installs_pyproject_with_torch_alone_from_the_explicit_index(tmp_path, indexes):
    """``uv pip install -r pyproject.toml`` (as ``uv sync`` resolves it): torch from PyTorch's index only."""
    base, cpu_version = indexes
    folder = project_copy(tmp_path, base)
    out, got = uv_install(tmp_path, base, folder, "pyproject.toml")
    _check(out, got, expected(cpu_version))


def test_the_extra_index_url_form_goes_wrong_under_uv(tmp_path, indexes):
    """The control: requirements.txt as it was (``--extra-index-url``, the same pins) makes uv fail, since
    numpy is pinned and PyTorch's index has another numpy; without the numpy pin uv succeeds with PyTorch's
    stale numpy and requests; pip installs it right. So the stand-ins reproduce what the fix is for."""
    base, cpu_version = indexes
    lines = [f"--extra-index-url {PYTORCH}", f"torch=={cpu_version.split('+')[0]}"]
    lines += [line for line in requirement_lines(ROOT / "requirements.txt") if not line.startswith("torch")]
    old_form = localise("\n".join(lines) + "\n", base)
    assert any(line.startswith("numpy==") for line in lines)
    pinned = project_copy(tmp_path / "pinned", base, old_form)
    out, _ = uv_install(tmp_path / "pinned", base, pinned, "requirements.txt")
    assert out.returncode != 0 and "numpy" in out.stderr

    unpinned = re.sub(r"^numpy==.*$", "numpy", old_form, flags=re.M)
    out, got = uv_install(tmp_path / "unpinned", base, project_copy(tmp_path / "unpinned", base, unpinned),
                          "requirements.txt")
    assert out.returncode == 0, out.stderr
    assert (got["torch"], got["numpy"], got["requests"]) == (cpu_version, STALE["numpy"], STALE["requests"])

    out, got = pip_install(tmp_path / "pip", base, project_copy(tmp_path / "pip", base, old_form), "requirements.txt")
    _check(out, got, expected(cpu_version))


def test_exactly_one_torch_line_applies_on_every_platform():
    """For every platform and Python the project supports, one torch requirement applies; on Community
    Cloud's (Linux x86-64, 3.11) it is the CPU wheel's address, elsewhere PyPI's torch at the same version."""
    torches = [r for r in requirements(ROOT / "requirements.txt") if r.name == "torch"]
    _, cpu_version, _ = torch_address()
    for platform, machine in [("linux", "x86_64"), ("linux", "aarch64"), ("darwin", "arm64"), ("win32", "AMD64")]:
        for python in ("3.11", "3.12", "3.13"):
            env = {**CLOUD, "sys_platform": platform, "platform_machine": machine, "python_version": python}
            applying = [r for r in torches if r.marker is None or r.marker.evaluate(env)]
            assert len(applying) == 1, (platform, machine, python)
            if (platform, machine, python) == ("linux", "x86_64", "3.11"):
                assert applying[0].url and "+cpu" in cpu_version
            else:
                assert applying[0].specifier.contains(Version(cpu_version.split("+")[0]))


def test_pyproject_pins_what_the_requirements_files_pin():
    """pyproject.toml's dependencies and ``dev`` extra equal requirements.txt and requirements-dev.txt."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

    def pins(reqs) -> dict:
        return {canonicalize_name(r.name): str(r.specifier) for r in reqs if not r.url and r.marker is None}

    runtime = [Requirement(r) for r in project["dependencies"]]
    plain_version = torch_address()[1].split("+")[0]
    assert pins(runtime) == {**pins(requirements(ROOT / "requirements.txt")), "torch": f"=={plain_version}"}
    assert pins(Requirement(r) for r in project["optional-dependencies"]["dev"]) == pins(
        requirements(ROOT / "requirements-dev.txt"))


def test_pyproject_takes_torch_only_from_the_explicit_pytorch_index():
    uv = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["uv"]
    (index,) = uv["index"]
    assert index["url"] == PYTORCH and index["explicit"] is True
    assert set(uv["sources"]) == {"torch"}
    assert [s["index"] for s in uv["sources"]["torch"]] == [index["name"]]


def test_the_makefile_installs_torch_at_the_addressed_version(tmp_path):
    """``make``'s local install turns the address into ``torch==<version>``, with the markers kept."""
    recipe = re.search(r"^\tsed -E '([^']+)' requirements\.txt", (ROOT / "Makefile").read_text(), re.M).group(1)
    sed = shutil.which("sed")
    assert sed, "sed is needed by the Makefile"
    out = subprocess.run([sed, "-E", recipe.replace("\\\\", "\\"), str(ROOT / "requirements.txt")],
                         capture_output=True, text=True, check=True)
    local = [Requirement(line) for line in out.stdout.splitlines() if line and not line.startswith("#")]
    torches = [r for r in local if r.name == "torch"]
    assert all(r.url is None for r in local)
    assert {str(r.specifier) for r in torches} == {"==" + torch_address()[1].split("+")[0]}
    assert sum(r.marker.evaluate(CLOUD) for r in torches) == 1
