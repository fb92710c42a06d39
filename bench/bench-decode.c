/* SPDX-License-Identifier: GPL-2.0-or-later */
/* bench-decode DB LEVEL [ROUNDS]: times sample_block_decode() over the
 * sample blocks of one level of a database (0: buckets, 3: leaf minutes;
 * store-samples.c), the first step of every query, without sqlite or
 * the query around it. Reads the blocks into memory, then decodes all of
 * them ROUNDS times (default 15) and prints the thread's CPU time an
 * entry, median and least, zstd included. Markers are skipped. */
#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "macro.h"
#include "store/sample-block.h"

typedef struct blob {
        uint8_t *data;
        size_t size;
} blob;

static double cpu_ns(void) {
        struct timespec t;

        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
        return (double) t.tv_sec * 1e9 + (double) t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;

        return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
        _cleanup_free_ blob *blobs = NULL;
        _cleanup_free_ double *per_entry = NULL;
        size_t n_blobs = 0, alloc = 0, entries = 0;
        sqlite3 *db = NULL;
        sqlite3_stmt *st = NULL;
        sample_codec *codec;
        unsigned rounds = 15;
        int rc;

        if (argc < 3 || argc > 4) {
                fprintf(stderr, "usage: bench-decode DB LEVEL [ROUNDS]\n");
                return 2;
        }
        if (argc == 4)
                rounds = (unsigned) strtoul(argv[3], NULL, 10);
        if (rounds == 0)
                rounds = 1;
        if (sqlite3_open_v2(argv[1], &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(db, "SELECT data FROM sample_blocks WHERE level = ?1 AND length(data) > 1", -1, &st,
                               NULL) != SQLITE_OK) {
                fprintf(stderr, "%s: %s\n", argv[1], sqlite3_errmsg(db));
                return 1;
        }
        sqlite3_bind_int(st, 1, atoi(argv[2]));
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                size_t size = (size_t) sqlite3_column_bytes(st, 0);

                if (GREEDY_REALLOC(blobs, alloc, n_blobs + 1) < 0) {
                        fprintf(stderr, "out of memory\n");
                        return 1;
                }
                blobs[n_blobs].data = malloc(size);
                if (!blobs[n_blobs].data) {
                        fprintf(stderr, "out of memory\n");
                        return 1;
                }
                memcpy(blobs[n_blobs].data, sqlite3_column_blob(st, 0), size);
                blobs[n_blobs++].size = size;
        }
        sqlite3_finalize(st);
        sqlite3_close(db);
        if (rc != SQLITE_DONE || n_blobs == 0) {
                fprintf(stderr, "%s: no blocks of level %s\n", argv[1], argv[2]);
                return 1;
        }

        codec = sample_codec_new();
        per_entry = calloc(rounds, sizeof *per_entry);
        if (!codec || !per_entry) {
                fprintf(stderr, "out of memory\n");
                return 1;
        }
        for (unsigned r = 0; r < rounds; r++) {
                double t0 = cpu_ns();

                entries = 0;
                for (size_t i = 0; i < n_blobs; i++) {
                        block_entry *v;
                        size_t n;
                        int k = sample_block_decode(codec, blobs[i].data, blobs[i].size, &v, &n);

                        if (k < 0) {
                                fprintf(stderr, "block %zu: %s\n", i, strerror(-k));
                                return 1;
                        }
                        entries += n;
                        free(v);
                }
                if (entries == 0) {
                        fprintf(stderr, "%s: the blocks of level %s hold no entries\n", argv[1], argv[2]);
                        return 1;
                }
                per_entry[r] = (cpu_ns() - t0) / (double) entries;
        }
        qsort(per_entry, rounds, sizeof *per_entry, cmp_double);
        printf("level %s: %zu blocks, %zu entries; %.2f ns an entry (median of %u rounds), least %.2f\n", argv[2],
               n_blobs, entries, per_entry[rounds / 2], rounds, per_entry[0]);
        sample_codec_free(codec);
        for (size_t i = 0; i < n_blobs; i++)
                free(blobs[i].data);
        return 0;
}
