/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "perf/tasks.h"
#include "test.h"

/* Lines as /proc/PID/maps prints them on 6.x kernels (anonymous mappings
 * keep a trailing space). */
static const char maps_123[] =
        "55de2a2e7000-55de2a2e9000 r--p 00000000 fe:00 247134                     /usr/bin/bash\n"
        "55de2a2e9000-55de2a2ee000 r-xp 00002000 fe:00 247134                     /usr/bin/bash\n"
        "55de2a2ee000-55de2a2f1000 r--p 00007000 fe:00 247134                     /usr/bin/bash\n"
        "55de2a2f2000-55de2a2f3000 rw-p 0000a000 fe:00 247134                     /usr/bin/bash\n"
        "55de338e8000-55de33909000 rw-p 00000000 00:00 0                          [heap]\n"
        "7f058e0c4000-7f058e0ea000 r--p 00000000 fe:00 332835                     /usr/lib/x86_64-linux-gnu/libc.so.6\n"
        "7f058e0ea000-7f058e240000 r-xp 00026000 fe:00 332835                     /usr/lib/x86_64-linux-gnu/libc.so.6\n"
        "7f058e299000-7f058e2a6000 rw-p 00000000 00:00 0 \n"
        "7f058e2b0000-7f058e2b4000 rwxp 00000000 00:00 0 \n"
        "7f058e300000-7f058e301000 r-xp 00000000 fe:00 4242                       /tmp/my lib (deleted)\n"
        "7ffd4b3a1000-7ffd4b3c2000 rw-p 00000000 00:00 0                          [stack]\n"
        "7ffd4b3f0000-7ffd4b3f2000 r-xp 00000000 00:00 0                          [vdso]\n"
        "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n";

typedef struct root {
        char dir[64];
} root;

