/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Function tables of user-space ELF files (elfsyms.h): extracted with
 * libelf, kept as a small file by build-id. */

#include <endian.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elf/elfsyms.h"
#include "elf/elfutil.h"
#include "macro.h"

#define NAME_MAX_BYTES 4096     /* longer names (none seen in practice) are cut */
/* Mangled names longer than this are kept mangled: the demangler recurses
 * with the name's nesting, and the names come from any file a process
 * maps. */
#define DEMANGLE_MAX_INPUT 1024

/* libstdc++'s demangler (the C++ ABI's); malloc'ed result or NULL. */
char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);
#define HEADER_SIZE (8 + 4 * 4 + 48)
#define ENTRY_SIZE 16

elfsyms *elfsyms_free(elfsyms *s) {
        if (s) {
                free(s->v);
                free(s->strings);
                free(s);
        }
        return NULL;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(elfsyms *, elfsyms_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(Elf *, elf_end);

/* A 64-bit ELF file of at least its header: libelf is given nothing else. */
static int open_elf(int fd, Elf **ret, uint64_t *ret_size) {
        uint8_t ident[EI_NIDENT];
        struct stat st;
        ssize_t l;
        Elf *elf;

        if (!elf_library_ready())
                return -ENOSYS;
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode))
                return -EBADMSG;
        l = pread(fd, ident, sizeof ident, 0);
        if (l < 0)
                return negative_errno();
        if ((size_t) l < sizeof ident || (uint64_t) st.st_size < sizeof(Elf64_Ehdr) ||
            memcmp(ident, ELFMAG, SELFMAG) != 0 || ident[EI_CLASS] != ELFCLASS64 || ident[EI_DATA] != ELFDATA2LSB)
                return -EBADMSG;
        /* ELF_C_READ: libelf preads what it needs. A mapping of a file
         * whose owner truncates it under us would be a SIGBUS. */
        elf = elf_begin(fd, ELF_C_READ, NULL);
        if (!elf)
                return -EBADMSG;
        if (elf_kind(elf) != ELF_K_ELF) {
                elf_end(elf);
                return -EBADMSG;
        }
        *ret = elf;
        *ret_size = (uint64_t) st.st_size;
        return 0;
}

/* The build-id from the note sections, else from the PT_NOTE segments. */
static int find_build_id(Elf *elf, uint64_t file_size, char ret[static BUILD_ID_HEX_MAX]) {
        size_t phnum;
        int r;

        for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
                GElf_Shdr sh;
                Elf_Data *d;

                if (!gelf_getshdr(scn, &sh))
                        return -EBADMSG;
                if (sh.sh_type != SHT_NOTE)
                        continue;
                if (!elf_range_fits(sh.sh_offset, sh.sh_size, file_size))
                        return -EBADMSG;
                d = elf_getdata(scn, NULL);
                if (!d)
                        return -EBADMSG;
                r = notes_find_build_id(d->d_buf, d->d_size, ret);
                if (r != -ENOENT)
                        return r;
        }
        if (elf_getphdrnum(elf, &phnum) < 0)
                return -EBADMSG;
        for (size_t i = 0; i < phnum; i++) {
                GElf_Phdr ph;
                Elf_Data *d;

                if (!gelf_getphdr(elf, (int) i, &ph))
                        return -EBADMSG;
                if (ph.p_type != PT_NOTE)
                        continue;
                if (!elf_range_fits(ph.p_offset, ph.p_filesz, file_size))
                        return -EBADMSG;
                d = elf_getdata_rawchunk(elf, (int64_t) ph.p_offset, ph.p_filesz, ELF_T_NHDR);
                if (!d)
                        return -EBADMSG;
                r = notes_find_build_id(d->d_buf, d->d_size, ret);
                if (r != -ENOENT)
                        return r;
        }
        return -ENOENT;
}

