// SPDX-License-Identifier: MIT
/*
 * rbln_explain.c - explain(): counting the hidden overhead of ops
 *
 * One region at a time, process-wide. While it is open, the op code calls
 * the hooks of rbln_explain.h and they add to the open region's counters
 * under explain_lock; a hook that finds no region open (it raced with end)
 * records nothing. end() stops the recording, then builds everything the
 * region shows (sites, verdict, report) outside the lock, so reading an
 * ended region needs no lock beyond checking the handle is ours.
 */

#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json.h>

#include "rbln_explain.h"
#include "rbln_internal.h"

atomic_bool rbln_explain_open;

/* One (op, caller) pair of recompiles or fallbacks; caller NULL without with_stack. */
struct op_entry {
	const char *op;
	const void *site;
	int64_t count;
};

/* One (op, direction, caller) of host bounces. */
struct bounce_entry {
	const char *op;
	const void *site;
	bool to_host;
	int64_t count;
	int64_t bytes;
};

enum region_state {
	REGION_OPEN,
	REGION_ENDING,		/* closed, end() is building the results */
	REGION_ENDED,
	REGION_BROKEN,		/* ended, but its results could not be built */
};

struct rbln_explain {
	struct rbln_explain *prev, *next;	/* live handles, under explain_lock */
	bool with_stack;
	enum region_state state;
	uint64_t start_ns;

	/* Recorded while open, under explain_lock. */
	struct rbln_explain_counter warm, recompile, fallback;
	int64_t to_host_count, to_host_bytes, to_device_count, to_device_bytes;
	struct op_entry *recompiles, *fallbacks;
	size_t nrecompiles, caprecompiles, nfallbacks, capfallbacks;
	struct bounce_entry *bounces;
	size_t nbounces, capbounces;
	int64_t unattributed;
	int64_t replays, replay_ops, replay_ns;

	/* Built by end(), read-only afterwards. */
	struct rbln_explain_dump dump;
	struct rbln_explain_verdict verdict;
	char *report;
	struct rbln_explain_op_count *rec_ops, *fb_ops;
	struct rbln_explain_site_count *rec_sites, *fb_sites;
	struct rbln_explain_bounce_site *bounce_sites;
	char **strings;				/* every string the results point to */
	size_t nstrings, capstrings;
};

static pthread_mutex_t explain_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rbln_explain *explain_current;	/* the open region */
static struct rbln_explain *explain_handles;	/* every live handle */

/*
 * What a framework above librbln attributes this thread's work to
 * (rbln_explain_attribute()): interned strings, kept for the process's
 * life, so that records compare them by address as they do return
 * addresses, and site_name() tells the two apart.
 */
static __thread const char *attr_op, *attr_site;
static pthread_mutex_t intern_lock = PTHREAD_MUTEX_INITIALIZER;
static char **interned;
static size_t ninterned, capinterned;

static const char *intern(const char *str)
{
	const char *found = NULL;
	size_t i;

	pthread_mutex_lock(&intern_lock);
	for (i = 0; i < ninterned && !found; i++)
		if (!strcmp(interned[i], str))
			found = interned[i];
	if (!found && rbln_grow((void **)&interned, &capinterned, ninterned + 1, sizeof(*interned))) {
		interned[ninterned] = strdup(str);
		if (interned[ninterned])
			found = interned[ninterned++];
	}
	pthread_mutex_unlock(&intern_lock);
	return found;
}

static bool is_interned(const void *p)
{
	bool found = false;
	size_t i;

	pthread_mutex_lock(&intern_lock);
	for (i = 0; i < ninterned && !found; i++)
		found = interned[i] == p;
	pthread_mutex_unlock(&intern_lock);
	return found;
}

rbln_status rbln_explain_attribute(const char *op, const char *site)
{
	const char *iop = op ? intern(op) : NULL, *isite = site ? intern(site) : NULL;

	if ((op && !iop) || (site && !isite))
		return rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "rbln_explain_attribute: out of host memory");
	attr_op = iop;
	attr_site = isite;
	return RBLN_OK;
}

/* Devices whose memory history records stacks (rbln_snapshot.c), which take sites too. */
static atomic_int memory_stacks;

void rbln_explain_memory_stacks(bool on)
{
	atomic_fetch_add(&memory_stacks, on ? 1 : -1);
}

const char *rbln_explain_caller(void)
{
	return attr_site;
}

bool rbln_explain_wants_sites(void)
{
	bool wants;

	if (atomic_load_explicit(&memory_stacks, memory_order_relaxed) > 0)
		return true;
	if (!rbln_explain_active())
		return false;
	pthread_mutex_lock(&explain_lock);
	wants = explain_current && explain_current->with_stack;
	pthread_mutex_unlock(&explain_lock);
	return wants;
}

/* @op interned for a framework's record by @fn; NULL with the status set when it cannot be. */
static const char *record_op_name(const char *op, const char *fn)
{
	const char *iop;

	if (!op) {
		rbln_fail(RBLN_ERROR_INVALID, "%s: NULL op", fn);
		return NULL;
	}
	iop = intern(op);
	if (!iop)
		rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
	return iop;
}

rbln_status rbln_explain_record_bounce(const char *op, bool to_host, uint64_t bytes)
{
	const char *iop;

	if (op && !rbln_explain_active())
		return RBLN_OK;
	iop = record_op_name(op, "rbln_explain_record_bounce");
	if (!iop)
		return rbln_last_status();
	rbln_explain_bounce(iop, to_host, bytes, RBLN_CALLER());
	return RBLN_OK;
}

