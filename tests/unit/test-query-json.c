/* SPDX-License-Identifier: GPL-2.0-or-later */
/* io.perfsnap.Query parameters and answers <-> JSON (query-json.c). */
#include <errno.h>

#include <json-c/json.h>

#include "macro.h"
#include "test.h"
#include "wire/protocol.h"
#include "wire/query-json.h"

static struct json_object *parse(const char *text) {
        struct json_object *o = NULL;

        ASSERT_OK(proto_json_parse(text, &o));
        return o;
}

TEST(params_all_fields) {
        struct json_object *o = parse("{\"since_ns\":1763733600000000000,\"until_ns\":1763733900000000000,"
                                      "\"pid\":4194303,\"cpu\":8191,\"comm\":\"dd\",\"top\":25,\"stacks\":true}");
        query_params q;
        const char *error = NULL;

        ASSERT_OK(query_params_from_json(o, &q, &error));
        ASSERT_NULL(error);
        ASSERT_U64_EQ(q.since_ns, 1763733600000000000ull);
        ASSERT_U64_EQ(q.until_ns, 1763733900000000000ull);
        ASSERT_EQ(q.pid, 4194303);
        ASSERT_EQ(q.cpu, 8191);
        ASSERT_STREQ(q.comm, "dd");
        ASSERT_EQ(q.top, 25);
        ASSERT_TRUE(q.want_stacks);
        json_object_put(o);
}

TEST(params_defaults) {
        struct json_object *o = parse("{\"pid\":null,\"comm\":null,\"since_ns\":0}");
        query_params q;

        ASSERT_OK(query_params_from_json(NULL, &q, NULL));
        ASSERT_U64_EQ(q.since_ns, 0);
        ASSERT_U64_EQ(q.until_ns, 0);
        ASSERT_EQ(q.pid, -1);
        ASSERT_EQ(q.cpu, -1);
        ASSERT_NULL(q.comm);
        ASSERT_EQ(q.top, 0);
        ASSERT_TRUE(!q.want_stacks);

        /* null is as if absent; -1 is the explicit "any" */
        ASSERT_OK(query_params_from_json(o, &q, NULL));
        ASSERT_EQ(q.pid, -1);
        ASSERT_NULL(q.comm);
        json_object_put(o);

        /* A key twice is refused by the parser, not settled by it. */
        o = NULL;
        ASSERT_ERROR(proto_json_parse("{\"pid\":-1,\"cpu\":-1,\"pid\":0}", &o), EBADMSG);
        ASSERT_NULL(o);
        o = parse("{\"pid\":0,\"cpu\":-1}");
        ASSERT_OK(query_params_from_json(o, &q, NULL));
        ASSERT_EQ(q.pid, 0);    /* pid 0 (idle) is valid */
        ASSERT_EQ(q.cpu, -1);
        json_object_put(o);
}

