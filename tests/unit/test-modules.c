/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <gelf.h>
#include <libelf.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "kernel/modules.h"
#include "kernel/notes.h"
#include "macro.h"
#include "test.h"

#define FIXTURE_ROOT TEST_DATA("kernel-6.1-brd")

/* brd in the fixture: proc/modules says "brd 20480 0 - Live
 * 0xffffffffc080b000", so its core layout is [0xffffffffc080b000,
 * 0xffffffffc0810000). */
#define BRD_BASE UINT64_C(0xffffffffc080b000)
#define BRD_SIZE 20480
#define BRD_BUILD_ID "d3b87cfbf90043c316e7473876491aedc8d43857"
/* Debian's file for the fixture's kernel, used only if present and the
 * same build. */
#define BRD_KO "/lib/modules/6.1.0-56-amd64/kernel/drivers/block/brd.ko"

/* The id written into tests/unit/data/fake-module.c's note. */
#define FAKE_BUILD_ID "00112233445566778899aabbccddeeff01234567"

/* ---- helpers ---- */

typedef struct tmpdir {
        char path[64];
} tmpdir;

static void tmpdir_make(tmpdir *t) {
        snprintf(t->path, sizeof(t->path), "/tmp/test-modules-XXXXXX");
        ASSERT_TRUE(mkdtemp(t->path) != NULL);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        (void) remove(path);
        return 0;
}

static void tmpdir_remove(tmpdir *t) {
        if (t->path[0])
                (void) nftw(t->path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}
#define _cleanup_tmpdir_ _cleanup_(tmpdir_remove)

/* Writes data to DIR/REL, creating the directories on the way. Returns
 * the full path (malloc'ed). */
static char *write_at(const char *dir, const char *rel, const void *data, size_t len) {
        char *path = path_join(dir, rel);
        FILE *f;

        ASSERT_TRUE(path != NULL);
        for (char *s = path + strlen(dir) + 1; (s = strchr(s, '/')); s++) {
                *s = 0;
                if (mkdir(path, 0755) < 0 && errno != EEXIST)
                        TEST_FAIL_("mkdir %s: %s", path, strerror(errno));
                *s = '/';
        }
        f = fopen(path, "we");
        ASSERT_TRUE(f != NULL);
        ASSERT_EQ(fwrite(data, 1, len, f), len);
        ASSERT_EQ(fclose(f), 0);
        return path;
}

static void write_str_at(const char *dir, const char *rel, const char *s) {
        free(write_at(dir, rel, s, strlen(s)));
}

static char *read_file(const char *path, size_t *ret_size) {
        char *buf = NULL;

        ASSERT_OK(read_full_file(path, 64u << 20, &buf, ret_size));
        return buf;
}

static const module_section *find_section(const module_section *s, size_t n, const char *name) {
        for (size_t i = 0; i < n; i++)
                if (strcmp(s[i].name, name) == 0)
                        return s + i;
        TEST_FAIL_("no section %s", name);
}

/* ---- /proc/modules ---- */

TEST(proc_modules_fixture) {
        _cleanup_free_ char *text = NULL;
        _cleanup_free_ proc_module *m = NULL;
        size_t size = 0, n = 0, skipped = 99;

        ASSERT_OK(read_full_file_at(FIXTURE_ROOT, "proc/modules.loaded", 1 << 20, &text, &size));
        ASSERT_OK(proc_modules_parse(text, size, &m, &n, &skipped));
        ASSERT_EQ(n, 51);
        ASSERT_EQ(skipped, 0);

        ASSERT_STREQ(m[0].name, "brd");
        ASSERT_U64_EQ(m[0].size, BRD_SIZE);
        ASSERT_U64_EQ(m[0].base, BRD_BASE);
        ASSERT_EQ(m[0].state, MODULE_STATE_LIVE);
        /* "cdrom 81920 1 sr_mod, Live 0xffffffffc0a5b000" */
        ASSERT_STREQ(m[4].name, "cdrom");
        ASSERT_U64_EQ(m[4].size, 81920);
        ASSERT_U64_EQ(m[4].base, UINT64_C(0xffffffffc0a5b000));
        /* "kvm 1146880 1 kvm_amd, Live 0xffffffffc0942000" */
        ASSERT_STREQ(m[13].name, "kvm");
        ASSERT_U64_EQ(m[13].size, 1146880);
        ASSERT_STREQ(m[50].name, "virtio_ring");
        ASSERT_U64_EQ(m[50].base, UINT64_C(0xffffffffc052c000));
        for (size_t i = 0; i < n; i++)
                ASSERT_EQ(m[i].state, MODULE_STATE_LIVE);

        free(text);
        text = NULL;
        free(m);
        m = NULL;
        ASSERT_OK(read_full_file_at(FIXTURE_ROOT, "proc/modules.unloaded", 1 << 20, &text, &size));
        ASSERT_OK(proc_modules_parse(text, size, &m, &n, NULL));
        ASSERT_EQ(n, 50);
        ASSERT_STREQ(m[0].name, "sr_mod");
        for (size_t i = 0; i < n; i++)
                ASSERT_TRUE(strcmp(m[i].name, "brd") != 0);
}

TEST(proc_modules_variants) {
        static const char text[] =
                /* Out-of-tree and unsigned: taints after the address. */
                "vboxdrv 696320 2 vboxnetadp,vboxnetflt, Live 0xffffffffc1000000 (OE)\n"
                /* init still running: state word and '+' in the flags. */
                "slow_init 16384 1 - Loading 0xffffffffc1100000 (O+)\n"
                "going 16384 0 - Unloading 0xffffffffc1200000\n"
                "going_tainted 16384 0 - Unloading 0xffffffffc1300000 (E-)\n"
                /* Read without CAP_SYSLOG: the address is hidden. */
                "hidden 20480 0 - Live 0x0000000000000000\n"
                /* CONFIG_MODULE_UNLOAD=n: no refcount, no users. */
                "no_unload 8192 - - Live 0xffffffffc1400000\n"
                "perm 4096 0 [permanent], Live 0xffffffffc1500000\n"
                "future 4096 0 - Sleeping 0xffffffffc1600000\n"
                "\n"
                "snd-dashed 4096 -1 - Live 0xffffffffc1700000";      /* no final newline */
        _cleanup_free_ proc_module *m = NULL;
        size_t n = 0, skipped = 99;

        ASSERT_OK(proc_modules_parse(text, sizeof(text) - 1, &m, &n, &skipped));
        ASSERT_EQ(n, 9);
        ASSERT_EQ(skipped, 0);
        ASSERT_STREQ(m[0].name, "vboxdrv");
        ASSERT_U64_EQ(m[0].size, 696320);
        ASSERT_U64_EQ(m[0].base, UINT64_C(0xffffffffc1000000));
        ASSERT_EQ(m[0].state, MODULE_STATE_LIVE);
        ASSERT_EQ(m[1].state, MODULE_STATE_LOADING);
        ASSERT_EQ(m[2].state, MODULE_STATE_UNLOADING);
        ASSERT_EQ(m[3].state, MODULE_STATE_UNLOADING);
        ASSERT_STREQ(m[4].name, "hidden");
        ASSERT_U64_EQ(m[4].base, 0);
        ASSERT_U64_EQ(m[5].base, UINT64_C(0xffffffffc1400000));
        ASSERT_STREQ(m[6].name, "perm");
        ASSERT_EQ(m[7].state, MODULE_STATE_OTHER);
        ASSERT_STREQ(m[8].name, "snd-dashed");
        ASSERT_U64_EQ(m[8].base, UINT64_C(0xffffffffc1700000));
}

TEST(proc_modules_malformed) {
        static const struct {
                const char *what, *line;
        } cases[] = {
                { "too few fields", "brd 20480 0 - Live" },
                { "too many fields", "brd 20480 0 - Live 0xffffffffc080b000 (OE) extra" },
                { "size not a number", "brd 20x80 0 - Live 0xffffffffc080b000" },
                { "size negative", "brd -20480 0 - Live 0xffffffffc080b000" },
                { "size overflows", "brd 18446744073709551616 0 - Live 0xffffffffc080b000" },
                { "refcount not a number", "brd 20480 x - Live 0xffffffffc080b000" },
                { "address without 0x", "brd 20480 0 - Live ffffffffc080b000" },
                { "address 17 digits", "brd 20480 0 - Live 0x1ffffffffc080b000" },
                { "address empty", "brd 20480 0 - Live 0x" },
                { "address not hex", "brd 20480 0 - Live 0xffffffffc080g000" },
                { "taints not in parentheses", "brd 20480 0 - Live 0xffffffffc080b000 OE" },
                { "taints lowercase", "brd 20480 0 - Live 0xffffffffc080b000 (oe)" },
                { "name with '/'", "../brd 20480 0 - Live 0xffffffffc080b000" },
                { "name too long", "m2345678901234567890123456789012345678901234567890123456 1 0 - Live 0x1" },
                { "carriage return", "brd 20480 0 - Live 0xffffffffc080b000\r" },
                { "NUL byte", "brd 20480 0 - Live 0xffffffffc080b000\0" },
        };
        proc_module *m = (proc_module *) 0x1;
        size_t n = 99, skipped = 99;

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                /* The NUL case's line is one byte longer than strlen says. */
                size_t len = strlen(cases[i].line) + (strstr(cases[i].what, "NUL") ? 1 : 0);

                ASSERT_OK(proc_modules_parse(cases[i].line, len, &m, &n, &skipped));
                if (n != 0 || skipped != 1)
                        TEST_FAIL_("%s: expected 0 modules, 1 skipped, got %zu, %zu", cases[i].what, n, skipped);
                ASSERT_NULL(m);
        }

        /* Skipped lines do not stop the parse. */
        {
                static const char text[] =
                        "garbage\n"
                        "brd 20480 0 - Live 0xffffffffc080b000\n"
                        "\xff\xfe\n"
                        "loop 32768 0 - Live 0xffffffffc069f000\n"
                        "x y z\n";
                _cleanup_free_ proc_module *mods = NULL;

                ASSERT_OK(proc_modules_parse(text, sizeof(text) - 1, &mods, &n, &skipped));
                ASSERT_EQ(n, 2);
                ASSERT_EQ(skipped, 3);
                ASSERT_STREQ(mods[0].name, "brd");
                ASSERT_STREQ(mods[1].name, "loop");
        }

        /* Empty text: no modules, NULL array. */
        m = (proc_module *) 0x1;
        ASSERT_OK(proc_modules_parse("", 0, &m, &n, &skipped));
        ASSERT_EQ(n, 0);
        ASSERT_EQ(skipped, 0);
        ASSERT_NULL(m);
}

