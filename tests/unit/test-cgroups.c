/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The cgroup id -> path map (perf/cgroups.c) over a directory tree of its
 * own (ids are the directories' file handles, as for cgroup2), mountinfo
 * and /proc/PID/cgroup in the kernel's formats. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "perf/cgroups.h"
#include "test.h"

static char base[] = "/tmp/test-cgroups-XXXXXX";

static void mk(const char *rel) {
        char p[512];

        snprintf(p, sizeof p, "%s%s", base, rel);
        ASSERT_EQ(mkdir(p, 0755), 0);
}

static uint64_t id_of(const char *rel) {
        union {
                struct file_handle fh;
                uint8_t buf[sizeof(struct file_handle) + 64];
        } h = { .fh.handle_bytes = 64 };
        char p[512];
        int mount_id;
        uint64_t id;

        snprintf(p, sizeof p, "%s%s", base, rel);
        ASSERT_EQ(name_to_handle_at(AT_FDCWD, p, &h.fh, &mount_id, 0), 0);
        memcpy(&id, h.fh.f_handle, sizeof id);
        return id;
}

static void write_file(const char *rel, const char *text) {
        char p[512];
        FILE *f;

        snprintf(p, sizeof p, "%s%s", base, rel);
        f = fopen(p, "w");
        ASSERT_TRUE(f);
        fputs(text, f);
        fclose(f);
}

TEST(map_walks_records_and_rescans) {
        cgroups *c = NULL;
        union {
                struct file_handle fh;
                uint8_t buf[sizeof(struct file_handle) + 64];
        } h = { .fh.handle_bytes = 64 };
        int mount_id;

        ASSERT_TRUE(mkdtemp(base));
        if (name_to_handle_at(AT_FDCWD, base, &h.fh, &mount_id, 0) < 0 || h.fh.handle_bytes < 8)
                TEST_SKIP("%s has no 8-byte file handles (%s)\n", base, strerror(errno));
        mk("/h");
        mk("/h/system.slice");
        mk("/h/system.slice/a b.service");
        mk("/h/system.slice/a b.service/sub");
        char hier[512];
        snprintf(hier, sizeof hier, "%s/h", base);
        /* A link in the tree is not followed. */
        char link[512];
        snprintf(link, sizeof link, "%s/h/system.slice/loop", base);
        ASSERT_EQ(symlink("..", link), 0);

        ASSERT_OK(cgroups_new(hier, &c));
        ASSERT_EQ(cgroups_size(c), 4);
        ASSERT_EQ(cgroups_walks(c), 1);
        ASSERT_STREQ(cgroups_path(c, id_of("/h"), 10), "/");
        ASSERT_STREQ(cgroups_path(c, id_of("/h/system.slice/a b.service/sub"), 10), "/system.slice/a b.service/sub");
        ASSERT_EQ(cgroups_walks(c), 1);

        /* Made after the walk: the first miss walks again and finds it. */
        mk("/h/new.scope");
        ASSERT_STREQ(cgroups_path(c, id_of("/h/new.scope"), 20), "/new.scope");
        ASSERT_EQ(cgroups_walks(c), 2);
        /* An unknown id: no walk within a second of the last one. */
        mk("/h/later.scope");
        ASSERT_NULL(cgroups_path(c, id_of("/h/later.scope"), 20 + CGROUPS_RESCAN_NS - 1));
        ASSERT_EQ(cgroups_walks(c), 2);
        ASSERT_STREQ(cgroups_path(c, id_of("/h/later.scope"), 20 + CGROUPS_RESCAN_NS), "/later.scope");

        /* An id no walk finds: walks at twice the interval each time. */
        uint64_t walks = cgroups_walks(c), t = 50 * CGROUPS_RESCAN_NS;
        ASSERT_NULL(cgroups_path(c, 0xfeedULL, t));
        ASSERT_EQ(cgroups_walks(c), walks + 1);
        ASSERT_NULL(cgroups_path(c, 0xfeedULL, t + CGROUPS_RESCAN_NS));          /* the interval is 2 s now */
        ASSERT_EQ(cgroups_walks(c), walks + 1);
        ASSERT_NULL(cgroups_path(c, 0xfeedULL, t + 2 * CGROUPS_RESCAN_NS));
        ASSERT_EQ(cgroups_walks(c), walks + 2);
        ASSERT_NULL(cgroups_path(c, 0xfeedULL, t + 5 * CGROUPS_RESCAN_NS));      /* 4 s after */
        ASSERT_EQ(cgroups_walks(c), walks + 2);
        for (uint64_t k = 6; k < 400; k++)
                (void) cgroups_path(c, 0xfeedULL, t + k * CGROUPS_RESCAN_NS);
        /* At 0, 2, 6, 14, 30, 62, then every 64 s: 11 walks in 400 s. */
        ASSERT_EQ(cgroups_walks(c), walks + 11);

        /* A removed cgroup keeps its path; a record names another. */
        uint64_t gone = id_of("/h/new.scope");
        char p[512];
        snprintf(p, sizeof p, "%s/h/new.scope", base);
        ASSERT_EQ(rmdir(p), 0);
        ASSERT_STREQ(cgroups_path(c, gone, 30 + 2 * CGROUPS_RESCAN_NS), "/new.scope");
        ASSERT_OK(cgroups_add(c, 0xabcdef, "/made/by.record"));
        ASSERT_STREQ(cgroups_path(c, 0xabcdef, 40), "/made/by.record");
        ASSERT_ERROR(cgroups_add(c, 1, "relative"), EINVAL);
        cgroups_free(c);

        ASSERT_ERROR(cgroups_new("/nonexistent/cgroup", &c), ENOENT);

        /* mountinfo: the cgroup2 line's mount point, unescaped. */
        write_file("/mountinfo",
                   "22 1 0:21 / /proc rw,nosuid - proc proc rw\n"
                   "30 25 0:26 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
                   "29 25 0:27 /sub /mnt/sub rw - cgroup2 cgroup2 rw\n"
                   "31 25 0:27 / /sys/fs/cgroup/uni\\040fied rw,nosuid shared:9 - cgroup2 cgroup2 rw\n");
        char mi[512], *mount = NULL;
        snprintf(mi, sizeof mi, "%s/mountinfo", base);
        ASSERT_OK(cgroups_find_mount(mi, &mount));
        ASSERT_STREQ(mount, "/sys/fs/cgroup/uni fied");
        free(mount);
        write_file("/mountinfo", "30 25 0:26 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n");
        ASSERT_ERROR(cgroups_find_mount(mi, &mount), ENODEV);

        /* /proc/PID/cgroup: the v2 line of a hybrid layout. */
        mk("/proc");
        mk("/proc/42");
        write_file("/proc/42/cgroup", "4:memory:/x\n1:name=systemd:/user.slice\n0::/user.slice/session-1.scope\n");
        mk("/proc/43");
        write_file("/proc/43/cgroup", "4:memory:/x\n");
        snprintf(p, sizeof p, "%s/proc", base);
        ASSERT_OK(cgroups_of_pid(p, 42, &mount));
        ASSERT_STREQ(mount, "/user.slice/session-1.scope");
        free(mount);
        ASSERT_ERROR(cgroups_of_pid(p, 43, &mount), ENOENT);
        ASSERT_ERROR(cgroups_of_pid(p, 44, &mount), ENOENT);

        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
        ASSERT_EQ(system(cmd), 0);
}

/* A hierarchy larger than the bound: the map stops at CGROUPS_MAX. */
TEST(map_is_bounded) {
        /* tmpfs where there is one: 65,636 directories made quickly. */
        char dir[64], p[128], cmd[160];
        cgroups *c = NULL;

        snprintf(dir, sizeof dir, "%s/test-cgroups-big-XXXXXX", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
        ASSERT_TRUE(mkdtemp(dir));
        for (unsigned i = 0; i < CGROUPS_MAX + 100; i++) {
                snprintf(p, sizeof p, "%s/c%u", dir, i);
                ASSERT_EQ(mkdir(p, 0755), 0);
        }
        if (cgroups_new(dir, &c) < 0)
                TEST_SKIP("cannot walk %s\n", dir);
        ASSERT_EQ(cgroups_size(c), CGROUPS_MAX);
        cgroups_free(c);
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        ASSERT_EQ(system(cmd), 0);
}
