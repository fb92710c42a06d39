/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Real perf events on this machine (suite "root"): open the per-CPU
 * sampling events, generate known activity, and check what the ring
 * buffers deliver through ringbuf_drain() + perf_record_decode(). Skips
 * (77) unless running as root with perf_event_open() available. */
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "perf/perf-events.h"
#include "perf/perf-record.h"
#include "test.h"

TEST(parse_cpu_list) {
        uint32_t *cpus = NULL;
        size_t n = 0;

        ASSERT_OK(perf_events_parse_cpu_list("0-1,4\n", &cpus, &n));
        ASSERT_EQ(n, 3);
        ASSERT_EQ(cpus[0], 0);
        ASSERT_EQ(cpus[1], 1);
        ASSERT_EQ(cpus[2], 4);
        free(cpus);

        ASSERT_OK(perf_events_parse_cpu_list("0", &cpus, &n));
        ASSERT_EQ(n, 1);
        ASSERT_EQ(cpus[0], 0);
        free(cpus);

        ASSERT_OK(perf_events_parse_cpu_list("2,5-7,63\n", &cpus, &n));
        ASSERT_EQ(n, 5);
        ASSERT_EQ(cpus[1], 5);
        ASSERT_EQ(cpus[3], 7);
        ASSERT_EQ(cpus[4], 63);
        free(cpus);

        cpus = NULL;
        ASSERT_ERROR(perf_events_parse_cpu_list("", &cpus, &n), EINVAL);
        ASSERT_ERROR(perf_events_parse_cpu_list("\n", &cpus, &n), EINVAL);
        ASSERT_ERROR(perf_events_parse_cpu_list("1-0", &cpus, &n), EINVAL);
        ASSERT_ERROR(perf_events_parse_cpu_list("0,0", &cpus, &n), EINVAL);
        ASSERT_ERROR(perf_events_parse_cpu_list("3,1", &cpus, &n), EINVAL);
        ASSERT_ERROR(perf_events_parse_cpu_list("0-", &cpus, &n), EINVAL);
        ASSERT_ERROR(perf_events_parse_cpu_list("0,", &cpus, &n), EINVAL);
        ASSERT_ERROR(perf_events_parse_cpu_list("-1", &cpus, &n), EINVAL);
        ASSERT_ERROR(perf_events_parse_cpu_list(" 0", &cpus, &n), EINVAL);
        ASSERT_ERROR(perf_events_parse_cpu_list("0 ", &cpus, &n), EINVAL);
        ASSERT_ERROR(perf_events_parse_cpu_list("0\n\n", &cpus, &n), EINVAL);
        ASSERT_ERROR(perf_events_parse_cpu_list("99999999999", &cpus, &n), ERANGE);
        ASSERT_ERROR(perf_events_parse_cpu_list("0-65536", &cpus, &n), ERANGE);
        ASSERT_NULL(cpus);
}

static uint64_t now_ns(void) {
        struct timespec ts;

        if (clock_gettime(CLOCK_MONOTONIC, &ts) < 0)
                abort();
        return (uint64_t) ts.tv_sec * NSEC_PER_SEC + (uint64_t) ts.tv_nsec;
}

/* Errors meaning "no perf events for us here", not "the code is wrong". */
static bool perf_unavailable(int r) {
        return r == -EACCES || r == -EPERM || r == -ENOENT || r == -ENODEV ||
               r == -ENOSYS || r == -EOPNOTSUPP;
}

/* The events' sample_type (with PERF_SAMPLE_CGROUP where the kernel has it). */
static uint64_t sample_type = PERFSNAP_SAMPLE_TYPE;

