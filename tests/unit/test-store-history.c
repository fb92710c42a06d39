/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The store's journal of the kernel's layout (modules, sections, ksyms)
 * and its migration from schema 4 with every answer kept. */
#include "test-store.h"

static int add_event(store *s, uint64_t t, int64_t boot, const char *kind, int64_t module, int64_t ksym,
                     const int64_t *mods, size_t n_mods, const int64_t *ksyms, size_t n_ksyms) {
        return store_add_event(s, &(store_event) {
                        .time_ns = t, .boot_id = boot, .kind = kind, .module_id = module, .ksym_id = ksym,
                        .live_modules = mods, .n_live_modules = n_mods, .live_ksyms = ksyms, .n_live_ksyms = n_ksyms,
                }, NULL);
}

/* The store's answers as the wire renders them (wire/history-json.c), so
 * the assertions read the protocol's shape. */
static int list_modules_json(store *s, uint64_t since_ns, bool with_sections, uint32_t max_rows, json_object **ret) {
        history h = {};
        int r = store_list_modules(s, since_ns, with_sections, max_rows, &h);

        if (r >= 0)
                r = history_modules_json(&h, ret);
        history_done(&h);
        return r;
}

static int list_ksyms_json(store *s, uint64_t since_ns, uint32_t max_rows, json_object **ret) {
        history h = {};
        int r = store_list_ksyms(s, since_ns, max_rows, &h);

        if (r >= 0)
                r = history_ksyms_json(&h, ret);
        history_done(&h);
        return r;
}

static int list_events_json(store *s, uint64_t since_ns, bool with_records, uint32_t max_events, uint32_t max_records,
                            json_object **ret) {
        history h = {};
        int r = store_list_events(s, since_ns, with_records, max_events, max_records, &h);

        if (r >= 0)
                r = history_events_json(&h, ret);
        history_done(&h);
        return r;
}

/* A new store in dir (made from its template) with a boot and two
 * modules loaded at start: the first at 0xffffffffc0a00000 with both
 * sections, the second at 0xffffffffc0b00000 with the first. */
static store *open_with_two_modules(char *dir, store_section secs[2], const char *first, const char *second,
                                    int64_t *boot, int64_t *a, int64_t *b) {
        char path[128];
        store *s = NULL;

        ASSERT_TRUE(mkdtemp(dir));
        snprintf(path, sizeof path, "%s/db", dir);
        ASSERT_OK(store_open(path, STORE_READWRITE, &s));
        ASSERT_OK(store_add_boot(s, "uuid", "bid", 0xffffffff81000000, "6.1", 100, boot));
        ASSERT_OK(store_add_module(s, &(store_module) { .boot_id = *boot, .name = first, .base = 0xffffffffc0a00000,
                                   .size = 0x2000, .loaded_ns = 100, .loaded_how = "startup",
                                   .sections = secs, .n_sections = 2 }, a));
        ASSERT_OK(store_add_module(s, &(store_module) { .boot_id = *boot, .name = second, .base = 0xffffffffc0b00000,
                                   .size = 0x2000, .loaded_ns = 100, .loaded_how = "startup",
                                   .sections = secs, .n_sections = 1 }, b));
        return s;
}

