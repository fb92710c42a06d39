/* SPDX-License-Identifier: GPL-2.0-or-later */
/* io.perfsnap.Query parameters and answers <-> JSON; field names and
 * units are documented in doc/protocol.md. */

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "macro.h"
#include "wire/protocol.h"
#include "wire/query-json.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(struct json_object *, json_object_put)

/* query_result_free() lives in store.c, beside the other producer of results. */
DEFINE_TRIVIAL_CLEANUP_FUNC(query_result *, query_result_free)

/* JSON integer within [min, max]. json-c keeps integers above INT64_MAX as
 * uint64 and clamps json_object_get_int64() for them, so look at the
 * unsigned value for non-negative numbers. */
static bool json_int_in_range(struct json_object *v, int64_t min, int64_t max, int64_t *ret) {
        int64_t s;

        if (!json_object_is_type(v, json_type_int))
                return false;
        s = json_object_get_int64(v);
        if (s >= 0) {
                uint64_t u = json_object_get_uint64(v);
                if (u > (uint64_t) max)
                        return false;
                s = (int64_t) u;
        }
        if (s < min || s > max)
                return false;
        *ret = s;
        return true;
}

/* "name: unknown parameter" with the name made safe to log and echo. */
static const char *unknown_field_error(const char *name) {
        static _Thread_local char buf[128];
        size_t n = 0;

        for (const char *p = name; *p && n < 64; p++, n++)
                buf[n] = *p > 0x20 && *p < 0x7f ? *p : '?';
        snprintf(buf + n, sizeof(buf) - n, "%s: unknown parameter", n == 64 ? "..." : "");
        return buf;
}

/* The boolean parameter key of q, or NULL. */
static bool *bool_flag(query_params *q, const char *key) {
        const struct { const char *key; bool *flag; } flags[] = {
                { "by_pid", &q->by_pid }, { "by_cpu", &q->by_cpu }, { "by_tid", &q->by_tid },
                { "modules", &q->want_modules }, { "packed", &q->packed }, { "offsets", &q->offsets },
                { "raw", &q->raw }, { "shapes", &q->shapes }, { "by_cgroup", &q->by_cgroup },
                { "no_comm", &q->no_comm }, { "cgroup_totals", &q->cgroup_totals },
        };

        for (size_t i = 0; i < ELEMENTSOF(flags); i++)
                if (strcmp(key, flags[i].key) == 0)
                        return flags[i].flag;
        return NULL;
}

int query_params_from_json(struct json_object *params, query_params *ret, const char **ret_error) {
        static _Thread_local char bool_error[64];
        query_params q = QUERY_PARAMS_INIT;
        const char *error = NULL;
        int64_t v;

        if (params && !json_object_is_type(params, json_type_object)) {
                error = "parameters: expected an object";
                goto fail;
        }

        if (params) {
                json_object_object_foreach(params, key, val) {
                        if (!val)
                                continue; /* null: as if absent */

                        if (strcmp(key, "since_ns") == 0) {
                                if (!json_int_in_range(val, 0, INT64_MAX, &v)) {
                                        error = "since_ns: expected an integer from 0 to 9223372036854775807 (nanoseconds since the epoch)";
                                        goto fail;
                                }
                                q.since_ns = (uint64_t) v;
                        } else if (strcmp(key, "until_ns") == 0) {
                                if (!json_int_in_range(val, 0, INT64_MAX, &v)) {
                                        error = "until_ns: expected an integer from 0 to 9223372036854775807 (nanoseconds since the epoch)";
                                        goto fail;
                                }
                                q.until_ns = (uint64_t) v;
                        } else if (strcmp(key, "pid") == 0) {
                                if (!json_int_in_range(val, -1, QUERY_PID_MAX, &v)) {
                                        error = "pid: expected -1 (any) or a process id from 0 to 4194303";
                                        goto fail;
                                }
                                q.pid = v;
                        } else if (strcmp(key, "cpu") == 0) {
                                if (!json_int_in_range(val, -1, QUERY_CPU_MAX, &v)) {
                                        error = "cpu: expected -1 (any) or a CPU number from 0 to 8191";
                                        goto fail;
                                }
                                q.cpu = (int32_t) v;
                        } else if (strcmp(key, "comm") == 0) {
                                int len;

                                if (!json_object_is_type(val, json_type_string)) {
                                        error = "comm: expected a string";
                                        goto fail;
                                }
                                len = json_object_get_string_len(val);
                                /* An embedded NUL would make the C string a different name. */
                                if (len < 1 || len > QUERY_COMM_MAX ||
                                    strlen(json_object_get_string(val)) != (size_t) len) {
                                        error = "comm: expected a name of 1 to 64 bytes without NUL";
                                        goto fail;
                                }
                                q.comm = json_object_get_string(val);
                        } else if (strcmp(key, "top") == 0) {
                                if (!json_int_in_range(val, 0, UINT32_MAX, &v)) {
                                        error = "top: expected an integer from 0 (server's limit) to 4294967295";
                                        goto fail;
                                }
                                q.top = (uint32_t) v;
                        } else if (strcmp(key, "stacks") == 0) {
                                if (!json_object_is_type(val, json_type_boolean)) {
                                        error = "stacks: expected a boolean";
                                        goto fail;
                                }
                                q.want_stacks = json_object_get_boolean(val);
                        } else if (strcmp(key, "inline") == 0) {
                                if (!json_object_is_type(val, json_type_boolean)) {
                                        error = "inline: expected a boolean";
                                        goto fail;
                                }
                                q.inlined = json_object_get_boolean(val);
                        } else if (bool_flag(&q, key)) {
                                if (!json_object_is_type(val, json_type_boolean)) {
                                        snprintf(bool_error, sizeof bool_error, "%s: expected a boolean", key);
                                        error = bool_error;
                                        goto fail;
                                }
                                *bool_flag(&q, key) = json_object_get_boolean(val);
                        } else if (strcmp(key, "timeline") == 0) {
                                if (!json_int_in_range(val, 0, QUERY_TIMELINE_MAX, &v)) {
                                        error = "timeline: expected a number of slots from 0 (none) to 2000";
                                        goto fail;
                                }
                                q.timeline = (uint32_t) v;
                        } else if (strcmp(key, "dso") == 0) {
                                int len;

                                if (!json_object_is_type(val, json_type_string)) {
                                        error = "dso: expected a string";
                                        goto fail;
                                }
                                len = json_object_get_string_len(val);
                                if (len < 1 || len > QUERY_DSO_MAX ||
                                    strlen(json_object_get_string(val)) != (size_t) len) {
                                        error = "dso: expected a name or path of 1 to 4096 bytes without NUL";
                                        goto fail;
                                }
                                q.dso = json_object_get_string(val);
                        } else if (strcmp(key, "unit") == 0 || strcmp(key, "cgroup") == 0 ||
                                   strcmp(key, "container") == 0) {
                                /* A glob, a path prefix, hex digits. */
                                const int max = key[1] == 'n' ? 256 : key[1] == 'g' ? 4096 : 64;
                                const char *str = json_object_is_type(val, json_type_string) ? json_object_get_string(val) : NULL;
                                int len = str ? json_object_get_string_len(val) : 0;
                                bool hex = true;

                                for (int i = 0; str && i < len; i++)
                                        hex = hex && ((str[i] >= '0' && str[i] <= '9') || (str[i] >= 'a' && str[i] <= 'f'));
                                if (!str || len < 1 || len > max || strlen(str) != (size_t) len || (key[1] == 'o' && !hex)) {
                                        error = key[1] == 'n' ? "unit: expected a unit name or glob of 1 to 256 bytes without NUL"
                                                : key[1] == 'g' ? "cgroup: expected a cgroup path of 1 to 4096 bytes without NUL"
                                                                : "container: expected 1 to 64 lower-case hex digits of a container id";
                                        goto fail;
                                }
                                *(key[1] == 'n' ? &q.unit : key[1] == 'g' ? &q.cgroup : &q.container) = str;
                        } else if (strcmp(key, "type") == 0) {
                                const char *t = json_object_is_type(val, json_type_string) ? json_object_get_string(val) : "";

                                if (strcmp(t, "cpu") == 0)
                                        q.kind = SAMPLE_KIND_CPU;
                                else if (strcmp(t, "offcpu") == 0)
                                        q.kind = SAMPLE_KIND_OFFCPU;
                                else {
                                        error = "type: expected \"cpu\" or \"offcpu\"";
                                        goto fail;
                                }
                        } else if (strcmp(key, "frames") == 0) {
                                const char *f = json_object_is_type(val, json_type_string) ? json_object_get_string(val) : "";

                                if (strcmp(f, "all") == 0)
                                        q.frames = QUERY_FRAMES_ALL;
                                else if (strcmp(f, "kernel") == 0)
                                        q.frames = QUERY_FRAMES_KERNEL;
                                else if (strcmp(f, "user") == 0)
                                        q.frames = QUERY_FRAMES_USER;
                                else {
                                        error = "frames: expected \"all\", \"kernel\" or \"user\"";
                                        goto fail;
                                }
                        } else {
                                error = unknown_field_error(key);
                                goto fail;
                        }
                }
        }

        if (q.since_ns > 0 && q.until_ns > 0 && q.until_ns <= q.since_ns) {
                error = "until_ns: must be later than since_ns";
                goto fail;
        }
        if (q.timeline > 0 && (q.since_ns == 0 || q.until_ns == 0)) {
                error = "timeline: needs since_ns and until_ns";
                goto fail;
        }
        if (q.shapes && (!q.raw || !q.want_stacks)) {
                error = "shapes: needs raw and stacks";
                goto fail;
        }
        if (q.cgroup_totals && (!q.by_cgroup || q.want_stacks)) {
                error = "cgroup_totals: needs by_cgroup and no stacks";
                goto fail;
        }
        if (q.by_tid && q.timeline > 128) {
                error = "by_tid: needs a timeline of at most 128 slots";
                goto fail;
        }

        *ret = q;
        return 0;

fail:
        if (ret_error)
                *ret_error = error;
        return -EINVAL;
}

