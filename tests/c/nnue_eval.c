/* Independent reference evaluator for nnue-forge's raw net.bin layouts.
 *
 * Written from the published formulas (feature index formulas, output-bucket formulas, the
 * integer forward pass), not from the Python code, so that the exporter and the integer
 * inference engine can be checked against it.  C99, no dependencies.
 *
 * The activation and feature-set code lives, written in C, in each spec module (nnue/spec/
 * activations/<name>.py, pipeline/features/<name>.py) and reaches this file as two generated
 * headers, nnue_acts.h and nnue_features.h (enums, name parsers, the rules).  Build:
 *   python -m tests.cref BUILD_DIR      (writes both headers, then gcc -I BUILD_DIR ...)
 *
 * Usage:
 *   nnue_eval NET.bin H B ACT
 *       legacy form: chess768 inputs, MaterialCount<B> buckets, perspective net.
 *   nnue_eval NET.bin --features NAME --buckets SPEC --perspective H ACT
 *   nnue_eval NET.bin --features NAME --buckets SPEC --deep H ACT N1 N2 HACT [HACT2]
 *   nnue_eval NET.bin --features NAME --buckets SPEC --tiny H ACT N1 HACT
 *   any of the last three with  --residual BASE NUM SHIFT  (a residual net, below)
 *   nnue_eval --list-features NAME
 *       no net: prints each FEN's active features, "stm ... | nstm ...", in the set's order
 *
 *   NAME: chess768 | halfkp | halfkav2_hm | kb768hm4 | kb768hm16 | kb768:<map> | kb768hm:<map> |
 *         full_threats | pp_3wide | sfnnv16 (= full_threats+pp_3wide+halfkav2_hm)
 *   SPEC: MaterialCount<N> | SFPieceCount<N>
 *   ACT (first layer): crelu | screlu | pairwise_crelu;
 *   HACT (after L1, and after L2 unless HACT2 is given): crelu | screlu | hardswish | swish;
 *   HACT2 (after L2): HACT's choices, or swiglu | swiglu_swish (gated: L2 has 2 N2 rows)
 *
 * Reads FENs from stdin, one per line (only the placement and the side to move are used;
 * blank lines are skipped) and prints one line per FEN: the eval in centipawns from the side
 * to move's point of view, or the word "overflow" when an int16 accumulator or an int32 sum
 * of an integer engine would overflow for that position (values here are computed in 64 bits
 * and checked, so the word replaces what a 16/32-bit engine would get wrong).
 *
 * ---------------------------------------------------------------------------------------
 * Board conventions: squares a1 = 0 .. h8 = 63 (sq = 8*rank + file); colours white = 0,
 * black = 1; piece types P N B R Q K = 0..5; perspective p is a colour; "own king" is the king
 * of colour p.  Features per perspective p, for every piece (c, t, s):
 *
 *   chess768:    (c == p ? 0 : 384) + 64 t + (p == white ? s : s ^ 56)
 *   halfkp:      kings are not features; o(x) = x ^ (63 p) (rotation by 180 deg for black),
 *                1 + o(s) + 64 (2 t + (c != p)) + 641 o(k)                         F = 41024
 *   halfkav2_hm: o(x) = x ^ (56 p) ^ (file(k) < 4 ? 7 : 0); plane = 2 t + (c != p) with both
 *                kings on plane 10; o(s) + 64 plane + 704 KB(o(k)), KB(x) for the oriented
 *                king (always on files e-h) = 4 (7 - rank(x)) + (7 - file(x))       F = 22528
 *   kb768:       r(x) = x ^ (56 p); m = 7 if mirrored and file(k) >= 4 else 0;
 *                768 bucket(r(k)) + (c == p ? 0 : 384) + 64 t + (r(s) ^ m)          F = 768 NB
 *                map text: 8 groups separated by '/', rank 1 (own back rank) first, 8 chars
 *                (files a-h) or 4 chars (mirrored: files a-d; a king on file f >= 4 reads
 *                file 7 - f); chars 0-9, a-z (10-35), A-Z (36-61).
 *                kb768hm4  = kb768hm:0011/2222/3333/3333/3333/3333/3333/3333
 *                kb768hm16 = kb768hm:0123/4567/8899/aabb/ccdd/ccdd/eeff/eeff
 *   full_threats, pp_3wide, sfnnv16 (Stockfish 19's threat inputs): not one feature per piece;
 *                their lists and formulas are in the generated header (active_features).
 *
 * Output bucket (pc = number of pieces, kings included), clamped to [0, N-1]:
 *   MaterialCount<N>: floor((pc - 2) / ceil(32 / N));   SFPieceCount<N>: floor((pc - 1) / 4)
 *
 * QA = 255, QB = 64, SCALE = 400.  Accumulators: acc_p = l0b + sum of l0w rows of the active
 * features of perspective p; v = clamp(acc, 0, QA).  "stm" = perspective of the side to move.
 *
 * Perspective net, layout (little endian, no header):
 *   l0w int16[F][H] | l0b int16[H] | l1w int16[B][L1] | l1b int16[B] | zeros to 64 bytes,
 *   L1 = 2H (H for pairwise_crelu); the first half of a bucket's weights weigh the stm half.
 *   crelu:    out = sum v_stm l1w + sum v_nstm l1w' + l1b
 *   screlu:   out = (sum v_stm^2 l1w + sum v_nstm^2 l1w') / QA + l1b
 *   pairwise: q = v[i] v[i + H/2] (i < H/2) per perspective, out = (sum q l1w ...) / QA + l1b
 *   eval = out SCALE / (QA QB); every division truncates toward zero.
 *
 * Deep net, layout (little endian, no header):
 *   l0w int16[F][H] | l0b int16[H] | l1w int8[B][N1][L1] | l1b int32[B][N1] |
 *   l2w int8[B][N2][N1] | l2b int32[B][N2] | outw int8[B][N2] | outb int32[B] | zeros to 64 B
 *   x0 (L1 bytes, stm half first): crelu v; screlu (v v) >> 8; pairwise (v[j] v[j+H/2]) >> 8
 *   s1 = l1b + l1w x0, y1 = floor(s1 / 64), x1 = act(y1); s2 = l2b + l2w x1, y2 = floor(s2 / 64),
 *   x2 = act(y2); act: crelu clamp(y, 0, 255), screlu clamp(y, 0, 255)^2 >> 8;
 *   out = outb + outw x2; eval = out 400 / (255 64), truncating toward zero.
 *   Non-u8 hidden activations (inputs yc = clamp(y, -2040, 2040), 2040 = 8 QA; // is floor):
 *   hardswish: g = clamp(yc + 765, 0, 1530), x = (yc g) // 1530;
 *   swish: piecewise linear through T[k] = round(255 swish(-8 + k/5)), k = 0..80 (SWISH_T):
 *          u = yc + 2040, i = min(u // 51, 79), r = u - 51 i, x = T[i] + ((T[i+1] - T[i]) r + 25) // 51;
 *   swiglu / swiglu_swish (after L2): L2 has 2 N2 rows per bucket (l2w int8[B][2 N2][N1],
 *          l2b int32[B][2 N2]); g = hardswish / swish of y2[n], b = clamp(y2[N2 + n], -2040, 2040),
 *          x2[n] = (g b) // 256, for n < N2.
 *
 * Tiny net (--tiny), layout (little endian, no header):
 *   l0w int16[F][H] | l0b int16[H] | l1w int8[B][N1][L1] | l1b int32[B][N1] |
 *   outw int8[B][N1] | outb int32[B] | zeros to 64 B
 *   x0 and x1 as in the deep net (HACT after L1); out = outb + outw x1;
 *   eval = out 400 / (255 64), truncating toward zero.
 *
 * Residual net (--residual BASE NUM SHIFT): the eval above is the net's own n; the printed eval
 * is  base + floor((NUM n + 2^(SHIFT-1)) / 2^SHIFT)  (alpha = NUM / 2^SHIFT, rounded half up).
 * BASE "material": P N B R Q K = 100 300 300 500 900 0 cp, side to move's POV, clamped to
 * +-32767; any other base is read from the line, written after the FEN as "FEN | BASE".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QA 255
#define QB 64
#define SCALE 400
#define SHIFT_BITS 8
#define HIDDEN_DIV 64

#define CLAMPV (8 * QA)

enum { OB_MATERIAL, OB_SFPIECE };

/* configuration */
static int FS;                          /* feature set (FS_<NAME> of nnue_features.h) */
static long NF;                         /* number of features */
static int OBKIND, B;                   /* output buckets */
static int DEEP, H, ACT, L1, N1, N2, HACT, HACT2, R2;  /* R2: L2 rows per bucket; DEEP 2: tiny */
static int RESID, RMATERIAL, RNUM, RSHIFT;  /* residual net: base material (else from the line), alpha */

