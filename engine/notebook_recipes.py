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
from engine.bench.attention import BenchSize, bench_size, results_table
from engine.corpus import RECORD_SEPARATOR, corpus_from_text
from engine.figures.core import SEPARATORS, attention_heatmap
from engine.gpt import GPTConfig
from engine.lab.models import FormError, LabModel, PoemForm, generate
from engine.sections import causal_mask as causal_mask_sections
from engine.sections import memory_layout as memory_layout_sections
from engine.sections.dropout import chapter_causal_weights, dropout_expectation, dropout_pair, train_vs_eval
from engine.sections.memory_layout import chapter_layout, key_head_walk, score_cost
from engine.sections.multi_head import (
    LESSON_SEED,
    heads_on_line,
    page_line,
    split_check,
    split_output,
    wrapper_output,
    wrapper_vs_split,
)
from engine.sections.positional_encodings import (
    permutation_by_layers,
    position_scores,
    rope_pair_table,
    rope_supported,
    seeded_rope_rotation,
    sinusoidal_position_table,
    untrained_table,
)
from engine.sections.self_attention import (
    DTYPES,
    jacobian_check,
    loop_vs_matmul,
    naive_jacobian_check,
    query_walkthrough,
    softmax_numerics,
)
from engine.sections.trainable_weights import (
    dk_sweep,
    exercise_3_1,
    init_comparison,
    trainable_walkthrough,
    v1_v2_outputs,
)
from engine.training import TrainConfig, train

buffer_demo = causal_mask_sections.buffer_demo
leakage_test = causal_mask_sections.leakage_test
mask_two_ways = causal_mask_sections.mask_two_ways
masked_row_demo = causal_mask_sections.masked_row_demo
triu_explorer = causal_mask_sections.triu_explorer
v2_scores = causal_mask_sections.v2_scores
explore = memory_layout_sections.explore
shape_or_default = memory_layout_sections.shape_or_default
DTYPE_BYTES = memory_layout_sections.DTYPE_BYTES

#: The chapter's six embeddings as plain lists (the settings cell's default for page 1).
CHAPTER_INPUTS = [list(row) for row in A.CHAPTER_INPUTS]
#: The Lab recipe's defaults: a two-poem corpus, the default GPT and training configs as plain dicts.
LAB_RECORDS = ["白日依山尽\n黄河入海流\n欲穷千里目\n更上一层楼", "床前明月光\n疑是地上霜\n举头望明月\n低头思故乡"]
LAB_MODEL = dataclasses.asdict(GPTConfig())
LAB_TRAINING = dataclasses.asdict(TrainConfig())
#: The model the Lab notebook trains (its training cell sets it; its generation cell samples from it).
lab_model: LabModel | None = None


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


def say(name, value):
    """Print ``name = value`` for a value that is no number: text, a truth value, a list of them (JSON)."""
    print(f"{name} = {json.dumps(value, ensure_ascii=False)}")


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


def self_attention_numerics(inputs: list = CHAPTER_INPUTS, query_token: str = "journey", scale: float = 1.0,
                            dtype: str = "float32"):
    """Naive and stable softmax on the query's scores times ``scale`` in ``dtype`` (the page's section 3)."""
    x = torch.tensor(inputs, dtype=torch.float32)  # (6, 3): the page's embeddings
    steps = query_walkthrough(x, list(A.CHAPTER_TOKENS).index(query_token))
    numerics = softmax_numerics(steps.attn_scores, float(scale), DTYPES[dtype])
    for column in numerics.table.columns:
        show(column, numerics.table[column].tolist())
    show("naive_broken", numerics.naive_broken)
    say("stable_finite", numerics.stable_finite)
    show("overflow", numerics.overflow, decimals=2)
    show("underflow", numerics.underflow, decimals=2)


