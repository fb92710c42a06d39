/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The varlink socket (server.h): connections, credentials, framing, the
 * per-client and per-uid limits, and handing calls to the method table
 * (methods.c) on the loop or a worker; deferred frees of finished jobs. */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <fcntl.h>
#include <grp.h>
#include <json-c/json.h>
#include <malloc.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "methods.h"
#include "server.h"
#include "store/store.h"
#include "wire/protocol.h"
#include "workqueue.h"

#define MAX_PENDING_JOBS 16
/* Of MAX_PENDING_JOBS, these are root's only. */
#define ROOT_JOBS 2
#define MAX_GROUPS 256

/* Memory a client can make the daemon hold (issue: a client that streams
 * calls and reads no replies). libevent stops reading a client's socket
 * once this much of it waits unparsed; */
#define CLIENT_INPUT_HIGH (256u * 1024u)
/* a client with more than this of replies unread gets no new call taken
 * (its calls wait in its socket); */
#define CLIENT_OUTPUT_PAUSE (1024u * 1024u)
/* and with more than this unread over all clients, nobody does. Each
 * client's unread replies are thus at most the pause mark plus one
 * answer, and client_timeout drops a client that reads none. */
#define SERVER_OUTPUT_PAUSE (64u * 1024u * 1024u)

typedef struct client client;

typedef struct job {
        workqueue_item item;    /* first */
        struct job *async_next; /* in server.async_head */
        const method *method;
        client *client;
        method_job call;        /* what the handler sees */
        char **replies;         /* NULL-terminated formatted messages, set by the worker */
} job;

struct client {
        server *server;
        struct bufferevent *bev;
        client *prev, *next;
        msgbuf in;
        uid_t uid;
        pid_t pid;
        bool authorized;
        bool busy;              /* a job is in flight; further calls wait */
        bool paused;            /* calls wait: too many replies unread (by it or by all) */
        bool dead;              /* disconnected; freed when no job refers to it */
        bool close_after_write;
        bool oneway;            /* the call in progress wants no reply */
        unsigned refs;
};

struct server {
        struct event_base *base;
        struct evconnlistener *listener;
        char *socket_path;
        char *db_path;
        char *group;
        gid_t gid;
        bool have_gid;
        uint32_t max_clients, max_rows, max_stacks;
        uint64_t query_timeout_ns;
        uint32_t max_clients_per_user, max_queries_per_user;
        uint64_t client_timeout_ns;
        bool output_paused;     /* some client waits for the unread total to fall */
        server_status_cb status_cb;
        server_rescan_cb rescan_cb;
        server_freshen_cb freshen_cb;
        server_async_cb async_cb;
        server_status_cb cache_cb;
        void *cache_userdata;
        void *userdata;
        char *cache_dir;
        job *async_head;        /* calls the daemon has yet to answer */

        client *clients;
        unsigned n_clients;

        /* Queries and the journal on one worker thread; status on
         * another, so that it never waits behind a query. Each has its
         * own connection. */
        workqueue *queue, *status_queue;
        unsigned n_jobs;        /* on queue */
        store *ro, *status_ro;
};

static void client_unref(client *c);

static void job_free(job *j) {
        if (!j)
                return;
        if (j->call.params)
                json_object_put(j->call.params);
        for (size_t i = 0; j->replies && j->replies[i]; i++)
                free(j->replies[i]);
        free(j->replies);
        free(j);
}

/* ---- worker threads --------------------------------------------------- */

/* The read-only connection of the thread that runs j, opened on first use. */
static int worker_store(server *s, const job *j, store **ret) {
        store **ro = j->method->thread == METHOD_STATUS_THREAD ? &s->status_ro : &s->ro;
        int r;

        if (!*ro) {
                r = store_open(s->db_path, STORE_READONLY, ro);
                if (r < 0)
                        return r;
        }
        *ret = *ro;
        return 0;
}