rbln_status rbln_explain_record_fallback(const char *op, uint64_t ns)
{
	const char *iop;

	if (op && !rbln_explain_active())
		return RBLN_OK;
	iop = record_op_name(op, "rbln_explain_record_fallback");
	if (!iop)
		return rbln_last_status();
	rbln_explain_dispatch(RBLN_DISPATCH_CPU_FALLBACK, iop, ns, RBLN_CALLER());
	return RBLN_OK;
}

/* Op names are static strings, but two units may hold two copies of one. */
static bool same_op(const char *a, const char *b)
{
	return a == b || strcmp(a, b) == 0;
}

static void record_op(struct rbln_explain *e, struct op_entry **v, size_t *n, size_t *cap,
		      const char *op, const void *site)
{
	size_t i;

	if (!e->with_stack)
		site = NULL;
	for (i = 0; i < *n; i++) {
		if ((*v)[i].site == site && same_op((*v)[i].op, op)) {
			(*v)[i].count++;
			return;
		}
	}
	if (!rbln_grow((void **)v, cap, *n + 1, sizeof(**v))) {
		e->unattributed++;
		return;
	}
	(*v)[(*n)++] = (struct op_entry){ .op = op, .site = site, .count = 1 };
}

void rbln_explain_dispatch(enum rbln_dispatch_kind kind, const char *op, uint64_t ns,
			   const void *site)
{
	struct rbln_explain *e;

	if (attr_site)
		site = attr_site;
	pthread_mutex_lock(&explain_lock);
	e = explain_current;
	if (!e)
		goto out;
	switch (kind) {
	case RBLN_DISPATCH_WARM_HIT:
		e->warm.count++;
		e->warm.ns += (int64_t)ns;
		break;
	case RBLN_DISPATCH_RECOMPILE:
		e->recompile.count++;
		e->recompile.ns += (int64_t)ns;
		record_op(e, &e->recompiles, &e->nrecompiles, &e->caprecompiles, op, site);
		break;
	case RBLN_DISPATCH_CPU_FALLBACK:
		e->fallback.count++;
		e->fallback.ns += (int64_t)ns;
		record_op(e, &e->fallbacks, &e->nfallbacks, &e->capfallbacks, op, site);
		break;
	}
out:
	pthread_mutex_unlock(&explain_lock);
}

void rbln_explain_graph_replay(int64_t ops, uint64_t ns)
{
	struct rbln_explain *e;

	pthread_mutex_lock(&explain_lock);
	e = explain_current;
	if (e) {
		e->replays++;
		e->replay_ops += ops;
		e->replay_ns += (int64_t)ns;
	}
	pthread_mutex_unlock(&explain_lock);
}

void rbln_explain_bounce(const char *op, bool to_host, uint64_t bytes, const void *site)
{
	struct bounce_entry *b;
	struct rbln_explain *e;
	size_t i;

	if (attr_op)
		op = attr_op;
	if (attr_site)
		site = attr_site;
	pthread_mutex_lock(&explain_lock);
	e = explain_current;
	if (!e)
		goto out;
	if (to_host) {
		e->to_host_count++;
		e->to_host_bytes += (int64_t)bytes;
	} else {
		e->to_device_count++;
		e->to_device_bytes += (int64_t)bytes;
	}
	if (!e->with_stack)
		site = NULL;
	for (i = 0; i < e->nbounces; i++) {
		b = &e->bounces[i];
		if (b->site == site && b->to_host == to_host && same_op(b->op, op)) {
			b->count++;
			b->bytes += (int64_t)bytes;
			goto out;
		}
	}
	if (!rbln_grow((void **)&e->bounces, &e->capbounces, e->nbounces + 1, sizeof(*e->bounces))) {
		e->unattributed++;
		goto out;
	}
	e->bounces[e->nbounces++] = (struct bounce_entry){
		.op = op, .site = site, .to_host = to_host, .count = 1, .bytes = (int64_t)bytes,
	};
out:
	pthread_mutex_unlock(&explain_lock);
}

/* Under explain_lock: is @e a handle begin() gave out and free() has not taken back? */
static bool is_live(const struct rbln_explain *e)
{
	const struct rbln_explain *h;

	for (h = explain_handles; h; h = h->next)
		if (h == e)
			return true;
	return false;
}

rbln_explain *rbln_explain_begin(bool with_stack)
{
	struct rbln_explain *e = calloc(1, sizeof(*e));

	if (!e) {
		rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "rbln_explain_begin: out of host memory");
		return NULL;
	}
	e->with_stack = with_stack;
	pthread_mutex_lock(&explain_lock);
	if (explain_current) {
		pthread_mutex_unlock(&explain_lock);
		free(e);
		rbln_fail(RBLN_ERROR_BUSY,
			  "rbln_explain_begin: an explain region is already open (regions are process-wide and must not overlap)");
		return NULL;
	}
	e->next = explain_handles;
	if (explain_handles)
		explain_handles->prev = e;
	explain_handles = e;
	explain_current = e;
	e->start_ns = rbln_explain_now();
	atomic_store_explicit(&rbln_explain_open, true, memory_order_relaxed);
	pthread_mutex_unlock(&explain_lock);
	return e;
}

/* --- results ----------------------------------------------------------------- */

/* Keeps a formatted string for the results; NULL when out of memory. */
static const char *__attribute__((format(printf, 2, 3)))
keep(struct rbln_explain *e, const char *fmt, ...)
{
	va_list ap;
	char *s;
	int len;

	va_start(ap, fmt);
	len = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (len < 0 || !rbln_grow((void **)&e->strings, &e->capstrings, e->nstrings + 1, sizeof(char *)))
		return NULL;
	s = malloc((size_t)len + 1);
	if (!s)
		return NULL;
	va_start(ap, fmt);
	vsnprintf(s, (size_t)len + 1, fmt, ap);
	va_end(ap);
	e->strings[e->nstrings++] = s;
	return s;
}