def self_attention_jacobian(inputs: list = CHAPTER_INPUTS, jacobian_query: str = "journey"):
    """The softmax's Jacobian and the divide-by-the-sum one, closed form against autograd (the page's section 4)."""
    x = torch.tensor(inputs, dtype=torch.float32)  # (6, 3): the page's embeddings
    attn_scores = A.dot_scores(x, x[list(A.CHAPTER_TOKENS).index(jacobian_query)])  # (6, 3), (3,) -> (6,)
    softmax_jac = jacobian_check(attn_scores)
    show("softmax_jacobian", softmax_jac.closed_form)
    say("softmax_matches_autograd", softmax_jac.max_abs_diff < 1e-12)
    naive_jac = naive_jacobian_check(attn_scores)
    if naive_jac is None:
        say("naive_jacobian", None)
    else:
        show("naive_jacobian", naive_jac.closed_form)
        say("naive_matches_autograd", naive_jac.max_abs_diff < 1e-12)


def self_attention_all(inputs: list = CHAPTER_INPUTS, number_separators: str = SEPARATORS):
    """Every token at once with matrix products (the page's section 5), and the page's heatmap of attn_weights
    (``number_separators``: the reader's decimal sign and group separator, as Plotly's ``layout.separators``)."""
    every = loop_vs_matmul(torch.tensor(inputs, dtype=torch.float32))  # (6, 3) inputs
    show("attn_scores[:2]", every.attn_scores[:2], chapter.SIMPLE_SCORES_FIRST_ROWS)
    show("context_vec", every.context_vec, chapter.SIMPLE_ALL_CONTEXT)
    attention_heatmap(every.attn_weights, list(A.CHAPTER_TOKENS), title="attn_weights = softmax(dim=-1)",
                      separators=number_separators).show()


# --- 2 · trainable weights -------------------------------------------------------------------------------

def trainable_query(seed: int = chapter.TRAINABLE_SEED, d_out: int = 2, query_token: str = "journey"):
    """One query through seeded W_query, W_key, W_value (the page's section 2)."""
    q = list(A.CHAPTER_TOKENS).index(query_token)
    steps = trainable_walkthrough(A.chapter_inputs(), seed, d_out, q)
    show("query", steps.query, chapter.TRAINABLE_QUERY_2)
    show("attn_scores", steps.attn_scores, chapter.TRAINABLE_SCORES_2)
    show("attn_weights", steps.attn_weights, chapter.TRAINABLE_WEIGHTS_2)
    show("context_vec", steps.context_vec, chapter.TRAINABLE_CONTEXT_2)


def trainable_dk_sweep():
    """Why 1/sqrt(d_k): the spread of q·k and the largest softmax weight, by d_k (seeded: the same for everyone)."""
    sweep = dk_sweep()
    for column in sweep.stats.columns:
        show(f"dk.{column}", sweep.stats[column].tolist())


def trainable_init():
    """torch.rand against nn.Linear's initialisation, by d_in (seeded: the same for everyone)."""
    table = init_comparison()
    for init, rows in table.groupby("init", sort=False):
        for column in rows.columns.drop("init"):
            show(f"{init}.{column}", rows[column].tolist(), decimals=7)


def trainable_exercise(seed: int = chapter.TRAINABLE_SEED, d_out: int = 2, seed_v2: int = chapter.SA_V2_SEED):
    """Exercise 3.1: SelfAttention_v2's weights, transposed, copied into SelfAttention_v1."""
    exercise = exercise_3_1(A.chapter_inputs(), d_out, seed, seed_v2)
    show("max_abs_diff_before", exercise.max_abs_diff_before)
    show("max_abs_diff_after", exercise.max_abs_diff_after, decimals=10)
    say("equal_after", exercise.equal_after)


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