TEST(params_rejected) {
        static const struct {
                const char *json;
                const char *error_prefix;
        } bad[] = {
                { "[]",                                        "parameters: " },
                { "{\"since_ns\":-1}",                         "since_ns: " },
                { "{\"since_ns\":9223372036854775808}",        "since_ns: " },
                { "{\"since_ns\":1.5}",                        "since_ns: " },
                { "{\"since_ns\":\"5m\"}",                     "since_ns: " },
                { "{\"until_ns\":true}",                       "until_ns: " },
                { "{\"since_ns\":20,\"until_ns\":20}",         "until_ns: " },
                { "{\"since_ns\":20,\"until_ns\":10}",         "until_ns: " },
                { "{\"pid\":-2}",                              "pid: " },
                { "{\"shapes\":1}",                            "shapes: " },
                { "{\"shapes\":true,\"stacks\":true}",         "shapes: " },
                { "{\"shapes\":true,\"raw\":true}",            "shapes: " },
                { "{\"cgroup_totals\":true}",                  "cgroup_totals: " },
                { "{\"cgroup_totals\":true,\"by_cgroup\":true,\"stacks\":true}", "cgroup_totals: " },
                { "{\"unit\":\"\"}",                           "unit: " },
                { "{\"container\":\"ABC\"}",                   "container: " },
                { "{\"cgroup\":5}",                            "cgroup: " },
                { "{\"pid\":4194304}",                         "pid: " },
                { "{\"pid\":\"1\"}",                           "pid: " },
                { "{\"cpu\":-2}",                              "cpu: " },
                { "{\"cpu\":8192}",                            "cpu: " },
                { "{\"cpu\":2147483648}",                      "cpu: " },
                { "{\"comm\":\"\"}",                           "comm: " },
                { "{\"comm\":\"0123456789012345678901234567890123456789012345678901234567890123X\"}", "comm: " },
                { "{\"comm\":\"d\\u0000d\"}",                  "comm: " },
                { "{\"comm\":[\"dd\"]}",                       "comm: " },
                { "{\"top\":-1}",                              "top: " },
                { "{\"top\":4294967296}",                      "top: " },
                { "{\"stacks\":1}",                            "stacks: " },
                { "{\"frames\":\"both\"}",                     "frames: " },
                { "{\"frames\":1}",                            "frames: " },
                { "{\"dso\":\"\"}",                            "dso: " },
                { "{\"dso\":7}",                               "dso: " },
                { "{\"by_pid\":1}",                            "by_pid: " },
                { "{\"by_cpu\":\"yes\"}",                      "by_cpu: " },
                { "{\"modules\":0}",                           "modules: " },
                { "{\"timeline\":-1}",                         "timeline: " },
                { "{\"timeline\":2001,\"since_ns\":1,\"until_ns\":2}", "timeline: " },
                { "{\"timeline\":10,\"since_ns\":1}",          "timeline: needs since_ns and until_ns" },
                { "{\"timeline\":10,\"until_ns\":5}",          "timeline: needs since_ns and until_ns" },
                { "{\"frobnicate\":1}",                        "frobnicate: unknown parameter" },
                { "{\"top\":1,\"x\\u001b[2J\":1}",             "x?[2J: unknown parameter" },
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                struct json_object *o = parse(bad[i].json);
                query_params q = { .top = 12345 };
                const char *error = NULL;
                int r = query_params_from_json(o, &q, &error);

                if (r != -EINVAL || !error || strncmp(error, bad[i].error_prefix, strlen(bad[i].error_prefix)) != 0)
                        TEST_FAIL_("%s: expected -EINVAL and \"%s...\", got %d \"%s\"",
                                   bad[i].json, bad[i].error_prefix, r, error ?: "(null)");
                ASSERT_EQ(q.top, 12345);        /* untouched */
                json_object_put(o);
        }

        /* comm of exactly 64 bytes is accepted */
        struct json_object *o = parse("{\"comm\":\"0123456789012345678901234567890123456789012345678901234567890123\"}");
        query_params q;
        ASSERT_OK(query_params_from_json(o, &q, NULL));
        ASSERT_EQ(strlen(q.comm), 64);
        json_object_put(o);
}

TEST(params_round_trip) {
        const query_params cases[] = {
                QUERY_PARAMS_INIT,
                { .since_ns = 1, .until_ns = INT64_MAX, .pid = 0, .cpu = 0, .comm = "kworker/0:1", .top = UINT32_MAX, .want_stacks = true },
                { .since_ns = 1763733600000000000ull, .pid = -1, .cpu = 3, .top = 25 },
                { .pid = -1, .cpu = -1, .frames = QUERY_FRAMES_KERNEL },
                { .pid = -1, .cpu = -1, .frames = QUERY_FRAMES_USER, .want_stacks = true, .dso = "libc.so.6" },
                { .pid = -1, .cpu = -1, .want_stacks = true, .raw = true, .shapes = true, .by_tid = true },
                { .pid = -1, .cpu = -1, .by_cgroup = true, .no_comm = true, .cgroup_totals = true, .top = 1 },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct json_object *o = query_params_to_json(&cases[i]);
                const char *text;
                struct json_object *back;
                query_params q;

                ASSERT_TRUE(o);
                /* through the wire text, not just the object */
                text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
                back = parse(text);
                ASSERT_OK(query_params_from_json(back, &q, NULL));
                ASSERT_U64_EQ(q.since_ns, cases[i].since_ns);
                ASSERT_U64_EQ(q.until_ns, cases[i].until_ns);
                ASSERT_EQ(q.pid, cases[i].pid);
                ASSERT_EQ(q.cpu, cases[i].cpu);
                if (cases[i].comm)
                        ASSERT_STREQ(q.comm, cases[i].comm);
                else
                        ASSERT_NULL(q.comm);
                ASSERT_EQ(q.top, cases[i].top);
                ASSERT_EQ(q.want_stacks, cases[i].want_stacks);
                ASSERT_EQ(q.raw, cases[i].raw);
                ASSERT_EQ(q.shapes, cases[i].shapes);
                ASSERT_EQ(q.by_tid, cases[i].by_tid);
                ASSERT_EQ(q.by_cgroup, cases[i].by_cgroup);
                ASSERT_EQ(q.no_comm, cases[i].no_comm);
                ASSERT_EQ(q.cgroup_totals, cases[i].cgroup_totals);
                ASSERT_EQ(q.frames, cases[i].frames);
                if (cases[i].dso)
                        ASSERT_STREQ(q.dso, cases[i].dso);
                else
                        ASSERT_NULL(q.dso);
                json_object_put(back);
                json_object_put(o);
        }

        /* defaults stay off the wire */
        query_params d = QUERY_PARAMS_INIT;
        struct json_object *o = query_params_to_json(&d);
        ASSERT_STREQ(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN), "{\"since_ns\":0,\"until_ns\":0}");
        json_object_put(o);
}