static bool on_query_queue(const method *m) {
        return m->thread != METHOD_STATUS_THREAD;
}

/* On the worker thread. */
static void run_job(workqueue_item *item, void *userdata) {
        server *s = userdata;
        job *j = (job *) item;

        j->call.store_error = worker_store(s, j, &j->call.store);
        j->replies = j->method->run(&j->call);
        j->call.store = NULL;
        if (j->call.trim && workqueue_idle(on_query_queue(j->method) ? s->queue : s->status_queue))
                malloc_trim(0);
}

/* ---- clients ---------------------------------------------------------- */

static void client_send(client *c, char *msg) {
        if (!msg) {
                log_error("Out of memory formatting a reply; dropping client (pid %d).", (int) c->pid);
                c->close_after_write = true;
                return;
        }
        if (!c->dead && !c->oneway)
                bufferevent_write(c->bev, msg, strlen(msg) + 1);
        free(msg);
}

static void wake_paused(server *s);

/* After a disconnect (the client is unlinked): what it left unread no
 * longer counts. */
static void client_destroy_deferred(evutil_socket_t fd, short what, void *userdata) {
        client *c = userdata;

        wake_paused(c->server);
        client_unref(c);
}

static void client_free(client *c) {
        if (c->bev)
                bufferevent_free(c->bev);
        msgbuf_done(&c->in);
        free(c);
}

static void client_unref(client *c) {
        if (--c->refs == 0)
                client_free(c);
}

/* Never frees inside the client's own callback: unlinks, marks dead, and
 * drops the loop's reference on the next loop iteration. */
static void client_disconnect(client *c) {
        server *s = c->server;

        if (c->dead)
                return;
        c->dead = true;
        bufferevent_disable(c->bev, EV_READ | EV_WRITE);
        if (c->prev)
                c->prev->next = c->next;
        else
                s->clients = c->next;
        if (c->next)
                c->next->prev = c->prev;
        s->n_clients--;
        event_base_once(s->base, -1, EV_TIMEOUT, client_destroy_deferred, c, NULL);
}

/* Calls of c's user in progress (a client has one at a time). */
static unsigned user_jobs(const server *s, uid_t uid) {
        unsigned n = 0;

        for (const client *x = s->clients; x; x = x->next)
                n += x->uid == uid && x->busy;
        return n;
}

/* -EBUSY with *why if c may not start a call on the query thread now. */
static int may_start_job(server *s, const client *c, const char **why) {
        if (s->n_jobs >= MAX_PENDING_JOBS || (c->uid != 0 && s->n_jobs >= MAX_PENDING_JOBS - ROOT_JOBS)) {
                *why = "too many requests in progress; try again";
                return -EBUSY;
        }
        if (c->uid != 0 && user_jobs(s, c->uid) >= s->max_queries_per_user) {
                *why = "too many requests of this user in progress (max_queries_per_user); try again";
                return -EBUSY;
        }
        return 0;
}

static job *job_new(server *s, client *c, const method *m, json_object *params, bool more) {
        job *j;

        j = calloc(1, sizeof *j);
        if (!j)
                return NULL;
        j->method = m;
        j->client = c;
        j->call = (method_job) {
                .params = params,
                .max_rows = s->max_rows,
                .max_stacks = s->max_stacks,
                .query_timeout_ns = s->query_timeout_ns,
                .more = more,
                .db_path = s->db_path,
                .cache_dir = s->cache_dir,
        };
        c->refs++;
        c->busy = true;
        if (on_query_queue(m))
                s->n_jobs++;
        return j;
}

