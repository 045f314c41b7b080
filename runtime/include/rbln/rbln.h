/* SPDX-License-Identifier: MIT */
/*
 * rbln.h - librbln: the torch.rbln API of the RBLN NPU, in C
 *
 * Devices, tensors with lazy device allocation, a caching device-memory
 * allocator with PyTorch's statistics, and synchronization. Every function
 * is thread-safe. A function that can fail returns RBLN_OK or a negative
 * rbln_status (or a sentinel documented with it) and leaves a message
 * naming the problem in rbln_last_error(), per thread.
 */
#ifndef RBLN_RBLN_H
#define RBLN_RBLN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RBLN_API __attribute__((visibility("default")))

typedef enum rbln_status {
	RBLN_OK			= 0,
	RBLN_ERROR_INVALID	= -1,	/* a bad argument */
	RBLN_ERROR_NO_DEVICE	= -2,	/* no such device, or none at all */
	RBLN_ERROR_OUT_OF_MEMORY = -3,	/* device or host memory exhausted */
	RBLN_ERROR_DEVICE	= -4,	/* the device failed the work */
	RBLN_ERROR_BUSY		= -5,	/* a resource is in use */
	RBLN_ERROR_UNSUPPORTED	= -6,
	RBLN_ERROR_CAPTURE	= -7,	/* not allowed while capturing a graph: the capture is invalidated */
	RBLN_ERROR_TIMEOUT	= -8,	/* other processes did not answer in time (rbln_comm.h) */
} rbln_status;

/* The message of the calling thread's last failure; "" if none. */
RBLN_API const char *rbln_last_error(void);
/*
 * The status of that failure; RBLN_OK if none. What a function that
 * returns NULL or a guard failed with (RBLN_ERROR_BUSY from
 * rbln_explain_begin(), ...): like rbln_last_error(), a success leaves it.
 */
RBLN_API rbln_status rbln_last_status(void);
/* A fixed name for a status, e.g. "RBLN_ERROR_INVALID". */
RBLN_API const char *rbln_status_name(rbln_status status);

/* --- devices ------------------------------------------------------------- */

/* True when at least one RBLN device can be used. */
RBLN_API bool rbln_is_available(void);
/*
 * Logical devices, what device indices name: the physical devices grouped
 * by RBLN_NPUS_PER_DEVICE=N or RBLN_DEVICE_MAP="[0,1],[2,3]", one per
 * physical device without either; 0 without any or with a malformed setting.
 */
RBLN_API int rbln_device_count(void);
/* Physical devices visible to the program (after RBLN_VISIBLE_DEVICES). */
RBLN_API int rbln_physical_device_count(void);
/*
 * Writes the mapping, one line per logical device with its physical members
 * and one for unused physical devices, to @buf like snprintf(): at most
 * @size bytes with the NUL. Returns the length of the whole summary, or a
 * negative rbln_status.
 */
RBLN_API int64_t rbln_device_summary(char *buf, size_t size);
/* The calling thread's current device (0 until set); -1 when there is none. */
RBLN_API int rbln_current_device(void);
/*
 * Makes @device the calling thread's current device. A negative @device
 * is a silent no-op returning RBLN_OK, as torch.cuda.set_device(-1) is;
 * one that does not exist is RBLN_ERROR_NO_DEVICE.
 */
RBLN_API rbln_status rbln_set_device(int device);
/* Parses "rbln", "rbln:N" or "N" into a device index ("rbln": current). */
RBLN_API rbln_status rbln_device_parse(const char *name, int *device);

/* The device guard: restores the previous current device on exit. */
typedef struct rbln_device_guard {
	int previous;		/* -1: the guard did nothing */
	rbln_status status;	/* RBLN_OK, or why it could not enter the device */
} rbln_device_guard;

/*
 * Enters @device. A negative @device gives a guard that does nothing with
 * status RBLN_OK (torch.rbln.device(-1) or device(None)); a device that
 * does not exist, one that does nothing with status RBLN_ERROR_NO_DEVICE
 * and rbln_last_error() set (torch.rbln.device(9) raises).
 */
RBLN_API rbln_device_guard rbln_device_enter(int device);
RBLN_API void rbln_device_exit(rbln_device_guard *guard);

/* --- tensors ----------------------------------------------------------------- */

