/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Freeing query results (query.h): shared by the store, which makes them,
 * and perfsnapctl, which parses them from replies and links no storage. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "query.h"
#include "strtab.h"

void query_rows_free(query_row *rows, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(rows[i].comm);
                free(rows[i].module);
                free(rows[i].symbol);
                free(rows[i].inlined);
                free(rows[i].cgroup);
        }
}

void query_stack_done(query_stack *st) {
        free(st->comm);
        free(st->cgroup);
        for (size_t i = 0; !st->borrowed && st->frames && i < st->n_frames; i++)
                free(st->frames[i]);
        free(st->frames);
        free(st->modules);
        free(st->name_ids);
        free(st->addrs);
}

query_result *query_result_free(query_result *r) {
        if (!r)
                return NULL;

        query_rows_free(r->rows, r->n_rows);
        free(r->rows);
        for (size_t i = 0; i < r->n_stacks; i++)
                query_stack_done(r->stacks + i);
        free(r->stacks);
        for (size_t i = 0; i < r->n_modules; i++) {
                free(r->modules[i].name);
                free(r->modules[i].build_id);
        }
        free(r->modules);
        free(r->timeline);
        free(r->kernel_build_id);
        free(r->kcore_snapshot);
        for (size_t i = 0; i < r->n_names; i++)
                free(r->names[i]);
        free(r->names);
        for (size_t i = 0; i < r->n_shapes; i++)
                query_stack_done(r->shapes + i);
        free(r->shapes);
        for (size_t i = 0; i < r->n_comms; i++)
                free(r->comms[i]);
        free(r->comms);
        for (size_t i = 0; i < r->n_cgroups; i++)
                free(r->cgroups[i]);
        free(r->cgroups);
        free(r->entries);
        for (size_t i = 0; i < r->n_cgroup_totals; i++) {
                free(r->cgroup_totals[i].cgroup);
                query_rows_free(&r->cgroup_totals[i].top, 1);
        }
        free(r->cgroup_totals);
        free(r);
        return NULL;
}

void query_result_unpack(query_result *r) {
        for (size_t i = 0; i < r->n_stacks; i++) {
                free(r->stacks[i].name_ids);
                r->stacks[i].name_ids = NULL;
        }
        for (size_t i = 0; i < r->n_names; i++)
                free(r->names[i]);
        free(r->names);
        r->names = NULL;
        r->n_names = 0;
}

int query_result_pack(query_result *r) {
        strtab t;
        int k;

        query_result_unpack(r);
        k = strtab_init(&t);
        for (size_t i = 0; k >= 0 && i < r->n_stacks; i++) {
                query_stack *st = &r->stacks[i];

                st->name_ids = calloc(MAX(st->n_frames, (size_t) 1), sizeof(uint32_t));
                if (!st->name_ids) {
                        k = -ENOMEM;
                        break;
                }
                for (size_t j = 0; k >= 0 && j < st->n_frames; j++) {
                        size_t id;

                        k = strtab_id_copy(&t, st->frames[j], &id);
                        if (k >= 0 && id >= UINT32_MAX)
                                k = -E2BIG;
                        if (k >= 0)
                                st->name_ids[j] = (uint32_t) id;
                }
        }
        if (k >= 0) {
                /* Every name is a copy: the copies are the names, in order. */
                r->names = TAKE_PTR(t.owned);
                r->n_names = t.n_owned;
                t.n_owned = 0;
        }
        strtab_done(&t);
        return k < 0 ? k : 0;
}