TEST(proc_modules_load) {
        _cleanup_tmpdir_ tmpdir t = {};
        _cleanup_free_ char *text = NULL;
        _cleanup_free_ proc_module *m = NULL;
        proc_module *untouched = (proc_module *) 0x1;
        size_t size = 0, n = 0, skipped = 0;

        tmpdir_make(&t);
        ASSERT_ERROR(proc_modules_load(t.path, &untouched, &n, &skipped), ENOENT);
        ASSERT_TRUE(untouched == (proc_module *) 0x1);

        ASSERT_OK(read_full_file_at(FIXTURE_ROOT, "proc/modules.loaded", 1 << 20, &text, &size));
        free(write_at(t.path, "proc/modules", text, size));
        ASSERT_OK(proc_modules_load(t.path, &m, &n, &skipped));
        ASSERT_EQ(n, 51);
        ASSERT_EQ(skipped, 0);
        ASSERT_STREQ(m[0].name, "brd");
        ASSERT_U64_EQ(m[0].base, BRD_BASE);
}

/* ---- sections ---- */

/* `for f in sys/module/brd/sections/{.,}*; do echo "$(cat $f) $f"; done | sort` */
static const struct {
        const char *name;
        uint64_t addr;
        bool exec;
} brd_sections[] = {
        { ".text", 0xffffffffc080b000, true },
        { ".text.unlikely", 0xffffffffc080bb30, true },
        { ".exit.text", 0xffffffffc080bcd3, true },
        { ".note.gnu.build-id", 0xffffffffc080c000, false },
        { ".note.Linux", 0xffffffffc080c024, false },
        { ".rodata.str1.1", 0xffffffffc080c060, false },
        { "__mcount_loc", 0xffffffffc080c0dc, false },
        { ".rodata.str1.8", 0xffffffffc080c128, false },
        { ".rodata", 0xffffffffc080c180, false },
        { "__param", 0xffffffffc080c258, false },
        { ".return_sites", 0xffffffffc080c2d0, false },
        { ".orc_unwind", 0xffffffffc080c2f0, false },
        { ".orc_unwind_ip", 0xffffffffc080c584, false },
        { "__jump_table", 0xffffffffc080d000, false },
        { "__bug_table", 0xffffffffc080e000, false },
        { ".data", 0xffffffffc080e0a0, false },
        { ".exit.data", 0xffffffffc080e0e8, false },
        { ".static_call_sites", 0xffffffffc080e0f0, false },
        { ".gnu.linkonce.this_module", 0xffffffffc080e140, false },
        { ".bss", 0xffffffffc080e4c0, false },
        { ".init.text", 0xffffffffc0811000, true },
        { ".init.data", 0xffffffffc0812000, false },
        { ".symtab", 0xffffffffc0813000, false },
        { ".strtab", 0xffffffffc0813a68, false },
};

