/* streamlearn C fast path: the VW text / LIBSVM chunk parser, the Parquet reader's kernels,
 * VW's hashing and the AdaGrad kernel, line for line ports of the numba kernels
 *
 *   streamlearn/io/_text_kernels.py    parse_chunk, scan_float, parse_float, ...
 *   streamlearn/io/_hash_kernels.py    murmur3_32, hashstring, hash_spans
 *   streamlearn/io/_interact_kernels.py  bucket, interaction_count, interaction_fill (ix_*)
 *   streamlearn/io/_parquet_kernels.py assemble_rows, wide_part, hash_string_part
 *   streamlearn/algos/_adagrad_kernels.py, _loss_kernels.py   adagrad_run, wexpmx, losses
 *
 * which stay the reference (tests/test_cfast.py checks bit-identical results) and the
 * fallback. Plain C99, no Python API: loaded with ctypes by streamlearn/kernels/_cfast.py, so calls
 * run without the GIL. Compile with -O2 -ffp-contract=off (no FMA contraction, no fast-math):
 * every floating-point operation is the IEEE double (or float) operation the numba kernel
 * does, in the same order. No global state: calls from several threads are independent.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pow10.h"

#define CF_API __attribute__((visibility("default")))

/* ===================================================================== hashing */

#define M32 0xFFFFFFFFull
#define CONSTANT_HASH 11650396ull
#define FNV_PRIME 16777619ull

CF_API uint64_t cf_murmur3_32(const uint8_t *buf, int64_t start, int64_t end, uint64_t seed)
{
    uint64_t h = seed & M32;
    int64_t n = end - start;
    int64_t nblocks = n / 4;
    int64_t p = start;
    uint64_t k;
    for (int64_t b = 0; b < nblocks; b++) {
        k = (uint64_t)buf[p] | ((uint64_t)buf[p + 1] << 8) | ((uint64_t)buf[p + 2] << 16)
            | ((uint64_t)buf[p + 3] << 24);
        k = (k * 0xCC9E2D51ull) & M32;
        k = ((k << 15) | (k >> 17)) & M32;
        k = (k * 0x1B873593ull) & M32;
        h ^= k;
        h = ((h << 13) | (h >> 19)) & M32;
        h = (h * 5ull + 0xE6546B64ull) & M32;
        p += 4;
    }
    int64_t rem = n & 3;
    if (rem > 0) {
        k = 0;
        if (rem == 3)
            k ^= (uint64_t)buf[p + 2] << 16;
        if (rem >= 2)
            k ^= (uint64_t)buf[p + 1] << 8;
        k ^= (uint64_t)buf[p];
        k = (k * 0xCC9E2D51ull) & M32;
        k = ((k << 15) | (k >> 17)) & M32;
        k = (k * 0x1B873593ull) & M32;
        h ^= k;
    }
    h ^= (uint64_t)n;
    h ^= h >> 16;
    h = (h * 0x85EBCA6Bull) & M32;
    h ^= h >> 13;
    h = (h * 0xC2B2AE35ull) & M32;
    h ^= h >> 16;
    return h;
}

CF_API uint64_t cf_hashstring(const uint8_t *buf, int64_t start, int64_t end, uint64_t seed)
{
    int64_t s = start, e = end;
    while (s < e && buf[s] <= 32)
        s++;
    while (e > s && buf[e - 1] <= 32)
        e--;
    uint64_t ret = 0;
    for (int64_t p = s; p < e; p++) {
        uint8_t c = buf[p];
        if (c >= 48 && c <= 57)
            ret = (ret * 10ull + (uint64_t)(c - 48)) & M32;
        else
            return cf_murmur3_32(buf, s, e, seed);
    }
    return (ret + (seed & M32)) & M32;
}


/* ===================================================================== float parsing */

