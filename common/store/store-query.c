/* SPDX-License-Identifier: GPL-2.0-or-later */
/* store_query() (store.h): one pass over the sample blocks of a window,
 * aggregated in C by (comm, stack) or (comm, leaf frame), then names
 * resolved once per distinct stack and frame. */

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cgroup.h"
#include "elf/symstore.h"
#include "hashmap.h"
#include "macro.h"
#include "store/store-dict.h"
#include "store/store-private.h"
#include "store/store-samples.h"
#include "store/store.h"
#include "timeparse.h"

/* ---- store_query ---- */

/* The window's sample blocks are read and their entries grouped in C by
 * (comm, stack or leaf frame) (query_groups()); names are then resolved
 * per distinct row and stack, not per sample. Decoded dictionary blocks
 * are held to STORE_QUERY_DICT_BYTES per dictionary (24 bytes a stack
 * node, 56 a frame): a window with more distinct rows decodes some blocks
 * twice, in bounded memory. */

/* A stack's samples of a comm; or, when the query wants no stacks, a
 * leaf frame's. key: the stack id, or the leaf frame's id with the top
 * bit set. frame_id: the leaf frame when known (0: look it up from the
 * stack). */
typedef struct group {
        int64_t comm_id;
        int64_t cgroup_id;      /* with query_params.by_cgroup, else 0 */
        uint64_t key;
        int64_t frame_id;
        uint64_t samples;
        uint64_t split;         /* exports: pid << 32 | cpu << 16 | timeline slot (query_params.by_*) */
} group;

#define SPLIT_PID(x) ((int64_t) ((x) >> 32))
#define SPLIT_CPU(x) ((int32_t) (((x) >> 16) & 0xffff))
#define SPLIT_SLOT(x) ((int32_t) ((x) & 0xffff))
/* With by_tid (timeline of at most 128 slots): pid 22 bits (PID_MAX_LIMIT
 * is 2^22), tid 22, cpu 13 (NR_CPUS at most 8192), slot 7. */
#define TSPLIT(pid, tid, cpu, slot) \
        ((uint64_t) (pid) << 42 | (uint64_t) (tid) << 20 | (uint64_t) (cpu) << 7 | (uint64_t) (slot))
#define TSPLIT_PID(x) ((int64_t) ((x) >> 42))
#define TSPLIT_TID(x) ((int64_t) (((x) >> 20) & 0x3fffff))
#define TSPLIT_CPU(x) ((int32_t) (((x) >> 7) & 0x1fff))
#define TSPLIT_SLOT(x) ((int32_t) ((x) & 0x7f))

#define GROUP_BY_FRAME (UINT64_C(1) << 63)

static int64_t group_stack(const group *g) {
        return g->key & GROUP_BY_FRAME ? 0 : (int64_t) g->key;
}

typedef struct node_info {
        int64_t parent, frame;
} node_info;

typedef struct frame_info {
        int kind;
        uint64_t addr, offset;
        int64_t symbol_id, module_id;
        int64_t inline_id;      /* the chain of inlined functions (query_params.inlined), or 0 */
        int64_t inline_caller_id;       /* the same one byte before: for the frame as a return address */
        int64_t build_id_id;
        uint64_t sym_offset;    /* offset in its symbol, for a named frame */
        char *folded;           /* name in folded stacks, made on first use */
} frame_info;

/* Key of a report row before names are resolved. A symbolized frame is
 * identified by its symbol whatever the offset; an unsymbolized one by its
 * address. */
typedef struct row_key {
        int64_t comm_id, kind, module_id, symbol_id, inline_id;
        int64_t cgroup_id;      /* with query_params.by_cgroup, else 0 */
        uint64_t addr;
} row_key;

typedef struct row_acc {
        row_key key;
        uint64_t samples;
} row_acc;

typedef struct query_ctx {
        store *s;
        const query_params *q;
        int frame_kinds;        /* query_params.frames */
        bool inlined;           /* query_params.inlined */
        const char *dso;        /* query_params.dso */
        hashmap *dso_match;     /* module string id -> 1 if it is dso, 0 if not */
        hashmap *cgroup_match;  /* cgroup string id -> 1 if it passes the unit, cgroup and container filters */
        /* In front of it, direct-mapped by id: a window's cgroups are few,
         * its entries many. */
        struct cgroup_seen {
                int64_t id_plus_1;      /* 0: empty */
                bool in;
        } cgroup_seen[256];
        sqlite3_stmt *string_st;
        dict_reader *nodes, *frame_rows;

        hashmap *frame_idx;     /* frame id -> index in frames */
        frame_info *frames;
        size_t n_frames, alloc_frames;

        int64_t unknown_id;     /* of the string "[unknown]", 0 if there is none */

        hashmap *string_idx;    /* string id -> index in strings */
        char **strings;
        size_t n_strings, alloc_strings;

        /* User frames named from the function tables of their build-ids
         * (symstore.h), loaded once per query, at most
         * STORE_QUERY_SYMBOL_BYTES of them. A name found there has the id
         * -(1 + its index in unames). */
        const char *symbols_dir;        /* NULL: user frames stay unnamed */
        hashmap *tables_idx;    /* build-id string id -> index in tables, -1: none */
        elfsyms **tables;
        size_t n_tables, alloc_tables;
        uint64_t table_bytes;
        hashmap *uname_idx;     /* name -> index in unames */
        char **unames;
        size_t n_unames, alloc_unames;

        /* query_params.want_modules: module string id -> index in the
         * result's modules. */
        bool want_modules;
        hashmap *module_idx;
        query_module *modules;
        size_t n_modules, alloc_modules;
} query_ctx;

#define STORE_QUERY_SYMBOL_BYTES ((uint64_t) 64 * 1024 * 1024)

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
        hashmap_free(c->tables_idx);
        hashmap_free(c->dso_match);
        hashmap_free(c->cgroup_match);
        for (size_t i = 0; i < c->n_tables; i++)
                elfsyms_free(c->tables[i]);
        free(c->tables);
        hashmap_free(c->uname_idx);
        for (size_t i = 0; i < c->n_unames; i++)
                free(c->unames[i]);
        free(c->unames);
        hashmap_free(c->module_idx);
        for (size_t i = 0; i < c->n_modules; i++) {
                free(c->modules[i].name);
                free(c->modules[i].build_id);
        }
        free(c->modules);
}

