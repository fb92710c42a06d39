/* SPDX-License-Identifier: GPL-2.0-or-later */
/* perfsnapctl export: a time window of the history as a file other tools
 * read: pprof, an SVG or interactive HTML flame graph, or folded stacks.
 * The daemon answers one Query with whole stacks (at most its
 * query_max_stacks, the most frequent); the writers (export.h) turn that
 * answer into the format. */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "export.h"
#include "perfsnapctl.h"
#include "timeparse.h"
#include "wire/protocol.h"
#include "wire/query-json.h"

#define DEFAULT_SINCE "5m"
/* Slots of the HTML page's time strip: at most this many, and none
 * shorter than a second (the finest blocks the store keeps). */
#define HTML_TIMELINE_SLOTS 400

DEFINE_TRIVIAL_CLEANUP_FUNC(query_result *, query_result_free)

typedef enum export_format {
        EXPORT_PPROF,
        EXPORT_SVG,
        EXPORT_HTML,
        EXPORT_FOLDED,
        EXPORT_SPEEDSCOPE,
        EXPORT_PERF,
} export_format;

static const struct {
        const char *name, *suffix;
} formats[] = {
        [EXPORT_PPROF] = { "pprof", ".pb.gz" },
        [EXPORT_SVG] = { "svg", ".svg" },
        [EXPORT_HTML] = { "html", ".html" },
        [EXPORT_FOLDED] = { "folded", ".folded" },
        [EXPORT_SPEEDSCOPE] = { "speedscope", ".speedscope.json" },
        [EXPORT_PERF] = { "perf.data", "perf.data" },
};

static int format_from_name(const char *s) {
        for (size_t i = 0; i < ELEMENTSOF(formats); i++)
                if (strcmp(s, formats[i].name) == 0)
                        return (int) i;
        return -1;
}

/* The format a file name implies, or -1. */
static int format_from_path(const char *path) {
        size_t len = strlen(path);

        for (size_t i = 0; i < ELEMENTSOF(formats); i++) {
                size_t n = strlen(formats[i].suffix);

                if (len >= n && strcmp(path + len - n, formats[i].suffix) == 0)
                        return (int) i;
        }
        if (len > 6 && strcmp(path + len - 6, ".pprof") == 0)
                return EXPORT_PPROF;
        return -1;
}

