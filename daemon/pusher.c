/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The pusher (pusher.h): interval profiles to export_url, through a queue
 * of files, on a thread of its own. */

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "build-config.h"
#include "export.h"
#include "fileio.h"
#include "kernel/snapshot.h"
#include "log.h"
#include "macro.h"
#include "pusher.h"
#include "store/store.h"
#include "timeparse.h"
#include "workqueue.h"

#define PUSH_DIR "push"
#define PUSH_SUFFIX ".pb.gz"
#define BACKOFF_MIN_NS (5 * NSEC_PER_SEC)
#define BACKOFF_MAX_NS (600 * NSEC_PER_SEC)
/* Samples of the last seconds may not be committed yet: an interval is
 * closed this long after its end. */
#define PUSH_LAG_NS (3 * NSEC_PER_SEC)

typedef struct push_item {
        workqueue_item base;
        uint64_t from_ns, until_ns;
} push_item;

struct pusher {
        config cfg;                     /* own copy: the thread reads it */
        void (*freshen)(void *userdata);        /* drains and commits, before an interval is read */
        void *freshen_userdata;
        uint64_t period_ns;
        struct event *timer;
        workqueue *queue;
        bool busy;                      /* an item is on the thread */
        uint64_t next_from_ns;          /* the next interval's start */

        /* The thread's. */
        store *store;
        CURL *curl;
        uint64_t retry_at_ns;           /* monotonic; 0: now */
        uint64_t backoff_ns;

        pthread_mutex_t lock;           /* stats, between the thread and the loop */
        pusher_stats stats;
};

void pusher_url_for_display(const char *url, char *buf, size_t size) {
        const char *scheme = strstr(url, "://"), *host = scheme ? scheme + 3 : url, *at, *end;

        /* user:password@ goes, and the query (it may hold a token). */
        end = host + strcspn(host, "?#");
        at = memchr(host, '@', (size_t) (end - host));
        snprintf(buf, size, "%.*s%.*s", (int) (host - url), url, (int) (end - (at ? at + 1 : host)), at ? at + 1 : host);
}

static void set_error(pusher *p, const char *fmt, ...) _printf_(2, 3);
static void set_error(pusher *p, const char *fmt, ...) {
        va_list ap;

        pthread_mutex_lock(&p->lock);
        va_start(ap, fmt);
        vsnprintf(p->stats.last_error, sizeof p->stats.last_error, fmt, ap);
        va_end(ap);
        pthread_mutex_unlock(&p->lock);
}

