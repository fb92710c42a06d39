/* SPDX-License-Identifier: GPL-2.0-or-later */
/* perfsnapctl export --format pprof: the answer's stacks as a
 * gzip-compressed profile.proto (profile.proto here), packed by
 * protobuf-c straight into a zlib gzip stream on the output.
 *
 * One Sample per stack of the answer, i.e. per distinct (comm, pid, CPU,
 * cgroup, stack): values "samples/count" and "cpu/nanoseconds" (samples
 * times the sampling period), labels comm, pid, cpu, context ("kernel"
 * when the sample was taken in the kernel, else "user"), and where the
 * answer tells cgroups apart the cgroup's path, its unit and container.
 * A Location and a Function per distinct (frame name, module), with the
 * module's Mapping (its path or "[name]", and build-id). Frames carry no addresses: they are named
 * already, so every Mapping says has_functions. */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "cgroup.h"
#include "export.h"
#include "hashmap.h"
#include "macro.h"
#include "profile.pb-c.h"

/* The string ids of the label keys and of their fixed values. */
typedef struct label_keys {
        int64_t comm, pid, cpu, context, kernel, user, unit, cgroup, container;
} label_keys;

/* pprof's string ids are int64_t. */
static int string_id(strtab *s, const char *str, int64_t *ret) {
        size_t id;
        int r = strtab_id(s, str, &id);

        *ret = (int64_t) id;
        return r;
}

/* The output: protobuf-c appends to this, and it deflates. */
typedef struct gz_buffer {
        ProtobufCBuffer base;
        gzFile gz;
        int error;
} gz_buffer;

static void gz_append(ProtobufCBuffer *b, size_t len, const uint8_t *data) {
        gz_buffer *g = (gz_buffer *) b;

        while (len > 0 && g->error == 0) {
                unsigned n = (unsigned) MIN(len, (size_t) (1u << 30));
                int w = gzwrite(g->gz, data, n);

                if (w <= 0) {
                        int e;
                        gzerror(g->gz, &e);
                        g->error = e == Z_ERRNO && errno != 0 ? -errno : -EIO;
                        return;
                }
                data += w;
                len -= (size_t) w;
        }
}

typedef struct pprof_ctx {
        strtab str;
        hashmap *loc_idx;       /* "module index\0name" -> location id */
        Perfsnap__Pprof__Location **locs;
        Perfsnap__Pprof__Function **funcs;
        size_t n_locs, alloc_locs, alloc_funcs;
        Perfsnap__Pprof__Mapping **maps;
        size_t n_maps;
        Perfsnap__Pprof__Sample **samples;
        size_t n_samples;
} pprof_ctx;

static void pprof_ctx_done(pprof_ctx *c) {
        strtab_done(&c->str);
        hashmap_free(c->loc_idx);
        for (size_t i = 0; i < c->n_locs; i++) {
                if (c->locs[i])
                        free(c->locs[i]->line ? c->locs[i]->line[0] : NULL);
                if (c->locs[i])
                        free(c->locs[i]->line);
                free(c->locs[i]);
                free(c->funcs[i]);
        }
        free(c->locs);
        free(c->funcs);
        for (size_t i = 0; i < c->n_maps; i++)
                free(c->maps[i]);
        free(c->maps);
        for (size_t i = 0; i < c->n_samples; i++) {
                Perfsnap__Pprof__Sample *s = c->samples[i];

                if (!s)
                        continue;
                free(s->location_id);
                free(s->value);
                if (s->label)
                        free(s->label[0]);      /* one allocation for all labels */
                free(s->label);
                free(s);
        }
        free(c->samples);
}

