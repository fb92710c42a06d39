/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The symbolizer (daemon/symbolizer.c) over a real sqlite store, a kernel
 * layout from kallsyms text and a task table fed MMAP2-like mappings: the
 * frames it interns, stack identity across processes, its cache of stacks,
 * the user entries it drops, and the miss handler. */

#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "perf/jitmaps.h"
#include "symbolizer.h"
#include "test.h"
#include "timeparse.h"

static const char kallsyms_text[] =
        "ffffffff81000000 T _text\n"
        "ffffffff81000000 T startup_64\n"
        "ffffffff81001000 T do_one_initcall\n"
        "ffffffff81002000 T _etext\n";

#define APP_A 0x400000ULL               /* /usr/bin/app in pid 100 */
#define APP_B 0x7f0000000000ULL         /* the same file in pid 200 */
#define KADDR 0xffffffff81001010ULL     /* do_one_initcall+0x10 */
#define CTX_K ((uint64_t) PERF_CONTEXT_KERNEL)
#define CTX_U ((uint64_t) PERF_CONTEXT_USER)
#define T0 1700000000000000000ULL

typedef struct fixture {
        char dir[64];
        store *store;
        layout *layout;
        tasks *tasks;
        symbolizer *sym;
        int64_t boot;
} fixture;

static void setup(fixture *f) {
        kallsyms *k = NULL;
        char path[128];

        snprintf(f->dir, sizeof f->dir, "/tmp/test-symbolizer.XXXXXX");
        ASSERT_TRUE(mkdtemp(f->dir));
        snprintf(path, sizeof path, "%s/db", f->dir);
        ASSERT_OK(store_open(path, STORE_READWRITE, &f->store));
        ASSERT_OK(store_add_boot(f->store, "uuid", "kbid", 0xffffffff81000000, "6.1", T0, &f->boot));
        ASSERT_OK(layout_new(&f->layout));
        ASSERT_OK(kallsyms_parse(kallsyms_text, strlen(kallsyms_text), &k));
        layout_set_kernel(f->layout, k);
        /* An empty root: no /proc to fall back on, only the mappings given. */
        ASSERT_OK(tasks_new(f->dir, &f->tasks));
        ASSERT_OK(tasks_comm(f->tasks, 100, 100, "app", true));
        ASSERT_OK(tasks_comm(f->tasks, 200, 200, "app", true));
        ASSERT_OK(tasks_mmap(f->tasks, 100, APP_A, 0x10000, 0, "/usr/bin/app", "abcd"));
        ASSERT_OK(tasks_mmap(f->tasks, 200, APP_B, 0x10000, 0, "/usr/bin/app", "abcd"));
        ASSERT_OK(symbolizer_new(f->store, f->layout, f->tasks, &f->sym));
        symbolizer_set_kernel_build_id(f->sym, "kbid");
        ASSERT_OK(store_begin(f->store));
}

static void teardown(fixture *f) {
        char cmd[128];

        symbolizer_free(f->sym);
        tasks_free(f->tasks);
        layout_free(f->layout);
        store_free(f->store);
        snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
        ASSERT_EQ(system(cmd), 0);
}

static int64_t stack_of(fixture *f, uint32_t pid, const uint64_t *ips, size_t n) {
        perf_sample ps = { .pid = pid, .tid = pid, .time = 1000, .period = 1, .nr = n, .ips = ips };
        int64_t stack = -1;

        ASSERT_OK(symbolizer_stack(f->sym, &ps, &stack, NULL));
        return stack;
}

static int64_t leaf_of(fixture *f, uint32_t pid, uint64_t ip, uint64_t time);

/* Two samples of `stack` two hours apart: the store starts a generation of
 * stacks (an hour of samples ends one), committed. */
static void next_stack_generation(fixture *f, int64_t stack) {
        uint64_t gen0 = store_generation(f->store);

        ASSERT_OK(store_insert_sample(f->store, &(stored_sample) { .time_ns = T0, .pid = 100, .tid = 100,
                                      .stack_id = stack, .period = 1, .boot_id = f->boot }));
        ASSERT_OK(store_insert_sample(f->store, &(stored_sample) { .time_ns = T0 + 2 * 3600 * NSEC_PER_SEC,
                                      .pid = 100, .tid = 100, .stack_id = stack, .period = 1, .boot_id = f->boot }));
        ASSERT_OK(store_commit(f->store));
        ASSERT_OK(store_begin(f->store));
        ASSERT_NE(store_generation(f->store), gen0);
}

