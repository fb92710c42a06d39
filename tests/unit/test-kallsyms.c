/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kernel/kallsyms.h"
#include "macro.h"
#include "test.h"

#define FIXTURE TEST_DATA("kernel-6.1-brd/proc/kallsyms.loaded.gz")

/* The fixture is stored gzipped; decompress with gzip(1) rather than
 * linking a compression library into the tests. NULL if gzip is missing. */
static char *read_gz(const char *path, size_t *ret_size) {
        char cmd[4096];
        size_t size = 0, alloc = 0;
        char *buf = NULL;
        FILE *f;

        if (system("command -v gzip >/dev/null 2>&1") != 0)
                return NULL;
        snprintf(cmd, sizeof(cmd), "gzip -dc '%s'", path);
        f = popen(cmd, "r");
        if (!f)
                return NULL;
        for (;;) {
                size_t n;

                if (alloc - size < 65536) {
                        alloc = alloc ? alloc * 2 : 1 << 20;
                        buf = realloc(buf, alloc);
                        if (!buf)
                                abort();
                }
                n = fread(buf + size, 1, alloc - size, f);
                if (n == 0)
                        break;
                size += n;
        }
        if (pclose(f) != 0) {
                free(buf);
                return NULL;
        }
        *ret_size = size;
        return buf;
}

static kallsyms *fixture;
static int fixture_error;

static void free_fixture(void) {
        fixture = kallsyms_free(fixture);
}

/* Parses the fixture once for all tests; NULL (test skipped) without gzip. */
static kallsyms *get_fixture(void) {
        char *text;
        size_t size = 0;

        if (fixture || fixture_error)
                return fixture;
        text = read_gz(FIXTURE, &size);
        if (!text) {
                fixture_error = -ENOENT;
                return NULL;
        }
        ASSERT_OK(kallsyms_parse(text, size, &fixture));
        free(text);
        atexit(free_fixture);
        return fixture;
}

static void assert_lookup(const kallsyms *k, uint64_t addr, const char *name, const char *module,
                          uint64_t start, uint64_t end) {
        ksym s = {};

        ASSERT_OK(kallsyms_lookup(k, addr, &s));
        ASSERT_STREQ(s.name, name);
        if (module)
                ASSERT_STREQ(s.module, module);
        else
                ASSERT_NULL(s.module);
        ASSERT_U64_EQ(s.addr, start);
        ASSERT_U64_EQ(s.end, end);
}

TEST(fixture_counts) {
        kallsyms *k = get_fixture();

        if (!k)
                TEST_SKIP("gzip not available");
        /* `zcat kallsyms.loaded.gz | wc -l`: 115988, every line well-formed. */
        ASSERT_EQ(kallsyms_count(k), 115988);
        ASSERT_EQ(kallsyms_n_skipped(k), 0);
        ASSERT_GT(kallsyms_memory_bytes(k), 115988 * 20);
}

TEST(fixture_text_addr) {
        kallsyms *k = get_fixture();
        uint64_t a = 0;

        if (!k)
                TEST_SKIP("gzip not available");
        /* "ffffffffb1600000 T _text" (KASLR moved it from ffffffff81000000). */
        ASSERT_OK(kallsyms_text_addr(k, &a));
        ASSERT_U64_EQ(a, 0xffffffffb1600000ULL);
        ASSERT_OK(kallsyms_find(k, "_etext", &a));
        ASSERT_U64_EQ(a, 0xffffffffb2401d32ULL);
        /* Module symbols are not core-kernel symbols. */
        ASSERT_ERROR(kallsyms_find(k, "brd_submit_bio", &a), ENOENT);
        ASSERT_ERROR(kallsyms_find(k, "no_such_symbol_anywhere", &a), ENOENT);
}

