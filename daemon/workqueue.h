/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* A worker thread fed from the event loop: items run on the thread one at
 * a time, in the order submitted, and come back to the loop (through a
 * pipe the loop watches) to be answered there. The server's queries and
 * the kcore snapshots each have one, so neither ever blocks the loop. */

#include <event2/event.h>
#include <stdbool.h>

typedef struct workqueue workqueue;

/* Embed as the first member of a work item. */
typedef struct workqueue_item {
        struct workqueue_item *next;
} workqueue_item;

typedef void (*workqueue_fn)(workqueue_item *item, void *userdata);

/* run is called on the worker thread, done on the loop; done owns the item. */
/* name: the thread's name (at most 15 bytes), as ps -L and
 * /proc/PID/task/TID/comm show it. */
int workqueue_new(struct event_base *base, const char *name, workqueue_fn run, workqueue_fn done, void *userdata,
                  workqueue **ret);

/* Stops the thread after the item it is running. Items never run, or run
 * but not yet handed to done, are passed to drop (which owns them). */
workqueue *workqueue_free(workqueue *q, workqueue_fn drop);

/* From the loop. */
void workqueue_submit(workqueue *q, workqueue_item *item);

/* Whether no item waits to run (from any thread): a worker that is
 * about to be idle. */
bool workqueue_idle(workqueue *q);

/* Hands an item to done without running it, from any thread (the loop
 * calls done for it on its next iteration). */
void workqueue_complete(workqueue *q, workqueue_item *item);
