/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Test helper for the integration tests: loads real, JIT-compiled BPF
 * programs so that perfsnapd sees them come and go through
 * PERF_RECORD_KSYMBOL, and makes one of them run hot so that samples land in
 * its JIT image.
 *
 *   hot    one socket filter attached to a loopback UDP socket and run on
 *          every datagram of a flood, then unloaded;
 *   churn  many small programs loaded and unloaded back to back.
 *
 * Only libc and the kernel UAPI, so the tests need no libbpf. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/bpf.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define EXIT_SKIP 77                    /* the harness's "skipped" */

/* Share of all samples in the filter (perf record -a -g, 2 s, 2-CPU VM,
 * Linux 6.18, otherwise quiet): 43% at 8000 insns, 51% at 12000, 53-58% at
 * 16000, which loads in ~10 ms and still fits a 128 KiB optmem_max (see
 * optmem_max_bytes()). */
#define HOT_INSNS_DEFAULT 16000
#define CHURN_INSNS_DEFAULT 8
#define INSNS_MIN 2                     /* r0 = 0; exit */
#define INSNS_MAX 900000                /* below the kernel's 1M limit for privileged loads */
#define CHURN_COUNT_MAX 1000000
#define CHURN_PREFIX_DEFAULT "psnapch"
#define CHURN_DIGITS_MIN 4
#define SECONDS_MAX 86400.0
#define PAYLOAD_BYTES 16
#define VERIFIER_LOG_BYTES (64u << 10)
#define OPTMEM_MAX_PATH "/proc/sys/net/core/optmem_max"
#define OPTMEM_SLACK_BYTES 1024         /* struct bpf_prog and struct sk_filter around the insns */
#define UNLOAD_TIMEOUT_NS (10ULL * 1000000000ULL)

/* The project's common/macro.h is not on this helper's include path. */
#define _cleanup_(f) __attribute__((cleanup(f)))

static void freep(void *p) {
        free(*(void **) p);
}

static void fd_closep(int *fd) {
        if (*fd >= 0)
                close(*fd);
}

__attribute__((format(printf, 2, 3)))
static int fail_errno(int r, const char *fmt, ...) {
        va_list ap;

        fputs("bpf-prog: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, ": %s\n", strerror(r < 0 ? -r : r));
        return EXIT_FAILURE;
}

__attribute__((format(printf, 1, 2)))
static int fail(const char *fmt, ...) {
        va_list ap;

        fputs("bpf-prog: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        return EXIT_FAILURE;
}

static uint64_t now_ns(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

static int sys_bpf(enum bpf_cmd cmd, union bpf_attr *attr) {
        long r;

        r = syscall(__NR_bpf, cmd, attr, sizeof(*attr));
        if (r < 0)
                return errno > 0 ? -errno : -EIO;
        return (int) r;
}

/* The kernel's rule for prog_name (bpf_obj_name_cpy()): at most
 * BPF_OBJ_NAME_LEN - 1 characters out of [A-Za-z0-9_.]. */
static bool prog_name_valid(const char *name, size_t max_len) {
        size_t n = strlen(name);

        if (n == 0 || n > max_len)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char) name[i]) && name[i] != '_' && name[i] != '.')
                        return false;
        return true;
}

static struct bpf_insn insn_alu64_imm(uint8_t op, int32_t imm) {
        return (struct bpf_insn) {
                .code = BPF_ALU64 | op | BPF_K,
                .dst_reg = BPF_REG_0,
                .imm = imm,
        };
}

/* n_insns straight-line instructions: r0 = 1, then a dependency chain of
 * r0 += 1 / r0 ^= imm (each needs the previous result, so the CPU cannot
 * overlap them), then r0 = 0; exit. A socket filter returns the number of
 * bytes to keep, so 0 drops every packet after the filter ran. */
static struct bpf_insn *prog_build(uint32_t n_insns) {
        struct bpf_insn *insns;
        uint32_t i = 0;