TEST(fixture_module_lookup) {
        kallsyms *k = get_fixture();

        if (!k)
                TEST_SKIP("gzip not available");
        /* "ffffffffc080ba00 t brd_submit_bio\t[brd]"; the next brd symbol up
         * is "ffffffffc080bb30 t brd_free_pages". */
        assert_lookup(k, 0xffffffffc080ba00ULL, "brd_submit_bio", "brd", 0xffffffffc080ba00ULL, 0xffffffffc080bb30ULL);
        assert_lookup(k, 0xffffffffc080bb2fULL, "brd_submit_bio", "brd", 0xffffffffc080ba00ULL, 0xffffffffc080bb30ULL);
        assert_lookup(k, 0xffffffffc080bb30ULL, "brd_free_pages", "brd", 0xffffffffc080bb30ULL, 0xffffffffc080bc04ULL);
        /* The module's lowest symbol: the start of its text (/proc/modules
         * says "brd 20480 0 - Live 0xffffffffc080b000"). */
        assert_lookup(k, 0xffffffffc080b000ULL, "brd_insert_page.part.0", "brd", 0xffffffffc080b000ULL, 0xffffffffc080b0e0ULL);
}

TEST(fixture_bpf_pseudo_module) {
        kallsyms *k = get_fixture();

        if (!k)
                TEST_SKIP("gzip not available");
        /* "ffffffffc032b790 t bpf_prog_3650d9673c54ce30_sd_devices\t[bpf]" is
         * the lowest address of the module area. */
        assert_lookup(k, 0xffffffffc032b7a0ULL, "bpf_prog_3650d9673c54ce30_sd_devices", "bpf",
                      0xffffffffc032b790ULL, 0xffffffffc032b93cULL);
        ASSERT_ERROR(kallsyms_lookup(k, 0xffffffffc032b78fULL, NULL), ENOENT);
}

TEST(fixture_exact_start_and_duplicates) {
        kallsyms *k = get_fixture();

        if (!k)
                TEST_SKIP("gzip not available");
        /* startup_64, _stext and _text are all "T" at ffffffffb1600000, in
         * that file order: the first global wins. */
        assert_lookup(k, 0xffffffffb1600000ULL, "startup_64", NULL, 0xffffffffb1600000ULL, 0xffffffffb1600070ULL);
        /* "t __do_sys_ni_syscall" comes before "T __ia32_sys_ni_syscall" and
         * "T __x64_sys_ni_syscall" at ffffffffb16045c0: the global is
         * preferred over the earlier local; next up is vdso_mremap at ...5d0. */
        assert_lookup(k, 0xffffffffb16045c8ULL, "__ia32_sys_ni_syscall", NULL, 0xffffffffb16045c0ULL, 0xffffffffb16045d0ULL);
        /* brd_exit and cleanup_module: both "t" at ffffffffc080bcd3, brd_exit first in the file. */
        assert_lookup(k, 0xffffffffc080bcd3ULL, "brd_exit", "brd", 0xffffffffc080bcd3ULL, 0xffffffffc080c024ULL);
}

TEST(fixture_gaps_and_ends) {
        kallsyms *k = get_fixture();

        if (!k)
                TEST_SKIP("gzip not available");
        /* The core kernel's highest symbol "ffffffffb5000000 D
         * __init_scratch_end" covers one capped page; then nothing up to the
         * module area. */
        assert_lookup(k, 0xffffffffb5000fffULL, "__init_scratch_end", NULL, 0xffffffffb5000000ULL,
                      0xffffffffb5000000ULL + KALLSYMS_LAST_SYMBOL_MAX_BYTES);
        ASSERT_ERROR(kallsyms_lookup(k, 0xffffffffb5001000ULL, NULL), ENOENT);
        ASSERT_ERROR(kallsyms_lookup(k, 0xffffffffbfffffffULL, NULL), ENOENT);

        /* brd's last symbols (".bss": brd_debugfs_dir, then __key.22, both
         * at ffffffffc080e4c0) end after the cap; no module follows within it. */
        assert_lookup(k, 0xffffffffc080f4bfULL, "brd_debugfs_dir", "brd", 0xffffffffc080e4c0ULL, 0xffffffffc080f4c0ULL);
        ASSERT_ERROR(kallsyms_lookup(k, 0xffffffffc080f4c0ULL, NULL), ENOENT);

        /* The highest symbol of all, listed twice in the file (two
         * "__key.0" at ffffffffc0c28980 in [drm_kms_helper]). */
        assert_lookup(k, 0xffffffffc0c28980ULL, "__key.0", "drm_kms_helper", 0xffffffffc0c28980ULL,
                      0xffffffffc0c28980ULL + KALLSYMS_LAST_SYMBOL_MAX_BYTES);
        ASSERT_ERROR(kallsyms_lookup(k, 0xffffffffc0c29980ULL, NULL), ENOENT);
        ASSERT_ERROR(kallsyms_lookup(k, UINT64_MAX, NULL), ENOENT);
}

