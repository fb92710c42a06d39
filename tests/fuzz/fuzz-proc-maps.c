/* SPDX-License-Identifier: GPL-2.0-or-later */
/* proc_maps_parse_line() on each line of the input; the mappings it
 * accepts drive a tasks table (mmap/fork/exec/exit/gc), whose lookups are
 * checked against the mappings just inserted. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "perf/tasks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        tasks *t = NULL;
        char *buf;
        size_t n_line = 0;

        buf = malloc(size + 1);
        if (!buf)
                return 0;
        memcpy(buf, data, size);
        buf[size] = 0;
        if (tasks_new(NULL, &t) < 0) {
                free(buf);
                return 0;
        }
        tasks_set_limits(t, 4, 8, 64, 128);

        for (char *line = buf, *e = buf + size; line < e; n_line++) {
                char *nl = memchr(line, '\n', (size_t) (e - line));
                uint64_t start, end, pgoff;
                const char *path;
                uint32_t pid = (uint32_t) (n_line % 5);
                bool exec;
                mapping m;

                if (nl)
                        *nl = 0;
                if (proc_maps_parse_line(line, &start, &end, &pgoff, &exec, &path) == 0) {
                        if (start >= end || path < line || path > line + strlen(line))
                                abort();
                        if (tasks_mmap(t, pid, start, end - start, pgoff, path, NULL) == 0) {
                                if (tasks_find_mapping(t, pid, start, &m) < 0 ||
                                    m.start != start || m.end != end || m.pgoff != pgoff ||
                                    strcmp(m.path, path) != 0)
                                        abort();
                                if (tasks_find_mapping(t, pid, end - 1, &m) < 0 || m.start != start)
                                        abort();
                        }
                        /* Exercise the other side-band events with what the line says. */
                        switch (pgoff % 8) {
                        case 1:
                                (void) tasks_fork(t, pid, pid, pid + 1, pid + 1);
                                break;
                        case 2:
                                (void) tasks_comm(t, pid, pid, path, !exec);
                                break;
                        case 3:
                                (void) tasks_exit(t, pid, pid, start);
                                break;
                        case 4:
                                tasks_gc(t, end);
                                break;
                        case 5:
                                (void) tasks_fork(t, pid, pid, pid, (uint32_t) start);
                                break;
                        default:
                                break;
                        }
                        (void) tasks_get_comm(t, pid, pid);
                }
                line = nl ? nl + 1 : e;
        }
        if (tasks_n_processes(t) > 4 || tasks_n_threads(t) > 8)
                abort();
        tasks_free(t);
        free(buf);
        return 0;
}