TEST(sections_read_fixture) {
        module_section *s = NULL;
        size_t n = 0;

        ASSERT_OK(module_sections_read(FIXTURE_ROOT, "brd", &s, &n));
        ASSERT_EQ(n, ELEMENTSOF(brd_sections));
        for (size_t i = 0; i < n; i++) {
                ASSERT_STREQ(s[i].name, brd_sections[i].name);
                ASSERT_U64_EQ(s[i].addr, brd_sections[i].addr);
                if (s[i].exec != brd_sections[i].exec)
                        TEST_FAIL_("%s: expected exec %d, got %d", s[i].name, brd_sections[i].exec, s[i].exec);
                ASSERT_U64_EQ(s[i].len, 0);
                ASSERT_U64_EQ(s[i].pgoff, 0);
                ASSERT_EQ(s[i].len_source, SECTION_LEN_UNKNOWN);
        }
        module_sections_free(s, n);
}

TEST(sections_read_errors) {
        _cleanup_tmpdir_ tmpdir t = {};
        module_section *s = (module_section *) 0x1;
        size_t n = 99;

        /* Names that are not one component, or not a module name. */
        ASSERT_ERROR(module_sections_read(FIXTURE_ROOT, "../module/brd", &s, &n), EINVAL);
        ASSERT_ERROR(module_sections_read(FIXTURE_ROOT, "..", &s, &n), EINVAL);
        ASSERT_ERROR(module_sections_read(FIXTURE_ROOT, "", &s, &n), EINVAL);
        ASSERT_ERROR(module_sections_read(FIXTURE_ROOT, "brd/sections", &s, &n), EINVAL);
        ASSERT_ERROR(module_sections_read(FIXTURE_ROOT, NULL, &s, &n), EINVAL);
        /* Not loaded, or built in (a directory without sections/). */
        ASSERT_ERROR(module_sections_read(FIXTURE_ROOT, "dummy", &s, &n), ENOENT);
        tmpdir_make(&t);
        write_str_at(t.path, "sys/module/builtin/parameters/x", "1\n");
        ASSERT_ERROR(module_sections_read(t.path, "builtin", &s, &n), ENOENT);
        ASSERT_TRUE(s == (module_section *) 0x1);
        ASSERT_EQ(n, 99);

        /* A synthetic module: no final newline is fine, a directory in
         * sections/ is not a section; order is by address, not name. */
        write_str_at(t.path, "sys/module/m/sections/.text", "0xffffffffc0002000\n");
        write_str_at(t.path, "sys/module/m/sections/.data", "0xffffffffc0001000");
        write_str_at(t.path, "sys/module/m/sections/.init.text", "0x0\n");
        write_str_at(t.path, "sys/module/m/sections/subdir/x", "0x1\n");
        ASSERT_OK(module_sections_read(t.path, "m", &s, &n));
        ASSERT_EQ(n, 3);
        ASSERT_STREQ(s[0].name, ".init.text");
        ASSERT_U64_EQ(s[0].addr, 0);
        ASSERT_TRUE(s[0].exec);
        ASSERT_STREQ(s[1].name, ".data");
        ASSERT_TRUE(!s[1].exec);
        ASSERT_STREQ(s[2].name, ".text");
        ASSERT_U64_EQ(s[2].addr, UINT64_C(0xffffffffc0002000));
        module_sections_free(s, n);

        /* Code by name beyond "text": fix-ups, alternatives, arm64 PLTs;
         * data by name: .orc_unwind, .rodata, __param. */
        write_str_at(t.path, "sys/module/c/sections/.fixup", "0xffffffffc0003000\n");
        write_str_at(t.path, "sys/module/c/sections/.altinstr_aux", "0xffffffffc0003100\n");
        write_str_at(t.path, "sys/module/c/sections/.plt", "0xffffffffc0003200\n");
        write_str_at(t.path, "sys/module/c/sections/.orc_unwind", "0xffffffffc0004000\n");
        write_str_at(t.path, "sys/module/c/sections/.rodata", "0xffffffffc0004100\n");
        write_str_at(t.path, "sys/module/c/sections/__param", "0xffffffffc0004200\n");
        ASSERT_OK(module_sections_read(t.path, "c", &s, &n));
        ASSERT_EQ(n, 6);
        for (size_t i = 0; i < n; i++)
                if (s[i].exec != (i < 3))
                        TEST_FAIL_("%s: expected exec %d, got %d", s[i].name, i < 3, s[i].exec);
        module_sections_free(s, n);

        /* One bad entry fails the whole read. */
        static const char *const bad[] = {
                "", "\n", "0x\n", "zzz\n", "ffffffffc0000000\n", "0x1ffffffffc0000000\n",
                "0x1 \n", "0x1\n\n", "-0x1\n", "0x0000000000000000000000000000000000000000000000000000000000000000001\n",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                s = (module_section *) 0x1;
                n = 99;
                write_str_at(t.path, "sys/module/m/sections/.bad", bad[i]);
                if (module_sections_read(t.path, "m", &s, &n) != -EBADMSG)
                        TEST_FAIL_("entry \"%s\": expected -EBADMSG", bad[i]);
                ASSERT_TRUE(s == (module_section *) 0x1);
                ASSERT_EQ(n, 99);
        }
}

