/* SPDX-License-Identifier: GPL-2.0-or-later */
/* What keeping a user-space file's function table costs (daemon/usymbols.h)
 * and what naming frames from it costs a query (elf/symstore.h):
 *
 *   bench-usyms FILE...
 *
 * For each ELF file: the build-id read from its PT_NOTE segments (what the
 * draining loop does for files known from /proc/PID/maps), the table read
 * (elfsyms_read(), with the file in the page cache: the worker's first
 * sight), its size written, the table loaded back from the cache (a
 * query's first use in that query) and lookups of random offsets inside
 * the table's range (a function, and with --inline the inlined chain).
 * The read includes DWARF (functions and inlined code) where the file has
 * it; "inlined" counts the pieces of inlined code kept. Each timing is
 * the median of 5 runs. */

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "elf/elfsyms.h"
#include "elf/symstore.h"
#include "macro.h"

static uint64_t now_ns(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

#define RUNS 5
#define LOOKUPS 1000000

static uint64_t median(uint64_t *v) {
        sort_u64(v, RUNS);
        return v[RUNS / 2];
}

int main(int argc, char **argv) {
        char dir[] = "/tmp/bench-usyms.XXXXXX";

        if (argc < 2) {
                fprintf(stderr, "usage: bench-usyms FILE...\n");
                return 2;
        }
        if (!mkdtemp(dir)) {
                perror("mkdtemp");
                return 1;
        }
        printf("%-44s %10s %9s %8s %8s %10s %10s %10s %10s %10s\n", "file", "bytes", "functions", "inlined", "source",
               "build-id", "read", "load", "lookup", "+inline");
        for (int a = 1; a < argc; a++) {
                uint64_t t_id[RUNS], t_read[RUNS], t_load[RUNS], t0, sink = 0;
                char hex[BUILD_ID_HEX_MAX];
                elfsyms *s = NULL, *l = NULL;
                off_t size;
                int fd, r;

                fd = open(argv[a], O_RDONLY | O_CLOEXEC);
                if (fd < 0) {
                        perror(argv[a]);
                        continue;
                }
                size = lseek(fd, 0, SEEK_END);
                for (int i = 0; i < RUNS; i++) {
                        t0 = now_ns();
                        r = elfsyms_build_id(fd, hex);
                        t_id[i] = now_ns() - t0;
                        elfsyms_free(s);
                        t0 = now_ns();
                        r = elfsyms_read(fd, NULL, -1, &s);
                        t_read[i] = now_ns() - t0;
                        if (r < 0)
                                break;
                }
                close(fd);
                if (r < 0) {
                        fprintf(stderr, "%s: %s\n", argv[a], strerror(-r));
                        elfsyms_free(s);
                        continue;
                }
                if (!s->build_id[0]) {
                        /* Never kept (the daemon keys tables by build-id): the read alone. */
                        printf("%-44s %10lld %9zu %8s %10s %8.2fms  (no build-id: not kept)\n", argv[a],
                               (long long) size, s->n, s->source == ELFSYMS_SYMTAB ? ".symtab" : "other", "-",
                               (double) median(t_read) / 1e6);
                        elfsyms_free(s);
                        continue;
                }
                r = symstore_save(dir, s);
                if (r < 0 && r != -EEXIST) {
                        fprintf(stderr, "%s: save: %s\n", argv[a], strerror(-r));
                        elfsyms_free(s);
                        continue;
                }
                for (int i = 0; i < RUNS; i++) {
                        elfsyms_free(l);
                        t0 = now_ns();
                        r = symstore_load(dir, s->build_id, false, &l);
                        t_load[i] = now_ns() - t0;
                }
                uint64_t t_lookup = 0, t_both = 0;
                for (int with_inline = 0; with_inline < 2 && s->n > 0; with_inline++) {
                        uint64_t lo = s->v[0].offset, span = s->v[s->n - 1].offset - lo + 1, x = 88172645463325252u;

                        t0 = now_ns();
                        for (int i = 0; i < LOOKUPS; i++) {
                                const elfsym *e;

                                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                                e = elfsyms_lookup(l, lo + x % span);
                                sink += e ? e->name : 0;
                                if (with_inline)
                                        sink += (uintptr_t) elfsyms_inlined(l, lo + x % span);
                        }
                        *(with_inline ? &t_both : &t_lookup) = now_ns() - t0;
                }
                {
                        char *enc;
                        size_t n;
                        static const char *const src[] = { "", ".symtab", ".dynsym", "debug", "none", "DWARF" };

                        if (elfsyms_encode(s, &enc, &n) < 0)
                                n = 0;
                        else
                                free(enc);
                        printf("%-44s %10lld %9zu %8zu %8s %8.1fus %8.2fms %8.2fms %8.1fns %8.1fns  (table %zu bytes)%s\n",
                               argv[a], (long long) size, s->n, s->n_inl, src[s->source], (double) median(t_id) / 1e3,
                               (double) median(t_read) / 1e6, (double) median(t_load) / 1e6,
                               s->n > 0 ? (double) t_lookup / LOOKUPS : 0.0, s->n > 0 ? (double) t_both / LOOKUPS : 0.0,
                               n, sink == 1 ? " " : "");
                }
                elfsyms_free(s);
                elfsyms_free(l);
        }
        {
                char cmd[64];

                snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
                if (system(cmd) != 0)
                        return 1;
        }
        return 0;
}