/*
 * The caller at return address @site: "fn+0x1d (/path/prog)" when the
 * object exports the function's symbol, else "/path/prog+0x11d9", an
 * offset addr2line resolves. A site a framework named is its name.
 */
static const char *site_name(struct rbln_explain *e, const void *site)
{
	uintptr_t addr = (uintptr_t)site;
	Dl_info info;

	if (is_interned(site))
		return keep(e, "%s", (const char *)site);

	/* A return address may be one past a call ending the function. */
	if (!dladdr((const void *)(addr - 1), &info) || !info.dli_fname)
		return keep(e, "%#" PRIxPTR, addr);
	if (info.dli_sname && info.dli_saddr)
		return keep(e, "%s+%#" PRIxPTR " (%s)", info.dli_sname,
			    addr - (uintptr_t)info.dli_saddr, info.dli_fname);
	return keep(e, "%s+%#" PRIxPTR, info.dli_fname, addr - (uintptr_t)info.dli_fbase);
}

static int cmp_entry_op(const void *a, const void *b)
{
	const struct op_entry *x = a, *y = b;
	int c = strcmp(x->op, y->op);

	if (c)
		return c;
	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	/* qsort is not stable: ties go by address so reports repeat */
	return (uintptr_t)x->site < (uintptr_t)y->site ? -1 : (uintptr_t)x->site > (uintptr_t)y->site;
}

static int cmp_op_count(const void *a, const void *b)
{
	const struct rbln_explain_op_count *x = a, *y = b;

	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	return strcmp(x->op, y->op);
}

static int cmp_bounce_site(const void *a, const void *b)
{
	const struct rbln_explain_bounce_site *x = a, *y = b;

	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	return strcmp(x->site, y->site);
}

/*
 * Groups the (op, caller) entries by op into *@ops, with each op's callers
 * in *@sites when with_stack; returns the number of ops, or -1 when out
 * of memory.
 */
static long by_op(struct rbln_explain *e, struct op_entry *v, size_t n,
		  struct rbln_explain_op_count **ops, struct rbln_explain_site_count **sites)
{
	struct rbln_explain_op_count *o = NULL;
	size_t i, nops = 0;

	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cmp_entry_op);
	*ops = calloc(n, sizeof(**ops));
	if (!*ops)
		return -1;
	if (e->with_stack) {
		*sites = calloc(n, sizeof(**sites));
		if (!*sites)
			return -1;
	}
	for (i = 0; i < n; i++) {
		if (!o || !same_op(o->op, v[i].op)) {
			o = &(*ops)[nops++];
			o->op = v[i].op;
			if (e->with_stack)
				o->sites = &(*sites)[i];
		}
		o->count += v[i].count;
		if (e->with_stack) {
			(*sites)[i].count = v[i].count;
			(*sites)[i].site = site_name(e, v[i].site);
			if (!(*sites)[i].site)
				return -1;
			o->nsites++;
		}
	}
	qsort(*ops, nops, sizeof(**ops), cmp_op_count);
	return (long)nops;
}

static const char *dir_name(bool to_host)
{
	return to_host ? "device->host" : "host->device";
}

static bool build_bounces(struct rbln_explain *e)
{
	struct rbln_explain_bounce_site *s;
	size_t i;

	if (!e->nbounces)
		return true;
	e->bounce_sites = calloc(e->nbounces, sizeof(*e->bounce_sites));
	if (!e->bounce_sites)
		return false;
	for (i = 0; i < e->nbounces; i++) {
		s = &e->bounce_sites[i];
		s->op = e->bounces[i].op;
		s->to_host = e->bounces[i].to_host;
		s->count = e->bounces[i].count;
		s->bytes = e->bounces[i].bytes;
		if (e->with_stack) {
			s->caller = site_name(e, e->bounces[i].site);
			if (!s->caller)
				return false;
			s->site = keep(e, "%s: %s at %s", s->op, dir_name(s->to_host), s->caller);
		} else {
			s->site = keep(e, "%s: %s", s->op, dir_name(s->to_host));
		}
		if (!s->site)
			return false;
	}
	qsort(e->bounce_sites, e->nbounces, sizeof(*e->bounce_sites), cmp_bounce_site);
	return true;
}

/* A growing string; @failed sticks once memory runs out. */
struct sbuf {
	char *s;
	size_t len, cap;
	bool failed;
};

static void __attribute__((format(printf, 2, 3))) sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	size_t ncap;
	char *p;
	int len;

	if (b->failed)
		return;
	va_start(ap, fmt);
	len = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (len < 0) {
		b->failed = true;
		return;
	}
	if (b->len + (size_t)len + 1 > b->cap) {
		ncap = b->cap ? b->cap : 1024;
		while (b->len + (size_t)len + 1 > ncap)
			ncap *= 2;
		p = realloc(b->s, ncap);
		if (!p) {
			b->failed = true;
			return;
		}
		b->s = p;
		b->cap = ncap;
	}
	va_start(ap, fmt);
	vsnprintf(b->s + b->len, (size_t)len + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)len;
}

/* " (matmul x2, add x1)" for a reason; nothing when no op was recorded. */
static void sb_op_list(struct sbuf *b, const struct rbln_explain_op_count *ops, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		sb_printf(b, "%s%s x%" PRId64, i ? ", " : " (", ops[i].op, ops[i].count);
	if (n)
		sb_printf(b, ")");
}

static const char *plural(int64_t n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}