/* The folded frames of the one stack the store holds samples of. */
static void assert_stored_frames(fixture *f, int64_t stack, const char *const *want, size_t n) {
        query_params q = QUERY_PARAMS_INIT;
        query_result *r = NULL;

        ASSERT_OK(store_insert_sample(f->store, &(stored_sample) { .time_ns = T0, .pid = 100, .tid = 100,
                                      .stack_id = stack, .period = 1, .boot_id = f->boot }));
        ASSERT_OK(store_flush_samples(f->store, UINT64_MAX));
        ASSERT_OK(store_commit(f->store));
        q.want_stacks = true;
        ASSERT_OK(store_query(f->store, &q, 0, 0, &r));
        ASSERT_EQ(r->n_stacks, 1);
        if (r->stacks[0].n_frames != n)
                for (size_t i = 0; i < r->stacks[0].n_frames; i++)
                        fprintf(stderr, "frame %zu: %s\n", i, r->stacks[0].frames[i]);
        ASSERT_EQ(r->stacks[0].n_frames, n);
        for (size_t i = 0; i < n; i++)
                ASSERT_STREQ(r->stacks[0].frames[i], want[i]);
        query_result_free(r);
}

TEST(kernel_and_user_frames_are_named) {
        const uint64_t chain[] = { CTX_K, KADDR, CTX_U, APP_A + 0x10, APP_A + 0x2345 };
        const char *const want[] = { "app+0x2345", "app+0x10", "do_one_initcall" };
        fixture f = {};
        int64_t stack;

        setup(&f);
        stack = stack_of(&f, 100, chain, ELEMENTSOF(chain));
        ASSERT_GT(stack, 0);
        ASSERT_EQ(symbolizer_get_stats(f.sym)->kernel_frames, 1);
        ASSERT_EQ(symbolizer_get_stats(f.sym)->user_frames, 2);
        ASSERT_EQ(symbolizer_get_stats(f.sym)->unresolved_kernel_frames, 0);
        assert_stored_frames(&f, stack, want, ELEMENTSOF(want));
        teardown(&f);
}

/* The leaf frame it gives beside the stack is the frame of the stack's
 * node: interning (the chain without its leaf, that frame) finds the
 * stack again, whether the chain was interned or found in the cache. */
TEST(the_leaf_frame_is_the_stack_nodes) {
        const uint64_t chain[] = { CTX_K, KADDR, CTX_U, APP_A + 0x10, APP_A + 0x2345 };
        const uint64_t callers[] = { CTX_U, APP_A + 0x10, APP_A + 0x2345 };
        fixture f = {};
        int64_t parent, again;

        setup(&f);
        parent = stack_of(&f, 100, callers, ELEMENTSOF(callers));
        for (int pass = 0; pass < 2; pass++) {
                perf_sample ps = { .pid = 100, .tid = 100, .time = 1000, .period = 1, .nr = ELEMENTSOF(chain),
                                   .ips = chain };
                int64_t stack = -1, leaf = -1;

                ASSERT_OK(symbolizer_stack(f.sym, &ps, &stack, &leaf));
                ASSERT_EQ(symbolizer_get_stats(f.sym)->stack_cache_hits, (uint64_t) pass);
                ASSERT_GT(leaf, 0);
                ASSERT_OK(store_intern_stack(f.store, parent, leaf, &again));
                ASSERT_EQ(again, stack);
        }

        /* No frames: no stack, no leaf. */
        perf_sample empty = { .pid = 100, .tid = 100, .time = 1000, .period = 1, .nr = 1,
                              .ips = (const uint64_t[]) { CTX_U } };
        int64_t stack = -1, leaf = -1;
        ASSERT_OK(symbolizer_stack(f.sym, &empty, &stack, &leaf));
        ASSERT_EQ(stack, 0);
        ASSERT_EQ(leaf, 0);
        teardown(&f);
}

TEST(same_code_in_two_processes_is_one_stack) {
        const uint64_t a[] = { CTX_U, APP_A + 0x10, APP_A + 0x20 };
        const uint64_t b[] = { CTX_U, APP_B + 0x10, APP_B + 0x20 };
        const uint64_t other[] = { CTX_U, APP_B + 0x10, APP_B + 0x24 };
        fixture f = {};
        int64_t sa, sb;

        setup(&f);
        sa = stack_of(&f, 100, a, ELEMENTSOF(a));
        sb = stack_of(&f, 200, b, ELEMENTSOF(b));
        ASSERT_GT(sa, 0);
        ASSERT_EQ(sa, sb);
        ASSERT_NE(stack_of(&f, 200, other, ELEMENTSOF(other)), sa);
        teardown(&f);
}

/* A chain of one frame is the stack dictionary's node (no parent, that
 * frame), looked up there and not in the stack cache: the same in two
 * processes, and another for another offset. */