/* A call the daemon answers later: the client waits (busy) meanwhile. */
static int start_async(server *s, client *c, const method *m, json_object *params, const char **why) {
        job *j;
        int r;

        if (!s->async_cb)
                return -EOPNOTSUPP;
        r = may_start_job(s, c, why);
        if (r < 0)
                return r;
        j = job_new(s, c, m, NULL, false);
        if (!j)
                return -ENOMEM;
        j->async_next = s->async_head;
        s->async_head = j;
        r = s->async_cb((server_call *) j, m->name, params, s->cache_userdata);
        if (r < 0) {
                /* Not taken: answered by the caller of start_async(). */
                s->async_head = j->async_next;
                s->n_jobs--;
                c->busy = false;
                client_unref(c);
                job_free(j);
        }
        return r;
}

void server_call_reply(server *s, server_call *call, char *msg) {
        job *j = (job *) call, **p;

        for (p = &s->async_head; *p && *p != j; p = &(*p)->async_next)
                ;
        if (!*p) {
                free(msg);
                return;
        }
        *p = j->async_next;
        j->replies = method_single_reply(msg);
        workqueue_complete(s->queue, &j->item);
}

/* Takes params. */
static int submit_job(server *s, client *c, const method *m, json_object *params, bool more, const char **why) {
        job *j;
        int r;

        if (on_query_queue(m)) {
                r = may_start_job(s, c, why);
                if (r < 0) {
                        json_object_put(params);
                        return r;
                }
        }
        j = job_new(s, c, m, params, more);
        if (!j) {
                json_object_put(params);
                return -ENOMEM;
        }
        if (m->fresh != METHOD_FRESH_NO && s->freshen_cb)
                s->freshen_cb(s->userdata, m->fresh == METHOD_FRESH_SAMPLES);
        workqueue_submit(on_query_queue(m) ? s->queue : s->status_queue, &j->item);
        return 0;
}

static void client_process(client *c);

/* Back on the loop: the replies go out. */
static void job_done(workqueue_item *item, void *userdata) {
        server *s = userdata;
        job *j = (job *) item;
        client *c = j->client;

        if (on_query_queue(j->method))
                s->n_jobs--;
        c->busy = false;
        if (!c->dead) {
                if (!j->replies)
                        client_send(c, NULL);   /* out of memory: drop the client */
                for (size_t i = 0; j->replies && j->replies[i]; i++)
                        client_send(c, TAKE_PTR(j->replies[i]));
                client_process(c);      /* calls that arrived meanwhile */
        }
        j->client = NULL;
        job_free(j);
        client_unref(c);
}

/* Jobs never run, or whose replies were never sent, at exit. */
static void drop_job(workqueue_item *item, void *userdata) {
        job *j = (job *) item;

        client_unref(j->client);
        job_free(j);
}

/* cred: SO_PEERCRED of fd, read once at accept. */
static bool group_allows(server *s, int fd, const struct ucred *cred) {
        gid_t groups[MAX_GROUPS];
        socklen_t glen = sizeof groups;

        if (cred->uid == 0)
                return true;
        if (!s->have_gid)
                return false;
        if (cred->gid == s->gid)
                return true;
        /* Supplementary groups of the peer at connect time (Linux 4.13+). */
        if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &glen) >= 0)
                for (size_t i = 0; i < glen / sizeof(gid_t); i++)
                        if (groups[i] == s->gid)
                                return true;
        return false;
}

