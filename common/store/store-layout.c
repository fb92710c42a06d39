/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The layout journal: module instances, their section maps, dynamic
 * symbols, and the event journal with a full re-emit of the section and
 * symbol records at every change, and the readers answering them in
 * history.h's shapes. See store.h. Addresses are stored as int64 images
 * like everywhere in the store. */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "history.h"
#include "macro.h"
#include "store/store-private.h"

int store_migrate_1_to_2(sqlite3 *db) {
        int rc = sqlite3_exec(db,
                "CREATE TABLE modules(id INTEGER PRIMARY KEY, boot INTEGER NOT NULL, name TEXT NOT NULL,"
                "  build_id TEXT NOT NULL, file TEXT, base INTEGER NOT NULL, size INTEGER NOT NULL,"
                "  loaded_ns INTEGER NOT NULL, loaded_how TEXT NOT NULL,"
                "  unloaded_ns INTEGER, unloaded_how TEXT);"       /* NULL while loaded */
                "CREATE INDEX modules_unloaded ON modules(unloaded_ns);"
                "CREATE TABLE module_sections(id INTEGER PRIMARY KEY, module INTEGER NOT NULL,"
                "  name TEXT NOT NULL, addr INTEGER NOT NULL, len INTEGER NOT NULL, pgoff INTEGER NOT NULL,"
                "  len_source TEXT NOT NULL, exec INTEGER NOT NULL);"
                "CREATE INDEX module_sections_module ON module_sections(module);"
                "CREATE TABLE events(id INTEGER PRIMARY KEY, time_ns INTEGER NOT NULL, boot INTEGER NOT NULL,"
                "  kind TEXT NOT NULL, module INTEGER NOT NULL, detail TEXT);"
                "CREATE INDEX events_time ON events(time_ns);"
                /* One section-map record per row. */
                "CREATE TABLE event_sections(event INTEGER NOT NULL, section INTEGER NOT NULL,"
                "  PRIMARY KEY(event, section)) WITHOUT ROWID;",
                NULL, NULL, NULL);
        return rc == SQLITE_OK ? 0 : -EIO;
}

int store_migrate_2_to_3(sqlite3 *db) {
        int rc = sqlite3_exec(db,
                "CREATE TABLE ksyms(id INTEGER PRIMARY KEY, boot INTEGER NOT NULL, name TEXT NOT NULL,"
                "  addr INTEGER NOT NULL, len INTEGER NOT NULL, type TEXT NOT NULL, prog_id INTEGER,"
                "  registered_ns INTEGER NOT NULL, registered_how TEXT NOT NULL,"
                "  unregistered_ns INTEGER, unregistered_how TEXT);"     /* NULL while registered */
                "CREATE INDEX ksyms_unregistered ON ksyms(unregistered_ns);"
                "CREATE TABLE event_ksyms(event INTEGER NOT NULL, ksym INTEGER NOT NULL,"
                "  PRIMARY KEY(event, ksym)) WITHOUT ROWID;"
                "ALTER TABLE events ADD COLUMN ksym INTEGER NOT NULL DEFAULT 0;",
                NULL, NULL, NULL);
        return rc == SQLITE_OK ? 0 : -EIO;
}

/* Schema 12: an entry's section map may be another's (events.sections_of):
 * the entries of dynamic symbols do not change it. */
int store_migrate_11_to_12(sqlite3 *db) {
        int rc = sqlite3_exec(db, "ALTER TABLE events ADD COLUMN sections_of INTEGER;", NULL, NULL, NULL);
        return rc == SQLITE_OK ? 0 : -EIO;
}

int store_migrate_3_to_4(sqlite3 *db) {
        int rc = sqlite3_exec(db,
                "CREATE TABLE snapshots(id INTEGER PRIMARY KEY, boot INTEGER NOT NULL, build_id TEXT NOT NULL,"
                "  name TEXT NOT NULL, path TEXT NOT NULL, time_ns INTEGER NOT NULL, text_addr INTEGER NOT NULL,"
                "  modules INTEGER NOT NULL, size INTEGER NOT NULL, kcore INTEGER NOT NULL,"
                "  reuses INTEGER NOT NULL DEFAULT 0, last_used_ns INTEGER NOT NULL,"
                "  pruned_ns INTEGER,"                                 /* NULL while in the cache */
                "  UNIQUE(build_id, name));"
                "ALTER TABLE events ADD COLUMN snapshot INTEGER NOT NULL DEFAULT 0;"
                /* NULL until the snapshot of the sample's layout is known. */
                "ALTER TABLE samples ADD COLUMN snapshot INTEGER;",
                NULL, NULL, NULL);
        return rc == SQLITE_OK ? 0 : -EIO;
}