TEST(a_one_frame_stack_is_its_dictionary_node) {
        const uint64_t a[] = { CTX_U, APP_A + 0x10 };
        const uint64_t b[] = { CTX_U, APP_B + 0x10 };
        const uint64_t other[] = { CTX_U, APP_B + 0x14 };
        fixture f = {};
        int64_t sa, node;

        setup(&f);
        for (int pass = 0; pass < 2; pass++) {
                perf_sample ps = { .pid = 100, .tid = 100, .time = 1000, .period = 1, .nr = ELEMENTSOF(a), .ips = a };
                int64_t stack = -1, leaf = -1;

                ASSERT_OK(symbolizer_stack(f.sym, &ps, &stack, &leaf));
                ASSERT_GT(leaf, 0);
                ASSERT_OK(store_intern_stack(f.store, 0, leaf, &node));
                ASSERT_EQ(stack, node);
        }
        ASSERT_EQ(symbolizer_get_stats(f.sym)->stack_cache_hits, 0);
        sa = stack_of(&f, 100, a, ELEMENTSOF(a));
        ASSERT_EQ(stack_of(&f, 200, b, ELEMENTSOF(b)), sa);
        ASSERT_NE(stack_of(&f, 200, other, ELEMENTSOF(other)), sa);
        teardown(&f);
}

/* The stack of a chain of one user frame is kept beside the frame in the
 * symbolizer's cache of file frames: it must not outlive the generation
 * of stacks, nor a rolled-back batch, that made it. */
TEST(a_one_frame_stacks_id_does_not_outlive_its_generation) {
        const uint64_t a[] = { CTX_U, APP_A + 0x10 };
        fixture f = {};
        int64_t s1, s2, leaf, node, taken, s3;

        setup(&f);
        s1 = stack_of(&f, 100, a, ELEMENTSOF(a));
        ASSERT_EQ(stack_of(&f, 100, a, ELEMENTSOF(a)), s1);
        next_stack_generation(&f, s1);

        /* The new generation's node of the frame, not the old one. */
        s2 = stack_of(&f, 100, a, ELEMENTSOF(a));
        leaf = leaf_of(&f, 100, APP_A + 0x10, 1000);
        ASSERT_OK(store_intern_stack(f.store, 0, leaf, &node));
        ASSERT_EQ(s2, node);
        ASSERT_NE(s2, s1);
        ASSERT_OK(store_commit(f.store));

        /* A node interned in a batch rolled back: its id goes to
         * another node, and the frame's stack is interned again. */
        ASSERT_OK(store_begin(f.store));
        s3 = stack_of(&f, 100, (const uint64_t[]) { CTX_U, APP_A + 0x20 }, 2);
        ASSERT_EQ(stack_of(&f, 100, (const uint64_t[]) { CTX_U, APP_A + 0x20 }, 2), s3);
        ASSERT_OK(store_rollback(f.store));
        ASSERT_OK(store_begin(f.store));
        ASSERT_OK(store_intern_stack(f.store, s2, leaf, &taken));
        ASSERT_EQ(taken, s3);           /* the id is reused */
        ASSERT_NE(stack_of(&f, 100, (const uint64_t[]) { CTX_U, APP_A + 0x20 }, 2), taken);
        teardown(&f);
}

TEST(a_repeated_chain_is_one_stack_lookup_until_the_maps_change) {
        const uint64_t a[] = { CTX_K, KADDR, CTX_U, APP_A + 0x10 };
        fixture f = {};
        int64_t s1, s2;

        setup(&f);
        s1 = stack_of(&f, 100, a, ELEMENTSOF(a));
        ASSERT_EQ(symbolizer_get_stats(f.sym)->stack_cache_hits, 0);
        ASSERT_EQ(stack_of(&f, 100, a, ELEMENTSOF(a)), s1);
        ASSERT_EQ(symbolizer_get_stats(f.sym)->stack_cache_hits, 1);

        /* Another file mapped where the first was: the same addresses are
         * other code now, and make another stack. */
        ASSERT_OK(tasks_mmap(f.tasks, 100, APP_A, 0x10000, 0, "/usr/bin/other", "ef01"));
        s2 = stack_of(&f, 100, a, ELEMENTSOF(a));
        ASSERT_GT(s2, 0);
        ASSERT_NE(s2, s1);
        ASSERT_EQ(symbolizer_get_stats(f.sym)->stack_cache_hits, 1);

        /* A rolled-back batch: no cached id survives. */
        symbolizer_forget_ids(f.sym);
        ASSERT_EQ(stack_of(&f, 100, a, ELEMENTSOF(a)), s2);
        ASSERT_EQ(symbolizer_get_stats(f.sym)->stack_cache_hits, 1);
        teardown(&f);
}

TEST(comm_ids_are_the_stores) {
        fixture f = {};
        int64_t a1, a2, want, longer, want_longer;

        setup(&f);
        ASSERT_OK(symbolizer_comm_id(f.sym, "app", &a1));
        ASSERT_OK(symbolizer_comm_id(f.sym, "app", &a2));
        ASSERT_OK(store_intern_string(f.store, "app", &want));
        ASSERT_EQ(a1, want);
        ASSERT_EQ(a2, want);
        /* Not a kernel comm (16 bytes and more): not cached, still interned. */
        ASSERT_OK(symbolizer_comm_id(f.sym, "0123456789abcdefgh", &longer));
        ASSERT_OK(store_intern_string(f.store, "0123456789abcdefgh", &want_longer));
        ASSERT_EQ(longer, want_longer);
        ASSERT_NE(longer, want);
        /* Comms that differ past the first word. */
        ASSERT_OK(symbolizer_comm_id(f.sym, "kworker/0:1", &a1));
        ASSERT_OK(symbolizer_comm_id(f.sym, "kworker/0:2", &a2));
        ASSERT_NE(a1, a2);
        ASSERT_OK(store_intern_string(f.store, "kworker/0:2", &want));
        ASSERT_EQ(a2, want);
        teardown(&f);
}

