"""Where the trainer's tensors live and in which precision (``device``, ``bf16`` and friends).

``resolve_device("auto")`` is CUDA when torch sees a GPU, else the CPU; ``cpu``, ``cuda`` and
``cuda:<i>`` are taken as given and refused with a clear error when this machine cannot honour
them. ``weight_dtype`` is the dtype of the policy's weights: bf16 with ``bf16: true`` (unless
``fp32_master_weights`` keeps them fp32 under bf16 autocast). ``MemoryMeter`` reports the peak
device memory of one step as ``perf/*`` metrics.

Example:
    >>> resolve_device("cpu").type
    'cpu'
    >>> from rltune.config import HyperParameters
    >>> weight_dtype(HyperParameters(bf16=True)), weight_dtype(HyperParameters())
    (torch.bfloat16, torch.float32)
"""

from __future__ import annotations

import resource
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from rltune.config.hyperparams import HyperParameters
from rltune.sdk.errors import ConfigError

_WHERE = "training.hyper_parameters.device"


def resolve_device(spec: str) -> torch.device:
    """The ``torch.device`` for a configured ``device`` value (``auto`` picks CUDA if present)."""
    if spec == "auto":
        return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() \
            else torch.device("cpu")
    if spec == "cpu":
        return torch.device("cpu")
    if not spec.startswith("cuda"):
        raise ConfigError(f"unknown device {spec!r}", where=_WHERE,
                          hint="use auto, cpu, cuda or cuda:<index>")
    if not torch.cuda.is_available():
        build = f"torch {torch.__version__}" + (" (a CPU build)" if torch.version.cuda is None
                                                else f" (CUDA {torch.version.cuda})")
        raise ConfigError(f"device {spec!r} was asked for but {build} sees no CUDA device",
                          where=_WHERE, hint="use device: cpu (or auto), or run on a machine "
                          "with a GPU and a CUDA build of torch")
    index = int(spec.split(":", 1)[1]) if ":" in spec else torch.cuda.current_device()
    count = torch.cuda.device_count()
    if index >= count:
        raise ConfigError(f"device {spec!r} does not exist: this machine has {count} CUDA "
                          f"device(s), cuda:0 to cuda:{count - 1}", where=_WHERE,
                          hint=f"use cuda:0 .. cuda:{count - 1}")
    return torch.device("cuda", index)


def bf16_supported(device: torch.device) -> bool:
    """Whether bf16 matmuls run on ``device`` (CUDA: the GPU says so; CPU: a probe)."""
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    try:
        a = torch.ones((2, 2), dtype=torch.bfloat16)
        return bool((a @ a).float().sum() == 8)
    except (RuntimeError, TypeError):
        return False


def weight_dtype(hp: HyperParameters) -> torch.dtype:
    """dtype of the trained policy's weights (and of its optimizer state)."""
    return torch.bfloat16 if hp.bf16 and not hp.fp32_master_weights else torch.float32


def check_precision(hp: HyperParameters, device: torch.device) -> None:
    """Refuse ``bf16`` on a device that cannot run it, before any weights load."""
    if hp.bf16 and not bf16_supported(device):
        raise ConfigError(f"bf16 was asked for but {device} cannot run bf16 matmuls",
                          where="training.hyper_parameters.bf16", hint="set bf16: false")


def frozen_dtype(hp: HyperParameters) -> torch.dtype:
    """dtype of the frozen models (KL reference, OPD teacher): bf16 whenever ``bf16`` is on."""
    return torch.bfloat16 if hp.bf16 else torch.float32


def home_device(hp: HyperParameters, device: torch.device) -> torch.device:
    """Where a frozen model waits between its forward passes (``reference_offload``: CPU)."""
    return torch.device("cpu") if hp.reference_offload else device


@contextmanager
def on_device(model: torch.nn.Module, device: torch.device) -> Iterator[torch.nn.Module]:
    """Run ``model`` on ``device`` inside the block and put it back where it was after (an
    offloaded frozen model visits the GPU only for its forward pass)."""
    home = next(model.parameters()).device
    if home == device:
        yield model
        return
    model.to(device)
    try:
        yield model
    finally:
        model.to(home)
        if device.type == "cuda":
            torch.cuda.empty_cache()


class MemoryMeter:
    """Peak memory of one step: ``start()`` before it, ``metrics()`` after.

    CUDA: the allocator's peak since ``start`` (``perf/max_memory_allocated_gb`` and
    ``perf/max_memory_reserved_gb``). CPU: the process's peak resident size so far
    (``perf/cpu_memory_peak_gb``; the OS keeps no per-step peak).
    """

    def __init__(self, device: torch.device):
        self.device = device

    def start(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)

    def metrics(self) -> dict[str, float]:
        gb = 1024.0**3
        if self.device.type == "cuda":
            return {
                "perf/max_memory_allocated_gb": torch.cuda.max_memory_allocated(self.device) / gb,
                "perf/max_memory_reserved_gb": torch.cuda.max_memory_reserved(self.device) / gb,
            }
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB (bytes on macOS)
        scale = 1.0 if sys.platform == "darwin" else 1024.0
        return {"perf/cpu_memory_peak_gb": peak * scale / gb}
