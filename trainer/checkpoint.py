"""Read checkpoint files without running code from them: no full unpickling of untrusted input.

A Lightning ``.ckpt`` is a pickle, and full unpickling (torch.load without weights_only) runs whatever a
crafted file asks for before any check. :func:`load_ckpt` unpickles with ``weights_only=True``
(torch's restricted unpickler: tensors, containers, numbers, strings) plus an allow-list of the
few other types our own checkpoints hold (:data:`SAFE_GLOBALS`); anything else is refused with
one line naming the file and the type it wanted. The trainer's ``weights-*.safetensors``
(tensors and JSON only) need no unpickling at all and are read by safetensors.
"""
from __future__ import annotations

import pickle
from pathlib import Path


class UnsafeCheckpointError(ValueError):
    """A checkpoint would need more than plain data to unpickle (or is not a torch file)."""


def _safe_globals() -> list:
    """Types beyond torch's weights-only set that a Lightning checkpoint of ``nnue train`` holds:
    the pathlib paths Lightning stores among the hyper-parameters, and OmegaConf containers when
    a config object is saved. Nothing that can run code on load."""
    import collections
    import pathlib

    out: list = [pathlib.PosixPath, pathlib.WindowsPath, pathlib.PurePosixPath, pathlib.PureWindowsPath,
                 collections.OrderedDict, collections.defaultdict]
    try:  # optional: only when OmegaConf is installed (it is, with Hydra)
        from omegaconf import DictConfig, ListConfig
        from omegaconf.base import ContainerMetadata, Metadata
        from omegaconf.nodes import AnyNode

        out += [DictConfig, ListConfig, ContainerMetadata, Metadata, AnyNode]
    except ImportError:
        pass
    return out


def load_ckpt(path: str | Path) -> object:
    """Unpickle a torch checkpoint with ``weights_only=True`` and :func:`_safe_globals` allowed.

    Returns what the file holds (a dict for Lightning checkpoints), tensors on the CPU.
    Raises UnsafeCheckpointError, one line naming ``path``, when the file asks for any other
    global (a foreign or crafted pickle) or is not a torch file at all.
    """
    import torch

    path = Path(path)
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic[:2] != b"PK" and magic[:1] != b"\x80":  # torch's zip format, or a bare pickle
        kind = {b"PAR1": "a Parquet file (a dataset part?)"}.get(magic) or (
            "a safetensors file? (give it a .safetensors name)" if magic[:1] in (b"\x00", b"\x01", b"\x02")
            else "not a torch file")
        raise UnsafeCheckpointError(f"{path}: not a checkpoint: {kind}; give OUT/checkpoints/last.ckpt or "
                                    f"a weights-*.safetensors file")
    try:
        with torch.serialization.safe_globals(_safe_globals()):
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        first = " ".join(str(e).split())
        wanted = ""
        if "GLOBAL " in first:
            wanted = first.split("GLOBAL ", 1)[1].split()[0]
        raise UnsafeCheckpointError(
            f"{path}: refused to load: the file asks to unpickle {wanted or 'an object'} that is not "
            f"plain data (a checkpoint of nnue train holds tensors, numbers, strings and paths only); "
            f"export its weights-*.safetensors instead, or check where the file came from") from None
    except (RuntimeError, EOFError, OSError, ValueError, KeyError, IndexError) as e:
        raise UnsafeCheckpointError(f"{path}: not a torch checkpoint ({' '.join(str(e).split())[:200]})") from None

