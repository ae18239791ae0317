"""``nnue import-net`` and ``nnue export-net``: nets in and out of the formats engines load.

* ``nnue import-net FILE.nnue -o NETDIR``: a Stockfish 15.1 net (every hash, size and the end of
  the file checked; :func:`nnue.inference.sfnnv5.read_nnue`) becomes ``NETDIR/net.safetensors``
  (our integer net, kind sfnnv5, its description kept), ``NETDIR/net.nnue`` (written back from
  it: byte-identical to the input), ``NETDIR/checkpoint.safetensors`` (the float weights,
  dequantised, with the hparams of ``model=sfnnv5``: ``init_weights=`` fine-tunes from it and
  ``nnue export`` re-quantises it) and ``NETDIR/import.json``;
* ``nnue export-net NETDIR --to TARGET -o FILE``: an exported integer net written in an engine's
  format (:data:`TARGETS`). A net the target cannot hold is refused in one line naming the
  dimension or field.
"""
from __future__ import annotations

import json
from pathlib import Path

def _write_stockfish(net, path: Path) -> dict:
    """``--to stockfish-15.1``: the ``.nnue`` file (refused in one line, naming the dimension or
    field, for a net Stockfish 15.1 cannot load)."""
    from nnue.inference.sfnnue import check_writable, file_hash, nnue_bytes
    from nnue.pipeline.atomic import atomic_write_bytes

    check_writable(net, path)
    data = nnue_bytes(net)
    atomic_write_bytes(path, data)
    return {"target": "stockfish-15.1", "file": str(path), "bytes": len(data),
            "layout": "Stockfish 15.1 .nnue (SFNNv5): header, feature transformer, 8 layer stacks",
            "hash": f"0x{file_hash(net.arch['hidden']):08X}", "description": net.arch.get("description", ""),
            "notes": [f"load it with: setoption name EvalFile value {path}"]}


def _write_bullet(net, path: Path) -> dict:
    """``--to bullet``: bullet's ``quantised.bin`` (:func:`nnue.inference.bullet.write_bullet`)."""
    from nnue.inference.bullet import write_bullet

    return write_bullet(net, path)


#: ``nnue export-net --to`` targets: name -> writer ``(net, path) -> dict``. A writer checks the
#: net first (one line naming the field, before anything is written), writes atomically, and
#: returns what ``--json`` prints (its ``notes`` as lines).
TARGETS = {"bullet": _write_bullet, "stockfish-15.1": _write_stockfish}


def load_any(path) -> object:
    """An integer net from ``net.safetensors``, a NETDIR holding it, or a Stockfish ``.nnue``
    file. Raises ValueError / NetFormatError naming the path."""
    from nnue.inference import load
    from nnue.inference.sfnnv5 import read_nnue

    p = Path(path)
    if p.is_dir():
        if not (p / "net.safetensors").is_file():
            raise ValueError(f"{p}: a folder without net.safetensors; give NETDIR/net.safetensors")
        p = p / "net.safetensors"
    elif not p.exists():
        raise ValueError(f"{p}: no such net file")
    if p.suffix == ".nnue":
        return read_nnue(p)
    return load(p)


def cmd_import_net(args) -> int:
    from safetensors.torch import save as st_save

    from nnue.inference.sfnnue import nnue_bytes
    from nnue.inference.sfnnv5 import read_nnue
    from nnue.pipeline import manifest as mf
    from nnue.pipeline.atomic import atomic_write_bytes
    from nnue.trainer.kinds.sfnnv5 import dequantise

    src, out = Path(args.file), Path(args.output)
    if not src.is_file():
        raise ValueError(f"{src}: {'is a folder' if src.is_dir() else 'no such file'}; give a Stockfish 15.1 .nnue")
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out}: exists and is not a folder")
    data = src.read_bytes()
    net = read_nnue(src, data)  # every check before anything is written
    again = nnue_bytes(net)
    if again != data:  # cannot happen for a file that passed the checks; never write a different net silently
        raise ValueError(f"{src}: re-encoding does not give the same bytes; not imported")
    l1 = net.arch["hidden"]
    hparams = {"features": "halfkav2_hm", "output_buckets": "SFPieceCount<8>", "hidden": l1,
               "activation": "pairwise_crelu", "kind": "sfnnv5", "factoriser": False, "qat": False,
               "quant": net.scheme.to_dict(), "sfnnv5": {"description": net.arch["description"]}}
    state = {k: v.contiguous() for k, v in dequantise(net).items()}
    ckpt = st_save(state, {"hparams": json.dumps(hparams, sort_keys=True),
                           "progress": json.dumps({"epoch": None, "global_step": None, "val_loss": None,
                                                   "imported_from": str(src)})})
    out.mkdir(parents=True, exist_ok=True)
    (out / "import.json").unlink(missing_ok=True)  # written last: its presence means a finished import
    net.save(out / "net.safetensors")
    atomic_write_bytes(out / "net.nnue", again)
    atomic_write_bytes(out / "checkpoint.safetensors", ckpt)
    info = {"source": str(src), "sha256": mf.sha256_file(src), "bytes": len(data),
            "description": net.arch["description"], "l1": l1, "stockfish_hash": net.provenance["stockfish_hash"],
            "files": {"net.safetensors": "integer net (nnue eval, nnue match, nnue export-net)",
                      "net.nnue": "the same net in Stockfish 15.1's format (byte-identical to the source)",
                      "checkpoint.safetensors": "float weights: init_weights=... to fine-tune (model=sfnnv5 "
                                                "features=halfkav2_hm), or nnue export to re-quantise"},
            "stockfish_loadable": l1 == 1024}
    atomic_write_bytes(out / "import.json", (json.dumps(info, indent=1) + "\n").encode())
    if args.json:
        print(json.dumps(info))
    else:
        print(f"imported {src} ({len(data):,} bytes, L1 {l1}, hash {info['stockfish_hash']}): "
              f"{net.arch['description'] or '(no description)'}")
        print(f"  wrote {out / 'net.safetensors'}, {out / 'net.nnue'} (identical to the source), "
              f"{out / 'checkpoint.safetensors'} and {out / 'import.json'}")
        print(f"  fine-tune: nnue train model=sfnnv5 features=halfkav2_hm init_weights={out / 'checkpoint.safetensors'} "
              "data.path=DATASET ...")
    return 0


def add_parsers(sub) -> None:
    """The ``import-net`` sub-command (``export-net`` is in :mod:`nnue.cli`, its targets here)."""
    s = sub.add_parser("import-net", help="read a Stockfish 15.1 .nnue into an integer net and a float checkpoint",
                       description="Read FILE.nnue (Stockfish 15.1, SFNNv5; version, hashes, sizes and end of file "
                       "checked) and write NETDIR/net.safetensors, NETDIR/net.nnue (byte-identical), "
                       "NETDIR/checkpoint.safetensors (dequantised float weights: init_weights= to fine-tune) and "
                       "NETDIR/import.json. Stockfish 15.1 writes its built-in net with the UCI command "
                       "'export_net FILE'.")
    s.add_argument("file", metavar="FILE.nnue", help="a Stockfish 15.1 network file")
    s.add_argument("-o", "--output", required=True, metavar="NETDIR", help="output folder (created)")
    s.add_argument("--json", action="store_true", help="print import.json as one line (default: text)")
    s.set_defaults(func=cmd_import_net)