static int add(struct json_object *o, const char *key, struct json_object *v) {
        if (!v || json_object_object_add(o, key, v) < 0) {
                json_object_put(v);
                return -ENOMEM;
        }
        return 0;
}

struct json_object *query_params_to_json(const query_params *q) {
        _cleanup_(json_object_putp) struct json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        if (add(o, "since_ns", json_object_new_uint64(q->since_ns)) < 0 ||
            add(o, "until_ns", json_object_new_uint64(q->until_ns)) < 0)
                return NULL;
        if (q->pid >= 0 && add(o, "pid", json_object_new_int64(q->pid)) < 0)
                return NULL;
        if (q->cpu >= 0 && add(o, "cpu", json_object_new_int64(q->cpu)) < 0)
                return NULL;
        if (q->comm && add(o, "comm", json_object_new_string(q->comm)) < 0)
                return NULL;
        if (q->top > 0 && add(o, "top", json_object_new_int64(q->top)) < 0)
                return NULL;
        if (q->want_stacks && add(o, "stacks", json_object_new_boolean(1)) < 0)
                return NULL;
        if (q->dso && add(o, "dso", json_object_new_string(q->dso)) < 0)
                return NULL;
        if (q->kind == SAMPLE_KIND_OFFCPU && add(o, "type", json_object_new_string("offcpu")) < 0)
                return NULL;
        if ((q->unit && add(o, "unit", json_object_new_string(q->unit)) < 0) ||
            (q->cgroup && add(o, "cgroup", json_object_new_string(q->cgroup)) < 0) ||
            (q->container && add(o, "container", json_object_new_string(q->container)) < 0) ||
            (q->by_cgroup && add(o, "by_cgroup", json_object_new_boolean(1)) < 0) ||
            (q->no_comm && add(o, "no_comm", json_object_new_boolean(1)) < 0) ||
            (q->cgroup_totals && add(o, "cgroup_totals", json_object_new_boolean(1)) < 0))
                return NULL;
        if (q->inlined && add(o, "inline", json_object_new_boolean(1)) < 0)
                return NULL;
        if ((q->by_pid && add(o, "by_pid", json_object_new_boolean(1)) < 0) ||
            (q->by_cpu && add(o, "by_cpu", json_object_new_boolean(1)) < 0) ||
            (q->want_modules && add(o, "modules", json_object_new_boolean(1)) < 0) ||
            (q->packed && add(o, "packed", json_object_new_boolean(1)) < 0) ||
            (q->offsets && add(o, "offsets", json_object_new_boolean(1)) < 0) ||
            (q->raw && add(o, "raw", json_object_new_boolean(1)) < 0) ||
            (q->by_tid && add(o, "by_tid", json_object_new_boolean(1)) < 0) ||
            (q->shapes && add(o, "shapes", json_object_new_boolean(1)) < 0) ||
            (q->timeline > 0 && add(o, "timeline", json_object_new_int64(q->timeline)) < 0))
                return NULL;
        if (q->frames != QUERY_FRAMES_ALL &&
            add(o, "frames", json_object_new_string(q->frames == QUERY_FRAMES_KERNEL ? "kernel" : "user")) < 0)
                return NULL;
        return TAKE_PTR(o);
}

static int append(struct json_object *array, struct json_object *item) {
        if (!item || json_object_array_add(array, item) < 0) {
                json_object_put(item);
                return -ENOMEM;
        }
        return 0;
}

static struct json_object *row_to_json(const query_row *row) {
        _cleanup_(json_object_putp) struct json_object *o = json_object_new_object();

        if (!o ||
            add(o, "comm", json_object_new_string(row->comm ? row->comm : "")) < 0 ||
            add(o, "module", json_object_new_string(row->module ? row->module : "")) < 0 ||
            add(o, "symbol", json_object_new_string(row->symbol ? row->symbol : "")) < 0 ||
            (row->inlined && add(o, "inlined", json_object_new_string(row->inlined)) < 0) ||
            add(o, "kernel", json_object_new_boolean(row->kernel)) < 0 ||
            add(o, "samples", json_object_new_uint64(row->samples)) < 0 ||
            (row->cgroup && add(o, "cgroup", json_object_new_string(row->cgroup)) < 0))
                return NULL;
        return TAKE_PTR(o);
}

static struct json_object *cgroup_total_to_json(const query_cgroup_total *t) {
        _cleanup_(json_object_putp) struct json_object *o = json_object_new_object();

        if (!o ||
            add(o, "cgroup", json_object_new_string(t->cgroup ?: "")) < 0 ||
            add(o, "samples", json_object_new_uint64(t->samples)) < 0 ||
            add(o, "kernel", json_object_new_uint64(t->kernel)) < 0 ||
            add(o, "top", row_to_json(&t->top)) < 0)
                return NULL;
        return TAKE_PTR(o);
}

/* A packed stack's indices: "3 17 22" (one JSON value per stack, not one
 * per frame). */
static void add_ids(proto_buf *b, const uint32_t *v, size_t n) {
        proto_buf_add(b, "\"", 1);
        for (size_t i = 0; i < n; i++) {
                if (i > 0)
                        proto_buf_add(b, " ", 1);
                proto_buf_add_u64(b, v[i]);
        }
        proto_buf_add(b, "\"", 1);
}

/* A raw stack's addresses: "ffffffff81a00010 2a1b4" (hex). */
static void add_addrs(proto_buf *b, const uint64_t *v, size_t n) {
        proto_buf_add(b, "\"", 1);
        for (size_t i = 0; i < n; i++) {
                if (i > 0)
                        proto_buf_add(b, " ", 1);
                proto_buf_add_hex(b, v[i]);
        }
        proto_buf_add(b, "\"", 1);
}

/* The quoted string in b as a JSON string (without the quotes); frees b. */
static struct json_object *quoted_to_json(proto_buf *b) {
        struct json_object *o = NULL;

