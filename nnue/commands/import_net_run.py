"""``nnue import-net FILE.nnue -o NETDIR``, the work: a Stockfish 15.1 net (every hash, size and the end of
the file checked; :func:`nnue.inference.sfnnv5.read_nnue`) becomes ``NETDIR/net.safetensors`` (our integer
net, kind sfnnv5, its description kept), ``NETDIR/net.nnue`` (written back from it: byte-identical to the
input), ``NETDIR/checkpoint.safetensors`` (the float weights, dequantised, with the hparams of
``model=sfnnv5``: ``init_weights=`` fine-tunes from it and ``nnue export`` re-quantises it) and
``NETDIR/import.json``. The parser is :mod:`nnue.commands.import_net`."""
from __future__ import annotations

import json
from pathlib import Path

from safetensors.torch import save as st_save

from nnue.inference.sfnnue import nnue_bytes
from nnue.inference.sfnnv5 import read_nnue
from nnue.pipeline import manifest as mf
from nnue.pipeline.atomic import atomic_write_bytes
from nnue.trainer.kinds.sfnnv5 import dequantise


def run(args) -> int:
    """``nnue import-net FILE.nnue -o NETDIR``: every check before anything is written; import.json last."""
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
