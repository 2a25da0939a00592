"""The code cells a page's notebook adds to its listings (:mod:`engine.notebook`).

Each recipe is a real function of this module; the notebook holds its *body* as a cell, and its parameters
become the notebook's settings cell (one line each, the reader's value or the parameter's default, which is the
page's). A recipe calls the page's listed functions by their bare names, so in the notebook it runs the
listings defined just above it, edited or not. :data:`RECIPES` files them by page slug and by the first object
of the "Code that ran" expander they follow. :func:`show` prints one value the page shows, rounded as the page
shows it, and the chapter's printed value beside it where the page checks one; :func:`load_engine` registers
the engine modules a notebook carries.
"""

from __future__ import annotations

import dataclasses
import json
import linecache
import sys
import types
from collections.abc import Callable

import torch

from engine import attention as A
from engine import chapter
from engine.corpus import RECORD_SEPARATOR, corpus_from_text
from engine.gpt import GPTConfig
from engine.sections import causal_mask as causal_mask_sections
from engine.sections.dropout import chapter_causal_weights, dropout_expectation, dropout_pair, train_vs_eval
from engine.sections.memory_layout import chapter_layout, key_head_walk
from engine.sections.multi_head import LESSON_SEED, heads_on_line, page_line, wrapper_output
from engine.sections.positional_encodings import permutation_by_layers
from engine.sections.self_attention import loop_vs_matmul, query_walkthrough
from engine.sections.trainable_weights import trainable_walkthrough, v1_v2_outputs
from engine.training import TrainConfig, train

leakage_test = causal_mask_sections.leakage_test
mask_two_ways = causal_mask_sections.mask_two_ways
v2_scores = causal_mask_sections.v2_scores

#: The chapter's six embeddings as plain lists (the settings cell's default for page 1).
CHAPTER_INPUTS = [list(row) for row in A.CHAPTER_INPUTS]
#: The Lab recipe's defaults: a two-poem corpus, the default GPT and training configs as plain dicts.
LAB_RECORDS = ["白日依山尽\n黄河入海流\n欲穷千里目\n更上一层楼", "床前明月光\n疑是地上霜\n举头望明月\n低头思故乡"]
LAB_MODEL = dataclasses.asdict(GPTConfig())
LAB_TRAINING = dataclasses.asdict(TrainConfig())


def load_engine(sources):
    """Register the engine modules ``{name: (path, source)}`` as in-memory modules, in the given order.

    Every module object is made and registered first (a package's ``__init__`` may import its submodules, which
    the order puts before it), then each is executed once under its own name (``engine.attention``), so
    ``from engine import attention`` works as in the project; its source is put in ``linecache`` under its
    relative path so tracebacks and ``inspect.getsource`` show its lines.
    """
    for name, (path, source) in sources.items():
        module = types.ModuleType(name)
        module.__file__ = path
        is_package = path.endswith("__init__.py")
        if is_package:
            module.__path__ = []
        module.__package__ = name if is_package else name.rpartition(".")[0]
        linecache.cache[path] = (len(source), None, source.splitlines(keepends=True), path)
        sys.modules[name] = module
    for name in sources:
        parent, _dot, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, sys.modules[name])
    for name, (path, source) in sources.items():
        exec(compile(source, path, "exec"), sys.modules[name].__dict__)


def show(name, value, expected=None, decimals=4):
    """Print ``name = value`` at ``decimals`` decimals, and under it the chapter's ``expected`` value with ✓
    when the two agree at those decimals (✗ when not)."""
    rounded = torch.as_tensor(value, dtype=torch.float64).round(decimals=decimals).tolist()
    print(f"{name} = {json.dumps(rounded)}")
    if expected is not None:
        mark = "✓" if chapter.matches(value, expected, decimals) else "✗"
        print(f"{' ' * len(name)} ≈ {json.dumps(torch.as_tensor(expected, dtype=torch.float64).tolist())} {mark}")


# --- Home ------------------------------------------------------------------------------------------------

def home_inputs():
    """The six 3-d embeddings of the running example."""
    show("inputs", A.chapter_inputs())