        if (!b->failed)
                o = json_object_new_string_len(b->data + 1, (int) b->len - 2);
        free(b->data);
        return o;
}

static struct json_object *addrs_to_json(const uint64_t *v, size_t n) {
        proto_buf b = {};

        add_addrs(&b, v, n);
        return quoted_to_json(&b);
}

static struct json_object *ids_to_json(const uint32_t *v, size_t n) {
        proto_buf b = {};

        add_ids(&b, v, n);
        return quoted_to_json(&b);
}

static struct json_object *stack_to_json(const query_stack *st) {
        _cleanup_(json_object_putp) struct json_object *o = json_object_new_object();
        struct json_object *frames;

        if (!o || add(o, "comm", json_object_new_string(st->comm ? st->comm : "")) < 0)
                return NULL;
        if (st->name_ids) {
                if (add(o, "frame_ids", ids_to_json(st->name_ids, st->n_frames)) < 0)
                        return NULL;
                goto scalars;
        }
        frames = json_object_new_array_ext((int) MIN(st->n_frames, (size_t) INT32_MAX));
        if (add(o, "frames", frames) < 0)
                return NULL;
        for (size_t i = 0; i < st->n_frames; i++) {
                struct json_object *f = json_object_new_string(st->frames[i] ? st->frames[i] : "");
                if (!f || json_object_array_add(frames, f) < 0) {
                        json_object_put(f);
                        return NULL;
                }
        }
scalars:
        if (add(o, "samples", json_object_new_uint64(st->samples)) < 0 ||
            add(o, "kernel_frames", json_object_new_uint64(st->n_kernel)) < 0 ||
            (st->pid >= 0 && add(o, "pid", json_object_new_int64(st->pid)) < 0) ||
            (st->tid >= 0 && add(o, "tid", json_object_new_int64(st->tid)) < 0) ||
            (st->cpu >= 0 && add(o, "cpu", json_object_new_int64(st->cpu)) < 0) ||
            (st->slot >= 0 && add(o, "slot", json_object_new_int64(st->slot)) < 0) ||
            (st->cgroup && add(o, "cgroup", json_object_new_string(st->cgroup)) < 0))
                return NULL;
        if (st->modules && st->name_ids) {
                if (add(o, "module_ids", ids_to_json(st->modules, st->n_frames)) < 0)
                        return NULL;
        } else if (st->modules) {
                struct json_object *m = json_object_new_array_ext((int) MIN(st->n_frames, (size_t) INT32_MAX));

                if (add(o, "modules", m) < 0)
                        return NULL;
                for (size_t i = 0; i < st->n_frames; i++)
                        if (append(m, json_object_new_uint64(st->modules[i])) < 0)
                                return NULL;
        }
        if (st->addrs && add(o, "addrs", addrs_to_json(st->addrs, st->n_frames)) < 0)
                return NULL;
        return TAKE_PTR(o);
}

/* Shapes (query_params.shapes) go SHAPES_PER_STRING to a string, one
 * comma apart, each "K A1 .. An|M1 .. Mn": its kernel frames, its
 * frames' addresses (hex), and with modules their indices. */
#define SHAPES_PER_STRING 16

static void add_shapes(proto_buf *b, const query_result *r, size_t k) {
        proto_buf_add(b, "\"", 1);
        for (size_t i = k * SHAPES_PER_STRING; i < r->n_shapes && i < (k + 1) * SHAPES_PER_STRING; i++) {
                const query_stack *st = &r->shapes[i];

                if (i > k * SHAPES_PER_STRING)
                        proto_buf_add(b, ",", 1);
                proto_buf_add_u64(b, st->n_kernel);
                for (size_t j = 0; j < st->n_frames; j++) {
                        proto_buf_add(b, " ", 1);
                        proto_buf_add_hex(b, st->addrs[j]);
                }
                for (size_t j = 0; st->modules && j < st->n_frames; j++) {
                        proto_buf_add(b, j == 0 ? "|" : " ", 1);
                        proto_buf_add_u64(b, st->modules[j]);
                }
                if (st->modules && st->n_frames == 0)
                        proto_buf_add(b, "|", 1);
        }
        proto_buf_add(b, "\"", 1);
}

static size_t shape_strings(const query_result *r) {
        return (r->n_shapes + SHAPES_PER_STRING - 1) / SHAPES_PER_STRING;
}

static struct json_object *shapes_to_json(const query_result *r, size_t k) {
        proto_buf b = {};

        add_shapes(&b, r, k);
        return quoted_to_json(&b);
}

/* Entries go ENTRIES_PER_STRING to a string, one comma apart: one JSON
 * value per entry made json-c most of the cost of reading an export. */
#define ENTRIES_PER_STRING 64

/* The k-th string of r's entries: "shape comm pid tid cpu slot cgroup
 * samples" each (-1: not told apart; cgroup 0: none, else 1 + index). */
static void add_entries(proto_buf *b, const query_result *r, size_t k) {
        proto_buf_add(b, "\"", 1);
        for (size_t i = k * ENTRIES_PER_STRING; i < r->n_entries && i < (k + 1) * ENTRIES_PER_STRING; i++) {
                const query_entry *e = &r->entries[i];
                const int64_t v[] = { e->shape, e->comm, e->pid, e->tid, e->cpu, e->slot, e->cgroup };

                if (i > k * ENTRIES_PER_STRING)
                        proto_buf_add(b, ",", 1);
                for (size_t j = 0; j < ELEMENTSOF(v); j++) {
                        proto_buf_add_i64(b, v[j]);
                        proto_buf_add(b, " ", 1);
                }
                proto_buf_add_u64(b, e->samples);
        }
        proto_buf_add(b, "\"", 1);
}

static size_t entry_strings(const query_result *r) {
        return (r->n_entries + ENTRIES_PER_STRING - 1) / ENTRIES_PER_STRING;
}

static struct json_object *entries_to_json(const query_result *r, size_t k) {
        proto_buf b = {};

        add_entries(&b, r, k);
        return quoted_to_json(&b);
}

