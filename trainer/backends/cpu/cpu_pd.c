/*
 * cpu_pd.c - memory and primitive descriptors on oneDNN 3 and on oneDNN 2.6.
 *
 * The layers are written against oneDNN 3's C API, where a memory
 * descriptor is a handle (dnnl_memory_desc_create_*, _destroy) and a
 * primitive descriptor is created in one call per kind of operation. The
 * build falls back to Debian's oneDNN 2.6 where no oneDNN 3 is installed
 * (trainer/backends/cpu/meson.build); there a memory descriptor is a struct and a
 * primitive descriptor is made from an operation descriptor. This file is
 * the only place that knows: cpu_md_t is a pointer in both (to a heap copy
 * of the struct on 2.6), and each cpu_pd_* has oneDNN 3's arguments.
 * Everything else compiles against either unchanged.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

static const dnnl_dims_t cpu_no_dilation = {0, 0};

hora_status_t cpu_md_tag(cpu_md_t *md, int ndims, const dnnl_dims_t dims, dnnl_data_type_t dt, dnnl_format_tag_t tag)
{
#if CPU_DNNL3
    return cpu_dnnl(dnnl_memory_desc_create_with_tag(md, ndims, dims, dt, tag), "memory descriptor");
#else
    dnnl_memory_desc_t *d = malloc(sizeof(*d));
    if (d == NULL) return cpu_dnnl(dnnl_out_of_memory, "memory descriptor");
    hora_status_t status = cpu_dnnl(dnnl_memory_desc_init_by_tag(d, ndims, dims, dt, tag), "memory descriptor");
    if (status != HORA_OK) {
        free(d);
        return status;
    }
    *md = d;
    return HORA_OK;
#endif
}

void cpu_md_free(cpu_md_t md)
{
    if (md == NULL) return;
#if CPU_DNNL3
    dnnl_memory_desc_destroy(md);
#else
    free(md);
#endif
}

void cpu_md_free_all(cpu_md_t *mds, int count)
{
    for (int i = 0; i < count; i++) {
        cpu_md_free(mds[i]);
        mds[i] = NULL;
    }
}

dnnl_status_t cpu_pd_conv_forward(dnnl_primitive_desc_t *pd, const cpu_backend_t *b, cpu_cmd_t src, cpu_cmd_t w,
                                  cpu_cmd_t dst, const dnnl_dims_t strides, const dnnl_dims_t pad)
{
#if CPU_DNNL3
    return dnnl_convolution_forward_primitive_desc_create(pd, b->engine, dnnl_forward_training, dnnl_convolution_direct,
                                                          src, w, NULL, dst, strides, cpu_no_dilation, pad, pad,
                                                          b->attr);
#else
    dnnl_convolution_desc_t desc;
    dnnl_status_t s = dnnl_dilated_convolution_forward_desc_init(&desc, dnnl_forward_training, dnnl_convolution_direct,
                                                                 src, w, NULL, dst, strides, cpu_no_dilation, pad, pad);
    return s != dnnl_success ? s : dnnl_primitive_desc_create(pd, &desc, b->attr, b->engine, NULL);
#endif
}

dnnl_status_t cpu_pd_conv_backward_data(dnnl_primitive_desc_t *pd, const cpu_backend_t *b, cpu_cmd_t diff_src,
                                        cpu_cmd_t w, cpu_cmd_t diff_dst, const dnnl_dims_t strides,
                                        const dnnl_dims_t pad, const_dnnl_primitive_desc_t hint)
{
#if CPU_DNNL3
    return dnnl_convolution_backward_data_primitive_desc_create(pd, b->engine, dnnl_convolution_direct, diff_src, w,
                                                                diff_dst, strides, cpu_no_dilation, pad, pad, hint,
                                                                b->attr);
#else
    dnnl_convolution_desc_t desc;
    dnnl_status_t s = dnnl_dilated_convolution_backward_data_desc_init(&desc, dnnl_convolution_direct, diff_src, w,
                                                                       diff_dst, strides, cpu_no_dilation, pad, pad);
    return s != dnnl_success ? s : dnnl_primitive_desc_create(pd, &desc, b->attr, b->engine, hint);
#endif
}

dnnl_status_t cpu_pd_conv_backward_weights(dnnl_primitive_desc_t *pd, const cpu_backend_t *b, cpu_cmd_t src,
                                           cpu_cmd_t diff_w, cpu_cmd_t diff_dst, const dnnl_dims_t strides,
                                           const dnnl_dims_t pad, const_dnnl_primitive_desc_t hint)
{
#if CPU_DNNL3
    return dnnl_convolution_backward_weights_primitive_desc_create(pd, b->engine, dnnl_convolution_direct, src, diff_w,
                                                                   NULL, diff_dst, strides, cpu_no_dilation, pad, pad,
                                                                   hint, b->attr);
#else
    dnnl_convolution_desc_t desc;
    dnnl_status_t s = dnnl_dilated_convolution_backward_weights_desc_init(
        &desc, dnnl_convolution_direct, src, diff_w, NULL, diff_dst, strides, cpu_no_dilation, pad, pad);
    return s != dnnl_success ? s : dnnl_primitive_desc_create(pd, &desc, b->attr, b->engine, hint);
#endif
}

dnnl_status_t cpu_pd_bn_forward(dnnl_primitive_desc_t *pd, const cpu_backend_t *b, dnnl_prop_kind_t prop,
                                cpu_cmd_t data, float epsilon, unsigned flags)
{
#if CPU_DNNL3
    return dnnl_batch_normalization_forward_primitive_desc_create(pd, b->engine, prop, data, data, epsilon, flags,
                                                                  b->attr);
#else
    dnnl_batch_normalization_desc_t desc;
    dnnl_status_t s = dnnl_batch_normalization_forward_desc_init(&desc, prop, data, epsilon, flags);
    return s != dnnl_success ? s : dnnl_primitive_desc_create(pd, &desc, b->attr, b->engine, NULL);
#endif
}

dnnl_status_t cpu_pd_bn_backward(dnnl_primitive_desc_t *pd, const cpu_backend_t *b, cpu_cmd_t data, float epsilon,
                                 unsigned flags, const_dnnl_primitive_desc_t hint)
{
#if CPU_DNNL3
    return dnnl_batch_normalization_backward_primitive_desc_create(pd, b->engine, dnnl_backward, data, data, data,
                                                                   epsilon, flags, hint, b->attr);
#else
    dnnl_batch_normalization_desc_t desc;
    dnnl_status_t s = dnnl_batch_normalization_backward_desc_init(&desc, dnnl_backward, data, data, epsilon, flags);
    return s != dnnl_success ? s : dnnl_primitive_desc_create(pd, &desc, b->attr, b->engine, hint);
#endif
}

dnnl_status_t cpu_pd_pool_forward(dnnl_primitive_desc_t *pd, const cpu_backend_t *b, dnnl_alg_kind_t alg, cpu_cmd_t src,
                                  cpu_cmd_t dst, const dnnl_dims_t strides, const dnnl_dims_t kernel,
                                  const dnnl_dims_t pad_l, const dnnl_dims_t pad_r)
{
#if CPU_DNNL3
    return dnnl_pooling_forward_primitive_desc_create(pd, b->engine, dnnl_forward_training, alg, src, dst, strides,
                                                      kernel, cpu_no_dilation, pad_l, pad_r, b->attr);
#else
    dnnl_pooling_desc_t desc;
    dnnl_status_t s =
        dnnl_pooling_forward_desc_init(&desc, dnnl_forward_training, alg, src, dst, strides, kernel, pad_l, pad_r);
    return s != dnnl_success ? s : dnnl_primitive_desc_create(pd, &desc, b->attr, b->engine, NULL);
#endif
}

dnnl_status_t cpu_pd_pool_backward(dnnl_primitive_desc_t *pd, const cpu_backend_t *b, dnnl_alg_kind_t alg,
                                   cpu_cmd_t diff_src, cpu_cmd_t diff_dst, const dnnl_dims_t strides,
                                   const dnnl_dims_t kernel, const dnnl_dims_t pad_l, const dnnl_dims_t pad_r,
                                   const_dnnl_primitive_desc_t hint)
{
#if CPU_DNNL3
    return dnnl_pooling_backward_primitive_desc_create(pd, b->engine, alg, diff_src, diff_dst, strides, kernel,
                                                       cpu_no_dilation, pad_l, pad_r, hint, b->attr);
#else
    dnnl_pooling_desc_t desc;
    dnnl_status_t s = dnnl_pooling_backward_desc_init(&desc, alg, diff_src, diff_dst, strides, kernel, pad_l, pad_r);
    return s != dnnl_success ? s : dnnl_primitive_desc_create(pd, &desc, b->attr, b->engine, hint);
#endif
}

dnnl_status_t cpu_pd_ip_forward(dnnl_primitive_desc_t *pd, const cpu_backend_t *b, cpu_cmd_t src, cpu_cmd_t w,
                                cpu_cmd_t bias, cpu_cmd_t dst)
{
#if CPU_DNNL3
    return dnnl_inner_product_forward_primitive_desc_create(pd, b->engine, dnnl_forward_training, src, w, bias, dst,
                                                            b->attr);
#else
    dnnl_inner_product_desc_t desc;
    dnnl_status_t s = dnnl_inner_product_forward_desc_init(&desc, dnnl_forward_training, src, w, bias, dst);
    return s != dnnl_success ? s : dnnl_primitive_desc_create(pd, &desc, b->attr, b->engine, NULL);
#endif
}

dnnl_status_t cpu_pd_ip_backward_data(dnnl_primitive_desc_t *pd, const cpu_backend_t *b, cpu_cmd_t diff_src,
                                      cpu_cmd_t w, cpu_cmd_t diff_dst, const_dnnl_primitive_desc_t hint)
{
#if CPU_DNNL3
    return dnnl_inner_product_backward_data_primitive_desc_create(pd, b->engine, diff_src, w, diff_dst, hint, b->attr);
#else
    dnnl_inner_product_desc_t desc;
    dnnl_status_t s = dnnl_inner_product_backward_data_desc_init(&desc, diff_src, w, diff_dst);
    return s != dnnl_success ? s : dnnl_primitive_desc_create(pd, &desc, b->attr, b->engine, hint);
#endif
}

dnnl_status_t cpu_pd_ip_backward_weights(dnnl_primitive_desc_t *pd, const cpu_backend_t *b, cpu_cmd_t src,
                                         cpu_cmd_t diff_w, cpu_cmd_t diff_bias, cpu_cmd_t diff_dst,
                                         const_dnnl_primitive_desc_t hint)
{
#if CPU_DNNL3
    return dnnl_inner_product_backward_weights_primitive_desc_create(pd, b->engine, src, diff_w, diff_bias, diff_dst,
                                                                     hint, b->attr);
#else
    dnnl_inner_product_desc_t desc;
    dnnl_status_t s = dnnl_inner_product_backward_weights_desc_init(&desc, src, diff_w, diff_bias, diff_dst);
    return s != dnnl_success ? s : dnnl_primitive_desc_create(pd, &desc, b->attr, b->engine, hint);
#endif
}
