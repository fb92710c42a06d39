/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Kcore snapshots on a thread of their own: the debounce after layout
 * changes, the cache's limits, and the Snapshot, CacheList and CachePrune
 * calls (snapshotter.h). */
#include <errno.h>
#include <json-c/json.h>
#include <string.h>
#include <sys/stat.h>

#include "fileio.h"
#include "kernel/snapshot.h"
#include "log.h"
#include "macro.h"
#include "snapshotter.h"
#include "store/store.h"
#include "timeparse.h"
#include "wire/cache-json.h"
#include "wire/protocol.h"
#include "workqueue.h"

/* Layout generations remembered for linking samples: a snapshot result
 * can arrive after a few more module changes. */
#define GEN_HISTORY 64
/* The longest a burst of module changes can put a snapshot off, in
 * multiples of snapshot_delay. */
#define DELAY_MAX_FACTOR 10

typedef struct snap_job {
        workqueue_item item;            /* first */
        bool prune_only;
        server_call *call;              /* the client waiting for it, or NULL */
        char reason[64];
        uint64_t gen;                   /* layout generation when requested */
        snapshot_prune_limits limits;
        char *keep;
        const char *failed;             /* what a failed take failed on (snapshot_take()) */

        /* results, filled by the worker */
        int error;
        uint64_t duration_ns;
        snapshot_take_result take;
        int prune_error;
        snapshot_info *removed;
        size_t n_removed, n_left;
        uint64_t size_left;
} snap_job;

struct snapshotter {
        struct event_base *base;
        store *store;                   /* snapshot rows, sample links */
        ingest *in;                     /* the snapshot samples are linked to */
        tracker *tracker;
        server *server;
        char *root, *cache_dir;
        uint64_t delay_ns, max_size_bytes, max_age_ns;

        struct event *timer;            /* the debounce */
        uint64_t burst_start_mono;      /* first change not yet snapshotted; 0: none */

        uint64_t gen;                   /* the kernel's layout generation: +1 per module change */
        uint64_t gen_start_ns[GEN_HISTORY];     /* wall time each began */
        int64_t gen_snapshot[GEN_HISTORY];      /* its snapshot, 0 while unknown */

        int64_t current_id;
        char *current_path;

        workqueue *queue;
        unsigned in_flight;             /* jobs submitted, not yet handled */
        bool auto_queued;               /* a start-up/module-change snapshot is queued or running */
        bool again;                     /* the layout changed while it ran: take another */

        /* stats */
        uint64_t created, reused, failures, pruned;
        uint64_t last_duration_ns;
        unsigned last_attempts;
        int last_error, kcore_error;
        uint64_t linked_samples;
};

static void job_free(snap_job *j) {
        if (!j)
                return;
        snapshot_info_done(&j->take.info);
        snapshot_infos_free(j->removed, j->n_removed);
        free(j->keep);
        free(j);
}

/* On the worker thread. */
static void run_job(workqueue_item *item, void *userdata) {
        snapshotter *s = userdata;
        snap_job *j = (snap_job *) item;
        uint64_t t0 = clock_ns(CLOCK_MONOTONIC);

        if (!j->prune_only) {
                j->error = snapshot_take(s->root, s->cache_dir, SNAPSHOT_MAX_ATTEMPTS_DEFAULT,
                                         clock_ns(CLOCK_REALTIME), &j->take, &j->failed);
                /* Never prune the snapshot just made or reused. */
                if (j->error >= 0)
                        j->limits.keep = j->take.info.path;
        }
        j->duration_ns = clock_ns(CLOCK_MONOTONIC) - t0;
        if (j->error >= 0 && (j->prune_only || j->limits.max_size_bytes || j->limits.max_age_ns)) {
                j->limits.now_ns = clock_ns(CLOCK_REALTIME);
                j->prune_error = snapshot_prune(s->cache_dir, &j->limits, &j->removed, &j->n_removed,
                                                &j->n_left, &j->size_left);
        }
}

