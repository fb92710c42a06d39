/* SPDX-License-Identifier: GPL-2.0-or-later */
/* store_query() (store.h): one pass over the sample blocks of a window,
 * aggregated in C by (comm, stack) or (comm, leaf frame), then names
 * resolved once per distinct stack and frame. */

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

/* ---- store_query ---- */

/* Decoded blocks a query keeps per dictionary (24 bytes a stack node, 56
 * a frame): a window with more distinct rows decodes some blocks twice,
 * in bounded memory. */
#define QUERY_DICT_BLOCK_BYTES (32u << 20)

/* Rows and stacks are aggregated by SQL into (comm, stack) -> count, one
 * pass over the matching samples; names are then resolved per distinct
 * stack and frame through small caches, not per sample. */

/* A stack's samples of a comm; or, when the query wants no stacks, a
 * leaf frame's (stack_id 0, frame_id set). */
typedef struct group {
        int64_t comm_id, stack_id, frame_id;
        uint64_t samples;
} group;

typedef struct node_info {
        int64_t parent, frame;
} node_info;

typedef struct frame_info {
        int kind;
        uint64_t addr, offset;
        int64_t symbol_id, module_id;
        char *folded;           /* name in folded stacks, made on first use */
} frame_info;

/* Key of a report row before names are resolved. A symbolized frame is
 * identified by its symbol whatever the offset; an unsymbolized one by its
 * address. */
typedef struct row_key {
        int64_t comm_id, kind, module_id, symbol_id;
        uint64_t addr;
} row_key;

typedef struct row_acc {
        row_key key;
        uint64_t samples;
} row_acc;

typedef struct query_ctx {
        store *s;
        sqlite3_stmt *string_st;
        dict_reader *nodes, *frame_rows;

        hashmap *frame_idx;     /* frame id -> index in frames */
        frame_info *frames;
        size_t n_frames, alloc_frames;

        hashmap *string_idx;    /* string id -> index in strings */
        char **strings;
        size_t n_strings, alloc_strings;
} query_ctx;

static void query_ctx_done(query_ctx *c) {
        dict_reader_free(c->nodes);
        dict_reader_free(c->frame_rows);
        sqlite3_finalize(c->string_st);
        hashmap_free(c->frame_idx);
        hashmap_free(c->string_idx);
        for (size_t i = 0; i < c->n_frames; i++)
                free(c->frames[i].folded);
        free(c->frames);
        for (size_t i = 0; i < c->n_strings; i++)
                free(c->strings[i]);
        free(c->strings);
}

static int query_ctx_init(query_ctx *c, store *s) {
        int r;

        *c = (query_ctx) { .s = s };

        r = dict_reader_new(s->db, DICT_STACKS, QUERY_DICT_BLOCK_BYTES, &c->nodes);
        if (r < 0)
                return r;
        r = dict_reader_new(s->db, DICT_FRAMES, QUERY_DICT_BLOCK_BYTES, &c->frame_rows);
        if (r < 0)
                return r;
        r = store_sql_prepare(s->db, "SELECT s FROM strings WHERE id = ?1", &c->string_st);
        if (r < 0)
                return r;
        r = hashmap_new(&c->frame_idx);
        if (r < 0)
                return r;
        return hashmap_new(&c->string_idx);
}

static int ctx_node(query_ctx *c, int64_t stack_id, node_info *ret) {
        int64_t v[2];
        node_info n;
        int r;

        r = dict_reader_get(c->nodes, stack_id, v);
        if (r < 0)
                return r;
        n = (node_info) { .parent = v[0], .frame = v[1] };
        /* Nodes are created after their parent, so a parent's id is always
         * smaller: this is what guarantees that walking up terminates,
         * whatever the file contains (the block decoder checks it too). */
        if (n.parent < 0 || n.parent >= stack_id)
                return -EBADMSG;
        *ret = n;
        return 0;
}