typedef enum rbln_element_type {
	RBLN_F32	= 0,
	RBLN_F16	= 1,
	RBLN_BF16	= 2,
	RBLN_I32	= 3,
	RBLN_I8		= 4,
} rbln_dtype;

#define RBLN_MAX_DIMS	8
#define RBLN_CPU	(-1)	/* the device of a CPU tensor */

typedef struct rbln_tensor rbln_tensor;

/* Bytes of one element of @dtype; 0 when unknown. */
RBLN_API size_t rbln_dtype_size(rbln_dtype dtype);

/*
 * Creates a contiguous tensor of @ndim dimensions on @device (RBLN_CPU or
 * an RBLN device). On an RBLN device the data lives in host memory until
 * the first device use (lazy allocation). NULL on failure.
 */
RBLN_API rbln_tensor *rbln_tensor_empty(const int64_t *shape, int ndim, rbln_dtype dtype, int device);
RBLN_API rbln_tensor *rbln_tensor_zeros(const int64_t *shape, int ndim, rbln_dtype dtype, int device);
/* Every element set to @value, converted to @dtype with the ISA's cast rules. */
RBLN_API rbln_tensor *rbln_tensor_full(const int64_t *shape, int ndim, rbln_dtype dtype, double value,
			      int device);
/* Copies rbln_tensor_nbytes() bytes of element data from @data. */
RBLN_API rbln_tensor *rbln_tensor_from_data(const void *data, const int64_t *shape, int ndim,
				   rbln_dtype dtype, int device);
/* Uniform in [0, 1) for floats, [-128, 127] for integers, reproducible by @seed. */
RBLN_API rbln_tensor *rbln_tensor_rand(const int64_t *shape, int ndim, rbln_dtype dtype, uint64_t seed,
			      int device);
/* Frees a tensor; NULL is a no-op. Its device memory goes back to the cache. */
RBLN_API void rbln_tensor_free(rbln_tensor *t);

RBLN_API rbln_dtype rbln_tensor_dtype(const rbln_tensor *t);
RBLN_API int rbln_tensor_ndim(const rbln_tensor *t);
RBLN_API int64_t rbln_tensor_dim(const rbln_tensor *t, int dim);
RBLN_API int64_t rbln_tensor_numel(const rbln_tensor *t);
RBLN_API size_t rbln_tensor_nbytes(const rbln_tensor *t);
/* RBLN_CPU or the device index; RBLN_ERROR_INVALID for a bad tensor. */
RBLN_API int rbln_tensor_device(const rbln_tensor *t);
/* True once the tensor's data lives in device memory. */
RBLN_API bool rbln_tensor_is_materialized(const rbln_tensor *t);

/* Moves the data to device memory now (what the first device use does). */
RBLN_API rbln_status rbln_tensor_materialize(rbln_tensor *t);

/*
 * A copy of @t on @device. A device-to-host copy with @non_blocking set
 * may still be in flight when this returns: it is complete after
 * rbln_synchronize() of the source device, and reading the result before
 * that is a programming error. NULL on failure.
 */
RBLN_API rbln_tensor *rbln_tensor_to(rbln_tensor *t, int device, bool non_blocking);

/*
 * A tensor of another shape and dtype over @base's bytes, sharing its
 * device memory: what one writes, the other reads (@shape and @dtype
 * must cover exactly rbln_tensor_nbytes(@base)). @base moves to device
 * memory now if it is lazy, and lives on until the view is freed too. On
 * a logical device the view keeps @base's first dimension (its shards are
 * @base's): else RBLN_ERROR_UNSUPPORTED. NULL on failure.
 */
RBLN_API rbln_tensor *rbln_tensor_view(rbln_tensor *base, const int64_t *shape, int ndim,
				       rbln_dtype dtype);

/*
 * Replaces @size bytes of the element data at byte @offset with @data's.
 * A lazy tensor stays lazy; one in device memory is copied to, in order
 * with the device's other work (@data may be reused at once).
 */
RBLN_API rbln_status rbln_tensor_write(rbln_tensor *t, size_t offset, const void *data,
				       size_t size);

/* Copies the element data to @out (@size >= rbln_tensor_nbytes()), waiting for it. */
RBLN_API rbln_status rbln_tensor_read(rbln_tensor *t, void *out, size_t size);

