/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* Where kernel code sits, over time: the core kernel's symbols plus every
 * module instance seen since start-up, each with the time window in which
 * its addresses were its own. Samples are resolved against the layout as it
 * was at their timestamp, because ring buffers are drained after the fact:
 * a sample taken in a module just before rmmod is read after the remove
 * uevent, and one taken during a module's init is read before its add
 * uevent (the kernel sends "add" only once init has returned).
 *
 * Times here are CLOCK_MONOTONIC nanoseconds, the clock of the perf
 * events. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kallsyms.h"
#include "modules.h"
#include "notes.h"

#define LAYOUT_TIME_MAX UINT64_MAX

typedef struct layout layout;

typedef enum layout_source {
        LAYOUT_SOURCE_STARTUP,          /* in proc/modules when perfsnapd started */
        LAYOUT_SOURCE_UEVENT,           /* announced by the kernel */
        LAYOUT_SOURCE_RESCAN,           /* found by a rescan of proc/modules */
        _LAYOUT_SOURCE_MAX,
} layout_source;

const char *layout_source_to_string(layout_source s);  /* "startup", "uevent", "rescan" */

typedef struct layout_module {
        int64_t id;                     /* the store's id for this instance, 0 if none */
        char name[MODULE_NAME_MAX];
        char build_id[BUILD_ID_HEX_MAX];        /* "" if unknown */
        uint64_t base, size;            /* core layout, from proc/modules */
        char *file;                     /* the ELF file the section lengths came from, or NULL */

        module_section *sections;       /* sorted by address */
        size_t n_sections;
        module_symbol *elf_syms;        /* functions from the ELF's symtab, sorted by address */
        size_t n_elf_syms;
        kallsyms *syms;                 /* this module's kallsyms lines, once read; NULL before */
        bool syms_in_kernel_table;      /* loaded at start-up: its kallsyms lines are in the kernel's table */

        layout_source loaded_how, unloaded_how;
        uint64_t loaded_ns;             /* when perfsnapd learned of it */
        /* Addresses resolve to this instance from valid_from_ns on: the
         * unload of the previous module that overlapped it, or 0. This
         * covers samples from the module's init, taken before its add
         * uevent. */
        uint64_t valid_from_ns;
        uint64_t unloaded_ns;           /* LAYOUT_TIME_MAX while loaded */
        /* The kernel frees a module's init sections once its init returned,
         * and puts other modules there: they are its own until then only.
         * Set init_running before layout_add_module() for a module found in
         * the Loading state; its init_end_ns is then set by
         * layout_module_init_done(), else it is the time it was added. */
        bool init_running;
        uint64_t init_end_ns;
} layout_module;

int layout_new(layout **ret);
layout *layout_free(layout *l);

static inline void layout_freep(layout **l) {
        layout_free(*l);
}

/* Sets the core kernel's symbol table (taking ownership; it may hold the
 * lines of the modules loaded at the time as well). */
void layout_set_kernel(layout *l, kallsyms *k);
const kallsyms *layout_kernel_syms(const layout *l);

/* An empty instance for layout_add_module(), or NULL on OOM. */
layout_module *layout_module_new(const char *name);
layout_module *layout_module_free(layout_module *m);

/* Adds m (taking ownership, also on failure) as loaded since now_ns; its
 * valid_from_ns is computed here. -EEXIST (and m freed) if a live
 * instance of that name exists. */
int layout_add_module(layout *l, layout_module *m, uint64_t now_ns, layout_module **ret);

/* Marks the live instance of name unloaded at now_ns. It stays in the
 * layout for samples from its window. -ENOENT if none is live. */
int layout_remove_module(layout *l, const char *name, uint64_t now_ns, layout_source how, layout_module **ret);

/* The module's init has returned (its add uevent came, or proc/modules
 * shows it Live): its init sections are no longer its own. */
void layout_module_init_done(layout *l, layout_module *m, uint64_t now_ns);

/* Gives a live instance its kallsyms table (taking ownership). */
void layout_module_set_syms(layout *l, layout_module *m, kallsyms *syms);

layout_module *layout_find_live(const layout *l, const char *name);

/* All instances, live and unloaded, in the order they were added. */
size_t layout_n_modules(const layout *l);
layout_module *layout_get_module(const layout *l, size_t i);
size_t layout_n_live(const layout *l);

/* Forgets instances unloaded before time_ns (no sample that old can still
 * be waiting in a ring buffer). Returns how many went. */
size_t layout_forget_before(layout *l, uint64_t time_ns);

/* Bumped on every change: cached resolutions of any earlier generation may
 * be wrong (e.g. a module found now covers earlier init-time samples). */
uint64_t layout_generation(const layout *l);

/* The number of window boundaries (valid_from, unload) at or before
 * time_ns. Two times with the same epoch resolve every address the same
 * way, so (address, epoch) is a valid cache key within one generation. */
uint32_t layout_epoch(const layout *l, uint64_t time_ns);

typedef struct layout_hit {
        const layout_module *module;    /* the module instance, NULL for other code */
        const char *module_name;        /* its name, "bpf" for [bpf] lines of kallsyms, NULL: core kernel */
        const char *symbol;             /* NULL if only the section is known */
        uint64_t symbol_addr;           /* the offset is addr - symbol_addr */
        const char *section;            /* the module section holding addr, or NULL */
} layout_hit;

/* Resolves a kernel address at a time. A module address resolves to the
 * instance whose window holds time_ns and whose core layout, or one of
 * whose executable sections, holds addr (init sections only while its
 * init ran); its symbol comes from its kallsyms table, else from the ELF
 * symbols (init functions are only there), else the section name is given
 * as the symbol. 0, or -ENOENT if nothing covered addr at that time. */
int layout_resolve(const layout *l, uint64_t addr, uint64_t time_ns, layout_hit *ret);
