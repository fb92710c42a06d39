/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The server (daemon/server.c, daemon/workqueue.c) in-process on a real
 * unix socket with a real event loop: a client thread sends calls the way
 * perfsnapctl does and reads the replies. Status is filled by the loop's
 * callback and the status worker, Query answered by the query worker, an
 * unknown method refused, Rescan run on the loop, a oneway call not
 * answered, a malformed message answered with an error and the
 * connection closed. Run as root or not (the caller's group may query). (Per-user limits and access by other users are the
 * root tier's: tests/integration/test-access.sh, test-client-limits.sh.) */

#include <errno.h>
#include <event2/event.h>
#include <grp.h>
#include <json-c/json.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "macro.h"
#include "server.h"
#include "store/store.h"
#include "test.h"
#include "wire/protocol.h"

typedef struct fixture {
        char dir[64];
        config cfg;
        struct event_base *base;
        server *srv;
        unsigned status_calls, rescan_calls;
} fixture;

static void fill_status(json_object *p, void *userdata) {
        fixture *f = userdata;

        f->status_calls++;
        json_object_object_add(p, "samples", json_object_new_int64(42));
}

static int do_rescan(json_object *reply, void *userdata) {
        fixture *f = userdata;

        f->rescan_calls++;
        json_object_object_add(reply, "added", json_object_new_int(0));
        return 0;
}

/* The client side: one connection, calls in order, replies collected. */
typedef struct client_run {
        const char *socket;
        const char *const *calls;       /* NUL-terminated messages, NULL-terminated list */
        size_t n_calls;
        size_t want_replies;            /* reads until this many came, or the server closed */
        char *replies[16];
        size_t n_replies;
        bool closed;                    /* the server closed the connection */
        int done;                       /* set by the thread when it is through */
        struct event_base *base;
} client_run;

static void *client_thread(void *userdata) {
        client_run *c = userdata;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        msgbuf in;
        char buf[65536];
        int fd;

        msgbuf_init(&in, PERFSNAP_MAX_REPLY_BYTES);
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", c->socket);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0)
                goto out;
        for (size_t i = 0; i < c->n_calls; i++)
                if (send(fd, c->calls[i], strlen(c->calls[i]) + 1, MSG_NOSIGNAL) < 0)
                        break;          /* the server closed it: read what it said */
        while (c->n_replies < c->want_replies) {
                ssize_t n = read(fd, buf, sizeof buf);
                char *msg;

                if (n <= 0) {
                        c->closed = true;
                        break;
                }
                if (msgbuf_feed(&in, buf, (size_t) n) < 0)
                        break;
                while (msgbuf_next(&in, &msg) > 0 && c->n_replies < ELEMENTSOF(c->replies))
                        c->replies[c->n_replies++] = msg;
        }
out:
        if (fd >= 0)
                close(fd);
        msgbuf_done(&in);
        __atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
        return NULL;
}

static void setup(fixture *f) {
        store *st = NULL;

        /* As the daemon does (daemon_start()): a client gone is an error
         * on its socket, not a signal. */
        signal(SIGPIPE, SIG_IGN);
        snprintf(f->dir, sizeof f->dir, "/tmp/test-server.XXXXXX");
        ASSERT_TRUE(mkdtemp(f->dir));
        config_init(&f->cfg);
        free(f->cfg.socket);
        ASSERT_TRUE(asprintf(&f->cfg.socket, "%s/run/sock", f->dir) > 0);
        free(f->cfg.database);
        ASSERT_TRUE(asprintf(&f->cfg.database, "%s/db", f->dir) > 0);
        free(f->cfg.cache_dir);
        f->cfg.cache_dir = strdup("");
        /* Our own group may query: the test runs as root or not. */
        free(f->cfg.group);
        f->cfg.group = strdup(getgrgid(getgid()) ? getgrgid(getgid())->gr_name : "");
        ASSERT_OK(store_open(f->cfg.database, STORE_READWRITE, &st));
        store_free(st);
        f->base = event_base_new();
        ASSERT_TRUE(f->base);
        ASSERT_OK(server_new(f->base, &f->cfg, fill_status, f, &f->srv));
        server_set_rescan_cb(f->srv, do_rescan);
        ASSERT_OK(server_listen(f->srv));
}

static void teardown(fixture *f) {
        char cmd[128];

        server_free(f->srv);
        event_base_free(f->base);
        config_done(&f->cfg);
        snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
        ASSERT_EQ(system(cmd), 0);
}

/* Runs the loop while the client makes its calls (at most 10 s), looking
 * every 10 ms whether it is through (the loop is woken by its own events
 * only). */
static void run_client(fixture *f, client_run *c) {
        pthread_t th;

        c->socket = f->cfg.socket;
        c->base = f->base;
        ASSERT_EQ(pthread_create(&th, NULL, client_thread, c), 0);
        for (unsigned i = 0; i < 1000 && !__atomic_load_n(&c->done, __ATOMIC_ACQUIRE); i++) {
                struct timeval tv = { .tv_usec = 10000 };

                ASSERT_EQ(event_base_loopexit(f->base, &tv), 0);
                ASSERT_EQ(event_base_dispatch(f->base), 0);
        }
        ASSERT_EQ(pthread_join(th, NULL), 0);
        /* What the server does after the client left (the deferred free). */
        for (unsigned i = 0; i < 3; i++)
                ASSERT_TRUE(event_base_loop(f->base, EVLOOP_NONBLOCK) >= 0);
}

static void reply_of(const client_run *c, size_t i, char **ret_error, json_object **ret_params) {
        bool continues = true;

        ASSERT_LT(i, c->n_replies);
        ASSERT_OK(proto_reply_parse(c->replies[i], ret_error, ret_params, &continues));
        ASSERT_TRUE(!continues);
}

static void client_done(client_run *c) {
        for (size_t i = 0; i < c->n_replies; i++)
                free(c->replies[i]);
}

TEST(calls_are_answered_in_order) {
        const char *const calls[] = {
                "{\"method\":\"io.perfsnap.Status\"}",
                "{\"method\":\"io.perfsnap.Query\",\"parameters\":{\"top\":5}}",
                "{\"method\":\"io.perfsnap.Nope\"}",
                "{\"method\":\"io.perfsnap.Rescan\"}",
                "{\"method\":\"io.perfsnap.Status\",\"oneway\":true}",
                "{\"method\":\"io.perfsnap.Ksyms\"}",
        };
        client_run c = { .calls = calls, .n_calls = ELEMENTSOF(calls), .want_replies = 5 };
        json_object *p;
        fixture f = {};
        char *error;

        setup(&f);
        run_client(&f, &c);
        /* Six calls, one of them oneway: five replies, in order. */
        ASSERT_EQ(c.n_replies, 5);
        ASSERT_TRUE(!c.closed);

        reply_of(&c, 0, &error, &p);
        ASSERT_NULL(error);
        ASSERT_EQ(json_object_get_int64(json_object_object_get(p, "samples")), 42);         /* the loop's part */
        ASSERT_TRUE(json_object_object_get_ex(p, "stored_samples", NULL));                  /* the worker's */
        json_object_put(p);

        reply_of(&c, 1, &error, &p);
        ASSERT_NULL(error);
        ASSERT_EQ(json_object_get_int64(json_object_object_get(p, "total_samples")), 0);
        json_object_put(p);

        reply_of(&c, 2, &error, &p);
        ASSERT_STREQ(error, PERFSNAP_ERROR_METHOD_NOT_FOUND);
        ASSERT_STREQ(json_object_get_string(json_object_object_get(p, "method")), "io.perfsnap.Nope");
        free(error);
        json_object_put(p);

        reply_of(&c, 3, &error, &p);
        if (geteuid() == 0) {
                ASSERT_NULL(error);
                ASSERT_TRUE(json_object_object_get_ex(p, "added", NULL));
        } else {
                /* Root only, whatever the group. */
                ASSERT_STREQ(error, PERFSNAP_ERROR_PERMISSION_DENIED);
                free(error);
        }
        json_object_put(p);

        reply_of(&c, 4, &error, &p);
        ASSERT_NULL(error);
        ASSERT_TRUE(json_object_object_get_ex(p, "ksyms", NULL));
        json_object_put(p);

        ASSERT_EQ(f.status_calls, 2);   /* the oneway Status ran too */
        ASSERT_EQ(f.rescan_calls, geteuid() == 0 ? 1u : 0u);
        client_done(&c);
        teardown(&f);
}

TEST(a_malformed_message_is_refused_and_the_connection_closed) {
        const char *const calls[] = {
                "{\"method\":",
                "{\"method\":\"io.perfsnap.Status\"}",
        };
        client_run c = { .calls = calls, .n_calls = ELEMENTSOF(calls), .want_replies = 2 };
        json_object *p;
        fixture f = {};
        char *error;

        setup(&f);
        run_client(&f, &c);
        ASSERT_EQ(c.n_replies, 1);
        ASSERT_TRUE(c.closed);
        reply_of(&c, 0, &error, &p);
        ASSERT_STREQ(error, PERFSNAP_ERROR_INVALID_MESSAGE);
        free(error);
        json_object_put(p);
        ASSERT_EQ(f.status_calls, 0);
        client_done(&c);
        teardown(&f);
}
