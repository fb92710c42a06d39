/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Decoding of perf ring-buffer records. Layouts are the ones documented in
 * include/uapi/linux/perf_event.h next to enum perf_event_type. Records come
 * from the kernel, but a corrupt or desynchronised ring buffer (or a fuzzer)
 * can present anything: every field is bounds-checked against header.size
 * before it is read, and loads go through memcpy so any alignment works. */

#include <errno.h>
#include <string.h>

#include "macro.h"
#include "perf/perf-record.h"

/* Sample bits whose fields sit before PERF_SAMPLE_CALLCHAIN and have a
 * fixed size, and PERF_SAMPLE_CGROUP (a u64 after the callchain when none
 * of the bits between them is set); PERF_SAMPLE_READ is variable (depends
 * on read_format, which the decoder does not know) and the rest after the
 * callchain is not used by perfsnapd, so those are refused rather than
 * misparsed. */
#define SAMPLE_TYPE_SUPPORTED                                                   \
        (PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID |            \
         PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR | PERF_SAMPLE_ID |                 \
         PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD |         \
         PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_CGROUP)

/* A bounded cursor over [p, end). */
typedef struct cursor {
        const uint8_t *p, *end;
} cursor;

static size_t cursor_left(const cursor *c) {
        return (size_t) (c->end - c->p);
}

static int cursor_take(cursor *c, void *dst, size_t n) {
        if (cursor_left(c) < n)
                return -EBADMSG;
        if (dst)
                memcpy(dst, c->p, n);
        c->p += n;
        return 0;
}

static int cursor_u64(cursor *c, uint64_t *v) {
        return cursor_take(c, v, sizeof(*v));
}

/* Two u32 packed in one u64 slot (pid/tid, cpu/res). */
static int cursor_u32_pair(cursor *c, uint32_t *a, uint32_t *b) {
        uint32_t v[2];
        int r = cursor_take(c, v, sizeof(v));
        if (r < 0)
                return r;
        if (a)
                *a = v[0];
        if (b)
                *b = v[1];
        return 0;
}

/* A char[] that the kernel pads to 8 bytes; it must end with a NUL before
 * the end of its area (the area runs up to the sample_id trailer). */
static int cursor_string(cursor *c, const char **ret) {
        size_t n = cursor_left(c);
        const uint8_t *nul = memchr(c->p, 0, n);
        if (!nul)
                return -EBADMSG;
        *ret = (const char *) c->p;
        c->p = c->end;
        return 0;
}

size_t perf_sample_id_size(uint64_t sample_type) {
        /* struct sample_id (perf_event.h): { pid, tid } && TID, time && TIME,
         * id && ID, stream_id && STREAM_ID, { cpu, res } && CPU,
         * id && IDENTIFIER — each one u64 slot. */
        const uint64_t bits = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID |
                              PERF_SAMPLE_CPU | PERF_SAMPLE_IDENTIFIER;

        return sizeof(uint64_t) * (size_t) __builtin_popcountll(sample_type & bits);
}

/* The sample_id trailer sits at the very end of a non-sample record (after
 * a variable-length body such as a padded string), so it is located from
 * header.size backwards and the body is bounded by its start. */
