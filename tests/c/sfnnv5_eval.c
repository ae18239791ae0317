/*
 * An independent C reference for Stockfish 15.1 networks (SFNNv5): reads a .nnue file and prints,
 * for each FEN on stdin (one a line), the engine's internal NNUE value NNUE::evaluate(pos, false)
 * from the side to move's point of view, one integer a line.
 *
 * Written from the Stockfish 15.1 sources' arithmetic (nnue_feature_transformer.h,
 * nnue_architecture.h, the layers/ headers, features/half_ka_v2_hm.cpp), scalar, with the engine's integer
 * types: int16 accumulators (wrapping), int32 PSQT sums and layer sums, uint8 activations.
 * It takes L1 from the feature transformer's hash (0x7F234CB8 ^ 2*L1), so small test nets load too.
 *
 * Usage: sfnnv5_eval NET.nnue < fens.txt
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define F 22528
#define STACKS 8
#define PSQT 8

static int L1;
static int16_t *ft_bias, *ft_w;
static int32_t *psqt_w;
static int32_t fc0_b[STACKS][16], fc1_b[STACKS][32], fc2_b[STACKS][1];
static int8_t *fc0_w[STACKS], fc1_w[STACKS][32][32], fc2_w[STACKS][32];

static FILE *in;
static void die(const char *why) { fprintf(stderr, "sfnnv5_eval: %s\n", why); exit(2); }
static uint32_t u32(void) {
    unsigned char b[4];
    if (fread(b, 1, 4, in) != 4) die("truncated");
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}
static void bytes(void *p, size_t n) { if (fread(p, 1, n, in) != n) die("truncated"); }
/* little-endian host assumed for the bulk arrays (x86, arm64) */

static void load(const char *path) {
    in = fopen(path, "rb");
    if (!in) die("cannot open net");
    if (u32() != 0x7AF32F20u) die("not a Stockfish 15.1 net");
    u32();
    uint32_t n = u32();
    char *desc = malloc(n + 1);
    bytes(desc, n);
    free(desc);
    uint32_t h = u32() ^ 0x7F234CB8u;
    L1 = (int)(h / 2);
    if (L1 < 32 || L1 % 32) die("bad feature transformer hash");
    ft_bias = malloc(sizeof(int16_t) * L1);
    ft_w = malloc(sizeof(int16_t) * (size_t)F * L1);
    psqt_w = malloc(sizeof(int32_t) * (size_t)F * PSQT);
    bytes(ft_bias, sizeof(int16_t) * L1);
    bytes(ft_w, sizeof(int16_t) * (size_t)F * L1);
    bytes(psqt_w, sizeof(int32_t) * (size_t)F * PSQT);
    for (int s = 0; s < STACKS; s++) {
        u32();
        fc0_w[s] = malloc((size_t)16 * L1);
        bytes(fc0_b[s], sizeof fc0_b[s]);
        bytes(fc0_w[s], (size_t)16 * L1);
        bytes(fc1_b[s], sizeof fc1_b[s]);
        bytes(fc1_w[s], sizeof fc1_w[s]);
        bytes(fc2_b[s], sizeof fc2_b[s]);
        bytes(fc2_w[s], sizeof fc2_w[s]);
    }
    if (fgetc(in) != EOF) die("extra bytes");
    fclose(in);
}

/* piece codes: 1..6 white P N B R Q K, 9..14 black */
static const int KB[64] = {
    -1, -1, -1, -1, 31, 30, 29, 28, -1, -1, -1, -1, 27, 26, 25, 24,
    -1, -1, -1, -1, 23, 22, 21, 20, -1, -1, -1, -1, 19, 18, 17, 16,
    -1, -1, -1, -1, 15, 14, 13, 12, -1, -1, -1, -1, 11, 10, 9, 8,
    -1, -1, -1, -1, 7, 6, 5, 4, -1, -1, -1, -1, 3, 2, 1, 0};

