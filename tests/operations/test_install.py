"""The dependency files give PyTorch's CPU wheel and current versions of everything else, under uv and pip.

Streamlit Community Cloud installs ``requirements.txt`` with uv (default settings) and falls back to pip.
This module replays both installs offline: a local HTTP server on 127.0.0.1 stands in for PyPI and for
PyTorch's CPU index (PEP 503 simple indexes holding fake wheels of a few hundred bytes, built here from the
names and versions the dependency files ask for), the files' PyPI and PyTorch addresses are rewritten to the
stand-ins and nothing else, and each install goes into a fresh virtual environment whose installed versions
are then read back. PyTorch's stand-in holds what makes ``--extra-index-url`` go wrong under uv: an old numpy
and an old requests beside the ``+cpu`` torch; the form that requirements.txt used before is installed too, as
the control that shows the stand-ins reproduce that failure.

The fake torch wheels carry the real wheels' tags (CPython 3.11 to 3.14, Linux x86-64). PyPI's stand-in torch
depends on a fake ``nvidia-cublas-cu12``, as PyPI's Linux build depends on CUDA's libraries, so an install
that took PyPI's build shows it. This interpreter installs for real on 3.11; the other Pythons are resolved
as each installer resolves for them (uv: ``uv pip compile --python-version``; pip: ``--dry-run`` for that
Python's wheel tags with its markers evaluated as that Python would). ``make``'s own choice of build
(``tools/torch_index.py``) is tested alone and through the Makefile's install recipe, with the CPU index's
stand-in reachable and not. Run alone with ``python -m pytest -m install``.
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
from tools import torch_index

pytestmark = pytest.mark.install

PYTORCH = "https://download.pytorch.org/whl/cpu"
#: What PyTorch's index holds besides torch, older than PyPI's: the copies that uv's first-index strategy takes.
STALE = {"numpy": "1.26.4", "requests": "2.28.1"}
#: What PyPI's Linux torch depends on (one of CUDA's libraries stands for them all): the mark of the CUDA build.
CUDA_LIBRARY = "nvidia-cublas-cu12"
#: The Pythons Community Cloud offers that PyTorch 2.13 has wheels for; requirements.txt addresses each one's.
CLOUD_PYTHONS = ("3.11", "3.12", "3.13", "3.14")
#: requests is no direct requirement: it comes with Streamlit, as in the real dependency tree.
REQUESTS_NEW = "2.34.2"
TIMEOUT_S = 120
#: The environment in which Community Cloud installs the app (Linux x86-64, the Python docs/operations.md chooses).
CLOUD = {"sys_platform": "linux", "platform_machine": "x86_64", "python_version": "3.11", "platform_system": "Linux",
         "os_name": "posix", "implementation_name": "cpython", "platform_python_implementation": "CPython"}


def requirement_lines(path: Path) -> list[str]:
    """The requirement lines of a requirements file: comments and blank lines dropped; options kept."""
    lines = (line.split(" #")[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def requirements(path: Path) -> list[Requirement]:
    """The requirements of a requirements file, parsed (PEP 508: names, versions, addresses, markers)."""
    return [Requirement(line) for line in requirement_lines(path) if not line.startswith("-")]


def torch_addresses() -> list[tuple[str, str, str]]:
    """requirements.txt's CPU wheels: (file name, version with its local label, wheel tag), one per address."""
    found = []
    for url in (r.url for r in requirements(ROOT / "requirements.txt") if r.url):
        name = urllib.parse.unquote(url.rsplit("/", 1)[1])
        version, tag = re.fullmatch(r"torch-([^-]+)-(.+)\.whl", name).groups()
        found.append((name, version, tag))
    return found


