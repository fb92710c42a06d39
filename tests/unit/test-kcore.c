/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "kernel/kcore.h"
#include "macro.h"
#include "test.h"

#define FIXTURE_DIR TEST_DATA("kernel-6.1-brd/proc")

#define PF_RX (PF_R | PF_X)
#define PF_RW (PF_R | PF_W)
#define PF_RWX (PF_R | PF_W | PF_X)
#define NO_PADDR UINT64_MAX

#define TEXT UINT64_C(0xffffffff81000000)
#define MODS UINT64_C(0xffffffffc0000000)

/* Every source byte is derived from its address, so bytes copied from the
 * wrong place do not compare equal. */
static uint8_t pattern(uint64_t addr) {
        return (uint8_t) ((addr * UINT64_C(0x9e3779b97f4a7c15)) >> 56);
}

static int memfd_new(const char *name) {
        int fd = memfd_create(name, MFD_CLOEXEC);

        ASSERT_OK(fd);
        return fd;
}

static uint64_t fd_size(int fd) {
        struct stat st;

        ASSERT_OK(fstat(fd, &st));
        return (uint64_t) st.st_size;
}

static void fill_pattern(int fd, uint64_t offset, uint64_t addr, uint64_t len) {
        static uint8_t buf[65536];

        for (uint64_t done = 0; done < len; ) {
                size_t n = (size_t) MIN(len - done, (uint64_t) sizeof(buf));

                for (size_t i = 0; i < n; i++)
                        buf[i] = pattern(addr + done + i);
                ASSERT_EQ(pwrite(fd, buf, n, (off_t) (offset + done)), (ssize_t) n);
                done += n;
        }
}

typedef struct test_seg {
        uint32_t type, flags;
        uint64_t vaddr, paddr, offset, filesz, memsz;
} test_seg;

#define LOAD(fl, va, pa, off, fsz, msz) \
        { .type = PT_LOAD, .flags = (fl), .vaddr = (va), .paddr = (pa), .offset = (off), .filesz = (fsz), .memsz = (msz) }

/* A kcore-like ET_CORE file written with libelf; each PT_LOAD's file
 * bytes hold pattern(address). Offsets far beyond the data leave holes,
 * so a segment at 2^40 costs only its own pages. */
static int kcore_new(const test_seg *segs, size_t n, bool fill) {
        int fd = memfd_new("test-kcore-src");
        GElf_Ehdr ehdr;
        Elf *elf;

        ASSERT_TRUE(elf_version(EV_CURRENT) != EV_NONE);
        elf = elf_begin(fd, ELF_C_WRITE, NULL);
        ASSERT_TRUE(elf);
        ASSERT_TRUE(gelf_newehdr(elf, ELFCLASS64));
        ASSERT_TRUE(gelf_getehdr(elf, &ehdr));
        ehdr.e_ident[EI_DATA] = ELFDATA2LSB;
        ehdr.e_type = ET_CORE;
        ehdr.e_machine = EM_X86_64;
        ehdr.e_version = EV_CURRENT;
        ehdr.e_phoff = sizeof(Elf64_Ehdr);
        ASSERT_TRUE(gelf_update_ehdr(elf, &ehdr));
        ASSERT_TRUE(gelf_newphdr(elf, n));
        for (size_t i = 0; i < n; i++) {
                GElf_Phdr ph = {
                        .p_type = segs[i].type,
                        .p_flags = segs[i].flags,
                        .p_offset = segs[i].offset,
                        .p_vaddr = segs[i].vaddr,
                        .p_paddr = segs[i].paddr,
                        .p_filesz = segs[i].filesz,
                        .p_memsz = segs[i].memsz,
                        .p_align = 4096,
                };
                ASSERT_TRUE(gelf_update_phdr(elf, (int) i, &ph));
        }
        elf_flagelf(elf, ELF_C_SET, ELF_F_LAYOUT);
        ASSERT_TRUE(elf_update(elf, ELF_C_WRITE) > 0);
        elf_end(elf);

        for (size_t i = 0; fill && i < n; i++)
                if (segs[i].type == PT_LOAD)
                        fill_pattern(fd, segs[i].offset, segs[i].vaddr, segs[i].filesz);
        return fd;
}

typedef struct expect_seg {
        uint64_t addr, len, paddr;
        uint32_t flags;
} expect_seg;

/* Re-reads the extract with libelf: an ET_CORE like the source, one
 * PT_LOAD per expected piece, data after the headers and page-congruent,
 * no two pieces sharing file bytes, and every byte pattern(address). */