/* A batch the store rolled back (here by store_rollback(), which no one
 * tells the symbolizer about): the comm's id was of that batch, and the
 * next string takes it. The symbolizer must not hand it out again. */
TEST(comm_ids_do_not_outlive_a_rollback) {
        fixture f = {};
        int64_t old, taken, now, want;

        setup(&f);
        ASSERT_OK(symbolizer_comm_id(f.sym, "rolledback", &old));
        ASSERT_OK(store_rollback(f.store));
        ASSERT_OK(store_begin(f.store));
        ASSERT_OK(store_intern_string(f.store, "another", &taken));
        ASSERT_EQ(taken, old);          /* the id is reused */
        ASSERT_OK(symbolizer_comm_id(f.sym, "rolledback", &now));
        ASSERT_OK(store_intern_string(f.store, "rolledback", &want));
        ASSERT_EQ(now, want);
        ASSERT_NE(now, taken);
        teardown(&f);
}

/* Likewise the string ids of a mapped file, by which a new offset of it
 * is interned: after the rollback "other" and "strings" take the ids its
 * path and build-id had, and a new frame must not be named by them. */
TEST(file_string_ids_do_not_outlive_a_rollback) {
        const uint64_t first[] = { CTX_U, APP_A + 0x10 };
        const uint64_t later[] = { CTX_U, APP_A + 0x30 };
        const char *const want[] = { "app+0x30" };
        fixture f = {};
        int64_t path, bid, id;

        setup(&f);
        ASSERT_GT(stack_of(&f, 100, first, ELEMENTSOF(first)), 0);
        ASSERT_OK(store_rollback(f.store));
        ASSERT_OK(store_begin(f.store));
        ASSERT_OK(store_intern_string(f.store, "other", &path));
        ASSERT_OK(store_intern_string(f.store, "strings", &bid));
        assert_stored_frames(&f, stack_of(&f, 100, later, ELEMENTSOF(later)), want, ELEMENTSOF(want));
        ASSERT_OK(store_begin(f.store));
        ASSERT_OK(store_intern_string(f.store, "/usr/bin/app", &id));
        ASSERT_NE(id, path);
        ASSERT_NE(id, bid);
        teardown(&f);
}

/* The frame the symbolizer interns for a new offset of a mapped
 * file (by its strings' ids) is the frame store_intern_frame() makes of
 * { FRAME_USER, offset, NULL, offset, path, build-id or NULL }: one id
 * for the same code whichever path interned it first, with a build-id
 * and without, and after a generation of stacks alone. */
static int64_t leaf_of(fixture *f, uint32_t pid, uint64_t ip, uint64_t time) {
        const uint64_t chain[] = { CTX_U, ip };
        perf_sample ps = { .pid = pid, .tid = pid, .time = time, .period = 1, .nr = 2, .ips = chain };
        int64_t stack = -1, leaf = -1;

        ASSERT_OK(symbolizer_stack(f->sym, &ps, &stack, &leaf));
        ASSERT_GT(leaf, 0);
        return leaf;
}

/* The leaf frame of ip in pid is the store's frame of { FRAME_USER, off,
 * NULL, off, path, bid }, interned by the symbolizer first or, with
 * store_first, by store_intern_frame() first. */
static void assert_file_frame(fixture *f, uint32_t pid, uint64_t ip, uint64_t off, const char *path,
                              const char *bid, uint64_t time, bool store_first) {
        const frame fr = { FRAME_USER, off, NULL, off, path, bid };
        int64_t by_sym = 0, by_store;

        if (!store_first)
                by_sym = leaf_of(f, pid, ip, time);
        ASSERT_OK(store_intern_frame(f->store, &fr, &by_store));
        if (store_first)
                by_sym = leaf_of(f, pid, ip, time);
        ASSERT_EQ(by_sym, by_store);
}

#define LIB_A 0x7f1000000000ULL         /* /usr/lib/libnobid.so (no build-id) in pid 100, pgoff 0x2000 */