TEST(sections_bound_brd) {
        module_section *s = NULL;
        size_t n = 0;

        ASSERT_OK(module_sections_read(FIXTURE_ROOT, "brd", &s, &n));
        module_sections_bound(s, n, BRD_BASE, BRD_SIZE);

        /* Inside the core layout, up to the next section. */
        ASSERT_U64_EQ(find_section(s, n, ".text")->len, 0xb30);
        ASSERT_EQ(find_section(s, n, ".text")->len_source, SECTION_LEN_NEXT);
        ASSERT_U64_EQ(find_section(s, n, ".text.unlikely")->len, 0x1a3);
        /* ... across the gap that page-aligns the next part. */
        ASSERT_U64_EQ(find_section(s, n, ".orc_unwind_ip")->len, 0xa7c);
        /* The core layout's last section ends with it, not at .init.text. */
        ASSERT_U64_EQ(find_section(s, n, ".bss")->len, BRD_BASE + BRD_SIZE - 0xffffffffc080e4c0);
        ASSERT_EQ(find_section(s, n, ".bss")->len_source, SECTION_LEN_NEXT);
        /* The init layout: up to the next section. */
        ASSERT_U64_EQ(find_section(s, n, ".init.text")->len, 0x1000);
        ASSERT_U64_EQ(find_section(s, n, ".init.data")->len, 0x1000);
        ASSERT_U64_EQ(find_section(s, n, ".symtab")->len, 0xa68);
        ASSERT_EQ(find_section(s, n, ".symtab")->len_source, SECTION_LEN_NEXT);
        /* Nothing after it. */
        ASSERT_U64_EQ(find_section(s, n, ".strtab")->len, 0);
        ASSERT_EQ(find_section(s, n, ".strtab")->len_source, SECTION_LEN_UNKNOWN);

        for (size_t i = 0; i < n; i++) {
                if (s[i].addr >= BRD_BASE && s[i].addr < BRD_BASE + BRD_SIZE)
                        ASSERT_LE(s[i].addr + s[i].len, BRD_BASE + BRD_SIZE);
                if (i + 1 < n)
                        ASSERT_LE(s[i].addr + s[i].len, s[i + 1].addr);
        }
        module_sections_free(s, n);
}

TEST(sections_bound_synthetic) {
        module_section s[] = {
                { .name = (char *) "a", .addr = 0x1000, .len_source = SECTION_LEN_UNKNOWN },
                { .name = (char *) "empty", .addr = 0x1000, .len_source = SECTION_LEN_UNKNOWN },
                { .name = (char *) "elf", .addr = 0x1100, .len = 5, .len_source = SECTION_LEN_ELF },
                { .name = (char *) "b", .addr = 0x1200, .len_source = SECTION_LEN_UNKNOWN },
                { .name = (char *) "far", .addr = 0x9000, .len_source = SECTION_LEN_UNKNOWN },
        };

        /* No core layout known (a hidden address): all bounded by their
         * successors, sections sharing an address by the first beyond. */
        module_sections_bound(s, ELEMENTSOF(s), 0, 0);
        ASSERT_U64_EQ(s[0].len, 0x100);
        ASSERT_U64_EQ(s[1].len, 0x100);
        ASSERT_EQ(s[1].len_source, SECTION_LEN_NEXT);
        ASSERT_U64_EQ(s[2].len, 5);
        ASSERT_EQ(s[2].len_source, SECTION_LEN_ELF);
        ASSERT_U64_EQ(s[3].len, 0x9000 - 0x1200);
        ASSERT_U64_EQ(s[4].len, 0);
        ASSERT_EQ(s[4].len_source, SECTION_LEN_UNKNOWN);

        /* A core layout that ends before the next section: b is cut at
         * its end; the last section inside it is bounded by it. */
        for (size_t i = 0; i < ELEMENTSOF(s); i++)
                if (s[i].len_source == SECTION_LEN_NEXT)
                        s[i] = (module_section) { .name = s[i].name, .addr = s[i].addr, .len_source = SECTION_LEN_UNKNOWN };
        module_sections_bound(s, ELEMENTSOF(s), 0x1000, 0x300);
        ASSERT_U64_EQ(s[3].len, 0x100);
        module_sections_bound(s + 4, 1, 0x9000, 0x40);
        ASSERT_U64_EQ(s[4].len, 0x40);

        /* A layout reaching the top of the address space. */
        {
                module_section top = { .name = (char *) "top", .addr = UINT64_MAX - 8, .len_source = SECTION_LEN_UNKNOWN };

                module_sections_bound(&top, 1, UINT64_MAX - 16, 0x100);
                ASSERT_U64_EQ(top.len, 8);
        }
        module_sections_bound(NULL, 0, 0, 0);
}

TEST(section_len_source_names) {
        ASSERT_STREQ(section_len_source_to_string(SECTION_LEN_ELF), "elf");
        ASSERT_STREQ(section_len_source_to_string(SECTION_LEN_NEXT), "next");
        ASSERT_STREQ(section_len_source_to_string(SECTION_LEN_UNKNOWN), "unknown");
        ASSERT_NULL(section_len_source_to_string((section_len_source) 3));
}

/* ---- modules.dep ---- */

TEST(find_file) {
        static const char dep[] =
                "kernel/drivers/block/brd.ko:\n"
                "kernel/drivers/net/dummy.ko.xz: kernel/foo.ko.xz\n"
                "kernel/drivers/scsi/sr_mod.ko.zst: kernel/drivers/cdrom/cdrom.ko.zst kernel/drivers/scsi/scsi_mod.ko.zst\n"
                "kernel/sound/pci/hda/snd-hda-intel.ko.gz: kernel/sound/core/snd.ko.gz\n"
                "/lib/modules/2.6.18-old/kernel/fs/old_fs.ko: /lib/modules/2.6.18-old/kernel/fs/dep.ko\n"
                "kernel/no/colon.ko\n"
                "kernel/no/object.o:\n"
                "kernel/no/brd.ko.bz2:\n"
                "kernel/nul/nul\0byte.ko:\n"
                ":\n"
                "\n"
                "updates/dkms/nvidia-drm.ko:";          /* no final newline */
        static const char release[] = "6.1.0-test";
        _cleanup_tmpdir_ tmpdir t = {};
        static const struct {
                const char *name, *path;
        } found[] = {
                { "brd", "kernel/drivers/block/brd.ko" },
                { "dummy", "kernel/drivers/net/dummy.ko.xz" },
                { "sr_mod", "kernel/drivers/scsi/sr_mod.ko.zst" },
                { "sr-mod", "kernel/drivers/scsi/sr_mod.ko.zst" },
                { "snd_hda_intel", "kernel/sound/pci/hda/snd-hda-intel.ko.gz" },
                { "snd-hda_intel", "kernel/sound/pci/hda/snd-hda-intel.ko.gz" },
                { "nvidia_drm", "updates/dkms/nvidia-drm.ko" },
        };
        static const char *const not_found[] = {
                "br", "brdx", "cdrom", "scsi_mod", "colon", "object", "nul", "byte", "snd",
        };
        char *path = (char *) "untouched";

        tmpdir_make(&t);
        ASSERT_ERROR(module_find_file(t.path, release, "brd", &path), ENOENT);
        free(write_at(t.path, "lib/modules/6.1.0-test/modules.dep", dep, sizeof(dep) - 1));

        for (size_t i = 0; i < ELEMENTSOF(found); i++) {
                _cleanup_free_ char *want = NULL;

                ASSERT_TRUE(asprintf(&want, "%s/lib/modules/%s/%s", t.path, release, found[i].path) > 0);
                ASSERT_OK(module_find_file(t.path, release, found[i].name, &path));
                ASSERT_STREQ(path, want);
                free(path);
        }

        /* An absolute path (module-init-tools) is under root as it is. */
        {
                _cleanup_free_ char *want = NULL;

                ASSERT_TRUE(asprintf(&want, "%s/lib/modules/2.6.18-old/kernel/fs/old_fs.ko", t.path) > 0);
                ASSERT_OK(module_find_file(t.path, release, "old-fs", &path));
                ASSERT_STREQ(path, want);
                free(path);
        }

        path = (char *) "untouched";
        for (size_t i = 0; i < ELEMENTSOF(not_found); i++)
                if (module_find_file(t.path, release, not_found[i], &path) != -ENOENT)
                        TEST_FAIL_("%s: expected -ENOENT", not_found[i]);
        ASSERT_ERROR(module_find_file(t.path, release, "brd.ko", &path), EINVAL);
        ASSERT_ERROR(module_find_file(t.path, release, "../brd", &path), EINVAL);
        ASSERT_ERROR(module_find_file(t.path, "../6.1.0-test", "brd", &path), EINVAL);
        ASSERT_ERROR(module_find_file(t.path, "..", "brd", &path), EINVAL);
        ASSERT_ERROR(module_find_file(t.path, "", "brd", &path), EINVAL);
        ASSERT_ERROR(module_find_file(t.path, "6.1.0-other", "brd", &path), ENOENT);
        ASSERT_STREQ(path, "untouched");
}