/*
 * The device guard of a tensor's device; a no-op (status RBLN_OK) for a
 * CPU tensor, status RBLN_ERROR_INVALID for what is not a tensor.
 */
RBLN_API rbln_device_guard rbln_device_enter_of(const rbln_tensor *t);

/* --- synchronization and memory ------------------------------------------------ */

/* Waits for every piece of work queued on @device (-1: the current device). */
RBLN_API rbln_status rbln_synchronize(int device);

/* Releases cached device memory not in use (unsplit segments only). */
RBLN_API rbln_status rbln_empty_cache(int device);

/* Device memory figures in bytes (-1: current device); negative rbln_status on failure. */
RBLN_API int64_t rbln_memory_allocated(int device);
RBLN_API int64_t rbln_memory_reserved(int device);
RBLN_API int64_t rbln_max_memory_allocated(int device);
RBLN_API int64_t rbln_max_memory_reserved(int device);

/* A statistic of the allocator, as in torch.rbln.memory_stats(). */
typedef struct rbln_memory_stat {
	int64_t current, peak, total_allocated, total_freed;
} rbln_memory_stat;

struct rbln_memory_stats {
	rbln_memory_stat allocated;	/* bytes tensors requested */
	rbln_memory_stat reserved;	/* bytes of segments held from the driver */
	rbln_memory_stat active;	/* rounded block sizes in use: current, peak */
	rbln_memory_stat cached;	/* free bytes in held segments: current, peak */
	int64_t num_alloc_retries;
	int64_t num_ooms;
	int64_t num_device_alloc;
	int64_t num_device_free;
	/* Lazy allocation: tensors created on the device, not yet in device memory. */
	int64_t lazy_host_bytes;	/* lazy.host_bytes */
	int64_t lazy_tensors;		/* lazy.tensors */
	int64_t lazy_materializations;	/* lazy.materializations */
	/*
	 * Pinned host buffers that stage data between the host and the
	 * device (tensor copies, collectives): staging.*, not device memory.
	 */
	rbln_memory_stat staging;
};

/* torch.rbln.memory_stats(): the allocator's and the lazy statistics. */
RBLN_API rbln_status rbln_memory_stats(int device, struct rbln_memory_stats *out);

/*
 * Walks @stats as (key, value) pairs with the seed's key names
 * ("allocated.current", ..., "num_device_free", then "lazy.*", then
 * "staging.*"): entry @i, for i from 0 until it returns false.
 */
RBLN_API bool rbln_memory_stats_entry(const struct rbln_memory_stats *stats, size_t i,
			     const char **key, int64_t *value);

/* Every peak becomes its current value. */
RBLN_API rbln_status rbln_reset_peak_memory_stats(int device);
/*
 * The accumulated figures go to 0: the totals (total_allocated,
 * total_freed), num_*, and lazy.materializations; lazy.host_bytes and
 * lazy.tensors are current figures and stay.
 */
RBLN_API rbln_status rbln_reset_accumulated_memory_stats(int device);

/* --- memory snapshots and history -------------------------------------------- */

/*
 * torch.cuda.memory._snapshot() and _record_memory_history() for the
 * caching allocator: every segment and block, and a bounded history of
 * what the allocator did, with the call sites. The JSON form follows
 * PyTorch's snapshot (docs/runtime.md has the schema).
 */
enum rbln_memory_block_state {
	RBLN_BLOCK_INACTIVE		= 0,	/* free */
	RBLN_BLOCK_ACTIVE_ALLOCATED	= 1,	/* in use */
	RBLN_BLOCK_ACTIVE_PENDING_FREE	= 2,	/* freed, its last job not yet done */
};

/* What an event records. More will come (segment_map, segment_unmap): ignore unknown ones. */
enum rbln_memory_action {
	RBLN_MEMORY_ALLOC		= 0,
	RBLN_MEMORY_FREE_REQUESTED	= 1,	/* freed by the caller */
	RBLN_MEMORY_FREE_COMPLETED	= 2,	/* its last job is done: any queue may reuse it */
	RBLN_MEMORY_SEGMENT_ALLOC	= 3,	/* a segment reserved from the driver */
	RBLN_MEMORY_SEGMENT_FREE	= 4,	/* a segment given back */
	RBLN_MEMORY_OOM			= 5,	/* an allocation failed for want of device memory */
	RBLN_MEMORY_SEGMENT_MAP		= 6,	/* an expandable segment grew */
	RBLN_MEMORY_SEGMENT_UNMAP	= 7,	/* an expandable segment shrank */
};

