"""Add base and teacher eval columns to a packed dataset (``nnue annotate``).

Two optional int16 columns, centipawns from the **side to move's** POV, nullable:

* ``base_eval``: the base a residual net is added to. Bases:

  - ``material``: material balance with P N B R Q K = 100 300 300 500 900 0 cp (the same
    values as ``nnue report``'s material column), computed vectorised from the packed boards;
  - ``stockfish-classical``: Stockfish 15.1's classical static eval, the ``Classical
    evaluation`` line that its ``eval`` command prints.

* ``teacher_eval``: ``stockfish-nnue``, the ``NNUE evaluation`` line of the same command
  (Stockfish's NNUE static eval, before its hybrid scaling and search); or an integer net of
  ours given by its path (``NETDIR``, ``net.safetensors``, or a Stockfish 15.1 ``.nnue``, e.g.
  the engine's own net after ``nnue import-net``), evaluated in batches by our exact integer
  inference (:func:`nnue.inference.evaluate`: for an sfnnv5 net the engine's NNUE value in UCI
  centipawns, ``v·100/361`` truncated, where the UCI path rounds the printed pawns; positions in
  check are evaluated too: no nulls). No UCI round trip per position.

**Stockfish's units and POV** (checked on real positions, ``tests/pipeline/test_annotate.py``):
``eval`` prints *pawns* from *white's* POV, scaled as UCI centipawns are in 15.1 (a value of
``NormalizeToPawnValue = 361`` internal units prints as 1.00; a missing queen shows as about
−7). We store ``round(100 · pawns)``, negated when black is to move, clamped to ±32767.

**Positions in check**: Stockfish prints no static eval when the side to move is in check
(``Final evaluation: none (in check)``); those rows get a *null* in the Stockfish columns, and
the count is in the summary and the manifest. The ``material`` base is defined in check too.

**The engine** runs as a subprocess over UCI, many positions per process (``position fen …`` +
``eval`` per position, ``isready`` after each batch), ``jobs`` processes in parallel, with a
progress bar on stderr. Chess960 castling is passed as X-FEN/Shredder-FEN, which Stockfish reads
in standard mode too (its ``UCI_Chess960`` option only changes move notation and one
cornered-bishop term; we leave it off).

**Atomicity**: each part is rewritten, row group by row group, to a temporary file in the
dataset folder and renamed over the part (readers holding the old file keep reading it; its row
groups are unchanged). Each part's Parquet metadata records what its columns hold
(``nnue_forge_annotations``), so an interrupted run leaves every part readable, either annotated
or not, and a rerun skips the parts already done. The manifest's ``annotations`` entry (which
base or teacher, engine version, counts, the parts it covers) is marked ``complete: false``
before the first part and replaced atomically when the last is done. Parts packed later have no
such column until ``nnue annotate`` runs again (it then annotates only them); the stream carries a
column only when every part has it.
"""
from __future__ import annotations

import json
import os
import queue
import re
import shutil
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import torch

from . import manifest as mf
from .board import boards_from_bytes, unpack_fen
from .parts import open_part, read_row_group
from .features.board_tensor import black_to_move, decode_squares

BASES = ("material", "stockfish-classical")
TEACHERS = ("stockfish-nnue",)
#: Piece values of the ``material`` base, centipawns, P N B R Q K.
MATERIAL_CP = (100, 300, 300, 500, 900, 0)
MATERIAL_VERSION = "material-1 (P N B R Q = 100 300 300 500 900 cp)"
META_KEY = b"nnue_forge_annotations"
DEFAULT_ENGINE = "/usr/games/stockfish"
INT16_MAX = 32767


class EngineError(ValueError):
    """The engine is missing, does not speak UCI, or prints no eval line we need (one line)."""