static void handle_call(client *c, const char *msg) {
        server *s = c->server;
        proto_call call = {};
        const method *m;
        const char *why = NULL;
        json_object *p;
        char text[256];
        int r;

        c->oneway = false;
        r = proto_call_parse_why(msg, &call, &why);
        if (r < 0) {
                log_debug("Malformed call from pid %d (%s); disconnecting it.", (int) c->pid, why);
                snprintf(text, sizeof text, "not a varlink call: %s", why);
                client_send(c, proto_format_error_message(PERFSNAP_ERROR_INVALID_MESSAGE, text));
                c->close_after_write = true;
                return;
        }
        /* Executed, not answered: its replies, errors included, are
         * dropped (client_send()) until the next call. */
        c->oneway = call.oneway;

        if (!c->authorized) {
                client_send(c, proto_format_permission_denied(s->group));
                c->close_after_write = true;
                goto out;
        }

        m = method_lookup(call.method);
        if (!m) {
                client_send(c, proto_format_method_not_found(call.method));
                goto out;
        }
        if (!method_allowed(m, c->uid)) {
                snprintf(text, sizeof text, "only root may %s", m->denied);
                client_send(c, proto_format_error_message(PERFSNAP_ERROR_PERMISSION_DENIED, text));
                goto out;
        }

        switch (m->thread) {
        case METHOD_LOOP:
                p = json_object_new_object();
                r = s->rescan_cb ? s->rescan_cb(p, s->userdata) : -EOPNOTSUPP;
                if (r < 0) {
                        snprintf(text, sizeof text, "rescan failed: %s", strerror(-r));
                        client_send(c, proto_format_error_message(PERFSNAP_ERROR_INTERNAL, text));
                } else
                        client_send(c, proto_format_reply(p, false));
                json_object_put(p);
                goto out;
        case METHOD_LOOP_LATER:
                r = start_async(s, c, m, call.parameters, &why);
                if (r == -EOPNOTSUPP || r == -EINVAL) {
                        client_send(c, proto_format_error_message(r == -EINVAL ? PERFSNAP_ERROR_INVALID_PARAMETER : PERFSNAP_ERROR_INTERNAL,
                                                   r == -EINVAL ? "\"max_size\" and \"max_age_ns\" are integers in [0, 2^63)"
                                                                : "snapshots are off (cache_dir is empty)"));
                        goto out;
                }
                break;
        case METHOD_QUERY_THREAD:
        case METHOD_STATUS_THREAD:
                if (m->fill == METHOD_FILL_NONE)
                        p = json_object_get(call.parameters);   /* the job's own reference */
                else {
                        p = json_object_new_object();
                        if (m->fill == METHOD_FILL_STATUS)
                                s->status_cb(p, s->userdata);
                        else if (s->cache_cb)
                                s->cache_cb(p, s->cache_userdata);
                }
                r = submit_job(s, c, m, p, call.more, &why);
                break;
        }
        if (r == -EBUSY)
                client_send(c, proto_format_error_message(PERFSNAP_ERROR_BUSY, why ?: "too many requests in progress; try again"));
        else if (r < 0)
                client_send(c, proto_format_error_message(PERFSNAP_ERROR_INTERNAL, "out of memory"));
out:
        proto_call_done(&call);
}

/* Replies queued to every client and not yet read. */
static size_t server_output_bytes(const server *s) {
        size_t n = 0;

        for (const client *x = s->clients; x; x = x->next)
                if (!x->dead)
                        n += evbuffer_get_length(bufferevent_get_output(x->bev));
        return n;
}

/* Whether c's next call may be taken now; else it waits in c's input
 * (and, once CLIENT_INPUT_HIGH of it waits, in the socket). */
static bool client_may_take_call(client *c) {
        server *s = c->server;

        c->paused = false;
        if (c->busy || c->dead || c->close_after_write)
                return false;
        if (evbuffer_get_length(bufferevent_get_output(c->bev)) > CLIENT_OUTPUT_PAUSE ||
            server_output_bytes(s) > SERVER_OUTPUT_PAUSE) {
                c->paused = s->output_paused = true;
                return false;
        }
        return true;
}

/* Takes c's calls, one at a time, parsing no more of its input than the
 * next call needs. */