static void drop_job(workqueue_item *item, void *userdata) {
        job_free((snap_job *) item);
}

static void submit(snapshotter *s, snap_job *j) {
        s->in_flight++;
        workqueue_submit(s->queue, &j->item);
}

static snap_job *take_job_new(snapshotter *s, const char *reason) {
        snap_job *j = calloc(1, sizeof *j);

        if (!j)
                return NULL;
        snprintf(j->reason, sizeof j->reason, "%s", reason);
        j->gen = s->gen;
        j->limits.max_size_bytes = s->max_size_bytes;
        j->limits.max_age_ns = s->max_age_ns;
        return j;
}

static void take_auto(snapshotter *s, const char *reason) {
        snap_job *j;

        if (s->auto_queued) {
                s->again = true;
                return;
        }
        j = take_job_new(s, reason);
        if (!j) {
                log_oom();
                return;
        }
        s->auto_queued = true;
        s->again = false;
        submit(s, j);
}

/* ---- results ----------------------------------------------------------- */

static void record_pruned(snapshotter *s, const snap_job *j) {
        uint64_t now = clock_ns(CLOCK_REALTIME);

        if (j->prune_error < 0)
                log_warning_errno(j->prune_error, "Failed to prune the snapshot cache %s: %m", s->cache_dir);
        for (size_t i = 0; i < j->n_removed; i++) {
                (void) store_prune_snapshot(s->store, j->removed[i].build_id, j->removed[i].name, now);
                log_info("Removed snapshot %s (%llu bytes) from the cache.", j->removed[i].path,
                         (unsigned long long) j->removed[i].size_bytes);
        }
        s->pruned += j->n_removed;
}

static const char *take_error_message(const snapshotter *s, const snap_job *j, char *buf, size_t size) {
        const char *root = streq(s->root, "/") ? "" : s->root;

        if (j->error == -EAGAIN)
                snprintf(buf, size, "the kernel's modules changed during each of %d copies", SNAPSHOT_MAX_ATTEMPTS_DEFAULT);
        else if (j->error == -EPERM && j->failed && !streq(j->failed, "proc/kcore"))
                snprintf(buf, size, "%s shows no addresses (perfsnapd needs CAP_SYSLOG)", j->failed);
        else if (j->failed && streq(j->failed, "proc/kcore") &&
                 (j->error == -EBADMSG || j->error == -EPROTONOSUPPORT || j->error == -E2BIG || j->error == -ENODATA))
                snprintf(buf, size, "%s/proc/kcore is not a kcore this perfsnapd can copy: %s", root, strerror(-j->error));
        else if (j->failed)
                snprintf(buf, size, "%s/%s: %s", root, j->failed, strerror(-j->error));
        else
                snprintf(buf, size, "%s: %s", s->cache_dir, strerror(-j->error));
        return buf;
}

/* Links the samples of the job's layout generation, and of the current
 * one if the job was for it, to the snapshot. */
static void link_samples(snapshotter *s, const snap_job *j, int64_t id) {
        uint64_t from, until;
        int64_t n;

        if (s->gen - j->gen >= GEN_HISTORY)
                return;         /* too long ago: its samples stay unlinked */
        from = s->gen_start_ns[j->gen % GEN_HISTORY];
        until = j->gen == s->gen ? UINT64_MAX : s->gen_start_ns[(j->gen + 1) % GEN_HISTORY];
        s->gen_snapshot[j->gen % GEN_HISTORY] = id;
        if (from >= until)
                return;         /* a generation that lasted no time: no samples */
        n = store_link_snapshot(s->store, ingest_boot_id(s->in), id, from, until);
        if (n < 0)
                log_warning_errno((int) n, "Failed to link samples to snapshot %lld: %m", (long long) id);
        else
                s->linked_samples += (uint64_t) n;
        if (j->gen == s->gen)
                ingest_set_snapshot(s->in, id, id, from);
}