        insns = calloc(n_insns, sizeof(*insns));
        if (!insns)
                return NULL;
        if (n_insns > INSNS_MIN)
                insns[i++] = insn_alu64_imm(BPF_MOV, 1);
        for (; i < n_insns - 2; i++)
                insns[i] = i % 2 ? insn_alu64_imm(BPF_ADD, 1)
                                 : insn_alu64_imm(BPF_XOR, (int32_t) ((i * 0x9e3779b9u) & 0x7fffffff));
        insns[i++] = insn_alu64_imm(BPF_MOV, 0);
        insns[i] = (struct bpf_insn) { .code = BPF_JMP | BPF_EXIT };
        return insns;
}

static int prog_load_once(const char *name, const struct bpf_insn *insns, uint32_t n_insns,
                          char *log, uint32_t log_size) {
        union bpf_attr attr = {
                .prog_type = BPF_PROG_TYPE_SOCKET_FILTER,
                .insn_cnt = n_insns,
                .insns = (uint64_t) (uintptr_t) insns,
                .license = (uint64_t) (uintptr_t) "GPL",
                .log_level = log ? 1 : 0,
                .log_size = log ? log_size : 0,
                .log_buf = (uint64_t) (uintptr_t) log,
        };

        memcpy(attr.prog_name, name, strlen(name));   /* checked to fit, rest stays 0 */
        return sys_bpf(BPF_PROG_LOAD, &attr);
}

/* Returns the program fd or a negative errno, having said why. A failed load
 * is retried once with a verifier log, which is printed; the log rotates, so
 * what fits is its end, where the verifier says what it rejected. */
static int prog_load(const char *name, const struct bpf_insn *insns, uint32_t n_insns) {
        _cleanup_(freep) char *log = NULL;
        int fd, r;

        fd = prog_load_once(name, insns, n_insns, NULL, 0);
        if (fd >= 0)
                return fd;
        fail_errno(fd, "loading BPF program '%s' (%" PRIu32 " insns)", name, n_insns);
        if (fd == -EPERM || fd == -ENOSYS)
                return fd;      /* not the verifier's business */

        log = calloc(1, VERIFIER_LOG_BYTES);
        if (!log)
                return fd;
        r = prog_load_once(name, insns, n_insns, log, VERIFIER_LOG_BYTES);
        if (r >= 0)
                close(r);       /* passed the second time: still report the first failure */
        if (log[0])
                fprintf(stderr, "bpf-prog: verifier log:\n%s%s", log,
                        log[strlen(log) - 1] == '\n' ? "" : "\n");
        else
                fprintf(stderr, "bpf-prog: the verifier log is empty (retry: %s)\n",
                        r >= 0 ? "loaded" : strerror(-r));
        return fd;
}

/* Exit status for a failed first load: 77 when this kernel or this process
 * may not load BPF at all, so the test is skipped rather than failed. */
static int load_failed_status(int r) {
        if (r == -EPERM) {
                fprintf(stderr, "bpf-prog: skipping: this process may not load BPF programs; run it as root "
                        "(kernel.unprivileged_bpf_disabled or an LSM can forbid it even then)\n");
                return EXIT_SKIP;
        }
        if (r == -ENOSYS) {
                fprintf(stderr, "bpf-prog: skipping: this kernel has no bpf() system call (CONFIG_BPF_SYSCALL)\n");
                return EXIT_SKIP;
        }
        return EXIT_FAILURE;
}

static int prog_get_info(int fd, struct bpf_prog_info *ret) {
        struct bpf_prog_info info = {};
        union bpf_attr attr = {
                .info.bpf_fd = (uint32_t) fd,
                .info.info_len = sizeof(info),
                .info.info = (uint64_t) (uintptr_t) &info,
        };
        int r;

        r = sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &attr);
        if (r < 0)
                return r;
        *ret = info;
        return 0;
}

/* A program without a JIT image has no ksym and no PERF_RECORD_KSYMBOL, which
 * is all these tests are about. */
