/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The user-space function table reader (elf/elfsyms.h) on arbitrary bytes:
 * as an ELF file (through a memfd, as the reader takes a descriptor), as
 * the same file given as its own debug file, and as a kept table file.
 * What is read must be sorted, name strings inside the table, inlined
 * pieces of a size and not overlapping, and encode and decode back to
 * itself. The corpus: a small executable built with symbols
 * (tiny-exe.elf), its stripped copy, and damaged copies of both
 * (truncated, section headers past the end, a symbol table of a huge size
 * or a wrong entry size); named-funcs built with DWARF and inlined
 * functions (dwarf-inline.elf), without .symtab (dwarf-only.elf), with its
 * .debug_info, .debug_abbrev or .debug_str garbled or cut; a stripped copy
 * with a .gnu_debuglink, and one whose link names a path; DWARF made to
 * cost: a .gnu_debugaltlink to a FIFO, a range list thousands long shared
 * by every DIE (zlib-compressed), an abstract-origin cycle, a sibling
 * pointing back; table files. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "elf/elfsyms.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_table(const elfsyms *s) {
        elfsyms *back = NULL;
        char *enc = NULL;
        size_t n;

        if (s->strings_size == 0 || s->strings[s->strings_size - 1] != 0)
                abort();
        for (size_t i = 0; i < s->n; i++) {
                if (s->v[i].name >= s->strings_size)
                        abort();
                if (i > 0 && s->v[i].offset <= s->v[i - 1].offset)
                        abort();
                if (elfsyms_lookup(s, s->v[i].offset) != s->v + i)
                        abort();
        }
        for (size_t i = 0; i < s->n_inl; i++) {
                const elfsym *e = s->inl + i;

                if (e->name >= s->strings_size || e->size == 0 ||
                    (i > 0 && e->offset < s->inl[i - 1].offset + s->inl[i - 1].size))
                        abort();
                if (elfsyms_inlined(s, e->offset) != s->strings + e->name ||
                    elfsyms_inlined(s, e->offset + e->size - 1) != s->strings + e->name)
                        abort();
        }
        if (elfsyms_encode(s, &enc, &n) < 0)
                return;
        if (elfsyms_decode(enc, n, &back) < 0)
                abort();
        if (back->n != s->n || back->n_inl != s->n_inl || back->strings_size != s->strings_size ||
            (s->n > 0 && memcmp(back->v, s->v, s->n * sizeof(elfsym)) != 0) ||
            (s->n_inl > 0 && memcmp(back->inl, s->inl, s->n_inl * sizeof(elfsym)) != 0) ||
            strcmp(back->build_id, s->build_id) != 0)
                abort();
        elfsyms_free(back);
        free(enc);
}

static void check_read(int fd, int debug_fd) {
        elfsyms *s = NULL;
        int r;

        r = elfsyms_read(fd, NULL, debug_fd, &s);
        if (r < 0) {
                if (r != -EBADMSG && r != -ESTALE && r != -EFBIG && r != -ENOMEM)
                        abort();
                if (s)
                        abort();
                return;
        }
        check_table(s);
        elfsyms_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        elfsyms *s = NULL;
        char hex[BUILD_ID_HEX_MAX];
        int fd;

        if (elfsyms_decode(data, size, &s) >= 0) {
                check_table(s);
                elfsyms_free(s);
        }

        fd = memfd_create("fuzz-user-elf", MFD_CLOEXEC);
        if (fd < 0)
                return 0;
        if (size > 0 && write(fd, data, size) != (ssize_t) size) {
                close(fd);
                return 0;
        }
        check_read(fd, -1);
        check_read(fd, fd);
        (void) elfsyms_build_id(fd, hex);
        {
                char link[256];

                if (elfsyms_debuglink(fd, link) >= 0 &&
                    (strchr(link, '/') || !link[0] || strlen(link) > 255))
                        abort();
        }
        close(fd);
        return 0;
}
