/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The string table (strtab.h). */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"
#include "macro.h"
#include "strtab.h"

int strtab_init(strtab *t) {
        *t = (strtab) {};
        return hashmap_new(&t->idx);
}

void strtab_done(strtab *t) {
        hashmap_free(t->idx);
        free(t->v);
        for (size_t i = 0; i < t->n_owned; i++)
                free(t->owned[i]);
        free(t->owned);
        *t = (strtab) {};
}

int strtab_id(strtab *t, const char *s, size_t *ret) {
        int64_t id;
        int r;

        if (hashmap_get(t->idx, s, strlen(s), &id) >= 0) {
                *ret = (size_t) id;
                return 0;
        }
        r = array_reserve_one((void **) &t->v, &t->alloc, t->n, sizeof(char *));
        if (r >= 0)
                r = hashmap_put(t->idx, s, strlen(s), (int64_t) t->n);
        if (r < 0)
                return r;
        t->v[t->n] = (char *) s;
        *ret = t->n++;
        return 0;
}

int strtab_id_copy(strtab *t, const char *s, size_t *ret) {
        int64_t id;
        char *copy;
        int r;

        if (hashmap_get(t->idx, s, strlen(s), &id) >= 0) {
                *ret = (size_t) id;
                return 0;
        }
        r = array_reserve_one((void **) &t->owned, &t->alloc_owned, t->n_owned, sizeof(char *));
        if (r < 0)
                return r;
        copy = strdup(s);
        if (!copy)
                return -ENOMEM;
        t->owned[t->n_owned++] = copy;
        return strtab_id(t, copy, ret);
}