def torch_address() -> tuple[str, str, str]:
    """requirements.txt's CPU wheel for Python 3.11 (this machine's): (file name, version, wheel tag)."""
    return next(a for a in torch_addresses() if a[2].startswith("cp311-"))


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
    _, cpu_version, _ = torch_address()
    plain_version = cpu_version.split("+")[0]

    tags = [tag for _, _, tag in torch_addresses()]
    pypi = root / "pypi" / "simple"
    pypi_wheels = [fake_wheel(pypi, "torch", plain_version, tag, requires=(CUDA_LIBRARY,)) for tag in tags]
    pypi_wheels += [fake_wheel(pypi, CUDA_LIBRARY, "12.9.1.4"), fake_wheel(pypi, "requests", STALE["requests"]),
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
    pytorch_wheels = [fake_wheel(pytorch, "torch", cpu_version, tag) for tag in tags]
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
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PIP_", "UV_", "VIRTUAL_ENV", "PYTHON", "MAKE", "MFLAGS"))}
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


def _holds(got: dict, want: dict) -> None:
    """The venv holds ``want``'s versions; a ``+cpu`` torch came without CUDA's libraries, PyPI's with them."""
    assert {name: got.get(name) for name in want} == want
    assert ("+cpu" in want.get("torch", "")) == (CUDA_LIBRARY not in got), sorted(got)


def _check(out: subprocess.CompletedProcess, got: dict, want: dict) -> None:
    """The install succeeded and holds what :func:`_holds` asks."""
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    _holds(got, want)


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
    """For every platform and Python, one torch requirement applies; on Linux x86-64 with each Python Community
    Cloud offers (3.11-3.14) it is the CPU wheel's address for that Python, elsewhere PyPI's torch at the same
    version."""
    torches = [r for r in requirements(ROOT / "requirements.txt") if r.name == "torch"]
    _, cpu_version, _ = torch_address()
    assert {tag.split("-")[0] for _, _, tag in torch_addresses()} == {"cp" + p.replace(".", "") for p in CLOUD_PYTHONS}
    for platform, machine in [("linux", "x86_64"), ("linux", "aarch64"), ("darwin", "arm64"), ("win32", "AMD64")]:
        for python in ("3.10", *CLOUD_PYTHONS, "3.15"):
            env = {**CLOUD, "sys_platform": platform, "platform_machine": machine, "python_version": python}
            applying = [r for r in torches if r.marker is None or r.marker.evaluate(env)]
            assert len(applying) == 1, (platform, machine, python)
            if (platform, machine) == ("linux", "x86_64") and python in CLOUD_PYTHONS:
                cp = "cp" + python.replace(".", "")
                assert applying[0].url and f"%2Bcpu-{cp}-{cp}-manylinux" in applying[0].url, (python, applying)
            else:
                assert applying[0].specifier.contains(Version(cpu_version.split("+")[0])), (platform, python)


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


# Each Python Community Cloud offers, as each installer resolves requirements.txt for it.

def resolved(lines: str) -> dict[str, str]:
    """Name -> version or address from ``uv pip compile``'s output (``name==version`` or ``name @ url``)."""
    found = {}
    for line in lines.splitlines():
        if line and not line.startswith((" ", "#")):
            name, _, pin = line.partition(" @ ") if " @ " in line else line.partition("==")
            found[canonicalize_name(name.strip())] = pin.strip()
    return found


def uv_compile(tmp_path: Path, base: str, folder: Path, python: str) -> subprocess.CompletedProcess:
    """``uv pip compile requirements.txt`` for Linux x86-64 (manylinux 2.28) and ``python``, PyPI's stand-in."""
    from uv import find_uv_bin

    return run([find_uv_bin(), "pip", "compile", "--python-version", python, "--python-platform",
                "x86_64-manylinux_2_28", "--index-url", f"{base}/pypi/simple", "--no-header", "requirements.txt"],
               folder, clean_env(tmp_path))


@pytest.mark.parametrize("python", CLOUD_PYTHONS)
def test_uv_resolves_the_cpu_wheel_on_each_cloud_python(tmp_path, indexes, python):
    """As Community Cloud's uv would on that Python: torch is the ``+cpu`` wheel for it, no CUDA library."""
    base, cpu_version = indexes
    out = uv_compile(tmp_path, base, project_copy(tmp_path, base), python)
    assert out.returncode == 0, out.stderr[-3000:]
    got = resolved(out.stdout)
    cp = "cp" + python.replace(".", "")
    wheel = f"torch-{cpu_version.replace('+', '%2B')}-{cp}-{cp}-manylinux_2_28_x86_64.whl"
    assert got["torch"] == f"{base}/pytorch/whl/cpu/{wheel}"
    assert CUDA_LIBRARY not in got
    assert {name: got[name] for name in expected(cpu_version) if name not in ("torch", "requests")} == {
        name: v for name, v in expected(cpu_version).items() if name not in ("torch", "requests")}


def test_the_file_before_gave_pypis_cuda_build_on_python_3_12(tmp_path, indexes):
    """The control: with the 3.11 address alone (the file before), uv on Python 3.12 takes PyPI's torch and
    with it CUDA's libraries, so the test above can tell the two builds apart."""
    base, cpu_version = indexes
    text = localise((ROOT / "requirements.txt").read_text(), base)
    cp311 = next(line for line in text.splitlines() if line.startswith("torch @") and "cp311" in line)
    lines = [line for line in text.splitlines() if not line.startswith("torch")]
    old = "\n".join([cp311, 'torch==2.13.0 ; sys_platform != "linux" or platform_machine != "x86_64" or '
                     'python_version != "3.11"', *lines]) + "\n"
    out = uv_compile(tmp_path, base, project_copy(tmp_path, base, old), "3.12")
    assert out.returncode == 0, out.stderr[-3000:]
    got = resolved(out.stdout)
    assert got["torch"] == cpu_version.split("+")[0] and CUDA_LIBRARY in got


#: Runs pip with its markers evaluated as on another Python: pip evaluates them against the running interpreter
#: even with --python-version (which sets the wheel tags and Requires-Python), and this machine has 3.11 only.
PIP_AS_PYTHON = """
import runpy, sys
from pip._vendor.packaging import markers
env = markers.default_environment()
env.update(python_version=sys.argv[1], python_full_version=sys.argv[1] + ".0")
markers.default_environment = lambda: dict(env)
sys.argv = ["pip", *sys.argv[2:]]
runpy.run_module("pip", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("python", CLOUD_PYTHONS)
def test_pip_resolves_the_cpu_wheel_on_each_cloud_python(tmp_path, indexes, python):
    """As Community Cloud's fallback, pip, would on that Python: the ``+cpu`` wheel for it, no CUDA library."""
    base, cpu_version = indexes
    folder, report = project_copy(tmp_path, base), tmp_path / "report.json"
    out = run([sys.executable, "-c", PIP_AS_PYTHON, python, "install", "--dry-run", "--ignore-installed",
               "--no-cache-dir", "--report", str(report), "--python-version", python, "--platform",
               "manylinux_2_28_x86_64", "--only-binary=:all:", "--index-url", f"{base}/pypi/simple",
               "-r", "requirements.txt"], folder, clean_env(tmp_path))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    got = {canonicalize_name(i["metadata"]["name"]): i for i in json.loads(report.read_text())["install"]}
    cp = "cp" + python.replace(".", "")
    assert got["torch"]["metadata"]["version"] == cpu_version
    assert got["torch"]["download_info"]["url"].endswith(f"-{cp}-{cp}-manylinux_2_28_x86_64.whl")
    assert CUDA_LIBRARY not in got


# make's choice of build (tools/torch_index.py), then the Makefile's install recipe that uses it.

def _never_asked():
    raise AssertionError("the CPU index was asked although its answer cannot change the choice")


@pytest.mark.parametrize(("torch", "system", "gpu", "answers", "index"), [
    ("", "Linux", False, True, "cpu"),
    ("", "Linux", False, False, None),
    ("", "Linux", True, None, None),
    ("cuda", "Linux", False, None, None),
    ("cpu", "Linux", True, True, "cpu"),
    ("cpu", "Linux", True, False, None),
    ("", "Darwin", False, None, None),
    ("", "Windows", False, None, None),
])
def test_torch_index_chooses_the_build(torch, system, gpu, answers, index):
    """The CPU index on Linux without a CUDA GPU (or TORCH=cpu) when it answers, else PyPI (TORCH=cuda, a GPU,
    another system, an index that cannot be reached); the index is asked only when its answer matters."""
    url = "http://127.0.0.1:9/whl/cpu"
    choice = torch_index.choose(torch, system, gpu, url, (lambda: answers) if answers is not None else _never_asked)
    assert choice.index == (url if index == "cpu" else None)
    assert torch_index.pip_arguments(choice, "2.13.0") == (["--index-url", url] if index else []) + ["torch==2.13.0"]
    with pytest.raises(ValueError, match="TORCH=cpu"):
        torch_index.choose("rocm", system, gpu, url, _never_asked)


def test_torch_index_finds_a_cuda_gpu_by_the_driver_or_nvidia_smi(tmp_path):
    proc, no_tool = tmp_path / "nvidia", str(tmp_path / "absent")
    assert not torch_index.cuda_gpu(proc, no_tool)
    (proc / "gpus").mkdir(parents=True)
    assert not torch_index.cuda_gpu(proc, no_tool), "a driver folder without GPUs is no GPU"
    (proc / "gpus" / "0000:65:00.0").mkdir()
    assert torch_index.cuda_gpu(proc, no_tool)
    tool = tmp_path / "nvidia-smi"
    for script, present in [('echo "GPU 0: NVIDIA H200 (UUID: GPU-1)"', True), ("echo 'No devices found'", False),
                            ('echo "GPU 0: x"; exit 9', False)]:
        tool.write_text(f"#!/bin/sh\n{script}\n")
        tool.chmod(0o755)
        assert torch_index.cuda_gpu(tmp_path / "no-driver", str(tool)) is present, script


def test_torch_index_reachability_is_bounded(indexes):
    """The stand-in answers; a closed port and a server that accepts and never answers do not, the latter within
    the timeout and a little more."""
    import socket
    import time

    base, _ = indexes
    assert torch_index.reachable(f"{base}/pytorch/whl/cpu/", 10)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    assert not torch_index.reachable(f"http://127.0.0.1:{port}/whl/cpu/", 10)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        start = time.monotonic()
        assert not torch_index.reachable(f"http://127.0.0.1:{silent.getsockname()[1]}/whl/cpu/", 1.0)
        assert time.monotonic() - start < 3


def test_torch_index_reads_the_pinned_version():
    """The version make installs is the one requirements.txt's addresses carry."""
    assert torch_index.pinned_version(ROOT / "requirements.txt") == torch_address()[1].split("+")[0]


def make_app(tmp_path: Path, base: str, cpu_index: str, find_links: Path | None = None) -> dict[str, str]:
    """Run the Makefile's ``$(VENV)/.app`` recipe (apt left out) into a fresh venv, pip pointed at PyPI's
    stand-in and ``TORCH_CPU_INDEX`` at ``cpu_index``, as on Linux without a CUDA GPU (on a machine with one,
    TORCH=cpu stands for that); returns what the venv holds, and make's output under "make output"."""
    env = {**clean_env(tmp_path), "PIP_INDEX_URL": f"{base}/pypi/simple", "TORCH_CPU_INDEX": cpu_index}
    if find_links is not None:
        env["PIP_FIND_LINKS"] = str(find_links)
    venv = tmp_path / "venv"
    torch = "cpu" if torch_index.cuda_gpu() else ""
    out = subprocess.run(["make", "-C", str(ROOT), f"VENV={venv}", f"PYTHON={sys.executable}", "APT_RUN=",
                          f"TORCH={torch}", f"{venv}/.app"], env=env, capture_output=True, text=True,
                         timeout=3 * TIMEOUT_S)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert (venv / ".app").is_file()
    return installed(venv, env) | {"make output": out.stdout + out.stderr}


def test_make_installs_the_cpu_build_from_the_cpu_index(tmp_path, indexes):
    base, cpu_version = indexes
    got = make_app(tmp_path, base, f"{base}/pytorch/whl/cpu")
    assert f"the CPU build from {base}/pytorch/whl/cpu" in got.pop("make output")
    _holds(got, expected(cpu_version))


def test_make_falls_back_to_pypis_wheel_when_the_cpu_index_cannot_be_reached(tmp_path, indexes):
    """With the CPU index unreachable, PyPI's build (the stand-in's CUDA one); where pip is set up with a local
    CPU wheel (find-links, as on the machines here), that wheel."""
    import socket

    base, cpu_version = indexes
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{closed.getsockname()[1]}/whl/cpu"
    got = make_app(tmp_path / "pypi", base, nowhere)
    assert "cannot be reached" in got.pop("make output")
    _holds(got, {**expected(cpu_version), "torch": cpu_version.split("+")[0]})

    local = tmp_path / "wheels"
    fake_wheel(local, "torch", cpu_version, torch_address()[2])
    got = make_app(tmp_path / "local", base, nowhere, find_links=local)
    got.pop("make output")
    _holds(got, expected(cpu_version))


def test_make_run_passes_port_and_address_to_streamlit(tmp_path):
    """``make run PORT=… ADDRESS=…`` hands both to Streamlit; without them, Streamlit's own settings hold."""
    env = clean_env(tmp_path)
    out = subprocess.run(["make", "-n", "-C", str(ROOT), "VENV=/nonexistent", "run", "PORT=8602", "ADDRESS=10.0.0.5",
                          "-o", "/nonexistent/.app"], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    assert "streamlit run serve.py --server.port 8602 --server.address 10.0.0.5" in out.stdout
    plain = subprocess.run(["make", "-n", "-C", str(ROOT), "VENV=/nonexistent", "run", "-o", "/nonexistent/.app"],
                           capture_output=True, text=True, timeout=60, env=env)
    assert "/nonexistent/bin/streamlit run serve.py" in plain.stdout.splitlines(), plain.stdout
