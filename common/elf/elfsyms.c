/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Function tables of user-space ELF files (elfsyms.h): extracted with
 * libelf and libdw, kept as a small file by build-id. */

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elf/elfsyms.h"
#include "elf/elfutil.h"
#include "hashmap.h"
#include "macro.h"

#define NAME_MAX_BYTES 4096     /* longer names (none seen in practice) are cut */
/* Mangled names longer than this are kept mangled: the demangler recurses
 * with the name's nesting, and the names come from any file a process
 * maps. */
#define DEMANGLE_MAX_INPUT 1024

/* libstdc++'s demangler (the C++ ABI's); malloc'ed result or NULL. */
char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);
#define HEADER_SIZE (8 + 4 * 4 + 48)
#define ELFSYMS_MAX_OFFSET (UINT64_C(1) << 62)
#define ENTRY_SIZE 16
/* DIEs nested deeper than this (none in what compilers write) are not
 * visited: the walk recurses once a level. */
#define DWARF_MAX_DEPTH 128
/* Ranges a DIE may give (a function split into hot and cold parts has
 * two; the code of an inlined function in a loop a few). */
#define DWARF_MAX_RANGES 4096
/* A chain of inlined functions longer than this is cut. */
#define CHAIN_MAX 4096
/* DIEs visited and ranges read, in all, per file: a file made to cost more
 * (a range list thousands long shared by every DIE) keeps what was read
 * before. libpython3.11's DWARF has 677,489 DIEs (readelf --debug-dump=info),
 * about 4 % of it. */
#define DWARF_MAX_STEPS (16u * 1024u * 1024u)

elfsyms *elfsyms_free(elfsyms *s) {
        if (s) {
                free(s->v);
                free(s->inl);
                free(s->index);
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

/* Where a name comes from, in the order a name is preferred when several
 * start at one offset. */
enum {
        RANK_GLOBAL,    /* an ELF symbol of binding STB_GLOBAL or STB_WEAK */
        RANK_LOCAL,     /* an STB_LOCAL one */
        RANK_DWARF,     /* a DW_TAG_subprogram */
};

/* Code of an inlined function: file bytes [lo, hi), depth levels of
 * inlining deep, named by its chain (an offset in the strings). */
typedef struct inl_piece {
        uint64_t lo, hi;
        uint32_t depth, name;
} inl_piece;

typedef struct collector {
        elfsym *v;
        size_t n, alloc;
        uint8_t *rank;          /* per entry */
        size_t rank_alloc;
        inl_piece *inl;
        size_t n_inl, inl_alloc;
        char *strings;
        size_t strings_size, strings_alloc;
        hashmap *names;         /* name -> its offset in strings */
} collector;

static void collector_done(collector *c) {
        free(c->v);
        free(c->rank);
        free(c->inl);
        free(c->strings);
        hashmap_free(c->names);
}

/* name, or its demangled form (in *ret_free) if it is a C++ ABI name. */
static const char *demangle(const char *name, char **ret_free) {
        *ret_free = NULL;
        if (name[0] == '_' && name[1] == 'Z' && strnlen(name, DEMANGLE_MAX_INPUT + 1) <= DEMANGLE_MAX_INPUT) {
                int status;

                *ret_free = __cxa_demangle(name, NULL, NULL, &status);
                if (*ret_free && status == 0)
                        return *ret_free;
        }
        return name;
}

/* The offset of name (demangled if it is a C++ ABI name) in the strings,
 * added once. */
static int collector_string(collector *c, const char *name, uint32_t *ret) {
        _cleanup_free_ char *demangled = NULL;
        int64_t off;
        size_t len;
        int r;

        name = demangle(name, &demangled);
        len = strnlen(name, NAME_MAX_BYTES - 1);
        if (!c->names) {
                r = hashmap_new(&c->names);
                if (r < 0)
                        return r;
        }
        if (hashmap_get(c->names, name, len, &off) >= 0) {
                *ret = (uint32_t) off;
                return 0;
        }
        if (c->strings_size + len + 1 > ELFSYMS_MAX_STRINGS)
                return -EFBIG;
        if (GREEDY_REALLOC(c->strings, c->strings_alloc, c->strings_size + len + 1) < 0)
                return -ENOMEM;
        memcpy(c->strings + c->strings_size, name, len);
        c->strings[c->strings_size + len] = 0;
        r = hashmap_put(c->names, name, len, (int64_t) c->strings_size);
        if (r < 0)
                return r;
        *ret = (uint32_t) c->strings_size;
        c->strings_size += len + 1;
        return 0;
}

static int collector_add(collector *c, uint64_t offset, uint64_t size, const char *name, int rank) {
        uint32_t name_off;
        int r;

        if (c->n >= ELFSYMS_MAX_SYMBOLS)
                return -EFBIG;
        r = collector_string(c, name, &name_off);
        if (r < 0)
                return r;
        if (GREEDY_REALLOC(c->v, c->alloc, c->n + 1) < 0 ||
            GREEDY_REALLOC(c->rank, c->rank_alloc, c->n + 1) < 0)
                return -ENOMEM;
        c->v[c->n] = (elfsym) {
                .offset = offset,
                .size = (uint32_t) MIN(size, (uint64_t) UINT32_MAX),
                .name = name_off,
        };
        c->rank[c->n] = (uint8_t) rank;
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
                                                  GELF_ST_BIND(sym.st_info) != STB_LOCAL ? RANK_GLOBAL : RANK_LOCAL);
                                if (r < 0)
                                        return r;
                                break;
                        }
                }
                return 0;
        }
        return 0;
}