static const double EXACT_P10[23] = {
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
#define SPLITTER 134217729.0 /* 2**27 + 1 */
#define TWO53 9007199254740992ll
#define SCALE_Q 280
#define TWO256 0x1p256
#define TWOM256 0x1p-256

/* for tests: the double-double table entry of 10**q */
CF_API void cf_pow10_entry(int64_t q, double *hi, double *lo)
{
    *hi = CF_P10[q - CF_PMIN][0];
    *lo = CF_P10[q - CF_PMIN][1];
}

static double scale(int64_t m, int64_t q, int sticky)
{
    if (!sticky && m < TWO53) {
        if (q >= 0 && q <= 22)
            return (double)m * EXACT_P10[q];
        if (q < 0 && q >= -22)
            return (double)m / EXACT_P10[-q];
        if (q > 22 && q <= 22 + 15) {
            int64_t p10 = 1;
            for (int64_t t = 0; t < q - 22; t++)
                p10 *= 10;
            if (m <= TWO53 / p10) {
                int64_t mm = m * p10; /* exact: m * p10 <= 2**53 */
                if (mm < TWO53)
                    return (double)mm * EXACT_P10[22];
            }
        }
    }
    if (q > CF_PMAX)
        return INFINITY;
    if (q < CF_PMIN)
        return 0.0;
    double mh = (double)m;
    double ml = (double)(m - (int64_t)mh);
    if (sticky)
        ml += 0.5;
    double ph = CF_P10[q - CF_PMIN][0];
    double pl = CF_P10[q - CF_PMIN][1];
    /* Dekker's two-product of mh and ph */
    double p = mh * ph;
    double t = SPLITTER * mh;
    double ah = t - (t - mh);
    double al = mh - ah;
    t = SPLITTER * ph;
    double bh = t - (t - ph);
    double bl = ph - bh;
    double e = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
    e += mh * pl + ml * ph;
    double r = p + e;
    if (q < -SCALE_Q)
        r *= TWOM256;
    else if (q > SCALE_Q)
        r *= TWO256;
    return r;
}

/* one mantissa digit d of the integer part (frac = 0) or of the fraction (frac = 1): the
 * first 18 significant digits go into m (a fraction digit also moves the exponent q down);
 * later ones only move q up (integer part) or set sticky (a nonzero digit) */
static inline void mant_digit(int d, int frac, int64_t *m, int *nd, int64_t *q, int *sticky)
{
    if (*nd < 18) {
        *m = *m * 10 + d;
        if (*m > 0)
            (*nd)++;
        if (frac)
            (*q)--;
    } else {
        if (!frac)
            (*q)++;
        if (d != 0)
            *sticky = 1;
    }
}

/* scan_float: returns the value; *ok and *end as the numba kernel's (value, ok, end) */
CF_API double cf_scan_float(const uint8_t *buf, int64_t s, int64_t e, int *ok, int64_t *end)
{
    int64_t i = s;
    int neg = 0;
    if (i < e && (buf[i] == 43 || buf[i] == 45)) {
        neg = buf[i] == 45;
        i++;
    }
    int64_t m = 0;
    int nd = 0;
    int64_t q = 0;
    int sticky = 0;
    int any_digit = 0;
    while (i < e && buf[i] >= 48 && buf[i] <= 57) {
        any_digit = 1;
        mant_digit(buf[i] - 48, 0, &m, &nd, &q, &sticky);
        i++;
    }
    if (i < e && buf[i] == 46) {
        i++;
        while (i < e && buf[i] >= 48 && buf[i] <= 57) {
            any_digit = 1;
            mant_digit(buf[i] - 48, 1, &m, &nd, &q, &sticky);
            i++;
        }
    }
    if (!any_digit) {
        *ok = 0;
        *end = i;
        return 0.0;
    }
    if (i < e && (buf[i] == 101 || buf[i] == 69)) {
        i++;
        int eneg = 0;
        if (i < e && (buf[i] == 43 || buf[i] == 45)) {
            eneg = buf[i] == 45;
            i++;
        }
        int64_t x = 0;
        int64_t nexp = 0;
        while (i < e) {
            uint8_t c = buf[i];
            if (c < 48 || c > 57)
                break;
            if (x < 100000000000000ll)
                x = x * 10 + (c - 48);
            nexp++;
            i++;
        }
        if (nexp == 0) {
            *ok = 0;
            *end = i;
            return 0.0;
        }
        q += eneg ? -x : x;
    }
    double v;
    if (m == 0)
        v = 0.0;
    else
        v = scale(m, q, sticky);
    *ok = 1;
    *end = i;
    return neg ? -v : v;
}

static inline double parse_float(const uint8_t *buf, int64_t s, int64_t e, int *ok)
{
    int64_t end;
    double v = cf_scan_float(buf, s, e, ok, &end);
    if (end != e)
        *ok = 0;
    return v;
}

static inline int is_ws(uint8_t c)
{
    return c == 32 || c == 9 || c == 13 || c == 11 || c == 12;
}

static inline int lower(int c)
{
    return (c >= 65 && c <= 90) ? c + 32 : c;
}

static int is_nonfinite_word(const uint8_t *buf, int64_t s, int64_t e)
{
    if (s < e && (buf[s] == 43 || buf[s] == 45))
        s++;
    int64_t n = e - s;
    if (n == 3) {
        int a = lower(buf[s]), b = lower(buf[s + 1]), c = lower(buf[s + 2]);
        return (a == 110 && b == 97 && c == 110) || (a == 105 && b == 110 && c == 102);
    }
    if (n == 8) {
        static const uint8_t word[8] = {105, 110, 102, 105, 110, 105, 116, 121};
        for (int k = 0; k < 8; k++)
            if (lower(buf[s + k]) != word[k])
                return 0;
        return 1;
    }
    return 0;
}

/* _parse_num: value; *st = 0 finite number, 1 not a number, 2 NaN / infinite */
static double parse_num(const uint8_t *buf, int64_t s, int64_t e, int *st)
{
    int ok;
    double v = parse_float(buf, s, e, &ok);
    if (ok)
        *st = isfinite(v) ? 0 : 2;
    else
        *st = is_nonfinite_word(buf, s, e) ? 2 : 1;
    return v;
}

/* error codes: the ERR_* constants of streamlearn/io/_text_codes.py */
enum {
    ERR_LABEL = 1,
    ERR_IMPORTANCE = 2,
    ERR_BASE = 3,
    ERR_LABEL_TOKENS = 4,
    ERR_FEATURE_VALUE = 5,
    ERR_NS_WEIGHT = 6,
    ERR_NO_COLON = 7,
    ERR_INDEX = 8,
    ERR_LABEL_NONFINITE = 9,
    ERR_IMPORTANCE_NONFINITE = 10,
    ERR_BASE_NONFINITE = 11,
    ERR_VALUE_NONFINITE = 12,
    ERR_NS_WEIGHT_NONFINITE = 13,
    ERR_VALUE_OVERFLOW = 14,
    ERR_QUADRATIC_OVERFLOW = 15,
    ERR_IMPORTANCE_NEGATIVE = 16,
    ERR_INDEX_RANGE = 17,
    ERR_TOO_MANY_FEATURES = 18,
};

static inline int is_value_end(uint8_t c, int bar_ends)
{
    return is_ws(c) || (bar_ends && c == 124);
}

/* _feature_value: value; *end, *status as the numba kernel's (value, end, status) */
static inline double feature_value(const uint8_t *buf, int64_t s, int64_t e, int bar_ends,
                                   int64_t *end, int *status)
{
    int ok;
    int64_t k;
    double v = cf_scan_float(buf, s, e, &ok, &k);
    if (!ok || (k < e && !is_value_end(buf[k], bar_ends))) {
        k = s;
        while (k < e && !is_value_end(buf[k], bar_ends))
            k++;
        *end = k;
        *status = is_nonfinite_word(buf, s, k) ? ERR_VALUE_NONFINITE : ERR_FEATURE_VALUE;
        return v;
    }
    *end = k;
    *status = isfinite(v) ? 0 : ERR_VALUE_NONFINITE;
    return v;
}

/* ===================================================================== interactions */

/* Feature interactions of any order: the port of streamlearn/io/_interact_kernels.py (see it
 * for VW's rules). An interaction is terms[toff[i]:toff[i+1]]; at most IX_MAX_ORDER terms
 * (the Python side checks). */
#define IX_MAX_ORDER 64

static int64_t ix_bucket(const uint8_t *letters, int64_t s, int64_t e, int64_t *bcnt, int64_t *bstart,
                         int64_t *used, int64_t *order)
{
    int64_t nused = 0;
    for (int64_t k = s; k < e; k++) {
        uint8_t c = letters[k];
        if (bcnt[c] == 0)
            used[nused++] = c;
        bcnt[c]++;
    }
    int64_t pos = 0;
    for (int64_t u = 0; u < nused; u++) {
        int64_t c = used[u];
        bstart[c] = pos;
        pos += bcnt[c];
    }
    for (int64_t k = s; k < e; k++)
        order[bstart[letters[k]]++] = k;
    for (int64_t u = 0; u < nused; u++)
        bstart[used[u]] -= bcnt[used[u]];
    return nused;
}

static void ix_unbucket(int64_t *bcnt, const int64_t *used, int64_t nused)
{
    for (int64_t u = 0; u < nused; u++)
        bcnt[used[u]] = 0;
}

/* saturating: a count above limit (0 <= limit < 2**56) is returned as limit + 1 */
static int64_t ix_count(const int64_t *terms, const int64_t *toff, int64_t ninter, const int64_t *bcnt,
                        int64_t limit)
{
    int64_t total = 0;
    for (int64_t t = 0; t < ninter; t++) {
        int64_t a = toff[t], b = toff[t + 1];
        int empty = 0;
        for (int64_t k = a; k < b; k++)
            if (bcnt[terms[k]] == 0) {
                empty = 1;
                break;
            }
        if (empty)
            continue;
        int64_t cnt = 1;
        int64_t k = a;
        while (k < b) {
            int64_t c = terms[k];
            int64_t n = bcnt[c];
            int64_t r = 1;
            while (k + r < b && terms[k + r] == c)
                r++;
            int64_t cc = 1;
            for (int64_t j = 0; j < r; j++) {
                if (cc > INT64_MAX / (n + j)) {
                    cc = limit + 1;
                    break;
                }
                cc = cc * (n + j) / (j + 1);
                if (cc > limit) {
                    cc = limit + 1;
                    break;
                }
            }
            if (cnt > limit / cc) {
                cnt = limit + 1;
                break;
            }
            cnt *= cc;
            k += r;
        }
        total += cnt;
        if (total > limit)
            return limit + 1;
    }
    return total;
}

static int64_t ix_fill(uint32_t *indices, double *values, uint8_t *letters, int64_t nnz, const int64_t *terms,
                       const int64_t *toff, int64_t ninter, const int64_t *bcnt, const int64_t *bstart,
                       const int64_t *order, int *over)
{
    int64_t pos[IX_MAX_ORDER + 1];
    uint64_t hs[IX_MAX_ORDER + 1];
    double vs[IX_MAX_ORDER + 1];
    for (int64_t t = 0; t < ninter; t++) {
        int64_t a = toff[t];
        int64_t m = toff[t + 1] - a;
        int empty = 0;
        for (int64_t j = 0; j < m; j++)
            if (bcnt[terms[a + j]] == 0) {
                empty = 1;
                break;
            }
        if (empty)
            continue;
        int64_t j = 0;
        pos[0] = 0;
        for (;;) {
            while (j < m - 1) {
                int64_t kf = order[bstart[terms[a + j]] + pos[j]];
                if (j == 0) {
                    hs[0] = (uint64_t)indices[kf];
                    vs[0] = values[kf];
                } else {
                    hs[j] = ((hs[j - 1] * FNV_PRIME) & M32) ^ (uint64_t)indices[kf];
                    vs[j] = vs[j - 1] * values[kf];
                }
                j++;
                pos[j] = terms[a + j] == terms[a + j - 1] ? pos[j - 1] : 0;
            }
            int64_t c = terms[a + m - 1];
            uint64_t hp = (hs[m - 2] * FNV_PRIME) & M32;
            double vp = vs[m - 2];
            int64_t base = bstart[c];
            for (int64_t p = pos[m - 1]; p < bcnt[c]; p++) {
                int64_t kf = order[base + p];
                indices[nnz] = (uint32_t)(hp ^ (uint64_t)indices[kf]);
                double v = vp * values[kf];
                if (!isfinite(v))
                    *over = 1;
                values[nnz] = v;
                letters[nnz] = 0;
                nnz++;
            }
            j = m - 2;
            while (j >= 0) {
                pos[j]++;
                if (pos[j] < bcnt[terms[a + j]])
                    break;
                j--;
            }
            if (j < 0)
                break;
        }
    }
    return nnz;
}

/* ===================================================================== parse_chunk */

/* Arrays of one cf_parse_chunk call. The caller provides the per-line arrays (room for
 * cf_count_lines(...) + 1 lines: they never grow) and the per-feature arrays with room for
 * `cap` entries (the numba kernel's initial estimate); when a chunk needs more, the feature
 * arrays are moved to malloc'ed memory (feat_owned = 1) and the caller copies them out. The
 * error arrays and scratch space are always malloc'ed here. cf_parse_free releases what
 * this library allocated. */
typedef struct {
    int64_t *offsets;   /* [lines + 1], caller */
    uint32_t *indices;  /* [cap] */
    double *values;     /* [cap] */
    double *labels;     /* [lines], caller */
    double *weights;    /* [lines], caller */
    int64_t *ex_line;   /* [lines], caller */
    int64_t *tag_start; /* [lines], caller */
    int64_t *tag_end;   /* [lines], caller */
    int64_t *name_start; /* [cap] with keep_names, else unused */
    int64_t *name_end;
    int64_t *ns_start;
    int64_t *ns_end;
    int64_t *err_line; /* [n_err], malloc'ed */
    int64_t *err_code; /* [n_err], malloc'ed */
    int64_t n_ex, nnz, nn, n_err, n_lines;
    int64_t cap, feat_owned;
    uint8_t *letters; /* scratch */
    int64_t *scr_a, *scr_b; /* scratch */
} cf_parse_out;

/* number of bytes equal to c in buf[0:L] */
CF_API int64_t cf_count_byte(const uint8_t *buf, int64_t L, int64_t c)
{
    int64_t n = 0;
    for (const uint8_t *p = buf, *end = buf + L; p < end; n++, p++) {
        p = memchr(p, (int)c, (size_t)(end - p));
        if (!p)
            break;
    }
    return n;
}

CF_API void cf_parse_free(cf_parse_out *o)
{
    if (o->feat_owned) {
        free(o->indices);
        free(o->values);
        free(o->name_start);
        free(o->name_end);
        free(o->ns_start);
        free(o->ns_end);
        o->indices = NULL;
        o->values = NULL;
        o->name_start = o->name_end = o->ns_start = o->ns_end = NULL;
        o->feat_owned = 0;
    }
    free(o->err_line);
    free(o->err_code);
    free(o->letters);
    free(o->scr_a);
    free(o->scr_b);
    o->err_line = o->err_code = o->scr_a = o->scr_b = NULL;
    o->letters = NULL;
}

static int grow(void **p, size_t elsize, int64_t newcap)
{
    void *q = realloc(*p, (size_t)(newcap > 0 ? newcap : 1) * elsize);
    if (!q)
        return -1;
    *p = q;
    return 0;
}

/* room for newcap feature entries; the first nnz are kept */
static int grow_features(cf_parse_out *o, int keep_names, int64_t nnz, int64_t newcap)
{
    if (grow((void **)&o->letters, 1, newcap))
        return -1;
    if (!o->feat_owned) {
        /* still the caller's arrays: copy them into malloc'ed ones; from here on every
           feature pointer is this library's (NULL until allocated, so that cf_parse_free
           never frees the caller's memory, even after a failure) */
        void **arrs[6] = {(void **)&o->indices, (void **)&o->values, (void **)&o->name_start,
                          (void **)&o->name_end, (void **)&o->ns_start, (void **)&o->ns_end};
        const size_t sizes[6] = {sizeof(uint32_t), sizeof(double), sizeof(int64_t), sizeof(int64_t),
                                 sizeof(int64_t), sizeof(int64_t)};
        void *orig[6];
        for (int k = 0; k < 6; k++) {
            orig[k] = *arrs[k];
            *arrs[k] = NULL;
        }
        o->feat_owned = 1;
        int n = keep_names ? 6 : 2;
        for (int k = 0; k < n; k++) {
            void *q = malloc((size_t)newcap * sizes[k]);
            if (!q)
                return -1;
            if (nnz > 0)
                memcpy(q, orig[k], (size_t)nnz * sizes[k]);
            *arrs[k] = q;
        }
        return 0;
    }
    if (grow((void **)&o->indices, sizeof(uint32_t), newcap) || grow((void **)&o->values, sizeof(double), newcap))
        return -1;
    if (keep_names
        && (grow((void **)&o->name_start, sizeof(int64_t), newcap)
            || grow((void **)&o->name_end, sizeof(int64_t), newcap)
            || grow((void **)&o->ns_start, sizeof(int64_t), newcap)
            || grow((void **)&o->ns_end, sizeof(int64_t), newcap)))
        return -1;
    return 0;
}

static int push_err(cf_parse_out *o, int64_t *err_cap, int64_t line, int64_t code)
{
    if (o->n_err == *err_cap) {
        int64_t nc = 2 * *err_cap;
        if (grow((void **)&o->err_line, sizeof(int64_t), nc) || grow((void **)&o->err_code, sizeof(int64_t), nc))
            return -1;
        *err_cap = nc;
    }
    o->err_line[o->n_err] = line;
    o->err_code[o->n_err] = code;
    o->n_err++;
    return 0;
}

#define FMT_VW 0
#define FMT_LIBSVM 1
#define MAX_INDEX ((1ull << 63) - 1) /* the largest LIBSVM index (LIBSVM's strtol: ERANGE past it) */

/* _index_overflows of _text_kernels.py: the digits buf[i:j] (read into h mod 2**64) are past
 * 2**63 - 1; called only for more than 18 digits */
static int index_overflows(const uint8_t *buf, int64_t i, int64_t j, uint64_t h)
{
    while (i < j - 1 && buf[i] == 48)
        i++;
    int64_t n = j - i;
    return n > 19 || (n == 19 && h > MAX_INDEX);
}

/* Parse all lines of buf[0:L] (see parse_chunk in _text_kernels.py for the grammar and the
 * outputs) into the arrays of o (see cf_parse_out: the caller sets the per-line and feature
 * arrays and o->cap, the rest zero). Returns 0, or -1 when memory ran out. Either way the
 * caller calls cf_parse_free afterwards. */
CF_API int cf_parse_chunk(const uint8_t *buf, int64_t L, int64_t fmt, const int64_t *terms, const int64_t *toff,
                          int64_t ninter, const uint8_t *nsflags, int64_t add_constant, int64_t keep_names,
                          int64_t max_feats, cf_parse_out *o)
{
    int64_t err_cap = 16;
    int64_t cap = o->cap;
    int64_t scr_cap = 16;
    int64_t bcnt[256] = {0}, bstart[256] = {0}, used[256];
    int any_lin_ignored = 0;
    for (int c = 0; c < 256; c++)
        if (nsflags[c] & 2)
            any_lin_ignored = 1;
    int skip = (nsflags[32] & 1) != 0;
    o->feat_owned = 0;
    o->n_err = 0;
    o->err_line = malloc((size_t)err_cap * sizeof(int64_t));
    o->err_code = malloc((size_t)err_cap * sizeof(int64_t));
    o->scr_a = malloc((size_t)scr_cap * sizeof(int64_t));
    o->scr_b = malloc((size_t)scr_cap * sizeof(int64_t));
    o->letters = malloc((size_t)(cap > 0 ? cap : 1));
    if (!o->err_line || !o->err_code || !o->scr_a || !o->scr_b || !o->letters)
        return -1;

    uint32_t *indices;
    double *values;
    uint8_t *letters;
#define RELOAD()                                                                                             \
    do {                                                                                                     \
        indices = o->indices;                                                                                \
        values = o->values;                                                                                  \
        letters = o->letters;                                                                                \
    } while (0)
    RELOAD();

    o->offsets[0] = 0;
    int64_t nnz = 0;
    int64_t n_ex = 0;
    int64_t line = 0;
    int64_t pos = 0;
    while (pos < L) {
        const uint8_t *nl = memchr(buf + pos, 10, (size_t)(L - pos));
        int64_t eol = nl ? nl - buf : L;
        int64_t s = pos;
        int64_t e = eol;
        pos = eol + 1;
        int64_t cur_line = line;
        line++;
        if (fmt == FMT_LIBSVM && e > s) {
            const uint8_t *hash = memchr(buf + s, 35, (size_t)(e - s)); /* '#': comment */
            if (hash)
                e = hash - buf;
        }
        while (s < e && is_ws(buf[s]))
            s++;
        while (e > s && is_ws(buf[e - 1]))
            e--;
        if (s == e)
            continue;

        int64_t lin_room = (e - s + 1) / 2 < max_feats ? (e - s + 1) / 2 : max_feats;
        int64_t need = nnz + lin_room + 2;
        if (need > cap) {
            int64_t newcap = 2 * cap > need ? 2 * cap : need;
            if (grow_features(o, (int)keep_names, nnz, newcap))
                return -1;
            RELOAD();
            cap = newcap;
        }

        int64_t ex_start = nnz;
        int64_t lim = ex_start + max_feats; /* a feature written at lim or beyond is one too many */
        int status = 0;
        double label = NAN;
        double weight = 1.0;
        int64_t t0 = -1, t1 = -1;
        if (fmt == FMT_VW) {
            const uint8_t *pbar = memchr(buf + s, 124, (size_t)(e - s));
            int64_t bar = pbar ? pbar - buf : e;
            /* the tokens before the bar: the first three and the last one (slot 3 keeps the
               latest when there are more), as the numba parser tracks them */
            int64_t ts[4] = {-1, -1, -1, -1}, te[4] = {-1, -1, -1, -1};
            int64_t ntok = 0;
            int64_t p = s;
            while (p < bar) {
                if (is_ws(buf[p])) {
                    p++;
                    continue;
                }
                int64_t q = p;
                while (q < bar && !is_ws(buf[q]))
                    q++;
                int64_t slot = ntok < 3 ? ntok : 3;
                ts[slot] = p;
                te[slot] = q;
                ntok++;
                p = q;
            }
            if (ntok > 0) {
                int64_t last = ntok < 4 ? ntok - 1 : 3;
                int64_t ls = ts[last], le = te[last];
                if (buf[ls] == 39) {
                    t0 = ls + 1;
                    t1 = le;
                    ntok--;
                } else if (bar < e && le == bar) {
                    t0 = ls;
                    t1 = le;
                    ntok--;
                }
            }
            if (ntok > 3) {
                status = ERR_LABEL_TOKENS;
            } else {
                int st;
                if (ntok >= 1) {
                    label = parse_num(buf, ts[0], te[0], &st);
                    if (st != 0)
                        status = st == 1 ? ERR_LABEL : ERR_LABEL_NONFINITE;
                }
                if (status == 0 && ntok >= 2) {
                    weight = parse_num(buf, ts[1], te[1], &st);
                    if (st != 0)
                        status = st == 1 ? ERR_IMPORTANCE : ERR_IMPORTANCE_NONFINITE;
                    else if (weight < 0.0)
                        status = ERR_IMPORTANCE_NEGATIVE;
                }
                if (status == 0 && ntok >= 3) {
                    (void)parse_num(buf, ts[2], te[2], &st);
                    if (st != 0)
                        status = st == 1 ? ERR_BASE : ERR_BASE_NONFINITE;
                }
            }
            /* features */
            uint64_t ns_hash = 0;
            uint8_t letter = 32;
            double nsw = 1.0;
            int64_t nss = -1, nse = -1;
            int64_t i = bar;
            while (status == 0 && i < e) {
                uint8_t c = buf[i];
                if (c == 124) {
                    i++;
                    nsw = 1.0;
                    if (i >= e || is_ws(buf[i]) || buf[i] == 124) {
                        ns_hash = 0;
                        letter = 32;
                        nss = -1;
                        nse = -1;
                        skip = (nsflags[32] & 1) != 0;
                    } else {
                        int64_t j = i;
                        while (j < e && !is_ws(buf[j]) && buf[j] != 58 && buf[j] != 124)
                            j++;
                        nss = i;
                        nse = j;
                        letter = buf[i];
                        skip = (nsflags[letter] & 1) != 0;
                        ns_hash = cf_hashstring(buf, i, j, 0);
                        if (j < e && buf[j] == 58) {
                            int64_t k = j + 1;
                            while (k < e && !is_ws(buf[k]) && buf[k] != 124)
                                k++;
                            int st;
                            nsw = parse_num(buf, j + 1, k, &st);
                            if (st != 0)
                                status = st == 1 ? ERR_NS_WEIGHT : ERR_NS_WEIGHT_NONFINITE;
                            j = k;
                        }
                        i = j;
                    }
                    continue;
                }
                if (is_ws(c)) {
                    i++;
                    continue;
                }
                int64_t j = i;
                int alldig = 1;
                uint64_t dv = 0;
                while (j < e) {
                    c = buf[j];
                    if (c == 58 || c == 124 || is_ws(c))
                        break;
                    if (c >= 48 && c <= 57)
                        dv = dv * 10ull + (uint64_t)(c - 48);
                    else
                        alldig = 0;
                    j++;
                }
                double v = 1.0;
                int64_t nxt = j;
                if (j < e && buf[j] == 58) {
                    int64_t k;
                    v = feature_value(buf, j + 1, e, 1, &k, &status);
                    if (status)
                        break;
                    nxt = k;
                }
                double val = v * nsw;
                if (!isfinite(val)) {
                    status = ERR_VALUE_OVERFLOW;
                    break;
                }
                if (val != 0.0 && !skip) {
                    if (nnz >= lim) {
                        status = ERR_TOO_MANY_FEATURES;
                        break;
                    }
                    uint64_t hv;
                    if (j == i)
                        hv = ns_hash;
                    else if (buf[i] <= 32 || buf[j - 1] <= 32)
                        hv = cf_hashstring(buf, i, j, ns_hash);
                    else if (alldig)
                        hv = (dv + ns_hash) & M32;
                    else
                        hv = cf_murmur3_32(buf, i, j, ns_hash);
                    indices[nnz] = (uint32_t)hv;
                    values[nnz] = val;
                    letters[nnz] = letter;
                    if (keep_names) {
                        o->name_start[nnz] = i;
                        o->name_end[nnz] = j;
                        o->ns_start[nnz] = nss;
                        o->ns_end[nnz] = nse;
                    }
                    nnz++;
                }
                i = nxt;
            }
        } else {
            /* LIBSVM / SVMlight */
            int64_t p = s;
            while (p < e && !is_ws(buf[p]))
                p++;
            int st;
            label = parse_num(buf, s, p, &st);
            if (st != 0)
                status = st == 1 ? ERR_LABEL : ERR_LABEL_NONFINITE;
            int64_t i = p;
            while (status == 0 && i < e) {
                uint8_t c = buf[i];
                if (is_ws(c)) {
                    i++;
                    continue;
                }
                int64_t j = i;
                uint64_t h = 0;
                while (j < e) {
                    c = buf[j];
                    if (c < 48 || c > 57)
                        break;
                    h = h * 10ull + (uint64_t)(c - 48);
                    j++;
                }
                if (j > i && j < e && buf[j] == 58) {
                    if (j - i > 18 && index_overflows(buf, i, j, h)) {
                        status = ERR_INDEX_RANGE;
                        break;
                    }
                    int64_t k;
                    double v = feature_value(buf, j + 1, e, 0, &k, &status);
                    if (status)
                        break;
                    if (v != 0.0 && !skip) {
                        if (nnz >= lim) {
                            status = ERR_TOO_MANY_FEATURES;
                            break;
                        }
                        indices[nnz] = (uint32_t)(h & M32);
                        values[nnz] = v;
                        letters[nnz] = 32;
                        if (keep_names) {
                            o->name_start[nnz] = i;
                            o->name_end[nnz] = j;
                            o->ns_start[nnz] = -1;
                            o->ns_end[nnz] = -1;
                        }
                        nnz++;
                    }
                    i = k;
                    continue;
                }
                int64_t k = i;
                int64_t colon = -1;
                while (k < e && !is_ws(buf[k])) {
                    if (buf[k] == 58 && colon < 0)
                        colon = k;
                    k++;
                }
                if (colon < 0)
                    status = ERR_NO_COLON;
                else if (colon - i == 3 && buf[i] == 113 && buf[i + 1] == 105 && buf[i + 2] == 100)
                    i = k;
                else
                    status = ERR_INDEX;
            }
        }

        if (status != 0) {
            nnz = ex_start;
            if (push_err(o, &err_cap, cur_line, status))
                return -1;
            continue;
        }

        int64_t lin_end = nnz;
        if (add_constant) {
            if (nnz >= lim) {
                nnz = ex_start;
                if (push_err(o, &err_cap, cur_line, ERR_TOO_MANY_FEATURES))
                    return -1;
                continue;
            }
            indices[nnz] = (uint32_t)CONSTANT_HASH;
            values[nnz] = 1.0;
            letters[nnz] = 0;
            if (keep_names) {
                o->name_start[nnz] = -1;
                o->name_end[nnz] = -1;
                o->ns_start[nnz] = -1;
                o->ns_end[nnz] = -1;
            }
            nnz++;
        }

        if (ninter > 0) {
            int64_t nlin = lin_end - ex_start;
            if (scr_cap < nlin) {
                scr_cap = 2 * nlin;
                free(o->scr_a);
                o->scr_a = malloc((size_t)scr_cap * sizeof(int64_t));
                if (!o->scr_a)
                    return -1;
            }
            int64_t nused = ix_bucket(letters, ex_start, lin_end, bcnt, bstart, used, o->scr_a);
            int64_t room = lim - nnz;
            int64_t total = ix_count(terms, toff, ninter, bcnt, room);
            if (total > room) {
                ix_unbucket(bcnt, used, nused);
                nnz = ex_start;
                if (push_err(o, &err_cap, cur_line, ERR_TOO_MANY_FEATURES))
                    return -1;
                continue;
            }
            if (nnz + total > cap) {
                int64_t newcap = 2 * cap > nnz + total ? 2 * cap : nnz + total;
                if (grow_features(o, (int)keep_names, nnz, newcap))
                    return -1;
                RELOAD();
                cap = newcap;
            }
            int q_over = 0;
            int64_t q0 = nnz;
            nnz = ix_fill(indices, values, letters, nnz, terms, toff, ninter, bcnt, bstart, o->scr_a, &q_over);
            ix_unbucket(bcnt, used, nused);
            if (keep_names)
                for (int64_t k = q0; k < nnz; k++) {
                    o->name_start[k] = -1;
                    o->name_end[k] = -1;
                    o->ns_start[k] = -1;
                    o->ns_end[k] = -1;
                }
            if (q_over) {
                nnz = ex_start;
                if (push_err(o, &err_cap, cur_line, ERR_QUADRATIC_OVERFLOW))
                    return -1;
                continue;
            }
        }

        if (any_lin_ignored) {
            /* --ignore_linear: the namespace's own features leave (they served the interactions) */
            int64_t w = ex_start;
            for (int64_t k = ex_start; k < nnz; k++) {
                if (k < lin_end && (nsflags[letters[k]] & 2))
                    continue;
                if (w != k) {
                    indices[w] = indices[k];
                    values[w] = values[k];
                    letters[w] = letters[k];
                    if (keep_names) {
                        o->name_start[w] = o->name_start[k];
                        o->name_end[w] = o->name_end[k];
                        o->ns_start[w] = o->ns_start[k];
                        o->ns_end[w] = o->ns_end[k];
                    }
                }
                w++;
            }
            nnz = w;
        }

        o->labels[n_ex] = label;
        o->weights[n_ex] = weight;
        o->ex_line[n_ex] = cur_line;
        o->tag_start[n_ex] = t0;
        o->tag_end[n_ex] = t1;
        n_ex++;
        o->offsets[n_ex] = nnz;
    }
#undef RELOAD
    o->n_ex = n_ex;
    o->nnz = nnz;
    o->nn = keep_names ? nnz : 0;
    o->n_lines = line;
    o->cap = cap;
    return 0;
}

/* ===================================================================== losses, AdaGrad */

#define SQUARED 0
#define LOGISTIC 1
#define HINGE 2
#define X2_MIN 1.1754943508222875e-38 /* FLT_MIN */
#define X_MIN 1.0842021724855044e-19  /* sqrt(FLT_MIN) = 2**-63, exact */
#define F32_MAX 3.4028234663852886e38

/* Python's min(a, b) / max(a, b) (the first argument unless the second is smaller/larger) */
static inline double py_min(double a, double b) { return b < a ? b : a; }
static inline double py_max(double a, double b) { return b > a ? b : a; }

static inline double target(int code, double label)
{
    if (code == SQUARED)
        return label;
    return label > 0.0 ? 1.0 : -1.0;
}

static inline double loss_value(int code, double p, double y)
{
    if (code == SQUARED)
        return (p - y) * (p - y);
    if (code == LOGISTIC) {
        double z = -y * p;
        if (z > 0)
            return z + log1p(exp(-z));
        return log1p(exp(z));
    }
    double m = 1.0 - y * p;
    return m > 0.0 ? m : 0.0;
}

static inline double loss_deriv(int code, double p, double y)
{
    if (code == SQUARED)
        return 2.0 * (p - y);
    if (code == LOGISTIC) {
        double z = y * p;
        if (z > 0) {
            double e = exp(-z);
            return -y * e / (1.0 + e);
        }
        return -y / (1.0 + exp(z));
    }
    return y * p < 1.0 ? -y : 0.0;
}

static inline double sat32(double v)
{
    if (v > F32_MAX)
        return F32_MAX;
    if (v < -F32_MAX)
        return -F32_MAX;
    return v;
}

CF_API double cf_wexpmx(double x)
{
    double w;
    if (x < 1.0) {
        w = exp(x);
        w = x < -2.0 ? w / (1.0 + w) : 0.6 * w;
        w = py_max(w, 1e-300);
    } else {
        w = x > 1.5 ? x - log(x) : 0.8;
    }
    for (int it = 0; it < 50; it++) {
        double f = w + log(w) - x;
        double nw = w - f / (1.0 + 1.0 / w);
        if (nw <= 0.0)
            nw = w * 0.5;
        if (fabs(nw - w) <= 1e-15 * py_max(1.0, fabs(w))) {
            w = nw;
            break;
        }
        w = nw;
    }
    return w - x;
}

static inline double invariant_update(int code, double p, double y, double us, double ppu)
{
    if (code == SQUARED) {
        if (us * ppu < 1e-6)
            return 2.0 * (y - p) * us;
        return (y - p) * (1.0 - exp(-2.0 * us * ppu)) / ppu;
    }
    if (code == LOGISTIC) {
        double d = exp(py_min(y * p, 700.0));
        if (us * ppu < 1e-6)
            return y * us / (1.0 + d);
        double x = us * ppu + y * p + d;
        return -(y * cf_wexpmx(x) + p) / ppu;
    }
    if (y * p >= 1.0)
        return 0.0;
    double err = 1.0 - y * p;
    return y * (us * ppu < err ? us : err / ppu);
}

/* _legacy_run of _adagrad_kernels.py: the rules of model files written before VW's default
 * became the default. */
static int64_t legacy_run(const int64_t *offsets, const uint32_t *indices, const double *values,
                          const double *labels, const double *weights, int64_t n, float *w, float *G,
                          float *N, double *scal, int64_t mask, int64_t loss_code, double eta,
                          int64_t normalized, int64_t learn, double *pred_out, double *loss_out, double *raw_out)
{
    int code = (int)loss_code;
    int64_t learned = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t a = offsets[i];
        int64_t b = offsets[i + 1];
        double p = 0.0;
        for (int64_t k = a; k < b; k++)
            p += (double)w[(int64_t)indices[k] & mask] * values[k];
        raw_out[i] = p;
        if (normalized) {
            if (code == SQUARED) {
                if (p < scal[2])
                    p = scal[2];
                else if (p > scal[3])
                    p = scal[3];
            } else if (code == LOGISTIC) {
                if (p < -50.0)
                    p = -50.0;
                else if (p > 50.0)
                    p = 50.0;
            }
        }
        pred_out[i] = p;
        double lab = labels[i];
        if (isnan(lab)) {
            loss_out[i] = NAN;
            continue;
        }
        double y = target(code, lab);
        loss_out[i] = loss_value(code, p, y);
        if (!learn)
            continue;
        double imp = weights[i];
        learned++;
        if (normalized) {
            if (code == SQUARED) {
                if (y < scal[2])
                    scal[2] = y;
                if (y > scal[3])
                    scal[3] = y;
            }
            if (loss_out[i] <= 0.0 || imp <= 0.0)
                continue;
            double dl = loss_deriv(code, p, y);
            double g2 = imp * dl * dl;
            if (g2 == 0.0)
                continue;
            double norm_x = 0.0;
            double ppu = 0.0;
            for (int64_t k = a; k < b; k++) {
                int64_t j = (int64_t)indices[k] & mask;
                double x = values[k];
                double x2 = x * x;
                if (x2 < X2_MIN) {
                    x = x > 0 ? X_MIN : -X_MIN;
                    x2 = X2_MIN;
                }
                G[j] = (float)sat32((double)G[j] + g2 * x2);
                double ax = fabs(x);
                if (ax > (double)N[j]) {
                    if ((double)N[j] > 0.0)
                        w[j] = (float)((double)w[j] * ((double)N[j] / ax));
                    N[j] = (float)ax;
                }
                norm_x += x2 / ((double)N[j] * (double)N[j]);
                if ((double)G[j] > 0.0)
                    ppu += x2 / (sqrt((double)G[j]) * (double)N[j]);
            }
            scal[0] += imp * norm_x;
            scal[1] += imp;
            if (ppu <= 0.0 || scal[0] <= 0.0)
                continue;
            double mult = sqrt(scal[1] / scal[0]);
            ppu *= mult;
            double upd = invariant_update(code, p, y, eta * imp, ppu);
            if (isnan(upd) || upd == 0.0)
                continue;
            upd *= mult;
            for (int64_t k = a; k < b; k++) {
                int64_t j = (int64_t)indices[k] & mask;
                double x = values[k];
                if (x * x < X2_MIN)
                    x = x > 0 ? X_MIN : -X_MIN;
                if ((double)G[j] > 0.0)
                    w[j] = (float)sat32((double)w[j] + upd * x / (sqrt((double)G[j]) * (double)N[j]));
            }
        } else {
            double dl = loss_deriv(code, p, y) * imp;
            if (dl == 0.0)
                continue;
            for (int64_t k = a; k < b; k++) {
                int64_t j = (int64_t)indices[k] & mask;
                double gj = dl * values[k];
                double g64 = (double)G[j] + gj * gj;
                G[j] = (float)sat32(g64);
                if ((double)G[j] > 0.0) {
                    double den = g64 <= F32_MAX ? sqrt((double)G[j]) : sqrt(g64);
                    w[j] = (float)sat32((double)w[j] - eta * gj / den);
                }
            }
        }
    }
    return learned;
}

