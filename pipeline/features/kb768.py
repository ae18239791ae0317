"""King-bucketed Chess768: a copy of the 768 inputs per bucket of the perspective's own king square.

Formula (bullet's ``ChessBuckets`` / ``ChessBucketsMirrored``): for perspective p with own king
on square k, a piece of colour c and type t (P N B R Q K = 0..5) on square s has index

    768·bucket[r(k)] + (c == p ? 0 : 384) + 64·t + (r(s) ^ m),   r(x) = x ^ (56·p)

r flips ranks for black (each side sees its own back rank as rank 1). Without mirroring m = 0
and ``bucket`` is a 64-entry map of the relative king square. With horizontal mirroring, m = 7
when the own king stands on files e–h (the board is flipped left–right for that perspective),
and the map has 32 entries, for files a–d: a king on e–h reads the entry of its mirror square.
num_inputs = 768 · number of buckets; at most 32 active.

**Names** (what ``features.name`` and the net header hold; each round-trips through
:func:`~nnue.pipeline.features.get_feature_set`):

* ``kb768:<map>`` (no mirroring) or ``kb768hm:<map>`` (mirrored), where ``<map>`` is 8 groups
  separated by ``/``, rank 1 (own back rank) first, each group one character per file: 8 (a–h)
  or 4 (a–d, mirrored). A character is a bucket number, ``0-9`` then ``a-z`` (10–35) then
  ``A-Z`` (36–61). Buckets must be numbered 0..N−1, each used. E.g. the bullet-style 4-bucket
  mirrored map is ``kb768hm:0011/2222/3333/3333/3333/3333/3333/3333``.
* presets, short names for common maps: see :data:`PRESETS`.

The hash covers the map, not the name: a preset and its spelled-out map are the same indexing
and hash alike. Factoriser: ``i % 768``, the piece-square feature without its king bucket
(bullet's usual factoriser). The C reference parses the names itself (:data:`C`).
"""
from __future__ import annotations

import re

import torch

from .lookup import Grid, TableEncoder
from .spec import CFeature, FeatureSet

DIGITS = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
MAX_ACTIVE = 32
FAMILY = "kb768"

#: preset name -> canonical explicit name
PRESETS = {
    # bullet-style: back rank a–b, back rank c–d, second rank, the rest; mirrored
    "kb768hm4": "kb768hm:0011/2222/3333/3333/3333/3333/3333/3333",
    # a 16-bucket mirrored map common in bullet configs: one bucket a square on the back two
    # ranks, then pairs of files over pairs of ranks
    "kb768hm16": "kb768hm:0123/4567/8899/aabb/ccdd/ccdd/eeff/eeff",
}

_NAME = re.compile(r"kb768(hm)?:([0-9a-zA-Z/]+)")


def parse_map(name: str) -> tuple[bool, list[int]]:
    """Explicit name -> (mirrored, bucket map: 32 entries rank by rank for files a–d if mirrored,
    else 64). Raises ValueError saying what is wrong."""
    m = _NAME.fullmatch(name)
    if not m:
        raise ValueError(f"feature set {name!r}: expected 'kb768:<map>' or 'kb768hm:<map>' "
                         f"(e.g. {PRESETS['kb768hm4']!r}) or a preset ({', '.join(PRESETS)})")
    mirrored = m.group(1) is not None
    width = 4 if mirrored else 8
    ranks = m.group(2).split("/")
    if len(ranks) != 8 or any(len(r) != width for r in ranks):
        raise ValueError(f"feature set {name!r}: the map needs 8 groups of {width} characters "
                         f"separated by '/', rank 1 first")
    buckets = [DIGITS.index(ch) for r in ranks for ch in r]
    if sorted(set(buckets)) != list(range(max(buckets) + 1)):
        raise ValueError(f"feature set {name!r}: buckets must be numbered 0..N-1, each used "
                         f"(found {sorted(set(buckets))})")
    return mirrored, buckets


def format_map(mirrored: bool, buckets: list[int]) -> str:
    """Inverse of :func:`parse_map`: the canonical explicit name."""
    width = 4 if mirrored else 8
    text = "".join(DIGITS[b] for b in buckets)
    return f"kb768{'hm' if mirrored else ''}:" + "/".join(text[i:i + width] for i in range(0, len(text), width))