static char *xstrdup(const char *s) {
        char *p = strdup(s);
        ASSERT_TRUE(p);
        return p;
}

/* A result with n rows and n stacks of distinct content. */
static query_result *make_result(size_t n) {
        query_result *r = calloc(1, sizeof(*r));

        ASSERT_TRUE(r);
        *r = (query_result) {
                .total_samples = 1000000,
                .first_ns = 1763733600000000000ull,
                .last_ns = 1763733900000000000ull,
                .n_cpus = 2,
                .lost = 7,
        };
        r->rows = calloc(n + 1, sizeof(query_row));
        r->stacks = calloc(n + 1, sizeof(query_stack));
        ASSERT_TRUE(r->rows && r->stacks);
        for (size_t i = 0; i < n; i++) {
                char name[64];

                snprintf(name, sizeof(name), "sym_%zu\"\\/\x01", i);
                r->rows[i] = (query_row) {
                        .comm = xstrdup(i % 2 ? "dd" : "kworker/u4:2"),
                        .module = xstrdup(i % 3 ? "[kernel.kallsyms]" : "/usr/lib/libc.so.6"),
                        .symbol = xstrdup(name),
                        .kernel = i % 3 != 0,
                        .samples = UINT64_MAX - i,
                };
                r->n_rows++;

                r->stacks[i].comm = xstrdup("dd");
                r->stacks[i].n_frames = i % 4;
                r->stacks[i].frames = calloc(4, sizeof(char *));
                for (size_t j = 0; j < i % 4; j++)
                        r->stacks[i].frames[j] = xstrdup(j == 0 ? "_start" : name);
                r->stacks[i].samples = i + 1;
                r->stacks[i].n_kernel = i % 4 / 2;
                /* Exports: pid, CPU and slot on some; modules on all or none. */
                r->stacks[i].pid = i % 2 ? (int64_t) (1000 + i) : -1;
                r->stacks[i].tid = i == 1 ? 1002 : -1;
                r->stacks[i].cpu = i % 3 ? (int32_t) i : -1;
                r->stacks[i].slot = i % 2 || n <= 3 ? -1 : (int32_t) (i % 3);      /* one of the timeline's 3 */
                if (n > 3) {
                        r->stacks[i].modules = calloc(4, sizeof(uint32_t));
                        r->stacks[i].addrs = calloc(4, sizeof(uint64_t));
                        ASSERT_TRUE(r->stacks[i].modules && r->stacks[i].addrs);
                        for (size_t j = 0; j < i % 4; j++) {
                                r->stacks[i].modules[j] = (uint32_t) (j % 2);
                                r->stacks[i].addrs[j] = j % 2 ? UINT64_MAX - j : j * 0x1001;
                        }
                }
                r->n_stacks++;
        }
        if (n > 3) {
                r->modules = calloc(2, sizeof(query_module));
                ASSERT_TRUE(r->modules);
                r->modules[0] = (query_module) { .name = xstrdup("/usr/bin/\"x\""), .build_id = xstrdup("00ff") };
                r->modules[1] = (query_module) { .name = xstrdup("[kernel.kallsyms]"), .kernel = true };
                r->n_modules = 2;
                r->timeline = calloc(3, sizeof(uint64_t));
                ASSERT_TRUE(r->timeline);
                r->n_timeline = 3;
                r->timeline[0] = 5;
                r->timeline[2] = UINT64_MAX;
                r->timeline_start_ns = 1763733600000000000ull;
                r->timeline_slot_ns = 7;
                r->kernel_text = 0xffffffff81000000ull;
                r->kernel_build_id = xstrdup("4a5a9b0a");
                r->kcore_snapshot = xstrdup("/c/[kernel.kcore]/4a/1");
        }
        /* perf.data exports: shapes and entries referring to them (with a
         * pid, tid, CPU or slot of -1 on some), with the stacks. */
        if (n > 3) {
                /* n shapes: more than a string's 16 for n = 40; of 0 to
                 * 3 frames, with modules (the odd ones) or without. */
                r->shapes = calloc(n, sizeof(query_stack));
                r->comms = calloc(2, sizeof(char *));
                r->entries = calloc(3 * n, sizeof(query_entry));
                ASSERT_TRUE(r->shapes && r->comms && r->entries);
                r->comms[0] = xstrdup("dd");
                r->comms[1] = xstrdup("a \"b\"\\");
                r->n_comms = 2;
                r->cgroups = calloc(2, sizeof(char *));
                ASSERT_TRUE(r->cgroups);
                r->cgroups[0] = xstrdup("/system.slice/x.service");
                r->cgroups[1] = xstrdup("/we ird\"/\\");
                r->n_cgroups = 2;
                for (size_t i = 0; i < n; i++) {
                        query_stack *sh = &r->shapes[i];

                        *sh = (query_stack) { .n_frames = i % 4, .n_kernel = i % 4 / 2, .pid = -1, .tid = -1, .cpu = -1,
                                              .slot = -1 };
                        sh->addrs = calloc(4, sizeof(uint64_t));
                        sh->modules = i % 2 ? calloc(4, sizeof(uint32_t)) : NULL;
                        ASSERT_TRUE(sh->addrs && (i % 2 == 0 || sh->modules));
                        for (size_t j = 0; j < sh->n_frames; j++) {
                                sh->addrs[j] = j == 0 ? UINT64_MAX - i : 0x1000 * j + i;
                                if (sh->modules)
                                        sh->modules[j] = (uint32_t) (j % 2);
                        }
                }
                r->n_shapes = n;
                /* 3 n: more than a string's 64 for n = 40. */
                for (size_t i = 0; i < 3 * n; i++)
                        r->entries[r->n_entries++] = (query_entry) {
                                .shape = (uint32_t) (i % n),
                                .comm = (uint32_t) (i / 2 % 2),
                                .pid = i % 3 ? (int64_t) (4194303 - i) : -1,
                                .tid = i % 3 ? (int64_t) i : -1,
                                .cpu = i % 4 ? (int32_t) (8191 - i) : -1,
                                .slot = i % 5 ? (int32_t) (i % 3) : -1, /* of the timeline's 3 */
                                .cgroup = (uint32_t) (i % 3),           /* none, or 1 + index */
                                .samples = i == 0 ? UINT64_MAX / 2 : i,
                        };
        }
        /* perfsnapctl units: n cgroups' totals, each with its top row. */
        if (n > 2) {
                r->cgroup_totals = calloc(n, sizeof(query_cgroup_total));
                ASSERT_TRUE(r->cgroup_totals);
                for (size_t i = 0; i < n; i++) {
                        query_cgroup_total *t = &r->cgroup_totals[i];

                        r->n_cgroup_totals++;
                        t->cgroup = xstrdup(i == 0 ? "" : i % 2 ? "/system.slice/x.service" : "/we ird\"/\\");
                        t->samples = i == 1 ? UINT64_MAX : 100000 - i;
                        t->kernel = i % 3 == 0 ? t->samples : i;
                        t->top = (query_row) { .comm = xstrdup("[unknown]"), .module = xstrdup("[kernel.kallsyms]"),
                                               .symbol = xstrdup(i % 2 ? "do_idle" : "memcpy"), .kernel = i % 2,
                                               .samples = t->samples / 2 };
                }
        }
        /* Packed stacks: names once, frames as indices. */
        if (n % 2 == 1 && n > 4)
                ASSERT_OK(query_result_pack(r));
        return r;
}

