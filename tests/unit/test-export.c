/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The export writers (client/export.h) on answers built here: the merged
 * call tree, text escaping, the pprof message as protobuf-c decodes it,
 * and the SVG and HTML documents. The real readers (go tool pprof,
 * chromium) are in tests/integration/test-export.sh. */

#include <errno.h>
#include <json-c/json.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "export.h"
#include "macro.h"
#include "profile.pb-c.h"
#include "test.h"

/* A stack of an answer: frames outermost first. */
static void set_stack(query_stack *st, const char *comm, const char *const *frames, size_t n, size_t n_kernel,
                      uint64_t samples, int64_t pid, int32_t cpu, int32_t slot) {
        *st = (query_stack) {
                .comm = strdup(comm),
                .frames = calloc(n + 1, sizeof(char *)),
                .n_frames = n,
                .samples = samples,
                .n_kernel = n_kernel,
                .pid = pid,
                .tid = -1,
                .cpu = cpu,
                .slot = slot,
        };
        ASSERT_TRUE(st->comm && st->frames);
        for (size_t i = 0; i < n; i++) {
                st->frames[i] = strdup(frames[i]);
                ASSERT_TRUE(st->frames[i]);
        }
}

/* a: main;f;k1 (k1 kernel) x3 in slot 0 and x1 in slot 2 (pid 11, 12),
 * a: main;g x2, b: main x5. */
static query_result *sample_result(bool modules) {
        static const char *const f1[] = { "main", "f", "k1" }, *const f2[] = { "main", "g" }, *const f3[] = { "main" };
        query_result *r = calloc(1, sizeof *r);

        ASSERT_TRUE(r);
        r->stacks = calloc(4, sizeof(query_stack));
        ASSERT_TRUE(r->stacks);
        r->n_stacks = 4;
        set_stack(&r->stacks[0], "b", f3, 1, 0, 5, 13, 1, 1);
        set_stack(&r->stacks[1], "a", f1, 3, 1, 3, 11, 0, 0);
        set_stack(&r->stacks[2], "a", f2, 2, 0, 2, 11, 1, 0);
        set_stack(&r->stacks[3], "a", f1, 3, 1, 1, 12, 0, 2);
        r->total_samples = 11;
        r->timeline = calloc(3, sizeof(uint64_t));
        ASSERT_TRUE(r->timeline);
        r->n_timeline = 3;
        r->timeline[0] = 5;
        r->timeline[1] = 5;
        r->timeline[2] = 1;
        r->timeline_slot_ns = 1000000000;
        if (modules) {
                r->modules = calloc(2, sizeof(query_module));
                ASSERT_TRUE(r->modules);
                r->n_modules = 2;
                r->modules[0] = (query_module) { .name = strdup("/usr/bin/prog"), .build_id = strdup("abcdef0123") };
                r->modules[1] = (query_module) { .name = strdup("[kernel.kallsyms]"), .kernel = true };
                for (size_t i = 0; i < r->n_stacks; i++) {
                        query_stack *st = &r->stacks[i];

                        st->modules = calloc(st->n_frames, sizeof(uint32_t));
                        ASSERT_TRUE(st->modules);
                        for (size_t j = 0; j < st->n_frames; j++)
                                st->modules[j] = j >= st->n_frames - st->n_kernel ? 1 : 0;
                }
        }
        return r;
}

