// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_explain - librbln's explain() unit (runtime/rbln_explain.c), natively
 *
 * The test plays the op code: it calls the hooks of rbln_explain.h, from
 * several threads, and provides the residency figures. It checks the
 * report, the verdict, every field of the dump and the JSON, the callers
 * with_stack (the binary is linked with -rdynamic), the busy and bad-handle
 * paths, and, with malloc/calloc/realloc wrapped, that running out of
 * memory loses nothing silently and leaks nothing.
 */

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json.h>

#include "kselftest_harness.h"
#include "rbln/rbln.h"
#include "rbln_explain.h"

/* ---- the runtime's side ----------------------------------------------- */

static struct rbln_residency fake_residency = {
	.device_bytes = 4096, .lazy_bytes = 1536, .offloaded_bytes = 512,
	.device_memory_current = 6144, .device_memory_peak = 10240,
};

/* Called by end() while it builds the results; set, it plays another thread then. */
static void (*during_end)(void);

void rbln_residency_get(struct rbln_residency *r)
{
	*r = fake_residency;
	if (during_end)
		during_end();
}

/* ---- allocation failures and leaks -------------------------------------- */

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void __real_free(void *p);

static atomic_long live_allocs;		/* blocks from the wrapped functions not yet freed */
static atomic_int fail_in = -1;		/* the allocation that many from now fails; -1: none */
static atomic_bool fail_all;		/* every allocation fails */

static bool inject(void)
{
	if (atomic_load(&fail_all))
		return true;
	if (atomic_load(&fail_in) < 0)
		return false;
	return atomic_fetch_sub(&fail_in, 1) == 0;
}

void *__wrap_malloc(size_t size)
{
	void *p = inject() ? NULL : __real_malloc(size);

	if (p)
		atomic_fetch_add(&live_allocs, 1);
	return p;
}

void *__wrap_calloc(size_t n, size_t size)
{
	void *p = inject() ? NULL : __real_calloc(n, size);

	if (p)
		atomic_fetch_add(&live_allocs, 1);
	return p;
}

void *__wrap_realloc(void *old, size_t size)
{
	void *p = inject() ? NULL : __real_realloc(old, size);

	if (p && !old)
		atomic_fetch_add(&live_allocs, 1);
	return p;
}

void __wrap_free(void *p)
{
	if (p)
		atomic_fetch_sub(&live_allocs, 1);
	__real_free(p);
}

/* ---- helpers ------------------------------------------------------------- */

/* The "public op" of the runtime: its caller is the site, as in the op code. */
static __attribute__((noinline)) void op_dispatch(enum rbln_dispatch_kind kind, const char *op,
						   uint64_t ns)
{
	if (rbln_explain_active())
		rbln_explain_dispatch(kind, op, ns, __builtin_return_address(0));
}

static __attribute__((noinline)) void op_bounce(const char *op, bool to_host, uint64_t bytes)
{
	if (rbln_explain_active())
		rbln_explain_bounce(op, to_host, bytes, __builtin_return_address(0));
}

/* A tail call would make the caller's caller the site. */
#define NO_TAIL_CALL() __asm__ volatile("" ::: "memory")

/* Softmax on the CPU: its input goes to the host, its result back. */
void __attribute__((noinline)) explain_test_softmax(void)
{
	op_bounce("softmax", true, 1024);
	op_dispatch(RBLN_DISPATCH_CPU_FALLBACK, "softmax", 7000);
	op_bounce("softmax", false, 1024);
	NO_TAIL_CALL();
}

/*
 * A small forward pass: matmul recompiled at two call sites and add at
 * one, ten warm hits, softmax twice.
 */
void __attribute__((noinline)) explain_test_model(void)
{
	int i;

	op_dispatch(RBLN_DISPATCH_RECOMPILE, "matmul", 1000);
	op_dispatch(RBLN_DISPATCH_RECOMPILE, "matmul", 2000);
	op_dispatch(RBLN_DISPATCH_RECOMPILE, "add", 500);
	for (i = 0; i < 10; i++)
		op_dispatch(RBLN_DISPATCH_WARM_HIT, i % 2 ? "add" : "relu", 100);
	explain_test_softmax();
	explain_test_softmax();
	NO_TAIL_CALL();
}

/* A second caller, exported too, for the per-site breakdown. */
void __attribute__((noinline)) explain_test_other_caller(void)
{
	op_dispatch(RBLN_DISPATCH_RECOMPILE, "matmul", 10);
	op_bounce("softmax", true, 64);
	NO_TAIL_CALL();
}

/* A caller without a dynamic symbol: its site is the object plus an offset. */
static __attribute__((noinline)) void hidden_caller(void)
{
	op_dispatch(RBLN_DISPATCH_CPU_FALLBACK, "exp", 10);
	NO_TAIL_CALL();
}

/* The report's line that starts with @prefix, copied to @line. */
static bool report_line(const char *report, const char *prefix, char *line, size_t size)
{
	const char *p = report, *end;

	while (p && *p) {
		end = strchr(p, '\n');
		if (!strncmp(p, prefix, strlen(prefix))) {
			snprintf(line, size, "%.*s", (int)(end ? end - p : (long)strlen(p)), p);
			return true;
		}
		p = end ? end + 1 : NULL;
	}
	return false;
}

/* The count column of the row of @signal in the signal table; -1 if absent. */
static long row_count(const char *report, const char *signal)
{
	char line[512], prefix[64];
	long count;

	snprintf(prefix, sizeof(prefix), "%s ", signal);
	if (!report_line(report, prefix, line, sizeof(line)))
		return -1;
	if (sscanf(line + strlen(signal), " %ld", &count) != 1)
		return -1;
	return count;
}

static const struct rbln_explain_op_count *find_op(const struct rbln_explain_op_count *ops,
						   size_t n, const char *op)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!strcmp(ops[i].op, op))
			return &ops[i];
	return NULL;
}

