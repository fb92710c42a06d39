/* SPDX-License-Identifier: GPL-2.0-or-later */
/* A worker thread fed from the event loop, results handed back through a
 * pipe (workqueue.h). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "macro.h"
#include "workqueue.h"

struct workqueue {
        workqueue_fn run, done;
        void *userdata;
        pthread_t thread;
        bool thread_started;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        workqueue_item *todo_head, *todo_tail;
        workqueue_item *done_head, *done_tail;
        bool stop;
        int notify_pipe[2];
        struct event *notify_ev;
};

static void push(workqueue_item **head, workqueue_item **tail, workqueue_item *item) {
        item->next = NULL;
        if (*tail)
                (*tail)->next = item;
        else
                *head = item;
        *tail = item;
}

void workqueue_complete(workqueue *q, workqueue_item *item) {
        pthread_mutex_lock(&q->lock);
        push(&q->done_head, &q->done_tail, item);
        /* Wake the loop; a full pipe already means a wake-up is pending. */
        (void) !write(q->notify_pipe[1], "x", 1);
        pthread_mutex_unlock(&q->lock);
}

static void *worker_main(void *userdata) {
        workqueue *q = userdata;

        pthread_mutex_lock(&q->lock);
        for (;;) {
                workqueue_item *item;

                while (!q->todo_head && !q->stop)
                        pthread_cond_wait(&q->cond, &q->lock);
                if (q->stop)
                        break;
                item = q->todo_head;
                q->todo_head = item->next;
                if (!q->todo_head)
                        q->todo_tail = NULL;
                pthread_mutex_unlock(&q->lock);

                q->run(item, q->userdata);

                workqueue_complete(q, item);
                pthread_mutex_lock(&q->lock);
        }
        pthread_mutex_unlock(&q->lock);
        return NULL;
}

static void on_notify(evutil_socket_t fd, short what, void *userdata) {
        workqueue *q = userdata;
        workqueue_item *item, *next;
        char buf[64];

        while (read(fd, buf, sizeof buf) > 0)
                ;
        pthread_mutex_lock(&q->lock);
        item = q->done_head;
        q->done_head = q->done_tail = NULL;
        pthread_mutex_unlock(&q->lock);
        for (; item; item = next) {
                next = item->next;
                q->done(item, q->userdata);
        }
}

void workqueue_submit(workqueue *q, workqueue_item *item) {
        pthread_mutex_lock(&q->lock);
        push(&q->todo_head, &q->todo_tail, item);
        pthread_cond_signal(&q->cond);
        pthread_mutex_unlock(&q->lock);
}

bool workqueue_idle(workqueue *q) {
        bool idle;

        pthread_mutex_lock(&q->lock);
        idle = !q->todo_head;
        pthread_mutex_unlock(&q->lock);
        return idle;
}

int workqueue_new(struct event_base *base, const char *name, workqueue_fn run, workqueue_fn done, void *userdata,
                  workqueue **ret) {
        workqueue *q;
        int r;

        q = calloc(1, sizeof *q);
        if (!q)
                return -ENOMEM;
        q->run = run;
        q->done = done;
        q->userdata = userdata;
        q->notify_pipe[0] = q->notify_pipe[1] = -1;
        pthread_mutex_init(&q->lock, NULL);
        pthread_cond_init(&q->cond, NULL);
        if (pipe2(q->notify_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
                r = negative_errno();
                workqueue_free(q, NULL);
                return r;
        }
        q->notify_ev = event_new(base, q->notify_pipe[0], EV_READ | EV_PERSIST, on_notify, q);
        if (!q->notify_ev || event_add(q->notify_ev, NULL) < 0) {
                workqueue_free(q, NULL);
                return -ENOMEM;
        }
        r = pthread_create(&q->thread, NULL, worker_main, q);
        if (r != 0) {
                workqueue_free(q, NULL);
                return -r;
        }
        q->thread_started = true;
        (void) pthread_setname_np(q->thread, name);
        *ret = q;
        return 0;
}

static void drop_all(workqueue_item *item, workqueue_fn drop, void *userdata) {
        for (workqueue_item *next; item; item = next) {
                next = item->next;
                if (drop)
                        drop(item, userdata);
        }
}

workqueue *workqueue_free(workqueue *q, workqueue_fn drop) {
        if (!q)
                return NULL;
        if (q->thread_started) {
                pthread_mutex_lock(&q->lock);
                q->stop = true;
                pthread_cond_signal(&q->cond);
                pthread_mutex_unlock(&q->lock);
                pthread_join(q->thread, NULL);
        }
        drop_all(q->todo_head, drop, q->userdata);
        drop_all(q->done_head, drop, q->userdata);
        if (q->notify_ev)
                event_free(q->notify_ev);
        if (q->notify_pipe[0] >= 0)
                close(q->notify_pipe[0]);
        if (q->notify_pipe[1] >= 0)
                close(q->notify_pipe[1]);
        pthread_mutex_destroy(&q->lock);
        pthread_cond_destroy(&q->cond);
        free(q);
        return NULL;
}