static void help_export(void) {
        printf("Usage: perfsnapctl [--socket PATH] export [OPTIONS] -o FILE\n"
               "\n"
               "Write the samples of a time range as a file other tools read.\n"
               "\n"
               "Formats:\n"
               "  pprof   gzip-compressed profile.proto: go tool pprof, Pyroscope, Parca, Grafana.\n"
               "          A sample per (command, pid, CPU, stack) with values samples/count and\n"
               "          cpu/nanoseconds, labels comm, pid, cpu and context (kernel or user),\n"
               "          mappings with build-ids; the command is the outermost frame\n"
               "  svg     a static flame graph (kernel frames orange, user frames blue)\n"
               "  html    one self-contained page: an interactive flame graph (click to zoom,\n"
               "          search, tooltips) and a strip of samples over time; drag across the\n"
               "          strip to redraw the graph for that span\n"
               "  folded  folded stacks, one line each (flamegraph.pl, speedscope, inferno)\n"
               "  speedscope  speedscope's JSON file format (https://www.speedscope.app)\n"
               "  perf.data  for perf report -i and perf script -i: samples with call chains,\n"
               "          pids, CPUs and times (to the second), the kernel's and user files'\n"
               "          mappings and build-ids (a file, not standard output)\n"
               "\n"
               "Options:\n"
               "  -o, --output FILE    write to FILE ('-': standard output)\n"
               "      --format FORMAT  pprof, perf.data, svg, html, folded or speedscope (default:\n"
               "                       from the name of FILE: .pb.gz or .pprof, perf.data, .svg,\n"
               "                       .html, .folded, .speedscope.json)\n"
               "      --title TEXT     title of a flame graph (default: the host and the range)\n"
               "      --with-kcore, --no-kcore\n"
               "                       perf.data: FILE is a directory in perf record --kcore's\n"
               "                       layout, with the kcore snapshot the window's samples were\n"
               "                       taken in (default: when there is one; needs root)\n"
               "      --since TIME     start of the range (default: %s, i.e. 5 minutes ago)\n"
               "      --until TIME     end of the range, exclusive (default: now)\n"
               "      --pid PID        only samples of this process id\n"
               "      --comm NAME      only samples of tasks with this command name (exact)\n"
               "      --cpu N          only samples taken on CPU N\n"
               "      --dso NAME       only stacks through this module (path, file name, or kernel\n"
               "                       module name)\n"
               "      --unit GLOB      only samples of tasks in a systemd unit matching GLOB, or\n"
               "                       below one\n"
               "      --cgroup PATH    only samples of tasks in cgroup PATH or below it\n"
               "      --container ID   only samples of tasks in a container whose id starts with ID\n"
               "      --type TYPE      cpu (default) or offcpu: time threads waited off the CPU\n"
               "                       (offcpu = on), weighed in nanoseconds; not for perf.data\n"
               "      --kernel-only    only the kernel part of each stack\n"
               "      --user-only      only the user part of each stack\n"
               "      --inline         also the functions inlined where a user frame is, as frames\n"
               "      --socket PATH    connect to PATH instead of the default socket\n"
               "  -h, --help           show this help\n"
               "\n"
               "TIME is as for 'perfsnapctl query' (30s, 5m, 2h, \"2026-11-21 14:00\", @1763733600).\n"
               "The daemon sends at most its query_max_stacks most frequent stacks\n"
               "(perfsnapd.conf(5)); the samples of the others are a frame \"[other stacks]\"\n"
               "under their command, and export says how many on standard error.\n"
               "\n"
               "Examples:\n"
               "  perfsnapctl export --since 10m -o cpu.html && xdg-open cpu.html\n"
               "  perfsnapctl export --since 1h -o cpu.pb.gz && go tool pprof -top cpu.pb.gz\n"
               "  perfsnapctl export --since 1h --comm postgres -o pg.svg\n",
               DEFAULT_SINCE);
}

static void default_title(const export_input *in, char *buf, size_t size) {
        char host[256] = "", a[TIME_FORMAT_MAX], b[TIME_FORMAT_MAX];

        if (gethostname(host, sizeof host - 1) < 0)
                host[0] = 0;
        snprintf(buf, size, "CPU on %s, %s .. %s", host[0] ? host : "this machine",
                 time_format_local_decimals(in->since_ns, 0, a, sizeof a) ?: "?",
                 time_format_local_decimals(in->until_ns, 0, b, sizeof b) ?: "?");
}

/* Copies src (the daemon's snapshot file) to name in dfd, created 0600:
 * a kcore and a kallsyms with real addresses are root's to read, wherever
 * the copy goes. A missing source is fine (a snapshot without kcore). */
static int copy_file(const char *src, int dfd, const char *name) {
        _cleanup_close_ int in = open(src, O_RDONLY | O_CLOEXEC | O_NOCTTY), out = -1;
        char buf[1 << 16];
        ssize_t n;

        if (in < 0)
                return errno == ENOENT ? 0 : -errno;
        out = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW, 0600);
        if (out < 0)
                return -errno;
        while ((n = read(in, buf, sizeof buf)) != 0) {
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                for (ssize_t w = 0; w < n;) {
                        ssize_t k = write(out, buf + w, (size_t) (n - w));

                        if (k < 0) {
                                if (errno == EINTR)
                                        continue;
                                return -errno;
                        }
                        w += k;
                }
        }
        return close(TAKE_FD(out)) < 0 ? -errno : 0;
}

/* A directory of ours: made 0700 (mode 0700 whatever the umask: what
 * goes in it is root's), or one that exists, is not a link and is the
 * caller's. An fd, or the exit status after printing the error. */