static int bind_text_or_null(sqlite3_stmt *st, int i, const char *s) {
        return (s ? sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC) : sqlite3_bind_null(st, i)) == SQLITE_OK ? 0 : -ENOMEM;
}

static int add_module_locked(store *s, const store_module *m, int64_t *ret_id) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL, *sec = NULL;
        int64_t id;
        int r;

        r = store_prepare(s, "INSERT INTO modules(boot, name, build_id, file, base, size, loaded_ns, loaded_how) "
                             "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)", &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, m->boot_id);
        r = bind_text_or_null(st, 2, m->name);
        if (r >= 0)
                r = bind_text_or_null(st, 3, m->build_id ?: "");
        if (r >= 0)
                r = bind_text_or_null(st, 4, m->file);
        if (r >= 0)
                r = bind_text_or_null(st, 8, m->loaded_how);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 5, i64(m->base));
        sqlite3_bind_int64(st, 6, i64(m->size));
        sqlite3_bind_int64(st, 7, i64(m->loaded_ns));
        r = store_step_done(s, st);
        if (r < 0)
                return r;
        id = sqlite3_last_insert_rowid(store_sqlite(s));

        r = store_prepare(s, "INSERT INTO module_sections(module, name, addr, len, pgoff, len_source, exec) "
                             "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)", &sec);
        if (r < 0)
                return r;
        for (size_t i = 0; i < m->n_sections; i++) {
                const store_section *x = &m->sections[i];

                sqlite3_reset(sec);
                sqlite3_bind_int64(sec, 1, id);
                r = bind_text_or_null(sec, 2, x->name ?: "");
                if (r >= 0)
                        r = bind_text_or_null(sec, 6, x->len_source);
                if (r < 0)
                        return r;
                sqlite3_bind_int64(sec, 3, i64(x->addr));
                sqlite3_bind_int64(sec, 4, i64(x->len));
                sqlite3_bind_int64(sec, 5, i64(x->pgoff));
                sqlite3_bind_int(sec, 7, x->exec);
                r = store_step_done(s, sec);
                if (r < 0)
                        return r;
        }
        *ret_id = id;
        return 0;
}

int store_add_module(store *s, const store_module *m, int64_t *ret_id) {
        int64_t id = 0;
        bool owned;
        int r;

        if (!s || !m || !m->name || !ret_id || (m->n_sections > 0 && !m->sections))
                return -EINVAL;
        r = store_write_begin(s, &owned);
        if (r < 0)
                return r;
        r = store_write_end(s, owned, add_module_locked(s, m, &id));
        if (r < 0)
                return r;
        *ret_id = id;
        return 0;
}

/* Runs one UPDATE of a row: ?1 the id, ?2 an integer, ?3 (if the statement
 * has it) text or NULL. -ENOENT if it changed nothing. The statement is
 * kept as stmt_idx, or prepared for this once with stmt_idx _STMT_MAX. */
static int update_row_locked(store *s, unsigned stmt_idx, const char *sql, int64_t id, int64_t v, const char *text) {
        _cleanup_finalize_ sqlite3_stmt *own = NULL;
        sqlite3_stmt *st;
        int r;

        if (stmt_idx < _STMT_MAX)
                r = store_get_stmt_sql(s, stmt_idx, sql, &st);
        else
                r = store_prepare(s, sql, &own), st = own;
        if (r < 0)
                return r;
        /* Kept in binary for a replay: sqlite3_expanded_sql() of each
         * statement was a tenth of a BPF storm's cost. */
        store_value vals[] = { STORE_INT(id), STORE_INT(v), STORE_TEXT(text) };
        size_t n = sqlite3_bind_parameter_count(st) >= 3 ? 3 : 2;

        r = store_run_kept(s, st, vals, n);
        if (r < 0)
                return r;
        return sqlite3_changes(store_sqlite(s)) > 0 ? 0 : -ENOENT;
}

static int update_row(store *s, unsigned stmt_idx, const char *sql, int64_t id, int64_t v, const char *text) {
        bool owned;
        int r;

        if (!s || id <= 0)
                return -EINVAL;
        r = store_write_begin(s, &owned);
        if (r < 0)
                return r;
        return store_write_end(s, owned, update_row_locked(s, stmt_idx, sql, id, v, text));
}