static int prog_check_jited(int fd, const char *name, struct bpf_prog_info *ret) {
        struct bpf_prog_info info;
        int r;

        r = prog_get_info(fd, &info);
        if (r < 0)
                return fail_errno(r, "BPF_OBJ_GET_INFO_BY_FD for '%s'", name);
        if (info.jited_prog_len == 0)
                return fail("program '%s' (id %" PRIu32 ") was not JIT-compiled (jited_prog_len = 0): "
                            "set net.core.bpf_jit_enable = 1", name, info.id);
        if (strncmp(info.name, name, sizeof(info.name)) != 0)
                return fail("kernel reports program name '%.*s' for '%s'",
                            (int) sizeof(info.name), info.name, name);
        if (ret)
                *ret = info;
        return 0;
}

/* Whether the program id is still in the kernel's table. The id goes when the
 * last reference does, right after the kernel emitted the unregistering
 * PERF_RECORD_KSYMBOL and right before it removes the ksym. */
static int prog_id_exists(uint32_t id) {
        union bpf_attr attr = { .start_id = id - 1 };
        int r;

        r = sys_bpf(BPF_PROG_GET_NEXT_ID, &attr);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        return attr.next_id == id;
}

/* A socket's filter is released after an RCU grace period, so closing both
 * descriptors does not mean the program is gone yet: wait for it. */
static int prog_wait_unloaded(uint32_t id) {
        uint64_t deadline = now_ns() + UNLOAD_TIMEOUT_NS;

        for (;;) {
                int r = prog_id_exists(id);

                if (r < 0)
                        return fail_errno(r, "BPF_PROG_GET_NEXT_ID");
                if (r == 0)
                        return 0;
                if (now_ns() >= deadline)
                        return fail("program id %" PRIu32 " still loaded %llu s after closing it",
                                    id, UNLOAD_TIMEOUT_NS / 1000000000ULL);
                nanosleep(&(struct timespec) { .tv_nsec = 1000000 }, NULL);
        }
}

/* An attached filter is charged to the socket's option memory
 * (sk_filter_charge()): about 8 bytes an instruction, which must stay below
 * net.core.optmem_max (128 KiB on current kernels, 20 KiB on older ones) or
 * SO_ATTACH_BPF fails with ENOMEM. */
static int optmem_max_bytes(uint64_t *ret) {
        unsigned long long v;
        FILE *f;
        int n;

        f = fopen(OPTMEM_MAX_PATH, "re");
        if (!f)
                return -errno;
        n = fscanf(f, "%llu", &v);
        fclose(f);
        if (n != 1)
                return -EINVAL;
        *ret = v;
        return 0;
}

static uint32_t insns_fitting_optmem(uint64_t optmem_bytes) {
        uint64_t n;

        if (optmem_bytes <= OPTMEM_SLACK_BYTES)
                return INSNS_MIN;
        n = (optmem_bytes - OPTMEM_SLACK_BYTES) / sizeof(struct bpf_insn);
        return n < INSNS_MIN ? INSNS_MIN : n > INSNS_MAX ? INSNS_MAX : (uint32_t) n;
}

static int parse_u32(const char *opt, const char *s, uint32_t min, uint32_t max, uint32_t *ret) {
        unsigned long long v;
        char *end;

        errno = 0;
        v = strtoull(s, &end, 10);
        if (!isdigit((unsigned char) s[0]) || *end || errno != 0 || v < min || v > max)
                return fail("invalid %s '%s': expected a whole number %" PRIu32 "..%" PRIu32,
                            opt, s, min, max);
        *ret = (uint32_t) v;
        return 0;
}

static int parse_seconds(const char *s, double *ret) {
        double v;
        char *end;

        errno = 0;
        v = strtod(s, &end);
        /* Written so that NaN fails too. */
        if (!s[0] || *end || errno != 0 || !(v >= 0 && v <= SECONDS_MAX))
                return fail("invalid --seconds '%s': expected a number of seconds 0..%.0f, e.g. 0.5",
                            s, SECONDS_MAX);
        *ret = v;
        return 0;
}