/* Entries sorted with their rank: at one offset, a global ELF name
 * before a local alias, an ELF name before a DWARF one, then by name. */
typedef struct sort_item {
        elfsym e;
        uint8_t rank;
        const char *strings;
} sort_item;

static int item_cmp(const void *x, const void *y) {
        const sort_item *a = x, *b = y;

        if (a->e.offset != b->e.offset)
                return a->e.offset < b->e.offset ? -1 : 1;
        if (a->rank != b->rank)
                return a->rank < b->rank ? -1 : 1;
        return strcmp(a->strings + a->e.name, b->strings + b->e.name);
}

static int piece_cmp(const void *x, const void *y) {
        const inl_piece *a = x, *b = y;

        if (a->lo != b->lo)
                return a->lo < b->lo ? -1 : 1;
        if (a->depth != b->depth)
                return a->depth < b->depth ? -1 : 1;
        return a->hi > b->hi ? -1 : a->hi < b->hi;
}

/* The inlined pieces made into entries that do not overlap: each stretch
 * of code is named by the deepest piece that covers it (the pieces of one
 * function nest; where a file's do not, by the last one that started and
 * covers it). Adjacent stretches of one name are joined. */
static int flatten_inlined(collector *c, elfsym **ret, size_t *ret_n) {
        _cleanup_free_ uint64_t *points = NULL;
        _cleanup_free_ size_t *stack = NULL;
        _cleanup_free_ elfsym *out = NULL;
        size_t n_points = 0, depth = 0, next = 0, n = 0, alloc = 0;

        *ret = NULL;
        *ret_n = 0;
        if (c->n_inl == 0)
                return 0;
        qsort(c->inl, c->n_inl, sizeof(inl_piece), piece_cmp);
        points = malloc(2 * c->n_inl * sizeof(uint64_t));
        stack = malloc(c->n_inl * sizeof(size_t));
        if (!points || !stack)
                return -ENOMEM;
        for (size_t i = 0; i < c->n_inl; i++) {
                points[n_points++] = c->inl[i].lo;
                points[n_points++] = c->inl[i].hi;
        }
        sort_u64(points, n_points);
        {
                size_t u = 0;

                for (size_t i = 0; i < n_points; i++)
                        if (u == 0 || points[i] != points[u - 1])
                                points[u++] = points[i];
                n_points = u;
        }

        for (size_t i = 0; i < n_points; i++) {
                uint64_t p = points[i], end;
                const inl_piece *top;

                while (depth > 0 && c->inl[stack[depth - 1]].hi <= p)
                        depth--;
                while (next < c->n_inl && c->inl[next].lo <= p) {
                        if (c->inl[next].hi > p)
                                stack[depth++] = next;
                        next++;
                }
                if (depth == 0 || i + 1 == n_points)
                        continue;
                top = c->inl + stack[depth - 1];
                end = MIN(points[i + 1], top->hi);
                if (n > 0 && out[n - 1].name == top->name && out[n - 1].offset + out[n - 1].size == p &&
                    (uint64_t) out[n - 1].size + (end - p) <= UINT32_MAX) {
                        out[n - 1].size += (uint32_t) (end - p);
                        continue;
                }
                if (end - p > UINT32_MAX)
                        continue;
                if (GREEDY_REALLOC(out, alloc, n + 1) < 0)
                        return -ENOMEM;
                out[n++] = (elfsym) { .offset = p, .size = (uint32_t) (end - p), .name = top->name };
        }
        *ret = TAKE_PTR(out);
        *ret_n = n;
        return 0;
}

