/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* A compact, read-only kernel symbol table built from /proc/kallsyms text:
 * one sorted array of addresses, parallel arrays of small integers, and a
 * string pool, not a node per symbol. Lookups are by address. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kallsyms kallsyms;

typedef struct ksym {
        uint64_t addr;          /* start address */
        uint64_t end;           /* exclusive end used for lookups (see kallsyms_lookup) */
        const char *name;       /* points into the table; valid while it lives */
        const char *module;     /* module name without brackets ("brd"), NULL for the core kernel */
        char type;              /* kallsyms type letter (t, T, W, ...) */
} ksym;

/* One line of kallsyms text as the kernel's s_show() prints it:
 *     ADDR ' ' TYPE ' ' NAME [ '\t' '[' MODULE ']' ]
 * ("%px %c %s\t[%s]\n" for module symbols, "%px %c %s\n" otherwise).
 * name and module point into the line and are not NUL-terminated. */
typedef struct kallsyms_line {
        uint64_t addr;
        char type;
        const char *name;
        size_t name_len;
        const char *module;     /* without brackets; NULL for the core kernel */
        size_t module_len;
} kallsyms_line;

/* Parses line [s, s + len) (without its newline). false if it is not of
 * that form: 1 to 16 hex digits, a printable type, a name ended by the
 * end of the line or by a tab and a bracketed module name of printable
 * characters other than brackets. Every reader of kallsyms text in the
 * tree goes through this. */
bool kallsyms_line_parse(const char *s, size_t len, kallsyms_line *ret);

/* The relocation reference of a core-kernel line: 2 for _text, 1 for
 * _stext, 0 for anything else. _text is the start of the kernel image on
 * x86, arm64 and most others; perf uses it as the reference relocation
 * symbol (kmap->ref_reloc_sym) and falls back to _stext. Its difference
 * between boots is the KASLR offset. */
int kallsyms_line_text_rank(const kallsyms_line *l);

/* The address of the first _text line in kallsyms text, else of the
 * first _stext line. 0 or -ENOENT. */
int kallsyms_text_addr_from_text(const char *text, size_t len, uint64_t *ret_addr);

/* Parses kallsyms text ("ADDR TYPE NAME [MODULE]" lines). Malformed lines
 * are skipped and counted (kallsyms_n_skipped()). All-zero addresses (as
 * shown to unprivileged readers) make the parse fail with -EPERM. */
int kallsyms_parse(const char *text, size_t len, kallsyms **ret);

/* Reads and parses ROOT/proc/kallsyms (root "/" for the running kernel). */
int kallsyms_load(const char *root, kallsyms **ret);

/* Reads ROOT/proc/kallsyms as a stream, calling cb with each line
 * kallsyms_line_parse() accepts (its strings valid during the call
 * only): nothing of the file is held past its line. Stops at cb's first
 * negative return, which it returns; -EFBIG past the size kallsyms_load()
 * reads at most. */
int kallsyms_stream(const char *root, int (*cb)(const kallsyms_line *l, void *userdata), void *userdata);

/* The same for the lines of one module only ("... [module]"): a module
 * loaded after start-up gets a table of its own. */
int kallsyms_parse_module(const char *text, size_t len, const char *module, kallsyms **ret);

kallsyms *kallsyms_free(kallsyms *k);

size_t kallsyms_count(const kallsyms *k);
size_t kallsyms_n_skipped(const kallsyms *k);

/* Finds the symbol covering addr: the one with the greatest start <= addr,
 * provided addr < its end. A symbol ends where the next symbol (at a higher
 * address) of the same module, or of the core kernel, begins; the last
 * symbol of the core kernel or of a module covers at most
 * KALLSYMS_LAST_SYMBOL_MAX_BYTES. Returns 0 and fills *ret, or -ENOENT
 * (before the first symbol, in a gap, past the end).
 * Where several symbols share an address, the global one (uppercase type)
 * is returned, else the first in file order. Absolute symbols (types A/a,
 * the per-CPU offsets) form a region of their own, so they never cover
 * real kernel addresses. */
#define KALLSYMS_LAST_SYMBOL_MAX_BYTES 4096
int kallsyms_lookup(const kallsyms *k, uint64_t addr, ksym *ret);

/* The i-th symbol in address order (0 <= i < kallsyms_count()), for
 * iterating the table. 0 or -ENOENT. */
int kallsyms_get(const kallsyms *k, size_t i, ksym *ret);

/* Core-kernel symbol with this name (the lowest address if several;
 * linear scan). 0 or -ENOENT. */
int kallsyms_find(const kallsyms *k, const char *name, uint64_t *ret_addr);

/* The runtime address of the relocation reference (see
 * kallsyms_line_text_rank()): _text, else _stext. 0 or -ENOENT. */
int kallsyms_text_addr(const kallsyms *k, uint64_t *ret_addr);

/* Approximate heap use of the table, for status and benchmarks. */
size_t kallsyms_memory_bytes(const kallsyms *k);
