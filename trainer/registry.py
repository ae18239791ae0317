"""Net registry of the nightly retrain: versions, the champion pointer, history, the cycle lock.

Layout of a registry folder ``REG``::

    REG/versions/NNNN/      a finished version: net.safetensors, net.bin, export.json (trainer/export.py),
                            checkpoint.safetensors (float weights: the next cycle's warm start),
                            gate.json (the gate report), train/ (metrics.json, config.yaml, logs),
                            version.json (written last: a folder without it is not a version)
    REG/work/NNNN/          the cycle in progress (moved to versions/NNNN by one rename when finished;
                            anything left here by a killed cycle is removed by the next one)
    REG/champion            {"version", "net_sha256", "since"}: replaced atomically (temp file + rename)
    REG/history.jsonl       one JSON line per cycle (time, data counts, metrics, verdict, reason) and
                            per manual promote/rollback
    REG/gate.json           the fixed gate set: part files and the share of games, chosen by the first cycle
    REG/retrain.lock        held (fcntl.flock) by a running cycle; holds its pid and host

Every function raises :class:`RegistryError` (a ValueError: one line, status 2 at the command
line) for a registry it cannot read, naming the file and, for a bad champion, suggesting
``nnue registry rollback``.
"""
from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path

from nnue.pipeline.atomic import atomic_write_bytes
from nnue.pipeline.manifest import sha256_file

CHAMPION = "champion"
HISTORY = "history.jsonl"
LOCK = "retrain.lock"
VERSION_JSON = "version.json"


class RegistryError(ValueError):
    """A registry file is missing, unreadable or inconsistent (the message names it)."""