static int build_index(elfsyms *s);

static int finish(collector *c, elfsyms *s) {
        _cleanup_free_ sort_item *items = NULL;
        size_t m = 0;
        int r;

        if (c->n > 0) {
                items = calloc(c->n, sizeof *items);
                if (!items)
                        return -ENOMEM;
                for (size_t i = 0; i < c->n; i++)
                        items[i] = (sort_item) { c->v[i], c->rank[i], c->strings };
                qsort(items, c->n, sizeof *items, item_cmp);
                for (size_t i = 0; i < c->n; i++)
                        if (m == 0 || items[i].e.offset != c->v[m - 1].offset) {
                                c->v[m++] = items[i].e;
                                s->n_dwarf += items[i].rank == RANK_DWARF;
                        }
        }
        r = flatten_inlined(c, &s->inl, &s->n_inl);
        if (r < 0)
                return r;
        /* Nested pieces can flatten into more entries than were read: a
         * table that would not fit its file keeps its functions only. */
        if (s->n_inl > ELFSYMS_MAX_SYMBOLS ||
            HEADER_SIZE + (m + s->n_inl) * ENTRY_SIZE + c->strings_size > ELFSYMS_FILE_MAX) {
                free(s->inl);
                s->inl = NULL;
                s->n_inl = 0;
        }
        s->v = TAKE_PTR(c->v);
        s->n = m;
        r = build_index(s);
        if (r < 0)
                return r;
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

/* The file offset of vaddr in an executable segment; the bytes of that
 * segment after it in *ret_room. */
static bool file_offset(const segment *segs, size_t n_segs, uint64_t vaddr, uint64_t *ret, uint64_t *ret_room) {
        for (size_t k = 0; k < n_segs; k++)
                if (vaddr >= segs[k].vaddr && vaddr - segs[k].vaddr < segs[k].size) {
                        *ret = segs[k].offset + (vaddr - segs[k].vaddr);
                        *ret_room = segs[k].size - (vaddr - segs[k].vaddr);
                        return true;
                }
        return false;
}

/* The section called name, or NULL. */
static Elf_Scn *section_by_name(Elf *elf, const char *name, GElf_Shdr *ret) {
        size_t shstrndx;

        if (elf_getshdrstrndx(elf, &shstrndx) < 0)
                return NULL;
        for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
                const char *n;

                if (!gelf_getshdr(scn, ret))
                        return NULL;
                n = elf_strptr(elf, shstrndx, ret->sh_name);
                if (n && streq(n, name))
                        return scn;
        }
        return NULL;
}

/* The bytes of a DWARF section as libdw holds them. */
typedef struct span {
        const char *start;
        size_t size;
} span;

#define DWARF_MAX_SPANS 64

