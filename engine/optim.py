"""AdamW on PyTorch's fused kernel, in a small class of its own (no ``torch.optim.Optimizer``).

:class:`FusedAdamW` does what ``torch.optim.AdamW(param_groups, fused=True, lr=..., betas=...,
eps=..., weight_decay=...)`` does, step for step and bit for bit: the same lazily created state
(a float32 ``step`` on the parameter's device, ``exp_avg`` and ``exp_avg_sq`` shaped like the
parameter), the same kernel (``torch._fused_adamw_``, one call per device and dtype of each group)
and the same ``state_dict`` layout, so a state saved by one loads into the other.

Why a class of its own: ``torch.optim.Optimizer`` wraps ``add_param_group``, ``zero_grad``,
``state_dict`` and ``step`` so that PyTorch's compiler (``torch._dynamo``, with SymPy) is imported on
their first call, which a server that trains small models beside its readers never needs. The
algorithm is decoupled weight decay (Loshchilov & Hutter, "Decoupled Weight Decay
Regularization", ICLR 2019) on Adam's moments (Kingma & Ba, 2015); the arithmetic is PyTorch's
fused kernel itself, none of it is rewritten here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch
from torch.utils._foreach_utils import _get_fused_kernels_supported_devices

#: The keys of torch's Adam/AdamW groups that this class does not vary, with the values
#: ``torch.optim.AdamW(..., fused=True)`` gives them: they travel in ``state_dict()`` so that
#: torch's AdamW loading it takes the fused path too.
FIXED_OPTIONS: dict[str, Any] = {"amsgrad": False, "maximize": False, "foreach": None, "capturable": False,
                                 "differentiable": False, "fused": True, "decoupled_weight_decay": True}
#: The options a group may set; any other key of a group is refused.
HYPERPARAMETERS = ("lr", "betas", "eps", "weight_decay")
MOMENTS = ("exp_avg", "exp_avg_sq")


def fused_supported(params: Iterable[torch.Tensor]) -> bool:
    """True when every tensor is floating point on a device type that has PyTorch's fused AdamW kernel.

    The same rule ``torch.optim.AdamW(fused=True)`` applies to each parameter before its first step
    (``torch.optim.optimizer._device_dtype_check_for_fused``).
    """
    devices = _get_fused_kernels_supported_devices()
    return all(torch.is_floating_point(p) and p.device.type in devices for p in params)


def _real(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _checked_options(options: dict[str, Any]) -> dict[str, Any]:
    """The four hyperparameters of a group, checked as ``torch.optim.Adam`` checks them.

    Raises:
        ValueError: for a learning rate, eps or weight decay that is not a finite number >= 0, or
            betas that are not two finite numbers in [0, 1).
    """
    lr, eps, weight_decay, betas = (options[k] for k in ("lr", "eps", "weight_decay", "betas"))
    for name, value in (("lr", lr), ("eps", eps), ("weight_decay", weight_decay)):
        if not (_real(value) and value >= 0):
            raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    if not (isinstance(betas, (tuple, list)) and len(betas) == 2 and all(_real(b) and 0 <= b < 1 for b in betas)):
        raise ValueError(f"betas must be two finite numbers in [0, 1), got {betas!r}")
    return {"lr": lr, "betas": (float(betas[0]), float(betas[1])), "eps": eps, "weight_decay": weight_decay}


class FusedAdamW:
    """AdamW whose step is PyTorch's fused kernel, with torch's ``param_groups``, ``state`` and state dicts.

    Args:
        params: parameters (leaf tensors, floating point, on a device :func:`fused_supported`
            accepts), or groups: dicts with "params" and any of "lr", "betas", "eps",
            "weight_decay", which override the defaults below for that group.
        lr, betas, eps, weight_decay: the defaults of ``torch.optim.AdamW``, checked as it checks them.

    Attributes:
        param_groups: one dict per group: "params" (a list of tensors), "lr", "betas", "eps",
            "weight_decay", and the fixed options (:data:`FIXED_OPTIONS`); a caller may change "lr"
            and the other hyperparameters between steps, as a learning-rate schedule does.
        state: parameter -> {"step": float32 () tensor on the parameter's device, "exp_avg",
            "exp_avg_sq": tensors of the parameter's shape, dtype and device}, created at the
            parameter's first step, as torch's.

    Raises:
        ValueError: for no parameters, a parameter in two groups, a non-leaf tensor, a tensor the
            fused kernel does not take, an unknown group key, or a hyperparameter out of range.
        TypeError: for parameters given as a set (no stable order) or something not a tensor.
    """

    def __init__(self, params: Iterable[torch.Tensor] | Iterable[dict[str, Any]], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 1e-2) -> None:
        defaults = _checked_options({"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})
        if isinstance(params, (torch.Tensor, set)):
            raise TypeError("params must be an ordered iterable of tensors or of groups, not a tensor or a set")
        groups = list(params)
        if not groups:
            raise ValueError("FusedAdamW got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        self.param_groups: list[dict[str, Any]] = []
        self.state: dict[torch.Tensor, dict[str, torch.Tensor]] = {}
        seen: set[int] = set()
        for group in groups:
            if not isinstance(group, dict) or "params" not in group or set(group) - {"params", *HYPERPARAMETERS}:
                raise ValueError(f"a parameter group is a dict with 'params' and any of {HYPERPARAMETERS}, "
                                 f"got {group!r:.200}")
            members = group["params"]
            if isinstance(members, set):
                raise TypeError("a group's params must be an ordered iterable of tensors, not a set")
            members = [members] if isinstance(members, torch.Tensor) else list(members)
            for p in members:
                if not isinstance(p, torch.Tensor):
                    raise TypeError(f"FusedAdamW optimizes tensors, got a {type(p).__name__}")
                if not p.is_leaf:
                    raise ValueError("FusedAdamW cannot optimize a non-leaf tensor")
                if not fused_supported([p]):
                    raise ValueError(f"the fused AdamW kernel takes floating-point tensors on "
                                     f"{_get_fused_kernels_supported_devices()}, got {p.dtype} on {p.device.type}")
                if id(p) in seen:
                    raise ValueError("a parameter appears in more than one group (or twice in one)")
                seen.add(id(p))
            options = _checked_options({**defaults, **{k: group[k] for k in HYPERPARAMETERS if k in group}})
            self.param_groups.append({"params": members, **options, **FIXED_OPTIONS})

    @torch.no_grad()
    def step(self) -> None:
        """One AdamW step for every parameter that has a gradient, as ``torch.optim.AdamW(fused=True).step()``.

        Each group's step counters are incremented (``torch._foreach_add_``), then
        ``torch._fused_adamw_`` updates the parameters and both moments in place, once per device
        and dtype, with the group's current lr, betas, eps and weight decay.

        Raises:
            RuntimeError: for a sparse gradient (AdamW's moments are dense).
        """
        for group in self.param_groups:
            buckets: dict[tuple[torch.device, torch.dtype], list[list[torch.Tensor]]] = {}
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("FusedAdamW does not take sparse gradients")
                state = self.state.get(p)
                if state is None:  # lazy, at the first step, as torch's
                    state = self.state[p] = {
                        "step": torch.zeros((), dtype=torch.float32, device=p.device),
                        "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                        "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
                    }
                lists = buckets.setdefault((p.device, p.dtype), [[], [], [], [], []])
                for column, tensor in zip(lists, (p, p.grad, state["exp_avg"], state["exp_avg_sq"], state["step"]),
                                          strict=True):
                    column.append(tensor)
            beta1, beta2 = group["betas"]
            for params, grads, exp_avgs, exp_avg_sqs, steps in buckets.values():
                torch._foreach_add_(steps, 1)
                torch._fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, [], steps, lr=float(group["lr"]),
                                    beta1=float(beta1), beta2=float(beta2), weight_decay=float(group["weight_decay"]),
                                    eps=float(group["eps"]), amsgrad=False, maximize=False, grad_scale=None,
                                    found_inf=None)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drops every parameter's gradient (``set_to_none``) or fills it with zeros, as torch's optimizers do."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                    continue
                if p.grad.grad_fn is not None:
                    p.grad.detach_()
                else:
                    p.grad.requires_grad_(False)
                p.grad.zero_()

    def _indexed_params(self) -> list[torch.Tensor]:
        return [p for group in self.param_groups for p in group["params"]]

    def state_dict(self) -> dict[str, Any]:
        """The state in ``torch.optim.Optimizer.state_dict``'s layout.

        Returns:
            {"state": {index: {"step", "exp_avg", "exp_avg_sq"}}, "param_groups": [the group's options
            with "params" as the indices]}, a parameter's index being its place counted across the
            groups in order. The tensors are the live ones (not copies), as torch's.
        """
        index = {id(p): i for i, p in enumerate(self._indexed_params())}
        groups, start = [], 0
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = list(range(start, start + len(group["params"])))
            start += len(group["params"])
            groups.append(packed)
        state = {index[id(p)]: dict(slots) for p, slots in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restores a state of :meth:`state_dict`'s layout, this class's or ``torch.optim.AdamW``'s.

        Indices pair with this optimizer's parameters in order, group by group, as torch pairs them.
        The moments are brought to their parameter's dtype and device and each step to a float32
        scalar there (``Tensor.to``, which returns the given tensor itself when it already fits, as
        torch's load does); each group takes the saved lr, betas, eps and weight decay. Everything is
        checked before anything changes.

        Raises:
            ValueError: for another number of groups or of parameters in a group, an index that is
                no parameter's, slots other than step, exp_avg and exp_avg_sq, a moment of another
                shape, a step that is not one finite number >= 0, a group that asks for amsgrad or
                maximize (which this class does not do), or a hyperparameter out of range.
        """
        if not isinstance(state_dict, dict) or set(state_dict) != {"state", "param_groups"}:
            raise ValueError("an optimizer state dict has exactly the keys 'state' and 'param_groups'")
        saved_groups, saved_state = state_dict["param_groups"], state_dict["state"]
        if not isinstance(saved_groups, list) or len(saved_groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        id_map: dict[int, torch.Tensor] = {}
        new_groups = []
        for group, saved in zip(self.param_groups, saved_groups, strict=True):
            if not isinstance(saved, dict) or not isinstance(saved.get("params"), list) or (
                    len(saved["params"]) != len(group["params"])):
                raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                                 "optimizer's group")
            if saved.get("amsgrad") or saved.get("maximize"):
                raise ValueError("FusedAdamW does not do amsgrad or maximize; the saved group asks for them")
            missing = [k for k in HYPERPARAMETERS if k not in saved]
            if missing:
                raise ValueError(f"a saved parameter group lacks {missing}")
            for saved_index, p in zip(saved["params"], group["params"], strict=True):
                if isinstance(saved_index, bool) or not isinstance(saved_index, int) or saved_index in id_map:
                    raise ValueError(f"a saved group's parameter index {saved_index!r} is not a new integer")
                id_map[saved_index] = p
            new_groups.append({"params": group["params"], **_checked_options(saved), **FIXED_OPTIONS})
        if not isinstance(saved_state, dict):
            raise ValueError("the saved 'state' is not a dict")
        new_state: dict[torch.Tensor, dict[str, torch.Tensor]] = {}
        for saved_index, slots in saved_state.items():
            p = id_map.get(saved_index)
            if p is None:
                raise ValueError(f"the saved state's index {saved_index!r} names no parameter of its groups")
            if not isinstance(slots, dict) or set(slots) != {"step", *MOMENTS}:
                raise ValueError(f"the saved state of parameter {saved_index} is not step, exp_avg and exp_avg_sq")
            step = slots["step"]
            if isinstance(step, torch.Tensor):
                if step.numel() != 1 or not torch.isfinite(step).all() or float(step) < 0:
                    raise ValueError(f"parameter {saved_index}'s step is not one finite number >= 0")
                step = step.reshape(()).to(dtype=torch.float32, device=p.device)  # (1,) or () -> ()
            elif _real(step) and step >= 0:
                step = torch.tensor(float(step), dtype=torch.float32, device=p.device)
            else:
                raise ValueError(f"parameter {saved_index}'s step {step!r} is not a finite number >= 0")
            restored = {"step": step}
            for slot in MOMENTS:
                value = slots[slot]
                if not isinstance(value, torch.Tensor) or value.shape != p.shape:
                    raise ValueError(f"parameter {saved_index}'s {slot} is not a tensor of shape {tuple(p.shape)}")
                restored[slot] = value.to(dtype=p.dtype, device=p.device)
            new_state[p] = restored
        self.param_groups = new_groups
        self.state = new_state
