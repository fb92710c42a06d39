/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The Status and Rescan replies' fields (status-json.h), in the order
 * perfsnapctl status and doc/protocol.md list them. */

#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

#include "macro.h"
#include "wire/protocol.h"
#include "wire/status-json.h"

static void add_u64(json_object *p, const char *name, uint64_t v) {
        json_object_object_add(p, name, json_object_new_int64((int64_t) v));
}

static void add_int(json_object *p, const char *name, int v) {
        json_object_object_add(p, name, json_object_new_int(v));
}

static void add_str(json_object *p, const char *name, const char *v) {
        json_object_object_add(p, name, v ? json_object_new_string(v) : NULL);
}

static void add_bool(json_object *p, const char *name, bool v) {
        json_object_object_add(p, name, json_object_new_boolean(v));
}

static void modules_json(const status_modules *m, json_object *p) {
        add_u64(p, "modules_loaded", m->loaded);
        add_u64(p, "modules_added", m->added);
        add_u64(p, "modules_removed", m->removed);
        add_u64(p, "module_uevents", m->uevents);
        add_u64(p, "ignored_uevents", m->ignored_uevents);
        add_u64(p, "spurious_removes", m->spurious_removes);
        add_u64(p, "rescans", m->rescans);
        add_u64(p, "layout_events", m->layout_events);
        add_u64(p, "last_change_ns", m->last_change_ns);
        add_u64(p, "max_change_ns", m->max_change_ns);
        add_u64(p, "module_frames", m->module_frames);
        add_u64(p, "module_data_frames", m->module_data_frames);
        add_u64(p, "ksyms_live", m->ksyms_live);
        add_u64(p, "ksyms_tracked", m->ksyms_tracked);
        add_u64(p, "ksyms_registered", m->ksyms_registered);
        add_u64(p, "ksyms_unregistered", m->ksyms_unregistered);
        add_u64(p, "ksym_records", m->ksym_records);
        add_u64(p, "bpf_events", m->bpf_events);
        add_u64(p, "ksym_duplicates", m->ksym_duplicates);
        add_u64(p, "ksym_unknown_unregisters", m->ksym_unknown_unregisters);
        add_u64(p, "ksym_rescans", m->ksym_rescans);
        add_u64(p, "unresolved_kernel_frames", m->unresolved_kernel_frames);
}

static void snapshots_json(const status_snapshots *s, json_object *p) {
        add_str(p, "cache_dir", s->cache_dir);
        if (!s->cache_dir)
                return;
        add_u64(p, "snapshots_created", s->created);
        add_u64(p, "snapshots_reused", s->reused);
        add_u64(p, "snapshot_failures", s->failures);
        add_u64(p, "snapshots_pruned", s->pruned);
        add_bool(p, "snapshot_pending", s->pending);
        add_str(p, "snapshot_current", s->current);
        add_u64(p, "snapshot_last_duration_ns", s->last_duration_ns);
        json_object_object_add(p, "snapshot_last_attempts", json_object_new_int64(s->last_attempts));
        add_str(p, "snapshot_last_error", s->last_error < 0 ? strerror(-s->last_error) : NULL);
        add_str(p, "snapshot_kcore_error", s->kcore_error ? strerror(s->kcore_error) : NULL);
        add_u64(p, "snapshot_linked_samples", s->linked_samples);
        add_u64(p, "layout_generation", s->layout_generation);
}