TEST(flame_tree_merges_equal_paths_in_name_order) {
        query_result *r = sample_result(false);
        flame_tree t = {};
        static const struct {
                const char *name;
                unsigned depth, kind;
                uint64_t value, x;
        } want[] = {
                { "all", 0, FLAME_ROOT, 11, 0 },
                { "a", 1, FLAME_COMM, 6, 0 },
                { "main", 2, FLAME_USER, 6, 0 },
                { "f", 3, FLAME_USER, 4, 0 },
                { "k1", 4, FLAME_KERNEL, 4, 0 },
                { "g", 3, FLAME_USER, 2, 4 },
                { "b", 1, FLAME_COMM, 5, 6 },
                { "main", 2, FLAME_USER, 5, 6 },
        };

        ASSERT_EQ(flame_tree_build(r, &t), 0);
        ASSERT_EQ(t.n, ELEMENTSOF(want));
        ASSERT_EQ(t.max_depth, 4);
        for (size_t i = 0; i < t.n; i++) {
                ASSERT_STREQ(t.nodes[i].name, want[i].name);
                ASSERT_EQ(t.nodes[i].depth, want[i].depth);
                ASSERT_EQ(t.nodes[i].kind, want[i].kind);
                ASSERT_EQ(t.nodes[i].value, want[i].value);
                ASSERT_EQ(t.nodes[i].x, want[i].x);
        }
        ASSERT_EQ(t.nodes[1].parent, 0);
        ASSERT_EQ(t.nodes[4].parent, 3);
        ASSERT_EQ(t.nodes[5].parent, 2);    /* g under a's main */
        ASSERT_EQ(t.nodes[6].parent, 0);
        ASSERT_EQ(t.nodes[7].parent, 6);
        flame_tree_done(&t);
        query_result_free(r);
}

TEST(flame_tree_of_no_stacks_is_the_root) {
        query_result r = {};
        flame_tree t = {};

        ASSERT_EQ(flame_tree_build(&r, &t), 0);
        ASSERT_EQ(t.n, 1);
        ASSERT_EQ(t.nodes[0].value, 0);
        flame_tree_done(&t);
}

static char *capture(void (*put)(FILE *, const char *), const char *s) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);

        ASSERT_TRUE(f);
        put(f, s);
        ASSERT_EQ(fclose(f), 0);
        return buf;
}

TEST(escapes_keep_documents_well_formed) {
        char *s;

        /* Invalid UTF-8 (a lone continuation byte, an overlong '/', a
         * surrogate) and control characters become U+FFFD. */
        s = capture(fput_json, "a\"b\\c</script>\x01\x80\xc0\xaf\xed\xa0\x80\xc3\xa9");
        ASSERT_STREQ(s, "\"a\\\"b\\\\c\\u003c/script\\u003e\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\xc3\xa9\"");
        free(s);
        s = capture(fput_xml, "operator<<&\"x\"\x1b\xff");
        ASSERT_STREQ(s, "operator&lt;&lt;&amp;&quot;x&quot;\xef\xbf\xbd\xef\xbf\xbd");
        free(s);
}

/* Reads a gzip file back whole. */
static uint8_t *gunzip_fd(int fd, size_t *ret_size) {
        size_t alloc = 1 << 16, n = 0;
        uint8_t *buf = malloc(alloc);
        gzFile gz;
        int k;

        ASSERT_TRUE(buf);
        ASSERT_EQ(lseek(fd, 0, SEEK_SET), 0);
        gz = gzdopen(dup(fd), "rb");
        ASSERT_TRUE(gz);
        while ((k = gzread(gz, buf + n, (unsigned) (alloc - n))) > 0) {
                n += (size_t) k;
                if (n == alloc) {
                        alloc *= 2;
                        buf = realloc(buf, alloc);
                        ASSERT_TRUE(buf);
                }
        }
        ASSERT_EQ(k, 0);
        gzclose(gz);
        *ret_size = n;
        return buf;
}

static const char *label_str(const Perfsnap__Pprof__Profile *p, const Perfsnap__Pprof__Sample *s, const char *key,
                             int64_t *ret_num) {
        for (size_t i = 0; i < s->n_label; i++)
                if (strcmp(p->string_table[s->label[i]->key], key) == 0) {
                        if (ret_num)
                                *ret_num = s->label[i]->num;
                        return p->string_table[s->label[i]->str];
                }
        return NULL;
}

static const char *location_name(const Perfsnap__Pprof__Profile *p, uint64_t id, const char **ret_file) {
        ASSERT_TRUE(id >= 1 && id <= p->n_location);
        const Perfsnap__Pprof__Location *l = p->location[id - 1];
        ASSERT_EQ(l->id, id);
        ASSERT_EQ(l->n_line, 1);
        const Perfsnap__Pprof__Function *f = p->function[l->line[0]->function_id - 1];
        ASSERT_EQ(f->id, l->line[0]->function_id);
        if (ret_file)
                *ret_file = l->mapping_id ? p->string_table[p->mapping[l->mapping_id - 1]->filename] : NULL;
        return p->string_table[f->name];
}