static void check_extract(int dst, const kcore_copy_info *info, const expect_seg *want, size_t n) {
        uint64_t headers_end, data_end = 0, copied = 0;
        uint8_t *buf = NULL;
        GElf_Ehdr ehdr;
        size_t phnum;
        Elf *elf;

        ASSERT_TRUE(elf_version(EV_CURRENT) != EV_NONE);
        elf = elf_begin(dst, ELF_C_READ, NULL);
        ASSERT_TRUE(elf);
        ASSERT_TRUE(gelf_getehdr(elf, &ehdr));
        ASSERT_EQ(ehdr.e_ident[EI_CLASS], ELFCLASS64);
        ASSERT_EQ(ehdr.e_ident[EI_DATA], ELFDATA2LSB);
        ASSERT_EQ(ehdr.e_type, ET_CORE);
        ASSERT_EQ(ehdr.e_machine, EM_X86_64);
        ASSERT_EQ(ehdr.e_shnum, 0);
        ASSERT_EQ(elf_getphdrnum(elf, &phnum), 0);
        ASSERT_EQ(phnum, n);
        ASSERT_EQ(info->n_segments, n);
        headers_end = ehdr.e_phoff + phnum * sizeof(Elf64_Phdr);

        for (size_t i = 0; i < n; i++) {
                GElf_Phdr ph;

                ASSERT_TRUE(gelf_getphdr(elf, (int) i, &ph));
                ASSERT_EQ(ph.p_type, PT_LOAD);
                ASSERT_U64_EQ(ph.p_vaddr, want[i].addr);
                ASSERT_U64_EQ(ph.p_filesz, want[i].len);
                ASSERT_U64_EQ(ph.p_memsz, want[i].len);
                ASSERT_U64_EQ(ph.p_paddr, want[i].paddr);
                ASSERT_EQ(ph.p_flags, want[i].flags);
                ASSERT_EQ(ph.p_align, 4096);
                ASSERT_EQ(ph.p_offset % 4096, ph.p_vaddr % 4096);
                ASSERT_GE(ph.p_offset, MAX(headers_end, data_end));
                data_end = ph.p_offset + ph.p_filesz;
                copied += ph.p_filesz;

                buf = realloc(buf, ph.p_filesz);
                ASSERT_TRUE(buf);
                ASSERT_EQ(pread(dst, buf, ph.p_filesz, (off_t) ph.p_offset), (ssize_t) ph.p_filesz);
                for (uint64_t j = 0; j < ph.p_filesz; j++)
                        if (buf[j] != pattern(ph.p_vaddr + j))
                                TEST_FAIL_("segment %zu: byte 0x%" PRIx64 " (address 0x%" PRIx64 ") is 0x%02x, source has 0x%02x",
                                           i, j, ph.p_vaddr + j, buf[j], pattern(ph.p_vaddr + j));
        }
        ASSERT_U64_EQ(info->bytes_copied, copied);
        ASSERT_U64_EQ(info->file_size, data_end);
        ASSERT_U64_EQ(fd_size(dst), data_end);
        free(buf);
        elf_end(elf);
}

/* Segments with the features kcore_copy() must handle, and what the
 * wanted ranges below make of them. */
static const test_seg mixed_segs[] = {
        { .type = PT_NOTE, .offset = 0x800, .filesz = 0x40 },
        /* Text, wanted from +0x1000 on. */
        LOAD(PF_RX, TEXT, 0x1000000, 0x10000, 0x8000, 0x8000),
        /* Data inside the wanted text range: not executable, skipped. */
        LOAD(PF_RW, TEXT + 0x8000, 0x1008000, 0x18000, 0x4000, 0x4000),
        /* Only 0x2000 of 0x6000 bytes are in the file. */
        LOAD(PF_RX, TEXT + 0xc000, 0x100c000, 0x1c000, 0x2000, 0x6000),
        /* Module space at a huge file offset, as in kcore. */
        LOAD(PF_RWX, MODS, NO_PADDR, UINT64_C(1) << 40, 0x3000, 0x3000),
        /* Adjacent to it in addresses, elsewhere in the file. */
        LOAD(PF_RX, MODS + 0x3000, NO_PADDR, 0x20000, 0x2000, 0x2000),
        /* Direct map: executable but not wanted. */
        LOAD(PF_RWX, UINT64_C(0xffff888000000000), 0, 0x22000, 0x1000, 0x1000),
};

