/* SPDX-License-Identifier: GPL-2.0-or-later */
/* spot-reader N: N times, reads fd 100 at one call site with one stack,
 * fd 100 being a pipe and an eventfd in turn (dup2); a second thread
 * writes to the one being read after 50 ms. Every wait is at the same
 * spot (system call, fd, instruction, stack, and the same sleep state,
 * TASK_INTERRUPTIBLE) with another kernel stack each time (pipe_read,
 * eventfd_read): test-offcpu.sh checks that the off-CPU program does not
 * give one's time to the other. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

static int pipe_fds[2], event_fd, n;

static void *writer(void *arg) {
        for (int i = 0; i < n; i++) {
                nanosleep(&(struct timespec) { .tv_nsec = 50 * 1000 * 1000 }, NULL);
                uint64_t one = 1;

                if (i % 2 == 0 ? write(pipe_fds[1], "x", 1) != 1 : write(event_fd, &one, sizeof one) != sizeof one)
                        exit(1);
        }
        return NULL;
}

static __attribute__((noinline)) void read_one(void) {
        uint64_t v;

        if (read(100, &v, sizeof v) <= 0)
                exit(1);
}

int main(int argc, char **argv) {
        pthread_t t;

        n = argc > 1 ? atoi(argv[1]) : 20;
        event_fd = eventfd(0, 0);
        if (pipe(pipe_fds) < 0 || event_fd < 0)
                return 1;
        /* Both ready before the writer's first write. */
        if (dup2(pipe_fds[0], 100) < 0 || pthread_create(&t, NULL, writer, NULL) != 0)
                return 1;
        for (int i = 0; i < n; i++) {
                if (dup2(i % 2 == 0 ? pipe_fds[0] : event_fd, 100) < 0)
                        return 1;
                read_one();
        }
        pthread_join(t, NULL);
        return 0;
}
