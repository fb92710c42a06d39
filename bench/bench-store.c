/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Ingest cost of a kernel-heavy profile on the daemon's own write path:
 * perf records in in-memory ring buffers -> ingest_drain() (time-ordered
 * merge, symbolizer, the store's interning and sample writer) ->
 * ingest_commit() every simulated second, then store_checkpoint(), as the
 * daemon's drain and commit timers do. Nothing is called that the daemon
 * does not call.
 *
 * The kernel is the 6.1 capture in tests/fixtures/kernel-6.1-brd (its
 * kallsyms, notes and the brd module's sections), set up as a synthetic
 * root with the tracker loading its modules, so no root is needed. The
 * profile has the shape of a server's: call paths share their outer
 * frames (a prefix tree grown from a few entry points), 3,000 paths over
 * 2,000 (function, offset) kernel frames account for all samples with a
 * skewed popularity, the leaf moves between a few offsets of its
 * function, and a third of the paths continue into user space (2-6
 * frames over 6 shared objects that 50 long-lived processes map at
 * addresses of their own). bench-history covers the other shape: process
 * churn and deep user stacks.
 *
 *   bench-store [samples] [db path]
 *
 * Prints CPU per sample for ingest_drain() + ingest_commit() +
 * store_checkpoint() (thread CPU time), for ingest_drain() alone, and the
 * database's size. */

#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fixture-root.h"
#include "ingest.h"
#include "log.h"
#include "macro.h"
#include "perf-synth.h"
#include "store/store.h"
#include "text-symbols.h"
#include "tracker.h"

#define N_SAMPLES_DEFAULT 200000
#define N_CPUS 2
#define STEP_NS 250000ULL       /* 4,000 samples a simulated second, over both CPUs */
#define DRAIN_NS (250 * NSEC_PER_MSEC)
#define RB_DATA (4u << 20)
#define N_FUNCS 700             /* kernel functions; every tenth is one of brd's */
#define N_KFRAMES 2000          /* distinct (function, offset) kernel frames */
#define N_LIBS 6
#define N_UFRAMES 300
#define N_PATHS 3000
#define N_PROCS 50
#define MAX_DEPTH 40
#define MAX_FUNCS 200000
#define TARGET_US 1.0

static uint64_t rng_state = 0x853c49e6748fea9bULL;

/* xorshift64*: deterministic, so runs are comparable. */
static uint64_t rnd(void) {
        rng_state ^= rng_state >> 12;
        rng_state ^= rng_state << 25;
        rng_state ^= rng_state >> 27;
        return rng_state * 0x2545f4914f6cdd1dULL;
}

static unsigned rnd_below(unsigned n) {
        return (unsigned) (rnd() % n);
}

typedef struct call_path {
        unsigned n_kernel;
        unsigned kernel[MAX_DEPTH];     /* indexes into kframes, outermost first */
        unsigned n_user;
        unsigned user[8];               /* indexes into uframes, outermost first */
        unsigned proc;
} call_path;

typedef struct func {
        uint64_t addr, size;
        bool module;
} func;

static func funcs[N_FUNCS];
static uint64_t kframes[N_KFRAMES];     /* runtime addresses */
static struct {
        unsigned lib;
        uint64_t offset;
} uframes[N_UFRAMES];
static uint64_t lib_base[N_PROCS][N_LIBS];
static call_path paths[N_PATHS];

/* Functions from the fixture's text symbols, each with its extent up to
 * the next text symbol (at most 4 KiB): every tenth is one of brd's, the
 * rest are spread over vmlinux (the fixture has the sections of brd only,
 * so other modules' addresses would not resolve). */
typedef struct text_addrs {
        uint64_t all[MAX_FUNCS], core[MAX_FUNCS], mods[MAX_FUNCS];
        size_t n_all, n_core, n_mods;
} text_addrs;

static bool add_text_addr(const kallsyms_line *l, void *userdata) {
        text_addrs *t = userdata;

        t->all[t->n_all++] = l->addr;
        if (!l->module)
                t->core[t->n_core++] = l->addr;
        else if (l->module_len == 3 && memcmp(l->module, "brd", 3) == 0)
                t->mods[t->n_mods++] = l->addr;
        return t->n_all < MAX_FUNCS;
}

static int load_functions(const char *kallsyms_path) {
        static text_addrs t;
        int r;

        r = for_each_text_symbol(kallsyms_path, add_text_addr, &t);
        if (r < 0)
                return r;
        if (t.n_core < N_FUNCS || t.n_mods == 0)
                return -ENODATA;
        sort_u64(t.all, t.n_all);

        for (unsigned i = 0; i < N_FUNCS; i++) {
                bool module = i % 10 == 9;
                uint64_t a = module ? t.mods[i / 10 % t.n_mods] : t.core[(size_t) i * (t.n_core / N_FUNCS)];
                uint64_t *p = bsearch(&a, t.all, t.n_all, sizeof t.all[0], u64_cmp);
                size_t k = p ? (size_t) (p - t.all) : 0;

                /* Equal addresses (aliases) are one function. */
                while (k + 1 < t.n_all && t.all[k + 1] == a)
                        k++;
                funcs[i] = (func) {
                        .addr = a,
                        .size = k + 1 < t.n_all ? MIN(t.all[k + 1] - a, (uint64_t) 0x1000) : 0x100,
                        .module = module,
                };
                if (funcs[i].size == 0)
                        funcs[i].size = 1;
        }
        return 0;
}

static void make_frames(void) {
        for (unsigned i = 0; i < N_KFRAMES; i++) {
                const func *fn = funcs + i % N_FUNCS;
                kframes[i] = fn->addr + (0x10 + (uint64_t) (i / N_FUNCS) * 0x2b + rnd_below(16)) % fn->size;
        }
        for (unsigned i = 0; i < N_UFRAMES; i++) {
                uframes[i].lib = i % N_LIBS;
                uframes[i].offset = 0x1000 + rnd_below(0x200000);
        }
        /* Every process maps the libraries at addresses of its own (ASLR). */
        for (unsigned p = 0; p < N_PROCS; p++)
                for (unsigned l = 0; l < N_LIBS; l++)
                        lib_base[p][l] = 0x7f0000000000ULL + (uint64_t) rnd_below(0x100000) * 0x1000000 +
                                         (uint64_t) l * 0x400000;
}

/* Each path extends a prefix of an earlier one, so paths form a tree with
 * shared outer callers, like real kernel stacks (syscall entry, irq entry,
 * the idle loop). Depth 8..24 kernel frames. */
static void make_paths(void) {
        for (unsigned i = 0; i < N_PATHS; i++) {
                call_path *p = paths + i;
                unsigned depth = 8 + rnd_below(17), keep = 0;

                if (i >= 8) {
                        const call_path *parent = paths + rnd_below(i);
                        keep = MIN(parent->n_kernel, 2 + rnd_below(depth - 2));
                        memcpy(p->kernel, parent->kernel, keep * sizeof(unsigned));
                        p->proc = rnd_below(4) == 0 ? rnd_below(N_PROCS) : parent->proc;
                } else
                        p->proc = rnd_below(N_PROCS);

                for (unsigned d = keep; d < depth; d++)
                        p->kernel[d] = rnd_below(N_KFRAMES);
                p->n_kernel = depth;

                /* A third of the paths come from user space with a few user frames. */
                if (rnd_below(3) == 0) {
                        p->n_user = 2 + rnd_below(5);
                        for (unsigned d = 0; d < p->n_user; d++)
                                p->user[d] = rnd_below(N_UFRAMES);
                }
        }
}

/* Skewed popularity: a few paths get most samples. */
static unsigned pick_path(void) {
        double u = (double) (rnd() >> 11) / (double) (1ULL << 53);
        return (unsigned) (u * u * u * N_PATHS) % N_PATHS;
}

static uint64_t thread_cpu_ns(void) {
        struct timespec ts;

        (void) clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return (uint64_t) ts.tv_sec * NSEC_PER_SEC + (uint64_t) ts.tv_nsec;
}

static void must(int r) {
        if (r < 0) {
                fprintf(stderr, "writing a record: %s\n", strerror(-r));
                exit(EXIT_FAILURE);
        }
}

static void start_processes(synth_rb *rb, uint64_t t) {
        static const char *const names[] = { "nginx", "fio", "postgres", "kworker/u8:2", "java" };

        for (unsigned p = 0; p < N_PROCS; p++) {
                uint32_t pid = 1000 + p;
                char comm[16];

                snprintf(comm, sizeof comm, "%s", names[p % ELEMENTSOF(names)]);
                must(synth_task(rb, PERF_RECORD_FORK, pid, 1, t, 0));
                must(synth_comm(rb, pid, comm, t, 0, true));
                for (unsigned l = 0; l < N_LIBS; l++) {
                        char path[64];
                        uint8_t bid[20];

                        for (int i = 0; i < 20; i++)
                                bid[i] = (uint8_t) (l * 13 + (unsigned) i);
                        snprintf(path, sizeof path, "/usr/lib/x86_64-linux-gnu/libbench%u.so", l);
                        must(synth_mmap2(rb, pid, lib_base[p][l], 0x400000, 0, path, bid, t, 0));
                }
        }
}

/* What the samples were stored as: leaves in vmlinux, in brd, and left
 * unsymbolized; a wrong layout would show here, not in the timing. */
static int count_leaves(store *st, uint64_t *ret_vmlinux, uint64_t *ret_brd, uint64_t *ret_unknown) {
        query_result *q = NULL;
        int r = store_query(st, &(query_params) { .pid = -1, .cpu = -1 }, 0, 0, &q);

        if (r < 0)
                return r;
        *ret_vmlinux = *ret_brd = *ret_unknown = 0;
        for (size_t i = 0; i < q->n_rows; i++) {
                const query_row *row = q->rows + i;

                if (streq(row->module, MODULE_KERNEL) && strncmp(row->symbol, "0x", 2) != 0)
                        *ret_vmlinux += row->samples;
                else if (streq(row->module, "[brd]") && strncmp(row->symbol, "0x", 2) != 0)
                        *ret_brd += row->samples;
                else
                        *ret_unknown += row->samples;
        }
        query_result_free(q);
        return 0;
}

static uint64_t file_bytes(const char *path) {
        struct stat st;
        return stat(path, &st) < 0 ? 0 : (uint64_t) st.st_size;
}

int main(int argc, char **argv) {
        unsigned long n_samples = argc > 1 ? strtoul(argv[1], NULL, 0) : N_SAMPLES_DEFAULT;
        char root[] = "/tmp/bench-store.XXXXXX", kallsyms_path[64], db_default[64];
        const char *db;
        synth_rb rbs[N_CPUS] = {};
        ringbuf *bufs[N_CPUS];
        uint32_t cpu_ids[N_CPUS];
        struct event_base *base = NULL;
        store *st = NULL;
        ingest *in = NULL;
        tracker *tr = NULL;
        store_stats stats;
        uint64_t mono0 = 1000 * NSEC_PER_SEC, t = mono0, next_drain, next_commit, cpu_ns = 0, c;
        uint64_t leaves_vmlinux, leaves_brd, leaves_unknown;
        int64_t mono_to_wall;
        int r, ret = EXIT_FAILURE;

        if (n_samples == 0)
                n_samples = N_SAMPLES_DEFAULT;
        log_set_max_level(LOG_ERR);     /* not the fixture's 50 modules without sections */
        if (!mkdtemp(root)) {
                perror("mkdtemp");
                return EXIT_FAILURE;
        }
        snprintf(kallsyms_path, sizeof kallsyms_path, "%s/proc/kallsyms", root);
        snprintf(db_default, sizeof db_default, "%s/db", root);
        db = argc > 2 ? argv[2] : db_default;

        if (fixture_root_brd(root, "loaded", true, "0b6f2d2a-5a57-4d4e-9a3e-1c9d3f2b7e10") < 0) {
                fprintf(stderr, "Failed to set up the synthetic root in %s\n", root);
                goto out;
        }
        r = load_functions(kallsyms_path);
        if (r < 0) {
                fprintf(stderr, "Failed to read functions from %s: %s\n", kallsyms_path, strerror(-r));
                goto out;
        }
        make_frames();
        make_paths();

        (void) unlink(db);
        base = event_base_new();
        r = base ? store_open(db, STORE_READWRITE, &st) : -ENOMEM;
        if (r >= 0)
                r = ingest_new(st, root, &in);
        if (r >= 0)
                r = ingest_load_kernel(in);
        if (r >= 0)
                r = tracker_new(base, st, ingest_layout(in), in, root, &tr);
        if (r >= 0)
                r = tracker_start(tr);
        if (r < 0) {
                fprintf(stderr, "Failed to set up the daemon's objects: %s\n", strerror(-r));
                goto out;
        }
        for (unsigned i = 0; i < N_CPUS; i++) {
                if (synth_rb_init(&rbs[i], RB_DATA) < 0)
                        goto out;
                bufs[i] = &rbs[i].rb;
                cpu_ids[i] = i;
        }
        mono_to_wall = (int64_t) (time(NULL) - 86400) * (int64_t) NSEC_PER_SEC - (int64_t) mono0;

        start_processes(&rbs[0], t);
        next_drain = t + DRAIN_NS;
        next_commit = t + NSEC_PER_SEC;
        for (unsigned long i = 0; i < n_samples; i++) {
                const call_path *p = paths + pick_path();
                uint32_t cpu = (uint32_t) (i % N_CPUS), pid = 1000 + p->proc;
                uint64_t chain[MAX_DEPTH + 16];
                size_t nr = 0;

                t += STEP_NS + rnd_below(1000);
                /* Leaf first: kernel frames innermost first, then the user
                 * frames, outermost caller last. The sampled IP wanders
                 * within the leaf function. */
                chain[nr++] = PERF_CONTEXT_KERNEL;
                for (unsigned d = p->n_kernel; d-- > 0;)
                        chain[nr++] = kframes[p->kernel[d]] + (d == p->n_kernel - 1 ? rnd_below(4) : 0);
                if (p->n_user > 0) {
                        chain[nr++] = PERF_CONTEXT_USER;
                        for (unsigned d = p->n_user; d-- > 0;)
                                chain[nr++] = lib_base[p->proc][uframes[p->user[d]].lib] + uframes[p->user[d]].offset;
                }
                must(synth_sample(&rbs[cpu], pid, pid, t, cpu, STEP_NS, chain, nr, false));

                if (t >= next_drain) {
                        c = thread_cpu_ns();
                        r = ingest_drain(in, bufs, cpu_ids, N_CPUS, mono_to_wall, t - 10 * NSEC_PER_MSEC);
                        cpu_ns += thread_cpu_ns() - c;
                        if (r < 0) {
                                fprintf(stderr, "ingest_drain: %s\n", strerror(-r));
                                goto out;
                        }
                        next_drain += DRAIN_NS;
                }
                if (t >= next_commit) {
                        c = thread_cpu_ns();
                        r = ingest_commit(in);
                        if (r >= 0)
                                r = store_checkpoint(st);
                        cpu_ns += thread_cpu_ns() - c;
                        if (r < 0) {
                                fprintf(stderr, "commit: %s\n", strerror(-r));
                                goto out;
                        }
                        next_commit += NSEC_PER_SEC;
                }
        }
        c = thread_cpu_ns();
        r = ingest_drain(in, bufs, cpu_ids, N_CPUS, mono_to_wall, INGEST_HORIZON_ALL);
        if (r >= 0)
                r = ingest_commit(in);
        cpu_ns += thread_cpu_ns() - c;
        if (r >= 0)
                r = store_get_stats(st, &stats);
        if (r >= 0)
                r = count_leaves(st, &leaves_vmlinux, &leaves_brd, &leaves_unknown);
        if (r < 0) {
                fprintf(stderr, "final drain: %s\n", strerror(-r));
                goto out;
        }

        const ingest_stats *is = ingest_get_stats(in);
        double us = (double) cpu_ns / 1e3 / (double) n_samples;
        printf("store: %lu samples (%" PRIu64 " stored), ingest_drain + ingest_commit + store_checkpoint: "
               "%.3f s thread CPU = %.3f us/sample; ingest_drain alone %.3f us/sample\n",
               n_samples, is->samples, (double) cpu_ns / 1e9, us, (double) is->cpu_ns / 1e3 / (double) n_samples);
        printf("store: %" PRIu64 " frames, %" PRIu64 " stack nodes, %" PRIu64 " strings\n", stats.n_frames,
               stats.n_stacks, stats.n_strings);
        printf("store: leaf frames: %" PRIu64 " in vmlinux, %" PRIu64 " in brd, %" PRIu64 " not symbolized\n",
               leaves_vmlinux, leaves_brd, leaves_unknown);
        printf("store: target <= %.1f us/sample: %s\n", TARGET_US, us <= TARGET_US ? "met" : "NOT met");
        if (is->samples != n_samples || leaves_unknown > 0 || leaves_brd == 0) {
                fprintf(stderr, "store: %" PRIu64 " of %lu samples stored, %" PRIu64 " leaves not symbolized, %" PRIu64
                        " in brd\n", is->samples, n_samples, leaves_unknown, leaves_brd);
                goto out;
        }
        ret = EXIT_SUCCESS;

out:
        tracker_free(tr);
        ingest_free(in);
        st = store_free(st);
        if (base)
                event_base_free(base);
        if (ret == EXIT_SUCCESS)
                printf("store: database %" PRIu64 " bytes after a clean close (%.1f bytes/sample)\n", file_bytes(db),
                       (double) file_bytes(db) / (double) n_samples);
        for (unsigned i = 0; i < N_CPUS; i++)
                if (rbs[i].mem)
                        synth_rb_done(&rbs[i]);
        (void) fixture_sh("rm -rf %s", root);
        return ret;
}