# ------------------------------------------------------------------------------------ material
def material_eval(boards: np.ndarray) -> np.ndarray:
    """Material balance of packed boards, side-to-move POV.

    boards: (N, 32) uint8 marlinformat records -> (N,) int16 centipawns (P N B R Q K =
    100 300 300 500 900 0). Raises ValueError on a wrong shape or dtype."""
    b = torch.from_numpy(np.array(boards, dtype=np.uint8, copy=True))
    occupied, code, _ = decode_squares(b)
    value = torch.tensor(MATERIAL_CP)[code & 7] * occupied
    white = (torch.where((code >> 3) == 1, -value, value)).sum(1)
    stm = torch.where(black_to_move(b), -white, white)
    return stm.clamp(-INT16_MAX, INT16_MAX).numpy().astype(np.int16)


# ------------------------------------------------------------------------------- the engine
def find_engine(path: str | None) -> str:
    """The engine binary: ``path``, else ``stockfish`` on PATH, else /usr/games/stockfish.
    Raises EngineError naming what is missing."""
    if path is not None:
        found = shutil.which(path) if os.sep not in path else (path if os.access(path, os.X_OK) else None)
        if not found or not os.path.isfile(found):
            raise EngineError(f"engine {path}: no such executable file")
        return found
    found = shutil.which("stockfish") or (DEFAULT_ENGINE if os.access(DEFAULT_ENGINE, os.X_OK) else None)
    if found is None:
        raise EngineError(f"no Stockfish binary (not on PATH, not at {DEFAULT_ENGINE}); install it "
                          "with 'bash scripts/ensure_stockfish.sh' (Debian's stockfish 15.1) or pass --engine PATH")
    return found