def multi_head_copy(seed: int = chapter.MHA_WRAPPER_SEED, copy_heads: int = 2, copy_dim: int = 2):
    """The split layer's first row, and the wrapper's weights copied into it (compared before out_proj)."""
    split = split_output(seed)
    show("split.context_vecs[0][0]", split.context_vec[0, 0], chapter.MHA_SPLIT_FIRST_ROW)
    compare = wrapper_vs_split(seed, head_dim=int(copy_dim), num_heads=int(copy_heads))
    show("copy.max_abs_diff_before", compare.max_abs_diff_before)
    say("copy.equal_after", compare.max_abs_diff < 1e-6)


def multi_head_split(try_d_out: int = 32, try_heads: int = 4):
    """Whether d_out splits into num_heads heads, as MultiHeadAttention checks it."""
    check = split_check(int(try_d_out), int(try_heads))
    say("split.head_dim", check.head_dim)
    say("split.error", check.error)
    show("split.nearest", list(check.nearest))


def multi_head_timing():
    """How to time the variants (the page's table holds the times measured where the app runs; a reader's
    machine gives others): a small input, three timed calls each."""
    timing = bench_size(BenchSize(2, 16, 32, 2), repeats=3)
    print(results_table({"sizes": [timing]}).to_string())


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


def memory_explorer(start_shape: str = "2, 3", operation: str = "view", new_shape: str = "3, 2", d0: int = 0,
                    d1: int = 1):
    """The explorer: 1 … n laid out as the starting shape, the operation run, the storage cells it reads."""
    base, _error = shape_or_default(start_shape, (2, 3), allow_infer=False)
    target, _error = shape_or_default(new_shape, (-1,))
    run = explore(base, operation, target, (int(d0), int(d1)))
    say("explorer.ran", list(run.codes))
    say("explorer.errors", list(run.errors))
    show("explorer.reading_order", list(run.order))


def memory_cost(cost_batch: int = 8, cost_heads: int = 12, cost_head_dim: int = 64, cost_dtype: str = "float32"):
    """The bytes of attn_scores (growing with T²) and of q, k, v (growing with T)."""
    cost = score_cost(int(cost_batch), int(cost_heads), int(cost_head_dim), DTYPE_BYTES[cost_dtype])
    show("scores_bytes", cost.table["scores_bytes"].tolist())
    show("qkv_bytes", cost.table["qkv_bytes"].tolist())
    show("scores_short", cost.scores_short)
    show("scores_long", cost.scores_long)
    show("qkv_long", cost.qkv_long)
    show("growth", cost.growth)


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


def positions_tables(table_block_size: int = 128, table_n_embd: int = 128, vector_seed: int = 0):
    """The untrained learned table and the sinusoidal one: their spread and how position pairs compare."""
    untrained = untrained_table(int(table_block_size), int(table_n_embd), vector_seed)
    sinusoidal = sinusoidal_position_table(int(table_block_size), int(table_n_embd))
    show("untrained.std", untrained.std)
    show("untrained.diagonal_spread", untrained.diagonal_spread, decimals=6)
    show("sinusoidal.table[0][:8]", sinusoidal.table[0, :8])
    show("sinusoidal.diagonal_spread", sinusoidal.diagonal_spread, decimals=6)


def positions_rope(head_dim: int = 16, rope_position: int = 3, vector_seed: int = 0):
    """One vector rotated by RoPE: each pair's angle at the position, and its unchanged length."""
    if rope_supported(int(head_dim)):
        rotation = seeded_rope_rotation(int(head_dim), vector_seed)
        pairs = rope_pair_table(rotation, int(rope_position))
        show("theta", pairs["theta"].tolist(), decimals=6)
        show("angle_deg", pairs["angle_deg"].tolist(), decimals=1)
        show("wavelength", pairs["wavelength"].tolist(), decimals=1)
        show("rotation.norms[0]", rotation.norms[0])
        show("rotation.norms[position]", rotation.norms[int(rope_position)])
    else:
        say("rope_supported", False)