TEST(fixture_percpu_absolute) {
        kallsyms *k = get_fixture();

        if (!k)
                TEST_SKIP("gzip not available");
        /* The "A" per-CPU offsets start at 0 ("0000000000000000 A
         * fixed_percpu_data") and end with "0000000000035000 A
         * __per_cpu_end"; kvm_amd's "a svm_data" at 0x35040 is the highest.
         * They form their own region, capped like any other. */
        assert_lookup(k, 0, "fixed_percpu_data", NULL, 0, 0x1000);
        assert_lookup(k, 0x35040, "svm_data", "kvm_amd", 0x35040, 0x35040 + KALLSYMS_LAST_SYMBOL_MAX_BYTES);
        ASSERT_ERROR(kallsyms_lookup(k, 0x35040 + KALLSYMS_LAST_SYMBOL_MAX_BYTES, NULL), ENOENT);
        ASSERT_ERROR(kallsyms_lookup(k, 0xffffffff00000000ULL, NULL), ENOENT);
}

TEST(fixture_sorted_iteration) {
        kallsyms *k = get_fixture();
        uint64_t prev = 0;
        size_t n_brd = 0;
        ksym s;

        if (!k)
                TEST_SKIP("gzip not available");
        for (size_t i = 0; i < kallsyms_count(k); i++) {
                ASSERT_OK(kallsyms_get(k, i, &s));
                /* Unsigned comparisons: ASSERT_GE() compares as intmax_t. */
                if (s.addr < prev || s.end <= s.addr)
                        TEST_FAIL_("symbol %zu \"%s\": addr 0x%" PRIx64 " end 0x%" PRIx64 " after 0x%" PRIx64,
                                   i, s.name, s.addr, s.end, prev);
                prev = s.addr;
                if (s.module && strcmp(s.module, "brd") == 0)
                        n_brd++;
        }
        /* `grep -c '\[brd\]'` */
        ASSERT_EQ(n_brd, 31);
        ASSERT_ERROR(kallsyms_get(k, kallsyms_count(k), &s), ENOENT);
}

TEST(fixture_parse_speed) {
        char *text;
        size_t size = 0;
        struct timespec a, b;
        kallsyms *k = NULL;
        double ms;

        text = read_gz(FIXTURE, &size);
        if (!text)
                TEST_SKIP("gzip not available");
        clock_gettime(CLOCK_MONOTONIC, &a);
        ASSERT_OK(kallsyms_parse(text, size, &k));
        clock_gettime(CLOCK_MONOTONIC, &b);
        ms = (double) (b.tv_sec - a.tv_sec) * 1e3 + (double) (b.tv_nsec - a.tv_nsec) / 1e6;
        fprintf(stderr, "parsed %zu symbols (%zu bytes) in %.1f ms, table %zu bytes\n",
                kallsyms_count(k), size, ms, kallsyms_memory_bytes(k));
        /* Start-up path: generous enough for sanitizer builds. */
        ASSERT_LT(ms, 1000.0);
        kallsyms_free(k);
        free(text);
}

static kallsyms *parse_str(const char *s) {
        kallsyms *k = NULL;

        ASSERT_OK(kallsyms_parse(s, strlen(s), &k));
        return k;
}