/* Opens the events or explains why this machine cannot run the test. */
static int open_events(const perf_events_config *c, perf_events **ret, const char **ret_skip) {
        int failed_cpu = -1, r;

        *ret_skip = NULL;
        if (geteuid() != 0) {
                *ret_skip = "needs root for system-wide perf events";
                return 0;
        }
        r = perf_events_open_full(c, ret, &failed_cpu);
        if (r >= 0)
                sample_type = perf_events_sample_type(*ret);
        if (perf_unavailable(r)) {
                *ret_skip = "perf_event_open() is not available here";
                fprintf(stderr, "perf_events_open: %s (cpu %d)\n", strerror(-r), failed_cpu);
                return 0;
        }
        if (r < 0)
                fprintf(stderr, "perf_events_open failed on cpu %d\n", failed_cpu);
        return r;
}

typedef struct kernel_text {
        uint64_t stext, etext;
} kernel_text;

static int read_kernel_text(kernel_text *ret) {
        _cleanup_fclose_ FILE *f = fopen("/proc/kallsyms", "re");
        char line[512];
        kernel_text t = {};

        if (!f)
                return negative_errno();
        while (fgets(line, sizeof(line), f)) {
                unsigned long long addr;
                char type, name[256];

                if (sscanf(line, "%llx %c %255s", &addr, &type, name) != 3)
                        continue;
                if (strcmp(name, "_stext") == 0)
                        t.stext = addr;
                else if (strcmp(name, "_etext") == 0)
                        t.etext = addr;
        }
        if (t.stext == 0 || t.etext <= t.stext)
                return -ENOENT;     /* hidden by kptr_restrict, or not there */
        *ret = t;
        return 0;
}

typedef struct stats {
        /* inputs */
        uint32_t ring_cpu;
        kernel_text text;
        pid_t self, child;
        uint64_t t0, t1;        /* set t1 = UINT64_MAX while sampling */

        /* results */
        uint64_t records, samples, decode_failed, bad_time, wrong_cpu;
        uint64_t samples_self, samples_kernel_chain, kernel_ips, kernel_ips_in_text;
        uint64_t comm_child_exec, fork_child, exit_child, mmap2_child, mmap2_total, mmap2_build_id;
        uint64_t lost, lost_samples, ksymbol, bpf_event, other;
        uint64_t min_time, max_time;
        uint64_t max_nr;
} stats;

static void check_time(stats *s, uint64_t t) {
        if (t < s->t0 || t > s->t1)
                s->bad_time++;
        s->min_time = MIN(s->min_time, t);
        s->max_time = MAX(s->max_time, t);
}

static void account_sample(stats *s, const perf_sample *smp) {
        bool in_kernel = false, any_in_text = false;

        s->samples++;
        if (smp->cpu != s->ring_cpu)
                s->wrong_cpu++;
        if ((pid_t) smp->pid == s->self)
                s->samples_self++;
        s->max_nr = MAX(s->max_nr, smp->nr);
        for (uint64_t i = 0; i < smp->nr; i++) {
                uint64_t ip = perf_sample_ip(smp, i);

                if (perf_callchain_is_context(ip)) {
                        in_kernel = ip == (uint64_t) PERF_CONTEXT_KERNEL;
                        continue;
                }
                if (!in_kernel)
                        continue;
                s->kernel_ips++;
                if (ip >= s->text.stext && ip < s->text.etext) {
                        s->kernel_ips_in_text++;
                        any_in_text = true;
                }
        }
        if (any_in_text)
                s->samples_kernel_chain++;
}