/* ---- the module's ELF file ---- */

/* The fake module's section header for name, read here with libelf. */
static bool elf_section(const char *path, const char *name, GElf_Shdr *ret) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        size_t shstrndx;
        Elf *elf;
        bool found = false;

        ASSERT_TRUE(fd >= 0);
        ASSERT_TRUE(elf_version(EV_CURRENT) != EV_NONE);
        elf = elf_begin(fd, ELF_C_READ, NULL);
        ASSERT_TRUE(elf != NULL);
        ASSERT_EQ(elf_getshdrstrndx(elf, &shstrndx), 0);
        for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn && !found; scn = elf_nextscn(elf, scn)) {
                const char *n;

                ASSERT_TRUE(gelf_getshdr(scn, ret) != NULL);
                n = elf_strptr(elf, shstrndx, ret->sh_name);
                found = n && strcmp(n, name) == 0;
        }
        elf_end(elf);
        return found;
}

/* The fake module's symbol: its value and the name of its section. */
static void elf_symbol(const char *path, const char *name, uint64_t *ret_value, char *ret_section, size_t section_size) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        size_t shstrndx;
        Elf *elf;
        bool found = false;

        ASSERT_TRUE(fd >= 0);
        elf = elf_begin(fd, ELF_C_READ, NULL);
        ASSERT_TRUE(elf != NULL);
        ASSERT_EQ(elf_getshdrstrndx(elf, &shstrndx), 0);
        for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn && !found; scn = elf_nextscn(elf, scn)) {
                GElf_Shdr shdr;
                Elf_Data *d;

                ASSERT_TRUE(gelf_getshdr(scn, &shdr) != NULL);
                if (shdr.sh_type != SHT_SYMTAB)
                        continue;
                d = elf_getdata(scn, NULL);
                ASSERT_TRUE(d != NULL);
                for (int i = 0; !found && i < (int) (shdr.sh_size / shdr.sh_entsize); i++) {
                        GElf_Sym sym;
                        GElf_Shdr sec;

                        ASSERT_TRUE(gelf_getsym(d, i, &sym) != NULL);
                        if (strcmp(elf_strptr(elf, shdr.sh_link, sym.st_name), name) != 0)
                                continue;
                        ASSERT_TRUE(gelf_getshdr(elf_getscn(elf, sym.st_shndx), &sec) != NULL);
                        snprintf(ret_section, section_size, "%s", elf_strptr(elf, shstrndx, sec.sh_name));
                        *ret_value = sym.st_value;
                        found = true;
                }
        }
        elf_end(elf);
        if (!found)
                TEST_FAIL_("%s has no symbol %s", path, name);
}

/* Sections as sysfs would list them for the fake module, with addresses
 * of our choosing, sorted by address. */
static module_section *fake_sections(size_t *ret_n) {
        static const struct {
                const char *name;
                uint64_t addr;
        } list[] = {
                { ".text", 0xffffffffa0000000 },
                { ".exit.text", 0xffffffffa0000800 },
                { ".note.gnu.build-id", 0xffffffffa0001000 },
                { ".rodata", 0xffffffffa0001040 },
                { ".data", 0xffffffffa0002000 },
                { ".not.in.the.file", 0xffffffffa0002040 },
                { ".bss", 0xffffffffa0002080 },
                { ".init.text", 0xffffffffa0010000 },
                { ".symtab", 0xffffffffa0011000 },
                { ".strtab", 0xffffffffa0012000 },
        };
        module_section *s = calloc(ELEMENTSOF(list), sizeof(*s));

        ASSERT_TRUE(s != NULL);
        for (size_t i = 0; i < ELEMENTSOF(list); i++) {
                s[i].name = strdup(list[i].name);
                ASSERT_TRUE(s[i].name != NULL);
                s[i].addr = list[i].addr;
                s[i].len_source = SECTION_LEN_UNKNOWN;
                s[i].exec = strstr(list[i].name, "text") != NULL;
        }
        *ret_n = ELEMENTSOF(list);
        return s;
}

static bool sections_equal(const module_section *a, const module_section *b, size_t n) {
        return memcmp(a, b, n * sizeof(*a)) == 0;
}

