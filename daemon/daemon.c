/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The daemon object: owns the event loop, the perf events, the store and
 * every collaborator (ingest, tracker, snapshotter, server, uevent
 * monitor), wires them together, runs the timers (drain, commit,
 * checkpoint, retention and cap, watchdog) and handles signals (daemon.h). */
#include <event2/event.h>
#include <json-c/json.h>
#include <linux/perf_event.h>
#include <malloc.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "config.h"
#include "daemon.h"
#include "daemon-config.h"
#include "pusher.h"
#include "fileio.h"
#include "ingest.h"
#include "log.h"
#include "macro.h"
#include "perf/perf-events.h"
#if HAVE_OFFCPU
#include "offcpu.h"
#endif
#include "server.h"
#include "snapshotter.h"
#include "store/store.h"
#include "timeparse.h"
#include "tracker.h"
#include "uevent-monitor.h"
#include "usymbols.h"
#include "wire/protocol.h"
#include "wire/status-json.h"
#include "workqueue.h"

#include "build-config.h"

/* Retention and the size cap are checked this often, each a bounded
 * step (store_expire(), store_enforce_cap()). */
#define HOUSEKEEPING_INTERVAL_SEC 1
/* A full retention pass (besides the steps a backlog takes). */
#define RETENTION_INTERVAL_NS (600 * NSEC_PER_SEC)
#define MISS_RESCAN_INTERVAL_NS NSEC_PER_SEC
/* Records stamped this close to a drain's start wait for the next drain:
 * another CPU may still be writing a record it stamped earlier. */
#define DRAIN_HORIZON_MARGIN_NS (10 * NSEC_PER_MSEC)

struct daemon_ctx {
        config cfg;
        char *config_path;
        struct event_base *base;
        store *store;
        ingest *ingest;
        perf_events *events;
#if HAVE_OFFCPU
        struct offcpu *offcpu;
#else
        void *offcpu;
#endif
        char offcpu_why[256];           /* status "offcpu" when it is not on: "unavailable: ..." */
        uint64_t offcpu_clock_checked_ns;
        ringbuf **bufs;
        uint32_t *cpus;
        size_t n_cpus;
        struct event **cpu_evs;
        tracker *tracker;
        uevent_monitor *uevents;
        usymbols *usymbols;
        pusher *pusher;
        struct event *drain_timer, *commit_timer, *retention_timer, *watchdog_timer, *rescan_timer;
        struct event *sig_term, *sig_int, *sig_hup;
        server *server;
        snapshotter *snapshotter;
        /* WAL checkpoints run on a thread of their own: the draining
         * thread never waits for their copy and sync. */
        workqueue *checkpoints;
        store_checkpointer *checkpointer;
        workqueue_item checkpoint_item;
        bool checkpoint_running;
        uint64_t start_mono_ns;
        uint32_t ring_pages;            /* each CPU's ring buffer, as opened */
        uint32_t ring_pages_asked;      /* as the configuration asked (more, where they did not fit) */
        uint64_t last_miss_rescan_ns;
        uint64_t watchdog_usec;
        uint64_t last_retention_ns;     /* CLOCK_MONOTONIC */
        uint64_t last_freshen_ns;       /* CLOCK_MONOTONIC of the last drain for a call (on_freshen()) */
        bool last_freshen_samples;      /* it wrote the open bucket */
        bool retention_more;            /* the last step left expired blocks */
        uint64_t db_max_bytes;          /* database_max_size in effect */
        uint64_t cap_removed_samples, cap_removed_newest_ns;
        int exit_code;
};

static struct timeval tv_from_ns(uint64_t ns) {
        return (struct timeval) { .tv_sec = (time_t) (ns / NSEC_PER_SEC), .tv_usec = (suseconds_t) (ns % NSEC_PER_SEC / 1000) };
}

/* A damaged database is moved aside (with its WAL) and a new one started:
 * never written into. Another application's is refused. */
static int check_database(const char *path) {
        _cleanup_free_ char *why = NULL;
        char stamp[32];
        struct tm tm;
        time_t now = time(NULL);
        int r;

        r = store_verify(path, STORE_CHECK_START, &why);
        if (r == -EPROTO)
                return log_error_errno(r, "Refusing %s: it is not a perfsnapd database (%s). Move it away, or set "
                                       "database to another path.", path, why ?: "?");
        if (r == -ELOOP)
                return log_error_errno(r, "Refusing %s: it is a symbolic link.", path);
        if (r != -EBADMSG) {
                if (r < 0)
                        return log_error_errno(r, "Failed to check the database %s: %m", path);
                return 0;
        }

        strftime(stamp, sizeof stamp, "%Y%m%d%H%M%S", localtime_r(&now, &tm));
        for (unsigned i = 0; i < 3; i++) {
                static const char *const suffix[] = { "", "-wal", "-shm" };
                _cleanup_free_ char *from = NULL, *to = NULL;

                if (asprintf(&from, "%s%s", path, suffix[i]) < 0 ||
                    asprintf(&to, "%s.damaged-%s%s", path, stamp, suffix[i]) < 0)
                        return log_oom();
                if (rename(from, to) < 0 && errno != ENOENT)
                        return log_error_errno(-errno, "The database %s is damaged (%s), and moving %s aside failed: %m",
                                               path, why ?: "?", from);
        }
        log_error("The database %s is damaged (%s): moved it to %s.damaged-%s; starting a new one.", path,
                  why ?: "?", path, stamp);
        return 0;
}

static void daemon_drain(daemon_ctx *d, bool last) {
        uint64_t horizon = last ? INGEST_HORIZON_ALL : clock_ns(CLOCK_MONOTONIC) - DRAIN_HORIZON_MARGIN_NS;

        if (!d->events)
                return;
        /* The events stamp records with CLOCK_MONOTONIC; samples are stored
         * in wall-clock time. The offset is re-read at every drain, so a
         * clock step applies from the next drain on. */
        (void) ingest_drain(d->ingest, d->bufs, d->cpus, d->n_cpus, clock_mono_to_wall_ns(), horizon);
}

#if HAVE_OFFCPU
static int store_offcpu_entry(const offcpu_entry *e, void *userdata) {
        return ingest_offcpu(userdata, e->pid, e->tid, e->cpu, e->cgroup, e->ips, e->nr, e->waits, e->wait_ns);
}

