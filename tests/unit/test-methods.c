/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The daemon's method table (daemon/methods.c): every protocol method has
 * one entry, only the mutating ones are root-only, Status never shares the
 * query thread; and the worker handlers answer from a real sqlite store. */

#include <errno.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <unistd.h>

#include "macro.h"
#include "methods.h"
#include "store/store.h"
#include "test.h"
#include "wire/protocol.h"

static const char *const all_methods[] = {
        PERFSNAP_METHOD_QUERY, PERFSNAP_METHOD_STATUS, PERFSNAP_METHOD_MODULES, PERFSNAP_METHOD_EVENTS,
        PERFSNAP_METHOD_KSYMS, PERFSNAP_METHOD_RESCAN, PERFSNAP_METHOD_SNAPSHOT, PERFSNAP_METHOD_CACHE_LIST,
        PERFSNAP_METHOD_CACHE_PRUNE,
};

TEST(every_method_has_one_entry) {
        const method *t;
        size_t n;

        t = method_table(&n);
        ASSERT_EQ(n, ELEMENTSOF(all_methods));
        for (size_t i = 0; i < ELEMENTSOF(all_methods); i++) {
                const method *m = method_lookup(all_methods[i]);
                size_t seen = 0;

                ASSERT_TRUE(m != NULL);
                ASSERT_STREQ(m->name, all_methods[i]);
                for (size_t k = 0; k < n; k++)
                        seen += streq(t[k].name, all_methods[i]);
                ASSERT_EQ(seen, 1);
                /* Worker methods have a handler, loop methods none. */
                ASSERT_EQ(m->run != NULL, m->thread == METHOD_QUERY_THREAD || m->thread == METHOD_STATUS_THREAD);
        }
        ASSERT_NULL(method_lookup("io.perfsnap.Nope"));
        ASSERT_NULL(method_lookup("io.perfsnap.query"));       /* names are exact */
        ASSERT_NULL(method_lookup(""));
        ASSERT_NULL(method_lookup(NULL));
}

TEST(only_mutating_methods_are_root_only) {
        const char *const mutating[] = { PERFSNAP_METHOD_RESCAN, PERFSNAP_METHOD_SNAPSHOT, PERFSNAP_METHOD_CACHE_PRUNE };

        for (size_t i = 0; i < ELEMENTSOF(all_methods); i++) {
                const method *m = method_lookup(all_methods[i]);
                bool want_root = false;

                for (size_t k = 0; k < ELEMENTSOF(mutating); k++)
                        want_root |= streq(mutating[k], all_methods[i]);
                if (m->root_only != want_root)
                        fprintf(stderr, "%s: root_only %d, expected %d\n", m->name, m->root_only, want_root);
                ASSERT_EQ(m->root_only, want_root);
                ASSERT_TRUE(method_allowed(m, 0));
                ASSERT_EQ(method_allowed(m, 1000), !want_root);
                ASSERT_EQ(method_allowed(m, 65534), !want_root);
                /* The denial names what was refused. */
                ASSERT_EQ(m->denied != NULL, want_root);
        }
        ASSERT_TRUE(!method_allowed(NULL, 0));
}

TEST(status_has_its_own_thread) {
        ASSERT_EQ(method_lookup(PERFSNAP_METHOD_STATUS)->thread, METHOD_STATUS_THREAD);
        ASSERT_EQ(method_lookup(PERFSNAP_METHOD_STATUS)->fill, METHOD_FILL_STATUS);
        for (size_t i = 0; i < ELEMENTSOF(all_methods); i++)
                if (!streq(all_methods[i], PERFSNAP_METHOD_STATUS))
                        ASSERT_NE(method_lookup(all_methods[i])->thread, METHOD_STATUS_THREAD);
}

/* Runs m's handler; returns its one reply's error (NULL: none) and
 * parameters. */
static char *run1(const char *name, method_job *j, json_object **ret_params) {
        const method *m = method_lookup(name);
        char **v, *error = NULL;
        bool continues = true;

        ASSERT_TRUE(m && m->run);
        v = m->run(j);
        ASSERT_TRUE(v && v[0]);
        ASSERT_NULL(v[1]);
        ASSERT_OK(proto_reply_parse(v[0], &error, ret_params, &continues));
        ASSERT_TRUE(!continues);
        free(v[0]);
        free(v);
        return error;
}

static const char *message_of(json_object *p) {
        json_object *o;

        return p && json_object_object_get_ex(p, "message", &o) ? json_object_get_string(o) : "";
}