class UciEvaluator:
    """One engine process that prints static evals: ``evaluate(fens)`` -> classical and NNUE
    evals in pawns, white POV (NaN where the engine printed none: side to move in check).

    A reader thread parses the engine's output and queues one event per eval, so a batch of
    commands never deadlocks on full pipes and a silent engine times out instead of hanging.
    Raises EngineError when the engine cannot be started, exits, or stays silent ``timeout``
    seconds; ``need`` ("classical", "nnue") names the lines the caller needs, checked on the
    start position at start-up."""

    def __init__(self, path: str, need: tuple[str, ...] = ("classical",), timeout: float = 30.0):
        self.path, self.timeout = path, timeout
        try:
            self.proc = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, bufsize=0)
        except OSError as e:
            raise EngineError(f"engine {path}: cannot start: {e.strerror or e}") from None
        self.events: queue.Queue = queue.Queue()
        self.name = None
        threading.Thread(target=self._read, daemon=True).start()
        self._send("uci\n")
        while True:
            ev = self._next("the UCI handshake ('uci' -> 'uciok')")
            if ev[0] == "id":
                self.name = ev[1]
            elif ev[0] == "uciok":
                break
        self._send("setoption name UCI_Chess960 value false\nisready\n")
        while self._next("'isready'")[0] != "readyok":
            pass
        probe = self.evaluate(["rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"])
        for kind, label in (("classical", "Classical evaluation"), ("nnue", "NNUE evaluation")):
            if kind in need and np.isnan(probe[kind][0]):
                self.close()
                raise EngineError(f"engine {path} ({self.name or 'unnamed'}) prints no '{label}' line "
                                  f"for 'eval' (Stockfish 15.1 does; Stockfish 16 and later dropped the classical eval)")

    _LINE = re.compile(rb"^(Classical evaluation|NNUE evaluation|Final evaluation|readyok|uciok|id name)([^\n]*)$",
                       re.MULTILINE)

    def _read(self) -> None:
        """Parse the engine's output in large binary chunks (an ``eval`` prints ~100 lines; a
        regex over the chunk is ~5x faster than iterating lines in Python)."""
        classical = nnue = float("nan")
        fd, tail = self.proc.stdout.fileno(), b""
        try:
            while chunk := os.read(fd, 1 << 20):
                buf = tail + chunk
                end = buf.rfind(b"\n") + 1
                tail = buf[end:]
                for mt in self._LINE.finditer(buf, 0, end):
                    key, rest = mt.group(1), mt.group(2)
                    if key == b"Classical evaluation":
                        classical = float(rest.split()[0])
                    elif key == b"NNUE evaluation":
                        nnue = float(rest.split()[0])
                    elif key == b"Final evaluation":
                        self.events.put(("eval", classical, nnue))
                        classical = nnue = float("nan")
                    elif key == b"readyok":
                        self.events.put(("readyok",))
                    elif key == b"uciok":
                        self.events.put(("uciok",))
                    else:
                        self.events.put(("id", rest.decode(errors="replace").strip()))
        except (ValueError, IndexError, OSError):
            pass
        self.events.put(("eof",))

    def _send(self, text: str) -> None:
        try:
            self.proc.stdin.write(text.encode())
        except (BrokenPipeError, OSError):
            pass  # the reader sees the exit

    def _next(self, doing: str):
        try:
            ev = self.events.get(timeout=self.timeout)
        except queue.Empty:
            self.close()
            raise EngineError(f"engine {self.path}: no answer within {self.timeout:.0f} s during {doing}") from None
        if ev[0] == "eof":
            code = self.proc.poll()
            raise EngineError(f"engine {self.path} exited during {doing}"
                              + (f" (status {code})" if code is not None else ""))
        return ev

    def evaluate(self, fens: list[str]) -> dict[str, np.ndarray]:
        """FENs -> {"classical", "nnue"}: (N,) float64 pawns, white POV, NaN = none printed."""
        text = "".join(f"position fen {f}\neval\n" for f in fens) + "isready\n"
        writer = threading.Thread(target=self._send, args=(text,), daemon=True)
        writer.start()
        out = np.full((2, len(fens)), np.nan)
        i = 0
        while True:
            ev = self._next(f"'eval' of position {i + 1} of a batch of {len(fens)} ({fens[min(i, len(fens) - 1)]})"
                            if fens else "'isready'")
            if ev[0] == "readyok":
                break
            if ev[0] == "eval" and i < len(fens):
                out[0, i], out[1, i] = ev[1], ev[2]
                i += 1
        writer.join()
        if i != len(fens):
            raise EngineError(f"engine {self.path}: printed {i} evals for {len(fens)} positions")
        return {"classical": out[0], "nnue": out[1]}

    def close(self) -> None:
        if self.proc.poll() is None:
            self._send("quit\n")
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def stm_cp(pawns_white: np.ndarray, black: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pawns (white POV, NaN = none) -> (int16 centipawns stm POV, null mask)."""
    null = np.isnan(pawns_white)
    cp = np.round(np.nan_to_num(pawns_white) * 100.0)
    cp = np.where(black, -cp, cp).clip(-INT16_MAX, INT16_MAX).astype(np.int16)
    return cp, null


class EnginePool:
    """``jobs`` engine processes; :meth:`evaluate` splits a batch of boards between them."""

    def __init__(self, path: str, jobs: int, need: tuple[str, ...]):
        self.engines: list[UciEvaluator] = []
        try:
            for _ in range(max(1, jobs)):
                self.engines.append(UciEvaluator(path, need))
        except BaseException:
            self.close()
            raise
        self.version = self.engines[0].name or Path(path).name
        self.pool = ThreadPoolExecutor(len(self.engines))

    def evaluate(self, boards: np.ndarray) -> dict[str, np.ndarray]:
        """(N, 32) uint8 -> {"classical", "nnue"}: (N,) float64 pawns, white POV, NaN = none."""
        fens = [unpack_fen(b.tobytes()) for b in boards]
        chunks = np.array_split(np.arange(len(fens)), len(self.engines))
        parts = list(self.pool.map(lambda ec: ec[0].evaluate([fens[i] for i in ec[1]]),
                                   zip(self.engines, chunks)))
        return {k: np.concatenate([p[k] for p in parts]) if parts else np.zeros(0) for k in ("classical", "nnue")}

    def close(self) -> None:
        for e in self.engines:
            e.close()
        if hasattr(self, "pool"):
            self.pool.shutdown()


# ------------------------------------------------------------------------------ the dataset
def part_annotations(part: str | Path) -> dict:
    """What a part's annotation columns hold: {column: {"source", "version"}} from its metadata."""
    meta = open_part(part).schema_arrow.metadata or {}
    return json.loads(meta[META_KEY]) if META_KEY in meta else {}


def _rewrite_part(part: Path, wanted: dict[str, dict], compute: Callable[[np.ndarray], dict],
                  tick: Callable[[int], None]) -> dict[str, int]:
    """Rewrite one part with the columns in ``wanted`` ({column: record}) computed by
    ``compute(boards) -> {column: (int16 values, null mask)}``; temp file + rename. Returns
    the null count per column."""
    from .parts import row_group_boards, writer

    pf = open_part(part)
    schema = pf.schema_arrow  # the part's own columns (either layout), kept as they are
    kept = [f for f in schema if f.name not in wanted]
    new_fields = [pa.field(c, pa.int16(), nullable=True) for c in wanted]
    meta = dict(schema.metadata or {})
    ann = json.loads(meta[META_KEY]) if META_KEY in meta else {}
    ann.update(wanted)
    meta[META_KEY] = json.dumps(ann, sort_keys=True).encode()
    out_schema = pa.schema(kept + new_fields, metadata=meta)
    tmp = part.with_name(f".{part.name}.annotate.tmp")
    nulls = dict.fromkeys(wanted, 0)
    try:
        with writer(tmp, out_schema) as w:
            for rg in range(pf.metadata.num_row_groups):
                t = read_row_group(pf, rg, [f.name for f in kept])
                values = compute(row_group_boards(pf, rg, t))
                arrays = list(t.columns)
                for c in wanted:
                    v, null = values[c]
                    nulls[c] += int(null.sum())
                    arrays.append(pa.array(v, type=pa.int16(), mask=null))
                w.write_table(pa.Table.from_arrays(arrays, schema=out_schema), row_group_size=max(t.num_rows, 1))
                tick(t.num_rows)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, part)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return nulls