# --- 1 · self-attention ----------------------------------------------------------------------------------

def self_attention_query(inputs: list = CHAPTER_INPUTS, query_token: str = "journey"):
    """One query through the three steps (the page's section 2), checked against the chapter."""
    x = torch.tensor(inputs, dtype=torch.float32)  # (6, 3): the page's embeddings
    q = list(A.CHAPTER_TOKENS).index(query_token)
    steps = query_walkthrough(x, q)
    show("attn_scores", steps.attn_scores, chapter.SIMPLE_SCORES_JOURNEY)
    show("naive_weights", steps.naive_weights, chapter.SIMPLE_NAIVE_WEIGHTS_JOURNEY)
    show("attn_weights", steps.attn_weights, chapter.SIMPLE_SOFTMAX_WEIGHTS_JOURNEY)
    show("context_vec", steps.context_vec, chapter.SIMPLE_CONTEXT_JOURNEY)


def self_attention_all(inputs: list = CHAPTER_INPUTS):
    """Every token at once with matrix products (the page's section 5)."""
    every = loop_vs_matmul(torch.tensor(inputs, dtype=torch.float32))  # (6, 3) inputs
    show("attn_scores[:2]", every.attn_scores[:2], chapter.SIMPLE_SCORES_FIRST_ROWS)
    show("context_vec", every.context_vec, chapter.SIMPLE_ALL_CONTEXT)


# --- 2 · trainable weights -------------------------------------------------------------------------------

def trainable_query(seed: int = chapter.TRAINABLE_SEED, d_out: int = 2, query_token: str = "journey"):
    """One query through seeded W_query, W_key, W_value (the page's section 2)."""
    q = list(A.CHAPTER_TOKENS).index(query_token)
    steps = trainable_walkthrough(A.chapter_inputs(), seed, d_out, q)
    show("query", steps.query, chapter.TRAINABLE_QUERY_2)
    show("attn_scores", steps.attn_scores, chapter.TRAINABLE_SCORES_2)
    show("attn_weights", steps.attn_weights, chapter.TRAINABLE_WEIGHTS_2)
    show("context_vec", steps.context_vec, chapter.TRAINABLE_CONTEXT_2)


def trainable_classes(seed: int = chapter.TRAINABLE_SEED, d_out: int = 2, seed_v2: int = chapter.SA_V2_SEED):
    """SelfAttention_v1 and SelfAttention_v2 after their own seeds (the page's section 3)."""
    outputs = v1_v2_outputs(A.chapter_inputs(), d_out, seed, seed_v2)
    show("SelfAttention_v1", outputs.v1, chapter.SA_V1_OUTPUT)
    show("SelfAttention_v2", outputs.v2, chapter.SA_V2_OUTPUT)


# --- 3 · causal mask -------------------------------------------------------------------------------------

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


# --- 4 · dropout -----------------------------------------------------------------------------------------

def dropout_chapter(seed: int = chapter.DROPOUT_SEED):
    """nn.Dropout(0.5) on ones and on the causal weights, each after manual_seed(seed)."""
    shown = dropout_pair(chapter_causal_weights(A.chapter_inputs()), chapter.DROPOUT_P, seed)
    show("dropout(ones)", shown.ones, chapter.DROPOUT_ONES)
    show("dropout(attn_weights)", shown.weights, chapter.DROPOUT_CAUSAL)


def dropout_mean(mean_p: float = 0.5):
    """The mean over 2 000 masks converges back to the weights."""
    expectation = dropout_expectation(chapter_causal_weights(A.chapter_inputs()), float(mean_p), n_masks=2000, seed=0)
    show("final_error", expectation.final_error)
    show("error_after_10", expectation.error_after_10)


def dropout_modes(layer_p: float = 0.5):
    """CausalAttention with dropout p, twice in train() mode, once in eval() mode."""
    modes = train_vs_eval(A.chapter_inputs(), float(layer_p), chapter.DROPOUT_SEED)
    show("train_1", modes.train_1)
    show("eval_1", modes.eval_1)
    print("train_calls_differ", modes.train_calls_differ)


# --- 5 · multi-head attention ----------------------------------------------------------------------------

