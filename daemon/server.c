/* SPDX-License-Identifier: GPL-2.0-or-later */
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
#include "wire/history-json.h"
#include "wire/protocol.h"
#include "wire/query-json.h"
#include "server.h"
#include "kernel/snapshot.h"
#include "store/store.h"
#include "timeparse.h"
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

typedef enum job_kind {
        JOB_QUERY, JOB_STATUS, JOB_MODULES, JOB_EVENTS, JOB_KSYMS, JOB_CACHE_LIST,
        JOB_ASYNC,              /* answered by the daemon (server_call_reply()), not the worker */
} job_kind;

typedef struct job {
        workqueue_item item;    /* first */
        struct job *async_next; /* in server.async_head */
        job_kind kind;
        client *client;
        json_object *params;    /* request parameters (query) or live status fields */
        uint32_t max_rows, max_stacks; /* limits as configured when submitted */
        bool more;              /* the caller accepts an answer split over replies */
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
        uint32_t max_clients_per_user, max_queries_per_user;
        uint64_t client_timeout_ns;
        bool output_paused;     /* some client waits for the unread total to fall */
        server_status_cb status_cb;
        server_rescan_cb rescan_cb;
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
        if (j->params)
                json_object_put(j->params);
        for (size_t i = 0; j->replies && j->replies[i]; i++)
                free(j->replies[i]);
        free(j->replies);
        free(j);
}

/* ---- worker thread ---------------------------------------------------- */

static char *error_reply(const char *error, const char *message) {
        json_object *p = json_object_new_object();
        char *s;

        json_object_object_add(p, "message", json_object_new_string(message));
        s = proto_format_error(error, p);
        json_object_put(p);
        return s;
}

/* The connection of the thread that runs j. */
static int worker_store(server *s, const job *j, store **ret) {
        store **ro = j->kind == JOB_STATUS ? &s->status_ro : &s->ro;
        int r;

        if (!*ro) {
                r = store_open(s->db_path, STORE_READONLY, ro);
                if (r < 0)
                        return r;
        }
        *ret = *ro;
        return 0;
}

/* One message as a NULL-terminated array. */
static char **single(char *msg) {
        char **v;

        if (!msg)
                return NULL;
        v = calloc(2, sizeof *v);
        if (!v) {
                free(msg);
                return NULL;
        }
        v[0] = msg;
        return v;
}

static char **worker_query(server *s, job *j) {
        query_params q = QUERY_PARAMS_INIT;
        query_result *res = NULL;
        const char *why = NULL;
        char msg[256], **replies = NULL;
        size_t n = 0;
        store *st;
        int r;

        r = query_params_from_json(j->params, &q, &why);
        if (r < 0)
                return single(error_reply(PERFSNAP_ERROR_INVALID_PARAMETER, why ?: "invalid parameters"));

        r = worker_store(s, j, &st);
        if (r < 0) {
                snprintf(msg, sizeof msg, "cannot open the database %s: %s", s->db_path, strerror(-r));
                return single(error_reply(PERFSNAP_ERROR_INTERNAL, msg));
        }
        r = store_query(st, &q, j->max_rows, j->max_stacks, &res);
        if (r < 0) {
                snprintf(msg, sizeof msg, "query failed: %s", strerror(-r));
                return single(error_reply(PERFSNAP_ERROR_INTERNAL, msg));
        }
        r = query_result_format_replies(res, PERFSNAP_MAX_REPLY_BYTES, &replies, &n);
        query_result_free(res);
        if (r == -E2BIG)
                return single(error_reply(PERFSNAP_ERROR_INVALID_PARAMETER, "a single row does not fit in one reply"));
        if (r < 0)
                return single(error_reply(PERFSNAP_ERROR_INTERNAL, "out of memory"));
        if (n > 1 && !j->more) {
                for (size_t i = 0; i < n; i++)
                        free(replies[i]);
                free(replies);
                return single(error_reply(PERFSNAP_ERROR_INVALID_PARAMETER,
                                          "answer too large for one reply: call with more, or lower top"));
        }
        return replies;
}

static char *worker_status(server *s, job *j) {
        store_stats st = {};
        store *ro;

        if (worker_store(s, j, &ro) >= 0 && store_get_stats(ro, &st) >= 0) {
                json_object_object_add(j->params, "stored_samples", json_object_new_int64((int64_t) st.samples));
                json_object_object_add(j->params, "stored_lost", json_object_new_int64((int64_t) st.lost));
                json_object_object_add(j->params, "db_bytes", json_object_new_int64((int64_t) st.db_bytes));
                json_object_object_add(j->params, "oldest_sample_ns", json_object_new_int64((int64_t) st.first_ns));
                json_object_object_add(j->params, "newest_sample_ns", json_object_new_int64((int64_t) st.last_ns));
        }
        return proto_format_reply(j->params, false);
}