def expand_map(mirrored: bool, buckets: list[int]) -> list[int]:
    """The 64-entry map of relative king squares (a1 = 0); a mirrored map's e–h files read a–d."""
    if not mirrored:
        return list(buckets)
    return [buckets[4 * (sq // 8) + min(sq % 8, 7 - sq % 8)] for sq in range(64)]


def make(name: str) -> FeatureSet:
    """The feature set of a preset or explicit name. Raises ValueError on a malformed name."""
    explicit = PRESETS.get(name, name)
    mirrored, buckets = parse_map(explicit)
    if explicit != format_map(mirrored, buckets):  # unreachable with the regex; keeps names canonical
        raise ValueError(f"feature set {name!r} is not in canonical form")
    bucket64 = torch.tensor(expand_map(mirrored, buckets))
    n_buckets = max(buckets) + 1
    num_inputs = 768 * n_buckets

    def index(g: Grid) -> torch.Tensor:
        rel = 56 * g.p
        flip = torch.where(g.k % 8 >= 4, 7, 0) if mirrored else 0
        return (768 * bucket64[g.k ^ rel] + torch.where(g.colour == g.p, 0, 384) + 64 * g.ptype
                + (g.s ^ rel ^ flip))

    spec = ("768*bucket[r(k)]+(c==p?0:384)+64*t+(r(s)^m); r(x)=x^(56*p); "
            + ("m=file(k)>=4?7:0; " if mirrored else "m=0; ")
            + "bucket=" + ",".join(map(str, expand_map(mirrored, buckets)))
            + "; k: own king; stm first; ascending absolute square")
    return FeatureSet(name=name, num_inputs=num_inputs, max_active=MAX_ACTIVE, spec=spec,
                      encode=TableEncoder(index, num_inputs, MAX_ACTIVE), family=FAMILY,
                      factors=lambda n: torch.arange(n) % 768, c=C)


def resolve(name) -> FeatureSet | None:
    """The feature set of a ``kb768:``/``kb768hm:`` name (the registry's grammar hook), None for a
    name outside this grammar. Raises ValueError on a malformed map."""
    if isinstance(name, str) and name.startswith(FAMILY) and ":" in name:
        return make(name)
    return None


# The C reference's kb768: its own parser of the map text (written from the grammar above).
C = CFeature(
    enum="FS_KB768",
    support="""\
static int MIRRORED, NB_KING;           /* kb768: mirrored, number of king buckets */
static int KMAP[64];                    /* kb768: bucket of each relative king square */

static int map_digit(char ch) {
    const char *digits = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    const char *p = ch ? strchr(digits, ch) : NULL;
    if (!p) die("bad character in king-bucket map");
    return (int)(p - digits);
}

static void parse_kb768_map(const char *text, int mirrored) {
    int width = mirrored ? 4 : 8, used[64] = {0}, maxb = -1;
    const char *c = text;
    for (int rank = 0; rank < 8; rank++) {
        if (rank > 0) {
            if (*c != '/') die("king-bucket map needs 8 groups separated by '/'");
            c++;
        }
        for (int f = 0; f < width; f++, c++) {
            if (*c == '/' || *c == '\\0') die("king-bucket map group has the wrong length");
            int b = map_digit(*c);
            if (mirrored) {
                KMAP[8 * rank + f] = b;
                KMAP[8 * rank + 7 - f] = b;
            } else {
                KMAP[8 * rank + f] = b;
            }
            used[b] = 1;
            if (b > maxb) maxb = b;
        }
    }
    if (*c != '\\0') die("king-bucket map too long");
    for (int b = 0; b <= maxb; b++)
        if (!used[b]) die("king buckets must be numbered 0..N-1, each used");
    NB_KING = maxb + 1;
}""",
    parse="""\
if (!strcmp(name, "kb768hm4")) name = "kb768hm:0011/2222/3333/3333/3333/3333/3333/3333";
else if (!strcmp(name, "kb768hm16")) name = "kb768hm:0123/4567/8899/aabb/ccdd/ccdd/eeff/eeff";
if (!strncmp(name, "kb768hm:", 8) || !strncmp(name, "kb768:", 6)) {
    MIRRORED = name[5] == 'h';
    parse_kb768_map(name + (MIRRORED ? 8 : 6), MIRRORED);
    FS = FS_KB768;
    NF = 768L * NB_KING;
    return;
}""",
    index="""\
int r = p == 0 ? 0 : 56;
int m = (MIRRORED && k % 8 >= 4) ? 7 : 0;
return 768L * KMAP[k ^ r] + (c == p ? 0 : 384) + 64 * t + ((s ^ r) ^ m);""",
)