TEST(expire_drops_old_journal_entries_and_unloaded_modules) {
        char dir[] = "/tmp/test-store-journal.XXXXXX", path[128];
        store_section secs[2] = {
                { .name = ".text", .addr = 0xffffffffc0a00000, .len = 0x800, .len_source = "next", .exec = true },
                { .name = ".data", .addr = 0xffffffffc0a01000, .len = 0x100, .len_source = "elf" },
        };
        json_object *res = NULL, *a;
        int64_t boot = 0, old_mod = 0, live_mod = 0;
        store *s = NULL;

        s = open_with_two_modules(dir, secs, "old", "live", &boot, &old_mod, &live_mod);
        ASSERT_OK(add_event(s, 100, boot, "start", 0, 0, (int64_t[]) { old_mod, live_mod }, 2, NULL, 0));
        ASSERT_OK(store_unload_module(s, old_mod, 200, "uevent"));
        ASSERT_ERROR(store_unload_module(s, old_mod, 210, "uevent"), ENOENT);
        ASSERT_OK(add_event(s, 200, boot, "module-remove", old_mod, 0, (int64_t[]) { live_mod }, 1, NULL, 0));
        ASSERT_OK(add_event(s, 300, boot, "module-add", live_mod, 0, (int64_t[]) { live_mod }, 1, NULL, 0));

        ASSERT_OK(list_events_json(s, 0, true, 0, 0, &res));
        ASSERT_TRUE(json_object_object_get_ex(res, "events", &a));
        ASSERT_EQ(json_object_array_length(a), 3);
        ASSERT_EQ(json_object_get_int(json_object_object_get(json_object_array_get_idx(a, 0), "n_records")), 3);
        json_object_put(res);

        /* Everything before 250 goes, except what a kept entry refers to:
         * "old" is only named by the removed remove-entry, so it goes too. */
        ASSERT_GE(store_expire(s, 250, NULL), 0);
        ASSERT_OK(list_events_json(s, 0, true, 0, 0, &res));
        ASSERT_TRUE(json_object_object_get_ex(res, "events", &a));
        ASSERT_EQ(json_object_array_length(a), 1);
        ASSERT_EQ(json_object_get_int(json_object_object_get(json_object_array_get_idx(a, 0), "n_records")), 1);
        json_object_put(res);
        ASSERT_OK(list_modules_json(s, 0, true, 0, &res));
        ASSERT_TRUE(json_object_object_get_ex(res, "modules", &a));
        ASSERT_EQ(json_object_array_length(a), 1);
        ASSERT_STREQ(json_object_get_string(json_object_object_get(json_object_array_get_idx(a, 0), "name")), "live");
        json_object_put(res);

        store_free(s);
        snprintf(path, sizeof path, "rm -rf %s", dir);
        ASSERT_EQ(system(path), 0);
}

static json_object *member_at(json_object *list, const char *key, size_t i) {
        json_object *a;

        if (!json_object_object_get_ex(list, key, &a))
                return NULL;
        return json_object_array_get_idx(a, i);
}

/* The section records of entry i of the journal (from 0), as
 * "module:section" joined by spaces; n_records into *ret_n. */
static void sections_of_entry(store *s, size_t i, char *buf, size_t size, int *ret_n) {
        json_object *res = NULL, *e, *a;
        size_t len = 0;

        ASSERT_OK(list_events_json(s, 0, true, 0, 0, &res));
        e = member_at(res, "events", i);
        ASSERT_TRUE(e);
        *ret_n = json_object_get_int(json_object_object_get(e, "n_records"));
        buf[0] = 0;
        ASSERT_TRUE(json_object_object_get_ex(e, "records", &a));
        for (size_t k = 0; k < json_object_array_length(a); k++) {
                json_object *r = json_object_array_get_idx(a, k);

                if (!streq(json_object_get_string(json_object_object_get(r, "type")), "section"))
                        continue;
                len += (size_t) snprintf(buf + len, size - len, "%s%s:%s", len ? " " : "",
                                         json_object_get_string(json_object_object_get(r, "module")),
                                         json_object_get_string(json_object_object_get(r, "section")));
                ASSERT_LT(len, size);
        }
        json_object_put(res);
}

/* Entries that do not change the loaded modules (those of dynamic
 * symbols) refer to the section map of the last entry that wrote one,
 * and list it as their own; retention hands a map on to the first entry
 * it keeps. */
