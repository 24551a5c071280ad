/* mixed_sgd.c - k_sgd_step_mixed on one ISA (mixed.c says what is checked). */
#include "mixed.h"

/* ---- k_sgd_step_mixed ----------------------------------------------------- */

typedef struct {
    float lr, momentum, weight_decay;
    int nesterov;
} hyper_t;

/* Every combination of weight decay, momentum and Nesterov (which only
 * counts with momentum, and must be ignored without). */
static const hyper_t hypers[] = {
    {0.1f, 0.0f, 0.0f, 0}, {0.05f, 0.0f, 0.0f, 1}, {1.5f, 0.0f, 5e-4f, 0}, {0.01f, 0.0f, 0.25f, 1},
    {0.1f, 0.9f, 0.0f, 0}, {0.05f, 0.9f, 0.0f, 1}, {0.1f, 0.9f, 5e-4f, 0}, {1.5f, 0.5f, 0.25f, 1},
};
#define N_HYPERS (sizeof(hypers) / sizeof(hypers[0]))

static const float grad_scales[] = {1.0f, 0x1p-10f, 1.0f / 3.0f, 65536.0f};

/* One rounded operation, noting whether it met two NaNs (see the top). */
static float op_mul(float a, float b, int *meet)
{
    *meet |= isnan(a) && isnan(b);
    return ref_mul_f32(a, b);
}
static float op_add(float a, float b, int *meet)
{
    *meet |= isnan(a) && isnan(b);
    return ref_add_f32(a, b);
}
static float op_sub(float a, float b, int *meet)
{
    *meet |= isnan(a) && isnan(b);
    return ref_sub_f32(a, b);
}

/* One element of k_sgd_step_mixed as k_cpu.h states it: updates *p and
 * (with momentum) *m; *meet_m / *meet_p say whether two NaNs met on the way
 * to the new m / p. */
static void sgd_mixed_ref(float *p, float *m, float grad, float scale, const hyper_t *h, int *meet_m, int *meet_p)
{
    int meet = 0;
    float g = op_mul(grad, scale, &meet);
    if (h->weight_decay != 0.0f) g = op_add(g, op_mul(h->weight_decay, *p, &meet), &meet);
    float step = g;
    *meet_m = 0;
    if (h->momentum != 0.0f) {
        float mv = op_add(op_mul(h->momentum, *m, &meet), g, &meet);
        *m = mv;
        *meet_m = meet;
        step = h->nesterov ? op_add(g, op_mul(h->momentum, mv, &meet), &meet) : mv;
    }
    *p = op_sub(*p, op_mul(h->lr, step, &meet), &meet);
    *meet_p = meet;
}

/* Parameters: random_element's f32 mix (specials, NaN payloads, huge and
 * tiny values) plus values at the edges of f16 and bf16. */
static float random_param(test_rng_t *gen)
{
    static const float edges[] = {
        65504.0f,
        -65504.0f,
        0x1.ffdffep+15f /* rounds to 65504 in f16 */,
        65520.0f /* to inf */,
        -65520.0f,
        70000.0f,
        1e10f,
        0x1.002p0f /* f16 tie */,
        0x1.01p0f /* bf16 tie */,
        0x1p-24f,
        0x1p-25f,
        0x1.8p-25f,
        3e38f,
        -0.0f,
        0x1p-149f,
        0x1.ffp127f /* bf16 tie to inf */,
    };
    if (test_rng_below(gen, 8) == 0) return edges[test_rng_below(gen, sizeof(edges) / sizeof(edges[0]))];
    float f;
    random_element(gen, K_DTYPE_F32, &f);
    return f;
}

/* Compares an output element: exact bits, or (where two NaNs met) any NaN. */
static int out_ok(k_dtype_t dtype, uint64_t got, uint64_t want, int meet)
{
    return meet ? mixed_is_nan_elem(dtype, got) : got == want;
}

/* Buffers for one sgd case: param, momentum and the copy sit in guarded,
 * poisoned buffers; the scalar path's outputs in plain arrays. */
typedef struct {
    uint8_t *param_buf, *mom_buf, *lp_buf, *grad;
    float *param0, *mom0;       /* inputs */
    float *want_p, *want_m;     /* reference */
    float *scalar_p, *scalar_m; /* scalar path */
    uint8_t *scalar_lp;
    uint8_t *meet_m, *meet_p;
    long met; /* elements where two NaNs met: any NaN passes there */
} sgd_bufs_t;

