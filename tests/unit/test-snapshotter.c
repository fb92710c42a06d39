/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The snapshotter's debounce (daemon/snapshotter.c) on a real event loop
 * with real time, over a synthetic root from the 6.1 brd capture (no
 * proc/kcore: snapshots of kallsyms and modules only) and a real cache
 * directory and store: a burst of module changes makes one snapshot
 * snapshot_delay after its last change, and a burst that does not stop
 * still gets one within DELAY_MAX_FACTOR (10) delays of its first. */

#include <errno.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture-root.h"
#include "macro.h"
#include "snapshotter.h"
#include "test.h"
#include "timeparse.h"
#include "tracker.h"

#define DELAY_MS 200

typedef struct fixture {
        char dir[64];
        config cfg;
        struct event_base *base;
        store *store;
        ingest *in;
        tracker *t;
        snapshotter *snap;
} fixture;

static void setup(fixture *f) {
        char path[128];

        snprintf(f->dir, sizeof f->dir, "/tmp/test-snapshotter.XXXXXX");
        ASSERT_TRUE(mkdtemp(f->dir));
        snprintf(path, sizeof path, "%s/root", f->dir);
        ASSERT_OK(fixture_root_brd(path, "unloaded", false, "00000000-0000-0000-0000-000000000003"));
        ASSERT_OK(fixture_sh("mkdir -m 0700 %s/cache", f->dir));

        config_init(&f->cfg);
        free(f->cfg.root);
        ASSERT_TRUE(asprintf(&f->cfg.root, "%s/root", f->dir) > 0);
        free(f->cfg.cache_dir);
        ASSERT_TRUE(asprintf(&f->cfg.cache_dir, "%s/cache", f->dir) > 0);
        f->cfg.snapshot_delay_ns = DELAY_MS * NSEC_PER_MSEC;
        f->cfg.cache_max_size_bytes = 0;
        f->cfg.cache_max_age_ns = 0;

        snprintf(path, sizeof path, "%s/db", f->dir);
        f->base = event_base_new();
        ASSERT_TRUE(f->base);
        ASSERT_OK(store_open(path, STORE_READWRITE, &f->store));
        ASSERT_OK(ingest_new(f->store, f->cfg.root, &f->in));
        ASSERT_OK(ingest_load_kernel(f->in));
        ASSERT_OK(tracker_new(f->base, f->store, ingest_layout(f->in), f->in, f->cfg.root, &f->t));
        ASSERT_OK(tracker_start(f->t));
        ASSERT_OK(snapshotter_new(f->base, &f->cfg, f->store, f->in, f->t, NULL, &f->snap));
        ASSERT_TRUE(f->snap);
}

static void teardown(fixture *f) {
        snapshotter_free(f->snap);
        tracker_free(f->t);
        ingest_free(f->in);
        store_free(f->store);
        event_base_free(f->base);
        config_done(&f->cfg);
        ASSERT_OK(fixture_sh("rm -rf %s", f->dir));
}

static void run_ms(fixture *f, unsigned ms) {
        struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

        ASSERT_EQ(event_base_loopexit(f->base, &tv), 0);
        ASSERT_EQ(event_base_dispatch(f->base), 0);
}

/* Snapshots taken so far (made or reused), and whether one is pending. */
static int64_t taken_took(fixture *f, bool *ret_pending, uint64_t *ret_last_ns) {
        status_snapshots st;

        snapshotter_status(f->snap, &st);
        if (ret_last_ns)
                *ret_last_ns = st.last_duration_ns;
        ASSERT_EQ(st.failures, 0);
        if (ret_pending)
                *ret_pending = st.pending;
        return (int64_t) (st.created + st.reused);
}

static int64_t taken(fixture *f, bool *ret_pending) {
        return taken_took(f, ret_pending, NULL);
}

/* Runs the loop until nothing is pending (at most 10 s). */
static void settle(fixture *f) {
        bool pending = true;

        for (unsigned i = 0; i < 200 && pending; i++) {
                run_ms(f, 50);
                (void) taken(f, &pending);
        }
        ASSERT_TRUE(!pending);
}

static void change(fixture *f) {
        snapshotter_layout_changed(clock_ns(CLOCK_REALTIME), f->snap);
}

TEST(a_burst_of_changes_makes_one_snapshot) {
        fixture f = {};
        bool pending;

        setup(&f);
        snapshotter_start(f.snap, clock_ns(CLOCK_REALTIME));
        settle(&f);
        ASSERT_EQ(taken(&f, NULL), 1);

        /* Five changes 20 ms apart: nothing before the quiet time... */
        for (int i = 0; i < 5; i++) {
                change(&f);
                run_ms(&f, 20);
        }
        run_ms(&f, DELAY_MS / 2);
        ASSERT_EQ(taken(&f, &pending), 1);
        ASSERT_TRUE(pending);
        /* ...then one snapshot for all of them. */
        settle(&f);
        ASSERT_EQ(taken(&f, NULL), 2);
        teardown(&f);
}

TEST(a_burst_that_goes_on_is_snapshotted_within_ten_delays) {
        uint64_t start, first = 0, took = 0;
        fixture f = {};

        setup(&f);
        snapshotter_start(f.snap, clock_ns(CLOCK_REALTIME));
        settle(&f);
        ASSERT_EQ(taken(&f, NULL), 1);

        /* A change every half delay for 15 delays: the quiet time never
         * comes, the cap does. */
        start = clock_ns(CLOCK_MONOTONIC);
        while (clock_ns(CLOCK_MONOTONIC) - start < 15 * DELAY_MS * NSEC_PER_MSEC) {
                change(&f);
                run_ms(&f, DELAY_MS / 2);
                if (!first && taken_took(&f, NULL, &took) > 1)
                        first = clock_ns(CLOCK_MONOTONIC) - start;
        }
        if (!first)
                fprintf(stderr, "no snapshot during a burst of %u ms\n", 15 * DELAY_MS);
        ASSERT_GT(first, 0);
        /* 10 delays, plus the time the snapshot took and one turn of
         * this loop (half a delay) to see it. */
        if (first > 11 * DELAY_MS * NSEC_PER_MSEC + took)
                fprintf(stderr, "first snapshot after %llu ms, taking it %llu ms\n",
                        (unsigned long long) (first / NSEC_PER_MSEC), (unsigned long long) (took / NSEC_PER_MSEC));
        ASSERT_LE(first, 11 * DELAY_MS * NSEC_PER_MSEC + took);
        ASSERT_GE(first, 10 * DELAY_MS * NSEC_PER_MSEC);
        settle(&f);
        teardown(&f);
}