TEST(entries_share_the_section_map_of_the_same_modules) {
        char dir[] = "/tmp/test-store-maps.XXXXXX", path[128], got[256];
        store_section secs[2] = {
                { .name = ".text", .addr = 0xffffffffc0a00000, .len = 0x800, .len_source = "elf", .exec = true },
                { .name = ".data", .addr = 0xffffffffc0a01000, .len = 0x100, .len_source = "elf" },
        };
        int64_t boot = 0, a = 0, b = 0, k = 0;
        store *s = NULL;
        int n = 0;

        s = open_with_two_modules(dir, secs, "a", "b", &boot, &a, &b);
        snprintf(path, sizeof path, "%s/db", dir);
        ASSERT_OK(store_add_ksym(s, &(store_ksym) { .boot_id = boot, .name = "bpf_prog_0123456789abcdef_x",
                                 .addr = 0xffffffffc0200000, .len = 0x40, .type = "bpf", .registered_ns = 150,
                                 .registered_how = "perf" }, &k));
        int64_t ab[] = { a, b };
        ASSERT_OK(add_event(s, 100, boot, "start", 0, 0, ab, 2, NULL, 0));
        for (unsigned i = 0; i < 3; i++)
                ASSERT_OK(add_event(s, 150 + i, boot, "ksym-register", 0, k, ab, 2, &k, 1));
        ASSERT_OK(store_unload_module(s, b, 200, "uevent"));
        ASSERT_OK(add_event(s, 200, boot, "module-remove", b, 0, &a, 1, &k, 1));
        ASSERT_OK(add_event(s, 210, boot, "ksym-unregister", 0, k, &a, 1, NULL, 0));
        /* Back to a and b: the map of a and b again, the entries' own. */
        ASSERT_OK(add_event(s, 220, boot, "module-add", b, 0, ab, 2, NULL, 0));

        /* Three maps written: 3 + 2 + 3 rows, not one a section an entry. */
        ASSERT_EQ(sql_int(path, "SELECT count(*) FROM event_sections"), 8);
        ASSERT_EQ(sql_int(path, "SELECT count(*) FROM events WHERE sections_of IS NOT NULL"), 4);
        for (size_t i = 0; i < 4; i++) {
                sections_of_entry(s, i, got, sizeof got, &n);
                ASSERT_STREQ(got, "a:.text b:.text a:.data");
                ASSERT_EQ(n, i == 0 ? 3 : 4);
        }
        sections_of_entry(s, 5, got, sizeof got, &n);
        ASSERT_STREQ(got, "a:.text a:.data");
        ASSERT_EQ(n, 2);
        sections_of_entry(s, 6, got, sizeof got, &n);
        ASSERT_STREQ(got, "a:.text b:.text a:.data");

        /* Retention past the start entry: the first register entry takes
         * its map, the next two refer to it. */
        ASSERT_GE(store_expire(s, 140, NULL), 0);
        ASSERT_EQ(sql_int(path, "SELECT count(*) FROM events"), 6);
        ASSERT_EQ(sql_int(path, "SELECT count(*) FROM event_sections"), 8);
        for (size_t i = 0; i < 3; i++) {
                sections_of_entry(s, i, got, sizeof got, &n);
                ASSERT_STREQ(got, "a:.text b:.text a:.data");
                ASSERT_EQ(n, 4);
        }
        /* And past those: their rows go. */
        ASSERT_GE(store_expire(s, 190, NULL), 0);
        ASSERT_EQ(sql_int(path, "SELECT count(*) FROM events"), 3);
        ASSERT_EQ(sql_int(path, "SELECT count(*) FROM event_sections"), 5);
        sections_of_entry(s, 1, got, sizeof got, &n);
        ASSERT_STREQ(got, "a:.text a:.data");

        store_free(s);
        snprintf(path, sizeof path, "rm -rf %s", dir);
        ASSERT_EQ(system(path), 0);
}