/* Returns an index into c->frames (stable; pointers are not). */
static int ctx_frame(query_ctx *c, int64_t frame_id, size_t *ret_idx) {
        int64_t idx, v[6];
        int r;

        if (hashmap_get_u64(c->frame_idx, u64(frame_id), &idx) >= 0) {
                *ret_idx = (size_t) idx;
                return 0;
        }

        r = array_reserve_one((void **) &c->frames, &c->alloc_frames, c->n_frames, sizeof(frame_info));
        if (r < 0)
                return r;

        /* kind, addr, symbol, offset, module, build_id */
        r = dict_reader_get(c->frame_rows, frame_id, v);
        if (r < 0)
                return r;
        c->frames[c->n_frames] = (frame_info) {
                .kind = (int) v[0],
                .addr = u64(v[1]),
                .offset = u64(v[3]),
                .symbol_id = v[2],
                .module_id = v[4],
        };

        r = hashmap_put_u64(c->frame_idx, u64(frame_id), (int64_t) c->n_frames);
        if (r < 0)
                return r;
        *ret_idx = c->n_frames++;
        return 0;
}

/* The string with this id, owned by the context; NULL for id 0. */
static int ctx_string(query_ctx *c, int64_t id, const char **ret) {
        const unsigned char *t;
        int64_t idx;
        char *copy = NULL;
        int r, rc;

        if (id == 0) {
                *ret = NULL;
                return 0;
        }
        if (hashmap_get_u64(c->string_idx, u64(id), &idx) >= 0) {
                *ret = c->strings[idx];
                return 0;
        }

        r = array_reserve_one((void **) &c->strings, &c->alloc_strings, c->n_strings, sizeof(char *));
        if (r < 0)
                return r;

        sqlite3_bind_int64(c->string_st, 1, id);
        rc = sqlite3_step(c->string_st);
        if (rc == SQLITE_ROW) {
                t = sqlite3_column_text(c->string_st, 0);
                copy = strdup(t ? (const char *) t : "");
                r = copy ? 0 : -ENOMEM;
        } else
                r = rc == SQLITE_DONE ? -EBADMSG : (store_sql_errno(c->s->db, rc) ?: -EIO);
        sqlite3_reset(c->string_st);
        if (r < 0)
                return r;

        r = hashmap_put_u64(c->string_idx, u64(id), (int64_t) c->n_strings);
        if (r < 0) {
                free(copy);
                return r;
        }
        c->strings[c->n_strings++] = copy;
        *ret = copy;
        return 0;
}

static int ctx_comm(query_ctx *c, int64_t comm_id, char **ret) {
        const char *comm;
        int r;

        r = ctx_string(c, comm_id, &comm);
        if (r < 0)
                return r;
        *ret = strdup(comm ?: "[unknown]");
        return *ret ? 0 : -ENOMEM;
}