static void handle_take(snapshotter *s, snap_job *j) {
        const snapshot_info *i = &j->take.info;
        store *st = s->store;
        char msg[256], detail[PATH_MAX + 64];
        uint64_t reuses = 0, now = clock_ns(CLOCK_REALTIME);
        int64_t id = 0;
        int r;

        s->last_duration_ns = j->duration_ns;
        s->last_error = j->error;
        if (j->error < 0) {
                s->failures++;
                take_error_message(s, j, msg, sizeof msg);
                log_error("Failed to snapshot the kernel's code into %s (%s): %s.", s->cache_dir, j->reason, msg);
                if (j->call)
                        server_call_reply(s->server, j->call, proto_format_error_message(PERFSNAP_ERROR_INTERNAL, msg));
                return;
        }
        s->last_attempts = j->take.attempts;
        if (j->take.kcore_error && j->take.kcore_error != s->kcore_error)
                log_warning("Snapshots hold kallsyms and modules only: cannot read %s/proc/kcore: %s%s.",
                            streq(s->root, "/") ? "" : s->root, strerror(j->take.kcore_error),
                            j->take.kcore_error == EPERM || j->take.kcore_error == EACCES ?
                            " (reading kcore needs CAP_SYS_RAWIO)" : "");
        s->kcore_error = j->take.kcore_error;

        r = store_use_snapshot(st, &(store_snapshot) {
                        .boot_id = ingest_boot_id(s->in),
                        .build_id = i->build_id,
                        .name = i->name,
                        .path = i->path,
                        .time_ns = i->time_ns,
                        .text_addr = i->text_addr,
                        .n_modules = i->n_modules,
                        .size_bytes = i->size_bytes,
                        .has_kcore = i->has_kcore,
                }, j->take.reused, now, &id);
        if (r < 0)
                log_error_errno(r, "Failed to record snapshot %s in the database: %m", i->path);
        else {
                (void) store_get_snapshot(st, i->build_id, i->name, NULL, &reuses);
                snprintf(detail, sizeof detail, "%s: %s", j->reason, i->path);
                (void) tracker_journal_snapshot(s->tracker, j->take.reused ? "snapshot-reused" : "snapshot-created",
                                                id, detail, now);
                link_samples(s, j, id);
                if (j->gen == s->gen) {
                        s->current_id = id;
                        free(s->current_path);
                        s->current_path = strdup(i->path);
                }
        }
        if (j->take.reused) {
                s->reused++;
                log_info("Reused snapshot %s (%s; %zu modules, same _text).", i->path, j->reason, i->n_modules);
        } else {
                s->created++;
                log_info("Created snapshot %s (%s): %zu modules, kcore %s%llu bytes in %zu segments, "
                         "%llu bytes in all, %u %s, %llu ms.",
                         i->path, j->reason, i->n_modules, i->has_kcore ? "" : "missing, ",
                         (unsigned long long) j->take.kcore_bytes, j->take.kcore_segments,
                         (unsigned long long) i->size_bytes, j->take.attempts,
                         j->take.attempts == 1 ? "copy" : "copies",
                         (unsigned long long) (j->duration_ns / NSEC_PER_MSEC));
        }
        record_pruned(s, j);
        (void) ingest_commit(s->in);
        if (j->call) {
                json_object *o = NULL;

                r = cache_take_json(s->cache_dir, &(cache_take) {
                                .take = &j->take,
                                .id = id,
                                .reuses = reuses,
                                .duration_ns = j->duration_ns,
                                .removed = j->removed,
                                .n_removed = j->n_removed,
                        }, &o);
                server_call_reply(s->server, j->call, r < 0 ? NULL : proto_format_reply(o, false));
                json_object_put(o);
        }
}