static int own_dir(int at, const char *path, const char *shown) {
        struct stat st;
        int fd;

        if (mkdirat(at, path, 0700) < 0 && errno != EEXIST)
                return -print_error("cannot create the directory '%s': %s", shown, strerror(errno));
        fd = openat(at, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -print_error("'%s' is not a directory of its own (%s): a perf.data with its kcore is one "
                                    "(or give --no-kcore)", shown, strerror(errno));
        if (fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 0022)) {
                close(fd);
                return -print_error("'%s' is not the caller's, or others may write to it: not writing the kernel's "
                                    "snapshot into it", shown);
        }
        return fd;
}

/* perf record --kcore's layout: DIR/data and DIR/kcore_dir/{kcore,
 * kallsyms, modules}, copied from the snapshot, private to the caller.
 * *ret_fd: DIR/data, opened for writing. */
static int make_kcore_dir(const char *dir, const char *snapshot, int *ret_fd) {
        static const char *const files[] = { "kcore", "kallsyms", "modules" };
        _cleanup_close_ int dfd = -1, kfd = -1;
        char src[4096];
        int r;

        dfd = own_dir(AT_FDCWD, dir, dir);
        if (dfd < 0)
                return -dfd;
        kfd = own_dir(dfd, "kcore_dir", "kcore_dir");
        if (kfd < 0)
                return -kfd;
        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                snprintf(src, sizeof src, "%s/%s", snapshot, files[i]);
                r = copy_file(src, kfd, files[i]);
                if (r < 0)
                        return print_error("cannot copy the kcore snapshot's %s (%s) into '%s/kcore_dir': %s%s",
                                           files[i], src, dir, strerror(-r),
                                           r == -EACCES ? " (the snapshots are root's: run as root, or give --no-kcore)"
                                                        : "");
        }
        *ret_fd = openat(dfd, "data", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW, 0600);
        if (*ret_fd < 0)
                return print_error("cannot create '%s/data': %s", dir, strerror(errno));
        return 0;
}

/* Seconds in [since, until), at least 1 and at most max: timeline slots
 * none shorter than a second (the finest blocks the store keeps). */
static uint32_t seconds_of(uint64_t since_ns, uint64_t until_ns, uint32_t max) {
        return (uint32_t) MAX(UINT64_C(1), MIN((uint64_t) max, (until_ns - since_ns) / UINT64_C(1000000000)));
}

/* perf.data, streamed: first what the whole window needs (the kernel, the
 * snapshot), then the window in parts (export_perf_part()), each part's
 * answer written and freed before the next is asked for, so that neither
 * side holds more than one part's stacks (at most query_max_stacks). */
#define PERF_CHUNK_NS (60 * UINT64_C(1000000000))

/* One part of the window into w: asked for whole; if the answer has
 * stacks beyond query_max_stacks ("[other stacks]", without addresses),
 * asked for again in parts of a sixth (whole seconds, at least one), so
 * that a busy stretch costs more calls, not samples. Parts end on whole
 * seconds: the store counts a second's block in a window if the window
 * overlaps it, so a part's end must not cut one in two. -ECANCELED when
 * the error was printed. */
static query_params perf_part_params(const query_params *base, uint64_t since_ns, uint64_t until_ns) {
        query_params q = *base;

        q.since_ns = since_ns;
        q.until_ns = until_ns;
        q.want_stacks = q.by_pid = q.by_cpu = q.want_modules = q.raw = q.shapes = q.by_cgroup = true;
        q.packed = q.inlined = false;
        q.top = 1;      /* with shapes there are no rows */
        q.timeline = seconds_of(since_ns, until_ns, QUERY_TIMELINE_MAX);
        /* Threads too (parts are at most a minute: slots fit by_tid's 128). */
        q.by_tid = q.timeline <= 128;
        return q;
}

static int export_perf_part(perf_writer *w, const query_params *base, uint64_t since_ns, uint64_t until_ns);

/* Writes the answer for [since_ns, until_ns), or asks again in parts if it
 * has "[other stacks]"; frees part. */