static void help(void) {
        printf("Usage: bpf-prog hot --name NAME --seconds S [--insns I]\n"
               "       bpf-prog churn --count N [--prefix P] [--insns I]\n"
               "       bpf-prog --help\n"
               "\n"
               "Loads real, JIT-compiled BPF socket filters for perfsnapd's integration\n"
               "tests. Needs root (exits 77 if bpf() is not permitted or missing).\n"
               "\n"
               "hot: loads one socket filter named NAME (1..%d characters out of\n"
               "  [A-Za-z0-9_.]) of I straight-line ALU instructions that drops every\n"
               "  packet, attaches it to a UDP socket on 127.0.0.1 and floods that socket\n"
               "  with %d-byte datagrams for S seconds (fractions allowed). I is %d..%d,\n"
               "  but the attached filter, about 8 bytes an instruction, must fit\n"
               "  net.core.optmem_max; default %d, less if optmem_max is below %d bytes.\n"
               "  Before the flood it prints and flushes\n"
               "    id=<prog id> tag=<16 hex digits> name=<NAME> ksym=bpf_prog_<tag>_<NAME>\n"
               "  then closes the socket and the program, waits until the kernel has\n"
               "  dropped the program (at most %llu s) and prints\n"
               "    sent=<datagrams sent> unloaded\n"
               "\n"
               "churn: N times (1..%d) loads a socket filter of I instructions (default\n"
               "  %d) named P plus the iteration number zero-padded to %d digits, more\n"
               "  if N needs them (P default %s, so %s0000, %s0001, ...;\n"
               "  the name must fit %d characters) and closes it. Fails unless the\n"
               "  first one was JIT-compiled. Prints\n"
               "    loaded=<N> seconds=<wall time of all loads and closes>\n"
               "\n"
               "Errors go to stderr as 'bpf-prog: <what>: <error>', with the verifier log\n"
               "when a load fails; the exit status is then 1.\n",
               BPF_OBJ_NAME_LEN - 1,
               PAYLOAD_BYTES, INSNS_MIN, INSNS_MAX, HOT_INSNS_DEFAULT,
               HOT_INSNS_DEFAULT * (int) sizeof(struct bpf_insn) + OPTMEM_SLACK_BYTES,
               UNLOAD_TIMEOUT_NS / 1000000000ULL,
               CHURN_COUNT_MAX, CHURN_INSNS_DEFAULT, CHURN_DIGITS_MIN,
               CHURN_PREFIX_DEFAULT, CHURN_PREFIX_DEFAULT, CHURN_PREFIX_DEFAULT,
               BPF_OBJ_NAME_LEN - 1);
}

enum {
        ARG_NAME = 0x100,
        ARG_SECONDS,
        ARG_INSNS,
        ARG_COUNT,
        ARG_PREFIX,
};

typedef struct Args {
        const char *name;
        double seconds;
        bool have_seconds;
        uint32_t insns;
        uint32_t count;
        const char *prefix;
} Args;

/* Options of both commands; each command checks that it got what it needs. */
static int parse_args(int argc, char **argv, const char *command, Args *a) {
        static const struct option options[] = {
                { "name",    required_argument, NULL, ARG_NAME },
                { "seconds", required_argument, NULL, ARG_SECONDS },
                { "insns",   required_argument, NULL, ARG_INSNS },
                { "count",   required_argument, NULL, ARG_COUNT },
                { "prefix",  required_argument, NULL, ARG_PREFIX },
                { "help",    no_argument,       NULL, 'h' },
                {}
        };
        int c, r;

        opterr = 0;
        while ((c = getopt_long(argc, argv, ":h", options, NULL)) >= 0)
                switch (c) {
                case ARG_NAME:
                        a->name = optarg;
                        break;
                case ARG_SECONDS:
                        r = parse_seconds(optarg, &a->seconds);
                        if (r != 0)
                                return r;
                        a->have_seconds = true;
                        break;
                case ARG_INSNS:
                        r = parse_u32("--insns", optarg, INSNS_MIN, INSNS_MAX, &a->insns);
                        if (r != 0)
                                return r;
                        break;
                case ARG_COUNT:
                        r = parse_u32("--count", optarg, 1, CHURN_COUNT_MAX, &a->count);
                        if (r != 0)
                                return r;
                        break;
                case ARG_PREFIX:
                        a->prefix = optarg;
                        break;
                case 'h':
                        help();
                        exit(EXIT_SUCCESS);
                case ':':
                        return fail("option '%s' needs an argument (see 'bpf-prog --help')", argv[optind - 1]);
                default:
                        return fail("unknown option '%s' for %s (see 'bpf-prog --help')", argv[optind - 1], command);
                }
        if (optind < argc)
                return fail("unexpected argument '%s' (see 'bpf-prog --help')", argv[optind]);
        return 0;
}