static void assert_result_equal(const query_result *a, const query_result *b) {
        ASSERT_U64_EQ(a->total_samples, b->total_samples);
        ASSERT_U64_EQ(a->first_ns, b->first_ns);
        ASSERT_U64_EQ(a->last_ns, b->last_ns);
        ASSERT_EQ(a->n_cpus, b->n_cpus);
        ASSERT_U64_EQ(a->lost, b->lost);
        ASSERT_EQ(a->n_rows, b->n_rows);
        for (size_t i = 0; i < a->n_rows; i++) {
                ASSERT_STREQ(a->rows[i].comm, b->rows[i].comm);
                ASSERT_STREQ(a->rows[i].module, b->rows[i].module);
                ASSERT_STREQ(a->rows[i].symbol, b->rows[i].symbol);
                ASSERT_EQ(a->rows[i].kernel, b->rows[i].kernel);
                ASSERT_U64_EQ(a->rows[i].samples, b->rows[i].samples);
        }
        ASSERT_EQ(a->n_stacks, b->n_stacks);
        for (size_t i = 0; i < a->n_stacks; i++) {
                ASSERT_STREQ(a->stacks[i].comm, b->stacks[i].comm);
                ASSERT_EQ(a->stacks[i].n_frames, b->stacks[i].n_frames);
                for (size_t j = 0; j < a->stacks[i].n_frames; j++)
                        ASSERT_STREQ(a->stacks[i].frames[j], b->stacks[i].frames[j]);
                ASSERT_U64_EQ(a->stacks[i].samples, b->stacks[i].samples);
                ASSERT_EQ(a->stacks[i].n_kernel, b->stacks[i].n_kernel);
                ASSERT_EQ(a->stacks[i].pid, b->stacks[i].pid);
                ASSERT_EQ(a->stacks[i].tid, b->stacks[i].tid);
                ASSERT_EQ(a->stacks[i].cpu, b->stacks[i].cpu);
                ASSERT_EQ(a->stacks[i].slot, b->stacks[i].slot);
                ASSERT_EQ(!a->stacks[i].modules, !b->stacks[i].modules);
                for (size_t j = 0; a->stacks[i].modules && j < a->stacks[i].n_frames; j++)
                        ASSERT_EQ(a->stacks[i].modules[j], b->stacks[i].modules[j]);
                ASSERT_EQ(!a->stacks[i].addrs, !b->stacks[i].addrs);
                for (size_t j = 0; a->stacks[i].addrs && j < a->stacks[i].n_frames; j++)
                        ASSERT_U64_EQ(a->stacks[i].addrs[j], b->stacks[i].addrs[j]);
        }
        ASSERT_EQ(a->n_modules, b->n_modules);
        for (size_t i = 0; i < a->n_modules; i++) {
                ASSERT_STREQ(a->modules[i].name, b->modules[i].name);
                ASSERT_EQ(!a->modules[i].build_id, !b->modules[i].build_id);
                if (a->modules[i].build_id)
                        ASSERT_STREQ(a->modules[i].build_id, b->modules[i].build_id);
                ASSERT_EQ(a->modules[i].kernel, b->modules[i].kernel);
        }
        ASSERT_U64_EQ(a->kernel_text, b->kernel_text);
        ASSERT_EQ(!a->kernel_build_id, !b->kernel_build_id);
        if (a->kernel_build_id)
                ASSERT_STREQ(a->kernel_build_id, b->kernel_build_id);
        ASSERT_EQ(!a->kcore_snapshot, !b->kcore_snapshot);
        if (a->kcore_snapshot)
                ASSERT_STREQ(a->kcore_snapshot, b->kcore_snapshot);
        ASSERT_EQ(a->n_comms, b->n_comms);
        for (size_t i = 0; i < a->n_comms; i++)
                ASSERT_STREQ(a->comms[i], b->comms[i]);
        ASSERT_EQ(a->n_shapes, b->n_shapes);
        for (size_t i = 0; i < a->n_shapes; i++) {
                ASSERT_EQ(a->shapes[i].n_frames, b->shapes[i].n_frames);
                ASSERT_EQ(a->shapes[i].n_kernel, b->shapes[i].n_kernel);
                ASSERT_EQ(!a->shapes[i].modules, !b->shapes[i].modules);
                for (size_t j = 0; j < a->shapes[i].n_frames; j++) {
                        ASSERT_U64_EQ(a->shapes[i].addrs[j], b->shapes[i].addrs[j]);
                        if (a->shapes[i].modules)
                                ASSERT_EQ(a->shapes[i].modules[j], b->shapes[i].modules[j]);
                }
        }
        ASSERT_EQ(a->n_cgroups, b->n_cgroups);
        for (size_t i = 0; i < a->n_cgroups; i++)
                ASSERT_STREQ(a->cgroups[i], b->cgroups[i]);
        ASSERT_EQ(a->n_entries, b->n_entries);
        for (size_t i = 0; i < a->n_entries; i++) {
                const query_entry *x = &a->entries[i], *y = &b->entries[i];

                ASSERT_EQ(x->shape, y->shape);
                ASSERT_EQ(x->comm, y->comm);
                ASSERT_EQ(x->pid, y->pid);
                ASSERT_EQ(x->tid, y->tid);
                ASSERT_EQ(x->cpu, y->cpu);
                ASSERT_EQ(x->slot, y->slot);
                ASSERT_EQ(x->cgroup, y->cgroup);
                ASSERT_U64_EQ(x->samples, y->samples);
        }
        ASSERT_EQ(a->n_cgroup_totals, b->n_cgroup_totals);
        for (size_t i = 0; i < a->n_cgroup_totals; i++) {
                const query_cgroup_total *x = &a->cgroup_totals[i], *y = &b->cgroup_totals[i];

                ASSERT_STREQ(x->cgroup, y->cgroup);
                ASSERT_U64_EQ(x->samples, y->samples);
                ASSERT_U64_EQ(x->kernel, y->kernel);
                ASSERT_STREQ(x->top.comm, y->top.comm);
                ASSERT_STREQ(x->top.module, y->top.module);
                ASSERT_STREQ(x->top.symbol, y->top.symbol);
                ASSERT_EQ(x->top.kernel, y->top.kernel);
                ASSERT_U64_EQ(x->top.samples, y->top.samples);
        }
        ASSERT_EQ(a->n_timeline, b->n_timeline);
        for (size_t i = 0; i < a->n_timeline; i++)
                ASSERT_U64_EQ(a->timeline[i], b->timeline[i]);
        if (a->n_timeline > 0) {
                ASSERT_U64_EQ(a->timeline_start_ns, b->timeline_start_ns);
                ASSERT_U64_EQ(a->timeline_slot_ns, b->timeline_slot_ns);
        }
}