/* _gd_run of _adagrad_kernels.py for the default rule only (adaptive + normalized + invariant,
 * power_t 0.5, no l1/l2, initial_t 0, loss codes 0..2): what adagrad_rule_ok admits. */
static int64_t vw_default_run(const int64_t *offsets, const uint32_t *indices, const double *values,
                              const double *labels, const double *weights, int64_t n, float *w, float *G,
                              float *N, double *scal, int64_t mask, int64_t loss_code, double eta,
                              int64_t learn, double *pred_out, double *loss_out, double *raw_out)
{
    int code = (int)loss_code;
    int64_t learned = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t a = offsets[i];
        int64_t b = offsets[i + 1];
        double lab = labels[i];
        int labeled = !isnan(lab);
        double y = labeled ? target(code, lab) : 0.0;
        if (learn && labeled) {
            if (y < scal[2])
                scal[2] = y;
            if (y > scal[3])
                scal[3] = y;
        }
        double p = 0.0;
        for (int64_t k = a; k < b; k++)
            p += (double)w[(int64_t)indices[k] & mask] * values[k];
        raw_out[i] = p;
        if (p < scal[2])
            p = scal[2];
        else if (p > scal[3])
            p = scal[3];
        pred_out[i] = p;
        if (!labeled) {
            loss_out[i] = NAN;
            continue;
        }
        double lv = loss_value(code, p, y);
        loss_out[i] = lv;
        if (!learn)
            continue;
        double imp = weights[i];
        learned++;
        if (imp <= 0.0)
            continue;
        double t_prev = scal[4];
        scal[4] = t_prev + imp;
        if (code == LOGISTIC) {
            float e = (float)exp(py_min(-y * p, 700.0));
            if (!((float)(1.0 + (double)e) > 1.0f))
                continue;
        } else if (!(lv > 0.0)) {
            continue;
        }
        double dl = loss_deriv(code, p, y);
        double g2 = imp * dl * dl;
        if (g2 == 0.0)
            continue;
        double norm_x = 0.0;
        double ppu = 0.0;
        for (int64_t k = a; k < b; k++) {
            int64_t j = (int64_t)indices[k] & mask;
            double x = values[k];
            double x2 = x * x;
            if (x2 < X2_MIN) {
                x = x > 0 ? X_MIN : -X_MIN;
                x2 = X2_MIN;
            }
            G[j] = (float)sat32((double)G[j] + g2 * x2);
            double ax = fabs(x);
            if (ax > (double)N[j]) {
                if ((double)N[j] > 0.0) {
                    double r = (double)N[j] / ax;
                    w[j] = (float)((double)w[j] * r);
                }
                N[j] = (float)ax;
            }
            norm_x += x2 / ((double)N[j] * (double)N[j]);
            double g = (double)G[j] + 0.0;
            if (g > 0.0) {
                double d = sqrt(g) * (double)N[j];
                if (d > 0.0)
                    ppu += x2 / d;
            }
        }
        scal[0] += imp * norm_x;
        scal[1] += imp;
        if (scal[0] <= 0.0)
            continue;
        double mult = sqrt(scal[1] / scal[0]);
        ppu *= mult;
        if (ppu <= 0.0)
            continue;
        double upd = invariant_update(code, p, y, eta * imp, ppu);
        if (isnan(upd) || upd == 0.0)
            continue;
        upd *= mult;
        for (int64_t k = a; k < b; k++) {
            int64_t j = (int64_t)indices[k] & mask;
            double x = values[k];
            if (x * x < X2_MIN)
                x = x > 0 ? X_MIN : -X_MIN;
            double g = (double)G[j] + 0.0;
            if (g > 0.0) {
                double d = sqrt(g) * (double)N[j];
                if (d > 0.0)
                    w[j] = (float)sat32((double)w[j] + upd * x / d);
            }
        }
    }
    return learned;
}