/* Optional parameters of Modules, Events and Ksyms; false with *why set on a
 * wrong type or a value of 2^63 or more. */
static bool get_u64(json_object *params, const char *key, uint64_t *v, const char **why) {
        json_object *o;

        if (!params || !json_object_object_get_ex(params, key, &o))
                return true;
        if (proto_json_u64(o, INT64_MAX, v) < 0) {
                *why = key;
                return false;
        }
        return true;
}

static bool get_bool(json_object *params, const char *key, bool *v, const char **why) {
        json_object *o;

        if (!params || !json_object_object_get_ex(params, key, &o))
                return true;
        if (!json_object_is_type(o, json_type_boolean)) {
                *why = key;
                return false;
        }
        *v = json_object_get_boolean(o);
        return true;
}

/* The records of one event per module section: cap them so that an answer
 * stays well below PERFSNAP_MAX_REPLY_BYTES (a record is ~250 bytes). */
#define EVENTS_MAX_RECORDS 40000

static char *worker_layout(server *s, job *j) {
        uint64_t since = 0, limit = 0;
        bool flag = false;
        const char *why = NULL;
        json_object *res = NULL;
        char msg[256], *reply;
        history h = {};
        store *st;
        int r;

        if (!get_u64(j->params, "since_ns", &since, &why) || !get_u64(j->params, "limit", &limit, &why) ||
            (j->kind != JOB_KSYMS && !get_bool(j->params, j->kind == JOB_MODULES ? "sections" : "records", &flag, &why))) {
                snprintf(msg, sizeof msg, "parameter \"%s\" is not %s", why,
                         streq(why, "since_ns") || streq(why, "limit") ? "an integer in [0, 2^63)" : "a boolean");
                return error_reply(PERFSNAP_ERROR_INVALID_PARAMETER, msg);
        }
        r = worker_store(s, j, &st);
        if (r < 0) {
                snprintf(msg, sizeof msg, "cannot open the database %s: %s", s->db_path, strerror(-r));
                return error_reply(PERFSNAP_ERROR_INTERNAL, msg);
        }
        limit = MIN(limit ?: j->max_rows, (uint64_t) j->max_rows);
        if (j->kind == JOB_MODULES)
                r = store_list_modules(st, since, flag, (uint32_t) limit, &h);
        else if (j->kind == JOB_KSYMS)
                r = store_list_ksyms(st, since, (uint32_t) limit, &h);
        else
                r = store_list_events(st, since, flag, (uint32_t) limit, EVENTS_MAX_RECORDS, &h);
        if (r >= 0) {
                r = j->kind == JOB_MODULES ? history_modules_json(&h, &res) :
                    j->kind == JOB_KSYMS ? history_ksyms_json(&h, &res) : history_events_json(&h, &res);
                history_done(&h);
        }
        if (r < 0) {
                snprintf(msg, sizeof msg, "reading the journal failed: %s", strerror(-r));
                return error_reply(PERFSNAP_ERROR_INTERNAL, msg);
        }
        reply = proto_format_reply(res, false);
        json_object_put(res);
        if (reply && strlen(reply) > PERFSNAP_MAX_REPLY_BYTES) {
                free(reply);
                return error_reply(PERFSNAP_ERROR_INVALID_PARAMETER, "answer too large for one reply: use a later since or a limit");
        }
        return reply;
}

/* The snapshots in the cache directory (the truth, whoever made them),
 * with the reuse counts the database has for them. */