static void client_process(client *c) {
        struct evbuffer *input = bufferevent_get_input(c->bev);

        while (client_may_take_call(c)) {
                _cleanup_free_ char *msg = NULL;
                char chunk[16384];
                int n;

                if (msgbuf_next(&c->in, &msg) > 0) {
                        handle_call(c, msg);
                        continue;
                }
                n = evbuffer_remove(input, chunk, sizeof chunk);
                if (n <= 0)
                        break;
                if (msgbuf_feed(&c->in, chunk, (size_t) n) < 0) {
                        log_warning("Client pid %d sent a request over %u bytes; disconnecting it.",
                                    (int) c->pid, PERFSNAP_MAX_REQUEST_BYTES);
                        client_send(c, proto_format_error_message(PERFSNAP_ERROR_INVALID_MESSAGE, "request too large"));
                        c->close_after_write = true;
                }
        }
        if (c->close_after_write && !c->dead) {
                evbuffer_drain(input, evbuffer_get_length(input));
                if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
                        client_disconnect(c);
        }
}

static void on_client_read(struct bufferevent *bev, void *userdata) {
        client_process(userdata);
}

/* Clients that wait for the unread total to fall take calls again. */
static void wake_paused(server *s) {
        if (!s->output_paused || server_output_bytes(s) > SERVER_OUTPUT_PAUSE)
                return;
        s->output_paused = false;
        for (client *x = s->clients, *next; x; x = next) {
                next = x->next;
                if (x->paused)
                        client_process(x);
        }
}

/* Called when c's unread replies fell to CLIENT_OUTPUT_PAUSE (the write
 * low-water mark) or below. */
static void on_client_write(struct bufferevent *bev, void *userdata) {
        client *c = userdata;

        if (c->close_after_write) {
                if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
                        client_disconnect(c);
                return;
        }
        client_process(c);
        wake_paused(c->server);
}

static void on_client_event(struct bufferevent *bev, short what, void *userdata) {
        client *c = userdata;
        size_t unread = evbuffer_get_length(bufferevent_get_output(bev));

        if (what & BEV_EVENT_TIMEOUT) {
                if (what & BEV_EVENT_WRITING) {
                        /* client_timeout without taking any of its replies */
                        log_warning("Client pid %d (uid %u) read none of its replies (%zu bytes) for %llu s; "
                                    "disconnecting it.", (int) c->pid, (unsigned) c->uid, unread,
                                    (unsigned long long) (c->server->client_timeout_ns / NSEC_PER_SEC));
                        client_disconnect(c);
                        return;
                }
                /* Reading timed out: idle, unless a call of its own is in
                 * progress or waits for its replies to be read. */
                if (c->busy || c->paused || unread > 0) {
                        bufferevent_enable(bev, EV_READ);
                        return;
                }
                log_debug("Client pid %d (uid %u) sent no call for %llu s; disconnecting it.", (int) c->pid,
                          (unsigned) c->uid, (unsigned long long) (c->server->client_timeout_ns / NSEC_PER_SEC));
                client_disconnect(c);
                return;
        }
        if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
                client_disconnect(c);
}

static unsigned user_clients(const server *s, uid_t uid) {
        unsigned n = 0;

        for (const client *x = s->clients; x; x = x->next)
                n += x->uid == uid;
        return n;
}

