/* SPDX-License-Identifier: GPL-2.0-or-later */
/* bench-history DB SAMPLES [CPUS] [HZ]: writes SAMPLES samples of a busy,
 * mixed machine into DB through the daemon's own path (perf records in
 * in-memory ring buffers -> ingest_drain() -> symbolizer -> sample writer
 * -> commit every simulated second), ending now, then times queries over
 * it on a read-only connection, as the daemon's request handler makes them.
 *
 * The machine: CPUS CPUs sampled at HZ (default 2, 999), so the samples
 * span SAMPLES / (CPUS * HZ) seconds. 30% of samples are idle (swapper);
 * the rest come from 12 long-lived processes and a stream of short-lived
 * ones (a fork + exec every 20 ms of simulated time, each living 0.1-3 s,
 * like a build). A process runs one of 9 programs, each mapping 3-6 of 200
 * shared objects, at addresses randomized per process. Stacks: a user part
 * 2-20 frames deep, one of 5,000 call paths per program over 64 functions
 * per object; a third of the samples also have a kernel part, one of
 * 3,000 paths over 2,000 real kernel functions (from /proc/kallsyms),
 * mostly the one its user path makes (a system call site), sometimes any
 * (an interrupt). Popularity is Zipf-like throughout.
 *
 * Needs root (kallsyms addresses). Prints ingest CPU per sample, bytes per
 * sample, and for each query its time warm and cold (page cache dropped)
 * and the resident memory it took (peak above what the process held
 * before, and what it kept after).
 *
 * bench-history --build DB: opens DB for writing (migrating it, as the
 * daemon does) and builds the hours by cgroup it lacks, a step after
 * another (store_build_step(), which the daemon runs each second); prints
 * the calls (of 20 ms of steps, as the daemon's), their CPU time and the
 * longest.
 *
 * bench-history --replay PERF.DATA DB SAMPLES [STRETCH]: the same, with
 * the records of a real machine instead of a model: those of `perf record
 * -a -g --buildid-mmap [--all-cgroups]` (samples, mmap2 with a build-id,
 * comm, fork, exit, cgroup), written again pass after pass until SAMPLES
 * samples are written, ending now. Tasks perf saw start get new ids in
 * each pass (and end with it); older ones keep theirs; what perf wrote of
 * the machine before it started is written once. STRETCH (default 1)
 * spreads the passes over that many times their time: a capture at 999 Hz
 * stretched by 10.09 has the samples of 99 Hz.
 *
 * bench-history --queries DB: only the queries, over a database written
 * before, ending at its newest sample. With BENCH_QUERY=NAME[|NAME...] in
 * the environment, only the queries of those names (as printed, e.g.
 * "--since 7d --pid 1003"). With BENCH_HASH=1, each query's line ends
 * with a hash of its answer (totals, rows, stacks), to compare builds.
 * With BENCH_ROWS=1 too, the rows it hashes are printed. With
 * BENCH_TIMEOUT=SECONDS, queries have that deadline, as the daemon's
 * query_timeout gives them; with BENCH_MAX_STACKS=N, at most N stacks (0:
 * all; default 20,000, as the daemon's query_max_stacks); with
 * BENCH_GROUP_SLOTS=N, a group table of at most N slots; with BENCH_PID=N,
 * the pid queries are of pid N (default 1003, a process of the model). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ingest.h"
#include "macro.h"
#include "perf/perf-record.h"
#include "perf-synth.h"
#include "store/store.h"
#include "text-symbols.h"
#include "timeparse.h"
#include "wire/protocol.h"
#include "wire/query-json.h"

#define RB_DATA (4u << 20)      /* per CPU; a simulated drain interval fits */
#define DRAIN_NS (250 * NSEC_PER_MSEC)
#define N_OBJECTS 200
#define FUNCS_PER_OBJECT 64
#define N_KPATHS 3000
#define N_KFUNCS 2000
#define MAX_PROCS 512

static uint64_t rng = 0x2545f4914f6cdd1dULL;
static uint64_t rnd(void) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        return rng;
}

/* A Zipf-like pick in [0, n): small indexes much more often. */
static size_t zipf(size_t n) {
        double u = (double) (rnd() >> 11) / (double) (1ULL << 53);
        return (size_t) ((double) n * pow(u, 3.0)) % n;
}

/* Stops the benchmark when a record cannot be written (a buffer is full:
 * drain more often) or read, or a drain or commit fails. */
static void must(int r) {
        if (r < 0) {
                fprintf(stderr, "writing, reading, draining or committing records: %s\n", strerror(-r));
                exit(1);
        }
}

static void emit_mmap2(synth_rb *c, uint32_t pid, uint64_t addr, uint64_t len, unsigned object, uint64_t time,
                       uint32_t cpu) {
        char path[48];
        uint8_t bid[20];

        for (int i = 0; i < 20; i++)
                bid[i] = (uint8_t) (object * 7 + (unsigned) i);
        snprintf(path, sizeof path, "/usr/lib/bench/libobj%03u.so", object);
        must(synth_mmap2(c, pid, addr, len, 0, path, bid, time, cpu));
}

typedef struct program {
        const char *comm;
        unsigned objects[6];
        unsigned n_objects;
} program;

static const char *const program_names[] = { "server", "cc1", "sh", "make", "ld", "as", "sed", "grep", "python3" };
static program programs[ELEMENTSOF(program_names)];

/* Cgroups, as PERF_RECORD_CGROUP names them: the root (the idle task's),
 * the long-lived server's service, and sessions and build services the
 * short-lived processes run in. Ids far above a real hierarchy's. */