static void handle_prune(snapshotter *s, snap_job *j) {
        json_object *o;
        char msg[256];

        record_pruned(s, j);
        (void) ingest_commit(s->in);
        if (!j->call)
                return;
        if (j->prune_error < 0) {
                snprintf(msg, sizeof msg, "pruning %s failed: %s", s->cache_dir, strerror(-j->prune_error));
                server_call_reply(s->server, j->call, proto_format_error_message(PERFSNAP_ERROR_INTERNAL, msg));
                return;
        }
        o = NULL;
        server_call_reply(s->server, j->call,
                          cache_prune_json(s->cache_dir, j->removed, j->n_removed, j->n_left, j->size_left, &o) < 0 ?
                          NULL : proto_format_reply(o, false));
        json_object_put(o);
}

/* Back on the loop. */
static void job_done(workqueue_item *item, void *userdata) {
        snapshotter *s = userdata;
        snap_job *j = (snap_job *) item;

        s->in_flight--;
        if (j->prune_only)
                handle_prune(s, j);
        else {
                if (!j->call)
                        s->auto_queued = false;
                handle_take(s, j);
        }
        job_free(j);
        if (s->again && !s->auto_queued && !event_pending(s->timer, EV_TIMEOUT, NULL))
                take_auto(s, "modules changed while a snapshot was taken");
}

/* ---- triggers ---------------------------------------------------------- */

static void on_timer(evutil_socket_t fd, short what, void *userdata) {
        snapshotter *s = userdata;

        s->burst_start_mono = 0;
        take_auto(s, "modules changed");
}

void snapshotter_layout_changed(uint64_t wall_ns, void *userdata) {
        snapshotter *s = userdata;
        uint64_t now = clock_ns(CLOCK_MONOTONIC), deadline, wait;
        struct timeval tv;

        if (!s)
                return;
        s->gen++;
        s->gen_start_ns[s->gen % GEN_HISTORY] = wall_ns;
        s->gen_snapshot[s->gen % GEN_HISTORY] = 0;
        /* Samples from now on wait for the new layout's snapshot. */
        ingest_set_snapshot(s->in, s->gen_snapshot[(s->gen - 1) % GEN_HISTORY], 0, wall_ns);

        /* Debounce: snapshot_delay after the last change, but no later
         * than DELAY_MAX_FACTOR delays after the first of a burst. */
        if (!s->burst_start_mono)
                s->burst_start_mono = now;
        deadline = MIN(now + s->delay_ns, s->burst_start_mono + DELAY_MAX_FACTOR * s->delay_ns);
        wait = deadline > now ? deadline - now : 0;
        tv = (struct timeval) { .tv_sec = (time_t) (wait / NSEC_PER_SEC), .tv_usec = (suseconds_t) (wait % NSEC_PER_SEC / 1000) };
        if (event_add(s->timer, &tv) < 0)
                log_error("Failed to arm the snapshot timer.");
}

int snapshotter_call(server_call *call, const char *method, json_object *params, void *userdata) {
        snapshotter *s = userdata;
        snap_job *j;

        if (!s)
                return -EOPNOTSUPP;
        if (streq(method, PERFSNAP_METHOD_SNAPSHOT)) {
                j = take_job_new(s, "requested");
                if (!j)
                        return -ENOMEM;
        } else {
                json_object *o;

                j = calloc(1, sizeof *j);
                if (!j)
                        return -ENOMEM;
                j->prune_only = true;
                j->limits.max_size_bytes = s->max_size_bytes;
                j->limits.max_age_ns = s->max_age_ns;
                /* Parameters override the configured limits; 0 is no limit. */
                if ((params && json_object_object_get_ex(params, "max_size", &o) &&
                     proto_json_u64(o, INT64_MAX, &j->limits.max_size_bytes) < 0) ||
                    (params && json_object_object_get_ex(params, "max_age_ns", &o) &&
                     proto_json_u64(o, INT64_MAX, &j->limits.max_age_ns) < 0)) {
                        free(j);
                        return -EINVAL;
                }
                if (s->current_path) {
                        j->keep = strdup(s->current_path);
                        if (!j->keep) {
                                free(j);
                                return -ENOMEM;
                        }
                        j->limits.keep = j->keep;
                }
        }
        j->call = call;
        submit(s, j);
        return 0;
}