TEST(user_file_frames_are_the_stores_frames) {
        fixture f = {};
        int64_t stack;

        setup(&f);
        ASSERT_OK(tasks_mmap(f.tasks, 100, LIB_A, 0x10000, 0x2000, "/usr/lib/libnobid.so", NULL));

        /* Symbolizer first (strings not yet cached), then again at new
         * offsets (strings cached by file id). */
        assert_file_frame(&f, 100, APP_A + 0x40, 0x40, "/usr/bin/app", "abcd", 1000, false);
        assert_file_frame(&f, 100, APP_A + 0x44, 0x44, "/usr/bin/app", "abcd", 1000, false);
        assert_file_frame(&f, 100, LIB_A + 0x50, 0x2050, "/usr/lib/libnobid.so", NULL, 1000, false);
        assert_file_frame(&f, 100, LIB_A + 0x54, 0x2054, "/usr/lib/libnobid.so", NULL, 1000, false);
        /* The store first. */
        assert_file_frame(&f, 100, APP_A + 0x48, 0x48, "/usr/bin/app", "abcd", 1000, true);
        assert_file_frame(&f, 100, LIB_A + 0x58, 0x2058, "/usr/lib/libnobid.so", NULL, 1000, true);

        /* A new generation of stacks alone (an hour of samples): the
         * frames' generation goes on, and a new offset is still one frame. */
        stack = stack_of(&f, 100, (const uint64_t[]) { CTX_U, APP_A + 0x40 }, 2);
        next_stack_generation(&f, stack);
        assert_file_frame(&f, 100, APP_A + 0x60, 0x60, "/usr/bin/app", "abcd", 2000, false);
        assert_file_frame(&f, 100, LIB_A + 0x60, 0x2060, "/usr/lib/libnobid.so", NULL, 2000, false);
        assert_file_frame(&f, 100, APP_A + 0x64, 0x64, "/usr/bin/app", "abcd", 2000, true);
        /* and the old ones are the same frames as before the generation */
        assert_file_frame(&f, 100, APP_A + 0x40, 0x40, "/usr/bin/app", "abcd", 2000, false);
        teardown(&f);
}

/* A user frame interned by its strings' ids counts toward the
 * frame generation's size as store_intern_frame()'s do (FRAME_ROW_BYTES,
 * 10 bytes): ten new frames (and ten stack nodes, 40 bytes) at a limit of
 * 100 bytes end the generation at the next sample. */
TEST(user_file_frames_count_toward_the_generation) {
        fixture f = {};
        int64_t stack = 0;
        uint64_t gen0;

        setup(&f);
        store_set_dictionary_limit(f.store, 100);
        gen0 = store_generation(f.store);
        for (unsigned i = 0; i < 10; i++)
                stack = stack_of(&f, 100, (const uint64_t[]) { CTX_U, APP_A + 0x100 + 4 * i }, 2);
        ASSERT_OK(store_insert_sample(f.store, &(stored_sample) { .time_ns = T0, .pid = 100, .tid = 100,
                                      .stack_id = stack, .period = 1, .boot_id = f.boot }));
        ASSERT_NE(store_generation(f.store), gen0);
        teardown(&f);
}

/* A kernel frame missing from the symbolizer's cache of addresses is
 * interned by the string ids of its symbol, module and build-id, which
 * it keeps by the layout's pointers: the same frame store_intern_frame()
 * makes of those strings, for a module's function, the kernel's and a
 * BPF program's, in either order, without a kernel build-id, and after a
 * layout change that puts another module where the first was. */
static int64_t kernel_leaf_of(fixture *f, uint64_t ip, uint64_t time) {
        const uint64_t chain[] = { CTX_K, ip };
        perf_sample ps = { .pid = 100, .tid = 100, .time = time, .period = 1, .nr = 2, .ips = chain };
        int64_t stack = -1, leaf = -1;

        ASSERT_OK(symbolizer_stack(f->sym, &ps, &stack, &leaf));
        ASSERT_GT(leaf, 0);
        return leaf;
}

static void assert_kernel_frame(fixture *f, uint64_t ip, uint64_t time, const frame *fr, bool store_first) {
        int64_t by_sym = 0, by_store;

        if (!store_first)
                by_sym = kernel_leaf_of(f, ip, time);
        ASSERT_OK(store_intern_frame(f->store, fr, &by_store));
        if (store_first)
                by_sym = kernel_leaf_of(f, ip, time);
        ASSERT_EQ(by_sym, by_store);
}

#define MOD_BASE 0xffffffffc0800000ULL

static layout_module *module_at(const char *name, const char *build_id, const char *syms) {
        layout_module *m = layout_module_new(name);
        module_section *sec = calloc(2, sizeof *sec);
        kallsyms *k = NULL;

        ASSERT_TRUE(m && sec);
        snprintf(m->build_id, sizeof m->build_id, "%s", build_id);
        m->loaded_how = LAYOUT_SOURCE_UEVENT;
        m->base = MOD_BASE;
        m->size = 0x2000;
        sec[0] = (module_section) { .name = strdup(".text"), .addr = MOD_BASE, .len = 0x1000,
                                    .len_source = SECTION_LEN_ELF, .exec = true };
        sec[1] = (module_section) { .name = strdup(".orc_unwind"), .addr = MOD_BASE + 0x1000, .len = 0x800,
                                    .len_source = SECTION_LEN_ELF };
        m->sections = sec;
        m->n_sections = 2;
        ASSERT_OK(kallsyms_parse(syms, strlen(syms), &k));
        m->syms = k;
        return m;
}