TEST(ksyms_are_journaled_listed_and_expired) {
        char dir[] = "/tmp/test-store-ksyms.XXXXXX", path[128];
        store_section sec = { .name = ".text", .addr = 0xffffffffc0a00000, .len = 0x800,
                              .len_source = "elf", .exec = true };
        json_object *res = NULL, *a, *e, *rec;
        int64_t boot = 0, mod = 0, gone = 0, live = 0;
        store *s = NULL;

        ASSERT_TRUE(mkdtemp(dir));
        snprintf(path, sizeof path, "%s/db", dir);
        ASSERT_OK(store_open(path, STORE_READWRITE, &s));
        ASSERT_OK(store_add_boot(s, "uuid", "bid", 0xffffffff81000000, "6.1", 100, &boot));
        ASSERT_OK(store_add_module(s, &(store_module) { .boot_id = boot, .name = "m", .base = 0xffffffffc0a00000,
                                   .size = 0x1000, .loaded_ns = 100, .loaded_how = "startup",
                                   .sections = &sec, .n_sections = 1 }, &mod));
        ASSERT_OK(store_add_ksym(s, &(store_ksym) { .boot_id = boot, .name = "bpf_prog_0123456789abcdef_gone",
                                 .addr = 0xffffffffc0200000, .len = 0x40, .type = "bpf", .registered_ns = 150,
                                 .registered_how = "perf" }, &gone));
        ASSERT_OK(store_add_ksym(s, &(store_ksym) { .boot_id = boot, .name = "ftrace_trampoline",
                                 .addr = 0xffffffffc0300000, .len = 0x1000, .type = "ool", .registered_ns = 100,
                                 .registered_how = "startup" }, &live));
        ASSERT_OK(store_set_ksym_prog_id(s, gone, 42));
        ASSERT_OK(add_event(s, 100, boot, "start", 0, 0, &mod, 1, &live, 1));
        ASSERT_OK(add_event(s, 150, boot, "ksym-register", 0, gone, &mod, 1, (int64_t[]) { gone, live }, 2));
        ASSERT_OK(store_unregister_ksym(s, gone, 200, "perf"));
        ASSERT_ERROR(store_unregister_ksym(s, gone, 210, "perf"), ENOENT);
        ASSERT_OK(add_event(s, 200, boot, "ksym-unregister", 0, gone, &mod, 1, &live, 1));

        /* Listed in registration order, with their windows. */
        ASSERT_OK(list_ksyms_json(s, 0, 0, &res));
        ASSERT_STREQ(json_object_get_string(json_object_object_get(member_at(res, "ksyms", 0), "name")), "ftrace_trampoline");
        e = member_at(res, "ksyms", 1);
        ASSERT_STREQ(json_object_get_string(json_object_object_get(e, "name")), "bpf_prog_0123456789abcdef_gone");
        ASSERT_STREQ(json_object_get_string(json_object_object_get(e, "addr")), "0xffffffffc0200000");
        ASSERT_EQ(json_object_get_int(json_object_object_get(e, "prog_id")), 42);
        ASSERT_EQ(json_object_get_int64(json_object_object_get(e, "unregistered_ns")), 200);
        ASSERT_STREQ(json_object_get_string(json_object_object_get(e, "unregistered_how")), "perf");
        json_object_put(res);
        /* Since 201: the unregistered one is not listed. */
        ASSERT_OK(list_ksyms_json(s, 201, 0, &res));
        ASSERT_TRUE(json_object_object_get_ex(res, "ksyms", &a));
        ASSERT_EQ(json_object_array_length(a), 1);
        json_object_put(res);

        /* The register event re-emits the module's section and both symbols. */
        ASSERT_OK(list_events_json(s, 0, true, 0, 0, &res));
        e = member_at(res, "events", 1);
        ASSERT_STREQ(json_object_get_string(json_object_object_get(e, "kind")), "ksym-register");
        ASSERT_STREQ(json_object_get_string(json_object_object_get(e, "ksym")), "bpf_prog_0123456789abcdef_gone");
        ASSERT_EQ(json_object_get_int(json_object_object_get(e, "n_records")), 3);
        ASSERT_TRUE(json_object_object_get_ex(e, "records", &a));
        ASSERT_EQ(json_object_array_length(a), 3);
        rec = json_object_array_get_idx(a, 1);
        ASSERT_STREQ(json_object_get_string(json_object_object_get(rec, "type")), "ksymbol");
        ASSERT_STREQ(json_object_get_string(json_object_object_get(rec, "name")), "bpf_prog_0123456789abcdef_gone");
        ASSERT_EQ(json_object_get_int(json_object_object_get(rec, "len")), 0x40);
        ASSERT_STREQ(json_object_get_string(json_object_object_get(rec, "ksym_type")), "bpf");
        json_object_put(res);

        /* Expiry before 250 takes the first three entries, and the
         * unregistered symbol nothing refers to any more. */
        ASSERT_GE(store_expire(s, 250, NULL), 0);
        ASSERT_OK(list_ksyms_json(s, 0, 0, &res));
        ASSERT_TRUE(json_object_object_get_ex(res, "ksyms", &a));
        ASSERT_EQ(json_object_array_length(a), 1);
        ASSERT_STREQ(json_object_get_string(json_object_object_get(member_at(res, "ksyms", 0), "name")), "ftrace_trampoline");
        json_object_put(res);

        store_free(s);
        snprintf(path, sizeof path, "rm -rf %s", dir);
        ASSERT_EQ(system(path), 0);
}

