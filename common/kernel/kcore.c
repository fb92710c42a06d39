/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Extracting the kernel's code segments of /proc/kcore into a new ET_CORE
 * file (kcore.h). */
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elf/elfutil.h"
#include "kernel/kallsyms.h"
#include "kernel/kcore.h"
#include "kernel/modules.h"
#include "macro.h"

/* Bytes moved per pread()/pwrite() pair. */
#define KCORE_COPY_CHUNK_BYTES (1024u * 1024u)

/* Wanted ranges after normalisation: text and modules, at most. */
#define KCORE_WANT_MAX 2

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#  define KCORE_HOST_DATA ELFDATA2LSB
#else
#  define KCORE_HOST_DATA ELFDATA2MSB
#endif

/* kcore's p_paddr for ranges without a physical address (vmalloc,
 * modules, vmemmap): fs/proc/kcore.c sets it to (u64) -1. */
#define KCORE_NO_PADDR UINT64_MAX

static uint64_t page_down(uint64_t v) {
        return v & ~(uint64_t) (KCORE_PAGE_SIZE - 1);
}

/* Rounds up, saturating at the last page boundary below 2^64. */
static uint64_t page_up(uint64_t v) {
        if (v > UINT64_MAX - (KCORE_PAGE_SIZE - 1))
                return page_down(UINT64_MAX);
        return page_down(v + KCORE_PAGE_SIZE - 1);
}

typedef struct kallsyms_scan {
        bool have_stext, have_etext, have_module_sym;
        uint64_t stext, etext, module_sym_max;
} kallsyms_scan;

/* One kallsyms line. Malformed lines are ignored: a stray line must not
 * move the ranges. */
static void scan_kallsyms_line(kallsyms_scan *s, const char *p, const char *e) {
        kallsyms_line l;

        if (!kallsyms_line_parse(p, (size_t) (e - p), &l))
                return;
        if (l.module) {
                /* Any bracketed line, pseudo-modules included. */
                if (!s->have_module_sym || l.addr > s->module_sym_max)
                        s->module_sym_max = l.addr;
                s->have_module_sym = true;
                return;
        }

        /* Core lines: the first _stext and _etext count. */
        if (!s->have_stext && l.name_len == 6 && memcmp(l.name, "_stext", 6) == 0) {
                s->stext = l.addr;
                s->have_stext = true;
        } else if (!s->have_etext && l.name_len == 6 && memcmp(l.name, "_etext", 6) == 0) {
                s->etext = l.addr;
                s->have_etext = true;
        }
}

int kcore_want_from_text(const char *kallsyms_text, size_t kallsyms_text_len,
                         const char *modules, size_t modules_len,
                         kcore_want *ret) {
        _cleanup_free_ proc_module *mods = NULL;
        kallsyms_scan s = {};
        kcore_want w = {};
        uint64_t lowest = 0;
        size_t n_mods = 0;
        const char *p, *e;
        int r;

        if ((!kallsyms_text && kallsyms_text_len > 0) || (!modules && modules_len > 0) || !ret)
                return -EINVAL;

        for (p = kallsyms_text, e = kallsyms_text_len > 0 ? kallsyms_text + kallsyms_text_len : kallsyms_text; p < e; ) {
                const char *eol = memchr(p, '\n', (size_t) (e - p));

                if (!eol)
                        eol = e;
                scan_kallsyms_line(&s, p, eol);
                p = eol < e ? eol + 1 : e;
        }
        if (!s.have_stext || !s.have_etext)
                return -ENOENT;
        if (s.stext == 0 || s.etext == 0)
                return -EPERM;
        if (s.etext < s.stext)
                return -EBADMSG;
        w.stext = page_down(s.stext);
        w.etext = page_up(s.etext);

        if (modules_len > 0) {
                r = proc_modules_parse(modules, modules_len, &mods, &n_mods, NULL);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < n_mods; i++)
                if (mods[i].base != 0 && (lowest == 0 || mods[i].base < lowest))
                        lowest = mods[i].base;
        if (lowest != 0 && s.have_module_sym && s.module_sym_max >= lowest) {
                w.modules_start = page_down(lowest);
                w.modules_end = s.module_sym_max > UINT64_MAX - KCORE_PAGE_SIZE ?
                        page_down(UINT64_MAX) : page_up(s.module_sym_max + KCORE_PAGE_SIZE);
        }

        *ret = w;
        return 0;
}