int elfsyms_build_id(int fd, char ret_hex[static BUILD_ID_HEX_MAX]) {
        Elf64_Ehdr eh;
        Elf64_Phdr ph[64];
        uint8_t notes[4096];
        size_t n;
        ssize_t l;

        l = pread(fd, &eh, sizeof eh, 0);
        if (l < 0)
                return negative_errno();
        if ((size_t) l < sizeof eh || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
            eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
            eh.e_phentsize != sizeof(Elf64_Phdr))
                return -EBADMSG;
        n = MIN((size_t) eh.e_phnum, ELEMENTSOF(ph));
        l = pread(fd, ph, n * sizeof(Elf64_Phdr), (off_t) eh.e_phoff);
        if (l < 0)
                return negative_errno();
        if ((size_t) l < n * sizeof(Elf64_Phdr) || eh.e_phoff > INT64_MAX)
                return -EBADMSG;
        for (size_t i = 0; i < n; i++) {
                int r;

                if (ph[i].p_type != PT_NOTE || ph[i].p_offset > INT64_MAX)
                        continue;
                l = pread(fd, notes, MIN(ph[i].p_filesz, (uint64_t) sizeof notes), (off_t) ph[i].p_offset);
                if (l < 0)
                        return negative_errno();
                r = notes_find_build_id(notes, (size_t) l, ret_hex);
                if (r != -ENOENT && r != -EBADMSG)
                        return r;
        }
        return -ENOENT;
}

/* An executable PT_LOAD segment: file bytes [offset, offset + size) are
 * mapped at [vaddr, vaddr + size). */
typedef struct segment {
        uint64_t vaddr, offset, size;
} segment;

typedef struct collector {
        elfsym *v;
        size_t n, alloc;
        char *strings;
        size_t strings_size, strings_alloc;
        uint8_t *global;        /* per entry: 1 for STB_GLOBAL/STB_WEAK */
        size_t global_alloc;
} collector;

static void collector_done(collector *c) {
        free(c->v);
        free(c->strings);
        free(c->global);
}

static int collector_add(collector *c, uint64_t offset, uint64_t size, const char *name, bool global) {
        _cleanup_free_ char *demangled = NULL;
        size_t len;

        if (name[0] == '_' && name[1] == 'Z' && strnlen(name, DEMANGLE_MAX_INPUT + 1) <= DEMANGLE_MAX_INPUT) {
                int status;

                demangled = __cxa_demangle(name, NULL, NULL, &status);
                if (demangled && status == 0)
                        name = demangled;
        }
        len = strnlen(name, NAME_MAX_BYTES - 1);

        if (c->n >= ELFSYMS_MAX_SYMBOLS)
                return -EFBIG;
        if (c->strings_size + len + 1 > ELFSYMS_MAX_STRINGS)
                return -EFBIG;
        if (GREEDY_REALLOC(c->v, c->alloc, c->n + 1) < 0 ||
            GREEDY_REALLOC(c->global, c->global_alloc, c->n + 1) < 0 ||
            GREEDY_REALLOC(c->strings, c->strings_alloc, c->strings_size + len + 1) < 0)
                return -ENOMEM;
        memcpy(c->strings + c->strings_size, name, len);
        c->strings[c->strings_size + len] = 0;
        c->v[c->n] = (elfsym) {
                .offset = offset,
                .size = (uint32_t) MIN(size, (uint64_t) UINT32_MAX),
                .name = (uint32_t) c->strings_size,
        };
        c->global[c->n] = global;
        c->strings_size += len + 1;
        c->n++;
        return 0;
}

/* The functions of the first section of type `type`; 0 with none added if
 * there is no such section. */