static int64_t jint(struct json_object *o, const char *path)
{
	char key[64];
	const char *dot;
	struct json_object *v;

	while ((dot = strchr(path, '.'))) {
		snprintf(key, sizeof(key), "%.*s", (int)(dot - path), path);
		if (!json_object_object_get_ex(o, key, &o))
			return INT64_MIN;
		path = dot + 1;
	}
	if (!json_object_object_get_ex(o, path, &v) || !json_object_is_type(v, json_type_int))
		return INT64_MIN;
	return json_object_get_int64(v);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- tests ------------------------------------------------------------------ */

TEST(off_by_default)
{
	struct rbln_explain_dump d;
	rbln_explain *e;

	EXPECT_FALSE(rbln_explain_active());
	/* Hooks with no region open (a dispatch racing end) record nothing. */
	rbln_explain_dispatch(RBLN_DISPATCH_RECOMPILE, "matmul", 5, NULL);
	rbln_explain_bounce("softmax", true, 100, NULL);

	e = rbln_explain_begin(false);
	ASSERT_NE(NULL, e);
	EXPECT_TRUE(rbln_explain_active());
	ASSERT_EQ(RBLN_OK, rbln_explain_end(e));
	EXPECT_FALSE(rbln_explain_active());
	rbln_explain_dispatch(RBLN_DISPATCH_CPU_FALLBACK, "exp", 5, NULL);
	rbln_explain_bounce("exp", false, 100, NULL);

	ASSERT_EQ(RBLN_OK, rbln_explain_dump(e, &d));
	EXPECT_EQ(0, d.dispatch.total.count);
	EXPECT_EQ(0, d.dispatch.recompile.count);
	EXPECT_EQ(0, d.dispatch.cpu_fallback.count);
	EXPECT_EQ(0, d.host_bounce.count);
	EXPECT_EQ(0u, d.nrecompile_ops);
	EXPECT_EQ(0u, d.nfallback_ops);
	EXPECT_EQ(0u, d.host_bounce.nsites);
	EXPECT_EQ(0, strncmp(rbln_explain_report(e), "[clean]\n", 8));
	rbln_explain_free(e);
}

TEST(clean_region)
{
	struct rbln_explain_verdict v;
	struct rbln_explain_dump d;
	const char *r;
	rbln_explain *e;
	int i;

	e = rbln_explain_begin(false);
	ASSERT_NE(NULL, e);
	for (i = 0; i < 7; i++)
		op_dispatch(RBLN_DISPATCH_WARM_HIT, "add", 250);
	ASSERT_EQ(RBLN_OK, rbln_explain_end(e));

	r = rbln_explain_report(e);
	ASSERT_NE(NULL, r);
	EXPECT_EQ(0, strncmp(r, "[clean]\n", 8));
	EXPECT_EQ(7, row_count(r, "warm_hit"));
	EXPECT_EQ(0, row_count(r, "recompile"));
	EXPECT_EQ(0, row_count(r, "cpu_fallback"));
	EXPECT_EQ(0, row_count(r, "host_bounce (device->host)"));
	EXPECT_EQ(0, row_count(r, "host_bounce (host->device)"));
	EXPECT_NE(NULL, strstr(r, "cached programs reused (not overhead)"));
	/* No remedy where nothing fired (nor blanks for it), and no detail block. */
	EXPECT_EQ(NULL, strstr(r, " \n"));
	EXPECT_EQ(NULL, strstr(r, "stabilize"));
	EXPECT_EQ(NULL, strstr(r, "use a device op"));
	EXPECT_EQ(NULL, strstr(r, "\nrecompile:"));
	EXPECT_NE(NULL, strstr(r, "Dispatch: 7 ops in 1.750us"));

	ASSERT_EQ(RBLN_OK, rbln_explain_verdict(e, &v));
	EXPECT_TRUE(v.clean);
	EXPECT_EQ(0u, v.nreasons);
	ASSERT_EQ(RBLN_OK, rbln_explain_dump(e, &d));
	EXPECT_EQ(7, d.dispatch.warm_hit.count);
	EXPECT_EQ(1750, d.dispatch.warm_hit.ns);
	EXPECT_EQ(7, d.dispatch.total.count);
	rbln_explain_free(e);
}

TEST(graph_replays_are_counted_not_overhead)
{
	struct rbln_explain_verdict v;
	struct rbln_explain_dump d;
	struct json_object *root;
	rbln_explain *e = rbln_explain_begin(false);
	const char *r;
	char *json;

	ASSERT_NE(NULL, e);
	rbln_explain_graph_replay(256, 4000);
	rbln_explain_graph_replay(256, 6000);
	rbln_explain_dispatch(RBLN_DISPATCH_WARM_HIT, "add", 250, NULL);
	ASSERT_EQ(RBLN_OK, rbln_explain_end(e));
	/* After the end, a replay counts nowhere. */
	rbln_explain_graph_replay(1, 1);

	r = rbln_explain_report(e);
	ASSERT_NE(NULL, r);
	EXPECT_EQ(0, strncmp(r, "[clean]\n", 8));
	EXPECT_EQ(2, row_count(r, "graph_replay"));
	EXPECT_NE(NULL, strstr(r, "512 captured ops replayed (not overhead)"));
	EXPECT_NE(NULL, strstr(r, "Dispatch: 1 op in"));
	ASSERT_EQ(RBLN_OK, rbln_explain_verdict(e, &v));
	EXPECT_TRUE(v.clean);
	ASSERT_EQ(RBLN_OK, rbln_explain_dump(e, &d));
	EXPECT_EQ(2, d.graph_replay.count);
	EXPECT_EQ(512, d.graph_replay.ops);
	EXPECT_EQ(10000, d.graph_replay.ns);
	EXPECT_EQ(1, d.dispatch.total.count);
	json = rbln_explain_dump_json(e);
	ASSERT_NE(NULL, json);
	root = json_tokener_parse(json);
	ASSERT_NE(NULL, root);
	EXPECT_EQ(2, jint(root, "graph_replay.count"));
	EXPECT_EQ(512, jint(root, "graph_replay.ops"));
	EXPECT_EQ(10000, jint(root, "graph_replay.ns"));
	json_object_put(root);
	free(json);
	rbln_explain_free(e);

	/* Without replays the row is there, with no note. */
	e = rbln_explain_begin(false);
	ASSERT_NE(NULL, e);
	ASSERT_EQ(RBLN_OK, rbln_explain_end(e));
	r = rbln_explain_report(e);
	EXPECT_EQ(0, row_count(r, "graph_replay"));
	EXPECT_EQ(NULL, strstr(r, "captured ops"));
	rbln_explain_free(e);
}

TEST(report_verdict_dump)
{
	const struct rbln_explain_op_count *o;
	const struct rbln_explain_bounce_site *b;
	struct rbln_explain_verdict v;
	struct rbln_explain_dump d;
	uint64_t t0, t1;
	char line[512];
	const char *r;
	rbln_explain *e;

	t0 = mono_ns();
	e = rbln_explain_begin(false);
	ASSERT_NE(NULL, e);
	explain_test_model();
	ASSERT_EQ(RBLN_OK, rbln_explain_end(e));
	t1 = mono_ns();

	ASSERT_EQ(RBLN_OK, rbln_explain_verdict(e, &v));
	EXPECT_FALSE(v.clean);
	ASSERT_EQ(3u, v.nreasons);
	EXPECT_STREQ("3 recompiles (matmul x2, add x1)", v.reasons[0]);
	EXPECT_STREQ("2 cpu fallbacks (softmax x2)", v.reasons[1]);
	EXPECT_STREQ("4 host bounces, 4096 bytes (softmax x4)", v.reasons[2]);

	r = rbln_explain_report(e);
	ASSERT_NE(NULL, r);
	TH_LOG("report:\n%s", r);
	EXPECT_EQ(0, strncmp(r, "[overhead: 3 signals]\n", 22));
	/* The table: a header between rules, one row per signal, with remedies. */
	ASSERT_TRUE(report_line(r, "Signal ", line, sizeof(line)));
	EXPECT_NE(NULL, strstr(line, "Count"));
	EXPECT_NE(NULL, strstr(line, "Bytes"));
	EXPECT_NE(NULL, strstr(line, "Note"));
	EXPECT_EQ(10, row_count(r, "warm_hit"));
	EXPECT_EQ(3, row_count(r, "recompile"));
	EXPECT_EQ(2, row_count(r, "cpu_fallback"));
	EXPECT_EQ(2, row_count(r, "host_bounce (device->host)"));
	EXPECT_EQ(2, row_count(r, "host_bounce (host->device)"));
	ASSERT_TRUE(report_line(r, "recompile ", line, sizeof(line)));
	EXPECT_NE(NULL, strstr(line, "stabilize input shapes so programs are reused"));
	ASSERT_TRUE(report_line(r, "cpu_fallback ", line, sizeof(line)));
	EXPECT_NE(NULL, strstr(line, "use a device op, or keep the data on the device"));
	ASSERT_TRUE(report_line(r, "host_bounce (device->host) ", line, sizeof(line)));
	EXPECT_NE(NULL, strstr(line, "2.00 KiB"));
	EXPECT_NE(NULL, strstr(line, "use a device op, or keep the data on the device"));
	EXPECT_EQ(NULL, strstr(r, " \n"));	/* no trailing blanks */
	/* The summary. */
	EXPECT_NE(NULL, strstr(r, "Dispatch: 15 ops in 18.500us (warm_hit 1.000us, recompile 3.500us, cpu_fallback 14.000us)\n"));
	EXPECT_NE(NULL, strstr(r, "Residency: device 4.00 KiB, lazy 1.50 KiB, offloaded 512 B\n"));
	EXPECT_NE(NULL, strstr(r, "Device memory: current 6.00 KiB, peak 10.00 KiB\n"));
	EXPECT_NE(NULL, strstr(r, "Region wall time: "));
	/* The detail blocks. */
	EXPECT_NE(NULL, strstr(r, "\nrecompile: 3 in 2 ops\n"));
	EXPECT_TRUE(report_line(strstr(r, "\nrecompile: 3"), "matmul ", line, sizeof(line)));
	EXPECT_NE(NULL, strstr(r, "\ncpu_fallback: 2 in 1 op\n"));
	EXPECT_NE(NULL, strstr(r, "\nhost_bounce: 4, 4.00 KiB in 2 sites\n"));
	ASSERT_TRUE(report_line(strstr(r, "\nhost_bounce: 4"), "softmax: device->host ", line,
				sizeof(line)));
	EXPECT_NE(NULL, strstr(line, " 2  2.00 KiB"));
	EXPECT_TRUE(report_line(strstr(r, "\nhost_bounce: 4"), "softmax: host->device ", line,
				sizeof(line)));
	EXPECT_EQ(NULL, strstr(r, " at "));	/* no callers without with_stack */

	/* Every number of the dump. */
	ASSERT_EQ(RBLN_OK, rbln_explain_dump(e, &d));
	EXPECT_FALSE(d.with_stack);
	EXPECT_GT(d.wall_ns, 0);
	EXPECT_LE((uint64_t)d.wall_ns, t1 - t0);
	EXPECT_EQ(15, d.dispatch.total.count);
	EXPECT_EQ(18500, d.dispatch.total.ns);
	EXPECT_EQ(10, d.dispatch.warm_hit.count);
	EXPECT_EQ(1000, d.dispatch.warm_hit.ns);
	EXPECT_EQ(3, d.dispatch.recompile.count);
	EXPECT_EQ(3500, d.dispatch.recompile.ns);
	EXPECT_EQ(2, d.dispatch.cpu_fallback.count);
	EXPECT_EQ(14000, d.dispatch.cpu_fallback.ns);
	ASSERT_EQ(2u, d.nrecompile_ops);
	EXPECT_STREQ("matmul", d.recompiles_by_op[0].op);
	EXPECT_EQ(2, d.recompiles_by_op[0].count);
	EXPECT_EQ(0u, d.recompiles_by_op[0].nsites);
	EXPECT_STREQ("add", d.recompiles_by_op[1].op);
	EXPECT_EQ(1, d.recompiles_by_op[1].count);
	ASSERT_EQ(1u, d.nfallback_ops);
	o = &d.fallbacks_by_op[0];
	EXPECT_STREQ("softmax", o->op);
	EXPECT_EQ(2, o->count);
	EXPECT_EQ(0u, o->nsites);
	EXPECT_EQ(4, d.host_bounce.count);
	EXPECT_EQ(4096, d.host_bounce.bytes);
	EXPECT_EQ(2, d.host_bounce.to_host_count);
	EXPECT_EQ(2048, d.host_bounce.to_host_bytes);
	EXPECT_EQ(2, d.host_bounce.to_device_count);
	EXPECT_EQ(2048, d.host_bounce.to_device_bytes);
	ASSERT_EQ(2u, d.host_bounce.nsites);
	b = &d.host_bounce.by_site[0];
	EXPECT_STREQ("softmax: device->host", b->site);	/* equal bytes and counts: by name */
	EXPECT_STREQ("softmax", b->op);
	EXPECT_TRUE(b->to_host);
	EXPECT_EQ(NULL, b->caller);
	EXPECT_EQ(2, b->count);
	EXPECT_EQ(2048, b->bytes);
	b = &d.host_bounce.by_site[1];
	EXPECT_STREQ("softmax: host->device", b->site);
	EXPECT_FALSE(b->to_host);
	EXPECT_EQ(2048, b->bytes);
	EXPECT_EQ(4096, d.residency.device_bytes);
	EXPECT_EQ(1536, d.residency.lazy_bytes);
	EXPECT_EQ(512, d.residency.offloaded_bytes);
	EXPECT_EQ(6144, d.device_memory.current);
	EXPECT_EQ(10240, d.device_memory.peak);
	EXPECT_EQ(0, d.unattributed);
	rbln_explain_free(e);
}

TEST(json_carries_the_dump)
{
	struct json_object *root, *a, *o, *v;
	struct rbln_explain_verdict verdict;
	struct rbln_explain_dump d;
	rbln_explain *e;
	char *json;
	size_t i;

	e = rbln_explain_begin(true);
	ASSERT_NE(NULL, e);
	explain_test_model();
	explain_test_other_caller();
	ASSERT_EQ(RBLN_OK, rbln_explain_end(e));
	ASSERT_EQ(RBLN_OK, rbln_explain_dump(e, &d));
	ASSERT_EQ(RBLN_OK, rbln_explain_verdict(e, &verdict));
	json = rbln_explain_dump_json(e);
	ASSERT_NE(NULL, json);
	root = json_tokener_parse(json);
	ASSERT_NE(NULL, root);

	ASSERT_TRUE(json_object_object_get_ex(root, "clean", &v));
	EXPECT_FALSE(json_object_get_boolean(v));
	EXPECT_EQ(3, jint(root, "signals"));
	ASSERT_TRUE(json_object_object_get_ex(root, "reasons", &a));
	ASSERT_EQ(verdict.nreasons, json_object_array_length(a));
	for (i = 0; i < verdict.nreasons; i++)
		EXPECT_STREQ(verdict.reasons[i], json_object_get_string(json_object_array_get_idx(a, i)));
	ASSERT_TRUE(json_object_object_get_ex(root, "with_stack", &v));
	EXPECT_TRUE(json_object_get_boolean(v));
	EXPECT_EQ(d.wall_ns, jint(root, "wall_ns"));
	EXPECT_EQ(d.dispatch.total.count, jint(root, "dispatch.total.count"));
	EXPECT_EQ(d.dispatch.total.ns, jint(root, "dispatch.total.ns"));
	EXPECT_EQ(d.dispatch.warm_hit.count, jint(root, "dispatch.warm_hit.count"));
	EXPECT_EQ(d.dispatch.warm_hit.ns, jint(root, "dispatch.warm_hit.ns"));
	EXPECT_EQ(d.dispatch.recompile.count, jint(root, "dispatch.recompile.count"));
	EXPECT_EQ(d.dispatch.recompile.ns, jint(root, "dispatch.recompile.ns"));
	EXPECT_EQ(d.dispatch.cpu_fallback.count, jint(root, "dispatch.cpu_fallback.count"));
	EXPECT_EQ(d.dispatch.cpu_fallback.ns, jint(root, "dispatch.cpu_fallback.ns"));
	EXPECT_EQ(d.host_bounce.count, jint(root, "host_bounce.count"));
	EXPECT_EQ(d.host_bounce.bytes, jint(root, "host_bounce.bytes"));
	EXPECT_EQ(d.host_bounce.to_host_count, jint(root, "host_bounce.to_host_count"));
	EXPECT_EQ(d.host_bounce.to_host_bytes, jint(root, "host_bounce.to_host_bytes"));
	EXPECT_EQ(d.host_bounce.to_device_count, jint(root, "host_bounce.to_device_count"));
	EXPECT_EQ(d.host_bounce.to_device_bytes, jint(root, "host_bounce.to_device_bytes"));
	EXPECT_EQ(d.residency.device_bytes, jint(root, "residency.device_bytes"));
	EXPECT_EQ(d.residency.lazy_bytes, jint(root, "residency.lazy_bytes"));
	EXPECT_EQ(d.residency.offloaded_bytes, jint(root, "residency.offloaded_bytes"));
	EXPECT_EQ(d.device_memory.current, jint(root, "device_memory.current"));
	EXPECT_EQ(d.device_memory.peak, jint(root, "device_memory.peak"));
	EXPECT_EQ(0, jint(root, "unattributed"));

	ASSERT_TRUE(json_object_object_get_ex(root, "recompiles_by_op", &a));
	ASSERT_EQ(d.nrecompile_ops, json_object_array_length(a));
	for (i = 0; i < d.nrecompile_ops; i++) {
		const struct rbln_explain_op_count *op = &d.recompiles_by_op[i];
		struct json_object *sites;
		size_t j;

		o = json_object_array_get_idx(a, i);
		ASSERT_TRUE(json_object_object_get_ex(o, "op", &v));
		EXPECT_STREQ(op->op, json_object_get_string(v));
		EXPECT_EQ(op->count, jint(o, "count"));
		ASSERT_TRUE(json_object_object_get_ex(o, "sites", &sites));
		ASSERT_EQ(op->nsites, json_object_array_length(sites));
		for (j = 0; j < op->nsites; j++) {
			struct json_object *s = json_object_array_get_idx(sites, j);

			ASSERT_TRUE(json_object_object_get_ex(s, "site", &v));
			EXPECT_STREQ(op->sites[j].site, json_object_get_string(v));
			EXPECT_EQ(op->sites[j].count, jint(s, "count"));
		}
	}
	ASSERT_TRUE(json_object_object_get_ex(root, "fallbacks_by_op", &a));
	ASSERT_EQ(d.nfallback_ops, json_object_array_length(a));
	o = json_object_array_get_idx(a, 0);
	EXPECT_EQ(d.fallbacks_by_op[0].count, jint(o, "count"));
	ASSERT_TRUE(json_object_object_get_ex(root, "host_bounce", &o));
	ASSERT_TRUE(json_object_object_get_ex(o, "by_site", &a));
	ASSERT_EQ(d.host_bounce.nsites, json_object_array_length(a));
	for (i = 0; i < d.host_bounce.nsites; i++) {
		const struct rbln_explain_bounce_site *b = &d.host_bounce.by_site[i];

		o = json_object_array_get_idx(a, i);
		ASSERT_TRUE(json_object_object_get_ex(o, "site", &v));
		EXPECT_STREQ(b->site, json_object_get_string(v));
		ASSERT_TRUE(json_object_object_get_ex(o, "op", &v));
		EXPECT_STREQ(b->op, json_object_get_string(v));
		ASSERT_TRUE(json_object_object_get_ex(o, "direction", &v));
		EXPECT_STREQ(b->to_host ? "device->host" : "host->device", json_object_get_string(v));
		ASSERT_TRUE(json_object_object_get_ex(o, "caller", &v));
		EXPECT_STREQ(b->caller, json_object_get_string(v));
		EXPECT_EQ(b->count, jint(o, "count"));
		EXPECT_EQ(b->bytes, jint(o, "bytes"));
	}
	json_object_put(root);
	free(json);
	rbln_explain_free(e);
}

TEST(json_without_stack_has_null_callers)
{
	struct json_object *root, *o, *a, *v;
	rbln_explain *e;
	char *json;

	e = rbln_explain_begin(false);
	ASSERT_NE(NULL, e);
	op_bounce("tanh", true, 8);
	ASSERT_EQ(RBLN_OK, rbln_explain_end(e));
	json = rbln_explain_dump_json(e);
	ASSERT_NE(NULL, json);
	root = json_tokener_parse(json);
	ASSERT_NE(NULL, root);
	ASSERT_TRUE(json_object_object_get_ex(root, "host_bounce", &o));
	ASSERT_TRUE(json_object_object_get_ex(o, "by_site", &a));
	ASSERT_EQ(1u, json_object_array_length(a));
	ASSERT_TRUE(json_object_object_get_ex(json_object_array_get_idx(a, 0), "caller", &v));
	EXPECT_EQ(NULL, v);
	ASSERT_TRUE(json_object_object_get_ex(json_object_array_get_idx(a, 0), "site", &v));
	EXPECT_STREQ("tanh: device->host", json_object_get_string(v));
	json_object_put(root);
	free(json);
	rbln_explain_free(e);
}

TEST(with_stack_names_callers)
{
	const struct rbln_explain_op_count *o;
	const struct rbln_explain_bounce_site *b;
	struct rbln_explain_dump d;
	char line[1024];
	const char *r, *site;
	uintptr_t off;
	Dl_info self;
	rbln_explain *e;
	size_t i;

	e = rbln_explain_begin(true);
	ASSERT_NE(NULL, e);
	explain_test_model();
	explain_test_other_caller();
	explain_test_other_caller();
	hidden_caller();
	ASSERT_EQ(RBLN_OK, rbln_explain_end(e));
	ASSERT_EQ(RBLN_OK, rbln_explain_dump(e, &d));
	EXPECT_TRUE(d.with_stack);

	/*
	 * matmul: once at each of two lines of the model, twice at the one
	 * line of the other caller: three sites, the busiest first.
	 */
	o = find_op(d.recompiles_by_op, d.nrecompile_ops, "matmul");
	ASSERT_NE(NULL, o);
	EXPECT_EQ(4, o->count);
	ASSERT_EQ(3u, o->nsites);
	for (i = 0; i < 3; i++)
		TH_LOG("matmul site %zu: %s x%ld", i, o->sites[i].site, (long)o->sites[i].count);
	EXPECT_EQ(0, strncmp(o->sites[0].site, "explain_test_other_caller+0x", 28));
	EXPECT_EQ(2, o->sites[0].count);
	EXPECT_NE(NULL, strstr(o->sites[0].site, "test_explain)"));	/* the object */
	EXPECT_EQ(0, strncmp(o->sites[1].site, "explain_test_model+0x", 21));
	EXPECT_EQ(1, o->sites[1].count);
	EXPECT_EQ(0, strncmp(o->sites[2].site, "explain_test_model+0x", 21));
	EXPECT_EQ(1, o->sites[2].count);
	EXPECT_STRNE(o->sites[1].site, o->sites[2].site);
	o = find_op(d.recompiles_by_op, d.nrecompile_ops, "add");
	ASSERT_NE(NULL, o);
	ASSERT_EQ(1u, o->nsites);

	/* exp from a function without a dynamic symbol: object+offset inside it. */
	o = find_op(d.fallbacks_by_op, d.nfallback_ops, "exp");
	ASSERT_NE(NULL, o);
	ASSERT_EQ(1u, o->nsites);
	site = o->sites[0].site;
	TH_LOG("exp site: %s", site);
	ASSERT_NE(0, dladdr((void *)hidden_caller, &self));
	ASSERT_EQ(0, strncmp(site, self.dli_fname, strlen(self.dli_fname)));
	ASSERT_EQ(1, sscanf(site + strlen(self.dli_fname), "+%lx", &off));
	EXPECT_GT(off, (uintptr_t)hidden_caller - (uintptr_t)self.dli_fbase);
	EXPECT_LT(off, (uintptr_t)hidden_caller - (uintptr_t)self.dli_fbase + 64);
	o = find_op(d.fallbacks_by_op, d.nfallback_ops, "softmax");
	ASSERT_NE(NULL, o);
	ASSERT_EQ(1u, o->nsites);
	EXPECT_EQ(0, strncmp(o->sites[0].site, "explain_test_softmax+0x", 23));
	EXPECT_EQ(2, o->sites[0].count);

	/*
	 * Bounces: per (op, direction, caller). The four of the model's
	 * softmax come from two lines of explain_test_softmax, the other
	 * caller's two from one line.
	 */
	ASSERT_EQ(3u, d.host_bounce.nsites);
	for (i = 0; i < d.host_bounce.nsites; i++) {
		b = &d.host_bounce.by_site[i];
		ASSERT_NE(NULL, b->caller);
		snprintf(line, sizeof(line), "softmax: %s at %s",
			 b->to_host ? "device->host" : "host->device", b->caller);
		EXPECT_STREQ(line, b->site);
	}
	EXPECT_EQ(0, strncmp(d.host_bounce.by_site[0].caller, "explain_test_softmax+0x", 23));
	EXPECT_EQ(2, d.host_bounce.by_site[0].count);
	EXPECT_EQ(2048, d.host_bounce.by_site[0].bytes);
	EXPECT_EQ(0, strncmp(d.host_bounce.by_site[1].caller, "explain_test_softmax+0x", 23));
	EXPECT_EQ(2048, d.host_bounce.by_site[1].bytes);
	EXPECT_EQ(0, strncmp(d.host_bounce.by_site[2].caller, "explain_test_other_caller+0x", 28));
	EXPECT_EQ(2, d.host_bounce.by_site[2].count);
	EXPECT_EQ(128, d.host_bounce.by_site[2].bytes);

	/* The report lists the callers under their ops. */
	r = rbln_explain_report(e);
	ASSERT_NE(NULL, r);
	TH_LOG("report:\n%s", r);
	EXPECT_NE(NULL, strstr(r, "\n  at explain_test_other_caller+0x"));
	EXPECT_NE(NULL, strstr(r, "\nsoftmax: device->host at explain_test_softmax+0x"));
	rbln_explain_free(e);
}

#define NTHREADS	4
#define PER_THREAD	2000

static void *hammer(void *arg)
{
	int i;

	(void)arg;
	for (i = 0; i < PER_THREAD; i++) {
		op_dispatch(RBLN_DISPATCH_WARM_HIT, "add", 1);
		op_dispatch(RBLN_DISPATCH_RECOMPILE, i % 2 ? "matmul" : "sum", 2);
		op_dispatch(RBLN_DISPATCH_CPU_FALLBACK, "tanh", 3);
		op_bounce("tanh", i % 2, 16);
	}
	return NULL;
}

/*
 * A framework on librbln (torch.rbln) records its own CPU fallbacks and
 * bounces, names their op, and gives its own call sites; librbln's
 * records of the thread meanwhile carry them too.
 */
TEST(frameworks_attribute_their_work)
{
	const struct rbln_explain_op_count *o;
	struct rbln_explain_dump d;
	rbln_explain *e;
	size_t i;

	EXPECT_FALSE(rbln_explain_wants_sites());
	/* Outside a region: nothing counted, nothing failed. */
	EXPECT_EQ(RBLN_OK, rbln_explain_record_fallback("aten::exp.out", 5));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_explain_record_fallback(NULL, 5));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_explain_record_bounce(NULL, true, 5));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "NULL op"));

	e = rbln_explain_begin(false);
	ASSERT_NE(NULL, e);
	EXPECT_FALSE(rbln_explain_wants_sites());
	ASSERT_EQ(RBLN_OK, rbln_explain_end(e));
	rbln_explain_free(e);

	e = rbln_explain_begin(true);
	ASSERT_NE(NULL, e);
	EXPECT_TRUE(rbln_explain_wants_sites());
	ASSERT_EQ(RBLN_OK, rbln_explain_attribute("aten::exp.out", "model.py:12"));
	EXPECT_EQ(RBLN_OK, rbln_explain_record_bounce("aten::exp.out", true, 64));
	EXPECT_EQ(RBLN_OK, rbln_explain_record_fallback("aten::exp.out", 1000));
	/* librbln's own bounce of the thread: the framework's op and site. */
	rbln_explain_bounce("rbln_tensor_read", false, 64, __builtin_return_address(0));
	rbln_explain_dispatch(RBLN_DISPATCH_RECOMPILE, "add", 10, __builtin_return_address(0));
	ASSERT_EQ(RBLN_OK, rbln_explain_attribute(NULL, "model.py:13"));
	EXPECT_EQ(RBLN_OK, rbln_explain_record_fallback("aten::exp.out", 1000));
	ASSERT_EQ(RBLN_OK, rbln_explain_attribute(NULL, NULL));
	rbln_explain_dispatch(RBLN_DISPATCH_RECOMPILE, "add", 10, __builtin_return_address(0));
	ASSERT_EQ(RBLN_OK, rbln_explain_end(e));
	EXPECT_FALSE(rbln_explain_wants_sites());

	ASSERT_EQ(RBLN_OK, rbln_explain_dump(e, &d));
	EXPECT_EQ(2, d.dispatch.cpu_fallback.count);
	EXPECT_EQ(2000, d.dispatch.cpu_fallback.ns);
	o = find_op(d.fallbacks_by_op, d.nfallback_ops, "aten::exp.out");
	ASSERT_NE(NULL, o);
	ASSERT_EQ(2u, o->nsites);
	/* One each: in either order. */
	EXPECT_TRUE(!strcmp(o->sites[0].site, "model.py:12") ^ !strcmp(o->sites[1].site, "model.py:12"));
	EXPECT_TRUE(!strcmp(o->sites[0].site, "model.py:13") ^ !strcmp(o->sites[1].site, "model.py:13"));
	ASSERT_EQ(2u, d.host_bounce.nsites);
	for (i = 0; i < 2; i++) {
		EXPECT_STREQ("aten::exp.out", d.host_bounce.by_site[i].op);
		EXPECT_STREQ("model.py:12", d.host_bounce.by_site[i].caller);
	}
	EXPECT_EQ(64, d.host_bounce.to_host_bytes);
	EXPECT_EQ(64, d.host_bounce.to_device_bytes);
	/* add: once at the framework's site, once at this function's. */
	o = find_op(d.recompiles_by_op, d.nrecompile_ops, "add");
	ASSERT_NE(NULL, o);
	ASSERT_EQ(2u, o->nsites);
	EXPECT_TRUE(!strcmp(o->sites[0].site, "model.py:12") ||
		    !strcmp(o->sites[1].site, "model.py:12"));
	rbln_explain_free(e);
}