TEST(pprof_has_a_sample_per_stack_leaf_first_with_labels_and_mappings) {
        query_result *r = sample_result(true);
        export_input in = { .r = r, .since_ns = 1000, .until_ns = 61000, .period_ns = 1001001, .title = "t" };
        Perfsnap__Pprof__Profile *p;
        uint8_t *data;
        size_t size;
        int fd = memfd_create("pprof", 0);

        ASSERT_TRUE(fd >= 0);
        /* Told apart by cgroup: a docker container's, a service's, one not
         * known (""), and none (NULL). */
        r->stacks[1].cgroup = strdup("/system.slice/docker-"
                                     "4f1c2b3a5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708.scope");
        r->stacks[2].cgroup = strdup("/system.slice/nginx.service");
        r->stacks[3].cgroup = strdup("");
        ASSERT_EQ(export_pprof(fd, &in), 0);
        data = gunzip_fd(fd, &size);
        p = perfsnap__pprof__profile__unpack(NULL, size, data);
        ASSERT_TRUE(p);

        ASSERT_TRUE(p->n_string_table > 0);
        ASSERT_STREQ(p->string_table[0], "");
        ASSERT_EQ(p->n_sample_type, 2);
        ASSERT_STREQ(p->string_table[p->sample_type[0]->type], "samples");
        ASSERT_STREQ(p->string_table[p->sample_type[1]->unit], "nanoseconds");
        ASSERT_EQ(p->period, 1001001);
        ASSERT_EQ(p->time_nanos, 1000);
        ASSERT_EQ(p->duration_nanos, 60000);
        ASSERT_EQ(p->n_mapping, 2);
        ASSERT_STREQ(p->string_table[p->mapping[0]->filename], "/usr/bin/prog");
        ASSERT_STREQ(p->string_table[p->mapping[0]->build_id], "abcdef0123");
        ASSERT_EQ(p->mapping[1]->build_id, 0);

        ASSERT_EQ(p->n_sample, 4);
        /* The second stack: a, pid 11, cpu 0, main;f;k1 x3. */
        const Perfsnap__Pprof__Sample *s = p->sample[1];
        const char *file;
        int64_t num = -1;
        ASSERT_EQ(s->n_value, 2);
        ASSERT_EQ(s->value[0], 3);
        ASSERT_EQ(s->value[1], 3 * 1001001);
        ASSERT_EQ(s->n_location_id, 4);
        ASSERT_STREQ(location_name(p, s->location_id[0], &file), "k1");
        ASSERT_STREQ(file, "[kernel.kallsyms]");
        ASSERT_STREQ(location_name(p, s->location_id[1], &file), "f");
        ASSERT_STREQ(file, "/usr/bin/prog");
        ASSERT_STREQ(location_name(p, s->location_id[2], NULL), "main");
        ASSERT_STREQ(location_name(p, s->location_id[3], &file), "a");
        ASSERT_TRUE(file == NULL);
        ASSERT_STREQ(label_str(p, s, "comm", NULL), "a");
        ASSERT_STREQ(label_str(p, s, "context", NULL), "kernel");
        /* String labels: pprof would drop a numeric label of 0. */
        ASSERT_STREQ(label_str(p, s, "pid", &num), "11");
        ASSERT_STREQ(label_str(p, s, "cpu", &num), "0");
        ASSERT_EQ(num, 0);
        ASSERT_STREQ(label_str(p, p->sample[2], "context", NULL), "user");
        ASSERT_STREQ(label_str(p, s, "unit", NULL),
                     "docker-4f1c2b3a5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708.scope");
        ASSERT_STREQ(label_str(p, s, "container", NULL), "4f1c2b3a5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708");
        ASSERT_STREQ(label_str(p, p->sample[2], "unit", NULL), "nginx.service");
        ASSERT_STREQ(label_str(p, p->sample[2], "cgroup", NULL), "/system.slice/nginx.service");
        ASSERT_NULL(label_str(p, p->sample[2], "container", NULL));
        ASSERT_NULL(label_str(p, p->sample[3], "unit", NULL));
        ASSERT_NULL(label_str(p, p->sample[0], "cgroup", NULL));
        /* Both samples of main;f;k1 name the same locations. */
        ASSERT_EQ(p->sample[3]->location_id[0], s->location_id[0]);
        /* main of a and main of b: the same function in the same file. */
        ASSERT_EQ(p->sample[0]->location_id[0], s->location_id[2]);

        uint64_t sum = 0;
        for (size_t i = 0; i < p->n_sample; i++)
                sum += (uint64_t) p->sample[i]->value[0];
        ASSERT_EQ(sum, 11);

        perfsnap__pprof__profile__free_unpacked(p, NULL);
        free(data);
        close(fd);
        query_result_free(r);
}

