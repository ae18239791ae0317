"""Keep freed memory in the process's heap (glibc malloc), so that a CPU training step's large
temporaries reuse pages that are already mapped instead of faulting in fresh ones every step.

Why: glibc serves every allocation above its mmap threshold (at most 32 MiB) with a fresh
``mmap`` and returns it with ``munmap`` when freed, so each step's big tensors (the feature
transformer's accumulators, its output and their gradients: 16-135 MB each at batch 16,384) are
zero-filled page by page by the kernel, every step. Measured on the training step on our 2-core machine
(load 9-10, CPU seconds per step, before the layer-stack and sfnnv5 changes of the same round;
two runs of one script, the same settings given as GLIBC_TUNABLES in the second): sfnnv5
(L1 1,024) 1.9 s -> 0.81 s, HalfKAv2_hm -> 256 with layer stacks 0.17 s -> 0.15 s; chess768 ->
256x2, where this is the only change, 0.108 -> 0.070 s side by side in one process
(``bench/results/train_cpu_before_after.json``). PyTorch's CPU
tuning guides get the same effect by preloading jemalloc or tcmalloc; this is the dependency-free
equivalent: ``mallopt(M_MMAP_MAX, 0)`` (no allocation is served by mmap: all come from the heap,
and freed chunks are reused) and ``mallopt(M_TRIM_THRESHOLD, 2 GiB - 1)`` (the heap's free top is
kept, up to 2 GiB, rather than given back after every step). The cost: the resident memory stays
at the step's peak between steps, as with those allocators.

Set ``NNUE_MALLOC=default`` in the environment to leave malloc alone. Glibc only; elsewhere a no-op.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform

# mallopt parameters (glibc malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
TRIM_THRESHOLD = (1 << 31) - 1   # mallopt takes an int: the largest it accepts

_state: dict = {}


def retain_freed_memory() -> bool:
    """Configure glibc malloc as the module docstring says, once per process. Returns True if it
    is (or already was) configured, False where it cannot be (not glibc, mallopt refused) or
    ``NNUE_MALLOC=default`` is set. Never raises."""
    if "applied" in _state:
        return _state["applied"]
    ok = False
    if os.environ.get("NNUE_MALLOC", "").lower() != "default" and platform.libc_ver()[0] == "glibc":
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            ok = bool(libc.mallopt(M_MMAP_MAX, 0)) and bool(libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
        except (OSError, AttributeError):
            ok = False
    _state["applied"] = ok
    return ok


def status() -> str:
    """'retain' if :func:`retain_freed_memory` configured malloc in this process, else 'default'."""
    return "retain" if _state.get("applied") else "default"