#define RULE_NORMALIZED 2
#define RULE_LEGACY 16

/* adagrad_run of _adagrad_kernels.py: predict, record, then (if learn) update, for each of
 * the n examples in order; returns the number of examples learned from. Serves the rules
 * _cfast.adagrad_rule_ok admits (hp is not read by them). */
CF_API int64_t cf_adagrad_run(const int64_t *offsets, const uint32_t *indices, const double *values,
                              const double *labels, const double *weights, int64_t n, float *w, float *G,
                              float *N, double *scal, int64_t mask, int64_t loss_code, double eta,
                              int64_t rule, int64_t learn, double *pred_out, double *loss_out, double *raw_out)
{
    if (rule & RULE_LEGACY)
        return legacy_run(offsets, indices, values, labels, weights, n, w, G, N, scal, mask, loss_code, eta,
                          (rule & RULE_NORMALIZED) != 0, learn, pred_out, loss_out, raw_out);
    return vw_default_run(offsets, indices, values, labels, weights, n, w, G, N, scal, mask, loss_code, eta,
                          learn, pred_out, loss_out, raw_out);
}

/* ===================================================================== Parquet reader kernels
 *
 *   streamlearn/io/_parquet_kernels.py   hash_string_part, wide_part, assemble_rows
 *   streamlearn/io/_hash_kernels.py      hash_spans
 *
 * Output arrays are allocated by the caller (streamlearn/kernels/_cfast.py) with the sizes the numba
 * kernels give their results; see there for the calling protocol. */

