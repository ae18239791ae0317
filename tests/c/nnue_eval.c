/* Independent reference evaluator for the raw nnue-forge net.bin layout.
 *
 * Usage: nnue_eval NET.bin H B ACTIVATION   (ACTIVATION: crelu|screlu|pairwise_crelu)
 * Reads FENs from stdin (one per line; only placement and side to move are
 * used) and prints one integer eval per line, centipawns from the side to
 * move's point of view.
 *
 * Layout (little-endian int16, no header), F = 768, L1IN = 2H (H for pairwise):
 *   l0w[F][H], l0b[H], l1w[B][L1IN], l1b[B], zero padding to a multiple of 64 bytes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define F 768
#define QA 255
#define QB 64
#define SCALE 400

enum { CRELU, SCRELU, PAIRWISE };

static int16_t *l0w, *l0b, *l1w, *l1b;
static int H, B, ACT, L1IN;

static void die(const char *msg) { fprintf(stderr, "nnue_eval: %s\n", msg); exit(1); }

static int16_t rd16(const unsigned char *p) { return (int16_t)(uint16_t)(p[0] | (p[1] << 8)); }

static void load(const char *path) {
    long n = (long)F * H + H + (long)B * L1IN + B, bytes = 2 * n, padded = (bytes + 63) / 64 * 64;
    FILE *fp = fopen(path, "rb");
    if (!fp) die("cannot open net file");
    fseek(fp, 0, SEEK_END);
    long size = ftell(fp);
    if (size != padded) {
        fprintf(stderr, "nnue_eval: %s has %ld bytes, expected %ld\n", path, size, padded);
        exit(1);
    }
    rewind(fp);
    unsigned char *raw = malloc(bytes);
    int16_t *all = malloc(n * sizeof(int16_t));
    if (!raw || !all) die("out of memory");
    if (fread(raw, 1, bytes, fp) != (size_t)bytes) die("short read");
    fclose(fp);
    for (long i = 0; i < n; i++) all[i] = rd16(raw + 2 * i);
    free(raw);
    l0w = all; l0b = l0w + (long)F * H; l1w = l0b + H; l1b = l1w + (long)B * L1IN;
}

/* Fills the clamped accumulator of one perspective; returns the piece count. */
static int accumulate(const char *placement, int persp, int32_t *v) {
    int rank = 7, file = 0, pieces = 0;
    for (int i = 0; i < H; i++) v[i] = l0b[i];
    for (const char *c = placement; *c && !strchr(" \t\r\n", *c); c++) {
        if (*c == '/') { rank--; file = 0; continue; }
        if (*c >= '1' && *c <= '8') { file += *c - '0'; continue; }
        const char *types = "pnbrqk", *t = strchr(types, *c >= 'a' ? *c : *c + 32);
        if (!t || !*t || rank < 0 || file > 7) die("bad FEN placement");
        int colour = *c >= 'a', sq = 8 * rank + file++;
        int f = (colour == persp ? 0 : 384) + 64 * (int)(t - types) + (persp == 0 ? sq : sq ^ 56);
        for (int i = 0; i < H; i++) v[i] += l0w[(long)f * H + i];
        pieces++;
    }
    for (int i = 0; i < H; i++) v[i] = v[i] < 0 ? 0 : v[i] > QA ? QA : v[i];
    return pieces;
}

/* Contribution of one perspective's clamped accumulator, weighted by w. */
static int64_t layer1(const int32_t *v, const int16_t *w) {
    int64_t sum = 0;
    if (ACT == PAIRWISE)
        for (int i = 0; i < H / 2; i++) sum += (int64_t)v[i] * v[i + H / 2] * w[i];
    else
        for (int i = 0; i < H; i++) sum += (int64_t)v[i] * (ACT == SCRELU ? v[i] : 1) * w[i];
    return sum;
}

static long evaluate(const char *fen) {
    const char *s = fen + strcspn(fen, " \t");
    s += strspn(s, " \t");
    int stm = *s == 'b';
    int32_t *vs = malloc(H * sizeof(int32_t)), *vn = malloc(H * sizeof(int32_t));
    if (!vs || !vn) die("out of memory");
    int pieces = accumulate(fen, stm, vs);
    accumulate(fen, 1 - stm, vn);
    int per = (32 + B - 1) / B, bucket = (pieces - 2) / per;
    if (bucket > B - 1) bucket = B - 1;
    if (bucket < 0) bucket = 0;
    const int16_t *w = l1w + (long)bucket * L1IN;
    int64_t out = layer1(vs, w) + layer1(vn, w + L1IN / 2);
    if (ACT != CRELU) out /= QA;
    out += l1b[bucket];
    free(vs); free(vn);
    return (long)(out * SCALE / (QA * QB));
}

int main(int argc, char **argv) {
    if (argc != 5) die("usage: nnue_eval NET.bin H B crelu|screlu|pairwise_crelu");
    H = atoi(argv[2]); B = atoi(argv[3]);
    if (!strcmp(argv[4], "crelu")) ACT = CRELU;
    else if (!strcmp(argv[4], "screlu")) ACT = SCRELU;
    else if (!strcmp(argv[4], "pairwise_crelu")) ACT = PAIRWISE;
    else die("unknown activation");
    if (H <= 0 || B <= 0 || (ACT == PAIRWISE && H % 2)) die("bad H or B");
    L1IN = ACT == PAIRWISE ? H : 2 * H;
    load(argv[1]);
    char line[1024];
    while (fgets(line, sizeof line, stdin)) {
        char *s = line;
        while (*s == ' ' || *s == '\t') s++;
        if (*s == '\n' || *s == '\r' || !*s) continue;
        printf("%ld\n", evaluate(s));
    }
    return 0;
}
