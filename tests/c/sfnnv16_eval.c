/*
 * An independent C reference for Stockfish 19 networks (SFNNv16): reads a .nnue file (version
 * 0x6A448AFA, LEB128 blocks) and prints, for each FEN on stdin (one a line), the engine's
 * (psqt, positional) of Network::evaluate, each already divided by OutputScale, side to move's
 * point of view, as two integers on a line.
 *
 * Written from the Stockfish sources' arithmetic and feature definitions (master 762dd1da, the
 * architecture of Stockfish 19: nnue_feature_transformer.h, nnue_architecture.h, network.cpp,
 * layers/, features/full_threats.cpp, pp_3wide.cpp, half_ka_v2_hm.cpp, bitboard.h), scalar, with
 * the engine's integer types: int16 accumulators (wrapping), int32 PSQT sums and layer sums,
 * uint8 activations. The features are computed here from the board, not taken from nnue-forge.
 * L1 comes from the feature transformer's hash, so small test nets load too.
 *
 * Usage: sfnnv16_eval NET.nnue < fens.txt
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NT 59808   /* Full_Threats */
#define NP 4560    /* PP_3Wide */
#define NH 22528   /* HalfKAv2_hm */
#define STACKS 8
#define PSQT 8
#define L2 32
#define L3 32

static int L1;
static int16_t *ft_bias, *hk_w;
static int8_t *thr_w;            /* threats then pawn pairs, (NT + NP) x L1 */
static int32_t *thr_psqt, *hk_psqt;
static int32_t fc0_b[STACKS][L2], fc1_b[STACKS][L3], fc2_b[STACKS];
static int8_t *fc0_w[STACKS], fc1_w[STACKS][L3][2 * L2], fc2_w[STACKS][2 * L2 + 2 * L3];

static FILE *in;
static void die(const char *why) { fprintf(stderr, "sfnnv16_eval: %s\n", why); exit(2); }
static uint32_t u32(void) {
    unsigned char b[4];
    if (fread(b, 1, 4, in) != 4) die("truncated");
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}
static void bytes(void *p, size_t n) { if (fread(p, 1, n, in) != n) die("truncated"); }
/* little-endian host assumed for the raw arrays (x86, arm64) */

/* a signed LEB128 block of n values of `width` bytes into out */
static void leb128(void *out, size_t n, int width) {
    char magic[17];
    bytes(magic, 17);
    if (memcmp(magic, "COMPRESSED_LEB128", 17)) die("missing LEB128 magic");
    uint32_t count = u32();
    unsigned char *buf = malloc(count ? count : 1);
    bytes(buf, count);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t v = 0;
        int shift = 0;
        unsigned char b;
        do {
            if (k >= count) die("LEB128 block too short");
            b = buf[k++];
            v |= (int64_t)(b & 0x7f) << shift;
            shift += 7;
        } while (b & 0x80);
        if (shift < 64 && (b & 0x40)) v -= (int64_t)1 << shift;
        if (width == 2) ((int16_t *)out)[i] = (int16_t)v;
        else ((int32_t *)out)[i] = (int32_t)v;
    }
    if (k != count) die("LEB128 count disagrees with its block");
    free(buf);
}

static uint32_t rotl1(uint32_t h) { return (h << 1) | (h >> 31); }

static void load(const char *path) {
    in = fopen(path, "rb");
    if (!in) die("cannot open net");
    if (u32() != 0x6A448AFAu) die("not a Stockfish 19 net");
    u32();
    uint32_t n = u32();
    char *desc = malloc(n + 1);
    bytes(desc, n);
    free(desc);
    uint32_t base = rotl1(rotl1(0x2E6B9D04u) ^ 0x86F2B1DDu) ^ 0x7F234CB8u;
    uint32_t h = u32() ^ base;
    L1 = (int)(h / 2);
    if (L1 < 64 || L1 % 64 || L1 > 8192) die("bad feature transformer hash");
    ft_bias = malloc(sizeof(int16_t) * L1);
    thr_w = malloc((size_t)(NT + NP) * L1);
    thr_psqt = malloc(sizeof(int32_t) * (size_t)(NT + NP) * PSQT);
    hk_w = malloc(sizeof(int16_t) * (size_t)NH * L1);
    hk_psqt = malloc(sizeof(int32_t) * (size_t)NH * PSQT);
    leb128(ft_bias, L1, 2);
    bytes(thr_w, (size_t)NT * L1);
    leb128(thr_psqt, (size_t)NT * PSQT, 4);
    bytes(thr_w + (size_t)NT * L1, (size_t)NP * L1);
    leb128(thr_psqt + (size_t)NT * PSQT, (size_t)NP * PSQT, 4);
    leb128(hk_w, (size_t)NH * L1, 2);
    leb128(hk_psqt, (size_t)NH * PSQT, 4);
    for (int s = 0; s < STACKS; s++) {
        u32();
        fc0_w[s] = malloc((size_t)L2 * L1);
        bytes(fc0_b[s], sizeof fc0_b[s]);
        bytes(fc0_w[s], (size_t)L2 * L1);
        bytes(fc1_b[s], sizeof fc1_b[s]);
        bytes(fc1_w[s], sizeof fc1_w[s]);
        bytes(&fc2_b[s], sizeof fc2_b[s]);
        bytes(fc2_w[s], sizeof fc2_w[s]);
    }
    if (fgetc(in) != EOF) die("extra bytes");
    fclose(in);
}