void snapshotter_cache_info(json_object *params, void *userdata) {
        snapshotter *s = userdata;

        if (s && s->current_path)
                json_object_object_add(params, "current", json_object_new_string(s->current_path));
}

void snapshotter_status(snapshotter *s, status_snapshots *ret) {
        *ret = (status_snapshots) {};
        if (!s)
                return;
        *ret = (status_snapshots) {
                .cache_dir = s->cache_dir,
                .created = s->created,
                .reused = s->reused,
                .failures = s->failures,
                .pruned = s->pruned,
                .pending = s->in_flight > 0 || event_pending(s->timer, EV_TIMEOUT, NULL),
                .current = s->current_path,
                .last_duration_ns = s->last_duration_ns,
                .last_attempts = s->last_attempts,
                .last_error = s->last_error,
                .kcore_error = s->kcore_error,
                .linked_samples = s->linked_samples,
                .layout_generation = s->gen,
        };
}

void snapshotter_reconfigure(snapshotter *s, const config *c) {
        if (!s)
                return;
        s->delay_ns = c->snapshot_delay_ns;
        s->max_size_bytes = c->cache_max_size_bytes;
        s->max_age_ns = c->cache_max_age_ns;
}

void snapshotter_start(snapshotter *s, uint64_t since_ns) {
        int r;

        if (!s)
                return;
        r = snapshot_clean_tmp(s->cache_dir);
        if (r < 0)
                log_warning_errno(r, "Failed to clean %s/%s: %m", s->cache_dir, SNAPSHOT_TMP_DIR);
        else if (r > 0)
                log_info("Removed %d unfinished snapshots from %s/%s.", r, s->cache_dir, SNAPSHOT_TMP_DIR);
        s->gen_start_ns[0] = since_ns;
        take_auto(s, "start-up");
}

/* ---- lifetime ---------------------------------------------------------- */

int snapshotter_new(struct event_base *base, const config *c, store *st, ingest *in, tracker *t, server *srv,
                    snapshotter **ret) {
        snapshotter *s;
        int r;

        if (!c->cache_dir[0]) {
                *ret = NULL;
                return 0;
        }
        /* The snapshots are copies of kernel memory, written as root: a
         * cache root that somebody else may change (a link planted in it,
         * or it a link) would send those writes, and the removals of
         * pruning, where that user wants. */
        if (mkdir(c->cache_dir, 0700) >= 0)
                (void) chmod(c->cache_dir, 0700);
        else if (errno != EEXIST)
                return log_error_errno(-errno, "Failed to create the snapshot cache %s: %m", c->cache_dir);
        const char *why = NULL;
        r = check_dir_private(c->cache_dir, &why);
        if (r < 0 && why)
                return log_error_errno(r, "Refusing the snapshot cache %s: %s (make it root's, mode 0700 or 0755; "
                                       "or set cache_dir empty).", c->cache_dir, why);
        if (r < 0)
                return log_error_errno(r, "Failed to check the snapshot cache %s: %m", c->cache_dir);
        s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->base = base;
        s->store = st;
        s->in = in;
        s->tracker = t;
        s->server = srv;
        snapshotter_reconfigure(s, c);
        s->root = strdup(c->root);
        s->cache_dir = strdup(c->cache_dir);
        s->timer = event_new(base, -1, 0, on_timer, s);
        if (!s->root || !s->cache_dir || !s->timer) {
                snapshotter_free(s);
                return -ENOMEM;
        }
        r = workqueue_new(base, "psd-snapshot", run_job, job_done, s, &s->queue);
        if (r < 0) {
                snapshotter_free(s);
                return r;
        }
        *ret = s;
        return 0;
}

snapshotter *snapshotter_free(snapshotter *s) {
        if (!s)
                return NULL;
        workqueue_free(s->queue, drop_job);
        if (s->timer)
                event_free(s->timer);
        free(s->root);
        free(s->cache_dir);
        free(s->current_path);
        free(s);
        return NULL;
}