/* CACHE/push, made 0700; an fd. */
static int open_queue(const pusher *p) {
        _cleanup_close_ int cfd = snapshot_cache_open(p->cfg.cache_dir, true);
        const char *why = NULL;
        int fd, r;

        if (cfd < 0)
                return cfd;
        if (mkdirat(cfd, PUSH_DIR, 0700) < 0 && errno != EEXIST)
                return negative_errno();
        fd = openat(cfd, PUSH_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        r = check_fd_private(fd, &why);
        if (r < 0) {
                log_warning("%s/%s: %s", p->cfg.cache_dir, PUSH_DIR, why ?: strerror(-r));
                close(fd);
                return r;
        }
        return fd;
}

static int name_cmp(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* The queued files' names, oldest first (the names start with the
 * interval's start, zero-padded). */
static int list_queue(int dfd, char ***ret, size_t *ret_n) {
        _cleanup_close_ int fd = dup(dfd);
        char **v = NULL;
        size_t n = 0, alloc = 0;
        struct dirent *de;
        DIR *d;

        if (fd < 0)
                return negative_errno();
        d = fdopendir(fd);
        if (!d)
                return negative_errno();
        fd = -1;
        rewinddir(d);
        while ((de = readdir(d))) {
                size_t len = strlen(de->d_name);

                if (len <= strlen(PUSH_SUFFIX) || strcmp(de->d_name + len - strlen(PUSH_SUFFIX), PUSH_SUFFIX) != 0)
                        continue;
                if (array_reserve_one((void **) &v, &alloc, n, sizeof(char *)) < 0 || !(v[n] = strdup(de->d_name))) {
                        closedir(d);
                        for (size_t i = 0; i < n; i++)
                                free(v[i]);
                        free(v);
                        return -ENOMEM;
                }
                n++;
        }
        closedir(d);
        qsort(v, n, sizeof(char *), name_cmp);
        *ret = v;
        *ret_n = n;
        return 0;
}

static void free_names(char **v, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
}

/* Writes the interval's profile into the queue. */
static int make_profile(pusher *p, int dfd, uint64_t from_ns, uint64_t until_ns) {
        query_params q = QUERY_PARAMS_INIT;
        query_result *res = NULL;
        char name[64], tmp[80];
        int fd, r;

        if (!p->store) {
                r = store_open(p->cfg.database, STORE_READONLY, &p->store);
                if (r < 0)
                        return r;
        }
        q.since_ns = from_ns;
        q.until_ns = until_ns;
        q.want_stacks = q.by_pid = q.by_cpu = q.want_modules = q.by_cgroup = true;
        q.symbols_dir = p->cfg.cache_dir;
        r = store_query(p->store, &q, 1, p->cfg.query_max_stacks, &res);
        if (r < 0)
                return r;

        snprintf(name, sizeof name, "%020" PRIu64 "-%020" PRIu64 PUSH_SUFFIX, from_ns, until_ns);
        snprintf(tmp, sizeof tmp, ".%s.tmp", name);
        fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) {
                r = negative_errno();
                query_result_free(res);
                return r;
        }
        export_input in = {
                .q = &q, .r = res, .since_ns = from_ns, .until_ns = until_ns, .period_ns = p->period_ns, .title = "",
        };
        r = export_pprof(fd, &in);
        query_result_free(res);
        /* The query's heap goes back to the system, not to this
         * thread's arena, as after the server's queries. */
        malloc_trim(0);
        if (close(fd) < 0 && r >= 0)
                r = negative_errno();
        if (r >= 0 && renameat(dfd, tmp, dfd, name) < 0)
                r = negative_errno();
        if (r < 0)
                (void) unlinkat(dfd, tmp, 0);
        return r;
}

/* export_url with {from} and {until} of the file's interval. */
static char *url_for(const pusher *p, const char *name) {
        uint64_t from = 0, until = 0;
        char f[24], u[24];
        const char *src = p->cfg.export_url;
        size_t len = 0, alloc = strlen(src) * 2 + 64;
        char *out = malloc(alloc);

        if (!out)
                return NULL;
        (void) sscanf(name, "%20" SCNu64 "-%20" SCNu64, &from, &until);
        snprintf(f, sizeof f, "%" PRIu64, (uint64_t) (from / NSEC_PER_SEC));
        snprintf(u, sizeof u, "%" PRIu64, (uint64_t) (until / NSEC_PER_SEC));
        while (*src) {
                const char *v = NULL;
                size_t skip = 1;

                if (strncmp(src, "{from}", 6) == 0)
                        v = f, skip = 6;
                else if (strncmp(src, "{until}", 7) == 0)
                        v = u, skip = 7;
                if (len + 32 >= alloc) {
                        char *m = realloc(out, alloc *= 2);
                        if (!m) {
                                free(out);
                                return NULL;
                        }
                        out = m;
                }
                if (v) {
                        len += (size_t) snprintf(out + len, alloc - len, "%s", v);
                } else
                        out[len++] = *src;
                src += skip;
        }
        out[len] = 0;
        return out;
}

/* POSTs one file: 0 when the server answered 2xx. */
static int send_file(pusher *p, int dfd, const char *name) {
        _cleanup_free_ char *url = url_for(p, name), *data = NULL;
        _cleanup_close_ int fd = -1;
        struct curl_slist *headers = NULL;
        size_t size;
        long status = 0;
        CURLcode rc;
        int r;

        if (!url)
                return -ENOMEM;
        fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        r = read_full_fd(fd, 256u << 20, &data, &size);
        if (r < 0)
                return r;
        if (!p->curl) {
                p->curl = curl_easy_init();
                if (!p->curl)
                        return -ENOMEM;
        }
        curl_easy_reset(p->curl);
        headers = curl_slist_append(headers, "Content-Type: application/octet-stream");
        curl_easy_setopt(p->curl, CURLOPT_URL, url);
        curl_easy_setopt(p->curl, CURLOPT_POST, 1L);
        curl_easy_setopt(p->curl, CURLOPT_POSTFIELDS, data);
        curl_easy_setopt(p->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) size);
        curl_easy_setopt(p->curl, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(p->curl, CURLOPT_CONNECTTIMEOUT, 10L);
        curl_easy_setopt(p->curl, CURLOPT_TIMEOUT, 60L);
        curl_easy_setopt(p->curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(p->curl, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(p->curl, CURLOPT_USERAGENT, "perfsnapd/" PACKAGE_VERSION);
        rc = curl_easy_perform(p->curl);
        curl_slist_free_all(headers);
        if (rc != CURLE_OK) {
                set_error(p, "%s", curl_easy_strerror(rc));
                return -EIO;
        }
        curl_easy_getinfo(p->curl, CURLINFO_RESPONSE_CODE, &status);
        if (status < 200 || status > 299) {
                set_error(p, "HTTP status %ld", status);
                /* The server refuses this profile, not the moment: sending
                 * it again would only hold up the ones behind it. */
                return status >= 400 && status < 500 && status != 408 && status != 429 ? -EBADMSG : -EPROTO;
        }
        return 0;
}

static void run_push(workqueue_item *item, void *userdata) {
        push_item *it = (push_item *) item;
        pusher *p = userdata;
        _cleanup_close_ int dfd = open_queue(p);
        char **names = NULL;
        size_t n = 0, first = 0;
        int r;

        if (dfd < 0) {
                set_error(p, "cannot open the queue %s/" PUSH_DIR ": %s", p->cfg.cache_dir, strerror(-dfd));
                return;
        }
        r = make_profile(p, dfd, it->from_ns, it->until_ns);
        if (r < 0)
                set_error(p, "profile of the interval: %s", strerror(-r));
        else {
                pthread_mutex_lock(&p->lock);
                p->stats.intervals++;
                pthread_mutex_unlock(&p->lock);
        }

        if (list_queue(dfd, &names, &n) < 0)
                return;
        /* Past the bound, the oldest go. */
        while (n - first > p->cfg.export_queue_max) {
                if (unlinkat(dfd, names[first], 0) == 0) {
                        pthread_mutex_lock(&p->lock);
                        p->stats.dropped++;
                        pthread_mutex_unlock(&p->lock);
                }
                first++;
        }
        if (clock_ns(CLOCK_MONOTONIC) >= p->retry_at_ns)
                for (; first < n; first++) {
                        r = send_file(p, dfd, names[first]);
                        pthread_mutex_lock(&p->lock);
                        if (r == 0) {
                                p->stats.pushed++;
                                p->stats.last_push_ns = clock_ns(CLOCK_REALTIME);
                                p->stats.last_error[0] = 0;
                        } else
                                p->stats.failed++;
                        /* Refused for good (a 4xx but 408 and 429, or a
                         * file that cannot be read): dropped, the next
                         * one goes. */
                        if (r == -EBADMSG || (r < 0 && r != -EIO && r != -EPROTO && r != -ENOMEM)) {
                                p->stats.dropped++;
                                pthread_mutex_unlock(&p->lock);
                                if (r != -EBADMSG)
                                        set_error(p, "%s: %s", names[first], strerror(-r));
                                (void) unlinkat(dfd, names[first], 0);
                                continue;
                        }
                        pthread_mutex_unlock(&p->lock);
                        if (r < 0) {
                                if (r != -EIO && r != -EPROTO)
                                        set_error(p, "%s: %s", names[first], strerror(-r));
                                p->backoff_ns = p->backoff_ns ? MIN(p->backoff_ns * 2, BACKOFF_MAX_NS) : BACKOFF_MIN_NS;
                                p->retry_at_ns = clock_ns(CLOCK_MONOTONIC) + p->backoff_ns;
                                break;
                        }
                        (void) unlinkat(dfd, names[first], 0);
                        p->backoff_ns = 0;
                        p->retry_at_ns = 0;
                }
        pthread_mutex_lock(&p->lock);
        p->stats.queued = n - first;
        pthread_mutex_unlock(&p->lock);
        free_names(names, n);
}

static void push_done(workqueue_item *item, void *userdata) {
        pusher *p = userdata;

        p->busy = false;
        free(item);
}

static void on_timer(evutil_socket_t fd, short what, void *userdata) {
        pusher *p = userdata;
        uint64_t now = clock_ns(CLOCK_REALTIME), end;
        push_item *it;

        if (p->busy)
                return;         /* the next tick takes the whole time since */
        /* On a whole second: the store counts a second's block in every
         * window that overlaps it, so an end inside one would count it in
         * two profiles. */
        end = (now - PUSH_LAG_NS) / NSEC_PER_SEC * NSEC_PER_SEC;
        if (end <= p->next_from_ns)
                return;
        it = calloc(1, sizeof *it);
        if (!it)
                return;
        it->from_ns = p->next_from_ns;
        it->until_ns = end;
        p->next_from_ns = end;
        p->busy = true;
        /* The interval's last bucket may still be in the ring buffers
         * (drain_interval is 3 s by default), and once pushed an interval
         * is not read again. */
        if (p->freshen)
                p->freshen(p->freshen_userdata);
        workqueue_submit(p->queue, &it->base);
}

void pusher_set_freshen(pusher *p, void (*cb)(void *userdata), void *userdata) {
        if (!p)
                return;
        p->freshen = cb;
        p->freshen_userdata = userdata;
}

int pusher_new(struct event_base *base, const config *cfg, uint64_t period_ns, pusher **ret) {
        _cleanup_free_ pusher *p = NULL;
        struct timeval tv;
        int r;

        *ret = NULL;
        if (!cfg->export_url[0])
                return 0;
        if (!cfg->cache_dir[0]) {
                log_warning("export_url is set but cache_dir is empty: profiles are not pushed (their queue lives there).");
                return 0;
        }
        p = calloc(1, sizeof *p);
        if (!p)
                return -ENOMEM;
        r = config_copy(cfg, &p->cfg);
        if (r < 0)
                return r;
        pthread_mutex_init(&p->lock, NULL);
        p->period_ns = period_ns;
        p->next_from_ns = (clock_ns(CLOCK_REALTIME) - PUSH_LAG_NS) / NSEC_PER_SEC * NSEC_PER_SEC;
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
                config_done(&p->cfg);
                return -ENOMEM;
        }
        r = workqueue_new(base, "psd-push", run_push, push_done, p, &p->queue);
        if (r < 0)
                goto fail;
        p->timer = event_new(base, -1, EV_PERSIST, on_timer, p);
        tv = (struct timeval) { .tv_sec = (time_t) (cfg->export_interval_ns / NSEC_PER_SEC) };
        if (!p->timer || event_add(p->timer, &tv) < 0) {
                r = -ENOMEM;
                goto fail;
        }
        *ret = TAKE_PTR(p);
        return 0;
fail:
        if (p->timer)
                event_free(p->timer);
        p->queue = workqueue_free(p->queue, (workqueue_fn) push_done);
        config_done(&p->cfg);
        curl_global_cleanup();
        return r;
}

pusher *pusher_free(pusher *p) {
        if (!p)
                return NULL;
        if (p->timer)
                event_free(p->timer);
        p->queue = workqueue_free(p->queue, push_done);
        if (p->curl)
                curl_easy_cleanup(p->curl);
        store_free(p->store);
        curl_global_cleanup();
        config_done(&p->cfg);
        pthread_mutex_destroy(&p->lock);
        free(p);
        return NULL;
}

void pusher_get_stats(pusher *p, pusher_stats *ret) {
        pthread_mutex_lock(&p->lock);
        *ret = p->stats;
        pthread_mutex_unlock(&p->lock);
}