/* The name of a frame in a folded stack; see store.h. */
static int ctx_folded(query_ctx *c, size_t fi, const char **ret) {
        frame_info *f = c->frames + fi;
        const char *symbol, *module;
        char *name;
        int r;

        if (f->folded) {
                *ret = f->folded;
                return 0;
        }

        r = ctx_string(c, f->symbol_id, &symbol);
        if (r < 0)
                return r;
        r = ctx_string(c, f->module_id, &module);
        if (r < 0)
                return r;
        f = c->frames + fi;

        if (symbol)
                name = strdup(symbol);
        else if (f->kind == FRAME_USER && module) {
                const char *base = strrchr(module, '/');
                base = base ? base + 1 : module;
                r = asprintf(&name, "[%s]+0x%" PRIx64, base, f->offset);
                if (r < 0)
                        name = NULL;
        } else {
                r = asprintf(&name, "0x%" PRIx64, f->addr);
                if (r < 0)
                        name = NULL;
        }
        if (!name)
                return -ENOMEM;

        f->folded = name;
        *ret = name;
        return 0;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(query_result *, query_result_free);

static int row_cmp_names(const query_row *a, const query_row *b) {
        int d = strcmp(a->comm, b->comm);
        if (d == 0)
                d = strcmp(a->module, b->module);
        if (d == 0)
                d = strcmp(a->symbol, b->symbol);
        return d;
}

static int row_cmp_by_name(const void *x, const void *y) {
        return row_cmp_names(x, y);
}

static int row_cmp_by_samples(const void *x, const void *y) {
        const query_row *a = x, *b = y;

        if (a->samples != b->samples)
                return a->samples > b->samples ? -1 : 1;
        return row_cmp_names(a, b);
}

static int group_cmp(const void *x, const void *y) {
        const group *a = x, *b = y;

        if (a->samples != b->samples)
                return a->samples > b->samples ? -1 : 1;
        if (a->comm_id != b->comm_id)
                return a->comm_id < b->comm_id ? -1 : 1;
        if (a->stack_id != b->stack_id)
                return a->stack_id < b->stack_id ? -1 : 1;
        if (a->frame_id != b->frame_id)
                return a->frame_id < b->frame_id ? -1 : 1;
        return 0;
}

static int stack_cmp(const void *x, const void *y) {
        const query_stack *a = x, *b = y;
        int d;

        if (a->samples != b->samples)
                return a->samples > b->samples ? -1 : 1;
        d = strcmp(a->comm, b->comm);
        if (d != 0)
                return d;
        for (size_t i = 0; i < a->n_frames && i < b->n_frames; i++) {
                d = strcmp(a->frames[i], b->frames[i]);
                if (d != 0)
                        return d;
        }
        return a->n_frames < b->n_frames ? -1 : a->n_frames > b->n_frames;
}

/* Filters shared by the statements of one query. Named parameters are
 * bound only where the clause is present. */
/* The filters of the lost records: they have no pid or comm, only a time
 * and a CPU. Named parameters are bound only where the clause has them. */
static void lost_where_clause(const query_params *q, char *buf, size_t size) {
        snprintf(buf, size, "time_ns >= :since%s%s",
                 q->until_ns > 0 ? " AND time_ns < :until" : "",
                 q->cpu >= 0 ? " AND cpu = :cpu" : "");
}

static void bind_named(sqlite3_stmt *st, const char *name, int64_t v) {
        int idx = sqlite3_bind_parameter_index(st, name);
        if (idx > 0)
                sqlite3_bind_int64(st, idx, v);
}

static void bind_lost_filters(sqlite3_stmt *st, const query_params *q) {
        bind_named(st, ":since", q->since_ns > INT64_MAX ? INT64_MAX : i64(q->since_ns));
        bind_named(st, ":until", q->until_ns > INT64_MAX ? INT64_MAX : i64(q->until_ns));
        bind_named(st, ":cpu", q->cpu);
}

static int query_lost(store *s, const query_params *q, query_result *res) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        char where[256], sql[512];
        int r, rc;

        lost_where_clause(q, where, sizeof(where));
        snprintf(sql, sizeof(sql), "SELECT coalesce(sum(count), 0) FROM lost WHERE %s", where);
        r = store_sql_prepare(s->db, sql, &st);
        if (r < 0)
                return r;
        bind_lost_filters(st, q);
        rc = sqlite3_step(st);
        if (rc != SQLITE_ROW)
                return store_sql_errno(s->db, rc) ?: -EIO;
        res->lost = u64(sqlite3_column_int64(st, 0));
        return 0;
}

/* One pass over the blocks of the window: totals, distinct CPUs and
 * (comm, stack) -> samples, filtered in C. */
typedef struct group_acc {
        const query_params *q;
        int64_t comm_id;
        hashmap *idx;           /* (comm, stack or leaf frame) -> index in v */
        group *v;
        size_t n, alloc;
        uint64_t total, first_ns, last_ns;
        uint64_t cpus[(STORE_MAX_CPU + 1) / 64];
} group_acc;

