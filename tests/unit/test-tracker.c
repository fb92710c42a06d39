/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The tracker (daemon/tracker.c) from a uevent to the journal, over a
 * synthetic root built from the 6.1 brd capture (tests/fixtures/
 * kernel-6.1-brd: proc/modules before and after `modprobe brd`, brd's
 * sysfs sections and notes, the kernel's raw add and remove uevents) and
 * a real sqlite store: the start event, brd's add with its section map,
 * its remove, and the uevents it must ignore. */

#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fileio.h"
#include "fixture-root.h"
#include "macro.h"
#include "test.h"
#include "tracker.h"


typedef struct fixture {
        char dir[64];
        struct event_base *base;
        store *store;
        ingest *in;
        tracker *t;
} fixture;

static void use_modules(fixture *f, const char *which) {
        char src[256];

        snprintf(src, sizeof src, FIXTURE_BRD "/proc/modules.%s", which);
        ASSERT_OK(fixture_sh("cp %s %s/proc/modules", src, f->dir));
}

static void setup(fixture *f) {
        char path[128];

        snprintf(f->dir, sizeof f->dir, "/tmp/test-tracker.XXXXXX");
        ASSERT_TRUE(mkdtemp(f->dir));
        ASSERT_OK(fixture_root_brd(f->dir, "unloaded", true, "00000000-0000-0000-0000-000000000002"));

        snprintf(path, sizeof path, "%s/db", f->dir);
        f->base = event_base_new();
        ASSERT_TRUE(f->base);
        ASSERT_OK(store_open(path, STORE_READWRITE, &f->store));
        ASSERT_OK(ingest_new(f->store, f->dir, &f->in));
        ASSERT_OK(ingest_load_kernel(f->in));
        ASSERT_OK(tracker_new(f->base, f->store, ingest_layout(f->in), f->in, f->dir, &f->t));
        ASSERT_OK(tracker_start(f->t));
}

static void teardown(fixture *f) {
        tracker_free(f->t);
        ingest_free(f->in);
        store_free(f->store);
        event_base_free(f->base);
        ASSERT_OK(fixture_sh("rm -rf %s", f->dir));
}

static void feed(fixture *f, const char *name) {
        _cleanup_free_ char *buf = NULL;
        char path[256];
        size_t len = 0;
        uevent ev;

        snprintf(path, sizeof path, FIXTURE_BRD "/uevents/%s", name);
        ASSERT_OK(read_full_file(path, 64 * 1024, &buf, &len));
        ASSERT_OK(uevent_parse(buf, len, &ev));
        tracker_uevent(f->t, &ev);
}

static size_t count_entries(const char *dir) {
        struct dirent *de;
        size_t n = 0;
        DIR *d = opendir(dir);

        ASSERT_TRUE(d);
        while ((de = readdir(d)))
                n += !streq(de->d_name, ".") && !streq(de->d_name, "..");
        closedir(d);
        return n;
}

/* The journal's events, oldest first. */
static void events(fixture *f, history *h) {
        ASSERT_OK(ingest_commit(f->in));
        ASSERT_OK(store_list_events(f->store, 0, true, 0, 0, h));
}

static const history_module *module_named(const history *h, const char *name) {
        for (size_t i = 0; i < h->n_modules; i++)
                if (streq(h->modules[i].name, name))
                        return h->modules + i;
        return NULL;
}

TEST(start_add_and_remove_are_journaled) {
        const tracker_stats *st;
        const history_module *m;
        fixture f = {};
        history h = {};
        size_t n_start;

        setup(&f);
        events(&f, &h);
        ASSERT_EQ(h.n_events, 1);
        ASSERT_STREQ(h.events[0].kind, "start");
        n_start = (size_t) h.events[0].n_records;
        history_done(&h);

        /* modprobe brd: proc/modules shows it, then the add uevent comes. */
        use_modules(&f, "loaded");
        feed(&f, "00-pid0.bin");
        events(&f, &h);
        ASSERT_EQ(h.n_events, 2);
        ASSERT_STREQ(h.events[1].kind, "module-add");
        ASSERT_STREQ(h.events[1].module, "brd");
        ASSERT_STREQ(h.events[1].detail, "uevent add, seqnum 1317");
        /* The layout after it: every record of before, plus brd's sections. */
        ASSERT_GT((size_t) h.events[1].n_records, n_start);
        history_done(&h);

        ASSERT_OK(store_list_modules(f.store, 0, true, 0, &h));
        m = module_named(&h, "brd");
        ASSERT_TRUE(m);
        ASSERT_U64_EQ(m->base, 0xffffffffc080b000ULL);
        ASSERT_EQ(m->size, 20480);
        ASSERT_STREQ(m->loaded_how, "uevent");
        ASSERT_TRUE(!m->unloaded);
        /* One section per sysfs file (what the kernel listed for it). */
        ASSERT_EQ(m->n_sections, count_entries(FIXTURE_BRD "/sys/module/brd/sections"));
        history_done(&h);

        /* rmmod brd. */
        use_modules(&f, "unloaded");
        feed(&f, "01-pid0.bin");
        events(&f, &h);
        ASSERT_EQ(h.n_events, 3);
        ASSERT_STREQ(h.events[2].kind, "module-remove");
        ASSERT_STREQ(h.events[2].module, "brd");
        ASSERT_EQ((size_t) h.events[2].n_records, n_start);
        history_done(&h);
        ASSERT_OK(store_list_modules(f.store, 0, false, 0, &h));
        ASSERT_TRUE(module_named(&h, "brd")->unloaded);
        history_done(&h);

        st = tracker_get_stats(f.t);
        ASSERT_EQ(st->module_uevents, 2);
        ASSERT_EQ(st->modules_added, 1);
        ASSERT_EQ(st->modules_removed, 1);
        ASSERT_EQ(st->ignored_uevents, 0);
        teardown(&f);
}

TEST(uevents_that_change_nothing_are_ignored) {
        fixture f = {};
        history h = {};
        uevent ev = {};

        setup(&f);
        /* dummy's add while proc/modules does not show it (gone already,
         * or built in): nothing to record. */
        feed(&f, "02-pid0.bin");
        /* A remove of a module never tracked. */
        feed(&f, "03-pid0.bin");
        /* Another subsystem. */
        snprintf(ev.subsystem, sizeof ev.subsystem, "block");
        ev.action = UEVENT_ACTION_ADD;
        tracker_uevent(f.t, &ev);

        events(&f, &h);
        ASSERT_EQ(h.n_events, 1);
        history_done(&h);
        ASSERT_EQ(tracker_get_stats(f.t)->ignored_uevents, 3);
        ASSERT_EQ(tracker_get_stats(f.t)->modules_added, 0);
        teardown(&f);
}

/* A rescan reads kallsyms as a stream: BPF lines appended to the
 * fixture's are registered, each as long as the gap to the next higher
 * address of any line; a second rescan finds the one removed. */
TEST(a_rescan_streams_the_dynamic_lines) {
        tracker_rescan_result res = {};
        fixture f = {};
        layout *l;
        size_t found = 0;

        setup(&f);
        l = ingest_layout(f.in);
        ASSERT_OK(fixture_sh("printf 'ffffffffc0200100 t bpf_prog_bbbb_two\\t[bpf]\\n"
                             "ffffffffc0200000 t bpf_prog_aaaa_one\\t[bpf]\\n"
                             "ffffffffc0200180 t other_fn\\t[foo]\\n' >> %s/proc/kallsyms", f.dir));
        ASSERT_OK(tracker_rescan_ksyms(f.t, "test", &res));
        ASSERT_EQ(res.ksyms_added, 2);
        ASSERT_EQ(res.ksyms_removed, 0);
        for (size_t i = 0; i < layout_n_ksyms(l); i++) {
                const layout_ksym *k = layout_get_ksym(l, i);

                if (streq(k->name, "bpf_prog_aaaa_one")) {
                        ASSERT_U64_EQ(k->addr, 0xffffffffc0200000ULL);
                        ASSERT_U64_EQ(k->len, 0x100);
                        found++;
                } else if (streq(k->name, "bpf_prog_bbbb_two")) {
                        ASSERT_U64_EQ(k->len, 0x80);
                        ASSERT_EQ(k->type, LAYOUT_KSYM_BPF);
                        found++;
                }
        }
        ASSERT_EQ(found, 2);

        ASSERT_OK(fixture_sh("grep -v bpf_prog_aaaa_one %s/proc/kallsyms > %s/k && mv %s/k %s/proc/kallsyms", f.dir,
                             f.dir, f.dir, f.dir));
        ASSERT_OK(tracker_rescan_ksyms(f.t, "test", &res));
        ASSERT_EQ(res.ksyms_added, 0);
        ASSERT_EQ(res.ksyms_removed, 1);
        teardown(&f);
}

/* A rescan that cannot read kallsyms to its end must fail and change
 * nothing, as kallsyms_load() made it (-EFBIG past 64 MiB). Here a 256
 * MiB run of NULs without a newline (a hole: no disk) stands before the
 * six [bpf] lines, and the rescan runs with 160 MiB of address space to
 * spare: the stream's getline() fails with ENOMEM, taken for the end of
 * the file, and the rescan unregisters every live BPF symbol. */
TEST(a_rescan_that_cannot_read_to_the_end_changes_nothing) {
        tracker_rescan_result res = {};
        fixture f = {};
        int status = 0;
        pid_t pid;

#if defined(__SANITIZE_ADDRESS__)
        TEST_SKIP("RLIMIT_AS and ASan do not mix");
#endif
        setup(&f);
        ASSERT_OK(fixture_sh("cd %s/proc && grep -v '\\[bpf\\]' kallsyms > k && grep '\\[bpf\\]' kallsyms > b && "
                             "truncate -s +256M k && printf '\\n' >> k && cat b >> k && mv k kallsyms && rm b", f.dir));
        pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                int r;

                if (test_limit_address_space(160u << 20) < 0)
                        _exit(2);
                r = tracker_rescan_ksyms(f.t, "test", &res);
                fprintf(stderr, "rescan: %d, %u registered, %u unregistered\n", r, res.ksyms_added, res.ksyms_removed);
                _exit(r < 0 || (res.ksyms_added == 0 && res.ksyms_removed == 0) ? 0 : 1);
        }
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        teardown(&f);
        ASSERT_TRUE(WIFEXITED(status));
        ASSERT_EQ(WEXITSTATUS(status), 0);
}

/* An empty kallsyms (or one with no line in kallsyms form): the rescan
 * sorts no addresses. Run under -Db_sanitize=undefined: sort_u64(NULL, 0)
 * is qsort(NULL, 0, ...), whose first argument glibc declares nonnull. */
TEST(a_rescan_of_an_empty_kallsyms) {
        tracker_rescan_result res = {};
        fixture f = {};

        setup(&f);
        ASSERT_OK(fixture_sh(": > %s/proc/kallsyms", f.dir));
        ASSERT_OK(tracker_rescan_ksyms(f.t, "test", &res));
        ASSERT_EQ(res.ksyms_added, 0);
        ASSERT_EQ(res.ksyms_removed, 6);
        teardown(&f);
}