typedef struct dwarf_walk {
        collector *c;
        const segment *segs;
        size_t n_segs;
        /* Where libdw's strings may point: a name is used only if its NUL
         * is inside one of them (libdw does not check that a string
         * section ends in one). */
        span spans[DWARF_MAX_SPANS];
        size_t n_spans;
        char chain[CHAIN_MAX];  /* the inlined functions around, outermost first */
        size_t chain_len;
        bool inl_full;          /* no more inlined pieces: at a bound */
        uint64_t budget;        /* steps left (DWARF_MAX_STEPS) */
} dwarf_walk;

/* The debug sections' data, once libdw has read them (dwarf_readable()
 * let no .zdebug_* section through). */
static void find_spans(dwarf_walk *w, Elf *elf) {
        size_t shstrndx;

        if (elf_getshdrstrndx(elf, &shstrndx) < 0)
                return;
        for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn && w->n_spans < DWARF_MAX_SPANS; scn = elf_nextscn(elf, scn)) {
                GElf_Shdr sh;
                const char *n;
                Elf_Data *d;

                if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
                        continue;
                n = elf_strptr(elf, shstrndx, sh.sh_name);
                if (!n || strncmp(n, ".debug_", 7) != 0)
                        continue;
                d = elf_getdata(scn, NULL);
                if (d && d->d_buf && d->d_size > 0)
                        w->spans[w->n_spans++] = (span) { d->d_buf, d->d_size };
        }
}

/* s, if it is a NUL-terminated string inside a debug section. */
static const char *checked_string(const dwarf_walk *w, const char *s) {
        if (!s)
                return NULL;
        for (size_t i = 0; i < w->n_spans; i++) {
                const span *sp = w->spans + i;

                if ((uintptr_t) s >= (uintptr_t) sp->start && (uintptr_t) s < (uintptr_t) sp->start + sp->size)
                        return memchr(s, 0, sp->size - (size_t) (s - sp->start)) ? s : NULL;
        }
        return NULL;
}

/* A function's name as the symbol tables give it: its linkage name
 * (demangled when it is added), else its name; through
 * DW_AT_abstract_origin and DW_AT_specification. */
static const char *die_name(const dwarf_walk *w, Dwarf_Die *die) {
        Dwarf_Attribute a;
        const char *n = NULL;

        if (dwarf_attr_integrate(die, DW_AT_linkage_name, &a) || dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a))
                n = checked_string(w, dwarf_formstring(&a));
        if (!n && dwarf_attr_integrate(die, DW_AT_name, &a))
                n = checked_string(w, dwarf_formstring(&a));
        return n && *n ? n : NULL;
}

/* Calls add() for each of the DIE's code ranges in an executable segment,
 * as file offsets. */