static int group_block(const scan_block *b, const block_entry *v, size_t n, void *userdata) {
        group_acc *g = userdata;
        const query_params *q = g->q;
        uint64_t matched = 0;
        int r;

        for (size_t i = 0; i < n; i++) {
                const block_entry *e = v + i;
                int64_t j;

                if ((q->pid >= 0 && e->pid != (uint64_t) q->pid) || (q->cpu >= 0 && e->cpu != (uint32_t) q->cpu) ||
                    (q->comm && e->comm_id != g->comm_id))
                        continue;
                matched += e->count;
                if (e->cpu <= STORE_MAX_CPU)
                        g->cpus[e->cpu / 64] |= UINT64_C(1) << (e->cpu % 64);

                /* Without stacks, entries that know their leaf frame group
                 * by it: fewer groups, and no stack to resolve. The top bit
                 * keeps frame keys apart from stack ids. */
                bool by_frame = !q->want_stacks && e->frame_id > 0;
                uint64_t k = by_frame ? (uint64_t) e->frame_id | (UINT64_C(1) << 63) : (uint64_t) e->stack_id;

                if (hashmap_get_pair(g->idx, (uint64_t) e->comm_id, k, &j) >= 0) {
                        g->v[j].samples += e->count;
                        continue;
                }
                r = array_reserve_one((void **) &g->v, &g->alloc, g->n, sizeof(group));
                if (r < 0)
                        return r;
                r = hashmap_put_pair(g->idx, (uint64_t) e->comm_id, k, (int64_t) g->n);
                if (r < 0)
                        return r;
                g->v[g->n++] = (group) {
                        .comm_id = e->comm_id,
                        .stack_id = by_frame ? 0 : e->stack_id,
                        .frame_id = e->frame_id,
                        .samples = e->count,
                };
        }
        if (matched > 0) {
                if (g->total == 0 || b->first_ns < g->first_ns)
                        g->first_ns = b->first_ns;
                g->last_ns = MAX(g->last_ns, b->last_ns);
                g->total += matched;
        }
        return 0;
}

static int query_groups(store *s, const query_params *q, int64_t comm_id, query_result *res, group **ret,
                        size_t *ret_n) {
        _cleanup_hashmap_ hashmap *idx = NULL;
        _cleanup_free_ group_acc *g = NULL;
        int r;

        g = calloc(1, sizeof *g);
        if (!g)
                return -ENOMEM;
        r = hashmap_new(&idx);
        if (r < 0)
                return r;
        g->q = q;
        g->comm_id = comm_id;
        g->idx = idx;

        /* A profile of functions for any pid reads the leaf levels; whole
         * stacks or one pid need the full ones. */
        r = sample_scan(s, q->since_ns, q->until_ns,
                        !q->want_stacks && q->pid < 0 ? SAMPLE_LEVEL_LEAF_HOUR : SAMPLE_LEVEL_HOUR, group_block, g);
        if (r < 0) {
                free(g->v);
                return r;
        }

        res->total_samples = g->total;
        res->first_ns = g->first_ns;
        res->last_ns = g->last_ns;
        res->n_cpus = 0;
        for (size_t i = 0; i < ELEMENTSOF(g->cpus); i++)
                res->n_cpus += (uint32_t) __builtin_popcountll(g->cpus[i]);
        *ret = g->v;
        *ret_n = g->n;
        return 0;
}

typedef struct order_item {
        int64_t key;
        size_t i;
} order_item;

static int order_cmp(const void *x, const void *y) {
        const order_item *a = x, *b = y;

        return a->key != b->key ? (a->key < b->key ? -1 : 1) : 0;
}

/* *ret[i]: the leaf frame of groups[i] (0: no frames); every frame is in
 * c->frames afterwards. */
static int resolve_leaf_frames(query_ctx *c, const group *groups, size_t n, int64_t **ret) {
        _cleanup_free_ int64_t *leaf = calloc(MAX(n, (size_t) 1), sizeof *leaf);
        _cleanup_free_ order_item *order = calloc(MAX(n, (size_t) 1), sizeof *order);
        size_t m = 0, fi;
        int r;

        if (!leaf || !order)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                leaf[i] = groups[i].frame_id;
                if (leaf[i] == 0 && groups[i].stack_id != 0)
                        order[m++] = (order_item) { groups[i].stack_id, i };
        }
        qsort(order, m, sizeof *order, order_cmp);
        for (size_t k = 0; k < m; k++) {
                node_info nd;

                r = ctx_node(c, order[k].key, &nd);
                if (r < 0)
                        return r;
                leaf[order[k].i] = nd.frame;
        }

        m = 0;
        for (size_t i = 0; i < n; i++)
                if (leaf[i] != 0)
                        order[m++] = (order_item) { leaf[i], i };
        qsort(order, m, sizeof *order, order_cmp);
        for (size_t k = 0; k < m; k++) {
                r = ctx_frame(c, order[k].key, &fi);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(leaf);
        return 0;
}

