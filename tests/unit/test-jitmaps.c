/* SPDX-License-Identifier: GPL-2.0-or-later */
/* JIT maps (perf/jitmaps.h) over a synthetic root: ROOT/proc/PID (its
 * owner is the process's) and ROOT/tmp/perf-PID.map in perf's format,
 * appended to while read, overlapping lines, a planted link, another
 * owner's file, bad lines. */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "perf/jitmaps.h"
#include "test.h"

#define SEC 1000000000ULL

typedef struct root {
        char dir[64];
} root;

/* ROOT/proc/PID/status with our uid and the pid's namespace pid. */
static void write_status(const root *r, uint32_t pid, uint32_t nspid) {
        char p[256];
        FILE *f;

        snprintf(p, sizeof p, "%s/proc/%u/status", r->dir, pid);
        f = fopen(p, "w");
        ASSERT_TRUE(f != NULL);
        fprintf(f, "Name:\tnode\nUid:\t%u\t%u\t%u\t%u\n", getuid(), getuid(), getuid(), getuid());
        if (nspid != pid)
                fprintf(f, "NSpid:\t%u\t%u\n", pid, nspid);
        else
                fprintf(f, "NSpid:\t%u\n", pid);
        fclose(f);
}

static void root_init(root *r, uint32_t pid) {
        char p[256];

        snprintf(r->dir, sizeof r->dir, "/tmp/test-jitmaps.XXXXXX");
        ASSERT_TRUE(mkdtemp(r->dir));
        snprintf(p, sizeof p, "%s/proc", r->dir);
        ASSERT_EQ(mkdir(p, 0755), 0);
        snprintf(p, sizeof p, "%s/proc/%u", r->dir, pid);
        ASSERT_EQ(mkdir(p, 0755), 0);
        snprintf(p, sizeof p, "%s/tmp", r->dir);
        ASSERT_EQ(mkdir(p, 0755), 0);
        write_status(r, pid, pid);
}

static void root_done(root *r) {
        char cmd[128];

        snprintf(cmd, sizeof cmd, "rm -rf '%s'", r->dir);
        ASSERT_EQ(system(cmd), 0);
}

static void append(const root *r, uint32_t pid, const char *text) {
        char p[256];
        FILE *f;

        snprintf(p, sizeof p, "%s/tmp/perf-%u.map", r->dir, pid);
        f = fopen(p, "a");
        ASSERT_TRUE(f != NULL);
        fputs(text, f);
        fclose(f);
}