TEST(copy_mixed_segments) {
        const kcore_want want = {
                .stext = TEXT + 0x1000, .etext = TEXT + 0x10000,
                .modules_start = MODS + 0x1000, .modules_end = MODS + 0x4000,
        };
        const expect_seg expect[] = {
                { TEXT + 0x1000, 0x7000, 0x1001000, PF_RX },
                { TEXT + 0xc000, 0x2000, 0x100c000, PF_RX },
                { MODS + 0x1000, 0x2000, NO_PADDR, PF_RWX },
                { MODS + 0x3000, 0x1000, NO_PADDR, PF_RX },
        };
        int src = kcore_new(mixed_segs, ELEMENTSOF(mixed_segs), true);
        int dst = memfd_new("test-kcore-dst");
        kcore_copy_info info = {};

        /* The sparse source: 2^40 bytes long, a few pages stored. */
        ASSERT_U64_EQ(fd_size(src), (UINT64_C(1) << 40) + 0x3000);

        ASSERT_OK(kcore_copy(src, dst, &want, &info));
        check_extract(dst, &info, expect, ELEMENTSOF(expect));
        /* Headers (64 + 4 * 56 bytes) on page 0; then 0x7000 from page 1,
         * 0x2000, 0x2000 and 0x1000 each on fresh pages. */
        ASSERT_U64_EQ(info.bytes_copied, 0xc000);
        ASSERT_U64_EQ(info.file_size, 0xd000);

        /* A second copy into the same file replaces the first. */
        ASSERT_OK(kcore_copy(src, dst, &want, &info));
        check_extract(dst, &info, expect, ELEMENTSOF(expect));
        close(src);
        close(dst);
}

TEST(copy_text_only_and_module_only) {
        const kcore_want text = { .stext = TEXT, .etext = TEXT + 0x10000 };
        const kcore_want mods = { .modules_start = MODS, .modules_end = MODS + 0x100000 };
        const expect_seg expect_text[] = {
                { TEXT, 0x8000, 0x1000000, PF_RX },
                { TEXT + 0xc000, 0x2000, 0x100c000, PF_RX },
        };
        const expect_seg expect_mods[] = {
                { MODS, 0x3000, NO_PADDR, PF_RWX },
                { MODS + 0x3000, 0x2000, NO_PADDR, PF_RX },
        };
        int src = kcore_new(mixed_segs, ELEMENTSOF(mixed_segs), true);
        int dst = memfd_new("test-kcore-dst");
        kcore_copy_info info = {};

        ASSERT_OK(kcore_copy(src, dst, &text, &info));
        check_extract(dst, &info, expect_text, ELEMENTSOF(expect_text));
        ASSERT_OK(kcore_copy(src, dst, &mods, &info));
        check_extract(dst, &info, expect_mods, ELEMENTSOF(expect_mods));
        close(src);
        close(dst);
}

TEST(copy_nothing_present) {
        const kcore_want outside = { .stext = 0xffffffff90000000, .etext = 0xffffffff90001000 };
        /* Covered only by the non-executable segment. */
        const kcore_want data_only = { .stext = TEXT + 0x8000, .etext = TEXT + 0xc000 };
        /* Covered only by the part of a segment beyond its p_filesz. */
        const kcore_want memsz_only = { .stext = TEXT + 0xe000, .etext = TEXT + 0x12000 };
        const kcore_want none = {};
        int src = kcore_new(mixed_segs, ELEMENTSOF(mixed_segs), true);
        int dst = memfd_new("test-kcore-dst");
        kcore_copy_info info = { .n_segments = 42 };

        ASSERT_ERROR(kcore_copy(src, dst, &outside, &info), ENODATA);
        ASSERT_ERROR(kcore_copy(src, dst, &data_only, &info), ENODATA);
        ASSERT_ERROR(kcore_copy(src, dst, &memsz_only, &info), ENODATA);
        ASSERT_ERROR(kcore_copy(src, dst, &none, &info), ENODATA);
        ASSERT_EQ(info.n_segments, 42);
        close(src);
        close(dst);
}

TEST(copy_invalid_want) {
        const kcore_want backwards = { .stext = TEXT + 0x1000, .etext = TEXT };
        const kcore_want mods_backwards = { .stext = TEXT, .etext = TEXT + 0x1000,
                                            .modules_start = MODS + 1, .modules_end = MODS };
        int src = kcore_new(mixed_segs, ELEMENTSOF(mixed_segs), true);
        int dst = memfd_new("test-kcore-dst");

        ASSERT_ERROR(kcore_copy(src, dst, &backwards, NULL), EINVAL);
        ASSERT_ERROR(kcore_copy(src, dst, &mods_backwards, NULL), EINVAL);
        ASSERT_ERROR(kcore_copy(src, dst, NULL, NULL), EINVAL);
        ASSERT_ERROR(kcore_copy(-1, dst, &backwards, NULL), EINVAL);
        close(src);
        close(dst);
}