static int pull_offcpu(ingest *in, bool last, void *userdata) {
        daemon_ctx *d = userdata;
        uint64_t now = clock_ns(CLOCK_MONOTONIC);

        /* A TSC can be marked unstable at any time: looked at at
         * drains, at most every 10 s. */
        if (now - d->offcpu_clock_checked_ns >= 10 * NSEC_PER_SEC) {
                d->offcpu_clock_checked_ns = now;
                if (offcpu_check_clock(d->offcpu))
                        log_warning("Off-CPU time: %s.", offcpu_clock_why(d->offcpu));
        }
        return offcpu_drain(d->offcpu, last, store_offcpu_entry, in);
}
#endif

/* offcpu = on: the BPF program on every sampled CPU. Failing to load it
 * leaves CPU sampling running; status says why offcpu is unavailable. */
static void start_offcpu(daemon_ctx *d) {
        if (!d->cfg.offcpu)
                return;
#if HAVE_OFFCPU
        offcpu_config oc = OFFCPU_CONFIG_DEFAULT;
        const char *why = "";
        int r;

        oc.min_ns = d->cfg.offcpu_min_wait_ns;
        oc.max_threads = d->cfg.offcpu_max_threads;
        oc.max_entries = d->cfg.offcpu_max_sums;
        oc.clock = d->cfg.offcpu_clock;
        _cleanup_free_ char *sysfs = path_join(d->cfg.root, "sys");
        oc.sysfs = sysfs;
        {
                const kallsyms *k = layout_kernel_syms(ingest_layout(d->ingest));

                if (!k || kallsyms_find(k, "__sched_text_start", &oc.sched_text_start) < 0 ||
                    kallsyms_find(k, "__sched_text_end", &oc.sched_text_end) < 0)
                        oc.sched_text_start = oc.sched_text_end = 0;
        }
        r = offcpu_new(&oc, &d->offcpu, &why);
        if (r < 0) {
                snprintf(d->offcpu_why, sizeof d->offcpu_why, "unavailable: %s (%s)", why, strerror(-r));
                log_error("offcpu = on, but off-CPU time is %s; CPU samples go on.", d->offcpu_why);
                return;
        }
        ingest_set_offcpu_source(d->ingest, pull_offcpu, d);
        {
                char threads[64] = "threads' entries in task storage";

                if (!offcpu_task_storage(d->offcpu))
                        snprintf(threads, sizeof threads, "up to %" PRIu32 " threads followed at once", oc.max_threads);
                log_info("Off-CPU time: waits of %" PRIu64 "ns or more are stored; %s%s (program %s, %" PRIu32
                         " instructions verified); timed by the %s clock (%s).",
                         oc.min_ns, threads,
                         offcpu_reuses_stacks(d->offcpu) ? "" :
                         "; stacks are taken at every wait (reusing them needs Linux 5.15 or later on x86-64)",
                         offcpu_program(d->offcpu), offcpu_verified_insns(d->offcpu), offcpu_clock_name(d->offcpu),
                         offcpu_clock_why(d->offcpu));
        }
#else
        snprintf(d->offcpu_why, sizeof d->offcpu_why, "unavailable: perfsnapd was built without it (meson -Doffcpu)");
        log_error("offcpu = on, but off-CPU time is %s.", d->offcpu_why);
#endif
}

static void on_cpu_readable(evutil_socket_t fd, short what, void *userdata) {
        daemon_drain(userdata, false);
}

static void on_drain_timer(evutil_socket_t fd, short what, void *userdata) {
        daemon_drain(userdata, false);
}

/* sqlite's progress handler on the writer's connection: a commit, blocks
 * written, retention or the cap do not keep the ring buffers from being
 * emptied past a quarter full (ingest_rescue()). */
#define SQLITE_PROGRESS_STEPS 10000
static int on_sqlite_progress(void *userdata) {
        daemon_ctx *d = userdata;

        ingest_rescue(d->ingest, d->bufs, d->cpus, d->n_cpus);
        return 0;
}

/* On the checkpoint thread. */
static void run_checkpoint(workqueue_item *item, void *userdata) {
        daemon_ctx *d = userdata;
        int r;

        r = store_checkpointer_run(d->checkpointer, NULL, NULL);
        if (r < 0)
                log_warning_errno(r, "Failed to checkpoint the database's WAL: %m");
}

static void checkpoint_done(workqueue_item *item, void *userdata) {
        daemon_ctx *d = userdata;

        d->checkpoint_running = false;
}

static void on_commit_timer(evutil_socket_t fd, short what, void *userdata) {
        daemon_ctx *d = userdata;

        if (ingest_commit(d->ingest) < 0)
                return;
        /* One at a time; a checkpoint due meanwhile is the next one's. */
        if (d->checkpoint_running || !store_checkpoint_due(d->store))
                return;
        d->checkpoint_running = true;
        workqueue_submit(d->checkpoints, &d->checkpoint_item);
}

/* A query reads what is committed. Drained every drain_interval (3 s by
 * default: fewer, larger batches cost less CPU a sample) and committed at
 * most a second later, a sample would wait up to both before a query
 * sees it; so a call that reads samples drains, writes the open bucket and
 * commits first, and sees every sample taken up to the drain's horizon.
 * Calls that read what drains record (the journal, ksyms) and the pusher
 * (whose interval ended seconds ago) drain and commit only. At most once
 * in FRESHEN_MIN_NS whatever the clients ask (once more for a query after
 * a drain that did not write the open bucket): more often, a call sees
 * what the last one saw, and clients can make the daemon drain no more
 * often than a drain_interval of that would. */
#define FRESHEN_MIN_NS (250 * NSEC_PER_MSEC)

#if HAVE_OFFCPU
/* Until the off-CPU map the program left at the last drain may be taken
 * (10 ms after it), on the loop; again if a signal cut the sleep short. */
static void offcpu_wait(daemon_ctx *d) {
        uint64_t w;

        while ((w = offcpu_drain_wait_ns(d->offcpu)) > 0) {
                struct timespec ts = { .tv_sec = 0, .tv_nsec = (long) w };

                (void) nanosleep(&ts, NULL);
        }
}
#endif