int store_unload_module(store *s, int64_t module_id, uint64_t unloaded_ns, const char *how) {
        return update_row(s, _STMT_MAX, "UPDATE modules SET unloaded_ns = ?2, unloaded_how = ?3 "
                             "WHERE id = ?1 AND unloaded_ns IS NULL", module_id, i64(unloaded_ns), how);
}

int store_foreach_open_module(store *s, int64_t boot_id, store_open_module_cb cb, void *userdata) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int r, rc;

        if (!s || !cb)
                return -EINVAL;
        r = store_prepare(s, "SELECT id, name, base, size, build_id FROM modules "
                             "WHERE boot = ?1 AND unloaded_ns IS NULL ORDER BY id", &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, boot_id);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                r = cb(sqlite3_column_int64(st, 0), (const char *) sqlite3_column_text(st, 1) ?: "",
                       u64(sqlite3_column_int64(st, 2)), u64(sqlite3_column_int64(st, 3)),
                       (const char *) sqlite3_column_text(st, 4) ?: "", userdata);
                if (r < 0)
                        return r;
        }
        return rc == SQLITE_DONE ? 0 : store_step_errno(s, rc);
}

static int add_ksym_locked(store *s, const store_ksym *k, int64_t *ret_id) {
        sqlite3_stmt *st;
        int r;

        r = store_get_stmt_sql(s, STMT_KSYM_INSERT,
                               "INSERT INTO ksyms(boot, name, addr, len, type, registered_ns, registered_how) "
                               "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)", &st);
        if (r < 0)
                return r;
        const char *type = k->type ?: "unknown";
        store_value vals[] = {
                STORE_INT(k->boot_id), STORE_TEXT(k->name), STORE_INT(i64(k->addr)), STORE_INT(i64(k->len)),
                STORE_TEXT(type), STORE_INT(i64(k->registered_ns)), STORE_TEXT(k->registered_how),
        };
        r = store_run_kept(s, st, vals, ELEMENTSOF(vals));
        if (r < 0)
                return r;
        *ret_id = sqlite3_last_insert_rowid(store_sqlite(s));
        return 0;
}

int store_add_ksym(store *s, const store_ksym *k, int64_t *ret_id) {
        int64_t id = 0;
        bool owned;
        int r;

        if (!s || !k || !k->name || !k->registered_how || !ret_id)
                return -EINVAL;
        r = store_write_begin(s, &owned);
        if (r < 0)
                return r;
        r = store_write_end(s, owned, add_ksym_locked(s, k, &id));
        if (r < 0)
                return r;
        *ret_id = id;
        return 0;
}

int store_unregister_ksym(store *s, int64_t ksym_id, uint64_t unregistered_ns, const char *how) {
        return update_row(s, STMT_KSYM_UNREGISTER, "UPDATE ksyms SET unregistered_ns = ?2, unregistered_how = ?3 "
                              "WHERE id = ?1 AND unregistered_ns IS NULL", ksym_id, i64(unregistered_ns), how);
}

int store_set_ksym_prog_id(store *s, int64_t ksym_id, uint32_t prog_id) {
        return update_row(s, STMT_KSYM_PROG_ID, "UPDATE ksyms SET prog_id = ?2 WHERE id = ?1", ksym_id, prog_id, NULL);
}

int store_foreach_open_ksym(store *s, int64_t boot_id, store_open_ksym_cb cb, void *userdata) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int r, rc;

        if (!s || !cb)
                return -EINVAL;
        r = store_prepare(s, "SELECT id, name, addr, len, registered_how FROM ksyms "
                             "WHERE boot = ?1 AND unregistered_ns IS NULL ORDER BY id", &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, boot_id);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                r = cb(sqlite3_column_int64(st, 0), (const char *) sqlite3_column_text(st, 1) ?: "",
                       u64(sqlite3_column_int64(st, 2)), u64(sqlite3_column_int64(st, 3)),
                       (const char *) sqlite3_column_text(st, 4) ?: "", userdata);
                if (r < 0)
                        return r;
        }
        return rc == SQLITE_DONE ? 0 : store_step_errno(s, rc);
}

/* Inserts (?1 = event, ?2 = each id) with the statement given. */
static int add_event_refs(store *s, unsigned stmt_idx, const char *sql, int64_t event_id, const int64_t *ids,
                          size_t n) {
        sqlite3_stmt *st;
        int r;

        if (n == 0)
                return 0;
        r = store_get_stmt_sql(s, stmt_idx, sql, &st);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                store_value vals[] = { STORE_INT(event_id), STORE_INT(ids[i]) };

                sqlite3_reset(st);
                r = store_run_kept(s, st, vals, ELEMENTSOF(vals));
                if (r < 0)
                        return r;
        }
        return 0;
}