def teacher_net(teacher: str | None):
    """The integer net a ``--teacher`` path names (NETDIR, net.safetensors or .nnue) and its
    annotation record ({"source": "net:<file name>", "version": "sha256:<hex>"}), or
    (None, None) for a named teacher (:data:`TEACHERS`). Raises ValueError for neither."""
    if teacher is None or teacher in TEACHERS:
        return None, None
    p = Path(teacher)
    if not p.exists():
        raise ValueError(f"--teacher {teacher}: one of {', '.join(TEACHERS)}, or the path of a net (NETDIR, "
                         "net.safetensors or a Stockfish .nnue)")
    from nnue.inference import load_any

    f = p / "net.safetensors" if p.is_dir() else p
    if not f.is_file():
        raise ValueError(f"--teacher {teacher}: a folder without net.safetensors")
    net = load_any(f)
    return net, {"source": f"net:{f.name}" if f.name != "net.safetensors" else f"net:{f.parent.name}",
                 "version": "sha256:" + mf.sha256_file(f), "kind": net.kind}


def annotate(dataset: str | Path, base: str | None = None, teacher: str | None = None,
             engine: str | None = None, jobs: int = 1, batch: int = 4096,
             progress: bool = True) -> dict:
    """Add ``base_eval`` (``base`` in :data:`BASES`) and/or ``teacher_eval`` (``teacher`` in
    :data:`TEACHERS`) to every part of ``dataset``. Parts whose metadata already records the
    same source and version are skipped. Returns a summary: per column, its source, version,
    rows, nulls (positions in check, Stockfish only), and the parts rewritten and skipped.
    Raises ValueError on bad arguments, EngineError on engine problems, ManifestError."""
    ds = Path(dataset)
    if base is None and teacher is None:
        raise ValueError("nothing to do: give --base and/or --teacher")
    if base is not None and base not in BASES:
        raise ValueError(f"--base {base}: one of {', '.join(BASES)}")
    tnet, trec = teacher_net(teacher)
    if jobs < 1 or batch < 1:
        raise ValueError("--jobs and --batch must be at least 1")
    m = mf.load(ds)
    parts = [ds / name for e in sorted(m["files"].values(), key=mf.entry_key) if e["packed"]
             for name in mf.entry_parts(e)]
    need = tuple(k for k, on in (("classical", base == "stockfish-classical"),
                                 ("nnue", teacher is not None and tnet is None)) if on)
    pool = EnginePool(find_engine(engine), jobs, need) if need else None
    try:
        wanted: dict[str, dict] = {}
        if base is not None:
            wanted["base_eval"] = {"source": base, "version": pool.version if base != "material" else MATERIAL_VERSION}
        if tnet is not None:
            wanted["teacher_eval"] = trec
        elif teacher is not None:
            wanted["teacher_eval"] = {"source": teacher, "version": pool.version}

        def compute(boards: np.ndarray) -> dict:
            out = {}
            black = (boards[:, 24] >> 7).astype(bool)
            sf = None
            if pool is not None:
                chunks = [pool.evaluate(boards[s:s + batch]) for s in range(0, len(boards), batch)]
                sf = {k: np.concatenate([c[k] for c in chunks]) if chunks else np.zeros(0)
                      for k in ("classical", "nnue")}
            if base == "material":
                out["base_eval"] = (material_eval(boards), np.zeros(len(boards), bool))
            elif base is not None:
                out["base_eval"] = stm_cp(sf["classical"], black)
            if tnet is not None:
                from nnue.inference import evaluate

                v = evaluate(tnet, torch.from_numpy(np.ascontiguousarray(boards))).numpy()
                out["teacher_eval"] = (np.clip(v, -INT16_MAX, INT16_MAX).astype(np.int16), np.zeros(len(boards), bool))
            elif teacher is not None:
                out["teacher_eval"] = stm_cp(sf["nnue"], black)
            return out

        todo, skipped = [], []
        for p in parts:
            have = part_annotations(p)
            names = set(open_part(p).schema_arrow.names)
            done = all(c in names and have.get(c) == rec for c, rec in wanted.items())
            (skipped if done else todo).append(p)
        rows_todo = sum(open_part(p).metadata.num_rows for p in todo)
        # the manifest says "incomplete" until every part is done
        m = mf.load(ds)
        anns = m.setdefault("annotations", {})
        for c, rec in wanted.items():
            if anns.get(c, {}).get("source") != rec["source"] or anns.get(c, {}).get("version") != rec["version"] \
                    or todo:
                anns[c] = dict(rec, complete=False)
        mf.save(ds, m)
        bar = None
        if progress and rows_todo:
            from tqdm import tqdm
            bar = tqdm(total=rows_todo, unit="pos", desc="annotate", smoothing=0.1)
        t0 = time.perf_counter()
        nulls = dict.fromkeys(wanted, 0)
        try:
            for p in todo:
                stale = p.with_name(f".{p.name}.annotate.tmp")
                stale.unlink(missing_ok=True)
                got = _rewrite_part(p, wanted, compute, bar.update if bar else (lambda n: None))
                for c in nulls:
                    nulls[c] += got[c]
        finally:
            if bar:
                bar.close()
        seconds = time.perf_counter() - t0
        # nulls of the parts skipped: count from their metadata (Parquet statistics)
        for p in skipped:
            md = open_part(p).metadata
            names = open_part(p).schema_arrow.names
            for c in nulls:
                col = names.index(c)
                for rg in range(md.num_row_groups):
                    st = md.row_group(rg).column(col).statistics
                    nulls[c] += int(st.null_count) if st is not None and st.has_null_count else 0
        rows = sum(open_part(p).metadata.num_rows for p in parts)
        m = mf.load(ds)
        anns = m.setdefault("annotations", {})
        for c, rec in wanted.items():
            anns[c] = dict(rec, complete=True, unit="cp", pov="side to move", rows=rows, nulls=nulls[c],
                           parts=sorted(p.name for p in parts),
                           null_means="side to move in check: Stockfish prints no static eval"
                           if rec["source"] not in ("material",) and not rec["source"].startswith("net:") else "none")
        mf.save(ds, m)
        return {"dataset": str(ds), "columns": {c: dict(anns[c]) for c in wanted},
                "parts_annotated": [p.name for p in todo], "parts_skipped": [p.name for p in skipped],
                "positions_annotated": rows_todo, "seconds": round(seconds, 2),
                "positions_per_s": round(rows_todo / seconds) if seconds > 0 and rows_todo else None}
    finally:
        if pool is not None:
            pool.close()