TEST(elf_apply_fake_module) {
        static const char *const funcs[] = { "fake_exit", "fake_init", "fake_text_a", "fake_text_b", "fake_text_local" };
        module_symbol *syms = NULL;
        size_t n = 0, nsyms = 0;
        module_section *s = fake_sections(&n);

        ASSERT_OK(module_elf_apply(FAKE_MODULE_PATH, FAKE_BUILD_ID, s, n, &syms, &nsyms));

        /* Each section the file has: exactly its section header. */
        for (size_t i = 0; i < n; i++) {
                GElf_Shdr shdr;

                if (!elf_section(FAKE_MODULE_PATH, s[i].name, &shdr)) {
                        ASSERT_STREQ(s[i].name, ".not.in.the.file");
                        ASSERT_EQ(s[i].len_source, SECTION_LEN_UNKNOWN);
                        ASSERT_U64_EQ(s[i].len, 0);
                        ASSERT_U64_EQ(s[i].pgoff, 0);
                        continue;
                }
                ASSERT_EQ(s[i].len_source, SECTION_LEN_ELF);
                ASSERT_U64_EQ(s[i].len, shdr.sh_size);
                ASSERT_U64_EQ(s[i].pgoff, shdr.sh_offset);
                ASSERT_EQ(s[i].exec, !!(shdr.sh_flags & SHF_EXECINSTR));
        }
        /* What the source fixes regardless of the compiler. */
        ASSERT_U64_EQ(find_section(s, n, ".note.gnu.build-id")->len, 36);
        ASSERT_U64_EQ(find_section(s, n, ".data")->len, 4);
        ASSERT_U64_EQ(find_section(s, n, ".bss")->len, 4);
        ASSERT_U64_EQ(find_section(s, n, ".rodata")->len, 16);
        ASSERT_TRUE(find_section(s, n, ".text")->exec);
        ASSERT_TRUE(find_section(s, n, ".init.text")->exec);
        ASSERT_TRUE(find_section(s, n, ".exit.text")->exec);
        ASSERT_TRUE(!find_section(s, n, ".data")->exec);
        ASSERT_TRUE(!find_section(s, n, ".symtab")->exec);
        ASSERT_GT(find_section(s, n, ".text")->pgoff, 0);

        /* The five functions (no data objects), at section address +
         * st_value, in address order. */
        ASSERT_EQ(nsyms, ELEMENTSOF(funcs));
        for (size_t i = 0; i < nsyms; i++) {
                char section[64];
                uint64_t value = 0;
                bool known = false;

                for (size_t j = 0; j < ELEMENTSOF(funcs); j++)
                        known = known || strcmp(syms[i].name, funcs[j]) == 0;
                if (!known)
                        TEST_FAIL_("unexpected symbol %s", syms[i].name);
                elf_symbol(FAKE_MODULE_PATH, syms[i].name, &value, section, sizeof(section));
                ASSERT_U64_EQ(syms[i].addr, find_section(s, n, section)->addr + value);
                ASSERT_GT(syms[i].size, 0);
                if (i > 0)
                        ASSERT_LT(syms[i - 1].addr, syms[i].addr);
        }
        ASSERT_STREQ(syms[nsyms - 1].name, "fake_init");
        module_symbols_free(syms, nsyms);
        module_sections_free(s, n);

        /* Without .init.text in the list (as after a failed lookup), its
         * function is not returned; with no symbol output asked for, the
         * sections are still filled. */
        s = fake_sections(&n);
        free(s[7].name);
        s[7].name = strdup(".init.text.gone");
        ASSERT_OK(module_elf_apply(FAKE_MODULE_PATH, "", s, n, &syms, &nsyms));
        ASSERT_EQ(nsyms, ELEMENTSOF(funcs) - 1);
        for (size_t i = 0; i < nsyms; i++)
                ASSERT_TRUE(strcmp(syms[i].name, "fake_init") != 0);
        module_symbols_free(syms, nsyms);
        module_sections_free(s, n);

        s = fake_sections(&n);
        ASSERT_OK(module_elf_apply(FAKE_MODULE_PATH, NULL, s, n, NULL, NULL));
        ASSERT_EQ(find_section(s, n, ".text")->len_source, SECTION_LEN_ELF);
        /* Uppercase hex is the same id. */
        ASSERT_OK(module_elf_apply(FAKE_MODULE_PATH, "00112233445566778899AABBCCDDEEFF01234567", s, n, NULL, NULL));
        module_sections_free(s, n);
}

/* Copies the fake module to dir/name with patch applied to its bytes. */
static char *fake_module_copy(const char *dir, const char *name, void (*patch)(uint8_t *buf, size_t size)) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0;

        buf = read_file(FAKE_MODULE_PATH, &size);
        if (patch)
                patch((uint8_t *) buf, size);
        return write_at(dir, name, buf, size);
}

static Elf64_Ehdr get_ehdr(const uint8_t *buf) {
        Elf64_Ehdr e;

        memcpy(&e, buf, sizeof(e));
        return e;
}

/* The section header of the fake module's section name, and where it is. */
static size_t shdr_offset(const uint8_t *buf, size_t size, const char *name) {
        Elf64_Ehdr e = get_ehdr(buf);
        Elf64_Shdr strtab;

        ASSERT_LE(e.e_shoff + (uint64_t) e.e_shnum * sizeof(Elf64_Shdr), size);
        memcpy(&strtab, buf + e.e_shoff + e.e_shstrndx * sizeof(Elf64_Shdr), sizeof(strtab));
        for (size_t i = 0; i < e.e_shnum; i++) {
                size_t off = e.e_shoff + i * sizeof(Elf64_Shdr);
                Elf64_Shdr sh;

                memcpy(&sh, buf + off, sizeof(sh));
                if (strcmp((const char *) buf + strtab.sh_offset + sh.sh_name, name) == 0)
                        return off;
        }
        TEST_FAIL_("no section %s", name);
}

static void patch_note_type(uint8_t *buf, size_t size) {
        Elf64_Shdr sh;
        uint32_t type = 4;

        /* n_type 3 (NT_GNU_BUILD_ID) -> 4: a GNU note of another kind. */
        memcpy(&sh, buf + shdr_offset(buf, size, ".note.gnu.build-id"), sizeof(sh));
        memcpy(buf + sh.sh_offset + 8, &type, sizeof(type));
}

static void patch_note_size(uint8_t *buf, size_t size) {
        Elf64_Shdr sh;
        uint32_t descsz = 1000;

        memcpy(&sh, buf + shdr_offset(buf, size, ".note.gnu.build-id"), sizeof(sh));
        memcpy(buf + sh.sh_offset + 4, &descsz, sizeof(descsz));
}