TEST(copy_overlapping_wants_and_segments) {
        /* Two RX segments covering TEXT + 0x2000..0x4000 both, and wanted
         * ranges that overlap each other: one copy of each address. */
        const test_seg segs[] = {
                LOAD(PF_RX, TEXT, 0x1000000, 0x1000, 0x4000, 0x4000),
                LOAD(PF_RWX, TEXT + 0x2000, 0x1002000, 0x8000, 0x4000, 0x4000),
                /* Inside the first one entirely. */
                LOAD(PF_R | PF_X | PF_W, TEXT + 0x1000, 0x1001000, 0xc000, 0x1000, 0x1000),
        };
        const kcore_want want = {
                .stext = TEXT, .etext = TEXT + 0x3000,
                .modules_start = TEXT + 0x2000, .modules_end = TEXT + 0x6000,
        };
        const expect_seg expect[] = {
                { TEXT, 0x4000, 0x1000000, PF_RX },
                { TEXT + 0x4000, 0x2000, 0x1004000, PF_RWX },
        };
        int src = kcore_new(segs, ELEMENTSOF(segs), true);
        int dst = memfd_new("test-kcore-dst");
        kcore_copy_info info = {};

        ASSERT_OK(kcore_copy(src, dst, &want, &info));
        check_extract(dst, &info, expect, ELEMENTSOF(expect));
        close(src);
        close(dst);
}

TEST(copy_unaligned_and_multi_chunk) {
        /* Larger than the 1 MiB copy buffer, at an address that is not
         * page-aligned: its file offset keeps the address's page offset. */
        const test_seg segs[] = {
                LOAD(PF_RX, TEXT + 0x123, 0x1000123, 0x5123, 0x300007, 0x300007),
        };
        const kcore_want want = { .stext = TEXT, .etext = TEXT + 0x400000 };
        const expect_seg expect[] = {
                { TEXT + 0x123, 0x300007, 0x1000123, PF_RX },
        };
        int src = kcore_new(segs, ELEMENTSOF(segs), true);
        int dst = memfd_new("test-kcore-dst");
        kcore_copy_info info = {};

        ASSERT_OK(kcore_copy(src, dst, &want, &info));
        check_extract(dst, &info, expect, ELEMENTSOF(expect));
        ASSERT_U64_EQ(info.file_size, 0x1123 + 0x300007);
        close(src);
        close(dst);
}

TEST(copy_too_large) {
        /* Headers only: the limit is checked before any data is read. */
        const test_seg segs[] = {
                LOAD(PF_RX, TEXT, 0, 0x1000, KCORE_COPY_MAX_BYTES, KCORE_COPY_MAX_BYTES),
                /* Above TEXT + 1 GiB, so the two do not overlap. */
                LOAD(PF_RX, MODS + 0x10000000, 0, 0x2000, 0x1000, 0x1000),
        };
        const kcore_want exactly = { .stext = TEXT, .etext = TEXT + KCORE_COPY_MAX_BYTES };
        const kcore_want over = { .stext = TEXT, .etext = TEXT + KCORE_COPY_MAX_BYTES,
                                  .modules_start = MODS + 0x10000000, .modules_end = MODS + 0x10001000 };
        int src = kcore_new(segs, ELEMENTSOF(segs), false);
        int dst = memfd_new("test-kcore-dst");

        ASSERT_ERROR(kcore_copy(src, dst, &over, NULL), EFBIG);
        /* At the limit it is allowed and fails only on the missing data. */
        ASSERT_ERROR(kcore_copy(src, dst, &exactly, NULL), EBADMSG);
        ASSERT_EQ(fd_size(dst), 0);
        close(src);
        close(dst);
}

TEST(copy_truncated_source_clears_dst) {
        const test_seg segs[] = {
                LOAD(PF_RX, TEXT, 0x1000000, 0x1000, 0x2000, 0x2000),
        };
        const kcore_want want = { .stext = TEXT, .etext = TEXT + 0x2000 };
        int src = kcore_new(segs, ELEMENTSOF(segs), true);
        int dst = memfd_new("test-kcore-dst");
        kcore_copy_info info = { .n_segments = 42 };

        ASSERT_OK(kcore_copy(src, dst, &want, &info));
        ASSERT_EQ(info.n_segments, 1);
        ASSERT_GT(fd_size(dst), 0x2000);

        /* The segment now ends 1 byte beyond the file. */
        ASSERT_OK(ftruncate(src, 0x2fff));
        info.n_segments = 42;
        ASSERT_ERROR(kcore_copy(src, dst, &want, &info), EBADMSG);
        ASSERT_EQ(info.n_segments, 42);
        ASSERT_EQ(fd_size(dst), 0);
        close(src);
        close(dst);
}

TEST(copy_read_error_is_reported) {
        const kcore_want want = { .stext = TEXT, .etext = TEXT + 0x1000 };
        int pipefd[2], dst = memfd_new("test-kcore-dst"), dir;

        /* Not seekable: pread() fails with ESPIPE, which is passed on. */
        ASSERT_OK(pipe2(pipefd, O_CLOEXEC));
        ASSERT_ERROR(kcore_copy(pipefd[0], dst, &want, NULL), ESPIPE);
        close(pipefd[0]);
        close(pipefd[1]);

        dir = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_OK(dir);
        ASSERT_ERROR(kcore_copy(dir, dst, &want, NULL), EISDIR);
        close(dir);
        close(dst);
}