/* ---------------------------------------------------------------- the board and attacks
 * piece codes: 1..6 white P N B R Q K, 9..14 black (Stockfish's), squares a1 = 0 */
static int on_board(int f, int r) { return f >= 0 && f < 8 && r >= 0 && r < 8; }

/* the squares a piece of code pc on `from` attacks, given the occupancy occ (sliders stop at the
 * first piece); occ = 0 gives Stockfish's PseudoAttacks */
static uint64_t attacks(int pc, int from, uint64_t occ) {
    static const int N[8][2] = {{1, 2}, {2, 1}, {2, -1}, {1, -2}, {-1, -2}, {-2, -1}, {-2, 1}, {-1, 2}};
    static const int K[8][2] = {{1, 0}, {1, 1}, {0, 1}, {-1, 1}, {-1, 0}, {-1, -1}, {0, -1}, {1, -1}};
    int t = pc & 7, f = from % 8, r = from / 8;
    uint64_t a = 0;
    if (t == 1) {
        int dr = pc >> 3 ? -1 : 1;
        for (int df = -1; df <= 1; df += 2)
            if (on_board(f + df, r + dr)) a |= 1ULL << ((r + dr) * 8 + f + df);
    } else if (t == 2 || t == 6) {
        for (int i = 0; i < 8; i++) {
            int ff = f + (t == 2 ? N[i][0] : K[i][0]), rr = r + (t == 2 ? N[i][1] : K[i][1]);
            if (on_board(ff, rr)) a |= 1ULL << (rr * 8 + ff);
        }
    } else {
        for (int i = 0; i < 8; i++) {
            int diag = K[i][0] && K[i][1];
            if ((t == 3 && !diag) || (t == 4 && diag)) continue;
            for (int ff = f + K[i][0], rr = r + K[i][1]; on_board(ff, rr); ff += K[i][0], rr += K[i][1]) {
                a |= 1ULL << (rr * 8 + ff);
                if (occ >> (rr * 8 + ff) & 1) break;
            }
        }
    }
    return a;
}

static int popcnt(uint64_t b) { return __builtin_popcountll(b); }

/* Full_Threats' tables (full_threats.cpp init_threat_offsets, init_index_luts) */
static const int VALID_TARGETS[7] = {0, 4, 10, 8, 8, 10, 0};
static const int MAP[6][6] = {{-1, 0, -1, 1, -1, -1}, {0, 1, 2, 3, 4, -1}, {0, 1, 2, 3, -1, -1},
                              {0, 1, 2, 3, -1, -1}, {0, 1, 2, 3, 4, -1}, {-1, -1, -1, -1, -1, -1}};
static int piece_offset[16][64], piece_total[16], cumulative[16];

static void init_threats(void) {
    int cum = 0;
    for (int c = 0; c < 2; c++)
        for (int t = 1; t <= 6; t++) {
            int pc = t + 8 * c, total = 0;
            for (int s = 0; s < 64; s++) {
                piece_offset[pc][s] = total;
                if (t != 1 || (s >= 8 && s < 56)) total += popcnt(attacks(pc, s, 0));
            }
            piece_total[pc] = total;
            cumulative[pc] = cum;
            cum += VALID_TARGETS[t] * total;
        }
    if (cum != NT) die("threat offsets do not add up to 59808");
}

/* the threat feature of attacker pc on from attacking piece tc on to, perspective p (0 white, 1
 * black) with its king on ksq; -1 when the pair is not a feature */
