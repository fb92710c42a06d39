/* SPDX-License-Identifier: GPL-2.0-or-later */
/* perfsnapctl export --format svg and --format html: flame graphs of a
 * Query answer's stacks. The SVG is laid out here (one rectangle per node
 * of the merged call tree, flame_tree_build()); the HTML carries the
 * stacks themselves, with their counts per timeline slot, and lays them
 * out in the browser (flamegraph.html: zoom, search, tooltips, and a time
 * strip whose selection redraws the graph for that span). */

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "export.h"
#include "flamegraph-html.h"
#include "hashmap.h"
#include "macro.h"

#define SVG_WIDTH 1200
#define SVG_PAD 10
#define SVG_ROW 16
#define SVG_TOP 48
#define SVG_CHAR_PX 7.0         /* an average glyph of 12px monospace */
#define SVG_MIN_PX 0.1          /* narrower frames are left out */

static uint32_t name_hash(const char *s) {
        uint32_t h = 2166136261u;

        for (; *s; s++)
                h = (h ^ (unsigned char) *s) * 16777619u;
        return h;
}

/* Kernel frames warm, user frames cool, commands and the root grey; the
 * shade from the name, so a function keeps its colour across graphs. */
static void node_colour(const flame_node *n, char *buf, size_t size) {
        uint32_t h = name_hash(n->name);

        switch (n->kind) {
        case FLAME_KERNEL:
                snprintf(buf, size, "hsl(%u,85%%,%u%%)", 8 + h % 32, 55 + (h >> 8) % 15);
                break;
        case FLAME_USER:
                snprintf(buf, size, "hsl(%u,60%%,%u%%)", 185 + h % 40, 62 + (h >> 8) % 15);
                break;
        default:
                snprintf(buf, size, "hsl(0,0%%,%u%%)", 72 + h % 10);
        }
}

static void format_window(const export_input *in, char *buf, size_t size) {
        char a[32] = "?", b[32] = "?";
        time_t s = (time_t) (in->since_ns / 1000000000), u = (time_t) (in->until_ns / 1000000000);
        struct tm tm;

        if (localtime_r(&s, &tm))
                strftime(a, sizeof a, "%Y-%m-%d %H:%M:%S", &tm);
        if (localtime_r(&u, &tm))
                strftime(b, sizeof b, "%Y-%m-%d %H:%M:%S", &tm);
        snprintf(buf, size, "%s .. %s", a, b);
}

/* The samples of the answer's stacks (less than the total when the
 * daemon's stack cap or --dso left some out). */
static uint64_t stacks_total(const query_result *r) {
        uint64_t t = 0;

        for (size_t i = 0; i < r->n_stacks; i++)
                t += r->stacks[i].samples;
        return t;
}