TEST(counters_are_process_wide)
{
	const struct rbln_explain_op_count *o;
	pthread_t th[NTHREADS];
	struct rbln_explain_dump d;
	rbln_explain *e;
	const int64_t n = (int64_t)NTHREADS * PER_THREAD;
	int64_t sum;
	int i;

	e = rbln_explain_begin(true);
	ASSERT_NE(NULL, e);
	for (i = 0; i < NTHREADS; i++)
		ASSERT_EQ(0, pthread_create(&th[i], NULL, hammer, NULL));
	for (i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	ASSERT_EQ(RBLN_OK, rbln_explain_end(e));
	ASSERT_EQ(RBLN_OK, rbln_explain_dump(e, &d));
	EXPECT_EQ(n, d.dispatch.warm_hit.count);
	EXPECT_EQ(n, d.dispatch.warm_hit.ns);
	EXPECT_EQ(n, d.dispatch.recompile.count);
	EXPECT_EQ(2 * n, d.dispatch.recompile.ns);
	EXPECT_EQ(n, d.dispatch.cpu_fallback.count);
	EXPECT_EQ(3 * n, d.dispatch.cpu_fallback.ns);
	EXPECT_EQ(3 * n, d.dispatch.total.count);
	EXPECT_EQ(6 * n, d.dispatch.total.ns);
	o = find_op(d.recompiles_by_op, d.nrecompile_ops, "matmul");
	ASSERT_NE(NULL, o);
	EXPECT_EQ(n / 2, o->count);
	/* Sites are call sites: the compiler may have unrolled the loop. */
	ASSERT_GE(o->nsites, 1u);
	for (i = 0, sum = 0; i < (int)o->nsites; i++)
		sum += o->sites[i].count;
	EXPECT_EQ(n / 2, sum);
	o = find_op(d.recompiles_by_op, d.nrecompile_ops, "sum");
	ASSERT_NE(NULL, o);
	EXPECT_EQ(n / 2, o->count);
	ASSERT_EQ(1u, d.nfallback_ops);
	EXPECT_EQ(n, d.fallbacks_by_op[0].count);
	EXPECT_EQ(n, d.host_bounce.count);
	EXPECT_EQ(16 * n, d.host_bounce.bytes);
	EXPECT_EQ(n / 2, d.host_bounce.to_host_count);
	EXPECT_EQ(n / 2, d.host_bounce.to_device_count);
	EXPECT_GE(d.host_bounce.nsites, 2u);
	rbln_explain_free(e);
}

TEST(nested_region_is_busy)
{
	struct rbln_explain_dump d;
	rbln_explain *e, *e2;

	e = rbln_explain_begin(false);
	ASSERT_NE(NULL, e);
	op_dispatch(RBLN_DISPATCH_RECOMPILE, "add", 1);
	EXPECT_EQ(NULL, rbln_explain_begin(false));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "already open"));
	/* the caller reads the status: busy, not out of memory */
	EXPECT_EQ(RBLN_ERROR_BUSY, rbln_last_status());
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_explain_end(NULL));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_last_status());
	EXPECT_EQ(NULL, rbln_profile_begin(true));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "already open"));
	EXPECT_EQ(RBLN_ERROR_BUSY, rbln_last_status());
	/* The open region goes on unharmed. */
	EXPECT_TRUE(rbln_explain_active());
	op_dispatch(RBLN_DISPATCH_RECOMPILE, "add", 1);
	ASSERT_EQ(RBLN_OK, rbln_explain_end(e));
	ASSERT_EQ(RBLN_OK, rbln_explain_dump(e, &d));
	EXPECT_EQ(2, d.dispatch.recompile.count);
	/* Once ended, a new region opens, while the old handle still reads. */
	e2 = rbln_explain_begin(false);
	ASSERT_NE(NULL, e2);
	EXPECT_NE(NULL, rbln_explain_report(e));
	rbln_explain_free(e2);
	rbln_explain_free(e);
}