#define ROW_INF_VALUE 1          /* = streamlearn/io/_parquet_codes.py */
#define ROW_QUADRATIC_OVERFLOW 2
#define ROW_TOO_MANY_FEATURES 3

/* hash_string_part: out[k - lo] = hashstring(data[soff[k]:soff[k+1]], seed), k in [lo, hi) */
CF_API void cf_hash_string_part(const uint8_t *data, const int64_t *soff, int64_t lo, int64_t hi,
                                uint64_t seed, uint32_t *out)
{
    for (int64_t k = lo; k < hi; k++)
        out[k - lo] = (uint32_t)cf_hashstring(data, soff[k], soff[k + 1], seed);
}

/* hash_spans: out[i] = hashstring(buf[starts[i]:ends[i]], seeds[i]) */
CF_API void cf_hash_spans(const uint8_t *buf, const int64_t *starts, const int64_t *ends,
                          const uint64_t *seeds, int64_t n, uint32_t *out)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = (uint32_t)cf_hashstring(buf, starts[i], ends[i], seeds[i]);
}

/* wide_part, first pass: the number of non-zero, non-NaN entries of X (n x d, row-major) */
CF_API int64_t cf_wide_count(const double *X, int64_t n, int64_t d)
{
    int64_t cnt = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < d; j++) {
            double v = X[i * d + j];
            if (v != 0.0 && v == v)
                cnt++;
        }
    return cnt;
}

