/* rand.h - the tests' deterministic random numbers: xorshift64* (Vigna,
 * "An experimental exploration of Marsaglia's xorshift generators,
 * scrambled", 2016), a 64-bit state that every draw advances.
 *
 * Deterministic on purpose: a failure seen once comes back on every run and
 * on every machine, so a test prints its seed instead of saving inputs. The
 * stream is part of the API: the same seed gives the same sequence of
 * test_rng_u64 values forever, and test_rng_below / test_rng_unit are fixed
 * functions of one such value, so changing any of them changes what every
 * test that uses them checks.
 *
 *     test_rng_t rng = test_rng_seeded(TEST_RNG_SEED);
 *     uint32_t die = test_rng_below(&rng, 6) + 1;
 *
 * One generator per stream; nothing here is thread-safe or global.
 * Not for anything that needs unpredictable numbers. */
#ifndef HORA_TEST_RAND_H
#define HORA_TEST_RAND_H

#include <stdint.h>

/* The default seed (also xorshift64*'s multiplier; any non-zero value works). */
#define TEST_RNG_SEED UINT64_C(0x2545F4914F6CDD1D)

typedef struct {
    uint64_t state; /* never 0: zero is a fixed point of the xorshift step */
} test_rng_t;

/* A generator starting at seed; seed 0 (which would only ever yield 0)
 * stands for TEST_RNG_SEED. */
static inline test_rng_t test_rng_seeded(uint64_t seed)
{
    test_rng_t rng = {seed ? seed : TEST_RNG_SEED};
    return rng;
}

/* The next 64 random bits. */
static inline uint64_t test_rng_u64(test_rng_t *rng)
{
    rng->state ^= rng->state >> 12;
    rng->state ^= rng->state << 25;
    rng->state ^= rng->state >> 27;
    return rng->state * UINT64_C(0x2545F4914F6CDD1D);
}

/* Uniform-enough integer in [0, n), n >= 1: one draw modulo n (the bias,
 * below n / 2^64, does not matter for picking test inputs). */
static inline uint32_t test_rng_below(test_rng_t *rng, uint32_t n)
{
    return (uint32_t)(test_rng_u64(rng) % n);
}

/* Double in [0, 1) with 53 random bits (every value a multiple of 2^-53). */
static inline double test_rng_unit(test_rng_t *rng)
{
    return (double)(test_rng_u64(rng) >> 11) * 0x1p-53;
}

#endif
