"""Test-side helpers around the independent C reference evaluator (tests/c/nnue_eval.c).

The net.bin writer and the pure-Python evaluator here are deliberately independent of the
``nnue`` package: they follow the layout documented in nnue_eval.c, so that the exporter and
the integer inference code can be checked against them. Only the C activation and feature code
comes from the specs (each written in C in its spec module; :func:`write_c_headers`).
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path

import numpy as np

C_SOURCE = Path(__file__).resolve().parent / "c" / "nnue_eval.c"

NUM_FEATURES = 768
QA = 255
QB = 64
SCALE = 400
ACTIVATIONS = ("crelu", "screlu", "pairwise_crelu")
_PIECE_TYPES = "pnbrqk"


def write_c_headers(build_dir: Path) -> list[Path]:
    """Write the headers nnue_eval.c includes, generated from the registries as they stand (so a
    test that registers a toy activation or feature set gets its C code too): ``nnue_acts.h``
    (:func:`nnue.spec.activations.c_header`) and ``nnue_features.h``
    (:func:`nnue.pipeline.features.c_header`). The C code itself is written in each spec module,
    from the published formulas, not derived from the Python rules."""
    from nnue.pipeline import features
    from nnue.spec import activations

    out = []
    for name, text in (("nnue_acts.h", activations.c_header()), ("nnue_features.h", features.c_header())):
        path = Path(build_dir) / name
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(path)
        out.append(path)
    return out


def compile_c_eval(build_dir: Path) -> Path:
    """Compile nnue_eval.c with gcc into ``build_dir`` (with the generated headers of
    :func:`write_c_headers`) and return the executable path.

    Raises RuntimeError if gcc is not on PATH or the compilation fails.
    """
    gcc = shutil.which("gcc")
    if gcc is None:
        raise RuntimeError("gcc not found on PATH; cannot build the C reference evaluator")
    build_dir = Path(build_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    exe = build_dir / "nnue_eval"
    write_c_headers(build_dir)
    cmd = [gcc, "-O2", "-std=c99", "-Wall", "-Wextra", "-Werror", "-I", str(build_dir), "-o", str(exe), str(C_SOURCE)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"compiling {C_SOURCE} failed:\n{proc.stderr}")
    return exe


def c_perspective_args(features: str, output_buckets: str, hidden: int, activation: str) -> list[str]:
    """Command-line arguments (after NET.bin) of the C evaluator for a perspective net."""
    return ["--features", features, "--buckets", output_buckets, "--perspective", str(hidden), activation]


def c_deep_args(features: str, output_buckets: str, hidden: int, activation: str,
                l1_outputs: int, l2_outputs: int, hidden_activation: str, l2_activation: str | None = None) -> list[str]:
    """Command-line arguments (after NET.bin) of the C evaluator for a deep net (l2_activation:
    after L2, default hidden_activation)."""
    return ["--features", features, "--buckets", output_buckets, "--deep", str(hidden), activation,
            str(l1_outputs), str(l2_outputs), hidden_activation, l2_activation or hidden_activation]


def run_c(exe: Path, net_bin: Path, args: list[str], fens: list[str],
          allow_overflow: bool = False) -> list[int | None]:
    """Run the C evaluator with ``args`` (see c_perspective_args / c_deep_args) on ``fens``.

    Returns one int per FEN (centipawns, stm POV); a position for which the C program reports
    an int16/int32 overflow gives None if ``allow_overflow``, else RuntimeError.
    Raises subprocess.CalledProcessError if the program exits non-zero.
    """
    proc = subprocess.run(
        [str(exe), str(net_bin), *args],
        input="".join(f + "\n" for f in fens),
        capture_output=True,
        text=True,
        check=True,
    )
    words = proc.stdout.split()
    if len(words) != len(fens):
        raise RuntimeError(f"expected {len(fens)} evals from {exe}, got {len(words)}")
    out: list[int | None] = []
    for fen, w in zip(fens, words):
        if w == "overflow":
            if not allow_overflow:
                raise RuntimeError(f"C evaluator: integer overflow on {fen!r}")
            out.append(None)
        else:
            out.append(int(w))
    return out


def run_c_eval(
    exe: Path,
    net_bin: Path,
    hidden: int,
    buckets: int | str,
    activation: str,
    fens: list[str],
    *,
    features: str = "chess768",
    deep: tuple[int, int, str] | None = None,
    allow_overflow: bool = False,
) -> list[int | None]:
    """Evaluate ``fens`` with the compiled C program; returns one int (centipawns, stm POV) per FEN.

    buckets: a count (MaterialCount<buckets>) or an output-bucket spec ("SFPieceCount<8>").
    features: feature-set name. deep: (l1_outputs, l2_outputs, hidden_activation) for a deep
    net, None for a perspective net. Overflow handling as in :func:`run_c`.
    Raises subprocess.CalledProcessError if the program exits non-zero.
    """
    spec = f"MaterialCount<{buckets}>" if isinstance(buckets, int) else buckets
    if deep is None:
        args = c_perspective_args(features, spec, hidden, activation)
    else:
        args = c_deep_args(features, spec, hidden, activation, *deep)
    return run_c(exe, net_bin, args, fens, allow_overflow)


def c_tiny_args(features: str, output_buckets: str, hidden: int, activation: str, l1_outputs: int,
                hidden_activation: str) -> list[str]:
    """Command-line arguments (after NET.bin) of the C evaluator for a tiny net."""
    return ["--features", features, "--buckets", output_buckets, "--tiny", str(hidden), activation,
            str(l1_outputs), hidden_activation]


def c_args_for_arch(arch: dict) -> list[str]:
    """C evaluator arguments for a net's ``arch`` dict: keys feature_set, output_buckets,
    hidden, activation; a deep net (``kind == "deep"``) also l1_outputs, l2_outputs,
    hidden_activation; a tiny net l1_outputs, hidden_activation; a residual net (``residual``:
    base, alpha_num, alpha_shift) adds ``--residual BASE NUM SHIFT``."""
    kind = arch.get("kind", "perspective")
    if kind == "deep":
        out = c_deep_args(arch["feature_set"], arch["output_buckets"], arch["hidden"], arch["activation"],
                          arch["l1_outputs"], arch["l2_outputs"], arch["hidden_activation"], arch.get("l2_activation"))
    elif kind == "tiny":
        out = c_tiny_args(arch["feature_set"], arch["output_buckets"], arch["hidden"], arch["activation"],
                          arch["l1_outputs"], arch["hidden_activation"])
    elif kind == "perspective":
        out = c_perspective_args(arch["feature_set"], arch["output_buckets"], arch["hidden"], arch["activation"])
    else:
        raise ValueError(f"unknown net kind {kind!r}")
    r = arch.get("residual")
    if r is not None:
        out += ["--residual", r["base"], str(r["alpha_num"]), str(r["alpha_shift"])]
    return out


@functools.lru_cache(maxsize=None)
def _all_fens(path: str) -> tuple[str, ...]:
    with open(path) as fh:
        return tuple(line[4:].strip() for line in fh if line.startswith("fen "))


def piece_count(fen: str) -> int:
    """Number of pieces (kings included) in a FEN's placement."""
    return sum(ch.isalpha() for ch in fen.split()[0])


