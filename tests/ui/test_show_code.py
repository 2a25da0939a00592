"""The code a page shows is the code that ran: every project function or class a shown object calls is shown too.

``ui.page.show_code(*objects)`` opens the source of the engine functions and classes a page just called ("Code
that ran"). A listing that calls a helper the reader cannot open hides part of the computation (a private helper
behind every chapter class would hide the scores, the scale, the mask, the softmax and the weighted sum).
This test parses every ``show_code(...)`` call in ``views/`` and ``ui/`` with ``ast``, resolves what it shows
through the page's imports, parses each shown object's source, and resolves every call in it:

* a bare name, against the module the object is defined in (``_check_rank(...)``);
* a dotted name, attribute by attribute from there (``A.causal_mask(...)``, ``torch.softmax(...)``);
* ``self.name(...)``, against the class of a shown method or class (``self.split_heads(...)``).

A callee belongs to the project when its module is under ``engine``, ``ui`` or ``views``. It must then be shown
on the same page (by any ``show_code`` call of that view file), belong to a shown class, or be named in
:data:`EXEMPT` with the reason a reader does not need it there. Building a result dataclass or raising a
project exception is not checked: the record's fields and the error's name are in the listing. Calls on local
objects (``head(x)`` for a module in a list) cannot be resolved without running the code and are not checked.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ("engine", "ui", "views")

#: Project functions and classes a shown listing may call without showing them: "module.qualname" -> why.
EXEMPT: dict[str, str] = {
    # argument checks: they raise on a bad input and compute nothing
    "engine.attention._check_rank": "an argument check: it raises on a tensor of the wrong rank",
    "engine.attention._check_dropout": "an argument check: it raises on a rate outside [0, 1)",
    "engine.attention._check_mask_device": "an argument check: it raises the error CUDA's masked_fill_ raises "
                                           "itself, where the meta and CPU kernels do not check",
    "engine.positions._as_positions": "an argument check: it turns n or a list of positions into a 1-d tensor",
    "engine.sections.positional_encodings._check_scores_input": "an argument check on the vectors and the shift",
    "engine.sampling.check_sampling": "an argument check on the temperature, top_k and the prompt's length",
    "engine.lab.runner.LabRunner._check_browser": "a check: it refuses a second training from the same browser",
    "engine.lab.internals._read_as_typed": "labels only: the characters the model reads, written as the reader typed "
                                        "them, for a chart's axis",
    # the chapter's code, taught and shown on the page that introduces it
    "engine.attention.causal_mask": "torch.triu(ones, diagonal=1) as a bool mask, shown on pages 3 and 4",
    "engine.attention.CausalAttention": "the wrapper's head, taught and shown on pages 3 and 4",
    "engine.attention.MultiHeadAttention": "the chapter's layer, shown on page 5; the memory page walks its keys",
    "engine.positions.rope_cos_sin": "RoPE's angles, taught and shown on page 7 (positional encodings)",
    "engine.positions.rotate_pairs": "RoPE's rotation, taught and shown on page 7 (positional encodings)",
    "engine.positions.alibi_bias": "ALiBi's bias on the scores, an encoding of page 7 (positional encodings)",
    "engine.gpt.GPT": "the course's whole model (engine.gpt); each page shows the part it studies",
    "engine.tokenizer.CharTokenizer": "the character tokenizer: a lookup table from characters to ids",
    "engine.checkpoint.load_checkpoint": "reads the shipped model's safetensors file after checking its header",
    # bookkeeping around the computation a page shows
    "engine.sections.memory_layout._stage": "records one stage's index maps and head ids for the figure",
    "engine.sections.multi_head.chapter_batch": "the chapter's six embeddings stacked twice, shape (2, 6, 3)",
    "engine.sections.multi_head.lesson_config": "the lesson's GPTConfig values (sizes, biases, no dropout)",
    "engine.sections.multi_head.line_embeddings": "seeded random embeddings of the line's characters",
    "engine.sections.multi_head.shape_table": "writes each step's tensor shape into the page's table",
    "engine.sections.multi_head.nearest_divisors": "lists the head counts that divide d_out, for the message",
    "engine.sections.memory_layout.score_tensor_bytes": "B · H · T² · element_size, shown on the memory page",
    "engine.sections.positional_encodings._score_matrices": "the loop over positions both score matrices share",
    "engine.sections.positional_encodings.diagonal_spread": "max - min along each diagonal of a (T, T) matrix",
    "engine.sections.positional_encodings.seeded_vectors": "standard-normal vectors from a private seeded generator",
    "engine.sections.trainable_weights._close": "torch.testing.assert_close turned into True or False",
    "engine.sections.trainable_weights._box_stats": "quartiles and percentiles of a sample, for the box plot",
    # the benchmark's harness: the page's table names every variant it times
    "engine.bench.attention._forward_fn": "the timed forward call under torch.no_grad",
    "engine.bench.attention._forward_backward_fn": "the timed forward and backward call",
    "engine.bench.attention._paired_ratio": "the median of per-round time ratios",
    "engine.bench.attention.build_book_reference": "the book's class with the split layer's weights copied in",
    "engine.bench.attention.make_input": "a seeded standard-normal input of the benchmark's size",
    "engine.bench.attention.outputs": "every variant's output, to compare them with the split layer",
    "engine.bench.attention.time_interleaved": "calls every variant in turn, round after round, with a clock",
    "engine.bench.attention.FoldedScaleAttention": "a timed variant: the split layer with the scale folded into q",
    "engine.bench.attention.FusedQKVAttention": "a timed variant: one qkv Linear, with four attention kernels",
    "engine.bench.attention._TorchMHA": "a timed variant: torch.nn.MultiheadAttention with a causal mask",
    "engine.bench.attention._WrapperWithProj": "a timed variant: the wrapper followed by an output projection",
    # the Lab: the course's training and generation, around the parts its listings show
    "engine.device.pick_device": "chooses the CPU or an available accelerator for the training",
    "engine.training.seeded_model": "builds the GPT under the seeded lock of engine.rng",
    "engine.training.make_optimizer": "AdamW with weight decay on the matrices only, as the course sets it",
    "engine.training.estimate_loss": "the mean loss over fixed evaluation batches, in eval mode",
    "engine.training.private_dropout": "gives dropout the training's own generator instead of the global one",
    "engine.training._callbacks": "calls the page's progress callbacks",
    "engine.training._stop_fn": "reads the stop flag of the page's Stop button",
    "engine.training._resume_key": "the settings a saved state must match to be resumed (the command line's --resume)",
    "engine.training.load_train_state": "reads and checks a saved training state (--resume only)",
    "engine.training.save_train_state": "writes the resumable state after an evaluation (--resume only)",
    "engine.gpt.eval_mode": "a context manager that switches a model to eval() and back",
    "engine.sampling.sample_next": "draws the next id from the softmax of the last logits (temperature, top_k)",
    "engine.sampling.sampling_probs": "the softmax of the logits after temperature and top_k",
    "engine.sampling.new_cache": "allocates the KV cache, one key and value tensor per block",
    "engine.sampling.forward_cached": "the forward pass that reads and extends the KV cache",
    "engine.sampling._reuses_cache": "whether the next step can extend the cache or must rebuild it",
    "engine.lab.experiments.stats.paired_comparison": "the paired t test over seeds, whose method the page states",
    "engine.presets.preset": "the course's named model sizes, a record the Lab's controls show",
    "engine.gpt._linear_shapes": "the weight and bias shapes of one nn.Linear(d_in, d_out)",
    "engine.lab.generation.banned_ids": "the ids generation never emits (the unknown token's)",
    "engine.lab.poem_forms.poem_rule": "the punctuation rule of a five- or seven-character poem line",
    "engine.lab.models.corpus_fingerprint": "a hash of the corpus, the key of the cached experiments",
    "engine.lab.internals._last_forward": "the eval-mode forward of the prompt, with the attention weights",
    "engine.lab.internals._initial_position_table": "the position table of the same model before training",
    "engine.lab.internals._neighbour_sim": "the mean cosine similarity of neighbouring positions",
    "engine.lab.jobs.TrainingJob": "the training thread the runner starts (its _work is shown)",
    "engine.lab.runner.LabRunner.lookup": "finds a running or finished job by its key",
}


def _views() -> list[Path]:
    return sorted((ROOT / "views").glob("*.py"))


def _show_code_calls(tree: ast.AST) -> Iterator[ast.Call]:
    """Every ``show_code(...)`` or ``<anything>.show_code(...)`` call of a parsed file."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if name == "show_code":
                yield node


