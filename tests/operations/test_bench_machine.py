"""engine.bench.machine, the generation benchmark and the training benchmark's helpers (no timing asserted)."""

import math
import types

import pytest
import torch

from engine.bench import __main__ as dispatch
from engine.bench import generate as G
from engine.bench import machine as M
from engine.bench import train as T
from engine.gpt import GPT
from engine.presets import preset


def test_machine_info_names_cpu_isa_and_threads():
    info = M.machine_info()
    assert info["cpu"] == M.cpu_model() and info["cpu"]
    assert info["torch_threads"] == torch.get_num_threads()
    assert list(info["isa"]) == list(M.ISA_FLAGS) and all(isinstance(v, bool) for v in info["isa"].values())
    lines = M.header_lines(info, 12.5)
    assert info["cpu"] in lines[0] and lines[1].startswith("ISA: ") and "12.5 GFLOP/s" in lines[2]
    assert len(M.header_lines(info, None)) == 2
    assert (info["device"], info["device_name"], info["cuda"]) == ("cpu", "CPU", torch.version.cuda)
    assert info["torch"] == torch.__version__ and info["python"].count(".") == 2


def test_machine_info_names_the_device_it_is_given():
    assert M.machine_info(torch.device("cpu"))["device_name"] == "CPU"
    with pytest.raises(RuntimeError):
        M.machine_info("no-such-device")


def test_matmul_ceiling_is_a_positive_rate():
    assert M.matmul_ceiling(n=64, min_run_time=0.01) > 0
    assert M.median_seconds(lambda: None, min_run_time=0.01) >= 0


def test_scaling_exponent_recovers_a_power_law():
    seq_lens = [64, 128, 256]
    assert math.isclose(T.scaling_exponent(seq_lens, [3e-3 * t**1.5 for t in seq_lens]), 1.5)
    assert T.scaling_exponent([128], [1.0]) is None
    assert T._parse_settings("0.1:0.1,0:0.1,0.2") == [(0.1, 0.1), (0.0, 0.1), (0.2, 0.2)]


def test_training_flops_per_token_counts_linear_weights():
    config = preset("tiny")
    model = GPT(config)
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    assert T.training_flops_per_token(config) == 6 * linear + 12 * config.n_layer * config.block_size * config.n_embd


@pytest.mark.usefixtures("one_thread")
def test_generation_benchmark_checks_tokens_and_counts_the_cache():
    torch.manual_seed(0)
    model = GPT(preset("tiny")).eval()
    result = G.run(model, n_chars=20, repeats=1, warmup=0)
    block = model.config.block_size
    inside, long = result["within_block"], result["n_chars"]
    assert inside["new_tokens"] == block - 1 and long["new_tokens"] == 20
    assert all(inside["same_tokens"].values()) and all(long["same_tokens"].values())
    assert inside["keys_computed"] == block - 1  # one prompt token, then one new key per step
    assert long["keys_computed"] > long["new_tokens"]  # past block_size the window is recomputed
    assert inside["uncached_ms"] > 0 and inside["cached_ms"] > 0


def test_dispatcher_prints_the_machine_for_commands_that_do_not(monkeypatch, capsys):
    calls = []
    quiet = types.SimpleNamespace(main=lambda argv: calls.append(argv) or 0)
    monkeypatch.setattr(dispatch.importlib, "import_module",
                        lambda name: M if name == "engine.bench.machine" else quiet)
    monkeypatch.setattr(M, "matmul_ceiling", lambda: 1.5)
    assert dispatch.main(["pages", "--repeats", "1"]) == 0
    assert calls == [["--repeats", "1"]]
    printed = capsys.readouterr().out
    assert printed.startswith("machine: ") and "ISA: " in printed and "1.5 GFLOP/s" in printed
    assert all(getattr(module, "PRINTS_MACHINE", False) for module in (G, T))


def test_the_dispatcher_does_not_import_pytorch_for_the_class_benchmark():
    """``load`` prints the machine from its child: the dispatcher's own process never maps PyTorch."""
    import subprocess
    import sys

    code = ("import sys; from engine.bench import __main__ as d, load; load.main = lambda argv: 0; "
            "d.main(['load']); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=dispatch.__file__.rsplit("/engine/", 1)[0])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False"