static int collect(Elf *elf, uint64_t file_size, Elf64_Word type, const segment *segs, size_t n_segs,
                   collector *c) {
        size_t shstrndx_unused;

        if (elf_getshdrstrndx(elf, &shstrndx_unused) < 0)
                return 0;       /* no section headers at all */
        for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
                GElf_Shdr sh;
                Elf_Data *d;
                size_t n;

                if (!gelf_getshdr(scn, &sh))
                        return -EBADMSG;
                if (sh.sh_type != type)
                        continue;
                if (sh.sh_entsize != sizeof(Elf64_Sym) || !elf_range_fits(sh.sh_offset, sh.sh_size, file_size))
                        return -EBADMSG;
                {
                        /* The names' section: its size bounds what
                         * elf_strptr() reads into memory. */
                        Elf_Scn *strs = elf_getscn(elf, sh.sh_link);
                        GElf_Shdr ssh;

                        if (!strs || !gelf_getshdr(strs, &ssh) || !elf_range_fits(ssh.sh_offset, ssh.sh_size, file_size))
                                return -EBADMSG;
                        if (sh.sh_size > ELFSYMS_MAX_SECTION || ssh.sh_size > ELFSYMS_MAX_SECTION)
                                return -EFBIG;
                }
                d = elf_getdata(scn, NULL);
                if (!d)
                        return -EBADMSG;
                n = d->d_size / sizeof(Elf64_Sym);
                for (size_t i = 1; i < n; i++) {
                        GElf_Sym sym;
                        const char *name;
                        int t, r;

                        if (!gelf_getsym(d, (int) i, &sym))
                                return -EBADMSG;
                        t = GELF_ST_TYPE(sym.st_info);
                        if ((t != STT_FUNC && t != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF || sym.st_value == 0)
                                continue;
                        name = elf_strptr(elf, sh.sh_link, sym.st_name);
                        if (!name || !*name)
                                continue;
                        for (size_t k = 0; k < n_segs; k++) {
                                const segment *sg = segs + k;

                                if (sym.st_value < sg->vaddr || sym.st_value - sg->vaddr >= sg->size)
                                        continue;
                                r = collector_add(c, sg->offset + (sym.st_value - sg->vaddr), sym.st_size, name,
                                                  GELF_ST_BIND(sym.st_info) != STB_LOCAL);
                                if (r < 0)
                                        return r;
                                break;
                        }
                }
                return 0;
        }
        return 0;
}

/* Entries sorted with their binding: a global name before a local alias
 * at the same offset, then by name. */
typedef struct sort_item {
        elfsym e;
        bool global;
        const char *strings;
} sort_item;

static int item_cmp(const void *x, const void *y) {
        const sort_item *a = x, *b = y;

        if (a->e.offset != b->e.offset)
                return a->e.offset < b->e.offset ? -1 : 1;
        if (a->global != b->global)
                return a->global ? -1 : 1;
        return strcmp(a->strings + a->e.name, b->strings + b->e.name);
}

static int finish(collector *c, elfsyms *s) {
        _cleanup_free_ sort_item *items = NULL;
        size_t m = 0;

        if (c->n > 0) {
                items = calloc(c->n, sizeof *items);
                if (!items)
                        return -ENOMEM;
                for (size_t i = 0; i < c->n; i++)
                        items[i] = (sort_item) { c->v[i], c->global[i], c->strings };
                qsort(items, c->n, sizeof *items, item_cmp);
                for (size_t i = 0; i < c->n; i++)
                        if (m == 0 || items[i].e.offset != c->v[m - 1].offset)
                                c->v[m++] = items[i].e;
        }
        s->v = TAKE_PTR(c->v);
        s->n = m;
        s->strings = TAKE_PTR(c->strings);
        s->strings_size = c->strings_size;
        if (!s->strings) {
                s->strings = calloc(1, 1);
                if (!s->strings)
                        return -ENOMEM;
                s->strings_size = 1;
        }
        return 0;
}

