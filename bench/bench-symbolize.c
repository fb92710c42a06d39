/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Symbolization throughput: kallsyms_lookup() over addresses inside real
 * code symbols of the running kernel (or of the 6.1 fixture when
 * /proc/kallsyms is unreadable or shows zeros), plus the parse time of the
 * whole table. Exits 1 if lookups are below the target rate. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fileio.h"
#include "kernel/kallsyms.h"
#include "macro.h"
#include "timeparse.h"

#define N_LOOKUPS 20000000ULL
#define N_ADDRS (1u << 20)              /* distinct precomputed addresses, cycled */
#define TARGET_LOOKUPS_PER_SEC 10e6
#define FIXTURE TEST_DATA_DIR "/kernel-6.1-brd/proc/kallsyms.loaded.gz"

static double now_sec(void) {
        return (double) clock_ns(CLOCK_MONOTONIC) / 1e9;
}

/* xorshift64*: fixed seed, so every run looks up the same addresses. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rng(void) {
        rng_state ^= rng_state >> 12;
        rng_state ^= rng_state << 25;
        rng_state ^= rng_state >> 27;
        return rng_state * 0x2545f4914f6cdd1dULL;
}

static int read_text(char **ret, size_t *ret_size, const char **ret_source) {
        char *buf = NULL;
        size_t size = 0, alloc = 0;
        kallsyms *probe = NULL;
        FILE *f;
        int r;

        r = read_full_file_at("/", "proc/kallsyms", 64u << 20, &buf, &size);
        if (r >= 0) {
                r = kallsyms_parse(buf, size, &probe);
                kallsyms_free(probe);
                if (r >= 0) {
                        *ret = buf;
                        *ret_size = size;
                        *ret_source = "/proc/kallsyms";
                        return 0;
                }
                fprintf(stderr, "/proc/kallsyms not usable (%s), using the fixture\n", strerror(-r));
                free(buf);
                buf = NULL;
                size = 0;
        }

        f = popen("gzip -dc '" FIXTURE "'", "r");
        if (!f)
                return -errno;
        for (;;) {
                size_t n;

                if (alloc - size < 65536) {
                        char *p;

                        alloc = alloc ? alloc * 2 : 1 << 20;
                        p = realloc(buf, alloc);
                        if (!p) {
                                free(buf);
                                pclose(f);
                                return -ENOMEM;
                        }
                        buf = p;
                }
                n = fread(buf + size, 1, alloc - size, f);
                if (n == 0)
                        break;
                size += n;
        }
        if (pclose(f) != 0 || size == 0) {
                free(buf);
                return -EIO;
        }
        *ret = buf;
        *ret_size = size;
        *ret_source = FIXTURE;
        return 0;
}

/* The textbook binary search over the same sorted addresses, for comparison. */
static size_t plain_last_le(const uint64_t *a, size_t n, uint64_t x) {
        size_t lo = 0, hi = n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (a[mid] <= x)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;      /* index + 1 of the last element <= x */
}

int main(void) {
        _cleanup_free_ char *text = NULL;
        _cleanup_free_ uint64_t *addrs = NULL, *sorted = NULL;
        _cleanup_free_ size_t *code = NULL;
        kallsyms *k = NULL;
        const char *source = NULL;
        size_t size = 0, n, n_code = 0, misses = 0, mismatches = 0;
        double t0, t1, best_parse = 1e9, secs, rate, plain_secs;
        uint64_t sum = 0;
        ksym s;
        int r;

        r = read_text(&text, &size, &source);
        if (r < 0) {
                fprintf(stderr, "Failed to read kallsyms: %s\n", strerror(-r));
                return 77;
        }

        /* Parse time: best of 5, the table of the last run is kept. */
        for (int i = 0; i < 5; i++) {
                kallsyms_free(k);
                k = NULL;
                t0 = now_sec();
                r = kallsyms_parse(text, size, &k);
                t1 = now_sec();
                if (r < 0) {
                        fprintf(stderr, "Failed to parse %s: %s\n", source, strerror(-r));
                        return 1;
                }
                best_parse = MIN(best_parse, t1 - t0);
        }
        n = kallsyms_count(k);
        printf("parse: %zu lines (%zu bytes) from %s in %.1f ms\n", n, size, source, best_parse * 1e3);

        code = malloc(n * sizeof(*code));
        sorted = malloc(n * sizeof(*sorted));
        addrs = malloc(N_ADDRS * sizeof(*addrs));
        if (!code || !sorted || !addrs)
                return 1;
        for (size_t i = 0; i < n; i++) {
                kallsyms_get(k, i, &s);
                sorted[i] = s.addr;
                if (s.type == 't' || s.type == 'T')
                        code[n_code++] = i;
        }
        if (n_code == 0) {
                fprintf(stderr, "No code symbols in %s\n", source);
                return 1;
        }
        for (size_t i = 0; i < N_ADDRS; i++) {
                kallsyms_get(k, code[rng() % n_code], &s);
                addrs[i] = s.addr + rng() % (s.end - s.addr);
        }

        /* Cross-check a sample against the plain search: the result must be
         * the greatest start <= addr. */
        for (size_t i = 0; i < 100000; i++) {
                size_t j = plain_last_le(sorted, n, addrs[i]);
                if (kallsyms_lookup(k, addrs[i], &s) < 0)
                        continue;
                if (j == 0 || s.addr != sorted[j - 1])
                        mismatches++;
        }

        t0 = now_sec();
        for (uint64_t i = 0; i < N_LOOKUPS; i++) {
                if (kallsyms_lookup(k, addrs[i & (N_ADDRS - 1)], &s) < 0)
                        misses++;
                else
                        sum += s.addr;
        }
        t1 = now_sec();
        secs = t1 - t0;
        rate = (double) N_LOOKUPS / secs;

        t0 = now_sec();
        for (uint64_t i = 0; i < N_LOOKUPS; i++)
                sum += plain_last_le(sorted, n, addrs[i & (N_ADDRS - 1)]);
        plain_secs = now_sec() - t0;

        printf("symbolize: %llu lookups in %.3f s = %.1f M lookups/s, table memory %zu bytes for %zu symbols\n",
               N_LOOKUPS, secs, rate / 1e6, kallsyms_memory_bytes(k), n);
        printf("  (plain binary search over the same addresses: %.1f M/s; %zu misses, %zu mismatches, checksum %" PRIx64 ")\n",
               (double) N_LOOKUPS / plain_secs / 1e6, misses, mismatches, sum);

        kallsyms_free(k);
        if (mismatches > 0) {
                printf("FAIL: lookups disagree with a plain binary search\n");
                return 1;
        }
        if (rate < TARGET_LOOKUPS_PER_SEC) {
                printf("FAIL: below the target of %.0f M lookups/s\n", TARGET_LOOKUPS_PER_SEC / 1e6);
                return 1;
        }
        printf("OK: target of %.0f M lookups/s met\n", TARGET_LOOKUPS_PER_SEC / 1e6);
        return 0;
}