TEST(kernel_frames_are_the_stores_frames) {
        fixture f = {};
        layout_module *m;

        setup(&f);
        assert_kernel_frame(&f, KADDR, 1000,
                            &(frame) { FRAME_KERNEL, KADDR, "do_one_initcall", 0x10, MODULE_KERNEL, "kbid" }, false);
        assert_kernel_frame(&f, KADDR + 4, 1000,
                            &(frame) { FRAME_KERNEL, KADDR + 4, "do_one_initcall", 0x14, MODULE_KERNEL, "kbid" }, false);
        assert_kernel_frame(&f, KADDR + 8, 1000,
                            &(frame) { FRAME_KERNEL, KADDR + 8, "do_one_initcall", 0x18, MODULE_KERNEL, "kbid" }, true);

        ASSERT_OK(layout_add_module(f.layout, module_at("mymod", "b1d0", "ffffffffc0800000 t mod_fn\t[mymod]\n"
                                                                         "ffffffffc0800100 t mod_other\t[mymod]\n"),
                                    10, &m));
        assert_kernel_frame(&f, MOD_BASE + 0x10, 1000,
                            &(frame) { FRAME_KERNEL, MOD_BASE + 0x10, "mod_fn", 0x10, "[mymod]", "b1d0" }, false);
        assert_kernel_frame(&f, MOD_BASE + 0x108, 1000,
                            &(frame) { FRAME_KERNEL, MOD_BASE + 0x108, "mod_other", 0x8, "[mymod]", "b1d0" }, true);
        assert_kernel_frame(&f, MOD_BASE + 0x14, 1000,
                            &(frame) { FRAME_KERNEL, MOD_BASE + 0x14, "mod_fn", 0x14, "[mymod]", "b1d0" }, false);

        /* In a data section: named by the place, each address its own name. */
        assert_kernel_frame(&f, MOD_BASE + 0x12f0, 1000,
                            &(frame) { FRAME_KERNEL, MOD_BASE + 0x12f0, ".orc_unwind+0x2f0", 0x2f0, "[mymod]", "b1d0" },
                            false);
        assert_kernel_frame(&f, MOD_BASE + 0x1300, 1000,
                            &(frame) { FRAME_KERNEL, MOD_BASE + 0x1300, ".orc_unwind+0x300", 0x300, "[mymod]", "b1d0" },
                            true);
        ASSERT_EQ(symbolizer_get_stats(f.sym)->module_data_frames, 2);

        /* Nowhere: the bare address. */
        assert_kernel_frame(&f, 0xffffffffc0001000ULL, 1000,
                            &(frame) { FRAME_KERNEL, 0xffffffffc0001000ULL, NULL, 0, NULL, NULL }, false);
        ASSERT_EQ(symbolizer_get_stats(f.sym)->unresolved_kernel_frames, 1);

        /* mymod goes, another module of another build comes at its place:
         * the new names, not the cached ones. */
        ASSERT_OK(layout_remove_module(f.layout, "mymod", 2000, LAYOUT_SOURCE_UEVENT, NULL));
        ASSERT_OK(layout_add_module(f.layout, module_at("theirs", "", "ffffffffc0800000 t their_fn\t[theirs]\n"),
                                    3000, &m));
        assert_kernel_frame(&f, MOD_BASE + 0x18, 4000,
                            &(frame) { FRAME_KERNEL, MOD_BASE + 0x18, "their_fn", 0x18, "[theirs]", NULL }, false);

        /* A BPF program: module "[bpf]", no build-id. */
        ASSERT_OK(layout_add_ksym(f.layout, 0xffffffffa0001000ULL, 0x100, LAYOUT_KSYM_BPF, "bpf_prog_0123_my_prog",
                                  4000, LAYOUT_SOURCE_PERF, NULL));
        assert_kernel_frame(&f, 0xffffffffa0001020ULL, 5000,
                            &(frame) { FRAME_KERNEL, 0xffffffffa0001020ULL, "bpf_prog_0123_my_prog", 0x20, "[bpf]",
                                       NULL }, false);
        assert_kernel_frame(&f, 0xffffffffa0001024ULL, 5000,
                            &(frame) { FRAME_KERNEL, 0xffffffffa0001024ULL, "bpf_prog_0123_my_prog", 0x24, "[bpf]",
                                       NULL }, true);

        /* No kernel build-id known. */
        symbolizer_set_kernel_build_id(f.sym, "");
        assert_kernel_frame(&f, KADDR + 12, 4000,
                            &(frame) { FRAME_KERNEL, KADDR + 12, "do_one_initcall", 0x1c, MODULE_KERNEL, NULL }, false);
        teardown(&f);
}

static int64_t stack_at(fixture *f, const uint64_t *ips, size_t n, uint64_t time, int64_t *ret_leaf) {
        perf_sample ps = { .pid = 100, .tid = 100, .time = time, .period = 1, .nr = n, .ips = ips };
        int64_t stack = -1;

        ASSERT_OK(symbolizer_stack(f->sym, &ps, &stack, ret_leaf));
        ASSERT_GT(stack, 0);
        return stack;
}