/* pread() or pwrite() of exactly len bytes at offset: 0, the errno of a
 * failed call, or -EBADMSG for a read at the end of the file or an offset
 * beyond off_t (the headers promised bytes the file does not have). */
static int transfer_full(int fd, void *buf, size_t len, uint64_t offset, bool write) {
        uint8_t *b = buf;

        while (len > 0) {
                ssize_t l;

                if (offset > INT64_MAX)
                        return -EBADMSG;
                l = write ? pwrite(fd, b, len, (off_t) offset) : pread(fd, b, len, (off_t) offset);
                if (l < 0 && errno == EINTR)
                        continue;
                if (l < 0)
                        return negative_errno();
                if (l == 0)
                        return write ? -EIO : -EBADMSG;
                b += l;
                len -= (size_t) l;
                offset += (uint64_t) l;
        }
        return 0;
}

int kcore_read_phdrs(int fd, Elf64_Ehdr *ret_ehdr, Elf64_Phdr **ret_phdrs, size_t *ret_n) {
        _cleanup_free_ Elf64_Phdr *phdrs = NULL;
        Elf64_Ehdr ehdr;
        int r;

        if (fd < 0 || !ret_phdrs || !ret_n)
                return -EINVAL;

        r = transfer_full(fd, &ehdr, sizeof(ehdr), 0, false);
        if (r < 0)
                return r;
        if (memcmp(ehdr.e_ident, ELFMAG, SELFMAG) != 0)
                return -EBADMSG;
        if (ehdr.e_ident[EI_CLASS] != ELFCLASS64 || ehdr.e_ident[EI_DATA] != KCORE_HOST_DATA)
                return -EPROTONOSUPPORT;
        if (ehdr.e_ident[EI_VERSION] != EV_CURRENT || ehdr.e_type != ET_CORE ||
            ehdr.e_phentsize != sizeof(Elf64_Phdr))
                return -EBADMSG;
        /* PN_XNUM (0xffff) would put the real count in section 0; kcore
         * never has that many. */
        if (ehdr.e_phnum > KCORE_PHNUM_MAX)
                return -E2BIG;

        if (ehdr.e_phnum > 0) {
                if (ehdr.e_phoff < sizeof(ehdr))
                        return -EBADMSG;
                phdrs = calloc(ehdr.e_phnum, sizeof(Elf64_Phdr));
                if (!phdrs)
                        return -ENOMEM;
                /* e_phoff is a u64 from the file; transfer_full refuses offsets
                 * past INT64_MAX, and phnum * 56 is small. */
                r = transfer_full(fd, phdrs, ehdr.e_phnum * sizeof(Elf64_Phdr), ehdr.e_phoff, false);
                if (r < 0)
                        return r;
        }

        if (ret_ehdr)
                *ret_ehdr = ehdr;
        *ret_phdrs = TAKE_PTR(phdrs);
        *ret_n = ehdr.e_phnum;
        return 0;
}

typedef struct kcore_range {
        uint64_t start, end;
} kcore_range;

typedef struct kcore_piece {
        uint64_t addr, len;
        uint64_t src_offset, dst_offset;
        uint64_t paddr;
        uint32_t flags;
} kcore_piece;

static int range_cmp(const void *a, const void *b) {
        const kcore_range *x = a, *y = b;

        return x->start < y->start ? -1 : x->start > y->start;
}

static int piece_cmp(const void *a, const void *b) {
        const kcore_piece *x = a, *y = b;

        if (x->addr != y->addr)
                return x->addr < y->addr ? -1 : 1;
        /* Same start: the longer first, so the shorter one is dropped as
         * covered. */
        return x->len > y->len ? -1 : x->len < y->len;
}

/* The non-empty wanted ranges, sorted, overlapping ones merged. */
static int want_ranges(const kcore_want *want, kcore_range ret[static KCORE_WANT_MAX], size_t *ret_n) {
        kcore_range r[KCORE_WANT_MAX] = {
                { want->stext, want->etext },
                { want->modules_start, want->modules_end },
        };
        size_t n = 0;

        for (size_t i = 0; i < KCORE_WANT_MAX; i++) {
                if (r[i].start > r[i].end)
                        return -EINVAL;
                if (r[i].start < r[i].end)
                        ret[n++] = r[i];
        }
        qsort(ret, n, sizeof(ret[0]), range_cmp);
        if (n == 2 && ret[1].start <= ret[0].end) {
                ret[0].end = MAX(ret[0].end, ret[1].end);
                n = 1;
        }
        *ret_n = n;
        return 0;
}