TEST(elf_apply_build_id) {
        _cleanup_tmpdir_ tmpdir t = {};
        _cleanup_free_ char *no_id = NULL, *bad_note = NULL;
        module_symbol *syms = (module_symbol *) 0x1;
        size_t n = 0, nsyms = 99;
        module_section *s = fake_sections(&n), *before = calloc(n, sizeof(*before));

        ASSERT_TRUE(before != NULL);
        memcpy(before, s, n * sizeof(*s));

        /* Another build: nothing changes. */
        ASSERT_ERROR(module_elf_apply(FAKE_MODULE_PATH, BRD_BUILD_ID, s, n, &syms, &nsyms), ESTALE);
        ASSERT_TRUE(sections_equal(s, before, n));
        ASSERT_TRUE(syms == (module_symbol *) 0x1);
        ASSERT_EQ(nsyms, 99);
        /* A prefix of the right id is another id. */
        ASSERT_ERROR(module_elf_apply(FAKE_MODULE_PATH, "0011223344556677", s, n, &syms, &nsyms), ESTALE);
        ASSERT_TRUE(sections_equal(s, before, n));

        /* A file without a build-id cannot be shown to be the same build;
         * with no id expected it is fine. */
        tmpdir_make(&t);
        no_id = fake_module_copy(t.path, "no-id.o", patch_note_type);
        ASSERT_ERROR(module_elf_apply(no_id, FAKE_BUILD_ID, s, n, &syms, &nsyms), ESTALE);
        ASSERT_TRUE(sections_equal(s, before, n));
        ASSERT_OK(module_elf_apply(no_id, "", s, n, NULL, NULL));
        ASSERT_EQ(find_section(s, n, ".text")->len_source, SECTION_LEN_ELF);
        memcpy(s, before, n * sizeof(*s));

        /* A note that runs past its section is malformed. */
        bad_note = fake_module_copy(t.path, "bad-note.o", patch_note_size);
        ASSERT_ERROR(module_elf_apply(bad_note, FAKE_BUILD_ID, s, n, &syms, &nsyms), EBADMSG);
        ASSERT_TRUE(sections_equal(s, before, n));

        free(before);
        module_sections_free(s, n);
}

static void patch_class32(uint8_t *buf, size_t size) {
        buf[EI_CLASS] = ELFCLASS32;
}

static void patch_type_exec(uint8_t *buf, size_t size) {
        uint16_t type = ET_EXEC;

        memcpy(buf + offsetof(Elf64_Ehdr, e_type), &type, sizeof(type));
}

static void patch_shoff_past_end(uint8_t *buf, size_t size) {
        uint64_t off = size - sizeof(Elf64_Shdr) / 2;

        memcpy(buf + offsetof(Elf64_Ehdr, e_shoff), &off, sizeof(off));
}

static void patch_shstrndx(uint8_t *buf, size_t size) {
        uint16_t idx = 0x7fff;

        memcpy(buf + offsetof(Elf64_Ehdr, e_shstrndx), &idx, sizeof(idx));
}

static void patch_text_offset(uint8_t *buf, size_t size) {
        uint64_t off = size - 1;

        memcpy(buf + shdr_offset(buf, size, ".text") + offsetof(Elf64_Shdr, sh_offset), &off, sizeof(off));
}

static void patch_symtab_size(uint8_t *buf, size_t size) {
        uint64_t sz = UINT64_MAX - 7;

        memcpy(buf + shdr_offset(buf, size, ".symtab") + offsetof(Elf64_Shdr, sh_size), &sz, sizeof(sz));
}

static void patch_text_name(uint8_t *buf, size_t size) {
        uint32_t name = UINT32_MAX;

        memcpy(buf + shdr_offset(buf, size, ".text") + offsetof(Elf64_Shdr, sh_name), &name, sizeof(name));
}

TEST(elf_apply_bad_files) {
        static const struct {
                const char *what;
                const char *data;
                size_t len;
                int error;
        } raw[] = {
#define R(what, s, e) { what, s, sizeof(s) - 1, e }
                R("xz", "\xfd" "7zXZ\0\0\x04\xe6\xd6\xb4\x46\x02\0!\x01\x16\0\0\0", EPROTONOSUPPORT),
                R("zstd", "\x28\xb5\x2f\xfd\x64\x00\x01\x35\x40\x00\x00", EPROTONOSUPPORT),
                R("gzip", "\x1f\x8b\x08\x08\0\0\0\0\0\x03" "brd.ko\0", EPROTONOSUPPORT),
                R("text", "this is not an ELF file, it is a sentence of text.\n", EBADMSG),
                R("empty", "", EBADMSG),
                R("ELF magic only", "\x7f" "ELF", EBADMSG),
                R("ELF header cut", "\x7f" "ELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x01\0\x3e\0", EBADMSG),
#undef R
        };
        static const struct {
                const char *what;
                void (*patch)(uint8_t *buf, size_t size);
                int error;
        } patched[] = {
                { "32-bit", patch_class32, EPROTONOSUPPORT },
                { "executable", patch_type_exec, EPROTONOSUPPORT },
                { "section headers past the end", patch_shoff_past_end, EBADMSG },
                { "no section name table", patch_shstrndx, EBADMSG },
                { ".text past the end", patch_text_offset, EBADMSG },
                { ".symtab size huge", patch_symtab_size, EBADMSG },
                { ".text name out of range", patch_text_name, EBADMSG },
        };
        _cleanup_tmpdir_ tmpdir t = {};
        module_symbol *syms = (module_symbol *) 0x1;
        size_t n = 0, nsyms = 99;
        module_section *s = fake_sections(&n), *before = calloc(n, sizeof(*before));

        ASSERT_TRUE(before != NULL);
        memcpy(before, s, n * sizeof(*s));
        tmpdir_make(&t);

        for (size_t i = 0; i < ELEMENTSOF(raw); i++) {
                _cleanup_free_ char *p = write_at(t.path, raw[i].what, raw[i].data, raw[i].len);
                int r = module_elf_apply(p, "", s, n, &syms, &nsyms);

                if (r != -raw[i].error)
                        TEST_FAIL_("%s: expected %d, got %d", raw[i].what, -raw[i].error, r);
        }
        for (size_t i = 0; i < ELEMENTSOF(patched); i++) {
                _cleanup_free_ char *p = fake_module_copy(t.path, patched[i].what, patched[i].patch);
                int r = module_elf_apply(p, "", s, n, &syms, &nsyms);

                if (r != -patched[i].error)
                        TEST_FAIL_("%s: expected %d, got %d", patched[i].what, -patched[i].error, r);
        }
        ASSERT_ERROR(module_elf_apply(t.path, "", s, n, &syms, &nsyms), EBADMSG);      /* a directory */
        ASSERT_ERROR(module_elf_apply("/nonexistent/brd.ko", "", s, n, &syms, &nsyms), ENOENT);

        ASSERT_TRUE(sections_equal(s, before, n));
        ASSERT_TRUE(syms == (module_symbol *) 0x1);
        ASSERT_EQ(nsyms, 99);
        free(before);
        module_sections_free(s, n);
}