/* Reads a sample_id trailer from t. */
static int parse_sample_id(cursor *t, uint64_t sample_type, perf_sample_id *sid) {
        int r;

        if (sample_type & PERF_SAMPLE_TID) {
                r = cursor_u32_pair(t, &sid->pid, &sid->tid);
                if (r < 0)
                        return r;
        }
        if (sample_type & PERF_SAMPLE_TIME) {
                r = cursor_u64(t, &sid->time);
                if (r < 0)
                        return r;
        }
        if (sample_type & PERF_SAMPLE_ID) {
                r = cursor_u64(t, &sid->id);
                if (r < 0)
                        return r;
        }
        if (sample_type & PERF_SAMPLE_STREAM_ID) {
                r = cursor_take(t, NULL, sizeof(uint64_t));
                if (r < 0)
                        return r;
        }
        if (sample_type & PERF_SAMPLE_CPU) {
                r = cursor_u32_pair(t, &sid->cpu, NULL);
                if (r < 0)
                        return r;
        }
        if (sample_type & PERF_SAMPLE_IDENTIFIER) {
                r = cursor_u64(t, &sid->id);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Takes the trailer off the end of body. */
static int split_sample_id(cursor *body, uint64_t sample_type, perf_sample_id *sid) {
        size_t n = perf_sample_id_size(sample_type);
        cursor t;

        if (cursor_left(body) < n)
                return -EBADMSG;
        t = (cursor) { body->end - n, body->end };
        body->end -= n;
        return parse_sample_id(&t, sample_type, sid);
}

/* KSYMBOL and BPF_EVENT records may be longer than their contents: the
 * kernel adds the trailer's size to the record's shared header for every
 * session it writes the record to, and does not restore it
 * (perf_event_ksymbol_output(), perf_event_bpf_output()), so with another
 * session (a perf record) on the CPU, perfsnapd's copy can end in unused
 * bytes. Their trailer is read right after the body: 16 fixed bytes, for
 * KSYMBOL then the name, NUL-padded to 8 bytes. The body is cut there. */
static int split_sideband_sample_id(cursor *body, uint32_t type, uint64_t sample_type, perf_sample_id *sid) {
        size_t n = perf_sample_id_size(sample_type), left = cursor_left(body), len = 16;
        cursor t;

        if (left < len + n)
                return -EBADMSG;
        if (type == PERF_RECORD_KSYMBOL) {
                const uint8_t *nul = memchr(body->p + len, 0, left - len - n);

                if (!nul)
                        return -EBADMSG;
                len += ((size_t) (nul - (body->p + len)) + 1 + 7) & ~(size_t) 7;
                if (left < len + n)
                        return -EBADMSG;
        }
        t = (cursor) { body->p + len, body->p + len + n };
        body->end = body->p + len;
        return parse_sample_id(&t, sample_type, sid);
}

static int decode_sample(cursor *c, uint64_t sample_type, uint16_t misc, perf_record *rec) {
        perf_sample *s = &rec->sample;
        int r;

        /* Field order of PERF_RECORD_SAMPLE (perf_event.h): identifier, ip,
         * pid/tid, time, addr, id, stream_id, cpu/res, period, read,
         * callchain { nr, ips[nr] }. */
        if (sample_type & PERF_SAMPLE_IDENTIFIER) {
                r = cursor_u64(c, &s->id);
                if (r < 0)
                        return r;
        }
        if (sample_type & PERF_SAMPLE_IP) {
                r = cursor_u64(c, &s->ip);
                if (r < 0)
                        return r;
        }
        if (sample_type & PERF_SAMPLE_TID) {
                r = cursor_u32_pair(c, &s->pid, &s->tid);
                if (r < 0)
                        return r;
        }
        if (sample_type & PERF_SAMPLE_TIME) {
                r = cursor_u64(c, &s->time);
                if (r < 0)
                        return r;
        }
        if (sample_type & PERF_SAMPLE_ADDR) {
                r = cursor_take(c, NULL, sizeof(uint64_t));
                if (r < 0)
                        return r;
        }
        if (sample_type & PERF_SAMPLE_ID) {
                r = cursor_u64(c, &s->id);
                if (r < 0)
                        return r;
        }
        if (sample_type & PERF_SAMPLE_STREAM_ID) {
                r = cursor_take(c, NULL, sizeof(uint64_t));
                if (r < 0)
                        return r;
        }
        if (sample_type & PERF_SAMPLE_CPU) {
                r = cursor_u32_pair(c, &s->cpu, NULL);
                if (r < 0)
                        return r;
        }
        if (sample_type & PERF_SAMPLE_PERIOD) {
                r = cursor_u64(c, &s->period);
                if (r < 0)
                        return r;
        }
        if (sample_type & PERF_SAMPLE_CALLCHAIN) {
                r = cursor_u64(c, &s->nr);
                if (r < 0)
                        return r;
                /* Compare counts, not nr * 8, so a huge nr cannot overflow. */
                if (s->nr > cursor_left(c) / sizeof(uint64_t))
                        return -EBADMSG;
                s->ips = (const uint64_t *) (const void *) c->p;
                c->p += s->nr * sizeof(uint64_t);
        }
        if (sample_type & PERF_SAMPLE_CGROUP) {
                r = cursor_u64(c, &s->cgroup);
                if (r < 0)
                        return r;
        }
        /* With only fixed-size fields and the callchain, the kernel's record
         * ends exactly here; leftover bytes mean a different sample_type or
         * a desynchronised stream. */
        if (cursor_left(c) != 0)
                return -EBADMSG;

        s->user = (misc & PERF_RECORD_MISC_CPUMODE_MASK) == PERF_RECORD_MISC_USER;
        rec->sid = (perf_sample_id) {
                .pid = s->pid,
                .tid = s->tid,
                .time = s->time,
                .cpu = s->cpu,
                .id = s->id,
        };
        return 0;
}

static int decode_comm(cursor *c, uint16_t misc, perf_comm *comm) {
        int r;

        /* { u32 pid, tid; char comm[]; } */
        r = cursor_u32_pair(c, &comm->pid, &comm->tid);
        if (r < 0)
                return r;
        r = cursor_string(c, &comm->comm);
        if (r < 0)
                return r;
        comm->exec = misc & PERF_RECORD_MISC_COMM_EXEC;
        return 0;
}

static int decode_cgroup(cursor *c, perf_cgroup *cg) {
        int r;

        /* { u64 id; char path[]; } */
        r = cursor_u64(c, &cg->id);
        if (r < 0)
                return r;
        return cursor_string(c, &cg->path);
}

static int decode_task(cursor *c, perf_task *t) {
        int r;

        /* FORK and EXIT: { u32 pid, ppid; u32 tid, ptid; u64 time; } */
        r = cursor_u32_pair(c, &t->pid, &t->ppid);
        if (r < 0)
                return r;
        r = cursor_u32_pair(c, &t->tid, &t->ptid);
        if (r < 0)
                return r;
        return cursor_u64(c, &t->time);
}

static int decode_mmap2(cursor *c, uint16_t misc, perf_mmap2 *m) {
        uint8_t id[24];
        int r;

        /* { u32 pid, tid; u64 addr, len, pgoff;
         *   union { { u32 maj, min; u64 ino, ino_generation; }
         *           { u8 build_id_size, __reserved_1; u16 __reserved_2;
         *             u8 build_id[20]; } };
         *   u32 prot, flags; char filename[]; }
         * The build-id form is flagged by PERF_RECORD_MISC_MMAP_BUILD_ID
         * (attr.build_id, Linux 5.12+). */
        r = cursor_u32_pair(c, &m->pid, &m->tid);
        if (r < 0)
                return r;
        r = cursor_u64(c, &m->addr);
        if (r < 0)
                return r;
        r = cursor_u64(c, &m->len);
        if (r < 0)
                return r;
        r = cursor_u64(c, &m->pgoff);
        if (r < 0)
                return r;
        r = cursor_take(c, id, sizeof(id));
        if (r < 0)
                return r;
        if (misc & PERF_RECORD_MISC_MMAP_BUILD_ID) {
                if (id[0] > sizeof(m->build_id))
                        return -EBADMSG;
                m->build_id_size = id[0];
                memcpy(m->build_id, id + 4, m->build_id_size);
        } else {
                memcpy(&m->maj, id, sizeof(uint32_t));
                memcpy(&m->min, id + 4, sizeof(uint32_t));
                memcpy(&m->ino, id + 8, sizeof(uint64_t));
                memcpy(&m->ino_generation, id + 16, sizeof(uint64_t));
        }
        r = cursor_u32_pair(c, &m->prot, &m->flags);
        if (r < 0)
                return r;
        return cursor_string(c, &m->filename);
}

static int decode_ksymbol(cursor *c, perf_ksymbol *k) {
        uint32_t len;
        uint16_t tf[2];
        int r;

        /* { u64 addr; u32 len; u16 ksym_type; u16 flags; char name[]; } */
        r = cursor_u64(c, &k->addr);
        if (r < 0)
                return r;
        r = cursor_take(c, &len, sizeof(len));
        if (r < 0)
                return r;
        r = cursor_take(c, tf, sizeof(tf));
        if (r < 0)
                return r;
        k->len = len;
        k->ksym_type = tf[0];
        k->flags = tf[1];
        return cursor_string(c, &k->name);
}

static int decode_bpf_event(cursor *c, perf_bpf_event *b) {
        uint16_t tf[2];
        int r;

        /* { u16 type; u16 flags; u32 id; u8 tag[BPF_TAG_SIZE = 8]; } */
        r = cursor_take(c, tf, sizeof(tf));
        if (r < 0)
                return r;
        r = cursor_take(c, &b->id, sizeof(b->id));
        if (r < 0)
                return r;
        r = cursor_take(c, b->tag, sizeof(b->tag));
        if (r < 0)
                return r;
        b->type = tf[0];
        b->flags = tf[1];
        return 0;
}

int perf_record_decode(const void *data, size_t size, uint64_t sample_type, perf_record *ret) {
        struct perf_event_header h;
        perf_record rec = {};
        cursor c;
        int r;

        if (!data || !ret)
                return -EINVAL;
        if (sample_type & ~(uint64_t) SAMPLE_TYPE_SUPPORTED)
                return -EOPNOTSUPP;
        if (size < sizeof(h))
                return -EBADMSG;
        memcpy(&h, data, sizeof(h));
        if (h.size < sizeof(h) || h.size > size)
                return -EBADMSG;

        rec.type = h.type;
        rec.misc = h.misc;
        rec.size = h.size;
        c = (cursor) { (const uint8_t *) data + sizeof(h), (const uint8_t *) data + h.size };

        switch (h.type) {

        case PERF_RECORD_SAMPLE:
                r = decode_sample(&c, sample_type, h.misc, &rec);
                break;

        case PERF_RECORD_COMM:
                r = split_sample_id(&c, sample_type, &rec.sid);
                if (r >= 0)
                        r = decode_comm(&c, h.misc, &rec.comm);
                break;

        case PERF_RECORD_FORK:
        case PERF_RECORD_EXIT:
                r = split_sample_id(&c, sample_type, &rec.sid);
                if (r >= 0)
                        r = decode_task(&c, &rec.task);
                break;

        case PERF_RECORD_MMAP2:
                r = split_sample_id(&c, sample_type, &rec.sid);
                if (r >= 0)
                        r = decode_mmap2(&c, h.misc, &rec.mmap2);
                break;

        case PERF_RECORD_CGROUP:
                r = split_sample_id(&c, sample_type, &rec.sid);
                if (r >= 0)
                        r = decode_cgroup(&c, &rec.cgroup);
                break;

        case PERF_RECORD_LOST:
                /* { u64 id; u64 lost; } */
                r = split_sample_id(&c, sample_type, &rec.sid);
                if (r >= 0)
                        r = cursor_u64(&c, &rec.lost.id);
                if (r >= 0)
                        r = cursor_u64(&c, &rec.lost.lost);
                break;

        case PERF_RECORD_LOST_SAMPLES:
                /* { u64 lost; } — the event is named by the trailer. */
                r = split_sample_id(&c, sample_type, &rec.sid);
                if (r >= 0)
                        r = cursor_u64(&c, &rec.lost.lost);
                rec.lost.id = rec.sid.id;
                break;

        case PERF_RECORD_KSYMBOL:
                r = split_sideband_sample_id(&c, h.type, sample_type, &rec.sid);
                if (r >= 0)
                        r = decode_ksymbol(&c, &rec.ksymbol);
                break;

        case PERF_RECORD_BPF_EVENT:
                r = split_sideband_sample_id(&c, h.type, sample_type, &rec.sid);
                if (r >= 0)
                        r = decode_bpf_event(&c, &rec.bpf);
                break;

        default:
                /* Unknown to us (THROTTLE, SWITCH, newer kernels' types):
                 * the caller skips it by header.size. */
                *ret = rec;
                return 0;
        }
        if (r < 0)
                return r;
        /* Fixed bodies are followed directly by the trailer (strings consume
         * their padded area): bytes left over mean the record is not what
         * its type says. */
        if (cursor_left(&c) != 0)
                return -EBADMSG;

        *ret = rec;
        return 0;
}

int perf_record_time(const void *data, size_t size, uint64_t sample_type, uint64_t *ret_time) {
        struct perf_event_header h;
        perf_sample_id sid = {};
        uint64_t t = 0;
        cursor c;
        int r;

        if (!data || !ret_time)
                return -EINVAL;
        if (sample_type & ~(uint64_t) SAMPLE_TYPE_SUPPORTED)
                return -EOPNOTSUPP;
        if (!(sample_type & PERF_SAMPLE_TIME))
                return -ENODATA;
        if (size < sizeof(h))
                return -EBADMSG;
        memcpy(&h, data, sizeof(h));
        if (h.size < sizeof(h) || h.size > size)
                return -EBADMSG;
        c = (cursor) { (const uint8_t *) data + sizeof(h), (const uint8_t *) data + h.size };

        switch (h.type) {

        case PERF_RECORD_SAMPLE:
                /* time follows identifier, ip and pid/tid (decode_sample()'s order) */
                r = cursor_take(&c, NULL, sizeof(uint64_t) * (size_t) (!!(sample_type & PERF_SAMPLE_IDENTIFIER) +
                                                                        !!(sample_type & PERF_SAMPLE_IP) +
                                                                        !!(sample_type & PERF_SAMPLE_TID)));
                if (r >= 0)
                        r = cursor_u64(&c, &t);
                break;

        /* the types perf_record_decode() reads a sample_id trailer from */
        case PERF_RECORD_COMM:
        case PERF_RECORD_FORK:
        case PERF_RECORD_EXIT:
        case PERF_RECORD_MMAP2:
        case PERF_RECORD_CGROUP:
        case PERF_RECORD_LOST:
        case PERF_RECORD_LOST_SAMPLES:
                r = split_sample_id(&c, sample_type, &sid);
                t = sid.time;
                break;

        case PERF_RECORD_KSYMBOL:
        case PERF_RECORD_BPF_EVENT:
                r = split_sideband_sample_id(&c, h.type, sample_type, &sid);
                t = sid.time;
                break;

        default:
                return -ENODATA;
        }
        if (r < 0)
                return r;
        *ret_time = t;
        return 0;
}