static void sgd_case(k_dtype_t grad_dtype, int lp_dtype /* -1: no copy */, const hyper_t *h, float scale, size_t count,
                     size_t off, sgd_bufs_t *b, long *checks, long *failures)
{
    size_t span = 2 * GUARD_BYTES + (MAX_OFFSET + count) * sizeof(float);
    int use_mom = h->momentum != 0.0f;
    k_dtype_t lp_dt = lp_dtype < 0 ? K_DTYPE_F32 : (k_dtype_t)lp_dtype;
    size_t lp_size = k_dtype_size(lp_dt);
    memset(b->param_buf, POISON, span);
    memset(b->mom_buf, POISON, span);
    memset(b->lp_buf, POISON, span);
    float *param = (float *)(b->param_buf + GUARD_BYTES) + off;
    float *mom = use_mom ? (float *)(b->mom_buf + GUARD_BYTES) + (off + 1) % (MAX_OFFSET + 1) : NULL;
    uint8_t *lp = lp_dtype < 0 ? NULL : b->lp_buf + GUARD_BYTES + ((off + 2) % (MAX_OFFSET + 1)) * lp_size;

    for (size_t i = 0; i < count; i++) {
        b->param0[i] = random_param(&rng);
        b->mom0[i] = use_mom ? random_param(&rng) : 0.0f;
        mixed_put_bits(grad_dtype, b->grad, i, mixed_random_any(&rng, grad_dtype));
        b->want_p[i] = b->param0[i];
        b->want_m[i] = b->mom0[i];
        int mm, mp;
        sgd_mixed_ref(&b->want_p[i], &b->want_m[i], mixed_widen(grad_dtype, mixed_get_bits(grad_dtype, b->grad, i)),
                      scale, h, &mm, &mp);
        b->meet_m[i] = (uint8_t)mm;
        b->meet_p[i] = (uint8_t)mp;
        b->met += mp;
    }
    size_t fbytes = count * sizeof(float);
    if (count) {
        memcpy(param, b->param0, fbytes);
        if (mom) memcpy(mom, b->mom0, fbytes);
        memcpy(b->scalar_p, b->param0, fbytes);
        memcpy(b->scalar_m, b->mom0, fbytes);
    }
    k_sgd_step_mixed(param, lp, lp_dt, b->grad, grad_dtype, scale, mom, count, h->lr, h->momentum, h->weight_decay,
                     h->nesterov);
    k_isa_t isa = k_isa_current();
    k_isa_set(K_ISA_SCALAR);
    k_sgd_step_mixed(b->scalar_p, lp ? b->scalar_lp : NULL, lp_dt, b->grad, grad_dtype, scale,
                     use_mom ? b->scalar_m : NULL, count, h->lr, h->momentum, h->weight_decay, h->nesterov);
    k_isa_set(isa);

    const char *lp_name = lp_dtype < 0 ? "none" : dtype_names[lp_dt];
    for (size_t i = 0; i < count; i++) {
        int mp = b->meet_p[i], mm = b->meet_m[i];
        uint64_t want_p = f32_bits(b->want_p[i]);
        int ok = out_ok(K_DTYPE_F32, f32_bits(param[i]), want_p, mp) &&
                 out_ok(K_DTYPE_F32, f32_bits(b->scalar_p[i]), want_p, mp);
        if (use_mom)
            ok = ok && out_ok(K_DTYPE_F32, f32_bits(mom[i]), f32_bits(b->want_m[i]), mm) &&
                 out_ok(K_DTYPE_F32, f32_bits(b->scalar_m[i]), f32_bits(b->want_m[i]), mm);
        uint64_t want_lp = mixed_narrow(lp_dt, b->want_p[i]);
        if (lp)
            ok = ok && out_ok(lp_dt, mixed_get_bits(lp_dt, lp, i), want_lp, mp) &&
                 out_ok(lp_dt, mixed_get_bits(lp_dt, b->scalar_lp, i), want_lp, mp);
        (*checks)++;
        if (!ok && (*failures)++ < MAX_PRINTED)
            printf("  sgd_mixed grad %s lp %s lr %g mom %g wd %g nesterov %d scale %a count %zu [%zu]: "
                   "p %a m %a g %llx -> p %a m %a lp %llx (scalar path p %a m %a lp %llx), want p %a m %a "
                   "lp %llx (NaNs met: %d %d)\n",
                   dtype_names[grad_dtype], lp_name, (double)h->lr, (double)h->momentum, (double)h->weight_decay,
                   h->nesterov, (double)scale, count, i, (double)b->param0[i], (double)b->mom0[i],
                   (unsigned long long)mixed_get_bits(grad_dtype, b->grad, i), (double)param[i],
                   use_mom ? (double)mom[i] : 0.0, lp ? (unsigned long long)mixed_get_bits(lp_dt, lp, i) : 0ull,
                   (double)b->scalar_p[i], (double)b->scalar_m[i],
                   lp ? (unsigned long long)mixed_get_bits(lp_dt, b->scalar_lp, i) : 0ull, (double)b->want_p[i],
                   (double)b->want_m[i], lp ? (unsigned long long)want_lp : 0ull, mm, mp);
    }

    (*checks)++;
    int guards = guards_intact(b->param_buf + off * sizeof(float), fbytes) &&
                 guards_intact(b->mom_buf + ((off + 1) % (MAX_OFFSET + 1)) * sizeof(float), use_mom ? fbytes : 0) &&
                 guards_intact(b->lp_buf + ((off + 2) % (MAX_OFFSET + 1)) * lp_size, lp ? count * lp_size : 0);
    if (!use_mom) /* no momentum: the (unused) buffer is not ours to touch */
        for (size_t i = 0; i < span; i++) guards &= b->mom_buf[i] == POISON;
    if (!guards && (*failures)++ < MAX_PRINTED)
        printf("  sgd_mixed grad %s lp %s count %zu: guard overwritten\n", dtype_names[grad_dtype], lp_name, count);
}