/* parameters */
static int16_t *l0w, *l0b, *pl1w, *pl1b;            /* perspective */
static int8_t *dl1w, *dl2w, *doutw;                  /* deep */
static int32_t *dl1b, *dl2b, *doutb;

static void die(const char *msg) { fprintf(stderr, "nnue_eval: %s\n", msg); exit(1); }

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) die("out of memory");
    return p;
}

static int fits32(int64_t x) { return x >= INT32_MIN && x <= INT32_MAX; }

/* floor(a / d) for d > 0, with no reliance on the sign behaviour of >> */
static int64_t floor_div(int64_t a, int64_t d) {
    int64_t q = a / d;
    if (a % d != 0 && a < 0) q--;
    return q;
}

static int64_t clampv(int64_t y) { return y < -CLAMPV ? -CLAMPV : y > CLAMPV ? CLAMPV : y; }

/* Generated from the specs (nnue.spec.activations.c_header, nnue.pipeline.features.c_header;
 * tests/cref.py writes them beside the build): the activations' enum, parser and rules, and the
 * feature sets' enum, parser (parse_features sets FS and NF) and index (feature_index). */
#include "nnue_acts.h"
#include "nnue_features.h"

/* ---------------------------------------------------------------- argument parsing */

static int parse_pos_int(const char *s) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v <= 0 || v > 1000000) die("expected a positive integer argument");
    return (int)v;
}