#define RACERS		4
#define RACE_ROUNDS	200

static pthread_barrier_t race_barrier;
static _Atomic(rbln_explain *) race_winner;
static atomic_int race_busy, race_other;

static void *race_begin(void *arg)
{
	rbln_explain *e;

	(void)arg;
	pthread_barrier_wait(&race_barrier);
	e = rbln_explain_begin(false);
	if (e)
		atomic_store(&race_winner, e);
	else if (!strstr(rbln_last_error(), "already open"))
		atomic_fetch_add(&race_other, 1);
	else
		atomic_fetch_add(&race_busy, 1);
	return NULL;
}

TEST(concurrent_begins_one_wins)
{
	pthread_t th[RACERS];
	rbln_explain *e;
	int round, i;

	ASSERT_EQ(0, pthread_barrier_init(&race_barrier, NULL, RACERS));
	for (round = 0; round < RACE_ROUNDS; round++) {
		atomic_store(&race_busy, 0);
		atomic_store(&race_winner, NULL);
		for (i = 0; i < RACERS; i++)
			ASSERT_EQ(0, pthread_create(&th[i], NULL, race_begin, NULL));
		for (i = 0; i < RACERS; i++)
			pthread_join(th[i], NULL);
		e = atomic_load(&race_winner);
		ASSERT_NE(NULL, e);
		ASSERT_EQ(RACERS - 1, atomic_load(&race_busy));
		ASSERT_EQ(0, atomic_load(&race_other));
		/* The winner's region was opened by another thread; this one ends it. */
		ASSERT_EQ(RBLN_OK, rbln_explain_end(e));
		EXPECT_FALSE(rbln_explain_active());
		rbln_explain_free(e);
	}
	pthread_barrier_destroy(&race_barrier);
}

