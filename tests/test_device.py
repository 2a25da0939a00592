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