def real_fens(path: str | Path, n: int, per_piece_count: int = 8) -> list[str]:
    """About ``n`` FENs of a ``.plain`` file ("fen ..." lines): an even spread over the file,
    plus up to ``per_piece_count`` more of every piece count the file holds (the first ones
    the spread missed), so that every output bucket is reached. Deterministic."""
    fens = _all_fens(str(path))
    step = max(1, len(fens) // n)
    picked = list(fens[::step][:n])
    seen = set(picked)
    extra: dict[int, int] = {}
    for f in fens:
        k = piece_count(f)
        if f not in seen and extra.get(k, 0) < per_piece_count:
            extra[k] = extra.get(k, 0) + 1
            picked.append(f)
            seen.add(f)
    return picked


#: hand-made positions beyond what self-play reaches: bare kings (2 pieces) on both sides to move,
#: kings on every file half (mirroring), a king in each corner.
EXTRA_FENS = [
    "8/8/8/8/8/8/8/K6k w - - 0 1",
    "8/8/8/8/8/8/8/K6k b - - 0 1",
    "7k/8/8/8/8/8/8/K7 w - - 0 1",
    "k7/8/8/8/8/8/8/7K b - - 0 1",
    "8/8/3k4/8/8/4K3/8/8 w - - 0 1",
    "8/8/4k3/8/8/3K4/8/8 b - - 0 1",
    "4k3/8/8/8/8/8/4P3/4K3 b - - 0 1",
    "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
    "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR b KQkq - 0 1",
    "QQQQQQQk/QQQQQQQQ/8/8/8/8/qqqqqqqq/qqqqqqqK w - - 0 1",
]


def write_net_bin(path: Path, l0w: np.ndarray, l0b: np.ndarray, l1w: np.ndarray, l1b: np.ndarray) -> None:
    """Write a raw little-endian net.bin, zero-padded to a multiple of 64 bytes.

    Args (all int16):
        l0w: [F, H] feature weights, F = 768; row f holds the H weights of feature f.
        l0b: [H] accumulator bias.
        l1w: [B, L1IN] output weights per bucket (L1IN = 2H, or H for pairwise_crelu);
             the first L1IN/2 weigh the side-to-move half.
        l1b: [B] output bias.
    """
    parts = [np.asarray(a) for a in (l0w, l0b, l1w, l1b)]
    for a in parts:
        if a.dtype != np.int16:
            raise TypeError(f"expected int16 arrays, got {a.dtype}")
    if parts[0].ndim != 2 or parts[0].shape[0] != NUM_FEATURES:
        raise ValueError(f"l0w must be [{NUM_FEATURES}, H], got {parts[0].shape}")
    data = b"".join(np.ascontiguousarray(a, dtype="<i2").tobytes() for a in parts)
    data += b"\0" * (-len(data) % 64)
    Path(path).write_bytes(data)


def _parse_fen(fen: str) -> tuple[list[tuple[int, int, int]], int]:
    """Return ([(colour, type, square)], side_to_move) with white = 0, a1 = 0, P..K = 0..5."""
    fields = fen.split()
    pieces = []
    for row, rank_str in enumerate(fields[0].split("/")):
        rank, file = 7 - row, 0
        for ch in rank_str:
            if ch.isdigit():
                file += int(ch)
            else:
                pieces.append((0 if ch.isupper() else 1, _PIECE_TYPES.index(ch.lower()), 8 * rank + file))
                file += 1
    stm = 1 if len(fields) > 1 and fields[1] == "b" else 0
    return pieces, stm


def _trunc_div(a: int, b: int) -> int:
    """Integer division truncating toward zero (C semantics), for b > 0."""
    q = abs(a) // b
    return q if a >= 0 else -q


def py_eval(
    l0w: np.ndarray,
    l0b: np.ndarray,
    l1w: np.ndarray,
    l1b: np.ndarray,
    activation: str,
    fen: str,
) -> int:
    """Pure-Python (Python int) reference eval of ``fen``, centipawns from the side to move's POV.

    Shapes/dtypes as in write_net_bin: l0w [768, H], l0b [H], l1w [B, L1IN], l1b [B], int16.
    All arithmetic uses unbounded Python ints; divisions truncate toward zero.
    """
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}")
    w0 = [[int(x) for x in row] for row in np.asarray(l0w).tolist()]
    b0 = [int(x) for x in np.asarray(l0b).tolist()]
    w1 = [[int(x) for x in row] for row in np.asarray(l1w).tolist()]
    b1 = [int(x) for x in np.asarray(l1b).tolist()]
    hidden, buckets = len(b0), len(b1)

    pieces, stm = _parse_fen(fen)

    def clamped_acc(persp: int) -> list[int]:
        acc = list(b0)
        for colour, ptype, sq in pieces:
            f = (0 if colour == persp else 384) + 64 * ptype + (sq if persp == 0 else sq ^ 56)
            acc = [a + w for a, w in zip(acc, w0[f])]
        return [min(max(a, 0), QA) for a in acc]

    v_stm, v_nstm = clamped_acc(stm), clamped_acc(1 - stm)
    per_bucket = -(-32 // buckets)
    bucket = min(max((len(pieces) - 2) // per_bucket, 0), buckets - 1)
    w = w1[bucket]

    if activation == "crelu":
        out = sum(a * x for a, x in zip(v_stm + v_nstm, w))
    elif activation == "screlu":
        out = _trunc_div(sum(a * a * x for a, x in zip(v_stm + v_nstm, w)), QA)
    else:
        half = hidden // 2
        p_stm = [v_stm[i] * v_stm[i + half] for i in range(half)]
        p_nstm = [v_nstm[i] * v_nstm[i + half] for i in range(half)]
        out = _trunc_div(sum(p * x for p, x in zip(p_stm + p_nstm, w)), QA)
    out += b1[bucket]
    return _trunc_div(out * SCALE, QA * QB)


def legal_fens(fens: list[str]) -> list[str]:
    """The FENs ``nnue pack`` (and so ``nnue eval --fens``) accepts: the hand-made extremes of
    EXTRA_FENS that no game can reach (e.g. the side not to move in check) are left to the API
    tests, which take any position."""
    from nnue.pipeline.positions import parse_position

    out = []
    for f in fens:
        try:
            parse_position(f)
        except ValueError:
            continue
        out.append(f)
    return out


if __name__ == "__main__":  # python -m tests.cref BUILD_DIR: the C reference with its generated headers
    import sys

    if len(sys.argv) != 2:
        sys.exit("usage: python -m tests.cref BUILD_DIR  (writes nnue_acts.h, nnue_features.h, nnue_eval)")
    print(compile_c_eval(Path(sys.argv[1])))