static int export_perf_answer(perf_writer *w, const query_params *base, uint64_t since_ns, uint64_t until_ns,
                              query_result *part) {
        const uint64_t sec = UINT64_C(1000000000);
        bool others = false;
        int r;

        for (size_t i = 0; i < part->n_stacks && !others; i++)
                others = query_stack_is_other(&part->stacks[i]);
        if (others && until_ns - since_ns > sec) {
                uint64_t step = MAX(sec, (until_ns - since_ns) / 6 / sec * sec);

                query_result_free(part);
                r = 0;
                for (uint64_t t = since_ns; r >= 0 && t < until_ns;) {
                        uint64_t end = MIN((t / step + 1) * step, until_ns);

                        r = export_perf_part(w, base, t, end);
                        t = end;
                }
                return r;
        }
        r = perf_writer_add(w, part, since_ns, until_ns);
        query_result_free(part);
        return r;
}

static int export_perf_part(perf_writer *w, const query_params *base, uint64_t since_ns, uint64_t until_ns) {
        query_params q = perf_part_params(base, since_ns, until_ns);
        query_result *part = NULL;

        if (query_fetch(&q, &part) != 0)
                return -ECANCELED;
        return export_perf_answer(w, base, since_ns, until_ns, part);
}

/* The window a minute at a time, ending on whole minutes. The next
 * minutes are asked for before this one's answer is read, so that the
 * daemon works on them while this one is written: PERF_AHEAD calls in
 * flight at most (each its own connection), for root; other users' calls
 * count against their max_queries_per_user (perfsnapd.conf(5)), which
 * may be 1 and which their other queries need too: one at a time. */
#define PERF_AHEAD 2

typedef struct perf_call {
        daemon_pending call;
        uint64_t since_ns, until_ns;
} perf_call;

static int export_perf_minutes(perf_writer *w, const query_params *base) {
        perf_call ring[PERF_AHEAD] = {};
        size_t head = 0, n = 0, ahead = geteuid() == 0 ? PERF_AHEAD : 1;
        uint64_t t = base->since_ns;
        int r = 0;

        for (;;) {
                /* Fill the ring, then take its oldest. */
                while (n < ahead && t < base->until_ns) {
                        perf_call *c = &ring[(head + n) % PERF_AHEAD];
                        query_params q;

                        c->since_ns = t;
                        c->until_ns = t = MIN((t / PERF_CHUNK_NS + 1) * PERF_CHUNK_NS, base->until_ns);
                        q = perf_part_params(base, c->since_ns, c->until_ns);
                        if (query_fetch_send(&q, &c->call) != 0) {
                                r = -ECANCELED;
                                break;
                        }
                        n++;
                }
                if (r < 0 || n == 0)
                        break;

                perf_call *c = &ring[head];
                query_result *part = NULL;

                head = (head + 1) % PERF_AHEAD;
                n--;
                r = query_fetch_receive(&c->call, &part) != 0 ? -ECANCELED
                                                               : export_perf_answer(w, base, c->since_ns, c->until_ns, part);
                if (r < 0)
                        break;
        }
        for (; n > 0; n--, head = (head + 1) % PERF_AHEAD)
                daemon_call_abandon(&ring[head].call);
        return r;
}

/* The BPF programs and out-of-line code of the window, from the daemon's
 * Ksyms history, as KSYMBOL records: perf names the samples in them. A
 * daemon that cannot answer leaves them out (the samples stay addresses). */
