/* An engine's-eye evaluator of bullet's quantised.bin (simple perspective nets), for the tests.
 *
 * Written from bullet's own documentation and example inference (jw1912/bullet at cebc78a0:
 * docs/4-saved-networks.md, crates/trainer/src/model/weights.rs, examples/simple.rs and
 * examples/progression/2_output_buckets.rs), not from nnue-forge's code: it reads the file the
 * way an engine built on bullet's example reads it and evaluates the way that example does.
 * C99, no dependencies.
 *
 * Usage:
 *   bullet_eval FILE INPUTS HIDDEN BUCKETS ACT [QA QB SCALE]
 *     INPUTS: rows of the feature transformer (768, or 768 x king buckets)
 *     HIDDEN: accumulator size per perspective; BUCKETS: output buckets; ACT: crelu | screlu
 *     QA QB SCALE: the engine's constants (default 255 64 400, bullet's examples)
 *
 * The file (little-endian i16, no header), bullet's SavedFormat chain of its examples:
 *   l0w: bullet's HIDDEN x INPUTS matrix written column-major = INPUTS rows of HIDDEN values
 *        (the Network struct's `feature_weights: [Accumulator; 768]`)
 *   l0b: HIDDEN values (`feature_bias: Accumulator`)
 *   l1w: bullet's BUCKETS x 2 HIDDEN matrix, `.transpose()`d = BUCKETS rows of 2 HIDDEN values,
 *        the side to move's HIDDEN first (`output_weights`; with one bucket no transpose is
 *        needed: a 1 x 2H column-major matrix is the same 2H values)
 *   l1b: BUCKETS values (`output_bias`)
 *   then padding up to a multiple of 64 bytes: bullet writes the bytes of "bullet", cycled.
 * The program refuses a file whose size is not exactly that (exit 2), or whose padding is not
 * bullet's.
 *
 * Input on stdin, one position a line:  BUCKET  N  stm_1 .. stm_N  M  nstm_1 .. nstm_M
 * (feature indices of the side to move's and the other side's perspective, output bucket).
 * Output: one line per position, the eval (centipawns, side to move's POV), computed as
 * examples/simple.rs's Network::evaluate does (i32, division truncating toward zero):
 *   acc     = l0b + sum of the l0w rows of the active features        (Accumulator, i16)
 *   crelu:  output = l1b[b] + sum clamp(acc, 0, QA) * l1w[b]          (the example before #454)
 *   screlu: output = sum clamp(acc, 0, QA)^2 * l1w[b]; output /= QA; output += l1b[b]
 *   output *= SCALE; output /= QA * QB
 * or the word "overflow" when an i16 accumulator or an i32 value of that computation leaves its
 * type (Rust panics there in a debug build).  Values are held in 64 bits and checked where the
 * Rust code stores them in i16/i32: the accumulators, the sum (two's-complement wrapping of the
 * partial sums gives the same total whenever the total fits), the biased output, and the
 * product by SCALE.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int16_t *l0w, *l0b, *l1w, *l1b;
static long inputs, hidden, buckets, qa = 255, qb = 64, scale = 400;
static int screlu;

static void die(const char *msg, const char *what) {
    fprintf(stderr, "bullet_eval: %s%s%s\n", msg, what ? ": " : "", what ? what : "");
    exit(2);
}

static long arg_long(const char *s, const char *name) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v <= 0) die("bad positive integer for", name);
    return v;
}

static int16_t le16(const unsigned char *p) { return (int16_t)(uint16_t)(p[0] | (p[1] << 8)); }

static int16_t *take(const unsigned char *buf, long *off, long n) {
    int16_t *t = malloc(sizeof(int16_t) * (size_t)n);
    if (!t) die("out of memory", NULL);
    for (long i = 0; i < n; i++) t[i] = le16(buf + *off + 2 * i);
    *off += 2 * n;
    return t;
}

static void load(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot open", path);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    long raw = 2 * (inputs * hidden + hidden + buckets * 2 * hidden + buckets);
    long want = raw + (64 - raw % 64) % 64;
    if (size != want) {
        fprintf(stderr, "bullet_eval: %s is %ld bytes, the layout gives %ld (%ld of tensors + padding)\n",
                path, size, want, raw);
        exit(2);
    }
    unsigned char *buf = malloc((size_t)size);
    if (!buf || fread(buf, 1, (size_t)size, f) != (size_t)size) die("cannot read", path);
    fclose(f);
    static const char pad[] = "bullet";
    for (long i = raw; i < size; i++)
        if (buf[i] != (unsigned char)pad[(i - raw) % 6]) die("padding is not bullet's at the end of", path);
    long off = 0;
    l0w = take(buf, &off, inputs * hidden);
    l0b = take(buf, &off, hidden);
    l1w = take(buf, &off, buckets * 2 * hidden);
    l1b = take(buf, &off, buckets);
    free(buf);
}

/* Accumulator::new + add_feature: acc = bias + rows; 0 on success, 1 on i16 overflow. */
static int accumulate(int64_t *acc, const long *idx, long n) {
    for (long j = 0; j < hidden; j++) acc[j] = l0b[j];
    for (long k = 0; k < n; k++)
        for (long j = 0; j < hidden; j++) {
            acc[j] += l0w[idx[k] * hidden + j];
            if (acc[j] < INT16_MIN || acc[j] > INT16_MAX) return 1;
        }
    return 0;
}