TEST(handlers_answer_from_the_store) {
        char dir[] = "/tmp/test-methods.XXXXXX", path[128];
        store_section sec = { .name = ".text", .addr = 0xffffffffc0a00000, .len = 0x800, .len_source = "elf", .exec = true };
        json_object *p = NULL, *a, *o;
        int64_t boot = 0, mod = 0;
        store *w = NULL, *ro = NULL;
        char *error;

        ASSERT_TRUE(mkdtemp(dir));
        snprintf(path, sizeof path, "%s/db", dir);
        ASSERT_OK(store_open(path, STORE_READWRITE, &w));
        ASSERT_OK(store_add_boot(w, "uuid", "bid", 0xffffffff81000000, "6.1", 100, &boot));
        ASSERT_OK(store_add_module(w, &(store_module) { .boot_id = boot, .name = "brd", .base = 0xffffffffc0a00000,
                                   .size = 0x1000, .loaded_ns = 100, .loaded_how = "startup",
                                   .sections = &sec, .n_sections = 1 }, &mod));
        ASSERT_OK(store_open(path, STORE_READONLY, &ro));

        /* Modules with its sections. */
        p = json_object_new_object();
        json_object_object_add(p, "sections", json_object_new_boolean(true));
        {
                method_job j = { .params = p, .max_rows = 100, .store = ro, .db_path = path };

                error = run1(PERFSNAP_METHOD_MODULES, &j, &o);
        }
        ASSERT_NULL(error);
        ASSERT_TRUE(json_object_object_get_ex(o, "modules", &a));
        ASSERT_EQ(json_object_array_length(a), 1);
        ASSERT_STREQ(json_object_get_string(json_object_object_get(json_object_array_get_idx(a, 0), "name")), "brd");
        ASSERT_TRUE(json_object_object_get_ex(json_object_array_get_idx(a, 0), "sections", &a));
        ASSERT_EQ(json_object_array_length(a), 1);
        json_object_put(o);
        json_object_put(p);

        /* A wrong type is an InvalidParameter naming the parameter. */
        p = json_object_new_object();
        json_object_object_add(p, "since_ns", json_object_new_string("yesterday"));
        {
                method_job j = { .params = p, .max_rows = 100, .store = ro, .db_path = path };

                error = run1(PERFSNAP_METHOD_EVENTS, &j, &o);
        }
        ASSERT_STREQ(error, PERFSNAP_ERROR_INVALID_PARAMETER);
        ASSERT_STREQ(message_of(o), "parameter \"since_ns\" is not an integer in [0, 2^63)");
        free(error);
        json_object_put(o);
        json_object_put(p);

        /* Status adds the stored counters to what the loop filled. */
        p = json_object_new_object();
        json_object_object_add(p, "samples", json_object_new_int64(7));
        {
                method_job j = { .params = p, .store = ro, .db_path = path };

                error = run1(PERFSNAP_METHOD_STATUS, &j, &o);
        }
        ASSERT_NULL(error);
        ASSERT_EQ(json_object_get_int64(json_object_object_get(o, "samples")), 7);
        ASSERT_TRUE(json_object_object_get_ex(o, "stored_samples", NULL));
        ASSERT_EQ(json_object_get_int64(json_object_object_get(o, "stored_samples")), 0);
        json_object_put(o);
        json_object_put(p);

        /* An empty store answers a query with no rows. */
        {
                method_job j = { .params = NULL, .max_rows = 100, .max_stacks = 100, .store = ro, .db_path = path };

                error = run1(PERFSNAP_METHOD_QUERY, &j, &o);
        }
        ASSERT_NULL(error);
        ASSERT_EQ(json_object_get_int64(json_object_object_get(o, "total_samples")), 0);
        json_object_put(o);

        /* A query past the daemon's query_timeout is an InvalidParameter
         * that says so and what to do (1 ns: past it at the first check). */
        {
                method_job j = { .params = NULL, .max_rows = 100, .max_stacks = 100, .query_timeout_ns = 1,
                                 .store = ro, .db_path = path };

                error = run1(PERFSNAP_METHOD_QUERY, &j, &o);
        }
        ASSERT_STREQ(error, PERFSNAP_ERROR_INVALID_PARAMETER);
        ASSERT_STREQ(message_of(o), "the query was stopped after query_timeout (1ns): ask for a shorter window or "
                                    "fewer stacks, or raise query_timeout in the daemon's configuration");
        free(error);
        json_object_put(o);

        /* No connection: the handlers say which database and why. */
        {
                method_job j = { .max_rows = 100, .store = NULL, .store_error = -EACCES, .db_path = "/nowhere/db" };
                char want[128];

                error = run1(PERFSNAP_METHOD_KSYMS, &j, &o);
                ASSERT_STREQ(error, PERFSNAP_ERROR_INTERNAL);
                snprintf(want, sizeof want, "cannot open the database /nowhere/db: %s", strerror(EACCES));
                ASSERT_STREQ(message_of(o), want);
                free(error);
                json_object_put(o);
        }

        /* CacheList with snapshots off. */
        p = json_object_new_object();
        {
                method_job j = { .params = p, .store = ro, .db_path = path, .cache_dir = "" };

                error = run1(PERFSNAP_METHOD_CACHE_LIST, &j, &o);
        }
        ASSERT_STREQ(error, PERFSNAP_ERROR_INTERNAL);
        ASSERT_STREQ(message_of(o), "snapshots are off (cache_dir is empty)");
        free(error);
        json_object_put(o);
        json_object_put(p);

        store_free(ro);
        store_free(w);
        snprintf(path, sizeof path, "rm -rf %s", dir);
        ASSERT_EQ(system(path), 0);
}