static void on_freshen(void *userdata, bool samples) {
        daemon_ctx *d = userdata;
        uint64_t now = clock_ns(CLOCK_MONOTONIC);

        if (d->last_freshen_ns != 0 && now - d->last_freshen_ns < FRESHEN_MIN_NS &&
            (!samples || d->last_freshen_samples))
                return;
        d->last_freshen_ns = now;
        d->last_freshen_samples = samples;
#if HAVE_OFFCPU
        if (samples && d->offcpu) {
                /* A drain takes the waits of the map the program left at the
                 * drain before, and only 10 ms after it: two drains, each
                 * after that wait (on the loop: at most 20 ms, at most 4
                 * times a second), take every wait that ended before the
                 * first. */
                offcpu_wait(d);
                daemon_drain(d, false);
                offcpu_wait(d);
        }
#endif
        daemon_drain(d, false);
        /* The open bucket too (a block of its second so far; the rest of
         * the second comes in another): a query sees every sample up to
         * the drain, and the off-CPU waits just taken, which are stamped
         * in it. While batches are held (a full disk) the commit waits for
         * the next try, as the commit timer's does. */
        if (samples && d->events)
                (void) ingest_write_open_bucket(d->ingest);
        (void) ingest_commit(d->ingest);
}

static void on_push_freshen(void *userdata) {
        on_freshen(userdata, false);
}

static void expire_step(daemon_ctx *d, uint64_t now) {
        uint64_t mono = clock_ns(CLOCK_MONOTONIC);
        int64_t n;

        if (d->cfg.retention_ns == 0 || now < d->cfg.retention_ns)
                return;
        if (!d->retention_more && d->last_retention_ns && mono - d->last_retention_ns < RETENTION_INTERVAL_NS)
                return;
        d->last_retention_ns = mono;
        n = store_expire(d->store, now - d->cfg.retention_ns, &d->retention_more);
        if (n < 0)
                log_warning_errno((int) n, "Failed to delete expired samples: %m");
        else if (n > 0)
                log_info("Deleted %lld samples older than the retention period.", (long long) n);
}

static void cap_step(daemon_ctx *d, uint64_t now) {
        store_cap_result res;
        int r;

        r = store_enforce_cap(d->store, d->db_max_bytes, &res);
        if (r < 0) {
                log_warning_errno(r, "Failed to hold the database to database_max_size: %m");
                return;
        }
        if (res.blocks == 0)
                return;
        d->cap_removed_samples += res.samples;
        d->cap_removed_newest_ns = MAX(d->cap_removed_newest_ns, res.newest_removed_ns);
        if (d->cfg.retention_ns > 0 && res.newest_removed_ns + d->cfg.retention_ns > now)
                log_warning("The database reached database_max_size (%llu bytes): deleted %llu samples up to %llu ns, "
                            "younger than the retention period.",
                            (unsigned long long) d->db_max_bytes, (unsigned long long) res.samples,
                            (unsigned long long) res.newest_removed_ns);
        else
                log_info("The database reached database_max_size (%llu bytes): deleted the oldest %llu samples.",
                         (unsigned long long) d->db_max_bytes, (unsigned long long) res.samples);
}

/* Builds the hours by cgroup: steps of one transaction while they have
 * taken less than this (catching up after a migration or a long stop
 * takes a second at a time). */
#define BUILD_BUDGET_NS (20 * NSEC_PER_MSEC)

static void build_step(daemon_ctx *d) {
        bool more;
        int r;

        r = store_build_step(d->store, BUILD_BUDGET_NS, &more);
        if (r < 0)
                log_warning_errno(r, "Failed to build the hours by cgroup: %m");
}

/* Runs in its own transactions: the ingest batch is committed first. Not
 * while batches are held for a full disk (store_held()): the deletions
 * would be held too, their pages pinned in memory, and counted before
 * they are done. */
static void on_housekeeping_timer(evutil_socket_t fd, short what, void *userdata) {
        daemon_ctx *d = userdata;
        uint64_t now = clock_ns(CLOCK_REALTIME);

        (void) ingest_commit(d->ingest);
        if (store_held(d->store, NULL, NULL, NULL, NULL))
                return;
        expire_step(d, now);
        cap_step(d, now);
        build_step(d);
}

/* database_max_size = auto: from the size of the database's file system. */
static void compute_db_max(daemon_ctx *d) {
        _cleanup_free_ char *dir = strdup(d->cfg.database);
        struct statvfs sv;
        uint64_t fs = 0;
        char *slash;

        if (dir && (slash = strrchr(dir, '/')))
                *(slash == dir ? slash + 1 : slash) = 0;
        if (dir && statvfs(dir, &sv) == 0)
                fs = (uint64_t) sv.f_blocks * sv.f_frsize;
        d->db_max_bytes = config_database_max_size(&d->cfg, fs);
        /* A generation of stacks and frames is deleted with the last
         * samples that use it: keep one small against the cap. */
        if (d->store) {
                store_set_dictionary_limit(d->store, d->db_max_bytes / 8);
                store_set_hold_limit(d->store, d->cfg.hold_max_size_bytes);
        }
}

static void on_uevent(const uevent *ev, bool lost, void *userdata) {
        daemon_ctx *d = userdata;

        if (lost)
                (void) tracker_rescan(d->tracker, "uevents were lost", NULL);
        else
                tracker_uevent(d->tracker, ev);
}

static void on_rescan_timer(evutil_socket_t fd, short what, void *userdata) {
        daemon_ctx *d = userdata;

        (void) tracker_rescan(d->tracker, "periodic", NULL);
        /* Without ksymbol records, rescans are all there is for BPF. */
        if (d->events && !perf_events_has_ksymbol(d->events))
                (void) tracker_rescan_ksyms(d->tracker, "periodic", NULL);
}

/* A kernel address nothing covers: perhaps a module in its init, before
 * its add uevent. */
static void on_unknown_address(void *userdata) {
        daemon_ctx *d = userdata;
        uint64_t now = clock_ns(CLOCK_MONOTONIC);

        /* Addresses no one can resolve (code perfsnapd does not track yet)
         * would otherwise cost a rescan at every drain. */
        if (d->last_miss_rescan_ns && now - d->last_miss_rescan_ns < MISS_RESCAN_INTERVAL_NS)
                return;
        d->last_miss_rescan_ns = now;
        (void) tracker_rescan(d->tracker, "a sample hit an unknown kernel address", NULL);
}