/* Best effort: a fresh socket's send buffer takes this without blocking. */
static void refuse(int fd, const char *message) {
        _cleanup_free_ char *msg = proto_format_error_message(PERFSNAP_ERROR_BUSY, message);

        if (msg)
                (void) !send(fd, msg, strlen(msg) + 1, MSG_DONTWAIT | MSG_NOSIGNAL);
        close(fd);
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int socklen, void *userdata) {
        server *s = userdata;
        struct ucred cred = {};
        socklen_t len = sizeof cred;
        client *c;

        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
                log_warning_errno(errno, "Failed to get the peer credentials of a client: %m");
                close(fd);
                return;
        }
        /* The last CONFIG_ROOT_CLIENTS connections are root's. */
        if (s->n_clients >= s->max_clients || (cred.uid != 0 && s->n_clients >= s->max_clients - CONFIG_ROOT_CLIENTS)) {
                log_debug("Refusing a client of uid %u: %u connections already (max_clients).", (unsigned) cred.uid,
                          s->n_clients);
                refuse(fd, "too many connections (max_clients); try again");
                return;
        }
        if (cred.uid != 0 && user_clients(s, cred.uid) >= s->max_clients_per_user) {
                log_debug("Refusing a client of uid %u: it has max_clients_per_user connections.", (unsigned) cred.uid);
                refuse(fd, "too many connections of this user (max_clients_per_user); try again");
                return;
        }

        c = calloc(1, sizeof *c);
        if (!c) {
                close(fd);
                return;
        }
        c->server = s;
        c->refs = 1;
        c->uid = cred.uid;
        c->pid = cred.pid;
        msgbuf_init(&c->in, PERFSNAP_MAX_REQUEST_BYTES);
        c->bev = bufferevent_socket_new(s->base, fd, BEV_OPT_CLOSE_ON_FREE);
        if (!c->bev) {
                close(fd);
                client_free(c);
                return;
        }
        c->authorized = group_allows(s, fd, &cred);
        bufferevent_setcb(c->bev, on_client_read, on_client_write, on_client_event, c);
        bufferevent_setwatermark(c->bev, EV_READ, 0, CLIENT_INPUT_HIGH);
        bufferevent_setwatermark(c->bev, EV_WRITE, CLIENT_OUTPUT_PAUSE, 0);
        struct timeval tv = {
                .tv_sec = (time_t) (s->client_timeout_ns / NSEC_PER_SEC),
        };
        bufferevent_set_timeouts(c->bev, &tv, &tv);
        bufferevent_enable(c->bev, EV_READ | EV_WRITE);

        c->next = s->clients;
        if (s->clients)
                s->clients->prev = c;
        s->clients = c;
        s->n_clients++;
        log_debug("Client connected: pid %d uid %u (%s).", (int) cred.pid, (unsigned) cred.uid,
                  c->authorized ? "allowed" : "not allowed");
}

/* ---- setup ------------------------------------------------------------ */

static int resolve_group(server *s) {
        struct group grp, *res = NULL;
        char buf[16384];

        s->have_gid = false;
        if (!s->group[0])
                return 0;
        if (getgrnam_r(s->group, &grp, buf, sizeof buf, &res) != 0 || !res) {
                log_warning("Group '%s' does not exist: only root may query (create it, e.g. with systemd-sysusers).",
                            s->group);
                return 0;
        }
        s->gid = res->gr_gid;
        s->have_gid = true;
        return 0;
}

int server_reconfigure(server *s, const config *c) {
        char *g = strdup(c->group);
        int r;

        if (!g)
                return -ENOMEM;
        free(s->group);
        s->group = g;
        s->max_clients = c->max_clients;
        s->max_clients_per_user = c->max_clients_per_user;
        s->max_queries_per_user = c->max_queries_per_user;
        s->client_timeout_ns = c->client_timeout_ns;
        s->max_rows = c->query_max_rows;
        s->max_stacks = c->query_max_stacks;
        s->query_timeout_ns = c->query_timeout_ns;
        r = resolve_group(s);
        if (r < 0)
                return r;
        /* A new group must reach the socket too, not only pass the
         * SO_PEERCRED check (and an old one no longer). */
        if (s->listener && chown(s->socket_path, 0, s->have_gid ? s->gid : 0) < 0)
                log_warning_errno(errno, "Failed to give %s to group %s: %m", s->socket_path,
                                  s->have_gid ? s->group : "root");
        return 0;
}