static int put_ksymbols(perf_writer *w, uint64_t since_ns, uint64_t until_ns) {
        _cleanup_(json_object_putp) struct json_object *params = json_object_new_object(), *answer = NULL;
        struct json_object *ksyms;
        int r;

        if (!params || json_object_object_add(params, "since_ns", json_object_new_uint64(since_ns)) < 0)
                return -ENOMEM;
        if (daemon_call(PERFSNAP_METHOD_KSYMS, params, false, &answer) != 0)
                return 0;       /* said; the export goes on */
        if (!json_object_object_get_ex(answer, "ksyms", &ksyms) || !json_object_is_type(ksyms, json_type_array))
                return 0;
        for (size_t i = 0; i < json_object_array_length(ksyms); i++) {
                struct json_object *k = json_object_array_get_idx(ksyms, i), *v;
                const char *name = json_string_member(k, "name"), *addr = json_string_member(k, "addr");
                const char *type = json_string_member(k, "type");
                int64_t len = json_int_member(k, "len", 0), reg = json_int_member(k, "registered_ns", 0);
                int64_t unreg = json_object_object_get_ex(k, "unregistered_ns", &v) && v ? json_object_get_int64(v) : -1;
                char *end;
                uint64_t a;

                if (!name || !addr || !type || len <= 0 || len > UINT32_MAX || (uint64_t) reg >= until_ns ||
                    (unreg >= 0 && (uint64_t) unreg < since_ns))
                        continue;
                errno = 0;
                a = strtoull(addr, &end, 16);
                if (errno != 0 || *end || a == 0)
                        continue;
                r = perf_writer_ksymbol(w, a, (uint32_t) len, strcmp(type, "bpf") == 0, name);
                if (r < 0 && r != -EINVAL)
                        return r;
        }
        return 0;
}

static int export_perf(const query_params *base, const char *output, int with_kcore) {
        _cleanup_(query_result_freep) query_result *head = NULL;
        _cleanup_free_ char *data_path = NULL, *modules_file = NULL;
        query_params q = *base;
        perf_writer *w = NULL;
        uint64_t period = sample_period_ns(), samples = 0, omitted = 0;
        FILE *f;
        int r, fd;

        /* Window: no stacks; the kernel, the snapshot, the total. */
        q.want_stacks = false;
        q.raw = true;
        q.top = 1;
        q.timeline = seconds_of(q.since_ns, q.until_ns, QUERY_TIMELINE_MAX);
        r = query_fetch(&q, &head);
        if (r != 0)
                return r;

        fd = -1;
        /* By default a caller who cannot read the snapshot (its files are
         * root's) gets the plain file, and is told why. */
        if (with_kcore < 0 && head->kcore_snapshot) {
                _cleanup_free_ char *probe = NULL;

                if (asprintf(&probe, "%s/kallsyms", head->kcore_snapshot) < 0)
                        return print_error("out of memory");
                if (access(probe, R_OK) < 0) {
                        fprintf(stderr, "perfsnapctl: the window's kcore snapshot %s is not readable here (%s): "
                                "writing the perf.data without it (root gets the directory with it)\n",
                                head->kcore_snapshot, strerror(errno));
                        with_kcore = 0;
                }
        }
        if (with_kcore != 0 && head->kcore_snapshot) {
                r = make_kcore_dir(output, head->kcore_snapshot, &fd);
                if (r != 0)
                        return r;
                if (asprintf(&data_path, "%s/data", output) < 0 ||
                    asprintf(&modules_file, "%s/kcore_dir/modules", output) < 0) {
                        close(fd);
                        return print_error("out of memory");
                }
        } else if (with_kcore > 0)
                return print_error("no kcore snapshot is linked to the samples of this window (the daemon keeps\n"
                                   "none, or the window is longer than about 33 hours: it is read from minute\n"
                                   "or hour blocks then, which have no links)");

        if (fd < 0)
                fd = open(output, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0666);
        if (fd < 0)
                return print_error("cannot create '%s': %s", output, strerror(errno));
        f = fdopen(fd, "w+");
        if (!f) {
                close(fd);
                return print_error("out of memory");
        }
        r = perf_writer_new(f, period, head->kernel_text, head->kernel_build_id, modules_file, &w);
        if (r >= 0)
                r = put_ksymbols(w, base->since_ns, base->until_ns);
        if (r >= 0)
                r = export_perf_minutes(w, base);
        if (r >= 0)
                r = perf_writer_finish(w, &samples, &omitted);
        perf_writer_free(w);
        if (fclose(f) != 0 && r >= 0)
                r = -errno;
        if (r < 0) {
                unlink(data_path ?: output);
                return r == -ECANCELED ? EXIT_FAILURE : print_error("cannot write '%s': %s", output, strerror(-r));
        }
        if (omitted > 0)
                fprintf(stderr, "perfsnapctl: %" PRIu64 " samples are in stacks beyond query_max_stacks in their minute "
                        "(\"" OTHER_STACKS "\") and are not in the perf.data\n", omitted);
        fprintf(stderr, "perfsnapctl: wrote %s (perf.data, %" PRIu64 " of the window's %" PRIu64 " samples%s%s)\n",
                output, samples, head->total_samples, data_path ? ", with the kcore snapshot " : "",
                data_path ? head->kcore_snapshot : "");
        return 0;
}