static int64_t activate(int64_t x) {
    int64_t y = x < 0 ? 0 : (x > qa ? qa : x);
    return screlu ? y * y : y;
}

static int fits_i32(int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; }

int main(int argc, char **argv) {
    if (argc != 6 && argc != 9) die("usage: bullet_eval FILE INPUTS HIDDEN BUCKETS crelu|screlu [QA QB SCALE]", NULL);
    inputs = arg_long(argv[2], "INPUTS");
    hidden = arg_long(argv[3], "HIDDEN");
    buckets = arg_long(argv[4], "BUCKETS");
    if (strcmp(argv[5], "screlu") == 0) screlu = 1;
    else if (strcmp(argv[5], "crelu") != 0) die("ACT is crelu or screlu, not", argv[5]);
    if (argc == 9) {
        qa = arg_long(argv[6], "QA");
        qb = arg_long(argv[7], "QB");
        scale = arg_long(argv[8], "SCALE");
    }
    load(argv[1]);
    int64_t *us = malloc(sizeof(int64_t) * (size_t)hidden), *them = malloc(sizeof(int64_t) * (size_t)hidden);
    long idx[2][64], n[2], bucket;
    if (!us || !them) die("out of memory", NULL);
    while (scanf("%ld", &bucket) == 1) {
        if (bucket < 0 || bucket >= buckets) die("output bucket out of range", NULL);
        for (int p = 0; p < 2; p++) {
            if (scanf("%ld", &n[p]) != 1 || n[p] < 0 || n[p] > 64) die("bad feature count", NULL);
            for (long k = 0; k < n[p]; k++)
                if (scanf("%ld", &idx[p][k]) != 1 || idx[p][k] < 0 || idx[p][k] >= inputs)
                    die("bad feature index", NULL);
        }
        if (accumulate(us, idx[0], n[0]) || accumulate(them, idx[1], n[1])) {
            puts("overflow");
            continue;
        }
        const int16_t *w = l1w + bucket * 2 * hidden;
        int64_t output = screlu ? 0 : l1b[bucket];
        for (long j = 0; j < hidden; j++) output += activate(us[j]) * w[j];           /* side to move */
        for (long j = 0; j < hidden; j++) output += activate(them[j]) * w[hidden + j]; /* the other */
        int ok = fits_i32(output);
        if (screlu) {
            output /= qa; /* QA*QA*QB -> QA*QB; C division truncates toward zero, as Rust's */
            output += l1b[bucket];
            ok = ok && fits_i32(output);
        }
        output *= scale;
        ok = ok && fits_i32(output);
        output /= qa * qb;
        if (ok) printf("%lld\n", (long long)output);
        else puts("overflow");
    }
    return 0;
}