static void parse_buckets(const char *spec) {
    const char *lt = strchr(spec, '<');
    size_t len = strlen(spec);
    if (!lt || len < 3 || spec[len - 1] != '>') die("bad output-bucket spec");
    if (!strncmp(spec, "MaterialCount<", 14) && lt == spec + 13) OBKIND = OB_MATERIAL;
    else if (!strncmp(spec, "SFPieceCount<", 13) && lt == spec + 12) OBKIND = OB_SFPIECE;
    else die("unknown output-bucket kind");
    char num[16];
    size_t n = len - 1 - (size_t)(lt + 1 - spec);
    if (n == 0 || n >= sizeof num) die("bad output-bucket count");
    memcpy(num, lt + 1, n);
    num[n] = '\0';
    B = parse_pos_int(num);
    if (B > 32) die("output-bucket count must be 1..32");
}

/* ---------------------------------------------------------------- loading */

static int16_t get16(const unsigned char *p) { return (int16_t)(uint16_t)(p[0] | (p[1] << 8)); }
static int32_t get32(const unsigned char *p) {
    return (int32_t)((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24));
}

static int16_t *take16(const unsigned char **p, long n) {
    int16_t *a = xmalloc((size_t)n * sizeof *a);
    for (long i = 0; i < n; i++) a[i] = get16(*p + 2 * i);
    *p += 2 * n;
    return a;
}
static int32_t *take32(const unsigned char **p, long n) {
    int32_t *a = xmalloc((size_t)n * sizeof *a);
    for (long i = 0; i < n; i++) a[i] = get32(*p + 4 * i);
    *p += 4 * n;
    return a;
}
static int8_t *take8(const unsigned char **p, long n) {
    int8_t *a = xmalloc((size_t)n * sizeof *a);
    for (long i = 0; i < n; i++) a[i] = (int8_t)(((*p)[i] ^ 0x80) - 0x80);
    *p += n;
    return a;
}