static void *end_elsewhere(void *arg)
{
	return (void *)(intptr_t)rbln_explain_end(arg);
}

TEST(end_from_another_thread)
{
	struct rbln_explain_dump d;
	rbln_explain *e;
	pthread_t th;
	void *st;

	e = rbln_explain_begin(false);
	ASSERT_NE(NULL, e);
	op_dispatch(RBLN_DISPATCH_CPU_FALLBACK, "log", 1);
	ASSERT_EQ(0, pthread_create(&th, NULL, end_elsewhere, e));
	pthread_join(th, &st);
	EXPECT_EQ(RBLN_OK, (intptr_t)st);
	EXPECT_FALSE(rbln_explain_active());
	ASSERT_EQ(RBLN_OK, rbln_explain_dump(e, &d));
	EXPECT_EQ(1, d.dispatch.cpu_fallback.count);
	rbln_explain_free(e);
}

static rbln_explain *ending;
static rbln_status ending_free_status, ending_verdict_status, ending_begin_status;
static bool ending_report_null;

static void meddle(void)
{
	struct rbln_explain_verdict v;
	rbln_explain *e2;

	ending_report_null = !rbln_explain_report(ending);
	ending_verdict_status = rbln_explain_verdict(ending, &v);
	rbln_explain_free(ending);
	ending_free_status = strstr(rbln_last_error(), "another thread is ending") ?
			     RBLN_ERROR_BUSY : RBLN_OK;
	/* The region is closed already: a new one may open. */
	e2 = rbln_explain_begin(false);
	ending_begin_status = e2 ? RBLN_OK : RBLN_ERROR_BUSY;
	rbln_explain_free(e2);
}