static int write_export(export_format format, int fd, const export_input *in) {
        FILE *f;
        int r;

        if (format == EXPORT_PPROF)
                return export_pprof(fd, in);

        /* A stream of its own: fd stays the caller's to close. */
        fd = dup(fd);
        if (fd < 0)
                return -errno;
        f = fdopen(fd, "w");
        if (!f) {
                r = -errno;
                close(fd);
                return r;
        }
        switch (format) {
        case EXPORT_SVG:
                r = export_svg(f, in);
                break;
        case EXPORT_HTML:
                r = export_html(f, in);
                break;
        case EXPORT_SPEEDSCOPE:
                r = export_speedscope(f, in);
                break;
        default:
                print_folded(f, in->r);
                r = 0;
        }
        if (fflush(f) != 0 && r >= 0)
                r = -errno;
        if (ferror(f) && r >= 0)
                r = -EIO;
        if (fclose(f) != 0 && r >= 0)
                r = -errno;
        return r;
}

int cmd_export(int argc, char **argv) {
        static const struct option options[] = {
                { "output", required_argument, NULL, 'o' },
                { "format", required_argument, NULL, ARG_FORMAT },
                { "title",  required_argument, NULL, ARG_TITLE },
                { "with-kcore", no_argument,   NULL, ARG_WITH_KCORE },
                { "no-kcore", no_argument,     NULL, ARG_NO_KCORE },
                QUERY_OPTIONS,
                { "socket", required_argument, NULL, ARG_SOCKET },
                { "help",   no_argument,       NULL, 'h' },
                {}
        };
        _cleanup_(json_object_putp) struct json_object *params = NULL, *answer = NULL;
        _cleanup_(query_result_freep) query_result *result = NULL;
        query_window w = { .since = DEFAULT_SINCE };
        query_params q = QUERY_PARAMS_INIT;
        const char *output = NULL, *title = NULL;
        int with_kcore = -1;    /* -1: when the window has a snapshot */
        char title_buf[512];
        int format = -1, c, r, fd;
        export_input in = {};
        uint64_t now_ns;

        optind = 0;
        opterr = 0;
        while ((c = getopt_long(argc, argv, ":ho:", options, NULL)) >= 0) {
                r = parse_query_option(c, optarg, &w, &q);
                if (r < 0)
                        return EXIT_FAILURE;
                if (r == 1)
                        continue;
                switch (c) {
                case 'o':
                        output = optarg;
                        break;
                case ARG_FORMAT:
                        format = format_from_name(optarg);
                        if (format < 0)
                                return print_error("invalid --format '%s': expected pprof, perf.data, svg, html, folded "
                                                   "or speedscope", optarg);
                        break;
                case ARG_TITLE:
                        title = optarg;
                        break;
                case ARG_WITH_KCORE:
                case ARG_NO_KCORE:
                        with_kcore = c == ARG_WITH_KCORE;
                        break;
                case ARG_SOCKET:
                        arg_socket = optarg;
                        break;
                case 'h':
                        help_export();
                        return finish_output();
                default:
                        return print_option_error(c, argv, "export");
                }
        }
        if (optind < argc)
                return print_error("unexpected argument '%s' (see 'perfsnapctl export --help')", argv[optind]);
        if (!output)
                return print_error("no output file: give -o FILE, or -o - for standard output");
        if (format == EXPORT_PERF && strcmp(output, "-") == 0)
                return print_error("--format perf.data needs a file (-o FILE): it is written out of order");
        if (format < 0 && strcmp(output, "-") != 0)
                format = format_from_path(output);
        if (format < 0)
                return print_error("no --format given and none implied by '%s' (.pb.gz, .pprof, perf.data, .svg, .html, "
                                   ".folded, .speedscope.json)", output);

        now_ns = clock_ns(CLOCK_REALTIME);
        r = query_window_apply(&w, now_ns, &q);
        if (r != 0)
                return r;
        /* A closed window, so that the timeline's slots are fixed. */
        if (q.until_ns == 0)
                q.until_ns = now_ns;
        if (format == EXPORT_PERF && q.kind == SAMPLE_KIND_OFFCPU)
                return print_error("--type offcpu exports to pprof, html, svg, folded or speedscope: perf.data holds "
                                   "samples of an event, not waits");
        if (format == EXPORT_PERF)
                return export_perf(&q, output, with_kcore);
        if (with_kcore > 0)
                return print_error("--with-kcore is for --format perf.data");
        q.want_stacks = true;
        q.packed = format != EXPORT_FOLDED;
        if (format == EXPORT_PPROF) {
                /* Labels: comm, pid, cpu, context, and the cgroup's
                 * path, unit and container. */
                q.by_pid = q.by_cpu = q.by_cgroup = true;
                q.want_modules = true;
        } else if (format == EXPORT_HTML)
                q.timeline = seconds_of(q.since_ns, q.until_ns, HTML_TIMELINE_SLOTS);

        params = query_params_to_json(&q);
        if (!params)
                return print_error("out of memory");
        r = daemon_call(PERFSNAP_METHOD_QUERY, params, true, &answer);
        if (r != 0)
                return r;
        r = query_result_from_json(answer, &result);
        if (r == -ENOMEM)
                return print_error("out of memory");
        if (r < 0)
                return print_error("malformed Query reply from perfsnapd at %s", socket_path());

        in = (export_input) {
                .q = &q,
                .r = result,
                .since_ns = q.since_ns,
                .until_ns = q.until_ns,
                /* Off-CPU "samples" are nanoseconds already. */
                .period_ns = q.kind == SAMPLE_KIND_OFFCPU ? 1 :
                             format != EXPORT_SVG && format != EXPORT_FOLDED ? sample_period_ns() : 0,
        };
        if (!title) {
                default_title(&in, title_buf, sizeof title_buf);
                title = title_buf;
        }
        in.title = title;

        {
                uint64_t other = 0;

                for (size_t i = 0; i < result->n_stacks; i++)
                        if (query_stack_is_other(&result->stacks[i]))
                                other += result->stacks[i].samples;
                if (other > 0)
                        fprintf(stderr,
                                "perfsnapctl: %" PRIu64 " of %" PRIu64 " samples are in stacks beyond the daemon's "
                                "query_max_stacks: \"" OTHER_STACKS "\" under their command\n",
                                other, result->total_samples);
        }


        if (strcmp(output, "-") == 0) {
                fd = dup(STDOUT_FILENO);
                if (fd < 0)
                        return print_error("cannot write to standard output: %s", strerror(errno));
        } else {
                fd = open(output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0666);
                if (fd < 0)
                        return print_error("cannot create '%s': %s", output, strerror(errno));
        }
        r = write_export((export_format) format, fd, &in);
        if (close(fd) < 0 && r >= 0)
                r = -errno;
        if (r < 0) {
                if (strcmp(output, "-") != 0)
                        unlink(output);
                return print_error("cannot write '%s': %s", output, strerror(-r));
        }
        if (strcmp(output, "-") != 0)
                fprintf(stderr, "perfsnapctl: wrote %s (%s, %" PRIu64 " samples in %zu stacks)\n", output,
                        formats[format].name, result->total_samples, result->n_stacks);
        return 0;
}
