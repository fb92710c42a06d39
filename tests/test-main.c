/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <errno.h>
#include <sys/resource.h>
#include <unistd.h>

#include "test.h"

test_case test_cases_[256];
size_t n_test_cases_;
int test_skipped_;

void test_register_(const char *name, void (*func)(void)) {
        if (n_test_cases_ >= sizeof(test_cases_) / sizeof(test_cases_[0]))
                abort();
        test_cases_[n_test_cases_++] = (test_case) { name, func };
}

int test_limit_address_space(size_t spare) {
        size_t pages = 0;
        struct rlimit rl;
        FILE *f = fopen("/proc/self/statm", "re");
        int ok;

        if (!f)
                return -errno;
        ok = fscanf(f, "%zu", &pages) == 1;
        fclose(f);
        if (!ok)
                return -EIO;
        rl.rlim_cur = rl.rlim_max = pages * (size_t) sysconf(_SC_PAGESIZE) + spare;
        return setrlimit(RLIMIT_AS, &rl) < 0 ? -errno : 0;
}

int main(int argc, char **argv) {
        size_t ran = 0, skipped = 0;

        for (size_t i = 0; i < n_test_cases_; i++) {
                if (argc > 1 && strcmp(argv[1], test_cases_[i].name) != 0)
                        continue;
                test_skipped_ = 0;
                fprintf(stderr, "== %s\n", test_cases_[i].name);
                test_cases_[i].func();
                ran++;
                if (test_skipped_)
                        skipped++;
        }
        fprintf(stderr, "%zu tests, %zu skipped\n", ran, skipped);
        if (ran == 0)
                return argc > 1 ? 1 : EXIT_TEST_SKIP;
        return skipped == ran ? EXIT_TEST_SKIP : 0;
}