static int on_record(const struct perf_event_header *h, void *userdata) {
        stats *s = userdata;
        perf_record r;

        s->records++;
        if (perf_record_decode(h, h->size, sample_type, &r) < 0) {
                s->decode_failed++;
                return 0;
        }
        switch (r.type) {
        case PERF_RECORD_SAMPLE:
                account_sample(s, &r.sample);
                break;
        case PERF_RECORD_COMM:
                if ((pid_t) r.comm.pid == s->child && r.comm.exec && strcmp(r.comm.comm, "true") == 0)
                        s->comm_child_exec++;
                break;
        case PERF_RECORD_FORK:
                if ((pid_t) r.task.pid == s->child && (pid_t) r.task.ppid == s->self)
                        s->fork_child++;
                break;
        case PERF_RECORD_EXIT:
                if ((pid_t) r.task.pid == s->child)
                        s->exit_child++;
                break;
        case PERF_RECORD_MMAP2:
                s->mmap2_total++;
                if ((pid_t) r.mmap2.pid == s->child)
                        s->mmap2_child++;
                if (r.mmap2.build_id_size > 0)
                        s->mmap2_build_id++;
                break;
        case PERF_RECORD_LOST:
                s->lost += r.lost.lost;
                break;
        case PERF_RECORD_LOST_SAMPLES:
                s->lost_samples += r.lost.lost;
                break;
        case PERF_RECORD_KSYMBOL:
                s->ksymbol++;
                break;
        case PERF_RECORD_BPF_EVENT:
                s->bpf_event++;
                break;
        default:
                s->other++;
                return 0;
        }
        /* sample_id_all puts a CLOCK_MONOTONIC time on every record. */
        check_time(s, r.sid.time);
        return 0;
}

static uint64_t drain_all(perf_events *p, stats *s) {
        uint64_t n_bad = 0;

        for (size_t i = 0; i < perf_events_count(p); i++) {
                ringbuf *rb = perf_events_ringbuf(p, i);

                ASSERT_TRUE(rb != NULL);
                s->ring_cpu = perf_events_cpu(p, i);
                ASSERT_OK(ringbuf_drain(rb, on_record, s));
                n_bad += rb->n_bad;
        }
        return n_bad;
}

static pid_t spawn_true(void) {
        pid_t pid = fork();

        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                execl("/bin/true", "true", (char *) NULL);
                _exit(127);
        }
        return pid;
}

static void wait_child(pid_t pid) {
        int status;

        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFEXITED(status));
        ASSERT_EQ(WEXITSTATUS(status), 0);
}

/* Reads /dev/zero in 1 MiB chunks (kernel time: the copy to user) for
 * `ns`, draining as it goes so the buffers never fill. */
static void busy_read(perf_events *p, stats *s, uint64_t ns, bool spawn_midway) {
        static char buf[1024 * 1024];
        _cleanup_close_ int fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
        uint64_t start = now_ns();
        bool spawned = false;

        ASSERT_TRUE(fd >= 0);
        while (now_ns() - start < ns) {
                ASSERT_EQ(read(fd, buf, sizeof(buf)), (ssize_t) sizeof(buf));
                if (spawn_midway && !spawned && now_ns() - start > ns / 2) {
                        /* s->child is set before any drain can see its records. */
                        s->child = spawn_true();
                        spawned = true;
                }
                ASSERT_EQ(drain_all(p, s), 0);
        }
        if (spawned)
                wait_child(s->child);
}