/* The location of a frame: one per (module, name). */
static int location_id(pprof_ctx *c, uint32_t module, const char *name, uint64_t *ret) {
        size_t len = strlen(name), klen = sizeof(uint32_t) + len;
        _cleanup_free_ char *key = malloc(klen);
        int64_t id, name_id, file_id = 0;
        int r;

        if (!key)
                return -ENOMEM;
        memcpy(key, &module, sizeof(uint32_t));
        memcpy(key + sizeof(uint32_t), name, len);
        if (hashmap_get(c->loc_idx, key, klen, &id) >= 0) {
                *ret = (uint64_t) id;
                return 0;
        }
        r = string_id(&c->str, name, &name_id);
        if (r >= 0 && module != UINT32_MAX)
                file_id = c->maps[module]->filename;
        if (r >= 0)
                r = array_reserve_one((void **) &c->locs, &c->alloc_locs, c->n_locs, sizeof(void *));
        if (r >= 0)
                r = array_reserve_one((void **) &c->funcs, &c->alloc_funcs, c->n_locs, sizeof(void *));
        if (r < 0)
                return r;

        Perfsnap__Pprof__Function *f = calloc(1, sizeof *f);
        Perfsnap__Pprof__Location *l = calloc(1, sizeof *l);
        Perfsnap__Pprof__Line *line = calloc(1, sizeof *line);
        Perfsnap__Pprof__Line **lines = calloc(1, sizeof *lines);
        c->locs[c->n_locs] = l;
        c->funcs[c->n_locs] = f;
        c->n_locs++;            /* freed with the context from here on */
        if (!f || !l || !line || !lines) {
                free(line);
                free(lines);
                if (l)
                        l->line = NULL;
                return -ENOMEM;
        }
        id = (int64_t) c->n_locs;
        perfsnap__pprof__function__init(f);
        f->id = (uint64_t) id;
        f->name = f->system_name = name_id;
        f->filename = file_id;
        perfsnap__pprof__line__init(line);
        line->function_id = (uint64_t) id;
        lines[0] = line;
        perfsnap__pprof__location__init(l);
        l->id = (uint64_t) id;
        l->mapping_id = module != UINT32_MAX ? module + 1 : 0;
        l->n_line = 1;
        l->line = lines;

        r = hashmap_put(c->loc_idx, key, klen, id);
        if (r < 0)
                return r;
        *ret = (uint64_t) id;
        return 0;
}

static void add_label(Perfsnap__Pprof__Sample *s, Perfsnap__Pprof__Label *l, int64_t key, int64_t str) {
        perfsnap__pprof__label__init(l);
        l->key = key;
        l->str = str;
        s->label[s->n_label++] = l;
}

/* Labels are strings: pprof drops a numeric label of 0 (pid 0, CPU 0),
 * and profile stores (Pyroscope, Parca) keep string labels only. */
static int number_id(strtab *s, int64_t v, int64_t *ret) {
        char buf[24];
        size_t id;
        int r;

        snprintf(buf, sizeof buf, "%" PRIi64, v);
        r = strtab_id_copy(s, buf, &id);
        *ret = (int64_t) id;
        return r;
}

/* A label of a string that does not outlive the call (copied); none for
 * "". */
static int add_copied_label(pprof_ctx *c, Perfsnap__Pprof__Sample *s, Perfsnap__Pprof__Label *l, int64_t key,
                            const char *str) {
        size_t id;
        int r;

        if (!str[0])
                return 0;
        r = strtab_id_copy(&c->str, str, &id);
        if (r < 0)
                return r;
        add_label(s, l, key, (int64_t) id);
        return 0;
}