TEST(pprof_write_error_is_reported) {
        query_result *r = sample_result(false);
        export_input in = { .r = r, .until_ns = 1, .period_ns = 1, .title = "t" };
        int fds[2];

        /* A pipe whose reader is gone: EPIPE (SIGPIPE ignored). */
        ASSERT_EQ(pipe(fds), 0);
        close(fds[0]);
        signal(SIGPIPE, SIG_IGN);
        ASSERT_EQ(export_pprof(fds[1], &in), -EPIPE);
        close(fds[1]);
        query_result_free(r);
}

static char *export_to_string(int (*fn)(FILE *, const export_input *), const export_input *in) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);

        ASSERT_TRUE(f);
        ASSERT_EQ(fn(f, in), 0);
        ASSERT_EQ(fclose(f), 0);
        return buf;
}

static size_t count(const char *s, const char *what) {
        size_t n = 0;

        for (const char *p = strstr(s, what); p; p = strstr(p + 1, what))
                n++;
        return n;
}

TEST(svg_has_a_frame_per_node_kernel_warm_user_cool) {
        query_result *r = sample_result(false);
        export_input in = { .r = r, .until_ns = 1, .title = "a <title> & more" };
        char *svg;

        free(r->stacks[2].frames[1]);
        r->stacks[2].frames[1] = strdup("operator<<");
        svg = export_to_string(export_svg, &in);
        ASSERT_TRUE(strncmp(svg, "<?xml", 5) == 0);
        ASSERT_EQ(count(svg, "<rect"), 1 + 8);      /* the background and the tree's 8 nodes */
        ASSERT_TRUE(strstr(svg, "a &lt;title&gt; &amp; more"));
        ASSERT_TRUE(strstr(svg, "<title>operator&lt;&lt; (2 samples, 18.18%)</title>"));
        ASSERT_TRUE(!strstr(svg, "operator<<"));
        /* k1 is a kernel frame: a hue from 8 to 39; f a user one: 185 to 224. */
        const char *k = strstr(svg, "<title>k1 "), *u = strstr(svg, "<title>f ");
        unsigned hue;
        ASSERT_TRUE(k && u);
        ASSERT_EQ(sscanf(strstr(k, "fill=\"hsl(") + 10, "%u", &hue), 1);
        ASSERT_TRUE(hue >= 8 && hue < 40);
        ASSERT_EQ(sscanf(strstr(u, "fill=\"hsl(") + 10, "%u", &hue), 1);
        ASSERT_TRUE(hue >= 185 && hue < 225);
        ASSERT_TRUE(strstr(svg, "</svg>\n"));
        free(svg);
        query_result_free(r);
}