static int add_event_locked(store *s, const store_event *e, int64_t *ret_id) {
        sqlite3_stmt *st;
        int64_t id;
        int r;

        /* The same live modules as the last map written: this entry's
         * map is that entry's rows (module sections never change). A
         * storm of BPF programs on a machine with 52 modules wrote 1,430
         * rows an entry before. */
        bool same_map = s->map_event > 0 && s->map_epoch == s->epoch && e->n_live_modules == s->n_map_mods &&
                        (e->n_live_modules == 0 ||
                         memcmp(e->live_modules, s->map_mods, e->n_live_modules * sizeof *e->live_modules) == 0);

        r = store_get_stmt_sql(s, STMT_EVENT_INSERT,
                               "INSERT INTO events(time_ns, boot, kind, module, ksym, detail, snapshot, sections_of) "
                               "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)", &st);
        if (r < 0)
                return r;
        store_value vals[] = {
                STORE_INT(i64(e->time_ns)), STORE_INT(e->boot_id), STORE_TEXT(e->kind), STORE_INT(e->module_id),
                STORE_INT(e->ksym_id), STORE_TEXT(e->detail), STORE_INT(e->snapshot_id),
                same_map ? STORE_INT(s->map_event) : STORE_NULL,
        };
        r = store_run_kept(s, st, vals, ELEMENTSOF(vals));
        if (r < 0)
                return r;
        id = sqlite3_last_insert_rowid(store_sqlite(s));

        /* The re-emit: every section of every live module (unless the map
         * is an earlier entry's), and every live dynamic symbol, as of this
         * event. */
        if (!same_map) {
                int64_t *m = NULL;

                r = add_event_refs(s, STMT_EVENT_SECTIONS_INSERT,
                                   "INSERT INTO event_sections(event, section) SELECT ?1, id FROM module_sections WHERE module = ?2",
                                   id, e->live_modules, e->n_live_modules);
                if (r < 0)
                        return r;
                if (e->n_live_modules > 0) {
                        m = malloc(e->n_live_modules * sizeof *m);
                        if (!m)
                                return -ENOMEM;
                        memcpy(m, e->live_modules, e->n_live_modules * sizeof *m);
                }
                free(s->map_mods);
                s->map_mods = m;
                s->n_map_mods = e->n_live_modules;
                s->map_event = id;
                s->map_epoch = s->epoch;
        }
        r = add_event_refs(s, STMT_EVENT_KSYMS_INSERT, "INSERT INTO event_ksyms(event, ksym) VALUES (?1, ?2)", id,
                           e->live_ksyms, e->n_live_ksyms);
        if (r < 0)
                return r;
        if (ret_id)
                *ret_id = id;
        return 0;
}

int store_add_event(store *s, const store_event *e, int64_t *ret_id) {
        bool owned;
        int r;

        if (!s || !e || !e->kind || (e->n_live_modules > 0 && !e->live_modules) || (e->n_live_ksyms > 0 && !e->live_ksyms))
                return -EINVAL;
        r = store_write_begin(s, &owned);
        if (r < 0)
                return r;
        r = store_write_end(s, owned, add_event_locked(s, e, ret_id));
        if (r < 0)
                s->map_event = 0;       /* perhaps rolled back */
        return r;
}