/* the feature index of piece pc on square s for perspective p (0 white, 1 black), own king ksq */
static int feature(int p, int s, int pc, int ksq) {
    int flip = (ksq % 8 < 4 ? 7 : 0) ^ (p ? 56 : 0);
    int type = (pc & 7) - 1, colour = pc >> 3;
    int plane = type == 5 ? 10 : 2 * type + (colour != p);
    return (s ^ flip) + 64 * plane + 704 * KB[ksq ^ flip];
}

static int32_t eval_board(const int *board, int white_to_move) {
    int16_t acc[2][8192];
    int32_t ps[2][PSQT];
    int pieces = 0;
    for (int p = 0; p < 2; p++) {
        int ksq = -1;
        for (int s = 0; s < 64; s++) if (board[s] == (p ? 14 : 6)) ksq = s;
        if (ksq < 0) die("a side has no king");
        for (int j = 0; j < L1; j++) acc[p][j] = ft_bias[j];
        for (int b = 0; b < PSQT; b++) ps[p][b] = 0;
        for (int s = 0; s < 64; s++) {
            if (!board[s]) continue;
            int f = feature(p, s, board[s], ksq);
            for (int j = 0; j < L1; j++) acc[p][j] = (int16_t)(uint16_t)((uint16_t)acc[p][j] + (uint16_t)ft_w[(size_t)f * L1 + j]);
            for (int b = 0; b < PSQT; b++) ps[p][b] = (int32_t)((uint32_t)ps[p][b] + (uint32_t)psqt_w[(size_t)f * PSQT + b]);
        }
    }
    for (int s = 0; s < 64; s++) pieces += board[s] != 0;
    int bucket = (pieces - 1) / 4;
    int stm = white_to_move ? 0 : 1;
    uint8_t x0[8192];
    for (int k = 0; k < 2; k++) {
        int p = k == 0 ? stm : 1 - stm;
        for (int j = 0; j < L1 / 2; j++) {
            int a = acc[p][j], b = acc[p][j + L1 / 2];
            a = a < 0 ? 0 : a > 127 ? 127 : a;
            b = b < 0 ? 0 : b > 127 ? 127 : b;
            x0[k * (L1 / 2) + j] = (uint8_t)(a * b / 128);
        }
    }
    int32_t s0[16];
    for (int i = 0; i < 16; i++) {
        int32_t sum = fc0_b[bucket][i];
        for (int j = 0; j < L1; j++) sum += fc0_w[bucket][(size_t)i * L1 + j] * x0[j];
        s0[i] = sum;
    }
    uint8_t x1[32] = {0};
    for (int i = 0; i < 15; i++) {
        long long sq = ((long long)s0[i] * s0[i]) >> 19;
        x1[i] = (uint8_t)(sq > 127 ? 127 : sq);
        int32_t c = s0[i] >> 6;
        x1[15 + i] = (uint8_t)(c < 0 ? 0 : c > 127 ? 127 : c);
    }
    uint8_t x2[32];
    for (int i = 0; i < 32; i++) {
        int32_t sum = fc1_b[bucket][i];
        for (int j = 0; j < 32; j++) sum += fc1_w[bucket][i][j] * x1[j];
        int32_t c = sum >> 6;
        x2[i] = (uint8_t)(c < 0 ? 0 : c > 127 ? 127 : c);
    }
    int32_t out = fc2_b[bucket][0];
    for (int j = 0; j < 32; j++) out += fc2_w[bucket][j] * x2[j];
    int32_t fwd = (int32_t)((uint32_t)s0[15] * 9600u) / 8128;
    int32_t positional = out + fwd;
    int32_t psqt = (ps[stm][bucket] - ps[1 - stm][bucket]) / 2;
    return (psqt + positional) / 16;
}

int main(int argc, char **argv) {
    if (argc != 2) die("usage: sfnnv5_eval NET.nnue < fens.txt");
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
        printf("%d\n", eval_board(board, c[1] == 'w'));
    }
    return 0;
}