/* Patches bytes of a valid source at offset and expects kcore_read_phdrs
 * (and so kcore_copy) to fail with err. */
static void check_corrupt(size_t offset, const void *bytes, size_t len, int err) {
        const kcore_want want = { .stext = TEXT, .etext = TEXT + 0x10000 };
        int src = kcore_new(mixed_segs, ELEMENTSOF(mixed_segs), true);
        int dst = memfd_new("test-kcore-dst");
        Elf64_Phdr *phdrs = NULL;
        size_t n = 0;

        ASSERT_EQ(pwrite(src, bytes, len, (off_t) offset), (ssize_t) len);
        ASSERT_ERROR(kcore_read_phdrs(src, NULL, &phdrs, &n), err);
        ASSERT_NULL(phdrs);
        ASSERT_EQ(n, 0);
        ASSERT_ERROR(kcore_copy(src, dst, &want, NULL), err);
        ASSERT_EQ(fd_size(dst), 0);
        close(src);
        close(dst);
}

TEST(read_phdrs_rejects_garbage) {
        const uint16_t phnum_huge = 0xffff, phnum_over = KCORE_PHNUM_MAX + 1, phentsize = 32;
        const uint16_t et_exec = ET_EXEC;
        const uint64_t phoff_past_end = UINT64_C(1) << 41, phoff_overflow = UINT64_MAX - 8;
        const uint8_t class32 = ELFCLASS32, msb = ELFDATA2MSB;

        check_corrupt(0, "\x7f" "ELG", 4, EBADMSG);
        check_corrupt(EI_CLASS, &class32, 1, EPROTONOSUPPORT);
        check_corrupt(EI_DATA, &msb, 1, EPROTONOSUPPORT);
        check_corrupt(offsetof(Elf64_Ehdr, e_type), &et_exec, 2, EBADMSG);
        check_corrupt(offsetof(Elf64_Ehdr, e_phentsize), &phentsize, 2, EBADMSG);
        check_corrupt(offsetof(Elf64_Ehdr, e_phnum), &phnum_huge, 2, E2BIG);
        check_corrupt(offsetof(Elf64_Ehdr, e_phnum), &phnum_over, 2, E2BIG);
        check_corrupt(offsetof(Elf64_Ehdr, e_phoff), &phoff_past_end, 8, EBADMSG);
        check_corrupt(offsetof(Elf64_Ehdr, e_phoff), &phoff_overflow, 8, EBADMSG);
}

TEST(read_phdrs_truncated) {
        int src = kcore_new(mixed_segs, ELEMENTSOF(mixed_segs), false);
        Elf64_Phdr *phdrs = NULL;
        Elf64_Ehdr ehdr;
        size_t n = 0;

        ASSERT_OK(kcore_read_phdrs(src, &ehdr, &phdrs, &n));
        ASSERT_EQ(n, ELEMENTSOF(mixed_segs));
        ASSERT_EQ(ehdr.e_phnum, ELEMENTSOF(mixed_segs));
        ASSERT_U64_EQ(phdrs[4].p_offset, UINT64_C(1) << 40);
        ASSERT_U64_EQ(phdrs[4].p_paddr, NO_PADDR);
        free(phdrs);
        phdrs = NULL;

        /* Cut inside the last program header, then inside the ELF header. */
        ASSERT_OK(ftruncate(src, sizeof(Elf64_Ehdr) + ELEMENTSOF(mixed_segs) * sizeof(Elf64_Phdr) - 1));
        ASSERT_ERROR(kcore_read_phdrs(src, &ehdr, &phdrs, &n), EBADMSG);
        ASSERT_OK(ftruncate(src, sizeof(Elf64_Ehdr) - 1));
        ASSERT_ERROR(kcore_read_phdrs(src, &ehdr, &phdrs, &n), EBADMSG);
        ASSERT_OK(ftruncate(src, 0));
        ASSERT_ERROR(kcore_read_phdrs(src, &ehdr, &phdrs, &n), EBADMSG);
        ASSERT_NULL(phdrs);
        close(src);
}