static bool build_verdict(struct rbln_explain *e)
{
	const struct rbln_explain_dump *d = &e->dump;
	struct rbln_explain_op_count *ops;
	struct sbuf b = { 0 };
	size_t i, j, nops = 0;
	const char *r;

	if (d->dispatch.recompile.count) {
		sb_printf(&b, "%" PRId64 " %s", d->dispatch.recompile.count,
			  plural(d->dispatch.recompile.count, "recompile", "recompiles"));
		sb_op_list(&b, d->recompiles_by_op, d->nrecompile_ops);
		r = b.failed ? NULL : keep(e, "%s", b.s);
		if (!r)
			goto fail;
		e->verdict.reasons[e->verdict.nreasons++] = r;
		b.len = 0;
	}
	if (d->dispatch.cpu_fallback.count) {
		sb_printf(&b, "%" PRId64 " cpu %s", d->dispatch.cpu_fallback.count,
			  plural(d->dispatch.cpu_fallback.count, "fallback", "fallbacks"));
		sb_op_list(&b, d->fallbacks_by_op, d->nfallback_ops);
		r = b.failed ? NULL : keep(e, "%s", b.s);
		if (!r)
			goto fail;
		e->verdict.reasons[e->verdict.nreasons++] = r;
		b.len = 0;
	}
	if (d->host_bounce.count) {
		/* By op, both directions together: the op is what the user changes. */
		ops = calloc(d->host_bounce.nsites, sizeof(*ops));
		if (!ops)
			goto fail;
		for (i = 0; i < d->host_bounce.nsites; i++) {
			for (j = 0; j < nops && !same_op(ops[j].op, d->host_bounce.by_site[i].op); j++)
				;
			if (j == nops)
				ops[nops++].op = d->host_bounce.by_site[i].op;
			ops[j].count += d->host_bounce.by_site[i].count;
		}
		qsort(ops, nops, sizeof(*ops), cmp_op_count);
		sb_printf(&b, "%" PRId64 " host %s, %" PRId64 " bytes", d->host_bounce.count,
			  plural(d->host_bounce.count, "bounce", "bounces"), d->host_bounce.bytes);
		sb_op_list(&b, ops, nops);
		free(ops);
		r = b.failed ? NULL : keep(e, "%s", b.s);
		if (!r)
			goto fail;
		e->verdict.reasons[e->verdict.nreasons++] = r;
	}
	e->verdict.clean = e->verdict.nreasons == 0;
	free(b.s);
	return true;
fail:
	free(b.s);
	return false;
}

/* Like torch.profiler's tables: "41.804ms", "14.000us". */
static void fmt_ns(char *buf, size_t size, int64_t ns)
{
	if (ns >= 1000000000)
		snprintf(buf, size, "%.3fs", ns / 1e9);
	else if (ns >= 1000000)
		snprintf(buf, size, "%.3fms", ns / 1e6);
	else if (ns >= 1000)
		snprintf(buf, size, "%.3fus", ns / 1e3);
	else
		snprintf(buf, size, "%" PRId64 "ns", ns);
}

static void fmt_bytes(char *buf, size_t size, int64_t bytes)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB" };
	double v = (double)bytes;
	int u = -1;

	if (bytes < 1024) {
		snprintf(buf, size, "%" PRId64 " B", bytes);
		return;
	}
	while (v >= 1024 && u < 3) {
		v /= 1024;
		u++;
	}
	snprintf(buf, size, "%.2f %s", v, units[u]);
}

static const char *keep_bytes(struct rbln_explain *e, int64_t bytes)
{
	char buf[32];

	fmt_bytes(buf, sizeof(buf), bytes);
	return keep(e, "%s", buf);
}

static void sb_repeat(struct sbuf *b, char ch, size_t n)
{
	char chunk[64];
	size_t k;

	memset(chunk, ch, sizeof(chunk));
	for (; n; n -= k) {
		k = n < sizeof(chunk) ? n : sizeof(chunk);
		sb_printf(b, "%.*s", (int)k, chunk);
	}
}

#define MAX_COLS 4

struct column {
	const char *head;
	bool right;		/* numbers align right */
};

static void sb_row(struct sbuf *b, const struct column *cols, int ncols, const size_t *w,
		   const char *const *cells)
{
	int c;

	for (c = 0; c < ncols; c++) {
		/* An empty last cell: no separator before it either. */
		if (c == ncols - 1 && !cols[c].right && !*cells[c])
			break;
		if (c)
			sb_printf(b, "  ");
		if (cols[c].right)
			sb_printf(b, "%*s", (int)w[c], cells[c]);
		else if (c == ncols - 1)
			sb_printf(b, "%s", cells[c]);	/* no trailing blanks */
		else
			sb_printf(b, "%-*s", (int)w[c], cells[c]);
	}
	sb_printf(b, "\n");
}

static void sb_rule(struct sbuf *b, int ncols, const size_t *w)
{
	int c;

	for (c = 0; c < ncols; c++) {
		if (c)
			sb_printf(b, "  ");
		sb_repeat(b, '-', w[c]);
	}
	sb_printf(b, "\n");
}

/*
 * A table like torch.profiler's key_averages().table(): dashes, the header,
 * dashes, the rows, dashes. @cells holds @nrows rows of @ncols strings; a
 * NULL one (out of memory making it) fails @b.
 */