int server_new(struct event_base *base, const config *c, server_status_cb status_cb, void *userdata, server **ret) {
        server *s;
        int r;

        s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->base = base;
        s->status_cb = status_cb;
        s->userdata = userdata;

        s->socket_path = strdup(c->socket);
        s->db_path = strdup(c->database);
        s->cache_dir = strdup(c->cache_dir);
        if (!s->socket_path || !s->db_path || !s->cache_dir) {
                server_free(s);
                return -ENOMEM;
        }
        r = server_reconfigure(s, c);
        if (r < 0) {
                server_free(s);
                return r;
        }

        r = workqueue_new(base, "psd-query", run_job, job_done, s, &s->queue);
        if (r >= 0)
                r = workqueue_new(base, "psd-status", run_job, job_done, s, &s->status_queue);
        if (r < 0) {
                server_free(s);
                return r;
        }
        *ret = s;
        return 0;
}

static int socket_in_use(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (fd < 0)
                return negative_errno();
        memcpy(sa.sun_path, path, strlen(path));
        return connect(fd, (struct sockaddr *) &sa, sizeof sa) >= 0;
}

int server_listen(server *s) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct stat st;
        int r;

        if (strlen(s->socket_path) >= sizeof sa.sun_path)
                return log_error_errno(-ENAMETOOLONG, "Socket path %s is too long (max %zu bytes).",
                                       s->socket_path, sizeof sa.sun_path - 1);
        memcpy(sa.sun_path, s->socket_path, strlen(s->socket_path));

        r = mkdir_parent(s->socket_path, 0755);
        if (r < 0)
                return log_error_errno(r, "Failed to create the directory of %s: %m", s->socket_path);

        if (lstat(s->socket_path, &st) >= 0) {
                if (!S_ISSOCK(st.st_mode))
                        return log_error_errno(-EEXIST, "%s exists and is not a socket; refusing to replace it.",
                                               s->socket_path);
                if (socket_in_use(s->socket_path) > 0)
                        return log_error_errno(-EADDRINUSE, "Another perfsnapd is listening on %s.", s->socket_path);
                (void) unlink(s->socket_path);
        }

        s->listener = evconnlistener_new_bind(s->base, on_accept, s,
                                              LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, SOMAXCONN,
                                              (struct sockaddr *) &sa, sizeof sa);
        if (!s->listener)
                return log_error_errno(errno, "Failed to listen on %s: %m", s->socket_path);

        if (chmod(s->socket_path, 0660) < 0)
                return log_error_errno(errno, "Failed to set the mode of %s: %m", s->socket_path);
        if (s->have_gid && chown(s->socket_path, 0, s->gid) < 0)
                (void) log_warning_errno(errno, "Failed to give %s to group %s: %m", s->socket_path, s->group);
        log_info("Listening on %s (root%s%s).", s->socket_path,
                 s->have_gid ? " and group " : " only", s->have_gid ? s->group : "");
        return 0;
}

void server_set_rescan_cb(server *s, server_rescan_cb cb) {
        s->rescan_cb = cb;
}

void server_set_freshen_cb(server *s, server_freshen_cb cb) {
        s->freshen_cb = cb;
}

void server_set_cache_cbs(server *s, server_async_cb async_cb, server_status_cb cache_cb, void *userdata) {
        s->async_cb = async_cb;
        s->cache_cb = cache_cb;
        s->cache_userdata = userdata;
}

unsigned server_n_clients(const server *s) {
        return s->n_clients;
}

server *server_free(server *s) {
        if (!s)
                return NULL;
        workqueue_free(s->queue, drop_job);
        workqueue_free(s->status_queue, drop_job);
        /* The threads are gone: their connections can be closed from here. */
        s->ro = store_free(s->ro);
        s->status_ro = store_free(s->status_ro);
        for (job *j = s->async_head, *n; j; j = n) {
                n = j->async_next;
                drop_job(&j->item, s);
        }
        while (s->clients) {
                client *c = s->clients;
                s->clients = c->next;
                c->dead = true;
                client_unref(c);
        }
        if (s->listener) {
                evconnlistener_free(s->listener);
                (void) unlink(s->socket_path);
        }
        free(s->socket_path);
        free(s->db_path);
        free(s->cache_dir);
        free(s->group);
        free(s);
        return NULL;
}
