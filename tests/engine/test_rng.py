"""engine.rng: chapter-style seeding stays correct with several readers at once, and does not leak."""

from concurrent.futures import ThreadPoolExecutor

import torch

from engine import chapter
from engine.rng import uses_global_rng


@uses_global_rng
def chapter_query_weights():
    torch.manual_seed(chapter.TRAINABLE_SEED)
    W_query = torch.rand(3, 2)
    torch.rand(1000)  # a long draw gives another thread time to interleave
    return W_query


def test_seeded_calls_from_many_threads_agree():
    expected = chapter_query_weights()

    @uses_global_rng
    def other_reader(seed):
        torch.manual_seed(seed)
        return torch.rand(5000).sum()

    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(chapter_query_weights) for _ in range(40)]
        futures += [pool.submit(other_reader, s) for s in range(40)]
        results = [f.result() for f in futures[:40]]
    for r in results:
        torch.testing.assert_close(r, expected, rtol=0, atol=0)


def test_seed_does_not_leak_out_of_the_call():
    torch.manual_seed(7)
    before = torch.random.get_rng_state()
    chapter_query_weights()
    assert torch.equal(torch.random.get_rng_state(), before)