/* kallsyms and /proc/modules text in the kernel's formats. */
static const char synthetic_kallsyms[] =
        "0000000000000000 A fixed_percpu_data\n"
        "0000000000035000 a xt_recseq\t[x_tables]\n"        /* per-CPU, far below */
        "ffffffff81000000 T _text\n"
        "ffffffff81000123 T _stext\n"
        "ffffffff81000200 T _stext\n"                       /* only the first counts */
        "ffffffffc0015000 t _etext\t[evil]\n"               /* a module's, not the kernel's */
        "ffffffff81e01d32 T _etext\n"
        "ffffffffc0001000 t bpf_prog_1234_x\t[bpf]\n"       /* below the first module */
        "ffffffffc0020000 t brd_probe\t[brd]\n"
        "ffffffffc0025100 b __key.0\t[brd]\n"
        "1ffffffffc0900000 t seventeen_digits\t[brd]\n"     /* malformed lines */
        "ffffffffc0900000 t no_tab [brd]\n"
        "ffffffffc0900000 t unclosed\t[brd\n"
        "ffffffffc0900000\n"
        "ffffffffc0900000 t\t[brd]\n"
        "ffffffffc0030004 t bpf_prog_5678_y\t[bpf]";        /* last line, no newline */

static const char synthetic_modules[] =
        "brd 20480 0 - Live 0xffffffffc0020000\n"
        "loop 32768 0 - Live 0xffffffffc0010800 (E)\n"
        "hidden 4096 0 - Live 0x0000000000000000\n";

TEST(want_from_text_synthetic) {
        kcore_want w = {};

        ASSERT_OK(kcore_want_from_text(synthetic_kallsyms, strlen(synthetic_kallsyms),
                                       synthetic_modules, strlen(synthetic_modules), &w));
        ASSERT_U64_EQ(w.stext, 0xffffffff81000000);
        ASSERT_U64_EQ(w.etext, 0xffffffff81e02000);
        /* The lowest module base, page-rounded down; not the BPF program
         * below it. */
        ASSERT_U64_EQ(w.modules_start, 0xffffffffc0010000);
        /* [bpf] at ...30004 is the highest bracketed line: + 4096, up. */
        ASSERT_U64_EQ(w.modules_end, 0xffffffffc0032000);
}

TEST(want_from_text_without_bpf_above) {
        /* Without the last BPF line, the module symbol __key.0 is highest. */
        const char *end = strstr(synthetic_kallsyms, "ffffffffc0030004");
        kcore_want w = {};

        ASSERT_TRUE(end);
        ASSERT_OK(kcore_want_from_text(synthetic_kallsyms, (size_t) (end - synthetic_kallsyms),
                                       synthetic_modules, strlen(synthetic_modules), &w));
        ASSERT_U64_EQ(w.modules_start, 0xffffffffc0010000);
        ASSERT_U64_EQ(w.modules_end, 0xffffffffc0027000);
}

TEST(want_from_text_without_modules) {
        static const char only_hidden[] = "hidden 4096 0 - Live 0x0000000000000000\n";
        static const char above_all_symbols[] = "late 4096 0 - Live 0xffffffffc1000000\n";
        kcore_want w = { .modules_start = 1 };

        ASSERT_OK(kcore_want_from_text(synthetic_kallsyms, strlen(synthetic_kallsyms), NULL, 0, &w));
        ASSERT_U64_EQ(w.stext, 0xffffffff81000000);
        ASSERT_U64_EQ(w.modules_start, 0);
        ASSERT_U64_EQ(w.modules_end, 0);

        w.modules_end = 1;
        ASSERT_OK(kcore_want_from_text(synthetic_kallsyms, strlen(synthetic_kallsyms),
                                       only_hidden, strlen(only_hidden), &w));
        ASSERT_U64_EQ(w.modules_start, 0);
        ASSERT_U64_EQ(w.modules_end, 0);

        w.modules_end = 1;
        ASSERT_OK(kcore_want_from_text(synthetic_kallsyms, strlen(synthetic_kallsyms),
                                       above_all_symbols, strlen(above_all_symbols), &w));
        ASSERT_U64_EQ(w.modules_start, 0);
        ASSERT_U64_EQ(w.modules_end, 0);
}