def positions_scores(score_encoding: str = "rope", head_dim: int = 16, score_T: int = 8, shift: int = 100,
                     vector_seed: int = 0):
    """The same q and k at every position pair: do the scores depend only on m − n?"""
    if score_encoding != "rope" or rope_supported(int(head_dim)):
        scores = position_scores(score_encoding, int(head_dim), int(score_T), int(shift), vector_seed)
        show("scores", scores.attn_scores)
        show("shifted", scores.shifted)
        show("max_diagonal_spread", scores.max_diagonal_spread, decimals=6)
        show("max_shift_diff", scores.max_shift_diff, decimals=6)
        say("distance_only", scores.distance_only)


# --- 8 · Lab ---------------------------------------------------------------------------------------------

def lab_training(corpus_records: list = LAB_RECORDS, model: dict = LAB_MODEL, training: dict = LAB_TRAINING):
    """The course's GPT trained on the notebook's slice of the corpus with the Lab's settings."""
    corpus = corpus_from_text(RECORD_SEPARATOR.join(corpus_records), "slice")
    config = GPTConfig(**{**model, "vocab_size": corpus.vocab_size, "block_size": min(model["block_size"],
                                                                                        corpus.max_block_size)})
    result = train(config, corpus, TrainConfig(**training))
    global lab_model
    lab_model = LabModel.from_result(result)
    show("step_losses", result.step_losses)
    show("train_loss", result.history["train_loss"].tolist())
    show("val_loss", result.history["val_loss"].tolist())



def lab_generation(prompt: str = chapter.LESSON_PROMPT, temperature: float = 0.8, top_k: int = 20,
                   top_p: float = 1.0, length: int = 64, sampling_seed: int = 0, line_length: int = 0,
                   n_lines: int = 0):
    """The model trained above continues the prompt with the Lab's sampling settings (top_k 0: every character;
    line_length and n_lines 0: free)."""
    form = PoemForm(line_length or None, n_lines or None) if line_length or n_lines else None
    try:
        generation = generate(lab_model, prompt, int(length), float(temperature), int(top_k) or None,
                              int(sampling_seed), top_p=float(top_p), form=form)
        say("generated", generation.new)
    except FormError as error:
        say("form_refused", error.reason)


#: Recipes by page slug, then by the qualified name of the first object of the listing they follow.
RECIPES: dict[str, dict[str, Callable]] = {
    "home": {"chapter_inputs": home_inputs},
    "self_attention": {"query_walkthrough": self_attention_query, "softmax_numerics": self_attention_numerics,
                       "dot_scores": self_attention_jacobian, "loop_vs_matmul": self_attention_all},
    "trainable_weights": {"trainable_walkthrough": trainable_query, "dk_sweep": trainable_dk_sweep,
                          "v1_v2_outputs": trainable_classes, "init_comparison": trainable_init,
                          "exercise_3_1": trainable_exercise},
    "causal_mask": {"v2_scores": causal_two_ways, "leakage_test": causal_leakage, "triu_explorer": causal_triu,
                    "CausalAttentionPlainMask": causal_buffer, "masked_row_demo": causal_masked_row},
    "dropout": {"dropout_pair": dropout_chapter, "dropout_expectation": dropout_mean,
                "train_vs_eval": dropout_modes},
    "multi_head": {"wrapper_output": multi_head_wrapper, "split_output": multi_head_copy,
                   "heads_on_line": multi_head_line, "split_check": multi_head_split,
                   "build_variants": multi_head_timing},
    "memory_layout": {"chapter_operations": memory_chapter, "explore": memory_explorer,
                      "key_head_walk": memory_heads, "score_cost": memory_cost},
    "positional_encodings": {"permutation_by_layers": positions_permutation, "untrained_table": positions_tables,
                             "rope_rotation": positions_rope, "position_scores": positions_scores},
    "lab": {"TrainingJob._work": lab_training, "generate": lab_generation},
}
#: Recipes whose cell shows how to measure, not a number the page shows (times depend on the machine): the
#: notebook puts them under its timing note and leaves them out of the numbers cells.
TIMING: frozenset[Callable] = frozenset({multi_head_timing})
