/* SPDX-License-Identifier: GPL-2.0-or-later */
/* kcore_copy() with the input as the kcore file, and
 * kcore_want_from_text() with the input as kallsyms and modules text.
 * Wanted ranges are fixed, or taken from the input's last 32 bytes with
 * lengths below 1 MiB, so an input never makes a large copy. A
 * successful copy is read back and compared with the input byte by
 * byte. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernel/kcore.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define WANT_LEN_MASK UINT64_C(0xfffff)

static uint64_t read_u64(const uint8_t *p) {
        uint64_t v;

        memcpy(&v, p, sizeof(v));
        return v;
}

static uint64_t add_saturated(uint64_t a, uint64_t b) {
        return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t file_size(int fd) {
        struct stat st;

        if (fstat(fd, &st) < 0)
                abort();
        return (uint64_t) st.st_size;
}

static bool in_want(const kcore_want *w, uint64_t start, uint64_t end) {
        bool text = w->stext < w->etext, mods = w->modules_start < w->modules_end;

        if (text && start >= w->stext && end <= w->etext)
                return true;
        if (mods && start >= w->modules_start && end <= w->modules_end)
                return true;
        /* Overlapping or touching ranges are copied as one. */
        if (text && mods && w->modules_start <= w->etext && w->stext <= w->modules_end)
                return start >= (w->stext < w->modules_start ? w->stext : w->modules_start) &&
                        end <= (w->etext > w->modules_end ? w->etext : w->modules_end);
        return false;
}

/* Whether some executable PT_LOAD of the input holds [addr, addr + len)
 * in its file bytes, equal to what the extract has there. */
static bool source_has(const uint8_t *data, size_t size, const Elf64_Phdr *src, size_t n_src,
                       uint64_t addr, const uint8_t *bytes, uint64_t len) {
        for (size_t i = 0; i < n_src; i++) {
                uint64_t seg_len = src[i].p_filesz < src[i].p_memsz ? src[i].p_filesz : src[i].p_memsz;
                uint64_t off;

                if (src[i].p_type != PT_LOAD || !(src[i].p_flags & PF_X))
                        continue;
                if (addr < src[i].p_vaddr || addr - src[i].p_vaddr > seg_len ||
                    len > seg_len - (addr - src[i].p_vaddr))
                        continue;
                off = src[i].p_offset + (addr - src[i].p_vaddr);
                if (off <= size && len <= size - off && memcmp(data + off, bytes, len) == 0)
                        return true;
        }
        return false;
}

static void check_copy(const uint8_t *data, size_t size, int src, int dst, const kcore_want *want) {
        Elf64_Phdr *src_phdrs = NULL, *phdrs = NULL;
        kcore_copy_info info = { .n_segments = 4242 };
        size_t n_src = 0, n = 0;
        uint64_t prev_end = 0, copied = 0;
        uint8_t *buf;
        Elf64_Ehdr ehdr;
        int r;

        if (ftruncate(dst, 0) < 0)
                abort();
        r = kcore_copy(src, dst, want, &info);
        if (r < 0) {
                if (r != -EBADMSG && r != -EPROTONOSUPPORT && r != -E2BIG && r != -ENODATA &&
                    r != -EFBIG && r != -ENOMEM)
                        abort();
                if (info.n_segments != 4242 || file_size(dst) != 0)
                        abort();
                return;
        }

        if (info.n_segments == 0 || info.bytes_copied > 4 * (WANT_LEN_MASK + 1) ||
            info.file_size != file_size(dst))
                abort();
        if (kcore_read_phdrs(src, NULL, &src_phdrs, &n_src) < 0)
                abort();
        if (kcore_read_phdrs(dst, &ehdr, &phdrs, &n) < 0 || n != info.n_segments)
                abort();
        if (ehdr.e_type != ET_CORE)
                abort();
        for (size_t i = 0; i < n; i++) {
                const Elf64_Phdr *ph = &phdrs[i];

                if (ph->p_type != PT_LOAD || ph->p_filesz == 0 || ph->p_filesz != ph->p_memsz ||
                    !(ph->p_flags & PF_X) || ph->p_offset % KCORE_PAGE_SIZE != ph->p_vaddr % KCORE_PAGE_SIZE)
                        abort();
                if (i > 0 && ph->p_vaddr < prev_end)
                        abort();
                prev_end = ph->p_vaddr + ph->p_filesz;
                if (!in_want(want, ph->p_vaddr, prev_end))
                        abort();
                buf = malloc(ph->p_filesz);
                if (!buf || pread(dst, buf, ph->p_filesz, (off_t) ph->p_offset) != (ssize_t) ph->p_filesz)
                        abort();
                if (!source_has(data, size, src_phdrs, n_src, ph->p_vaddr, buf, ph->p_filesz))
                        abort();
                free(buf);
                copied += ph->p_filesz;
        }
        if (copied != info.bytes_copied)
                abort();
        free(src_phdrs);
        free(phdrs);
}

static void check_want_from_text(const uint8_t *data, size_t size) {
        kcore_want w = { .stext = 1, .etext = 2, .modules_start = 3, .modules_end = 4 };
        int r;

        r = kcore_want_from_text((const char *) data, size, (const char *) data, size, &w);
        if (r < 0) {
                if (r != -ENOENT && r != -EPERM && r != -EBADMSG && r != -ENOMEM)
                        abort();
                if (w.stext != 1 || w.etext != 2 || w.modules_start != 3 || w.modules_end != 4)
                        abort();
                return;
        }
        /* _etext >= _stext > 0, so the rounded-up end is at least a page. */
        if (w.stext > w.etext || w.etext == 0 || w.modules_start > w.modules_end)
                abort();
        if ((w.stext | w.etext | w.modules_start | w.modules_end) % KCORE_PAGE_SIZE != 0)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static int src = -1, dst = -1;
        /* The addresses the seed corpus uses. */
        static const kcore_want fixed = {
                .stext = UINT64_C(0xffffffff81000000), .etext = UINT64_C(0xffffffff81010000),
                .modules_start = UINT64_C(0xffffffffc0000000), .modules_end = UINT64_C(0xffffffffc0010000),
        };

        if (src < 0) {
                src = memfd_create("fuzz-kcore-src", MFD_CLOEXEC);
                dst = memfd_create("fuzz-kcore-dst", MFD_CLOEXEC);
                if (src < 0 || dst < 0)
                        abort();
        }
        if (ftruncate(src, 0) < 0 || (size > 0 && pwrite(src, data, size, 0) != (ssize_t) size))
                abort();

        check_copy(data, size, src, dst, &fixed);
        if (size >= 32) {
                const uint8_t *t = data + size - 32;
                uint64_t a = read_u64(t), b = read_u64(t + 16);
                kcore_want w = {
                        .stext = a, .etext = add_saturated(a, read_u64(t + 8) & WANT_LEN_MASK),
                        .modules_start = b, .modules_end = add_saturated(b, read_u64(t + 24) & WANT_LEN_MASK),
                };
                check_copy(data, size, src, dst, &w);
        }
        check_want_from_text(data, size);
        return 0;
}