static int udp_socket_loopback(struct sockaddr_in *ret_addr) {
        struct sockaddr_in addr = {
                .sin_family = AF_INET,
                .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
        };
        socklen_t len = sizeof(addr);
        int fd;

        fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (bind(fd, (struct sockaddr *) &addr, sizeof(addr)) < 0 ||
            getsockname(fd, (struct sockaddr *) &addr, &len) < 0) {
                int r = -errno;

                close(fd);
                return r;
        }
        *ret_addr = addr;
        return fd;
}

static int run_hot(int argc, char **argv) {
        _cleanup_(freep) struct bpf_insn *insns = NULL;
        _cleanup_(fd_closep) int prog_fd = -1, rx = -1, tx = -1;
        Args a = {};
        static const char payload[PAYLOAD_BYTES] = "perfsnapd-bpf";
        struct bpf_prog_info info;
        struct sockaddr_in addr;
        uint64_t sent = 0, deadline_ns, optmem_bytes = 0;
        char tag[2 * BPF_TAG_SIZE + 1];
        int r;

        r = parse_args(argc, argv, "hot", &a);
        if (r != 0)
                return r;
        if (a.count > 0 || a.prefix)
                return fail("--count and --prefix are options of churn, not hot");
        if (!a.name || !a.have_seconds)
                return fail("hot needs --name NAME and --seconds S (see 'bpf-prog --help')");
        if (!prog_name_valid(a.name, BPF_OBJ_NAME_LEN - 1))
                return fail("invalid --name '%s': the kernel takes 1..%d characters out of [A-Za-z0-9_.]",
                            a.name, BPF_OBJ_NAME_LEN - 1);
        (void) optmem_max_bytes(&optmem_bytes);        /* stays 0 if unreadable */
        if (a.insns == 0) {
                /* The default shrinks to what this kernel lets a socket attach. */
                a.insns = HOT_INSNS_DEFAULT;
                if (optmem_bytes > 0 && insns_fitting_optmem(optmem_bytes) < a.insns)
                        a.insns = insns_fitting_optmem(optmem_bytes);
        }

        insns = prog_build(a.insns);
        if (!insns)
                return fail_errno(-ENOMEM, "building %" PRIu32 " instructions", a.insns);
        prog_fd = prog_load(a.name, insns, a.insns);
        if (prog_fd < 0)
                return load_failed_status(prog_fd);
        r = prog_check_jited(prog_fd, a.name, &info);
        if (r != 0)
                return r;
        for (size_t i = 0; i < BPF_TAG_SIZE; i++)
                snprintf(tag + 2 * i, 3, "%02x", info.tag[i]);

        rx = udp_socket_loopback(&addr);
        if (rx < 0)
                return fail_errno(rx, "UDP socket on 127.0.0.1");
        if (setsockopt(rx, SOL_SOCKET, SO_ATTACH_BPF, &prog_fd, sizeof(prog_fd)) < 0) {
                r = -errno;
                fail_errno(r, "SO_ATTACH_BPF of '%s' (%" PRIu32 " insns)", a.name, a.insns);
                if (r == -ENOMEM && optmem_bytes > 0)
                        fprintf(stderr, "bpf-prog: the filter takes about %zu bytes of socket option memory, "
                                "%s is %" PRIu64 ": use --insns %" PRIu32 " or less\n",
                                (size_t) a.insns * sizeof(struct bpf_insn), OPTMEM_MAX_PATH,
                                optmem_bytes, insns_fitting_optmem(optmem_bytes));
                return EXIT_FAILURE;
        }
        tx = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (tx < 0)
                return fail_errno(-errno, "sending UDP socket");
        if (connect(tx, (struct sockaddr *) &addr, sizeof(addr)) < 0)
                return fail_errno(-errno, "connecting to 127.0.0.1:%u", ntohs(addr.sin_port));

        printf("id=%" PRIu32 " tag=%s name=%s ksym=bpf_prog_%s_%s\n", info.id, tag, a.name, tag, a.name);
        if (fflush(stdout) != 0)
                return fail_errno(-errno, "writing to stdout");

        /* On loopback the receive path, and with it the filter, mostly runs
         * in the sender's own softirq; the filter drops every datagram, so
         * the receive queue never fills. */
        deadline_ns = now_ns() + (uint64_t) (a.seconds * 1e9);
        while (now_ns() < deadline_ns) {
                if (send(tx, payload, sizeof(payload), 0) < 0) {
                        if (errno == EINTR || errno == EAGAIN || errno == ENOBUFS)
                                continue;
                        return fail_errno(-errno, "sending to 127.0.0.1:%u", ntohs(addr.sin_port));
                }
                sent++;
        }

        close(tx);
        tx = -1;
        close(rx);
        rx = -1;
        close(prog_fd);
        prog_fd = -1;
        r = prog_wait_unloaded(info.id);
        if (r != 0)
                return r;

        printf("sent=%" PRIu64 " unloaded\n", sent);
        if (fflush(stdout) != 0)
                return fail_errno(-errno, "writing to stdout");
        return EXIT_SUCCESS;
}