static char *worker_cache_list(server *s, job *j) {
        const char *current = NULL;
        snapshot_info *v = NULL;
        json_object *res, *a, *o;
        char msg[256], *reply;
        store *st = NULL;
        size_t n = 0;
        int r;

        if (!s->cache_dir[0])
                return error_reply(PERFSNAP_ERROR_INTERNAL, "snapshots are off (cache_dir is empty)");
        if (json_object_object_get_ex(j->params, "current", &o))
                current = json_object_get_string(o);
        r = snapshot_list(s->cache_dir, &v, &n);
        if (r < 0) {
                snprintf(msg, sizeof msg, "cannot read the cache %s: %s", s->cache_dir, strerror(-r));
                return error_reply(PERFSNAP_ERROR_INTERNAL, msg);
        }
        (void) worker_store(s, j, &st);
        res = json_object_new_object();
        a = json_object_new_array();
        json_object_object_add(res, "cache_dir", json_object_new_string(s->cache_dir));
        json_object_object_add(res, "snapshots", a);
        for (size_t i = 0; i < n; i++) {
                json_object *e = json_object_new_object();
                char when[TIME_FORMAT_MAX];
                uint64_t reuses = 0;
                int64_t id = 0;

                if (st)
                        (void) store_get_snapshot(st, v[i].build_id, v[i].name, &id, &reuses);
                json_object_array_add(a, e);
                json_object_object_add(e, "build_id", json_object_new_string(v[i].build_id));
                json_object_object_add(e, "name", json_object_new_string(v[i].name));
                json_object_object_add(e, "path", json_object_new_string(v[i].path));
                json_object_object_add(e, "time", json_object_new_string(
                                time_format_local_decimals(v[i].time_ns, 2, when, sizeof when) ?: ""));
                json_object_object_add(e, "time_ns", json_object_new_int64((int64_t) v[i].time_ns));
                json_object_object_add(e, "modules", json_object_new_int64((int64_t) v[i].n_modules));
                json_object_object_add(e, "text_addr", proto_json_hex(v[i].text_addr));
                json_object_object_add(e, "size", json_object_new_int64((int64_t) v[i].size_bytes));
                json_object_object_add(e, "kcore", json_object_new_boolean(v[i].has_kcore));
                json_object_object_add(e, "reuses", json_object_new_int64((int64_t) reuses));
                json_object_object_add(e, "id", id > 0 ? json_object_new_int64(id) : NULL);
                json_object_object_add(e, "current", json_object_new_boolean(current && streq(current, v[i].path)));
        }
        snapshot_infos_free(v, n);
        reply = proto_format_reply(res, false);
        json_object_put(res);
        if (reply && strlen(reply) > PERFSNAP_MAX_REPLY_BYTES) {
                free(reply);
                return error_reply(PERFSNAP_ERROR_INTERNAL, "too many snapshots for one reply: prune the cache");
        }
        return reply;
}