TEST(result_round_trip) {
        for (size_t n = 0; n < 6; n++) {
                query_result *r = make_result(n), *back = NULL;
                struct json_object *o = query_result_to_json(r), *reparsed;

                ASSERT_TRUE(o);
                ASSERT_EQ(json_object_object_get_ex(o, "stacks", NULL), n > 0);
                reparsed = parse(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
                ASSERT_OK(query_result_from_json(reparsed, &back));
                assert_result_equal(r, back);
                query_result_free(back);
                json_object_put(reparsed);
                json_object_put(o);
                query_result_free(r);
        }
}

TEST(result_rejected) {
        const char *bad[] = {
                "[]",
                "{\"rows\":[]}",
                "{\"total\":1}",
                "{\"total\":-1,\"rows\":[]}",
                "{\"total\":\"1\",\"rows\":[]}",
                "{\"total\":1,\"rows\":{}}",
                "{\"total\":1,\"cpus\":4294967296,\"rows\":[]}",
                "{\"total\":1,\"first_ns\":1.5,\"rows\":[]}",
                "{\"total\":1,\"rows\":[1]}",
                "{\"total\":1,\"rows\":[{\"comm\":\"dd\",\"module\":\"m\",\"symbol\":\"s\",\"samples\":1}]}",
                "{\"total\":1,\"rows\":[{\"comm\":\"dd\",\"module\":\"m\",\"symbol\":\"s\",\"kernel\":1,\"samples\":1}]}",
                "{\"total\":1,\"rows\":[{\"comm\":\"dd\",\"module\":2,\"symbol\":\"s\",\"kernel\":true,\"samples\":1}]}",
                "{\"total\":1,\"rows\":[{\"comm\":\"dd\",\"module\":\"m\",\"symbol\":\"s\",\"kernel\":true,\"samples\":-1}]}",
                "{\"total\":1,\"rows\":[],\"stacks\":{}}",
                "{\"total\":1,\"rows\":[],\"stacks\":[{\"comm\":\"dd\",\"frames\":[\"a\",2],\"samples\":1}]}",
                "{\"total\":1,\"rows\":[],\"stacks\":[{\"comm\":\"dd\",\"frames\":\"a\",\"samples\":1}]}",
                "{\"total\":1,\"rows\":[],\"stacks\":[{\"comm\":\"dd\",\"frames\":[]}]}",
                /* shapes and entries (perf.data exports) */
                "{\"total\":1,\"rows\":[],\"shapes\":[\" 1 2\"]}",                /* no kernel frames */
                "{\"total\":1,\"rows\":[],\"shapes\":[\"3 1 2\"]}",               /* more than frames */
                "{\"total\":1,\"rows\":[],\"shapes\":[\"0 1  2\"]}",
                "{\"total\":1,\"rows\":[],\"shapes\":[\"0 1 g\"]}",
                "{\"total\":1,\"rows\":[],\"shapes\":[\"0 11111111111111111\"]}",
                "{\"total\":1,\"rows\":[],\"shapes\":[\"0 1|0\"]}",               /* module 0 of none */
                "{\"total\":1,\"rows\":[],\"shapes\":[\"0 1,\"]}",
                "{\"total\":1,\"rows\":[],\"shapes\":[\"\"]}",
                "{\"total\":1,\"rows\":[],\"shapes\":[5]}",
                "{\"total\":1,\"rows\":[],\"modules\":[{\"name\":\"m\",\"kernel\":false}],"
                "\"shapes\":[\"0 1 2|0\"]}",                                /* a module for one of two frames */
                "{\"total\":1,\"rows\":[],\"shapes\":{}}",
                "{\"total\":1,\"rows\":[],\"comms\":[\"dd\"],\"shapes\":[\"0 1\"],"
                "\"entries\":[\"1 0 1 1 0 -1 0 1\"]}",
                "{\"total\":1,\"rows\":[],\"comms\":[\"dd\"],\"shapes\":[\"0 1\"],"
                "\"entries\":[\"0 1 1 1 0 -1 0 1\"]}",
                "{\"total\":1,\"rows\":[],\"comms\":[\"dd\"],\"shapes\":[\"0 1\"],"
                "\"entries\":[\"0 0 1 1 0 0 0 1\"]}",       /* slot 0 of no timeline */
                "{\"total\":1,\"rows\":[],\"comms\":[\"dd\"],\"shapes\":[\"0 1\"],"
                "\"entries\":[\"0 0 1 1 0 -1 0 0\"]}",       /* no samples */
                "{\"total\":1,\"rows\":[],\"comms\":[\"dd\"],\"shapes\":[\"0 1\"],"
                "\"entries\":[\"0 0 -2 1 0 -1 0 1\"]}",
                "{\"total\":1,\"rows\":[],\"comms\":[\"dd\"],\"shapes\":[\"0 1\"],"
                "\"entries\":[\"0 0 1 1 8192 -1 0 1\"]}",
                "{\"total\":1,\"rows\":[],\"comms\":[\"dd\"],\"shapes\":[\"0 1\"],"
                "\"entries\":[\"0 0 1 1 0 -1 0\"]}",
                "{\"total\":1,\"rows\":[],\"comms\":[\"dd\"],\"shapes\":[\"0 1\"],"
                "\"entries\":[\"0 0 1 1 0 -1 0 1 \"]}",
                "{\"total\":1,\"rows\":[],\"comms\":[\"dd\"],\"shapes\":[\"0 1\"],"
                "\"entries\":[\"0 0 99999999999999999999 1 0 -1 0 1\"]}",
                "{\"total\":1,\"rows\":[],\"comms\":[\"dd\"],\"shapes\":[\"0 1\"],"
                "\"entries\":[5]}",
                "{\"total\":1,\"rows\":[],\"comms\":[\"dd\"],\"shapes\":[\"0 1\"],"
                "\"entries\":[\"0 0 1 1 0 -1 0 1,\"]}",
                "{\"total\":1,\"rows\":[],\"comms\":[\"dd\"],\"shapes\":[\"0 1\"],"
                "\"entries\":[\"0 0 1 1 0 -1 0 1,,0 0 1 1 0 -1 0 1\"]}",
                "{\"total\":1,\"rows\":[],\"comms\":[\"dd\"],\"shapes\":[\"0 1\"],"
                "\"entries\":[\"\"]}",
                "{\"total\":1,\"rows\":[],\"comms\":[\"dd\"],\"shapes\":[\"0 1\"],"
                "\"entries\":[\"0 0 1 1 0 -1 1 1\"]}",       /* cgroup 1 of none */
                NULL,   /* many, below */
        };

        /* More entries in one string than a reply makes. */
        char many[64 * 20 + 400] = "{\"total\":1,\"rows\":[],\"comms\":[\"dd\"],\"shapes\":[\"0 1\"],"
                                   "\"entries\":[\"0 0 1 1 0 -1 0 1";
        for (size_t i = 0; i < 64; i++)
                strcat(many, ",0 0 1 1 0 -1 0 1");
        strcat(many, "\"]}");
        bad[ELEMENTSOF(bad) - 1] = many;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                struct json_object *o = parse(bad[i]);
                query_result *r = (query_result *) 0x1;
                int k = query_result_from_json(o, &r);

                if (k != -EBADMSG)
                        TEST_FAIL_("%s: expected -EBADMSG, got %d", bad[i], k);
                ASSERT_TRUE(r == (query_result *) 0x1);
                json_object_put(o);
        }

        /* optional scalars default to 0, stacks to none */
        struct json_object *o = parse("{\"total\":0,\"rows\":[],\"stacks\":null}");
        query_result *r = NULL;
        ASSERT_OK(query_result_from_json(o, &r));
        ASSERT_EQ(r->n_rows, 0);
        ASSERT_EQ(r->n_stacks, 0);
        ASSERT_U64_EQ(r->first_ns, 0);
        query_result_free(r);
        json_object_put(o);
}

