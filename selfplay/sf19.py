"""The real Stockfish 19 on this machine: where its npm packages and the official net live (a cache
folder outside the repository), and the official net taken out of the engine's WebAssembly.

``scripts/ensure_sf19.sh`` installs, into :func:`cache_dir`:

* ``@lichess-org/stockfish-web@0.5.0`` (AGPL-3.0-or-later): Stockfish 19 built to WebAssembly
  (``sf_19.js``), which loads a net handed over as bytes (``setNnueBuffer``); our UCI front end
  ``scripts/sf19-uci`` drives it;
* the official net ``nn-1a298aa575a0.nnue``, taken with :func:`extract_net` from the data section
  of ``stockfish@19.0.0``'s ``bin/stockfish-19-single.wasm`` (GPL-3.0) and checked by its SHA-256.
  That package is installed into a temporary folder and removed again (161 MB).

Neither package is copied into the repository. The WebAssembly reading is ours: the binary
format's section layout (WebAssembly Core Specification 2.0, 5.5 "Modules": a section is an id
byte, a u32 LEB128 size and its contents; the data section, id 11, is a vector of segments:
flag 0 = active in memory 0 at a constant offset expression, 1 = passive, 2 = active with a memory
index) is all it needs. Python rather than Node, so that the parser is tested with the rest
(tests/selfplay/test_sf19_wasm.py, on modules built byte by byte) and finds the net's end with
the codec's own layout walk (:func:`nnue.inference.kinds.sfnnv16.codec.net_extent`).
"""
from __future__ import annotations

import hashlib
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

ENGINE_PACKAGE = "@lichess-org/stockfish-web@0.5.0"
NET_PACKAGE = "stockfish@19.0.0"
#: the engine build the front end loads, inside the cache folder
ENGINE_MODULE = "node_modules/@lichess-org/stockfish-web/sf_19.js"
#: the single-threaded build of NET_PACKAGE: its net lies in active data segments
NET_WASM = "node_modules/stockfish/bin/stockfish-19-single.wasm"
OFFICIAL_NET = "nn-1a298aa575a0.nnue"
OFFICIAL_BYTES = 98_511_183
OFFICIAL_SHA256 = "1a298aa575a085434d29027978dc36867fe9c5bcea9376654b7a8eba1e52dfc2"
_SF19_VERSION = 0x6A448AFA