void status_json(const status_info *s, json_object *p) {
        json_object *lost = json_object_new_array();
        char text[32];

        add_str(p, "version", s->version);
        add_int(p, "protocol", PERFSNAP_PROTOCOL_VERSION);
        add_int(p, "pid", s->pid);
        add_u64(p, "uptime_ns", s->uptime_ns);
        add_int(p, "cpus", (int) s->cpus);
        add_int(p, "frequency_hz", (int) s->frequency_hz);
        add_str(p, "event", s->event);
        add_u64(p, "samples", s->samples);
        add_u64(p, "lost", s->lost);
        for (size_t i = 0; i < s->cpus; i++)
                json_object_array_add(lost, json_object_new_int64(s->lost_per_cpu ? (int64_t) s->lost_per_cpu[i] : 0));
        json_object_object_add(p, "lost_per_cpu", lost);
        add_u64(p, "bad_records", s->bad_records);
        add_u64(p, "ingest_cpu_ns", s->ingest_cpu_ns);
        add_u64(p, "stack_cache_hits", s->stack_cache_hits);
        add_u64(p, "invalid_user_frames", s->invalid_user_frames);
        add_u64(p, "jit_frames", s->jit_frames);
        add_u64(p, "user_frames_build_id", s->user_frames_build_id);
        add_u64(p, "user_frames_no_build_id", s->user_frames_no_build_id);
        add_u64(p, "user_frames_unknown", s->user_frames_unknown);
        add_u64(p, "deferred_records", s->deferred_records);
        add_u64(p, "rescued_records", s->rescued_records);
        add_bool(p, "ksymbol_records", s->ksymbol_records);
        if (s->cgroup_source)
                add_str(p, "cgroup_source", s->cgroup_source);
        add_u64(p, "cgroups_known", s->cgroups_known);
        add_u64(p, "cgroups_unknown", s->cgroups_unknown);
        add_str(p, "offcpu", s->offcpu ?: "off");
        add_str(p, "offcpu_program", s->offcpu_program ?: "");
        add_u64(p, "offcpu_verified_insns", s->offcpu_verified_insns);
        add_str(p, "offcpu_clock", s->offcpu_clock ?: "");
        add_str(p, "offcpu_clock_why", s->offcpu_clock_why ?: "");
        add_u64(p, "offcpu_waits", s->offcpu_waits);
        add_u64(p, "offcpu_wait_ns", s->offcpu_wait_ns);
        add_u64(p, "offcpu_switches", s->offcpu_switches);
        add_u64(p, "offcpu_short_waits", s->offcpu_short_waits);
        add_u64(p, "offcpu_full_waits", s->offcpu_full_waits);
        add_u64(p, "offcpu_full_ns", s->offcpu_full_ns);
        add_u64(p, "offcpu_no_stack", s->offcpu_no_stack);
        add_u64(p, "offcpu_no_room", s->offcpu_no_room);
        add_u64(p, "offcpu_no_time", s->offcpu_no_time);
        add_u64(p, "offcpu_dropped_waits", s->offcpu_dropped_waits);
        add_u64(p, "offcpu_dropped_ns", s->offcpu_dropped_ns);
        add_u64(p, "offcpu_stacks_taken", s->offcpu_stacks_taken);
        add_u64(p, "offcpu_stacks_at_end", s->offcpu_stacks_at_end);
        add_u64(p, "commits", s->commits);
        add_u64(p, "pending_samples", s->pending_samples);
        add_u64(p, "bad_sample_blocks", s->bad_sample_blocks);
        add_u64(p, "dropped_samples", s->dropped_samples);
        add_str(p, "dropped_reason", s->dropped_error < 0 ? strerror(-s->dropped_error) : "");
        add_u64(p, "dropped_since_ns", s->dropped_since_ns);
        add_u64(p, "held_samples", s->held_samples);
        add_u64(p, "held_bytes", s->held_bytes);
        add_str(p, "held_reason", s->held_error < 0 ? strerror(-s->held_error) : "");
        add_u64(p, "held_since_ns", s->held_since_ns);
        add_u64(p, "database_max_size", s->database_max_size);
        add_u64(p, "cap_removed_samples", s->cap_removed_samples);
        add_u64(p, "cap_removed_newest_ns", s->cap_removed_newest_ns);
        add_str(p, "db_path", s->db_path);
        add_str(p, "kernel_release", s->kernel_release);
        add_str(p, "kernel_build_id", s->kernel_build_id);
        snprintf(text, sizeof text, "0x%llx", (unsigned long long) s->kernel_text_addr);
        add_str(p, "kernel_text_addr", text);
        add_u64(p, "kernel_symbols", s->kernel_symbols);
        add_int(p, "clients", (int) s->clients);
        add_u64(p, "heap_bytes", s->heap_bytes);
        json_object_object_add(p, "sqlite_memory_bytes", json_object_new_int64(s->sqlite_memory_bytes));
        json_object_object_add(p, "sqlite_allocations", json_object_new_int64(s->sqlite_allocations));
        add_u64(p, "ingest_buffer_bytes", s->ingest_buffer_bytes);
        add_u64(p, "ingest_cache_bytes", s->ingest_cache_bytes);
        add_u64(p, "store_cache_bytes", s->store_cache_bytes);
        add_u64(p, "tasks_bytes", s->tasks_bytes);
        if (s->modules)
                modules_json(s->modules, p);
        snapshots_json(&s->snapshots, p);
        add_bool(p, "uevent_monitor", s->uevents != NULL);
        if (s->uevents) {
                add_u64(p, "uevents_received", s->uevents->received);
                add_u64(p, "uevents_accepted", s->uevents->accepted);
                add_u64(p, "uevents_forged", s->uevents->forged);
                add_u64(p, "uevents_malformed", s->uevents->malformed);
                add_u64(p, "uevents_overruns", s->uevents->overruns);
        }
        add_bool(p, "symbol_tables", s->symbols != NULL);
        if (s->symbols) {
                add_u64(p, "symbol_files_seen", s->symbols->files_seen);
                add_u64(p, "symbol_tables_written", s->symbols->written);
                add_u64(p, "symbol_tables_found_kept", s->symbols->kept_already);
                add_u64(p, "symbol_tables_empty", s->symbols->no_symbols);
                add_u64(p, "symbol_tables_failed", s->symbols->failed);
                add_u64(p, "symbol_tables_dropped", s->symbols->dropped);
                add_u64(p, "symbol_tables_pruned", s->symbols->pruned);
                add_u64(p, "symbol_tables_kept", s->symbols->tables);
                add_u64(p, "symbol_tables_bytes", s->symbols->bytes);
                add_u64(p, "symbol_table_last_ns", s->symbols->last_ns);
                add_u64(p, "symbol_table_max_ns", s->symbols->max_ns);
                add_u64(p, "symbol_debuginfod_found", s->symbols->debuginfod_found);
                add_u64(p, "symbol_debuginfod_missed", s->symbols->debuginfod_missed);
                {
                        char why[160] = "";

                        if (s->symbols->last_error)
                                snprintf(why, sizeof why, "%s: %s", s->symbols->last_failed_what ?: "?",
                                         strerror(-s->symbols->last_error));
                        add_str(p, "symbol_tables_last_failure", why);
                }
        }
        add_bool(p, "push", s->push != NULL);
        if (s->push) {
                add_str(p, "push_url", s->push->url);
                add_u64(p, "push_intervals", s->push->intervals);
                add_u64(p, "push_pushed", s->push->pushed);
                add_u64(p, "push_failed", s->push->failed);
                add_u64(p, "push_dropped", s->push->dropped);
                add_u64(p, "push_queued", s->push->queued);
                add_u64(p, "push_last_ns", s->push->last_push_ns);
                add_str(p, "push_last_error", s->push->last_error);
        }
}

void status_stored_json(const status_stored *s, json_object *p) {
        add_u64(p, "stored_samples", s->samples);
        add_u64(p, "stored_lost", s->lost);
        add_u64(p, "db_bytes", s->db_bytes);
        add_u64(p, "oldest_sample_ns", s->first_ns);
        add_u64(p, "newest_sample_ns", s->last_ns);
}

void status_rescan_json(const status_rescan *r, json_object *p) {
        add_int(p, "added", (int) r->added);
        add_int(p, "removed", (int) r->removed);
        add_int(p, "loaded", (int) r->loaded);
        add_int(p, "ksyms_registered", (int) r->ksyms_registered);
        add_int(p, "ksyms_unregistered", (int) r->ksyms_unregistered);
        add_int(p, "ksyms_live", (int) r->ksyms_live);
}