#define CG_BASE (UINT64_C(1) << 40)
#define N_SESSIONS 16
#define N_BUILDS 8
static const char *cgroup_path(size_t i, char *buf, size_t size) {
        if (i == 0)
                snprintf(buf, size, "/");
        else if (i == 1)
                snprintf(buf, size, "/system.slice/server.service");
        else if (i < 2 + N_SESSIONS)
                snprintf(buf, size, "/user.slice/user-1000.slice/session-%zu.scope", i - 2);
        else
                snprintf(buf, size, "/system.slice/system-build.slice/build@%zu.service", i - 2 - N_SESSIONS);
        return buf;
}

typedef struct proc {
        uint32_t pid;
        uint64_t cgroup;        /* its cgroup's id */
        const program *prog;
        uint64_t base[6];
        uint64_t end_ns;        /* 0: lives forever */
} proc;

static uint64_t kfuncs[N_KFUNCS];
static uint64_t kpaths[N_KPATHS][12];
static unsigned kpath_len[N_KPATHS];

typedef struct kfunc_sample {
        size_t n, seen;
} kfunc_sample;

/* Reservoir-samples text symbols of the core kernel. */
static bool sample_kfunc(const kallsyms_line *l, void *userdata) {
        kfunc_sample *k = userdata;

        if (l->module || l->addr == 0)
                return true;
        if (k->n < N_KFUNCS)
                kfuncs[k->n++] = l->addr + 0x10;
        else if (rnd() % (k->seen + 1) < N_KFUNCS)
                kfuncs[rnd() % N_KFUNCS] = l->addr + 0x10;
        k->seen++;
        return true;
}

static int load_kernel_functions(void) {
        kfunc_sample k = {};
        int r = for_each_text_symbol("/proc/kallsyms", sample_kfunc, &k);

        if (r < 0)
                return r;
        return k.n == N_KFUNCS ? 0 : -ENODATA;
}

static void make_kernel_paths(void) {
        for (size_t i = 0; i < N_KPATHS; i++) {
                kpath_len[i] = 3 + (unsigned) (rnd() % 10);
                for (unsigned j = 0; j < kpath_len[i]; j++)
                        kpaths[i][j] = kfuncs[zipf(N_KFUNCS)];
        }
}

static proc procs[MAX_PROCS];
static size_t n_procs;
static uint32_t next_pid = 1000;

static void make_programs(void) {
        for (size_t i = 0; i < ELEMENTSOF(programs); i++) {
                programs[i].comm = program_names[i];
                programs[i].n_objects = 3 + (unsigned) (rnd() % 4);
                for (unsigned j = 0; j < programs[i].n_objects; j++)
                        programs[i].objects[j] = j == 0 ? (unsigned) i : (unsigned) (rnd() % N_OBJECTS);
        }
}

static void spawn(synth_rb *c, uint64_t now, uint32_t cpu, uint64_t life_ns) {
        proc *p;

        if (n_procs == MAX_PROCS)
                return;
        p = &procs[n_procs++];
        *p = (proc) {
                .pid = next_pid++,
                .prog = &programs[life_ns ? 1 + rnd() % (ELEMENTSOF(programs) - 1) : 0],
                .end_ns = life_ns ? now + life_ns : 0,
                .cgroup = CG_BASE + (life_ns ? 2 + rnd() % (N_SESSIONS + N_BUILDS) : 1),
        };
        if (next_pid > 4000000)
                next_pid = 1000;
        must(synth_task(c, PERF_RECORD_FORK, p->pid, 1, now, cpu));
        must(synth_comm(c, p->pid, p->prog->comm, now, cpu, true));
        for (unsigned i = 0; i < p->prog->n_objects; i++) {
                p->base[i] = 0x7f0000000000ULL + (rnd() % 0xffffff) * 0x100000ULL;
                emit_mmap2(c, p->pid, p->base[i], 0x100000, p->prog->objects[i], now, cpu);
        }
}