static int read_segments(Elf *elf, uint64_t file_size, segment **ret, size_t *ret_n) {
        _cleanup_free_ segment *v = NULL;
        size_t phnum, n = 0, alloc = 0;

        if (elf_getphdrnum(elf, &phnum) < 0)
                return -EBADMSG;
        for (size_t i = 0; i < phnum; i++) {
                GElf_Phdr ph;

                if (!gelf_getphdr(elf, (int) i, &ph))
                        return -EBADMSG;
                if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X) || ph.p_filesz == 0)
                        continue;
                if (!elf_range_fits(ph.p_offset, ph.p_filesz, file_size) || ph.p_vaddr + ph.p_filesz < ph.p_vaddr)
                        return -EBADMSG;
                if (GREEDY_REALLOC(v, alloc, n + 1) < 0)
                        return -ENOMEM;
                v[n++] = (segment) { ph.p_vaddr, ph.p_offset, ph.p_filesz };
        }
        *ret = TAKE_PTR(v);
        *ret_n = n;
        return 0;
}

int elfsyms_read(int fd, const char *want_build_id, int debug_fd, elfsyms **ret) {
        _cleanup_(elf_endp) Elf *elf = NULL, *dbg = NULL;
        _cleanup_(elfsyms_freep) elfsyms *s = NULL;
        _cleanup_free_ segment *segs = NULL;
        _cleanup_(collector_done) collector c = {};
        uint64_t size, dbg_size = 0;
        GElf_Ehdr eh;
        size_t n_segs;
        int r;

        r = open_elf(fd, &elf, &size);
        if (r < 0)
                return r;
        if (!gelf_getehdr(elf, &eh) || (eh.e_type != ET_EXEC && eh.e_type != ET_DYN))
                return -EBADMSG;

        s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        r = find_build_id(elf, size, s->build_id);
        if (r == -ENOENT)
                s->build_id[0] = 0;
        else if (r < 0)
                return r;
        if (want_build_id && *want_build_id && !streq(want_build_id, s->build_id))
                return -ESTALE;

        r = read_segments(elf, size, &segs, &n_segs);
        if (r < 0)
                return r;

        if (debug_fd >= 0) {
                char dbg_id[BUILD_ID_HEX_MAX];

                r = open_elf(debug_fd, &dbg, &dbg_size);
                if (r < 0)
                        return r;
                r = find_build_id(dbg, dbg_size, dbg_id);
                if (r < 0 && r != -ENOENT)
                        return r;
                if (r == -ENOENT || !streq(dbg_id, s->build_id))
                        return -ESTALE;
                r = collect(dbg, dbg_size, SHT_SYMTAB, segs, n_segs, &c);
                if (r < 0)
                        return r;
                s->source = ELFSYMS_DEBUG;
        } else {
                r = collect(elf, size, SHT_SYMTAB, segs, n_segs, &c);
                if (r < 0)
                        return r;
                s->source = ELFSYMS_SYMTAB;
                if (c.n == 0) {
                        r = collect(elf, size, SHT_DYNSYM, segs, n_segs, &c);
                        if (r < 0)
                                return r;
                        s->source = ELFSYMS_DYNSYM;
                }
        }
        if (c.n == 0)
                s->source = ELFSYMS_NONE;
        r = finish(&c, s);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(s);
        return 0;
}

const elfsym *elfsyms_lookup(const elfsyms *s, uint64_t offset) {
        size_t lo = 0, hi = s->n;
        const elfsym *e;

        /* The last entry starting at or before offset. */
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (s->v[mid].offset <= offset)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        if (lo == 0)
                return NULL;
        e = s->v + lo - 1;
        if (e->size != 0)
                return offset - e->offset < e->size ? e : NULL;
        /* Size unknown: up to the next entry, and no further than the last
         * one of them could reasonably reach. */
        return lo < s->n || offset - e->offset < 4096 ? e : NULL;
}

/* ---- the file ---- */

static void put32(char *p, uint32_t v) {
        v = htole32(v);
        memcpy(p, &v, 4);
}

