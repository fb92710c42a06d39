/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "query.h"

/* Children with less than this share of the function's samples are
 * counted, not shown. */
#define CALLTREE_MIN_PERCENT 0.5
/* Deeper levels are not shown (the printer recurses once per level;
 * callchain_depth is at most 127). */
#define CALLTREE_MAX_DEPTH 512

/* Prints the call tree of symbol from r's stacks, like perf report -g
 * caller/callee: callers (who called it, up to the command) or callees
 * (what it called, down to the leaf), with each node's share of all
 * samples. -ENOENT if no stack has the function; -ENOMEM. */
int print_call_tree(FILE *f, const query_result *r, const char *symbol, bool callers);

/* Whether a frame of st is the function symbol. */
bool stack_has_symbol(const query_stack *st, const char *symbol);