static void sb_table(struct sbuf *b, const struct column *cols, int ncols,
		     const char *const *cells, size_t nrows)
{
	const char *head[MAX_COLS];
	size_t w[MAX_COLS], r;
	int c;

	for (c = 0; c < ncols; c++) {
		head[c] = cols[c].head;
		w[c] = strlen(head[c]);
		for (r = 0; r < nrows; r++) {
			if (!cells[r * ncols + c]) {
				b->failed = true;
				return;
			}
			if (strlen(cells[r * ncols + c]) > w[c])
				w[c] = strlen(cells[r * ncols + c]);
		}
	}
	sb_rule(b, ncols, w);
	sb_row(b, cols, ncols, w, head);
	sb_rule(b, ncols, w);
	for (r = 0; r < nrows; r++)
		sb_row(b, cols, ncols, w, &cells[r * ncols]);
	sb_rule(b, ncols, w);
}

static const char remedy_shapes[] = "stabilize input shapes so programs are reused";
static const char remedy_device[] = "use a device op, or keep the data on the device";

/* The detail block of recompiles or fallbacks: ops, and their callers with_stack. */
static void sb_op_detail(struct rbln_explain *e, struct sbuf *b, const char *signal, int64_t total,
			 const struct rbln_explain_op_count *ops, size_t nops)
{
	static const struct column cols[] = { { "Op", false }, { "Count", true } };
	size_t i, j, n = nops, r = 0;
	const char **cells;

	for (i = 0; i < nops; i++)
		n += ops[i].nsites;
	cells = calloc(n * 2, sizeof(*cells));
	if (!cells) {
		b->failed = true;
		return;
	}
	for (i = 0; i < nops; i++) {
		cells[r * 2] = ops[i].op;
		cells[r * 2 + 1] = keep(e, "%" PRId64, ops[i].count);
		r++;
		for (j = 0; j < ops[i].nsites; j++) {
			cells[r * 2] = keep(e, "  at %s", ops[i].sites[j].site);
			cells[r * 2 + 1] = keep(e, "%" PRId64, ops[i].sites[j].count);
			r++;
		}
	}
	sb_printf(b, "\n%s: %" PRId64 " in %zu %s\n", signal, total, nops,
		  plural((int64_t)nops, "op", "ops"));
	sb_table(b, cols, 2, cells, n);
	free(cells);
}

static void sb_bounce_detail(struct rbln_explain *e, struct sbuf *b)
{
	static const struct column cols[] = {
		{ "Site", false }, { "Count", true }, { "Bytes", true },
	};
	const struct rbln_explain_dump *d = &e->dump;
	char bytes[32];
	const char **cells;
	size_t i;

	cells = calloc(d->host_bounce.nsites * 3, sizeof(*cells));
	if (!cells) {
		b->failed = true;
		return;
	}
	for (i = 0; i < d->host_bounce.nsites; i++) {
		cells[i * 3] = d->host_bounce.by_site[i].site;
		cells[i * 3 + 1] = keep(e, "%" PRId64, d->host_bounce.by_site[i].count);
		cells[i * 3 + 2] = keep_bytes(e, d->host_bounce.by_site[i].bytes);
	}
	fmt_bytes(bytes, sizeof(bytes), d->host_bounce.bytes);
	sb_printf(b, "\nhost_bounce: %" PRId64 ", %s in %zu %s\n", d->host_bounce.count, bytes,
		  d->host_bounce.nsites, plural((int64_t)d->host_bounce.nsites, "site", "sites"));
	sb_table(b, cols, 3, cells, d->host_bounce.nsites);
	free(cells);
}

static bool build_report(struct rbln_explain *e)
{
	static const struct column cols[] = {
		{ "Signal", false }, { "Count", true }, { "Bytes", true }, { "Note", false },
	};
	const struct rbln_explain_dump *d = &e->dump;
	const char *graph_note = d->graph_replay.count ?
		keep(e, "%" PRId64 " captured %s replayed (not overhead)", d->graph_replay.ops,
		     plural(d->graph_replay.ops, "op", "ops")) : "";
	const struct {
		const char *signal;
		int64_t count, bytes;	/* bytes < 0: not a transfer */
		const char *note;	/* the remedy, when it fired */
	} rows[] = {
		{ "warm_hit", d->dispatch.warm_hit.count, -1, "cached programs reused (not overhead)" },
		{ "graph_replay", d->graph_replay.count, -1, graph_note },
		{ "recompile", d->dispatch.recompile.count, -1, remedy_shapes },
		{ "cpu_fallback", d->dispatch.cpu_fallback.count, -1, remedy_device },
		{ "host_bounce (device->host)", d->host_bounce.to_host_count,
		  d->host_bounce.to_host_bytes, remedy_device },
		{ "host_bounce (host->device)", d->host_bounce.to_device_count,
		  d->host_bounce.to_device_bytes, remedy_device },
	};
	const size_t nrows = sizeof(rows) / sizeof(rows[0]);
	const char *cells[sizeof(rows) / sizeof(rows[0])][4];
	char t[4][32], by[3][32];
	struct sbuf b = { 0 };
	size_t i;

	/* The seed's markers word for word ("1 signals" too): one pattern finds them. */
	if (e->verdict.clean)
		sb_printf(&b, "[clean]\n");
	else
		sb_printf(&b, "[overhead: %zu signals]\n", e->verdict.nreasons);
	for (i = 0; i < nrows; i++) {
		cells[i][0] = rows[i].signal;
		cells[i][1] = keep(e, "%" PRId64, rows[i].count);
		cells[i][2] = rows[i].bytes < 0 ? "-" : keep_bytes(e, rows[i].bytes);
		/* warm hits are no overhead: their note always shows; a remedy only when needed */
		cells[i][3] = i == 0 || rows[i].count ? rows[i].note : "";
	}
	sb_table(&b, cols, 4, &cells[0][0], nrows);

	fmt_ns(t[0], sizeof(t[0]), d->dispatch.total.ns);
	fmt_ns(t[1], sizeof(t[1]), d->dispatch.warm_hit.ns);
	fmt_ns(t[2], sizeof(t[2]), d->dispatch.recompile.ns);
	fmt_ns(t[3], sizeof(t[3]), d->dispatch.cpu_fallback.ns);
	sb_printf(&b, "Dispatch: %" PRId64 " %s in %s (warm_hit %s, recompile %s, cpu_fallback %s)\n",
		  d->dispatch.total.count, plural(d->dispatch.total.count, "op", "ops"),
		  t[0], t[1], t[2], t[3]);
	fmt_bytes(by[0], sizeof(by[0]), d->residency.device_bytes);
	fmt_bytes(by[1], sizeof(by[1]), d->residency.lazy_bytes);
	fmt_bytes(by[2], sizeof(by[2]), d->residency.offloaded_bytes);
	sb_printf(&b, "Residency: device %s, lazy %s, offloaded %s\n", by[0], by[1], by[2]);
	fmt_bytes(by[0], sizeof(by[0]), d->device_memory.current);
	fmt_bytes(by[1], sizeof(by[1]), d->device_memory.peak);
	sb_printf(&b, "Device memory: current %s, peak %s\n", by[0], by[1]);
	fmt_ns(t[0], sizeof(t[0]), d->wall_ns);
	sb_printf(&b, "Region wall time: %s\n", t[0]);
	if (d->unattributed)
		sb_printf(&b, "%" PRId64 " %s not broken down by op or site (out of memory while recording)\n",
			  d->unattributed, plural(d->unattributed, "event", "events"));

	if (d->dispatch.recompile.count)
		sb_op_detail(e, &b, "recompile", d->dispatch.recompile.count, d->recompiles_by_op,
			     d->nrecompile_ops);
	if (d->dispatch.cpu_fallback.count)
		sb_op_detail(e, &b, "cpu_fallback", d->dispatch.cpu_fallback.count,
			     d->fallbacks_by_op, d->nfallback_ops);
	if (d->host_bounce.count)
		sb_bounce_detail(e, &b);
	if (b.failed) {
		free(b.s);
		return false;
	}
	e->report = b.s;
	return true;
}