/* While end() builds the results, readers wait for them and free leaves the handle alone. */
TEST(calls_while_ending)
{
	rbln_explain *e;

	e = rbln_explain_begin(true);
	ASSERT_NE(NULL, e);
	explain_test_model();
	ending = e;
	during_end = meddle;
	ASSERT_EQ(RBLN_OK, rbln_explain_end(e));
	during_end = NULL;
	EXPECT_TRUE(ending_report_null);
	EXPECT_EQ(RBLN_ERROR_INVALID, ending_verdict_status);
	EXPECT_EQ(RBLN_ERROR_BUSY, ending_free_status);
	EXPECT_EQ(RBLN_OK, ending_begin_status);
	EXPECT_NE(NULL, rbln_explain_report(e));
	rbln_explain_free(e);
}

TEST(bad_handles)
{
	struct rbln_explain_verdict v;
	struct rbln_explain_dump d;
	struct { long pad[64]; } foreign = { { 0 } };
	rbln_explain *e, *fake = (rbln_explain *)&foreign;

	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_explain_end(NULL));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "NULL"));
	EXPECT_EQ(NULL, rbln_explain_report(NULL));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_explain_verdict(NULL, &v));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_explain_dump(NULL, &d));
	EXPECT_EQ(NULL, rbln_explain_dump_json(NULL));
	rbln_explain_free(NULL);

	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_explain_end(fake));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "not an explain region"));
	EXPECT_EQ(NULL, rbln_explain_report(fake));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_explain_dump(fake, &d));
	rbln_explain_free(fake);	/* ignored: not ours */
	EXPECT_NE(NULL, strstr(rbln_last_error(), "not an explain region"));

	e = rbln_explain_begin(false);
	ASSERT_NE(NULL, e);
	/* Before end: nothing to read yet. */
	EXPECT_EQ(NULL, rbln_explain_report(e));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "still open"));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_explain_verdict(e, &v));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_explain_dump(e, &d));
	EXPECT_EQ(NULL, rbln_explain_dump_json(e));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "still open"));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_explain_verdict(e, NULL));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_explain_dump(e, NULL));
	EXPECT_TRUE(rbln_explain_active());

	ASSERT_EQ(RBLN_OK, rbln_explain_end(e));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_explain_end(e));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "already ended"));
	EXPECT_NE(NULL, rbln_explain_report(e));	/* the second end changed nothing */
	rbln_explain_free(e);
	/* Freed: the handle is no longer ours. */
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_explain_end(e));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "not an explain region"));
	rbln_explain_free(e);
	EXPECT_NE(NULL, strstr(rbln_last_error(), "freed twice"));
}