/* ---- migration from schema 4 (one row per sample) ---- */

static void copy_file(const char *from, const char *to) {
        char buf[65536];
        FILE *in = fopen(from, "re"), *out = fopen(to, "we");
        size_t n;

        ASSERT_TRUE(in && out);
        while ((n = fread(buf, 1, sizeof buf, in)) > 0)
                ASSERT_EQ(fwrite(buf, 1, n, out), n);
        fclose(in);
        ASSERT_EQ(fclose(out), 0);
}

static int row_name_cmp(const void *a, const void *b) {
        const query_row *x = a, *y = b;
        int c;

        if ((c = strcmp(x->comm, y->comm)) || (c = strcmp(x->module, y->module)) || (c = strcmp(x->symbol, y->symbol)))
                return c;
        return (int) x->kernel - (int) y->kernel;
}

/* The answer schema 4's perfsnapctl gave (json), against store_query()'s
 * on the migrated file: the same rows with the same counts. */
static void expect_same_answer(store *s, const char *json_file, const char *comm, int cpu, uint64_t until_ns) {
        json_object *o = json_object_from_file(json_file), *res, *rows, *v;
        query_params q = QUERY_PARAMS_INIT;
        query_result *r;
        size_t n;

        ASSERT_TRUE(o);
        ASSERT_TRUE(json_object_object_get_ex(o, "result", &res));
        ASSERT_TRUE(json_object_object_get_ex(res, "rows", &rows));
        q.until_ns = until_ns;
        q.comm = comm;
        q.cpu = cpu;
        r = run_query(s, &q, 0, 0);

        ASSERT_TRUE(json_object_object_get_ex(res, "total", &v));
        fprintf(stderr, "%s: schema 4 said %" PRId64 " samples in %zu rows, now %" PRIu64 " in %zu rows\n", json_file,
                json_object_get_int64(v), json_object_array_length(rows), r->total_samples, r->n_rows);
        ASSERT_U64_EQ(r->total_samples, (uint64_t) json_object_get_int64(v));
        ASSERT_TRUE(json_object_object_get_ex(res, "cpus", &v));
        ASSERT_EQ(r->n_cpus, json_object_get_int64(v));
        ASSERT_TRUE(json_object_object_get_ex(res, "lost", &v));
        ASSERT_U64_EQ(r->lost, (uint64_t) json_object_get_int64(v));
        if (!comm && cpu < 0) {
                ASSERT_TRUE(json_object_object_get_ex(res, "first_ns", &v));
                ASSERT_U64_EQ(r->first_ns, (uint64_t) json_object_get_int64(v));
                ASSERT_TRUE(json_object_object_get_ex(res, "last_ns", &v));
                ASSERT_U64_EQ(r->last_ns, (uint64_t) json_object_get_int64(v));
        }

        n = json_object_array_length(rows);
        ASSERT_EQ(r->n_rows, n);
        query_row *want = calloc(n, sizeof *want);
        ASSERT_TRUE(want);
        for (size_t i = 0; i < n; i++) {
                json_object *row = json_object_array_get_idx(rows, i), *f;

                ASSERT_TRUE(json_object_object_get_ex(row, "comm", &f));
                want[i].comm = (char *) json_object_get_string(f);
                ASSERT_TRUE(json_object_object_get_ex(row, "module", &f));
                want[i].module = (char *) json_object_get_string(f);
                ASSERT_TRUE(json_object_object_get_ex(row, "symbol", &f));
                want[i].symbol = (char *) json_object_get_string(f);
                ASSERT_TRUE(json_object_object_get_ex(row, "kernel", &f));
                want[i].kernel = json_object_get_boolean(f);
                ASSERT_TRUE(json_object_object_get_ex(row, "samples", &f));
                want[i].samples = (uint64_t) json_object_get_int64(f);
                /* Schema 4's perfsnapctl showed an unnamed user frame in a
                 * file as "0x<offset>"; now it is "FILE+0x<offset>". */
                want[i].symbol = strdup(want[i].symbol);
                ASSERT_TRUE(want[i].symbol);
                if (!want[i].kernel && want[i].module[0] == '/' && want[i].module[1] != '/' &&
                    strncmp(want[i].symbol, "0x", 2) == 0) {
                        char *name = NULL;

                        ASSERT_TRUE(asprintf(&name, "%s+%s", strrchr(want[i].module, '/') + 1, want[i].symbol) > 0);
                        free(want[i].symbol);
                        want[i].symbol = name;
                }
        }
        qsort(want, n, sizeof *want, row_name_cmp);
        qsort(r->rows, n, sizeof *r->rows, row_name_cmp);
        for (size_t i = 0; i < n; i++) {
                if (row_name_cmp(want + i, r->rows + i) != 0 || want[i].samples != r->rows[i].samples)
                        fprintf(stderr, "row %zu: want %s %s %s %" PRIu64 ", got %s %s %s %" PRIu64 "\n", i,
                                want[i].comm, want[i].module, want[i].symbol, want[i].samples, r->rows[i].comm,
                                r->rows[i].module, r->rows[i].symbol, r->rows[i].samples);
                ASSERT_EQ(row_name_cmp(want + i, r->rows + i), 0);
                ASSERT_U64_EQ(want[i].samples, r->rows[i].samples);
        }
        for (size_t i = 0; i < n; i++)
                free(want[i].symbol);
        free(want);
        query_result_free(r);
        json_object_put(o);
}

