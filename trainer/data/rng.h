/*
 * rng.h - the data pipeline's random numbers: splitmix64 streams keyed by
 * (seed, epoch, sample, purpose).
 *
 * Why keyed streams and not one generator per thread: every random choice
 * (the epoch's permutation, one sample's crop, its flip, its colour) must be
 * a function of what it is for, never of which thread got there first, so
 * that batches are identical for any thread count, after a restart from a
 * step, and on every rank. A stream is cheap (one u64), so each sample and
 * each augmentation gets its own; turning one augmentation off does not
 * shift the others' draws (the flip test relies on that).
 *
 * splitmix64 (Steele, Lea, Flood 2014) passes BigCrush as a stream and is a
 * good mixer for building keys; that is all this needs.
 */
#ifndef TR_DATA_RNG_H
#define TR_DATA_RNG_H

#include <math.h>
#include <stdint.h>

/* What a stream is for; part of the key so purposes never share draws. */
typedef enum {
    TR_RNG_PURPOSE_PERMUTATION = 1,
    TR_RNG_PURPOSE_CROP = 2,
    TR_RNG_PURPOSE_FLIP = 3,
    TR_RNG_PURPOSE_COLOR = 4,
    TR_RNG_PURPOSE_LIGHTING = 5,
    TR_RNG_PURPOSE_PAD_CROP = 6,
} tr_rng_purpose_t;

typedef struct {
    uint64_t state;
} tr_rng_t;

static inline uint64_t tr_rng_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static inline uint64_t tr_rng_next(tr_rng_t *rng)
{
    rng->state += UINT64_C(0x9e3779b97f4a7c15);
    return tr_rng_mix(rng->state);
}

/* The stream for (seed, epoch, sample, purpose): each part is folded in
 * through the mixer, so nearby keys give unrelated streams. */
static inline tr_rng_t tr_rng_for(uint64_t seed, uint64_t epoch, uint64_t sample, tr_rng_purpose_t purpose)
{
    uint64_t key = tr_rng_mix(seed + UINT64_C(0x9e3779b97f4a7c15));
    key = tr_rng_mix(key ^ (epoch + UINT64_C(0x632be59bd9b4e019)));
    key = tr_rng_mix(key ^ (sample + UINT64_C(0x8cb92ba72f3d8dd7)));
    key = tr_rng_mix(key ^ (uint64_t)purpose);
    return (tr_rng_t){.state = key};
}

/* Uniform in [0, bound) without modulo bias (rejection on the top range). */
static inline uint64_t tr_rng_below(tr_rng_t *rng, uint64_t bound)
{
    if (bound <= 1) return 0;
    uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t x;
    do {
        x = tr_rng_next(rng);
    } while (x >= limit);
    return x % bound;
}

/* Uniform in [0, 1) with 24 random bits (every value exact in float). */
static inline float tr_rng_uniform(tr_rng_t *rng) { return (float)(tr_rng_next(rng) >> 40) * (1.0f / 16777216.0f); }

/* Uniform in [lo, hi). */
static inline float tr_rng_range(tr_rng_t *rng, float lo, float hi) { return lo + (hi - lo) * tr_rng_uniform(rng); }

/* Standard normal (Box-Muller; the second value is dropped to keep one draw
 * per call simple: these are per-image, not per-pixel). */
static inline float tr_rng_normal(tr_rng_t *rng)
{
    double u1 = ((double)(tr_rng_next(rng) >> 11) + 1.0) * (1.0 / 9007199254740993.0);
    double u2 = (double)(tr_rng_next(rng) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

#endif