/* An array of strings member. */
static int add_strings(struct json_object *o, const char *key, char *const *v, size_t n) {
        struct json_object *a = json_object_new_array_ext((int) MIN(n, (size_t) INT32_MAX));

        if (add(o, key, a) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                if (append(a, json_object_new_string(v[i])) < 0)
                        return -ENOMEM;
        return 0;
}

/* The scalar part of an answer, with empty "rows" (and "stacks",
 * "shapes", "entries" where it has them). */
static struct json_object *result_header_to_json(const query_result *r) {
        _cleanup_(json_object_putp) struct json_object *o = json_object_new_object();

        if (!o ||
            add(o, "total", json_object_new_uint64(r->total_samples)) < 0 ||
            add(o, "first_ns", json_object_new_uint64(r->first_ns)) < 0 ||
            add(o, "last_ns", json_object_new_uint64(r->last_ns)) < 0 ||
            add(o, "cpus", json_object_new_uint64(r->n_cpus)) < 0 ||
            add(o, "lost", json_object_new_uint64(r->lost)) < 0 ||
            add(o, "user_named", json_object_new_uint64(r->user_named)) < 0 ||
            add(o, "user_by_offset", json_object_new_uint64(r->user_by_offset)) < 0 ||
            add(o, "user_unknown", json_object_new_uint64(r->user_unknown)) < 0)
                return NULL;
        if (r->n_timeline > 0) {
                struct json_object *t = json_object_new_array_ext((int) r->n_timeline);

                if (add(o, "timeline_start_ns", json_object_new_uint64(r->timeline_start_ns)) < 0 ||
                    add(o, "timeline_slot_ns", json_object_new_uint64(r->timeline_slot_ns)) < 0 ||
                    add(o, "timeline", t) < 0)
                        return NULL;
                for (size_t i = 0; i < r->n_timeline; i++)
                        if (append(t, json_object_new_uint64(r->timeline[i])) < 0)
                                return NULL;
        }
        if (r->modules) {
                struct json_object *a = json_object_new_array_ext((int) MIN(r->n_modules, (size_t) INT32_MAX));

                if (add(o, "modules", a) < 0)
                        return NULL;
                for (size_t i = 0; i < r->n_modules; i++) {
                        struct json_object *m = json_object_new_object();

                        if (append(a, m) < 0 ||
                            add(m, "name", json_object_new_string(r->modules[i].name)) < 0 ||
                            (r->modules[i].build_id && add(m, "build_id", json_object_new_string(r->modules[i].build_id)) < 0) ||
                            add(m, "kernel", json_object_new_boolean(r->modules[i].kernel)) < 0)
                                return NULL;
                }
        }
        if (r->kernel_build_id &&
            (add(o, "kernel_text", json_object_new_uint64(r->kernel_text)) < 0 ||
             add(o, "kernel_build_id", json_object_new_string(r->kernel_build_id)) < 0))
                return NULL;
        if (r->kcore_snapshot && add(o, "kcore_snapshot", json_object_new_string(r->kcore_snapshot)) < 0)
                return NULL;
        if ((r->names && add_strings(o, "names", r->names, r->n_names) < 0) ||
            (r->comms && add_strings(o, "comms", r->comms, r->n_comms) < 0) ||
            (r->cgroups && add_strings(o, "cgroups", r->cgroups, r->n_cgroups) < 0))
                return NULL;
        if (add(o, "rows", json_object_new_array()) < 0 ||
            (r->n_stacks > 0 && add(o, "stacks", json_object_new_array()) < 0) ||
            (r->n_shapes > 0 && add(o, "shapes", json_object_new_array()) < 0) ||
            (r->n_entries > 0 && add(o, "entries", json_object_new_array()) < 0) ||
            (r->n_cgroup_totals > 0 && add(o, "cgroup_totals", json_object_new_array()) < 0))
                return NULL;
        return TAKE_PTR(o);
}


struct json_object *query_result_to_json(const query_result *r) {
        _cleanup_(json_object_putp) struct json_object *o = result_header_to_json(r);

        if (!o)
                return NULL;
        for (size_t i = 0; i < r->n_rows; i++)
                if (append(json_object_object_get(o, "rows"), row_to_json(&r->rows[i])) < 0)
                        return NULL;
        for (size_t i = 0; i < r->n_stacks; i++)
                if (append(json_object_object_get(o, "stacks"), stack_to_json(&r->stacks[i])) < 0)
                        return NULL;
        for (size_t i = 0; i < shape_strings(r); i++)
                if (append(json_object_object_get(o, "shapes"), shapes_to_json(r, i)) < 0)
                        return NULL;
        for (size_t i = 0; i < entry_strings(r); i++)
                if (append(json_object_object_get(o, "entries"), entries_to_json(r, i)) < 0)
                        return NULL;
        for (size_t i = 0; i < r->n_cgroup_totals; i++)
                if (append(json_object_object_get(o, "cgroup_totals"), cgroup_total_to_json(&r->cgroup_totals[i])) < 0)
                        return NULL;
        return TAKE_PTR(o);
}

/* A required string member, copied. */
static int dup_string(struct json_object *obj, const char *key, char **ret) {
        struct json_object *v;
        char *s;

        if (!json_object_object_get_ex(obj, key, &v) || !json_object_is_type(v, json_type_string))
                return -EBADMSG;
        s = strdup(json_object_get_string(v));
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

static int get_u64(struct json_object *obj, const char *key, bool required, uint64_t max, uint64_t *ret) {
        struct json_object *v;

        if (!json_object_object_get_ex(obj, key, &v) || !v) {
                if (required)
                        return -EBADMSG;
                *ret = 0;
                return 0;
        }
        return proto_json_u64(v, max, ret) < 0 ? -EBADMSG : 0;
}

static int row_from_json(struct json_object *o, query_row *row) {
        struct json_object *k;
        int r;

        if (!json_object_is_type(o, json_type_object))
                return -EBADMSG;
        if ((r = dup_string(o, "comm", &row->comm)) < 0 ||
            (r = dup_string(o, "module", &row->module)) < 0 ||
            (r = dup_string(o, "symbol", &row->symbol)) < 0 ||
            (r = get_u64(o, "samples", true, UINT64_MAX, &row->samples)) < 0)
                return r;
        if (json_object_object_get_ex(o, "inlined", &k) && (r = dup_string(o, "inlined", &row->inlined)) < 0)
                return r;
        if (json_object_object_get_ex(o, "cgroup", &k) && k && (r = dup_string(o, "cgroup", &row->cgroup)) < 0)
                return r;
        if (!json_object_object_get_ex(o, "kernel", &k) || !json_object_is_type(k, json_type_boolean))
                return -EBADMSG;
        row->kernel = json_object_get_boolean(k);
        return 0;
}

static int cgroup_total_from_json(struct json_object *o, query_cgroup_total *t) {
        struct json_object *top;
        int r;

        if (!json_object_is_type(o, json_type_object))
                return -EBADMSG;
        if ((r = dup_string(o, "cgroup", &t->cgroup)) < 0 ||
            (r = get_u64(o, "samples", true, UINT64_MAX, &t->samples)) < 0 ||
            (r = get_u64(o, "kernel", true, t->samples, &t->kernel)) < 0)
                return r;
        if (!json_object_object_get_ex(o, "top", &top) || !top)
                return -EBADMSG;
        return row_from_json(top, &t->top);
}

/* An optional integer member from -1 (absent) to max. */
static int get_opt_index(struct json_object *obj, const char *key, uint64_t max, int64_t *ret) {
        struct json_object *v;
        uint64_t u;

        *ret = -1;
        if (!json_object_object_get_ex(obj, key, &v) || !v)
                return 0;
        if (proto_json_u64(v, max, &u) < 0)
                return -EBADMSG;
        *ret = (int64_t) u;
        return 0;
}

static bool is_digit(char c) {
        return c >= '0' && c <= '9';
}

/* A decimal number below max at *pp, which is moved past it. */
static bool parse_dec(const char **pp, uint64_t max, uint64_t *ret) {
        const char *p = *pp;
        uint64_t x = 0;

        if (!is_digit(*p))
                return false;
        for (; is_digit(*p); p++) {
                x = x * 10 + (uint64_t) (*p - '0');
                if (x >= max)
                        return false;
        }
        *pp = p;
        *ret = x;
        return true;
}

/* The wire's hex digits are lower case. */
static int hex_value(char c) {
        return c >= 'A' && c <= 'F' ? -1 : unhexchar(c);
}

/* 1 to 16 hex digits at *pp, which is moved past them. */
static bool parse_hex(const char **pp, uint64_t *ret) {
        const char *p = *pp;
        uint64_t x = 0;
        unsigned digits = 0;

        for (; hex_value(*p) >= 0; p++, digits++)
                x = x << 4 | (uint64_t) hex_value(*p);
        if (digits == 0 || digits > 16)
                return false;
        *pp = p;
        *ret = x;
        return true;
}

/* A packed stack's "3 17 22": decimal indices below max, one space
 * apart. *ret: n entries (allocated even for none). */
static int ids_from_json(struct json_object *v, uint64_t max, uint32_t **ret, size_t *ret_n) {
        const char *p;
        size_t n = 0, alloc;
        uint32_t *ids;

        if (!json_object_is_type(v, json_type_string))
                return -EBADMSG;
        p = json_object_get_string(v);
        alloc = (size_t) json_object_get_string_len(v) / 2 + 1;
        ids = calloc(alloc, sizeof(uint32_t));
        if (!ids)
                return -ENOMEM;
        while (*p) {
                uint64_t x;

                if ((n > 0 && *p++ != ' ') || !parse_dec(&p, max, &x))
                        goto bad;
                ids[n++] = (uint32_t) x;
        }
        *ret = ids;
        *ret_n = n;
        return 0;
bad:
        free(ids);
        return -EBADMSG;
}

/* A raw stack's "ffffffff81a00010 2a1b4": exactly n hex numbers. */
static int addrs_from_json(struct json_object *v, uint64_t **ret, size_t n) {
        const char *p;
        uint64_t *a;
        size_t k = 0;

        if (!json_object_is_type(v, json_type_string))
                return -EBADMSG;
        p = json_object_get_string(v);
        a = calloc(MAX(n, (size_t) 1), sizeof(uint64_t));
        if (!a)
                return -ENOMEM;
        while (*p) {
                uint64_t x;

                if ((k > 0 && *p++ != ' ') || !parse_hex(&p, &x) || k >= n)
                        goto bad;
                a[k++] = x;
        }
        if (k != n)
                goto bad;
        *ret = a;
        return 0;
bad:
        free(a);
        return -EBADMSG;
}

static int stack_from_json(struct json_object *o, query_stack *st, const query_result *res) {
        struct json_object *frames, *mods;
        uint64_t n_kernel;
        int64_t pid, tid, cpu, slot;
        size_t n;
        int r;

        st->pid = st->tid = st->cpu = st->slot = -1;
        if (!json_object_is_type(o, json_type_object))
                return -EBADMSG;
        if ((r = dup_string(o, "comm", &st->comm)) < 0 ||
            (r = get_u64(o, "samples", true, UINT64_MAX, &st->samples)) < 0 ||
            (r = get_u64(o, "kernel_frames", false, UINT32_MAX, &n_kernel)) < 0 ||
            (r = get_opt_index(o, "pid", UINT32_MAX, &pid)) < 0 ||
            (r = get_opt_index(o, "tid", UINT32_MAX, &tid)) < 0 ||
            (r = get_opt_index(o, "cpu", QUERY_CPU_MAX, &cpu)) < 0 ||
            (r = get_opt_index(o, "slot", QUERY_TIMELINE_MAX - 1, &slot)) < 0)
                return r;
        st->pid = pid;
        st->tid = tid;
        st->cpu = (int32_t) cpu;
        st->slot = (int32_t) slot;
        if (json_object_object_get_ex(o, "cgroup", &frames) && frames && (r = dup_string(o, "cgroup", &st->cgroup)) < 0)
                return r;

        if (json_object_object_get_ex(o, "frame_ids", &frames) && frames) {
                /* Packed: the frames are the answer's names. */
                r = ids_from_json(frames, res->n_names, &st->name_ids, &n);
                if (r < 0)
                        return r;
                st->frames = calloc(MAX(n, (size_t) 1), sizeof(char *));
                if (!st->frames)
                        return -ENOMEM;
                st->borrowed = true;
                for (size_t i = 0; i < n; i++)
                        st->frames[i] = res->names[st->name_ids[i]];
                st->n_frames = n;
        } else {
                if (!json_object_object_get_ex(o, "frames", &frames) || !json_object_is_type(frames, json_type_array))
                        return -EBADMSG;
                n = json_object_array_length(frames);
                st->frames = calloc(MAX(n, (size_t) 1), sizeof(char *));
                if (!st->frames)
                        return -ENOMEM;
                for (size_t i = 0; i < n; i++) {
                        struct json_object *f = json_object_array_get_idx(frames, i);

                        if (!json_object_is_type(f, json_type_string))
                                return -EBADMSG;
                        st->frames[i] = strdup(json_object_get_string(f));
                        if (!st->frames[i])
                                return -ENOMEM;
                        st->n_frames = i + 1;
                }
        }
        if (n_kernel > n)
                return -EBADMSG;
        st->n_kernel = (size_t) n_kernel;

        if (json_object_object_get_ex(o, "addrs", &mods) && mods) {
                r = addrs_from_json(mods, &st->addrs, n);
                if (r < 0)
                        return r;
        }
        if (json_object_object_get_ex(o, "module_ids", &mods) && mods) {
                size_t m;

                r = ids_from_json(mods, res->n_modules, &st->modules, &m);
                if (r < 0)
                        return r;
                return m == n ? 0 : -EBADMSG;
        }
        if (!json_object_object_get_ex(o, "modules", &mods) || !mods)
                return 0;
        if (!json_object_is_type(mods, json_type_array) || json_object_array_length(mods) != n)
                return -EBADMSG;
        st->modules = calloc(MAX(n, (size_t) 1), sizeof(uint32_t));
        if (!st->modules)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                uint64_t m;

                if (proto_json_u64(json_object_array_get_idx(mods, i), UINT32_MAX, &m) < 0 || m >= res->n_modules)
                        return -EBADMSG;
                st->modules[i] = (uint32_t) m;
        }
        return 0;
}

/* An array of strings member (names, comms), copied. */
static int strings_from_json(struct json_object *obj, const char *key, char ***ret, size_t *ret_n) {
        struct json_object *a;
        size_t n;

        if (!json_object_object_get_ex(obj, key, &a) || !a)
                return 0;
        if (!json_object_is_type(a, json_type_array))
                return -EBADMSG;
        n = json_object_array_length(a);
        *ret = calloc(MAX(n, (size_t) 1), sizeof(char *));
        if (!*ret)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                struct json_object *v = json_object_array_get_idx(a, i);

                if (!json_object_is_type(v, json_type_string))
                        return -EBADMSG;
                (*ret)[i] = strdup(json_object_get_string(v));
                if (!(*ret)[i])
                        return -ENOMEM;
                *ret_n = i + 1;
        }
        return 0;
}