def _dotted(node: ast.AST) -> list[str] | None:
    """``a.b.c`` as ["a", "b", "c"]; None for anything else (a call, a subscript)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


def _namespace(tree: ast.Module) -> dict[str, object]:
    """The names a page script imports from the project (module aliases and imported objects)."""
    names: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PROJECT:
            for alias in node.names:
                try:
                    value = importlib.import_module(f"{node.module}.{alias.name}")
                except ModuleNotFoundError:
                    value = getattr(importlib.import_module(node.module), alias.name)
                names[alias.asname or alias.name] = value
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in PROJECT:
                    names[alias.asname or alias.name.split(".")[0]] = importlib.import_module(alias.name)
    return names


def _follow(start: object, attrs: list[str]) -> object | None:
    value = start
    for attr in attrs:
        value = getattr(value, attr, None)
        if value is None:
            return None
    return value


def _resolve(key: str) -> object | None:
    """The object a "module.qualname" key names (the longest importable prefix is the module)."""
    parts = key.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        return _follow(module, parts[cut:])
    return None


def _in_project(obj: object) -> bool:
    module = getattr(obj, "__module__", None) or ""
    return module.split(".")[0] in PROJECT and (inspect.isfunction(obj) or inspect.isclass(obj))


def _key(obj: object) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


def _owner(obj: object) -> type | None:
    """The class a function is defined in (from its qualified name), or None for a module-level function."""
    if inspect.isclass(obj):
        return obj
    path = obj.__qualname__.split(".")[:-1]
    if not path or "<locals>" in path:
        return None
    owner = _follow(importlib.import_module(obj.__module__), path)
    return owner if inspect.isclass(owner) else None


def _holds_computation(obj: object) -> bool:
    """False for a result dataclass (a frozen record of what a section computed) or an exception class."""
    return not (inspect.isclass(obj) and (dataclasses.is_dataclass(obj) or issubclass(obj, BaseException)))


def _callees(obj: object) -> Iterator[tuple[str, object]]:
    """(text of the call, resolved callee) for every call in ``obj``'s source that resolves to a project object."""
    obj = inspect.unwrap(obj)
    source = textwrap.dedent(inspect.getsource(obj))
    tree = ast.parse(source)
    top = tree.body[0]
    skip = {id(n) for d in getattr(top, "decorator_list", []) for n in ast.walk(d)}
    module = importlib.import_module(obj.__module__)
    owner = _owner(obj)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or id(node) in skip:
            continue
        parts = _dotted(node.func)
        if parts is None:
            continue
        if parts[0] == "self":
            target = _follow(owner, parts[1:2]) if owner is not None and len(parts) == 2 else None
        else:
            target = _follow(module, parts)
        target = inspect.unwrap(target) if callable(target) else target
        if target is not None and _in_project(target):
            yield ".".join(parts), target