TEST(sampling_system_wide) {
        perf_events_config c = PERF_EVENTS_CONFIG_DEFAULT;
        perf_events *p = NULL;
        const char *skip;
        stats s = { .min_time = UINT64_MAX };
        cpu_set_t one, saved;
        int cpu;

        c.freq_hz = 999;
        c.pages = 128;
        ASSERT_OK(open_events(&c, &p, &skip));
        if (skip)
                TEST_SKIP("%s", skip);
        ASSERT_OK(read_kernel_text(&s.text));

        /* Keep the busy loop (and the child) on one CPU. */
        cpu = sched_getcpu();
        ASSERT_TRUE(cpu >= 0);
        ASSERT_OK(sched_getaffinity(0, sizeof(saved), &saved));
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        ASSERT_OK(sched_setaffinity(0, sizeof(one), &one));

        s.self = getpid();
        s.child = -1;
        s.t0 = now_ns();
        s.t1 = UINT64_MAX;
        ASSERT_OK(perf_events_enable(p));
        busy_read(p, &s, NSEC_PER_SEC, true);
        ASSERT_OK(perf_events_disable(p));
        s.t1 = now_ns();
        /* Records still in the buffers were written before the disable. */
        ASSERT_EQ(drain_all(p, &s), 0);

        fprintf(stderr,
                "kind=%s build_id=%d ksymbol=%d cpus=%zu busy-cpu=%d window=%.3fs\n"
                "records=%" PRIu64 " samples=%" PRIu64 " (self %" PRIu64 ") decode_failed=%" PRIu64
                " bad_time=%" PRIu64 " wrong_cpu=%" PRIu64 " other=%" PRIu64 "\n"
                "kernel-chain samples=%" PRIu64 " kernel ips=%" PRIu64 " in _stext.._etext=%" PRIu64
                " max nr=%" PRIu64 "\n"
                "child %d: fork=%" PRIu64 " comm(exec)=%" PRIu64 " mmap2=%" PRIu64 " exit=%" PRIu64
                "; mmap2 total=%" PRIu64 " with build-id=%" PRIu64 "\n"
                "lost=%" PRIu64 " lost_samples=%" PRIu64 " ksymbol=%" PRIu64 " bpf_event=%" PRIu64 "\n",
                perf_events_kind(p), perf_events_has_build_id(p), perf_events_has_ksymbol(p),
                perf_events_count(p), cpu, (double) (s.t1 - s.t0) / NSEC_PER_SEC,
                s.records, s.samples, s.samples_self, s.decode_failed, s.bad_time, s.wrong_cpu, s.other,
                s.samples_kernel_chain, s.kernel_ips, s.kernel_ips_in_text, s.max_nr,
                (int) s.child, s.fork_child, s.comm_child_exec, s.mmap2_child, s.exit_child,
                s.mmap2_total, s.mmap2_build_id,
                s.lost, s.lost_samples, s.ksymbol, s.bpf_event);
        if (perf_events_has_build_id(p) && s.mmap2_build_id == 0)
                fprintf(stderr, "note: build_id accepted but no MMAP2 carried one\n");
        if (!perf_events_has_build_id(p))
                fprintf(stderr, "note: kernel refused attr.build_id; MMAP2 uses maj/min/ino\n");

        ASSERT_GE(perf_events_count(p), 1);
        ASSERT_EQ(s.decode_failed, 0);
        ASSERT_GE(s.samples, 500);
        ASSERT_GE(s.samples_self, 100);      /* shares the CPU with whatever else runs */
        ASSERT_EQ(s.bad_time, 0);
        ASSERT_EQ(s.wrong_cpu, 0);
        ASSERT_GE(s.min_time, s.t0);
        ASSERT_LE(s.max_time, s.t1);
        ASSERT_GE(s.samples_kernel_chain, 1);
        ASSERT_EQ(s.fork_child, 1);
        ASSERT_EQ(s.comm_child_exec, 1);
        ASSERT_GE(s.mmap2_child, 1);
        ASSERT_EQ(s.exit_child, 1);
        ASSERT_EQ(s.lost + s.lost_samples, 0);

        ASSERT_OK(sched_setaffinity(0, sizeof(saved), &saved));
        perf_events_free(p);
}

TEST(disabled_events_are_silent) {
        perf_events_config c = PERF_EVENTS_CONFIG_DEFAULT;
        perf_events *p = NULL;
        const char *skip;
        stats s = { .min_time = UINT64_MAX, .child = -1 };

        c.freq_hz = 999;
        ASSERT_OK(open_events(&c, &p, &skip));
        if (skip)
                TEST_SKIP("%s", skip);
        s.self = getpid();
        s.t0 = 0;
        s.t1 = UINT64_MAX;

        /* Opened disabled: activity, including side-band, writes nothing. */
        busy_read(p, &s, 100 * NSEC_PER_MSEC, true);
        ASSERT_EQ(s.records, 0);

        ASSERT_OK(perf_events_enable(p));
        busy_read(p, &s, 100 * NSEC_PER_MSEC, false);
        ASSERT_GT(s.samples, 0);

        ASSERT_OK(perf_events_disable(p));
        ASSERT_EQ(drain_all(p, &s), 0);
        s.records = 0;
        busy_read(p, &s, 100 * NSEC_PER_MSEC, true);
        ASSERT_EQ(s.records, 0);
        for (size_t i = 0; i < perf_events_count(p); i++)
                ASSERT_EQ(ringbuf_pending(perf_events_ringbuf(p, i)), 0);

        perf_events_free(p);
}

