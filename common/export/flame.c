/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The call tree of a Query answer's stacks, and text escaping, shared by
 * the export writers (export.h). */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "export.h"
#include "macro.h"

int stack_path_cmp(const query_stack *a, const query_stack *b) {
        int d = strcmp(a->comm, b->comm);

        for (size_t i = 0; d == 0 && i < a->n_frames && i < b->n_frames; i++)
                d = strcmp(a->frames[i], b->frames[i]);
        if (d != 0)
                return d;
        return a->n_frames < b->n_frames ? -1 : a->n_frames > b->n_frames;
}

static const query_result *sort_result;

static int index_cmp(const void *x, const void *y) {
        size_t i = *(const size_t *) x, j = *(const size_t *) y;
        int d = stack_path_cmp(sort_result->stacks + i, sort_result->stacks + j);

        return d != 0 ? d : i < j ? -1 : i > j;
}

int stacks_by_path(const query_result *r, size_t **ret) {
        size_t *v = calloc(MAX(r->n_stacks, (size_t) 1), sizeof(size_t));

        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < r->n_stacks; i++)
                v[i] = i;
        /* perfsnapctl is single-threaded: qsort() has no context argument. */
        sort_result = r;
        qsort(v, r->n_stacks, sizeof(size_t), index_cmp);
        sort_result = NULL;
        *ret = v;
        return 0;
}

static int add_node(flame_tree *t, const char *name, uint32_t parent, uint32_t depth, int kind) {
        int r = array_reserve_one((void **) &t->nodes, &t->alloc, t->n, sizeof(flame_node));

        if (r < 0)
                return r;
        if (t->n >= UINT32_MAX)
                return -E2BIG;
        t->nodes[t->n++] = (flame_node) { .name = name, .parent = parent, .depth = depth, .kind = kind };
        t->max_depth = MAX(t->max_depth, depth);
        return 0;
}

void flame_tree_done(flame_tree *t) {
        free(t->nodes);
        *t = (flame_tree) {};
}

/* The stacks in path order: each shares a prefix with the one before, and
 * only the rest of it makes new nodes, so that children follow their
 * parent and equal paths are one node. */
int flame_tree_build(const query_result *r, flame_tree *ret) {
        _cleanup_free_ size_t *order = NULL, *open = NULL;
        flame_tree t = {};
        const query_stack *prev = NULL;
        size_t max_len = 0;
        int k;

        for (size_t i = 0; i < r->n_stacks; i++)
                max_len = MAX(max_len, r->stacks[i].n_frames);
        /* open[d]: the node at depth d of the previous stack's path. */
        open = calloc(max_len + 2, sizeof(size_t));
        k = open ? stacks_by_path(r, &order) : -ENOMEM;
        if (k >= 0)
                k = add_node(&t, "all", 0, 0, FLAME_ROOT);

        for (size_t i = 0; k >= 0 && i < r->n_stacks; i++) {
                const query_stack *st = r->stacks + order[i];
                size_t common = 0;      /* path elements shared with prev: comm, then frames */

                if (prev && strcmp(prev->comm, st->comm) == 0) {
                        common = 1;
                        while (common - 1 < prev->n_frames && common - 1 < st->n_frames &&
                               strcmp(prev->frames[common - 1], st->frames[common - 1]) == 0)
                                common++;
                }
                for (size_t d = common; k >= 0 && d < st->n_frames + 1; d++) {
                        int kind = d == 0 ? FLAME_COMM : d - 1 >= st->n_frames - st->n_kernel ? FLAME_KERNEL : FLAME_USER;

                        k = add_node(&t, d == 0 ? st->comm : st->frames[d - 1], (uint32_t) open[d], (uint32_t) d + 1,
                                     kind);
                        open[d + 1] = t.n - 1;
                }
                if (k < 0)
                        break;
                /* The samples count in every node of the path. */
                t.nodes[0].value += st->samples;
                for (size_t d = 0; d < st->n_frames + 1; d++)
                        t.nodes[open[d + 1]].value += st->samples;
                prev = st;
        }
        if (k < 0) {
                flame_tree_done(&t);
                return k;
        }

        /* x: a child starts where its previous sibling ended. Reusing x of
         * the parent as the cursor of its next child is not possible, so
         * keep one per depth: children of a node are consecutive in
         * depth-first order at depth + 1, interrupted only by their own
         * descendants. */
        _cleanup_free_ uint64_t *cursor = calloc((size_t) t.max_depth + 2, sizeof(uint64_t));
        if (!cursor) {
                flame_tree_done(&t);
                return -ENOMEM;
        }
        for (size_t i = 1; i < t.n; i++) {
                flame_node *n = t.nodes + i;
                const flame_node *p = t.nodes + n->parent;

                /* The first child of p: start at p's x. */
                if (i == n->parent + 1)
                        cursor[n->depth] = p->x;
                n->x = cursor[n->depth];
                cursor[n->depth] += n->value;
        }
        *ret = t;
        return 0;
}

/* The length of the valid UTF-8 sequence at s (1..4), or 0. */
static size_t utf8_len(const unsigned char *s) {
        if (s[0] < 0x80)
                return 1;
        if (s[0] >= 0xc2 && s[0] <= 0xdf)
                return (s[1] & 0xc0) == 0x80 ? 2 : 0;
        if (s[0] >= 0xe0 && s[0] <= 0xef) {
                if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80)
                        return 0;
                if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0))
                        return 0;       /* overlong, or a surrogate */
                return 3;
        }
        if (s[0] >= 0xf0 && s[0] <= 0xf4) {
                if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80)
                        return 0;
                if ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))
                        return 0;
                return 4;
        }
        return 0;
}

#define REPLACEMENT "\xef\xbf\xbd"

void fput_xml(FILE *f, const char *s) {
        for (const unsigned char *p = (const unsigned char *) s; *p;) {
                size_t n = utf8_len(p);

                if (n == 0 || *p < 0x20 || *p == 0x7f) {
                        fputs(REPLACEMENT, f);
                        p += MAX(n, (size_t) 1);
                        continue;
                }
                if (*p == '<')
                        fputs("&lt;", f);
                else if (*p == '>')
                        fputs("&gt;", f);
                else if (*p == '&')
                        fputs("&amp;", f);
                else if (*p == '"')
                        fputs("&quot;", f);
                else
                        fwrite(p, 1, n, f);
                p += n;
        }
}

void fput_json(FILE *f, const char *s) {
        fputc('"', f);
        for (const unsigned char *p = (const unsigned char *) s; *p;) {
                size_t n = utf8_len(p);

                if (n == 0 || *p < 0x20 || *p == 0x7f) {
                        fputs("\\ufffd", f);
                        p += MAX(n, (size_t) 1);
                        continue;
                }
                if (*p == '"' || *p == '\\')
                        fprintf(f, "\\%c", *p);
                else if (*p == '<' || *p == '>' || *p == '&')
                        fprintf(f, "\\u%04x", *p);
                else
                        fwrite(p, 1, n, f);
                p += n;
        }
        fputc('"', f);
}