/* One shape at *pp (see add_shapes()); *pp is moved past it. */
static int shape_parse(const char **pp, query_stack *st, const query_result *res) {
        const char *p = *pp;
        uint64_t n_kernel;
        size_t n = 0;

        st->pid = st->tid = st->cpu = st->slot = -1;
        if (!parse_dec(&p, UINT32_MAX, &n_kernel))
                return -EBADMSG;
        for (const char *q = p; *q == ' '; n++)
                for (q++; hex_value(*q) >= 0; q++)
                        ;
        st->addrs = calloc(MAX(n, (size_t) 1), sizeof(uint64_t));
        if (!st->addrs)
                return -ENOMEM;
        for (size_t j = 0; j < n; j++) {
                p++;    /* the space */
                if (!parse_hex(&p, &st->addrs[j]))
                        return -EBADMSG;
        }
        st->n_frames = n;
        if (n_kernel > n)
                return -EBADMSG;
        st->n_kernel = (size_t) n_kernel;
        if (*p == '|') {
                p++;
                st->modules = calloc(MAX(n, (size_t) 1), sizeof(uint32_t));
                if (!st->modules)
                        return -ENOMEM;
                for (size_t j = 0; j < n; j++) {
                        uint64_t m;

                        if ((j > 0 && *p++ != ' ') || !parse_dec(&p, res->n_modules, &m))
                                return -EBADMSG;
                        st->modules[j] = (uint32_t) m;
                }
        }
        if (*p && *p != ',')
                return -EBADMSG;
        *pp = p;
        return 0;
}

/* Appends the shape at *pp to r's. */
static int shape_append(const char **pp, query_result *r, size_t *alloc) {
        int k = array_reserve_one((void **) &r->shapes, alloc, r->n_shapes, sizeof(query_stack));

        if (k < 0)
                return k;
        r->shapes[r->n_shapes] = (query_stack) {};
        r->n_shapes++;  /* counted first: freed with r whatever follows */
        return shape_parse(pp, &r->shapes[r->n_shapes - 1], r);
}

/* One entry at *pp, "shape comm pid tid cpu slot cgroup samples", each
 * index in range; *pp is moved past it. */