static int die_ranges(dwarf_walk *w, Dwarf_Die *die, int (*add)(dwarf_walk *w, uint64_t lo, uint64_t hi, void *arg),
                      void *arg) {
        Dwarf_Addr base, start, end;
        ptrdiff_t off = 0;

        for (unsigned k = 0; k < DWARF_MAX_RANGES; k++) {
                uint64_t lo, room;
                int r;

                if (w->budget == 0)
                        return -EFBIG;
                w->budget--;
                off = dwarf_ranges(die, off, &base, &start, &end);
                if (off <= 0)
                        break;
                if (start == 0 || end <= start || !file_offset(w->segs, w->n_segs, start, &lo, &room))
                        continue;
                r = add(w, lo, lo + MIN(end - start, room), arg);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int add_function(dwarf_walk *w, uint64_t lo, uint64_t hi, void *arg) {
        return collector_add(w->c, lo, hi - lo, arg, RANK_DWARF);
}

static int add_inlined(dwarf_walk *w, uint64_t lo, uint64_t hi, void *arg) {
        collector *c = w->c;

        if (w->inl_full)
                return 0;
        /* Half the table's bound: nested pieces can flatten into twice
         * as many entries. */
        if (c->n_inl >= ELFSYMS_MAX_SYMBOLS / 2) {
                w->inl_full = true;
                return 0;
        }
        if (GREEDY_REALLOC(c->inl, c->inl_alloc, c->n_inl + 1) < 0)
                return -ENOMEM;
        c->inl[c->n_inl++] = (inl_piece) { .lo = lo, .hi = hi, .depth = *(uint32_t *) arg, .name = 0 };
        return 0;
}

static int walk_children(dwarf_walk *w, Dwarf_Die *parent, unsigned level, uint32_t inl_depth);

/* An inlined function's code: named by the chain so far and its own
 * name, then what is inlined into it. */
static int walk_inlined(dwarf_walk *w, Dwarf_Die *die, unsigned level, uint32_t inl_depth) {
        _cleanup_free_ char *demangled = NULL;
        const char *name = demangle(die_name(w, die) ?: "[inlined]", &demangled);
        size_t saved = w->chain_len, first = w->c->n_inl, len = strnlen(name, NAME_MAX_BYTES - 1);
        uint32_t name_off, depth = inl_depth + 1;
        int r;

        if (w->chain_len + 2 < sizeof w->chain) {
                /* What fits of the name (the chain stays what it says,
                 * cut at its end). */
                if (w->chain_len > 0)
                        w->chain[w->chain_len++] = ';';
                len = MIN(len, sizeof w->chain - 1 - w->chain_len);
                memcpy(w->chain + w->chain_len, name, len);
                w->chain_len += len;
        }
        w->chain[w->chain_len] = 0;
        r = w->inl_full ? 0 : die_ranges(w, die, add_inlined, &depth);
        if (r >= 0 && w->c->n_inl > first) {
                r = collector_string(w->c, w->chain, &name_off);
                if (r == -EFBIG) {
                        w->inl_full = true;
                        w->c->n_inl = first;
                        r = 0;
                } else
                        for (size_t i = first; r >= 0 && i < w->c->n_inl; i++)
                                w->c->inl[i].name = name_off;
        }
        if (r >= 0)
                r = walk_children(w, die, level + 1, depth);
        w->chain_len = saved;
        w->chain[saved] = 0;
        return r;
}

static int walk_children(dwarf_walk *w, Dwarf_Die *parent, unsigned level, uint32_t inl_depth) {
        Dwarf_Die die;
        int r = 0;

        if (level >= DWARF_MAX_DEPTH || dwarf_child(parent, &die) != 0)
                return 0;
        do {
                if (w->budget == 0)
                        return -EFBIG;
                w->budget--;
                switch (dwarf_tag(&die)) {
                case DW_TAG_subprogram: {
                        const char *name = die_name(w, &die);
                        size_t saved = w->chain_len;

                        if (name) {
                                r = die_ranges(w, &die, add_function, (void *) name);
                                if (r < 0)
                                        return r;
                        }
                        /* What is inlined into it is named apart from it. */
                        w->chain_len = 0;
                        w->chain[0] = 0;
                        r = walk_children(w, &die, level + 1, 0);
                        w->chain_len = saved;
                        w->chain[saved] = 0;
                        break;
                }
                case DW_TAG_inlined_subroutine:
                        r = walk_inlined(w, &die, level, inl_depth);
                        break;
                case DW_TAG_lexical_block:
                case DW_TAG_namespace:
                case DW_TAG_module:
                case DW_TAG_class_type:
                case DW_TAG_structure_type:
                        r = walk_children(w, &die, level + 1, inl_depth);
                        break;
                default:
                        break;
                }
                if (r < 0)
                        return r;
        } while (dwarf_siblingof(&die, &die) == 0);
        return 0;
}

/* Whether libdw may read elf's DWARF: there is a .debug_info; every debug
 * section, which libdw reads into memory (decompressed), fits in the file
 * and in ELFSYMS_MAX_DWARF bytes in all; and nothing would make libdw open
 * another file (.gnu_debugaltlink: dwz's shared file, by a path this file
 * names, opened as it is) or read data whose size is not checked first
 * (.zdebug_*, GNU's old compression). */
static bool dwarf_readable(Elf *elf, uint64_t file_size) {
        size_t shstrndx;
        uint64_t total = 0;
        bool info = false;

        if (elf_getshdrstrndx(elf, &shstrndx) < 0)
                return false;
        for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
                GElf_Shdr sh;
                const char *n;
                uint64_t size;

                if (!gelf_getshdr(scn, &sh))
                        return false;
                n = elf_strptr(elf, shstrndx, sh.sh_name);
                if (!n)
                        continue;
                if (streq(n, ".gnu_debugaltlink") || strncmp(n, ".zdebug", 7) == 0)
                        return false;
                if (strncmp(n, ".debug_", 7) != 0 || sh.sh_type == SHT_NOBITS)
                        continue;
                if (!elf_range_fits(sh.sh_offset, sh.sh_size, file_size))
                        return false;
                size = sh.sh_size;
                if (sh.sh_flags & SHF_COMPRESSED) {
                        GElf_Chdr ch;

                        if (!gelf_getchdr(scn, &ch))
                                return false;
                        size = ch.ch_size;
                }
                if (size > ELFSYMS_MAX_DWARF || (total += size) > ELFSYMS_MAX_DWARF)
                        return false;
                info = info || streq(n, ".debug_info");
        }
        return info;
}

/* The functions and inlined code DWARF describes, if libdw may read it
 * (dwarf_readable()). Best effort: what an error or a bound stops leaves
 * what was collected before it. */
static int collect_dwarf(Elf *elf, uint64_t file_size, const segment *segs, size_t n_segs, collector *c) {
        Dwarf *dw;
        Dwarf_Off off = 0, next;
        size_t hsize;
        dwarf_walk *w;
        int r = 0;

        if (!dwarf_readable(elf, file_size))
                return 0;
        w = calloc(1, sizeof *w);
        if (!w)
                return -ENOMEM;
        *w = (dwarf_walk) { .c = c, .segs = segs, .n_segs = n_segs, .budget = DWARF_MAX_STEPS };
        dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
        if (dw) {
                find_spans(w, elf);
                while (r >= 0 && dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
                        Dwarf_Die cu;

                        if (dwarf_offdie(dw, off + hsize, &cu))
                                r = walk_children(w, &cu, 0, 0);
                        off = next;
                }
                dwarf_end(dw);
        }
        free(w);
        /* A bound met: the table keeps what it has. */
        return r == -EFBIG ? 0 : r;
}

int elfsyms_debuglink(int fd, char ret[static 256]) {
        _cleanup_(elf_endp) Elf *elf = NULL;
        Elf_Scn *scn;
        GElf_Shdr sh;
        Elf_Data *d;
        uint64_t size;
        size_t len;
        int r;

        r = open_elf(fd, &elf, &size);
        if (r < 0)
                return r;
        scn = section_by_name(elf, ".gnu_debuglink", &sh);
        if (!scn)
                return -ENOENT;
        if (sh.sh_type != SHT_PROGBITS || !elf_range_fits(sh.sh_offset, sh.sh_size, size) || sh.sh_size > 4096)
                return -EBADMSG;
        d = elf_getdata(scn, NULL);
        if (!d || !d->d_buf)
                return -EBADMSG;
        len = strnlen(d->d_buf, d->d_size);
        if (len == 0 || len >= d->d_size || len > 255 || memchr(d->d_buf, '/', len) ||
            streq(d->d_buf, ".") || streq(d->d_buf, ".."))
                return -EBADMSG;
        memcpy(ret, d->d_buf, len + 1);
        return 0;
}

int elfsyms_read(int fd, const char *want_build_id, int debug_fd, elfsyms **ret) {
        _cleanup_(elf_endp) Elf *elf = NULL, *dbg = NULL;
        _cleanup_(elfsyms_freep) elfsyms *s = NULL;
        _cleanup_free_ segment *segs = NULL;
        _cleanup_(collector_done) collector c = {};
        uint64_t size, dbg_size = 0;
        GElf_Ehdr eh;
        size_t n_segs, n_elf;
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
                n_elf = c.n;
                r = collect_dwarf(dbg, dbg_size, segs, n_segs, &c);
                if (r < 0)
                        return r;
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
                n_elf = c.n;
                r = collect_dwarf(elf, size, segs, n_segs, &c);
                if (r < 0)
                        return r;
        }
        if (n_elf == 0)
                s->source = c.n > 0 ? ELFSYMS_DWARF : ELFSYMS_NONE;
        r = finish(&c, s);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(s);
        return 0;
}

