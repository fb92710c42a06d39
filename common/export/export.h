/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* perfsnapctl export's writers: a Query answer with stacks (query.h) as
 * pprof (export-pprof.c), an SVG or an HTML flame graph (export-flame.c).
 * They read only the answer, so their memory is that of the answer (at
 * most the daemon's query_max_stacks stacks) plus the output's own
 * tables. Errors: negative errno. */

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "query.h"
#include "strtab.h"

typedef struct export_input {
        const query_params *q;
        const query_result *r;
        uint64_t since_ns, until_ns;    /* the window (until: now if the query's is open) */
        uint64_t period_ns;             /* CPU time one sample stands for: 1 s / sampling frequency */
        const char *title;
        /* perf.data: a modules file (/proc/modules' format) whose modules
         * get MMAP records, or NULL. */
        const char *modules_file;
} export_input;

/* Whether the samples are off-CPU nanoseconds (query_params.kind). */
static inline bool export_offcpu(const export_input *in) {
        return in->q && in->q->kind == SAMPLE_KIND_OFFCPU;
}

/* gzip-compressed profile.proto, written to fd as it is packed. */
int export_pprof(int fd, const export_input *in);
int export_svg(FILE *f, const export_input *in);
int export_html(FILE *f, const export_input *in);
/* perf.data (export-perf.c), into a seekable f; the query must have been
 * raw, with modules, per pid and CPU and with a timeline. *ret_omitted:
 * samples without addresses ("[other stacks]") or with too long a chain,
 * left out. */
int export_perf_data(FILE *f, const export_input *in, uint64_t *ret_omitted);

/* The same, streamed: a writer takes the answers of consecutive parts of
 * the window one at a time (perf_writer_add(), each raw, with modules,
 * per pid and CPU, with a timeline over [since_ns, until_ns); stacks, or
 * shapes and entries), and keeps across them only which threads and
 * (process, file) pairs it has written COMM and MMAP2 records for, at
 * most 65536 of them: past that it forgets them and writes them again
 * before their next sample. finish writes the build-id table and the header (f must be seekable);
 * *ret_samples: samples written, *ret_omitted: left out. */
typedef struct perf_writer perf_writer;
int perf_writer_new(FILE *f, uint64_t period_ns, uint64_t kernel_text, const char *kernel_build_id,
                    const char *modules_file, perf_writer **ret);
int perf_writer_add(perf_writer *w, const query_result *r, uint64_t since_ns, uint64_t until_ns);
/* A KSYMBOL record (a BPF program or out-of-line code), before the
 * samples in it: perf names them from it. */
int perf_writer_ksymbol(perf_writer *w, uint64_t addr, uint32_t len, bool bpf, const char *name);
int perf_writer_finish(perf_writer *w, uint64_t *ret_samples, uint64_t *ret_omitted);
perf_writer *perf_writer_free(perf_writer *w);
/* speedscope's file format (https://www.speedscope.app/file-format-schema.json):
 * one sampled profile, the command as the outermost frame. */
int export_speedscope(FILE *f, const export_input *in);

/* ---- shared by the writers (flame.c) ---- */

enum { FLAME_ROOT, FLAME_COMM, FLAME_USER, FLAME_KERNEL };

/* A frame of the merged call tree, in depth-first order: children follow
 * their parent, in name order. x: samples left of the frame within the
 * root, value: samples in it and under it. */
typedef struct flame_node {
        const char *name;
        uint32_t parent, depth;
        int kind;
        uint64_t value, x;
} flame_node;

typedef struct flame_tree {
        flame_node *nodes;
        size_t n, alloc;
        uint32_t max_depth;
} flame_tree;

/* Merges the answer's stacks (all of their pids, CPUs and slots) under
 * one root; the comm is the first frame of each. */
int flame_tree_build(const query_result *r, flame_tree *ret);
void flame_tree_done(flame_tree *t);

/* Indices of r's stacks ordered by comm, then frames (for merging equal
 * paths). *ret: malloc'ed, r->n_stacks entries. */
int stacks_by_path(const query_result *r, size_t **ret);
/* Compares two stacks by comm then frames only. */
int stack_path_cmp(const query_stack *a, const query_stack *b);

/* Writes s as XML character data / a JSON string (quoted); bytes that are
 * not valid UTF-8 and control characters become U+FFFD; in JSON, '<', '>'
 * and '&' are escaped so that the text can sit in an HTML <script>. */
void fput_xml(FILE *f, const char *s);
void fput_json(FILE *f, const char *s);