static int entry_parse(const char **pp, query_entry *e, const query_result *res) {
        const char *p = *pp;
        int64_t x[8];

        for (size_t i = 0; i < ELEMENTSOF(x); i++) {
                char *end;

                if ((i > 0 && *p++ != ' ') || !(*p == '-' || (*p >= '0' && *p <= '9')))
                        return -EBADMSG;
                errno = 0;
                x[i] = strtoll(p, &end, 10);
                if (errno != 0)
                        return -EBADMSG;
                p = end;
        }
        if ((*p && *p != ',') || x[0] < 0 || (uint64_t) x[0] >= res->n_shapes || x[1] < 0 || (uint64_t) x[1] >= res->n_comms ||
            x[2] < -1 || x[2] > UINT32_MAX || x[3] < -1 || x[3] > UINT32_MAX || x[4] < -1 || x[4] > QUERY_CPU_MAX ||
            x[5] < -1 || x[5] >= (int64_t) res->n_timeline || x[6] < 0 || (uint64_t) x[6] > res->n_cgroups || x[7] < 1)
                return -EBADMSG;
        *e = (query_entry) {
                .shape = (uint32_t) x[0],
                .comm = (uint32_t) x[1],
                .pid = x[2],
                .tid = x[3],
                .cpu = (int32_t) x[4],
                .slot = (int32_t) x[5],
                .cgroup = (uint32_t) x[6],
                .samples = (uint64_t) x[7],
        };
        *pp = p;
        return 0;
}

/* Appends the entry at *pp to r's. */
static int entry_append(const char **pp, query_result *r, size_t *alloc) {
        int k = array_reserve_one((void **) &r->entries, alloc, r->n_entries, sizeof(query_entry));

        if (k < 0)
                return k;
        k = entry_parse(pp, &r->entries[r->n_entries], r);
        if (k >= 0)
                r->n_entries++;
        return k;
}

/* The array member key of packed items ("shapes", "entries"): strings of
 * 1 to per_string items one comma apart, each appended to r by append_one(). */
static int packed_from_json(struct json_object *obj, const char *key, size_t per_string,
                            int (*append_one)(const char **pp, query_result *r, size_t *alloc), query_result *r) {
        struct json_object *a;
        size_t alloc = 0;

        if (!json_object_object_get_ex(obj, key, &a) || !a)
                return 0;
        if (!json_object_is_type(a, json_type_array))
                return -EBADMSG;
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                struct json_object *v = json_object_array_get_idx(a, i);
                const char *p;
                size_t n;
                int k;

                if (!json_object_is_type(v, json_type_string))
                        return -EBADMSG;
                p = json_object_get_string(v);
                for (n = 0; n < per_string; n++) {
                        k = append_one(&p, r, &alloc);
                        if (k < 0)
                                return k;
                        if (!*p)
                                break;
                        p++;    /* the comma */
                }
                if (n == per_string)
                        return -EBADMSG;
        }
        return 0;
}

static int modules_from_json(struct json_object *obj, query_result *r) {
        struct json_object *a;
        size_t n;
        int k;

        if (!json_object_object_get_ex(obj, "modules", &a) || !a)
                return 0;
        if (!json_object_is_type(a, json_type_array))
                return -EBADMSG;
        n = json_object_array_length(a);
        r->modules = calloc(MAX(n, (size_t) 1), sizeof(query_module));
        if (!r->modules)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                struct json_object *m = json_object_array_get_idx(a, i), *v;

                if (!json_object_is_type(m, json_type_object))
                        return -EBADMSG;
                r->n_modules = i + 1;
                if ((k = dup_string(m, "name", &r->modules[i].name)) < 0)
                        return k;
                if (json_object_object_get_ex(m, "build_id", &v) && v &&
                    (k = dup_string(m, "build_id", &r->modules[i].build_id)) < 0)
                        return k;
                if (!json_object_object_get_ex(m, "kernel", &v) || !json_object_is_type(v, json_type_boolean))
                        return -EBADMSG;
                r->modules[i].kernel = json_object_get_boolean(v);
        }
        return 0;
}

static int timeline_from_json(struct json_object *obj, query_result *r) {
        struct json_object *a;
        size_t n;
        int k;

        if (!json_object_object_get_ex(obj, "timeline", &a) || !a)
                return 0;
        if (!json_object_is_type(a, json_type_array))
                return -EBADMSG;
        n = json_object_array_length(a);
        if (n == 0 || n > QUERY_TIMELINE_MAX)
                return -EBADMSG;
        if ((k = get_u64(obj, "timeline_start_ns", true, UINT64_MAX, &r->timeline_start_ns)) < 0 ||
            (k = get_u64(obj, "timeline_slot_ns", true, UINT64_MAX, &r->timeline_slot_ns)) < 0)
                return k;
        r->timeline = calloc(n, sizeof(uint64_t));
        if (!r->timeline)
                return -ENOMEM;
        r->n_timeline = (uint32_t) n;
        for (size_t i = 0; i < n; i++)
                if (proto_json_u64(json_object_array_get_idx(a, i), UINT64_MAX, &r->timeline[i]) < 0)
                        return -EBADMSG;
        return 0;
}

int query_result_from_json(struct json_object *obj, query_result **ret) {
        _cleanup_(query_result_freep) query_result *r = NULL;
        struct json_object *rows, *stacks, *totals;
        uint64_t cpus;
        size_t n;
        int k;

        if (!json_object_is_type(obj, json_type_object))
                return -EBADMSG;

        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;

        if ((k = get_u64(obj, "total", true, UINT64_MAX, &r->total_samples)) < 0 ||
            (k = get_u64(obj, "first_ns", false, UINT64_MAX, &r->first_ns)) < 0 ||
            (k = get_u64(obj, "last_ns", false, UINT64_MAX, &r->last_ns)) < 0 ||
            (k = get_u64(obj, "cpus", false, UINT32_MAX, &cpus)) < 0 ||
            (k = get_u64(obj, "lost", false, UINT64_MAX, &r->lost)) < 0 ||
            (k = get_u64(obj, "user_named", false, UINT64_MAX, &r->user_named)) < 0 ||
            (k = get_u64(obj, "user_by_offset", false, UINT64_MAX, &r->user_by_offset)) < 0 ||
            (k = get_u64(obj, "user_unknown", false, UINT64_MAX, &r->user_unknown)) < 0)
                return k;
        r->n_cpus = (uint32_t) cpus;
        if ((k = modules_from_json(obj, r)) < 0 || (k = timeline_from_json(obj, r)) < 0 ||
            (k = strings_from_json(obj, "names", &r->names, &r->n_names)) < 0 ||
            (k = strings_from_json(obj, "comms", &r->comms, &r->n_comms)) < 0 ||
            (k = strings_from_json(obj, "cgroups", &r->cgroups, &r->n_cgroups)) < 0 ||
            (k = get_u64(obj, "kernel_text", false, UINT64_MAX, &r->kernel_text)) < 0)
                return k;
        if (json_object_object_get_ex(obj, "kcore_snapshot", &stacks) && stacks &&
            (k = dup_string(obj, "kcore_snapshot", &r->kcore_snapshot)) < 0)
                return k;
        if (json_object_object_get_ex(obj, "kernel_build_id", &stacks) && stacks &&
            (k = dup_string(obj, "kernel_build_id", &r->kernel_build_id)) < 0)
                return k;

        if (!json_object_object_get_ex(obj, "rows", &rows) || !json_object_is_type(rows, json_type_array))
                return -EBADMSG;
        n = json_object_array_length(rows);
        if (n > 0) {
                r->rows = calloc(n, sizeof(query_row));
                if (!r->rows)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                /* Count the row before filling it so a half-built one is freed. */
                r->n_rows = i + 1;
                k = row_from_json(json_object_array_get_idx(rows, i), &r->rows[i]);
                if (k < 0)
                        return k;
        }

        if (json_object_object_get_ex(obj, "stacks", &stacks) && stacks) {
                if (!json_object_is_type(stacks, json_type_array))
                        return -EBADMSG;
                n = json_object_array_length(stacks);
                if (n > 0) {
                        r->stacks = calloc(n, sizeof(query_stack));
                        if (!r->stacks)
                                return -ENOMEM;
                }
                for (size_t i = 0; i < n; i++) {
                        r->n_stacks = i + 1;
                        k = stack_from_json(json_object_array_get_idx(stacks, i), &r->stacks[i], r);
                        if (k < 0)
                                return k;
                        /* A slot is one of the answer's timeline. */
                        if (r->stacks[i].slot >= 0 && (uint32_t) r->stacks[i].slot >= r->n_timeline)
                                return -EBADMSG;
                }
        }

        if ((k = packed_from_json(obj, "shapes", SHAPES_PER_STRING, shape_append, r)) < 0 ||
            (k = packed_from_json(obj, "entries", ENTRIES_PER_STRING, entry_append, r)) < 0)
                return k;

        if (json_object_object_get_ex(obj, "cgroup_totals", &totals) && totals) {
                if (!json_object_is_type(totals, json_type_array))
                        return -EBADMSG;
                n = json_object_array_length(totals);
                if (n > 0) {
                        r->cgroup_totals = calloc(n, sizeof(query_cgroup_total));
                        if (!r->cgroup_totals)
                                return -ENOMEM;
                }
                for (size_t i = 0; i < n; i++) {
                        r->n_cgroup_totals = i + 1;
                        k = cgroup_total_from_json(json_object_array_get_idx(totals, i), &r->cgroup_totals[i]);
                        if (k < 0)
                                return k;
                }
        }

        *ret = TAKE_PTR(r);
        return 0;
}