/*
 * A return address, resolved with dladdr(3); or, first of its frames, the
 * user's code a framework on librbln named (rbln_explain_attribute()'s
 * site, "model.py:12"): its file and line, name "??" and offset 0.
 */
struct rbln_memory_frame {
	const char *name;	/* the function's symbol, "??" when not exported */
	const char *filename;	/* the program or library, "??" if unknown */
	uintptr_t offset;	/* in that object: addr2line -f -e filename offset */
	unsigned int line;	/* a framework's frame's line; 0 for return addresses */
};

struct rbln_memory_block {
	uint64_t address, size;		/* size: rounded to 512 bytes */
	uint64_t requested_size;	/* what was asked for; 0 unless allocated */
	enum rbln_memory_block_state state;
	int64_t queue;			/* allocated for, or pending on; -1 when inactive */
	bool thread_cached;		/* free in a thread's cache: not coalesced */
	size_t nframes;			/* where it was allocated (history with stacks) */
	const struct rbln_memory_frame *frames;
};

struct rbln_memory_segment {
	int device;			/* member of the logical device (0 for one NPU) */
	int physical_device;
	uint64_t address, total_size;
	uint64_t allocated_size;	/* blocks allocated */
	uint64_t active_size;		/* blocks allocated or pending free */
	uint64_t requested_size;	/* requested by the allocated blocks */
	uint32_t queue;			/* of the allocation it was reserved for */
	bool small;			/* of the small pool (2 MiB segments) */
	bool expandable;		/* a run of mapped memory of a segment that maps and unmaps */
	size_t nblocks;			/* by address, covering the segment */
	const struct rbln_memory_block *blocks;
	size_t nframes;			/* where that allocation came from */
	const struct rbln_memory_frame *frames;
};

struct rbln_memory_event {
	enum rbln_memory_action action;
	uint64_t addr;			/* block or segment; 0 for oom */
	uint64_t size;			/* bytes requested; the segment's size for segment events */
	uint32_t queue;
	int64_t time_us;		/* since the epoch */
	size_t nframes;			/* the call's site (history with stacks) */
	const struct rbln_memory_frame *frames;
};

/* One member's history, oldest event first. */
struct rbln_memory_trace {
	int physical_device;
	size_t nevents;
	const struct rbln_memory_event *events;
};

struct rbln_memory_snapshot {
	int device;			/* the logical device */
	size_t nsegments;		/* every member's, by member then address */
	const struct rbln_memory_segment *segments;
	size_t ntraces;			/* one per member */
	const struct rbln_memory_trace *device_traces;
};

/* The largest max_entries of rbln_memory_record_history(). */
#define RBLN_MEMORY_HISTORY_MAX	(1u << 24)

/*
 * Starts (@enabled) or stops recording @device's history (-1: current):
 * the newest @max_entries events (1 to RBLN_MEMORY_HISTORY_MAX) of each
 * member, with the call sites of allocations and frees when @stacks.
 * Off by default; stopping frees the history.
 */
RBLN_API rbln_status rbln_memory_record_history(int device, bool enabled, bool stacks,
						size_t max_entries);
/* Every segment and block of @device (-1: current), and its history; free it with rbln_memory_snapshot_free(). */
RBLN_API rbln_status rbln_memory_snapshot(int device, struct rbln_memory_snapshot **out);
RBLN_API void rbln_memory_snapshot_free(struct rbln_memory_snapshot *snapshot);
/* @snapshot as JSON in PyTorch's layout; the caller frees it. NULL on failure. */
RBLN_API char *rbln_memory_snapshot_json(const struct rbln_memory_snapshot *snapshot);
/* torch.cuda.memory._dump_snapshot(): @device's snapshot as JSON into the file @path. */
RBLN_API rbln_status rbln_memory_dump_snapshot(int device, const char *path);

/* --- ops ----------------------------------------------------------------------- */