def missing_columns(paths, columns) -> str | None:
    """The first (part, column) of ``columns`` that a part of the datasets lacks, as a one-line
    message saying how to add it; None when every part has every column."""
    from .stream import dataset_parts

    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    for part, _ in dataset_parts(paths):
        names = open_part(part).schema_arrow.names
        for c in columns:
            if c not in names:
                how = "--base material|stockfish-classical" if c == "base_eval" else "--teacher stockfish-nnue"
                return f"{part}: no {c} column; run 'nnue annotate {part.parent} {how}'"
    return None


# ------------------------------------------------------------------------------ residual nets' bases
def dataset_holds_base(paths, base: str, extra_columns=()) -> bool:
    """Does every dataset of ``paths`` hold ``base`` (a residual base, e.g. "stockfish-classical")
    in its base_eval column: every part has the column (``extra_columns``: the columns a
    :class:`~nnue.pipeline.stream.PackedStream` over them found in every part) and the manifest's
    annotation names that base as its source, complete?"""
    if "base_eval" not in extra_columns:
        return False
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    for p in paths:
        ann = mf.load(p).get("annotations", {}).get("base_eval", {})
        if ann.get("source") != base or not ann.get("complete", True):
            return False
    return True


def residual_fields(r: dict | None, use_column: bool, without_base: int) -> dict:
    """The JSON fields that say how a residual net (header object ``r``, or None: a plain net, no
    fields) got its base: {"residual", "positions_without_base", "base_from"}."""
    if r is None:
        return {}
    return {"residual": r, "positions_without_base": int(without_base),
            "base_from": "material (computed)" if r["base"] == "material" else
            "dataset base_eval column" if use_column else "engine"}