/* The daemon splits an answer into bounded replies; the client merges them
 * back into the same result. */
/* Splits r into replies of at most max_bytes, merges them back, and
 * checks the result equals r; returns the merged JSON's "names" presence. */
static bool split_and_merge(const query_result *r, size_t max_bytes) {
        struct json_object *merged = NULL;
        query_result *back = NULL;
        char **msgs = NULL;
        size_t n = 0;
        bool names;

        ASSERT_OK(query_result_format_replies(r, max_bytes, &msgs, &n));
        ASSERT_GE(n, 1);
        if (max_bytes < 5000)
                ASSERT_GT(n, 1);
        ASSERT_NULL(msgs[n]);
        for (size_t i = 0; i < n; i++) {
                struct json_object *p = NULL;
                char *error = NULL;
                bool continues;

                ASSERT_LE(strlen(msgs[i]), max_bytes);
                ASSERT_EQ(proto_reply_parse(msgs[i], &error, &p, &continues), 0);
                ASSERT_EQ(continues, i + 1 < n);
                if (!merged)
                        merged = p;
                else {
                        ASSERT_OK(query_result_json_merge(merged, p));
                        json_object_put(p);
                }
                free(msgs[i]);
        }
        free(msgs);

        ASSERT_OK(query_result_from_json(merged, &back));
        assert_result_equal(r, back);
        ASSERT_EQ(back->n_names, r->n_names);
        names = json_object_object_get_ex(merged, "names", NULL);
        query_result_free(back);
        json_object_put(merged);
        return names;
}