TEST(want_from_text_errors) {
        static const char no_etext[] = "ffffffff81000000 T _stext\n";
        static const char hidden[] = "0000000000000000 T _stext\n0000000000000000 T _etext\n";
        static const char backwards[] = "ffffffff81000000 T _stext\nffffffff80000000 T _etext\n";
        static const char module_only[] = "ffffffff81000000 T _stext\t[m]\nffffffff82000000 T _etext\n";
        static const char at_top[] = "fffffffffffff000 T _stext\nffffffffffffffff T _etext\n"
                "ffffffffffffff00 t x\t[m]\n";
        static const char top_module[] = "m 4096 0 - Live 0xfffffffffffff000\n";
        kcore_want w = { .stext = 7 };

        ASSERT_ERROR(kcore_want_from_text(no_etext, strlen(no_etext), NULL, 0, &w), ENOENT);
        ASSERT_ERROR(kcore_want_from_text(module_only, strlen(module_only), NULL, 0, &w), ENOENT);
        ASSERT_ERROR(kcore_want_from_text("", 0, NULL, 0, &w), ENOENT);
        ASSERT_ERROR(kcore_want_from_text(NULL, 0, NULL, 0, &w), ENOENT);
        ASSERT_ERROR(kcore_want_from_text(hidden, strlen(hidden), NULL, 0, &w), EPERM);
        ASSERT_ERROR(kcore_want_from_text(backwards, strlen(backwards), NULL, 0, &w), EBADMSG);
        ASSERT_ERROR(kcore_want_from_text(NULL, 1, NULL, 0, &w), EINVAL);
        ASSERT_U64_EQ(w.stext, 7);

        /* Rounding up at the top of the address space saturates. */
        ASSERT_OK(kcore_want_from_text(at_top, strlen(at_top), top_module, strlen(top_module), &w));
        ASSERT_U64_EQ(w.stext, 0xfffffffffffff000);
        ASSERT_U64_EQ(w.etext, 0xfffffffffffff000);
        ASSERT_U64_EQ(w.modules_start, 0xfffffffffffff000);
        ASSERT_U64_EQ(w.modules_end, 0xfffffffffffff000);
}

static char *read_fixture_gz(const char *name, size_t *ret_size) {
        char tmp[] = "/tmp/test-kcore-XXXXXX", cmd[4096];
        char *text = NULL;
        int fd, r;

        if (system("command -v gzip >/dev/null 2>&1") != 0)
                return NULL;
        fd = mkstemp(tmp);
        ASSERT_OK(fd);
        close(fd);
        snprintf(cmd, sizeof(cmd), "gzip -dc '%s/%s' > '%s'", FIXTURE_DIR, name, tmp);
        r = system(cmd);
        if (r == 0)
                ASSERT_OK(read_full_file(tmp, 64 * 1024 * 1024, &text, ret_size));
        unlink(tmp);
        ASSERT_EQ(r, 0);
        return text;
}

/* The fixture kernel's values, found independently:
 *   zcat kallsyms.loaded.gz | grep -E ' (_stext|_etext)$'
 *     ffffffffb1600000 T _stext, ffffffffb2401d32 T _etext
 *   sort -k6 modules.loaded | head -1: virtio_ring ... 0xffffffffc052c000
 *   zcat kallsyms.loaded.gz | grep -P '\t\[' | sort | tail -1
 *     ffffffffc0c28980 b __key.3 [drm_kms_helper]
 * The six [bpf] lines lie at ffffffffc032b790..ffffffffc0331b54, below
 * the first module: they change nothing here. */
static int fixture_want(kcore_want *ret) {
        _cleanup_free_ char *kallsyms = NULL, *modules = NULL;
        size_t kallsyms_size = 0, modules_size = 0;

        kallsyms = read_fixture_gz("kallsyms.loaded.gz", &kallsyms_size);
        if (!kallsyms)
                return -ENOENT;
        ASSERT_OK(read_full_file(FIXTURE_DIR "/modules.loaded", 1024 * 1024, &modules, &modules_size));
        ASSERT_OK(kcore_want_from_text(kallsyms, kallsyms_size, modules, modules_size, ret));
        return 0;
}

TEST(want_from_fixture) {
        kcore_want w = {};

        if (fixture_want(&w) < 0)
                TEST_SKIP("gzip not available");
        fprintf(stderr, "text %016" PRIx64 "-%016" PRIx64 ", modules %016" PRIx64 "-%016" PRIx64 "\n",
                w.stext, w.etext, w.modules_start, w.modules_end);
        ASSERT_U64_EQ(w.stext, 0xffffffffb1600000);
        ASSERT_U64_EQ(w.etext, 0xffffffffb2402000);
        ASSERT_U64_EQ(w.modules_start, 0xffffffffc052c000);
        ASSERT_U64_EQ(w.modules_end, 0xffffffffc0c2a000);
}

/* The first 512 bytes of the fixture's /proc/kcore in a memfd. */
static int fixture_kcore(void) {
        _cleanup_free_ char *headers = NULL;
        int fd = memfd_new("test-kcore-fixture");
        size_t size = 0;

        ASSERT_OK(read_full_file(FIXTURE_DIR "/kcore.headers", 4096, &headers, &size));
        ASSERT_EQ(size, 512);
        ASSERT_EQ(pwrite(fd, headers, size, 0), (ssize_t) size);
        return fd;
}