/*
 * Ops the NPU runs take tensors on one rbln device (never the CPU) and
 * return a new tensor there, or NULL with rbln_last_error() set. The work
 * is queued: results are read (rbln_tensor_read) or synchronized
 * (rbln_synchronize) after it is done. Each op is compiled into a command
 * buffer once per (op, dtypes, shapes) and cached: changing shapes
 * recompiles, repeating them is a warm hit (see rbln_explain_begin).
 * On a logical device the op runs on every member, one shard each.
 */
RBLN_API rbln_tensor *rbln_add(rbln_tensor *a, rbln_tensor *b);
RBLN_API rbln_tensor *rbln_sub(rbln_tensor *a, rbln_tensor *b);
RBLN_API rbln_tensor *rbln_mul(rbln_tensor *a, rbln_tensor *b);
RBLN_API rbln_tensor *rbln_div(rbln_tensor *a, rbln_tensor *b);
RBLN_API rbln_tensor *rbln_maximum(rbln_tensor *a, rbln_tensor *b);
RBLN_API rbln_tensor *rbln_minimum(rbln_tensor *a, rbln_tensor *b);
/* @s converted to @a's dtype. */
RBLN_API rbln_tensor *rbln_add_scalar(rbln_tensor *a, double s);
RBLN_API rbln_tensor *rbln_sub_scalar(rbln_tensor *a, double s);
RBLN_API rbln_tensor *rbln_mul_scalar(rbln_tensor *a, double s);
RBLN_API rbln_tensor *rbln_div_scalar(rbln_tensor *a, double s);
RBLN_API rbln_tensor *rbln_maximum_scalar(rbln_tensor *a, double s);
RBLN_API rbln_tensor *rbln_minimum_scalar(rbln_tensor *a, double s);
RBLN_API rbln_tensor *rbln_neg(rbln_tensor *a);
RBLN_API rbln_tensor *rbln_abs(rbln_tensor *a);
RBLN_API rbln_tensor *rbln_relu(rbln_tensor *a);
RBLN_API rbln_tensor *rbln_cast(rbln_tensor *a, rbln_dtype dtype);
/* Over the last dimension: the result has one dimension less. */
RBLN_API rbln_tensor *rbln_sum(rbln_tensor *a);
RBLN_API rbln_tensor *rbln_amax(rbln_tensor *a);
/* [M,K] @ [K,N], or batched: [B,M,K] @ [B,K,N] or [B,M,K] @ [K,N]. */
RBLN_API rbln_tensor *rbln_matmul(rbln_tensor *a, rbln_tensor *b);
RBLN_API rbln_tensor *rbln_clone(rbln_tensor *a);
/* In place: @dst's data becomes @src's (same device, dtype and shape) / @value. */
RBLN_API rbln_status rbln_copy(rbln_tensor *dst, rbln_tensor *src);
RBLN_API rbln_status rbln_fill(rbln_tensor *t, double value);

/*
 * Ops the ISA lacks run on the CPU, on any tensor: integers give float32.
 * On a device tensor the input moves to the host and the result back
 * (host bounces, which explain() reports). softmax is over the last dimension.
 */
RBLN_API rbln_tensor *rbln_exp(rbln_tensor *a);
RBLN_API rbln_tensor *rbln_log(rbln_tensor *a);
RBLN_API rbln_tensor *rbln_tanh(rbln_tensor *a);
RBLN_API rbln_tensor *rbln_softmax(rbln_tensor *a);
/* One element (@index: one entry per dimension; NULL for a 0-d tensor), as a double. */
RBLN_API rbln_status rbln_tensor_item(rbln_tensor *t, const int64_t *index, double *value);
/* Prints @t to @f as PyTorch does: tensor([...], device='rbln:0', dtype=rbln.float32). */
RBLN_API rbln_status rbln_tensor_print(rbln_tensor *t, FILE *f);

/* --- offload ----------------------------------------------------------------- */

/*
 * torch.rbln.offload(): between enter and the matching exit (they nest;
 * the switch is process-wide, with a thread-safe depth), the host memory
 * backing tensors created on RBLN devices is file-backed under
 * $RBLN_OFFLOAD_DIR (default ~/.cache/rbln/offload) and never pinned, so
 * the kernel can page it out. Each file goes with its tensor's host memory.
 * An exit without an enter is RBLN_ERROR_INVALID.
 */