def _pages() -> list[tuple[str, list[object]]]:
    """(view file, the objects its show_code calls show) for every view that shows code."""
    pages = []
    for path in _views():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = _namespace(tree)
        shown = []
        for call in _show_code_calls(tree):
            for arg in call.args:
                parts = _dotted(arg)
                assert parts is not None and parts[0] in names, (
                    f"{path.name}:{call.lineno}: show_code argument {ast.unparse(arg)} is not a project name")
                obj = _follow(names[parts[0]], parts[1:])
                assert obj is not None and _in_project(obj), f"{path.name}:{call.lineno}: {ast.unparse(arg)}"
                shown.append(obj)
        if shown:
            pages.append((path.name, shown))
    return pages


PAGES = _pages()


def test_every_page_with_engine_calls_shows_code():
    """The walk finds the pages that show code (it would pass vacuously on a renamed helper)."""
    assert {name for name, _ in PAGES} >= {"self_attention.py", "trainable_weights.py", "causal_mask.py",
                                           "dropout.py", "multi_head.py", "positional_encodings.py", "lab.py"}


def test_ui_shows_no_code_of_its_own():
    """show_code is called by the page scripts only (ui/ defines it)."""
    for path in sorted((ROOT / "ui").glob("*.py")):
        calls = list(_show_code_calls(ast.parse(path.read_text(encoding="utf-8"))))
        assert not calls, f"{path.name} calls show_code at line {calls[0].lineno}"


@pytest.mark.parametrize("page, shown", PAGES, ids=[name for name, _ in PAGES])
def test_what_a_shown_listing_calls_is_shown_on_the_same_page(page, shown):
    unwrapped = [inspect.unwrap(obj) for obj in shown]
    keys = {_key(obj) for obj in unwrapped}
    classes = {obj for obj in unwrapped if inspect.isclass(obj)}
    hidden = []
    for obj in unwrapped:
        for text, callee in _callees(obj):
            key = _key(callee)
            owner = _owner(callee)
            if (key in keys or key in EXEMPT or not _holds_computation(callee)
                    or (owner is not None and any(issubclass(c, owner) for c in classes))):
                continue
            hidden.append(f"{_key(obj)} calls {text} ({key})")
    assert not hidden, f"{page}: shown code calls project code the page does not show:\n" + "\n".join(hidden)


def test_the_exemptions_name_real_functions_that_a_listing_calls():
    """Every exemption names an existing function, with a reason, that some shown listing calls."""
    called = {_key(callee) for _, shown in PAGES for obj in shown for _, callee in _callees(obj)}
    for key, reason in EXEMPT.items():
        assert _resolve(key) is not None, key
        assert len(reason.split()) >= 5, key
        assert key in called, f"{key} is exempt but no shown listing calls it"


def test_the_walk_resolves_the_calls_it_must_check():
    """The resolver sees a bare name, a dotted module path, and self.method inside a class."""
    from engine import attention as A
    from engine.bench import attention as bench

    found = {text: _key(callee) for text, callee in _callees(A.MultiHeadAttention)}
    assert found["_check_rank"] == "engine.attention._check_rank"
    assert found["causal_mask"] == "engine.attention.causal_mask"
    assert found["_check_mask_device"] == "engine.attention._check_mask_device"
    found = {text: _key(callee) for text, callee in _callees(bench.build_variants)}
    assert found["A.copy_wrapper_into_split"] == "engine.attention.copy_wrapper_into_split"
    assert found["A.MultiHeadAttention"] == "engine.attention.MultiHeadAttention"
    found = {text: _key(callee) for text, callee in _callees(bench.FoldedScaleAttention)}
    assert found["self.split_heads"] == "engine.attention.MultiHeadAttention.split_heads"
