/* Vectorized exp(-z) over z in [0, 700) for the entropy smoother (softmax weights), and the
   compiler attributes the simplex kernels of _smoothers.pyx share. Included by
   _smoothers.pyx (cdef extern from "_vexp.h"); tested against a long double reference in
   tests/test_smoothers.py (its error in ulps over the whole domain). */
#ifndef MARGINKIT_VEXP_H
#define MARGINKIT_VEXP_H

/* exp(-z) for z = (g_i - shift) * inv in [0, 700), branch-free so that it vectorizes:
   Cody-Waite reduction x = n ln2 + r (|r| <= ln2 / 2, n by the round-to-nearest shift
   trick), exp(r) by its Taylor polynomial of degree 13 (truncation < 5e-18 relative) in
   Horner form, times 2^n built from the exponent bits. Relative error below 1.7 * 2^-53
   (measured against a long double reference over [0, 700)): about as accurate as libm's
   exp. Plain IEEE multiplies and adds with contraction into FMA switched off, so every
   instruction set gives the same bits; GCC on x86-64 Linux compiles SSE2, AVX2 and
   AVX-512 versions picked at load time (no -ffast-math: the process' floating-point
   environment is untouched). */
#include <stdint.h>
#include <string.h>
#include <stddef.h>
#if defined(__GNUC__) && !defined(__clang__)
#define MK_NOCONTRACT __attribute__((optimize("fp-contract=off", "no-trapping-math")))
#if defined(__x86_64__) && defined(__linux__)
#define MK_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MK_CLONES
#endif
#else
#define MK_NOCONTRACT
#define MK_CLONES
#endif
#define MK_EXP_BLOCK 256

MK_CLONES MK_NOCONTRACT
static void mk_exp_block(const double* g, double shift, double inv, double* out,
                         ptrdiff_t n)
{
    const double log2e = 1.4426950408889634, ln2hi = 6.93147180369123816490e-01,
        ln2lo = 1.90821492927058770002e-10, magic = 6755399441055744.0;
    const uint64_t magicbits = 0x4338000000000000ULL;
    ptrdiff_t i;
    for (i = 0; i < n; i++) {
        double z = (g[i] - shift) * inv;
        /* exponents <= -700 (and NaN) give 0: exp(-700) < 1e-304 is negligible next to
           the largest weight (1 when shift = min g), and libm is slow there */
        double x = -z;
        double kd, nd, r, p, sc;
        uint64_t ki, sb;
        x = x > -700.0 ? x : -700.0;
        x = x < 700.0 ? x : 700.0;
        kd = x * log2e + magic;
        nd = kd - magic;
        r = (x - nd * ln2hi) - nd * ln2lo;
        p = 1.0 / 6227020800.0;
        p = p * r + 1.0 / 479001600.0;
        p = p * r + 1.0 / 39916800.0;
        p = p * r + 1.0 / 3628800.0;
        p = p * r + 1.0 / 362880.0;
        p = p * r + 1.0 / 40320.0;
        p = p * r + 1.0 / 5040.0;
        p = p * r + 1.0 / 720.0;
        p = p * r + 1.0 / 120.0;
        p = p * r + 1.0 / 24.0;
        p = p * r + 1.0 / 6.0;
        p = p * r + 0.5;
        p = p * r + 1.0;
        p = p * r + 1.0;
        memcpy(&ki, &kd, sizeof(ki));
        sb = (ki - magicbits + 1023) << 52;
        memcpy(&sc, &sb, sizeof(sc));
        out[i] = z < 700.0 ? p * sc : 0.0;
    }
}

/* out_i = exp(-(g_i - shift) * inv) (0 where that exponent is <= -700); returns
   sum_i out_i, summed in a fixed order (eight interleaved partial sums per block), so
   the result does not depend on the instruction set either. */
static double mk_exp_weights(const double* g, double shift, double inv, double* out,
                             ptrdiff_t n)
{
    double s[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    double total;
    ptrdiff_t b, i, m;
    for (b = 0; b < n; b += MK_EXP_BLOCK) {
        m = n - b < MK_EXP_BLOCK ? n - b : MK_EXP_BLOCK;
        mk_exp_block(g + b, shift, inv, out + b, m);
        for (i = 0; i + 8 <= m; i += 8) {
            s[0] += out[b + i]; s[1] += out[b + i + 1];
            s[2] += out[b + i + 2]; s[3] += out[b + i + 3];
            s[4] += out[b + i + 4]; s[5] += out[b + i + 5];
            s[6] += out[b + i + 6]; s[7] += out[b + i + 7];
        }
        for (; i < m; i++)
            s[0] += out[b + i];
    }
    total = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    return total;
}

#endif /* MARGINKIT_VEXP_H */
