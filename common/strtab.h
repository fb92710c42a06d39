/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* A table of distinct strings, by index in insertion order: a packed
 * Query answer's names, pprof's string table, the HTML page's names.
 * Strings added with strtab_id() are borrowed (they must outlive the
 * table); with strtab_id_copy() the table keeps a copy (in owned, in the
 * order they were added). v is NULL until the first one. */

#include <stddef.h>

struct hashmap;

typedef struct strtab {
        struct hashmap *idx;
        char **v;
        size_t n, alloc;
        char **owned;
        size_t n_owned, alloc_owned;
} strtab;

int strtab_init(strtab *t);
void strtab_done(strtab *t);
int strtab_id(strtab *t, const char *s, size_t *ret);
int strtab_id_copy(strtab *t, const char *s, size_t *ret);