TEST(synthetic_lookup_semantics) {
        kallsyms *k = parse_str(
                "ffffffff81000000 T _text\n"
                "ffffffff81000000 t local_alias\n"
                "ffffffff81000100 T second\n"
                "ffffffffc0001000 t mod_a_fn\t[mod_a]\n"
                "ffffffffc0000000 t mod_a_first\t[mod_a]\n"
                "ffffffffc0000800 t mod_b_fn\t[mod_b]\n");
        ksym s;

        ASSERT_EQ(kallsyms_count(k), 6);
        /* Before the first symbol. */
        ASSERT_ERROR(kallsyms_lookup(k, 0xffffffff80ffffffULL, &s), ENOENT);
        ASSERT_ERROR(kallsyms_lookup(k, 0, &s), ENOENT);
        assert_lookup(k, 0xffffffff81000000ULL, "_text", NULL, 0xffffffff81000000ULL, 0xffffffff81000100ULL);
        assert_lookup(k, 0xffffffff810000ffULL, "_text", NULL, 0xffffffff81000000ULL, 0xffffffff81000100ULL);
        /* Last core symbol: capped. */
        assert_lookup(k, 0xffffffff81000100ULL + 4095, "second", NULL, 0xffffffff81000100ULL, 0xffffffff81001100ULL);
        ASSERT_ERROR(kallsyms_lookup(k, 0xffffffff81001100ULL, &s), ENOENT);
        /* Module order in the file does not matter; mod_b's symbol between
         * two mod_a symbols does not end mod_a_first, but it is the
         * greatest start below 0xffffffffc0000900. */
        assert_lookup(k, 0xffffffffc0000000ULL, "mod_a_first", "mod_a", 0xffffffffc0000000ULL, 0xffffffffc0001000ULL);
        assert_lookup(k, 0xffffffffc0000900ULL, "mod_b_fn", "mod_b", 0xffffffffc0000800ULL, 0xffffffffc0001800ULL);
        assert_lookup(k, 0xffffffffc0001fffULL, "mod_a_fn", "mod_a", 0xffffffffc0001000ULL, 0xffffffffc0002000ULL);
        ASSERT_ERROR(kallsyms_lookup(k, 0xffffffffc0002000ULL, &s), ENOENT);
        kallsyms_free(k);
}

TEST(synthetic_duplicates_prefer_global_then_file_order) {
        kallsyms *k = parse_str(
                "0000000000001000 t a_local\n"
                "0000000000001000 t b_local\n"
                "0000000000002000 t c_local\n"
                "0000000000002000 W d_weak\n"
                "0000000000002000 T e_global\n");

        assert_lookup(k, 0x1000, "a_local", NULL, 0x1000, 0x2000);
        assert_lookup(k, 0x2000, "d_weak", NULL, 0x2000, 0x3000);
        kallsyms_free(k);
}

TEST(synthetic_malformed_lines_counted) {
        kallsyms *k = parse_str(
                "ffffffff81000000 T _text\n"
                "\n"                                            /* empty */
                "zzzzzzzzzzzzzzzz T bad_hex\n"
                "ffffffff81000010 T\n"                          /* no name */
                "ffffffff81000020Tglued\n"                      /* no separators */
                "1ffffffff81000000 T too_many_digits\n"
                "ffffffff81000030 T name extra\n"               /* space, not tab, before a module */
                "ffffffff81000040 t nobracket\tbrd\n"
                "ffffffff81000050 t unterminated\t[brd\n"
                "ffffffff81000060 t empty_mod\t[]\n"
                "ffffffff81000070 t trailing\t[brd] x\n"
                "ffffffff81000080 T ok_last_without_newline");

        ASSERT_EQ(kallsyms_count(k), 2);
        ASSERT_EQ(kallsyms_n_skipped(k), 10);
        assert_lookup(k, 0xffffffff81000010ULL, "_text", NULL, 0xffffffff81000000ULL, 0xffffffff81000080ULL);
        assert_lookup(k, 0xffffffff81000080ULL, "ok_last_without_newline", NULL, 0xffffffff81000080ULL, 0xffffffff81001080ULL);
        kallsyms_free(k);
}

TEST(synthetic_nul_in_line_is_malformed) {
        static const char text[] = "ffffffff81000000 T a\0b\nffffffff81000010 T c\n";
        kallsyms *k = NULL;

        ASSERT_OK(kallsyms_parse(text, sizeof(text) - 1, &k));
        ASSERT_EQ(kallsyms_count(k), 1);
        ASSERT_EQ(kallsyms_n_skipped(k), 1);
        kallsyms_free(k);
}