static int make_sample(pprof_ctx *c, const export_input *in, const query_stack *st, const label_keys *k,
                       Perfsnap__Pprof__Sample **ret) {
        Perfsnap__Pprof__Sample *s = calloc(1, sizeof *s);
        int64_t comm_id, pid_id, cpu_id, id;
        bool cg = st->cgroup && st->cgroup[0];
        size_t n_labels = 2 + (st->pid >= 0) + (st->cpu >= 0) + 3 * cg;
        cgroup_info info = {};
        int r;

        if (!s)
                return -ENOMEM;
        *ret = s;               /* freed with the context */
        perfsnap__pprof__sample__init(s);
        /* One frame more for the comm, as the outermost caller: pprof's
         * graphs then split by command as perf report's do. */
        s->location_id = calloc(st->n_frames + 1, sizeof(uint64_t));
        s->value = calloc(2, sizeof(int64_t));
        s->label = calloc(n_labels, sizeof(void *));
        Perfsnap__Pprof__Label *labels = calloc(n_labels, sizeof(Perfsnap__Pprof__Label));
        if (s->label)
                s->label[0] = labels;
        if (!s->location_id || !s->value || !s->label || !labels)
                return -ENOMEM;

        for (size_t i = 0; i < st->n_frames; i++) {
                size_t j = st->n_frames - 1 - i;        /* leaf first */

                r = location_id(c, st->modules ? st->modules[j] : UINT32_MAX, st->frames[j], &s->location_id[i]);
                if (r < 0)
                        return r;
                s->n_location_id++;
        }
        r = location_id(c, UINT32_MAX, st->comm, &s->location_id[s->n_location_id]);
        if (r < 0)
                return r;
        s->n_location_id++;

        /* Off-CPU: one value, the nanoseconds waited. */
        s->n_value = export_offcpu(in) ? 1 : 2;
        s->value[0] = (int64_t) st->samples;
        s->value[1] = (int64_t) (st->samples * in->period_ns);

        r = string_id(&c->str, st->comm, &comm_id);
        if (r < 0)
                return r;
        add_label(s, &labels[s->n_label], k->comm, comm_id);
        if (st->pid >= 0) {
                r = number_id(&c->str, st->pid, &pid_id);
                if (r < 0)
                        return r;
                add_label(s, &labels[s->n_label], k->pid, pid_id);
        }
        if (st->cpu >= 0) {
                r = number_id(&c->str, st->cpu, &cpu_id);
                if (r < 0)
                        return r;
                add_label(s, &labels[s->n_label], k->cpu, cpu_id);
        }
        add_label(s, &labels[s->n_label], k->context, st->n_kernel > 0 ? k->kernel : k->user);
        /* Told apart by cgroup: its path, unit and container. */
        if (cg) {
                cgroup_info_of(st->cgroup, &info);
                r = string_id(&c->str, st->cgroup, &id);
                if (r < 0)
                        return r;
                add_label(s, &labels[s->n_label], k->cgroup, id);
                r = add_copied_label(c, s, &labels[s->n_label], k->unit, info.unit);
                if (r >= 0)
                        r = add_copied_label(c, s, &labels[s->n_label], k->container, info.container);
                if (r < 0)
                        return r;
        }
        return 0;
}

