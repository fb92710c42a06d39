/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* What a query asks and what it answers, independent of the wire format
 * (query-json.c) and of the storage (store.c); freed by query.c. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct query_params {
        uint64_t since_ns;      /* wall clock, inclusive; 0 = from the beginning */
        uint64_t until_ns;      /* wall clock, exclusive; 0 = until now */
        int64_t pid;            /* -1 = any */
        int32_t cpu;            /* -1 = any */
        const char *comm;       /* NULL = any; exact match */
        uint32_t top;           /* max rows; 0 = no limit (the server still caps it) */
        bool want_stacks;       /* also return whole stacks (folded output) */
        /* Which frames count: all; kernel frames only (a row is the
         * innermost kernel frame, stacks lose their user part); user
         * frames only (a row is the innermost user frame: kernel time
         * goes to the user code that entered the kernel). A sample
         * without such frames is a row "[unknown]". */
        enum { QUERY_FRAMES_ALL = 0, QUERY_FRAMES_KERNEL, QUERY_FRAMES_USER } frames;
        /* NULL = any; else only rows whose module is this one (its path,
         * the path's last component, or a kernel module's name without
         * brackets), and only stacks with a frame in it. Percentages stay
         * shares of all samples. */
        const char *dso;
        /* Also name the functions inlined where a user frame is (from the
         * DWARF of its file): a row's inlined chain, and frames of their
         * own in stacks. */
        bool inlined;
        /* Not on the wire: the cache directory whose function tables
         * (elf/symstore.h) name user frames; NULL: they stay unnamed. */
        const char *symbols_dir;
} query_params;

#define QUERY_PARAMS_INIT { .pid = -1, .cpu = -1 }
#define QUERY_DSO_MAX 4096

/* One row of the report: samples whose leaf frame is (module, symbol) in comm. */
typedef struct query_row {
        char *comm;
        char *module;           /* "[kernel.kallsyms]", "[brd]", a user mapping path, or "[unknown]" */
        char *symbol;           /* symbol, "FILE+0x<offset>" for an unnamed user frame in a file, else "0x<addr>" */
        char *inlined;          /* NULL, or (query_params.inlined) the functions inlined there: "outer;inner" */
        bool kernel;            /* leaf frame is a kernel frame */
        uint64_t samples;
} query_row;

/* A whole stack, for folded output: frames outermost caller first, leaf last. */
typedef struct query_stack {
        char *comm;
        char **frames;
        size_t n_frames;
        uint64_t samples;
} query_stack;

typedef struct query_result {
        uint64_t total_samples; /* all samples matching the filter, not only the rows shown */
        uint64_t first_ns, last_ns; /* time of first and last matching sample, 0 if none */
        uint32_t n_cpus;        /* distinct CPUs among matching samples */
        uint64_t lost;          /* PERF_RECORD_LOST counts in the window (for the CPU filter if set) */
        /* Samples of all rows (not only those shown) whose leaf is a user
         * frame: named (a function table's or a JIT map's name), by
         * offset in a file ("FILE+0x<offset>"), or unknown (an address
         * outside any file). */
        uint64_t user_named, user_by_offset, user_unknown;
        query_row *rows;        /* sorted by samples descending, then comm, module, symbol */
        size_t n_rows;
        query_stack *stacks;    /* only when want_stacks; sorted by samples descending */
        size_t n_stacks;
        uint32_t passes;        /* reads of the window the grouping took (store_query(); not on the wire) */
} query_result;

/* Frees the strings of rows[0..n) (not the array). */
void query_rows_free(query_row *rows, size_t n);
/* Frees what st holds (not st). */
void query_stack_done(query_stack *st);
/* Frees r and all it holds; NULL-safe; returns NULL. */
query_result *query_result_free(query_result *r);
