/*
 * k_isa.c - the instruction-set path: what the CPU and the OS allow
 * (CPUID, XCR0), the path in use and how to change it, and k_dtype_size.
 * The bottom of the library: the entry points (k_dispatch.c, k_scale.c,
 * k_cast.c, k_nonfinite.c) call it, it calls nothing of theirs.
 *
 * The path is one atomic int: -1 until first use, then a k_isa_t. The first
 * call of k_dispatch_isa (from any thread) stores k_isa_best() with a
 * compare-exchange, so a concurrent k_isa_set is never overwritten. After
 * that every call is one relaxed load; relaxed suffices because the value
 * only selects between tables that are constant from program start.
 */
#include <stdatomic.h>

#include "k_internal.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

static _Atomic int k_isa_detected = -1; /* cache of k_isa_best() */
static _Atomic int k_isa_active = -1;   /* path in use; -1 = not chosen yet */

#if defined(__x86_64__)
/* XCR0: which register states the OS saves on context switch. A CPU may
 * support AVX-512 while the OS (or a VM) leaves it disabled. Raw asm so the
 * file needs no -mxsave. */
static uint64_t k_xgetbv0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/* CPUID directly rather than __builtin_cpu_supports: clang 14 does not know
 * "f16c" there, and we need F16C for every vector path. */
static k_isa_t k_isa_detect(void)
{
    unsigned eax, ebx, ecx, edx;

    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return K_ISA_SCALAR;
    int fma = (ecx >> 12) & 1, osxsave = (ecx >> 27) & 1;
    int avx = (ecx >> 28) & 1, f16c = (ecx >> 29) & 1;
    if (!(fma && osxsave && avx && f16c)) return K_ISA_SCALAR;

    uint64_t xcr0 = k_xgetbv0();
    if ((xcr0 & 0x6) != 0x6) /* XMM + YMM state */
        return K_ISA_SCALAR;
    if (__get_cpuid_max(0, NULL) < 7) return K_ISA_SCALAR;
    __cpuid_count(7, 0, eax, ebx, ecx, edx);
    if (!((ebx >> 5) & 1)) /* AVX2 */
        return K_ISA_SCALAR;

    int avx512f = (ebx >> 16) & 1, avx512dq = (ebx >> 17) & 1;
    int avx512bw = (ebx >> 30) & 1, avx512vl = (ebx >> 31) & 1;
    int zmm_state = (xcr0 & 0xE6) == 0xE6; /* + opmask, ZMM0-15 high, ZMM16-31 */
    if (avx512f && avx512dq && avx512bw && avx512vl && zmm_state) return K_ISA_AVX512;
    return K_ISA_AVX2;
}
#else
static k_isa_t k_isa_detect(void) { return K_ISA_SCALAR; }
#endif

size_t k_dtype_size(k_dtype_t dtype)
{
    switch (dtype) {
    case K_DTYPE_F32: return 4;
    case K_DTYPE_F16: return 2;
    case K_DTYPE_BF16: return 2;
    case K_DTYPE_F64: return 8;
    case K_DTYPE_I32: return 4;
    case K_DTYPE_I64: return 8;
    case K_DTYPE_U8: return 1;
    case K_DTYPE_I8: return 1;
    case K_DTYPE_I16: return 2;
    case K_DTYPE_U16: return 2;
    case K_DTYPE_BOOL: return 1;
    case K_DTYPE_COUNT: break;
    }
    return 0;
}

k_isa_t k_isa_best(void)
{
    int isa = atomic_load_explicit(&k_isa_detected, memory_order_relaxed);
    if (isa < 0) {
        /* Detection is idempotent, so racing threads store the same value. */
        isa = (int)k_isa_detect();
        atomic_store_explicit(&k_isa_detected, isa, memory_order_relaxed);
    }
    return (k_isa_t)isa;
}

k_isa_t k_dispatch_isa(void)
{
    int isa = atomic_load_explicit(&k_isa_active, memory_order_relaxed);
    if (isa < 0) {
        int expected = -1;
        isa = (int)k_isa_best();
        /* On failure `expected` receives the value another thread set. */
        if (!atomic_compare_exchange_strong_explicit(&k_isa_active, &expected, isa, memory_order_relaxed,
                                                     memory_order_relaxed))
            isa = expected;
    }
    return (k_isa_t)isa;
}

k_isa_t k_isa_current(void) { return k_dispatch_isa(); }

int k_isa_set(k_isa_t isa)
{
    /* Paths are ordered: each one's requirements include the previous one's. */
    if ((unsigned)isa >= K_ISA_COUNT || isa > k_isa_best()) return -1;
    atomic_store_explicit(&k_isa_active, (int)isa, memory_order_relaxed);
    return 0;
}

const char *k_isa_name(k_isa_t isa)
{
    switch (isa) {
    case K_ISA_SCALAR: return "scalar";
    case K_ISA_AVX2: return "avx2";
    case K_ISA_AVX512: return "avx512";
    case K_ISA_COUNT: break;
    }
    return "unknown";
}
