/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The Status answer's JSON (status-json.c): names, order and the parts
 * left out when the daemon runs without a tracker, a cache or a uevent
 * monitor. */
#include <errno.h>
#include <string.h>

#include <json-c/json.h>

#include "macro.h"
#include "test.h"
#include "wire/status-json.h"

/* The keys of p in order, comma separated. */
static void keys_of(json_object *p, char *buf, size_t size) {
        buf[0] = 0;
        json_object_object_foreach(p, k, v) {
                (void) v;
                ASSERT_LT(strlen(buf) + strlen(k) + 2, size);
                if (buf[0])
                        strcat(buf, ",");
                strcat(buf, k);
        }
}

TEST(minimal_daemon) {
        uint64_t lost[2] = { 3, 0 };
        status_info s = {
                .version = "1.2", .pid = 77, .uptime_ns = 5, .cpus = 2, .frequency_hz = 99, .event = "cpu-clock",
                .samples = 1000, .lost = 3, .lost_per_cpu = lost, .dropped_error = -ENOSPC,
                .held_samples = 40, .held_bytes = 8192, .held_error = -ENOSPC,
                .kernel_release = "6.1.0", .kernel_build_id = "ab", .kernel_text_addr = 0xffffffff81000000ULL,
                .db_path = "/var/lib/perfsnapd/samples.db", .sqlite_memory_bytes = -1,
        };
        json_object *p = json_object_new_object(), *o;
        char keys[4096];

        status_json(&s, p);
        keys_of(p, keys, sizeof keys);
        ASSERT_STREQ(keys, "version,protocol,pid,uptime_ns,cpus,frequency_hz,event,samples,lost,lost_per_cpu,"
                           "bad_records,ingest_cpu_ns,stack_cache_hits,invalid_user_frames,jit_frames,user_frames_build_id,"
                           "user_frames_no_build_id,user_frames_unknown,deferred_records,rescued_records,"
                           "ksymbol_records,cgroups_known,cgroups_unknown,offcpu,offcpu_program,offcpu_verified_insns,offcpu_clock,offcpu_clock_why,offcpu_waits,offcpu_wait_ns,offcpu_switches,offcpu_short_waits," "offcpu_full_waits,offcpu_full_ns,offcpu_no_stack,offcpu_no_room,offcpu_no_time,offcpu_dropped_waits,offcpu_dropped_ns,offcpu_stacks_taken,offcpu_stacks_at_end,commits,pending_samples,bad_sample_blocks,dropped_samples,dropped_reason,"
                           "dropped_since_ns,held_samples,held_bytes,held_reason,held_since_ns,database_max_size,cap_removed_samples,cap_removed_newest_ns,db_path,"
                           "kernel_release,kernel_build_id,kernel_text_addr,kernel_symbols,clients,heap_bytes,"
                           "sqlite_memory_bytes,sqlite_allocations,ingest_buffer_bytes,ingest_cache_bytes,"
                           "store_cache_bytes,tasks_bytes,cache_dir,uevent_monitor,symbol_tables,push");
        ASSERT_STREQ(json_object_to_json_string_ext(json_object_object_get(p, "lost_per_cpu"), JSON_C_TO_STRING_PLAIN),
                     "[3,0]");
        ASSERT_STREQ(json_object_get_string(json_object_object_get(p, "kernel_text_addr")), "0xffffffff81000000");
        ASSERT_STREQ(json_object_get_string(json_object_object_get(p, "dropped_reason")), strerror(ENOSPC));
        ASSERT_STREQ(json_object_get_string(json_object_object_get(p, "held_reason")), strerror(ENOSPC));
        ASSERT_EQ(json_object_get_int64(json_object_object_get(p, "held_samples")), 40);
        ASSERT_TRUE(json_object_object_get_ex(p, "cache_dir", &o));
        ASSERT_NULL(o);
        ASSERT_EQ(json_object_get_int64(json_object_object_get(p, "sqlite_memory_bytes")), -1);
        json_object_put(p);
}

TEST(with_modules_cache_and_uevents) {
        status_modules m = { .loaded = 51, .unresolved_kernel_frames = 9 };
        status_uevents u = { .received = 4, .overruns = 1 };
        status_symbols sy = { .written = 3, .bytes = 4096 };
        status_info s = {
                .version = "1.2", .cpus = 1, .event = "cycles", .kernel_release = "6.1.0", .kernel_build_id = "",
                .db_path = "db", .modules = &m, .uevents = &u, .symbols = &sy,
                .snapshots = { .cache_dir = "/var/cache/perfsnapd", .created = 2, .pending = true,
                               .last_error = -EIO, .kcore_error = ENOENT, .layout_generation = 6 },
        };
        json_object *p = json_object_new_object(), *o;
        char keys[8192];

        status_json(&s, p);
        keys_of(p, keys, sizeof keys);
        ASSERT_TRUE(strstr(keys, "tasks_bytes,modules_loaded,modules_added,"));
        ASSERT_TRUE(strstr(keys, ",ksym_rescans,unresolved_kernel_frames,cache_dir,snapshots_created,"
                                     "snapshots_reused,snapshot_failures,snapshots_pruned,snapshot_pending,"
                                     "snapshot_current,snapshot_last_duration_ns,snapshot_last_attempts,"
                                     "snapshot_last_error,snapshot_kcore_error,snapshot_linked_samples,"
                                     "layout_generation,uevent_monitor,uevents_received,uevents_accepted,"
                                     "uevents_forged,uevents_malformed,uevents_overruns,symbol_tables,"
                                     "symbol_files_seen,symbol_tables_written,symbol_tables_found_kept,"
                                     "symbol_tables_empty,symbol_tables_failed,symbol_tables_dropped,"
                                     "symbol_tables_pruned,symbol_tables_kept,symbol_tables_bytes,"
                                     "symbol_table_last_ns,symbol_table_max_ns,symbol_debuginfod_found,"
                                     "symbol_debuginfod_missed,symbol_tables_last_failure"));
        ASSERT_EQ(json_object_get_int64(json_object_object_get(p, "modules_loaded")), 51);
        ASSERT_EQ(json_object_get_int64(json_object_object_get(p, "unresolved_kernel_frames")), 9);
        ASSERT_TRUE(json_object_get_boolean(json_object_object_get(p, "snapshot_pending")));
        ASSERT_TRUE(json_object_object_get_ex(p, "snapshot_current", &o));
        ASSERT_NULL(o);
        ASSERT_STREQ(json_object_get_string(json_object_object_get(p, "snapshot_last_error")), strerror(EIO));
        ASSERT_STREQ(json_object_get_string(json_object_object_get(p, "snapshot_kcore_error")), strerror(ENOENT));
        ASSERT_EQ(json_object_get_int64(json_object_object_get(p, "uevents_overruns")), 1);
        ASSERT_EQ(json_object_get_int64(json_object_object_get(p, "symbol_tables_written")), 3);
        ASSERT_EQ(json_object_get_int64(json_object_object_get(p, "symbol_tables_bytes")), 4096);
        ASSERT_STREQ(json_object_get_string(json_object_object_get(p, "dropped_reason")), "");
        json_object_put(p);
}