static void load(const char *path) {
    long bytes = 2 * (NF * H + H);
    if (DEEP == 2)
        bytes += (long)B * N1 * L1 + 4L * B * N1 + (long)B * N1 + 4L * B;
    else if (DEEP)
        bytes += (long)B * N1 * L1 + 4L * B * N1 + (long)B * R2 * N1 + 4L * B * R2 + (long)B * N2 + 4L * B;
    else
        bytes += 2 * ((long)B * L1 + B);
    long padded = (bytes + 63) / 64 * 64;
    FILE *fp = fopen(path, "rb");
    if (!fp) die("cannot open net file");
    if (fseek(fp, 0, SEEK_END) != 0) die("cannot seek net file");
    long size = ftell(fp);
    if (size != padded) {
        fprintf(stderr, "nnue_eval: %s has %ld bytes, expected %ld\n", path, size, padded);
        exit(1);
    }
    rewind(fp);
    unsigned char *raw = xmalloc((size_t)size);
    if (fread(raw, 1, (size_t)size, fp) != (size_t)size) die("short read");
    fclose(fp);
    for (long i = bytes; i < size; i++)
        if (raw[i]) die("non-zero padding");
    const unsigned char *p = raw;
    l0w = take16(&p, NF * H);
    l0b = take16(&p, H);
    if (DEEP == 2) {
        dl1w = take8(&p, (long)B * N1 * L1);
        dl1b = take32(&p, (long)B * N1);
        doutw = take8(&p, (long)B * N1);
        doutb = take32(&p, B);
    } else if (DEEP) {
        dl1w = take8(&p, (long)B * N1 * L1);
        dl1b = take32(&p, (long)B * N1);
        dl2w = take8(&p, (long)B * R2 * N1);
        dl2b = take32(&p, (long)B * R2);
        doutw = take8(&p, (long)B * N2);
        doutb = take32(&p, B);
    } else {
        pl1w = take16(&p, (long)B * L1);
        pl1b = take16(&p, B);
    }
    free(raw);
}

/* ---------------------------------------------------------------- board and features */

typedef struct {
    int n;            /* number of pieces */
    int colour[64], type[64], sq[64];
    int king[2];      /* king square per colour, -1 if none */
    int stm;
} Board;

/* Returns 0 on success. */
static int parse_fen(const char *fen, Board *b) {
    const char *types = "pnbrqk";
    int rank = 7, file = 0;
    const char *c = fen;
    b->n = 0;
    b->king[0] = b->king[1] = -1;
    for (; *c && *c != ' ' && *c != '\t' && *c != '\n' && *c != '\r'; c++) {
        if (*c == '/') {
            if (file != 8) return 1;
            rank--;
            file = 0;
            if (rank < 0) return 1;
            continue;
        }
        if (*c >= '1' && *c <= '8') {
            file += *c - '0';
            if (file > 8) return 1;
            continue;
        }
        char lower = (*c >= 'A' && *c <= 'Z') ? (char)(*c - 'A' + 'a') : *c;
        const char *t = strchr(types, lower);
        if (!t || !lower || file > 7 || b->n >= 64) return 1;
        int colour = (*c >= 'a' && *c <= 'z') ? 1 : 0, type = (int)(t - types), sq = 8 * rank + file;
        b->colour[b->n] = colour;
        b->type[b->n] = type;
        b->sq[b->n] = sq;
        b->n++;
        if (type == 5) {
            if (b->king[colour] >= 0) return 1;
            b->king[colour] = sq;
        }
        file++;
    }
    if (rank != 0 || file != 8 || b->n > 32) return 1;  /* a packed board holds at most 32 pieces */
    while (*c == ' ' || *c == '\t') c++;
    if (*c == 'w') b->stm = 0;
    else if (*c == 'b') b->stm = 1;
    else return 1;
    return 0;
}

/* The active features of perspective p (nnue_features.h's active_features: one feature_index per
 * piece, or a set's own list, e.g. threats); their number, or -1 when more than the set allows. */
static int features(const Board *b, int p, long *out) {
    return active_features(b->colour, b->type, b->sq, b->n, b->king, p, out);
}

static int output_bucket(int pieces) {
    int bucket;
    if (OBKIND == OB_MATERIAL) {
        int per = (32 + B - 1) / B, d = pieces - 2;
        bucket = d >= 0 ? d / per : -1;  /* floor; any negative clamps to 0 */
    } else {
        int d = pieces - 1;
        bucket = d >= 0 ? d / 4 : -1;
    }
    if (bucket > B - 1) bucket = B - 1;
    if (bucket < 0) bucket = 0;
    return bucket;
}

/* material balance, side to move's POV: P N B R Q K = 100 300 300 500 900 0, clamped to +-32767 */
static int64_t material(const Board *b) {
    static const int64_t val[6] = {100, 300, 300, 500, 900, 0};
    int64_t w = 0;
    for (int i = 0; i < b->n; i++) w += b->colour[i] == 0 ? val[b->type[i]] : -val[b->type[i]];
    if (b->stm == 1) w = -w;
    return w < -32767 ? -32767 : w > 32767 ? 32767 : w;
}

