/* SPDX-License-Identifier: GPL-2.0-or-later */
/* sched-switch-empty OBJECT: attaches the empty sched_switch program of
 * OBJECT (sched-switch-empty.bpf.o) and holds it until SIGINT or SIGTERM,
 * for bench/offcpu.sh's "empty" setting: what any BPF program on that
 * tracepoint costs a context switch. */
#include <bpf/libbpf.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig) {
        stop = 1;
}

int main(int argc, char **argv) {
        struct bpf_object *obj;
        struct bpf_program *p;
        struct bpf_link *link;

        if (argc != 2) {
                fprintf(stderr, "usage: sched-switch-empty OBJECT\n");
                return 2;
        }
        obj = bpf_object__open_file(argv[1], NULL);
        if (!obj || bpf_object__load(obj) < 0) {
                fprintf(stderr, "cannot load %s: %s\n", argv[1], strerror(errno));
                return 1;
        }
        p = bpf_object__find_program_by_name(obj, "sched_switch_empty");
        link = p ? bpf_program__attach_trace(p) : NULL;
        if (!link) {
                fprintf(stderr, "cannot attach the program: %s\n", strerror(errno));
                return 1;
        }
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        printf("attached\n");
        fflush(stdout);
        while (!stop)
                pause();
        bpf_link__destroy(link);
        bpf_object__close(obj);
        return 0;
}
