"""engine.checkpoint against crafted files: checked from the header, before anything is allocated."""

import json
import struct
import subprocess
import sys
import textwrap

import pytest
import safetensors.torch
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import budget
from engine.checkpoint import (
    CHECKPOINT_FORMAT,
    META_FILE,
    WEIGHTS_FILE,
    CheckpointError,
    checkpoint_from_bytes,
    checkpoint_to_bytes,
    load_checkpoint,
    save_checkpoint,
)
from engine.gpt import GPT
from engine.presets import preset
from engine.tokenizer import CharTokenizer

pytestmark = pytest.mark.usefixtures("one_thread")

CHARS = "白日依山尽黄河入海流\n"


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return GPT(preset("tiny", vocab_size=len(CHARS))).eval()


@pytest.fixture(scope="module")
def tokenizer():
    return CharTokenizer(CHARS)


def meta_for(config: dict, chars: str = CHARS) -> dict:
    return {"format": CHECKPOINT_FORMAT, "config": config, "tokenizer": {"format": "char-tokenizer/1", "chars": chars},
            "summary": {}}


def raw_safetensors(header: dict, data: bytes = b"") -> bytes:
    """A safetensors blob written by hand: 8-byte little-endian header length, JSON header, data."""
    blob = json.dumps(header).encode("utf-8")
    return struct.pack("<Q", len(blob)) + blob + data


def crafted_huge(n_embd: int = 1_000_000) -> bytes:
    """~420 bytes: a description declaring n_embd 10^6, and one tiny tensor."""
    config = preset("tiny", vocab_size=len(CHARS), n_embd=n_embd, n_head=1).to_dict()
    header = {"__metadata__": {"checkpoint": json.dumps(meta_for(config), ensure_ascii=False)},
              "tok_emb.weight": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}
    return raw_safetensors(header, b"\x00" * 4)


def test_a_declared_huge_model_is_refused_from_the_header(monkeypatch):
    data = crafted_huge()
    assert len(data) < 600
    monkeypatch.setattr(safetensors.torch, "load", lambda *a: pytest.fail("nothing may be read past the header"))
    monkeypatch.setattr(GPT, "__init__", lambda *a: pytest.fail("no model may be built"))
    with pytest.raises(CheckpointError, match="larger than this app allows") as info:
        checkpoint_from_bytes(data, where="huge.safetensors")
    assert info.value.reason == "too_large" and "n_embd 1000000 > 256" in str(info.value)