/* Accumulator of perspective p, clamped to [0, QA] into v. Returns 1 if it leaves int16. */
static int accumulate(const Board *b, int p, int32_t *v) {
    int64_t *acc = xmalloc((size_t)H * sizeof *acc);
    int bad = 0;
    long feats[MAX_ACTIVE_FEATURES];
    int nf = features(b, p, feats);
    if (nf < 0) die("more active features than the feature set allows");
    for (int j = 0; j < H; j++) acc[j] = l0b[j];
    for (int i = 0; i < nf; i++) {
        long f = feats[i];
        if (f < 0 || f >= NF) die("internal error: feature index out of range");
        const int16_t *row = l0w + f * H;
        for (int j = 0; j < H; j++) acc[j] += row[j];
    }
    for (int j = 0; j < H; j++) {
        if (acc[j] < -32768 || acc[j] > 32767) bad = 1;
        v[j] = acc[j] < 0 ? 0 : acc[j] > QA ? QA : (int32_t)acc[j];
    }
    free(acc);
    return bad;
}

/* ---------------------------------------------------------------- forward passes */

/* Returns 0 and sets *eval, or 1 on overflow. */
static int eval_perspective(const int32_t *vs, const int32_t *vn, int bucket, int64_t *eval) {
    const int16_t *w = pl1w + (long)bucket * L1;
    int half = L1 / 2;
    const int32_t *vv[2] = {vs, vn};
    int64_t sum = 0;
    for (int side = 0; side < 2; side++) {
        const int32_t *v = vv[side];
        const int16_t *ws = w + side * half;
        for (int i = 0; i < half; i++) {
            int64_t x;
            x = act_l0_product(ACT, v[i], act_l0_half(ACT) ? v[i + H / 2] : 0);
            sum += x * ws[i];
        }
    }
    if (!fits32(sum)) return 1;
    int64_t out = act_l0_divides(ACT) ? sum / QA : sum;
    out += pl1b[bucket];
    if (!fits32(out)) return 1;
    *eval = out * SCALE / (QA * QB);
    return 0;
}

static int eval_deep(const int32_t *vs, const int32_t *vn, int bucket, int64_t *eval) {
    int32_t *x0 = xmalloc((size_t)L1 * sizeof *x0), *x1 = xmalloc((size_t)N1 * sizeof *x1),
            *x2 = xmalloc((size_t)N2 * sizeof *x2);
    int half = L1 / 2, bad = 0;
    const int32_t *vv[2] = {vs, vn};
    for (int side = 0; side < 2; side++) {
        const int32_t *v = vv[side];
        for (int i = 0; i < half; i++) {
            x0[side * half + i] = act_l0_deep(ACT, v[i], act_l0_half(ACT) ? v[i + H / 2] : 0);
        }
    }
    const int8_t *w1 = dl1w + (long)bucket * N1 * L1;
    for (int n = 0; n < N1; n++) {
        int64_t s = dl1b[(long)bucket * N1 + n];
        for (int j = 0; j < L1; j++) s += (int64_t)w1[(long)n * L1 + j] * x0[j];
        if (!fits32(s)) bad = 1;
        x1[n] = (int32_t)hidden_act(floor_div(s, HIDDEN_DIV), HACT);
    }
    const int8_t *w2 = dl2w + (long)bucket * R2 * N1;
    int64_t *y2 = xmalloc((size_t)R2 * sizeof *y2);
    for (int n = 0; n < R2; n++) {
        int64_t s = dl2b[(long)bucket * R2 + n];
        for (int j = 0; j < N1; j++) s += (int64_t)w2[(long)n * N1 + j] * x1[j];
        if (!fits32(s)) bad = 1;
        y2[n] = floor_div(s, HIDDEN_DIV);
    }
    for (int n = 0; n < N2; n++) {
        if (act_gate(HACT2) >= 0) {  /* gate rows [0, N2), linear rows [N2, 2 N2) */
            int64_t g = hidden_act(y2[n], act_gate(HACT2)), b = clampv(y2[N2 + n]);
            x2[n] = (int32_t)act_gated(HACT2, g, b);
        } else {
            x2[n] = (int32_t)hidden_act(y2[n], HACT2);
        }
    }
    free(y2);
    int64_t out = doutb[bucket];
    for (int j = 0; j < N2; j++) out += (int64_t)doutw[(long)bucket * N2 + j] * x2[j];
    if (!fits32(out)) bad = 1;
    *eval = out * SCALE / (QA * QB);
    free(x0); free(x1); free(x2);
    return bad;
}