int store_expire_layout(store *s, uint64_t before_ns) {
        /* An entry before the cutoff whose section map later ones refer to
         * hands it on: the first of them gets a copy of its rows, and they
         * all refer to that one. Then events before the cutoff go with
         * their records; then module and symbol rows gone before it that
         * no remaining event refers to. */
        static const char *const sql[] = {
                "INSERT INTO event_sections(event, section)"
                "  SELECT n.id, x.section FROM (SELECT min(id) AS id, sections_of AS old FROM events"
                "    WHERE time_ns >= ?1 AND sections_of IN (SELECT id FROM events WHERE time_ns < ?1)"
                "    GROUP BY sections_of) n JOIN event_sections x ON x.event = n.old",
                /* (The pairs first, as a materialized aggregate: a correlated
                 * subquery would see the rows this changes.) */
                "UPDATE events SET sections_of = n.id FROM (SELECT min(id) AS id, sections_of AS old FROM events"
                "    WHERE time_ns >= ?1 AND sections_of IN (SELECT id FROM events WHERE time_ns < ?1)"
                "    GROUP BY sections_of) AS n"
                "  WHERE events.time_ns >= ?1 AND events.sections_of = n.old",
                "UPDATE events SET sections_of = NULL WHERE sections_of = id",
                "DELETE FROM event_sections WHERE event IN (SELECT id FROM events WHERE time_ns < ?1)",
                "DELETE FROM event_ksyms WHERE event IN (SELECT id FROM events WHERE time_ns < ?1)",
                "DELETE FROM events WHERE time_ns < ?1",
                "DELETE FROM ksyms WHERE unregistered_ns < ?1 AND id NOT IN (SELECT ksym FROM event_ksyms) "
                "AND id NOT IN (SELECT ksym FROM events)",
                "DELETE FROM module_sections WHERE module IN (SELECT id FROM modules WHERE unloaded_ns < ?1) "
                "AND id NOT IN (SELECT section FROM event_sections)",
                "DELETE FROM modules WHERE unloaded_ns < ?1 AND id NOT IN (SELECT module FROM module_sections) "
                "AND id NOT IN (SELECT module FROM events)",
        };
        int64_t before = before_ns > INT64_MAX ? INT64_MAX : i64(before_ns);

        for (size_t i = 0; i < ELEMENTSOF(sql); i++) {
                _cleanup_finalize_ sqlite3_stmt *st = NULL;
                int r;

                r = store_prepare(s, sql[i], &st);
                if (r < 0)
                        return r;
                sqlite3_bind_int64(st, 1, before);
                r = store_step_done(s, st);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- readers (answers in history.h; wire/history-json.c renders them) ---- */

/* *ret = a copy of the text column, NULL for SQL NULL. */
static int text_col(sqlite3_stmt *st, int col, char **ret) {
        const char *t = (const char *) sqlite3_column_text(st, col);

        *ret = NULL;
        if (!t)
                return 0;
        *ret = strdup(t);
        return *ret ? 0 : -ENOMEM;
}

/* A new zeroed element at the end of the array *v of *n (room for *alloc). */
static void *append_zeroed(void **v, size_t *n, size_t *alloc, size_t size) {
        void *p;

        if (array_reserve_one(v, alloc, *n, size) < 0)
                return NULL;
        p = (char *) *v + *n * size;
        (*n)++;
        return memset(p, 0, size);
}
#define APPEND(v, n, alloc) ((typeof(&(v)[0])) append_zeroed((void **) &(v), &(n), &(alloc), sizeof (v)[0]))

static int read_sections(store *s, history_module *m) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        size_t alloc = 0;
        int r, rc;

        r = store_prepare(s, "SELECT name, addr, len, pgoff, len_source, exec FROM module_sections "
                             "WHERE module = ?1 ORDER BY addr, id", &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, m->id);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                history_section *x = APPEND(m->sections, m->n_sections, alloc);

                if (!x)
                        return -ENOMEM;
                x->addr = u64(sqlite3_column_int64(st, 1));
                x->len = sqlite3_column_int64(st, 2);
                x->pgoff = sqlite3_column_int64(st, 3);
                x->exec = sqlite3_column_int(st, 5);
                r = text_col(st, 0, &x->name) ?: text_col(st, 4, &x->len_source);
                if (r < 0)
                        return r;
        }
        return rc == SQLITE_DONE ? 0 : store_step_errno(s, rc);
}

/* Appends one element to the answer from the statement's current row. */
typedef int (*list_row_fn)(store *s, sqlite3_stmt *st, history *h, size_t *alloc);

/* One element per row of sql (?1 bound to since_ns), at most max_rows
 * (0: no cap), h->truncated when the cap cut the list. */
static int list_rows(store *s, const char *sql, uint64_t since_ns, uint32_t max_rows, list_row_fn fill,
                     history *h) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        size_t alloc = 0;
        uint32_t n = 0;
        int r, rc;

        r = store_prepare(s, sql, &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, since_ns > INT64_MAX ? INT64_MAX : i64(since_ns));
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                if (max_rows > 0 && n >= max_rows) {
                        h->truncated = true;
                        return 0;
                }
                n++;
                r = fill(s, st, h, &alloc);
                if (r < 0)
                        return r;
        }
        return rc == SQLITE_DONE ? 0 : store_step_errno(s, rc);
}

