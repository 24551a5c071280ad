/*
 * tensor.c - names of the activation layouts (tensor.h), for messages and
 * verbose output; they are oneDNN's names for the same layouts.
 */
#include "tensor.h"

const char *tr_layout_name(tr_layout_t layout)
{
    switch (layout) {
    case TR_LAYOUT_NCHW: return "nchw";
    case TR_LAYOUT_NHWC: return "nhwc";
    case TR_LAYOUT_NCHW8C: return "nChw8c";
    case TR_LAYOUT_NCHW16C: return "nChw16c";
    }
    return "unknown";
}
