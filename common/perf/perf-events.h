/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* The sampling events: one perf event per online CPU, system-wide
 * (pid = -1, cpu = N), each with its own mmap'd ring buffer. Each CPU's
 * event is the only one on that CPU, so it also carries the side-band
 * records (COMM, FORK/EXIT, MMAP2, KSYMBOL, BPF_EVENT) for that CPU.
 * Samples use PERFSNAP_SAMPLE_TYPE with sample_id_all, so every record can
 * be decoded with perf_record_decode(..., PERFSNAP_SAMPLE_TYPE, ...).
 * CPUs that come online later are not covered. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "perf/ringbuf.h"

typedef struct perf_events_config {
        uint32_t freq_hz;       /* samples per second per CPU (attr.freq) */
        uint32_t max_stack;     /* callchain depth (attr.sample_max_stack) */
        uint32_t pages;         /* data pages per CPU, a power of two */
        bool use_cycles;        /* try HARDWARE/CPU_CYCLES before cpu-clock */
        uint32_t wakeup_bytes;  /* poll() wakeup watermark; 0: every record */
        int clockid;            /* clock of record times (attr.clockid) */
        bool want_ksymbol;      /* ksymbol + bpf_event side-band */
} perf_events_config;

#define PERF_EVENTS_CONFIG_DEFAULT                      \
        ((perf_events_config) {                         \
                .freq_hz = 99,                          \
                .max_stack = 127,                       \
                .pages = 64,                            \
                .use_cycles = false,                    \
                .wakeup_bytes = 64 * 1024,              \
                .clockid = CLOCK_MONOTONIC,             \
                .want_ksymbol = true,                   \
        })

typedef struct perf_events perf_events;

/* Opens (disabled) and maps one event per CPU listed in
 * /sys/devices/system/cpu/online. On failure returns a negative errno and,
 * if ret_failed_cpu is not NULL, stores the CPU whose open or mmap failed
 * (-1 when the failure was not specific to a CPU). Attributes a kernel
 * rejects with EINVAL are dropped one by one: build_id (Linux < 5.12),
 * cgroup (PERF_SAMPLE_CGROUP and attr.cgroup, Linux < 5.7), then
 * ksymbol/bpf_event (Linux < 5.1); cycles falls back to cpu-clock. */
int perf_events_open_full(const perf_events_config *c, perf_events **ret, int *ret_failed_cpu);
int perf_events_open(const perf_events_config *c, perf_events **ret);

size_t perf_events_count(const perf_events *p);
int perf_events_fd(const perf_events *p, size_t i);
ringbuf *perf_events_ringbuf(perf_events *p, size_t i);
uint32_t perf_events_cpu(const perf_events *p, size_t i);

int perf_events_enable(perf_events *p);
int perf_events_disable(perf_events *p);

/* "cycles" or "cpu-clock". */
const char *perf_events_kind(const perf_events *p);
/* use_cycles was asked for but the PMU refused it: cpu-clock is used. */
bool perf_events_cycles_fell_back(const perf_events *p);
/* Whether the kernel accepted attr.build_id (MMAP2 may carry build-ids). */
bool perf_events_has_build_id(const perf_events *p);
/* Whether the kernel accepted attr.ksymbol and attr.bpf_event. */
bool perf_events_has_ksymbol(const perf_events *p);
/* The events' sample_type: PERFSNAP_SAMPLE_TYPE, with PERF_SAMPLE_CGROUP
 * (and attr.cgroup: PERF_RECORD_CGROUP) where the kernel has them. */
uint64_t perf_events_sample_type(const perf_events *p);

/* Unmaps, closes, frees; accepts NULL and returns NULL. */
perf_events *perf_events_free(perf_events *p);

/* Parses a sysfs CPU list ("0-3,8,10-11\n") into a sorted, duplicate-free
 * array. -EINVAL on syntax errors, -ERANGE for CPU numbers >= 65536. */
int perf_events_parse_cpu_list(const char *s, uint32_t **ret, size_t *ret_n);