/* Everything an ended region shows, from what it recorded. */
static bool build_results(struct rbln_explain *e)
{
	struct rbln_explain_dump *d = &e->dump;
	struct rbln_residency res;
	long n;

	d->with_stack = e->with_stack;
	d->dispatch.warm_hit = e->warm;
	d->dispatch.recompile = e->recompile;
	d->dispatch.cpu_fallback = e->fallback;
	d->dispatch.total.count = e->warm.count + e->recompile.count + e->fallback.count;
	d->dispatch.total.ns = e->warm.ns + e->recompile.ns + e->fallback.ns;
	d->host_bounce.to_host_count = e->to_host_count;
	d->host_bounce.to_host_bytes = e->to_host_bytes;
	d->host_bounce.to_device_count = e->to_device_count;
	d->host_bounce.to_device_bytes = e->to_device_bytes;
	d->host_bounce.count = e->to_host_count + e->to_device_count;
	d->host_bounce.bytes = e->to_host_bytes + e->to_device_bytes;
	d->unattributed = e->unattributed;
	d->graph_replay.count = e->replays;
	d->graph_replay.ops = e->replay_ops;
	d->graph_replay.ns = e->replay_ns;

	rbln_residency_get(&res);
	d->residency.device_bytes = res.device_bytes;
	d->residency.lazy_bytes = res.lazy_bytes;
	d->residency.offloaded_bytes = res.offloaded_bytes;
	d->device_memory.current = res.device_memory_current;
	d->device_memory.peak = res.device_memory_peak;

	n = by_op(e, e->recompiles, e->nrecompiles, &e->rec_ops, &e->rec_sites);
	if (n < 0)
		return false;
	d->nrecompile_ops = (size_t)n;
	d->recompiles_by_op = e->rec_ops;
	n = by_op(e, e->fallbacks, e->nfallbacks, &e->fb_ops, &e->fb_sites);
	if (n < 0)
		return false;
	d->nfallback_ops = (size_t)n;
	d->fallbacks_by_op = e->fb_ops;
	if (!build_bounces(e))
		return false;
	d->host_bounce.nsites = e->nbounces;
	d->host_bounce.by_site = e->bounce_sites;
	return build_verdict(e) && build_report(e);
}

/* Under explain_lock: stops @e recording. */
static void close_locked(struct rbln_explain *e)
{
	e->dump.wall_ns = (int64_t)(rbln_explain_now() - e->start_ns);
	explain_current = NULL;
	atomic_store_explicit(&rbln_explain_open, false, memory_order_relaxed);
}

rbln_status rbln_explain_end(rbln_explain *e)
{
	bool ok;

	pthread_mutex_lock(&explain_lock);
	if (!e || !is_live(e)) {
		pthread_mutex_unlock(&explain_lock);
		return rbln_fail(RBLN_ERROR_INVALID, "rbln_explain_end: %s",
				 e ? "not an explain region (freed?)" : "NULL region");
	}
	if (e->state != REGION_OPEN) {
		pthread_mutex_unlock(&explain_lock);
		return rbln_fail(RBLN_ERROR_INVALID, "rbln_explain_end: the region has already ended");
	}
	close_locked(e);
	/* No hook touches @e now, and ENDING keeps readers out until it is built. */
	e->state = REGION_ENDING;
	pthread_mutex_unlock(&explain_lock);

	ok = build_results(e);
	pthread_mutex_lock(&explain_lock);
	e->state = ok ? REGION_ENDED : REGION_BROKEN;
	pthread_mutex_unlock(&explain_lock);
	if (!ok)
		return rbln_fail(RBLN_ERROR_OUT_OF_MEMORY,
				 "rbln_explain_end: out of host memory building the results (the region is closed)");
	return RBLN_OK;
}