static void on_perf_record(const perf_record *rec, int64_t mono_to_wall_ns, void *userdata) {
        daemon_ctx *d = userdata;

        tracker_perf_record(d->tracker, rec, mono_to_wall_ns);
}

static int on_rescan_request(json_object *reply, void *userdata) {
        daemon_ctx *d = userdata;
        tracker_rescan_result res = {};
        int r;

        r = tracker_rescan(d->tracker, "requested", &res);
        if (r < 0)
                return r;
        r = tracker_rescan_ksyms(d->tracker, "requested", &res);
        if (r < 0)
                return r;
        status_rescan_json(&(status_rescan) {
                        .added = (unsigned) res.added,
                        .removed = (unsigned) res.removed,
                        .loaded = (unsigned) res.live,
                        .ksyms_registered = (unsigned) res.ksyms_added,
                        .ksyms_unregistered = (unsigned) res.ksyms_removed,
                        .ksyms_live = (unsigned) res.ksyms_live,
                }, reply);
        return 0;
}

static void set_rescan_timer(daemon_ctx *d) {
        struct timeval tv = tv_from_ns(d->cfg.rescan_interval_ns);

        if (d->cfg.rescan_interval_ns > 0)
                event_add(d->rescan_timer, &tv);
        else
                event_del(d->rescan_timer);
}

static void on_watchdog(evutil_socket_t fd, short what, void *userdata) {
        /* Sent from the loop itself: a stalled loop stops the pings. */
        (void) sd_notify(0, "WATCHDOG=1");
}

static void on_sigterm(evutil_socket_t sig, short what, void *userdata) {
        daemon_ctx *d = userdata;

        log_info("Received %s; flushing samples and stopping.", sig == SIGINT ? "SIGINT" : "SIGTERM");
        (void) sd_notify(0, "STOPPING=1");
        event_base_loopbreak(d->base);
}

static void apply_frequency(daemon_ctx *d, uint32_t freq) {
        /* PERF_EVENT_IOC_PERIOD takes a frequency only while attr.freq is set.
         * The kernel turns a cpu-clock (hrtimer) event's frequency into a fixed
         * period in ns at creation and clears attr.freq
         * (kernel/events/core.c, perf_swevent_init_hrtimer()), so for it the
         * value must be the period: NSEC_PER_SEC / freq. */
        bool hrtimer = strcmp(perf_events_kind(d->events), "cpu-clock") == 0;
        uint64_t value = hrtimer ? NSEC_PER_SEC / freq : freq;

        for (size_t i = 0; i < d->n_cpus; i++) {
                uint64_t f = value;
                if (ioctl(perf_events_fd(d->events, i), PERF_EVENT_IOC_PERIOD, &f) < 0)
                        log_warning_errno(errno, "Failed to set the sampling frequency on CPU %u: %m", d->cpus[i]);
        }
}

static void on_sighup(evutil_socket_t sig, short what, void *userdata) {
        daemon_ctx *d = userdata;
        _cleanup_free_ char *error = NULL;
        config n;
        int r;

        (void) sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu", (unsigned long long) (clock_ns(CLOCK_MONOTONIC) / 1000));
        config_init(&n);
        r = config_load(&n, d->config_path, &error);
        if (r < 0) {
                log_error("Reload failed, keeping the running configuration: %s", error ?: strerror(-r));
                config_done(&n);
                (void) sd_notify(0, "READY=1");
                return;
        }
        if (strcmp(n.database, d->cfg.database) != 0 || strcmp(n.socket, d->cfg.socket) != 0 ||
            strcmp(n.root, d->cfg.root) != 0 || strcmp(n.event, d->cfg.event) != 0 ||
            (d->events && config_ring_buffer_pages(&n, (size_t) sysconf(_SC_PAGESIZE)) != d->ring_pages_asked) ||
            n.callchain_depth != d->cfg.callchain_depth ||
            !streq(n.cache_dir, d->cfg.cache_dir) || !streq(n.debuginfod_urls, d->cfg.debuginfod_urls) ||
            n.debuginfod_timeout_ns != d->cfg.debuginfod_timeout_ns || n.offcpu != d->cfg.offcpu ||
            n.offcpu_min_wait_ns != d->cfg.offcpu_min_wait_ns || n.offcpu_max_threads != d->cfg.offcpu_max_threads ||
            n.offcpu_max_sums != d->cfg.offcpu_max_sums || !streq(n.offcpu_clock, d->cfg.offcpu_clock))
                log_notice("database, socket, root, event, ring_buffer_pages, callchain_depth, cache_dir, "
                           "debuginfod_urls, debuginfod_timeout and the offcpu keys take effect at the next "
                           "restart.");

        log_set_max_level(n.log_level);
        if (n.frequency_hz != d->cfg.frequency_hz && d->events)
                apply_frequency(d, n.frequency_hz);
        d->cfg.frequency_hz = n.frequency_hz;
        d->cfg.retention_ns = n.retention_ns;
        d->cfg.database_max_size_bytes = n.database_max_size_bytes;
        d->cfg.database_max_size_auto = n.database_max_size_auto;
        d->cfg.hold_max_size_bytes = n.hold_max_size_bytes;
        compute_db_max(d);
        d->last_retention_ns = 0;
        d->cfg.log_level = n.log_level;
        if (n.drain_interval_ns != d->cfg.drain_interval_ns) {
                struct timeval tv = tv_from_ns(n.drain_interval_ns);
                d->cfg.drain_interval_ns = n.drain_interval_ns;
                event_add(d->drain_timer, &tv);
        }
        if (n.commit_interval_ns != d->cfg.commit_interval_ns) {
                struct timeval tv = tv_from_ns(n.commit_interval_ns);
                d->cfg.commit_interval_ns = n.commit_interval_ns;
                event_add(d->commit_timer, &tv);
        }
        if (n.rescan_interval_ns != d->cfg.rescan_interval_ns) {
                d->cfg.rescan_interval_ns = n.rescan_interval_ns;
                set_rescan_timer(d);
        }
        d->cfg.max_clients = n.max_clients;
        d->cfg.max_clients_per_user = n.max_clients_per_user;
        d->cfg.max_queries_per_user = n.max_queries_per_user;
        d->cfg.client_timeout_ns = n.client_timeout_ns;
        d->cfg.query_max_rows = n.query_max_rows;
        d->cfg.query_max_stacks = n.query_max_stacks;
        d->cfg.query_timeout_ns = n.query_timeout_ns;
        free(d->cfg.group);
        d->cfg.group = TAKE_PTR(n.group);
        if (d->server)
                (void) server_reconfigure(d->server, &d->cfg);
        d->cfg.snapshot_delay_ns = n.snapshot_delay_ns;
        d->cfg.cache_max_size_bytes = n.cache_max_size_bytes;
        d->cfg.cache_max_age_ns = n.cache_max_age_ns;
        snapshotter_reconfigure(d->snapshotter, &d->cfg);
        usymbols_reconfigure(d->usymbols, &d->cfg);
        config_done(&n);
        log_info("Reloaded %s.", d->config_path);
        (void) sd_notify(0, "READY=1");
}

