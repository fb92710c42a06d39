/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* An extract of /proc/kcore holding only the kernel's code: the executable
 * PT_LOAD ranges that cover the kernel text and the module area, written
 * as a new ET_CORE file. It is the "kcore" of a perf build-id cache entry
 * (the layout `perf buildid-cache --kcore` makes), next to copies of
 * kallsyms and modules taken at the same time.
 *
 * /proc/kcore cannot be mmapped and its p_offsets are near 2^47, so the
 * source is only ever read with pread(). */

#include <elf.h>
#include <stddef.h>
#include <stdint.h>

#define KCORE_PAGE_SIZE 4096u

/* At most this many program headers are read. x86-64 has one PT_LOAD per
 * System RAM range plus a few (text, modules, vmalloc, vmemmap): 8 on a
 * small VM, tens on large NUMA machines. */
#define KCORE_PHNUM_MAX 1024u

/* The most bytes one copy writes. A real extract is about 40 MiB (kernel
 * text ~15-30 MiB, modules a few MiB); x86-64's whole module area is 1 GiB,
 * so wanting more than that means the wanted ranges are wrong. */
#define KCORE_COPY_MAX_BYTES (UINT64_C(1) << 30)

/* Address ranges [start, end) to copy; start == end == 0: absent. */
typedef struct kcore_want {
        uint64_t stext, etext;
        uint64_t modules_start, modules_end;
} kcore_want;

/* Derives the wanted ranges from /proc/kallsyms and /proc/modules text
 * (one pass over kallsyms, no symbol table):
 * - kernel text: _stext rounded down to a page .. _etext rounded up;
 * - modules: the lowest non-zero base in /proc/modules .. the highest
 *   address of any kallsyms line with a "[name]" suffix + one page,
 *   rounded up. Every bracketed line counts, pseudo-modules such as
 *   [bpf] and [__builtin__ftrace] too (as perf does): their code is
 *   allocated in the module area on x86-64, so a program JIT-ed above the
 *   last module stays in the copy. They do not lower the start, which
 *   comes from /proc/modules alone.
 * No module with an address (none loaded, or hidden by kptr_restrict), or
 * no bracketed line at or above the lowest base: modules range absent.
 * modules may be NULL with modules_len 0. Returns 0, -ENOENT without
 * _stext or _etext, -EPERM if they read 0 (addresses hidden), -EBADMSG if
 * _etext < _stext, -ENOMEM. */
int kcore_want_from_text(const char *kallsyms, size_t kallsyms_len,
                         const char *modules, size_t modules_len,
                         kcore_want *ret);

/* Reads the ELF header and program header table of a kcore-like file
 * with pread(). Only 64-bit files in the host's byte order are supported
 * (-EPROTONOSUPPORT otherwise). Returns 0 with the header in *ret_ehdr
 * (may be NULL) and a malloc'ed array of e_phnum headers; -EBADMSG for a
 * file that is not an ET_CORE ELF file or is truncated within its
 * headers, -E2BIG for more than KCORE_PHNUM_MAX program headers, or the
 * errno of a failed read. */
int kcore_read_phdrs(int fd, Elf64_Ehdr *ret_ehdr, Elf64_Phdr **ret_phdrs, size_t *ret_n);

typedef struct kcore_copy_info {
        size_t n_segments;              /* PT_LOADs written */
        uint64_t bytes_copied;          /* sum of their p_filesz */
        uint64_t file_size;             /* bytes of the written file */
} kcore_copy_info;

/* Writes to dst_fd (a writable regular file, truncated first) an ET_CORE
 * file of the same class, byte order and machine as src_fd holding the
 * parts of want's ranges that src_fd's executable PT_LOADs back with file
 * bytes (p_filesz, not p_memsz), one PT_LOAD per piece, sorted by address,
 * never overlapping. Wanted ranges are used as given (kcore_want_from_text
 * has rounded them). A piece keeps its segment's p_flags; p_paddr moves
 * with the address, except the "no physical address" marker
 * (UINT64_MAX, as kcore has for vmalloc and module space), which stays.
 * Each piece's data starts on a fresh page, at a file offset congruent to
 * its address modulo KCORE_PAGE_SIZE.
 *
 * Returns 0 and fills *ret_info (may be NULL); -EINVAL for a want with
 * start > end; -ENODATA if no byte of the wanted ranges is present (a copy
 * without code is of no use); -EFBIG if the pieces exceed
 * KCORE_COPY_MAX_BYTES; -EBADMSG if src_fd ends inside a piece its
 * headers promise, or an executable segment's addresses or a piece's file
 * offsets wrap; the errors of kcore_read_phdrs(); -ENOTSUP if libelf
 * cannot be initialised; or the errno of a failed read or write (reading
 * /proc/kcore gives EIO or EFAULT for ranges with nothing mapped). On
 * failure dst_fd is truncated to 0 bytes when possible: write to a
 * temporary file and rename it into place. */
int kcore_copy(int src_fd, int dst_fd, const kcore_want *want, kcore_copy_info *ret_info);
