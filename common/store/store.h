/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* The sqlite store (WAL mode). One writer (the daemon's ingest path) that
 * interns strings, frames and stacks, so that a stored sample is a handful
 * of integers, and batches inserts in transactions; any number of readers
 * on their own read-only connections. The schema is versioned
 * (PRAGMA user_version) and migrated forward on open. After a crash or
 * kill -9 the database opens clean with every committed batch intact. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/sample-kind.h"
#include "frame.h"
#include "history.h"
#include "query.h"

/* Integers: sqlite INTEGER is signed 64-bit. Addresses, offsets, times and
 * periods are uint64_t and are stored as their int64_t two's-complement
 * image, so kernel addresses read as negative numbers in the sqlite3 shell;
 * everything returned by this API is converted back to uint64_t.
 *
 * Errors: negative errno. Specifically:
 *   -ENOENT     STORE_READONLY on a path that does not exist
 *   -EPROTO     the file's schema (user_version) is newer than
 *               STORE_SCHEMA_VERSION (written by a newer perfsnapd: refuse
 *               to touch it), or, for a reader, older (the writer migrates)
 *   -EBADMSG    not a database, or a corrupt one
 *   -EROFS      a write on a STORE_READONLY store
 *   -EBUSY      store_begin() inside a batch; or the lock wait timed out
 *   -EINVAL     store_commit()/store_rollback() outside a batch */
typedef struct store store;

typedef enum store_mode {
        STORE_READWRITE,        /* creates the file and schema if needed */
        STORE_READONLY,         /* fails with -ENOENT if there is no database */
} store_mode;

#define STORE_SCHEMA_VERSION 13

int store_open(const char *path, store_mode mode, store **ret);
store *store_free(store *s);    /* commits an open transaction first */

/* Transactions on the writer. store_insert_* outside a transaction run in
 * their own; the ingest path wraps a drain's worth of samples in one.
 * Inside a batch, sample rows are handed to sqlite in groups, so a write
 * error may surface from a later call of the same batch; store_commit()
 * then fails and rolls the whole batch back: a batch that commits is
 * complete. A store (like its sqlite connection) is used by one thread at
 * a time. */
int store_begin(store *s);
int store_commit(store *s);
/* Inside a batch: writes the open bucket as it is (the rest of its second
 * goes into another block of it), so that the batch's commit makes every
 * sample added so far readable. A failure fails the batch. */
int store_write_open_bucket(store *s);
/* Drops the open batch (and the interning caches, which may hold its ids).
 * A failed store_commit() rolls back by itself. */
int store_rollback(store *s);

/* Interning; ids are stable for the life of the database. Cached in memory
 * so a repeated value costs a hash lookup, not a query. */
int store_intern_string(store *s, const char *str, int64_t *ret_id);
int store_intern_frame(store *s, const frame *f, int64_t *ret_id);
/* The user frame at `offset` of a file whose path and build-id are the
 * strings module_id and build_id_id (store_intern_string(); 0: no
 * build-id): the frame store_intern_frame() makes of { FRAME_USER, addr
 * and offset `offset`, module, build_id }, without hashing its strings
 * again. For the symbolizer, which knows a file's string ids. */
int store_intern_file_frame(store *s, uint64_t offset, int64_t module_id, int64_t build_id_id, int64_t *ret_id);
/* The kernel frame at addr, `offset` into the symbol symbol_id (0: none),
 * of the module module_id, with the build-id build_id_id (0: none), all
 * string ids: the frame store_intern_frame() makes of those strings. */
int store_intern_kernel_frame(store *s, uint64_t addr, int64_t symbol_id, uint64_t offset, int64_t module_id,
                              int64_t build_id_id, int64_t *ret_id);
/* A stack is a node of a prefix tree: (parent stack, frame). parent 0 is
 * the root; frames are added outermost caller first. */
int store_intern_stack(store *s, int64_t parent_id, int64_t frame_id, int64_t *ret_id);

typedef struct stored_sample {
        uint64_t time_ns;
        uint32_t cpu, pid, tid;
        int64_t comm_id;        /* 0 if unknown */
        int64_t stack_id;       /* leaf node */
        uint64_t period;
        int64_t boot_id;        /* from store_add_boot() */
        int64_t snapshot_id;    /* the kcore snapshot of the layout at time_ns; 0: not known yet */
        int64_t frame_id;       /* the leaf frame of stack_id; 0: the store finds it */
        int64_t cgroup_id;      /* string id of the task's cgroup v2 path (store_intern_string()); 0 if unknown */
        uint32_t kind;          /* sample_kind: SAMPLE_KIND_CPU or SAMPLE_KIND_OFFCPU */
        uint64_t count;         /* samples (0 stands for 1); for SAMPLE_KIND_OFFCPU the waits, period their ns */
} stored_sample;

int store_insert_sample(store *s, const stored_sample *smp);

/* PERF_RECORD_LOST: lost records on cpu at time_ns. */
int store_add_lost(store *s, uint64_t time_ns, uint32_t cpu, uint64_t lost);

/* A kernel boot as seen by the daemon: boot_id is /proc/sys/kernel/random/boot_id,
 * build_id hex, text_addr the runtime _text. The same (boot_uuid, build_id,
 * text_addr) returns the existing row. */
int store_add_boot(store *s, const char *boot_uuid, const char *build_id, uint64_t text_addr,
                   const char *release, uint64_t time_ns, int64_t *ret_id);

/* Samples are written in blocks, one per bucket (a second) per level, when
 * the bucket closes: store_flush_samples() writes those that end at or
 * before before_ns (the ingest horizon; UINT64_MAX: all). A reader on the
 * writer's own connection sees the open bucket too. store_free() writes
 * the open bucket. */
int store_flush_samples(store *s, uint64_t before_ns);
/* Stacks and frames are interned per generation, so that the size cap and
 * retention can delete those of old samples with them. A generation ends
 * after an hour of samples or when its rows reach about `bytes` (0: the
 * default, 64 MiB); ids interned before must not be used after a change of
 * store_generation() (the ingest path drops its caches then). */
uint64_t store_generation(const store *s);
void store_set_dictionary_limit(store *s, uint64_t bytes);

/* Blocks that failed to decode when the writer read the open minute and
 * hour, or the current generation's dictionaries, back (skipped; the
 * totals lack them, their dictionary rows are interned anew). */
uint64_t store_bad_blocks(const store *s);

/* Samples in the open bucket, not yet in the database. */
uint64_t store_pending_samples(const store *s);
/* Samples not stored because their batch failed to commit (e.g. the disk
 * was full); the last error (negative errno) and when the first was
 * dropped (wall clock), 0 if never. */
uint64_t store_dropped_samples(const store *s, int *ret_error, uint64_t *ret_since_ns);

/* When a COMMIT fails (a full disk, an I/O error), store_commit() returns
 * the error but the batch is held in memory, its ids valid, and written
 * by the next transaction, which replays it first. While batches are
 * held, a write outside a batch (store_add_module() etc.) fails at once
 * with the commit's error, and one whose own commit fails is dropped,
 * not held: only store_begin() .. store_commit() batches are. Held batches
 * are bounded by `bytes` of kept statements (default 16 MiB; 0: none is held,
 * a failed batch is dropped at once); past that, or when a replay fails,
 * they are dropped and counted in store_dropped_samples(). store_held():
 * whether batches are held, their samples, their size, the wall-clock time
 * of the first failed commit and the last commit's error.
 * store_drop_held() drops them now (counted); store_free() does. */
void store_set_hold_limit(store *s, uint64_t bytes);
bool store_held(const store *s, uint64_t *ret_samples, uint64_t *ret_bytes, uint64_t *ret_since_ns, int *ret_error);
int store_drop_held(store *s);
/* Counts the rollbacks that dropped ids (a failed batch, held batches
 * dropped): whoever caches ids handed out in a batch must forget them
 * when it changes. */
uint64_t store_epoch(const store *s);

/* Deletes blocks of samples that end by before_ns (whole buckets, minutes,
 * hours) and lost records older than it; returns the number of samples
 * deleted. Deletes at most a few thousand blocks a call: *ret_more (may be
 * NULL) says to call again. */
int64_t store_expire(store *s, uint64_t before_ns, bool *ret_more);

/* Holds the database's pages in use to max_bytes (0: no cap): deletes the
 * oldest blocks, buckets first, then minutes, then hours, down to 90% of
 * it, at most a few thousand blocks a call. Pages freed are reused by the
 * next writes (and returned to the file system by incremental vacuum). */
typedef struct store_cap_result {
        uint64_t used_bytes;            /* in use before */
        uint64_t blocks, samples;       /* deleted; samples of buckets */
        uint64_t rows;                  /* stack and frame blocks deleted with them */
        uint64_t newest_removed_ns;     /* the newest sample deleted, 0 if none */
} store_cap_result;
int store_enforce_cap(store *s, uint64_t max_bytes, store_cap_result *ret);

/* Calls fn(userdata) every n virtual machine instructions of the
 * statements of this connection (n 0: never); fn returns 0, or the
 * statement is interrupted. */
void store_set_progress_handler(store *s, int n, int (*fn)(void *userdata), void *userdata);

/* Builds the aggregates made from written blocks (the hours by cgroup)
 * of the hours that are over, a step at a time (a minute of one, or a
 * block of it), in a transaction of its own (unless in a batch): steps
 * while they have taken less than budget_ns (0: one step); *ret_more:
 * call again. A step holds up to 16,384 entries. */
int store_build_step(store *s, uint64_t budget_ns, bool *ret_more);

/* Readers.
 *
 * store_query(): q->top rows (0 = all), capped at max_rows (0 = no cap);
 * with q->want_stacks also the max_stacks (0 = all) most frequent
 * (comm, stack) pairs. Rows: see query_row. A leaf frame without symbol
 * reports symbol "FILE+0x<offset>" for a user frame in a mapped file (FILE
 * the last component of its path, the offset in it), else "0x<addr>", and
 * its module or "[unknown]"; a sample with no
 * frames reports module and symbol "[unknown]" (kernel = false). Unknown
 * comm reads "[unknown]".
 *
 * Frame names in stacks (folded output):
 *   frame with a symbol        "symbol"                 e.g. "brd_submit_bio"
 *   user frame in a file       "basename+0x<offset>"    e.g. "libc.so.6+0x2a1b4"
 *                              (offset is the file offset, see frame.offset)
 *   anything else              "0x<addr>"               e.g. "0xffffffffc0a01234"
 * A stack of a sample without frames has n_frames 0. User frames in a
 * file with a kept function table are named by their function; stacks
 * whose names then read the same are one stack. For stacks without pid,
 * tid, CPU or timeline slot among the keys (not raw, shapes or inlined)
 * that holds before the max_stacks most frequent are chosen: a call chain
 * interned in many stack generations, or sampled at many offsets of its
 * leaf function, ranks by all of its samples. Otherwise the max_stacks
 * most frequent stack ids are chosen first, and merged by name after.
 *
 * Memory: a query counts the window's distinct (comm, stack or leaf
 * frame) groups in a table of at most store_set_query_group_slots() slots
 * of 48 bytes (default STORE_QUERY_GROUP_SLOTS_DEFAULT, 24 MiB); a window
 * with more groups than fit is read in 4, 16, 64... passes, each counting
 * a part of them; a query without stacks instead names a full table's
 * groups into its rows and reads on (the rows are not bounded by the
 * table: as many as the window's distinct rows). Raw, shapes or inlined
 * stacks of (comm, stack) alone are cut in parts by ranges of stack ids,
 * after one more pass that finds them. Stacks by
 * name (see above) move the groups, whenever the table is full, to a
 * table of their names' classes of the same bound, and only the classes
 * take parts; with max_stacks, a first read that outgrows it keeps the
 * frequent classes and a second counts them, when that proves the
 * answer (doc/storage.md). Decoded dictionary blocks are held to
 * STORE_QUERY_DICT_BYTES per dictionary. With stacks, the answer itself
 * holds max_stacks stacks (0 = all: not bounded). Everything is freed
 * when the result is. */
/* -ERANGE: stacks told apart by process, CPU or timeline slot
 * (by_pid, by_cpu, timeline) that would need more than 64 reads of the
 * window. */
int store_query(store *s, const query_params *q, uint32_t max_rows, uint32_t max_stacks, query_result **ret);

#define STORE_QUERY_GROUP_SLOTS_DEFAULT (UINT64_C(1) << 19)
#define STORE_QUERY_DICT_BYTES (8u << 20)
/* The bound of store_query()'s group table, in slots (at least 16); for
 * tests and benchmarks. */
void store_set_query_group_slots(store *s, size_t slots);

typedef struct store_stats {
        uint64_t samples;
        uint64_t lost;
        uint64_t first_ns, last_ns;
        uint64_t db_bytes;      /* main file + WAL */
        uint64_t n_frames, n_stacks, n_strings;
} store_stats;

int store_get_stats(store *s, store_stats *ret);

/* Bytes sqlite has allocated in this process, all connections, and in
 * how many allocations (each costs malloc's overhead on top). */
int64_t store_memory_used(int64_t *ret_allocations);
/* Bytes held by this connection's interning caches (strings, frames,
 * stacks, whole call stacks). */
size_t store_cache_bytes(const store *s);

/* PRAGMA integrity_check: 0 if the file is sound, -EBADMSG if not. Reads
 * the whole file: for tests and tools, not the daemon's start-up. */
int store_check_integrity(store *s);

/* Before opening the writer: whether the file at path is a perfsnapd
 * database in one piece. 0 if it is, or if there is none (or it is
 * empty); -EPROTO if it is another application's sqlite database;
 * -EBADMSG if it is not a database or a damaged one; -ELOOP for a
 * symbolic link. *ret_why (to free): what was found, for -EPROTO and
 * -EBADMSG.
 *
 * STORE_CHECK_START: sqlite's quick_check of the whole file when it is at
 * most STORE_CHECK_WHOLE_BYTES or its WAL was left behind (the last writer
 * did not close); else every page of every table but the three of blocks
 * is read, not checked (a cold quick_check reads the whole file: 17.9 s
 * for 1.5 GB here). The block tables grow with the samples; the readers
 * skip and count a damaged block.
 * STORE_CHECK_FULL: integrity_check of everything (perfsnapd
 * --check-db). */
typedef enum store_check {
        STORE_CHECK_START,
        STORE_CHECK_FULL,
} store_check;

#define STORE_CHECK_WHOLE_BYTES (64u << 20)

int store_verify(const char *path, store_check check, char **ret_why);

/* Copies the WAL back into the database file once it holds 1000 frames or
 * more (sqlite's automatic checkpoint is off on the writer, so that no
 * commit pays for one). Call between batches. 1 if it ran, 0 if not due. */
int store_checkpoint(store *s);

/* The same work on a connection of its own, so that the thread that
 * writes never waits for the copy and its sync: store_checkpoint_due()
 * on the writer's thread says a checkpoint is due (and counts it done),
 * store_checkpointer_run() does it on another thread. PASSIVE, like
 * store_checkpoint(): it copies what no reader still needs and never
 * waits for the writer or a reader. */
typedef struct store_checkpointer store_checkpointer;

bool store_checkpoint_due(store *s);
int store_checkpointer_new(const char *path, store_checkpointer **ret);
store_checkpointer *store_checkpointer_free(store_checkpointer *c);
/* 0, and the frames in the WAL and those it copied, if asked. */
int store_checkpointer_run(store_checkpointer *c, int *ret_wal_frames, int *ret_copied);

/* Lost totals per CPU (array indexed by cpu, n = max cpu + 1). */
int store_get_lost_per_cpu(store *s, uint64_t since_ns, uint64_t until_ns, uint64_t **ret, size_t *ret_n);

/* ---- the layout journal (store-layout.c) ----
 *
 * modules: one row per module instance (load .. unload) with its section
 * map in module_sections. events: one row per change of the kernel's code
 * layout; each event lists, in event_sections, every section of every
 * module loaded after the change, so the layout at any event is read from
 * that event alone. The kernel record of an event is its boot row. Times
 * are wall-clock ns, like samples. */

/* A section of a module as the kernel's sysfs and the module file give it
 * (kernel/modules.h module_section, which the tracker passes in). */
typedef struct store_section {
        const char *name;
        uint64_t addr, len, pgoff;
        const char *len_source;         /* "elf", "next", "unknown" */
        bool exec;
} store_section;

typedef struct store_module {
        int64_t boot_id;
        const char *name;
        const char *build_id;           /* "" if unknown */
        const char *file;               /* module ELF the lengths came from, or NULL */
        uint64_t base, size;
        uint64_t loaded_ns;
        const char *loaded_how;         /* "startup", "uevent", "rescan" */
        const store_section *sections;
        size_t n_sections;
} store_module;

int store_add_module(store *s, const store_module *m, int64_t *ret_id);
int store_unload_module(store *s, int64_t module_id, uint64_t unloaded_ns, const char *how);

/* Open module rows of this boot from an earlier run of the daemon (no
 * unload recorded): the caller continues those still loaded and closes
 * the rest. Calls cb for each; stops at a negative return. */
typedef int (*store_open_module_cb)(int64_t id, const char *name, uint64_t base, uint64_t size,
                                    const char *build_id, void *userdata);
int store_foreach_open_module(store *s, int64_t boot_id, store_open_module_cb cb, void *userdata);

/* Dynamic kernel code (BPF programs, trampolines, out-of-line code): one
 * row per symbol, from its registration to its unregistration. */
typedef struct store_ksym {
        int64_t boot_id;
        const char *name;
        uint64_t addr, len;
        const char *type;               /* "bpf", "ool", "unknown" */
        uint64_t registered_ns;         /* for start-up symbols: when perfsnapd found them */
        const char *registered_how;     /* "startup", "perf", "rescan" */
} store_ksym;

int store_add_ksym(store *s, const store_ksym *k, int64_t *ret_id);
int store_unregister_ksym(store *s, int64_t ksym_id, uint64_t unregistered_ns, const char *how);
/* The BPF program id a PERF_RECORD_BPF_EVENT gave for the symbol. */
int store_set_ksym_prog_id(store *s, int64_t ksym_id, uint32_t prog_id);

/* Open symbol rows of this boot from an earlier run, as for modules. */
typedef int (*store_open_ksym_cb)(int64_t id, const char *name, uint64_t addr, uint64_t len,
                                  const char *registered_how, void *userdata);
int store_foreach_open_ksym(store *s, int64_t boot_id, store_open_ksym_cb cb, void *userdata);

/* One change of the kernel's code layout. kind: "start", "module-add",
 * "module-remove", "ksym-register", "ksym-unregister", or a snapshot of
 * the layout: "snapshot-created", "snapshot-reused"; module_id, ksym_id
 * and snapshot_id 0 where none. The event carries the section records of the
 * live modules and the records of the live dynamic symbols. */
typedef struct store_event {
        uint64_t time_ns;
        int64_t boot_id;
        const char *kind;
        int64_t module_id, ksym_id;
        int64_t snapshot_id;            /* for "snapshot-created", "snapshot-reused"; else 0 */
        const char *detail;
        const int64_t *live_modules;
        size_t n_live_modules;
        const int64_t *live_ksyms;
        size_t n_live_ksyms;
} store_event;

int store_add_event(store *s, const store_event *e, int64_t *ret_id);

/* kcore snapshots (snapshot.h): one row per snapshot directory the
 * daemon made or reused, keyed by (build_id, name). */
typedef struct store_snapshot {
        int64_t boot_id;                /* the boot that made or reused it */
        const char *build_id, *name, *path;
        uint64_t time_ns;               /* the time its name says */
        uint64_t text_addr;
        uint64_t n_modules, size_bytes;
        bool has_kcore;
} store_snapshot;

/* Records that a snapshot was made, or reused (counted), at now_ns. A
 * snapshot found in the cache without a row (made by perf, or before the
 * database) gets one. Returns its id. */
int store_use_snapshot(store *s, const store_snapshot *snap, bool reused, uint64_t now_ns, int64_t *ret_id);
/* Marks the snapshot removed from the cache at pruned_ns. -ENOENT if unknown. */
int store_prune_snapshot(store *s, const char *build_id, const char *name, uint64_t pruned_ns);
/* Reuse count and id of a snapshot; -ENOENT if it has no row. */
int store_get_snapshot(store *s, const char *build_id, const char *name, int64_t *ret_id, uint64_t *ret_reuses);
/* Links the samples of boot_id taken in [from_ns, until_ns) that have no
 * snapshot yet to snapshot_id (including those buffered in the open
 * batch). Returns the number of samples linked. */
int64_t store_link_snapshot(store *s, int64_t boot_id, int64_t snapshot_id, uint64_t from_ns, uint64_t until_ns);
/* Samples linked to the snapshot. A full scan of the samples: for tests and
 * `cache list --samples`, not for the ingest path. */
int64_t store_count_snapshot_samples(store *s, int64_t snapshot_id);

/* Readers, answering in history.h's shapes (the wire renders them as
 * doc/protocol.md says; history_done() frees them, also on error):
 * modules loaded at some time since since_ns (0: all), oldest first, with
 * their section maps if with_sections; events since since_ns, oldest
 * first, at most max_events (0: no cap), with their records if
 * with_records (then also at most max_records records in all). Sets
 * "truncated" when a cap cut the list. */
int store_list_modules(store *s, uint64_t since_ns, bool with_sections, uint32_t max_rows, history *ret);
int store_list_events(store *s, uint64_t since_ns, bool with_records, uint32_t max_events, uint32_t max_records,
                      history *ret);
/* Dynamic symbols registered at some time since since_ns (0: all), in
 * the order they were registered, at most max_rows (0: no cap). */
int store_list_ksyms(store *s, uint64_t since_ns, uint32_t max_rows, history *ret);
