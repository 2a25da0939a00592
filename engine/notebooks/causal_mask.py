"""The recipes of page 3's notebook, the causal mask (:mod:`engine.notebooks`)."""

from __future__ import annotations

from engine import attention as A
from engine import chapter
from engine.notebooks.core import say, show
from engine.sections.causal_mask import (
    buffer_demo,
    leakage_test,
    mask_two_ways,
    masked_row_demo,
    triu_explorer,
    v2_scores,
)


def causal_two_ways():
    """The chapter's two masking routes on SelfAttention_v2's scores (seed 789, d_out 2)."""
    result = mask_two_ways(v2_scores(A.chapter_inputs(), seed=chapter.SA_V2_SEED, d_out=2), d_k=2)
    show("attn_weights", result.attn_weights, chapter.SA_V2_WEIGHTS)
    show("masked_simple_norm", result.masked_simple_norm, chapter.CAUSAL_WEIGHTS)
    show("masked_scores", result.masked_scores, chapter.CAUSAL_MASKED_SCORES)
    show("attn_weights_causal", result.attn_weights_causal, chapter.CAUSAL_WEIGHTS)


def causal_leakage(leak_token: str = "starts", leak_delta: float = 1.0):
    """Perturb one token and see which output rows move, with and without the mask."""
    leak = leakage_test(A.chapter_inputs(), list(A.CHAPTER_TOKENS).index(leak_token), float(leak_delta))
    show("changed_rows", list(leak.changed_rows))
    print("leaks", leak.leaks)


def causal_triu(triu_k: int = 1):
    """torch.triu(torch.ones(6, 6), diagonal=k) read as a mask: what each row sees."""
    triu = triu_explorer(len(A.CHAPTER_TOKENS), int(triu_k))
    show("triu_mask", triu.mask)
    show("visible_per_row", list(triu.visible_per_row))
    say("kind", triu.kind)


def causal_buffer():
    """The mask as a buffer, a non-persistent buffer or a plain attribute, after .to("meta")."""
    table = buffer_demo("meta")
    for column in ("holder", "state_dict_keys", "mask_device", "forward_ok"):
        say(f"buffer.{column}", [str(v) if column != "forward_ok" else bool(v) for v in table[column]])


def causal_masked_row(nan_row: str = "with", guard: str = "none"):
    """Every position of one row hidden, and a guard against its NaN, on SelfAttention_v2's scores."""
    scores = v2_scores(A.chapter_inputs(), seed=chapter.SA_V2_SEED, d_out=2)  # (6, 6)
    demo = masked_row_demo(scores, list(A.CHAPTER_TOKENS).index(nan_row), guard)
    show("masked_row.attn_weights", demo.attn_weights)
    show("nan_rows", list(demo.nan_rows))


RECIPES = {"v2_scores": causal_two_ways, "leakage_test": causal_leakage, "triu_explorer": causal_triu,
           "CausalAttentionPlainMask": causal_buffer, "masked_row_demo": causal_masked_row}