int export_svg(FILE *f, const export_input *in) {
        _cleanup_(flame_tree_done) flame_tree t = {};
        char window[80], colour[40];
        double scale;
        unsigned height;
        int r;

        r = flame_tree_build(in->r, &t);
        if (r < 0)
                return r;
        height = SVG_TOP + (t.max_depth + 1) * SVG_ROW + SVG_PAD;
        scale = t.nodes[0].value > 0 ? (double) (SVG_WIDTH - 2 * SVG_PAD) / (double) t.nodes[0].value : 0;
        format_window(in, window, sizeof window);

        fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
                   "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%u\" "
                   "viewBox=\"0 0 %d %u\" font-family=\"monospace\" font-size=\"12\">\n"
                   "<rect x=\"0\" y=\"0\" width=\"100%%\" height=\"100%%\" fill=\"#f8f8f4\"/>\n"
                   "<text x=\"%d\" y=\"20\" font-size=\"15\">",
                SVG_WIDTH, height, SVG_WIDTH, height, SVG_PAD);
        fput_xml(f, in->title);
        fprintf(f, "</text>\n<text x=\"%d\" y=\"38\" fill=\"#555\">", SVG_PAD);
        fput_xml(f, window);
        if (export_offcpu(in))
                fprintf(f, ", %" PRIu64 " ns off CPU (%" PRIu64 " in these stacks); "
                           "kernel frames orange, user frames blue</text>\n",
                        in->r->total_samples, t.nodes[0].value);
        else
                fprintf(f, ", %" PRIu64 " samples (%" PRIu64 " in these stacks), %" PRIu64 " lost; "
                           "kernel frames orange, user frames blue</text>\n",
                        in->r->total_samples, t.nodes[0].value, in->r->lost);

        for (size_t i = 0; i < t.n; i++) {
                const flame_node *n = t.nodes + i;
                double w = (double) n->value * scale, x = SVG_PAD + (double) n->x * scale;
                unsigned y = height - SVG_PAD - (n->depth + 1) * SVG_ROW;
                size_t fit;

                if (w < SVG_MIN_PX)
                        continue;
                node_colour(n, colour, sizeof colour);
                fputs("<g><title>", f);
                fput_xml(f, n->name);
                fprintf(f, " (%" PRIu64 " %s, %.2f%%)</title><rect x=\"%.1f\" y=\"%u\" width=\"%.1f\" "
                           "height=\"%d\" fill=\"%s\" rx=\"2\"/>",
                        n->value, export_offcpu(in) ? "ns off CPU" : "samples",
                        100.0 * (double) n->value / (double) t.nodes[0].value, x, y, w, SVG_ROW - 1, colour);
                fit = (size_t) ((w - 6) / SVG_CHAR_PX);
                if (fit >= 3) {
                        _cleanup_free_ char *label = strdup(n->name);

                        if (!label)
                                return -ENOMEM;
                        if (strlen(label) > fit) {
                                /* Cut at a character boundary, then "..". */
                                size_t k = fit - 2;
                                while (k > 0 && ((unsigned char) label[k] & 0xc0) == 0x80)
                                        k--;
                                strcpy(label + k, "..");
                        }
                        fprintf(f, "<text x=\"%.1f\" y=\"%u\">", x + 3, y + SVG_ROW - 4);
                        fput_xml(f, label);
                        fputs("</text>", f);
                }
                fputs("</g>\n", f);
        }
        fputs("</svg>\n", f);
        return ferror(f) ? -EIO : 0;
}

/* ---- HTML ---- */

/* The stacks as [comm, [frames], kernel frames, [slot, samples, ...]]:
 * stacks of equal paths (other pids, CPUs or slots) are one, with their
 * samples per slot (-1: no timeline). */
static int write_html_stacks(FILE *f, const query_result *r, strtab *nm) {
        _cleanup_free_ size_t *order = NULL;
        int k;

        k = stacks_by_path(r, &order);
        if (k < 0)
                return k;
        fputs("\"stacks\":[", f);
        for (size_t i = 0; i < r->n_stacks;) {
                const query_stack *st = r->stacks + order[i];
                size_t id, j;

                fputs(i > 0 ? ",\n[" : "\n[", f);
                k = strtab_id(nm, st->comm, &id);
                if (k < 0)
                        return k;
                fprintf(f, "%zu,[", id);
                for (size_t d = 0; d < st->n_frames; d++) {
                        k = strtab_id(nm, st->frames[d], &id);
                        if (k < 0)
                                return k;
                        fprintf(f, d > 0 ? ",%zu" : "%zu", id);
                }
                fprintf(f, "],%zu,[", st->n_kernel);
                /* Its counts per slot: the equal paths that follow, whose
                 * slots may repeat (other pids or CPUs) in any order. */
                for (j = i; j < r->n_stacks && stack_path_cmp(st, r->stacks + order[j]) == 0; j++) {
                        const query_stack *o = r->stacks + order[j];

                        fprintf(f, j > i ? ",%d,%" PRIu64 : "%d,%" PRIu64, o->slot, o->samples);
                }
                fputs("]]", f);
                i = j;
        }
        fputs("],\n", f);
        return 0;
}

