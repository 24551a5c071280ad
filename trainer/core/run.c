/*
 * run.c - the run state across a change of world (run.h): the per-rank
 * batch and the position in the epoch converted to another number of ranks
 * or batch, shared by --resume (cli/main_ckpt.c) and --elastic's re-forms.
 */
#include "run.h"

int tr_run_world_batch(int w0, int b0, int w1, int batch1, int keep_global)
{
    if (!keep_global) return batch1;
    const int64_t global = (int64_t)w0 * b0;
    return w1 > 0 && global % w1 == 0 ? (int)(global / w1) : 0;
}

uint64_t tr_run_reshard(tr_run_state_t *st, uint64_t g0, uint64_t g1, int ordered, uint64_t samples, uint64_t spe)
{
    uint64_t consumed = st->epoch_sample_offset + st->step_in_epoch * g0;
    if (ordered) {
        if (consumed > samples) consumed = samples;
        st->epoch_sample_offset = consumed;
        st->step_in_epoch = 0;
    } else {
        /* Synthetic data has no order: keep the position in the epoch. */
        st->epoch_sample_offset = 0;
        st->step_in_epoch = consumed / g1 < spe ? consumed / g1 : spe;
    }
    st->step = st->epoch * spe + (consumed + g1 / 2) / g1;
    return consumed;
}