static void status_fill(json_object *p, void *userdata) {
        daemon_ctx *d = userdata;
        const ingest_stats *st = ingest_get_stats(d->ingest);
        const symbolizer_stats *sy = ingest_symbolizer_stats(d->ingest);
        const kernel_info *k = ingest_kernel(d->ingest);
        const uint64_t *lpc;
        size_t n;
        _cleanup_free_ uint64_t *lost = calloc(MAX(d->n_cpus, (size_t) 1), sizeof(uint64_t));
        status_modules modules;
        status_uevents uevents;
        status_symbols symbols;
        /* The heap in use, and how much of it sqlite's page caches hold (they
         * grow with the database up to cache_size per connection). */
        struct mallinfo2 mi = mallinfo2();
        status_info s = {
                .version = PACKAGE_VERSION,
                .pid = (int) getpid(),
                .uptime_ns = clock_ns(CLOCK_MONOTONIC) - d->start_mono_ns,
                .cpus = (unsigned) d->n_cpus,
                .frequency_hz = d->cfg.frequency_hz,
                .event = d->events ? perf_events_kind(d->events) : "none",
                .samples = st->samples,
                .lost = st->lost,
                .lost_per_cpu = lost,
                .bad_records = st->bad_records,
                .ingest_cpu_ns = st->cpu_ns,
                .stack_cache_hits = sy->stack_cache_hits,
                .invalid_user_frames = sy->invalid_user_frames,
                .jit_frames = sy->jit_frames,
                .user_frames_build_id = sy->user_frames_build_id,
                .user_frames_no_build_id = sy->user_frames_no_build_id,
                .user_frames_unknown = sy->user_frames_unknown,
                .deferred_records = st->deferred,
                .rescued_records = st->rescued,
                .ksymbol_records = d->events && perf_events_has_ksymbol(d->events),
                .cgroup_source = ingest_cgroup_source(d->ingest),
                .cgroups_known = ingest_cgroups_known(d->ingest),
                .cgroups_unknown = st->cgroups_unknown,
                .offcpu = d->offcpu ? "on" : d->offcpu_why[0] ? d->offcpu_why : "off",
                .offcpu_waits = st->offcpu_waits,
                .offcpu_wait_ns = st->offcpu_ns,
                .commits = st->commits,
                .pending_samples = store_pending_samples(d->store),
                .bad_sample_blocks = store_bad_blocks(d->store),
                .database_max_size = d->db_max_bytes,
                .cap_removed_samples = d->cap_removed_samples,
                .cap_removed_newest_ns = d->cap_removed_newest_ns,
                .db_path = d->cfg.database,
                .kernel_release = k->release,
                .kernel_build_id = k->build_id,
                .kernel_text_addr = k->text_addr,
                .kernel_symbols = ingest_n_symbols(d->ingest),
                .clients = (unsigned) server_n_clients(d->server),
                .heap_bytes = mi.uordblks + mi.hblkhd,
                .ingest_buffer_bytes = ingest_buffer_bytes(d->ingest),
                .ingest_cache_bytes = ingest_cache_bytes(d->ingest),
                .store_cache_bytes = store_cache_bytes(d->store),
                .tasks_bytes = ingest_tasks_bytes(d->ingest),
        };

#if HAVE_OFFCPU
        {
                offcpu_stats os;

                if (d->offcpu && offcpu_get_stats(d->offcpu, &os) >= 0) {
                        s.offcpu_program = offcpu_program(d->offcpu);
                        s.offcpu_verified_insns = offcpu_verified_insns(d->offcpu);
                        s.offcpu_clock = offcpu_clock_name(d->offcpu);
                        s.offcpu_clock_why = offcpu_clock_why(d->offcpu);
                        s.offcpu_switches = os.switches;
                        s.offcpu_short_waits = os.short_waits;
                        s.offcpu_full_waits = os.full;
                        s.offcpu_full_ns = os.full_ns;
                        s.offcpu_no_stack = os.no_stack;
                        s.offcpu_no_room = os.no_room;
                        s.offcpu_no_time = os.no_time;
                        s.offcpu_dropped_waits = os.dropped_waits;
                        s.offcpu_dropped_ns = os.dropped_ns;
                        s.offcpu_stacks_taken = os.stacks_taken;
                        s.offcpu_stacks_at_end = os.stacks_at_end;
                }
        }
#endif
        lpc = ingest_lost_per_cpu(d->ingest, &n);
        for (size_t i = 0; lost && i < d->n_cpus; i++)
                lost[i] = d->cpus[i] < n ? lpc[d->cpus[i]] : 0;
        s.dropped_samples = store_dropped_samples(d->store, &s.dropped_error, &s.dropped_since_ns);
        (void) store_held(d->store, &s.held_samples, &s.held_bytes, &s.held_since_ns, &s.held_error);
        s.sqlite_memory_bytes = store_memory_used(&s.sqlite_allocations);

        if (d->tracker) {
                const tracker_stats *ts = tracker_get_stats(d->tracker);
                layout *l = ingest_layout(d->ingest);

                modules = (status_modules) {
                        .loaded = layout_n_live(l),
                        .added = ts->modules_added,
                        .removed = ts->modules_removed,
                        .uevents = ts->module_uevents,
                        .ignored_uevents = ts->ignored_uevents,
                        .spurious_removes = ts->spurious_removes,
                        .rescans = ts->rescans,
                        .layout_events = ts->events,
                        .last_change_ns = ts->last_change_ns,
                        .max_change_ns = ts->max_change_ns,
                        .module_frames = sy->module_frames,
                        .module_data_frames = sy->module_data_frames,
                        .ksyms_live = layout_n_live_ksyms(l),
                        .ksyms_tracked = layout_n_ksyms(l),
                        .ksyms_registered = ts->ksyms_registered,
                        .ksyms_unregistered = ts->ksyms_unregistered,
                        .ksym_records = ts->ksym_records,
                        .bpf_events = ts->bpf_events,
                        .ksym_duplicates = ts->ksym_duplicates,
                        .ksym_unknown_unregisters = ts->ksym_unknown_unregisters,
                        .ksym_rescans = ts->ksym_rescans,
                        .unresolved_kernel_frames = sy->unresolved_kernel_frames,
                };
                s.modules = &modules;
        }
        snapshotter_status(d->snapshotter, &s.snapshots);
        if (d->uevents) {
                const uevent_monitor_stats *us = uevent_monitor_get_stats(d->uevents);

                uevents = (status_uevents) {
                        .received = us->received,
                        .accepted = us->accepted,
                        .forged = us->forged,
                        .malformed = us->malformed,
                        .overruns = us->overruns,
                };
                s.uevents = &uevents;
        }
        if (d->usymbols) {
                const usymbols_stats *us = usymbols_get_stats(d->usymbols);

                symbols = (status_symbols) {
                        .files_seen = us->seen,
                        .written = us->extracted,
                        .kept_already = us->kept_already,
                        .no_symbols = us->no_symbols,
                        .failed = us->failed,
                        .dropped = us->dropped,
                        .pruned = us->pruned,
                        .tables = us->tables,
                        .bytes = us->bytes,
                        .last_ns = us->last_ns,
                        .max_ns = us->max_ns,
                        .debuginfod_found = us->debuginfod_found,
                        .debuginfod_missed = us->debuginfod_missed,
                        .last_error = us->last_error,
                        .last_failed_what = us->last_failed_what,
                };
                s.symbols = &symbols;
        }
        pusher_stats ps;
        status_push push;
        char url[512];
        if (d->pusher) {
                pusher_get_stats(d->pusher, &ps);
                pusher_url_for_display(d->cfg.export_url, url, sizeof url);
                push = (status_push) {
                        .url = url,
                        .intervals = ps.intervals,
                        .pushed = ps.pushed,
                        .failed = ps.failed,
                        .dropped = ps.dropped,
                        .queued = ps.queued,
                        .last_push_ns = ps.last_push_ns,
                        .last_error = ps.last_error,
                };
                s.push = &push;
        }
        status_json(&s, p);
}

