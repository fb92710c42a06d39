/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* The layout history (history.h) as the Modules, Ksyms and Events methods
 * answer it (doc/protocol.md): {"modules": [...]}, {"ksyms": [...]},
 * {"events": [...]}, with "truncated": true when a cap cut the list.
 * Addresses are "0x..." strings (JSON numbers lose precision above 2^53);
 * absent values are null. 0 or -ENOMEM. */

#include "history.h"

struct json_object;

int history_modules_json(const history *h, struct json_object **ret);
int history_ksyms_json(const history *h, struct json_object **ret);
int history_events_json(const history *h, struct json_object **ret);