/* Is @e an ended region with results? If not, says why as @fn. */
static rbln_status check_ended(const struct rbln_explain *e, const char *fn)
{
	enum region_state state;

	pthread_mutex_lock(&explain_lock);
	if (!e || !is_live(e)) {
		pthread_mutex_unlock(&explain_lock);
		return rbln_fail(RBLN_ERROR_INVALID, "%s: %s", fn,
				 e ? "not an explain region (freed?)" : "NULL region");
	}
	state = e->state;
	pthread_mutex_unlock(&explain_lock);
	switch (state) {
	case REGION_OPEN:
	case REGION_ENDING:
		return rbln_fail(RBLN_ERROR_INVALID, "%s: the region is still open (call rbln_explain_end first)",
				 fn);
	case REGION_BROKEN:
		return rbln_fail(RBLN_ERROR_INVALID, "%s: the region has no results (out of memory at its end)",
				 fn);
	case REGION_ENDED:
		break;
	}
	return RBLN_OK;
}

const char *rbln_explain_report(rbln_explain *e)
{
	if (check_ended(e, "rbln_explain_report"))
		return NULL;
	return e->report;
}

rbln_status rbln_explain_verdict(const rbln_explain *e, struct rbln_explain_verdict *out)
{
	rbln_status st;

	if (!out)
		return rbln_fail(RBLN_ERROR_INVALID, "rbln_explain_verdict: NULL output");
	st = check_ended(e, "rbln_explain_verdict");
	if (st)
		return st;
	*out = e->verdict;
	return RBLN_OK;
}

rbln_status rbln_explain_dump(const rbln_explain *e, struct rbln_explain_dump *out)
{
	rbln_status st;

	if (!out)
		return rbln_fail(RBLN_ERROR_INVALID, "rbln_explain_dump: NULL output");
	st = check_ended(e, "rbln_explain_dump");
	if (st)
		return st;
	*out = e->dump;
	return RBLN_OK;
}

/* --- JSON ------------------------------------------------------------------------- */

static struct json_object *jcounter(const struct rbln_explain_counter *c)
{
	struct json_object *o = json_object_new_object();

	if (o && rbln_json_add(o, "count", json_object_new_int64(c->count)) &&
	    rbln_json_add(o, "ns", json_object_new_int64(c->ns)))
		return o;
	json_object_put(o);
	return NULL;
}

static struct json_object *jops(const struct rbln_explain_op_count *ops, size_t n)
{
	struct json_object *a = json_object_new_array(), *o, *sites, *s;
	size_t i, j;

	if (!a)
		return NULL;
	for (i = 0; i < n; i++) {
		o = json_object_new_object();
		if (!rbln_json_push(a, o))
			goto fail;
		if (!rbln_json_add(o, "op", json_object_new_string(ops[i].op)) ||
		    !rbln_json_add(o, "count", json_object_new_int64(ops[i].count)))
			goto fail;
		sites = json_object_new_array();
		if (!rbln_json_add(o, "sites", sites))
			goto fail;
		for (j = 0; j < ops[i].nsites; j++) {
			s = json_object_new_object();
			if (!rbln_json_push(sites, s))
				goto fail;
			if (!rbln_json_add(s, "site", json_object_new_string(ops[i].sites[j].site)) ||
			    !rbln_json_add(s, "count", json_object_new_int64(ops[i].sites[j].count)))
				goto fail;
		}
	}
	return a;
fail:
	json_object_put(a);
	return NULL;
}

static struct json_object *jbounces(const struct rbln_explain_dump *d)
{
	struct json_object *o = json_object_new_object(), *a, *s;
	const struct rbln_explain_bounce_site *b;
	size_t i;

	if (!o || !rbln_json_add(o, "count", json_object_new_int64(d->host_bounce.count)) ||
	    !rbln_json_add(o, "bytes", json_object_new_int64(d->host_bounce.bytes)) ||
	    !rbln_json_add(o, "to_host_count", json_object_new_int64(d->host_bounce.to_host_count)) ||
	    !rbln_json_add(o, "to_host_bytes", json_object_new_int64(d->host_bounce.to_host_bytes)) ||
	    !rbln_json_add(o, "to_device_count", json_object_new_int64(d->host_bounce.to_device_count)) ||
	    !rbln_json_add(o, "to_device_bytes", json_object_new_int64(d->host_bounce.to_device_bytes)))
		goto fail;
	a = json_object_new_array();
	if (!rbln_json_add(o, "by_site", a))
		goto fail;
	for (i = 0; i < d->host_bounce.nsites; i++) {
		b = &d->host_bounce.by_site[i];
		s = json_object_new_object();
		if (!rbln_json_push(a, s))
			goto fail;
		if (!rbln_json_add(s, "site", json_object_new_string(b->site)) ||
		    !rbln_json_add(s, "op", json_object_new_string(b->op)) ||
		    !rbln_json_add(s, "direction", json_object_new_string(dir_name(b->to_host))) ||
		    (b->caller ? !rbln_json_add(s, "caller", json_object_new_string(b->caller)) :
				 json_object_object_add(s, "caller", NULL) != 0) ||
		    !rbln_json_add(s, "count", json_object_new_int64(b->count)) ||
		    !rbln_json_add(s, "bytes", json_object_new_int64(b->bytes)))
			goto fail;
	}
	return o;
fail:
	json_object_put(o);
	return NULL;
}