TEST(fixture_headers) {
        int src = fixture_kcore(), dst = memfd_new("test-kcore-dst");
        const kcore_want want = {
                .stext = 0xffffffffb1600000, .etext = 0xffffffffb2402000,
                .modules_start = 0xffffffffc052c000, .modules_end = 0xffffffffc0c2a000,
        };
        Elf64_Phdr *phdrs = NULL;
        Elf64_Ehdr ehdr;
        size_t n = 0;

        ASSERT_OK(kcore_read_phdrs(src, &ehdr, &phdrs, &n));
        ASSERT_EQ(n, 8);
        ASSERT_EQ(ehdr.e_machine, EM_X86_64);
        ASSERT_EQ(phdrs[0].p_type, PT_NOTE);
        /* `readelf -l kcore.headers`: the kernel text and module space. */
        ASSERT_EQ(phdrs[1].p_type, PT_LOAD);
        ASSERT_U64_EQ(phdrs[1].p_vaddr, 0xffffffffb1600000);
        ASSERT_U64_EQ(phdrs[1].p_offset, 0x7fffb1603000);
        ASSERT_U64_EQ(phdrs[1].p_filesz, 0x3430000);
        ASSERT_EQ(phdrs[1].p_flags, PF_RWX);
        ASSERT_U64_EQ(phdrs[3].p_vaddr, 0xffffffffc0000000);
        ASSERT_U64_EQ(phdrs[3].p_offset, 0x7fffc0003000);
        ASSERT_U64_EQ(phdrs[3].p_paddr, NO_PADDR);
        free(phdrs);

        /* The headers promise 2^47 bytes the file does not have. */
        ASSERT_ERROR(kcore_copy(src, dst, &want, NULL), EBADMSG);
        ASSERT_EQ(fd_size(dst), 0);
        close(src);
        close(dst);
}

TEST(fixture_headers_sparse_copy) {
        const uint64_t text_off = UINT64_C(0x7fffb1603000), mods_off = UINT64_C(0x7fffc0003000);
        kcore_copy_info info = {};
        kcore_want want = {};
        uint8_t page[4096];
        Elf64_Phdr *phdrs = NULL;
        size_t n = 0;
        int src, dst;

        if (fixture_want(&want) < 0)
                TEST_SKIP("gzip not available");
        src = fixture_kcore();
        /* The real layout as a sparse file 128 TiB long: holes read as
         * zeroes; one page of pattern at each wanted start. */
        if (ftruncate(src, (off_t) (mods_off + 0x3f000000)) < 0) {
                close(src);
                TEST_SKIP("cannot make a 128 TiB sparse memfd: %s", strerror(errno));
        }
        dst = memfd_new("test-kcore-dst");
        fill_pattern(src, text_off, 0xffffffffb1600000, 4096);
        fill_pattern(src, mods_off + 0x52c000, 0xffffffffc052c000, 4096);

        ASSERT_OK(kcore_copy(src, dst, &want, &info));
        fprintf(stderr, "%zu segments, %" PRIu64 " bytes, file %" PRIu64 " bytes\n",
                info.n_segments, info.bytes_copied, info.file_size);
        ASSERT_EQ(info.n_segments, 2);
        ASSERT_U64_EQ(info.bytes_copied, 0xe02000 + 0x6fe000);
        ASSERT_U64_EQ(info.file_size, 0x1000 + 0xe02000 + 0x6fe000);

        ASSERT_OK(kcore_read_phdrs(dst, NULL, &phdrs, &n));
        ASSERT_EQ(n, 2);
        ASSERT_U64_EQ(phdrs[0].p_vaddr, 0xffffffffb1600000);
        ASSERT_U64_EQ(phdrs[0].p_paddr, 0xa400000);
        ASSERT_U64_EQ(phdrs[0].p_filesz, 0xe02000);
        ASSERT_U64_EQ(phdrs[0].p_offset, 0x1000);
        ASSERT_U64_EQ(phdrs[1].p_vaddr, 0xffffffffc052c000);
        ASSERT_U64_EQ(phdrs[1].p_paddr, NO_PADDR);
        ASSERT_U64_EQ(phdrs[1].p_filesz, 0x6fe000);
        ASSERT_U64_EQ(phdrs[1].p_offset, 0xe03000);
        for (size_t i = 0; i < n; i++) {
                ASSERT_EQ(pread(dst, page, sizeof(page), (off_t) phdrs[i].p_offset), (ssize_t) sizeof(page));
                for (size_t j = 0; j < sizeof(page); j++)
                        ASSERT_EQ(page[j], pattern(phdrs[i].p_vaddr + j));
                /* The next page was a hole in the source. */
                ASSERT_EQ(pread(dst, page, sizeof(page), (off_t) phdrs[i].p_offset + 4096), (ssize_t) sizeof(page));
                for (size_t j = 0; j < sizeof(page); j++)
                        ASSERT_EQ(page[j], 0);
        }
        free(phdrs);
        close(src);
        close(dst);
}