TEST(all_zero_addresses_is_eperm) {
        static const char text[] =
                "0000000000000000 T _text\n"
                "0000000000000000 t brd_submit_bio\t[brd]\n"
                "0000000000000000 t bpf_prog_6deef7357e7b4530_foo\t[bpf]\n";
        kallsyms *k = (kallsyms *) 0x1;

        ASSERT_ERROR(kallsyms_parse(text, strlen(text), &k), EPERM);
        ASSERT_TRUE(k == (kallsyms *) 0x1);     /* untouched on failure */
}

TEST(empty_input) {
        kallsyms *k = NULL;
        ksym s;

        ASSERT_OK(kallsyms_parse("", 0, &k));
        ASSERT_EQ(kallsyms_count(k), 0);
        ASSERT_ERROR(kallsyms_lookup(k, 0x1000, &s), ENOENT);
        ASSERT_ERROR(kallsyms_text_addr(k, NULL), ENOENT);
        kallsyms_free(k);
}

TEST(load_from_root) {
        char dir[] = "/tmp/test-kallsyms-XXXXXX", path[256];
        kallsyms *k = NULL;
        uint64_t a = 0;
        FILE *f;

        ASSERT_TRUE(mkdtemp(dir) != NULL);
        snprintf(path, sizeof(path), "%s/proc", dir);
        ASSERT_OK(mkdir(path, 0755) < 0 ? -errno : 0);
        snprintf(path, sizeof(path), "%s/proc/kallsyms", dir);
        ASSERT_ERROR(kallsyms_load(dir, &k), ENOENT);
        f = fopen(path, "w");
        ASSERT_TRUE(f != NULL);
        fputs("ffffffff81000000 T _stext\nffffffffc080ba00 t brd_submit_bio\t[brd]\n", f);
        fclose(f);

        ASSERT_OK(kallsyms_load(dir, &k));
        ASSERT_EQ(kallsyms_count(k), 2);
        /* No _text: the _stext fallback. */
        ASSERT_OK(kallsyms_text_addr(k, &a));
        ASSERT_U64_EQ(a, 0xffffffff81000000ULL);
        kallsyms_free(k);

        unlink(path);
        snprintf(path, sizeof(path), "%s/proc", dir);
        rmdir(path);
        rmdir(dir);
}


/* The one line scanner every reader of kallsyms text uses (kallsyms.c,
 * kcore.c, snapshot.c): the forms the kernel prints, and what is not. */
TEST(line_scanner) {
        static const char *const bad[] = {
                "", "ffffffff81000000", "ffffffff81000000 T", "ffffffff81000000 T ",
                "ffffffff81000000  T _text", "xfffffff81000000 T _text", "11111111111111111 T _text",
                "ffffffff81000000 T _text extra", "ffffffff81000000 T _text [brd]",
                "ffffffff81000000 t brd_init\t[brd", "ffffffff81000000 t brd_init\t[]",
                "ffffffff81000000 t brd_init\t[b r]", "ffffffff81000000 t brd_init\t[brd]x",
                "ffffffff81000000 \x01 _text",
        };
        kallsyms_line l;

        ASSERT_TRUE(kallsyms_line_parse("ffffffffb1600000 T _text", 24, &l));
        ASSERT_U64_EQ(l.addr, 0xffffffffb1600000ull);
        ASSERT_EQ(l.type, 'T');
        ASSERT_EQ(l.name_len, 5);
        ASSERT_TRUE(memcmp(l.name, "_text", 5) == 0);
        ASSERT_NULL(l.module);
        ASSERT_EQ(kallsyms_line_text_rank(&l), 2);

        ASSERT_TRUE(kallsyms_line_parse("c1000000 t brd_init\t[brd]", 25, &l));
        ASSERT_U64_EQ(l.addr, 0xc1000000ull);
        ASSERT_EQ(l.module_len, 3);
        ASSERT_TRUE(memcmp(l.module, "brd", 3) == 0);
        ASSERT_EQ(kallsyms_line_text_rank(&l), 0);
        ASSERT_TRUE(kallsyms_line_parse("ffffffffc0000000 t _text\t[fake]", 31, &l));
        ASSERT_EQ(kallsyms_line_text_rank(&l), 0);      /* a module's _text is not the kernel's */

        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                if (kallsyms_line_parse(bad[i], strlen(bad[i]), &l))
                        TEST_FAIL_("line %zu \"%s\" was taken", i, bad[i]);
}