int daemon_new(const config *c, const char *config_path, daemon_ctx **ret) {
        daemon_ctx *d;
        int r;

        d = calloc(1, sizeof *d);
        if (!d)
                return -ENOMEM;
        r = config_copy(c, &d->cfg);
        if (r < 0) {
                free(d);
                return r;
        }
        d->config_path = config_path ? strdup(config_path) : NULL;
        d->base = event_base_new();
        if (!d->base) {
                daemon_free(d);
                return -ENOMEM;
        }
        d->start_mono_ns = clock_ns(CLOCK_MONOTONIC);
        *ret = d;
        return 0;
}

static int add_signal(daemon_ctx *d, int sig, event_callback_fn cb, struct event **ret) {
        *ret = evsignal_new(d->base, sig, cb, d);
        if (!*ret || event_add(*ret, NULL) < 0)
                return -ENOMEM;
        return 0;
}

int daemon_start(daemon_ctx *d) {
        const size_t page_size = (size_t) sysconf(_SC_PAGESIZE);
        perf_events_config pc = {
                .freq_hz = d->cfg.frequency_hz,
                .max_stack = d->cfg.callchain_depth,
                .pages = config_ring_buffer_pages(&d->cfg, page_size),
                .use_cycles = strcmp(d->cfg.event, "cycles") == 0,
                .clockid = CLOCK_MONOTONIC,
                .want_ksymbol = true,
        };
        /* Samples start after this; the start-up snapshot covers them. */
        uint64_t start_wall_ns = clock_ns(CLOCK_REALTIME);
        struct timeval tv;
        int r;

        signal(SIGPIPE, SIG_IGN);
        /* Everything the daemon creates is private unless it says
         * otherwise (the socket and its directory): the database holds
         * kernel addresses, the cache copies of kernel memory. Here, not
         * only in main(): whoever starts the daemon, whatever its umask. */
        umask(0077);

        r = mkdir_parent(d->cfg.database, 0750);
        if (r < 0)
                return log_error_errno(r, "Failed to create the directory of %s: %m", d->cfg.database);
        const char *why = NULL;
        r = check_parent_private(d->cfg.database, &why);
        if (r < 0 && why)
                return log_error_errno(r, "Refusing the directory of %s: %s (make it root's, mode 0750 or 0700).",
                                       d->cfg.database, why);
        if (r < 0)
                return log_error_errno(r, "Failed to check the directory of %s: %m", d->cfg.database);
        r = check_database(d->cfg.database);
        if (r < 0)
                return r;
        r = store_open(d->cfg.database, STORE_READWRITE, &d->store);
        if (r < 0)
                return log_error_errno(r, "Failed to open the database %s: %m", d->cfg.database);

        r = store_checkpointer_new(d->cfg.database, &d->checkpointer);
        if (r < 0)
                return log_error_errno(r, "Failed to open the database %s for checkpoints: %m", d->cfg.database);
        r = workqueue_new(d->base, "psd-checkpoint", run_checkpoint, checkpoint_done, d, &d->checkpoints);
        if (r < 0)
                return log_error_errno(r, "Failed to start the checkpoint thread: %m");

        r = ingest_new(d->store, d->cfg.root, &d->ingest);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the ingest path: %m");
        /* Sample before reading kallsyms: the side-band records of a
         * BPF program loaded in between then reach the ring buffers (an
         * event that is not enabled gets none), and one that also made it
         * into kallsyms is recognised as a duplicate. */
        d->ring_pages_asked = pc.pages;
        for (;;) {
                /* Woken at half full: each drain takes more records, which
                 * costs less CPU a record (bench/RESULTS.md); the other
                 * half is the time the loop has to answer. */
                pc.wakeup_bytes = (uint32_t) ((size_t) pc.pages * page_size / 2);
                r = perf_events_open(&pc, &d->events);
                if (r != -EPERM || d->cfg.ring_buffer_pages != 0 || pc.pages <= 128)
                        break;
                /* Pages past perf_event_mlock_kb (516 KiB a CPU) count
                 * against RLIMIT_MEMLOCK without CAP_IPC_LOCK (the shipped
                 * unit sets 64M): auto falls back to the largest that
                 * fits, down to 128. */
                pc.pages /= 2;
        }
        if (pc.pages != d->ring_pages_asked && r == -EPERM)
                log_error("Ring buffers of even %u pages a CPU exceed the locked-memory limit (LimitMEMLOCK=, "
                          "perf_event_mlock_kb), or perf events are not permitted.", pc.pages);
        else if (pc.pages != d->ring_pages_asked && r >= 0)
                log_notice("Ring buffers of %u pages a CPU exceed the locked-memory limit; using %u "
                           "(set LimitMEMLOCK= higher, or ring_buffer_pages, for larger ones).", d->ring_pages_asked,
                           pc.pages);
        if (r == -EACCES || r == -EPERM) {
                _cleanup_free_ char *p = NULL;
                int paranoid = read_full_file_at(d->cfg.root, "proc/sys/kernel/perf_event_paranoid", 64, &p, NULL) >= 0 ? atoi(p) : -1;

                if (paranoid >= 3)
                        /* A Debian kernel patch: level 3 demands CAP_SYS_ADMIN even for CAP_PERFMON holders. */
                        return log_error_errno(r, "Failed to open perf events: %m (kernel.perf_event_paranoid is %d: "
                                               "this kernel then requires CAP_SYS_ADMIN; or set it to 2)", paranoid);
                return log_error_errno(r, "Failed to open perf events: %m (perfsnapd needs CAP_PERFMON or CAP_SYS_ADMIN)");
        }
        if (r < 0)
                return log_error_errno(r, "Failed to open perf events: %m");
        d->ring_pages = pc.pages;
        d->n_cpus = perf_events_count(d->events);
        ingest_set_sample_type(d->ingest, perf_events_sample_type(d->events));
        if (!(perf_events_sample_type(d->events) & PERF_SAMPLE_CGROUP))
                log_warning("This kernel has no PERF_SAMPLE_CGROUP (Linux < 5.7): samples are attributed to the "
                            "cgroup their process was in at its first sample (/proc/PID/cgroup).");
        d->bufs = calloc(d->n_cpus, sizeof *d->bufs);
        d->cpus = calloc(d->n_cpus, sizeof *d->cpus);
        d->cpu_evs = calloc(d->n_cpus, sizeof *d->cpu_evs);
        if (!d->bufs || !d->cpus || !d->cpu_evs)
                return log_oom();
        for (size_t i = 0; i < d->n_cpus; i++) {
                d->bufs[i] = perf_events_ringbuf(d->events, i);
                d->cpus[i] = perf_events_cpu(d->events, i);
                /* Readable when the kernel crossed the wakeup watermark. */
                d->cpu_evs[i] = event_new(d->base, perf_events_fd(d->events, i), EV_READ | EV_PERSIST, on_cpu_readable, d);
                if (!d->cpu_evs[i] || event_add(d->cpu_evs[i], NULL) < 0)
                        return log_oom();
        }

        store_set_progress_handler(d->store, SQLITE_PROGRESS_STEPS, on_sqlite_progress, d);

        r = tracker_new(d->base, d->store, ingest_layout(d->ingest), d->ingest, d->cfg.root, &d->tracker);
        if (r < 0)
                return log_oom();
        /* Modules Live before the events are enabled ran their init
         * before any sample: their freed init sections are nobody's. */
        r = tracker_read_before_sampling(d->tracker);
        if (r < 0)
                log_debug_errno(r, "Failed to read proc/modules before sampling: %m");

        r = perf_events_enable(d->events);
        if (r < 0)
                return log_error_errno(r, "Failed to enable the perf events: %m");
        if (!perf_events_has_ksymbol(d->events))
                log_warning("This kernel has no PERF_RECORD_KSYMBOL (Linux < 5.1): BPF programs and other dynamic code "
                            "are known from the start-up kallsyms and rescans (every rescan_interval) only.");

        r = ingest_load_kernel(d->ingest);
        if (r < 0)
                return r;
        start_offcpu(d);

        /* Listen before reading proc/modules: a module loaded in between
         * is then announced rather than missed. */
        r = uevent_monitor_new(d->base, on_uevent, d, &d->uevents);
        if (r < 0)
                log_warning_errno(r, "Failed to listen to kernel uevents: %m; module loads are found by rescans only "
                                  "(rescan_interval)");
        r = tracker_start(d->tracker);
        if (r < 0)
                return r;
        ingest_set_miss_handler(d->ingest, on_unknown_address, d);
        ingest_set_record_handler(d->ingest, on_perf_record, d);
        d->rescan_timer = event_new(d->base, -1, EV_PERSIST, on_rescan_timer, d);
        if (!d->rescan_timer)
                return log_oom();
        set_rescan_timer(d);

        d->drain_timer = event_new(d->base, -1, EV_PERSIST, on_drain_timer, d);
        tv = tv_from_ns(d->cfg.drain_interval_ns);
        if (!d->drain_timer || event_add(d->drain_timer, &tv) < 0)
                return log_oom();
        d->commit_timer = event_new(d->base, -1, EV_PERSIST, on_commit_timer, d);
        tv = tv_from_ns(d->cfg.commit_interval_ns);
        if (!d->commit_timer || event_add(d->commit_timer, &tv) < 0)
                return log_oom();
        compute_db_max(d);
        d->retention_timer = event_new(d->base, -1, EV_PERSIST, on_housekeeping_timer, d);
        tv = (struct timeval) { .tv_sec = HOUSEKEEPING_INTERVAL_SEC };
        if (!d->retention_timer || event_add(d->retention_timer, &tv) < 0)
                return log_oom();
        on_housekeeping_timer(-1, 0, d);

        if (add_signal(d, SIGTERM, on_sigterm, &d->sig_term) < 0 ||
            add_signal(d, SIGINT, on_sigterm, &d->sig_int) < 0 ||
            add_signal(d, SIGHUP, on_sighup, &d->sig_hup) < 0)
                return log_oom();

        if (sd_watchdog_enabled(0, &d->watchdog_usec) > 0) {
                d->watchdog_timer = event_new(d->base, -1, EV_PERSIST, on_watchdog, d);
                tv = tv_from_ns(d->watchdog_usec * 1000 / 2);
                if (!d->watchdog_timer || event_add(d->watchdog_timer, &tv) < 0)
                        return log_oom();
        }

        r = server_new(d->base, &d->cfg, status_fill, d, &d->server);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the socket server: %m");
        server_set_rescan_cb(d->server, on_rescan_request);
        server_set_freshen_cb(d->server, on_freshen);

        r = snapshotter_new(d->base, &d->cfg, d->store, d->ingest, d->tracker, d->server, &d->snapshotter);
        if (r < 0)
                return log_error_errno(r, "Failed to set up kcore snapshots: %m");
        if (d->snapshotter) {
                tracker_set_layout_cb(d->tracker, snapshotter_layout_changed, d->snapshotter);
                server_set_cache_cbs(d->server, snapshotter_call, snapshotter_cache_info, d->snapshotter);
                snapshotter_start(d->snapshotter, start_wall_ns);
        } else
                log_notice("cache_dir is empty: no kcore snapshots are taken, no user function tables kept.");

        r = usymbols_new(d->base, &d->cfg, &d->usymbols);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the user function tables: %m");
        if (d->usymbols)
                ingest_set_user_file_handler(d->ingest, usymbols_file_seen, d->usymbols);

        r = pusher_new(d->base, &d->cfg, NSEC_PER_SEC / MAX(d->cfg.frequency_hz, 1u), &d->pusher);
        if (r < 0)
                return log_error_errno(r, "Failed to set up pushing profiles to export_url: %m");
        pusher_set_freshen(d->pusher, on_push_freshen, d);

        r = server_listen(d->server);
        if (r < 0)
                return r;

        log_info("Sampling %s at %u Hz on %zu CPUs, callchains up to %u frames, ring buffers of %u pages%s, database %s.",
                 perf_events_kind(d->events), d->cfg.frequency_hz, d->n_cpus, d->cfg.callchain_depth, d->ring_pages,
                 d->cfg.ring_buffer_pages ? "" : " (auto)", d->cfg.database);
        (void) sd_notifyf(0, "READY=1\nSTATUS=Sampling %zu CPUs at %u Hz", d->n_cpus, d->cfg.frequency_hz);
        return 0;
}