TEST(html_embeds_merged_stacks_with_counts_per_slot) {
        query_result *r = sample_result(false);
        export_input in = { .r = r, .until_ns = 1, .period_ns = 1000, .title = "</script><b>" };
        struct json_object *d, *stacks, *names, *st, *v;
        char *html, *start, *end;

        html = export_to_string(export_html, &in);
        /* One script end per script: the title cannot close one. */
        ASSERT_EQ(count(html, "</script>"), 2);
        start = strstr(html, "<script id=\"data\" type=\"application/json\">");
        ASSERT_TRUE(start);
        start = strchr(start, '>') + 1;
        end = strstr(start, "</script>");
        ASSERT_TRUE(end);
        *end = 0;
        d = json_tokener_parse(start);
        ASSERT_TRUE(d);
        ASSERT_TRUE(json_object_object_get_ex(d, "title", &v));
        ASSERT_STREQ(json_object_get_string(v), "</script><b>");
        ASSERT_TRUE(json_object_object_get_ex(d, "total", &v));
        ASSERT_EQ(json_object_get_int64(v), 11);
        ASSERT_TRUE(json_object_object_get_ex(d, "timeline", &v));
        ASSERT_EQ(json_object_array_length(v), 3);
        ASSERT_TRUE(json_object_object_get_ex(d, "names", &names));
        ASSERT_TRUE(json_object_object_get_ex(d, "stacks", &stacks));
        /* a;main;f;k1 twice (slots 0 and 2) is one entry; then a;main;g, b;main. */
        ASSERT_EQ(json_object_array_length(stacks), 3);
        st = json_object_array_get_idx(stacks, 0);
        ASSERT_STREQ(json_object_get_string(json_object_array_get_idx(names, json_object_get_int(json_object_array_get_idx(st, 0)))), "a");
        v = json_object_array_get_idx(st, 1);
        ASSERT_EQ(json_object_array_length(v), 3);
        ASSERT_STREQ(json_object_get_string(json_object_array_get_idx(names, json_object_get_int(json_object_array_get_idx(v, 2)))), "k1");
        ASSERT_EQ(json_object_get_int(json_object_array_get_idx(st, 2)), 1);
        ASSERT_STREQ(json_object_to_json_string_ext(json_object_array_get_idx(st, 3), JSON_C_TO_STRING_PLAIN), "[0,3,2,1]");
        json_object_put(d);
        free(html);
        query_result_free(r);
}

TEST(speedscope_samples_name_frames_and_weigh_cpu_time) {
        query_result *r = sample_result(false);
        export_input in = { .r = r, .until_ns = 1, .period_ns = 1000, .title = "t\"" };
        struct json_object *d, *v, *p, *frames, *samples, *weights;
        char *s = export_to_string(export_speedscope, &in);

        d = json_tokener_parse(s);
        ASSERT_TRUE(d);
        ASSERT_TRUE(json_object_object_get_ex(d, "$schema", &v));
        ASSERT_STREQ(json_object_get_string(v), "https://www.speedscope.app/file-format-schema.json");
        ASSERT_TRUE(json_object_object_get_ex(d, "shared", &v) && json_object_object_get_ex(v, "frames", &frames));
        ASSERT_TRUE(json_object_object_get_ex(d, "profiles", &v));
        ASSERT_EQ(json_object_array_length(v), 1);
        p = json_object_array_get_idx(v, 0);
        ASSERT_TRUE(json_object_object_get_ex(p, "unit", &v));
        ASSERT_STREQ(json_object_get_string(v), "nanoseconds");
        ASSERT_TRUE(json_object_object_get_ex(p, "endValue", &v));
        ASSERT_EQ(json_object_get_int64(v), 11 * 1000);
        ASSERT_TRUE(json_object_object_get_ex(p, "samples", &samples));
        ASSERT_TRUE(json_object_object_get_ex(p, "weights", &weights));
        ASSERT_EQ(json_object_array_length(samples), r->n_stacks);
        ASSERT_EQ(json_object_array_length(weights), r->n_stacks);
        for (size_t i = 0; i < r->n_stacks; i++) {
                struct json_object *sm = json_object_array_get_idx(samples, i);
                const query_stack *st = &r->stacks[i];

                ASSERT_EQ(json_object_get_int64(json_object_array_get_idx(weights, i)), (int64_t) st->samples * 1000);
                ASSERT_EQ(json_object_array_length(sm), st->n_frames + 1);
                for (size_t j = 0; j <= st->n_frames; j++) {
                        int64_t f = json_object_get_int64(json_object_array_get_idx(sm, j));
                        struct json_object *name;

                        ASSERT_TRUE(f >= 0 && (size_t) f < json_object_array_length(frames));
                        ASSERT_TRUE(json_object_object_get_ex(json_object_array_get_idx(frames, f), "name", &name));
                        ASSERT_STREQ(json_object_get_string(name), j == 0 ? st->comm : st->frames[j - 1]);
                }
        }
        json_object_put(d);
        free(s);
        query_result_free(r);
}

/* The perf.data of a raw answer, read back: the header, the attribute,
 * a record per sample with its chain, the COMMs and MMAP2s, the
 * build-id table. */
