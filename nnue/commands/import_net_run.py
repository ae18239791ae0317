"""``nnue import-net FILE.nnue -o NETDIR``, the work: a Stockfish net of any version nnue-forge
reads (picked by the file's version field: :mod:`nnue.inference.stockfish_files`; every hash,
size and the end of the file checked by its codec) becomes ``NETDIR/net.safetensors`` (our
integer net, its kind's, the description kept), ``NETDIR/net.nnue`` (written back from it:
byte-identical to the input), ``NETDIR/checkpoint.safetensors`` (the float weights, dequantised,
with the hparams of the kind: ``init_weights=`` fine-tunes from it and ``nnue export``
re-quantises it) and ``NETDIR/import.json``. The parser is :mod:`nnue.commands.import_net`."""
from __future__ import annotations

import json
from pathlib import Path

from safetensors.torch import save as st_save

from nnue.inference.stockfish_files import format_of
from nnue.pipeline import manifest as mf
from nnue.pipeline.atomic import atomic_write_bytes


def run(args) -> int:
    """``nnue import-net FILE.nnue -o NETDIR``: every check before anything is written; import.json last."""
    src, out = Path(args.file), Path(args.output)
    if not src.is_file():
        raise ValueError(f"{src}: {'is a folder' if src.is_dir() else 'no such file'}; give a Stockfish .nnue")
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out}: exists and is not a folder")
    data = src.read_bytes()
    fmt = format_of(src, data)
    net = fmt.read(src, data)  # every check before anything is written
    again = net.raw_bytes()
    if again != data:  # cannot happen for a file that passed the checks; never write a different net silently
        raise ValueError(f"{src}: re-encoding does not give the same bytes; not imported")
    state, hparams = fmt.float_checkpoint(net)
    state = {k: v.contiguous() for k, v in state.items()}
    ckpt = st_save(state, {"hparams": json.dumps(hparams, sort_keys=True),
                           "progress": json.dumps({"epoch": None, "global_step": None, "val_loss": None,
                                                   "imported_from": str(src)})})
    l1 = net.arch["hidden"]
    out.mkdir(parents=True, exist_ok=True)
    (out / "import.json").unlink(missing_ok=True)  # written last: its presence means a finished import
    net.save(out / "net.safetensors")
    atomic_write_bytes(out / "net.nnue", again)
    atomic_write_bytes(out / "checkpoint.safetensors", ckpt)
    train = f"model={hparams['kind']} features={hparams['features']}"
    info = {"source": str(src), "sha256": mf.sha256_file(src), "bytes": len(data), "format": fmt.name,
            "kind": net.kind, "description": net.arch["description"], "l1": l1,
            "stockfish_hash": net.provenance["stockfish_hash"],
            "files": {"net.safetensors": "integer net (nnue eval, nnue match, nnue export-net)",
                      "net.nnue": f"the same net in {fmt.engine}'s format (byte-identical to the source)",
                      "checkpoint.safetensors": f"float weights: init_weights=... to fine-tune ({train}), "
                                                "or nnue export to re-quantise"},
            "stockfish_loadable": l1 == fmt.engine_l1}
    atomic_write_bytes(out / "import.json", (json.dumps(info, indent=1) + "\n").encode())
    if args.json:
        print(json.dumps(info))
    else:
        print(f"imported {src} ({fmt.name}, {len(data):,} bytes, L1 {l1}, hash {info['stockfish_hash']}): "
              f"{net.arch['description'] or '(no description)'}")
        print(f"  wrote {out / 'net.safetensors'}, {out / 'net.nnue'} (identical to the source), "
              f"{out / 'checkpoint.safetensors'} and {out / 'import.json'}")
        print(f"  fine-tune: nnue train {train} init_weights={out / 'checkpoint.safetensors'} data.path=DATASET ...")
    return 0
