/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <fcntl.h>
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