/* The path cache keys a chain's kernel frames by their addresses and the
 * layout epoch: one chain at two times, the module at its address
 * replaced in between, is two stacks, each of its own module's frames,
 * found in the cache the second time, its leaf frame too. */
TEST(a_cached_chain_is_of_its_layout_epoch) {
        const uint64_t chain[] = { CTX_K, MOD_BASE + 0x10, KADDR, CTX_U, APP_A + 0x10, APP_A + 0x2345 };
        const frame mine_leaf = { FRAME_KERNEL, MOD_BASE + 0x10, "mod_fn", 0x10, "[mymod]", "b1d0" };
        const frame theirs_leaf = { FRAME_KERNEL, MOD_BASE + 0x10, "their_fn", 0x10, "[theirs]", NULL };
        int64_t mine[2], theirs[2], leaf, want;
        fixture f = {};
        layout_module *m;

        setup(&f);
        ASSERT_OK(layout_add_module(f.layout, module_at("mymod", "b1d0", "ffffffffc0800000 t mod_fn\t[mymod]\n"), 10,
                                    &m));
        ASSERT_OK(layout_remove_module(f.layout, "mymod", 2000, LAYOUT_SOURCE_UEVENT, NULL));
        ASSERT_OK(layout_add_module(f.layout, module_at("theirs", "", "ffffffffc0800000 t their_fn\t[theirs]\n"),
                                    3000, &m));
        for (int pass = 0; pass < 2; pass++) {
                mine[pass] = stack_at(&f, chain, ELEMENTSOF(chain), 1000, &leaf);
                ASSERT_OK(store_intern_frame(f.store, &mine_leaf, &want));
                ASSERT_EQ(leaf, want);
                theirs[pass] = stack_at(&f, chain, ELEMENTSOF(chain), 4000, &leaf);
                ASSERT_OK(store_intern_frame(f.store, &theirs_leaf, &want));
                ASSERT_EQ(leaf, want);
        }
        ASSERT_NE(mine[0], theirs[0]);
        ASSERT_EQ(mine[1], mine[0]);
        ASSERT_EQ(theirs[1], theirs[0]);
        ASSERT_EQ(symbolizer_get_stats(f.sym)->stack_cache_hits, 2);
        teardown(&f);
}

typedef struct late_module {
        fixture *f;
        unsigned calls;
} late_module;

/* The miss handler that finds mymod loaded at its second run. */
static void load_on_second_miss(void *userdata) {
        late_module *l = userdata;
        layout_module *m;

        if (++l->calls == 2)
                ASSERT_OK(layout_add_module(l->f->layout,
                                            module_at("mymod", "b1d0", "ffffffffc0800000 t mod_fn\t[mymod]\n"
                                                                       "ffffffffc0800100 t mod_other\t[mymod]\n"),
                                            10, &m));
}

/* A chain whose frames were resolved partly before the layout was read
 * again (its leaf cached as a bare address, its caller found in the
 * module the miss brought) is not cached under the new epoch: the next
 * sample of it is of the module's two frames. */
TEST(a_chain_of_two_layout_generations_is_not_cached) {
        const uint64_t leaf[] = { CTX_K, MOD_BASE + 0x10 };
        const uint64_t chain[] = { CTX_K, MOD_BASE + 0x10, MOD_BASE + 0x108 };
        const frame fn = { FRAME_KERNEL, MOD_BASE + 0x10, "mod_fn", 0x10, "[mymod]", "b1d0" };
        const frame caller = { FRAME_KERNEL, MOD_BASE + 0x108, "mod_other", 0x8, "[mymod]", "b1d0" };
        int64_t mixed, again, fn_id, caller_id, want;
        fixture f = {};
        late_module l = { .f = &f };

        setup(&f);
        symbolizer_set_miss_handler(f.sym, load_on_second_miss, &l);
        (void) stack_at(&f, leaf, ELEMENTSOF(leaf), 1000, NULL);
        ASSERT_EQ(symbolizer_get_stats(f.sym)->unresolved_kernel_frames, 1);
        symbolizer_new_pass(f.sym);
        mixed = stack_at(&f, chain, ELEMENTSOF(chain), 1000, NULL);
        ASSERT_EQ(l.calls, 2);
        symbolizer_new_pass(f.sym);
        again = stack_at(&f, chain, ELEMENTSOF(chain), 1000, NULL);

        ASSERT_OK(store_intern_frame(f.store, &fn, &fn_id));
        ASSERT_OK(store_intern_frame(f.store, &caller, &caller_id));
        ASSERT_OK(store_intern_stack(f.store, 0, caller_id, &want));
        ASSERT_OK(store_intern_stack(f.store, want, fn_id, &want));
        ASSERT_NE(mixed, want);
        ASSERT_EQ(again, want);
        teardown(&f);
}

