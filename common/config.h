/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* perfsnapd.conf: "key = value" lines, '#' starts a comment line, blank
 * lines ignored. Every key is documented in conf/perfsnapd.conf and
 * perfsnapd.conf(5). Unknown keys and bad values are errors that name the
 * file, line and key. */

#include <stdbool.h>
#include <stdint.h>

typedef struct config {
        uint32_t frequency_hz;          /* per CPU */
        char *event;                    /* "cpu-clock" or "cycles" */
        uint32_t callchain_depth;       /* frames per sample, 1..PERF_MAX_STACK_DEPTH */
        uint32_t ring_buffer_pages;     /* data pages per CPU, power of two; 0 = auto (config_ring_buffer_pages()) */
        uint64_t drain_interval_ns;     /* timer drain, besides watermark wakeups */
        uint64_t commit_interval_ns;    /* how long drained samples may wait for a commit */
        char *database;
        char *socket;
        char *group;                    /* may query besides root; "" = root only */
        uint64_t retention_ns;          /* samples older than this are deleted; 0 = keep */
        uint64_t database_max_size_bytes; /* 0 = no cap; see database_max_size_auto */
        bool database_max_size_auto;    /* the smaller of 1 GiB and 5% of the file system */
        uint64_t hold_max_size_bytes;   /* writes a full disk refused, held in memory; 0 = none */
        uint64_t rescan_interval_ns;    /* proc/modules is compared with the layout this often; 0 = never */
        uint32_t max_clients;           /* connections; the last CONFIG_ROOT_CLIENTS of them are root's */
        uint32_t max_clients_per_user;  /* connections of one uid other than root */
        uint32_t max_queries_per_user;  /* calls of one uid other than root in progress at once */
        uint64_t client_timeout_ns;     /* an idle client, or one that reads no replies, is dropped after this */
        uint32_t query_max_rows;
        uint32_t query_max_stacks;
        uint64_t query_timeout_ns;      /* a query's work is stopped after this; 0: no limit */
        int log_level;                  /* syslog level */
        char *root;                     /* where proc/ and sys/ are read */
        char *cache_dir;                /* kcore snapshots (perf build-id cache layout); "" = none */
        uint64_t snapshot_delay_ns;     /* quiet time after a module change before a snapshot */
        uint64_t cache_max_size_bytes;  /* 0 = no limit */
        uint64_t cache_max_age_ns;      /* 0 = no limit */
        uint64_t symbols_max_size_bytes; /* user function tables kept under cache_dir; 0 = no limit */
        char *debug_root;               /* separate debug files: DEBUG_ROOT/.build-id/xx/rest.debug; "" = none */
        char *debuginfod_urls;          /* space-separated; "" = off (no network access) */
        uint64_t debuginfod_timeout_ns; /* per download */
        char *export_url;               /* a pprof of each export_interval is POSTed here; "" = off */
        uint64_t export_interval_ns;
        uint32_t export_queue_max;      /* profiles kept for retries (files under cache_dir/push) */
        bool offcpu;                    /* off-CPU time (a BPF program on context switches) */
        uint64_t offcpu_min_wait_ns;    /* shorter waits are not stored */
        uint32_t offcpu_max_threads;    /* threads the kernel table follows */
        uint32_t offcpu_max_sums;       /* sums the kernel holds between two drains */
        const char *offcpu_clock;       /* "auto", "sched" or "monotonic" (static text) */
} config;

#define CONFIG_MAX_FREQUENCY_HZ 100000u
/* Connections only root may take: root gets an answer whoever else holds
 * the rest. */
#define CONFIG_ROOT_CLIENTS 2u
#define CONFIG_MAX_CALLCHAIN_DEPTH 127u

void config_init(config *c);            /* the documented defaults */
void config_done(config *c);
int config_copy(const config *from, config *to);

/* The ring buffer pages (of page_size bytes) in effect: ring_buffer_pages,
 * or with auto the smallest power of two whose half holds a drain
 * interval of samples at 512 bytes each, 128..1024 (with 4 KiB pages and
 * the default drain_interval of 3s: 128 up to 170 Hz, 1024 from 683 Hz). */
uint32_t config_ring_buffer_pages(const config *c, size_t page_size);

/* The size cap in effect for a file system of fs_bytes. */
uint64_t config_database_max_size(const config *c, uint64_t fs_bytes);

/* Parses text over the values already in c. On error returns -EINVAL and
 * sets *ret_error to a newly allocated "SOURCE:LINE: message". */
int config_parse(config *c, const char *text, const char *source, char **ret_error);

/* Reads and parses a file; -ENOENT etc. from reading, with *ret_error set. */
int config_load(config *c, const char *path, char **ret_error);

/* The effective configuration in the file's own syntax (newly allocated). */
char *config_format(const config *c);

/* Names of log levels as accepted by log_level. */
const char *log_level_to_string(int level);
int log_level_from_string(const char *s);