int daemon_run(daemon_ctx *d) {
        const ingest_stats *st;

        if (event_base_dispatch(d->base) < 0)
                return log_error_errno(-EIO, "The event loop failed.");

        /* Stop sampling, then take everything still in the buffers. */
        if (d->events) {
                (void) perf_events_disable(d->events);
                daemon_drain(d, true);
        }
        if (d->ingest)
                (void) ingest_commit_now(d->ingest);
        if (d->store && store_held(d->store, NULL, NULL, NULL, NULL)) {
                log_warning("The database still refuses writes: the samples held in memory are not stored.");
                (void) store_drop_held(d->store);
        }
        st = ingest_get_stats(d->ingest);
        int dropped_error = 0;
        uint64_t dropped = d->store ? store_dropped_samples(d->store, &dropped_error, NULL) : 0;
        log_info("Stopped: %llu samples stored, %llu lost, %llu not stored%s%s%s, %llu malformed records skipped.",
                 (unsigned long long) (st->samples - MIN(dropped, st->samples)), (unsigned long long) st->lost,
                 (unsigned long long) dropped, dropped ? " (" : "", dropped ? strerror(-dropped_error) : "",
                 dropped ? ")" : "", (unsigned long long) st->bad_records);
        return 0;
}

daemon_ctx *daemon_free(daemon_ctx *d) {
        if (!d)
                return NULL;
        /* Before the ring buffers go; the store's last writes follow. */
        if (d->store)
                store_set_progress_handler(d->store, 0, NULL, NULL);
        /* Finishes a snapshot being written, so none is left half-made
         * in the cache's .tmp (the next start would clean it anyway). */
        snapshotter_free(d->snapshotter);
        server_free(d->server);
        /* Let deferred frees scheduled by the server run. */
        if (d->base)
                event_base_loop(d->base, EVLOOP_NONBLOCK);
        for (size_t i = 0; d->cpu_evs && i < d->n_cpus; i++)
                if (d->cpu_evs[i])
                        event_free(d->cpu_evs[i]);
        free(d->cpu_evs);
        free(d->bufs);
        /* Its thread reads the database on a connection of its own. */
        d->pusher = pusher_free(d->pusher);
        free(d->cpus);
        perf_events_free(d->events);
#if HAVE_OFFCPU
        offcpu_free(d->offcpu);
#endif
        uevent_monitor_free(d->uevents);
        tracker_free(d->tracker);
        ingest_free(d->ingest);
        /* After ingest, which announces files to it. */
        usymbols_free(d->usymbols);
        /* The checkpoint thread and its connection go first: the
         * writer's is then the last, and its close checkpoints the whole
         * WAL and removes it. */
        d->checkpoints = workqueue_free(d->checkpoints, NULL);
        d->checkpointer = store_checkpointer_free(d->checkpointer);
        store_free(d->store);
        if (d->drain_timer)
                event_free(d->drain_timer);
        if (d->commit_timer)
                event_free(d->commit_timer);
        if (d->retention_timer)
                event_free(d->retention_timer);
        if (d->watchdog_timer)
                event_free(d->watchdog_timer);
        if (d->rescan_timer)
                event_free(d->rescan_timer);
        if (d->sig_term)
                event_free(d->sig_term);
        if (d->sig_int)
                event_free(d->sig_int);
        if (d->sig_hup)
                event_free(d->sig_hup);
        if (d->base)
                event_base_free(d->base);
        config_done(&d->cfg);
        free(d->config_path);
        free(d);
        return NULL;
}