static int fill_module(store *s, sqlite3_stmt *st, history *h, size_t *alloc) {
        history_module *m = APPEND(h->modules, h->n_modules, *alloc);
        int r;

        if (!m)
                return -ENOMEM;
        m->id = sqlite3_column_int64(st, 0);
        m->base = u64(sqlite3_column_int64(st, 4));
        m->size = sqlite3_column_int64(st, 5);
        m->loaded_ns = sqlite3_column_int64(st, 6);
        m->unloaded = sqlite3_column_type(st, 8) != SQLITE_NULL;
        m->unloaded_ns = sqlite3_column_int64(st, 8);
        r = text_col(st, 1, &m->name) ?: text_col(st, 2, &m->build_id) ?: text_col(st, 3, &m->file) ?:
            text_col(st, 7, &m->loaded_how) ?: text_col(st, 9, &m->unloaded_how) ?:
            text_col(st, 10, &m->boot_id) ?: text_col(st, 11, &m->release);
        if (r < 0)
                return r;
        return h->with_details ? read_sections(s, m) : 0;
}

int store_list_modules(store *s, uint64_t since_ns, bool with_sections, uint32_t max_rows, history *ret) {
        int r;

        if (!s || !ret)
                return -EINVAL;
        *ret = (history) { .with_details = with_sections };
        r = list_rows(s,
                "SELECT m.id, m.name, m.build_id, m.file, m.base, m.size, m.loaded_ns, m.loaded_how,"
                "       m.unloaded_ns, m.unloaded_how, b.boot_uuid, b.release"
                "  FROM modules m LEFT JOIN boots b ON b.id = m.boot"
                " WHERE m.unloaded_ns IS NULL OR m.unloaded_ns >= ?1"
                " ORDER BY m.loaded_ns, m.id",
                since_ns, max_rows, fill_module, ret);
        if (r < 0)
                history_done(ret);
        return r;
}

/* The dynamic symbols of an event, as PERF_RECORD_KSYMBOL-like records. */
static int read_ksym_records(store *s, history_event *e, size_t *alloc, uint32_t *budget) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int r, rc;

        r = store_prepare(s,
                "SELECT k.addr, k.len, k.name, k.type, k.prog_id"
                "  FROM event_ksyms e JOIN ksyms k ON k.id = e.ksym"
                " WHERE e.event = ?1 ORDER BY k.addr, k.id", &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, e->id);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                history_record *x = APPEND(e->records, e->n_listed, *alloc);

                if (!x)
                        return -ENOMEM;
                if (*budget > 0)
                        (*budget)--;
                x->kind = HISTORY_RECORD_KSYMBOL;
                x->addr = u64(sqlite3_column_int64(st, 0));
                x->len = sqlite3_column_int64(st, 1);
                x->has_prog_id = sqlite3_column_type(st, 4) != SQLITE_NULL;
                x->prog_id = sqlite3_column_int64(st, 4);
                r = text_col(st, 2, &x->name) ?: text_col(st, 3, &x->ksym_type);
                if (r < 0)
                        return r;
        }
        return rc == SQLITE_DONE ? 0 : store_step_errno(s, rc);
}

static int read_records(store *s, history_event *e, uint32_t *budget) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        size_t alloc = 0;
        int r, rc;

        r = store_prepare(s,
                "SELECT x.addr, x.len, x.pgoff, x.name, m.name, m.file, m.build_id, x.len_source, x.exec"
                "  FROM event_sections e JOIN module_sections x ON x.id = e.section"
                "  JOIN modules m ON m.id = x.module"
                " WHERE e.event = (SELECT coalesce(sections_of, id) FROM events WHERE id = ?1)"
                " ORDER BY x.addr, x.id", &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, e->id);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                history_record *x = APPEND(e->records, e->n_listed, alloc);

                if (!x)
                        return -ENOMEM;
                if (*budget > 0)
                        (*budget)--;
                x->kind = HISTORY_RECORD_SECTION;
                x->addr = u64(sqlite3_column_int64(st, 0));
                x->len = sqlite3_column_int64(st, 1);
                x->pgoff = sqlite3_column_int64(st, 2);
                x->exec = sqlite3_column_int(st, 8);
                r = text_col(st, 3, &x->name) ?: text_col(st, 4, &x->module) ?: text_col(st, 5, &x->filename) ?:
                    text_col(st, 6, &x->build_id) ?: text_col(st, 7, &x->len_source);
                if (r < 0)
                        return r;
        }
        if (rc != SQLITE_DONE)
                return store_step_errno(s, rc);
        return read_ksym_records(s, e, &alloc, budget);
}