char *rbln_explain_dump_json(const rbln_explain *e)
{
	struct json_object *root, *o, *reasons;
	const struct rbln_explain_dump *d;
	const char *text;
	char *out = NULL;
	size_t i;

	if (check_ended(e, "rbln_explain_dump_json"))
		return NULL;
	d = &e->dump;
	root = json_object_new_object();
	if (!root || !rbln_json_add(root, "clean", json_object_new_boolean(e->verdict.clean)) ||
	    !rbln_json_add(root, "signals", json_object_new_int64((int64_t)e->verdict.nreasons)))
		goto fail;
	reasons = json_object_new_array();
	if (!rbln_json_add(root, "reasons", reasons))
		goto fail;
	for (i = 0; i < e->verdict.nreasons; i++)
		if (!rbln_json_push(reasons, json_object_new_string(e->verdict.reasons[i])))
			goto fail;
	if (!rbln_json_add(root, "with_stack", json_object_new_boolean(d->with_stack)) ||
	    !rbln_json_add(root, "wall_ns", json_object_new_int64(d->wall_ns)))
		goto fail;
	o = json_object_new_object();
	if (!rbln_json_add(root, "dispatch", o) ||
	    !rbln_json_add(o, "total", jcounter(&d->dispatch.total)) ||
	    !rbln_json_add(o, "warm_hit", jcounter(&d->dispatch.warm_hit)) ||
	    !rbln_json_add(o, "recompile", jcounter(&d->dispatch.recompile)) ||
	    !rbln_json_add(o, "cpu_fallback", jcounter(&d->dispatch.cpu_fallback)) ||
	    !rbln_json_add(root, "recompiles_by_op", jops(d->recompiles_by_op, d->nrecompile_ops)) ||
	    !rbln_json_add(root, "fallbacks_by_op", jops(d->fallbacks_by_op, d->nfallback_ops)) ||
	    !rbln_json_add(root, "host_bounce", jbounces(d)))
		goto fail;
	o = json_object_new_object();
	if (!rbln_json_add(root, "residency", o) ||
	    !rbln_json_add(o, "device_bytes", json_object_new_int64(d->residency.device_bytes)) ||
	    !rbln_json_add(o, "lazy_bytes", json_object_new_int64(d->residency.lazy_bytes)) ||
	    !rbln_json_add(o, "offloaded_bytes", json_object_new_int64(d->residency.offloaded_bytes)))
		goto fail;
	o = json_object_new_object();
	if (!rbln_json_add(root, "device_memory", o) ||
	    !rbln_json_add(o, "current", json_object_new_int64(d->device_memory.current)) ||
	    !rbln_json_add(o, "peak", json_object_new_int64(d->device_memory.peak)) ||
	    !rbln_json_add(root, "unattributed", json_object_new_int64(d->unattributed)))
		goto fail;
	o = json_object_new_object();
	if (!rbln_json_add(root, "graph_replay", o) ||
	    !rbln_json_add(o, "count", json_object_new_int64(d->graph_replay.count)) ||
	    !rbln_json_add(o, "ops", json_object_new_int64(d->graph_replay.ops)) ||
	    !rbln_json_add(o, "ns", json_object_new_int64(d->graph_replay.ns)))
		goto fail;
	text = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY |
					      JSON_C_TO_STRING_NOSLASHESCAPE);
	if (text)
		out = strdup(text);
fail:
	json_object_put(root);
	if (!out)
		rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "rbln_explain_dump_json: out of host memory");
	return out;
}

void rbln_explain_free(rbln_explain *e)
{
	size_t i;

	if (!e)
		return;
	pthread_mutex_lock(&explain_lock);
	if (!is_live(e)) {
		pthread_mutex_unlock(&explain_lock);
		rbln_fail(RBLN_ERROR_INVALID, "rbln_explain_free: not an explain region (freed twice?)");
		return;
	}
	if (e->state == REGION_ENDING) {
		/* Freeing it under rbln_explain_end() would crash that thread: leave it. */
		pthread_mutex_unlock(&explain_lock);
		rbln_fail(RBLN_ERROR_BUSY, "rbln_explain_free: another thread is ending the region");
		return;
	}
	if (e->state == REGION_OPEN)
		close_locked(e);
	if (e->prev)
		e->prev->next = e->next;
	else
		explain_handles = e->next;
	if (e->next)
		e->next->prev = e->prev;
	pthread_mutex_unlock(&explain_lock);

	free(e->recompiles);
	free(e->fallbacks);
	free(e->bounces);
	free(e->report);
	free(e->rec_ops);
	free(e->fb_ops);
	free(e->rec_sites);
	free(e->fb_sites);
	free(e->bounce_sites);
	for (i = 0; i < e->nstrings; i++)
		free(e->strings[i]);
	free(e->strings);
	free(e);
}

/* torch.rbln.profile and RBLNProfile: the same code under the older names. */
#define RBLN_ALIAS(name) __attribute__((alias(#name)))
rbln_profile *rbln_profile_begin(bool with_stack) RBLN_ALIAS(rbln_explain_begin);
rbln_status rbln_profile_end(rbln_profile *p) RBLN_ALIAS(rbln_explain_end);
const char *rbln_profile_report(rbln_profile *p) RBLN_ALIAS(rbln_explain_report);
rbln_status rbln_profile_verdict(const rbln_profile *p, struct rbln_explain_verdict *out)
	RBLN_ALIAS(rbln_explain_verdict);
rbln_status rbln_profile_dump(const rbln_profile *p, struct rbln_explain_dump *out)
	RBLN_ALIAS(rbln_explain_dump);
char *rbln_profile_dump_json(const rbln_profile *p) RBLN_ALIAS(rbln_explain_dump_json);
void rbln_profile_free(rbln_profile *p) RBLN_ALIAS(rbln_explain_free);