/* The whole of a temporary file written up to its position; closes it. */
static char *read_back(FILE *f, size_t *ret_size) {
        size_t size = (size_t) ftell(f);
        char *buf = malloc(MAX(size, (size_t) 1));

        ASSERT_TRUE(buf);
        rewind(f);
        ASSERT_EQ(fread(buf, 1, size, f), size);
        fclose(f);
        *ret_size = size;
        return buf;
}

TEST(perf_data_has_a_sample_record_per_sample) {
        query_result *r = sample_result(true);
        export_input in = { .r = r, .since_ns = 1000000000, .until_ns = 4000000000, .period_ns = 1001001, .title = "" };
        char *buf = NULL;
        size_t size = 0, n_samples = 0, n_comm = 0, n_mmap2 = 0, n_mmap = 0;
        uint64_t omitted = 99, last_time = 0;
        FILE *f;

        r->kernel_text = 0xffffffff81000000ull;
        r->kernel_build_id = strdup("00112233445566778899aabbccddeeff00112233");
        /* a;main;g's leaf in anonymous memory: no file, so no MMAP2. */
        r->modules = realloc(r->modules, 3 * sizeof(query_module));
        ASSERT_TRUE(r->modules);
        r->modules[2] = (query_module) { .name = strdup("//anon") };
        r->n_modules = 3;
        r->stacks[2].modules[1] = 2;
        for (size_t i = 0; i < r->n_stacks; i++) {
                query_stack *st = &r->stacks[i];

                st->addrs = calloc(st->n_frames, sizeof(uint64_t));
                ASSERT_TRUE(st->addrs);
                for (size_t j = 0; j < st->n_frames; j++)
                        st->addrs[j] = j >= st->n_frames - st->n_kernel ? 0xffffffff81001000ull + j : 0x1000 + 16 * j;
        }
        /* Two modules, as /proc/modules lists them: an MMAP each, and the
         * kernel's ends where x86-64's modules area starts. */
        char mods[] = "/tmp/test-export-modules-XXXXXX";
        int mfd = mkstemp(mods);
        ASSERT_TRUE(mfd >= 0);
        dprintf(mfd, "brd 20480 0 - Live 0xffffffffc069f000\nloop 40960 0 - Live 0xffffffffc0600000\nbad line\n");
        close(mfd);
        in.modules_file = mods;
        /* Seekable: a temporary file read back whole. */
        f = tmpfile();
        ASSERT_TRUE(f);
        ASSERT_EQ(export_perf_data(f, &in, &omitted), 0);
        ASSERT_EQ(omitted, 0);
        buf = read_back(f, &size);

        uint64_t v[13];
        memcpy(v, buf, sizeof v);
        ASSERT_TRUE(memcmp(buf, "PERFILE2", 8) == 0);
        ASSERT_EQ(v[1], 104);                           /* header size */
        ASSERT_EQ(v[2], sizeof(struct perf_event_attr) + 16);
        ASSERT_EQ(v[9], UINT64_C(1) << 2);              /* features: HEADER_BUILD_ID */
        struct perf_event_attr attr;
        memcpy(&attr, buf + v[3], sizeof attr);
        ASSERT_EQ(attr.sample_type, PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |
                                            PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_CGROUP);
        ASSERT_EQ(attr.sample_freq, 999);
        for (uint64_t off = v[5]; off < v[5] + v[6];) {
                struct perf_event_header h;

                memcpy(&h, buf + off, sizeof h);
                ASSERT_TRUE(h.size >= sizeof h && off + h.size <= v[5] + v[6]);
                if (h.type == PERF_RECORD_SAMPLE) {
                        uint64_t s[6], time;

                        memcpy(s, buf + off + sizeof h, sizeof s);
                        time = s[2];
                        ASSERT_TRUE(time >= last_time);         /* in time order */
                        ASSERT_TRUE(time >= in.since_ns && time < in.until_ns);
                        last_time = time;
                        ASSERT_EQ(s[4], 1001001);               /* period */
                        ASSERT_EQ(h.size, sizeof h + 48 + 8 * s[5] + 8);  /* and the cgroup */
                        n_samples++;
                } else if (h.type == PERF_RECORD_COMM)
                        n_comm++;
                else if (h.type == PERF_RECORD_MMAP2)
                        n_mmap2++;
                else if (h.type == PERF_RECORD_MMAP) {
                        uint64_t m[3];

                        memcpy(m, buf + off + sizeof h + 8, sizeof m);
                        if (n_mmap == 0) {
                                ASSERT_U64_EQ(m[0], 0xffffffff81000000ull);
                                ASSERT_U64_EQ(m[0] + m[1], 0xffffffffc0000000ull);     /* x86-64 modules area */
                                ASSERT_STREQ(buf + off + sizeof h + 32, "[kernel.kallsyms]_text");
                        } else
                                ASSERT_STREQ(buf + off + sizeof h + 32, n_mmap == 1 ? "[brd]" : "[loop]");
                        n_mmap++;
                }
                off += h.size;
        }
        ASSERT_EQ(n_samples, 11);
        ASSERT_EQ(n_comm, 3);           /* pids 11, 12, 13 */
        ASSERT_EQ(n_mmap, 3);           /* the kernel, brd, loop */
        unlink(mods);
        ASSERT_EQ(n_mmap2, 3);          /* /usr/bin/prog in each, not //anon */
        /* The build-id table names the kernel. */
        ASSERT_TRUE(memmem(buf + v[5] + v[6], size - v[5] - v[6], "[kernel.kallsyms]", 17) != NULL);
        ASSERT_TRUE(memmem(buf + v[5] + v[6], size - v[5] - v[6], "/usr/bin/prog", 13) != NULL);
        free(buf);
        query_result_free(r);
}

