/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* Keeps the function table of every user-space file samples land in, by
 * build-id (common/elf/symstore.h), so that queries name user frames even
 * after the binary is gone. The draining loop announces each file once
 * (usymbols_file_seen()); the table is extracted on a worker thread of its
 * own, never on the loop:
 *
 *   1. kept already under that build-id: nothing to do;
 *   2. the file is opened as the process sees it, ROOT/proc/PID/root/PATH
 *      (another mount namespace's file, for containers), else ROOT/PATH;
 *      its build-id must be the one of the mapping (-ESTALE otherwise:
 *      replaced since);
 *   3. symbols from DEBUG_ROOT/.build-id/xx/rest.debug if there is one,
 *      else the file's .symtab; a file with neither asks the debuginfod
 *      servers of debuginfod_urls (when set) for its debug file, else
 *      keeps its .dynsym;
 *   4. written, then the least recently used tables removed past
 *      symbols_max_size.
 *
 * At most USYMBOLS_MAX_PENDING files wait; one more is counted as dropped
 * and announced again the next time a sample lands in it. */

#include <event2/event.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"

#define USYMBOLS_MAX_PENDING 256

typedef struct usymbols usymbols;

typedef struct usymbols_stats {
        uint64_t seen;                  /* build-ids announced */
        uint64_t extracted;             /* tables written */
        uint64_t kept_already;          /* found kept: nothing written */
        uint64_t no_symbols;            /* files without function symbols (kept as empty tables) */
        uint64_t failed;                /* unreadable, replaced, not ELF */
        uint64_t dropped;               /* the queue was full */
        uint64_t pruned;                /* tables removed by the size limit */
        uint64_t tables, bytes;         /* kept, after the last write */
        uint64_t last_ns;               /* extraction time of the last table written */
        uint64_t max_ns;                /* the longest */
        int last_error;                 /* of the last failure, negative errno */
        const char *last_failed_what;   /* "open", "read" or "save" of it; NULL: none */
        uint64_t debuginfod_found;      /* debug files debuginfod gave */
        uint64_t debuginfod_missed;     /* asked, none given (not found, unreachable, timed out) */
} usymbols_stats;

/* Sets libdebuginfod's environment from c (DEBUGINFOD_URLS, or unsets it
 * when debuginfod_urls is empty, so none from the caller's environment is
 * used; its cache in CACHE/.debuginfod; the timeouts). Call before any
 * thread starts: the library reads the environment. */
int usymbols_setup_env(const config *c);

/* NULL in *ret (and 0) when c->cache_dir is empty: nothing is kept. */
int usymbols_new(struct event_base *base, const config *c, usymbols **ret);
usymbols *usymbols_free(usymbols *u);
void usymbols_reconfigure(usymbols *u, const config *c);

/* From the loop: a sample landed in PATH (build-id, lowercase hex) of pid. */
/* false if the queue is full (counted as dropped): announce it again. */
bool usymbols_file_seen(uint32_t pid, const char *path, const char *build_id, void *userdata);

const usymbols_stats *usymbols_get_stats(const usymbols *u);
