/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Freeing query results (query.h): shared by the store, which makes them,
 * and perfsnapctl, which parses them from replies and links no storage. */

#include <stdlib.h>

#include "query.h"

void query_rows_free(query_row *rows, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(rows[i].comm);
                free(rows[i].module);
                free(rows[i].symbol);
                free(rows[i].inlined);
        }
}

void query_stack_done(query_stack *st) {
        free(st->comm);
        for (size_t i = 0; i < st->n_frames; i++)
                free(st->frames[i]);
        free(st->frames);
        free(st->modules);
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
        free(r);
        return NULL;
}