/* Intersects the wanted ranges with the file-backed part of each
 * executable PT_LOAD; returns the pieces sorted by address, with overlaps
 * (from overlapping segments) cut off the later piece. */
static int plan_pieces(const Elf64_Phdr *phdrs, size_t n_phdrs,
                       const kcore_range *ranges, size_t n_ranges,
                       kcore_piece **ret, size_t *ret_n) {
        _cleanup_free_ kcore_piece *pieces = NULL;
        size_t n = 0, kept = 0;

        pieces = calloc(MAX(n_phdrs * n_ranges, (size_t) 1), sizeof(kcore_piece));
        if (!pieces)
                return -ENOMEM;

        for (size_t i = 0; i < n_phdrs; i++) {
                const Elf64_Phdr *ph = &phdrs[i];
                uint64_t seg_len, seg_end;

                if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
                        continue;
                /* Only bytes the file holds; p_memsz beyond p_filesz is
                 * zero-fill that kcore never has anyway. */
                seg_len = MIN(ph->p_filesz, ph->p_memsz);
                if (seg_len == 0)
                        continue;
                if (__builtin_add_overflow(ph->p_vaddr, seg_len, &seg_end))
                        return -EBADMSG;

                for (size_t j = 0; j < n_ranges; j++) {
                        uint64_t start = MAX(ranges[j].start, ph->p_vaddr);
                        uint64_t end = MIN(ranges[j].end, seg_end);
                        uint64_t delta = start - ph->p_vaddr, src_end;
                        kcore_piece *pc = &pieces[n];

                        if (start >= end)
                                continue;
                        if (__builtin_add_overflow(ph->p_offset, delta, &pc->src_offset) ||
                            __builtin_add_overflow(pc->src_offset, end - start, &src_end) ||
                            src_end > INT64_MAX)
                                return -EBADMSG;
                        pc->addr = start;
                        pc->len = end - start;
                        pc->flags = ph->p_flags;
                        pc->paddr = ph->p_paddr == KCORE_NO_PADDR ? KCORE_NO_PADDR : ph->p_paddr + delta;
                        n++;
                }
        }

        qsort(pieces, n, sizeof(pieces[0]), piece_cmp);
        for (size_t i = 0; i < n; i++) {
                kcore_piece pc = pieces[i];

                if (kept > 0) {
                        const kcore_piece *prev = &pieces[kept - 1];
                        uint64_t prev_end = prev->addr + prev->len;

                        if (pc.addr + pc.len <= prev_end)
                                continue;
                        if (pc.addr < prev_end) {
                                uint64_t cut = prev_end - pc.addr;

                                pc.addr += cut;
                                pc.len -= cut;
                                pc.src_offset += cut;
                                if (pc.paddr != KCORE_NO_PADDR)
                                        pc.paddr += cut;
                        }
                }
                pieces[kept++] = pc;
        }

        *ret = TAKE_PTR(pieces);
        *ret_n = kept;
        return 0;
}


DEFINE_TRIVIAL_CLEANUP_FUNC(Elf *, elf_end)

/* The ELF header and program headers of the extract, through libelf. The
 * layout is ours (ELF_F_LAYOUT): libelf would otherwise place nothing
 * after the headers, as the file has no sections. elf_update() truncates
 * the file to the headers' size, so the data is written afterwards. */
