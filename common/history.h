/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* The kernel layout's history as the store answers it (store-layout.c)
 * and the wire renders it (wire/history-json.c): module instances with
 * their section maps, dynamic symbols, and the journal of layout changes
 * with the section and symbol records re-emitted at each. Strings are
 * malloc'ed copies, NULL where the database has none; history.c frees. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct history_section {
        char *name;
        uint64_t addr;
        int64_t len, pgoff;
        char *len_source;       /* "elf", "next", "unknown" */
        bool exec;
} history_section;

typedef struct history_module {
        int64_t id;
        char *name, *build_id, *file;
        uint64_t base;
        int64_t size, loaded_ns;
        char *loaded_how;
        bool unloaded;          /* else unloaded_ns and unloaded_how are not set */
        int64_t unloaded_ns;
        char *unloaded_how;
        char *boot_id, *release;
        history_section *sections;      /* only when history.with_details */
        size_t n_sections;
} history_module;

typedef struct history_ksym {
        int64_t id;
        char *name;
        uint64_t addr;
        int64_t len;
        char *type;             /* "bpf", "ool", "unknown" */
        bool has_prog_id;
        int64_t prog_id;
        int64_t registered_ns;
        char *registered_how;
        bool unregistered;      /* else unregistered_ns and unregistered_how are not set */
        int64_t unregistered_ns;
        char *unregistered_how;
        char *boot_id;
} history_ksym;

typedef enum history_record_kind {
        HISTORY_RECORD_SECTION,         /* a module section, as a perf MMAP of the kernel's machine */
        HISTORY_RECORD_KSYMBOL,         /* a dynamic symbol, as PERF_RECORD_KSYMBOL */
} history_record_kind;

typedef struct history_record {
        history_record_kind kind;
        uint64_t addr;
        int64_t len;
        char *name;             /* section name, or symbol name */
        /* sections */
        int64_t pgoff;
        char *module, *filename, *build_id, *len_source;
        bool exec;
        /* symbols */
        char *ksym_type;
        bool has_prog_id;
        int64_t prog_id;
} history_record;

typedef struct history_event {
        int64_t id, time_ns;
        char *kind;             /* "start", "module-add", ... (store.h store_event) */
        char *module;
        int64_t module_id;      /* 0: none */
        char *ksym;
        int64_t ksym_id;        /* 0: none */
        int64_t snapshot_id;    /* 0: none */
        char *snapshot;
        char *detail;
        char *kernel_build_id;
        uint64_t kernel_text_addr;
        char *kernel_release, *kernel_boot_id;
        int64_t n_records;      /* records the event has, listed or not */
        history_record *records;        /* only when history.with_details */
        size_t n_listed;
} history_event;

/* One answer: one of the three lists, oldest first. */
typedef struct history {
        history_module *modules;
        size_t n_modules;
        history_ksym *ksyms;
        size_t n_ksyms;
        history_event *events;
        size_t n_events;
        bool with_details;      /* modules carry sections, events records */
        bool truncated;         /* a cap cut the list */
} history;

/* Frees what h holds and zeroes it (h itself is the caller's). */
void history_done(history *h);
