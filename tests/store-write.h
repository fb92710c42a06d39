/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* Writing a whole sample into a store for tests that exercise the store
 * alone: the store's own entry points in the order the daemon's
 * symbolizer and ingest call them (frames interned outermost caller
 * first, each a node under its caller, then one store_insert_sample()).
 * Inside or outside a store_begin() batch, like those entry points. */

#include "store/store.h"

typedef struct test_sample {
        uint64_t time_ns;
        uint32_t cpu;
        uint32_t pid, tid;
        const char *comm;       /* NULL if unknown */
        const char *cgroup;     /* its cgroup v2 path; NULL if unknown */
        uint64_t period;
        size_t n_frames;
        const frame *frames;    /* leaf first, outermost caller last */
        uint32_t kind;          /* sample_kind; SAMPLE_KIND_OFFCPU: period is ns waited */
} test_sample;

static inline int test_add_sample(store *s, int64_t boot_id, const test_sample *smp) {
        stored_sample row = {
                .time_ns = smp->time_ns,
                .cpu = smp->cpu,
                .pid = smp->pid,
                .tid = smp->tid,
                .period = smp->period,
                .kind = smp->kind,
                .boot_id = boot_id,
        };
        int r;

        if (smp->comm) {
                r = store_intern_string(s, smp->comm, &row.comm_id);
                if (r < 0)
                        return r;
        }
        if (smp->cgroup) {
                r = store_intern_string(s, smp->cgroup, &row.cgroup_id);
                if (r < 0)
                        return r;
        }
        for (size_t i = smp->n_frames; i-- > 0;) {
                int64_t frame_id;

                r = store_intern_frame(s, &smp->frames[i], &frame_id);
                if (r < 0)
                        return r;
                r = store_intern_stack(s, row.stack_id, frame_id, &row.stack_id);
                if (r < 0)
                        return r;
        }
        return store_insert_sample(s, &row);
}