static void strv_freep(char ***strv) {
        if (!*strv)
                return;
        for (char **s = *strv; *s; s++)
                free(*s);
        free(*strv);
}

/* The answer is written by hand, not through json-c: a tree of 20,000
 * stacks of 30 frames took 46 MB for a 1.7 MB answer. The bytes are those
 * of proto_format_reply(query_result_to_json()) (test-query-json checks). */

static void render_row(proto_buf *b, const query_row *row) {
        proto_buf_add_str(b, "{\"comm\":");
        proto_buf_add_json_string(b, row->comm ?: "");
        proto_buf_add_str(b, ",\"module\":");
        proto_buf_add_json_string(b, row->module ?: "");
        proto_buf_add_str(b, ",\"symbol\":");
        proto_buf_add_json_string(b, row->symbol ?: "");
        if (row->inlined) {
                proto_buf_add_str(b, ",\"inlined\":");
                proto_buf_add_json_string(b, row->inlined);
        }
        proto_buf_add_str(b, row->kernel ? ",\"kernel\":true,\"samples\":" : ",\"kernel\":false,\"samples\":");
        proto_buf_add_u64(b, row->samples);
        if (row->cgroup) {
                proto_buf_add_str(b, ",\"cgroup\":");
                proto_buf_add_json_string(b, row->cgroup);
        }
        proto_buf_add_str(b, "}");
}

static void render_cgroup_total(proto_buf *b, const query_cgroup_total *t) {
        proto_buf_add_str(b, "{\"cgroup\":");
        proto_buf_add_json_string(b, t->cgroup ?: "");
        proto_buf_add_str(b, ",\"samples\":");
        proto_buf_add_u64(b, t->samples);
        proto_buf_add_str(b, ",\"kernel\":");
        proto_buf_add_u64(b, t->kernel);
        proto_buf_add_str(b, ",\"top\":");
        render_row(b, &t->top);
        proto_buf_add_str(b, "}");
}

static void render_stack(proto_buf *b, const query_stack *st) {
        proto_buf_add_str(b, "{\"comm\":");
        proto_buf_add_json_string(b, st->comm ?: "");
        if (st->name_ids) {
                proto_buf_add_str(b, ",\"frame_ids\":");
                add_ids(b, st->name_ids, st->n_frames);
        } else {
                proto_buf_add_str(b, ",\"frames\":[");
                for (size_t i = 0; i < st->n_frames; i++) {
                        if (i > 0)
                                proto_buf_add_str(b, ",");
                        proto_buf_add_json_string(b, st->frames[i] ?: "");
                }
                proto_buf_add_str(b, "]");
        }
        proto_buf_add_str(b, ",\"samples\":");
        proto_buf_add_u64(b, st->samples);
        proto_buf_add_str(b, ",\"kernel_frames\":");
        proto_buf_add_u64(b, st->n_kernel);
        if (st->pid >= 0) {
                proto_buf_add_str(b, ",\"pid\":");
                proto_buf_add_u64(b, (uint64_t) st->pid);
        }
        if (st->tid >= 0) {
                proto_buf_add_str(b, ",\"tid\":");
                proto_buf_add_u64(b, (uint64_t) st->tid);
        }
        if (st->cpu >= 0) {
                proto_buf_add_str(b, ",\"cpu\":");
                proto_buf_add_u64(b, (uint64_t) st->cpu);
        }
        if (st->slot >= 0) {
                proto_buf_add_str(b, ",\"slot\":");
                proto_buf_add_u64(b, (uint64_t) st->slot);
        }
        if (st->cgroup) {
                proto_buf_add_str(b, ",\"cgroup\":");
                proto_buf_add_json_string(b, st->cgroup);
        }
        if (st->modules && st->name_ids) {
                proto_buf_add_str(b, ",\"module_ids\":");
                add_ids(b, st->modules, st->n_frames);
        } else if (st->modules) {
                proto_buf_add_str(b, ",\"modules\":[");
                for (size_t i = 0; i < st->n_frames; i++) {
                        if (i > 0)
                                proto_buf_add_str(b, ",");
                        proto_buf_add_u64(b, st->modules[i]);
                }
                proto_buf_add_str(b, "]");
        }
        if (st->addrs) {
                proto_buf_add_str(b, ",\"addrs\":");
                add_addrs(b, st->addrs, st->n_frames);
        }
        proto_buf_add_str(b, "}");
}

/* start, the strings of v one comma apart, "]". */
static void render_strings(proto_buf *b, const char *start, char *const *v, size_t n) {
        proto_buf_add_str(b, start);
        for (size_t i = 0; i < n; i++) {
                if (i > 0)
                        proto_buf_add_str(b, ",");
                proto_buf_add_json_string(b, v[i]);
        }
        proto_buf_add_str(b, "]");
}

/* The parameters up to the first row: {"total":..,...,"rows":[; the
 * names of packed stacks only in the first message (first). */
static void render_header(proto_buf *b, const query_result *r, bool first) {
        const struct { const char *key; uint64_t v; } f[] = {
                { "{\"total\":", r->total_samples },
                { ",\"first_ns\":", r->first_ns },
                { ",\"last_ns\":", r->last_ns },
                { ",\"cpus\":", r->n_cpus },
                { ",\"lost\":", r->lost },
                { ",\"user_named\":", r->user_named },
                { ",\"user_by_offset\":", r->user_by_offset },
                { ",\"user_unknown\":", r->user_unknown },
        };

        for (size_t i = 0; i < ELEMENTSOF(f); i++) {
                proto_buf_add_str(b, f[i].key);
                proto_buf_add_u64(b, f[i].v);
        }
        if (r->n_timeline > 0) {
                proto_buf_add_str(b, ",\"timeline_start_ns\":");
                proto_buf_add_u64(b, r->timeline_start_ns);
                proto_buf_add_str(b, ",\"timeline_slot_ns\":");
                proto_buf_add_u64(b, r->timeline_slot_ns);
                proto_buf_add_str(b, ",\"timeline\":[");
                for (size_t i = 0; i < r->n_timeline; i++) {
                        if (i > 0)
                                proto_buf_add_str(b, ",");
                        proto_buf_add_u64(b, r->timeline[i]);
                }
                proto_buf_add_str(b, "]");
        }
        if (r->modules) {
                proto_buf_add_str(b, ",\"modules\":[");
                for (size_t i = 0; i < r->n_modules; i++) {
                        proto_buf_add_str(b, i > 0 ? ",{\"name\":" : "{\"name\":");
                        proto_buf_add_json_string(b, r->modules[i].name);
                        if (r->modules[i].build_id) {
                                proto_buf_add_str(b, ",\"build_id\":");
                                proto_buf_add_json_string(b, r->modules[i].build_id);
                        }
                        proto_buf_add_str(b, r->modules[i].kernel ? ",\"kernel\":true}" : ",\"kernel\":false}");
                }
                proto_buf_add_str(b, "]");
        }
        if (r->kernel_build_id) {
                proto_buf_add_str(b, ",\"kernel_text\":");
                proto_buf_add_u64(b, r->kernel_text);
                proto_buf_add_str(b, ",\"kernel_build_id\":");
                proto_buf_add_json_string(b, r->kernel_build_id);
        }
        if (r->kcore_snapshot) {
                proto_buf_add_str(b, ",\"kcore_snapshot\":");
                proto_buf_add_json_string(b, r->kcore_snapshot);
        }
        if (r->names && first)
                render_strings(b, ",\"names\":[", r->names, r->n_names);
        if (r->comms && first)
                render_strings(b, ",\"comms\":[", r->comms, r->n_comms);
        if (r->cgroups && first)
                render_strings(b, ",\"cgroups\":[", r->cgroups, r->n_cgroups);
        proto_buf_add_str(b, ",\"rows\":[");
}