int export_pprof(int fd, const export_input *in) {
        const query_result *res = in->r;
        _cleanup_(pprof_ctx_done) pprof_ctx c = {};
        Perfsnap__Pprof__Profile p = PERFSNAP__PPROF__PROFILE__INIT;
        Perfsnap__Pprof__ValueType types[2] = { PERFSNAP__PPROF__VALUE_TYPE__INIT, PERFSNAP__PPROF__VALUE_TYPE__INIT };
        Perfsnap__Pprof__ValueType period = PERFSNAP__PPROF__VALUE_TYPE__INIT;
        Perfsnap__Pprof__ValueType *type_v[2] = { &types[0], &types[1] };
        int64_t empty, samples_id, count_id, cpu_id, ns_id, offcpu_id, comment_id;
        label_keys k;
        _cleanup_free_ char *comment = NULL;
        int r;

        r = strtab_init(&c.str);
        if (r >= 0)
                r = hashmap_new(&c.loc_idx);
        if (r < 0)
                return r;
        if ((export_offcpu(in) ?
             asprintf(&comment, "perfsnapd: %" PRIu64 " ns off CPU in the window", res->total_samples) :
             asprintf(&comment, "perfsnapd: %" PRIu64 " samples in the window, %" PRIu64 " lost", res->total_samples,
                      res->lost)) < 0) {
                comment = NULL;
                return -ENOMEM;
        }
        if ((r = string_id(&c.str, "", &empty)) < 0 ||
            (r = string_id(&c.str, "samples", &samples_id)) < 0 ||
            (r = string_id(&c.str, "count", &count_id)) < 0 ||
            (r = string_id(&c.str, "cpu", &cpu_id)) < 0 ||
            (r = string_id(&c.str, "nanoseconds", &ns_id)) < 0 ||
            (r = string_id(&c.str, "offcpu", &offcpu_id)) < 0 ||
            (r = string_id(&c.str, "comm", &k.comm)) < 0 ||
            (r = string_id(&c.str, "pid", &k.pid)) < 0 ||
            (r = string_id(&c.str, "cpu", &k.cpu)) < 0 ||
            (r = string_id(&c.str, "context", &k.context)) < 0 ||
            (r = string_id(&c.str, "kernel", &k.kernel)) < 0 ||
            (r = string_id(&c.str, "user", &k.user)) < 0 ||
            (r = string_id(&c.str, "unit", &k.unit)) < 0 ||
            (r = string_id(&c.str, "cgroup", &k.cgroup)) < 0 ||
            (r = string_id(&c.str, "container", &k.container)) < 0 ||
            (r = string_id(&c.str, comment, &comment_id)) < 0)
                return r;

        c.maps = calloc(MAX(res->n_modules, (size_t) 1), sizeof(void *));
        if (!c.maps)
                return -ENOMEM;
        for (size_t i = 0; i < res->n_modules; i++) {
                Perfsnap__Pprof__Mapping *m = calloc(1, sizeof *m);

                if (!m)
                        return -ENOMEM;
                c.maps[c.n_maps++] = m;
                perfsnap__pprof__mapping__init(m);
                m->id = i + 1;
                m->has_functions = true;
                if ((r = string_id(&c.str, res->modules[i].name, &m->filename)) < 0)
                        return r;
                if (res->modules[i].build_id && (r = string_id(&c.str, res->modules[i].build_id, &m->build_id)) < 0)
                        return r;
        }

        c.samples = calloc(MAX(res->n_stacks, (size_t) 1), sizeof(void *));
        if (!c.samples)
                return -ENOMEM;
        for (size_t i = 0; i < res->n_stacks; i++) {
                r = make_sample(&c, in, res->stacks + i, &k, &c.samples[c.n_samples++]);
                if (r < 0)
                        return r;
        }

        types[0].type = samples_id;
        types[0].unit = count_id;
        types[1].type = cpu_id;
        types[1].unit = ns_id;
        period.type = cpu_id;
        period.unit = ns_id;
        p.n_sample_type = 2;
        p.sample_type = type_v;
        p.default_sample_type = cpu_id;
        p.period_type = &period;
        p.period = (int64_t) in->period_ns;
        if (export_offcpu(in)) {
                types[0].type = offcpu_id;
                types[0].unit = ns_id;
                p.n_sample_type = 1;
                p.default_sample_type = offcpu_id;
                period.type = offcpu_id;
                p.period = 1;
        }
        p.time_nanos = (int64_t) in->since_ns;
        p.duration_nanos = (int64_t) (in->until_ns - in->since_ns);
        p.n_sample = c.n_samples;
        p.sample = c.samples;
        p.n_mapping = c.n_maps;
        p.mapping = c.maps;
        p.n_location = c.n_locs;
        p.location = c.locs;
        p.n_function = c.n_locs;
        p.function = c.funcs;
        p.n_string_table = c.str.n;
        p.string_table = c.str.v;
        p.n_comment = 1;
        p.comment = &comment_id;

        int fd2 = dup(fd);
        if (fd2 < 0)
                return -errno;
        gz_buffer g = { .base = { .append = gz_append }, .gz = gzdopen(fd2, "wb") };
        if (!g.gz) {
                close(fd2);
                return -ENOMEM;
        }
        protobuf_c_message_pack_to_buffer(&p.base, &g.base);
        errno = 0;
        r = gzclose(g.gz);
        if (g.error < 0)
                return g.error;
        if (r != Z_OK)
                return r == Z_ERRNO && errno != 0 ? -errno : -EIO;
        return 0;
}