TEST(elf_apply_truncated) {
        _cleanup_tmpdir_ tmpdir t = {};
        _cleanup_free_ char *buf = NULL, *path = NULL;
        module_symbol *syms = (module_symbol *) 0x1;
        size_t size = 0, n = 0, nsyms = 99;
        module_section *s = fake_sections(&n), *before = calloc(n, sizeof(*before));

        ASSERT_TRUE(before != NULL);
        memcpy(before, s, n * sizeof(*s));
        tmpdir_make(&t);
        buf = read_file(FAKE_MODULE_PATH, &size);
        /* The section header table is at the end (as assemblers write it),
         * so every cut loses part of it. */
        ASSERT_EQ(get_ehdr((uint8_t *) buf).e_shoff + get_ehdr((uint8_t *) buf).e_shnum * sizeof(Elf64_Shdr), size);

        for (size_t cut = 0; cut < size; cut++) {
                int r;

                free(path);
                path = write_at(t.path, "cut.o", buf, cut);
                r = module_elf_apply(path, FAKE_BUILD_ID, s, n, &syms, &nsyms);
                if (r != -EBADMSG)
                        TEST_FAIL_("cut at %zu of %zu: expected -EBADMSG, got %d", cut, size, r);
        }
        ASSERT_TRUE(sections_equal(s, before, n));
        ASSERT_TRUE(syms == (module_symbol *) 0x1);

        /* The whole file, rewritten in the same place, works. */
        free(path);
        path = write_at(t.path, "cut.o", buf, size);
        ASSERT_OK(module_elf_apply(path, FAKE_BUILD_ID, s, n, &syms, &nsyms));
        ASSERT_EQ(nsyms, 5);
        module_symbols_free(syms, nsyms);
        free(before);
        module_sections_free(s, n);
}

/* The real brd.ko of the fixture's kernel, if this machine has that very
 * build: ELF lengths for the fixture's sysfs sections, and symbol
 * addresses that agree with the fixture's kallsyms. */
TEST(elf_apply_brd_ko) {
        char build_id[BUILD_ID_HEX_MAX];
        module_symbol *syms = NULL;
        module_section *s = NULL;
        size_t n = 0, nsyms = 0;
        int r;

        if (access(BRD_KO, R_OK) < 0)
                TEST_SKIP("%s: %s", BRD_KO, strerror(errno));
        ASSERT_OK(notes_module_build_id(FIXTURE_ROOT, "brd", build_id));
        ASSERT_STREQ(build_id, BRD_BUILD_ID);
        ASSERT_OK(module_sections_read(FIXTURE_ROOT, "brd", &s, &n));
        r = module_elf_apply(BRD_KO, build_id, s, n, &syms, &nsyms);
        if (r == -ESTALE) {
                module_sections_free(s, n);
                TEST_SKIP("%s is another build than the fixture's", BRD_KO);
        }
        ASSERT_OK(r);

        for (size_t i = 0; i < n; i++)
                ASSERT_EQ(s[i].len_source, SECTION_LEN_ELF);
        /* `readelf -S brd.ko` */
        ASSERT_U64_EQ(find_section(s, n, ".text")->len, 0xb30);
        ASSERT_U64_EQ(find_section(s, n, ".text")->pgoff, 0xa0);
        ASSERT_TRUE(find_section(s, n, ".text")->exec);
        ASSERT_U64_EQ(find_section(s, n, ".init.text")->len, 0xe4);
        ASSERT_TRUE(find_section(s, n, ".init.text")->exec);
        ASSERT_U64_EQ(find_section(s, n, ".bss")->len, 8);
        ASSERT_TRUE(!find_section(s, n, ".bss")->exec);
        ASSERT_U64_EQ(find_section(s, n, ".symtab")->len, 0xa68);
        ASSERT_U64_EQ(find_section(s, n, ".strtab")->len, 0x664);
        /* Byte-aligned neighbours in sysfs end where the next begins. */
        ASSERT_U64_EQ(find_section(s, n, ".text")->addr + find_section(s, n, ".text")->len,
                      find_section(s, n, ".text.unlikely")->addr);
        ASSERT_U64_EQ(find_section(s, n, ".text.unlikely")->addr + find_section(s, n, ".text.unlikely")->len,
                      find_section(s, n, ".exit.text")->addr);
        ASSERT_U64_EQ(find_section(s, n, ".symtab")->addr + find_section(s, n, ".symtab")->len,
                      find_section(s, n, ".strtab")->addr);

        /* 13 functions; those in the core agree with proc/kallsyms.loaded. */
        ASSERT_EQ(nsyms, 13);
        {
                static const struct {
                        const char *name;
                        uint64_t addr;
                } kallsyms[] = {
                        { "brd_insert_page.part.0", 0xffffffffc080b000 },
                        { "brd_submit_bio", 0xffffffffc080ba00 },
                        { "brd_free_pages", 0xffffffffc080bb30 },
                        { "brd_alloc.isra.0.cold", 0xffffffffc080bcc7 },
                        { "cleanup_module", 0xffffffffc080bcd3 },
                        /* Init code, gone from kallsyms after init. */
                        { "brd_init", 0xffffffffc0811000 },
                        { "init_module", 0xffffffffc0811000 },
                };
                for (size_t k = 0; k < ELEMENTSOF(kallsyms); k++) {
                        bool found = false;

                        for (size_t i = 0; i < nsyms && !found; i++)
                                if (strcmp(syms[i].name, kallsyms[k].name) == 0) {
                                        ASSERT_U64_EQ(syms[i].addr, kallsyms[k].addr);
                                        found = true;
                                }
                        if (!found)
                                TEST_FAIL_("no symbol %s", kallsyms[k].name);
                }
        }
        ASSERT_STREQ(syms[0].name, "brd_insert_page.part.0");
        ASSERT_STREQ(syms[nsyms - 2].name, "brd_init");
        ASSERT_STREQ(syms[nsyms - 1].name, "init_module");
        for (size_t i = 1; i < nsyms; i++)
                ASSERT_LE(syms[i - 1].addr, syms[i].addr);

        /* Nothing is left for the fallback. */
        module_sections_bound(s, n, BRD_BASE, BRD_SIZE);
        ASSERT_U64_EQ(find_section(s, n, ".bss")->len, 8);
        ASSERT_EQ(find_section(s, n, ".strtab")->len_source, SECTION_LEN_ELF);

        module_symbols_free(syms, nsyms);
        module_sections_free(s, n);
}