TEST(cycles_or_fallback) {
        perf_events_config c = PERF_EVENTS_CONFIG_DEFAULT;
        perf_events *p = NULL;
        const char *skip;

        c.use_cycles = true;
        ASSERT_OK(open_events(&c, &p, &skip));
        if (skip)
                TEST_SKIP("%s", skip);
        fprintf(stderr, "use_cycles: kind=%s fell_back=%d\n",
                perf_events_kind(p), perf_events_cycles_fell_back(p));
        if (perf_events_cycles_fell_back(p))
                ASSERT_STREQ(perf_events_kind(p), "cpu-clock");
        else
                ASSERT_STREQ(perf_events_kind(p), "cycles");
        perf_events_free(p);

        c.use_cycles = false;
        ASSERT_OK(open_events(&c, &p, &skip));
        ASSERT_STREQ(perf_events_kind(p), "cpu-clock");
        ASSERT_TRUE(!perf_events_cycles_fell_back(p));
        perf_events_free(p);
}

typedef struct bpf_seen {
        uint64_t ksym_reg, ksym_unreg, prog_load, prog_unload;
        uint32_t load_id, unload_id;
        uint64_t ksym_addr, ksym_unreg_addr;
        uint32_t ksym_len;
        char ksym_name[128];
} bpf_seen;

static int on_bpf_record(const struct perf_event_header *h, void *userdata) {
        bpf_seen *b = userdata;
        perf_record r;

        ASSERT_OK(perf_record_decode(h, h->size, sample_type, &r));
        if (r.type == PERF_RECORD_KSYMBOL && r.ksymbol.ksym_type == PERF_RECORD_KSYMBOL_TYPE_BPF) {
                size_t l = strlen(r.ksymbol.name), suffix = strlen("_perfsnap_t");

                if (l < suffix || strcmp(r.ksymbol.name + l - suffix, "_perfsnap_t") != 0)
                        return 0;       /* someone else's program */
                if (r.ksymbol.flags & PERF_RECORD_KSYMBOL_FLAGS_UNREGISTER) {
                        b->ksym_unreg++;
                        b->ksym_unreg_addr = r.ksymbol.addr;
                } else {
                        b->ksym_reg++;
                        b->ksym_addr = r.ksymbol.addr;
                        b->ksym_len = r.ksymbol.len;
                        snprintf(b->ksym_name, sizeof(b->ksym_name), "%s", r.ksymbol.name);
                }
        } else if (r.type == PERF_RECORD_BPF_EVENT) {
                if (r.bpf.type == PERF_BPF_EVENT_PROG_LOAD) {
                        b->prog_load++;
                        b->load_id = r.bpf.id;
                } else if (r.bpf.type == PERF_BPF_EVENT_PROG_UNLOAD) {
                        b->prog_unload++;
                        b->unload_id = r.bpf.id;
                }
        }
        return 0;
}

static void drain_bpf(perf_events *p, bpf_seen *b) {
        for (size_t i = 0; i < perf_events_count(p); i++)
                ASSERT_OK(ringbuf_drain(perf_events_ringbuf(p, i), on_bpf_record, b));
}