static long threat_index(int p, int pc, int from, int tc, int to, int ksq) {
    int orient = (ksq % 8 >= 4 ? 7 : 0) ^ (56 * p);
    int fo = from ^ orient, to_o = to ^ orient;
    int a = pc ^ (8 * p), d = tc ^ (8 * p);
    int at = a & 7, dt = d & 7, enemy = (a ^ d) == 8;
    int map = MAP[at - 1][dt - 1];
    if (map < 0) return -1;
    int semi = at == dt && (enemy || at != 1);
    if (semi && fo < to_o) return -1;
    long base = cumulative[a] + ((long)(d >> 3) * (VALID_TARGETS[at] / 2) + map) * piece_total[a];
    uint64_t below = to_o ? ((1ULL << to_o) - 1) : 0;
    return base + piece_offset[a][fo] + popcnt(below & attacks(a, fo, 0));
}

/* every active feature of perspective p (0 white, 1 black), as indices into the 86,896 inputs */
static int features(const int *board, int p, long *out) {
    int n = 0, ksq = -1;
    uint64_t occ = 0;
    for (int s = 0; s < 64; s++) {
        if (board[s]) occ |= 1ULL << s;
        if (board[s] == (p ? 14 : 6)) ksq = s;
    }
    if (ksq < 0) die("a side has no king");
    /* Full_Threats: pawns attack knights and rooks; knights and queens P N B R Q; bishops and
     * rooks P N B R (full_threats.cpp append_active_indices); kings attack nothing */
    for (int s = 0; s < 64; s++) {
        int pc = board[s], t = pc & 7;
        if (!pc || t == 6) continue;
        uint64_t a = attacks(pc, s, occ);
        for (int to = 0; to < 64; to++) {
            if (!(a >> to & 1) || !board[to]) continue;
            int dt = board[to] & 7;
            int ok = t == 1 ? (dt == 2 || dt == 4) : (t == 2 || t == 5) ? dt <= 5 : dt <= 4;
            if (!ok) continue;
            long i = threat_index(p, pc, s, board[to], to, ksq);
            if (i >= 0) out[n++] = i;
        }
    }
    /* PP_3Wide: each pair of pawns on the same or adjacent files once (pp_3wide.cpp) */
    int orient = (ksq % 8 >= 4 ? 7 : 0) ^ (56 * p);
    for (int s = 8; s < 56; s++) {
        if ((board[s] & 7) != 1) continue;
        for (int u = s + 1; u < 56; u++) {
            if ((board[u] & 7) != 1 || abs(u % 8 - s % 8) > 1) continue;
            long ida = 48 * ((board[s] >> 3) ^ p) + (s ^ orient) - 8;
            long idb = 48 * ((board[u] >> 3) ^ p) + (u ^ orient) - 8;
            long hi = ida > idb ? ida : idb, lo = ida > idb ? idb : ida;
            out[n++] = NT + hi * (hi - 1) / 2 + lo;
        }
    }
    /* HalfKAv2_hm (half_ka_v2_hm.cpp) */
    static const int KB[64] = {
        -1, -1, -1, -1, 31, 30, 29, 28, -1, -1, -1, -1, 27, 26, 25, 24,
        -1, -1, -1, -1, 23, 22, 21, 20, -1, -1, -1, -1, 19, 18, 17, 16,
        -1, -1, -1, -1, 15, 14, 13, 12, -1, -1, -1, -1, 11, 10, 9, 8,
        -1, -1, -1, -1, 7, 6, 5, 4, -1, -1, -1, -1, 3, 2, 1, 0};
    int flip = (ksq % 8 < 4 ? 7 : 0) ^ (p ? 56 : 0);
    for (int s = 0; s < 64; s++) {
        if (!board[s]) continue;
        int type = (board[s] & 7) - 1, colour = board[s] >> 3;
        int plane = type == 5 ? 10 : 2 * type + (colour != p);
        out[n++] = NT + NP + (s ^ flip) + 64 * plane + 704 * KB[ksq ^ flip];
    }
    return n;
}

/* ---------------------------------------------------------------- the evaluation */
static uint8_t sqr_crelu(int32_t x, int w) {
    long long s = ((long long)x * x) >> (2 * w + 7);
    return (uint8_t)(s > 127 ? 127 : s);
}
static uint8_t crelu(int32_t x, int w) {
    int32_t c = x >> w;
    return (uint8_t)(c < 0 ? 0 : c > 127 ? 127 : c);
}