static void write_file(const root *r, const char *rel, const char *content) {
        char path[512], *slash;
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", r->dir, rel);
        /* mkdir -p of the parent directories. */
        for (slash = strchr(path + strlen(r->dir) + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
                *slash = 0;
                if (mkdir(path, 0755) < 0 && errno != EEXIST)
                        TEST_FAIL_("mkdir %s: %s", path, strerror(errno));
                *slash = '/';
        }
        f = fopen(path, "w");
        if (!f)
                TEST_FAIL_("fopen %s: %s", path, strerror(errno));
        fputs(content, f);
        fclose(f);
}

static void root_make(root *r) {
        snprintf(r->dir, sizeof(r->dir), "/tmp/test-tasks-XXXXXX");
        ASSERT_TRUE(mkdtemp(r->dir) != NULL);
        write_file(r, "proc/123/maps", maps_123);
        write_file(r, "proc/123/task/123/comm", "bash\n");
        write_file(r, "proc/123/task/124/comm", "worker-thread-with-long-name\n");
}

static void root_remove(root *r) {
        char cmd[128];

        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", r->dir);
        ASSERT_EQ(system(cmd), 0);
}

static void assert_mapping(tasks *t, uint32_t pid, uint64_t addr, uint64_t start, uint64_t end,
                           uint64_t pgoff, const char *path) {
        mapping m = {};

        ASSERT_OK(tasks_find_mapping(t, pid, addr, &m));
        ASSERT_U64_EQ(m.start, start);
        ASSERT_U64_EQ(m.end, end);
        ASSERT_U64_EQ(m.pgoff, pgoff);
        ASSERT_STREQ(m.path, path);
}

TEST(parse_line) {
        uint64_t s = 1, e = 2, o = 3;
        bool x = false;
        const char *p = NULL;
        const char *line;

        line = "55de2a2e9000-55de2a2ee000 r-xp 00002000 fe:00 247134                     /usr/bin/bash";
        ASSERT_OK(proc_maps_parse_line(line, &s, &e, &o, &x, &p));
        ASSERT_U64_EQ(s, 0x55de2a2e9000ULL);
        ASSERT_U64_EQ(e, 0x55de2a2ee000ULL);
        ASSERT_U64_EQ(o, 0x2000);
        ASSERT_TRUE(x);
        ASSERT_STREQ(p, "/usr/bin/bash");
        ASSERT_TRUE(p >= line && p < line + strlen(line));

        ASSERT_OK(proc_maps_parse_line("7ffd4b3a1000-7ffd4b3c2000 rw-p 00000000 00:00 0                          [stack]",
                                       &s, &e, &o, &x, &p));
        ASSERT_TRUE(!x);
        ASSERT_STREQ(p, "[stack]");

        /* Paths keep their spaces and the " (deleted)" suffix. */
        ASSERT_OK(proc_maps_parse_line("7f058e300000-7f058e301000 r-xs 00001000 fe:00 4242 /tmp/my lib (deleted)",
                                       &s, &e, &o, &x, &p));
        ASSERT_STREQ(p, "/tmp/my lib (deleted)");
        ASSERT_U64_EQ(o, 0x1000);

        /* Anonymous: -ENOENT, with the range and permissions (executable
         * anonymous memory is JIT code) and an empty path. */
        p = NULL;
        ASSERT_ERROR(proc_maps_parse_line("7f058e299000-7f058e2a6000 rw-p 00000000 00:00 0 ", &s, &e, &o, &x, &p), ENOENT);
        ASSERT_ERROR(proc_maps_parse_line("7f058e299000-7f058e2a6000 rwxp 00000000 00:00 0", &s, &e, &o, &x, &p), ENOENT);
        ASSERT_U64_EQ(s, 0x7f058e299000);
        ASSERT_U64_EQ(e, 0x7f058e2a6000);
        ASSERT_TRUE(x);
        ASSERT_STREQ(p, "");

        /* Malformed. */
        static const char *const bad[] = {
                "",
                "55de2a2e9000",
                "55de2a2e9000-55de2a2e9000 r-xp 00002000 fe:00 1 /empty",      /* start == end */
                "55de2a2ee000-55de2a2e9000 r-xp 00002000 fe:00 1 /reversed",
                "55de2a2e9000-55de2a2ee000 r-xq 00002000 fe:00 1 /bad-perms",
                "55de2a2e9000-55de2a2ee000 r-x 00002000 fe:00 1 /short-perms",
                "55de2a2e9000-55de2a2ee000 r-xp 0000200g fe:00 1 /bad-offset",
                "55de2a2e9000-55de2a2ee000 r-xp 00002000 fe00 1 /bad-dev",
                "55de2a2e9000-55de2a2ee000 r-xp 00002000 fe:00 /no-inode",
                "55de2a2e9000-55de2a2ee000 r-xp 00002000 fe:00 12x /bad-inode",
                "155de2a2e9000000-55de2a2ee000 r-xp 00002000 fe:00 1 /17-digits",
                "55DE2A2E9000-55DE2A2EE000 r-xp 00002000 fe:00 1 /uppercase",
                "55de2a2e9000-55de2a2ee000 r-xp 00002000 fe:00 1 /with-newline\n",
                "55de2a2e9000 55de2a2ee000 r-xp 00002000 fe:00 1 /no-dash",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                int r = proc_maps_parse_line(bad[i], &s, &e, &o, &x, &p);
                if (r != -EINVAL)
                        TEST_FAIL_("\"%s\": expected -EINVAL, got %d", bad[i], r);
        }
}

TEST(lazy_maps_and_comm) {
        tasks *t = NULL;
        mapping m;
        root r;

        root_make(&r);
        ASSERT_OK(tasks_new(r.dir, &t));

        /* Executable file mappings and named ones ([vdso]) are kept. */
        assert_mapping(t, 123, 0x55de2a2e9000ULL + 0x10, 0x55de2a2e9000ULL, 0x55de2a2ee000ULL, 0x2000, "/usr/bin/bash");
        assert_mapping(t, 123, 0x7f058e23ffffULL, 0x7f058e0ea000ULL, 0x7f058e240000ULL, 0x26000,
                       "/usr/lib/x86_64-linux-gnu/libc.so.6");
        assert_mapping(t, 123, 0x7ffd4b3f0000ULL, 0x7ffd4b3f0000ULL, 0x7ffd4b3f2000ULL, 0, "[vdso]");
        assert_mapping(t, 123, 0x7f058e300000ULL, 0x7f058e300000ULL, 0x7f058e301000ULL, 0, "/tmp/my lib (deleted)");
        /* Executable anonymous memory (JIT code) is kept as perf names it. */
        assert_mapping(t, 123, 0x7f058e2b0010ULL, 0x7f058e2b0000ULL, 0x7f058e2b4000ULL, 0, "//anon");
        assert_mapping(t, 123, 0xffffffffff600000ULL, 0xffffffffff600000ULL, 0xffffffffff601000ULL, 0, "[vsyscall]");
        ASSERT_OK(tasks_find_mapping(t, 123, 0x55de2a2e9000ULL, &m));
        ASSERT_STREQ(m.build_id, "");
        /* Non-executable ones are not (perf's MMAP2 without mmap_data). */
        ASSERT_ERROR(tasks_find_mapping(t, 123, 0x55de2a2e7000ULL, &m), ENOENT);
        ASSERT_ERROR(tasks_find_mapping(t, 123, 0x55de338e8000ULL, &m), ENOENT);
        ASSERT_ERROR(tasks_find_mapping(t, 123, 0x1000, &m), ENOENT);
        ASSERT_EQ(tasks_n_mappings(t, 123), 6);
        ASSERT_EQ(tasks_n_processes(t), 1);

        /* comm: read once, newline stripped, cut at TASK_COMM_LEN - 1. */
        ASSERT_STREQ(tasks_get_comm(t, 123, 123), "bash");
        ASSERT_STREQ(tasks_get_comm(t, 123, 124), "worker-thread-w");
        ASSERT_EQ(tasks_n_threads(t), 2);
        /* Later changes to /proc are not reread for known threads. */
        write_file(&r, "proc/123/task/123/comm", "changed\n");
        ASSERT_STREQ(tasks_get_comm(t, 123, 123), "bash");

        tasks_free(t);
        root_remove(&r);
}

TEST(negative_cache) {
        tasks *t = NULL;
        mapping m;
        root r;

        root_make(&r);
        ASSERT_OK(tasks_new(r.dir, &t));

        /* pid 999 does not exist: remembered, not counted as a process. */
        ASSERT_ERROR(tasks_find_mapping(t, 999, 0x400000, &m), ENOENT);
        ASSERT_NULL(tasks_get_comm(t, 999, 999));
        ASSERT_EQ(tasks_n_processes(t), 0);
        ASSERT_EQ(tasks_n_threads(t), 0);

        /* It appears in /proc later, but is not reread ... */
        write_file(&r, "proc/999/maps",
                   "00400000-00452000 r-xp 00000000 08:02 173521      /usr/bin/dbus-daemon\n");
        write_file(&r, "proc/999/task/999/comm", "dbus-daemon\n");
        ASSERT_ERROR(tasks_find_mapping(t, 999, 0x400000, &m), ENOENT);
        ASSERT_NULL(tasks_get_comm(t, 999, 999));

        /* ... until a side-band record names it: an MMAP2 of a process we
         * never saw fork reads what it mapped before. */
        ASSERT_OK(tasks_mmap(t, 999, 0x7f0000000000ULL, 0x1000, 0, "/usr/lib/libfoo.so", NULL));
        assert_mapping(t, 999, 0x400123, 0x400000, 0x452000, 0, "/usr/bin/dbus-daemon");
        assert_mapping(t, 999, 0x7f0000000fffULL, 0x7f0000000000ULL, 0x7f0000001000ULL, 0, "/usr/lib/libfoo.so");
        ASSERT_EQ(tasks_n_processes(t), 1);

        /* A COMM record makes the thread known. */
        ASSERT_OK(tasks_comm(t, 999, 999, "dbus-daemon", false));
        ASSERT_STREQ(tasks_get_comm(t, 999, 999), "dbus-daemon");
        ASSERT_EQ(tasks_n_threads(t), 1);

        /* Without a root nothing is read, nor once lookups are stopped. */
        for (int k = 0; k < 2; k++) {
                tasks_free(t);
                ASSERT_OK(tasks_new(k == 0 ? NULL : r.dir, &t));
                if (k == 1)
                        tasks_stop_lookups(t);
                ASSERT_ERROR(tasks_find_mapping(t, 123, 0x55de2a2e9000ULL, &m), ENOENT);
                ASSERT_NULL(tasks_get_comm(t, 123, 123));
                ASSERT_EQ(tasks_n_processes(t), 0);
        }

        tasks_free(t);
        root_remove(&r);
}

TEST(fork_copies_and_exec_clears) {
        tasks *t = NULL;
        mapping m;

        ASSERT_OK(tasks_new(NULL, &t));
        ASSERT_OK(tasks_comm(t, 100, 100, "parent", false));
        ASSERT_OK(tasks_mmap(t, 100, 0x400000, 0x10000, 0, "/usr/bin/parent", "0123456789abcdef0123456789abcdef01234567"));
        ASSERT_OK(tasks_mmap(t, 100, 0x7f0000000000ULL, 0x200000, 0x28000, "/lib/libc.so.6", NULL));

        /* New process: a copy of the parent's mappings and its comm. */
        ASSERT_OK(tasks_fork(t, 100, 100, 200, 200));
        ASSERT_STREQ(tasks_get_comm(t, 200, 200), "parent");
        ASSERT_OK(tasks_find_mapping(t, 200, 0x400010, &m));
        ASSERT_STREQ(m.path, "/usr/bin/parent");
        ASSERT_STREQ(m.build_id, "0123456789abcdef0123456789abcdef01234567");
        assert_mapping(t, 200, 0x7f0000000000ULL, 0x7f0000000000ULL, 0x7f0000200000ULL, 0x28000, "/lib/libc.so.6");
        ASSERT_EQ(tasks_n_processes(t), 2);

        /* The copies are independent. */
        ASSERT_OK(tasks_mmap(t, 200, 0x7f0000100000ULL, 0x1000, 0, "/lib/child-only.so", NULL));
        assert_mapping(t, 200, 0x7f0000100000ULL, 0x7f0000100000ULL, 0x7f0000101000ULL, 0, "/lib/child-only.so");
        assert_mapping(t, 100, 0x7f0000100000ULL, 0x7f0000000000ULL, 0x7f0000200000ULL, 0x28000, "/lib/libc.so.6");

        /* New thread of the same process: comm, no new process. */
        ASSERT_OK(tasks_fork(t, 100, 100, 100, 101));
        ASSERT_STREQ(tasks_get_comm(t, 100, 101), "parent");
        ASSERT_EQ(tasks_n_processes(t), 2);
        ASSERT_EQ(tasks_n_threads(t), 3);

        /* exec in the child: its mappings go, the parent's stay. */
        ASSERT_OK(tasks_comm(t, 200, 200, "child", true));
        ASSERT_STREQ(tasks_get_comm(t, 200, 200), "child");
        ASSERT_STREQ(tasks_get_comm(t, 100, 100), "parent");
        ASSERT_ERROR(tasks_find_mapping(t, 200, 0x400010, &m), ENOENT);
        ASSERT_EQ(tasks_n_mappings(t, 200), 0);
        ASSERT_EQ(tasks_n_mappings(t, 100), 2);
        ASSERT_OK(tasks_mmap(t, 200, 0x500000, 0x1000, 0, "/usr/bin/child", NULL));
        assert_mapping(t, 200, 0x500000, 0x500000, 0x501000, 0, "/usr/bin/child");

        /* A non-exec COMM (prctl(PR_SET_NAME)) keeps the mappings. */
        ASSERT_OK(tasks_comm(t, 200, 200, "renamed", false));
        ASSERT_EQ(tasks_n_mappings(t, 200), 1);

        /* The pid of an exited process is reused by a new fork. */
        ASSERT_OK(tasks_exit(t, 200, 200, 50));
        ASSERT_OK(tasks_fork(t, 100, 100, 200, 200));
        ASSERT_EQ(tasks_n_mappings(t, 200), 2);
        ASSERT_STREQ(tasks_get_comm(t, 200, 200), "parent");
        tasks_gc(t, UINT64_MAX);
        ASSERT_EQ(tasks_n_processes(t), 2);

        tasks_free(t);
}

TEST(fork_from_lazily_read_parent) {
        tasks *t = NULL;
        root r;

        root_make(&r);
        ASSERT_OK(tasks_new(r.dir, &t));
        /* 123 was never seen: its maps and comm are read at the fork. */
        ASSERT_OK(tasks_fork(t, 123, 124, 500, 500));
        ASSERT_STREQ(tasks_get_comm(t, 500, 500), "worker-thread-w");
        assert_mapping(t, 500, 0x55de2a2e9000ULL, 0x55de2a2e9000ULL, 0x55de2a2ee000ULL, 0x2000, "/usr/bin/bash");
        ASSERT_EQ(tasks_n_mappings(t, 500), 6);
        tasks_free(t);
        root_remove(&r);
}

TEST(mmap_overlaps_split_and_trim) {
        tasks *t = NULL;
        mapping m;

        ASSERT_OK(tasks_new(NULL, &t));
        ASSERT_OK(tasks_mmap(t, 1, 0x10000, 0x40000, 0, "/a", NULL));      /* A [0x10000, 0x50000) */

        /* Inside A: A splits around it, the right part's offset follows. */
        ASSERT_OK(tasks_mmap(t, 1, 0x20000, 0x10000, 0x5000, "/b", NULL)); /* B [0x20000, 0x30000) */
        ASSERT_EQ(tasks_n_mappings(t, 1), 3);
        assert_mapping(t, 1, 0x1ffff, 0x10000, 0x20000, 0, "/a");
        assert_mapping(t, 1, 0x20000, 0x20000, 0x30000, 0x5000, "/b");
        assert_mapping(t, 1, 0x30000, 0x30000, 0x50000, 0x20000, "/a");

        /* Over A's left part's start: trims it from the left. */
        ASSERT_OK(tasks_mmap(t, 1, 0x8000, 0x10000, 0, "/c", NULL));       /* C [0x8000, 0x18000) */
        ASSERT_EQ(tasks_n_mappings(t, 1), 4);
        assert_mapping(t, 1, 0x18000, 0x18000, 0x20000, 0x8000, "/a");
        assert_mapping(t, 1, 0x17fff, 0x8000, 0x18000, 0, "/c");

        /* Over B's end and A's right part's start: trims both. */
        ASSERT_OK(tasks_mmap(t, 1, 0x2c000, 0x8000, 0, "/d", NULL));       /* D [0x2c000, 0x34000) */
        ASSERT_EQ(tasks_n_mappings(t, 1), 5);
        assert_mapping(t, 1, 0x2bfff, 0x20000, 0x2c000, 0x5000, "/b");
        assert_mapping(t, 1, 0x34000, 0x34000, 0x50000, 0x24000, "/a");

        /* Exactly replacing one, and touching neighbours without overlap. */
        ASSERT_OK(tasks_mmap(t, 1, 0x2c000, 0x8000, 0x1000, "/e", "abcdef"));
        ASSERT_EQ(tasks_n_mappings(t, 1), 5);
        ASSERT_OK(tasks_find_mapping(t, 1, 0x2c000, &m));
        ASSERT_STREQ(m.path, "/e");
        ASSERT_STREQ(m.build_id, "abcdef");
        ASSERT_OK(tasks_mmap(t, 1, 0x50000, 0x1000, 0, "/f", NULL));
        ASSERT_EQ(tasks_n_mappings(t, 1), 6);
        assert_mapping(t, 1, 0x4ffff, 0x34000, 0x50000, 0x24000, "/a");

        /* Covering everything leaves one mapping; anonymous memory is "//anon". */
        ASSERT_OK(tasks_mmap(t, 1, 0x0, 0x100000, 0, NULL, NULL));
        ASSERT_EQ(tasks_n_mappings(t, 1), 1);
        assert_mapping(t, 1, 0x50000, 0x0, 0x100000, 0, "//anon");
        ASSERT_ERROR(tasks_find_mapping(t, 1, 0x100000, &m), ENOENT);

        /* Invalid records. */
        ASSERT_ERROR(tasks_mmap(t, 1, 0x1000, 0, 0, "/zero-len", NULL), EINVAL);
        ASSERT_ERROR(tasks_mmap(t, 1, UINT64_MAX - 0xfff, 0x2000, 0, "/wraps", NULL), EINVAL);
        ASSERT_ERROR(tasks_mmap(t, 1, 0x1000, 0x1000, 0, "/x", "ABCDEF"), EINVAL);
        ASSERT_ERROR(tasks_mmap(t, 1, 0x1000, 0x1000, 0, "/x", "0123456789abcdef0123456789abcdef012345678"), EINVAL);
        ASSERT_EQ(tasks_n_mappings(t, 1), 1);

        /* Exclusive ends are 64-bit: the last page of the address space
         * cannot be represented (no user mapping reaches it; x86-64's
         * vsyscall page ends at 0xffffffffff601000). The one below can. */
        ASSERT_ERROR(tasks_mmap(t, 2, UINT64_MAX - 0xfff, 0x1000, 0, "/top", NULL), EINVAL);
        ASSERT_OK(tasks_mmap(t, 2, UINT64_MAX - 0x1fff, 0x1000, 0, "/top", NULL));
        assert_mapping(t, 2, UINT64_MAX - 0x1000, UINT64_MAX - 0x1fff, UINT64_MAX - 0xfff, 0, "/top");
        tasks_free(t);
}

TEST(exit_and_gc) {
        tasks *t = NULL;
        mapping m;

        ASSERT_OK(tasks_new(NULL, &t));
        ASSERT_OK(tasks_comm(t, 10, 10, "main", false));
        ASSERT_OK(tasks_fork(t, 10, 10, 10, 11));
        ASSERT_OK(tasks_mmap(t, 10, 0x400000, 0x1000, 0, "/bin/x", NULL));
        ASSERT_EQ(tasks_n_threads(t), 2);

        /* Thread 11 exits at 1000, the process at 2000. */
        ASSERT_OK(tasks_exit(t, 10, 11, 1000));
        ASSERT_OK(tasks_exit(t, 10, 10, 2000));
        /* Unknown tasks are fine and not created. */
        ASSERT_OK(tasks_exit(t, 77, 77, 1));
        ASSERT_EQ(tasks_n_threads(t), 2);
        ASSERT_EQ(tasks_n_processes(t), 1);

        /* Still resolvable for samples drained late. */
        ASSERT_STREQ(tasks_get_comm(t, 10, 11), "main");
        ASSERT_OK(tasks_find_mapping(t, 10, 0x400000, &m));

        /* Strictly before: an exit at 1000 is kept by gc(1000). */
        tasks_gc(t, 1000);
        ASSERT_EQ(tasks_n_threads(t), 2);
        tasks_gc(t, 1001);
        ASSERT_EQ(tasks_n_threads(t), 1);
        ASSERT_NULL(tasks_get_comm(t, 10, 11));
        ASSERT_EQ(tasks_n_processes(t), 1);
        tasks_gc(t, 2001);
        ASSERT_EQ(tasks_n_threads(t), 0);
        ASSERT_EQ(tasks_n_processes(t), 0);
        ASSERT_ERROR(tasks_find_mapping(t, 10, 0x400000, &m), ENOENT);
        tasks_free(t);
}

TEST(limits) {
        tasks *t = NULL;
        mapping m;

        ASSERT_OK(tasks_new(NULL, &t));
        tasks_set_limits(t, 2, 2, 3, 5);

        ASSERT_OK(tasks_mmap(t, 1, 0x1000, 0x1000, 0, "/p1", NULL));
        ASSERT_OK(tasks_mmap(t, 2, 0x1000, 0x1000, 0, "/p2", NULL));
        /* Full, nothing exited: refused. */
        ASSERT_ERROR(tasks_mmap(t, 3, 0x1000, 0x1000, 0, "/p3", NULL), ENOSPC);
        ASSERT_EQ(tasks_n_processes(t), 2);
        /* The one that exited first makes room. */
        ASSERT_OK(tasks_exit(t, 1, 1, 10));
        ASSERT_OK(tasks_exit(t, 2, 2, 20));
        ASSERT_OK(tasks_mmap(t, 3, 0x1000, 0x1000, 0, "/p3", NULL));
        ASSERT_ERROR(tasks_find_mapping(t, 1, 0x1000, &m), ENOENT);
        ASSERT_OK(tasks_find_mapping(t, 2, 0x1000, &m));
        ASSERT_EQ(tasks_n_processes(t), 2);

        /* Mappings per process. */
        ASSERT_OK(tasks_mmap(t, 3, 0x3000, 0x1000, 0, "/p3b", NULL));
        ASSERT_OK(tasks_mmap(t, 3, 0x5000, 0x1000, 0, "/p3c", NULL));
        ASSERT_ERROR(tasks_mmap(t, 3, 0x7000, 0x1000, 0, "/p3d", NULL), ENOSPC);
        /* Splitting would grow past the cap too. */
        ASSERT_ERROR(tasks_mmap(t, 3, 0x5400, 0x100, 0, "/split", NULL), ENOSPC);
        /* Replacing does not grow. */
        ASSERT_OK(tasks_mmap(t, 3, 0x5000, 0x1000, 0, "/p3e", NULL));
        assert_mapping(t, 3, 0x5000, 0x5000, 0x6000, 0, "/p3e");
        ASSERT_EQ(tasks_n_mappings(t, 3), 3);

        /* Total mappings: 4 tracked, cap 5; a fork of 3 (3 mappings) does not fit. */
        ASSERT_ERROR(tasks_fork(t, 3, 3, 4, 4), ENOSPC);

        /* Threads. */
        ASSERT_OK(tasks_comm(t, 3, 3, "a", false));
        ASSERT_OK(tasks_comm(t, 3, 30, "b", false));
        ASSERT_ERROR(tasks_comm(t, 3, 31, "c", false), ENOSPC);
        ASSERT_OK(tasks_exit(t, 3, 30, 40));
        ASSERT_OK(tasks_comm(t, 3, 31, "c", false));
        ASSERT_STREQ(tasks_get_comm(t, 3, 31), "c");
        ASSERT_NULL(tasks_get_comm(t, 3, 30));
        tasks_free(t);
}

TEST(many_processes_and_mappings) {
        tasks *t = NULL;
        mapping m;

        /* Enough entries to grow the hash tables several times and to
         * exercise deletion (gc) in the middle of probe runs. */
        ASSERT_OK(tasks_new(NULL, &t));
        for (uint32_t pid = 1; pid <= 5000; pid++) {
                char path[32];

                snprintf(path, sizeof(path), "/bin/p%u", pid % 7);
                ASSERT_OK(tasks_mmap(t, pid, 0x400000, 0x1000, 0, path, NULL));
                ASSERT_OK(tasks_comm(t, pid, pid, "x", false));
                if (pid % 3 == 0)
                        ASSERT_OK(tasks_exit(t, pid, pid, pid));
        }
        ASSERT_EQ(tasks_n_processes(t), 5000);
        tasks_gc(t, UINT64_MAX);
        ASSERT_EQ(tasks_n_processes(t), 5000 - 5000 / 3);
        ASSERT_EQ(tasks_n_threads(t), 5000 - 5000 / 3);
        for (uint32_t pid = 1; pid <= 5000; pid++) {
                int r = tasks_find_mapping(t, pid, 0x400000, &m);
                if (pid % 3 == 0 ? r != -ENOENT : r != 0)
                        TEST_FAIL_("pid %u: got %d", pid, r);
        }
        for (uint64_t a = 0; a < 2000; a++)
                ASSERT_OK(tasks_mmap(t, 1, 0x10000000 + a * 0x2000, 0x1000, a, "/many", NULL));
        ASSERT_EQ(tasks_n_mappings(t, 1), 2001);
        assert_mapping(t, 1, 0x10000000 + 1234 * 0x2000 + 5, 0x10000000 + 1234 * 0x2000,
                       0x10000000 + 1234 * 0x2000 + 0x1000, 1234, "/many");
        tasks_free(t);
}