static int query_ctx_init(query_ctx *c, store *s, const query_params *q) {
        int r;

        *c = (query_ctx) {
                .s = s,
                .q = q,
                .frame_kinds = q->frames,
                .inlined = q->inlined,
                .dso = q->dso,
                .symbols_dir = q->symbols_dir && q->symbols_dir[0] ? q->symbols_dir : NULL,
                .want_modules = q->want_stacks && q->want_modules,
        };

        r = dict_reader_new(s->db, DICT_STACKS, STORE_QUERY_DICT_BYTES, &c->nodes);
        if (r < 0)
                return r;
        r = dict_reader_new(s->db, DICT_FRAMES, STORE_QUERY_DICT_BYTES, &c->frame_rows);
        if (r < 0)
                return r;
        r = store_sql_prepare(s->db, "SELECT s FROM strings WHERE id = ?1", &c->string_st);
        if (r < 0)
                return r;
        r = hashmap_new(&c->frame_idx);
        if (r < 0)
                return r;
        r = hashmap_new(&c->string_idx);
        if (r < 0)
                return r;
        r = hashmap_new(&c->tables_idx);
        if (r < 0)
                return r;
        r = hashmap_new(&c->dso_match);
        if (r < 0)
                return r;
        r = hashmap_new(&c->cgroup_match);
        if (r < 0)
                return r;
        r = hashmap_new(&c->uname_idx);
        if (r < 0)
                return r;
        r = hashmap_new(&c->module_idx);
        if (r < 0)
                return r;

        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        r = store_sql_prepare(s->db, "SELECT id FROM strings WHERE s = '[unknown]'", &st);
        if (r < 0)
                return r;
        r = store_step_id(s, st, &c->unknown_id);
        return r == -ENOENT ? 0 : r;
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

static int ctx_user_symbol(query_ctx *c, int64_t build_id_id, uint64_t offset, int64_t *ret, int64_t *ret_inline,
                           int64_t *ret_inline_caller);
static int ctx_user_offset(query_ctx *c, int64_t build_id_id, uint64_t offset, uint64_t *ret);

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
        int64_t inline_id = 0, inline_caller_id = 0;
        /* Shapes have no names: no function table to load. */
        if (v[0] == FRAME_USER && v[2] == 0 && !c->q->shapes) {
                r = ctx_user_symbol(c, v[5], u64(v[3]), &v[2], &inline_id, &inline_caller_id);
                if (r < 0)
                        return r;
        }
        c->frames[c->n_frames] = (frame_info) {
                .kind = (int) v[0],
                .addr = u64(v[1]),
                .offset = u64(v[3]),
                .symbol_id = v[2],
                .module_id = v[4],
                .inline_id = inline_id,
                .inline_caller_id = inline_caller_id,
                .build_id_id = v[5],
                .sym_offset = v[0] == FRAME_USER ? 0 : u64(v[3]),
        };
        if (c->q->offsets && v[0] == FRAME_USER && v[2] != 0) {
                r = ctx_user_offset(c, v[5], u64(v[3]), &c->frames[c->n_frames].sym_offset);
                if (r < 0)
                        return r;
        }

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
        if (id < 0) {
                if ((uint64_t) -(id + 1) >= c->n_unames)
                        return -EBADMSG;
                *ret = c->unames[-(id + 1)];
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

/* The function table of a build-id (by its string id), or NULL: none kept,
 * unreadable, or the query's tables are at their bound. */
static int ctx_table(query_ctx *c, int64_t build_id_id, const elfsyms **ret) {
        const char *hex;
        elfsyms *t = NULL;
        int64_t idx;
        int r;

        *ret = NULL;
        if (hashmap_get_u64(c->tables_idx, u64(build_id_id), &idx) >= 0) {
                *ret = idx >= 0 ? c->tables[idx] : NULL;
                return 0;
        }
        r = ctx_string(c, build_id_id, &hex);
        if (r < 0)
                return r;
        idx = -1;
        if (hex && c->table_bytes < STORE_QUERY_SYMBOL_BYTES &&
            symstore_load(c->symbols_dir, hex, true, &t) >= 0) {
                r = array_reserve_one((void **) &c->tables, &c->alloc_tables, c->n_tables, sizeof(elfsyms *));
                if (r < 0) {
                        elfsyms_free(t);
                        return r;
                }
                c->table_bytes += (t->n + t->n_inl) * sizeof(elfsym) + t->strings_size;
                c->tables[c->n_tables] = t;
                idx = (int64_t) c->n_tables++;
                *ret = t;
        }
        return hashmap_put_u64(c->tables_idx, u64(build_id_id), idx);
}

/* The id of a name from a function table (see query_ctx). */
static int ctx_uname(query_ctx *c, const char *name, int64_t *ret) {
        int64_t idx;
        char *copy;
        int r;

        if (hashmap_get(c->uname_idx, name, strlen(name), &idx) < 0) {
                r = array_reserve_one((void **) &c->unames, &c->alloc_unames, c->n_unames, sizeof(char *));
                if (r < 0)
                        return r;
                copy = strdup(name);
                if (!copy)
                        return -ENOMEM;
                r = hashmap_put(c->uname_idx, copy, strlen(copy), (int64_t) c->n_unames);
                if (r < 0) {
                        free(copy);
                        return r;
                }
                idx = (int64_t) c->n_unames;
                c->unames[c->n_unames++] = copy;
        }
        *ret = -(idx + 1);
        return 0;
}

/* The entry of a user frame's file's function table that covers offset:
 * 1 and the table and entry, or 0 (no names, no table, no entry). */
static int ctx_user_entry(query_ctx *c, int64_t build_id_id, uint64_t offset, const elfsyms **ret_t,
                          const elfsym **ret_e) {
        int r;

        if (!c->symbols_dir || build_id_id <= 0)
                return 0;
        r = ctx_table(c, build_id_id, ret_t);
        if (r < 0 || !*ret_t)
                return r;
        *ret_e = elfsyms_lookup(*ret_t, offset);
        return *ret_e ? 1 : 0;
}

/* The offset of a user frame in the function of its file's table that
 * names it (0 if none does). */
static int ctx_user_offset(query_ctx *c, int64_t build_id_id, uint64_t offset, uint64_t *ret) {
        const elfsyms *t = NULL;
        const elfsym *e = NULL;
        int r;

        *ret = 0;
        r = ctx_user_entry(c, build_id_id, offset, &t, &e);
        if (r > 0 && offset >= e->offset)
                *ret = offset - e->offset;
        return r < 0 ? r : 0;
}

/* The symbol id of a user frame in a file with a build-id: a name from
 * its function table (a negative id, see query_ctx), or 0; and when the
 * query wants them, the ids of the chain of functions inlined at the
 * offset and at the byte before it (where the call is when the offset is
 * a return address: the instruction after an inlined call can be outside
 * the inlined code), or 0. ret_inline_caller may be NULL. */
static int ctx_user_symbol(query_ctx *c, int64_t build_id_id, uint64_t offset, int64_t *ret, int64_t *ret_inline,
                           int64_t *ret_inline_caller) {
        const elfsyms *t = NULL;
        const elfsym *e = NULL;
        const char *chain;
        int r;

        *ret = 0;
        *ret_inline = 0;
        if (ret_inline_caller)
                *ret_inline_caller = 0;
        r = ctx_user_entry(c, build_id_id, offset, &t, &e);
        if (r <= 0)
                return r;
        r = ctx_uname(c, elfsyms_name(t, e), ret);
        if (r < 0 || !c->inlined)
                return r;
        chain = elfsyms_inlined(t, offset);
        r = chain ? ctx_uname(c, chain, ret_inline) : 0;
        if (r < 0 || !ret_inline_caller || offset == 0)
                return r;
        chain = elfsyms_inlined(t, offset - 1);
        return chain ? ctx_uname(c, chain, ret_inline_caller) : 0;
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

/* The cgroup path of a string id, copied; "" for 0 (not known). */
static int ctx_cgroup(query_ctx *c, int64_t cgroup_id, char **ret) {
        const char *path = NULL;
        int r;

        r = cgroup_id ? ctx_string(c, cgroup_id, &path) : 0;
        if (r < 0)
                return r;
        *ret = strdup(path ?: "");
        return *ret ? 0 : -ENOMEM;
}

/* The index of id in the table v of n strings, its string made by get()
 * and added when it is not there (idx: id -> index). */
static int ctx_index(query_ctx *c, hashmap *idx, int64_t id, int (*get)(query_ctx *c, int64_t id, char **ret),
                     char ***v, size_t *n, size_t *alloc, int64_t *ret) {
        int r;

        if (hashmap_get_u64(idx, (uint64_t) id, ret) >= 0)
                return 0;
        r = array_reserve_one((void **) v, alloc, *n, sizeof(char *));
        if (r >= 0)
                r = get(c, id, &(*v)[*n]);
        if (r < 0)
                return r;
        *ret = (int64_t) (*n)++;
        return hashmap_put_u64(idx, (uint64_t) id, *ret);
}

static const char *file_base(const char *path) {
        const char *b = strrchr(path, '/');

        return b ? b + 1 : path;
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

        if (symbol && c->q->offsets) {
                r = asprintf(&name, "%s+0x%" PRIx64, symbol, f->sym_offset);
                if (r < 0)
                        name = NULL;
        } else if (symbol)
                name = strdup(symbol);
        else if (f->kind == FRAME_USER && module_is_file(module)) {
                r = asprintf(&name, "%s+0x%" PRIx64, file_base(module), f->offset);
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
        if (d == 0 && a->cgroup && b->cgroup)
                d = strcmp(a->cgroup, b->cgroup);
        return d;
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
        if (a->key != b->key)
                return a->key < b->key ? -1 : 1;
        if (a->split != b->split)
                return a->split < b->split ? -1 : 1;
        if (a->cgroup_id != b->cgroup_id)
                return a->cgroup_id < b->cgroup_id ? -1 : 1;
        return 0;
}

/* By comm and frame names (and the pid, CPU and slot of exports) only. */
static int stack_names_cmp(const void *x, const void *y) {
        const query_stack *a = x, *b = y;
        int d = strcmp(a->comm, b->comm);

        if (d == 0 && (a->cgroup || b->cgroup))
                d = strcmp(a->cgroup ?: "", b->cgroup ?: "");
        if (d == 0 && a->pid != b->pid)
                d = a->pid < b->pid ? -1 : 1;
        if (d == 0 && a->tid != b->tid)
                d = a->tid < b->tid ? -1 : 1;
        if (d == 0 && a->cpu != b->cpu)
                d = a->cpu < b->cpu ? -1 : 1;
        if (d == 0 && a->slot != b->slot)
                d = a->slot < b->slot ? -1 : 1;

        for (size_t i = 0; d == 0 && i < a->n_frames && i < b->n_frames; i++)
                d = strcmp(a->frames[i], b->frames[i]);
        if (d != 0)
                return d;
        if (a->n_frames != b->n_frames)
                return a->n_frames < b->n_frames ? -1 : 1;
        /* raw: other addresses are other stacks (the last key: the order
         * stays total). */
        if (!a->addrs != !b->addrs)
                return a->addrs ? 1 : -1;
        return a->addrs ? memcmp(a->addrs, b->addrs, a->n_frames * sizeof(uint64_t)) : 0;
}

static int stack_cmp(const void *x, const void *y) {
        const query_stack *a = x, *b = y;

        if (a->samples != b->samples)
                return a->samples > b->samples ? -1 : 1;
        return stack_names_cmp(a, b);
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

/* ---- grouping, in bounded memory ---- */

/* The groups of a window are counted in a table of at most
 * s->query_group_slots slots (48 bytes each), filled to 3/4. A window
 * with more distinct groups is counted in parts: 4, 16, 64... passes over
 * its blocks, each keeping the groups whose hash (or, for stacks, whose
 * range of stack ids) falls in its part, so the table never grows past
 * its bound however long the window. A query of rows only names a full
 * table's groups into its rows instead (group_put()), in one pass. */
#define QUERY_GROUP_MIN_SLOTS 16u
#define QUERY_SPLIT_MAX_PARTS 64u
#define QUERY_GROUP_FIRST_SLOTS 1024u

typedef struct group_table {
        group *slots;           /* samples == 0: empty */
        size_t capacity;        /* a power of two, at most max_capacity */
        size_t n, max_capacity;
} group_table;

static uint64_t group_hash(uint64_t comm_id, uint64_t key) {
        /* Multiply-xorshift mixing, so that low bits (the slot) and high
         * bits (the part) both depend on every bit of the key. */
        uint64_t h = (comm_id + 0x9e3779b97f4a7c15ULL) * 0xc2b2ae3d27d4eb4fULL ^ key;

        h ^= h >> 31;
        h *= 0x94d049bb133111ebULL;
        h ^= h >> 29;
        h *= 0x9e3779b97f4a7c15ULL;
        return h ^ (h >> 32);
}

static uint64_t group_hash_of(int64_t comm_id, int64_t cgroup_id, uint64_t key, uint64_t split) {
        return group_hash((uint64_t) comm_id ^ split * 0xff51afd7ed558ccdULL ^ (uint64_t) cgroup_id * 0xc4ceb9fe1a85ec53ULL,
                          key);
}

static group *group_slot(group_table *t, uint64_t h, int64_t comm_id, int64_t cgroup_id, uint64_t key,
                         uint64_t split) {
        size_t mask = t->capacity - 1;

        for (size_t j = h & mask;; j = (j + 1) & mask) {
                group *g = t->slots + j;

                if (g->samples == 0 ||
                    (g->key == key && g->comm_id == comm_id && g->split == split && g->cgroup_id == cgroup_id))
                        return g;
        }
}

/* Four times the slots (fewer rehashes of a growing table), up to the
 * bound: -E2BIG at the bound. */
static int group_table_grow(group_table *t) {
        group *old = t->slots;
        size_t n = t->capacity, m = MIN(n * 4, t->max_capacity);

        if (t->capacity >= t->max_capacity)
                return -E2BIG;
        t->slots = calloc(m, sizeof(group));
        if (!t->slots) {
                t->slots = old;
                return -ENOMEM;
        }
        t->capacity = m;
        for (size_t i = 0; i < n; i++)
                if (old[i].samples != 0)
                        *group_slot(t, group_hash_of(old[i].comm_id, old[i].cgroup_id, old[i].key, old[i].split),
                                    old[i].comm_id, old[i].cgroup_id, old[i].key, old[i].split) = old[i];
        free(old);
        return 0;
}

/* Moves the groups to the front of the slots, in slot order, and returns
 * how many there are; the table must be cleared before its next use. */
static size_t group_table_pack(group_table *t) {
        size_t n = 0;

        for (size_t i = 0; i < t->capacity; i++)
                if (t->slots[i].samples != 0)
                        t->slots[n++] = t->slots[i];
        return n;
}

static void group_table_clear(group_table *t) {
        if (t->n > 0)
                memset(t->slots, 0, t->capacity * sizeof(group));
        t->n = 0;
}

static int cgroup_matches_lookup(query_ctx *c, int64_t cgroup_id, bool *ret);

/* Whether a cgroup (a string id; 0: not known) passes the query's unit,
 * cgroup and container filters: from the direct-mapped answers, which
 * every entry of a window with such a filter asks, else looked up. */
static inline int ctx_cgroup_matches(query_ctx *c, int64_t cgroup_id, bool *ret) {
        const struct cgroup_seen *seen = &c->cgroup_seen[(uint64_t) cgroup_id % ELEMENTSOF(c->cgroup_seen)];

        if (seen->id_plus_1 == cgroup_id + 1) {
                *ret = seen->in;
                return 0;
        }
        return cgroup_matches_lookup(c, cgroup_id, ret);
}

/* One pass over the blocks of the window: totals, distinct CPUs and the
 * groups of part `part` of `parts`, filtered in C. */
typedef struct group_acc {
        const query_params *q;
        query_ctx *c;
        int64_t comm_id;
        group_table *t;
        uint64_t parts, part;   /* parts: a power of two */
        /* Parts of stack queries are ranges of stack ids, [lo, lo + span)
         * cut in parts: each part's stacks then sit in its own blocks of
         * the stack dictionary, which the merge of leaf offsets decodes
         * once in all, not once a part. Else parts are by hash. */
        bool by_range;
        uint64_t lo, span;
        uint64_t total, first_ns, last_ns;
        uint64_t cpus[(STORE_MAX_CPU + 1) / 64];
        uint64_t *timeline;     /* q->timeline slots, or NULL */
        uint64_t slot_ns;
        int64_t last_boot;      /* of the latest block with a matching sample */
        uint64_t last_boot_end;
        struct snap_acc *snaps; /* raw: counted in the first part's pass */
        struct class_acc *cls;  /* stacks by name: where a full table goes */
        /* Rows only (no stacks): where a full table goes, named
         * (rows_add()), so that the window is read once. */
        struct row_set *rows;
} group_acc;

/* raw: samples per snapshot link, and of them those whose leaf is in a
 * kernel module. */
typedef struct snap_acc {
        query_ctx *c;
        hashmap *idx, *module_leaf;     /* snapshot id -> index in v; frame id -> leaf in a module */
        struct snap_count {
                int64_t id;
                uint64_t samples, module_samples;
        } *v;
        size_t n, alloc;
        int64_t kernel_module_id;       /* the string "[kernel.kallsyms]" */
} snap_acc;

static void snap_acc_done(snap_acc *a) {
        hashmap_free(a->idx);
        hashmap_free(a->module_leaf);
        free(a->v);
}

/* raw: counts e's samples for its snapshot. */
static int count_snapshot(snap_acc *g, const block_entry *e) {
        int64_t idx, is_module = 0, v[6];
        int r;

        if (e->snapshot_id <= 0)
                return 0;
        if (hashmap_get_u64(g->idx, u64(e->snapshot_id), &idx) < 0) {
                r = array_reserve_one((void **) &g->v, &g->alloc, g->n, sizeof(*g->v));
                if (r < 0)
                        return r;
                g->v[g->n] = (struct snap_count) { .id = e->snapshot_id };
                idx = (int64_t) g->n++;
                r = hashmap_put_u64(g->idx, u64(e->snapshot_id), idx);
                if (r < 0)
                        return r;
        }
        g->v[idx].samples += e->count;
        if (e->frame_id <= 0)
                return 0;
        if (hashmap_get_u64(g->module_leaf, u64(e->frame_id), &is_module) < 0) {
                /* kind, addr, symbol, offset, module, build_id */
                r = dict_reader_get(g->c->frame_rows, e->frame_id, v);
                if (r < 0)
                        return r;
                is_module = v[0] == FRAME_KERNEL && v[4] != 0 && v[4] != g->kernel_module_id;
                r = hashmap_put_u64(g->module_leaf, u64(e->frame_id), is_module);
                if (r < 0)
                        return r;
        }
        if (is_module)
                g->v[idx].module_samples += e->count;
        return 0;
}

/* The timeline slot of a block: by its first sample, in the window. */
static uint32_t block_slot(const group_acc *g, const scan_block *b) {
        const query_params *q = g->q;
        uint64_t t = MAX(b->first_ns, q->since_ns), i;

        if (q->timeline == 0 || g->slot_ns == 0)
                return 0;
        i = (t - q->since_ns) / g->slot_ns;
        return (uint32_t) MIN(i, (uint64_t) q->timeline - 1);
}

/* Whether a block entry passes the query's filters of pid, CPU, comm and
 * kind (the cgroup filters, which need the context, aside). */
static bool entry_passes(const query_params *q, int64_t comm_id, const block_entry *e) {
        return (q->pid < 0 || e->pid == (uint64_t) q->pid) && (q->cpu < 0 || e->cpu == (uint32_t) q->cpu) &&
               (!q->comm || e->comm_id == comm_id) && e->count != 0 && e->kind == q->kind;
}

/* The part of stack id k, by range. */
static uint64_t range_part(const group_acc *g, uint64_t k) {
        if (k <= g->lo)
                return 0;
        if (g->span == 0 || k - g->lo >= g->span)
                return g->parts - 1;
        return (uint64_t) ((unsigned __int128) (k - g->lo) * g->parts / g->span);
}

/* The stack ids of the window's entries that pass the query's filters of
 * pid, CPU, comm and kind: their least and greatest, for parts by range. */
#define RANGE_HLL_BITS 12

typedef struct id_range {
        const query_params *q;
        int64_t comm_id;
        uint64_t lo, hi;
        /* A HyperLogLog of (comm, stack): about how many groups, to the
         * 1.6 %, so that the parts are as many as they need at once. */
        uint8_t hll[1u << RANGE_HLL_BITS];
} id_range;

static double range_groups(const id_range *a) {
        const double m = 1u << RANGE_HLL_BITS;
        double sum = 0, e;
        unsigned zeros = 0;

        for (size_t i = 0; i < (1u << RANGE_HLL_BITS); i++) {
                sum += ldexp(1.0, -(int) a->hll[i]);
                zeros += a->hll[i] == 0;
        }
        e = 0.7213 / (1 + 1.079 / m) * m * m / sum;
        /* Few: linear counting. */
        if (e <= 2.5 * m && zeros > 0)
                e = m * log(m / zeros);
        return e;
}

/* -ETIME past the query's deadline (query_params.deadline_ns). Checked
 * once a block and once a part, and every 64 Ki stacks of a merge: a
 * query stops within about a block's or a part's work of it. */
static int check_deadline(const query_params *q) {
        return q->deadline_ns != 0 && clock_ns(CLOCK_MONOTONIC) >= q->deadline_ns ? -ETIME : 0;
}

static int range_block(const scan_block *b, const block_entry *v, size_t n, void *userdata) {
        id_range *a = userdata;
        const query_params *q = a->q;
        int r = check_deadline(q);

        if (r < 0)
                return r;

        for (size_t i = 0; i < n; i++) {
                const block_entry *e = v + i;

                if (!entry_passes(q, a->comm_id, e))
                        continue;
                a->lo = MIN(a->lo, (uint64_t) e->stack_id);
                a->hi = MAX(a->hi, (uint64_t) e->stack_id);

                uint64_t h = group_hash((uint64_t) (q->no_comm ? 0 : e->comm_id), (uint64_t) e->stack_id);
                uint64_t w = h << RANGE_HLL_BITS;
                uint8_t rho = w == 0 ? 64 - RANGE_HLL_BITS + 1 : (uint8_t) (__builtin_clzll(w) + 1);
                uint8_t *reg = a->hll + (h >> (64 - RANGE_HLL_BITS));

                if (rho > *reg)
                        *reg = rho;
        }
        return 0;
}

/* Adds w samples to group (cid, cg, k, split), whose group_hash_of() is h. */
static int group_add(group_table *t, const group *x, uint64_t h) {
        group *s = group_slot(t, h, x->comm_id, x->cgroup_id, x->key, x->split);
        int r;

        if (s->samples != 0) {
                s->samples += x->samples;
                if (s->frame_id == 0)
                        s->frame_id = x->frame_id;
                return 0;
        }
        if (t->n + 1 > t->capacity / 4 * 3) {
                r = group_table_grow(t);
                if (r < 0)
                        return r;       /* -E2BIG: more parts */
                s = group_slot(t, h, x->comm_id, x->cgroup_id, x->key, x->split);
        }
        *s = *x;
        t->n++;
        return 0;
}

static int class_flush(struct class_acc *a);
static int rows_add(query_ctx *c, struct row_set *rs, const group *groups, size_t n_groups);

/* group_add() into the window's table; with stacks by name, a full table
 * is moved to the classes first, and for rows only, to the rows: a group
 * counted in two goes is two additions to its row. */
static int group_put(group_acc *g, const group *x, uint64_t h) {
        int r = group_add(g->t, x, h);

        if (r == -E2BIG && (g->cls || g->rows)) {
                if (g->cls)
                        r = class_flush(g->cls);
                else {
                        r = rows_add(g->c, g->rows, g->t->slots, group_table_pack(g->t));
                        group_table_clear(g->t);
                }
                if (r >= 0)
                        r = group_add(g->t, x, h);
        }
        return r;
}

/* Entries wait this many places before they are added: their slot in the
 * table is fetched from memory meanwhile (a window's table is larger than
 * the caches, and adding is mostly waiting for them). */
#define GROUP_AHEAD 8

/* The columns of the window's entries group_block() reads. */
static unsigned group_needs(const group_acc *g) {
        const query_params *q = g->q;
        unsigned need = 0;

        if (q->pid >= 0 || (q->want_stacks && q->by_pid))
                need |= SAMPLE_NEED_PID;
        if (q->want_stacks && q->by_tid)
                need |= SAMPLE_NEED_TID;
        if (g->snaps)
                need |= SAMPLE_NEED_SNAPSHOT;
        /* Without stacks, an entry that has a leaf frame groups by it. */
        if (q->want_stacks || q->frames != QUERY_FRAMES_ALL)
                need |= SAMPLE_NEED_STACK;
        if (q->kind == SAMPLE_KIND_OFFCPU)
                need |= SAMPLE_NEED_PERIOD;
        return need;
}

static int group_block(const scan_block *b, const block_entry *v, size_t n, void *userdata) {
        group_acc *g = userdata;
        const query_params *q = g->q;
        group_table *t = g->t;
        uint64_t matched = 0, split_base = q->timeline > 0 && q->want_stacks ? block_slot(g, b) : 0;
        group ahead[GROUP_AHEAD];
        uint64_t ahead_h[GROUP_AHEAD];
        size_t head = 0, waiting = 0;
        int r;

        r = check_deadline(q);
        if (r < 0)
                return r;

        for (size_t i = 0; i < n; i++) {
                const block_entry *e = v + i;
                uint64_t split = split_base;

                if (!entry_passes(q, g->comm_id, e))
                        continue;
                /* Off-CPU entries weigh their nanoseconds. */
                uint64_t w = q->kind == SAMPLE_KIND_OFFCPU ? e->period : e->count;
                if (w == 0)
                        continue;
                if (q->unit || q->cgroup || q->container) {
                        bool in;

                        r = ctx_cgroup_matches(g->c, e->cgroup_id, &in);
                        if (r < 0)
                                return r;
                        if (!in)
                                continue;
                }
                matched += w;
                if (g->snaps && g->part == 0) {
                        r = count_snapshot(g->snaps, e);
                        if (r < 0)
                                return r;
                }
                if (e->cpu <= STORE_MAX_CPU)
                        g->cpus[e->cpu / 64] |= UINT64_C(1) << (e->cpu % 64);

                /* Without stacks, entries that know their leaf frame group
                 * by it: fewer groups, and no stack to resolve. The top bit
                 * keeps frame keys apart from stack ids. */
                bool by_frame = !q->want_stacks && q->frames == QUERY_FRAMES_ALL && e->frame_id > 0;
                uint64_t k = by_frame ? (uint64_t) e->frame_id | GROUP_BY_FRAME : (uint64_t) e->stack_id;
                /* With frames of one kind, the leaf is found from the stack. */
                int64_t leaf = q->frames == QUERY_FRAMES_ALL ? e->frame_id : 0;
                if (q->want_stacks && q->by_tid)
                        split = TSPLIT(e->pid & 0x3fffff, (e->tid ? e->tid : e->pid) & 0x3fffff, e->cpu & 0x1fff,
                                       split_base & 0x7f);
                else {
                        if (q->want_stacks && q->by_pid)
                                split |= (uint64_t) (uint32_t) e->pid << 32;
                        if (q->want_stacks && q->by_cpu)
                                split |= (uint64_t) (e->cpu & 0xffff) << 16;
                }
                int64_t cg = q->by_cgroup ? e->cgroup_id : 0, cid = q->no_comm ? 0 : e->comm_id;
                uint64_t h = group_hash_of(cid, cg, k, split);

                /* The part from the range or the hash's high bits, the
                 * slot from the hash's low bits. */
                if ((g->by_range ? range_part(g, k) : (h >> 40) & (g->parts - 1)) != g->part)
                        continue;
                /* The oldest waiting entry is added, in order, and this
                 * one waits in its place. */
                if (waiting == GROUP_AHEAD) {
                        r = group_put(g, ahead + head, ahead_h[head]);
                        if (r < 0)
                                return r;
                } else
                        waiting++;
                ahead[head] = (group) {
                        .comm_id = cid,
                        .cgroup_id = cg,
                        .key = k,
                        .frame_id = leaf,
                        .samples = w,
                        .split = split,
                };
                ahead_h[head] = h;
                __builtin_prefetch(t->slots + (h & (t->capacity - 1)));
                head = (head + 1) % GROUP_AHEAD;
        }
        for (size_t i = 0; i < waiting; i++) {
                size_t j = (head + GROUP_AHEAD - waiting + i) % GROUP_AHEAD;

                r = group_put(g, ahead + j, ahead_h[j]);
                if (r < 0)
                        return r;
        }
        if (matched > 0) {
                if (g->total == 0 || b->first_ns < g->first_ns)
                        g->first_ns = b->first_ns;
                g->last_ns = MAX(g->last_ns, b->last_ns);
                g->total += matched;
                if (g->timeline)
                        g->timeline[block_slot(g, b)] += matched;
                if (b->end_ns >= g->last_boot_end) {
                        g->last_boot_end = b->end_ns;
                        g->last_boot = b->boot_id;
                }
        }
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

/* Sorts v by key (ids: not negative), stably, by its bytes from the
 * lowest: as many passes as the greatest key has bytes. Without memory
 * for the copy, qsort(). */
static void sort_by_id(order_item *v, size_t n) {
        _cleanup_free_ order_item *tmp = NULL;
        uint64_t max = 0;
        order_item *from = v, *to;

        for (size_t i = 0; i < n; i++) {
                if (v[i].key < 0) {
                        qsort(v, n, sizeof *v, order_cmp);
                        return;
                }
                max = MAX(max, (uint64_t) v[i].key);
        }
        if (n < 256 || !(tmp = malloc(n * sizeof *tmp))) {
                qsort(v, n, sizeof *v, order_cmp);
                return;
        }
        to = tmp;
        for (unsigned shift = 0; shift < 64 && (max >> shift) != 0; shift += 8) {
                size_t count[257] = {};

                for (size_t i = 0; i < n; i++)
                        count[(((uint64_t) from[i].key >> shift) & 0xff) + 1]++;
                for (size_t b = 1; b <= 256; b++)
                        count[b] += count[b - 1];
                for (size_t i = 0; i < n; i++)
                        to[count[((uint64_t) from[i].key >> shift) & 0xff]++] = from[i];
                SWAP(from, to);
        }
        if (from != v)
                memcpy(v, from, n * sizeof *v);
}

/* The report's rows, summed over the groups of every part. */
typedef struct row_set {
        row_acc *slots;         /* samples == 0: empty; rows_finish() packs them */
        size_t capacity;        /* 0 or a power of two */
        size_t n;
} row_set;

static void row_set_done(row_set *rs) {
        free(rs->slots);
}

static void row_set_clear(row_set *rs) {
        if (rs->slots)
                memset(rs->slots, 0, rs->capacity * sizeof(row_acc));
        rs->n = 0;
}

static row_acc *row_slot(row_set *rs, const row_key *k) {
        size_t mask = rs->capacity - 1;
        uint64_t h = group_hash((uint64_t) k->comm_id ^ (uint64_t) k->kind << 56,
                                group_hash((uint64_t) k->module_id, (uint64_t) k->symbol_id) ^ k->addr ^
                                        (uint64_t) k->inline_id * 0x9e3779b97f4a7c15u ^
                                        (uint64_t) k->cgroup_id * 0xc4ceb9fe1a85ec53u);

        for (size_t j = h & mask;; j = (j + 1) & mask) {
                row_acc *a = rs->slots + j;

                if (a->samples == 0 || memcmp(&a->key, k, sizeof *k) == 0)
                        return a;
        }
}

/* Adds samples to the row of k. */
static int row_set_add(row_set *rs, const row_key *k, uint64_t samples) {
        row_acc *a;

        if (rs->n + 1 > rs->capacity / 4 * 3) {
                row_acc *old = rs->slots;
                size_t n = rs->capacity;

                rs->slots = calloc(MAX(n * 4, (size_t) 1024), sizeof(row_acc));
                if (!rs->slots) {
                        rs->slots = old;
                        return -ENOMEM;
                }
                rs->capacity = MAX(n * 4, (size_t) 1024);
                for (size_t i = 0; i < n; i++)
                        if (old[i].samples != 0)
                                *row_slot(rs, &old[i].key) = old[i];
                free(old);
        }
        a = row_slot(rs, k);
        if (a->samples == 0) {
                a->key = *k;
                rs->n++;
        }
        a->samples += samples;
        return 0;
}

/* ctx_cgroup_matches() for a cgroup not in its direct-mapped answers:
 * from the memo of all, or worked out; either way put in its slot. */
static int cgroup_matches_lookup(query_ctx *c, int64_t cgroup_id, bool *ret) {
        struct cgroup_seen *seen = &c->cgroup_seen[(uint64_t) cgroup_id % ELEMENTSOF(c->cgroup_seen)];
        const query_params *q = c->q;
        const char *path = NULL;
        int64_t v;
        int r;

        if (hashmap_get_u64(c->cgroup_match, u64(cgroup_id), &v) >= 0) {
                *seen = (struct cgroup_seen) { cgroup_id + 1, v };
                *ret = v;
                return 0;
        }
        if (cgroup_id != 0) {
                r = ctx_string(c, cgroup_id, &path);
                if (r < 0)
                        return r;
        }
        *ret = path && (!q->cgroup || cgroup_path_under(path, q->cgroup)) &&
               (!q->unit || cgroup_unit_matches(path, q->unit)) &&
               (!q->container || cgroup_container_matches(path, q->container));
        *seen = (struct cgroup_seen) { cgroup_id + 1, *ret };
        return hashmap_put_u64(c->cgroup_match, u64(cgroup_id), *ret);
}

/* Whether a frame counts for the query (query_params.frames). */
static int ctx_frame_counts(query_ctx *c, int64_t frame_id, bool *ret) {
        size_t fi;
        int r;

        if (c->frame_kinds == QUERY_FRAMES_ALL) {
                *ret = true;
                return 0;
        }
        r = ctx_frame(c, frame_id, &fi);
        if (r < 0)
                return r;
        *ret = c->frames[fi].kind == (c->frame_kinds == QUERY_FRAMES_KERNEL ? FRAME_KERNEL : FRAME_USER);
        return 0;
}

/* Whether a module (by string id) is the query's dso: its path, the
 * path's last component, or "[NAME]" for NAME. True for any without a dso. */
static int ctx_module_matches(query_ctx *c, int64_t module_id, bool *ret) {
        const char *m;
        int64_t v;
        int r;

        if (!c->dso) {
                *ret = true;
                return 0;
        }
        if (hashmap_get_u64(c->dso_match, u64(module_id), &v) >= 0) {
                *ret = v != 0;
                return 0;
        }
        r = ctx_string(c, module_id, &m);
        if (r < 0)
                return r;
        *ret = false;
        if (m) {
                size_t n = strlen(m), d = strlen(c->dso);

                *ret = streq(m, c->dso) || streq(file_base(m), c->dso) ||
                       (n == d + 2 && m[0] == '[' && m[n - 1] == ']' && strncmp(m + 1, c->dso, d) == 0);
        }
        return hashmap_put_u64(c->dso_match, u64(module_id), *ret);
}

/* The leaf frame of a stack: its innermost frame that counts for the
 * query; 0 if none does. */
static int ctx_leaf(query_ctx *c, int64_t stack_id, int64_t *ret) {
        for (int64_t id = stack_id; id != 0;) {
                node_info nd;
                bool counts;
                int r;

                r = ctx_node(c, id, &nd);
                if (r < 0)
                        return r;
                r = ctx_frame_counts(c, nd.frame, &counts);
                if (r < 0)
                        return r;
                if (counts) {
                        *ret = nd.frame;
                        return 0;
                }
                id = nd.parent;
        }
        *ret = 0;
        return 0;
}

/* Adds the groups' samples to the rows of their leaf frames. Leaf frames
 * of the groups that lack one are looked up in stack id order, then the
 * frames in frame id order, each once: every dictionary block is decoded
 * once however many groups it serves, the reader needs room for one block
 * only, and nothing is kept per frame. */
static int rows_add(query_ctx *c, row_set *rs, const group *groups, size_t n_groups) {
        _cleanup_free_ order_item *order = calloc(MAX(n_groups, (size_t) 1), sizeof *order);
        size_t m = 0;
        int r;

        if (!order)
                return -ENOMEM;
        /* First the stacks to look up, then the frames. */
        for (size_t i = 0; i < n_groups; i++)
                if (groups[i].frame_id == 0 && group_stack(groups + i) != 0)
                        order[m++] = (order_item) { group_stack(groups + i), i };
        sort_by_id(order, m);
        {
                _cleanup_free_ int64_t *leaf = calloc(MAX(n_groups, (size_t) 1), sizeof *leaf);

                if (!leaf)
                        return -ENOMEM;
                for (size_t i = 0; i < n_groups; i++)
                        leaf[i] = groups[i].frame_id;
                for (size_t k = 0; k < m; k++) {
                        r = ctx_leaf(c, order[k].key, &leaf[order[k].i]);
                        if (r < 0)
                                return r;
                }
                for (size_t i = 0; i < n_groups; i++)
                        order[i] = (order_item) { leaf[i], i };
        }
        sort_by_id(order, n_groups);

        row_key key = {};
        for (size_t k = 0; k < n_groups; k++) {
                const group *g = groups + order[k].i;

                if (k == 0 || order[k].key != order[k - 1].key) {
                        key = (row_key) {};
                        if (order[k].key != 0) {
                                /* kind, addr, symbol, offset, module, build_id */
                                int64_t v[6];

                                r = dict_reader_get(c->frame_rows, order[k].key, v);
                                if (r < 0)
                                        return r;
                                key.kind = v[0];
                                key.symbol_id = v[2];
                                key.module_id = v[4];
                                if (key.kind == FRAME_USER && key.symbol_id == 0) {
                                        r = ctx_user_symbol(c, v[5], u64(v[3]), &key.symbol_id, &key.inline_id, NULL);
                                        if (r < 0)
                                                return r;
                                }
                                key.addr = key.symbol_id != 0 ? 0 : u64(v[1]);
                                /* --offsets: one row per offset in the symbol. */
                                if (c->q->offsets && key.symbol_id != 0) {
                                        key.addr = key.kind == FRAME_USER ? 0 : u64(v[3]);
                                        if (key.kind == FRAME_USER) {
                                                r = ctx_user_offset(c, v[5], u64(v[3]), &key.addr);
                                                if (r < 0)
                                                        return r;
                                        }
                                }
                                /* A user frame in a file: by its offset in it. */
                                if (key.kind == FRAME_USER && key.symbol_id == 0) {
                                        const char *mod;

                                        r = ctx_string(c, key.module_id, &mod);
                                        if (r < 0)
                                                return r;
                                        if (module_is_file(mod))
                                                key.addr = u64(v[3]);
                                }
                        }
                        /* Names that read "[unknown]" are one string. */
                        if (key.module_id == 0)
                                key.module_id = c->unknown_id;
                        if (key.kind == 0)
                                key.symbol_id = c->unknown_id;
                }
                key.comm_id = g->comm_id != 0 ? g->comm_id : c->unknown_id;
                key.cgroup_id = g->cgroup_id;
                if (c->dso) {
                        bool match;

                        r = ctx_module_matches(c, key.kind != 0 ? key.module_id : 0, &match);
                        if (r < 0)
                                return r;
                        if (!match)
                                continue;
                }

                r = row_set_add(rs, &key, g->samples);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Most samples first; ties in the order of their keys' bytes, so that
 * the first row of a cgroup is the same however the rows were counted. */
static int row_acc_cmp(const void *x, const void *y) {
        const row_acc *a = x, *b = y;

        if (a->samples != b->samples)
                return a->samples > b->samples ? -1 : 1;
        return memcmp(&a->key, &b->key, sizeof a->key);
}

/* The names of the row of a, with its cgroup's path if with_cgroup; a
 * row half made holds what it has (query_rows_free()). */
static int row_make(query_ctx *c, const row_acc *a, bool with_cgroup, query_row *row) {
        const row_key *k = &a->key;
        const char *module, *symbol;
        int r;

        r = ctx_comm(c, k->comm_id, &row->comm);
        if (r < 0)
                return r;
        if (with_cgroup) {
                r = ctx_cgroup(c, k->cgroup_id, &row->cgroup);
                if (r < 0)
                        return r;
        }
        r = ctx_string(c, k->module_id, &module);
        if (r < 0)
                return r;
        r = ctx_string(c, k->symbol_id, &symbol);
        if (r < 0)
                return r;

        row->module = strdup(module ?: "[unknown]");
        if (symbol && c->q->offsets) {
                if (asprintf(&row->symbol, "%s+0x%" PRIx64, symbol, k->addr) < 0)
                        row->symbol = NULL;
        } else if (symbol)
                row->symbol = strdup(symbol);
        else if (k->kind == 0)
                row->symbol = strdup("[unknown]");      /* a sample without frames */
        else if (k->kind == FRAME_USER && module_is_file(module)) {
                /* libc.so.6+0x2a1b4: the offset in the file, named
                 * by it, so another tool can name it later. */
                if (asprintf(&row->symbol, "%s+0x%" PRIx64, file_base(module), k->addr) < 0)
                        row->symbol = NULL;
        } else if (asprintf(&row->symbol, "0x%" PRIx64, k->addr) < 0)
                row->symbol = NULL;
        if (k->inline_id != 0) {
                const char *chain;

                r = ctx_string(c, k->inline_id, &chain);
                if (r < 0)
                        return r;
                row->inlined = strdup(chain);
                if (!row->inlined)
                        return -ENOMEM;
        }
        row->kernel = k->kind == FRAME_KERNEL;
        row->samples = a->samples;
        return row->module && row->symbol ? 0 : -ENOMEM;
}

/* The rows with names, most samples first: names are made only for the
 * rows that can be in the answer (the limit's, and those tied with the
 * last of them). Keys name distinct rows (rows_add()). */
static int rows_finish(query_ctx *c, row_set *rs, size_t limit, query_result *res) {
        _cleanup_free_ query_row *rows = NULL;
        size_t n_rows = 0, n = 0;
        int r;

        if (rs->n == 0)
                return 0;
        /* The rows, packed to the front of the table; how their user
         * leaves are named, over all of them. */
        for (size_t i = 0; i < rs->capacity; i++) {
                const row_acc *a = rs->slots + i;
                const char *module;

                if (a->samples == 0)
                        continue;
                rs->slots[n++] = *a;
                if (a->key.kind != FRAME_USER)
                        continue;
                if (a->key.symbol_id != 0) {
                        res->user_named += a->samples;
                        continue;
                }
                r = ctx_string(c, a->key.module_id, &module);
                if (r < 0)
                        return r;
                if (module_is_file(module))
                        res->user_by_offset += a->samples;
                else
                        res->user_unknown += a->samples;
        }
        qsort(rs->slots, n, sizeof(row_acc), row_acc_cmp);
        if (limit > 0 && n > limit)
                for (n = limit; n < rs->n && rs->slots[n].samples == rs->slots[limit - 1].samples;)
                        n++;

        rows = calloc(n, sizeof(query_row));
        if (!rows)
                return -ENOMEM;

        for (size_t i = 0; i < n; i++) {
                /* Counted first: a row half made is freed with the others. */
                r = row_make(c, &rs->slots[i], c->q->by_cgroup, rows + n_rows++);
                if (r < 0)
                        goto fail;
        }

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

/* A cgroup's samples, kernel samples and first row (an index in a row_set). */
typedef struct cgroup_acc {
        int64_t id;
        uint64_t samples, kernel;
        size_t top;
} cgroup_acc;

static int cgroup_total_cmp(const void *x, const void *y) {
        const cgroup_acc *a = x, *b = y;

        if (a->samples != b->samples)
                return a->samples > b->samples ? -1 : 1;
        return a->id < b->id ? -1 : a->id > b->id;
}

/* cgroup_totals (by_cgroup, no stacks): each cgroup's samples over all the rows
 * (rows_finish() left them in rs, most samples first), its kernel ones,
 * and its first row; at most limit cgroups (0: all), most samples first. */
static int cgroup_totals_finish(query_ctx *c, const row_set *rs, size_t limit, query_result *res) {
        _cleanup_(hashmap_freep) hashmap *idx = NULL;
        _cleanup_free_ cgroup_acc *v = NULL;
        query_cgroup_total *out;
        size_t n = 0, alloc = 0;
        int r;

        if (hashmap_new(&idx) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < rs->n; i++) {
                const row_acc *a = rs->slots + i;
                int64_t at;

                if (hashmap_get_u64(idx, u64(a->key.cgroup_id), &at) < 0) {
                        if (array_reserve_one((void **) &v, &alloc, n, sizeof *v) < 0 ||
                            hashmap_put_u64(idx, u64(a->key.cgroup_id), (int64_t) n) < 0)
                                return -ENOMEM;
                        v[n] = (cgroup_acc) { .id = a->key.cgroup_id, .top = i };
                        at = (int64_t) n++;
                }
                v[at].samples += a->samples;
                if (a->key.kind == FRAME_KERNEL)
                        v[at].kernel += a->samples;
        }
        if (n == 0)
                return 0;
        qsort(v, n, sizeof *v, cgroup_total_cmp);
        if (limit > 0 && n > limit)
                n = limit;
        out = calloc(n, sizeof *out);
        if (!out)
                return -ENOMEM;
        res->cgroup_totals = out;
        for (size_t i = 0; i < n; i++) {
                res->n_cgroup_totals = i + 1;
                out[i].samples = v[i].samples;
                out[i].kernel = v[i].kernel;
                r = ctx_cgroup(c, v[i].id, &out[i].cgroup);
                if (r >= 0)
                        r = row_make(c, rs->slots + v[i].top, false, &out[i].top);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Stacks that differ only in where in its function the leaf was (the
 * sampled instruction; return addresses above it are call sites, which
 * repeat) read the same once named: one group each, before the most
 * frequent are chosen, so that max_stacks counts stacks as they are
 * shown. Within a part (a class whose stacks fall in different parts is
 * merged by name after expansion, build_stacks()). */
typedef struct leaf_class {
        int64_t parent;         /* the leaf's parent node */
        int64_t leaf;           /* the leaf's symbol id, or its frame id if unnamed */
        int64_t module;         /* the leaf's module (a function of that name in another is another) */
        bool named;
} leaf_class;

static int merge_leaf_offsets(query_ctx *c, group *groups, size_t *n_groups) {
        size_t n = *n_groups, m = 0;
        _cleanup_free_ leaf_class *cls = calloc(MAX(n, (size_t) 1), sizeof(leaf_class));
        int r;

        if (!cls)
                return -ENOMEM;
        if (n >= UINT32_MAX)
                return 0;
        /* Lookups in id order, so that the dictionaries' blocks are read
         * in order, not once per group: the stacks' nodes, then their
         * leaf frames. */
        _cleanup_free_ order_item *by_id = calloc(MAX(n, (size_t) 1), sizeof(order_item));
        size_t m_ids = 0;

        if (!by_id)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                /* No stack: a class of its own. */
                cls[i] = (leaf_class) { .parent = -1 - (int64_t) i };
                if (group_stack(groups + i) != 0)
                        by_id[m_ids++] = (order_item) { group_stack(groups + i), i };
        }
        sort_by_id(by_id, m_ids);
        for (size_t k = 0; k < m_ids; k++) {
                node_info node;

                if (k % 65536 == 65535) {
                        r = check_deadline(c->q);
                        if (r < 0)
                                return r;
                }
                r = ctx_node(c, by_id[k].key, &node);
                if (r < 0)
                        return r;
                cls[by_id[k].i].parent = node.parent;
                cls[by_id[k].i].leaf = node.frame;
                by_id[k].key = node.frame;
        }
        sort_by_id(by_id, m_ids);
        for (size_t k = 0; k < m_ids; k++) {
                leaf_class *l = cls + by_id[k].i;
                int64_t v[6], sym, inl;

                if (k > 0 && by_id[k].key == by_id[k - 1].key) {
                        const leaf_class *prev = cls + by_id[k - 1].i;

                        l->leaf = prev->leaf;
                        l->named = prev->named;
                        l->module = prev->module;
                        continue;
                }
                /* kind, addr, symbol, offset, module, build_id */
                r = dict_reader_get(c->frame_rows, by_id[k].key, v);
                if (r < 0)
                        return r;
                sym = v[2];
                if (v[0] == FRAME_USER && sym == 0) {
                        r = ctx_user_symbol(c, v[5], u64(v[3]), &sym, &inl, NULL);
                        if (r < 0)
                                return r;
                }
                l->module = v[4];
                if (sym != 0) {
                        l->leaf = sym;
                        l->named = true;
                }
        }
        /* The first of each class of named leaves, by index, takes the
         * others' samples: a table of the classes' first indexes. */
        size_t cap = 16;

        while (cap < 2 * n)
                cap *= 2;
        _cleanup_free_ uint32_t *first = calloc(cap, sizeof(uint32_t)); /* index + 1; 0: empty */
        if (!first)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const group *a = groups + i;
                const leaf_class *p = cls + i;

                if (!p->named)
                        continue;
                uint64_t h = group_hash_of(a->comm_id, a->cgroup_id,
                                           (uint64_t) p->parent * 0x9e3779b97f4a7c15ULL ^
                                                   (uint64_t) p->module * 0xbf58476d1ce4e5b9ULL ^ (uint64_t) p->leaf,
                                           a->split);
                for (size_t j = h & (cap - 1);; j = (j + 1) & (cap - 1)) {
                        if (first[j] == 0) {
                                first[j] = (uint32_t) i + 1;
                                break;
                        }
                        group *f = groups + first[j] - 1;
                        const leaf_class *q = cls + first[j] - 1;

                        if (f->comm_id == a->comm_id && f->split == a->split && f->cgroup_id == a->cgroup_id &&
                            q->parent == p->parent && q->module == p->module && q->leaf == p->leaf) {
                                f->samples += groups[i].samples;
                                groups[i].samples = 0;
                                break;
                        }
                }
        }
        for (size_t i = 0; i < n; i++)
                if (groups[i].samples != 0)
                        groups[m++] = groups[i];
        *n_groups = m;
        return 0;
}

/* The most frequent stacks over all parts: each part's best, merged.
 * The samples of the others are counted per (comm, timeline slot) in
 * others (when other_idx is set), for a stack "[other stacks]" each. */
typedef struct other_entry {
        int64_t comm_id;
        int32_t slot;
        uint64_t samples;
} other_entry;

typedef struct top_groups {
        group *v;
        size_t n, limit;        /* limit 0: all */
        hashmap *other_idx;     /* (comm, slot) -> index in others */
        other_entry *others;
        size_t n_others, alloc_others;
        int32_t (*slot_of)(const group *g);
} top_groups;

static void top_groups_done(top_groups *t) {
        free(t->v);
        hashmap_free(t->other_idx);
        free(t->others);
}

/* "[other stacks]" entries past this many go to one per slot, of no
 * command: a client that makes many commands cannot make as many. */
#define OTHER_STACKS_MAX 4096u

static int other_add(top_groups *t, const group *g) {
        int32_t slot = t->slot_of ? t->slot_of(g) : -1;
        int64_t idx, comm_id = g->comm_id;
        int r;

        if (!t->other_idx)
                return 0;
        if (hashmap_get_pair(t->other_idx, (uint64_t) comm_id, (uint64_t) (int64_t) slot, &idx) < 0 &&
            t->n_others >= OTHER_STACKS_MAX)
                comm_id = 0;
        if (hashmap_get_pair(t->other_idx, (uint64_t) comm_id, (uint64_t) (int64_t) slot, &idx) >= 0) {
                t->others[idx].samples += g->samples;
                return 0;
        }
        r = array_reserve_one((void **) &t->others, &t->alloc_others, t->n_others, sizeof(other_entry));
        if (r < 0)
                return r;
        r = hashmap_put_pair(t->other_idx, (uint64_t) comm_id, (uint64_t) (int64_t) slot, (int64_t) t->n_others);
        if (r < 0)
                return r;
        t->others[t->n_others++] = (other_entry) { .comm_id = comm_id, .slot = slot, .samples = g->samples };
        return 0;
}

/* Puts the k first groups in group_cmp()'s order (the most samples) in
 * v[0..k), in no order: a selection by three-way partitions around the
 * median of three, not a sort of all n. */
static void select_first(group *v, size_t n, size_t k) {
        size_t lo = 0, hi = n;

        while (hi - lo > 1 && k > lo && k < hi) {
                size_t mid = lo + (hi - lo) / 2, lt = lo, i = lo, gt = hi;
                const group *a = v + lo, *b = v + mid, *c = v + hi - 1, *p;

                if (group_cmp(a, b) < 0)
                        p = group_cmp(b, c) < 0 ? b : group_cmp(a, c) < 0 ? c : a;
                else
                        p = group_cmp(a, c) < 0 ? a : group_cmp(b, c) < 0 ? c : b;
                group pivot = *p;

                /* [lo, lt) before the pivot, [lt, gt) equal, [gt, hi) after. */
                while (i < gt) {
                        int d = group_cmp(v + i, &pivot);

                        if (d < 0) {
                                SWAP(v[lt], v[i]);
                                lt++;
                                i++;
                        } else if (d > 0) {
                                gt--;
                                SWAP(v[i], v[gt]);
                        } else
                                i++;
                }
                if (k <= lt)
                        hi = lt;
                else if (k <= gt)
                        return;
                else
                        lo = gt;
        }
}

static int top_groups_add(top_groups *t, group *groups, size_t n_groups) {
        size_t keep, n = 0, i = 0, j = 0, sorted = n_groups;
        group *m;
        int r = 0;

        /* With a limit, only the part's best that many can be kept: they
         * are sorted, the rest go to the others unsorted. */
        if (t->limit > 0 && n_groups > t->limit) {
                select_first(groups, n_groups, t->limit);
                sorted = t->limit;
        }
        qsort(groups, sorted, sizeof(group), group_cmp);
        keep = t->limit > 0 ? MIN(t->limit, t->n + n_groups) : t->n + n_groups;
        if (keep == 0)
                return 0;
        m = malloc(keep * sizeof(group));
        if (!m)
                return -ENOMEM;
        while (n < keep) {
                if (j >= sorted || (i < t->n && group_cmp(t->v + i, groups + j) <= 0))
                        m[n++] = t->v[i++];
                else
                        m[n++] = groups[j++];
        }
        /* What did not make it. */
        for (; r >= 0 && i < t->n; i++)
                r = other_add(t, t->v + i);
        for (; r >= 0 && j < n_groups; j++)
                r = other_add(t, groups + j);
        free(t->v);
        t->v = m;
        t->n = n;
        return r;
}

static int32_t group_slot_of(const group *g) {
        return SPLIT_SLOT(g->split);
}

static int32_t group_tslot_of(const group *g) {
        return TSPLIT_SLOT(g->split);
}

/* A stack "[other stacks]" per (comm, slot) of what the cap left out. */
static int add_other_stacks(query_ctx *c, const top_groups *top, query_result *res) {
        query_stack *v;

        if (top->n_others == 0)
                return 0;
        v = reallocarray(res->stacks, res->n_stacks + top->n_others, sizeof(query_stack));
        if (!v)
                return -ENOMEM;
        res->stacks = v;
        for (size_t i = 0; i < top->n_others; i++) {
                query_stack *st = &res->stacks[res->n_stacks];
                int r;

                *st = (query_stack) {
                        .samples = top->others[i].samples,
                        .pid = -1,
                        .tid = -1,
                        .cpu = -1,
                        .slot = top->others[i].slot,
                        .frames = calloc(1, sizeof(char *)),
                };
                if (!st->frames)
                        return -ENOMEM;
                res->n_stacks++;
                st->frames[0] = strdup(OTHER_STACKS);
                if (!st->frames[0])
                        return -ENOMEM;
                st->n_frames = 1;
                r = ctx_comm(c, top->others[i].comm_id, &st->comm);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The index of a frame's module in the result's modules (want_modules). */
static int ctx_module(query_ctx *c, const frame_info *f, uint32_t *ret) {
        const char *name, *build_id = NULL;
        int64_t idx;
        int r;

        if (hashmap_get_u64(c->module_idx, u64(f->module_id), &idx) >= 0) {
                *ret = (uint32_t) idx;
                return 0;
        }
        r = ctx_string(c, f->module_id, &name);
        if (r >= 0 && f->build_id_id > 0)
                r = ctx_string(c, f->build_id_id, &build_id);
        if (r >= 0)
                r = array_reserve_one((void **) &c->modules, &c->alloc_modules, c->n_modules, sizeof(query_module));
        if (r < 0)
                return r;
        c->modules[c->n_modules] = (query_module) {
                .name = strdup(name ?: "[unknown]"),
                .build_id = build_id ? strdup(build_id) : NULL,
                .kernel = f->kind != FRAME_USER,
        };
        if (!c->modules[c->n_modules].name || (build_id && !c->modules[c->n_modules].build_id)) {
                free(c->modules[c->n_modules].name);
                free(c->modules[c->n_modules].build_id);
                return -ENOMEM;
        }
        /* Counted first, so that the context frees it whatever follows. */
        *ret = (uint32_t) c->n_modules++;
        return hashmap_put_u64(c->module_idx, u64(f->module_id), (int64_t) *ret);
        return 0;
}

/* The process, thread, CPU and timeline slot a group's split says (-1:
 * not told apart). */
static void group_split_of(const query_params *q, const group *g, int64_t *pid, int64_t *tid, int32_t *cpu,
                           int32_t *slot) {
        *pid = q->by_tid ? TSPLIT_PID(g->split) : q->by_pid ? SPLIT_PID(g->split) : -1;
        *tid = q->by_tid ? TSPLIT_TID(g->split) : -1;
        *cpu = q->by_tid ? TSPLIT_CPU(g->split) : q->by_cpu ? SPLIT_CPU(g->split) : -1;
        *slot = q->timeline == 0 ? -1 : q->by_tid ? TSPLIT_SLOT(g->split) : SPLIT_SLOT(g->split);
}

/* Adds a frame of name[0..len) to st; module: its index in the result's
 * modules, when the stack has them. */
static int stack_push(query_stack *st, size_t *alloc, const char *name, size_t len, uint32_t module) {
        size_t before = *alloc;
        int r = array_reserve_one((void **) &st->frames, alloc, st->n_frames, sizeof(char *));

        if (r < 0)
                return r;
        if (st->modules && *alloc != before) {
                uint32_t *m = reallocarray(st->modules, *alloc, sizeof(uint32_t));

                if (!m)
                        return -ENOMEM;
                st->modules = m;
        }
        /* NULL: a shape's frame (query_params.shapes), not named. */
        st->frames[st->n_frames] = name ? strndup(name, len) : NULL;
        if (name && !st->frames[st->n_frames])
                return -ENOMEM;
        if (st->modules)
                st->modules[st->n_frames] = module;
        st->n_frames++;
        return 0;
}

/* Walks a stack from its leaf node up to the root. 1 (and nothing in
 * *ret) for a stack without a frame in the query's dso. */
static int expand_stack(query_ctx *c, const group *g, query_stack *ret) {
        _cleanup_free_ int64_t *frame_ids = NULL;
        size_t n = 0, alloc = 0;
        query_stack st = { .samples = g->samples };
        size_t frames_alloc = 0;
        bool in_dso = !c->dso;
        int r;

        group_split_of(c->q, g, &st.pid, &st.tid, &st.cpu, &st.slot);
        for (int64_t id = group_stack(g); id != 0;) {
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
        if (c->q->by_cgroup) {
                r = ctx_cgroup(c, g->cgroup_id, &st.cgroup);
                if (r < 0) {
                        query_stack_done(&st);
                        return r;
                }
        }

        /* raw: addresses even for a stack without frames, so that only
         * "[other stacks]" has none. */
        if (c->q->raw && !(st.addrs = calloc(MAX(n, (size_t) 1), sizeof(uint64_t)))) {
                query_stack_done(&st);
                return -ENOMEM;
        }
        if (n > 0) {
                st.frames = calloc(n, sizeof(char *));
                if (c->want_modules)
                        st.modules = calloc(n, sizeof(uint32_t));
                if (!st.frames || (c->want_modules && !st.modules)) {
                        query_stack_done(&st);
                        return -ENOMEM;
                }
                frames_alloc = n;
        }

        /* With inlined functions: the innermost user frame is where the
         * thread was (the sampled or the interrupted user IP); the others
         * are return addresses. */
        size_t exact = SIZE_MAX;
        for (size_t k = 0; c->inlined && !c->q->raw && k < n && exact == SIZE_MAX; k++) {
                size_t fi;

                r = ctx_frame(c, frame_ids[k], &fi);
                if (r < 0) {
                        query_stack_done(&st);
                        return r;
                }
                if (c->frames[fi].kind == FRAME_USER)
                        exact = k;
        }

        /* frame_ids is leaf first; the result is outermost caller first. */
        for (size_t i = 0; i < n; i++) {
                const char *name = NULL;
                size_t fi;

                bool counts = true;

                r = ctx_frame(c, frame_ids[n - 1 - i], &fi);
                if (r >= 0)
                        r = ctx_frame_counts(c, frame_ids[n - 1 - i], &counts);
                if (r >= 0 && !counts)
                        continue;
                if (r >= 0 && !in_dso)
                        r = ctx_module_matches(c, c->frames[fi].module_id, &in_dso);
                if (r >= 0 && !c->q->shapes)
                        r = ctx_folded(c, fi, &name);
                uint32_t module = 0;
                if (r >= 0 && c->want_modules)
                        r = ctx_module(c, c->frames + fi, &module);
                if (r >= 0)
                        r = stack_push(&st, &frames_alloc, name, name ? strlen(name) : 0, module);
                /* Kernel frames are the innermost ones of a stack. */
                if (r >= 0)
                        st.n_kernel = c->frames[fi].kind == FRAME_USER ? 0 : st.n_kernel + 1;
                /* raw (no inlined frames then): where it was. */
                if (r >= 0 && st.addrs && st.n_frames <= n) {
                        const frame_info *f = c->frames + fi;
                        const char *mod = NULL;

                        r = ctx_string(c, f->module_id, &mod);
                        f = c->frames + fi;
                        st.addrs[st.n_frames - 1] = f->kind == FRAME_USER && module_is_file(mod) ? f->offset : f->addr;
                }
                int64_t inline_id = 0;
                if (r >= 0)
                        inline_id = n - 1 - i == exact ? c->frames[fi].inline_id : c->frames[fi].inline_caller_id;
                if (r >= 0 && inline_id != 0 && !c->q->raw) {
                        /* The functions inlined there are frames of their
                         * own, after the one they are in, outermost first. */
                        const char *chain;

                        r = ctx_string(c, inline_id, &chain);
                        for (const char *p = chain; r >= 0 && p && *p;) {
                                size_t len = strcspn(p, ";");

                                r = stack_push(&st, &frames_alloc, p, len, module);
                                p += len + (p[len] == ';');
                        }
                }
                if (r < 0) {
                        query_stack_done(&st);
                        return r;
                }
        }

        if (!in_dso) {
                query_stack_done(&st);
                return 1;
        }
        *ret = st;
        return 0;
}

static int group_key_cmp(const void *x, const void *y) {
        const group *a = x, *b = y;

        return a->key < b->key ? -1 : a->key > b->key;
}

static int build_stacks(query_ctx *c, top_groups *top, query_result *res) {
        size_t m = 0;
        int r;

        if (top->n == 0)
                return 0;
        /* In stack id order, as build_entries(): a chain's nodes are in
         * the same dictionary blocks, decoded once, not once a stack. */
        qsort(top->v, top->n, sizeof(group), group_key_cmp);
        res->stacks = calloc(top->n, sizeof(query_stack));
        if (!res->stacks)
                return -ENOMEM;

        for (size_t i = 0; i < top->n; i++) {
                r = expand_stack(c, top->v + i, res->stacks + res->n_stacks);
                if (r < 0)
                        return r;       /* the caller frees what is in res */
                if (r == 0)
                        res->n_stacks++;
        }
        r = add_other_stacks(c, top, res);
        if (r < 0)
                return r;

        /* Stacks of other offsets in the same functions read the same once
         * named: one line each. */
        qsort(res->stacks, res->n_stacks, sizeof(query_stack), stack_names_cmp);
        for (size_t i = 0; i < res->n_stacks; i++) {
                if (m > 0 && stack_names_cmp(res->stacks + m - 1, res->stacks + i) == 0) {
                        res->stacks[m - 1].samples += res->stacks[i].samples;
                        query_stack_done(res->stacks + i);
                        continue;
                }
                res->stacks[m++] = res->stacks[i];
        }
        res->n_stacks = m;
        qsort(res->stacks, res->n_stacks, sizeof(query_stack), stack_cmp);
        return 0;
}

/* query_params.shapes: each distinct stack of the top groups once (as
 * expanded, without names), and the groups as entries referring to it
 * and to their comm. */

static int build_entries(query_ctx *c, top_groups *top, query_result *res) {
        _cleanup_(hashmap_freep) hashmap *shape_idx = NULL, *comm_idx = NULL, *cgroup_idx = NULL;
        size_t alloc_shapes = 0, alloc_comms = 0, alloc_cgroups = 0;
        const query_params *q = c->q;
        int r;

        if (top->n > 0 && !(res->entries = calloc(top->n, sizeof(query_entry))))
                return -ENOMEM;
        if (hashmap_new(&shape_idx) < 0 || hashmap_new(&comm_idx) < 0 || hashmap_new(&cgroup_idx) < 0)
                return -ENOMEM;
        /* In stack order: stacks made about the same time have their
         * nodes in the same dictionary blocks, and near in them. */
        qsort(top->v, top->n, sizeof(group), group_key_cmp);
        for (size_t i = 0; i < top->n; i++) {
                const group *g = top->v + i;
                int64_t shape, comm;

                /* -1: a stack without a frame in the query's dso. */
                if (hashmap_get_u64(shape_idx, (uint64_t) group_stack(g), &shape) < 0) {
                        query_stack st;

                        r = array_reserve_one((void **) &res->shapes, &alloc_shapes, res->n_shapes, sizeof(query_stack));
                        if (r < 0)
                                return r;
                        r = expand_stack(c, g, &st);
                        if (r < 0)
                                return r;
                        shape = -1;
                        if (r == 0) {
                                /* A shape has neither names nor samples. */
                                free(st.frames);
                                free(st.comm);
                                st.frames = NULL;
                                st.comm = NULL;
                                st.samples = 0;
                                st.pid = st.tid = st.cpu = st.slot = -1;
                                shape = (int64_t) res->n_shapes;
                                res->shapes[res->n_shapes++] = st;
                        }
                        r = hashmap_put_u64(shape_idx, (uint64_t) group_stack(g), shape);
                        if (r < 0)
                                return r;
                }
                if (shape < 0)
                        continue;
                int64_t cg = -1;        /* index in res->cgroups; -1: none */
                r = ctx_index(c, comm_idx, g->comm_id, ctx_comm, &res->comms, &res->n_comms, &alloc_comms, &comm);
                if (r >= 0 && g->cgroup_id != 0)
                        r = ctx_index(c, cgroup_idx, g->cgroup_id, ctx_cgroup, &res->cgroups, &res->n_cgroups,
                                      &alloc_cgroups, &cg);
                if (r < 0)
                        return r;
                query_entry *e = &res->entries[res->n_entries++];
                *e = (query_entry) {
                        .shape = (uint32_t) shape,
                        .comm = (uint32_t) comm,
                        .cgroup = (uint32_t) (cg + 1),
                        .samples = g->samples,
                };
                group_split_of(q, g, &e->pid, &e->tid, &e->cpu, &e->slot);
        }
        return add_other_stacks(c, top, res);
}

/* ---- stacks by name ---- */

/* Stacks that read the same once named are one stack of the answer: a
 * call chain seen in several stack generations (each interns it under ids
 * of its own), or with its leaf at other offsets in the same function.
 * Plain stack queries (no pid, thread, CPU or timeline slot among the
 * keys; not raw, shapes or inlined) count them so before the most
 * frequent are chosen. Each stack id gets a 128-bit hash of the names of
 * its frames that count for the query, root first, memoized per node
 * (class_of()); the groups by stack id are moved, whenever their table is
 * full and at the end of a pass, into a table of classes (comm, cgroup,
 * hash) that keeps the first stack id seen of each, to name it by. Parts,
 * when the classes do not fit, are by the classes' hash: a window of many
 * stack generations is read once if its classes fit, however many stack
 * ids it has. */
typedef struct node_memo {
        int64_t id;     /* 0: empty */
        uint64_t h1, h2;        /* h2's low bit: a frame of the query's dso is on the chain */
} node_memo;

typedef struct class_acc {
        query_ctx *c;
        row_set *rs;            /* the rows are counted from the groups, in the first part */
        group_table *t;         /* groups by stack id */
        group_table *ct;        /* classes: key h1, split h2, frame_id the stack id that names it */
        uint64_t parts, part;
        node_memo *memo;        /* open addressing by node id, at most memo_max slots */
        size_t memo_cap, memo_n, memo_max;
        struct chain_link {
                int64_t id, frame;
        } *chain;
        size_t chain_alloc;
        /* class_dense()'s ring of the last CLASS_RING nodes' hashes, by
         * id; h2 0: none. */
        struct dense_hash {
                uint64_t h1, h2;
        } *dense;
        /* ctx_frame_hash()'s answers by frame id, direct-mapped. */
        struct frame_hash {
                int64_t id;     /* 0: empty */
                uint64_t h1;
                uint64_t h2;    /* low bits: FRAME_HASH_COUNTS, FRAME_HASH_IN_DSO */
        } *fcache;
        /* When the classes of a capped query outgrow their table in its
         * first pass: CLASS_EXACT, then CLASS_SUMMARY (class_shrink():
         * counts are at most `shrunk` below the truth), then
         * CLASS_CANDIDATES (a second pass counts the classes left
         * exactly; the others' samples go to "[other stacks]"). */
        enum { CLASS_EXACT, CLASS_SUMMARY, CLASS_CANDIDATES } stage;
        bool may_summarize;
        uint64_t shrunk;
        top_groups *top;
} class_acc;

static void class_acc_done(class_acc *a) {
        free(a->memo);
        free(a->chain);
        free(a->dense);
        free(a->fcache);
}

#define CLASS_SEED1 UINT64_C(0x243f6a8885a308d3)
#define CLASS_SEED2 UINT64_C(0x13198a2e03707344)

static uint64_t name_hash(const char *s, uint64_t seed) {
        size_t n = strlen(s);
        uint64_t h = seed ^ n, w;

        for (; n >= 8; n -= 8, s += 8) {
                memcpy(&w, s, 8);
                h = group_hash(h, w);
        }
        w = 0;
        memcpy(&w, s, n);
        return group_hash(h, w);
}

/* A frame as stacks by name see it: its name's hash (h2's two low bits
 * replaced by the flags), whether it counts for the query (frame kinds)
 * and whether it is in the query's dso (the frame, its folded name and
 * the dso's answer are the context's, made once). */
#define FRAME_HASH_COUNTS UINT64_C(2)
#define FRAME_HASH_IN_DSO UINT64_C(1)

static int ctx_frame_hash(query_ctx *c, int64_t frame_id, struct frame_hash *ret) {
        bool counts, in_dso;
        const char *name;
        size_t fi;
        int r;

        r = ctx_frame(c, frame_id, &fi);
        if (r >= 0)
                r = ctx_frame_counts(c, frame_id, &counts);
        if (r >= 0)
                r = ctx_module_matches(c, c->frames[fi].module_id, &in_dso);
        if (r >= 0)
                r = ctx_folded(c, fi, &name);
        if (r < 0)
                return r;
        *ret = (struct frame_hash) {
                frame_id,
                name_hash(name, CLASS_SEED1),
                (name_hash(name, CLASS_SEED2) & ~UINT64_C(3)) | (counts ? FRAME_HASH_COUNTS : 0) |
                        (in_dso ? FRAME_HASH_IN_DSO : 0),
        };
        return 0;
}

static node_memo *memo_slot(class_acc *a, int64_t id) {
        size_t mask = a->memo_cap - 1;

        for (size_t j = group_hash(0, (uint64_t) id) & mask;; j = (j + 1) & mask)
                if (a->memo[j].id == id || a->memo[j].id == 0)
                        return a->memo + j;
}

/* Room for k more: the table grows 4 times up to its bound, then starts
 * again empty (what it held is found again). */
static int memo_reserve(class_acc *a, size_t k) {
        if (a->memo_n + k <= a->memo_cap / 4 * 3)
                return 0;
        if (a->memo_cap < a->memo_max) {
                node_memo *old = a->memo;
                size_t n = a->memo_cap;

                a->memo_cap = MIN(MAX(n * 4, (size_t) 1024), a->memo_max);
                a->memo = calloc(a->memo_cap, sizeof(node_memo));
                if (a->memo) {
                        for (size_t i = 0; i < n; i++)
                                if (old[i].id != 0)
                                        *memo_slot(a, old[i].id) = old[i];
                        free(old);
                        if (a->memo_n + k <= a->memo_cap / 4 * 3)
                                return 0;
                } else {
                        /* No room to grow: start again in the old one. */
                        a->memo = old;
                        a->memo_cap = n;
                        a->memo_max = n;
                }
        }
        if (!a->memo)
                return -E2BIG;
        memset(a->memo, 0, a->memo_cap * sizeof(node_memo));
        a->memo_n = 0;
        return a->memo_n + k <= a->memo_cap / 4 * 3 ? 0 : -E2BIG;
}

/* Frames by id, direct-mapped (24 bytes each: 6 MiB): a frame
 * generation holds up to 130,048 frames (store-dict.c), with consecutive
 * ids, so the frames of a stretch of a window seldom share a slot. */
#define CLASS_FRAME_CACHE 262144u

/* A chain's hash (h1, h2) and the next frame's: the frame's name if it
 * counts. h2's low bit says whether a frame of the query's dso counts on
 * the chain; it is kept out of the mix, so that the same names hash the
 * same wherever on them the dso's first frame is. */
static int class_step(class_acc *a, int64_t frame_id, uint64_t *h1, uint64_t *h2) {
        struct frame_hash *e = a->fcache ? a->fcache + (uint64_t) frame_id % CLASS_FRAME_CACHE : NULL, x;

        if (e && e->id == frame_id)
                x = *e;
        else {
                int r = ctx_frame_hash(a->c, frame_id, &x);

                if (r < 0)
                        return r;
                if (e)
                        *e = x;
        }
        if (!(x.h2 & FRAME_HASH_COUNTS))
                return 0;
        *h1 = group_hash(*h1 ^ 0x9e3779b97f4a7c15ULL, x.h1);
        *h2 = (group_hash((*h2 & ~UINT64_C(1)) ^ 0xc2b2ae3d27d4eb4fULL, x.h2 & ~UINT64_C(3)) & ~UINT64_C(1)) |
              (*h2 & 1) | (x.h2 & FRAME_HASH_IN_DSO);
        return 0;
}

/* The hash of the empty chain, the root's. */
static void class_root(const query_ctx *c, uint64_t *h1, uint64_t *h2) {
        *h1 = CLASS_SEED1;
        *h2 = (CLASS_SEED2 & ~UINT64_C(1)) | !c->dso;
}

/* The class hash of a stack: (h1, h2), h2's low bit set if a frame of the
 * query's dso counts on it (always without a dso). */
static int class_of(class_acc *a, int64_t stack_id, uint64_t *ret1, uint64_t *ret2) {
        query_ctx *c = a->c;
        uint64_t h1, h2;
        size_t n = 0;
        int r;

        class_root(c, &h1, &h2);
        /* Up to the root or a node whose hash is known. */
        for (int64_t id = stack_id; id != 0;) {
                node_info nd;

                if (a->memo_cap > 0) {
                        const node_memo *m = memo_slot(a, id);

                        if (m->id == id) {
                                h1 = m->h1;
                                h2 = m->h2;
                                break;
                        }
                }
                r = ctx_node(c, id, &nd);
                if (r < 0)
                        return r;
                r = array_reserve_one((void **) &a->chain, &a->chain_alloc, n, sizeof(*a->chain));
                if (r < 0)
                        return r;
                a->chain[n++] = (struct chain_link) { id, nd.frame };
                id = nd.parent;
        }
        r = memo_reserve(a, n);
        if (r < 0 && r != -E2BIG)
                return r;
        /* Down again, root side first, as expand_stack() names them. */
        while (n > 0) {
                const struct chain_link *l = a->chain + --n;

                r = class_step(a, l->frame, &h1, &h2);
                if (r < 0)
                        return r;
                if (a->memo_cap > 0 && a->memo_n < a->memo_cap / 4 * 3) {
                        node_memo *m = memo_slot(a, l->id);

                        if (m->id == 0) {
                                *m = (node_memo) { l->id, h1, h2 };
                                a->memo_n++;
                        }
                }
        }
        *ret1 = h1;
        *ret2 = h2;
        return 0;
}

/* The last this many nodes' hashes (16 bytes each) are kept by
 * class_dense(), a ring by id. */
#define CLASS_RING (1u << 19)

/* How many rows ahead class_dense() fetches the slots of. */
#define CLASS_AHEAD 8

/* The query's deadline, checked every 65,536 node ids swept. */
static int sweep_tick(const query_params *q, uint64_t *swept) {
        return ++*swept % 65536 == 0 ? check_deadline(q) : 0;
}

/* The class hashes of the groups by_id[0..n) (sorted by stack id) into
 * out[0..n), from one sweep over every node id from the least to the
 * greatest of theirs: a node's hash is its parent's and its frame's, and
 * a chain is interned caller first, so a parent is mostly one of the last
 * few ids swept and is found in the ring; the dictionary is then read
 * block by block, once, not once a group and frame. Only for queries
 * without filters of comm, pid, CPU, cgroup or dso and of on-CPU samples,
 * whose window's groups use about every node in the span (at most 32
 * nodes a group): others would name frames of stacks they do not count
 * (and load those stacks' function tables). For parents older than the
 * ring, and for nodes the sweep could not hash, class_of() walks, and
 * fails where the group's own chain does. out[k].h2 == 0: not hashed
 * here. */
static int class_dense(class_acc *a, const order_item *by_id, size_t n, struct dense_hash *out) {
        query_ctx *c = a->c;
        const query_params *q = c->q;
        size_t k = 0;
        int r;

        if (q->comm || q->pid >= 0 || q->cpu >= 0 || q->unit || q->cgroup || q->container || c->dso ||
            q->kind != SAMPLE_KIND_CPU)
                return 0;
        while (k < n && by_id[k].key <= 0)
                k++;
        if (k == n)
                return 0;
        int64_t lo = by_id[k].key, hi = by_id[n - 1].key;

        if ((uint64_t) (hi - lo) >= (uint64_t) (n - k) * 32)
                return 0;
        if (!a->dense) {
                a->dense = malloc(CLASS_RING * sizeof(*a->dense));
                if (!a->dense)
                        return 0;       /* walked instead */
        }
        /* Block by block: the rows of a block are read in place, and the
         * frame and parent slots of the rows a few ahead are fetched
         * while the current one is hashed (the frame cache and the ring
         * are larger than the CPU's caches). */
        const size_t w = 1 + dict_columns(DICT_STACKS);
        uint64_t swept = 0;

        for (int64_t id = lo; id <= hi;) {
                const int64_t *rows;
                size_t m;

                r = dict_reader_rows(c->nodes, id, &rows, &m);
                if (r == -ENOMEM)
                        return r;
                if (r < 0) {
                        /* Not hashed: a group naming it walks. */
                        a->dense[(uint64_t) id % CLASS_RING] = (struct dense_hash) {};
                        id++;
                        r = sweep_tick(q, &swept);
                        if (r < 0)
                                return r;
                        continue;
                }
                for (size_t j = 0; j < m && id <= hi; j++) {
                        const int64_t *row = rows + j * w, cur = row[0], parent = row[1], frame_id = row[2];
                        uint64_t h1, h2;

                        if (j + CLASS_AHEAD < m) {
                                const int64_t *ahead = rows + (j + CLASS_AHEAD) * w;

                                __builtin_prefetch(a->dense + (uint64_t) ahead[1] % CLASS_RING);
                                if (a->fcache)
                                        __builtin_prefetch(a->fcache + (uint64_t) ahead[2] % CLASS_FRAME_CACHE);
                        }
                        /* Ids a block skips are not nodes. */
                        for (; id < cur && id <= hi; id++)
                                a->dense[(uint64_t) id % CLASS_RING] = (struct dense_hash) {};
                        if (cur > hi)
                                break;
                        id = cur + 1;

                        struct dense_hash *d = a->dense + (uint64_t) cur % CLASS_RING;

                        *d = (struct dense_hash) {};
                        r = sweep_tick(q, &swept);
                        if (r < 0)
                                return r;
                        while (k < n && by_id[k].key < cur)
                                k++;
                        r = 0;
                        if (parent == 0)
                                class_root(c, &h1, &h2);
                        else if (parent >= lo && cur - parent < (int64_t) CLASS_RING) {
                                const struct dense_hash *p = a->dense + (uint64_t) parent % CLASS_RING;

                                if (p->h2 == 0)
                                        continue;
                                h1 = p->h1;
                                h2 = p->h2;
                        } else {
                                /* The walk may load blocks in the place of
                                 * this one: its rows are found again. */
                                r = class_of(a, parent, &h1, &h2);
                                m = 0;
                        }
                        if (r >= 0)
                                r = class_step(a, frame_id, &h1, &h2);
                        if (r == -ENOMEM || r == -ETIME)
                                return r;
                        if (r < 0)
                                continue;       /* not hashed: a group naming it walks */
                        *d = (struct dense_hash) { h1, h2 };
                        for (; k < n && by_id[k].key == cur; k++)
                                out[k] = *d;
                }
        }
        return 0;
}

/* Makes room in a full table of classes: every class loses as many
 * samples as the median class has, and those left with none go (at least
 * half of them). A class's count is then at most a->shrunk below its true
 * one, and a class not in the table has at most a->shrunk samples (the
 * frequent items bound of Misra and Gries, in batches). */
static int class_shrink(class_acc *a) {
        group_table *ct = a->ct;
        size_t n = group_table_pack(ct), k = n > 0 ? n - 1 - n / 2 : 0, m = 0;
        uint64_t delta = 1;

        /* The k largest first; delta, the largest of the others, is the
         * median (rank n / 2 from the least), and they all go. */
        select_first(ct->slots, n, k);
        for (size_t i = k; i < n; i++)
                delta = MAX(delta, ct->slots[i].samples);
        for (size_t i = 0; i < k; i++)
                m += ct->slots[i].samples > delta;
        _cleanup_free_ group *keep = malloc(MAX(m, (size_t) 1) * sizeof(group));
        if (!keep)
                return -ENOMEM;
        m = 0;
        for (size_t i = 0; i < k; i++)
                if (ct->slots[i].samples > delta) {
                        keep[m] = ct->slots[i];
                        keep[m++].samples -= delta;
                }
        group_table_clear(ct);
        for (size_t i = 0; i < m; i++)
                *group_slot(ct, group_hash_of(keep[i].comm_id, keep[i].cgroup_id, keep[i].key, keep[i].split),
                            keep[i].comm_id, keep[i].cgroup_id, keep[i].key, keep[i].split) = keep[i];
        ct->n = m;
        a->shrunk += delta;
        return 0;
}

/* Moves the groups of the table to their classes (those of this part),
 * and empties it. -E2BIG: the classes do not fit, more parts. */
static int class_flush(class_acc *a) {
        group_table *t = a->t;
        size_t n = group_table_pack(t);
        int r = 0;

        if (a->part == 0 && a->stage != CLASS_CANDIDATES) {
                r = rows_add(a->c, a->rs, t->slots, n);
                if (r < 0)
                        return r;
        }
        /* In stack id order: the dictionary's blocks are read in order,
         * and a chain's nodes are near each other. */
        _cleanup_free_ order_item *by_id = calloc(MAX(n, (size_t) 1), sizeof(order_item));
        if (!by_id)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                by_id[i] = (order_item) { group_stack(t->slots + i), i };
        sort_by_id(by_id, n);
        _cleanup_free_ struct dense_hash *hashes = calloc(MAX(n, (size_t) 1), sizeof(struct dense_hash));
        if (!hashes)
                return -ENOMEM;
        r = class_dense(a, by_id, n, hashes);
        if (r < 0)
                return r;
        for (size_t k = 0; k < n; k++) {
                const group *g = t->slots + by_id[k].i;
                uint64_t h1, h2;

                if (k % 65536 == 65535) {
                        r = check_deadline(a->c->q);
                        if (r < 0)
                                return r;
                }
                /* The slots of the groups a few ahead, and of their
                 * classes, are fetched while this one is moved. */
                if (k + 2 * CLASS_AHEAD < n)
                        __builtin_prefetch(t->slots + by_id[k + 2 * CLASS_AHEAD].i);
                if (k + CLASS_AHEAD < n && hashes[k + CLASS_AHEAD].h2 != 0) {
                        const group *ga = t->slots + by_id[k + CLASS_AHEAD].i;

                        __builtin_prefetch(a->ct->slots +
                                           (group_hash_of(ga->comm_id, ga->cgroup_id, hashes[k + CLASS_AHEAD].h1,
                                                          hashes[k + CLASS_AHEAD].h2) &
                                            (a->ct->capacity - 1)));
                }
                if (hashes[k].h2 != 0) {
                        h1 = hashes[k].h1;
                        h2 = hashes[k].h2;
                } else
                        r = class_of(a, by_id[k].key, &h1, &h2);
                if (r < 0)
                        return r;
                if (!(h2 & 1))
                        continue;       /* no frame in the dso */
                uint64_t h = group_hash_of(g->comm_id, g->cgroup_id, h1, h2);
                if (((h >> 40) & (a->parts - 1)) != a->part)
                        continue;
                group x = {
                        .comm_id = g->comm_id,
                        .cgroup_id = g->cgroup_id,
                        .key = h1,
                        .split = h2,
                        .frame_id = by_id[k].key,
                        .samples = g->samples,
                };
                /* A class is named by its least stack id: the same one
                 * whatever the order its groups came in. */
                group *cl = group_slot(a->ct, h, x.comm_id, x.cgroup_id, x.key, x.split);
                if (cl->samples != 0) {
                        cl->samples += x.samples;
                        cl->frame_id = MIN(cl->frame_id, x.frame_id);
                        continue;
                }
                if (a->stage == CLASS_CANDIDATES) {
                        r = other_add(a->top, &x);
                        if (r < 0)
                                return r;
                        continue;
                }
                r = group_add(a->ct, &x, h);
                if (r == -E2BIG && (a->stage == CLASS_SUMMARY || a->may_summarize)) {
                        a->stage = CLASS_SUMMARY;
                        r = class_shrink(a);
                        if (r >= 0)
                                r = group_add(a->ct, &x, h);
                }
                if (r < 0)
                        return r;
        }
        group_table_clear(t);
        return 0;
}

/* Whether the limit most frequent of the exact counts of the classes in
 * ct are the window's: each has more samples than `shrunk`, more than any
 * class the summary left out can have. */
static bool summary_holds(const group_table *ct, size_t limit, uint64_t shrunk) {
        size_t above = 0;

        for (size_t i = 0; i < ct->capacity; i++)
                above += ct->slots[i].samples > shrunk;
        return above >= limit;
}

/* The classes of a part as groups of the stack ids that name them. */
static size_t class_groups(group_table *ct) {
        size_t n = group_table_pack(ct);

        for (size_t i = 0; i < n; i++) {
                group *x = ct->slots + i;

                x->key = (uint64_t) x->frame_id;
                x->split = 0;
                x->frame_id = 0;
        }
        return n;
}

/* After a pass that kept the frequent classes (CLASS_SUMMARY): a second
 * pass counts them exactly, the others' samples going to "[other
 * stacks]"; the window's totals in g stay the first pass's. -E2BIG if
 * fewer are left than asked for, or the count does not prove the answer
 * (summary_holds()): parts then. */
static int class_count_candidates(class_acc *a, store *s, const query_params *q, unsigned top_level, group_acc *g,
                                  uint32_t *passes) {
        group_table *ct = a->ct;
        _cleanup_free_ group_acc *first = NULL;
        int r;

        if (ct->n < a->top->limit)
                return -E2BIG;
        first = malloc(sizeof *first);
        if (!first)
                return -ENOMEM;
        (*passes)++;
        *first = *g;
        for (size_t i = 0; i < ct->capacity; i++)
                if (ct->slots[i].samples != 0)
                        ct->slots[i].samples = 1;       /* 1 more than counted */
        a->stage = CLASS_CANDIDATES;
        group_table_clear(a->t);
        r = sample_scan_some(s, q->since_ns, q->until_ns, top_level, q->pid, group_needs(g), group_block, g);
        if (r >= 0)
                r = class_flush(a);
        *g = *first;
        if (r < 0)
                return r;
        for (size_t i = 0; i < ct->capacity; i++)
                if (ct->slots[i].samples != 0)
                        ct->slots[i].samples--;
        return summary_holds(ct, a->top->limit, a->shrunk) ? 0 : -E2BIG;
}

/* Groups the window in as many parts as its distinct groups need (see
 * group_table); each part's groups go to the rows, and with stacks to
 * the most frequent ones, before the next part reuses the table. */
static int query_groups(store *s, query_ctx *c, const query_params *q, int64_t comm_id, row_set *rs,
                        top_groups *top, query_result *res) {
        _cleanup_free_ group_acc *g = NULL;
        _cleanup_free_ uint64_t *timeline = NULL;
        _cleanup_(snap_acc_done) snap_acc sa = { .c = c };
        _cleanup_(class_acc_done) class_acc ca = { .c = c, .rs = rs };
        group_table t = {}, ct = {};
        /* Stacks by name (class_flush()). */
        bool by_class = q->want_stacks && !q->raw && !q->shapes && !q->inlined && !q->by_pid && !q->by_tid &&
                        !q->by_cpu && q->timeline == 0;
        uint64_t parts = 1, slot_ns = 0;
        id_range range = { .lo = UINT64_MAX, .hi = 0 };         /* none found */
        bool by_range = false, range_done = false, summary_failed = false;
        uint32_t passes = 0;
        unsigned top_level;
        int r = 0;

        g = calloc(1, sizeof *g);
        if (!g)
                return -ENOMEM;

        /* A profile of functions for any pid reads the leaf levels; of
         * one pid, the process levels; of cgroups, the hours by cgroup
         * and the process levels; whole stacks, and
         * kernel-only or user-only frames (found from the stacks), need
         * the full ones; a timeline, blocks no wider than its slots. */
        if (q->want_stacks || q->frames != QUERY_FRAMES_ALL)
                top_level = SAMPLE_LEVEL_HOUR;
        else if (q->pid >= 0)
                top_level = SAMPLE_LEVEL_PROC_HOUR;
        else if (q->unit || q->cgroup || q->container || q->by_cgroup)
                top_level = SAMPLE_LEVEL_CGROUP_HOUR;
        else
                top_level = SAMPLE_LEVEL_LEAF_HOUR;
        if (q->raw) {
                _cleanup_finalize_ sqlite3_stmt *st = NULL;

                if (hashmap_new(&sa.idx) < 0 || hashmap_new(&sa.module_leaf) < 0)
                        return -ENOMEM;
                r = store_sql_prepare(s->db, "SELECT id FROM strings WHERE s = '" MODULE_KERNEL "'", &st);
                if (r < 0)
                        return r;
                r = store_step_id(s, st, &sa.kernel_module_id);
                if (r < 0 && r != -ENOENT)
                        return r;
        }
        if (q->timeline > 0) {
                if (q->since_ns == 0 || q->until_ns <= q->since_ns)
                        return -EINVAL;
                slot_ns = MAX((q->until_ns - q->since_ns) / q->timeline, (uint64_t) 1);
                timeline = calloc(q->timeline, sizeof(uint64_t));
                if (!timeline)
                        return -ENOMEM;
                top_level = slot_ns >= sample_level_width(SAMPLE_LEVEL_HOUR)     ? SAMPLE_LEVEL_HOUR
                            : slot_ns >= sample_level_width(SAMPLE_LEVEL_MINUTE) ? SAMPLE_LEVEL_MINUTE
                                                                                 : SAMPLE_LEVEL_BUCKET;
        }

        t.max_capacity = QUERY_GROUP_MIN_SLOTS;
        while (t.max_capacity <= s->query_group_slots / 2)
                t.max_capacity *= 2;
        t.capacity = MIN(QUERY_GROUP_FIRST_SLOTS, t.max_capacity);
        t.slots = calloc(t.capacity, sizeof(group));
        if (!t.slots)
                return -ENOMEM;
        if (by_class) {
                ct.max_capacity = t.max_capacity;
                ct.capacity = t.capacity;
                ct.slots = calloc(ct.capacity, sizeof(group));
                if (!ct.slots) {
                        free(t.slots);
                        return -ENOMEM;
                }
                ca.t = &t;
                ca.ct = &ct;
                ca.top = top;
                ca.memo_max = MAX(t.max_capacity / 4, (size_t) 1024);
                ca.fcache = calloc(CLASS_FRAME_CACHE, sizeof(*ca.fcache));   /* NULL: no cache */
        }

        for (uint64_t part = 0; part < parts; part++) {
                r = check_deadline(q);
                if (r < 0)
                        break;
                /* A part whose groups do not fit the table at its bound
                 * splits the window into 4 times as many parts, from the
                 * start. */
                for (;;) {
                        /* By class, every pass counts all groups; the
                         * classes take the parts. */
                        *g = (group_acc) { .q = q, .c = c, .comm_id = comm_id, .t = &t,
                                           .parts = by_class ? 1 : parts, .part = by_class ? 0 : part,
                                           .by_range = by_range, .lo = range.lo,
                                           .span = range.hi - range.lo + 1,
                                           .timeline = timeline, .slot_ns = slot_ns,
                                           .snaps = sa.idx ? &sa : NULL, .cls = by_class ? &ca : NULL,
                                           .rows = q->want_stacks || q->shapes ? NULL : rs };
                        ca.parts = parts;
                        ca.part = part;
                        ca.stage = CLASS_EXACT;
                        ca.shrunk = 0;
                        /* A capped answer of one part may keep the
                         * frequent classes only (class_shrink()). */
                        ca.may_summarize = top->limit > 0 && top->limit <= ct.max_capacity / 4 * 3 && parts == 1 &&
                                           !summary_failed;
                        group_table_clear(&ct);
                        if (part == 0 && sa.idx) {
                                sa.n = 0;
                                hashmap_clear(sa.idx);
                        }
                        if (timeline)
                                memset(timeline, 0, q->timeline * sizeof(uint64_t));
                        group_table_clear(&t);
                        passes++;
                        r = sample_scan_some(s, q->since_ns, q->until_ns, top_level, q->pid, group_needs(g), group_block, g);
                        if (r >= 0 && by_class)
                                r = class_flush(&ca);
                        if (r >= 0 && by_class && ca.stage == CLASS_SUMMARY) {
                                r = class_count_candidates(&ca, s, q, top_level, g, &passes);
                                summary_failed = r == -E2BIG;
                        }
                        if (r != -E2BIG)
                                break;
                        if (parts * 4 > (UINT64_C(1) << 20)) {
                                r = -ENOMEM;
                                break;
                        }
                        /* Stacks told apart by process, CPU or time slot
                         * multiply the groups: past 64 reads of the window
                         * the client is asked for a shorter one. */
                        if (q->want_stacks && (q->by_pid || q->by_cpu || q->timeline > 0) &&
                            parts >= QUERY_SPLIT_MAX_PARTS) {
                                r = -ERANGE;
                                break;
                        }
                        /* Stacks of (comm, stack) groups, no more keys
                         * and no cgroup filter: parts by ranges of their
                         * ids, which one more pass finds with an estimate
                         * of the groups; if a range still holds too many
                         * (the window's stacks are not spread evenly over
                         * their ids), by hash again, 4 times as many. Parts
                         * are powers of 2 then (powers of 4 for queries
                         * split by pid, CPU or slot, whose 64 reads are
                         * counted in steps of 4). */
                        if (by_range) {
                                by_range = false;
                        } else if (q->want_stacks && !by_class && !range_done && !q->by_pid && !q->by_cpu && !q->by_tid &&
                                   q->timeline == 0 && !q->by_cgroup && !q->unit && !q->cgroup && !q->container) {
                                range_done = true;
                                range.q = q;
                                range.comm_id = comm_id;
                                passes++;
                                r = sample_scan(s, q->since_ns, q->until_ns, top_level, q->pid, range_block, &range);
                                if (r < 0)
                                        break;
                                /* As many parts as the groups need, with half
                                 * again for ranges that hold more than their
                                 * share; past 64 parts, by hash, which
                                 * spreads them evenly. */
                                double want = range_groups(&range) * 1.5 / (double) (t.max_capacity / 4 * 3);
                                uint64_t p = 4;

                                while ((double) p < want && p < (UINT64_C(1) << 20))
                                        p *= 2;
                                parts = MAX(p, parts * 4) / 4;
                                by_range = range.hi >= range.lo && p <= QUERY_SPLIT_MAX_PARTS;
                        }
                        parts *= 4;
                        part = 0;
                        row_set_clear(rs);
                        top->n = 0;
                        top->n_others = 0;
                        if (top->other_idx)
                                hashmap_clear(top->other_idx);
                }
                if (r < 0)
                        break;
                if (g->total == 0)
                        break;          /* nothing matched: no part has groups */

                if (by_class) {
                        /* The rows were counted as the groups went. */
                        size_t n = class_groups(&ct);

                        r = top_groups_add(top, ct.slots, n);
                        if (r < 0)
                                break;
                        continue;
                }
                size_t n = group_table_pack(&t);
                r = q->shapes ? 0 : rows_add(c, rs, t.slots, n);
                if (r >= 0 && q->want_stacks && q->frames == QUERY_FRAMES_ALL && !q->inlined && !q->offsets && !q->raw)
                        r = merge_leaf_offsets(c, t.slots, &n);
                if (r >= 0 && q->want_stacks)
                        r = top_groups_add(top, t.slots, n);
                if (r < 0)
                        break;
        }
        free(t.slots);
        free(ct.slots);
        if (r < 0)
                return r;

        res->passes = passes;
        if (timeline) {
                res->timeline = TAKE_PTR(timeline);
                res->n_timeline = q->timeline;
                res->timeline_start_ns = q->since_ns;
                res->timeline_slot_ns = slot_ns;
        }
        res->total_samples = g->total;
        if (sa.n > 0) {
                /* The snapshot most module samples, else most samples, were
                 * taken in. */
                size_t best = 0;
                _cleanup_finalize_ sqlite3_stmt *st = NULL;

                for (size_t i = 1; i < sa.n; i++)
                        if (sa.v[i].module_samples > sa.v[best].module_samples ||
                            (sa.v[i].module_samples == sa.v[best].module_samples && sa.v[i].samples > sa.v[best].samples))
                                best = i;
                r = store_sql_prepare(s->db, "SELECT path FROM snapshots WHERE id = ?1", &st);
                if (r < 0)
                        return r;
                sqlite3_bind_int64(st, 1, sa.v[best].id);
                if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0)) {
                        res->kcore_snapshot = strdup((const char *) sqlite3_column_text(st, 0));
                        if (!res->kcore_snapshot)
                                return -ENOMEM;
                }
        }
        if (q->raw && g->last_boot > 0) {
                _cleanup_finalize_ sqlite3_stmt *st = NULL;

                r = store_sql_prepare(s->db, "SELECT text_addr, build_id FROM boots WHERE id = ?1", &st);
                if (r < 0)
                        return r;
                sqlite3_bind_int64(st, 1, g->last_boot);
                if (sqlite3_step(st) == SQLITE_ROW) {
                        const unsigned char *bid = sqlite3_column_text(st, 1);

                        res->kernel_text = u64(sqlite3_column_int64(st, 0));
                        res->kernel_build_id = strdup(bid ? (const char *) bid : "");
                        if (!res->kernel_build_id)
                                return -ENOMEM;
                }
        }
        res->first_ns = g->first_ns;
        res->last_ns = g->last_ns;
        res->n_cpus = 0;
        for (size_t i = 0; i < ELEMENTSOF(g->cpus); i++)
                res->n_cpus += (uint32_t) __builtin_popcountll(g->cpus[i]);
        return 0;
}

static int query_locked(store *s, const query_params *q, uint32_t max_rows, uint32_t max_stacks, query_result *res) {
        _cleanup_(query_ctx_done) query_ctx c = {};
        _cleanup_(row_set_done) row_set rs = {};
        _cleanup_(top_groups_done) top_groups top = {
                .limit = max_stacks,
                .slot_of = q->timeline == 0 ? NULL : q->by_tid ? group_tslot_of : group_slot_of,
        };
        size_t row_limit;
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

        r = query_ctx_init(&c, s, q);
        if (r < 0)
                return r;

        /* What the cap leaves out of whole stacks is counted, unless only
         * the stacks through a module are asked for. */
        if (q->want_stacks && max_stacks > 0 && !q->dso) {
                r = hashmap_new(&top.other_idx);
                if (r < 0)
                        return r;
        }
        r = query_groups(s, &c, q, comm_id, &rs, &top, res);
        if (r < 0)
                return r;
        if (res->total_samples == 0)
                return 0;

        /* q->top = 0 asks for all rows; max_rows = 0 means no server cap. */
        row_limit = q->top;
        if (max_rows > 0 && (row_limit == 0 || row_limit > max_rows))
                row_limit = max_rows;

        r = rows_finish(&c, &rs, row_limit, res);
        if (r >= 0 && q->cgroup_totals && q->by_cgroup && !q->want_stacks)
                r = cgroup_totals_finish(&c, &rs, max_rows, res);
        if (r < 0)
                return r;

        if (!q->want_stacks)
                return 0;
        r = q->shapes ? build_entries(&c, &top, res) : build_stacks(&c, &top, res);
        if (r >= 0 && q->packed && !q->shapes)
                r = query_result_pack(res);
        if (r < 0)
                return r;
        res->modules = TAKE_PTR(c.modules);
        res->n_modules = c.n_modules;
        c.n_modules = 0;
        return 0;
}

void store_set_query_group_slots(store *s, size_t slots) {
        s->query_group_slots = slots;
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