int store_list_events(store *s, uint64_t since_ns, bool with_records, uint32_t max_events, uint32_t max_records,
                      history *ret) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        uint32_t n = 0, budget = max_records;
        size_t alloc = 0;
        int r, rc;

        if (!s || !ret)
                return -EINVAL;
        *ret = (history) { .with_details = with_records };
        r = store_prepare(s,
                "SELECT e.id, e.time_ns, e.kind, m.name, e.module, e.detail, b.build_id, b.text_addr, b.release,"
                "       b.boot_uuid, (SELECT count(*) FROM event_sections x WHERE x.event = coalesce(e.sections_of, e.id))"
                "       + (SELECT count(*) FROM event_ksyms x WHERE x.event = e.id), k.name, e.ksym, e.snapshot, sn.path"
                "  FROM events e LEFT JOIN boots b ON b.id = e.boot LEFT JOIN modules m ON m.id = e.module"
                "  LEFT JOIN ksyms k ON k.id = e.ksym LEFT JOIN snapshots sn ON sn.id = e.snapshot"
                " WHERE e.time_ns >= ?1 ORDER BY e.time_ns, e.id", &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, since_ns > INT64_MAX ? INT64_MAX : i64(since_ns));
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                history_event *e;

                if ((max_events > 0 && n >= max_events) || (with_records && max_records > 0 && budget == 0)) {
                        ret->truncated = true;
                        rc = SQLITE_DONE;
                        break;
                }
                e = APPEND(ret->events, ret->n_events, alloc);
                if (!e) {
                        r = -ENOMEM;
                        goto fail;
                }
                n++;
                e->id = sqlite3_column_int64(st, 0);
                e->time_ns = sqlite3_column_int64(st, 1);
                e->module_id = MAX(sqlite3_column_int64(st, 4), (int64_t) 0);
                e->kernel_text_addr = u64(sqlite3_column_int64(st, 7));
                e->n_records = sqlite3_column_int64(st, 10);
                e->ksym_id = MAX(sqlite3_column_int64(st, 12), (int64_t) 0);
                e->snapshot_id = MAX(sqlite3_column_int64(st, 13), (int64_t) 0);
                r = text_col(st, 2, &e->kind) ?: text_col(st, 3, &e->module) ?: text_col(st, 11, &e->ksym) ?:
                    text_col(st, 14, &e->snapshot) ?: text_col(st, 5, &e->detail) ?:
                    text_col(st, 6, &e->kernel_build_id) ?: text_col(st, 8, &e->kernel_release) ?:
                    text_col(st, 9, &e->kernel_boot_id);
                if (r >= 0 && with_records)
                        r = read_records(s, e, &budget);
                if (r < 0)
                        goto fail;
        }
        if (rc != SQLITE_DONE) {
                r = store_step_errno(s, rc);
                goto fail;
        }
        return 0;
fail:
        history_done(ret);
        return r;
}

static int fill_ksym(store *s, sqlite3_stmt *st, history *h, size_t *alloc) {
        history_ksym *k = APPEND(h->ksyms, h->n_ksyms, *alloc);

        if (!k)
                return -ENOMEM;
        k->id = sqlite3_column_int64(st, 0);
        k->addr = u64(sqlite3_column_int64(st, 2));
        k->len = sqlite3_column_int64(st, 3);
        k->has_prog_id = sqlite3_column_type(st, 5) != SQLITE_NULL;
        k->prog_id = sqlite3_column_int64(st, 5);
        k->registered_ns = sqlite3_column_int64(st, 6);
        k->unregistered = sqlite3_column_type(st, 8) != SQLITE_NULL;
        k->unregistered_ns = sqlite3_column_int64(st, 8);
        return text_col(st, 1, &k->name) ?: text_col(st, 4, &k->type) ?: text_col(st, 7, &k->registered_how) ?:
               text_col(st, 9, &k->unregistered_how) ?: text_col(st, 10, &k->boot_id);
}

int store_list_ksyms(store *s, uint64_t since_ns, uint32_t max_rows, history *ret) {
        int r;

        if (!s || !ret)
                return -EINVAL;
        *ret = (history) {};
        r = list_rows(s,
                "SELECT k.id, k.name, k.addr, k.len, k.type, k.prog_id, k.registered_ns, k.registered_how,"
                "       k.unregistered_ns, k.unregistered_how, b.boot_uuid"
                "  FROM ksyms k LEFT JOIN boots b ON b.id = k.boot"
                " WHERE k.unregistered_ns IS NULL OR k.unregistered_ns >= ?1"
                " ORDER BY k.registered_ns, k.id",
                since_ns, max_rows, fill_ksym, ret);
        if (r < 0)
                history_done(ret);
        return r;
}

/* ---- snapshots ---- */