static int eval_tiny(const int32_t *vs, const int32_t *vn, int bucket, int64_t *eval) {
    int32_t *x0 = xmalloc((size_t)L1 * sizeof *x0), *x1 = xmalloc((size_t)N1 * sizeof *x1);
    int half = L1 / 2, bad = 0;
    const int32_t *vv[2] = {vs, vn};
    for (int side = 0; side < 2; side++) {
        const int32_t *v = vv[side];
        for (int i = 0; i < half; i++) {
            x0[side * half + i] = act_l0_deep(ACT, v[i], act_l0_half(ACT) ? v[i + H / 2] : 0);
        }
    }
    const int8_t *w1 = dl1w + (long)bucket * N1 * L1;
    for (int n = 0; n < N1; n++) {
        int64_t s = dl1b[(long)bucket * N1 + n];
        for (int j = 0; j < L1; j++) s += (int64_t)w1[(long)n * L1 + j] * x0[j];
        if (!fits32(s)) bad = 1;
        x1[n] = (int32_t)hidden_act(floor_div(s, HIDDEN_DIV), HACT);
    }
    int64_t out = doutb[bucket];
    for (int j = 0; j < N1; j++) out += (int64_t)doutw[(long)bucket * N1 + j] * x1[j];
    if (!fits32(out)) bad = 1;
    *eval = out * SCALE / (QA * QB);
    free(x0); free(x1);
    return bad;
}

/* Prints the eval of one FEN (or "overflow"). */
static long LINE; /* line of stdin being evaluated, for error messages */

static void bad_fen(const char *why) {
    fprintf(stderr, "nnue_eval: stdin line %ld: %s\n", LINE, why);
    exit(1);
}

static void evaluate(char *fen) {
    Board b;
    int64_t given = 0;
    char *bar = strchr(fen, '|');
    if (RESID && !RMATERIAL) {
        char *end;
        if (!bar) bad_fen("a residual net on a given base needs 'FEN | BASE'");
        given = strtoll(bar + 1, &end, 10);
        if (end == bar + 1) bad_fen("bad base after '|'");
    }
    if (bar) *bar = 0;
    if (parse_fen(fen, &b)) bad_fen("bad FEN");
    /* as nnue.inference: every position needs one king of each colour */
    if (b.king[0] < 0 || b.king[1] < 0) bad_fen("bad FEN: a king is missing");
    int32_t *vs = xmalloc((size_t)H * sizeof *vs), *vn = xmalloc((size_t)H * sizeof *vn);
    int bad = accumulate(&b, b.stm, vs);
    bad |= accumulate(&b, 1 - b.stm, vn);
    int bucket = output_bucket(b.n);
    int64_t ev = 0;
    bad |= DEEP == 2 ? eval_tiny(vs, vn, bucket, &ev) : DEEP ? eval_deep(vs, vn, bucket, &ev)
                                                            : eval_perspective(vs, vn, bucket, &ev);
    if (RESID) ev = (RMATERIAL ? material(&b) : given) + floor_div(RNUM * ev + (RSHIFT ? 1LL << (RSHIFT - 1) : 0), 1LL << RSHIFT);
    if (bad) printf("overflow\n");
    else printf("%lld\n", (long long)ev);
    free(vs); free(vn);
}

/* --list-features: the active features of each FEN, "stm indices | nstm indices" (in the set's
 * own order), or "overflow" when a perspective has more than the set allows */