TEST(free_closes_an_open_region)
{
	rbln_explain *e;

	e = rbln_explain_begin(false);
	ASSERT_NE(NULL, e);
	rbln_explain_free(e);
	EXPECT_FALSE(rbln_explain_active());
	e = rbln_explain_begin(false);
	ASSERT_NE(NULL, e);
	rbln_explain_free(e);
}

TEST(profile_aliases)
{
	struct rbln_explain_verdict v;
	struct rbln_explain_dump d;
	rbln_profile *p;
	char *json;

	p = rbln_profile_begin(false);
	ASSERT_NE(NULL, p);
	EXPECT_EQ(NULL, rbln_explain_begin(false));	/* one and the same region */
	op_dispatch(RBLN_DISPATCH_RECOMPILE, "div", 1);
	EXPECT_EQ(NULL, rbln_profile_report(p));
	ASSERT_EQ(RBLN_OK, rbln_profile_end(p));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_profile_end(p));
	/* the seed's marker word for word, whatever N: one pattern matches every report */
	EXPECT_EQ(0, strncmp(rbln_profile_report(p), "[overhead: 1 signals]\n", 22));
	ASSERT_EQ(RBLN_OK, rbln_profile_verdict(p, &v));
	EXPECT_FALSE(v.clean);
	ASSERT_EQ(1u, v.nreasons);
	EXPECT_STREQ("1 recompile (div x1)", v.reasons[0]);
	ASSERT_EQ(RBLN_OK, rbln_profile_dump(p, &d));
	EXPECT_EQ(1, d.dispatch.recompile.count);
	json = rbln_profile_dump_json(p);
	ASSERT_NE(NULL, json);
	EXPECT_NE(NULL, strstr(json, "\"1 recompile (div x1)\""));
	free(json);
	rbln_profile_free(p);
	EXPECT_FALSE(rbln_explain_active());
	p = rbln_explain_begin(false);
	ASSERT_NE(NULL, p);
	rbln_profile_free(p);
}