static void put64(char *p, uint64_t v) {
        v = htole64(v);
        memcpy(p, &v, 8);
}

static uint32_t get32(const char *p) {
        uint32_t v;

        memcpy(&v, p, 4);
        return le32toh(v);
}

static uint64_t get64(const char *p) {
        uint64_t v;

        memcpy(&v, p, 8);
        return le64toh(v);
}

int elfsyms_encode(const elfsyms *s, char **ret, size_t *ret_size) {
        size_t size;
        char *p, *buf;

        if (s->n > ELFSYMS_MAX_SYMBOLS || s->strings_size == 0 || s->strings_size > UINT32_MAX)
                return -EINVAL;
        size = HEADER_SIZE + s->n * ENTRY_SIZE + s->strings_size;
        if (size > ELFSYMS_FILE_MAX)
                return -EFBIG;
        buf = calloc(1, size);
        if (!buf)
                return -ENOMEM;
        memcpy(buf, "PSNSYMS1", 8);
        put32(buf + 8, (uint32_t) s->n);
        put32(buf + 12, (uint32_t) s->strings_size);
        put32(buf + 16, s->source);
        memcpy(buf + 24, s->build_id, strnlen(s->build_id, BUILD_ID_HEX_MAX - 1));
        p = buf + HEADER_SIZE;
        for (size_t i = 0; i < s->n; i++, p += ENTRY_SIZE) {
                put64(p, s->v[i].offset);
                put32(p + 8, s->v[i].size);
                put32(p + 12, s->v[i].name);
        }
        memcpy(p, s->strings, s->strings_size);
        *ret = buf;
        *ret_size = size;
        return 0;
}

int elfsyms_decode(const void *data, size_t size, elfsyms **ret) {
        _cleanup_(elfsyms_freep) elfsyms *s = NULL;
        const char *d = data, *p;
        uint32_t n, ssize, source;

        if (size < HEADER_SIZE || size > ELFSYMS_FILE_MAX || memcmp(d, "PSNSYMS1", 8) != 0)
                return -EBADMSG;
        n = get32(d + 8);
        ssize = get32(d + 12);
        source = get32(d + 16);
        if (n > ELFSYMS_MAX_SYMBOLS || ssize == 0 || get32(d + 20) != 0 ||
            source < ELFSYMS_SYMTAB || source > ELFSYMS_NONE ||
            (uint64_t) HEADER_SIZE + (uint64_t) n * ENTRY_SIZE + ssize != size)
                return -EBADMSG;
        /* The build-id: lowercase hex, NUL-padded. */
        for (size_t i = 0; i < 48; i++) {
                char ch = d[24 + i];

                if (i >= BUILD_ID_HEX_MAX - 1 ? ch != 0 : (ch != 0 && !((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))))
                        return -EBADMSG;
                if (ch == 0 && i < 47 && d[24 + i + 1] != 0)
                        return -EBADMSG;
        }
        p = d + HEADER_SIZE + (size_t) n * ENTRY_SIZE;
        if (p[ssize - 1] != 0)
                return -EBADMSG;

        s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        memcpy(s->build_id, d + 24, BUILD_ID_HEX_MAX - 1);
        s->source = (elfsyms_source) source;
        s->strings = malloc(ssize);
        s->v = calloc(MAX(n, 1u), sizeof(elfsym));
        if (!s->strings || !s->v)
                return -ENOMEM;
        memcpy(s->strings, p, ssize);
        s->strings_size = ssize;
        p = d + HEADER_SIZE;
        for (size_t i = 0; i < n; i++, p += ENTRY_SIZE) {
                elfsym e = { get64(p), get32(p + 8), get32(p + 12) };

                if (e.name >= ssize || (i > 0 && e.offset <= s->v[i - 1].offset))
                        return -EBADMSG;
                s->v[i] = e;
        }
        s->n = n;
        *ret = TAKE_PTR(s);
        return 0;
}
