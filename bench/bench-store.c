/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Ingest cost of the store, the way the daemon's sample writer drives it:
 * store_add_sample() in store_begin()/store_commit() batches of one drain's
 * worth of samples, into a file database (WAL, synchronous=NORMAL).
 *
 * The synthetic profile has the shape of a real one: call paths share
 * their outer frames (a prefix tree grown from a few entry points), a few
 * thousand paths account for all samples with a skewed popularity, and the
 * leaf moves between a few offsets of its function.
 *
 *   bench-store [samples] [db path] */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "store/store.h"

#define N_SAMPLES_DEFAULT 200000
#define BATCH 2000
#define N_FUNCS 700             /* kernel functions */
#define N_KFRAMES 2000          /* distinct (function, offset) kernel frames */
#define N_UFRAMES 300
#define N_PATHS 3000
#define N_COMMS 50
#define MAX_DEPTH 40
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
        unsigned comm;
} call_path;

static frame kframes[N_KFRAMES];
static frame uframes[N_UFRAMES];
static char *func_names[N_FUNCS];
static char *comms[N_COMMS];
static call_path paths[N_PATHS];

static const char *const kmodules[] = { MODULE_KERNEL, MODULE_KERNEL, MODULE_KERNEL, MODULE_KERNEL,
                                        MODULE_KERNEL, MODULE_KERNEL, "[ext4]", "[brd]", "[nvme]", "[xfs]" };
static const char *const libs[] = {
        "/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libpthread.so.0",
        "/usr/bin/bash", "/usr/sbin/nginx", "/usr/lib/x86_64-linux-gnu/libcrypto.so.3",
        "/usr/bin/python3.11",
};
static const char *const kernel_build_id = "4bf4e6b4d1a37dc4e6f0d7a5b3a8c2e91f0e5d3c";

static void make_frames(void) {
        static const char *const stems[] = { "do_sys", "vfs", "ext4", "blk_mq", "tcp", "ip", "sock", "mm",
                                             "page", "sched", "irq", "rcu", "futex", "ep", "copy", "bio" };
        static const char *const verbs[] = { "read", "write", "open", "poll", "alloc", "free", "submit",
                                             "complete", "lookup", "wait", "wake", "flush" };

        for (unsigned i = 0; i < N_FUNCS; i++)
                if (asprintf(&func_names[i], "%s_%s_%u", stems[i % ELEMENTSOF(stems)],
                             verbs[(i / ELEMENTSOF(stems)) % ELEMENTSOF(verbs)], i) < 0)
                        abort();

        for (unsigned i = 0; i < N_KFRAMES; i++) {
                unsigned fn = i % N_FUNCS;
                const char *module = kmodules[fn % ELEMENTSOF(kmodules)];
                uint64_t base = strcmp(module, MODULE_KERNEL) == 0 ? 0xffffffff81000000ULL : 0xffffffffc0000000ULL;
                uint64_t start = base + (uint64_t) fn * 0x400;
                uint64_t off = 0x10 + (uint64_t) (i / N_FUNCS) * 0x2b + rnd_below(16);

                kframes[i] = (frame) {
                        .kind = FRAME_KERNEL,
                        .addr = start + off,
                        .symbol = func_names[fn],
                        .offset = off,
                        .module = module,
                        .build_id = strcmp(module, MODULE_KERNEL) == 0 ? kernel_build_id : NULL,
                };
        }

        for (unsigned i = 0; i < N_UFRAMES; i++) {
                uint64_t off = 0x1000 + (uint64_t) rnd_below(0x200000);
                uframes[i] = (frame) {
                        .kind = FRAME_USER,
                        .addr = 0x7f0000000000ULL + (uint64_t) (i % ELEMENTSOF(libs)) * 0x10000000 + off,
                        .offset = off,
                        .module = libs[i % ELEMENTSOF(libs)],
                };
        }

        for (unsigned i = 0; i < N_COMMS; i++)
                if (asprintf(&comms[i], "%s-%u", i % 3 == 0 ? "kworker/u8" : i % 3 == 1 ? "nginx" : "fio", i) < 0)
                        abort();
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
                        p->comm = rnd_below(4) == 0 ? rnd_below(N_COMMS) : parent->comm;
                } else
                        p->comm = rnd_below(N_COMMS);

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

static double cpu_seconds(void) {
        struct rusage ru;

        if (getrusage(RUSAGE_SELF, &ru) < 0)
                return 0;
        return (double) ru.ru_utime.tv_sec + (double) ru.ru_utime.tv_usec / 1e6 +
               (double) ru.ru_stime.tv_sec + (double) ru.ru_stime.tv_usec / 1e6;
}

static uint64_t file_bytes(const char *path, const char *suffix) {
        char p[4096];
        struct stat st;

        snprintf(p, sizeof(p), "%s%s", path, suffix);
        return stat(p, &st) < 0 ? 0 : (uint64_t) st.st_size;
}