/* _text, else _stext, whether read from the text or from the table. */
TEST(text_addr_from_text_and_table) {
        static const struct {
                const char *text;
                int r;
                uint64_t addr;
        } cases[] = {
                { "ffffffff81001000 T _stext\nffffffff81000000 T _text\n", 0, 0xffffffff81000000ull },
                { "ffffffff81001000 T _stext\nffffffff81002000 T _stext\n", 0, 0xffffffff81001000ull },
                { "ffffffffc0000000 t _text\t[fake]\nffffffff81001000 T _stext\n", 0, 0xffffffff81001000ull },
                { "ffffffff81000000 T _text extra\nffffffff81001000 T _stext", 0, 0xffffffff81001000ull },
                { "ffffffff81001000 T startup_64\n", -ENOENT, 0 },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                size_t len = strlen(cases[i].text);
                uint64_t a = 0, b = 0;
                kallsyms *k = NULL;
                int r;

                r = kallsyms_text_addr_from_text(cases[i].text, len, &a);
                ASSERT_EQ(r, cases[i].r);
                ASSERT_U64_EQ(a, cases[i].addr);
                ASSERT_OK(kallsyms_parse(cases[i].text, len, &k));
                ASSERT_EQ(kallsyms_text_addr(k, &b), cases[i].r);
                ASSERT_U64_EQ(b, cases[i].addr);
                kallsyms_free(k);
        }

        kallsyms *k = get_fixture();
        uint64_t a = 0;
        if (!k)
                TEST_SKIP("gzip not available");
        size_t size;
        char *text = read_gz(FIXTURE, &size);
        ASSERT_OK(kallsyms_text_addr_from_text(text, size, &a));
        ASSERT_U64_EQ(a, 0xffffffffb1600000ULL);
        free(text);
}

static int count_line(const kallsyms_line *l, void *userdata) {
        (*(size_t *) userdata)++;
        return 0;
}

/* kallsyms_stream() is documented to fail with -EFBIG past the size
 * kallsyms_load() reads at most (64 MiB), and kallsyms_load() never holds
 * more than that. A file whose second "line" is 256 MiB without a newline
 * (a sparse file of NULs, no disk): with 160 MiB of address space to
 * spare, kallsyms_load() stops at 64 MiB with -EFBIG; getline() grows its
 * buffer to the whole line, fails with ENOMEM, which glibc < 2.37 does not
 * flag with ferror(), and the stream reports success after one line. */
TEST(stream_bounds_memory_like_load) {
        char dir[] = "/tmp/test-kallsyms-XXXXXX", path[256];
        int status = 0;
        pid_t pid;
        FILE *f;

#if defined(__SANITIZE_ADDRESS__)
        TEST_SKIP("RLIMIT_AS and ASan do not mix");
#endif
        ASSERT_TRUE(mkdtemp(dir) != NULL);
        snprintf(path, sizeof(path), "%s/proc", dir);
        ASSERT_OK(mkdir(path, 0755) < 0 ? -errno : 0);
        snprintf(path, sizeof(path), "%s/proc/kallsyms", dir);
        f = fopen(path, "w");
        ASSERT_TRUE(f != NULL);
        fputs("ffffffff81000000 T _text\n", f);
        fclose(f);
        ASSERT_OK(truncate(path, 256u << 20) < 0 ? -errno : 0);

        pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                kallsyms *k = NULL;
                size_t n = 0;
                int r1, r2;

                if (test_limit_address_space(160u << 20) < 0)
                        _exit(2);
                r1 = kallsyms_load(dir, &k);
                r2 = kallsyms_stream(dir, count_line, &n);
                fprintf(stderr, "kallsyms_load: %d, kallsyms_stream: %d after %zu lines\n", r1, r2, n);
                _exit(r1 == -EFBIG && r2 == -EFBIG ? 0 : 1);
        }
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        unlink(path);
        snprintf(path, sizeof(path), "%s/proc", dir);
        rmdir(path);
        rmdir(dir);
        ASSERT_TRUE(WIFEXITED(status));
        ASSERT_EQ(WEXITSTATUS(status), 0);
}
