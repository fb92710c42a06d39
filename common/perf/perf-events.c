/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Opening the per-CPU sampling events and their ring buffers. */

#include <errno.h>
#include <linux/perf_event.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fileio.h"
#include "macro.h"
#include "perf/perf-events.h"
#include "perf/perf-record.h"

#define CPU_LIST_MAX 65536U

typedef struct perf_event_cpu {
        int fd;
        uint32_t cpu;
        void *map;
        size_t map_bytes;
        ringbuf rb;
        bool rb_ready;
} perf_event_cpu;

struct perf_events {
        perf_event_cpu *cpus;
        size_t n;
        bool cycles;
        bool cycles_fell_back;
        bool build_id;
        bool ksymbol;
        uint64_t sample_type;
};

static int parse_cpu_number(const char **p, uint32_t *ret) {
        uint32_t v = 0;
        const char *s = *p;

        /* Digits only: no sign, no blanks, no base prefixes. */
        if (*s < '0' || *s > '9')
                return -EINVAL;
        for (; *s >= '0' && *s <= '9'; s++) {
                v = v * 10 + (uint32_t) (*s - '0');
                if (v >= CPU_LIST_MAX)
                        return -ERANGE;
        }
        *p = s;
        *ret = v;
        return 0;
}

int perf_events_parse_cpu_list(const char *s, uint32_t **ret, size_t *ret_n) {
        _cleanup_free_ uint32_t *cpus = NULL;
        size_t n = 0, allocated = 0;
        int64_t last = -1;
        int r;

        if (!s || !ret || !ret_n)
                return -EINVAL;

        for (;;) {
                uint32_t lo, hi;

                r = parse_cpu_number(&s, &lo);
                if (r < 0)
                        return r;
                hi = lo;
                if (*s == '-') {
                        s++;
                        r = parse_cpu_number(&s, &hi);
                        if (r < 0)
                                return r;
                }
                /* sysfs prints ascending, disjoint ranges (cpulist_parse()
                 * accepts more, but nothing else is ever shown here). */
                if (hi < lo || (int64_t) lo <= last)
                        return -EINVAL;

                if (GREEDY_REALLOC(cpus, allocated, n + (hi - lo + 1)) < 0)
                        return -ENOMEM;
                for (uint32_t c = lo; c <= hi; c++)
                        cpus[n++] = c;
                last = hi;

                if (*s == ',') {
                        s++;
                        continue;
                }
                if (*s == '\n')
                        s++;
                if (*s != '\0')
                        return -EINVAL;
                break;
        }

        *ret = TAKE_PTR(cpus);
        *ret_n = n;
        return 0;
}

