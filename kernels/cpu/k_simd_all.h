/*
 * k_simd_all.h - private to kernels/cpu: the start of a file that writes its
 * scalar, AVX2 and AVX-512 loops side by side and keeps the one-rounding
 * promise (k_nonfinite.c, k_sgd.c). Include it first: it turns fp
 * contraction off for the rest of the file whatever the build flags (meson
 * passes -ffp-contract=off, a hand build may not, and GCC would then fuse a
 * vector loop's mul + add into an FMA), then includes k_internal.h and, on
 * x86-64, both levels' helpers.
 */
#ifndef K_SIMD_ALL_H
#define K_SIMD_ALL_H

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "k_internal.h"

#if defined(__x86_64__)
#include "k_simd_avx2.h"
#include "k_simd_avx512.h"
#endif

#endif