int export_speedscope(FILE *f, const export_input *in) {
        const query_result *r = in->r;
        _cleanup_(strtab_done) strtab nm = {};
        uint64_t total = stacks_total(r);
        size_t id;
        int k;

        k = strtab_init(&nm);
        if (k < 0)
                return k;
        fputs("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"exporter\":\"perfsnapd\",\"name\":", f);
        fput_json(f, in->title);
        fputs(",\"activeProfileIndex\":0,\"profiles\":[{\"type\":\"sampled\",\"name\":", f);
        fput_json(f, in->title);
        /* Weights in CPU time when the sampling period is known. */
        fprintf(f, ",\"unit\":\"%s\",\"startValue\":0,\"endValue\":%" PRIu64 ",\"samples\":[",
                in->period_ns ? "nanoseconds" : "none", in->period_ns ? total * in->period_ns : total);
        for (size_t i = 0; i < r->n_stacks; i++) {
                const query_stack *st = r->stacks + i;

                k = strtab_id(&nm, st->comm, &id);
                if (k < 0)
                        return k;
                fprintf(f, i > 0 ? ",\n[%zu" : "\n[%zu", id);
                for (size_t d = 0; d < st->n_frames; d++) {
                        k = strtab_id(&nm, st->frames[d], &id);
                        if (k < 0)
                                return k;
                        fprintf(f, ",%zu", id);
                }
                fputc(']', f);
        }
        fputs("],\"weights\":[", f);
        for (size_t i = 0; i < r->n_stacks; i++)
                fprintf(f, i > 0 ? ",%" PRIu64 : "%" PRIu64,
                        in->period_ns ? r->stacks[i].samples * in->period_ns : r->stacks[i].samples);
        fputs("]}],\"shared\":{\"frames\":[", f);
        for (size_t i = 0; i < nm.n; i++) {
                fputs(i > 0 ? ",{\"name\":" : "{\"name\":", f);
                fput_json(f, nm.v[i]);
                fputc('}', f);
        }
        fputs("]}}\n", f);
        return ferror(f) ? -EIO : 0;
}

int export_html(FILE *f, const export_input *in) {
        const query_result *r = in->r;
        _cleanup_(strtab_done) strtab nm = {};
        const char *marker = "@DATA@", *at = strstr(flamegraph_html, marker);
        char window[80];
        int k;

        if (!at)
                return -EINVAL;
        k = strtab_init(&nm);
        if (k < 0)
                return k;
        format_window(in, window, sizeof window);

        fwrite(flamegraph_html, 1, (size_t) (at - flamegraph_html), f);
        fputs("{\"title\":", f);
        fput_json(f, in->title);
        fputs(",\"window\":", f);
        fput_json(f, window);
        fprintf(f, ",\"since_ns\":%" PRIu64 ",\"until_ns\":%" PRIu64 ",\"total\":%" PRIu64 ",\"in_stacks\":%" PRIu64
                   ",\"lost\":%" PRIu64 ",\"period_ns\":%" PRIu64 ",\"offcpu\":%s,\n",
                in->since_ns, in->until_ns, r->total_samples, stacks_total(r), r->lost, in->period_ns,
                export_offcpu(in) ? "true" : "false");
        fprintf(f, "\"slot_ns\":%" PRIu64 ",\"timeline\":[", r->timeline_slot_ns);
        for (size_t i = 0; i < r->n_timeline; i++)
                fprintf(f, i > 0 ? ",%" PRIu64 : "%" PRIu64, r->timeline[i]);
        fputs("],\n", f);
        k = write_html_stacks(f, r, &nm);
        if (k < 0)
                return k;
        fputs("\"names\":[", f);
        for (size_t i = 0; i < nm.n; i++) {
                if (i > 0)
                        fputc(',', f);
                fput_json(f, nm.v[i]);
        }
        fputs("]}", f);
        fputs(at + strlen(marker), f);
        return ferror(f) ? -EIO : 0;
}