/* On the worker thread. */
static void run_job(workqueue_item *item, void *userdata) {
        server *s = userdata;
        job *j = (job *) item;

        j->replies = j->kind == JOB_QUERY ? worker_query(s, j) :
                     j->kind == JOB_STATUS ? single(worker_status(s, j)) :
                     j->kind == JOB_CACHE_LIST ? single(worker_cache_list(s, j)) : single(worker_layout(s, j));
        if (j->kind == JOB_QUERY)
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

static job *job_new(server *s, client *c, job_kind kind, json_object *params, bool more) {
        job *j;

        j = calloc(1, sizeof *j);
        if (!j)
                return NULL;
        j->kind = kind;
        j->client = c;
        j->params = params;
        j->max_rows = s->max_rows;
        j->max_stacks = s->max_stacks;
        j->more = more;
        c->refs++;
        c->busy = true;
        if (kind != JOB_STATUS)
                s->n_jobs++;
        return j;
}

/* A call the daemon answers later: the client waits (busy) meanwhile. */
static int start_async(server *s, client *c, const char *method, json_object *params, const char **why) {
        job *j;
        int r;

        if (!s->async_cb)
                return -EOPNOTSUPP;
        r = may_start_job(s, c, why);
        if (r < 0)
                return r;
        j = job_new(s, c, JOB_ASYNC, NULL, false);
        if (!j)
                return -ENOMEM;
        j->async_next = s->async_head;
        s->async_head = j;
        r = s->async_cb((server_call *) j, method, params, s->cache_userdata);
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
        j->replies = single(msg);
        workqueue_complete(s->queue, &j->item);
}

char *server_error_reply(const char *error, const char *message) {
        return error_reply(error, message);
}

static int submit_job(server *s, client *c, job_kind kind, json_object *params, bool more, const char **why) {
        job *j;
        int r;

        if (kind != JOB_STATUS) {
                r = may_start_job(s, c, why);
                if (r < 0)
                        return r;
        }
        j = job_new(s, c, kind, params, more);
        if (!j)
                return -ENOMEM;
        workqueue_submit(kind == JOB_STATUS ? s->status_queue : s->queue, &j->item);
        return 0;
}

static void client_process(client *c);

/* Back on the loop: the replies go out. */
static void job_done(workqueue_item *item, void *userdata) {
        server *s = userdata;
        job *j = (job *) item;
        client *c = j->client;

        if (j->kind != JOB_STATUS)
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
        const char *why = NULL;
        json_object *p;
        char text[256];
        int r;

        c->oneway = false;
        r = proto_call_parse_why(msg, &call, &why);
        if (r < 0) {
                log_debug("Malformed call from pid %d (%s); disconnecting it.", (int) c->pid, why);
                snprintf(text, sizeof text, "not a varlink call: %s", why);
                client_send(c, error_reply(PERFSNAP_ERROR_INVALID_MESSAGE, text));
                c->close_after_write = true;
                return;
        }
        /* Executed, not answered: its replies, errors included, are
         * dropped (client_send()) until the next call. */
        c->oneway = call.oneway;

        if (!c->authorized) {
                p = json_object_new_object();
                json_object_object_add(p, "group", json_object_new_string(s->group));
                snprintf(text, sizeof text, "only root%s%s%s may query perfsnapd",
                         s->group[0] ? " and members of group '" : "", s->group, s->group[0] ? "'" : "");
                json_object_object_add(p, "message", json_object_new_string(text));
                client_send(c, proto_format_error(PERFSNAP_ERROR_PERMISSION_DENIED, p));
                json_object_put(p);
                c->close_after_write = true;
                goto out;
        }

        if (strcmp(call.method, PERFSNAP_METHOD_QUERY) == 0) {
                p = json_object_get(call.parameters);   /* the job's own reference */
                r = submit_job(s, c, JOB_QUERY, p, call.more, &why);
                if (r < 0)
                        json_object_put(p);
        } else if (streq(call.method, PERFSNAP_METHOD_MODULES) || streq(call.method, PERFSNAP_METHOD_EVENTS) ||
                   streq(call.method, PERFSNAP_METHOD_KSYMS)) {
                p = json_object_get(call.parameters);
                r = submit_job(s, c, streq(call.method, PERFSNAP_METHOD_MODULES) ? JOB_MODULES :
                                     streq(call.method, PERFSNAP_METHOD_EVENTS) ? JOB_EVENTS : JOB_KSYMS, p, false, &why);
                if (r < 0)
                        json_object_put(p);
        } else if (streq(call.method, PERFSNAP_METHOD_RESCAN)) {
                /* Mutating: root only, whatever the group. */
                if (c->uid != 0) {
                        client_send(c, error_reply(PERFSNAP_ERROR_PERMISSION_DENIED, "only root may request a rescan"));
                        goto out;
                }
                p = json_object_new_object();
                r = s->rescan_cb ? s->rescan_cb(p, s->userdata) : -EOPNOTSUPP;
                if (r < 0) {
                        snprintf(text, sizeof text, "rescan failed: %s", strerror(-r));
                        client_send(c, error_reply(PERFSNAP_ERROR_INTERNAL, text));
                } else
                        client_send(c, proto_format_reply(p, false));
                json_object_put(p);
                goto out;
        } else if (streq(call.method, PERFSNAP_METHOD_SNAPSHOT) || streq(call.method, PERFSNAP_METHOD_CACHE_PRUNE)) {
                /* Mutating: root only, whatever the group. */
                if (c->uid != 0) {
                        snprintf(text, sizeof text, "only root may %s",
                                 streq(call.method, PERFSNAP_METHOD_SNAPSHOT) ? "request a snapshot" : "prune the cache");
                        client_send(c, error_reply(PERFSNAP_ERROR_PERMISSION_DENIED, text));
                        goto out;
                }
                r = start_async(s, c, call.method, call.parameters, &why);
                if (r == -EOPNOTSUPP || r == -EINVAL) {
                        client_send(c, error_reply(r == -EINVAL ? PERFSNAP_ERROR_INVALID_PARAMETER : PERFSNAP_ERROR_INTERNAL,
                                                   r == -EINVAL ? "\"max_size\" and \"max_age_ns\" are integers in [0, 2^63)"
                                                                : "snapshots are off (cache_dir is empty)"));
                        goto out;
                }
        } else if (streq(call.method, PERFSNAP_METHOD_CACHE_LIST)) {
                p = json_object_new_object();
                if (s->cache_cb)
                        s->cache_cb(p, s->cache_userdata);
                r = submit_job(s, c, JOB_CACHE_LIST, p, false, &why);
                if (r < 0)
                        json_object_put(p);
        } else if (strcmp(call.method, PERFSNAP_METHOD_STATUS) == 0) {
                p = json_object_new_object();
                s->status_cb(p, s->userdata);
                r = submit_job(s, c, JOB_STATUS, p, false, &why);
                if (r < 0)
                        json_object_put(p);
        } else {
                p = json_object_new_object();
                json_object_object_add(p, "method", json_object_new_string(call.method));
                client_send(c, proto_format_error(PERFSNAP_ERROR_METHOD_NOT_FOUND, p));
                json_object_put(p);
                goto out;
        }
        if (r == -EBUSY)
                client_send(c, error_reply(PERFSNAP_ERROR_BUSY, why ?: "too many requests in progress; try again"));
        else if (r < 0)
                client_send(c, error_reply(PERFSNAP_ERROR_INTERNAL, "out of memory"));
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
                        client_send(c, error_reply(PERFSNAP_ERROR_INVALID_MESSAGE, "request too large"));
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
        _cleanup_free_ char *msg = error_reply(PERFSNAP_ERROR_BUSY, message);

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

        r = workqueue_new(base, run_job, job_done, s, &s->queue);
        if (r >= 0)
                r = workqueue_new(base, run_job, job_done, s, &s->status_queue);
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