static int build_rows(query_ctx *c, const group *groups, size_t n_groups, size_t limit, query_result *res) {
        _cleanup_hashmap_ hashmap *idx = NULL;
        _cleanup_free_ int64_t *leaf = NULL;
        _cleanup_free_ row_acc *acc = NULL;
        _cleanup_free_ query_row *rows = NULL;
        size_t n_acc = 0, alloc_acc = 0, n_rows = 0;
        int r;

        r = hashmap_new(&idx);
        if (r < 0)
                return r;

        /* Leaf frames of the groups that lack one, looked up in stack id
         * order, then the frames in frame id order: each dictionary block
         * is decoded once however many groups it serves, and the reader
         * needs room for one block only. */
        r = resolve_leaf_frames(c, groups, n_groups, &leaf);
        if (r < 0)
                return r;

        for (size_t i = 0; i < n_groups; i++) {
                row_key key = { .comm_id = groups[i].comm_id };
                int64_t j;

                if (leaf[i] != 0) {
                        size_t fi;

                        r = ctx_frame(c, leaf[i], &fi);
                        if (r < 0)
                                return r;
                        key.kind = c->frames[fi].kind;
                        key.module_id = c->frames[fi].module_id;
                        key.symbol_id = c->frames[fi].symbol_id;
                        key.addr = key.symbol_id != 0 ? 0 : c->frames[fi].addr;
                }

                if (hashmap_get(idx, &key, sizeof(key), &j) >= 0) {
                        acc[j].samples += groups[i].samples;
                        continue;
                }
                r = array_reserve_one((void **) &acc, &alloc_acc, n_acc, sizeof(row_acc));
                if (r < 0)
                        return r;
                acc[n_acc] = (row_acc) { .key = key, .samples = groups[i].samples };
                r = hashmap_put(idx, &key, sizeof(key), (int64_t) n_acc);
                if (r < 0)
                        return r;
                n_acc++;
        }

        if (n_acc == 0)
                return 0;

        rows = calloc(n_acc, sizeof(query_row));
        if (!rows)
                return -ENOMEM;

        for (size_t i = 0; i < n_acc; i++) {
                const row_key *k = &acc[i].key;
                query_row *row = rows + n_rows;
                const char *module, *symbol;

                r = ctx_comm(c, k->comm_id, &row->comm);
                n_rows++;
                if (r < 0)
                        goto fail;
                r = ctx_string(c, k->module_id, &module);
                if (r < 0)
                        goto fail;
                r = ctx_string(c, k->symbol_id, &symbol);
                if (r < 0)
                        goto fail;

                row->module = strdup(module ?: "[unknown]");
                if (symbol)
                        row->symbol = strdup(symbol);
                else if (k->kind == 0)
                        row->symbol = strdup("[unknown]");      /* a sample without frames */
                else if (asprintf(&row->symbol, "0x%" PRIx64, k->addr) < 0)
                        row->symbol = NULL;
                row->kernel = k->kind == FRAME_KERNEL;
                row->samples = acc[i].samples;
                if (!row->module || !row->symbol) {
                        r = -ENOMEM;
                        goto fail;
                }
        }

        /* Different keys can still name the same row (e.g. a module path
         * that reads "[unknown]"): merge by name. */
        qsort(rows, n_rows, sizeof(query_row), row_cmp_by_name);
        size_t w = 0;
        for (size_t i = 0; i < n_rows; i++) {
                if (w > 0 && row_cmp_names(rows + w - 1, rows + i) == 0) {
                        rows[w - 1].samples += rows[i].samples;
                        query_rows_free(rows + i, 1);
                        continue;
                }
                rows[w++] = rows[i];
        }
        n_rows = w;

        qsort(rows, n_rows, sizeof(query_row), row_cmp_by_samples);
        if (limit > 0 && n_rows > limit) {
                query_rows_free(rows + limit, n_rows - limit);
                n_rows = limit;
        }

        res->rows = TAKE_PTR(rows);
        res->n_rows = n_rows;
        return 0;

fail:
        query_rows_free(rows, n_rows);
        return r;
}

