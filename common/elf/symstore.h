/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* The function tables of user-space files, one file per build-id, beside
 * the kernel snapshots:
 *
 *   CACHE/.symbols/<build-id>        (elfsyms.h's file format, mode 0400)
 *
 * A table is written once, when the daemon first sees its build-id, and
 * read by queries for as long as it is kept, whether or not the binary
 * still exists. Reached from the cache root's descriptor one name at a
 * time, never through a symbolic link (as the snapshots are); a table is
 * written under a temporary name and renamed into place. A table's mtime
 * is the last time a query used it: symstore_prune() removes the least
 * recently used first. perf does not look in ".symbols". */

#include <stdbool.h>
#include <stdint.h>

#include "elf/elfsyms.h"

#define SYMSTORE_DIR ".symbols"

/* 0, or -EEXIST if a table of that build-id is kept already. -EINVAL for a
 * table without a build-id. */
int symstore_save(const char *cache_dir, const elfsyms *s);
/* -ENOENT if none is kept; -EBADMSG for a file that is no table (or the
 * table of another build-id). touch: mark it used now. */
int symstore_load(const char *cache_dir, const char *build_id, bool touch, elfsyms **ret);
bool symstore_has(const char *cache_dir, const char *build_id);

typedef struct symstore_usage {
        uint64_t tables, bytes;
} symstore_usage;

/* Removes the least recently used tables until the rest take at most
 * max_bytes (0: no limit); returns what is left and, in *ret_removed, how
 * many were removed. A missing directory is empty. */
int symstore_prune(const char *cache_dir, uint64_t max_bytes, symstore_usage *ret_left, uint64_t *ret_removed);