RBLN_API rbln_status rbln_offload_enter(void);
RBLN_API rbln_status rbln_offload_exit(void);
RBLN_API bool rbln_offload_active(void);

/* Dtypes automatic mixed precision supports: none yet, so 0. */
RBLN_API size_t rbln_amp_supported_dtypes(rbln_dtype *out, size_t cap);

/* --- graphs ------------------------------------------------------------------ */

/*
 * CUDA Graphs for rbln (docs/graphs.md): the device ops a thread issues on
 * @device between capture_begin and capture_end are recorded, not run, and
 * each replay submits them all as one job per member (or as few as the
 * device's command-buffer size and the gathers between members allow),
 * asynchronously, in order with the device's other work. The tensors
 * captured ops touch keep their device memory, and so their addresses,
 * while the graph lives: freeing one only drops the caller's reference. Replays read what the inputs hold then:
 * new inputs are copied into the captured tensors (rbln_copy). A tensor
 * created on @device while capturing lives in device memory at once, in
 * the graph's memory; zeros and full become captured fills.
 *
 * What cannot be replayed fails with RBLN_ERROR_CAPTURE and a message
 * naming it, and invalidates the capture: a synchronization of the device,
 * a CPU fallback, item(), a copy between the device and the host (reading
 * a tensor, materializing a lazy one, from_data, rand, to()), a replay.
 * On a logical device every member is captured, gathers between members
 * included. Every op
 * on @device after that fails the same way until capture_end, which then
 * returns RBLN_ERROR_CAPTURE and releases what the capture held.
 */
typedef struct rbln_graph rbln_graph;

/* Starts capturing the calling thread's ops on @device (-1: current); one capture per thread. */
RBLN_API rbln_status rbln_graph_capture_begin(int device);
/* Ends the calling thread's capture: the graph in *@graph, or NULL and why it cannot be. */
RBLN_API rbln_status rbln_graph_capture_end(rbln_graph **graph);
/* The logical device the calling thread captures on, or -1 when it captures nothing. */
RBLN_API int rbln_graph_capturing(void);
/* Submits the captured ops; complete after rbln_synchronize() of the graph's device. */
RBLN_API rbln_status rbln_graph_replay(rbln_graph *graph);
/* How many ops the graph replays (over all members); a negative rbln_status on a bad handle. */
RBLN_API int64_t rbln_graph_ops(const rbln_graph *graph);
/* Frees @graph (a replay in flight completes first, on the device); NULL is a no-op. */
RBLN_API void rbln_graph_free(rbln_graph *graph);

/* --- explain ----------------------------------------------------------------- */

/*
 * torch.rbln.explain(): a region that counts the hidden overhead of ops
 * (programs recompiled, ops run on the CPU, data bouncing through the
 * host) and says what to do about it. One region at a time, process-wide:
 * every thread's ops count. Nothing is recorded, and nothing costs, while
 * no region is open.
 */
typedef struct rbln_explain rbln_explain;
typedef struct rbln_explain rbln_profile;	/* torch.rbln.RBLNProfile */

/* The overhead signals: recompile, cpu_fallback, host_bounce. */
#define RBLN_EXPLAIN_SIGNALS	3

struct rbln_explain_verdict {
	bool clean;				/* no signal fired */
	size_t nreasons;			/* one per signal that fired */
	const char *reasons[RBLN_EXPLAIN_SIGNALS];	/* e.g. "3 recompiles (matmul x2, add x1)" */
};

struct rbln_explain_counter {
	int64_t count;
	int64_t ns;				/* host time of those dispatches */
};

/* A caller of an op (with_stack): "fn+0x1d (/path/prog)" or "/path/prog+0x11d9". */
struct rbln_explain_site_count {
	const char *site;
	int64_t count;
};

struct rbln_explain_op_count {
	const char *op;
	int64_t count;
	size_t nsites;				/* 0 without with_stack */
	const struct rbln_explain_site_count *sites;	/* most frequent first */
};

struct rbln_explain_bounce_site {
	const char *site;			/* "softmax: device->host[ at <caller>]" */
	const char *op;
	bool to_host;				/* device to host, else host to device */
	const char *caller;			/* NULL without with_stack */
	int64_t count;
	int64_t bytes;
};