/* The number of entries starting at or before offset. */
static size_t upper_bound(const elfsym *v, size_t n, uint64_t offset) {
        size_t lo = 0, hi = n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (v[mid].offset <= offset)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

/* Tables with fewer entries are searched whole. */
#define INDEX_MIN_ENTRIES 64

/* Pages of 4 KiB or more, at most one per entry: 4 bytes an entry. */
static int build_index(elfsyms *s) {
        uint64_t range;
        size_t k = 0;

        if (s->n < INDEX_MIN_ENTRIES)
                return 0;
        s->base = s->v[0].offset;
        range = s->v[s->n - 1].offset - s->base;
        s->shift = 12;
        while (s->shift < 63 && (range >> s->shift) + 1 > s->n)
                s->shift++;
        s->n_index = (size_t) (range >> s->shift) + 1;
        s->index = malloc((s->n_index + 1) * sizeof(uint32_t));
        if (!s->index)
                return -ENOMEM;
        for (size_t p = 0; p <= s->n_index; p++) {
                uint64_t start = s->base + ((uint64_t) p << s->shift);

                while (k < s->n && s->v[k].offset < start)
                        k++;
                s->index[p] = (uint32_t) k;
        }
        return 0;
}

const char *elfsyms_inlined(const elfsyms *s, uint64_t offset) {
        size_t i = upper_bound(s->inl, s->n_inl, offset);

        if (i == 0 || offset - s->inl[i - 1].offset >= s->inl[i - 1].size)
                return NULL;
        return s->strings + s->inl[i - 1].name;
}

const elfsym *elfsyms_lookup(const elfsyms *s, uint64_t offset) {
        const elfsym *e;
        size_t lo;

        if (!s->index)
                lo = upper_bound(s->v, s->n, offset);
        else if (offset < s->base)
                lo = 0;
        else if ((offset - s->base) >> s->shift >= s->n_index)
                lo = s->n;
        else {
                /* Those starting before the page, and those in it up to
                 * offset. */
                size_t p = (size_t) ((offset - s->base) >> s->shift), first = s->index[p];

                lo = first + upper_bound(s->v + first, s->index[p + 1] - first, offset);
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

int elfsyms_encode(const elfsyms *s, char **ret, size_t *ret_size) {
        size_t size;
        char *p, *buf;

        if (s->n > ELFSYMS_MAX_SYMBOLS || s->n_inl > ELFSYMS_MAX_SYMBOLS || s->strings_size == 0 ||
            s->strings_size > UINT32_MAX)
                return -EINVAL;
        size = HEADER_SIZE + (s->n + s->n_inl) * ENTRY_SIZE + s->strings_size;
        if (size > ELFSYMS_FILE_MAX)
                return -EFBIG;
        buf = calloc(1, size);
        if (!buf)
                return -ENOMEM;
        memcpy(buf, "PSNSYMS2", 8);
        unaligned_write_le32(buf + 8, (uint32_t) s->n);
        unaligned_write_le32(buf + 12, (uint32_t) s->strings_size);
        unaligned_write_le32(buf + 16, s->source);
        unaligned_write_le32(buf + 20, (uint32_t) s->n_inl);
        memcpy(buf + 24, s->build_id, strnlen(s->build_id, BUILD_ID_HEX_MAX - 1));
        p = buf + HEADER_SIZE;
        for (size_t i = 0; i < s->n + s->n_inl; i++, p += ENTRY_SIZE) {
                const elfsym *e = i < s->n ? s->v + i : s->inl + (i - s->n);

                unaligned_write_le64(p, e->offset);
                unaligned_write_le32(p + 8, e->size);
                unaligned_write_le32(p + 12, e->name);
        }
        memcpy(p, s->strings, s->strings_size);
        *ret = buf;
        *ret_size = size;
        return 0;
}

int elfsyms_decode(const void *data, size_t size, elfsyms **ret) {
        _cleanup_(elfsyms_freep) elfsyms *s = NULL;
        const char *d = data, *p;
        uint32_t n, n_inl, ssize, source;
        bool v1;

        if (size < HEADER_SIZE || size > ELFSYMS_FILE_MAX)
                return -EBADMSG;
        v1 = memcmp(d, "PSNSYMS1", 8) == 0;
        if (!v1 && memcmp(d, "PSNSYMS2", 8) != 0)
                return -EBADMSG;
        n = unaligned_read_le32(d + 8);
        ssize = unaligned_read_le32(d + 12);
        source = unaligned_read_le32(d + 16);
        n_inl = unaligned_read_le32(d + 20);  /* reserved, 0, in the first version */
        if (n > ELFSYMS_MAX_SYMBOLS || n_inl > ELFSYMS_MAX_SYMBOLS || ssize == 0 || (v1 && n_inl != 0) ||
            source < ELFSYMS_SYMTAB || source > (v1 ? ELFSYMS_NONE : ELFSYMS_DWARF) ||
            (uint64_t) HEADER_SIZE + ((uint64_t) n + n_inl) * ENTRY_SIZE + ssize != size)
                return -EBADMSG;
        /* The build-id: lowercase hex, NUL-padded. */
        for (size_t i = 0; i < 48; i++) {
                char ch = d[24 + i];

                if (i >= BUILD_ID_HEX_MAX - 1 ? ch != 0 : (ch != 0 && !((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))))
                        return -EBADMSG;
                if (ch == 0 && i < 47 && d[24 + i + 1] != 0)
                        return -EBADMSG;
        }
        p = d + HEADER_SIZE + ((size_t) n + n_inl) * ENTRY_SIZE;
        if (p[ssize - 1] != 0)
                return -EBADMSG;

        s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        memcpy(s->build_id, d + 24, BUILD_ID_HEX_MAX - 1);
        s->source = (elfsyms_source) source;
        s->strings = malloc(ssize);
        s->v = calloc(MAX(n, 1u), sizeof(elfsym));
        s->inl = calloc(MAX(n_inl, 1u), sizeof(elfsym));
        if (!s->strings || !s->v || !s->inl)
                return -ENOMEM;
        memcpy(s->strings, p, ssize);
        s->strings_size = ssize;
        p = d + HEADER_SIZE;
        for (size_t i = 0; i < n; i++, p += ENTRY_SIZE) {
                elfsym e = { unaligned_read_le64(p), unaligned_read_le32(p + 8), unaligned_read_le32(p + 12) };

                /* File offsets: far below 2^62 (so the index's pages
                 * never wrap). */
                if (e.name >= ssize || e.offset >= ELFSYMS_MAX_OFFSET || (i > 0 && e.offset <= s->v[i - 1].offset))
                        return -EBADMSG;
                s->v[i] = e;
        }
        s->n = n;
        for (size_t i = 0; i < n_inl; i++, p += ENTRY_SIZE) {
                elfsym e = { unaligned_read_le64(p), unaligned_read_le32(p + 8), unaligned_read_le32(p + 12) };

                /* Sorted, of a size, none overlapping the one before. */
                if (e.name >= ssize || e.size == 0 || e.offset >= ELFSYMS_MAX_OFFSET ||
                    (i > 0 && e.offset < s->inl[i - 1].offset + s->inl[i - 1].size))
                        return -EBADMSG;
                s->inl[i] = e;
        }
        s->n_inl = n_inl;
        if (build_index(s) < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(s);
        return 0;
}
