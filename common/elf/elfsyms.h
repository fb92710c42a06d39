/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* Function tables of user-space ELF files, by file offset: what names a
 * user frame, which the store keys by (file, build-id, file offset).
 *
 * elfsyms_read() extracts one from a 64-bit executable or shared object
 * (with libelf): the functions of its .symtab, else of its .dynsym, or of
 * a separate debug file's .symtab; then, from the DWARF of the same file
 * (with libdw), the functions no ELF symbol names and the code ranges of
 * inlined functions. Addresses are turned into file offsets through the
 * executable PT_LOAD segments of the file itself. elfsyms_encode() and
 * elfsyms_decode() keep a table in a small file of its own (below), so a
 * frame stays named after its binary is deleted or upgraded. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernel/notes.h"      /* BUILD_ID_HEX_MAX */

typedef enum elfsyms_source {
        ELFSYMS_SYMTAB = 1,     /* the file's .symtab */
        ELFSYMS_DYNSYM = 2,     /* the file's .dynsym (stripped files) */
        ELFSYMS_DEBUG = 3,      /* the .symtab of a separate debug file */
        ELFSYMS_NONE = 4,       /* no function symbols: a table without entries */
        ELFSYMS_DWARF = 5,      /* no ELF function symbols; DWARF (the file's or its debug file's) named them */
} elfsyms_source;

typedef struct elfsym {
        uint64_t offset;        /* file offset of the function's start */
        uint32_t size;          /* bytes (st_size, capped); 0: up to the next entry */
        uint32_t name;          /* offset in strings */
} elfsym;

typedef struct elfsyms {
        elfsym *v;              /* sorted by offset, no two with one offset */
        size_t n;
        char *strings;          /* NUL-terminated names */
        size_t strings_size;
        /* Code of inlined functions: pieces sorted by offset, none
         * overlapping, each of its size (never 0), named by the chain of
         * functions inlined there, outermost first, separated by ';' (the
         * function the piece is in, which v names, not included). */
        elfsym *inl;
        size_t n_inl;
        char build_id[BUILD_ID_HEX_MAX];        /* "" if the file has none */
        elfsyms_source source;
        size_t n_dwarf;         /* entries of v named by DWARF only (not kept in the file) */
        /* Lookup index, made by elfsyms_read() and elfsyms_decode() (not
         * kept in the file): index[p] is the number of entries of v that
         * start before base + (p << shift), for p in [0, n_index]. NULL
         * for a small table. */
        uint32_t *index;
        size_t n_index;
        unsigned shift;
        uint64_t base;
} elfsyms;

elfsyms *elfsyms_free(elfsyms *s);

/* The NT_GNU_BUILD_ID of the ELF file at fd, lowercase hex, from its
 * PT_NOTE segments (where every linker puts it), with a few preads and no
 * libelf: cheap enough for the draining loop. 0, -ENOENT if it has none,
 * -EBADMSG if it is not a 64-bit ELF file or its headers do not fit. */
int elfsyms_build_id(int fd, char ret_hex[static BUILD_ID_HEX_MAX]);

/* The file name a .gnu_debuglink section names (the separate debug file,
 * to look for beside the file, in its .debug/ directory or under a debug
 * root); -ENOENT without one, -EBADMSG if it is not a plain file name (no
 * '/', not "." or ".."). Its CRC is not checked: elfsyms_read() checks the
 * debug file's build-id instead. */
int elfsyms_debuglink(int fd, char ret[static 256]);

/* Reads the function table of the ELF file at fd. want_build_id (NULL or
 * "" for any): the file's build-id must be this one, else -ESTALE (another
 * build of the file). debug_fd (-1 for none): a separate debug file whose
 * .symtab and DWARF are used instead of fd's, if its build-id is the
 * file's (else -ESTALE). DWARF is read when the file used has a
 * .debug_info, its debug sections take at most ELFSYMS_MAX_DWARF bytes,
 * and it has no .gnu_debugaltlink (dwz) or .zdebug_* sections; what it
 * cannot give (an error in it, a bound on the work, beyond
 * ELFSYMS_MAX_SYMBOLS inlined pieces) leaves the ELF symbols as they
 * are. Only symbols of type STT_FUNC or STT_GNU_IFUNC inside an
 * executable PT_LOAD segment are kept; when several share an offset, the
 * global one, then the first by name. -EBADMSG for a file that is not a
 * 64-bit little-endian ELF executable or shared object, or whose headers
 * or tables do not fit in it; -EFBIG beyond ELFSYMS_MAX_SYMBOLS functions,
 * ELFSYMS_MAX_STRINGS bytes of names or sections of ELFSYMS_MAX_SECTION.
 * The file is read with pread, never mapped: a file its owner truncates
 * meanwhile gives an error, not a SIGBUS. */
#define ELFSYMS_MAX_SYMBOLS (1024u * 1024u)
/* Bytes of names a table may hold; a symbol table section (or its string
 * table) larger than ELFSYMS_MAX_SECTION is not read (-EFBIG). */
#define ELFSYMS_MAX_STRINGS ((size_t) 32 * 1024 * 1024)
#define ELFSYMS_MAX_SECTION ((uint64_t) 256 * 1024 * 1024)
/* libdw holds the debug sections in memory while they are read: at most
 * this many bytes of them in all (decompressed). */
#define ELFSYMS_MAX_DWARF ((uint64_t) 64 * 1024 * 1024)
int elfsyms_read(int fd, const char *want_build_id, int debug_fd, elfsyms **ret);

/* The entry covering a file offset, or NULL. An entry of size 0 covers up
 * to the next entry's start. */
const elfsym *elfsyms_lookup(const elfsyms *s, uint64_t offset);
static inline const char *elfsyms_name(const elfsyms *s, const elfsym *e) {
        return s->strings + e->name;
}
/* The chain of functions inlined at offset ("outer;inner"), or NULL. */
const char *elfsyms_inlined(const elfsyms *s, uint64_t offset);

/* The table as a file, little-endian:
 *   "PSNSYMS2"   8 bytes of magic
 *   u32 n, u32 strings_size, u32 source, u32 n_inl
 *   char build_id[48]             hex, NUL-padded
 *   n x { u64 offset, u32 size, u32 name }
 *   n_inl x { u64 offset, u32 size, u32 name }
 *   strings_size bytes of names, the last one NUL
 * A file of the first version ("PSNSYMS1", n_inl 0, no inlined pieces)
 * is read as well.
 * elfsyms_encode() makes it in memory; elfsyms_decode() checks every count,
 * offset and order and gives -EBADMSG for anything that is not a table it
 * would have written. */
#define ELFSYMS_FILE_MAX ((size_t) 64 * 1024 * 1024)
int elfsyms_encode(const elfsyms *s, char **ret, size_t *ret_size);
int elfsyms_decode(const void *data, size_t size, elfsyms **ret);