static void put_text(const fixture *f, const char *rel, const char *mode, const char *text) {
        char path[256];
        FILE *fp;

        snprintf(path, sizeof path, "%s/%s", f->dir, rel);
        fp = fopen(path, mode);
        ASSERT_TRUE(fp != NULL);
        fputs(text, fp);
        ASSERT_EQ(fclose(fp), 0);
}

/* JIT frames are cached by the version of their process's map: a later
 * line over an address names it anew once the map is read again (here
 * because another address missed), as the map itself would. */
TEST(jit_frames_follow_their_map) {
        const uint64_t a[] = { CTX_U, 0x7f0000100010ULL };
        const uint64_t b[] = { CTX_U, 0x7f0000200004ULL };
        fixture f = {};
        jitmaps *j = NULL;
        char path[256];
        int64_t s1, s2, s3;

        setup(&f);
        snprintf(path, sizeof path, "%s/proc", f.dir);
        ASSERT_EQ(mkdir(path, 0755), 0);
        snprintf(path, sizeof path, "%s/proc/100", f.dir);
        ASSERT_EQ(mkdir(path, 0755), 0);
        snprintf(path, sizeof path, "%s/tmp", f.dir);
        ASSERT_EQ(mkdir(path, 0755), 0);
        snprintf(path, sizeof path, "Name:\tnode\nUid:\t%u\t%u\t%u\t%u\nNSpid:\t100\n", getuid(), getuid(),
                 getuid(), getuid());
        put_text(&f, "proc/100/status", "w", path);
        put_text(&f, "tmp/perf-100.map", "w", "7f0000100000 100 first\n");
        ASSERT_OK(tasks_mmap(f.tasks, 100, 0x7f0000100000ULL, 0x200000, 0, "//anon", NULL));
        ASSERT_OK(jitmaps_new(f.dir, &j));
        symbolizer_set_jitmaps(f.sym, j);

        s1 = stack_of(&f, 100, a, ELEMENTSOF(a));
        ASSERT_EQ(stack_of(&f, 100, a, ELEMENTSOF(a)), s1);
        ASSERT_EQ(symbolizer_get_stats(f.sym)->jit_frames, 2);

        put_text(&f, "tmp/perf-100.map", "a", "7f0000100000 100 second\n7f0000200000 10 other\n");
        usleep(JITMAPS_RECHECK_NS / 1000 + 50000);
        s2 = stack_of(&f, 100, b, ELEMENTSOF(b));       /* a miss: the map is read again */
        ASSERT_NE(s2, s1);
        s3 = stack_of(&f, 100, a, ELEMENTSOF(a));
        ASSERT_NE(s3, s1);                              /* "second" now */
        ASSERT_NE(s3, s2);
        ASSERT_EQ(symbolizer_get_stats(f.sym)->jit_frames, 4);
        teardown(&f);
        jitmaps_free(j);
}

TEST(stray_user_entries_are_dropped) {
        const uint64_t clean[] = { CTX_U, APP_A + 0x10 };
        /* A kernel address in the user part, and what follows it. */
        const uint64_t kernel_in_user[] = { CTX_U, APP_A + 0x10, KADDR, APP_A + 0x20 };
        /* A return address outside every mapping of a process with mappings. */
        const uint64_t unmapped[] = { CTX_U, APP_A + 0x10, 0x999999, APP_A + 0x20 };
        fixture f = {};
        int64_t s;

        setup(&f);
        s = stack_of(&f, 100, clean, ELEMENTSOF(clean));
        ASSERT_EQ(stack_of(&f, 100, kernel_in_user, ELEMENTSOF(kernel_in_user)), s);
        ASSERT_EQ(symbolizer_get_stats(f.sym)->invalid_user_frames, 2);
        ASSERT_EQ(stack_of(&f, 100, unmapped, ELEMENTSOF(unmapped)), s);
        ASSERT_EQ(symbolizer_get_stats(f.sym)->invalid_user_frames, 4);
        ASSERT_EQ(symbolizer_get_stats(f.sym)->kernel_frames, 0);
        teardown(&f);
}

static void count_miss(void *userdata) {
        (*(unsigned *) userdata)++;
}

TEST(the_miss_handler_runs_once_a_pass) {
        const uint64_t a[] = { CTX_K, 0xffffffffc0001000ULL, 0xffffffffc0002000ULL };
        const uint64_t b[] = { CTX_K, 0xffffffffc0003000ULL };
        unsigned misses = 0;
        fixture f = {};

        setup(&f);
        symbolizer_set_miss_handler(f.sym, count_miss, &misses);
        ASSERT_GT(stack_of(&f, 100, a, ELEMENTSOF(a)), 0);
        ASSERT_EQ(misses, 1);
        ASSERT_EQ(symbolizer_get_stats(f.sym)->unresolved_kernel_frames, 2);
        symbolizer_new_pass(f.sym);
        ASSERT_GT(stack_of(&f, 100, b, ELEMENTSOF(b)), 0);
        ASSERT_EQ(misses, 2);
        teardown(&f);
}
