/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/stat.h>

#include "fileio.h"
#include "macro.h"
#include "test.h"

/* /proc files report st_size 0; the reader must read to EOF regardless. */
TEST(reads_proc_files_with_zero_size) {
        _cleanup_free_ char *s = NULL;
        size_t n = 0;
        struct stat st;

        ASSERT_OK(stat("/proc/self/status", &st));
        ASSERT_EQ(st.st_size, 0);
        ASSERT_OK(read_full_file("/proc/self/status", 1 << 20, &s, &n));
        ASSERT_GT(n, 100);
        ASSERT_EQ(strlen(s), n);
        ASSERT_TRUE(strstr(s, "Pid:") != NULL);
}

TEST(size_limit_and_errors) {
        char dir[] = "/tmp/test-fileio.XXXXXX";
        _cleanup_free_ char *p = NULL, *s = NULL;
        size_t n = 0;
        FILE *f;

        ASSERT_TRUE(mkdtemp(dir) != NULL);
        p = path_join(dir, "f");
        f = fopen(p, "w");
        ASSERT_TRUE(f != NULL);
        for (int i = 0; i < 100000; i++)
                fputc('a' + i % 26, f);
        fclose(f);

        ASSERT_ERROR(read_full_file(p, 99999, &s, &n), EFBIG);
        ASSERT_NULL(s);
        ASSERT_OK(read_full_file(p, 100000, &s, &n));
        ASSERT_EQ(n, 100000);
        ASSERT_EQ(s[99999], 'a' + 99999 % 26);
        ASSERT_EQ(s[100000], 0);

        ASSERT_ERROR(read_full_file_at(dir, "missing", 10, &s, &n), ENOENT);
        unlink(p);
        rmdir(dir);
}

TEST(path_join_roots) {
        _cleanup_free_ char *a = path_join("/", "proc/kallsyms");
        _cleanup_free_ char *b = path_join("/tmp/root/", "/proc/kallsyms");
        _cleanup_free_ char *c = path_join("/tmp/root", "sys/kernel/notes");
        _cleanup_free_ char *d = path_join(NULL, "proc/modules");

        ASSERT_STREQ(a, "/proc/kallsyms");
        ASSERT_STREQ(b, "/tmp/root/proc/kallsyms");
        ASSERT_STREQ(c, "/tmp/root/sys/kernel/notes");
        ASSERT_STREQ(d, "/proc/modules");
}

/* open_regular_file() opens regular files on real filesystems only: not
 * a directory or a FIFO, nor the regular-looking files of procfs or sysfs
 * (reading /proc/kmsg consumes the kernel log). */
TEST(open_regular_file_refuses) {
        char dir[] = "/tmp/test-fileio.XXXXXX", p[64], q[64];
        struct stat st;
        int fd;

        ASSERT_TRUE(mkdtemp(dir) != NULL);
        snprintf(p, sizeof p, "%s/file", dir);
        snprintf(q, sizeof q, "%s/fifo", dir);
        fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ASSERT_TRUE(fd >= 0);
        close(fd);
        ASSERT_EQ(mkfifo(q, 0600), 0);

        fd = open_regular_file(AT_FDCWD, p, false, &st);
        ASSERT_TRUE(fd >= 0);
        ASSERT_TRUE(S_ISREG(st.st_mode));
        close(fd);
        ASSERT_ERROR(open_regular_file(AT_FDCWD, q, false, NULL), EINVAL);
        ASSERT_ERROR(open_regular_file(AT_FDCWD, dir, false, NULL), EINVAL);
        ASSERT_ERROR(open_regular_file(AT_FDCWD, "/proc/self/status", false, NULL), EINVAL);
        ASSERT_ERROR(open_regular_file(AT_FDCWD, "/proc/kallsyms", false, NULL), EINVAL);
        ASSERT_ERROR(open_regular_file(AT_FDCWD, "/sys/kernel/notes", false, NULL), EINVAL);
        unlink(p);
        unlink(q);
        rmdir(dir);
}