TEST(parse_line) {
        uint64_t start, size;
        const char *name;
        size_t len;
        const char *l = "7f978b745b80 348 JS:*namedJsLeafGamma /tmp/w/spin.js:1:26";

        ASSERT_OK(jitmaps_parse_line(l, strlen(l), &start, &size, &name, &len));
        ASSERT_U64_EQ(start, 0x7f978b745b80ULL);
        ASSERT_U64_EQ(size, 0x348);
        ASSERT_EQ(len, strlen("JS:*namedJsLeafGamma /tmp/w/spin.js:1:26"));
        ASSERT_TRUE(strncmp(name, "JS:*namedJsLeafGamma", 20) == 0);
        l = "0x1000 0x20 name with spaces";
        ASSERT_OK(jitmaps_parse_line(l, strlen(l), &start, &size, &name, &len));
        ASSERT_U64_EQ(start, 0x1000);
        static const char *const bad[] = { "", "1000", "1000 20", "1000 20 ", "zz 20 f", "1000 0 f",
                                           "ffffffffffffffff 2 wrap", "10000000000000000 2 long", "1000  20 f" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                ASSERT_ERROR(jitmaps_parse_line(bad[i], strlen(bad[i]), &start, &size, &name, &len), EINVAL);
}

TEST(lookup_and_append) {
        _cleanup_(root_done) root r;
        jitmaps *j = NULL;
        uint64_t start = 0, v1, v2, v3, v4;
        const char *n;

        root_init(&r, 42);
        append(&r, 42, "1000 100 first\n2000 80 second\nbogus line\n3000 10 part");
        ASSERT_OK(jitmaps_new(r.dir, &j));
        ASSERT_TRUE(!jitmaps_version(j, 42, &v1));     /* not looked up yet */
        n = jitmaps_lookup(j, 42, 0x1050, 1 * SEC, &start);
        ASSERT_TRUE(jitmaps_version(j, 42, &v1));
        ASSERT_STREQ(n, "first");
        ASSERT_U64_EQ(start, 0x1000);
        ASSERT_STREQ(jitmaps_lookup(j, 42, 0x207f, 1 * SEC, &start), "second");
        ASSERT_NULL(jitmaps_lookup(j, 42, 0x2080, 1 * SEC, &start));
        ASSERT_EQ(jitmaps_get_stats(j)->bad_lines, 1);
        /* The unfinished last line is not taken until it ends; nor is a
         * new line before the re-read interval. */
        append(&r, 42, "ial\n4000 10 later\n");
        ASSERT_NULL(jitmaps_lookup(j, 42, 0x4004, 1 * SEC + 10, &start));
        ASSERT_STREQ(jitmaps_lookup(j, 42, 0x4004, 2 * SEC + 10, &start), "later");
        ASSERT_STREQ(jitmaps_lookup(j, 42, 0x3004, 2 * SEC + 10, &start), "partial");
        /* A later line over an earlier one wins. */
        append(&r, 42, "1040 20 recompiled\n");
        ASSERT_TRUE(jitmaps_version(j, 42, &v2));
        ASSERT_TRUE(v2 != v1);                                                        /* re-read at 2 s */
        ASSERT_STREQ(jitmaps_lookup(j, 42, 0x1044, 2 * SEC + 10, &start), "first");  /* found: no re-read */
        ASSERT_TRUE(jitmaps_version(j, 42, &v3));
        ASSERT_U64_EQ(v3, v2);                                                        /* same names */
        ASSERT_NULL(jitmaps_lookup(j, 42, 0x9000, 4 * SEC, &start));                 /* a miss re-reads */
        ASSERT_TRUE(jitmaps_version(j, 42, &v3));
        ASSERT_TRUE(v3 != v2);
        ASSERT_STREQ(jitmaps_lookup(j, 42, 0x1044, 4 * SEC, &start), "recompiled");
        ASSERT_U64_EQ(start, 0x1040);
        ASSERT_STREQ(jitmaps_lookup(j, 42, 0x1010, 4 * SEC, &start), "first");
        /* What it holds is counted (the names at least), and given back
         * when the process is forgotten. */
        size_t held = jitmaps_memory_bytes(j), empty;
        ASSERT_GE(held, strlen("first second partial later recompiled") + 1);
        /* exec: forgotten, read anew. */
        jitmaps_forget(j, 42);
        empty = jitmaps_memory_bytes(j);
        ASSERT_LT(empty, held);
        ASSERT_TRUE(!jitmaps_version(j, 42, &v4));
        ASSERT_STREQ(jitmaps_lookup(j, 42, 0x1044, 5 * SEC, &start), "recompiled");
        ASSERT_GT(jitmaps_memory_bytes(j), empty);
        /* Read anew: a version the old map never had. */
        ASSERT_TRUE(jitmaps_version(j, 42, &v4));
        ASSERT_TRUE(v4 != v1 && v4 != v2 && v4 != v3);
        /* No map, no process. */
        ASSERT_NULL(jitmaps_lookup(j, 43, 0x1044, 5 * SEC, &start));
        /* Lookups stopped (a replay): a map there is not read. */
        jitmaps_forget(j, 42);
        jitmaps_stop_lookups(j);
        ASSERT_NULL(jitmaps_lookup(j, 42, 0x1044, 6 * SEC, &start));
        jitmaps_free(j);
}

TEST(refused) {
        _cleanup_(root_done) root r;
        char p[256], target[256];
        jitmaps *j = NULL;
        uint64_t start;

        root_init(&r, 7);
        /* A link planted at the map's path is not followed. */
        snprintf(target, sizeof target, "%s/secret", r.dir);
        FILE *f = fopen(target, "w");
        ASSERT_TRUE(f);
        fputs("1000 100 secret\n", f);
        fclose(f);
        snprintf(p, sizeof p, "%s/tmp/perf-7.map", r.dir);
        ASSERT_EQ(symlink(target, p), 0);
        ASSERT_OK(jitmaps_new(r.dir, &j));
        ASSERT_NULL(jitmaps_lookup(j, 7, 0x1010, SEC, &start));
        ASSERT_GE(jitmaps_get_stats(j)->refused, 1);
        /* A map whose owner is not the process's is not read. */
        ASSERT_EQ(unlink(p), 0);
        append(&r, 7, "1000 100 planted\n");
        jitmaps_forget(j, 7);
        ASSERT_STREQ(jitmaps_lookup(j, 7, 0x1010, 3 * SEC, &start), "planted");
        /* A second name (a hard link made by someone else): not read. */
        snprintf(target, sizeof target, "%s/tmp/other-name", r.dir);
        ASSERT_EQ(link(p, target), 0);
        jitmaps_forget(j, 7);
        ASSERT_NULL(jitmaps_lookup(j, 7, 0x1010, 5 * SEC, &start));
        ASSERT_EQ(unlink(target), 0);
        if (geteuid() == 0) {
                ASSERT_EQ(chown(p, 12345, 12345), 0);
                jitmaps_forget(j, 7);
                ASSERT_NULL(jitmaps_lookup(j, 7, 0x1010, 7 * SEC, &start));
                ASSERT_EQ(chown(p, getuid(), getgid()), 0);
        }
        /* A process in another pid namespace (NSpid 1): the host's
         * /tmp/perf-7.map is another process's map, not read. */
        write_status(&r, 7, 1);
        jitmaps_forget(j, 7);
        ASSERT_NULL(jitmaps_lookup(j, 7, 0x1010, 9 * SEC, &start));
        write_status(&r, 7, 7);
        jitmaps_forget(j, 7);
        ASSERT_STREQ(jitmaps_lookup(j, 7, 0x1010, 11 * SEC, &start), "planted");
        jitmaps_free(j);
}

TEST(long_line_skipped) {
        _cleanup_(root_done) root r;
        _cleanup_free_ char *big = malloc(1536 * 1024 + 1);
        jitmaps *j = NULL;
        uint64_t start;

        ASSERT_TRUE(big != NULL);
        memset(big, 'x', 1536 * 1024);
        big[1536 * 1024] = 0;
        root_init(&r, 9);
        append(&r, 9, "1000 10 before\n");
        append(&r, 9, big);
        append(&r, 9, "\n2000 10 after\n");
        ASSERT_OK(jitmaps_new(r.dir, &j));
        /* The first read takes the first line and stops in the long one. */
        ASSERT_STREQ(jitmaps_lookup(j, 9, 0x1004, SEC, &start), "before");
        ASSERT_NULL(jitmaps_lookup(j, 9, 0x2004, SEC, &start));
        /* Re-reads (one a second, 1 MiB each) skip to its end, then find
         * the line after it. */
        for (uint64_t t = 2; t < 6 && !jitmaps_lookup(j, 9, 0x2004, t * SEC, &start); t++)
                ;
        ASSERT_STREQ(jitmaps_lookup(j, 9, 0x2004, 6 * SEC, &start), "after");
        ASSERT_EQ(jitmaps_get_stats(j)->bad_lines, 1);
        jitmaps_free(j);
}