static int write_headers(int fd, const Elf64_Ehdr *src, const kcore_piece *pieces, size_t n) {
        _cleanup_(elf_endp) Elf *elf = NULL;
        GElf_Ehdr ehdr;

        elf = elf_begin(fd, ELF_C_WRITE, NULL);
        if (!elf)
                return -EIO;
        if (!gelf_newehdr(elf, ELFCLASS64) || !gelf_getehdr(elf, &ehdr))
                return -ENOMEM;
        ehdr.e_ident[EI_DATA] = src->e_ident[EI_DATA];
        ehdr.e_ident[EI_OSABI] = src->e_ident[EI_OSABI];
        ehdr.e_ident[EI_ABIVERSION] = src->e_ident[EI_ABIVERSION];
        ehdr.e_type = ET_CORE;
        ehdr.e_machine = src->e_machine;
        ehdr.e_version = EV_CURRENT;
        ehdr.e_flags = src->e_flags;
        ehdr.e_phoff = sizeof(Elf64_Ehdr);
        ehdr.e_shoff = 0;
        if (!gelf_update_ehdr(elf, &ehdr))
                return -EIO;

        if (!gelf_newphdr(elf, n))
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                GElf_Phdr ph = {
                        .p_type = PT_LOAD,
                        .p_flags = pieces[i].flags,
                        .p_offset = pieces[i].dst_offset,
                        .p_vaddr = pieces[i].addr,
                        .p_paddr = pieces[i].paddr,
                        .p_filesz = pieces[i].len,
                        .p_memsz = pieces[i].len,
                        .p_align = KCORE_PAGE_SIZE,
                };

                if (!gelf_update_phdr(elf, (int) i, &ph))
                        return -EIO;
        }

        elf_flagelf(elf, ELF_C_SET, ELF_F_LAYOUT);
        if (elf_update(elf, ELF_C_WRITE) < 0)
                return -EIO;
        return 0;
}

static int copy_pieces(int src_fd, int dst_fd, const kcore_piece *pieces, size_t n) {
        _cleanup_free_ uint8_t *buf = NULL;
        int r;

        buf = malloc(KCORE_COPY_CHUNK_BYTES);
        if (!buf)
                return -ENOMEM;

        for (size_t i = 0; i < n; i++)
                for (uint64_t done = 0; done < pieces[i].len; ) {
                        size_t chunk = (size_t) MIN(pieces[i].len - done, (uint64_t) KCORE_COPY_CHUNK_BYTES);

                        r = transfer_full(src_fd, buf, chunk, pieces[i].src_offset + done, false);
                        if (r < 0)
                                return r;
                        r = transfer_full(dst_fd, buf, chunk, pieces[i].dst_offset + done, true);
                        if (r < 0)
                                return r;
                        done += chunk;
                }
        return 0;
}

int kcore_copy(int src_fd, int dst_fd, const kcore_want *want, kcore_copy_info *ret_info) {
        _cleanup_free_ Elf64_Phdr *phdrs = NULL;
        _cleanup_free_ kcore_piece *pieces = NULL;
        kcore_range ranges[KCORE_WANT_MAX];
        size_t n_phdrs = 0, n_ranges = 0, n = 0;
        uint64_t offset, total = 0;
        Elf64_Ehdr ehdr;
        int r;

        if (src_fd < 0 || dst_fd < 0 || !want)
                return -EINVAL;
        r = want_ranges(want, ranges, &n_ranges);
        if (r < 0)
                return r;

        r = kcore_read_phdrs(src_fd, &ehdr, &phdrs, &n_phdrs);
        if (r < 0)
                return r;
        r = plan_pieces(phdrs, n_phdrs, ranges, n_ranges, &pieces, &n);
        if (r < 0)
                return r;
        if (n == 0)
                return -ENODATA;

        /* Data after the headers; each piece on its own page, at an offset
         * congruent to its address (what p_align promises a reader). */
        offset = sizeof(Elf64_Ehdr) + n * sizeof(Elf64_Phdr);
        for (size_t i = 0; i < n; i++) {
                total += pieces[i].len;
                if (total > KCORE_COPY_MAX_BYTES)
                        return -EFBIG;
                offset = page_up(offset) + pieces[i].addr % KCORE_PAGE_SIZE;
                pieces[i].dst_offset = offset;
                offset += pieces[i].len;
        }

        if (!elf_library_ready())
                return -ENOTSUP;

        if (ftruncate(dst_fd, 0) < 0)
                return negative_errno();
        r = write_headers(dst_fd, &ehdr, pieces, n);
        if (r >= 0)
                r = copy_pieces(src_fd, dst_fd, pieces, n);
        if (r < 0) {
                /* Best effort: a half-written extract must not look whole. */
                (void) ftruncate(dst_fd, 0);
                return r;
        }

        if (ret_info)
                *ret_info = (kcore_copy_info) {
                        .n_segments = n,
                        .bytes_copied = total,
                        .file_size = offset,
                };
        return 0;
}