static int sys_perf_event_open(struct perf_event_attr *attr, int pid, int cpu) {
        long fd = syscall(SYS_perf_event_open, attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
        return fd < 0 ? negative_errno() : (int) fd;
}

static void attr_init(struct perf_event_attr *a, const perf_events_config *c, bool cycles,
                      bool build_id, bool ksymbol, bool cgroup) {
        memset(a, 0, sizeof(*a));
        a->size = sizeof(*a);
        if (cycles) {
                a->type = PERF_TYPE_HARDWARE;
                a->config = PERF_COUNT_HW_CPU_CYCLES;
        } else {
                a->type = PERF_TYPE_SOFTWARE;
                a->config = PERF_COUNT_SW_CPU_CLOCK;
        }
        a->freq = 1;
        a->sample_freq = c->freq_hz;
        /* perf_record_decode() parses exactly this layout. */
        a->sample_type = PERFSNAP_SAMPLE_TYPE | (cgroup ? PERF_SAMPLE_CGROUP : 0);
        /* The cgroups made while sampling, with their paths. */
        a->cgroup = cgroup;
        a->sample_id_all = 1;
        a->use_clockid = 1;
        a->clockid = c->clockid;
        a->sample_max_stack = (uint16_t) c->max_stack;
        a->exclude_callchain_user = 0;
        /* Side-band: the only event on its CPU sees every task there. */
        a->comm = 1;
        a->comm_exec = 1;
        a->task = 1;
        a->mmap = 1;
        a->mmap2 = 1;
        a->build_id = build_id;
        a->ksymbol = ksymbol;
        a->bpf_event = ksymbol;
        if (c->wakeup_bytes > 0) {
                a->watermark = 1;
                a->wakeup_watermark = c->wakeup_bytes;
        } else
                a->wakeup_events = 1;
        a->disabled = 1;
}

/* Finds the attribute set this kernel and PMU accept, probing on one CPU;
 * returns the open fd for that CPU. */
static int probe_attr(const perf_events_config *c, uint32_t cpu, perf_events *p,
                      struct perf_event_attr *ret_attr) {
        bool kinds[2] = { true, false };
        int r = -EINVAL;

        for (size_t k = c->use_cycles ? 0 : 1; k < ELEMENTSOF(kinds); k++) {
                bool build_id = true, ksymbol = c->want_ksymbol, cgroup = true;

                for (;;) {
                        struct perf_event_attr a;

                        attr_init(&a, c, kinds[k], build_id, ksymbol, cgroup);
                        r = sys_perf_event_open(&a, -1, (int) cpu);
                        if (r >= 0) {
                                p->cycles = kinds[k];
                                p->cycles_fell_back = c->use_cycles && !kinds[k];
                                p->build_id = build_id;
                                p->ksymbol = ksymbol;
                                p->sample_type = a.sample_type;
                                *ret_attr = a;
                                return r;
                        }
                        /* Unknown attr bits are EINVAL on older kernels. */
                        if (r != -EINVAL)
                                break;
                        if (build_id)
                                build_id = false;       /* Linux < 5.12 */
                        else if (cgroup)
                                cgroup = false;         /* Linux < 5.7 */
                        else if (ksymbol)
                                ksymbol = false;
                        else
                                break;
                }
                /* Permission problems are not fixed by another event type;
                 * anything else (ENOENT: no PMU, EOPNOTSUPP: no sampling
                 * interrupt, ...) gets a try with cpu-clock. */
                if (r == -EACCES || r == -EPERM)
                        break;
        }
        return r;
}

static int map_cpu(perf_event_cpu *e, const perf_events_config *c, size_t page_size) {
        void *m;
        int r;

        e->map_bytes = (1 + (size_t) c->pages) * page_size;
        m = mmap(NULL, e->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, e->fd, 0);
        if (m == MAP_FAILED)
                return negative_errno();
        e->map = m;
        r = ringbuf_init(&e->rb, m, e->map_bytes, page_size);
        if (r < 0)
                return r;
        e->rb_ready = true;
        return 0;
}

int perf_events_open_full(const perf_events_config *c, perf_events **ret, int *ret_failed_cpu) {
        _cleanup_free_ uint32_t *cpus = NULL;
        _cleanup_free_ char *online = NULL;
        struct perf_event_attr attr;
        perf_events *p = NULL;
        size_t n_cpus, page_size;
        long ps;
        int r, failed_cpu = -1;

        if (!c || !ret)
                return -EINVAL;
        ps = sysconf(_SC_PAGESIZE);
        if (ps <= 0)
                return -EINVAL;
        page_size = (size_t) ps;
        if (c->freq_hz == 0 || c->max_stack > UINT16_MAX || c->pages == 0 ||
            (c->pages & (c->pages - 1)) != 0 || c->pages > (1U << 20) ||
            (uint64_t) c->wakeup_bytes >= (uint64_t) c->pages * page_size)
                return -EINVAL;

        r = read_full_file("/sys/devices/system/cpu/online", 4096, &online, NULL);
        if (r < 0)
                goto fail;
        r = perf_events_parse_cpu_list(online, &cpus, &n_cpus);
        if (r < 0)
                goto fail;

        p = calloc(1, sizeof(*p));
        if (!p) {
                r = -ENOMEM;
                goto fail;
        }
        p->cpus = calloc(n_cpus, sizeof(*p->cpus));
        if (!p->cpus) {
                r = -ENOMEM;
                goto fail;
        }
        for (size_t i = 0; i < n_cpus; i++)
                p->cpus[i].fd = -1;

        for (size_t i = 0; i < n_cpus; i++) {
                perf_event_cpu *e = &p->cpus[p->n];

                e->cpu = cpus[i];
                p->n++;
                if (i == 0)
                        r = probe_attr(c, cpus[i], p, &attr);
                else
                        r = sys_perf_event_open(&attr, -1, (int) cpus[i]);
                if (r < 0) {
                        failed_cpu = (int) cpus[i];
                        goto fail;
                }
                e->fd = r;
                r = map_cpu(e, c, page_size);
                if (r < 0) {
                        failed_cpu = (int) cpus[i];
                        goto fail;
                }
        }

        *ret = p;
        return 0;

fail:
        perf_events_free(p);
        if (ret_failed_cpu)
                *ret_failed_cpu = failed_cpu;
        return r;
}

int perf_events_open(const perf_events_config *c, perf_events **ret) {
        return perf_events_open_full(c, ret, NULL);
}

size_t perf_events_count(const perf_events *p) {
        return p ? p->n : 0;
}

int perf_events_fd(const perf_events *p, size_t i) {
        if (!p || i >= p->n)
                return -EINVAL;
        return p->cpus[i].fd;
}

ringbuf *perf_events_ringbuf(perf_events *p, size_t i) {
        if (!p || i >= p->n || !p->cpus[i].rb_ready)
                return NULL;
        return &p->cpus[i].rb;
}

uint32_t perf_events_cpu(const perf_events *p, size_t i) {
        if (!p || i >= p->n)
                return UINT32_MAX;
        return p->cpus[i].cpu;
}

static int ioctl_all(perf_events *p, unsigned long req) {
        if (!p)
                return -EINVAL;
        for (size_t i = 0; i < p->n; i++)
                if (ioctl(p->cpus[i].fd, req, 0) < 0)
                        return negative_errno();
        return 0;
}

int perf_events_enable(perf_events *p) {
        return ioctl_all(p, PERF_EVENT_IOC_ENABLE);
}

int perf_events_disable(perf_events *p) {
        return ioctl_all(p, PERF_EVENT_IOC_DISABLE);
}

const char *perf_events_kind(const perf_events *p) {
        return p && p->cycles ? "cycles" : "cpu-clock";
}

bool perf_events_cycles_fell_back(const perf_events *p) {
        return p && p->cycles_fell_back;
}

bool perf_events_has_build_id(const perf_events *p) {
        return p && p->build_id;
}

uint64_t perf_events_sample_type(const perf_events *p) {
        return p->sample_type;
}

bool perf_events_has_ksymbol(const perf_events *p) {
        return p && p->ksymbol;
}

perf_events *perf_events_free(perf_events *p) {
        if (!p)
                return NULL;
        for (size_t i = 0; i < p->n; i++) {
                perf_event_cpu *e = &p->cpus[i];

                if (e->rb_ready)
                        ringbuf_done(&e->rb);
                if (e->map)
                        munmap(e->map, e->map_bytes);
                if (e->fd >= 0)
                        close(e->fd);
        }
        free(p->cpus);
        free(p);
        return NULL;
}