TEST(result_split_and_merge) {
        const size_t limits[] = { 100000, 4096, 3000, 100000, 4096, 3000 };
        query_result *r = make_result(40);

        for (size_t l = 0; l < ELEMENTSOF(limits); l++) {
                /* The second three: packed, the names in the first reply. */
                if (l == 3)
                        ASSERT_OK(query_result_pack(r));
                ASSERT_EQ(split_and_merge(r, limits[l]), l >= 3);
        }

        /* an empty answer is one message */
        query_result *empty = make_result(0);
        char **msgs = NULL;
        size_t n = 0;
        ASSERT_OK(query_result_format_replies(empty, 1000, &msgs, &n));
        ASSERT_EQ(n, 1);
        ASSERT_TRUE(!strstr(msgs[0], "continues"));
        free(msgs[0]);
        free(msgs);
        query_result_free(empty);

        /* a bound smaller than the header or than one row cannot be met */
        ASSERT_ERROR(query_result_format_replies(r, 10, &msgs, &n), E2BIG);
        query_result_free(r);
        r = make_result(2);
        free(r->rows[1].symbol);
        r->rows[1].symbol = calloc(1, 1001);
        memset(r->rows[1].symbol, 'x', 1000);
        ASSERT_ERROR(query_result_format_replies(r, 1000, &msgs, &n), E2BIG);
        /* fits alone, but not after the header and the first row */
        ASSERT_OK(query_result_format_replies(r, 1300, &msgs, &n));
        ASSERT_GE(n, 2);
        ASSERT_TRUE(!strstr(msgs[0], "xxxx") && strstr(msgs[1], "xxxx"));
        for (size_t i = 0; i < n; i++) {
                ASSERT_LE(strlen(msgs[i]), 1300);
                free(msgs[i]);
        }
        free(msgs);
        query_result_free(r);
}