/* Every grad dtype x copy dtype (or none) x hyper-parameter mix x count. */
static void test_sgd_mixed_isa(k_isa_t isa, sgd_bufs_t *b)
{
    long checks = 0, failures = 0;
    b->met = 0;
    for (size_t gd = 0; gd < N_GRAD_DTYPES; gd++) {
        for (int lp = -1; lp < N_GRAD_DTYPES; lp++) {
            for (size_t h = 0; h < N_HYPERS; h++) {
                for (size_t k = 0; k < N_COUNTS; k++) {
                    float scale = grad_scales[(k + h) % (sizeof(grad_scales) / sizeof(grad_scales[0]))];
                    sgd_case(mixed_grad_dtypes[gd], lp < 0 ? -1 : (int)mixed_grad_dtypes[lp], &hypers[h], scale,
                             mixed_count_at(k), (k + h) % (MAX_OFFSET + 1), b, &checks, &failures);
                }
            }
        }
    }
    report(checks, failures, "sgd_mixed %-6s grad x copy dtype x hyper", k_isa_name(isa));
    printf("     (of which %ld elements met two NaNs in one operation: any NaN passes there)\n", b->met);
}

/* With f32 gradients, scale 1 and no copy the step is k_sgd_step, bit for
 * bit. Inputs with at most one NaN per element (and then no inf, which
 * could make a second one), so that no operation meets two NaNs and every
 * bit is specified. */
static void test_sgd_mixed_identity(k_isa_t isa, sgd_bufs_t *b)
{
    long checks = 0, failures = 0;
    float *grad = (float *)b->grad;
    for (size_t h = 0; h < N_HYPERS; h++) {
        const hyper_t *hp = &hypers[h];
        int use_mom = hp->momentum != 0.0f;
        for (size_t k = 0; k < N_COUNTS; k++) {
            size_t count = mixed_count_at(k), off = k % (MAX_OFFSET + 1);
            float *p1 = b->want_p, *m1 = b->want_m, *p2 = b->scalar_p + off, *m2 = b->scalar_m + off;
            for (size_t i = 0; i < count; i++) {
                float v[3] = {random_param(&rng), f32_from_bits((uint32_t)mixed_random_any(&rng, K_DTYPE_F32)),
                              random_param(&rng)};
                int nan_at = -1;
                for (int j = 0; j < 3; j++)
                    if (isnan(v[j]) && nan_at < 0) nan_at = j;
                for (int j = 0; j < 3 && nan_at >= 0; j++)
                    if (j != nan_at && !isfinite(v[j])) v[j] = 1.5f;
                p1[i] = p2[i] = v[0];
                grad[i] = v[1];
                m1[i] = m2[i] = use_mom ? v[2] : 0.0f;
            }
            k_sgd_step(p1, grad, use_mom ? m1 : NULL, count, hp->lr, hp->momentum, hp->weight_decay, hp->nesterov);
            k_sgd_step_mixed(p2, NULL, K_DTYPE_F32, grad, K_DTYPE_F32, 1.0f, use_mom ? m2 : NULL, count, hp->lr,
                             hp->momentum, hp->weight_decay, hp->nesterov);
            for (size_t i = 0; i < count; i++) {
                checks++;
                if ((f32_bits(p1[i]) != f32_bits(p2[i]) || f32_bits(m1[i]) != f32_bits(m2[i])) &&
                    failures++ < MAX_PRINTED)
                    printf("  sgd_mixed = sgd_step hyper %zu count %zu [%zu]: p %a, k_sgd_step %a; m %a, "
                           "k_sgd_step "
                           "%a\n",
                           h, count, i, (double)p2[i], (double)p1[i], (double)m2[i], (double)m1[i]);
            }
        }
    }
    report(checks, failures, "sgd_mixed %-6s = k_sgd_step (f32, scale 1)", k_isa_name(isa));
}