/* Parts with shapes and entries (what perfsnapctl asks for): a sample per
 * entry's sample, with its shape's chain, and a COMM before the first
 * sample of each thread, also after the writer forgot the threads of
 * earlier parts (past its table bound). */
TEST(perf_data_from_shapes_in_parts_with_bounded_tables) {
        const uint32_t n_pids = 70000;
        query_result *r = calloc(1, sizeof *r);
        perf_writer *w = NULL;
        uint64_t samples = 0, omitted = 99;
        size_t size, n_samples = 0, n_comm = 0, n_mmap2 = 0, n_cgroup_records = 0, in_cgroup = 0;
        uint64_t cgroup_id = 0;
        uint8_t *commed = calloc(n_pids + 1, 1);
        char *buf;
        FILE *f = tmpfile();

        ASSERT_TRUE(r && commed && f);
        r->modules = calloc(2, sizeof(query_module));
        r->shapes = calloc(1, sizeof(query_stack));
        r->comms = calloc(1, sizeof(char *));
        r->entries = calloc(n_pids, sizeof(query_entry));
        ASSERT_TRUE(r->modules && r->shapes && r->comms && r->entries);
        r->modules[0] = (query_module) { .name = strdup("/usr/bin/prog"), .build_id = strdup("0a0b") };
        r->modules[1] = (query_module) { .name = strdup("[kernel.kallsyms]"), .kernel = true };
        r->n_modules = 2;
        r->comms[0] = strdup("prog");
        r->n_comms = 1;
        r->cgroups = calloc(1, sizeof(char *));
        ASSERT_TRUE(r->cgroups);
        r->cgroups[0] = strdup("/system.slice/prog.service");
        r->n_cgroups = 1;
        /* main -> f -> do_sys_open */
        r->shapes[0] = (query_stack) { .n_frames = 3, .n_kernel = 1, .pid = -1, .tid = -1, .cpu = -1, .slot = -1 };
        r->shapes[0].addrs = calloc(3, sizeof(uint64_t));
        r->shapes[0].modules = calloc(3, sizeof(uint32_t));
        ASSERT_TRUE(r->shapes[0].addrs && r->shapes[0].modules);
        r->shapes[0].addrs[0] = 0x1100;
        r->shapes[0].addrs[1] = 0x1200;
        r->shapes[0].addrs[2] = 0xffffffff81300100ull;
        r->shapes[0].modules[2] = 1;
        r->n_shapes = 1;
        for (uint32_t i = 0; i < n_pids; i++)
                r->entries[r->n_entries++] = (query_entry) { .pid = 1 + i, .tid = 1 + i, .cpu = (int32_t) (i % 4),
                                                             .slot = -1, .samples = 1, .cgroup = i % 2 };

        ASSERT_OK(perf_writer_new(f, 10101010, 0xffffffff81000000ull, NULL, NULL, &w));
        ASSERT_OK(perf_writer_add(w, r, 1000000000, 2000000000));
        /* The next part: pid 1 again, after 70000 threads and maps. */
        r->n_entries = 1;
        r->entries[0].cpu = 3;
        r->entries[0].cgroup = 1;
        ASSERT_OK(perf_writer_add(w, r, 2000000000, 3000000000));
        ASSERT_OK(perf_writer_finish(w, &samples, &omitted));
        perf_writer_free(w);
        ASSERT_U64_EQ(samples, n_pids + 1);
        ASSERT_U64_EQ(omitted, 0);

        buf = read_back(f, &size);
        uint64_t v[7];
        memcpy(v, buf, sizeof v);
        for (uint64_t off = v[5]; off < v[5] + v[6];) {
                struct perf_event_header h;
                uint32_t pid;

                memcpy(&h, buf + off, sizeof h);
                ASSERT_TRUE(h.size >= sizeof h && off + h.size <= v[5] + v[6]);
                if (h.type == PERF_RECORD_SAMPLE) {
                        uint64_t s[6], chain[5];

                        memcpy(s, buf + off + sizeof h, sizeof s);
                        pid = (uint32_t) s[1];
                        ASSERT_TRUE(pid >= 1 && pid <= n_pids);
                        if (commed[pid] != 1)
                                TEST_FAIL_("sample of pid %u without its COMM before it", pid);
                        ASSERT_EQ(s[5], 5);     /* kernel context, 1, user context, 2 */
                        memcpy(chain, buf + off + sizeof h + sizeof s, sizeof chain);
                        /* The cgroup after the chain: the record's id, for the odd pids. */
                        uint64_t cg;
                        memcpy(&cg, buf + off + sizeof h + sizeof s + sizeof chain, sizeof cg);
                        ASSERT_U64_EQ(cg, pid % 2 == 0 || n_samples == n_pids ? cgroup_id : 0);
                        in_cgroup += cg != 0;
                        ASSERT_U64_EQ(chain[0], (uint64_t) PERF_CONTEXT_KERNEL);
                        ASSERT_U64_EQ(chain[1], 0xffffffff81300100ull);
                        ASSERT_U64_EQ(chain[2], (uint64_t) PERF_CONTEXT_USER);
                        /* The file's range, at the frames' offsets. */
                        ASSERT_U64_EQ(chain[3] - chain[4], 0x100);
                        ASSERT_U64_EQ(s[0], chain[1]);
                        if (n_samples == n_pids)
                                commed[pid] = 2;        /* seen again: the second part */
                        n_samples++;
                } else if (h.type == PERF_RECORD_COMM) {
                        memcpy(&pid, buf + off + sizeof h, sizeof pid);
                        ASSERT_TRUE(pid >= 1 && pid <= n_pids);
                        commed[pid] = 1;
                        n_comm++;
                } else if (h.type == PERF_RECORD_MMAP2)
                        n_mmap2++;
                else if (h.type == PERF_RECORD_CGROUP) {
                        memcpy(&cgroup_id, buf + off + sizeof h, sizeof cgroup_id);
                        ASSERT_STREQ(buf + off + sizeof h + 8, "/system.slice/prog.service");
                        n_cgroup_records++;
                }
                off += h.size;
        }
        ASSERT_EQ(n_samples, n_pids + 1);
        /* Once, and again after the tables were forgotten. */
        ASSERT_EQ(n_cgroup_records, 2);
        ASSERT_EQ(cgroup_id, 2);        /* a new id for the second record */
        ASSERT_EQ(in_cgroup, n_pids / 2 + 1);
        /* pid 1's COMM and MMAP2 were written again for the second part. */
        ASSERT_EQ(commed[1], 2);
        ASSERT_EQ(n_comm, n_pids + 1);
        ASSERT_EQ(n_mmap2, n_pids + 1);
        free(buf);
        free(commed);
        query_result_free(r);
}