static int run_churn(int argc, char **argv) {
        _cleanup_(freep) struct bpf_insn *insns = NULL;
        Args a = { .insns = CHURN_INSNS_DEFAULT, .prefix = CHURN_PREFIX_DEFAULT };
        char name[BPF_OBJ_NAME_LEN];
        uint64_t start_ns, elapsed_ns;
        size_t digits;
        int r;

        r = parse_args(argc, argv, "churn", &a);
        if (r != 0)
                return r;
        if (a.name || a.have_seconds)
                return fail("--name and --seconds are options of hot, not churn");
        if (a.count == 0)
                return fail("churn needs --count N (see 'bpf-prog --help')");

        /* Zero-padded to 4 digits, wider when the count needs it. */
        digits = (size_t) snprintf(NULL, 0, "%" PRIu32, a.count - 1);
        if (digits < CHURN_DIGITS_MIN)
                digits = CHURN_DIGITS_MIN;
        if (!prog_name_valid(a.prefix, BPF_OBJ_NAME_LEN - 1 - digits))
                return fail("invalid --prefix '%s': the kernel takes names of 1..%d characters out of "
                            "[A-Za-z0-9_.] and %zu go to the iteration number, so 1..%zu for the prefix",
                            a.prefix, BPF_OBJ_NAME_LEN - 1, digits, BPF_OBJ_NAME_LEN - 1 - digits);

        insns = prog_build(a.insns);
        if (!insns)
                return fail_errno(-ENOMEM, "building %" PRIu32 " instructions", a.insns);

        start_ns = now_ns();
        for (uint32_t i = 0; i < a.count; i++) {
                int fd;

                snprintf(name, sizeof(name), "%s%0*" PRIu32, a.prefix, (int) digits, i);
                fd = prog_load(name, insns, a.insns);
                if (fd < 0)
                        return i == 0 ? load_failed_status(fd) : EXIT_FAILURE;
                if (i == 0) {
                        r = prog_check_jited(fd, name, NULL);
                        if (r != 0) {
                                close(fd);
                                return r;
                        }
                }
                close(fd);
        }
        elapsed_ns = now_ns() - start_ns;

        printf("loaded=%" PRIu32 " seconds=%.3f\n", a.count, (double) elapsed_ns / 1e9);
        if (fflush(stdout) != 0)
                return fail_errno(-errno, "writing to stdout");
        return EXIT_SUCCESS;
}

int main(int argc, char **argv) {
        if (argc < 2)
                return fail("missing command: hot or churn (see 'bpf-prog --help')");
        if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
                help();
                return EXIT_SUCCESS;
        }
        /* The command is argv[0] of its own option parsing. */
        if (strcmp(argv[1], "hot") == 0)
                return run_hot(argc - 1, argv + 1);
        if (strcmp(argv[1], "churn") == 0)
                return run_churn(argc - 1, argv + 1);
        return fail("unknown command '%s': expected hot or churn (see 'bpf-prog --help')", argv[1]);
}