def cache_dir() -> Path:
    """The cache folder: ``NNUE_SF19_CACHE``, else ``${XDG_CACHE_HOME:-~/.cache}/nnue-forge/sf19``
    (scripts/ensure_sf19.sh and scripts/sf19_uci.mjs use the same rule)."""
    env = os.environ.get("NNUE_SF19_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "nnue-forge" / "sf19"


def official_net_path() -> Path:
    """Where the official net is kept in the cache (it may not be there)."""
    return cache_dir() / OFFICIAL_NET


def engine_module_path() -> Path:
    """Where the engine's ES module is kept in the cache (it may not be there)."""
    return cache_dir() / ENGINE_MODULE


class WasmError(ValueError):
    """A WebAssembly module that is malformed, or holds no Stockfish 19 net."""


def _leb(b: bytes, p: int, what: str, signed: bool = False) -> tuple[int, int]:
    """A LEB128 number at ``b[p]`` -> (value, the offset after it)."""
    r = shift = 0
    while True:
        if p >= len(b):
            raise WasmError(f"truncated at byte {p:,} while reading {what}")
        x = b[p]
        p += 1
        r |= (x & 0x7F) << shift
        shift += 7
        if not x & 0x80:
            return (r - (1 << shift) if signed and x & 0x40 else r), p
        if shift > 63:
            raise WasmError(f"byte {p:,}: {what} is not a valid LEB128 number")


def data_segments(wasm: bytes) -> tuple[list[tuple[int, memoryview]], int]:
    """The active data segments of a WebAssembly module: ([(memory offset, bytes)], number of
    passive segments). Raises WasmError (one line, naming the byte offset) for a module that is
    not WebAssembly 1, or whose data section is malformed or places a segment with an offset
    expression other than a constant (``i32.const``/``i64.const`` then ``end``)."""
    if wasm[:8] != b"\0asm\x01\0\0\0":
        raise WasmError("not a WebAssembly module (version 1): its first 8 bytes are " + wasm[:8].hex())
    view = memoryview(wasm)
    p, active, passive = 8, [], 0
    while p < len(wasm):
        sid = wasm[p]
        size, q = _leb(wasm, p + 1, f"section {sid}'s size (byte {p + 1:,})")
        end = q + size
        if end > len(wasm):
            raise WasmError(f"truncated: section {sid} at byte {p:,} needs {size:,} bytes, the module ends at "
                            f"byte {len(wasm):,}")
        if sid == 11:
            count, q = _leb(wasm, q, "the data section's segment count")
            for i in range(count):
                flag, q = _leb(wasm, q, f"data segment {i}'s flag")
                if flag not in (0, 1, 2):
                    raise WasmError(f"byte {q - 1:,}: data segment {i} has flag {flag} (0, 1 or 2)")
                offset = None
                if flag == 2:
                    _, q = _leb(wasm, q, f"data segment {i}'s memory index")
                if flag != 1:
                    op = wasm[q] if q < len(wasm) else None
                    if op not in (0x41, 0x42):  # i32.const, i64.const
                        raise WasmError(f"byte {q:,}: data segment {i}'s offset is not a constant expression "
                                        f"(opcode {op if op is None else hex(op)})")
                    offset, q = _leb(wasm, q + 1, f"data segment {i}'s offset", signed=True)
                    if q >= len(wasm) or wasm[q] != 0x0B:
                        raise WasmError(f"byte {q:,}: data segment {i}'s offset expression does not end")
                    q += 1
                n, q = _leb(wasm, q, f"data segment {i}'s size")
                if q + n > end:
                    raise WasmError(f"truncated: data segment {i} at byte {q:,} needs {n:,} bytes, its section "
                                    f"ends at byte {end:,}")
                if flag == 1:
                    passive += 1
                else:
                    active.append((offset, view[q:q + n]))
                q += n
            if q != end:
                raise WasmError(f"byte {q:,}: the data section's segments end before its size ({end:,})")
        p = end
    return active, passive


def memory_image(segments: list[tuple[int, memoryview]]) -> bytearray:
    """The linear memory the active segments initialise (zeros between them)."""
    bad = [o for o, _ in segments if o < 0]
    if bad:
        raise WasmError(f"a data segment at negative offset {bad[0]}")
    img = bytearray(max((o + len(s) for o, s in segments), default=0))
    for o, s in segments:
        img[o:o + len(s)] = s
    return img


def extract_net(wasm: bytes) -> bytes:
    """The Stockfish 19 net held in the active data segments of ``wasm``: the memory image cut
    from a version field 0x6A448AFA to the end of the net's 8th layer stack (found by walking
    its layout: :func:`nnue.inference.kinds.sfnnv16.codec.net_extent`). Raises WasmError when there is none."""
    from nnue.inference.net import NetFormatError
    from nnue.inference.kinds.sfnnv16.codec import net_extent

    segments, passive = data_segments(wasm)
    img = memory_image(segments)
    key = struct.pack("<I", _SF19_VERSION)
    at, last = img.find(key), None
    while at >= 0:
        try:
            return bytes(img[at:at + net_extent(img, at)])
        except NetFormatError as e:
            last = str(e)
        at = img.find(key, at + 1)
    hint = (f"; it has {passive:,} passive data segments (a multi-threaded build: use the single-threaded "
            "stockfish-19-single.wasm)" if passive else "")
    raise WasmError("no Stockfish 19 net in the module's active data segments"
                    + (f" (the last candidate: {last})" if last else "") + hint)


def extract_official_net(wasm_path: str | Path, out: str | Path) -> Path:
    """Extract the official net from ``wasm_path`` into ``out`` (atomically), after checking its
    size and SHA-256 (:data:`OFFICIAL_SHA256`). Raises WasmError or OSError."""
    from nnue.pipeline.atomic import atomic_write_bytes

    wasm_path, out = Path(wasm_path), Path(out)
    try:
        net = extract_net(wasm_path.read_bytes())
    except WasmError as e:
        raise WasmError(f"{wasm_path}: {e}") from None
    digest = hashlib.sha256(net).hexdigest()
    if digest != OFFICIAL_SHA256 or len(net) != OFFICIAL_BYTES:
        raise WasmError(f"{wasm_path}: the net found ({len(net):,} bytes, SHA-256 {digest[:12]}...) is not "
                        f"{OFFICIAL_NET} ({OFFICIAL_BYTES:,} bytes, SHA-256 {OFFICIAL_SHA256[:12]}...)")
    atomic_write_bytes(out, net)
    return out


# ---------------------------------------------------------------- talking to the engine
#: our UCI front end for the WebAssembly build (``scripts/sf19-uci``, in a source checkout)
FRONT_END = Path(__file__).resolve().parents[1] / "scripts" / "sf19-uci"
#: the line Stockfish 19 prints before each go or eval when its net loaded (FILE: the EvalFile value)
LOAD_LINE = re.compile(r"^info string NNUE evaluation using (.+) \((\d+)MiB, \((\d+), (\d+), (\d+), (\d+), 1\)\)$")


class EngineAnswerError(ValueError):
    """The engine did not answer every command it was sent (a rejected net: its ``ERROR`` lines)."""


def run_uci(engine: str, commands: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
    """Send ``commands`` (then ``quit``) to the UCI engine ``engine`` (a path) in one process;
    stdout and stderr as text. Raises subprocess.TimeoutExpired after ``timeout`` seconds."""
    return subprocess.run([engine], input="\n".join([*commands, "quit"]) + "\n", capture_output=True, text=True,
                          timeout=timeout)


def eval_traces(engine: str, fens: list[str], eval_file: str | Path | None = None,
                timeout: float = 900) -> tuple[list[str], str | None]:
    """The engine's ``eval`` output for each FEN (its lines from the bucket table's title to the
    "Final evaluation" line, or "Final evaluation: none (in check)"), and the load line (``info
    string NNUE evaluation using FILE (109MiB, (86896, 1024, 32, 32, 1))``, the first of those the
    engine printed; None when it printed none). One engine process for all FENs; ``eval_file``:
    a net to load through the UCI option EvalFile (default: the official net). Raises
    :class:`EngineAnswerError` quoting the engine when it does not answer every FEN."""
    cmds = ["uci"] + ([f"setoption name EvalFile value {eval_file}"] if eval_file else []) + ["isready"]
    for f in fens:
        cmds += [f"position fen {f}", "eval"]
    r = run_uci(engine, cmds, timeout)
    _, _, rest = r.stdout.partition("readyok\n")
    traces, cur, load = [], [], None
    for line in rest.splitlines():
        if line.startswith("info string"):
            if load is None and LOAD_LINE.match(line):
                load = line
            continue
        if not cur and not line.strip():
            continue
        cur.append(line)
        if line.startswith("Final evaluation"):
            traces.append("\n".join(cur) + "\n")
            cur = []
    if len(traces) != len(fens):
        said = [x for x in (r.stdout + r.stderr).splitlines() if "ERROR" in x or x.startswith("sf19-uci")]
        raise EngineAnswerError(f"Stockfish 19 answered {len(traces)} of {len(fens)} evals (status {r.returncode})"
                                + (": " + " | ".join(said) if said else ""))
    return traces, load


def main(argv: list[str] | None = None) -> int:
    """``python -m nnue.selfplay.sf19 extract WASM OUT``: the official net out of the engine's
    WebAssembly (scripts/ensure_sf19.sh). Bad input: one line, status 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) != 3 or argv[0] != "extract":
        print("usage: python -m nnue.selfplay.sf19 extract STOCKFISH-19-SINGLE.wasm OUT.nnue", file=sys.stderr)
        return 2
    try:
        extract_official_net(argv[1], argv[2])
    except (WasmError, OSError) as e:
        print(f"sf19 extract: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
