/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The store's readers other than queries (store.h): read transactions,
 * statistics, lost counts per CPU, and the checks of a database file
 * (store_verify(), store_check_integrity()). */

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hashmap.h"
#include "macro.h"
#include "store/store-dict.h"
#include "store/store-private.h"
#include "store/store-samples.h"
#include "store/store.h"

/* ---- readers ---- */

/* A write of the batch failed: the batch must not commit without it. */
static int batch_failed(store *s, int r) {
        if (s->batch_error == 0)
                s->batch_error = r;
        store_check_rolled_back(s);
        return r;
}

int store_write_open_bucket(store *s) {
        int r;

        if (!s->in_tx || !s->samples)
                return -EINVAL;
        r = sample_writer_flush_partial(s->samples);
        return r < 0 ? batch_failed(s, r) : r;
}

/* A consistent snapshot for a multi-statement read. On the writer inside a
 * batch the batch's transaction is that snapshot already. */
int store_read_begin(store *s, bool *ret_owned) {
        int r;

        *ret_owned = false;
        if (s->in_tx) {
                /* The writer reads its own batch, the open bucket and the
                 * open stack block included. */
                r = dict_before_commit(s->stacks);
                if (r >= 0)
                        r = dict_before_commit(s->frames);
                if (r >= 0)
                        r = sample_writer_flush_partial(s->samples);
                return r < 0 ? batch_failed(s, r) : r;
        }
        if (s->samples && !store_held(s, NULL, NULL, NULL, NULL)) {
                /* The writer outside a batch: write its open bucket first
                 * (not while batches are held: the next batch writes it). */
                r = store_begin(s);
                if (r >= 0)
                        r = sample_writer_flush_partial(s->samples);
                if (r >= 0)
                        r = store_commit(s);
                /* Held for a full disk: the read sees the file without it. */
                if (r < 0 && !store_held(s, NULL, NULL, NULL, NULL))
                        return r;
        }
        r = store_sql_exec(s->db, "BEGIN");
        if (r < 0)
                return r;
        *ret_owned = true;
        return 0;
}

void store_read_end(store *s, bool owned) {
        if (owned)
                (void) store_sql_exec(s->db, "COMMIT");
}

static int file_size(const char *path, const char *suffix, uint64_t *ret) {
        _cleanup_free_ char *p = NULL;
        struct stat st;

        if (asprintf(&p, "%s%s", path, suffix) < 0)
                return -ENOMEM;
        if (stat(p, &st) < 0) {
                if (errno == ENOENT) {
                        *ret = 0;
                        return 0;
                }
                return -errno;
        }
        *ret = (uint64_t) st.st_size;
        return 0;
}

static int stats_locked(store *s, store_stats *st) {
        sample_counters c;
        int64_t v;
        int r;

        /* Counters the writer keeps: no table scan. */
        r = sample_meta_read(s->db, &c);
        if (r < 0)
                return r;
        st->samples = c.samples;
        st->first_ns = c.first_ns;
        st->last_ns = c.last_ns;

        r = store_sql_int64(s->db, "SELECT coalesce(sum(count), 0) FROM lost", &v);
        if (r < 0)
                return r;
        st->lost = u64(v);

        /* The last block's last id: one b-tree descent. */
        r = dict_max_id(s->db, DICT_FRAMES, &v);
        if (r < 0)
                return r;
        st->n_frames = u64(v);
        r = dict_max_id(s->db, DICT_STACKS, &v);
        if (r < 0)
                return r;
        st->n_stacks = u64(v);
        r = store_sql_int64(s->db, "SELECT coalesce(max(id), 0) FROM strings", &v);
        if (r < 0)
                return r;
        st->n_strings = u64(v);
        return 0;
}

int64_t store_memory_used(int64_t *ret_allocations) {
        sqlite3_int64 cur = 0, hi = 0;

        if (ret_allocations) {
                (void) sqlite3_status64(SQLITE_STATUS_MALLOC_COUNT, &cur, &hi, 0);
                *ret_allocations = cur;
        }
        return sqlite3_memory_used();
}

int store_get_stats(store *s, store_stats *ret) {
        store_stats st = {};
        uint64_t main_bytes, wal_bytes;
        bool owned;
        int r;

        if (!s || !ret)
                return -EINVAL;

        r = store_read_begin(s, &owned);
        if (r < 0)
                return r;
        r = stats_locked(s, &st);
        store_read_end(s, owned);
        if (r < 0)
                return r;

        r = file_size(s->path, "", &main_bytes);
        if (r < 0)
                return r;
        r = file_size(s->path, "-wal", &wal_bytes);
        if (r < 0)
                return r;
        st.db_bytes = main_bytes + wal_bytes;

        *ret = st;
        return 0;
}

int store_get_lost_per_cpu(store *s, uint64_t since_ns, uint64_t until_ns, uint64_t **ret, size_t *ret_n) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        _cleanup_free_ uint64_t *a = NULL;
        size_t n = 0;
        int r, rc;

        if (!s || !ret || !ret_n)
                return -EINVAL;

        r = store_sql_prepare(s->db,
                    "SELECT cpu, sum(count) FROM lost WHERE time_ns >= ?1 AND (?2 = 0 OR time_ns < ?2) "
                    "GROUP BY cpu ORDER BY cpu",
                    &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, since_ns > INT64_MAX ? INT64_MAX : i64(since_ns));
        sqlite3_bind_int64(st, 2, until_ns > INT64_MAX ? INT64_MAX : i64(until_ns));

        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                int64_t cpu = sqlite3_column_int64(st, 0);

                /* The array is sized by the largest CPU: do not let one
                 * bogus row allocate gigabytes. */
                if (cpu < 0 || cpu > STORE_MAX_CPU)
                        continue;
                if ((size_t) cpu >= n) {
                        uint64_t *b = realloc(a, ((size_t) cpu + 1) * sizeof(uint64_t));
                        if (!b)
                                return -ENOMEM;
                        memset(b + n, 0, ((size_t) cpu + 1 - n) * sizeof(uint64_t));
                        a = b;
                        n = (size_t) cpu + 1;
                }
                a[cpu] += u64(sqlite3_column_int64(st, 1));
        }
        if (rc != SQLITE_DONE)
                return store_sql_errno(s->db, rc) ?: -EIO;

        *ret = TAKE_PTR(a);
        *ret_n = n;
        return 0;
}