def residual_base(net, boards, column=None, engine: str | None = None, name: str = "the net"):
    """The base a residual net's eval is added to, for positions the evaluator cannot compute it
    for (a Stockfish base): the dataset's base_eval ``column`` ((N,) float, NaN = none) when given,
    else Stockfish 15.1's classical static eval from the engine (``engine``, else ``stockfish`` on
    PATH, else /usr/games/stockfish).

    net: a loaded integer net (:func:`nnue.inference.load`); boards: (N, 32) uint8 packed boards
    (tensor or array); name: the net's path, for messages. Returns None for a net that is not
    residual and for the ``material`` base (the evaluator computes it), else (N,) float64
    centipawns, side-to-move POV, NaN where the engine prints none (side to move in check).
    Raises EngineError naming what is missing."""
    from nnue.inference import residual

    r = residual.of(net)
    if r is None or r["base"] == "material":
        return None
    if column is not None:
        return np.asarray(column, dtype=np.float64)
    boards = np.asarray(boards)
    why = (f"{name} is a residual net (eval = {r['base']} + {r['alpha']:g}·net) and its base is "
           "Stockfish 15.1's classical static eval")
    try:
        pool = EnginePool(find_engine(engine), 1, ("classical",))
    except EngineError as e:
        raise EngineError(f"{why}: {e}") from None
    try:
        pawns = pool.evaluate(boards)["classical"] if len(boards) else np.zeros(0)
    finally:
        pool.close()
    cp, null = stm_cp(pawns, (boards[:, 24] >> 7).astype(bool))
    return np.where(null, np.nan, cp.astype(np.float64))


def evaluate_with_base(net, boards, base):
    """Integer evals of the positions that have a base: ``base`` is :func:`residual_base`'s
    ((N,) float64 centipawns, NaN = none) or None (the evaluator computes what the net needs).
    boards: (N, 32) uint8 tensor. Returns (evals (M,) int64 tensor, keep (N,) bool tensor: the
    rows evaluated, M of them)."""
    from nnue.inference import evaluate

    if base is None:
        return evaluate(net, boards), torch.ones(len(boards), dtype=torch.bool)
    keep = torch.from_numpy(np.isfinite(base))
    b = torch.from_numpy(np.asarray(base)[keep.numpy()]).to(torch.int64)
    return (evaluate(net, boards[keep], base=b) if len(b) else torch.zeros(0, dtype=torch.int64)), keep