static void remove_db(const char *path) {
        static const char *const suffixes[] = { "", "-wal", "-shm" };
        char p[4096];

        for (size_t i = 0; i < ELEMENTSOF(suffixes); i++) {
                snprintf(p, sizeof(p), "%s%s", path, suffixes[i]);
                (void) unlink(p);
        }
}

int main(int argc, char **argv) {
        unsigned long n_samples = argc > 1 ? strtoul(argv[1], NULL, 0) : N_SAMPLES_DEFAULT;
        char default_path[64];
        const char *path;
        frame chain[MAX_DEPTH + 8];
        store_stats stats;
        store *s = NULL;
        int64_t boot_id;
        uint64_t t = 1700000000000000000ULL;
        double t0, t1;
        int r;

        if (n_samples == 0)
                n_samples = N_SAMPLES_DEFAULT;
        snprintf(default_path, sizeof(default_path), "/tmp/bench-store-%d.db", (int) getpid());
        path = argc > 2 ? argv[2] : default_path;

        make_frames();
        make_paths();
        remove_db(path);

        t0 = cpu_seconds();

        r = store_open(path, STORE_READWRITE, &s);
        if (r < 0) {
                fprintf(stderr, "Failed to open %s: %s\n", path, strerror(-r));
                return 0;
        }
        r = store_add_boot(s, "0b6f2d2a-5a57-4d4e-9a3e-1c9d3f2b7e10", kernel_build_id, 0xffffffff81000000ULL,
                           "6.1.0-bench", t, &boot_id);
        if (r < 0) {
                fprintf(stderr, "Failed to add boot: %s\n", strerror(-r));
                goto out;
        }

        for (unsigned long i = 0; i < n_samples;) {
                r = store_begin(s);
                if (r < 0) {
                        fprintf(stderr, "store_begin: %s\n", strerror(-r));
                        goto out;
                }
                for (unsigned long b = 0; b < BATCH && i < n_samples; b++, i++) {
                        const call_path *p = paths + pick_path();
                        size_t n = 0;

                        /* Leaf first: kernel frames innermost-first, then user
                         * frames, innermost-first, outermost caller last. */
                        for (unsigned d = p->n_kernel; d-- > 0;)
                                chain[n++] = kframes[p->kernel[d]];
                        for (unsigned d = p->n_user; d-- > 0;)
                                chain[n++] = uframes[p->user[d]];
                        /* The sampled IP wanders within the leaf function. */
                        chain[0].addr += rnd_below(4);
                        chain[0].offset = chain[0].addr - (kframes[p->kernel[p->n_kernel - 1]].addr -
                                                           kframes[p->kernel[p->n_kernel - 1]].offset);

                        t += 250000 + rnd_below(1000);
                        sample smp = {
                                .time_ns = t,
                                .cpu = (uint32_t) (i & 1),
                                .pid = 1000 + p->comm,
                                .tid = 1000 + p->comm,
                                .comm = comms[p->comm],
                                .period = 250000,
                                .n_frames = n,
                                .frames = chain,
                        };
                        r = store_add_sample(s, boot_id, &smp);
                        if (r < 0) {
                                fprintf(stderr, "store_add_sample: %s\n", strerror(-r));
                                goto out;
                        }
                }
                r = store_commit(s);
                if (r < 0) {
                        fprintf(stderr, "store_commit: %s\n", strerror(-r));
                        goto out;
                }
                /* As the daemon does after its commits. */
                r = store_checkpoint(s);
                if (r < 0) {
                        fprintf(stderr, "store_checkpoint: %s\n", strerror(-r));
                        goto out;
                }
        }

        t1 = cpu_seconds();

        /* Sizes before closing: closing checkpoints and deletes the WAL. */
        r = store_get_stats(s, &stats);
        if (r < 0) {
                fprintf(stderr, "store_get_stats: %s\n", strerror(-r));
                goto out;
        }

        double us = (t1 - t0) * 1e6 / (double) n_samples;
        printf("store: %lu samples in %.3f s CPU (getrusage user+sys) = %.3f us/sample, db %" PRIu64
               " bytes (%.1f bytes/sample)\n",
               n_samples, t1 - t0, us, stats.db_bytes, (double) stats.db_bytes / (double) n_samples);
        printf("store: %" PRIu64 " frames, %" PRIu64 " stack nodes, %" PRIu64 " strings\n",
               stats.n_frames, stats.n_stacks, stats.n_strings);
        printf("store: target <= %.1f us/sample (daemon budget 2 us incl. symbolization): %s\n",
               TARGET_US, us <= TARGET_US ? "met" : "NOT met");

out:
        store_free(s);
        printf("store: db after close %" PRIu64 " bytes\n", file_bytes(path, "") + file_bytes(path, "-wal"));
        if (argc <= 2)
                remove_db(path);
        return 0;
}
