/* SPDX-License-Identifier: GPL-2.0-or-later */
/* perfsnapctl query --callers/--callees SYMBOL: the call tree through a
 * function, merged from the answer's stacks, and --symbol's filter. */

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "calltree.h"
#include "hashmap.h"
#include "macro.h"
#include "perfsnapctl.h"

typedef struct tnode {
        const char *name;
        uint64_t value;
        uint32_t first_child, next;     /* 0: none (node 0 is the root) */
        uint32_t depth;
} tnode;

typedef struct tree {
        tnode *v;
        size_t n, alloc;
        hashmap *idx;           /* parent index + name -> node */
} tree;

static void tree_done(tree *t) {
        free(t->v);
        hashmap_free(t->idx);
}

static int child(tree *t, uint32_t parent, const char *name, uint32_t *ret) {
        size_t len = strlen(name);
        _cleanup_free_ char *key = malloc(sizeof(uint32_t) + len);
        int64_t at;
        int r;

        if (!key)
                return -ENOMEM;
        memcpy(key, &parent, sizeof(uint32_t));
        memcpy(key + sizeof(uint32_t), name, len);
        if (hashmap_get(t->idx, key, sizeof(uint32_t) + len, &at) >= 0) {
                *ret = (uint32_t) at;
                return 0;
        }
        if (t->n >= UINT32_MAX)
                return -E2BIG;
        r = array_reserve_one((void **) &t->v, &t->alloc, t->n, sizeof(tnode));
        if (r < 0)
                return r;
        r = hashmap_put(t->idx, key, sizeof(uint32_t) + len, (int64_t) t->n);
        if (r < 0)
                return r;
        t->v[t->n] = (tnode) { .name = name, .next = t->v[parent].first_child, .depth = t->v[parent].depth + 1 };
        t->v[parent].first_child = (uint32_t) t->n;
        *ret = (uint32_t) t->n++;
        return 0;
}

static int node_cmp(const void *x, const void *y, void *userdata) {
        const tnode *v = userdata, *a = v + *(const uint32_t *) x, *b = v + *(const uint32_t *) y;

        if (a->value != b->value)
                return a->value > b->value ? -1 : 1;
        return strcmp(a->name, b->name);
}

static void print_node(FILE *f, const tree *t, uint32_t i, uint64_t total, uint64_t min_value) {
        const tnode *n = t->v + i;
        uint32_t n_kids = 0, hidden = 0, all = 0;
        _cleanup_free_ uint32_t *kids = NULL;

        fprintf(f, "%8.2f%%  %9" PRIu64 "  %*s", 100.0 * (double) n->value / (double) total, n->value,
                (int) (2 * (n->depth - 1)), "");
        put_sanitized(f, n->name, SIZE_MAX);
        fputc('\n', f);
        for (uint32_t c = n->first_child; c != 0; c = t->v[c].next)
                all++;
        kids = calloc(MAX(all, 1u), sizeof(uint32_t));
        for (uint32_t c = n->first_child; c != 0; c = t->v[c].next) {
                if (t->v[c].value < min_value || !kids)
                        hidden++;
                else
                        kids[n_kids++] = c;
        }
        qsort_r(kids, n_kids, sizeof(uint32_t), node_cmp, t->v);
        for (uint32_t k = 0; k < n_kids; k++)
                print_node(f, t, kids[k], total, min_value);
        if (hidden > 0)
                fprintf(f, "%23s%*s(%u more, each below %.1f%% of the function's samples)\n", "",
                        (int) (2 * n->depth), "", hidden, CALLTREE_MIN_PERCENT);
}

/* The index of the function in the stack: its outermost call for callees
 * (a recursion shows inside the tree), its innermost for callers; -1. */
static ssize_t find(const query_stack *st, const char *symbol, bool callers) {
        for (size_t k = 0; k < st->n_frames; k++) {
                size_t j = callers ? st->n_frames - 1 - k : k;

                if (strcmp(st->frames[j], symbol) == 0)
                        return (ssize_t) j;
        }
        return -1;
}

int print_call_tree(FILE *f, const query_result *r, const char *symbol, bool callers) {
        _cleanup_(tree_done) tree t = {};
        uint32_t root = 0;
        int k;

        k = hashmap_new(&t.idx);
        if (k >= 0)
                k = array_reserve_one((void **) &t.v, &t.alloc, 0, sizeof(tnode));
        if (k < 0)
                return k;
        t.v[0] = (tnode) { .name = "" };
        t.n = 1;

        for (size_t i = 0; i < r->n_stacks; i++) {
                const query_stack *st = &r->stacks[i];
                ssize_t at = find(st, symbol, callers);
                uint32_t node;

                if (at < 0)
                        continue;
                k = child(&t, 0, st->frames[at], &root);
                if (k < 0)
                        return k;
                t.v[root].value += st->samples;
                node = root;
                /* Callees: the frames after it, toward the leaf; callers:
                 * those before it, toward the outermost, then the command. */
                for (ssize_t j = callers ? at - 1 : at + 1;
                     (callers ? j >= -1 : j < (ssize_t) st->n_frames) && t.v[node].depth < CALLTREE_MAX_DEPTH;
                     j += callers ? -1 : 1) {
                        k = child(&t, node, j < 0 ? st->comm : st->frames[j], &node);
                        if (k < 0)
                                return k;
                        t.v[node].value += st->samples;
                }
        }
        if (t.n == 1)
                return -ENOENT;

        fprintf(f, "# %s of %s: %" PRIu64 " of %" PRIu64 " samples (%.2f%%)%s\n", callers ? "Callers" : "Callees",
                symbol, t.v[root].value, r->total_samples,
                r->total_samples ? 100.0 * (double) t.v[root].value / (double) r->total_samples : 0.0,
                callers ? "; the command is the outermost caller" : "");
        fprintf(f, "# Overhead    Samples  %s\n", callers ? "Function, then who called it" : "Function, then what it called");
        print_node(f, &t, root, MAX(r->total_samples, (uint64_t) 1),
                   (uint64_t) ((double) t.v[root].value * CALLTREE_MIN_PERCENT / 100.0));
        return 0;
}

bool stack_has_symbol(const query_stack *st, const char *symbol) {
        return find(st, symbol, false) >= 0;
}