/* wide_part, second pass: fill starts/ends [n], idx/val/col [cf_wide_count] */
CF_API void cf_wide_fill(const double *X, int64_t n, int64_t d, const uint32_t *hashes,
                         int64_t *starts, int64_t *ends, uint32_t *idx, double *val, int64_t *col)
{
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        starts[i] = k;
        for (int64_t j = 0; j < d; j++) {
            double v = X[i * d + j];
            if (v != 0.0 && v == v) {
                idx[k] = hashes[j];
                val[k] = v;
                col[k] = j;
                k++;
            }
        }
        ends[i] = k;
    }
}

/* assemble_rows, an upper bound of the output entries it writes: the kept linear entries,
 * the constants and the interaction products (exact unless --ignore_linear drops some);
 * a row past max_feats counts only the entries written before it is found to be */
CF_API int64_t cf_assemble_count(const int64_t *starts, const int64_t *ends, int64_t k, int64_t n,
                                 const double *val, const uint8_t *letters, const int64_t *terms,
                                 const int64_t *toff, int64_t ninter, const uint8_t *nsflags,
                                 int64_t add_constant, int64_t max_feats)
{
    int64_t total = 0;
    int64_t bcnt[256] = {0}, used[256];
    for (int64_t i = 0; i < n; i++) {
        int64_t nused = 0;
        int64_t row0 = total;
        for (int64_t p = 0; p < k; p++)
            for (int64_t q = starts[p * n + i]; q < ends[p * n + i]; q++) {
                double v = val[q];
                uint8_t c = letters[q];
                if (v != 0.0 && v == v && !(nsflags[c] & 1)) {
                    total++;
                    if (bcnt[c] == 0)
                        used[nused++] = c;
                    bcnt[c]++;
                }
            }
        if (add_constant)
            total++;
        int64_t room = max_feats - (total - row0);
        if (ninter > 0 && room >= 0) {
            int64_t ix = ix_count(terms, toff, ninter, bcnt, room);
            if (ix <= room)
                total += ix;
        }
        ix_unbucket(bcnt, used, nused);
    }
    return total;
}