TEST(out_of_memory_while_recording)
{
	struct rbln_explain_verdict v;
	struct rbln_explain_dump d;
	const char *r;
	rbln_explain *e;

	e = rbln_explain_begin(true);
	ASSERT_NE(NULL, e);
	op_dispatch(RBLN_DISPATCH_RECOMPILE, "add", 1);
	atomic_store(&fail_all, true);
	op_dispatch(RBLN_DISPATCH_RECOMPILE, "add", 1);		/* known entry: no allocation */
	op_dispatch(RBLN_DISPATCH_CPU_FALLBACK, "exp", 1);	/* new entry: lost */
	op_bounce("exp", true, 32);
	atomic_store(&fail_all, false);
	ASSERT_EQ(RBLN_OK, rbln_explain_end(e));
	ASSERT_EQ(RBLN_OK, rbln_explain_dump(e, &d));
	/* The totals keep everything; the breakdown says what it missed. */
	EXPECT_EQ(2, d.dispatch.recompile.count);
	EXPECT_EQ(1, d.dispatch.cpu_fallback.count);
	EXPECT_EQ(1, d.host_bounce.count);
	EXPECT_EQ(32, d.host_bounce.bytes);
	ASSERT_EQ(1u, d.nrecompile_ops);
	EXPECT_EQ(2, d.recompiles_by_op[0].count);
	EXPECT_EQ(0u, d.nfallback_ops);
	EXPECT_EQ(0u, d.host_bounce.nsites);
	EXPECT_EQ(2, d.unattributed);
	r = rbln_explain_report(e);
	ASSERT_NE(NULL, r);
	EXPECT_NE(NULL, strstr(r, "2 events not broken down by op or site"));
	ASSERT_EQ(RBLN_OK, rbln_explain_verdict(e, &v));
	EXPECT_EQ(3u, v.nreasons);
	EXPECT_STREQ("1 cpu fallback", v.reasons[1]);
	EXPECT_STREQ("1 host bounce, 32 bytes", v.reasons[2]);
	rbln_explain_free(e);
}

/* Every allocation end() makes fails once in turn: a clean error each time, no leak. */
TEST(out_of_memory_at_end)
{
	struct rbln_explain_verdict v;
	struct rbln_explain_dump d;
	int k, failures = 0;
	rbln_status st;
	rbln_explain *e;
	long before;
	char *json;

	for (k = 0; k < 1000; k++) {
		before = atomic_load(&live_allocs);
		e = rbln_explain_begin(true);
		ASSERT_NE(NULL, e);
		explain_test_model();
		explain_test_other_caller();
		atomic_store(&fail_in, k);
		st = rbln_explain_end(e);
		atomic_store(&fail_in, -1);
		EXPECT_FALSE(rbln_explain_active());
		if (st == RBLN_OK) {
			ASSERT_NE(NULL, rbln_explain_report(e));
			json = rbln_explain_dump_json(e);
			ASSERT_NE(NULL, json);
			__real_free(json);	/* strdup's, not ours */
			rbln_explain_free(e);
			ASSERT_EQ(before, atomic_load(&live_allocs));
			break;
		}
		failures++;
		ASSERT_EQ(RBLN_ERROR_OUT_OF_MEMORY, st);
		EXPECT_NE(NULL, strstr(rbln_last_error(), "out of host memory"));
		EXPECT_EQ(NULL, rbln_explain_report(e));
		EXPECT_NE(NULL, strstr(rbln_last_error(), "no results"));
		EXPECT_EQ(RBLN_ERROR_INVALID, rbln_explain_verdict(e, &v));
		EXPECT_EQ(RBLN_ERROR_INVALID, rbln_explain_dump(e, &d));
		EXPECT_EQ(RBLN_ERROR_INVALID, rbln_explain_end(e));
		rbln_explain_free(e);
		ASSERT_EQ(before, atomic_load(&live_allocs));
	}
	TH_LOG("%d allocations of end() failed in turn", failures);
	EXPECT_GT(failures, 20);
	EXPECT_LT(k, 1000);
}

TEST(out_of_memory_at_begin)
{
	atomic_store(&fail_all, true);
	EXPECT_EQ(NULL, rbln_explain_begin(false));
	atomic_store(&fail_all, false);
	EXPECT_NE(NULL, strstr(rbln_last_error(), "out of host memory"));
	EXPECT_FALSE(rbln_explain_active());
}

TEST_HARNESS_MAIN