static void list_features(const char *fen) {
    Board b;
    long fs[2][MAX_ACTIVE_FEATURES];
    int nf[2];
    if (parse_fen(fen, &b)) bad_fen("bad FEN");
    if (b.king[0] < 0 || b.king[1] < 0) bad_fen("bad FEN: a king is missing");
    nf[0] = features(&b, b.stm, fs[0]);
    nf[1] = features(&b, 1 - b.stm, fs[1]);
    if (nf[0] < 0 || nf[1] < 0) {
        printf("overflow\n");
        return;
    }
    for (int q = 0; q < 2; q++) {
        if (q) printf(" |");
        for (int i = 0; i < nf[q]; i++) {
            if (fs[q][i] < 0 || fs[q][i] >= NF) die("internal error: feature index out of range");
            printf(i || q ? " %ld" : "%ld", fs[q][i]);
        }
    }
    printf("\n");
}

static void usage(void) {
    die("usage: nnue_eval NET.bin H B ACT\n"
        "       nnue_eval NET.bin --features NAME --buckets SPEC --perspective H ACT\n"
        "       nnue_eval NET.bin --features NAME --buckets SPEC --deep H ACT N1 N2 HACT [HACT2]\n"
        "       nnue_eval NET.bin --features NAME --buckets SPEC --tiny H ACT N1 HACT\n"
        "       (the last three also with --residual BASE NUM SHIFT)\n"
        "       nnue_eval --list-features NAME");
}

int main(int argc, char **argv) {
    int listing = argc == 3 && !strcmp(argv[1], "--list-features");
    if (listing) {
        parse_features(argv[2]);
    } else if (argc == 5 && argv[2][0] != '-') {  /* legacy: NET H B ACT */
        parse_features("chess768");
        H = parse_pos_int(argv[2]);
        B = parse_pos_int(argv[3]);
        if (B > 32) die("output-bucket count must be 1..32");
        OBKIND = OB_MATERIAL;
        ACT = parse_act(argv[4], 0);
        DEEP = 0;
    } else {
        int have_fs = 0, have_ob = 0, have_net = 0;
        if (argc < 2) usage();
        for (int i = 2; i < argc; i++) {
            if (!strcmp(argv[i], "--features") && i + 1 < argc) {
                parse_features(argv[++i]);
                have_fs = 1;
            } else if (!strcmp(argv[i], "--buckets") && i + 1 < argc) {
                parse_buckets(argv[++i]);
                have_ob = 1;
            } else if (!strcmp(argv[i], "--perspective") && i + 2 < argc) {
                DEEP = 0;
                H = parse_pos_int(argv[++i]);
                ACT = parse_act(argv[++i], 0);
                have_net = 1;
            } else if (!strcmp(argv[i], "--deep") && i + 5 < argc) {
                DEEP = 1;
                H = parse_pos_int(argv[++i]);
                ACT = parse_act(argv[++i], 0);
                N1 = parse_pos_int(argv[++i]);
                N2 = parse_pos_int(argv[++i]);
                HACT = parse_act(argv[++i], 1);
                HACT2 = HACT;
                if (i + 1 < argc && argv[i + 1][0] != '-') HACT2 = parse_act(argv[++i], 2);
                have_net = 1;
            } else if (!strcmp(argv[i], "--tiny") && i + 4 < argc) {
                DEEP = 2;
                H = parse_pos_int(argv[++i]);
                ACT = parse_act(argv[++i], 0);
                N1 = parse_pos_int(argv[++i]);
                HACT = parse_act(argv[++i], 1);
                have_net = 1;
            } else if (!strcmp(argv[i], "--residual") && i + 3 < argc) {
                RESID = 1;
                RMATERIAL = !strcmp(argv[++i], "material");
                RNUM = parse_pos_int(argv[++i]);
                RSHIFT = atoi(argv[++i]);
                if (RSHIFT < 0 || RSHIFT > 16) die("--residual: SHIFT must be 0..16");
            } else {
                usage();
            }
        }
        if (!have_fs || !have_ob || !have_net) usage();
    }
    if (!listing) {
        if (act_l0_half(ACT) && H % 2) die("a half-width L0 activation needs an even H");
        L1 = act_l0_half(ACT) ? H : 2 * H;
        R2 = act_gate(HACT2) >= 0 ? 2 * N2 : N2;
        load(argv[1]);
    }
    char line[4096];
    while (fgets(line, sizeof line, stdin)) {
        LINE++;
        char *s = line;
        while (*s == ' ' || *s == '\t') s++;
        if (*s == '\n' || *s == '\r' || !*s) continue;
        if (listing) list_features(s);
        else evaluate(s);
    }
    return 0;
}
