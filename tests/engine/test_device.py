"""Process-wide settings made once at start-up (engine.device): threads and the C heap."""

import platform

import torch

from engine.device import configure_malloc, configure_threads, describe_device, release_free_memory


def test_malloc_settings_take_on_glibc():
    """The server's memory budget relies on them where Community Cloud runs (Linux, glibc)."""
    expected = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
    assert configure_malloc() is expected
    assert release_free_memory() in (True, False)


def test_thread_count_is_set_once():
    first = configure_threads()
    assert configure_threads(first + 3) == first  # a later call changes nothing


def test_device_name_has_no_words_to_translate():
    assert describe_device(torch.device("cpu")) == "CPU"


def test_training_stays_float32_without_amx():
    from pathlib import Path

    from engine import device as D
    no_amx = "processor\t: 0\nflags\t\t: fpu sse2 avx2 fma avx512f avx512_bf16 avx512_vnni\n"
    amx = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8\n"
    assert not D.cpu_has_amx(no_amx) and D.cpu_has_amx(amx) and not D.cpu_has_amx("")
    cpu = torch.device("cpu")
    assert D.training_autocast_dtype(cpu, no_amx) is None
    assert D.training_autocast_dtype(cpu, amx) is None  # off by default: not measured faster end to end
    if Path("/proc/cpuinfo").exists() and not D.cpu_has_amx():
        assert D.training_autocast_dtype(cpu) is None