/* assemble_rows into caller arrays: indices/values/olet [cap], src [cap] (written when
 * want_src or --ignore_linear; may be NULL otherwise), order [longest row], offsets [n+1],
 * status [n] (zeroed here). The caller sizes cap >= cf_assemble_count. Returns nnz. */
CF_API int64_t cf_assemble_rows(const int64_t *starts, const int64_t *ends, int64_t k, int64_t n,
                                const uint32_t *idx, const double *val, const uint8_t *letters,
                                const int64_t *terms, const int64_t *toff, int64_t ninter,
                                const uint8_t *nsflags, int64_t add_constant, int64_t want_src,
                                int64_t max_feats, uint32_t *indices, double *values, int64_t *src, uint8_t *olet,
                                int64_t *order, int64_t *offsets, int64_t *status)
{
    int lin_ignored = 0;
    for (int c = 0; c < 256; c++)
        if (nsflags[c] & 2)
            lin_ignored = 1;
    int track = want_src || lin_ignored;
    int64_t bcnt[256] = {0}, bstart[256] = {0}, used[256];
    int64_t nnz = 0;
    offsets[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        status[i] = 0;
        int64_t ex_start = nnz;
        for (int64_t p = 0; p < k; p++)
            for (int64_t q = starts[p * n + i]; q < ends[p * n + i]; q++) {
                double v = val[q];
                if (v != 0.0 && v == v) {
                    if (!isfinite(v))
                        status[i] = ROW_INF_VALUE;
                    uint8_t c = letters[q];
                    if (nsflags[c] & 1)
                        continue;
                    indices[nnz] = idx[q];
                    values[nnz] = v;
                    if (track)
                        src[nnz] = q;
                    if (ninter > 0)
                        olet[nnz] = c;
                    nnz++;
                }
            }
        int64_t lin_end = nnz;
        if (add_constant) {
            indices[nnz] = (uint32_t)CONSTANT_HASH;
            values[nnz] = 1.0;
            if (track)
                src[nnz] = -1;
            if (ninter > 0)
                olet[nnz] = 0;
            nnz++;
        }
        if (nnz - ex_start > max_feats) {
            if (status[i] == 0)
                status[i] = ROW_TOO_MANY_FEATURES;
            nnz = ex_start;
            offsets[i + 1] = nnz;
            continue;
        }
        if (ninter > 0) {
            int64_t nused = ix_bucket(olet, ex_start, lin_end, bcnt, bstart, used, order);
            int64_t room = ex_start + max_feats - nnz;
            if (ix_count(terms, toff, ninter, bcnt, room) > room) {
                ix_unbucket(bcnt, used, nused);
                if (status[i] == 0)
                    status[i] = ROW_TOO_MANY_FEATURES;
                nnz = ex_start;
                offsets[i + 1] = nnz;
                continue;
            }
            int over = 0;
            int64_t q0 = nnz;
            nnz = ix_fill(indices, values, olet, nnz, terms, toff, ninter, bcnt, bstart, order, &over);
            ix_unbucket(bcnt, used, nused);
            if (track)
                for (int64_t t = q0; t < nnz; t++)
                    src[t] = -1;
            if (over && status[i] == 0)
                status[i] = ROW_QUADRATIC_OVERFLOW;
        }
        if (lin_ignored) {
            int64_t w = ex_start;
            for (int64_t t = ex_start; t < nnz; t++) {
                if (t < lin_end && (nsflags[letters[src[t]]] & 2))
                    continue;
                if (w != t) {
                    indices[w] = indices[t];
                    values[w] = values[t];
                    src[w] = src[t];
                }
                w++;
            }
            nnz = w;
        }
        offsets[i + 1] = nnz;
    }
    return nnz;
}