static double cpu_seconds(void) {
        struct timespec ts;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static double wall_seconds(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static uint64_t file_bytes(const char *db) {
        static const char *const suffix[] = { "", "-wal", "-shm" };
        uint64_t total = 0;

        for (size_t i = 0; i < ELEMENTSOF(suffix); i++) {
                char p[4096];
                struct stat st;

                snprintf(p, sizeof p, "%s%s", db, suffix[i]);
                if (stat(p, &st) == 0)
                        total += (uint64_t) st.st_size;
        }
        return total;
}

static void drop_caches(void) {
        FILE *f;

        sync();
        f = fopen("/proc/sys/vm/drop_caches", "we");
        if (f) {
                fputs("3\n", f);
                fclose(f);
        }
}

/* VmRSS or VmHWM of this process, in kB. */
static long status_kb(const char *key) {
        char line[256];
        long v = -1;
        FILE *f = fopen("/proc/self/status", "re");

        if (!f)
                return -1;
        while (fgets(line, sizeof line, f))
                if (strncmp(line, key, strlen(key)) == 0 && line[strlen(key)] == ':')
                        v = strtol(line + strlen(key) + 1, NULL, 10);
        fclose(f);
        return v;
}

/* Resets VmHWM to VmRSS (Linux >= 4.0). */
static void reset_peak_rss(void) {
        FILE *f = fopen("/proc/self/clear_refs", "we");

        if (f) {
                fputs("5\n", f);
                fclose(f);
        }
}

/* BENCH_QUERY=NAME[|NAME...]: only the queries named so; unset, all. */
static bool query_selected(const char *what) {
        const char *sel = getenv("BENCH_QUERY"), *p;

        if (!sel)
                return true;
        for (p = sel;; p++) {
                const char *end = strchrnul(p, '|');

                if ((size_t) (end - p) == strlen(what) && strncmp(p, what, (size_t) (end - p)) == 0)
                        return true;
                if (*end == '\0')
                        return false;
                p = end;
        }
}

/* FNV-1a over the answer: totals, every row (comm, module, symbol,
 * cgroup, samples), every stack (comm, frames, samples) and every cgroup
 * total (cgroup, samples, kernel, top row), in order, so
 * that two builds' answers can be compared (BENCH_HASH=1). */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
        const uint8_t *b = p;

        for (size_t i = 0; i < n; i++)
                h = (h ^ b[i]) * UINT64_C(0x100000001b3);
        return h;
}

static uint64_t fnv_str(uint64_t h, const char *s) {
        return fnv(h, s ? s : "", s ? strlen(s) + 1 : 1);
}

static uint64_t answer_hash(const query_result *res) {
        uint64_t h = UINT64_C(0xcbf29ce484222325);
        bool print = getenv("BENCH_ROWS");

        h = fnv(h, &res->total_samples, sizeof res->total_samples);
        for (size_t i = 0; i < res->n_rows; i++) {
                const query_row *r = res->rows + i;

                h = fnv_str(fnv_str(fnv_str(fnv_str(h, r->comm), r->module), r->symbol), r->cgroup);
                h = fnv(h, &r->samples, sizeof r->samples);
                if (print)
                        fprintf(stderr, "  row %zu: %s %s %s %s %" PRIu64 "\n", i, r->comm ?: "-", r->module ?: "-",
                                r->symbol ?: "-", r->cgroup ?: "-", r->samples);
        }
        for (size_t i = 0; i < res->n_stacks; i++) {
                const query_stack *st = res->stacks + i;

                h = fnv_str(h, st->comm);
                for (size_t k = 0; k < st->n_frames; k++)
                        h = fnv_str(h, st->frames[k]);
                h = fnv(h, &st->samples, sizeof st->samples);
        }
        for (size_t i = 0; i < res->n_cgroup_totals; i++) {
                const query_cgroup_total *t = res->cgroup_totals + i;

                h = fnv_str(fnv_str(fnv_str(h, t->cgroup), t->top.module), t->top.symbol);
                h = fnv(fnv(fnv(h, &t->samples, sizeof t->samples), &t->kernel, sizeof t->kernel), &t->top.samples,
                        sizeof t->top.samples);
        }
        return h;
}

/* One query as the daemon's worker runs it: a read-only connection,
 * store_query() with the daemon's default caps (10,000 rows, 20,000
 * stacks), the answer formatted into reply messages, everything freed and
 * malloc_trim(). Prints the time of store_query(), and the resident memory
 * the whole took above what the process held before (peak) and kept after. */
static void time_query_ex(const char *db, const char *what, uint64_t since_ns, const char *comm, int64_t pid, int cpu,
                          bool stacks, bool cold, const char *unit, bool by_cgroup) {
        query_params q = QUERY_PARAMS_INIT;
        query_result *res = NULL;
        char **replies = NULL;
        size_t n_replies = 0;
        store *s = NULL;
        double t0, t1;
        long rss0, peak, rss1;
        int r;

        if (!query_selected(what))
                return;
        q.since_ns = since_ns;
        q.comm = comm;
        q.pid = pid;
        q.cpu = cpu;
        q.top = by_cgroup ? 1 : 25;   /* perfsnapctl units: the cgroups' totals, not the rows */
        q.want_stacks = stacks;
        q.unit = unit;
        q.by_cgroup = by_cgroup;
        q.no_comm = by_cgroup;          /* as perfsnapctl units asks */
        q.cgroup_totals = by_cgroup;
        if (cold)
                drop_caches();
        rss0 = status_kb("VmRSS");
        reset_peak_rss();
        /* Each query on a fresh read-only connection, as a worker of the
         * daemon would after its cache was dropped; warm: the file is in
         * the page cache from the run before. */
        t0 = wall_seconds();
        /* BENCH_TIMEOUT=SECONDS: the daemon's query_timeout. */
        if (getenv("BENCH_TIMEOUT"))
                q.deadline_ns = clock_ns(CLOCK_MONOTONIC) + strtoull(getenv("BENCH_TIMEOUT"), NULL, 10) * NSEC_PER_SEC;
        /* BENCH_MAX_STACKS=N: the daemon's query_max_stacks (0: all). */
        uint32_t max_stacks = getenv("BENCH_MAX_STACKS") ? (uint32_t) strtoul(getenv("BENCH_MAX_STACKS"), NULL, 10) : 20000;
        r = store_open(db, STORE_READONLY, &s);
        /* BENCH_GROUP_SLOTS=N: a query's group table bound (store.h). */
        if (r >= 0 && getenv("BENCH_GROUP_SLOTS"))
                store_set_query_group_slots(s, strtoull(getenv("BENCH_GROUP_SLOTS"), NULL, 10));
        if (r >= 0)
                r = store_query(s, &q, 10000, max_stacks, &res);
        t1 = wall_seconds();
        if (r == -ETIME) {
                printf("query %-38s %-4s stopped by its deadline after %.1f ms\n", what, cold ? "cold" : "warm",
                       (t1 - t0) * 1e3);
                store_free(s);
                return;
        }
        if (r < 0) {
                fprintf(stderr, "query %s: %s\n", what, strerror(-r));
                exit(1);
        }
        r = query_result_format_replies(res, PERFSNAP_MAX_REPLY_BYTES, &replies, &n_replies);
        if (r < 0) {
                fprintf(stderr, "query %s: formatting the answer: %s\n", what, strerror(-r));
                exit(1);
        }
        peak = status_kb("VmHWM");
        printf("query %-38s %-4s %8.1f ms  %10" PRIu64 " samples  %3zu rows %5zu stacks %3u passes", what, cold ? "cold" : "warm",
               (t1 - t0) * 1e3, res->total_samples, res->n_rows, res->n_stacks, (unsigned) res->passes);
        if (getenv("BENCH_HASH"))
                printf("  answer %016" PRIx64, answer_hash(res));
        if (res->n_stacks > 0) {
                /* How much of the window the stacks shown name. */
                uint64_t others = 0;

                for (size_t i = 0; i < res->n_stacks; i++)
                        if (res->stacks[i].n_frames == 1 && streq(res->stacks[i].frames[0], "[other stacks]"))
                                others += res->stacks[i].samples;
                printf("  others %.1f%%", res->total_samples ? 100.0 * (double) others / (double) res->total_samples : 0.0);
        }
        for (size_t i = 0; i < n_replies; i++)
                free(replies[i]);
        free(replies);
        query_result_free(res);
        store_free(s);
        malloc_trim(0);
        rss1 = status_kb("VmRSS");
        printf("  memory +%.1f MB peak, %+.1f MB after\n", (double) (peak - rss0) / 1024, (double) (rss1 - rss0) / 1024);
}

static void time_query(const char *db, const char *what, uint64_t since_ns, const char *comm, int64_t pid, int cpu,
                       bool stacks, bool cold) {
        time_query_ex(db, what, since_ns, comm, pid, cpu, stacks, cold, NULL, false);
}

static void time_queries(const char *db, uint64_t now) {
        const uint64_t hour = 3600 * NSEC_PER_SEC, week = 7 * 86400 * NSEC_PER_SEC;
        const char *env = getenv("BENCH_PID");
        int64_t pid = env ? strtoll(env, NULL, 10) : 1003;
        char pid_hour[48], pid_week[48];

        snprintf(pid_hour, sizeof pid_hour, "--since 1h --pid %" PRId64, pid);
        snprintf(pid_week, sizeof pid_week, "--since 7d --pid %" PRId64, pid);
        for (int cold = 1; cold >= 0; cold--) {
                time_query(db, "--since 1h", now - hour, NULL, -1, -1, false, cold);
                time_query(db, "--since 1h --comm cc1", now - hour, "cc1", -1, -1, false, cold);
                time_query(db, pid_hour, now - hour, NULL, pid, -1, false, cold);
                time_query(db, "--since 1h --cpu 1", now - hour, NULL, -1, 1, false, cold);
                time_query(db, "--since 1h --format folded", now - hour, NULL, -1, -1, true, cold);
                time_query(db, "--since 5m", now - 300 * NSEC_PER_SEC, NULL, -1, -1, false, cold);
                time_query(db, "--since 7d", now - week, NULL, -1, -1, false, cold);
                time_query(db, pid_week, now - week, NULL, pid, -1, false, cold);
                time_query(db, "--since 7d --format folded", now - week, NULL, -1, -1, true, cold);
                /* Attribution: a unit filter, and perfsnapctl units. */
                time_query_ex(db, "--since 1h --unit 'session-*.scope'", now - hour, NULL, -1, -1, false, cold,
                              "session-*.scope", false);
                time_query_ex(db, "units --since 1h", now - hour, NULL, -1, -1, false, cold, NULL, true);
                time_query_ex(db, "--since 7d --unit 'session-*.scope'", now - week, NULL, -1, -1, false, cold,
                              "session-*.scope", false);
                time_query_ex(db, "units --since 7d", now - week, NULL, -1, -1, false, cold, NULL, true);
        }
}

/* --replay: a perf.data file of `perf record -a -g` (a real machine's
 * load), written again and again through the same path, as a long history
 * of that load. */

/* perf.data's header (tools/perf/Documentation/perf.data-file-format.txt). */
typedef struct pd_section {
        uint64_t offset, size;
} pd_section;

typedef struct pd_header {
        char magic[8];          /* "PERFILE2" */
        uint64_t size, attr_size;
        pd_section attrs, data, event_types;
} pd_header;

typedef struct cap_rec {
        uint64_t time;          /* 0 for what perf wrote of the machine before it started */
        uint64_t off;           /* in the file */
} cap_rec;

typedef struct cap_task {
        uint32_t pid, tid;
        bool exited;
} cap_task;

typedef struct capture {
        const uint8_t *map;
        size_t map_size;
        uint64_t sample_type;
        cap_rec *recs;          /* by time */
        size_t n_recs;
        uint64_t samples;       /* in one pass */
        uint64_t t0, t1;        /* first and last record perf timed */
        size_t cpus;            /* 1 + the highest CPU a record names */
        cap_task *tasks;        /* started while perf recorded (PERF_RECORD_FORK) */
        size_t n_tasks;
        uint32_t lo, hi;        /* their ids' range */
} capture;

#define PID_LIMIT 4194304u

static int cmp_cap_rec(const void *a, const void *b) {
        const cap_rec *x = a, *y = b;

        if (x->time != y->time)
                return x->time < y->time ? -1 : 1;
        return x->off < y->off ? -1 : x->off > y->off;
}

/* Process and thread ids of tasks started during the capture move on by a
 * span each pass, so each pass's are new tasks, as a machine's would be;
 * those of tasks older than the capture stay. */
static uint32_t cap_id(const capture *c, const bool *started, uint32_t id, uint64_t pass) {
        uint64_t span = (uint64_t) c->hi - c->lo + 1, room = PID_LIMIT - c->lo;

        if (id == 0 || id >= PID_LIMIT || !started[id])
                return id;
        return c->lo + (uint32_t) (((uint64_t) (id - c->lo) + pass * span) % room);
}

static int capture_open(const char *path, capture *c) {
        const pd_header *h;
        struct stat st;
        int fd, r = 0;

        *c = (capture) { .t0 = UINT64_MAX, .lo = UINT32_MAX, .cpus = 1 };
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0) {
                r = -errno;
                if (fd >= 0)
                        close(fd);
                return r;
        }
        c->map_size = (size_t) st.st_size;
        c->map = c->map_size >= sizeof(pd_header) ? mmap(NULL, c->map_size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
        close(fd);
        if (c->map == MAP_FAILED)
                return -EINVAL;
        h = (const pd_header *) (const void *) c->map;
        /* Sections within the file (no sum that can wrap), records 8-byte aligned. */
        if (memcmp(h->magic, "PERFILE2", 8) != 0 || h->attr_size < 16 + PERF_ATTR_SIZE_VER0 ||
            h->attrs.size < h->attr_size || h->attrs.offset > c->map_size ||
            h->attrs.size > c->map_size - h->attrs.offset || h->data.offset > c->map_size ||
            h->data.size > c->map_size - h->data.offset || h->data.offset % 8 != 0) {
                fprintf(stderr, "%s: not a perf.data file this reads (PERFILE2, not a pipe)\n", path);
                return -EINVAL;
        }
        for (uint64_t a = 0; a < h->attrs.size / h->attr_size; a++) {
                struct perf_event_attr attr = {};
                uint64_t st_a;

                memcpy(&attr, c->map + h->attrs.offset + a * h->attr_size,
                       MIN(sizeof attr, (size_t) h->attr_size - 16));
                st_a = attr.sample_type;
                if (a == 0)
                        c->sample_type = st_a;
                if (st_a != c->sample_type || !attr.sample_id_all || !(st_a & PERF_SAMPLE_TIME) ||
                    !(st_a & PERF_SAMPLE_CPU) || !(st_a & PERF_SAMPLE_CALLCHAIN)) {
                        fprintf(stderr, "%s: its events differ in sample_type or lack time, cpu, callchain or "
                                        "sample_id_all (record with: perf record -a -g [--all-cgroups] --buildid-mmap)\n",
                                path);
                        return -EINVAL;
                }
        }

        size_t alloc = 0, talloc = 0;
        for (uint64_t off = h->data.offset; off + sizeof(struct perf_event_header) <= h->data.offset + h->data.size;) {
                const struct perf_event_header *eh = (const void *) (c->map + off);
                perf_record rec;
                uint64_t t;

                if (eh->size < sizeof *eh || eh->size % 8 != 0 || eh->size > h->data.offset + h->data.size - off)
                        return -EBADMSG;
                switch (eh->type) {
                case PERF_RECORD_SAMPLE:
                case PERF_RECORD_MMAP2:
                case PERF_RECORD_COMM:
                case PERF_RECORD_FORK:
                case PERF_RECORD_EXIT:
                case PERF_RECORD_CGROUP:
                        r = perf_record_decode(eh, eh->size, c->sample_type, &rec);
                        if (r < 0)
                                return r;
                        t = eh->type == PERF_RECORD_SAMPLE ? rec.sample.time : rec.sid.time;
                        c->samples += eh->type == PERF_RECORD_SAMPLE;
                        c->cpus = MAX(c->cpus,
                                      (size_t) (eh->type == PERF_RECORD_SAMPLE ? rec.sample.cpu : rec.sid.cpu) + 1);
                        if (t > 0)
                                c->t0 = MIN(c->t0, t);
                        c->t1 = MAX(c->t1, t);
                        if (eh->type == PERF_RECORD_FORK || eh->type == PERF_RECORD_EXIT) {
                                size_t i;

                                for (i = 0; i < c->n_tasks && c->tasks[i].tid != rec.task.tid; i++)
                                        ;
                                if (eh->type == PERF_RECORD_EXIT) {
                                        if (i < c->n_tasks)
                                                c->tasks[i].exited = true;
                                } else if (i < c->n_tasks)
                                        c->tasks[i].exited = false;     /* the id's next task */
                                /* Time 0: what perf wrote of the tasks it found. */
                                else if (t > 0 && rec.task.tid > 0 && rec.task.tid < PID_LIMIT) {
                                        if (GREEDY_REALLOC(c->tasks, talloc, c->n_tasks + 1) < 0)
                                                return -ENOMEM;
                                        c->tasks[c->n_tasks++] = (cap_task) { rec.task.pid, rec.task.tid, false };
                                        c->lo = MIN(c->lo, rec.task.tid);
                                        c->hi = MAX(c->hi, rec.task.tid);
                                }
                        }
                        if (GREEDY_REALLOC(c->recs, alloc, c->n_recs + 1) < 0)
                                return -ENOMEM;
                        c->recs[c->n_recs++] = (cap_rec) { t, off };
                        break;
                default:
                        break;
                }
                off += eh->size;
        }
        if (c->samples == 0 || c->t0 > c->t1)
                return -ENODATA;
        /* What perf wrote of the machine as it found it (time 0) comes first. */
        qsort(c->recs, c->n_recs, sizeof *c->recs, cmp_cap_rec);
        return 0;
}

/* The daemon's cadence over simulated time: a drain every DRAIN_NS, a
 * commit, checkpoint and 20 ms of housekeeping steps every second. */
typedef struct sim {
        ingest *in;
        store *st;
        synth_rb rbs[64];       /* a CPU's ring buffer */
        ringbuf *bufs[64];
        uint32_t cpu_ids[64];
        size_t cpus;
        int64_t mono_to_wall;
        uint64_t next_drain, next_commit;
} sim;

/* A new database db, written as the daemon writes (ingest of records of
 * sample_type); simulated time starts at mono0. */
static int sim_open(sim *s, const char *db, size_t cpus, uint64_t sample_type, int64_t mono_to_wall, uint64_t mono0) {
        int r;

        *s = (sim) {
                .cpus = cpus, .mono_to_wall = mono_to_wall,
                .next_drain = mono0 + DRAIN_NS, .next_commit = mono0 + NSEC_PER_SEC,
        };
        (void) unlink(db);
        r = store_open(db, STORE_READWRITE, &s->st);
        if (r >= 0)
                r = ingest_new(s->st, "/", &s->in);
        /* The tasks are the model's or a capture's: a live task of the
         * same id would lend them its comm and mappings, and the history
         * would depend on what runs on this machine now. */
        if (r >= 0)
                ingest_stop_task_lookups(s->in);
        if (r >= 0)
                r = ingest_load_kernel(s->in);
        for (size_t i = 0; r >= 0 && i < cpus; i++) {
                r = synth_rb_init(&s->rbs[i], RB_DATA);
                s->bufs[i] = &s->rbs[i].rb;
                s->cpu_ids[i] = (uint32_t) i;
        }
        if (r < 0) {
                fprintf(stderr, "set-up: %s\n", strerror(-r));
                return r;
        }
        ingest_set_sample_type(s->in, sample_type);
        return 0;
}

static void sim_advance(sim *s, uint64_t t) {
        if (t >= s->next_drain) {
                must(ingest_drain(s->in, s->bufs, s->cpu_ids, s->cpus, s->mono_to_wall, t - 10 * NSEC_PER_MSEC));
                while (s->next_drain <= t)
                        s->next_drain += DRAIN_NS;
        }
        if (t >= s->next_commit) {
                bool more;

                must(ingest_commit(s->in));
                (void) store_checkpoint(s->st);
                /* The daemon's housekeeping: the hours by cgroup,
                 * 20 ms of steps a second. */
                must(store_build_step(s->st, 20 * NSEC_PER_MSEC, &more));
                while (s->next_commit <= t)
                        s->next_commit += NSEC_PER_SEC;
        }
}

static void sim_finish(sim *s) {
        must(ingest_drain(s->in, s->bufs, s->cpu_ids, s->cpus, s->mono_to_wall, INGEST_HORIZON_ALL));
        must(ingest_commit(s->in));
}

/* Writes the capture's record cr again, in pass `pass`, at time t. */
static void replay_record(const capture *c, const bool *started, const cap_rec *cr, uint64_t pass, uint64_t t,
                          synth_rb *rbs, size_t cpus, uint64_t *emitted) {
        const struct perf_event_header *eh = (const void *) (c->map + cr->off);
        perf_record rec;
        uint32_t cpu;
        synth_rb *rb;

        must(perf_record_decode(eh, eh->size, c->sample_type, &rec));
        cpu = (eh->type == PERF_RECORD_SAMPLE ? rec.sample.cpu : rec.sid.cpu) % (uint32_t) cpus;
        rb = &rbs[cpu];
        switch (eh->type) {
        case PERF_RECORD_SAMPLE: {
                uint64_t chain[256];
                size_t nr = MIN((size_t) rec.sample.nr, ELEMENTSOF(chain));

                for (size_t i = 0; i < nr; i++)
                        chain[i] = perf_sample_ip(&rec.sample, i);
                must(synth_sample_cg(rb, cap_id(c, started, rec.sample.pid, pass),
                                     cap_id(c, started, rec.sample.tid, pass), t, cpu, rec.sample.period, chain, nr,
                                     rec.sample.user, c->sample_type & PERF_SAMPLE_CGROUP ? &rec.sample.cgroup : NULL));
                (*emitted)++;
                break;
        }
        case PERF_RECORD_COMM:
                must(synth_comm_tid(rb, cap_id(c, started, rec.comm.pid, pass), cap_id(c, started, rec.comm.tid, pass),
                                    rec.comm.comm, t, cpu, rec.comm.exec));
                break;
        case PERF_RECORD_FORK:
        case PERF_RECORD_EXIT:
                must(synth_task_tid(rb, eh->type, cap_id(c, started, rec.task.pid, pass),
                                    cap_id(c, started, rec.task.tid, pass), cap_id(c, started, rec.task.ppid, pass),
                                    cap_id(c, started, rec.task.ptid, pass), t, cpu));
                break;
        case PERF_RECORD_MMAP2:
                must(synth_mmap2(rb, cap_id(c, started, rec.mmap2.pid, pass), rec.mmap2.addr, rec.mmap2.len,
                                 rec.mmap2.pgoff, rec.mmap2.filename,
                                 rec.mmap2.build_id_size ? rec.mmap2.build_id : NULL, t, cpu));
                break;
        case PERF_RECORD_CGROUP:
                must(synth_cgroup(rb, rec.cgroup.id, rec.cgroup.path, t, cpu));
                break;
        }
}

static int replay(const char *data, const char *db, uint64_t n_samples, double stretch) {
        const uint64_t mono0 = 1000 * NSEC_PER_SEC;
        uint64_t span, last = 0, emitted = 0, passes, seen = 0, wall_end;
        size_t cpus;
        bool *started;
        capture c;
        double c0, w0, c1, w1;
        static sim s;
        int r;

        r = capture_open(data, &c);
        if (r < 0) {
                fprintf(stderr, "%s: %s\n", data, strerror(-r));
                return 1;
        }
        started = calloc(PID_LIMIT, sizeof *started);
        if (!started)
                return 1;
        for (size_t i = 0; i < c.n_tasks; i++)
                started[c.tasks[i].tid] = true;
        cpus = MIN(c.cpus, ELEMENTSOF(s.rbs));
        /* The passes follow each other with no gap; the last ends at its
         * n_samples-th sample, now. */
        span = (uint64_t) ((double) (c.t1 - c.t0 + NSEC_PER_MSEC) * stretch);
        passes = (n_samples - 1) / c.samples;
        for (size_t i = 0; i < c.n_recs && seen < n_samples - passes * c.samples; i++) {
                const struct perf_event_header *eh = (const void *) (c.map + c.recs[i].off);

                if (eh->type == PERF_RECORD_SAMPLE) {
                        seen++;
                        last = c.recs[i].time;
                }
        }
#define REPLAY_T(pass, time) \
        (mono0 + (pass) * span + ((time) ? (uint64_t) ((double) ((time) - c.t0) * stretch) : 0))
        wall_end = (uint64_t) time(NULL) * NSEC_PER_SEC;
        if (sim_open(&s, db, cpus, PERFSNAP_SAMPLE_TYPE | (c.sample_type & PERF_SAMPLE_CGROUP),
                     (int64_t) wall_end - (int64_t) REPLAY_T(passes, last), mono0) < 0)
                return 1;

        c0 = cpu_seconds();
        w0 = wall_seconds();
        for (uint64_t pass = 0; emitted < n_samples; pass++) {
                for (size_t i = 0; i < c.n_recs && emitted < n_samples; i++) {
                        uint64_t t = REPLAY_T(pass, c.recs[i].time);

                        if (pass > 0 && c.recs[i].time == 0)
                                continue;
                        replay_record(&c, started, &c.recs[i], pass, t, s.rbs, cpus, &emitted);
                        sim_advance(&s, t);
                }
                if (emitted == n_samples)
                        break;
                /* Tasks alive when perf stopped end with the pass, so the
                 * next pass's start as new ones. */
                for (size_t i = 0; i < c.n_tasks; i++)
                        if (!c.tasks[i].exited)
                                must(synth_task_tid(&s.rbs[0], PERF_RECORD_EXIT,
                                                    cap_id(&c, started, c.tasks[i].pid, pass),
                                                    cap_id(&c, started, c.tasks[i].tid, pass), 1, 1,
                                                    REPLAY_T(pass, c.t1), 0));
        }
#undef REPLAY_T
        sim_finish(&s);
        c1 = cpu_seconds();
        w1 = wall_seconds();

        const ingest_stats *is = ingest_get_stats(s.in);
        printf("replayed %s: %" PRIu64 " samples (%" PRIu64 " stored), %" PRIu64 " a pass over %.1f s, each pass "
               "%.1f s of history (x%.2f), %" PRIu64 " passes or part of one, %zu CPUs; %zu tasks started in a pass\n",
               data, emitted, is->samples, c.samples, (double) (c.t1 - c.t0) / 1e9, (double) span / 1e9, stretch,
               passes + 1, cpus, c.n_tasks);
        printf("replay + ingest: %.2f s CPU (%.2f s wall), %.3f us/sample (the records' writing included)\n", c1 - c0,
               w1 - w0, (c1 - c0) * 1e6 / (double) emitted);
        printf("ingest_drain alone: %.3f us/sample\n", (double) is->cpu_ns / 1e3 / (double) emitted);
        ingest_free(s.in);
        store_free(s.st);
        printf("database: %" PRIu64 " bytes after a clean close, %.2f bytes/sample\n", file_bytes(db),
               (double) file_bytes(db) / (double) emitted);
        free(started);
        free(c.recs);
        free(c.tasks);
        munmap((void *) c.map, c.map_size);
        time_queries(db, wall_end + NSEC_PER_SEC);
        return 0;
}

int main(int argc, char **argv) {
        uint64_t n_samples, cpus, hz, span_ns, mono0 = 1000 * NSEC_PER_SEC, wall_end;
        uint64_t t_next_spawn, emitted = 0;
        synth_rb *rbs;
        store *st = NULL;
        ingest *in = NULL;
        double c0, w0, c1, w1;
        int64_t mono_to_wall;
        static sim s;
        int r;

        if (argc < 3) {
                fprintf(stderr, "usage: bench-history DB SAMPLES [CPUS] [HZ]\n"
                                "       bench-history --queries DB\n"
                                "       bench-history --build DB\n"
                                "       bench-history --replay PERF.DATA DB SAMPLES [STRETCH]\n");
                return 2;
        }
        if (geteuid() != 0) {
                fprintf(stderr, "needs root (kernel addresses in /proc/kallsyms, dropping the page cache)\n");
                return 77;
        }
        if (streq(argv[1], "--build")) {
                uint64_t calls = 0;
                double c, w, longest = 0;
                bool more = true;

                c0 = cpu_seconds();
                w0 = wall_seconds();
                r = store_open(argv[2], STORE_READWRITE, &st);
                c1 = cpu_seconds();
                printf("open (and migrate): %.2f s CPU\n", c1 - c0);
                while (r >= 0 && more) {
                        c = cpu_seconds();
                        r = store_build_step(st, 20 * NSEC_PER_MSEC, &more);
                        longest = MAX(longest, cpu_seconds() - c);
                        calls++;
                }
                if (r < 0) {
                        fprintf(stderr, "%s: %s\n", argv[2], strerror(-r));
                        return 1;
                }
                c = cpu_seconds();
                w = wall_seconds();
                store_free(st);
                printf("built: %" PRIu64 " calls, %.2f s CPU (%.2f s wall), longest call %.1f ms CPU\n", calls,
                       c - c1, w - w0, longest * 1e3);
                return 0;
        }
        if (streq(argv[1], "--replay")) {
                double stretch = argc > 5 ? strtod(argv[5], NULL) : 1.0;

                if (argc < 5 || strtoull(argv[4], NULL, 10) == 0 || !(stretch >= 1.0 && stretch <= 1000.0)) {
                        fprintf(stderr, "usage: bench-history --replay PERF.DATA DB SAMPLES [STRETCH]\n");
                        return 2;
                }
                return replay(argv[2], argv[3], strtoull(argv[4], NULL, 10), stretch);
        }
        if (streq(argv[1], "--queries")) {
                store_stats stats;

                r = store_open(argv[2], STORE_READONLY, &st);
                if (r >= 0)
                        r = store_get_stats(st, &stats);
                if (r < 0) {
                        fprintf(stderr, "%s: %s\n", argv[2], strerror(-r));
                        return 1;
                }
                store_free(st);
                printf("%s: %" PRIu64 " samples\n", argv[2], stats.samples);
                time_queries(argv[2], stats.last_ns + NSEC_PER_SEC);
                return 0;
        }
        n_samples = strtoull(argv[2], NULL, 10);
        cpus = argc > 3 ? strtoull(argv[3], NULL, 10) : 2;
        hz = argc > 4 ? strtoull(argv[4], NULL, 10) : 999;
        if (cpus < 1 || cpus > 64 || hz < 1)
                return 2;
        span_ns = n_samples / cpus * NSEC_PER_SEC / hz;
        wall_end = (uint64_t) time(NULL) * NSEC_PER_SEC;
        mono_to_wall = (int64_t) (wall_end - span_ns) - (int64_t) mono0;

        if (load_kernel_functions() < 0) {
                fprintf(stderr, "could not read 2000 kernel functions from /proc/kallsyms\n");
                return 1;
        }
        make_kernel_paths();
        make_programs();

        /* The events of a 5.7+ kernel: samples carry their cgroup. */
        if (sim_open(&s, argv[1], cpus, PERFSNAP_SAMPLE_TYPE | PERF_SAMPLE_CGROUP, mono_to_wall, mono0) < 0)
                return 1;
        st = s.st;
        in = s.in;
        rbs = s.rbs;
        for (size_t i = 0; i < 2 + N_SESSIONS + N_BUILDS; i++) {
                char path[96];

                must(synth_cgroup(&rbs[0], CG_BASE + i, cgroup_path(i, path, sizeof path), mono0, 0));
        }
        c0 = cpu_seconds();
        w0 = wall_seconds();
        for (int i = 0; i < 12; i++)
                spawn(&rbs[0], mono0, 0, 0);
        t_next_spawn = mono0;

        uint64_t step = NSEC_PER_SEC / hz;
        for (uint64_t t = mono0; emitted < n_samples; t += step) {
                /* Process churn. */
                while (t_next_spawn <= t) {
                        spawn(&rbs[rnd() % cpus], t_next_spawn, 0, 100 * NSEC_PER_MSEC + rnd() % (3 * NSEC_PER_SEC));
                        t_next_spawn += 20 * NSEC_PER_MSEC;
                }
                for (size_t i = 0; i < n_procs;) {
                        if (procs[i].end_ns && procs[i].end_ns <= t) {
                                must(synth_task(&rbs[0], PERF_RECORD_EXIT, procs[i].pid, 1, t, 0));
                                procs[i] = procs[--n_procs];
                        } else
                                i++;
                }

                for (uint32_t cpu = 0; cpu < cpus && emitted < n_samples; cpu++) {
                        uint64_t chain[160], time = t + cpu * 1000 + rnd() % 1000;
                        size_t nr = 0;
                        size_t kp = zipf(N_KPATHS);

                        chain[nr++] = PERF_CONTEXT_KERNEL;
                        if (rnd() % 10 < 3) {
                                /* idle */
                                for (unsigned j = 0; j < kpath_len[0]; j++)
                                        chain[nr++] = kpaths[0][j];
                                uint64_t root = CG_BASE;

                                must(synth_sample_cg(&rbs[cpu], 0, 0, time, cpu, step, chain, nr, false, &root));
                        } else {
                                proc *p = &procs[zipf(n_procs)];
                                bool kernel = rnd() % 3 == 0;
                                uint64_t path = zipf(5000);
                                uint64_t x = (path + 1) * 0x9e3779b97f4a7c15ULL;
                                unsigned depth = 2 + (unsigned) (x % 19);

                                if (rnd() % 10 != 0)
                                        kp = (size_t) (x >> 40) % N_KPATHS;
                                if (kernel)
                                        for (unsigned j = 0; j < kpath_len[kp]; j++)
                                                chain[nr++] = kpaths[kp][j];
                                else
                                        nr = 0;
                                chain[nr++] = PERF_CONTEXT_USER;
                                for (unsigned j = 0; j < depth; j++) {
                                        unsigned o = (unsigned) ((x >> (j * 3)) % p->prog->n_objects);
                                        uint64_t fn = (x >> (j * 5 + 7)) % FUNCS_PER_OBJECT;
                                        chain[nr++] = p->base[o] + 0x1000 + fn * 0x400 + (j * 0x10);
                                }
                                must(synth_sample_cg(&rbs[cpu], p->pid, p->pid, time, cpu, step, chain, nr, !kernel,
                                                     &p->cgroup));
                        }
                        emitted++;
                }

                sim_advance(&s, t);
        }
        sim_finish(&s);
        c1 = cpu_seconds();
        w1 = wall_seconds();

        const ingest_stats *is = ingest_get_stats(in);
        printf("wrote %" PRIu64 " samples (%" PRIu64 " stored) over %.0f s simulated, %" PRIu64 " CPUs at %" PRIu64 " Hz, "
               "%u processes started\n", emitted, is->samples, (double) span_ns / 1e9, cpus, hz, next_pid - 1000);
        printf("generator + ingest: %.2f s CPU (%.2f s wall), %.3f us/sample (the generator's record writing included)\n",
               c1 - c0, w1 - w0, (c1 - c0) * 1e6 / (double) emitted);
        printf("ingest_drain alone: %.3f us/sample\n", (double) is->cpu_ns / 1e3 / (double) emitted);
        ingest_free(in);
        store_free(st);
        printf("database: %" PRIu64 " bytes after a clean close, %.2f bytes/sample\n", file_bytes(argv[1]),
               (double) file_bytes(argv[1]) / (double) emitted);

        time_queries(argv[1], (uint64_t) time(NULL) * NSEC_PER_SEC);
        return 0;
}
