/* SPDX-License-Identifier: GPL-2.0-or-later */
/* sample-dump DB [LEVEL]: prints the entries of the sample blocks of one
 * level (default 0) of a perfsnapd database, one line each, for tests
 * that check what was stored:
 *   start_ns end_ns first_ns last_ns boot cpu pid tid comm_id snapshot stack_id count period
 * snapshot is the entry's own link, or else the one snapshot_links gives
 * its block (0 if none). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store-private.h"
#include "store/store-samples.h"

typedef struct snap_link {
        int64_t boot, snapshot;
        uint64_t from, until;
} snap_link;

typedef struct dump {
        snap_link *links;
        size_t n_links;
} dump;

static int print_block(const scan_block *b, const block_entry *v, size_t n, void *userdata) {
        dump *d = userdata;
        int64_t linked = 0;

        for (size_t i = 0; i < d->n_links; i++)
                if (d->links[i].boot == b->boot_id && b->last_ns >= d->links[i].from && b->first_ns < d->links[i].until)
                        linked = d->links[i].snapshot;
        for (size_t i = 0; i < n; i++)
                printf("%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRId64 " %u %u %u %" PRId64 " %" PRId64
                       " %" PRId64 " %" PRIu64 " %" PRIu64 "\n",
                       b->start_ns, b->end_ns, b->first_ns, b->last_ns, b->boot_id, v[i].cpu, v[i].pid, v[i].tid,
                       v[i].comm_id, v[i].snapshot_id ?: linked, v[i].stack_id, v[i].count, v[i].period);
        return 0;
}

int main(int argc, char **argv) {
        store *s = NULL;
        sqlite3_stmt *st = NULL;
        dump d = {};
        unsigned level = argc > 2 ? (unsigned) atoi(argv[2]) : 0;
        int r;

        if (argc < 2) {
                fprintf(stderr, "usage: sample-dump DB [LEVEL]\n");
                return 2;
        }
        r = store_open(argv[1], STORE_READONLY, &s);
        if (r < 0) {
                fprintf(stderr, "%s: %s\n", argv[1], strerror(-r));
                return 1;
        }
        if (store_prepare(s, "SELECT boot, snapshot, from_ns, until_ns FROM snapshot_links", &st) >= 0) {
                while (sqlite3_step(st) == SQLITE_ROW) {
                        snap_link *p = realloc(d.links, (d.n_links + 1) * sizeof *p);
                        if (!p)
                                return 1;
                        d.links = p;
                        d.links[d.n_links++] = (snap_link) {
                                .boot = sqlite3_column_int64(st, 0),
                                .snapshot = sqlite3_column_int64(st, 1),
                                .from = u64(sqlite3_column_int64(st, 2)),
                                .until = u64(sqlite3_column_int64(st, 3)),
                        };
                }
                sqlite3_finalize(st);
        }
        /* Only the one level: scan up to it, and skip the levels below. */
        r = sample_scan_level(s, level, print_block, &d);
        free(d.links);
        store_free(s);
        if (r < 0) {
                fprintf(stderr, "%s: %s\n", argv[1], strerror(-r));
                return 1;
        }
        return 0;
}