TEST(migration_from_schema_4_keeps_every_answer) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        _cleanup_fclose_ FILE *f = NULL;
        unsigned long long until_s;
        query_params q = QUERY_PARAMS_INIT;
        query_result *r;
        char line[8192];
        size_t n_lines = 0;

        tmpdir_make(&t);
        copy_file(TEST_DATA("store-v4/perfsnapd.db"), t.db);
        ASSERT_EQ(sql_int(t.db, "PRAGMA user_version"), 4);
        ASSERT_EQ(sql_int(t.db, "SELECT count(*) FROM samples"), 1596);
        f = fopen(TEST_DATA("store-v4/until"), "re");
        ASSERT_TRUE(f && fscanf(f, "%llu", &until_s) == 1);
        fclose(TAKE_PTR(f));

        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        ASSERT_EQ(sql_int(t.db, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
        ASSERT_EQ(sql_int(t.db, "SELECT count(*) FROM sqlite_schema WHERE name IN ('samples', 'samples_v4')"), 0);
        ASSERT_EQ(sql_int(t.db, "SELECT sum(n_samples) FROM sample_blocks WHERE level = 0"), 1596);

        expect_same_answer(s, TEST_DATA("store-v4/all.json"), NULL, -1, until_s * NSEC_PER_SEC);
        expect_same_answer(s, TEST_DATA("store-v4/dd.json"), "dd", -1, until_s * NSEC_PER_SEC);
        expect_same_answer(s, TEST_DATA("store-v4/cpu1.json"), NULL, 1, until_s * NSEC_PER_SEC);

        /* The folded stacks: the same lines with the same counts (names as
         * the client prints them: ';', blanks and controls become '_').
         * Stacks that differ only in offsets print alike: compare the sums
         * per line. */
        q.until_ns = until_s * NSEC_PER_SEC;
        q.want_stacks = true;
        r = run_query(s, &q, 0, 0);
        char **got = calloc(r->n_stacks, sizeof *got);
        ASSERT_TRUE(got);
        for (size_t i = 0; i < r->n_stacks; i++) {
                char buf[8192];
                size_t len = (size_t) snprintf(buf, sizeof buf, "%s", r->stacks[i].comm);

                for (size_t j = 0; j < r->stacks[i].n_frames; j++)
                        len += (size_t) snprintf(buf + len, sizeof buf - MIN(len, sizeof buf), "\x01%s", r->stacks[i].frames[j]);
                for (char *c = buf; *c; c++)
                        if (*c == ';' || *c == ' ' || (*c > 1 && *c < 0x20) || *c == 0x7f)
                                *c = '_';
                        else if (*c == 1)
                                *c = ';';
                got[i] = strdup(buf);
                ASSERT_TRUE(got[i]);
        }
        char (*lines)[8192] = calloc(2000, sizeof *lines);
        uint64_t *counts = calloc(2000, sizeof *counts);
        ASSERT_TRUE(lines && counts);
        f = fopen(TEST_DATA("store-v4/all.folded"), "re");
        ASSERT_TRUE(f);
        while (n_lines < 2000 && fgets(line, sizeof line, f)) {
                char *sp = strrchr(line, ' ');

                ASSERT_TRUE(sp);
                *sp = 0;
                counts[n_lines] = strtoull(sp + 1, NULL, 10);
                /* Schema 4 wrote an unnamed user frame "[FILE]+0x<offset>";
                 * now it is "FILE+0x<offset>". */
                {
                        char *out = lines[n_lines];

                        for (const char *p = line; *p;) {
                                const char *e = strstr(p, "]+0x");

                                if (*p == '[' && e && (!strchr(p, ';') || e < strchr(p, ';'))) {
                                        memcpy(out, p + 1, (size_t) (e - p - 1));
                                        out += e - p - 1;
                                        p = e + 1;
                                }
                                while (*p && *p != ';')
                                        *out++ = *p++;
                                if (*p == ';')
                                        *out++ = *p++;
                        }
                        *out = 0;
                }
                n_lines++;
        }
        uint64_t total_want = 0, total_got = 0;
        for (size_t k = 0; k < n_lines; k++) {
                uint64_t want = 0, have = 0;

                for (size_t m = 0; m < n_lines; m++)
                        if (streq(lines[m], lines[k]))
                                want += counts[m];
                for (size_t i = 0; i < r->n_stacks; i++)
                        if (streq(got[i], lines[k]))
                                have += r->stacks[i].samples;
                if (want != have)
                        fprintf(stderr, "%s: schema 4 %" PRIu64 ", now %" PRIu64 "\n", lines[k], want, have);
                ASSERT_U64_EQ(have, want);
                total_want += counts[k];
        }
        for (size_t i = 0; i < r->n_stacks; i++) {
                total_got += r->stacks[i].samples;
                free(got[i]);
        }
        fprintf(stderr, "folded: %zu lines, %" PRIu64 " samples; now %zu stacks, %" PRIu64 " samples\n", n_lines,
                total_want, r->n_stacks, total_got);
        ASSERT_U64_EQ(total_got, total_want);
        free(got);
        free(lines);
        free(counts);
        query_result_free(r);

        /* Opening again converts nothing twice. */
        s = store_free(s);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        ASSERT_EQ(sql_int(t.db, "SELECT sum(n_samples) FROM sample_blocks WHERE level = 0"), 1596);
}

/* ---- buckets, minutes and hours ---- */