class LockedError(RegistryError):
    """Another cycle holds the registry's lock."""


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _json(path: Path, what: str) -> dict:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise RegistryError(f"{path}: missing ({what})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RegistryError(f"{path}: not valid JSON ({what}): {e}") from None
    if not isinstance(data, dict):
        raise RegistryError(f"{path}: not a JSON object ({what})")
    return data


def _rollback_hint(reg: Path) -> str:
    return f"run 'nnue registry rollback -r {reg}' to point it at the last good version"


class Registry:
    """One registry folder (created on first use)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.versions = self.root / "versions"
        self.work = self.root / "work"

    # --- reading -------------------------------------------------------------------------
    def finished(self) -> list[str]:
        """Names (NNNN) of the finished versions, ascending."""
        if not self.versions.is_dir():
            return []
        return sorted(p.name for p in self.versions.iterdir()
                      if p.is_dir() and p.name.isdigit() and (p / VERSION_JSON).exists())

    def info(self, version: str) -> dict:
        d = self.versions / version
        if not (d / VERSION_JSON).exists():
            raise RegistryError(f"{d}: no finished version {version} (known: {', '.join(self.finished()) or 'none'})")
        return _json(d / VERSION_JSON, "version record")

    def history(self) -> list[dict]:
        p = self.root / HISTORY
        if not p.exists():
            return []
        out = []
        for n, line in enumerate(p.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                # a line cut by a crash can only be the last one (appends are single writes)
                raise RegistryError(f"{p}:{n}: not valid JSON") from None
        return out

    def verify(self, version: str, load_net: bool = True) -> dict:
        """A finished version whose net loads and hashes to what its export.json says.
        ``load_net`` False: when export.json records the net's sha256, a matching hash is enough
        (the bytes are the ones that loaded at export; loading imports torch, seconds on a
        loaded machine). Returns its version.json. Raises RegistryError naming what is wrong."""
        rec = self.info(version)
        d = self.versions / version
        exp = _json(d / "export.json", "export record")
        want = (exp.get("sha256") or {}).get("net.safetensors")
        if not (d / "net.safetensors").exists():
            raise RegistryError(f"{d / 'net.safetensors'}: missing")
        if want and sha256_file(d / "net.safetensors") != want:
            raise RegistryError(f"{d / 'net.safetensors'}: sha256 differs from export.json (corrupt)")
        if want and not load_net:
            return rec
        from nnue.inference import load
        from nnue.inference.net import NetFormatError

        try:
            load(d / "net.safetensors")
        except (NetFormatError, OSError, ValueError) as e:
            raise RegistryError(f"{d / 'net.safetensors'}: cannot be loaded: {e}") from None
        return rec

    def champion(self, load_net: bool = True) -> str | None:
        """The champion's version, checked (finished, net loadable, hash matches; ``load_net``:
        see :meth:`verify`); None when the registry has never had one. Raises RegistryError for
        a missing or corrupt champion."""
        p = self.root / CHAMPION
        if not p.exists():
            if any(h.get("champion") for h in self.history()):
                raise RegistryError(f"{p}: missing, but {self.root / HISTORY} names champions; "
                                    + _rollback_hint(self.root))
            return None
        try:
            c = _json(p, "champion pointer")
            version = c["version"]
            if not isinstance(version, str):
                raise KeyError
        except (RegistryError, KeyError):
            raise RegistryError(f"{p}: corrupt champion pointer (not JSON with a 'version'); "
                                + _rollback_hint(self.root)) from None
        try:
            self.verify(version, load_net=load_net)
        except RegistryError as e:
            raise RegistryError(f"{p}: champion {version} is not usable: {e}; {_rollback_hint(self.root)}") from None
        return version

    def champion_raw(self) -> str | None:
        """The version the pointer names, unchecked (None if missing or unreadable)."""
        try:
            return json.loads((self.root / CHAMPION).read_text()).get("version")
        except (OSError, ValueError, AttributeError):
            return None

    # --- writing -------------------------------------------------------------------------
    def set_champion(self, version: str) -> None:
        d = self.versions / version
        atomic_write_bytes(self.root / CHAMPION, (json.dumps(
            {"version": version, "net_sha256": sha256_file(d / "net.safetensors"), "since": now_iso()},
            sort_keys=True) + "\n").encode())

    def append_history(self, entry: dict) -> None:
        """One line, one write (O_APPEND), fsynced."""
        self.root.mkdir(parents=True, exist_ok=True)
        data = (json.dumps(entry, sort_keys=True, default=float) + "\n").encode()
        fd = os.open(self.root / HISTORY, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)

    def promote(self, version: str, reason: str = "manual") -> dict:
        """Make a finished, loadable version the champion (history line ``action: promote``)."""
        with self.lock():
            self.verify(version)
            before = self.champion_raw()
            self.set_champion(version)
            entry = {"time": now_iso(), "action": "promote", "version": version, "previous": before,
                     "champion": version, "reason": reason}
            self.append_history(entry)
        return entry

    def rollback_target(self) -> str:
        """The version rollback goes to: the newest loadable version that was champion before the
        current one (older than it), or, with no usable champion, the newest loadable former champion."""
        current = self.champion_raw()
        ever = []
        for h in self.history():
            c = h.get("champion")
            if c and c not in ever:
                ever.append(c)
        cands = sorted((v for v in ever if v != current and (current is None or v < current
                                                                or current not in self.finished())),
                       reverse=True)
        problems = []
        for v in cands:
            try:
                self.verify(v)
                return v
            except RegistryError as e:
                problems.append(str(e))
        raise RegistryError(f"{self.root}: no earlier champion to roll back to"
                            + (f" ({'; '.join(problems)})" if problems else ""))

    def rollback(self, version: str | None = None) -> dict:
        with self.lock():
            target = version or self.rollback_target()
            self.verify(target)
            before = self.champion_raw()
            self.set_champion(target)
            entry = {"time": now_iso(), "action": "rollback", "version": target, "previous": before,
                     "champion": target, "reason": f"rolled back from {before}"}
            self.append_history(entry)
        return entry

    # --- the lock ------------------------------------------------------------------------
    def lock(self, on_stale=None):
        return CycleLock(self.root / LOCK, on_stale)


def load_weights(model, path: str | Path) -> None:
    """Warm start: load a ``weights-*.safetensors`` / ``checkpoint.safetensors`` state dict into
    ``model`` (strict, except that the model's factorisers may be missing from the file: they
    start at zero, so the folded net is the file's; e.g. ``nnue import-net``'s checkpoint into
    ``model=sfnnv5`` with its default factoriser). Raises RegistryError when the file is
    unreadable or does not fit the model (another architecture: change ``train.warm_start`` or
    the architecture back)."""
    import torch
    from safetensors.torch import load_file

    try:
        state = load_file(str(path))
    except Exception as e:  # safetensors raises its own error types
        raise RegistryError(f"{path}: not a readable weights file for the warm start: {e}") from None
    own = model.state_dict()
    factorisers = getattr(model, "FACTORISERS", ("ft.factor",))  # the model's factoriser parameters (its kind's)
    for k in own.keys() - state.keys():
        if k.startswith(factorisers):  # a factoriser the file was trained (or imported) without
            state[k] = torch.zeros_like(own[k])
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as e:
        raise RegistryError(f"{path}: does not fit this model (init_weights): {' '.join(str(e).split())[:300]}") from None


from nnue.pipeline.manifest import pid_alive  # noqa: E402  (one stale-lock test for datasets and registries)


class CycleLock:
    """Exclusive lock of a registry: ``fcntl.flock`` on ``retrain.lock``, which holds the holder's
    pid and host. Taken without waiting: a live holder raises :class:`LockedError` naming its pid.
    When the lock is free but the file still names a pid, its holder died without cleaning up
    (kill -9, power loss): a *stale* lock; ``on_stale(info)`` is called (the retrain cleans up the
    dead cycle's work) and the lock is taken. A pid that is still alive on this host while the
    flock is free (a file system without working flock) is refused rather than overrun."""

    def __init__(self, path: Path, on_stale=None):
        self.path, self.on_stale, self.fd = path, on_stale, None
        self.stale: dict | None = None

    def __enter__(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            info = self._read(fd)
            os.close(fd)
            raise LockedError(f"{self.path}: another retrain cycle is running (pid {info.get('pid', '?')} "
                              f"on {info.get('host', '?')} since {info.get('since', '?')})") from None
        info = self._read(fd)
        if info.get("pid"):
            if info.get("host") == socket.gethostname() and pid_alive(int(info["pid"])) \
                    and int(info["pid"]) != os.getpid():
                os.close(fd)
                raise LockedError(f"{self.path}: names live process {info['pid']} but is not locked "
                                  "(does this file system support flock?); remove it if no cycle runs")
            self.stale = info
            if self.on_stale is not None:
                self.on_stale(info)
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": now_iso()}).encode(), 0)
        os.fsync(fd)
        self.fd = fd
        return self

    @staticmethod
    def _read(fd) -> dict:
        try:
            raw = os.pread(fd, 4096, 0)
            return json.loads(raw) if raw.strip() else {}
        except (OSError, ValueError):
            return {}

    def __exit__(self, *exc):
        os.ftruncate(self.fd, 0)  # a clean exit leaves no pid: the next holder sees no stale lock
        os.close(self.fd)
        self.fd = None
        return False


# --------------------------------------------------------------------------------- command line
VERDICT_WORDS = {"promote": "promoted", "reject": "rejected"}


def _fmt(x, f: str) -> str:
    return "n/a" if x is None else format(x, f)


def events(reg: Registry) -> list[dict]:
    """history.jsonl as events, oldest first: ``{"time", "event", "version", "previous", "champion",
    "reason"}``; ``event`` is ``promoted`` / ``rejected`` (a retrain cycle's verdict), ``promoted
    (manual)`` (``nnue registry promote``), ``rolled back`` (``nnue registry rollback``) or
    ``skipped`` (a cycle with no new data)."""
    out = []
    for h in reg.history():
        a = h.get("action")
        if a == "cycle":
            ev = VERDICT_WORDS.get(h.get("verdict"), str(h.get("verdict")))
            prev = h.get("previous_champion")
        elif a == "promote":
            ev, prev = "promoted (manual)", h.get("previous")
        elif a == "rollback":
            ev, prev = "rolled back", h.get("previous")
        else:
            ev, prev = str(a), h.get("champion")
        out.append({"time": h.get("time"), "event": ev, "version": h.get("version"), "previous": prev,
                    "champion": h.get("champion"), "reason": h.get("reason")})
    return out


def _table(rows: list[list[str]], head: list[str]) -> list[str]:
    """Plain-text table: columns padded to their widest cell (the last one left ragged)."""
    w = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    fmt = lambda r: "  ".join(str(c).ljust(w[i]) if i < len(r) - 1 else str(c) for i, c in enumerate(r))  # noqa: E731
    return [fmt(head).rstrip(), *(fmt(r).rstrip() for r in rows)]


def list_rows(reg: Registry) -> list[dict]:
    """One dict per finished version (``nnue registry list --json``): version, champion, verdict,
    created, gate_loss, gate_spearman, positions, reason, in_history, and ``events``: the history
    events (:func:`events`) that name this version."""
    champ = reg.champion_raw()
    evs = events(reg)
    hist = {h.get("version") for h in reg.history() if h.get("action") == "cycle"}
    rows = []
    for v in reg.finished():
        rec = reg.info(v)
        c = (rec.get("metrics") or {}).get("candidate") or {}
        rows.append({"version": v, "champion": v == champ, "verdict": rec.get("verdict"),
                     "created": rec.get("created"), "gate_loss": c.get("loss"),
                     "gate_spearman": c.get("spearman"), "positions": (rec.get("data") or {}).get("positions"),
                     "reason": rec.get("reason"), "in_history": v in hist,
                     "events": [e for e in evs if e["version"] == v]})
    return rows


def list_text(reg: Registry, rows: list[dict]) -> str:
    """``nnue registry list``: the versions (``*`` = champion), then the history: every
    promotion, rejection and rollback, oldest first."""
    if not rows:
        return f"{reg.root}: no versions yet\n"
    out = [f"registry {reg.root}: {len(rows)} version(s), champion {reg.champion_raw() or 'none'}", ""]
    out += _table([["*" if r["champion"] else "", r["version"], r["created"] or "",
                    VERDICT_WORDS.get(r["verdict"], str(r["verdict"])), _fmt(r["gate_loss"], ".5f"),
                    _fmt(r["gate_spearman"], ".4f"), _fmt(r["positions"], ","), r["reason"] or ""] for r in rows],
                  ["", "version", "created", "verdict", "gate loss", "gate ρ", "positions", "reason"])
    evs = events(reg)
    if evs:
        out += ["", "history (oldest first):"]
        out += _table([[e["time"] or "", e["event"], e["version"] or "",
                        (f"{e['champion']} (kept)" if e["previous"] == e["champion"] and e["champion"]
                         else f"{e['previous'] or 'none'} -> {e['champion'] or 'none'}"), e["reason"] or ""] for e in evs],
                      ["time", "event", "version", "champion", "reason"])
    return "\n".join(out) + "\n"


def show_text(rec: dict) -> str:
    """``nnue registry show``: one version as a readable table (``--json``: the raw record)."""
    c = (rec.get("metrics") or {}).get("candidate") or {}
    ch = (rec.get("metrics") or {}).get("champion") or {}
    data, gate = rec.get("data") or {}, rec.get("gate") or {}
    train = (rec.get("history") or {}).get("train") or {}
    lines = [["version", rec.get("version")],
             ["champion", "yes" if rec.get("champion") else "no"],
             ["created", rec.get("created")],
             ["verdict", VERDICT_WORDS.get(rec.get("verdict"), rec.get("verdict"))],
             ["reason", rec.get("reason")],
             ["warm start from", rec.get("warm_start") or "none (fresh weights)"],
             ["data", f"{_fmt(data.get('positions'), ',')} positions in {_fmt(data.get('files'), ',')} file(s) "
                      f"({_fmt(data.get('new_files'), ',')} new, {_fmt(data.get('new_positions'), ',')} new positions)"],
             ["training", f"val_loss {_fmt(train.get('val_loss'), '.5f')}, val_spearman "
                          f"{_fmt(train.get('val_spearman'), '.4f')}, {_fmt(train.get('epochs'), 'd')} epoch(s), "
                          f"{_fmt(train.get('global_step'), ',')} steps"]]
    out = _table([[k, "" if v is None else str(v)] for k, v in lines], ["field", "value"])
    vs = gate.get("champion") or "none"
    out += ["", f"gate ({_fmt(c.get('positions'), ',')} positions of held-out games):"]
    out += _table([["loss", _fmt(c.get("loss"), ".5f"), _fmt(ch.get("loss"), ".5f")],
                   ["Spearman ρ", _fmt(c.get("spearman"), ".4f"), _fmt(ch.get("spearman"), ".4f")]],
                  ["metric", "this version", f"champion then ({vs})"])
    sprt = gate.get("sprt")
    if sprt:
        elo = "n/a" if sprt.get("elo") is None else f"{sprt['elo']:+.1f}"
        out += ["", f"SPRT [{sprt.get('elo0')}, {sprt.get('elo1')}] at {sprt.get('nodes')} nodes: {sprt.get('verdict')}, "
                    f"LLR {_fmt(sprt.get('llr'), '+.2f')}, Elo {elo} ± {_fmt(sprt.get('elo_ci95'), '.1f')} "
                    f"over {sprt.get('games')} games"]
    return "\n".join(out) + "\n"


def cli_registry(args) -> int:
    """``nnue registry list|show|promote|rollback``."""
    reg = Registry(args.registry)
    if not reg.root.is_dir():
        raise RegistryError(f"{reg.root}: no registry folder (nnue retrain creates it)")
    if args.action == "list":
        rows = list_rows(reg)
        print(json.dumps(rows) if args.json else list_text(reg, rows), end="\n" if args.json else "")
        return 0
    if args.action == "show":
        v = args.version or reg.champion()
        if v is None:
            raise RegistryError(f"{reg.root}: no champion yet; give a VERSION")
        v = f"{int(v):04d}" if str(v).isdigit() else v
        rec = reg.info(v)
        rec["champion"] = v == reg.champion_raw()
        rec["gate"] = _json(reg.versions / v / "gate.json", "gate report")
        print(json.dumps(rec, indent=1, sort_keys=True, default=float) if args.json else show_text(rec),
              end="\n" if args.json else "")
        return 0
    version = None if args.version is None else (f"{int(args.version):04d}" if str(args.version).isdigit()
                                                 else args.version)
    if args.action == "promote":
        if version is None:
            raise RegistryError("promote needs a VERSION")
        e = reg.promote(version)
    else:
        e = reg.rollback(version)
    print(f"champion: {e['previous']} -> {e['champion']} ({e['action']})")
    return 0