/* The replies, written by hand, are what proto_format_reply() makes of
 * query_result_to_json(): rows alone, rows and stacks, nothing. */
TEST(replies_are_the_json_c_rendering) {
        for (size_t n = 0; n < 6; n++) {
                query_result *r = make_result(n);
                struct json_object *o;
                char **msgs = NULL, *want;
                size_t m = 0;

                if (n == 3) {
                        for (size_t i = 0; i < r->n_stacks; i++)
                                query_stack_done(&r->stacks[i]);
                        r->n_stacks = 0;
                }
                free(r->rows[0].comm);
                r->rows[0].comm = n > 0 ? xstrdup("a\xff\xc0\xaf" "b\x7f") : NULL;
                o = query_result_to_json(r);
                want = proto_format_reply(o, false);
                ASSERT_OK(query_result_format_replies(r, 1 << 20, &msgs, &m));
                ASSERT_EQ(m, 1);
                ASSERT_STREQ(msgs[0], want);
                free(msgs[0]);
                free(msgs);
                free(want);
                json_object_put(o);
                query_result_free(r);
        }
}

TEST(merge_rejects_wrong_shapes) {
        struct json_object *a = parse("{\"total\":1,\"rows\":[]}");
        struct json_object *b = parse("{\"rows\":{}}");
        struct json_object *c = parse("{\"total\":1,\"rows\":5}");
        struct json_object *d = parse("{\"rows\":[1],\"stacks\":[2]}");

        ASSERT_ERROR(query_result_json_merge(a, b), EBADMSG);
        ASSERT_ERROR(query_result_json_merge(c, d), EBADMSG);
        ASSERT_OK(query_result_json_merge(a, d));
        ASSERT_EQ(json_object_array_length(json_object_object_get(a, "rows")), 1);
        ASSERT_EQ(json_object_array_length(json_object_object_get(a, "stacks")), 1);
        json_object_put(a);
        json_object_put(b);
        json_object_put(c);
        json_object_put(d);
}

/* A packed answer whose names do not fit in one reply: unpacked, the same
 * answer splits (what the daemon's Query handler does then). */
TEST(packed_too_big_for_one_reply_unpacks) {
        query_result *r = make_result(600);
        char **msgs = NULL;
        size_t n = 0;

        ASSERT_OK(query_result_pack(r));
        ASSERT_ERROR(query_result_format_replies(r, 4096, &msgs, &n), E2BIG);
        query_result_unpack(r);
        ASSERT_EQ(r->n_names, 0);
        /* Split and merged back, as result_split_and_merge checks. */
        split_and_merge(r, 4096);
        query_result_free(r);
}
