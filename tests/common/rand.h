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

#include <stddef.h>
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
static inline uint32_t test_rng_below(test_rng_t *rng, uint32_t n) { return (uint32_t)(test_rng_u64(rng) % n); }

/* Double in [0, 1) with 53 random bits (every value a multiple of 2^-53). */
static inline double test_rng_unit(test_rng_t *rng) { return (double)(test_rng_u64(rng) >> 11) * 0x1p-53; }

/* splitmix64's finaliser: a bijection of 64-bit values that mixes every
 * input bit into every output bit; a hash step for tests that derive
 * inputs from (rank, index, ...) or fingerprint bytes. */
static inline uint64_t test_mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= UINT64_C(0xBF58476D1CE4E5B9);
    x ^= x >> 27;
    x *= UINT64_C(0x94D049BB133111EB);
    x ^= x >> 31;
    return x;
}

/* Random access instead of a stream: a value in [-1, 1) that depends only
 * on (seed, i), from a splitmix64-style mix of the two (53 bits, then
 * rounded to float), so that every rank, thread or process computes the
 * same input at index i without sharing a generator. Fixed like the
 * stream: changing it changes what the tests that use it check. */
static inline float test_hash_signed(uint64_t seed, size_t i)
{
    uint64_t z = seed * UINT64_C(0x9e3779b97f4a7c15) + (uint64_t)i * UINT64_C(0xbf58476d1ce4e5b9);
    z ^= z >> 31;
    z *= UINT64_C(0x94d049bb133111eb);
    z ^= z >> 29;
    return (float)((double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

#endif