def test_refusing_a_crafted_checkpoint_costs_memory_near_its_size():
    """Peak RSS of a fresh interpreter refusing the crafted file grows < 20 MB (before: a model of n_embd 64,000)."""
    script = textwrap.dedent(f"""
        import resource, sys
        sys.path.insert(0, {str(__import__('pathlib').Path(__file__).resolve().parents[2])!r})
        import torch
        from engine.checkpoint import CheckpointError, checkpoint_from_bytes
        from tests.engine.test_checkpoint import crafted_huge
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            checkpoint_from_bytes(crafted_huge(64_000))
        except CheckpointError as exc:
            print(exc.reason)
        print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    reason, grown_mb = out.stdout.split()
    assert reason == "too_large" and int(grown_mb) < 20, out


def test_shapes_are_checked_against_the_declared_config(model, tokenizer):
    good = checkpoint_to_bytes(model, tokenizer)
    (length,) = struct.unpack("<Q", good[:8])
    header = json.loads(good[8 : 8 + length])
    data = good[8 + length :]

    def variant(change):
        h = json.loads(json.dumps(header))
        change(h)
        return raw_safetensors(h, data)

    def grow(h):  # a shape larger than the config implies, with a byte range to match
        h["tok_emb.weight"]["shape"] = [len(CHARS), 10_000]

    def offsets(h):  # the tensor table claims more data than the file holds
        h["lm_head.weight"]["data_offsets"][1] += 4 * 10**9

    def dtype(h):
        h["lm_head.weight"]["dtype"] = "F64"

    def missing(h):
        del h["ln_f.weight"]

    def extra(h):
        h["evil"] = {"dtype": "F32", "shape": [2**31], "data_offsets": [0, 2**33]}

    def not_a_list(h):
        h["ln_f.bias"]["data_offsets"] = "0-4"

    for change in (grow, offsets, dtype, missing, extra, not_a_list):
        with pytest.raises(CheckpointError) as info:
            checkpoint_from_bytes(variant(change))
        assert info.value.reason == "shapes", change.__name__


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_weights_are_refused(model, tokenizer, value):
    broken = GPT(model.config)
    broken.load_state_dict(model.state_dict())
    with torch.no_grad():
        broken.blocks[0].attn.qkv.weight[3, 5] = value
    with pytest.raises(CheckpointError, match="NaN or infinite") as info:
        checkpoint_from_bytes(checkpoint_to_bytes(broken, tokenizer))
    assert info.value.reason == "not_finite" and "blocks.0.attn.qkv.weight" in str(info.value)


@pytest.mark.parametrize("data, reason", [
    (b"", "missing"),
    (struct.pack("<Q", 2**63) + b"{}", "unreadable"),  # a header length past the data
    (raw_safetensors({"__metadata__": {"checkpoint": "x" * (budget.MAX_HEADER_BYTES + 1)}}), "too_large"),
    (raw_safetensors([1, 2, 3]), "unreadable"),  # a header that is not an object
    (raw_safetensors({"__metadata__": {"checkpoint": "{not json"}}), "format"),
    (raw_safetensors({"__metadata__": "a string"}), "format"),
    (raw_safetensors({"__metadata__": {"checkpoint": json.dumps(meta_for({"n_embd": -1}))}}), "config"),
    (raw_safetensors({"__metadata__": {"checkpoint": json.dumps(meta_for({"n_embd": 32, "evil": 1}))}}), "config"),
    (raw_safetensors({"__metadata__": {"checkpoint": json.dumps(
        meta_for(preset("tiny", vocab_size=len(CHARS) + 1).to_dict()))}}), "config"),  # vocabulary != vocab_size
    (raw_safetensors({"__metadata__": {"checkpoint": json.dumps(meta_for(  # a consistent vocabulary over the cap
        preset("tiny", vocab_size=budget.MAX_VOCAB + 1).to_dict(),
        "".join(chr(0x4E00 + i) for i in range(budget.MAX_VOCAB + 1))))}}), "too_large"),
])
def test_crafted_bytes_give_a_reason_not_a_traceback(data, reason):
    with pytest.raises(CheckpointError) as info:
        checkpoint_from_bytes(data)
    assert info.value.reason == reason


def test_oversized_files_are_refused_before_they_are_read(tmp_path):
    big = tmp_path / "big.safetensors"
    with open(big, "wb") as f:
        f.truncate(budget.MAX_CHECKPOINT_BYTES + 1)  # sparse: no disk or memory used
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(big)
    assert info.value.reason == "too_large"


def test_a_folder_whose_description_declares_a_huge_model_is_refused(model, tokenizer, tmp_path):
    folder = save_checkpoint(tmp_path / "c", model, tokenizer)
    meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    meta["config"]["n_layer"] = 10_000  # the SHA-256 still matches: only the description lies
    (folder / META_FILE).write_text(json.dumps(meta), encoding="utf-8")
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(folder)
    assert info.value.reason == "too_large"
    (folder / WEIGHTS_FILE).write_bytes(b"\x00" * 16)
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(folder)
    assert info.value.reason == "mismatch"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_random_damage_gives_a_checkpoint_error_or_the_same_model(model, tokenizer, data):
    good = checkpoint_to_bytes(model, tokenizer)
    position = data.draw(st.integers(0, len(good) - 1))
    damaged = bytearray(good)
    damaged[position] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(len(good) // 2, len(good)))
    try:
        loaded = checkpoint_from_bytes(bytes(damaged[:cut]))
    except CheckpointError:
        return
    for tensor in loaded.model.state_dict().values():  # what loads is finite and within the caps
        assert bool(torch.isfinite(tensor).all())
    assert loaded.config.n_embd <= budget.MAX_N_EMBD and loaded.config.vocab_size <= budget.MAX_VOCAB


# --- the description, field by field ----------------------------------------------------------------------------------


def with_description(data: bytes, change) -> bytes:
    """A valid single-file checkpoint whose embedded JSON description ``change(meta)`` rewrote (weights untouched)."""
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    meta = json.loads(header["__metadata__"]["checkpoint"])
    changed = change(meta)
    header["__metadata__"]["checkpoint"] = changed if isinstance(changed, str) else json.dumps(meta)
    return raw_safetensors(header, data[8 + length :])


def set_in(*path_and_value):
    *path, value = path_and_value

    def change(meta):
        target = meta
        for key in path[:-1]:
            target = target.setdefault(key, {})
        target[path[-1]] = value

    return change


@pytest.fixture(scope="module")
def good_bytes(model, tokenizer):
    summary = {"corpus": "tang300", "steps_done": 3, "stopped": False, "final_train_loss": 2.5, "final_val_loss": 2.6,
               "wall_s": 1.5, "tokens_per_s": 900.0, "device": "cpu", "torch_version": torch.__version__,
               "train_config": {"steps": 3, "batch_size": 2, "learning_rate": 1e-3, "seed": 7, "device": None},
               "history": {"step": [0, 3], "train_loss": [2.9, 2.5], "val_loss": [2.9, 2.6]}}
    return checkpoint_to_bytes(model, tokenizer, summary)


@pytest.mark.parametrize("change, reason", [
    (set_in("config", "causal", "no"), "config"),
    (set_in("config", "bias", 1), "config"),
    (set_in("config", "n_layer", True), "config"),
    (set_in("config", "n_layer", 2.0), "config"),
    (set_in("config", "dropout", float("nan")), "config"),
    (set_in("config", "attn_dropout", "0.1"), "config"),
    (set_in("config", "pos_encoding", ["learned"]), "config"),
    (set_in("config", "n_embd", 10**400), "config"),
    (set_in("config", "wat", 1), "config"),
    (lambda m: m.__setitem__("config", [1, 2]), "config"),
    (set_in("tokenizer", "chars", CHARS[:-1] + "\ud800"), "config"),  # a lone surrogate, same vocabulary size
    (set_in("tokenizer", "chars", 12), "config"),
    (set_in("summary", "final_val_loss", 10**400), "summary"),
    (lambda m: json.dumps(m).replace('"final_val_loss": 2.6', '"final_val_loss": 1e400'), "summary"),  # JSON's inf
    (lambda m: json.dumps(m).replace('"final_val_loss": 2.6', '"final_val_loss": NaN'), "summary"),
    (set_in("summary", "final_val_loss", "2.6"), "summary"),
    (set_in("summary", "final_train_loss", -1), "summary"),
    (set_in("summary", "steps_done", 3.5), "summary"),
    (set_in("summary", "stopped", "no"), "summary"),
    (set_in("summary", "corpus", "x" * 5000), "summary"),
    (set_in("summary", "corpus", "\udc00"), "summary"),
    (set_in("summary", "train_config", "seed", 10**30), "summary"),
    (set_in("summary", "train_config", "seed", -1), "summary"),
    (set_in("summary", "train_config", "seed", 7.5), "summary"),
    (set_in("summary", "train_config", "learning_rate", float("inf")), "summary"),
    (set_in("summary", "train_config", [7]), "summary"),
    (set_in("summary", "history", "step", [0, "3"]), "summary"),
    (set_in("summary", "history", "step", [0]), "summary"),  # columns of different lengths
    (set_in("summary", "history", "step", list(range(budget.MAX_STEPS + 2))), "summary"),
    (set_in("summary", [1]), "summary"),
    (lambda m: "[" * 100_000 + "]" * 100_000, "format"),  # nesting past the parser's recursion limit
    (lambda m: json.dumps(m).replace('"steps_done": 3', '"steps_done": ' + "9" * 5000), "format"),  # > 4300 digits
])
def test_a_crafted_description_is_refused_with_a_reason(good_bytes, change, reason):
    crafted = with_description(good_bytes, change)
    with pytest.raises(CheckpointError) as caught:
        checkpoint_from_bytes(crafted, where="crafted.safetensors")
    assert caught.value.reason == reason and str(caught.value).startswith("crafted.safetensors")


def test_the_summary_keeps_only_checked_fields(good_bytes):
    extra = with_description(good_bytes, set_in("summary", "injected", {"deep": ["\ud800", 10**400]}))
    loaded = checkpoint_from_bytes(extra)
    assert "injected" not in loaded.summary and loaded.summary["train_config"]["seed"] == 7
    assert loaded.summary["final_val_loss"] == 2.6 and loaded.summary["history"]["step"] == [0, 3]
    json.dumps(loaded.summary, allow_nan=False).encode("utf-8")  # everything kept is plain JSON and UTF-8


def test_the_shipped_and_trained_descriptions_pass_unchanged():
    from engine.checkpoint import SHIPPED_MODEL, check_description

    meta = json.loads((SHIPPED_MODEL / META_FILE).read_text(encoding="utf-8"))
    config, tokenizer, summary = check_description(meta)
    assert config.to_dict() == {**GPT(config).config.to_dict()} and tokenizer.vocab_size == config.vocab_size
    assert summary == meta["summary"]  # every field the training command wrote is one the check knows