/*
 * Every number of an ended region. The pointers belong to the region and
 * live until rbln_explain_free(); arrays are sorted, largest first.
 */
struct rbln_explain_dump {
	bool with_stack;
	int64_t wall_ns;			/* from begin to end */
	struct {
		struct rbln_explain_counter total, warm_hit, recompile, cpu_fallback;
	} dispatch;
	size_t nrecompile_ops;
	const struct rbln_explain_op_count *recompiles_by_op;
	size_t nfallback_ops;
	const struct rbln_explain_op_count *fallbacks_by_op;
	struct {
		int64_t count, bytes;
		int64_t to_host_count, to_host_bytes;
		int64_t to_device_count, to_device_bytes;
		size_t nsites;
		const struct rbln_explain_bounce_site *by_site;
	} host_bounce;
	struct {
		int64_t device_bytes;		/* tensor data in device memory */
		int64_t lazy_bytes;		/* device tensors' data still in host memory */
		int64_t offloaded_bytes;	/* of the lazy bytes, file-backed */
	} residency;
	struct {
		int64_t current, peak;		/* allocated.*, summed over logical devices */
	} device_memory;
	/* Events counted in the totals but, out of memory, not by op or site. */
	int64_t unattributed;
	/* Graph replays (not overhead): their captured ops are not dispatched again. */
	struct {
		int64_t count;			/* replays */
		int64_t ops;			/* ops they ran */
		int64_t ns;			/* host time of their submissions */
	} graph_replay;
};

/*
 * Opens the region; @with_stack also records the caller of each
 * recompiled, fallen-back or bouncing op. NULL and RBLN_ERROR_BUSY while
 * another region is open (from any thread).
 */
RBLN_API rbln_explain *rbln_explain_begin(bool with_stack);
/*
 * For frameworks built on librbln (torch.rbln): until the next call, this
 * thread's host bounces count under @op (NULL: librbln's own op names),
 * and regions with_stack report @site (e.g. "model.py:12"; NULL: the C
 * caller) for its bounces, recompilations and fallbacks.
 */
RBLN_API rbln_status rbln_explain_attribute(const char *op, const char *site);
/*
 * True while a region with_stack is open, or a device records its memory
 * history with stacks: a framework need find sites only then.
 */
RBLN_API bool rbln_explain_wants_sites(void);
/* Records an op a framework ran on the CPU for want of a device kernel, in @ns. */
RBLN_API rbln_status rbln_explain_record_fallback(const char *op, uint64_t ns);
/* Records @bytes such an op moved from device memory to the host (@to_host) or back. */
RBLN_API rbln_status rbln_explain_record_bounce(const char *op, bool to_host, uint64_t bytes);
/* Closes the region (any thread may) and takes its figures; once only. */
RBLN_API rbln_status rbln_explain_end(rbln_explain *e);
/* After end: the report text, owned by @e; NULL on a bad handle. */
RBLN_API const char *rbln_explain_report(rbln_explain *e);
RBLN_API rbln_status rbln_explain_verdict(const rbln_explain *e, struct rbln_explain_verdict *out);
RBLN_API rbln_status rbln_explain_dump(const rbln_explain *e, struct rbln_explain_dump *out);
/* The dump and the verdict as JSON; the caller frees it. NULL on failure. */
RBLN_API char *rbln_explain_dump_json(const rbln_explain *e);
/* Frees @e, ending it first if it is open; NULL is a no-op. */
RBLN_API void rbln_explain_free(rbln_explain *e);

/* torch.rbln.profile: the same functions under their older names. */
RBLN_API rbln_profile *rbln_profile_begin(bool with_stack);
RBLN_API rbln_status rbln_profile_end(rbln_profile *p);
RBLN_API const char *rbln_profile_report(rbln_profile *p);
RBLN_API rbln_status rbln_profile_verdict(const rbln_profile *p, struct rbln_explain_verdict *out);
RBLN_API rbln_status rbln_profile_dump(const rbln_profile *p, struct rbln_explain_dump *out);
RBLN_API char *rbln_profile_dump_json(const rbln_profile *p);
RBLN_API void rbln_profile_free(rbln_profile *p);

#ifdef __cplusplus
}
#endif

#endif /* RBLN_RBLN_H */