static int get_snapshot_locked(store *s, const char *build_id, const char *name, int64_t *ret_id, uint64_t *ret_reuses) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int r, rc;

        r = store_prepare(s, "SELECT id, reuses FROM snapshots WHERE build_id = ?1 AND name = ?2", &st);
        if (r < 0)
                return r;
        r = bind_text_or_null(st, 1, build_id);
        if (r >= 0)
                r = bind_text_or_null(st, 2, name);
        if (r < 0)
                return r;
        rc = sqlite3_step(st);
        if (rc == SQLITE_DONE)
                return -ENOENT;
        if (rc != SQLITE_ROW)
                return store_step_errno(s, rc);
        if (ret_id)
                *ret_id = sqlite3_column_int64(st, 0);
        if (ret_reuses)
                *ret_reuses = u64(sqlite3_column_int64(st, 1));
        return 0;
}

int store_get_snapshot(store *s, const char *build_id, const char *name, int64_t *ret_id, uint64_t *ret_reuses) {
        if (!s || !build_id || !name)
                return -EINVAL;
        return get_snapshot_locked(s, build_id, name, ret_id, ret_reuses);
}

static int use_snapshot_locked(store *s, const store_snapshot *snap, bool reused, uint64_t now_ns, int64_t *ret_id) {
        _cleanup_finalize_ sqlite3_stmt *ins = NULL, *upd = NULL;
        int64_t id;
        int r;

        r = store_prepare(s, "INSERT OR IGNORE INTO snapshots(boot, build_id, name, path, time_ns, text_addr, modules,"
                             "  size, kcore, last_used_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)", &ins);
        if (r < 0)
                return r;
        sqlite3_bind_int64(ins, 1, snap->boot_id);
        r = bind_text_or_null(ins, 2, snap->build_id);
        if (r >= 0)
                r = bind_text_or_null(ins, 3, snap->name);
        if (r >= 0)
                r = bind_text_or_null(ins, 4, snap->path);
        if (r < 0)
                return r;
        sqlite3_bind_int64(ins, 5, i64(snap->time_ns));
        sqlite3_bind_int64(ins, 6, i64(snap->text_addr));
        sqlite3_bind_int64(ins, 7, i64(snap->n_modules));
        sqlite3_bind_int64(ins, 8, i64(snap->size_bytes));
        sqlite3_bind_int(ins, 9, snap->has_kcore);
        sqlite3_bind_int64(ins, 10, i64(now_ns));
        r = store_step_done(s, ins);
        if (r < 0)
                return r;
        r = get_snapshot_locked(s, snap->build_id, snap->name, &id, NULL);
        if (r < 0)
                return r;
        /* A name can come back after a prune only if the clock went back:
         * the directory is in the cache again either way. */
        r = store_prepare(s, "UPDATE snapshots SET reuses = reuses + ?2, last_used_ns = ?3, pruned_ns = NULL,"
                             "  path = ?4, size = ?5, kcore = ?6 WHERE id = ?1", &upd);
        if (r < 0)
                return r;
        sqlite3_bind_int64(upd, 1, id);
        sqlite3_bind_int(upd, 2, reused);
        sqlite3_bind_int64(upd, 3, i64(now_ns));
        r = bind_text_or_null(upd, 4, snap->path);
        if (r < 0)
                return r;
        sqlite3_bind_int64(upd, 5, i64(snap->size_bytes));
        sqlite3_bind_int(upd, 6, snap->has_kcore);
        r = store_step_done(s, upd);
        if (r < 0)
                return r;
        if (ret_id)
                *ret_id = id;
        return 0;
}

int store_use_snapshot(store *s, const store_snapshot *snap, bool reused, uint64_t now_ns, int64_t *ret_id) {
        bool owned;
        int r;

        if (!s || !snap || !snap->build_id || !snap->name || !snap->path)
                return -EINVAL;
        r = store_write_begin(s, &owned);
        if (r < 0)
                return r;
        return store_write_end(s, owned, use_snapshot_locked(s, snap, reused, now_ns, ret_id));
}

int store_prune_snapshot(store *s, const char *build_id, const char *name, uint64_t pruned_ns) {
        int64_t id;
        int r;

        if (!s || !build_id || !name)
                return -EINVAL;
        r = get_snapshot_locked(s, build_id, name, &id, NULL);
        if (r < 0)
                return r;
        return update_row(s, _STMT_MAX, "UPDATE snapshots SET pruned_ns = ?2 WHERE id = ?1", id, i64(pruned_ns), NULL);
}
