// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_isa - every arithmetic packet of the ISA on the emulated NPU, bit for
 * bit against the independent references of tests/common/rbln_ref.h
 *
 * For each dtype (the fixture's variants) the tests run EW_UNARY, EW_BINARY,
 * EW_SCALAR, CAST to every dtype, REDUCE and GEMM through the real driver
 * and compare every element of every result with the reference computed
 * here, from inputs generated with a fixed seed and rich in special values:
 * NaNs (quiet, signalling, with payloads), infinities, signed zeros,
 * subnormals, rounding ties, the f16 overflow boundary, integer wraparound,
 * x / 0 and INT_MIN / -1. Counts exceed the executor's 16 KiB chunks, GEMM
 * shapes are not multiples of its 32 x 32 x 64 tiles, leading dimensions
 * exceed the rows, and both transposes and ACCUMULATE are used. Operands
 * live in host objects for some cases and in device memory for others
 * (copied in and out with DMA_COPY by the same command buffer); every
 * output is surrounded by poisoned guard bytes that must survive.
 *
 * WAIT is tested on its own fixture: released by the CPU, already
 * satisfied, canceled, malformed, and what completes before it.
 *
 * Jobs stay small: the driver abandons a job after job_timeout_ms (5 s by
 * default) and TCG runs the guest 10-30 times slower than the host.
 *
 * Run with emu_devices>=1 and emu_mem_mib>=64.
 */

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kselftest_harness.h"
#include "rbln_test.h"
#include "rbln_ref.h"

#define KIB		1024u
#define MIB		(1024u * 1024u)

#define F32		RBLN_DTYPE_F32
#define F16		RBLN_DTYPE_F16
#define BF16		RBLN_DTYPE_BF16
#define I32		RBLN_DTYPE_I32
#define I8		RBLN_DTYPE_I8

/* The executor's chunk (RBLN_EMU_BUF_BYTES): counts are chosen to exceed it. */
#define CHUNK_BYTES	(16 * KIB)
/* Guard bytes around every operand, and what they hold. */
#define GUARD		64
#define POISON		0xa5
#define JOB_TIMEOUT_MS	20000

static const char *const dtype_name[] = { "f32", "f16", "bf16", "i32", "i8" };
static const char *const unary_name[] = { "neg", "abs", "relu" };
static const char *const binary_name[] = { "add", "sub", "mul", "div", "max", "min", "rsub",
					    "rdiv" };
static const char *const reduce_name[] = { "sum", "max" };

/* ---- special values, per dtype ---- */

static const uint32_t spec_f32[] = {
	/* zeros, ones, halves, 2.5 and 3.5 (ties for integers) */
	0x00000000, 0x80000000, 0x3f800000, 0xbf800000, 0x3f000000, 0xbf000000,
	0x40200000, 0xc0200000, 0x40600000, 0x3fc00000, 0x40000000,
	/* around 1: f32 (2^-24), bf16 (1 + 2^-8, 1 + 3 * 2^-8) ties */
	0x3f800001, 0x33800000, 0xb3800000, 0x3f808000, 0x3f818000, 0x3f808001,
	/* infinities and NaNs: quiet, signalling, negative, with payloads */
	0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0xff812345,
	0x7fa00000, 0x7fffffff,
	/* extremes and subnormals */
	0x7f7fffff, 0xff7fffff, 0x7f7f8000, 0x7f000000, 0x00800000, 0x00000001,
	0x807fffff, 0x00400000,
	/* f16: 65504, just below 65520, 65520 (-> inf), 2^-25, 3 * 2^-25, 2^-14 */
	0x477fe000, 0x477fefff, 0x477ff000, 0xc77ff000, 0x33000000, 0x33c00000,
	0x38800000,
	/* integer boundaries: +-2^31, 2^31 - 128, 127, 127.5, -128.5, 2^23 */
	0x4f000000, 0xcf000000, 0x4effffff, 0xcf000001, 0x42fe0000, 0x42ff0000,
	0xc3008000, 0x4b000000,
};

static const uint32_t spec_f16[] = {
	0x0000, 0x8000, 0x3c00, 0xbc00, 0x3c01, 0x3bff, 0x3800, 0xb800, 0x4100,
	0xc100, 0x4300, 0x3e00, 0x4000,
	/* 2^-11 and 2^-12: 1 + 2^-11 is a tie */
	0x1000, 0x0c00,
	/* largest finite, half of it, infinities, NaNs */
	0x7bff, 0xfbff, 0x5bff, 0x7c00, 0xfc00, 0x7e00, 0xfe00, 0x7c01, 0xfd55,
	0x7fff,
	/* subnormals and the smallest normal */
	0x0001, 0x8001, 0x03ff, 0x0400, 0x0200, 0x0003,
	/* 127.5, -128.5, 2048, 2050 */
	0x57f8, 0xd804, 0x6800, 0x6801,
};

static const uint32_t spec_bf16[] = {
	0x0000, 0x8000, 0x3f80, 0xbf80, 0x3f81, 0x3f00, 0xbf00, 0x4020, 0xc020,
	0x4060, 0x3fc0,
	/* 2^-8 (1 + 2^-8 is a tie), 2^-9, 2^-24, 2^-25 */
	0x3b80, 0x3b00, 0x3380, 0x3300,
	/* largest finite, infinities, NaNs */
	0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x7fc0, 0xffc0, 0x7f81, 0xff95, 0x7fff,
	/* subnormals and the smallest normal */
	0x0001, 0x8001, 0x007f, 0x0080,
	/* 65280, 65536 (f16 inf), +-2^31, 127.5, -129, 2^24 */
	0x477f, 0x4780, 0x4f00, 0xcf00, 0x42ff, 0xc301, 0x4b80,
};

static const uint32_t spec_i32[] = {
	0, 1, (uint32_t)-1, 2, (uint32_t)-2, 3, 7, (uint32_t)-7, 100, (uint32_t)-100,
	0x7fffffff, 0x80000000, 0x80000001, 0x40000000, 0x10000, 127, 128,
	(uint32_t)-128, (uint32_t)-129, 255,
	/* exact and rounded in f32, bf16 and f16: 2^24 + 1, 2^24 + 2^16 + 1, ... */
	0x01000001, 0x01010001, 0x01000003, 0x7fffff80, 2049, 2051, 65519, 65520,
	(uint32_t)-65520,
};

static const uint32_t spec_i8[] = {
	0, 1, (uint32_t)-1, 2, (uint32_t)-2, 3, 7, (uint32_t)-7, 16, 64, 100,
	(uint32_t)-100, 126, 127, (uint32_t)-127, (uint32_t)-128,
};

static const uint32_t *specials(uint32_t dt, size_t *n)
{
	switch (dt) {
	case F32:
		*n = ARRAY_SIZE(spec_f32);
		return spec_f32;
	case F16:
		*n = ARRAY_SIZE(spec_f16);
		return spec_f16;
	case BF16:
		*n = ARRAY_SIZE(spec_bf16);
		return spec_bf16;
	case I32:
		*n = ARRAY_SIZE(spec_i32);
		return spec_i32;
	default:
		*n = ARRAY_SIZE(spec_i8);
		return spec_i8;
	}
}

/* Values whose conversions are the interesting ones, for float sources of CAST. */
static const float cast_values[] = {
	2.5f, 3.5f, -2.5f, -3.5f, 0.5f, 1.5f, -0.5f, 0.49999997f, 0.50000006f, -0.0f,
	1e-40f, 126.5f, 127.5f, -128.5f, -129.5f, 200.0f, -200.0f, 300.0f, 8388607.5f,
	8388609.0f, 2147483520.0f, 2147483648.0f, -2147483648.0f, -2147483904.0f, 1e10f,
	-1e10f, 65504.0f, 65519.996f, 65520.0f, -65520.0f, 1.0f + 0x1p-11f,
	1.0f + 3 * 0x1p-11f, 0x1p-25f, -0x1p-25f, 3 * 0x1p-25f, 0x3ff.8p-24f, 0x3ff.7p-24f,
	0x1.01p0f, 0x1.03p0f, 0x1.fffep127f,
};

/* Scalars of EW_SCALAR, as ref_get() would return them. */
static const uint32_t scal_f32[] = {
	0x00000000, 0x80000000, 0x3f800000, 0xc0200000, 0x7fc00000, 0x7f800001,
	0x7f800000, 0xff800000, 0x33800000, 0x7f7fffff,
};
static const uint32_t scal_f16[] = {
	0x0000, 0x8000, 0x3c00, 0xc100, 0x7e00, 0x7c01, 0x7c00, 0xfc00, 0x1000, 0x7bff,
};
static const uint32_t scal_bf16[] = {
	0x0000, 0x8000, 0x3f80, 0xc020, 0x7fc0, 0x7f81, 0x7f80, 0xff80, 0x3b80, 0x7f7f,
};
static const uint32_t scal_int[] = {
	0, 1, (uint32_t)-1, 0x80000000, 0x7fffffff, 7, (uint32_t)-100, 2, 0x10000, (uint32_t)-7,
};

/* ---- a device, a queue, and arenas for one job's operands ---- */

struct isa_ctx {
	struct rbln_drm_device *dev;
	uint32_t queue;
	struct rbln_test_buf cmd;	/* the command buffer */
	struct rbln_test_buf host;	/* staging for every operand */
	struct rbln_test_buf mem;	/* device memory */
	uint64_t mem_size;
	struct rbln_drm_cmd c;
	uint64_t host_used, mem_used;
	unsigned int skew;
};

static int ctx_init(struct isa_ctx *x, uint64_t host_bytes, uint64_t mem_bytes)
{
	int ret;

	memset(x, 0, sizeof(*x));
	ret = rbln_test_open(0, &x->dev);
	if (!ret)
		ret = rbln_drm_queue_create(x->dev, RBLN_QUEUE_PRIORITY_NORMAL, &x->queue);
	if (!ret)
		ret = rbln_test_buf_new(x->dev, 128 * KIB, RBLN_BO_HOST, 0, &x->cmd);
	if (!ret)
		ret = rbln_test_buf_new(x->dev, host_bytes, RBLN_BO_HOST, 0, &x->host);
	if (!ret)
		ret = rbln_test_buf_new(x->dev, mem_bytes, RBLN_BO_DEVICE, 0, &x->mem);
	x->mem_size = mem_bytes;
	return ret;
}

static void ctx_fini(struct isa_ctx *x)
{
	if (x->mem.handle)
		rbln_test_buf_free(x->dev, &x->mem);
	if (x->host.handle)
		rbln_test_buf_free(x->dev, &x->host);
	if (x->cmd.handle)
		rbln_test_buf_free(x->dev, &x->cmd);
	rbln_drm_close(x->dev);
}

/* Starts a command buffer; the operands of the previous job are forgotten. */
static void job_begin(struct isa_ctx *x)
{
	rbln_drm_cmd_init(&x->c, x->cmd.cpu, x->cmd.size);
	x->host_used = 0;
	x->mem_used = 0;
}

/* Runs the command buffer: 1 on success, the job's -errno otherwise. */
static int job_run(struct isa_ctx *x)
{
	uint32_t bos[2] = { x->host.handle, x->mem.handle };

	return rbln_test_run(x->dev, x->queue, &x->cmd, x->c.len, bos, 2, JOB_TIMEOUT_MS);
}

/*
 * An operand: @bytes at @cpu in the staging object, poisoned guards before
 * and after. In device memory (@on_dev) the job copies the whole span in
 * before its first use, so inputs written to @cpu before the job runs reach
 * the device; opnd_out() copies it back after the last.
 */
struct opnd {
	uint8_t *cpu;
	uint64_t va;		/* the address packets use */
	uint64_t bytes;
	uint8_t *span_cpu;	/* the whole span in the staging object */
	uint64_t span_host_va, span_va, span;
	bool on_dev;
};

static int opnd_new(struct isa_ctx *x, uint64_t bytes, bool on_dev, struct opnd *o)
{
	/* The payload starts at a rotating offset, aligned for any dtype. */
	uint64_t skew = 4 * (x->skew++ % 5);
	uint64_t span = (GUARD + skew + bytes + GUARD + 63) & ~63ull;

	memset(o, 0, sizeof(*o));
	if (x->host_used + span > x->host.size)
		return -ENOSPC;
	o->span_cpu = (uint8_t *)x->host.cpu + x->host_used;
	o->span_host_va = x->host.va + x->host_used;
	o->span = span;
	o->bytes = bytes;
	o->on_dev = on_dev;
	x->host_used += span;
	memset(o->span_cpu, POISON, span);
	o->cpu = o->span_cpu + GUARD + skew;
	if (!on_dev) {
		o->span_va = o->span_host_va;
		o->va = o->span_va + GUARD + skew;
		return 0;
	}
	if (x->mem_used + span > x->mem_size)
		return -ENOSPC;
	o->span_va = x->mem.va + x->mem_used;
	o->va = o->span_va + GUARD + skew;
	x->mem_used += span;
	return rbln_drm_cmd_dma_copy(&x->c, o->span_va, o->span_host_va, span);
}

static int opnd_out(struct isa_ctx *x, const struct opnd *o)
{
	return o->on_dev ? rbln_drm_cmd_dma_copy(&x->c, o->span_host_va, o->span_va, o->span) : 0;
}

/* Bytes of the span outside the payload that lost their poison. */
static int guard_damage(const struct opnd *o)
{
	int bad = 0;

	for (uint8_t *p = o->span_cpu; p < o->span_cpu + o->span; p++)
		if ((p < o->cpu || p >= o->cpu + o->bytes) && *p != POISON)
			bad++;
	return bad;
}

static const char *where(const struct opnd *o)
{
	return o->on_dev ? "dev" : "host";
}

/* @n inputs: the dtype's specials (every pair of them when @b is given), then random. */
static void fill_inputs(uint32_t dt, void *a, void *b, size_t n)
{
	size_t ns, i = 0;
	const uint32_t *s = specials(dt, &ns);

	if (b) {
		for (; i < ns * ns && i < n; i++) {
			ref_put(dt, a, i, s[i / ns]);
			ref_put(dt, b, i, s[i % ns]);
		}
	} else {
		for (; i < ns && i < n; i++)
			ref_put(dt, a, i, s[i]);
	}
	for (; i < n; i++) {
		ref_put(dt, a, i, ref_rand_elem(dt));
		if (b)
			/* Equal operands get their share. */
			ref_put(dt, b, i, i % 7 ? ref_rand_elem(dt) : ref_get(dt, a, i));
	}
}

/* More than one chunk and a partial one, for the larger of two element sizes. */
static uint64_t chunky_count(uint32_t dt_in, uint32_t dt_out)
{
	unsigned int size = ref_dtype_size(dt_in) > ref_dtype_size(dt_out) ?
			    ref_dtype_size(dt_in) : ref_dtype_size(dt_out);
	uint64_t chunk = CHUNK_BYTES / size;

	return chunk + chunk / 2 + 3;
}

/* ---- element-wise cases ---- */

struct ew_case {
	uint32_t op, sub, dt, out_dt;
	uint32_t scalar;	/* as ref_get() returns it */
	uint64_t count;
	struct opnd a, b, d;
};

static int ew_emit(struct isa_ctx *x, struct ew_case *k)
{
	int ret;

	switch (k->op) {
	case RBLN_OP_EW_UNARY:
		ret = rbln_drm_cmd_unary(&x->c, k->sub, k->dt, k->d.va, k->a.va, k->count);
		break;
	case RBLN_OP_EW_BINARY:
		ret = rbln_drm_cmd_binary(&x->c, k->sub, k->dt, k->d.va, k->a.va, k->b.va,
					  k->count);
		break;
	case RBLN_OP_EW_SCALAR: {
		uint32_t enc = k->scalar & (k->dt == I8 ? 0xff : ref_dtype_size(k->dt) == 2 ?
					    0xffff : 0xffffffff);

		ret = rbln_drm_cmd_scalar(&x->c, k->sub, k->dt, k->d.va, k->a.va, enc, k->count);
		break;
	}
	default:
		ret = rbln_drm_cmd_cast(&x->c, k->out_dt, k->dt, k->d.va, k->a.va, k->count);
		break;
	}
	return ret ?: opnd_out(x, &k->d);
}

static uint64_t ew_ref(const struct ew_case *k, uint32_t a, uint32_t b)
{
	switch (k->op) {
	case RBLN_OP_EW_UNARY:
		return ref_unary(k->sub, k->dt, a);
	case RBLN_OP_EW_BINARY:
		return ref_binary(k->sub, k->dt, a, b);
	case RBLN_OP_EW_SCALAR:
		return ref_binary(k->sub, k->dt, a, k->scalar);
	default:
		return ref_cast(k->dt, k->out_dt, a);
	}
}

static void ew_describe(const struct ew_case *k, char *buf, size_t len)
{
	switch (k->op) {
	case RBLN_OP_EW_UNARY:
		snprintf(buf, len, "EW_UNARY %s %s count %llu src@%s dst@%s", unary_name[k->sub],
			 dtype_name[k->dt], (unsigned long long)k->count, where(&k->a),
			 where(&k->d));
		break;
	case RBLN_OP_EW_BINARY:
		snprintf(buf, len, "EW_BINARY %s %s count %llu a@%s b@%s dst@%s",
			 binary_name[k->sub], dtype_name[k->dt], (unsigned long long)k->count,
			 where(&k->a), where(&k->b), where(&k->d));
		break;
	case RBLN_OP_EW_SCALAR:
		snprintf(buf, len, "EW_SCALAR %s %s scalar %#x count %llu src@%s dst@%s",
			 binary_name[k->sub], dtype_name[k->dt], k->scalar,
			 (unsigned long long)k->count, where(&k->a), where(&k->d));
		break;
	default:
		snprintf(buf, len, "CAST %s -> %s count %llu src@%s dst@%s", dtype_name[k->dt],
			 dtype_name[k->out_dt], (unsigned long long)k->count, where(&k->a),
			 where(&k->d));
		break;
	}
}

/* Mismatched elements of @k's result, the first few logged. */
static int ew_check(struct __test_metadata *_metadata, const struct ew_case *k)
{
	char what[160];
	int bad = 0, dmg;

	ew_describe(k, what, sizeof(what));
	for (uint64_t i = 0; i < k->count; i++) {
		uint32_t a = ref_get(k->dt, k->a.cpu, i);
		uint32_t b = k->op == RBLN_OP_EW_BINARY ? ref_get(k->dt, k->b.cpu, i) : 0;
		uint64_t want = ew_ref(k, a, b);
		uint32_t got = ref_get(k->out_dt, k->d.cpu, i);

		if (ref_match(k->out_dt, got, want))
			continue;
		if (bad++ < 4)
			TH_LOG("%s: [%llu] a %#x b %#x: got %#x want %#llx%s", what,
			       (unsigned long long)i, a, b, got, (unsigned long long)want,
			       want == REF_ANY_QNAN ? " (any quiet NaN)" : "");
	}
	dmg = guard_damage(&k->d);
	if (dmg)
		TH_LOG("%s: %d guard bytes around dst overwritten", what, dmg);
	return bad + dmg;
}

/* Element-wise cases of one job: allocated, filled, emitted, run, checked. */
#define MAX_CASES	96

struct ew_job {
	struct ew_case k[MAX_CASES];
	unsigned int n;
};

/* Placement: 0 all in host memory, 1 all in device memory, 2 mixed. */
static int ew_add(struct isa_ctx *x, struct ew_job *j, uint32_t op, uint32_t sub, uint32_t dt,
		  uint32_t out_dt, uint64_t count, unsigned int place, const struct opnd *shared_a)
{
	struct ew_case *k = &j->k[j->n];
	unsigned int in = ref_dtype_size(dt), out = ref_dtype_size(out_dt);
	int ret = 0;

	if (j->n >= MAX_CASES)
		return -ENOSPC;
	memset(k, 0, sizeof(*k));
	k->op = op;
	k->sub = sub;
	k->dt = dt;
	k->out_dt = out_dt;
	k->count = count;
	if (shared_a) {
		k->a = *shared_a;
	} else {
		ret = opnd_new(x, count * in, place == 1, &k->a);
		if (!ret && op == RBLN_OP_EW_BINARY)
			ret = opnd_new(x, count * in, place >= 1, &k->b);
		if (ret)
			return ret;
		fill_inputs(dt, k->a.cpu, op == RBLN_OP_EW_BINARY ? k->b.cpu : NULL, count);
	}
	ret = opnd_new(x, count * out, place == 1 || (place == 2 && op != RBLN_OP_EW_BINARY),
		       &k->d);
	if (ret)
		return ret;
	j->n++;
	return 0;
}

static int ew_run(struct __test_metadata *_metadata, struct isa_ctx *x, struct ew_job *j)
{
	int bad = 0, ret;

	for (unsigned int i = 0; i < j->n; i++) {
		ret = ew_emit(x, &j->k[i]);
		if (ret) {
			TH_LOG("encoding case %u: %d", i, ret);
			return 1;
		}
	}
	ret = job_run(x);
	if (ret != 1) {
		TH_LOG("job of %u cases: status %d", j->n, ret);
		return 1;
	}
	for (unsigned int i = 0; i < j->n; i++)
		bad += ew_check(_metadata, &j->k[i]);
	return bad;
}

/* ---- the fixture: one dtype per variant ---- */

FIXTURE(isa) {
	struct isa_ctx x;
	struct ew_job job;
};

FIXTURE_VARIANT(isa) {
	uint32_t dtype;
};

FIXTURE_VARIANT_ADD(isa, f32) { .dtype = F32 };
FIXTURE_VARIANT_ADD(isa, f16) { .dtype = F16 };
FIXTURE_VARIANT_ADD(isa, bf16) { .dtype = BF16 };
FIXTURE_VARIANT_ADD(isa, i32) { .dtype = I32 };
FIXTURE_VARIANT_ADD(isa, i8) { .dtype = I8 };

FIXTURE_SETUP(isa)
{
	ASSERT_EQ(0, ctx_init(&self->x, 4 * MIB, 4 * MIB));
	job_begin(&self->x);
	ref_rng_seed(0x15a0 + variant->dtype);
}

FIXTURE_TEARDOWN(isa)
{
	ctx_fini(&self->x);
	EXPECT_EQ(0, rbln_test_mem_used(0));
}

TEST_F(isa, unary)
{
	uint32_t dt = variant->dtype;

	for (uint32_t op = RBLN_UNARY_NEG; op <= RBLN_UNARY_RELU; op++)
		ASSERT_EQ(0, ew_add(&self->x, &self->job, RBLN_OP_EW_UNARY, op, dt, dt,
				    chunky_count(dt, dt) + op, (op + dt) % 3, NULL));
	EXPECT_EQ(0, ew_run(_metadata, &self->x, &self->job));
}

TEST_F(isa, binary)
{
	uint32_t dt = variant->dtype;

	for (uint32_t op = RBLN_BINARY_ADD; op <= RBLN_BINARY_MIN; op++)
		ASSERT_EQ(0, ew_add(&self->x, &self->job, RBLN_OP_EW_BINARY, op, dt, dt,
				    chunky_count(dt, dt) + op, (op + dt) % 3, NULL));
	EXPECT_EQ(0, ew_run(_metadata, &self->x, &self->job));
}

/* Every sub-operation with every interesting scalar, and once over several chunks. */
TEST_F(isa, scalar)
{
	uint32_t dt = variant->dtype;
	const uint32_t *scal = dt == F32 ? scal_f32 : dt == F16 ? scal_f16 :
			       dt == BF16 ? scal_bf16 : scal_int;
	struct opnd vec, big;
	size_t ns;
	uint64_t n, nbig = chunky_count(dt, dt);

	specials(dt, &ns);
	n = ns + 150;
	ASSERT_EQ(0, opnd_new(&self->x, n * ref_dtype_size(dt), false, &vec));
	ASSERT_EQ(0, opnd_new(&self->x, nbig * ref_dtype_size(dt), true, &big));
	fill_inputs(dt, vec.cpu, NULL, n);
	fill_inputs(dt, big.cpu, NULL, nbig);

	for (uint32_t op = RBLN_BINARY_ADD; op <= RBLN_BINARY_RDIV; op++) {
		for (unsigned int s = 0; s <= ARRAY_SIZE(scal_f32); s++) {
			bool large = s == ARRAY_SIZE(scal_f32);
			struct ew_case *k = &self->job.k[self->job.n];
			uint32_t v = large ? ref_rand_elem(dt) : scal[s];

			ASSERT_EQ(0, ew_add(&self->x, &self->job, RBLN_OP_EW_SCALAR, op, dt, dt,
					    large ? nbig : n, (op + s) % 3, large ? &big : &vec));
			/* Scalars as elements: an i8 sign-extended, like ref_get(). */
			k->scalar = dt == I8 ? (uint32_t)(int32_t)(int8_t)v : v;
		}
	}
	EXPECT_EQ(0, ew_run(_metadata, &self->x, &self->job));
}

/* From the variant's dtype to all five. */
TEST_F(isa, cast)
{
	uint32_t dt = variant->dtype;

	for (uint32_t out = F32; out <= I8; out++) {
		struct ew_case *k = &self->job.k[self->job.n];
		size_t ns;

		ASSERT_EQ(0, ew_add(&self->x, &self->job, RBLN_OP_CAST, 0, dt, out,
				    chunky_count(dt, out) + out, (out + dt) % 3, NULL));
		/* After the specials: the values whose conversions matter. */
		specials(dt, &ns);
		for (size_t i = 0; ref_is_float(dt) && i < ARRAY_SIZE(cast_values); i++) {
			uint32_t b = ref_fbits(cast_values[i]);

			if (dt == F16)
				b = ref_f16_enc(cast_values[i]);
			else if (dt == BF16)
				b = ref_bf16_enc(cast_values[i]);
			ref_put(dt, k->a.cpu, ns + i, b);
		}
	}
	EXPECT_EQ(0, ew_run(_metadata, &self->x, &self->job));
}

/* ---- REDUCE ---- */

struct red_case {
	uint32_t op, rows, cols;
	struct opnd s, d;
};

/* Rows of special cases over the first rows of a rows x 19 matrix. */
static void reduce_special_rows(uint32_t dt, void *src, uint32_t cols)
{
	uint8_t *row[12];
	size_t sz = ref_dtype_size(dt);

	for (int r = 0; r < 12; r++)
		row[r] = (uint8_t *)src + r * cols * sz;
	for (uint32_t c = 0; c < cols; c++) {
		if (ref_is_float(dt)) {
			uint32_t nz = dt == F32 ? 0x80000000 : 0x8000;
			uint32_t one = ref_enc(dt, 1.0);
			uint32_t big = ref_enc(dt, dt == F32 ? 0x1p24 : dt == F16 ? 2048 : 256);
			uint32_t maxf = dt == F32 ? 0x7f7fffff : dt == F16 ? 0x7bff : 0x7f7f;
			uint32_t inf = dt == F32 ? 0x7f800000 : dt == F16 ? 0x7c00 : 0x7f80;
			uint32_t snan = dt == F32 ? 0xff800123 : dt == F16 ? 0xfc05 : 0xff85;
			uint32_t qnan = dt == F32 ? 0x7fc00042 : dt == F16 ? 0x7e42 : 0x7fc2;

			ref_put(dt, row[0], c, nz);			/* all -0 */
			ref_put(dt, row[1], c, c & 1 ? 0 : nz);		/* -0, +0, ... */
			ref_put(dt, row[2], c, c == 0 ? big : one);	/* 2^24 + 1 + ... */
			ref_put(dt, row[3], c, maxf);			/* overflow */
			ref_put(dt, row[4], c, c % 3 ? one : inf | (c & 1 ? nz : 0));
			ref_put(dt, row[5], c, inf | nz);		/* all -inf */
			ref_put(dt, row[6], c, 1);			/* smallest subnormal */
			if (c == 5)
				ref_put(dt, row[7], c, qnan);		/* first NaN quiet */
			if (c == 9)
				ref_put(dt, row[7], c, snan);
			if (c == 3)
				ref_put(dt, row[8], c, snan);		/* first NaN signalling */
			if (c == 7)
				ref_put(dt, row[8], c, qnan);
			if (c == cols - 1)
				ref_put(dt, row[9], c, snan | nz);	/* NaN last */
		} else {
			uint32_t min = dt == I8 ? (uint32_t)-128 : 0x80000000;
			uint32_t max = dt == I8 ? 127 : 0x7fffffff;

			ref_put(dt, row[0], c, c == 0 ? max : c == 1 ? 1 : 0);	/* wraps */
			ref_put(dt, row[1], c, c < 2 ? 100 : c == 2 ? (uint32_t)-100 : 0);
			ref_put(dt, row[2], c, min);
			ref_put(dt, row[3], c, (uint32_t)-1);
			ref_put(dt, row[4], c, c == 0 ? max : c == 1 ? 1 : c == 2 ? (uint32_t)-1 : 0);
			ref_put(dt, row[5], c, c & 1 ? max : min);
		}
	}
}

static int reduce_check(struct __test_metadata *_metadata, uint32_t dt, const struct red_case *k)
{
	size_t sz = ref_dtype_size(dt);
	int bad = 0, dmg;

	for (uint32_t r = 0; r < k->rows; r++) {
		uint64_t want = ref_reduce(k->op, dt, k->s.cpu + (size_t)r * k->cols * sz, k->cols);
		uint32_t got = ref_get(dt, k->d.cpu, r);

		if (ref_match(dt, got, want))
			continue;
		if (bad++ < 4)
			TH_LOG("REDUCE %s %s rows %u cols %u src@%s dst@%s: row %u (first %#x): "
			       "got %#x want %#llx", reduce_name[k->op], dtype_name[dt], k->rows,
			       k->cols, where(&k->s), where(&k->d), r,
			       k->cols ? ref_get(dt, k->s.cpu, (size_t)r * k->cols) : 0, got,
			       (unsigned long long)want);
	}
	dmg = guard_damage(&k->d);
	if (dmg)
		TH_LOG("REDUCE %s %s rows %u cols %u: %d guard bytes overwritten",
		       reduce_name[k->op], dtype_name[dt], k->rows, k->cols, dmg);
	return bad + dmg;
}

TEST_F(isa, reduce)
{
	uint32_t dt = variant->dtype;
	size_t sz = ref_dtype_size(dt);
	/* Rows over several chunks, empty rows, one-element rows, special rows. */
	const struct { uint32_t rows, cols; } shapes[] = {
		{ 3, CHUNK_BYTES / sz + 37 }, { 5, 0 }, { 40, 1 }, { 16, 19 },
	};
	struct red_case k[2 * ARRAY_SIZE(shapes)];
	unsigned int n = 0;
	int bad = 0;

	for (uint32_t op = RBLN_REDUCE_SUM; op <= RBLN_REDUCE_MAX; op++) {
		for (size_t s = 0; s < ARRAY_SIZE(shapes); s++, n++) {
			uint32_t rows = shapes[s].rows, cols = shapes[s].cols;
			uint64_t elems = (uint64_t)rows * cols;

			k[n].op = op;
			k[n].rows = rows;
			k[n].cols = cols;
			ASSERT_EQ(0, opnd_new(&self->x, elems * sz, (n + dt) % 2, &k[n].s));
			ASSERT_EQ(0, opnd_new(&self->x, rows * sz, (n + dt) % 3 == 1, &k[n].d));
			fill_inputs(dt, k[n].s.cpu, NULL, elems);
			/* Most long rows NaN-free, or every float max would be NaN. */
			if (cols > 1 && s == 0)
				ref_replace_nans(dt, k[n].s.cpu, 2 * cols);
			if (cols == 19) {
				ref_fill_random(dt, k[n].s.cpu, elems);
				ref_replace_nans(dt, k[n].s.cpu, elems);
				reduce_special_rows(dt, k[n].s.cpu, cols);
			}
			ASSERT_EQ(0, rbln_drm_cmd_reduce(&self->x.c, op, dt, k[n].d.va, k[n].s.va,
							 rows, cols));
			ASSERT_EQ(0, opnd_out(&self->x, &k[n].d));
		}
	}
	ASSERT_EQ(1, job_run(&self->x));
	for (unsigned int i = 0; i < n; i++)
		bad += reduce_check(_metadata, dt, &k[i]);
	EXPECT_EQ(0, bad);
}

/* ---- GEMM ---- */

struct gemm_case {
	uint32_t in, out, flags, m, n, k, lda, ldb, ldc;
	unsigned int place;	/* bit 0: A, bit 1: B, bit 2: C in device memory */
	bool wild;		/* any values, NaN and inf included */
};

/* A value for GEMM operands: bounded so that sums mean something, or wild. */
static uint32_t gemm_value(uint32_t dt, bool wild, bool small)
{
	if (wild)
		return ref_rand_elem(dt);
	if (!ref_is_float(dt))
		return small ? (uint32_t)((int32_t)(ref_rng32() % 9) - 4) : ref_rand_elem(dt);
	/* Full f32 significands: products round, so a fused multiply-add would show. */
	if (dt == F32 && !small) {
		float f = ldexpf((float)(ref_rng32() & 0xffffff), -(int)(ref_rng32() % 16) - 12);

		return ref_fbits(f) | (ref_rng32() & 0x80000000);
	}
	return ref_rand_moderate(dt, small ? 30 : 1000, ref_rng32() % 7);
}

static int gemm_run(struct __test_metadata *_metadata, struct isa_ctx *x,
		    const struct gemm_case *g)
{
	bool ta = g->flags & RBLN_GEMM_TRANS_A, tb = g->flags & RBLN_GEMM_TRANS_B;
	bool acc = g->flags & RBLN_GEMM_ACCUMULATE, small = g->flags & 1;
	size_t isz = ref_dtype_size(g->in), osz = ref_dtype_size(g->out);
	uint32_t m = g->m, n = g->n, k = g->k;
	uint64_t abytes = (uint64_t)(ta ? k : m) * g->lda * isz;
	uint64_t bbytes = (uint64_t)(tb ? n : k) * g->ldb * isz;
	uint64_t cbytes = (uint64_t)m * g->ldc * osz;
	uint8_t *la = malloc((size_t)m * k * isz + 1), *lb = malloc((size_t)k * n * isz + 1);
	uint8_t *lc = malloc((size_t)m * n * osz + 1), *c0 = malloc(cbytes + 1);
	uint64_t *exp = malloc(((size_t)m * n + 1) * sizeof(*exp));
	struct rbln_drm_gemm p = {
		.in = g->in, .out = g->out, .flags = g->flags, .m = m, .n = n, .k = k,
		.lda = g->lda, .ldb = g->ldb, .ldc = g->ldc,
	};
	struct opnd a, b, c;
	char what[200];
	int bad = 0, ret;

	snprintf(what, sizeof(what),
		 "GEMM %s -> %s %ux%ux%u%s%s%s lda %u ldb %u ldc %u A@%s B@%s C@%s%s",
		 dtype_name[g->in], dtype_name[g->out], m, n, k, ta ? " TRANS_A" : "",
		 tb ? " TRANS_B" : "", acc ? " ACCUMULATE" : "", g->lda, g->ldb, g->ldc,
		 g->place & 1 ? "dev" : "host", g->place & 2 ? "dev" : "host",
		 g->place & 4 ? "dev" : "host", g->wild ? " wild" : "");
	if (!la || !lb || !lc || !c0 || !exp) {
		TH_LOG("%s: out of memory", what);
		bad = 1;
		goto out;
	}

	job_begin(x);
	ret = opnd_new(x, abytes, g->place & 1, &a) ?: opnd_new(x, bbytes, g->place & 2, &b) ?:
	      opnd_new(x, cbytes, g->place & 4, &c);
	if (ret) {
		TH_LOG("%s: operands: %d", what, ret);
		bad = 1;
		goto out;
	}
	/* Unused parts of the stored A and B are NaN (floats) or -1: reading them shows. */
	memset(a.cpu, 0xff, abytes);
	memset(b.cpu, 0xff, bbytes);
	for (uint32_t i = 0; i < m; i++) {
		for (uint32_t q = 0; q < k; q++) {
			uint32_t v = gemm_value(g->in, g->wild, small);

			ref_put(g->in, la, (size_t)i * k + q, v);
			ref_put(g->in, a.cpu, ta ? (size_t)q * g->lda + i : (size_t)i * g->lda + q, v);
		}
	}
	for (uint32_t q = 0; q < k; q++) {
		for (uint32_t j = 0; j < n; j++) {
			uint32_t v = gemm_value(g->in, g->wild, small);

			ref_put(g->in, lb, (size_t)q * n + j, v);
			ref_put(g->in, b.cpu, tb ? (size_t)j * g->ldb + q : (size_t)q * g->ldb + j, v);
		}
	}
	/* C: poison where the device writes without ACCUMULATE, else a start value. */
	for (uint32_t i = 0; acc && i < m; i++) {
		for (uint32_t j = 0; j < n; j++) {
			uint32_t v = g->wild || !ref_is_float(g->out) ? ref_rand_elem(g->out) :
				     ref_rand_moderate(g->out, 2000, ref_rng32() % 2);

			ref_put(g->out, lc, (size_t)i * n + j, v);
			ref_put(g->out, c.cpu, (size_t)i * g->ldc + j, v);
		}
	}
	memcpy(c0, c.cpu, cbytes);
	p.a = a.va;
	p.b = b.va;
	p.c = c.va;
	ret = rbln_drm_cmd_gemm(&x->c, &p) ?: opnd_out(x, &c);
	if (ret) {
		TH_LOG("%s: encoding: %d", what, ret);
		bad = 1;
		goto out;
	}
	if (!ref_gemm(g->in, g->out, la, lb, acc ? lc : NULL, m, n, k, exp)) {
		TH_LOG("%s: reference out of memory", what);
		bad = 1;
		goto out;
	}
	ret = job_run(x);
	if (ret != 1) {
		TH_LOG("%s: job status %d", what, ret);
		bad = 1;
		goto out;
	}

	for (uint32_t i = 0; i < m; i++) {
		for (uint32_t j = 0; j < g->ldc; j++) {
			size_t at = (size_t)i * g->ldc + j;
			uint32_t got = ref_get(g->out, c.cpu, at);

			if (j >= n) {
				/* Between C's rows: untouched. */
				if (memcmp(c.cpu + at * osz, c0 + at * osz, osz) && bad++ < 4)
					TH_LOG("%s: C[%u][%u] beyond n changed to %#x", what, i, j,
					       got);
				continue;
			}
			if (ref_match(g->out, got, exp[(size_t)i * n + j]))
				continue;
			if (bad++ < 4)
				TH_LOG("%s: C[%u][%u] (start %#x): got %#x want %#llx", what, i, j,
				       acc ? ref_get(g->out, lc, (size_t)i * n + j) : 0, got,
				       (unsigned long long)exp[(size_t)i * n + j]);
		}
	}
	ret = guard_damage(&c);
	if (ret)
		TH_LOG("%s: %d guard bytes around C overwritten", what, ret);
	bad += ret;
out:
	free(la);
	free(lb);
	free(lc);
	free(c0);
	free(exp);
	return bad;
}

/*
 * Each shape with each of the 8 flag combinations; the output dtype, the
 * padding of the leading dimensions and the placement rotate with them.
 */
TEST_F_TIMEOUT(isa, gemm, 300)
{
	/* wild: any values, so NaN, inf, overflow and saturation in the results */
	static const struct { uint32_t m, n, k; bool wild; } shapes[] = {
		{ 1, 1, 1, true }, { 33, 65, 70, false }, { 64, 32, 129, false },
		{ 7, 100, 3, true }, { 32, 32, 64, false }, { 3, 5, 0, true }, { 40, 1, 65, false },
	};
	uint32_t in = variant->dtype;
	/* The accumulator's dtype, the input's, and one across float and integer. */
	const uint32_t outs[5][3] = {
		[F32] = { F32, F16, I32 }, [F16] = { F32, F16, I8 }, [BF16] = { F32, BF16, F16 },
		[I32] = { I32, I8, F32 }, [I8] = { I32, I8, BF16 },
	};
	int bad = 0;

	for (size_t s = 0; s < ARRAY_SIZE(shapes); s++) {
		for (uint32_t flags = 0; flags < 8; flags++) {
			unsigned int r = s + flags;
			struct gemm_case g = {
				.in = in, .out = outs[in][r % 3], .flags = flags,
				.m = shapes[s].m, .n = shapes[s].n, .k = shapes[s].k,
				.place = (r * 5) % 8,
				.wild = shapes[s].wild,
			};
			bool ta = flags & RBLN_GEMM_TRANS_A, tb = flags & RBLN_GEMM_TRANS_B;

			/* Leading dimensions: each the minimum in some cases, padded in others. */
			g.lda = (ta ? g.m : g.k) + (r % 4 == 0 ? 0 : 3 + s);
			g.ldb = (tb ? g.k : g.n) + (r % 4 == 1 ? 0 : 5);
			g.ldc = g.n + (r % 4 == 2 ? 0 : 7);
			bad += gemm_run(_metadata, &self->x, &g);
		}
	}
	EXPECT_EQ(0, bad);
}

/* ---- several MiB in one packet, and many packets in one buffer ---- */

FIXTURE(big) {
	struct isa_ctx x;
	struct ew_job job;
};

FIXTURE_SETUP(big)
{
	ASSERT_EQ(0, ctx_init(&self->x, 24 * MIB, 16 * MIB));
	job_begin(&self->x);
	ref_rng_seed(0xb16);
}

FIXTURE_TEARDOWN(big)
{
	ctx_fini(&self->x);
	EXPECT_EQ(0, rbln_test_mem_used(0));
}

/*
 * 4 MiB operands: EW_BINARY over 257 chunks (a and dst in host memory, b in
 * device memory), then CAST and REDUCE of 4 MiB in device memory.
 */
TEST_F_TIMEOUT(big, large_elementwise, 300)
{
	const uint64_t n = MIB + 5;
	struct ew_case *k = &self->job.k[0];
	int bad;

	ASSERT_EQ(0, ew_add(&self->x, &self->job, RBLN_OP_EW_BINARY, RBLN_BINARY_ADD, F32, F32,
			    n, 2, NULL));
	/* Mostly finite sums; the specials stay at the start and at chunk edges. */
	ref_fill_moderate(F32, k->a.cpu + 4 * 2000, n - 2000, 1 << 20, 12);
	ref_fill_moderate(F32, k->b.cpu + 4 * 2000, n - 2000, 1 << 20, 12);
	for (uint64_t i = 4095; i < n; i += 4096 * 37) {
		ref_put(F32, k->a.cpu, i, 0x7f800000);
		ref_put(F32, k->b.cpu, i + 1, 0xff800000);
		ref_put(F32, k->a.cpu, i + 2, 0x3f800000);
		ref_put(F32, k->b.cpu, i + 2, 0x33800000);	/* 1 + 2^-24: a tie */
	}
	bad = ew_run(_metadata, &self->x, &self->job);
	EXPECT_EQ(0, bad);

	/* The same input again: to f16 (2 MiB out) in device memory, and summed by rows. */
	job_begin(&self->x);
	self->job.n = 0;
	{
		struct ew_case *cst = &self->job.k[0];
		struct opnd src, dst;
		const uint32_t rows = 4, cols = (n - 1) / 4;
		int rbad = 0;

		ASSERT_EQ(0, opnd_new(&self->x, n * 4, true, &src));
		ref_fill_moderate(F32, src.cpu, n, 1 << 16, 8);
		ASSERT_EQ(0, ew_add(&self->x, &self->job, RBLN_OP_CAST, 0, F32, F16, n, 1, &src));
		ASSERT_EQ(0, opnd_new(&self->x, rows * 4, false, &dst));
		ASSERT_EQ(0, ew_emit(&self->x, cst));
		ASSERT_EQ(0, rbln_drm_cmd_reduce(&self->x.c, RBLN_REDUCE_SUM, F32, dst.va, src.va,
						 rows, cols));
		ASSERT_EQ(1, job_run(&self->x));
		EXPECT_EQ(0, ew_check(_metadata, cst));
		for (uint32_t r = 0; r < rows; r++) {
			uint64_t want = ref_reduce(RBLN_REDUCE_SUM, F32, src.cpu + (size_t)r * cols * 4,
						   cols);
			uint32_t got = ref_get(F32, dst.cpu, r);

			if (!ref_match(F32, got, want)) {
				TH_LOG("REDUCE sum f32 %u x %u: row %u got %#x want %#llx", rows,
				       cols, r, got, (unsigned long long)want);
				rbad++;
			}
		}
		EXPECT_EQ(0, rbad + guard_damage(&dst));
	}
}

/*
 * One command buffer, many packets, each step feeding the next through
 * device memory: DMA in, fill, unary, scalar, binary (one in place), casts,
 * reductions and GEMMs, NOPs in between, DMA out of every intermediate.
 * The expected values chain through the references the same way.
 */
TEST_F_TIMEOUT(big, mixed_packets, 120)
{
	enum { N = 3000, R = 30, C = 100, P = 7 };
	struct isa_ctx *x = &self->x;
	struct opnd xin, ones, u, v, w, h, hb, red, mx, bm, g, xi, xq, x8;
	static uint8_t eu[N * 4], ev[N * 4], ew[N * 4], eh[N * 2], ehb[N * 2], exi[N * 4],
		       exq[N * 4], ex8[N];
	static uint64_t eg[R * P], gexp[R * P], ered[R], emx[N / C];
	static uint8_t g1[R * P * 4], bt[C * P * 2];
	uint8_t *bmat;
	struct rbln_drm_gemm gm;
	int bad = 0;

	/* Inputs: x moderate with zeros of both signs, B a 100 x 7 f16 matrix. */
	ASSERT_EQ(0, opnd_new(x, N * 4, true, &xin));
	ASSERT_EQ(0, opnd_new(x, C * P * 2, true, &bm));
	ref_fill_moderate(F32, xin.cpu, N, 3000, 6);
	ref_put(F32, xin.cpu, 0, 0x80000000);
	ref_put(F32, xin.cpu, 1, 0);
	ref_fill_moderate(F16, bm.cpu, C * P, 40, 2);
	bmat = bm.cpu;
	/* Outputs, all in device memory and copied out at the end. */
	ASSERT_EQ(0, opnd_new(x, N * 4, true, &ones));
	ASSERT_EQ(0, opnd_new(x, N * 4, true, &u));
	ASSERT_EQ(0, opnd_new(x, N * 4, true, &v));
	ASSERT_EQ(0, opnd_new(x, N * 4, true, &w));
	ASSERT_EQ(0, opnd_new(x, N * 2, true, &h));
	ASSERT_EQ(0, opnd_new(x, N * 2, true, &hb));
	ASSERT_EQ(0, opnd_new(x, R * 2, true, &red));
	ASSERT_EQ(0, opnd_new(x, (N / C) * 4, true, &mx));
	ASSERT_EQ(0, opnd_new(x, R * P * 4, true, &g));
	ASSERT_EQ(0, opnd_new(x, N * 4, true, &xi));
	ASSERT_EQ(0, opnd_new(x, N * 4, true, &xq));
	ASSERT_EQ(0, opnd_new(x, N, true, &x8));

	ASSERT_EQ(0, rbln_drm_cmd_nop(&x->c));
	ASSERT_EQ(0, rbln_drm_cmd_dma_fill(&x->c, ones.va, 0x3f800000, N * 4));
	ASSERT_EQ(0, rbln_drm_cmd_unary(&x->c, RBLN_UNARY_RELU, F32, u.va, xin.va, N));
	ASSERT_EQ(0, rbln_drm_cmd_scalar(&x->c, RBLN_BINARY_MUL, F32, v.va, u.va,
					 ref_fbits(0.75f), N));
	ASSERT_EQ(0, rbln_drm_cmd_binary(&x->c, RBLN_BINARY_SUB, F32, w.va, v.va, xin.va, N));
	ASSERT_EQ(0, rbln_drm_cmd_nop(&x->c));
	/* In place: w = w + ones */
	ASSERT_EQ(0, rbln_drm_cmd_binary(&x->c, RBLN_BINARY_ADD, F32, w.va, w.va, ones.va, N));
	ASSERT_EQ(0, rbln_drm_cmd_cast(&x->c, F16, F32, h.va, w.va, N));
	ASSERT_EQ(0, rbln_drm_cmd_cast(&x->c, BF16, F16, hb.va, h.va, N));
	ASSERT_EQ(0, rbln_drm_cmd_reduce(&x->c, RBLN_REDUCE_SUM, F16, red.va, h.va, R, C));
	ASSERT_EQ(0, rbln_drm_cmd_reduce(&x->c, RBLN_REDUCE_MAX, F32, mx.va, w.va, N / C, C));
	/* g = h B with h as 30 x 100, then g += h B' with B' stored transposed: bm as 7 x 100 */
	gm = (struct rbln_drm_gemm){ .in = F16, .out = F32, .flags = 0, .a = h.va, .b = bm.va,
				     .c = g.va, .m = R, .n = P, .k = C, .lda = C, .ldb = P,
				     .ldc = P };
	ASSERT_EQ(0, rbln_drm_cmd_gemm(&x->c, &gm));
	gm.flags = RBLN_GEMM_ACCUMULATE | RBLN_GEMM_TRANS_B;
	gm.ldb = C;
	ASSERT_EQ(0, rbln_drm_cmd_gemm(&x->c, &gm));
	/* Integers: xi = (i32)w; xq = (xi * xi) / -7; x8 = (i8)xq */
	ASSERT_EQ(0, rbln_drm_cmd_cast(&x->c, I32, F32, xi.va, w.va, N));
	ASSERT_EQ(0, rbln_drm_cmd_binary(&x->c, RBLN_BINARY_MUL, I32, xq.va, xi.va, xi.va, N));
	ASSERT_EQ(0, rbln_drm_cmd_scalar(&x->c, RBLN_BINARY_DIV, I32, xq.va, xq.va,
					 (uint32_t)-7, N));
	ASSERT_EQ(0, rbln_drm_cmd_cast(&x->c, I8, I32, x8.va, xq.va, N));
	ASSERT_EQ(0, rbln_drm_cmd_nop(&x->c));
	ASSERT_EQ(0, opnd_out(x, &u));
	ASSERT_EQ(0, opnd_out(x, &v));
	ASSERT_EQ(0, opnd_out(x, &w));
	ASSERT_EQ(0, opnd_out(x, &h));
	ASSERT_EQ(0, opnd_out(x, &hb));
	ASSERT_EQ(0, opnd_out(x, &red));
	ASSERT_EQ(0, opnd_out(x, &mx));
	ASSERT_EQ(0, opnd_out(x, &g));
	ASSERT_EQ(0, opnd_out(x, &xi));
	ASSERT_EQ(0, opnd_out(x, &xq));
	ASSERT_EQ(0, opnd_out(x, &x8));
	ASSERT_EQ(1, job_run(x));

	/* The same chain through the references. */
	for (size_t i = 0; i < N; i++) {
		uint32_t xv = ref_get(F32, xin.cpu, i);

		ref_put(F32, eu, i, ref_unary(RBLN_UNARY_RELU, F32, xv));
		ref_put(F32, ev, i, ref_binary(RBLN_BINARY_MUL, F32, ref_get(F32, eu, i),
					       ref_fbits(0.75f)));
		ref_put(F32, ew, i, ref_binary(RBLN_BINARY_SUB, F32, ref_get(F32, ev, i), xv));
		ref_put(F32, ew, i, ref_binary(RBLN_BINARY_ADD, F32, ref_get(F32, ew, i),
					       0x3f800000));
		ref_put(F16, eh, i, ref_cast(F32, F16, ref_get(F32, ew, i)));
		ref_put(BF16, ehb, i, ref_cast(F16, BF16, ref_get(F16, eh, i)));
		ref_put(I32, exi, i, ref_cast(F32, I32, ref_get(F32, ew, i)));
		ref_put(I32, exq, i, ref_binary(RBLN_BINARY_MUL, I32, ref_get(I32, exi, i),
						ref_get(I32, exi, i)));
		ref_put(I32, exq, i, ref_binary(RBLN_BINARY_DIV, I32, ref_get(I32, exq, i),
						(uint32_t)-7));
		ref_put(I8, ex8, i, ref_cast(I32, I8, ref_get(I32, exq, i)));
	}
	for (size_t r = 0; r < R; r++)
		ered[r] = ref_reduce(RBLN_REDUCE_SUM, F16, eh + r * C * 2, C);
	for (size_t r = 0; r < N / C; r++)
		emx[r] = ref_reduce(RBLN_REDUCE_MAX, F32, ew + r * C * 4, C);
	ASSERT_TRUE(ref_gemm(F16, F32, eh, bmat, NULL, R, P, C, eg));
	for (size_t i = 0; i < R * P; i++)
		ref_put(F32, g1, i, eg[i]);
	for (size_t q = 0; q < C; q++)
		for (size_t j = 0; j < P; j++)
			ref_put(F16, bt, q * P + j, ref_get(F16, bmat, j * C + q));
	ASSERT_TRUE(ref_gemm(F16, F32, eh, bt, g1, R, P, C, gexp));


	const struct { const char *name; uint32_t dt; const struct opnd *o;
		       const uint8_t *e; const uint64_t *e64; size_t n; } chk[] = {
		{ "relu", F32, &u, eu, NULL, N }, { "mul", F32, &v, ev, NULL, N },
		{ "sub, add in place", F32, &w, ew, NULL, N },
		{ "cast f16", F16, &h, eh, NULL, N }, { "cast bf16", BF16, &hb, ehb, NULL, N },
		{ "cast i32", I32, &xi, exi, NULL, N }, { "mul, div", I32, &xq, exq, NULL, N },
		{ "cast i8", I8, &x8, ex8, NULL, N },
		{ "reduce sum", F16, &red, NULL, ered, R },
		{ "reduce max", F32, &mx, NULL, emx, N / C },
		{ "gemm, accumulate", F32, &g, NULL, gexp, R * P },
	};

	for (size_t c = 0; c < ARRAY_SIZE(chk); c++) {
		int cbad = 0;

		for (size_t i = 0; i < chk[c].n; i++) {
			uint32_t got = ref_get(chk[c].dt, chk[c].o->cpu, i);
			uint64_t want = chk[c].e ? ref_get(chk[c].dt, chk[c].e, i) :
				       chk[c].e64[i];

			if (ref_match(chk[c].dt, got, want))
				continue;
			if (cbad++ < 3)
				TH_LOG("%s [%zu]: got %#x want %#llx", chk[c].name, i, got,
				       (unsigned long long)want);
		}
		cbad += guard_damage(chk[c].o);
		bad += cbad;
	}
	EXPECT_EQ(0, bad);
}

/*
 * Where the operands are does not change results. The executor works in
 * device memory where it can and through its own buffers where it cannot;
 * these are the cases it cannot: a never-written input reads as zeros, and
 * an output overlapping its input one element off, either way, gets the
 * input's elements as they were before the packet (one chunk here).
 */
TEST(elementwise_operand_placement)
{
	enum { N = 3000 };
	struct isa_ctx x;
	struct opnd b, d, up, down;
	uint64_t fresh_va;
	uint8_t *up0, *down0;
	int bad = 0;

	ASSERT_EQ(0, ctx_init(&x, 1 * MIB, 1 * MIB));
	job_begin(&x);
	ref_rng_seed(0x91ace);
	/* The last page-aligned N elements of device memory: never written. */
	fresh_va = (x.mem.va + x.mem_size - N * 4) & ~4095ull;
	ASSERT_EQ(0, opnd_new(&x, N * 4, false, &b));
	ASSERT_EQ(0, opnd_new(&x, N * 4, false, &d));
	ASSERT_EQ(0, opnd_new(&x, (N + 1) * 4, true, &up));
	ASSERT_EQ(0, opnd_new(&x, (N + 1) * 4, true, &down));
	ASSERT_LT(x.mem_used, fresh_va - x.mem.va);
	fill_inputs(F32, b.cpu, NULL, N);
	fill_inputs(F32, up.cpu, NULL, N + 1);
	fill_inputs(F32, down.cpu, NULL, N + 1);
	up0 = malloc((N + 1) * 4);
	down0 = malloc((N + 1) * 4);
	ASSERT_TRUE(up0 && down0);
	memcpy(up0, up.cpu, (N + 1) * 4);
	memcpy(down0, down.cpu, (N + 1) * 4);

	ASSERT_EQ(0, rbln_drm_cmd_binary(&x.c, RBLN_BINARY_ADD, F32, d.va, fresh_va, b.va, N));
	ASSERT_EQ(0, rbln_drm_cmd_unary(&x.c, RBLN_UNARY_NEG, F32, up.va + 4, up.va, N));
	ASSERT_EQ(0, rbln_drm_cmd_unary(&x.c, RBLN_UNARY_NEG, F32, down.va, down.va + 4, N));
	ASSERT_EQ(0, opnd_out(&x, &up));
	ASSERT_EQ(0, opnd_out(&x, &down));
	ASSERT_EQ(1, job_run(&x));

	for (size_t i = 0; i < N; i++) {
		uint64_t want = ref_binary(RBLN_BINARY_ADD, F32, 0, ref_get(F32, b.cpu, i));

		if (!ref_match(F32, ref_get(F32, d.cpu, i), want) && bad++ < 3)
			TH_LOG("0 + b[%zu]: got %#x want %#llx", i, ref_get(F32, d.cpu, i),
			       (unsigned long long)want);
		want = ref_unary(RBLN_UNARY_NEG, F32, ref_get(F32, up0, i));
		if (!ref_match(F32, ref_get(F32, up.cpu, i + 1), want) && bad++ < 6)
			TH_LOG("dst one up [%zu]: got %#x want %#llx", i,
			       ref_get(F32, up.cpu, i + 1), (unsigned long long)want);
		want = ref_unary(RBLN_UNARY_NEG, F32, ref_get(F32, down0, i + 1));
		if (!ref_match(F32, ref_get(F32, down.cpu, i), want) && bad++ < 9)
			TH_LOG("dst one down [%zu]: got %#x want %#llx", i,
			       ref_get(F32, down.cpu, i), (unsigned long long)want);
	}
	/* The elements no packet wrote. */
	EXPECT_EQ(ref_get(F32, up0, 0), ref_get(F32, up.cpu, 0));
	EXPECT_EQ(ref_get(F32, down0, N), ref_get(F32, down.cpu, N));
	EXPECT_EQ(0, bad + guard_damage(&d) + guard_damage(&up) + guard_damage(&down));
	free(up0);
	free(down0);
	ctx_fini(&x);
}

/* ---- WAIT: a semaphore in memory, released by the CPU ---- */

#define BEFORE		0x11111111u	/* what the packet before the WAIT writes */
#define AFTER		0x22222222u	/* what the packet after it writes */

/* A file with a queue, a command buffer, a page of words to wait on and one of results. */
struct wait_ctx {
	struct rbln_drm_device *dev;
	uint32_t queue;
	struct rbln_test_buf cmd, word, out;
};

static int wait_open(struct wait_ctx *w)
{
	memset(w, 0, sizeof(*w));
	return rbln_test_open(0, &w->dev) ?:
	       rbln_drm_queue_create(w->dev, RBLN_QUEUE_PRIORITY_NORMAL, &w->queue) ?:
	       rbln_test_buf_new(w->dev, 64 * KIB, RBLN_BO_HOST, 0, &w->cmd) ?:
	       rbln_test_buf_new(w->dev, 4096, RBLN_BO_HOST, 0, &w->word) ?:
	       rbln_test_buf_new(w->dev, 4096, RBLN_BO_HOST, 0, &w->out);
}

static void wait_close(struct wait_ctx *w)
{
	rbln_test_buf_free(w->dev, &w->cmd);
	rbln_test_buf_free(w->dev, &w->word);
	rbln_test_buf_free(w->dev, &w->out);
	rbln_drm_close(w->dev);
}

static volatile uint64_t *word_of(struct wait_ctx *w, unsigned int i)
{
	return (volatile uint64_t *)w->word.cpu + i;
}

static volatile uint32_t *out_of(struct wait_ctx *w)
{
	return w->out.cpu;
}

/* The CPU's store of a word the device polls: whole, and after what came before. */
static void word_set(volatile uint64_t *word, uint64_t v)
{
	__atomic_store_n(word, v, __ATOMIC_RELEASE);
}

/*
 * Writes, at command buffer offset @off: out[@slot] = BEFORE, a WAIT for
 * word @i to reach @value, out[@slot + 1] = AFTER. The new length.
 */
static uint32_t wait_emit(struct wait_ctx *w, uint32_t off, unsigned int slot, unsigned int i,
			  uint64_t value)
{
	struct rbln_drm_cmd c;

	rbln_drm_cmd_init(&c, (char *)w->cmd.cpu + off, w->cmd.size - off);
	if (rbln_drm_cmd_dma_fill(&c, w->out.va + 4 * slot, BEFORE, 4) ||
	    rbln_drm_cmd_wait(&c, w->word.va + 8 * i, value) ||
	    rbln_drm_cmd_dma_fill(&c, w->out.va + 4 * (slot + 1), AFTER, 4))
		return 0;
	return off + c.len;
}

/* Submits the @len bytes at command buffer offset @off; *@sync gets the fence. */
static int wait_submit(struct wait_ctx *w, uint32_t off, uint32_t len, uint32_t *sync)
{
	uint32_t bos[3] = { w->word.handle, w->out.handle, w->cmd.handle };
	struct drm_rbln_sync sig = { 0 };
	int ret;

	if (drmSyncobjCreate(rbln_drm_fd(w->dev), 0, &sig.handle))
		return -errno;
	ret = rbln_drm_submit(w->dev, w->queue, w->cmd.va + off, len - off, bos, 3, NULL, 0,
			      &sig);
	if (ret)
		drmSyncobjDestroy(rbln_drm_fd(w->dev), sig.handle);
	*sync = sig.handle;
	return ret;
}

/* Waits up to @ms for @sync and destroys it: 1, the job's -errno, or 0. */
static int wait_status(struct wait_ctx *w, uint32_t sync, int ms)
{
	int status = rbln_test_sync_status(w->dev, sync, ms);

	drmSyncobjDestroy(rbln_drm_fd(w->dev), sync);
	return status;
}

/*
 * Whether the job of @sync is stalled at its WAIT: out[@slot] written by
 * the packet before it within @ms, and then, a while later, its fence
 * still unsignaled and out[@slot + 1] unwritten.
 */
static bool stalled(struct wait_ctx *w, uint32_t sync, unsigned int slot, int ms)
{
	int64_t end = rbln_test_now_ms() + rbln_test_ms(ms);

	while (out_of(w)[slot] != BEFORE && rbln_test_now_ms() < end)
		usleep(1000);
	if (out_of(w)[slot] != BEFORE)
		return false;
	usleep(rbln_test_ms(50) * 1000);
	return rbln_test_pending(w->dev, sync) && out_of(w)[slot + 1] == 0;
}

/* fdinfo's rbln-fault of @w, or "none". */
static const char *wait_fault(struct wait_ctx *w, char *buf, size_t size)
{
	if (rbln_test_fdinfo_value(rbln_drm_fd(w->dev), "rbln-fault:", buf, size))
		snprintf(buf, size, "none");
	return buf;
}

FIXTURE(wait) {
	struct wait_ctx w;
};

FIXTURE_SETUP(wait)
{
	uint64_t caps = 0;

	ASSERT_EQ(0, wait_open(&self->w));
	ASSERT_EQ(0, rbln_drm_get_param(self->w.dev, RBLN_PARAM_ISA_CAPS, &caps));
	ASSERT_EQ(RBLN_ISA_CAP_WAIT, caps & RBLN_ISA_CAP_WAIT);
}

FIXTURE_TEARDOWN(wait)
{
	wait_close(&self->w);
}

struct writer {
	volatile uint64_t *word;
	uint64_t value;
};

static void *write_word(void *p)
{
	struct writer *wr = p;

	word_set(wr->word, wr->value);
	return NULL;
}

/* Stalled until another thread writes the word; the packets after it run then. */
TEST_F(wait, released_by_another_thread)
{
	struct writer wr = { word_of(&self->w, 0), 7 };
	uint32_t len, sync;
	pthread_t t;

	word_set(wr.word, 0);
	len = wait_emit(&self->w, 0, 0, 0, 7);
	ASSERT_NE(0, len);
	ASSERT_EQ(0, wait_submit(&self->w, 0, len, &sync));
	ASSERT_TRUE(stalled(&self->w, sync, 0, 5000));
	ASSERT_EQ(0, pthread_create(&t, NULL, write_word, &wr));
	ASSERT_EQ(0, pthread_join(t, NULL));
	EXPECT_EQ(1, wait_status(&self->w, sync, 5000));
	EXPECT_EQ(AFTER, out_of(&self->w)[1]);
	EXPECT_STREQ("none", wait_fault(&self->w, (char[64]){ 0 }, 64));
}

/* word >= value passes at once, bit 63 of value aside; value - 1 waits until it changes. */
TEST_F(wait, satisfied_runs_through_and_the_boundary_holds)
{
	static const struct { uint64_t word, value; } through[] = {
		{ 0, 0 }, { 5, 5 }, { 6, 5 }, { UINT64_MAX >> 1, UINT64_MAX >> 1 },
		/* Bit 63 of the value is not compared. */
		{ 5, RBLN_WAIT_CANCEL | 5 }, { 0, RBLN_WAIT_CANCEL },
	};
	uint32_t len, sync;
	unsigned int i;

	for (i = 0; i < sizeof(through) / sizeof(through[0]); i++) {
		memset(self->w.out.cpu, 0, 4096);
		word_set(word_of(&self->w, 0), through[i].word);
		len = wait_emit(&self->w, 0, 0, 0, through[i].value);
		ASSERT_EQ(0, wait_submit(&self->w, 0, len, &sync));
		EXPECT_EQ(1, wait_status(&self->w, sync, 5000)) TH_LOG("case %u", i);
		EXPECT_EQ(AFTER, out_of(&self->w)[1]) TH_LOG("case %u", i);
	}

	/* One short: it waits, through a change that is not enough too. */
	memset(self->w.out.cpu, 0, 4096);
	word_set(word_of(&self->w, 0), 4);
	len = wait_emit(&self->w, 0, 0, 0, 6);
	ASSERT_EQ(0, wait_submit(&self->w, 0, len, &sync));
	ASSERT_TRUE(stalled(&self->w, sync, 0, 5000));
	word_set(word_of(&self->w, 0), 5);
	usleep(rbln_test_ms(50) * 1000);
	EXPECT_TRUE(rbln_test_pending(self->w.dev, sync));
	EXPECT_EQ(0, out_of(&self->w)[1]);
	word_set(word_of(&self->w, 0), 6);
	EXPECT_EQ(1, wait_status(&self->w, sync, 5000));
	EXPECT_EQ(AFTER, out_of(&self->w)[1]);
}

/*
 * RBLN_WAIT_CANCEL ends the command buffer there: what came before ran,
 * nothing after does, and the job succeeds; the context goes on.
 */
TEST_F(wait, cancel_skips_the_rest_without_a_fault)
{
	struct rbln_drm_cmd c;
	uint32_t len, sync;

	/* Canceled while it waits. */
	word_set(word_of(&self->w, 0), 0);
	len = wait_emit(&self->w, 0, 0, 0, 1);
	ASSERT_EQ(0, wait_submit(&self->w, 0, len, &sync));
	ASSERT_TRUE(stalled(&self->w, sync, 0, 5000));
	word_set(word_of(&self->w, 0), RBLN_WAIT_CANCEL);
	EXPECT_EQ(1, wait_status(&self->w, sync, 5000));
	EXPECT_EQ(BEFORE, out_of(&self->w)[0]);
	EXPECT_EQ(0, out_of(&self->w)[1]);

	/* Canceled before it runs, with a count that would satisfy it: cancel wins. */
	word_set(word_of(&self->w, 1), RBLN_WAIT_CANCEL | 100);
	len = wait_emit(&self->w, 0, 2, 1, 5);
	/* More after the DMA_FILL: none of it runs either. */
	rbln_drm_cmd_init(&c, (char *)self->w.cmd.cpu + len, self->w.cmd.size - len);
	ASSERT_EQ(0, rbln_drm_cmd_dma_fill(&c, self->w.out.va + 16, AFTER, 64));
	len += c.len;
	ASSERT_EQ(0, wait_submit(&self->w, 0, len, &sync));
	EXPECT_EQ(1, wait_status(&self->w, sync, 5000));
	EXPECT_EQ(BEFORE, out_of(&self->w)[2]);
	EXPECT_EQ(0, out_of(&self->w)[3]);
	EXPECT_EQ(0, out_of(&self->w)[4]);

	/* Not banned, no fault: the next job runs. */
	EXPECT_STREQ("none", wait_fault(&self->w, (char[64]){ 0 }, 64));
	word_set(word_of(&self->w, 2), 1);
	len = wait_emit(&self->w, 0, 8, 2, 1);
	ASSERT_EQ(0, wait_submit(&self->w, 0, len, &sync));
	EXPECT_EQ(1, wait_status(&self->w, sync, 5000));
	EXPECT_EQ(AFTER, out_of(&self->w)[9]);
}

/*
 * A job that completes just before a WAIT on its ring is reported while
 * the WAIT waits (interrupt moderation must not hold it): the host may be
 * waiting for it before it writes the word.
 */
TEST_F(wait, completions_before_it_are_not_held_back)
{
	uint32_t first, second, third, len, len2, len3;

	word_set(word_of(&self->w, 0), 0);
	word_set(word_of(&self->w, 1), 0);
	/* Three jobs on one queue: WAIT for word 0; a fill; WAIT for word 1. */
	len = wait_emit(&self->w, 0, 0, 0, 1);
	len2 = len;
	{
		struct rbln_drm_cmd c;

		rbln_drm_cmd_init(&c, (char *)self->w.cmd.cpu + len, self->w.cmd.size - len);
		ASSERT_EQ(0, rbln_drm_cmd_dma_fill(&c, self->w.out.va + 16, AFTER, 4));
		len2 += c.len;
	}
	len3 = wait_emit(&self->w, len2, 8, 1, 1);
	ASSERT_EQ(0, wait_submit(&self->w, 0, len, &first));
	ASSERT_EQ(0, wait_submit(&self->w, len, len2, &second));
	ASSERT_EQ(0, wait_submit(&self->w, len2, len3, &third));
	ASSERT_TRUE(stalled(&self->w, first, 0, 5000));
	EXPECT_TRUE(rbln_test_pending(self->w.dev, second));

	/* The first two complete at once; the third waits. */
	word_set(word_of(&self->w, 0), 1);
	EXPECT_EQ(1, wait_status(&self->w, first, 1000));
	EXPECT_EQ(1, wait_status(&self->w, second, 1000));
	EXPECT_TRUE(stalled(&self->w, third, 8, 5000));
	word_set(word_of(&self->w, 1), 1);
	EXPECT_EQ(1, wait_status(&self->w, third, 5000));
	EXPECT_EQ(AFTER, out_of(&self->w)[9]);
}

/*
 * The time from the CPU's write of the word to the job's fence signaling,
 * as a waiter on the syncobj sees it: over 100 jobs, each stalled first.
 */
static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

TEST_F(wait, release_latency)
{
	enum { RUNS = 100 };
	int64_t lat[RUNS], t0;
	uint32_t len, sync;
	unsigned int i;
	int fd = rbln_drm_fd(self->w.dev);

	for (i = 0; i < RUNS; i++) {
		memset(self->w.out.cpu, 0, 4096);
		word_set(word_of(&self->w, 0), i);
		len = wait_emit(&self->w, 0, 0, 0, i + 1);
		ASSERT_EQ(0, wait_submit(&self->w, 0, len, &sync));
		/* At the WAIT, and polling for a while: the backoff is at its longest. */
		ASSERT_TRUE(stalled(&self->w, sync, 0, 5000));
		t0 = now_ns();
		word_set(word_of(&self->w, 0), i + 1);
		ASSERT_EQ(0, drmSyncobjWait(fd, &sync, 1, rbln_test_deadline_ns(5000), 0, NULL));
		lat[i] = now_ns() - t0;
		ASSERT_EQ(1, wait_status(&self->w, sync, 0));
	}
	qsort(lat, RUNS, sizeof(lat[0]), cmp_i64);
	TH_LOG("release latency: median %" PRId64 " us, 10%% %" PRId64 " us, 90%% %" PRId64
	       " us, max %" PRId64 " us", lat[RUNS / 2] / 1000, lat[RUNS / 10] / 1000,
	       lat[RUNS * 9 / 10] / 1000, lat[RUNS - 1] / 1000);
}

/* Each case in a file of its own: a fault bans the context. */
TEST(wait_rejections_fault)
{
	static const char *const what[] = {
		"misaligned addr", "reserved", "dtype", "sub", "len8 4", "len8 2", "unmapped addr",
	};
	unsigned int i;

	for (i = 0; i < sizeof(what) / sizeof(what[0]); i++) {
		char want[64], got[64];
		struct rbln_drm_cmd c;
		struct wait_ctx w;
		uint64_t bind = 0;
		uint32_t *pkt, len, sync;

		ASSERT_EQ(0, wait_open(&w));
		ASSERT_EQ(0, rbln_drm_get_param(w.dev, RBLN_PARAM_VM_BIND_START, &bind));
		word_set(word_of(&w, 0), 1);
		rbln_drm_cmd_init(&c, w.cmd.cpu, w.cmd.size);
		ASSERT_EQ(0, rbln_drm_cmd_wait(&c, w.word.va, 1));
		pkt = w.cmd.cpu;
		snprintf(want, sizeof(want), "malformed %#" PRIx64, w.cmd.va);
		switch (i) {
		case 0:
			pkt[2] += 4;
			break;
		case 1:
			pkt[1] = 1;
			break;
		case 2:
			pkt[0] = RBLN_PKT_HEADER(RBLN_OP_WAIT, 1, 0, 3);
			break;
		case 3:
			pkt[0] = RBLN_PKT_HEADER(RBLN_OP_WAIT, 0, 1, 3);
			break;
		case 4:
			pkt[0] = RBLN_PKT_HEADER(RBLN_OP_WAIT, 0, 0, 4);
			ASSERT_EQ(0, rbln_drm_cmd_nop(&c));
			break;
		case 5:
			pkt[0] = RBLN_PKT_HEADER(RBLN_OP_WAIT, 0, 0, 2);
			break;
		case 6:
			/* Nothing is mapped in the VM_BIND range until bound. */
			memcpy(&pkt[2], &bind, sizeof(bind));
			snprintf(want, sizeof(want), "unmapped %#" PRIx64, bind);
			break;
		}
		len = c.len;
		ASSERT_EQ(0, wait_submit(&w, 0, len, &sync));
		EXPECT_EQ(-EFAULT, wait_status(&w, sync, 5000)) TH_LOG("%s", what[i]);
		EXPECT_STREQ(want, wait_fault(&w, got, sizeof(got))) TH_LOG("%s", what[i]);
		wait_close(&w);
	}
	EXPECT_EQ(0, rbln_test_mem_used(0));
}

TEST_HARNESS_MAIN