/* Copies of values past a format's range: f16 rounds to inf from 65520
 * (65504 + half an ulp, a tie that goes to even = inf) on, bf16 from
 * 0x1.ffp127; just below, the largest finite value. The step leaves the
 * parameters as they are (zero gradients, no decay or momentum), so the
 * expected copies are constants. 37 elements: vector body and tail. */
static void test_sgd_mixed_overflow(k_isa_t isa)
{
    static const struct {
        float p;
        uint16_t f16, bf16;
    } cases[] = {
        {65504.0f, 0x7BFF, 0x4780},    {-65504.0f, 0xFBFF, 0xC780},        {0x1.ffdffep+15f, 0x7BFF, 0x4780},
        {65520.0f, 0x7C00, 0x4780},    {-65520.0f, 0xFC00, 0xC780},        {70000.0f, 0x7C00, 0x4789},
        {1e5f, 0x7C00, 0x47C3},        {-1e10f, 0xFC00, 0xD015},           {0x1.fefffep127f, 0x7C00, 0x7F7F},
        {0x1.ffp127f, 0x7C00, 0x7F80}, {-0x1.fffffep127f, 0xFC00, 0xFF80}, {INFINITY, 0x7C00, 0x7F80},
        {-INFINITY, 0xFC00, 0xFF80},
    };
    enum { N = 37 };
    size_t n_cases = sizeof(cases) / sizeof(cases[0]);
    float param[N];
    uint16_t grad[N], lp[N];
    long checks = 0, failures = 0;
    for (int lp_dtype = K_DTYPE_F16; lp_dtype <= K_DTYPE_BF16; lp_dtype++) {
        for (size_t i = 0; i < N; i++) {
            param[i] = cases[i % n_cases].p;
            grad[i] = (uint16_t)(i % 2 ? 0x8000 : 0); /* +-0 */
        }
        memset(lp, 0xA5, sizeof(lp));
        k_sgd_step_mixed(param, lp, (k_dtype_t)lp_dtype, grad, K_DTYPE_BF16, 0.5f, NULL, N, 0.5f, 0.0f, 0.0f, 0);
        for (size_t i = 0; i < N; i++) {
            uint16_t want = lp_dtype == K_DTYPE_F16 ? cases[i % n_cases].f16 : cases[i % n_cases].bf16;
            checks += 2;
            if (f32_bits(param[i]) != f32_bits(cases[i % n_cases].p) && failures++ < MAX_PRINTED)
                printf("  overflow [%zu]: param %a changed to %a\n", i, (double)cases[i % n_cases].p, (double)param[i]);
            if (lp[i] != want && failures++ < MAX_PRINTED)
                printf("  overflow %s [%zu]: %a -> %04x want %04x\n", dtype_names[lp_dtype], i,
                       (double)cases[i % n_cases].p, lp[i], want);
        }
    }
    report(checks, failures, "sgd_mixed %-6s f16/bf16 copies past range", k_isa_name(isa));
}

void mixed_test_sgd_isa(k_isa_t isa)
{
    size_t span = 2 * GUARD_BYTES + (MAX_COUNT + MAX_OFFSET) * sizeof(float);
    size_t fbytes = (MAX_COUNT + MAX_OFFSET) * sizeof(float);
    sgd_bufs_t b = {
        .param_buf = malloc(span),
        .mom_buf = malloc(span),
        .lp_buf = malloc(span),
        .grad = malloc(fbytes),
        .param0 = malloc(fbytes),
        .mom0 = malloc(fbytes),
        .want_p = malloc(fbytes),
        .want_m = malloc(fbytes),
        .scalar_p = malloc(fbytes),
        .scalar_m = malloc(fbytes),
        .scalar_lp = malloc(fbytes),
        .meet_m = malloc(MAX_COUNT),
        .meet_p = malloc(MAX_COUNT),
    };
    test_sgd_mixed_isa(isa, &b);
    test_sgd_mixed_identity(isa, &b);
    void *all[] = {b.param_buf, b.mom_buf,  b.lp_buf,   b.grad,      b.param0, b.mom0,  b.want_p,
                   b.want_m,    b.scalar_p, b.scalar_m, b.scalar_lp, b.meet_m, b.meet_p};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) free(all[i]);
    test_sgd_mixed_overflow(isa);
}
