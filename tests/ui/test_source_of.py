"""ui.page.source_of under concurrent first visits: each listing is prepared once, never by two threads at once."""

import ast
import inspect
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import engine.attention as attention
import engine.gpt as gpt
from ui import page

OBJECTS = [obj for module in (attention, gpt) for _, obj in inspect.getmembers(module, inspect.isfunction)
           if obj.__module__ == module.__name__] + [attention.MultiHeadAttention, gpt.GPT, attention.SelfAttention_v1]


def test_many_threads_parse_one_at_a_time_and_agree(monkeypatch):
    """32 readers' threads ask for 30-odd listings at once on a fresh process. Python 3.11's parser is not safe
    to run in several threads at once (SystemError: AST constructor recursion depth mismatch), so at most one
    parse may be running at any moment; every thread gets the listing a single thread computes."""
    page._source.cache_clear()
    inside, most = 0, 0
    count = threading.Lock()
    real_parse = ast.parse

    def watched_parse(*args, **kwargs):
        nonlocal inside, most
        with count:
            inside += 1
            most = max(most, inside)
        time.sleep(0.002)  # widen the window two unguarded threads would share
        try:
            return real_parse(*args, **kwargs)
        finally:
            with count:
                inside -= 1

    monkeypatch.setattr(ast, "parse", watched_parse)
    start = threading.Barrier(32)

    def reader(i: int) -> list[str]:
        start.wait()
        order = OBJECTS[i % len(OBJECTS):] + OBJECTS[: i % len(OBJECTS)]
        return [page.source_of(obj) for obj in order]

    with ThreadPoolExecutor(32) as pool:
        results = list(pool.map(reader, range(32)))
    monkeypatch.setattr(ast, "parse", real_parse)
    assert most == 1
    expected = {obj: page._source.__wrapped__(obj, False) for obj in OBJECTS}
    for i, listing in enumerate(results):
        shift = i % len(OBJECTS)
        assert listing == [expected[obj] for obj in OBJECTS[shift:] + OBJECTS[:shift]]
    assert page._source.cache_info().misses == len(OBJECTS)  # each prepared once


def test_listings_drop_docstrings_only():
    listing = page.source_of(attention.SelfAttention_v1)
    assert "class SelfAttention_v1" in listing and '"""' not in listing
    assert page.source_of(attention.SelfAttention_v1, docstring=True).count('"""') >= 2