/* A check's first finding on one line, without the "*** in database main
 * ***" heading. */
static char *finding(const char *answer) {
        const char *heading = "*** in database main ***\n";
        char *s;

        if (!answer)
                return strdup("?");
        if (strncmp(answer, heading, strlen(heading)) == 0)
                answer += strlen(heading);
        s = strdup(answer);
        for (char *p = s; p && *p; p++)
                if (*p == '\n')
                        *p = ' ';
        return s;
}

/* Runs one check pragma; -EBADMSG with *ret_why unless all it says is "ok". */
static int run_check(sqlite3 *db, const char *sql, char **ret_why) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        const char *answer;
        int r, rc;

        r = store_sql_prepare(db, sql, &st);
        if (r < 0) {
                if (r == -EBADMSG && !*ret_why)
                        *ret_why = strdup(sqlite3_errmsg(db));
                return r;
        }
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                answer = (const char *) sqlite3_column_text(st, 0);
                if (answer && streq(answer, "ok"))
                        continue;
                if (!*ret_why)
                        *ret_why = finding(answer);
                r = -EBADMSG;
        }
        if (rc != SQLITE_DONE) {
                r = store_sql_errno(db, rc) ?: -EIO;
                if (r == -EBADMSG && !*ret_why)
                        *ret_why = strdup(sqlite3_errmsg(db));
        }
        return r;
}

/* The tables that grow with the samples: a start-up check of a large file
 * after a clean stop leaves them to the readers, which skip and count a
 * damaged block. */
static bool is_block_table(const char *name) {
        return streq(name, "sample_blocks") || streq(name, "stack_blocks") || streq(name, "frame_blocks");
}

int store_verify(const char *path, store_check check, char **ret_why) {
        _cleanup_free_ char *wal = NULL;
        sqlite3 *db = NULL;
        const char *why = NULL;
        struct stat stt;
        bool whole;
        int r, rc;

        *ret_why = NULL;
        if (lstat(path, &stt) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (S_ISLNK(stt.st_mode))
                return -ELOOP;
        if (!S_ISREG(stt.st_mode))
                return -EINVAL;
        if (stt.st_size == 0)
                return 0;
        if (asprintf(&wal, "%s-wal", path) < 0)
                return -ENOMEM;
        /* A WAL with frames left behind: the last writer did not close
         * (crash, kill). A reader's close can leave an empty one. */
        struct stat wst;
        whole = check != STORE_CHECK_START || (uint64_t) stt.st_size <= STORE_CHECK_WHOLE_BYTES ||
                (stat(wal, &wst) >= 0 && wst.st_size > 0);

        rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOFOLLOW, NULL);
        if (rc != SQLITE_OK) {
                r = store_sql_errno(db, rc);
                sqlite3_close_v2(db);
                return r;
        }
        sqlite3_busy_timeout(db, STORE_BUSY_TIMEOUT_MS);
        r = store_identify(db, &why);
        if (r == -EPROTO)
                *ret_why = strdup(why);
        else if (r == -EBADMSG)
                *ret_why = strdup(sqlite3_errmsg(db));
        if (r >= 0 && whole)
                r = run_check(db, check == STORE_CHECK_FULL ? "PRAGMA integrity_check(5)" : "PRAGMA quick_check(5)",
                              ret_why);
        else if (r >= 0) {
                _cleanup_finalize_ sqlite3_stmt *st = NULL;

                r = store_sql_prepare(db, "SELECT name FROM sqlite_master WHERE type = 'table'", &st);
                while (r >= 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
                        const char *name = (const char *) sqlite3_column_text(st, 0);
                        _cleanup_free_ char *sql = NULL;

                        if (!name || is_block_table(name))
                                continue;
                        /* Every page of the table, read: sqlite 3.40's
                         * quick_check(TABLE) still walks the whole file. */
                        sql = sqlite3_mprintf("SELECT count(*) FROM \"%w\" NOT INDEXED", name);
                        int64_t n;
                        r = sql ? store_sql_int64(db, sql, &n) : -ENOMEM;
                        sqlite3_free(TAKE_PTR(sql));
                        if (r == -EBADMSG && !*ret_why && asprintf(ret_why, "table %s: %s", name, sqlite3_errmsg(db)) < 0)
                                *ret_why = NULL;
                }
                if (r >= 0 && rc != SQLITE_DONE)
                        r = store_sql_errno(db, rc) ?: -EIO;
        }
        sqlite3_close_v2(db);
        return r;
}

int store_check_integrity(store *s) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        const char *answer;
        int r, rc;

        if (!s)
                return -EINVAL;

        r = store_sql_prepare(s->db, "PRAGMA integrity_check(1)", &st);
        if (r < 0)
                return r;
        rc = sqlite3_step(st);
        if (rc != SQLITE_ROW)
                return store_sql_errno(s->db, rc) ?: -EIO;
        answer = (const char *) sqlite3_column_text(st, 0);
        return answer && strcmp(answer, "ok") == 0 ? 0 : -EBADMSG;
}