/* Walks a stack from its leaf node up to the root. */
static int expand_stack(query_ctx *c, const group *g, query_stack *ret) {
        _cleanup_free_ int64_t *frame_ids = NULL;
        size_t n = 0, alloc = 0;
        query_stack st = { .samples = g->samples };
        int r;

        for (int64_t id = g->stack_id; id != 0;) {
                node_info node;

                r = ctx_node(c, id, &node);
                if (r < 0)
                        return r;
                r = array_reserve_one((void **) &frame_ids, &alloc, n, sizeof(int64_t));
                if (r < 0)
                        return r;
                frame_ids[n++] = node.frame;
                id = node.parent;
        }

        r = ctx_comm(c, g->comm_id, &st.comm);
        if (r < 0)
                return r;

        if (n > 0) {
                st.frames = calloc(n, sizeof(char *));
                if (!st.frames) {
                        query_stack_done(&st);
                        return -ENOMEM;
                }
        }

        /* frame_ids is leaf first; the result is outermost caller first. */
        for (size_t i = 0; i < n; i++) {
                const char *name;
                size_t fi;

                r = ctx_frame(c, frame_ids[n - 1 - i], &fi);
                if (r >= 0)
                        r = ctx_folded(c, fi, &name);
                if (r >= 0) {
                        st.frames[i] = strdup(name);
                        if (!st.frames[i])
                                r = -ENOMEM;
                }
                if (r < 0) {
                        query_stack_done(&st);
                        return r;
                }
                st.n_frames++;
        }

        *ret = st;
        return 0;
}

static int build_stacks(query_ctx *c, group *groups, size_t n_groups, size_t limit, query_result *res) {
        size_t n;
        int r;

        qsort(groups, n_groups, sizeof(group), group_cmp);
        n = limit > 0 ? MIN(limit, n_groups) : n_groups;
        if (n == 0)
                return 0;

        res->stacks = calloc(n, sizeof(query_stack));
        if (!res->stacks)
                return -ENOMEM;

        for (size_t i = 0; i < n; i++) {
                r = expand_stack(c, groups + i, res->stacks + i);
                if (r < 0)
                        return r;       /* the caller frees what is in res */
                res->n_stacks++;
        }

        qsort(res->stacks, res->n_stacks, sizeof(query_stack), stack_cmp);
        return 0;
}

static int query_locked(store *s, const query_params *q, uint32_t max_rows, uint32_t max_stacks, query_result *res) {
        _cleanup_(query_ctx_done) query_ctx c = {};
        _cleanup_free_ group *groups = NULL;
        size_t n_groups = 0, row_limit;
        int64_t comm_id = 0;
        int r;

        r = query_lost(s, q, res);
        if (r < 0)
                return r;

        if (q->comm) {
                _cleanup_finalize_ sqlite3_stmt *st = NULL;

                r = store_sql_prepare(s->db, "SELECT id FROM strings WHERE s = ?1", &st);
                if (r < 0)
                        return r;
                sqlite3_bind_text(st, 1, q->comm, -1, SQLITE_STATIC);
                r = store_step_id(s, st, &comm_id);
                if (r == -ENOENT)
                        return 0;       /* no sample ever had this comm */
                if (r < 0)
                        return r;
        }

        r = query_groups(s, q, comm_id, res, &groups, &n_groups);
        if (r < 0)
                return r;
        if (res->total_samples == 0)
                return 0;

        r = query_ctx_init(&c, s);
        if (r < 0)
                return r;

        /* q->top = 0 asks for all rows; max_rows = 0 means no server cap. */
        row_limit = q->top;
        if (max_rows > 0 && (row_limit == 0 || row_limit > max_rows))
                row_limit = max_rows;

        r = build_rows(&c, groups, n_groups, row_limit, res);
        if (r < 0)
                return r;

        if (q->want_stacks) {
                r = build_stacks(&c, groups, n_groups, max_stacks, res);
                if (r < 0)
                        return r;
        }
        return 0;
}

int store_query(store *s, const query_params *q, uint32_t max_rows, uint32_t max_stacks, query_result **ret) {
        _cleanup_(query_result_freep) query_result *res = NULL;
        bool owned;
        int r;

        if (!s || !q || !ret)
                return -EINVAL;
        if (q->until_ns > 0 && q->until_ns <= q->since_ns)
                return -EINVAL;

        res = calloc(1, sizeof(*res));
        if (!res)
                return -ENOMEM;

        r = store_read_begin(s, &owned);
        if (r < 0)
                return r;
        r = query_locked(s, q, max_rows, max_stacks, res);
        store_read_end(s, owned);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(res);
        return 0;
}
