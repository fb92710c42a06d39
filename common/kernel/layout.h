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

#include "kernel/kallsyms.h"
#include "kernel/modules.h"
#include "kernel/notes.h"

#define LAYOUT_TIME_MAX UINT64_MAX

typedef struct layout layout;

typedef enum layout_source {
        LAYOUT_SOURCE_STARTUP,          /* in proc/modules when perfsnapd started */
        LAYOUT_SOURCE_UEVENT,           /* announced by the kernel */
        LAYOUT_SOURCE_RESCAN,           /* found by a rescan of proc/modules or kallsyms */
        LAYOUT_SOURCE_PERF,             /* a PERF_RECORD_KSYMBOL */
        _LAYOUT_SOURCE_MAX,
} layout_source;

const char *layout_source_to_string(layout_source s);  /* "startup", "uevent", "rescan", "perf" */

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
         * layout_module_init_done(), else it is the time it was added, or
         * 0 if init_before_sampling is set: a module that was Live before
         * perfsnapd began to sample. */
        bool init_running;
        bool init_before_sampling;
        uint64_t init_end_ns;
} layout_module;

/* Dynamic kernel code: BPF programs, BPF trampolines and dispatchers, and
 * out-of-line code (kprobe instruction slots, ftrace trampolines). The
 * kernel announces each with a PERF_RECORD_KSYMBOL when it is registered
 * and when it goes; the ones present at start-up are the [bpf],
 * [__builtin__kprobes] and [__builtin__ftrace] lines of kallsyms. */
typedef enum layout_ksym_type {
        LAYOUT_KSYM_UNKNOWN,            /* PERF_RECORD_KSYMBOL_TYPE_UNKNOWN, or a type newer than this code */
        LAYOUT_KSYM_BPF,                /* a JIT-ed BPF program, trampoline or dispatcher */
        LAYOUT_KSYM_OOL,                /* out-of-line code */
        _LAYOUT_KSYM_TYPE_MAX,
} layout_ksym_type;

const char *layout_ksym_type_to_string(layout_ksym_type t);    /* "unknown", "bpf", "ool" */
/* From PERF_RECORD_KSYMBOL_TYPE_*. */
layout_ksym_type layout_ksym_type_from_perf(uint16_t perf_type);
/* From the module column of a kallsyms line: "bpf", "__builtin__kprobes",
 * "__builtin__ftrace" (any "__builtin__*"); -EINVAL for anything else. */
int layout_ksym_type_from_kallsyms(const char *module, layout_ksym_type *ret);

typedef struct layout_ksym {
        int64_t id;                     /* the store's id, 0 if none */
        uint64_t addr, len;
        /* len came from a record; else (kallsyms has no lengths) it reaches
         * to the next symbol and may cover free memory after the code. */
        bool len_exact;
        layout_ksym_type type;
        uint32_t prog_id;               /* the BPF program's id, once a PERF_RECORD_BPF_EVENT named it; else 0 */
        layout_source registered_how, unregistered_how;
        /* The symbol's addresses are its own from registered_ns (0: since
         * before start-up) until unregistered_ns (LAYOUT_TIME_MAX while
         * registered). */
        uint64_t registered_ns, unregistered_ns;
        char name[];                    /* as in kallsyms, e.g. "bpf_prog_6deef7357e7b4530_sd_fw_egress" */
} layout_ksym;

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

/* Registers a dynamic symbol [addr, addr + len) as of registered_ns; the
 * caller sets len_exact when it knows the length. -EINVAL for an empty
 * name or length, -ENOMEM. The caller unregisters live symbols it
 * overlaps first (layout_find_live_ksym()), or shortens estimated ones
 * (layout_ksym_set_len()). */
int layout_add_ksym(layout *l, uint64_t addr, uint64_t len, layout_ksym_type type, const char *name,
                    uint64_t registered_ns, layout_source how, layout_ksym **ret);

/* The live symbol starting at addr (with that name, unless name is NULL),
 * or if none, a live one overlapping [addr, addr + len). NULL if none. */
layout_ksym *layout_find_live_ksym(const layout *l, uint64_t addr, uint64_t len, const char *name);

/* Changes a symbol's length (an estimate that proved too long, or the
 * exact length learned later). */
void layout_ksym_set_len(layout *l, layout_ksym *k, uint64_t len, bool exact);

/* Marks k unregistered at now_ns (not before it was registered). It stays
 * for samples from its window until layout_forget_ksyms_before(). */
int layout_remove_ksym(layout *l, layout_ksym *k, uint64_t now_ns, layout_source how);

/* Where a symbol found now (by a rescan) may have been since: the latest
 * unregistration of a symbol that overlapped [addr, addr + len), else 0. */
uint64_t layout_ksym_free_since(const layout *l, uint64_t addr, uint64_t len);

/* All dynamic symbols, live and unregistered, in address order. */
size_t layout_n_ksyms(const layout *l);
layout_ksym *layout_get_ksym(const layout *l, size_t i);
/* The registered ones among them, in address order. */
size_t layout_n_live_ksyms(const layout *l);
layout_ksym *layout_get_live_ksym(const layout *l, size_t i);

/* Forgets symbols unregistered before time_ns. Returns how many went. */
size_t layout_forget_ksyms_before(layout *l, uint64_t time_ns);

typedef struct layout_hit {
        const layout_module *module;    /* the module instance, NULL for other code */
        const layout_ksym *ksym;        /* the dynamic symbol, NULL for other code */
        const char *module_name;        /* the module's name; for a dynamic symbol "bpf", "ool", or "ksym" for
                                         * one of an unknown type; NULL: core kernel */
        const char *symbol;             /* NULL if only the section is known */
        uint64_t symbol_addr;           /* the offset is addr - symbol_addr */
        const char *section;            /* the module section holding addr, or NULL */
        /* addr lies in one of the module's data sections (.rodata,
         * .orc_unwind, ...): no instruction is there, so no function is
         * named; symbol is the section's name and symbol_addr its start. */
        bool data;
} layout_hit;

/* Resolves a kernel address at a time. A module address resolves to the
 * instance whose window holds time_ns and whose core layout, or one of
 * whose executable sections, holds addr (init sections only while its
 * init ran); its symbol comes from its kallsyms table, else from the ELF
 * symbols (init functions are only there), else the section name is given
 * as the symbol. An address in one of the core layout's data sections is
 * given its section only (hit.data). An address of dynamic code resolves to the symbol whose
 * window holds time_ns. Lines of the start-up kallsyms that belong to a
 * module or to dynamic code resolve only through those. 0, or -ENOENT if
 * nothing covered addr at that time. */
int layout_resolve(const layout *l, uint64_t addr, uint64_t time_ns, layout_hit *ret);
