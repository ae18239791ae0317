"""``nnue import-net FILE -o NETDIR``, the work: an engine's own net file that a kind reads (a
Stockfish 15.1 or 19 ``.nnue``: every hash, size and the end of the file checked;
:func:`nnue.inference.kinds.read_engine_file` picks the kind by the file's suffix and version)
becomes ``NETDIR/net.safetensors`` (our integer net), the engine file again (the kind's
``engine_file``, written back from the net: byte-identical to the input),
``NETDIR/checkpoint.safetensors`` (the float weights, dequantised by the trainer's kind, with the
hparams of ``model=<kind>``: ``init_weights=`` fine-tunes from it and ``nnue export`` re-quantises
it) and ``NETDIR/import.json``. The parser is :mod:`nnue.commands.import_net`."""
from __future__ import annotations

import json
from pathlib import Path

from safetensors.torch import save as st_save

from nnue.inference import kinds as inference_kinds
from nnue.pipeline import manifest as mf
from nnue.pipeline.atomic import atomic_write_bytes
from nnue.trainer import kinds


def run(args) -> int:
    """``nnue import-net FILE -o NETDIR``: every check before anything is written; import.json last."""
    src, out = Path(args.file), Path(args.output)
    readers = ", ".join(sorted({k.engine_reader.name for k in inference_kinds.KINDS.values() if k.engine_reader}))
    if not src.is_file():
        raise ValueError(f"{src}: {'is a folder' if src.is_dir() else 'no such file'}; give an engine's net file "
                         f"({readers})")
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out}: exists and is not a folder")
    data = src.read_bytes()
    net = inference_kinds.read_engine_file(src, data)  # every check before anything is written
    again = net.raw_bytes()
    if again != data:  # cannot happen for a file that passed the checks; never write a different net silently
        raise ValueError(f"{src}: re-encoding does not give the same bytes; not imported")
    kind = kinds.get(net.kind)
    if kind.import_checkpoint is None:
        raise ValueError(f"{src}: a {net.kind} net, whose kind has no float checkpoint to import into")
    state, hparams = kind.import_checkpoint(net)
    engine = kind.inference.engine_file
    ckpt = st_save({k: v.contiguous() for k, v in state.items()},
                   {"hparams": json.dumps(hparams, sort_keys=True),
                    "progress": json.dumps({"epoch": None, "global_step": None, "val_loss": None,
                                            "imported_from": str(src)})})
    out.mkdir(parents=True, exist_ok=True)
    (out / "import.json").unlink(missing_ok=True)  # written last: its presence means a finished import
    net.save(out / "net.safetensors")
    atomic_write_bytes(out / engine, again)
    atomic_write_bytes(out / "checkpoint.safetensors", ckpt)
    facts = kind.inference.engine_reader.facts
    info = {"source": str(src), "sha256": mf.sha256_file(src), "bytes": len(data),
            "format": kind.inference.engine_reader.name, "kind": net.kind,
            **(facts(net) if facts else {}),
            "files": {"net.safetensors": "integer net (nnue eval, nnue match, nnue export-net)",
                      engine: "the same net in the engine's format (byte-identical to the source)",
                      "checkpoint.safetensors": f"float weights: init_weights=... to fine-tune (model={net.kind}), "
                                                "or nnue export to re-quantise"}}
    atomic_write_bytes(out / "import.json", (json.dumps(info, indent=1) + "\n").encode())
    if args.json:
        print(json.dumps(info))
    else:
        desc = net.arch.get("description")
        print(f"imported {src} ({info['format']}, {len(data):,} bytes, kind {net.kind}): {desc or '(no description)'}")
        print(f"  {kind.inference.summary(net.arch)}")
        print(f"  wrote {out / 'net.safetensors'}, {out / engine} (identical to the source), "
              f"{out / 'checkpoint.safetensors'} and {out / 'import.json'}")
        print(f"  fine-tune: nnue train model={net.kind} init_weights={out / 'checkpoint.safetensors'} "
              "data.path=DATASET ...  (the settings that fine-tune it, measured: docs/engines.md)")
    return 0