def multi_head_wrapper(seed: int = chapter.MHA_WRAPPER_SEED):
    """The chapter's MultiHeadAttentionWrapper (2 heads of d_out 2) on its batch of two sequences."""
    wrapper = wrapper_output(seed)
    show("context_vecs[0]", wrapper.context_vec[0], chapter.MHA_WRAPPER_OUTPUT)
    print("shape", tuple(wrapper.context_vec.shape))


def multi_head_line(line: str = chapter.LESSON_LINE, n_embd: int = chapter.LESSON_N_EMBD, num_heads: int = 4,
                    max_line: int = 12):
    """The lesson's untrained layer on a line (the page keeps its first ``max_line`` characters): every head's
    attention weights."""
    used = page_line(line, max_line)
    run = heads_on_line(used.line, n_embd, num_heads, LESSON_SEED)
    show("attn_weights", run.attn_weights)


# --- 6 · memory layout -----------------------------------------------------------------------------------

def memory_chapter():
    """The chapter's (2, 3) matrix: view, transpose, the storage and the transpose's reading order."""
    matrix = chapter_layout()
    show("M.view(3, 2)", matrix.view_3_2, chapter.LAYOUT_VIEW_3_2)
    show("M.transpose(0, 1)", matrix.transposed, chapter.LAYOUT_TRANSPOSED)
    show("storage", matrix.storage, chapter.LAYOUT_STORAGE)
    show("reading_order", matrix.reading, chapter.LAYOUT_TRANSPOSED_READING_ORDER)


def memory_heads(num_tokens: int = 4, num_heads: int = 2, head_dim: int = 2):
    """The keys of one sequence through the head split, stage by stage."""
    for stage in key_head_walk(num_tokens, num_heads, head_dim):
        show(f"{stage.title} shape", list(stage.layout.shape))


# --- 7 · positional encodings ----------------------------------------------------------------------------

def positions_permutation(n_embd: int = 32, seed: int = 0):
    """max |logits(line) − logits(permuted line)| at the last position, by n_layer and encoding."""
    sweep = permutation_by_layers(n_embd=n_embd, n_head=4, seed=seed)
    for n_layer in sweep.by_layer.index:
        show(f"n_layer {n_layer}", sweep.by_layer.loc[n_layer].tolist())
    print("columns", list(sweep.by_layer.columns))


# --- 8 · Lab ---------------------------------------------------------------------------------------------

def lab_training(corpus_records: list = LAB_RECORDS, model: dict = LAB_MODEL, training: dict = LAB_TRAINING):
    """The course's GPT trained on the notebook's slice of the corpus with the Lab's settings."""
    corpus = corpus_from_text(RECORD_SEPARATOR.join(corpus_records), "slice")
    config = GPTConfig(**{**model, "vocab_size": corpus.vocab_size, "block_size": min(model["block_size"],
                                                                                        corpus.max_block_size)})
    result = train(config, corpus, TrainConfig(**training))
    show("step_losses", result.step_losses)
    show("train_loss", result.history["train_loss"].tolist())
    show("val_loss", result.history["val_loss"].tolist())


#: Recipes by page slug, then by the qualified name of the first object of the listing they follow.
RECIPES: dict[str, dict[str, Callable]] = {
    "home": {"chapter_inputs": home_inputs},
    "self_attention": {"query_walkthrough": self_attention_query, "loop_vs_matmul": self_attention_all},
    "trainable_weights": {"trainable_walkthrough": trainable_query, "v1_v2_outputs": trainable_classes},
    "causal_mask": {"v2_scores": causal_two_ways, "leakage_test": causal_leakage},
    "dropout": {"dropout_pair": dropout_chapter, "dropout_expectation": dropout_mean,
                "train_vs_eval": dropout_modes},
    "multi_head": {"wrapper_output": multi_head_wrapper, "heads_on_line": multi_head_line},
    "memory_layout": {"chapter_operations": memory_chapter, "key_head_walk": memory_heads},
    "positional_encodings": {"permutation_by_layers": positions_permutation},
    "lab": {"TrainingJob._work": lab_training},
}