/* Loads "r0 = 0; exit" as a socket filter named perfsnap_t. */
static int bpf_load_trivial(void) {
        struct bpf_insn insns[] = {
                { .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
                { .code = BPF_JMP | BPF_EXIT },
        };
        union bpf_attr attr;

        memset(&attr, 0, sizeof(attr));
        attr.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
        attr.insns = (uint64_t) (uintptr_t) insns;
        attr.insn_cnt = ELEMENTSOF(insns);
        attr.license = (uint64_t) (uintptr_t) "GPL";
        memcpy(attr.prog_name, "perfsnap_t", sizeof("perfsnap_t"));
        return (int) syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof(attr));
}

TEST(bpf_program_ksymbol_and_bpf_event) {
        perf_events_config c = PERF_EVENTS_CONFIG_DEFAULT;
        perf_events *p = NULL;
        const char *skip;
        bpf_seen b = {};
        int fd;

        c.freq_hz = 10;
        c.want_ksymbol = true;
        ASSERT_OK(open_events(&c, &p, &skip));
        if (skip)
                TEST_SKIP("%s", skip);
        if (!perf_events_has_ksymbol(p)) {
                perf_events_free(p);
                TEST_SKIP("kernel does not support attr.ksymbol");
        }
        ASSERT_OK(perf_events_enable(p));
        fd = bpf_load_trivial();
        if (fd < 0) {
                perf_events_free(p);
                TEST_SKIP("cannot load a BPF program: %s", strerror(errno));
        }
        /* Closing the last reference unloads it before close() returns
         * to user space (bpf_prog_put_deferred() runs in task context). */
        close(fd);
        ASSERT_OK(perf_events_disable(p));
        drain_bpf(p, &b);

        fprintf(stderr, "bpf: ksymbol reg=%" PRIu64 " unreg=%" PRIu64 " \"%s\" at 0x%" PRIx64
                " len %u; BPF_EVENT load=%" PRIu64 " (id %u) unload=%" PRIu64 " (id %u)\n",
                b.ksym_reg, b.ksym_unreg, b.ksym_name, b.ksym_addr, b.ksym_len,
                b.prog_load, b.load_id, b.prog_unload, b.unload_id);
        if (b.ksym_reg == 0 && b.prog_load > 0) {
                perf_events_free(p);
                TEST_SKIP("BPF JIT is off: no KSYMBOL for interpreted programs");
        }
        ASSERT_EQ(b.ksym_reg, 1);
        ASSERT_EQ(b.ksym_unreg, 1);
        ASSERT_U64_EQ(b.ksym_unreg_addr, b.ksym_addr);
        ASSERT_GT(b.ksym_len, 0);
        /* Kernel ksym name: bpf_prog_<16 hex digit tag>_<prog_name>. */
        ASSERT_EQ(strlen(b.ksym_name), strlen("bpf_prog_") + 16 + strlen("_perfsnap_t"));
        ASSERT_TRUE(strncmp(b.ksym_name, "bpf_prog_", 9) == 0);
        ASSERT_GE(b.prog_load, 1);
        ASSERT_GE(b.prog_unload, 1);
        ASSERT_EQ(b.load_id, b.unload_id);

        perf_events_free(p);
}

TEST(invalid_config) {
        perf_events_config c = PERF_EVENTS_CONFIG_DEFAULT;
        perf_events *p = (perf_events *) 0x1;

        /* Rejected before any syscall: runs without root too. */
        c.pages = 3;
        ASSERT_ERROR(perf_events_open(&c, &p), EINVAL);
        c = PERF_EVENTS_CONFIG_DEFAULT;
        c.freq_hz = 0;
        ASSERT_ERROR(perf_events_open(&c, &p), EINVAL);
        c = PERF_EVENTS_CONFIG_DEFAULT;
        c.pages = 1;
        c.wakeup_bytes = 1 << 20;
        ASSERT_ERROR(perf_events_open(&c, &p), EINVAL);
        ASSERT_TRUE(p == (perf_events *) 0x1);
}