#define REPLY_START "{\"parameters\":"
#define REPLY_START_CONTINUES "{\"continues\":true,\"parameters\":"

/* The arrays of items a reply has, in this order; the header opens rows. */
enum { ITEM_ROWS, ITEM_STACKS, ITEM_SHAPES, ITEM_ENTRIES, ITEM_CGROUP_TOTALS, N_ITEM_KINDS };
static const char *const array_start[N_ITEM_KINDS] = {
        "", "],\"stacks\":[", "],\"shapes\":[", "],\"entries\":[", "],\"cgroup_totals\":[",
};

/* One message being filled: the parameters object in body. */
typedef struct chunk {
        proto_buf body;
        size_t n[N_ITEM_KINDS]; /* items of each array in it */
        unsigned cur;           /* the array being filled */
        bool present[N_ITEM_KINDS];
} chunk;

static void chunk_start(chunk *c, const query_result *r, bool first) {
        c->body.len = 0;
        memset(c->n, 0, sizeof c->n);
        c->cur = ITEM_ROWS;
        render_header(&c->body, r, first);
}

/* The length of c's message if it were finished now, as continued. */
static size_t chunk_bytes(const chunk *c) {
        size_t n = strlen(REPLY_START_CONTINUES) + c->body.len + strlen("]}}");

        for (unsigned k = c->cur + 1; k < N_ITEM_KINDS; k++)
                n += c->present[k] ? strlen(array_start[k]) : 0;
        return n;
}

/* Opens the arrays up to kind (every message has all the reply's). */
static void chunk_open(chunk *c, unsigned kind) {
        for (; c->cur < kind; c->cur++)
                if (c->present[c->cur + 1])
                        proto_buf_add_str(&c->body, array_start[c->cur + 1]);
}

static char *chunk_finish(chunk *c, bool continues) {
        proto_buf m = {};

        chunk_open(c, N_ITEM_KINDS - 1);
        proto_buf_add_str(&c->body, "]}");
        if (c->body.failed)
                return NULL;
        proto_buf_add_str(&m, continues ? REPLY_START_CONTINUES : REPLY_START);
        proto_buf_add(&m, c->body.data, c->body.len);
        proto_buf_add_str(&m, "}");
        if (m.failed) {
                free(m.data);
                return NULL;
        }
        return m.data;
}

int query_result_format_replies(const query_result *r, size_t max_bytes, char ***ret_messages, size_t *ret_n) {
        _cleanup_(strv_freep) char **messages = NULL;
        _cleanup_free_ char *item_data = NULL, *body_data = NULL;
        const size_t counts[N_ITEM_KINDS] = { r->n_rows, r->n_stacks, shape_strings(r), entry_strings(r),
                                              r->n_cgroup_totals };
        size_t n_items = 0, n_messages = 0, base;
        proto_buf item = {};
        chunk c = {};
        int r_ = 0;

        for (unsigned k = 0; k < N_ITEM_KINDS; k++) {
                c.present[k] = k == ITEM_ROWS || counts[k] > 0;
                if (size_add(n_items, counts[k], &n_items) < 0)
                        return -ENOMEM;
        }
        if (n_items >= SIZE_MAX / sizeof(char *) - 2)
                return -ENOMEM;
        /* At most one message per item, or one for an empty answer. */
        messages = calloc(n_items + 2, sizeof(char *));
        if (!messages)
                return -ENOMEM;

        /* Every message has the header, all arrays' brackets and the
         * longer start. */
        chunk_start(&c, r, true);
        base = chunk_bytes(&c);
        if (c.body.failed)
                r_ = -ENOMEM;
        else if (base > max_bytes)
                r_ = -E2BIG;

        for (unsigned which = 0; r_ == 0 && which < N_ITEM_KINDS; which++)
                for (size_t i = 0; r_ == 0 && i < counts[which]; i++) {
                        size_t add_len;

                        item.len = 0;
                        switch (which) {
                        case ITEM_ROWS:
                                render_row(&item, &r->rows[i]);
                                break;
                        case ITEM_STACKS:
                                render_stack(&item, &r->stacks[i]);
                                break;
                        case ITEM_SHAPES:
                                add_shapes(&item, r, i);
                                break;
                        case ITEM_CGROUP_TOTALS:
                                render_cgroup_total(&item, &r->cgroup_totals[i]);
                                break;
                        default:
                                add_entries(&item, r, i);
                        }
                        if (item.failed) {
                                r_ = -ENOMEM;
                                break;
                        }
                        /* Measured with the arrays up to this one opened. */
                        chunk_open(&c, which);
                        add_len = item.len + (c.n[which] > 0 ? 1 : 0);
                        if (add_len > max_bytes - MIN(max_bytes, chunk_bytes(&c))) {
                                size_t in_chunk = 0;

                                for (unsigned k = 0; k < N_ITEM_KINDS; k++)
                                        in_chunk += c.n[k];
                                if (in_chunk == 0 || item.len > max_bytes - base) {
                                        r_ = -E2BIG;
                                        break;
                                }
                                messages[n_messages] = chunk_finish(&c, true);
                                if (!messages[n_messages++]) {
                                        r_ = -ENOMEM;
                                        break;
                                }
                                chunk_start(&c, r, false);
                                chunk_open(&c, which);
                        }
                        if (c.n[which] > 0)
                                proto_buf_add_str(&c.body, ",");
                        proto_buf_add(&c.body, item.data, item.len);
                        c.n[which]++;
                }
        if (r_ == 0) {
                messages[n_messages] = chunk_finish(&c, false);
                r_ = messages[n_messages++] ? 0 : -ENOMEM;
        }
        item_data = item.data;
        body_data = c.body.data;
        if (r_ < 0)
                return r_;

        *ret_messages = TAKE_PTR(messages);
        if (ret_n)
                *ret_n = n_messages;
        return 0;
}

static int merge_array(struct json_object *into, struct json_object *more, const char *key) {
        struct json_object *a, *b;
        size_t n;

        if (!json_object_object_get_ex(more, key, &b) || !b)
                return 0;
        if (!json_object_is_type(b, json_type_array))
                return -EBADMSG;

        if (!json_object_object_get_ex(into, key, &a) || !a) {
                a = json_object_new_array();
                if (add(into, key, a) < 0)
                        return -ENOMEM;
        } else if (!json_object_is_type(a, json_type_array))
                return -EBADMSG;

        n = json_object_array_length(b);
        for (size_t i = 0; i < n; i++)
                if (append(a, json_object_get(json_object_array_get_idx(b, i))) < 0)
                        return -ENOMEM;
        return 0;
}

int query_result_json_merge(struct json_object *into, struct json_object *more) {
        int r;

        if (!json_object_is_type(into, json_type_object) || !json_object_is_type(more, json_type_object))
                return -EBADMSG;
        r = merge_array(into, more, "rows");
        if (r >= 0)
                r = merge_array(into, more, "stacks");
        if (r >= 0)
                r = merge_array(into, more, "shapes");
        if (r >= 0)
                r = merge_array(into, more, "entries");
        if (r >= 0)
                r = merge_array(into, more, "cgroup_totals");
        return r;
}