static void eval_board(const int *board, int white_to_move, int32_t *psqt_out, int32_t *pos_out) {
    static int16_t acc[2][8192];
    int32_t ps[2][PSQT];
    long idx[600];
    for (int p = 0; p < 2; p++) {
        int n = features(board, p, idx);
        for (int j = 0; j < L1; j++) acc[p][j] = ft_bias[j];
        for (int b = 0; b < PSQT; b++) ps[p][b] = 0;
        for (int i = 0; i < n; i++) {
            long f = idx[i];
            const int32_t *pw;
            if (f < NT + NP) {
                for (int j = 0; j < L1; j++)
                    acc[p][j] = (int16_t)(uint16_t)((uint16_t)acc[p][j] + (uint16_t)(int16_t)thr_w[(size_t)f * L1 + j]);
                pw = thr_psqt + (size_t)f * PSQT;
            } else {
                f -= NT + NP;
                for (int j = 0; j < L1; j++)
                    acc[p][j] = (int16_t)(uint16_t)((uint16_t)acc[p][j] + (uint16_t)hk_w[(size_t)f * L1 + j]);
                pw = hk_psqt + (size_t)f * PSQT;
            }
            for (int b = 0; b < PSQT; b++) ps[p][b] = (int32_t)((uint32_t)ps[p][b] + (uint32_t)pw[b]);
        }
    }
    int pieces = 0;
    for (int s = 0; s < 64; s++) pieces += board[s] != 0;
    int bucket = (pieces - 1) / 4;
    int stm = white_to_move ? 0 : 1;
    static uint8_t x0[8192];
    for (int k = 0; k < 2; k++) {
        int p = k == 0 ? stm : 1 - stm;
        for (int j = 0; j < L1 / 2; j++) {
            int a = acc[p][j], b = acc[p][j + L1 / 2];
            a = a < 0 ? 0 : a > 255 ? 255 : a;
            b = b < 0 ? 0 : b > 255 ? 255 : b;
            x0[k * (L1 / 2) + j] = (uint8_t)((unsigned)(a * b) / 512);
        }
    }
    int32_t s0[L2];
    uint8_t x[2 * L2 + 2 * L3];
    for (int i = 0; i < L2; i++) {
        int32_t sum = fc0_b[bucket][i];
        for (int j = 0; j < L1; j++) sum += fc0_w[bucket][(size_t)i * L1 + j] * x0[j];
        s0[i] = sum;
        x[i] = sqr_crelu(sum, 7);
        x[L2 + i] = crelu(sum, 7);
    }
    for (int i = 0; i < L3; i++) {
        int32_t sum = fc1_b[bucket][i];
        for (int j = 0; j < 2 * L2; j++) sum += fc1_w[bucket][i][j] * x[j];
        x[2 * L2 + i] = sqr_crelu(sum, 6);
        x[2 * L2 + L3 + i] = crelu(sum, 6);
    }
    int32_t out = fc2_b[bucket];
    for (int j = 0; j < 2 * L2 + 2 * L3; j++) out += fc2_w[bucket][j] * x[j];
    int32_t fwd = (int32_t)((uint32_t)out + (uint32_t)s0[L2 - 2] - (uint32_t)s0[L2 - 1]);
    int32_t positional = (int32_t)(((int64_t)fwd * 9600) / 16384);
    int32_t psqt = (int32_t)((uint32_t)ps[stm][bucket] - (uint32_t)ps[1 - stm][bucket]) / 2;
    *psqt_out = psqt / 16;
    *pos_out = positional / 16;
}

int main(int argc, char **argv) {
    if (argc != 2) die("usage: sfnnv16_eval NET.nnue < fens.txt");
    init_threats();
    load(argv[1]);
    char line[512];
    while (fgets(line, sizeof line, stdin)) {
        int board[64] = {0}, r = 7, f = 0;
        char *c = line;
        for (; *c && *c != ' '; c++) {
            if (*c == '/') { r--; f = 0; continue; }
            if (*c >= '1' && *c <= '8') { f += *c - '0'; continue; }
            const char *pcs = "PNBRQK", *q = strchr(pcs, *c >= 'a' ? *c - 32 : *c);
            if (!q || r < 0 || f > 7) die("bad FEN");
            board[r * 8 + f] = (int)(q - pcs) + 1 + (*c >= 'a' ? 8 : 0);
            f++;
        }
        if (*c != ' ') die("bad FEN");
        int32_t ps, pos;
        eval_board(board, c[1] == 'w', &ps, &pos);
        printf("%d %d\n", ps, pos);
    }
    return 0;
}
