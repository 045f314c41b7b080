// SPDX-License-Identifier: MIT
/*
 * rbln_graph.c - graphs: a thread's device ops captured once, replayed as
 * one job per member
 *
 * While a thread captures, op dispatch writes each op's commands into the
 * graph instead of the device's ring (rbln_graph_record()) and the graph
 * takes a reference to every tensor the op touches (rbln_graph_hold()), so
 * their device memory, and with it every address the commands name, stays
 * where it is while the graph lives: that memory is the graph's private
 * pool. capture_end copies each member's commands into a host buffer
 * object of that member and cuts them, at op boundaries, into jobs of at
 * most the device's command-buffer size; a replay submits those jobs as
 * they are, one ioctl each, and writes no command.
 *
 * The members of a logical device replay on their own queues. An op whose
 * members read each other's memory (a gather) puts barriers around its
 * copies (rbln_graph_barrier()): they cut the graph into phases, and the
 * first job of a phase on a member waits, through sync_files imported into
 * syncobjs of the graph, for the newest job of every other member, so it
 * runs after their earlier phases (and whatever was queued before the
 * replay). A member with nothing to do in a phase gets a NOP job there, so
 * its later work is ordered too.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xf86drm.h>

#include "rbln_explain.h"
#include "rbln_internal.h"

/* One op's commands on one member, while capturing. */
struct graph_op {
	uint32_t off, len;	/* in the member's code */
	uint32_t bo0, nbos;	/* its objects, in the member's bos */
	uint32_t phase;
};

/* A job of a replay: commands in the member's command buffer, the objects it uses. */
struct graph_job {
	uint64_t va;
	uint32_t len;
	uint32_t nbos;
	uint32_t *bos;		/* the command buffer's last */
	uint32_t phase;
};

/* Memory or an object the graph keeps for its member @dev. */
struct graph_keep {
	struct rbln_dev *dev;
	struct rbln_block *block;	/* NULL: a peer object */
	uint32_t peer;
};

struct graph_member {
	struct rbln_dev *dev;
	/* capture */
	char *code;
	size_t code_len, code_cap;
	struct graph_op *ops;
	size_t nops, cap_ops;
	uint32_t *bos;
	size_t nbos, cap_bos;
	/* once captured */
	struct rbln_host_buf *cmd;
	struct graph_job *jobs;
	size_t njobs, cap_jobs;
	uint32_t barrier[RBLN_MAX_MEMBERS];	/* syncobjs: waits for member i */
	uint64_t last_point;	/* of the newest replay (atomic) */
};

struct rbln_graph {
	struct rbln_graph *prev, *next;	/* live graphs, under graphs_lock */
	unsigned int busy;		/* replays running, under graphs_lock */
	bool freed;			/* the last replay running destroys it */
	int device;
	int nmembers;
	struct graph_member members[RBLN_MAX_MEMBERS];
	rbln_tensor **held;
	size_t nheld, cap_held;
	struct graph_keep *kept;
	size_t nkept, cap_kept;
	uint64_t id;			/* of the capture */
	struct graph_keep *pool;	/* capture: blocks of freed tensors, to reuse */
	size_t npool, cap_pool;
	int64_t nops;
	uint32_t phase, nphases;	/* capture: the phase recording; then how many */
	bool phase_used;		/* an op was recorded in it */
	/* capture: the first thing that invalidated it */
	rbln_status invalid;
	char why[200];
};

/* The calling thread's capture; the key frees it if the thread exits first. */
static _Thread_local struct rbln_graph *capturing;
static pthread_key_t capture_key;
static pthread_once_t capture_once = PTHREAD_ONCE_INIT;

static uint64_t capture_ids;
static pthread_mutex_t graphs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rbln_graph *graphs;

static struct graph_member *member_of(struct rbln_graph *g, const struct rbln_dev *d)
{
	int i;

	for (i = 0; i < g->nmembers; i++)
		if (g->members[i].dev == d)
			return &g->members[i];
	return NULL;
}

/* Drops everything @g holds: its jobs complete before their buffers and tensors go. */
static void graph_destroy(struct rbln_graph *g)
{
	struct graph_member *m;
	size_t i;
	int j;

	for (i = 0; i < g->nheld; i++) {
		rbln_tensor *t = g->held[i];

		for (j = 0; j < t->nshards; j++) {
			m = member_of(g, t->shards[j].dev);
			if (m)
				rbln_shard_used(&t->shards[j],
						__atomic_load_n(&m->last_point, __ATOMIC_ACQUIRE));
		}
		rbln_tensor_put(t);
	}
	for (i = 0; i < g->npool; i++) {
		m = member_of(g, g->pool[i].dev);
		rbln_allocator_free(g->pool[i].dev->alloc, g->pool[i].block,
				    __atomic_load_n(&m->last_point, __ATOMIC_ACQUIRE), 0);
	}
	for (i = 0; i < g->nkept; i++) {
		struct graph_keep *k = &g->kept[i];

		m = member_of(g, k->dev);
		if (k->block)
			rbln_allocator_free(k->dev->alloc, k->block,
					    __atomic_load_n(&m->last_point, __ATOMIC_ACQUIRE), 0);
		else
			rbln_peer_put(k->dev, k->peer);
	}
	for (j = 0; j < g->nmembers; j++) {
		int b;

		m = &g->members[j];
		for (b = 0; b < g->nmembers; b++)
			if (m->barrier[b])
				drmSyncobjDestroy(rbln_drm_fd(m->dev->drm), m->barrier[b]);
		if (m->cmd) {
			pthread_mutex_lock(&m->dev->lock);
			rbln_host_buf_release(m->dev, m->cmd, m->last_point);
			pthread_mutex_unlock(&m->dev->lock);
		}
		for (i = 0; i < m->njobs; i++)
			free(m->jobs[i].bos);
		free(m->jobs);
		free(m->code);
		free(m->ops);
		free(m->bos);
	}
	free(g->held);
	free(g->kept);
	free(g->pool);
	free(g);
}

static void capture_abandoned(void *g)
{
	graph_destroy(g);
}

static void capture_key_create(void)
{
	pthread_key_create(&capture_key, capture_abandoned);
}

struct rbln_graph *rbln_capture_of(int device)
{
	struct rbln_graph *g = capturing;

	return g && device == g->device ? g : NULL;
}

int rbln_graph_capturing(void)
{
	return capturing ? capturing->device : -1;
}

/* Invalidates @g for @what, once: the first cause is the one reported. */
static void invalidate(struct rbln_graph *g, rbln_status st, const char *what)
{
	if (g->invalid)
		return;
	g->invalid = st;
	snprintf(g->why, sizeof(g->why), "%s", what);
}

rbln_status rbln_capture_refuse(int device, struct rbln_dev *d, const char *what)
{
	struct rbln_graph *g = capturing;
	struct rbln_ldev *l;
	bool hit = false;
	int i;

	if (!g)
		return RBLN_OK;
	if (d) {
		hit = member_of(g, d);
	} else {
		l = rbln_ldev_get(device);
		for (i = 0; l && i < l->nmembers && !hit; i++)
			hit = member_of(g, l->members[i]);
	}
	if (!hit)
		return RBLN_OK;
	invalidate(g, RBLN_ERROR_CAPTURE, what);
	return rbln_fail(RBLN_ERROR_CAPTURE,
			 "%s: not allowed while capturing a graph on rbln:%d (the capture is invalidated)",
			 what, g->device);
}

void rbln_capture_failed(struct rbln_graph *g, rbln_status st)
{
	invalidate(g, st, rbln_last_error());
}

rbln_status rbln_capture_valid(struct rbln_graph *g, const char *op)
{
	if (!g->invalid)
		return RBLN_OK;
	return rbln_fail(RBLN_ERROR_CAPTURE, "%s: the graph capture on rbln:%d was invalidated by %s",
			 op, g->device, g->why);
}

rbln_status rbln_graph_record(struct rbln_graph *g, struct rbln_dev *d, uint32_t len,
			      const uint32_t *bos, uint32_t n, void **cpu)
{
	struct graph_member *m = member_of(g, d);
	struct graph_op *op;

	if (!m)
		return rbln_fail(RBLN_ERROR_INVALID, "internal: an op on a device the graph lacks");
	if (len > d->max_cmd)
		return rbln_fail(RBLN_ERROR_UNSUPPORTED, "a %u-byte command buffer (at most %u)", len,
				 d->max_cmd);
	if (m->code_len + len > UINT32_MAX ||
	    !rbln_grow((void **)&m->code, &m->code_cap, m->code_len + len, 1) ||
	    !rbln_grow((void **)&m->ops, &m->cap_ops, m->nops + 1, sizeof(*m->ops)) ||
	    !rbln_grow((void **)&m->bos, &m->cap_bos, m->nbos + n, sizeof(*m->bos)))
		return rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "capturing a graph: out of host memory");
	op = &m->ops[m->nops++];
	op->off = m->code_len;
	op->len = len;
	op->bo0 = m->nbos;
	op->nbos = n;
	op->phase = g->phase;
	g->phase_used = true;
	memcpy(m->bos + m->nbos, bos, n * sizeof(*bos));
	m->nbos += n;
	*cpu = m->code + m->code_len;
	m->code_len += len;
	return RBLN_OK;
}

rbln_status rbln_graph_hold(struct rbln_graph *g, rbln_tensor *t)
{
	size_t i;

	if (!t)
		return RBLN_OK;
	/* Newest first: an op's operands are mostly the ops just before it. */
	for (i = g->nheld; i-- > 0;)
		if (g->held[i] == t)
			return RBLN_OK;
	if (!rbln_grow((void **)&g->held, &g->cap_held, g->nheld + 1, sizeof(*g->held)))
		return rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "capturing a graph: out of host memory");
	rbln_tensor_get(t);
	g->held[g->nheld++] = t;
	return RBLN_OK;
}

void rbln_graph_count_op(struct rbln_graph *g)
{
	g->nops++;
}

uint64_t rbln_graph_capture_id(const struct rbln_graph *g)
{
	return g->id;
}

void rbln_graph_recycle(struct rbln_graph *g, rbln_tensor *t)
{
	int i;

	for (i = 0; i < t->nshards; i++) {
		struct rbln_shard *s = &t->shards[i];

		if (!s->block)
			continue;
		/* Out of memory, the block stays with the tensor: kept, not reused. */
		if (!rbln_grow((void **)&g->pool, &g->cap_pool, g->npool + 1, sizeof(*g->pool)))
			return;
		g->pool[g->npool++] = (struct graph_keep){ .dev = s->dev, .block = s->block };
		s->block = NULL;
		pthread_mutex_lock(&s->dev->lock);
		s->dev->device_bytes -= s->nbytes;
		pthread_mutex_unlock(&s->dev->lock);
	}
}

void rbln_graph_reuse(struct rbln_graph *g, rbln_tensor *t)
{
	size_t j, best;
	int i;

	for (i = 0; i < t->nshards; i++) {
		struct rbln_shard *s = &t->shards[i];

		/* The smallest that fits, and no more than twice the size. */
		best = g->npool;
		for (j = 0; j < g->npool && s->nbytes; j++) {
			uint64_t size = rbln_block_size(g->pool[j].block);

			if (g->pool[j].dev == s->dev && size >= s->nbytes && size <= 2 * s->nbytes &&
			    (best == g->npool || size < rbln_block_size(g->pool[best].block)))
				best = j;
		}
		if (best == g->npool)
			continue;
		s->block = g->pool[best].block;
		g->pool[best] = g->pool[--g->npool];
	}
}

rbln_status rbln_graph_barrier(struct rbln_graph *g)
{
	/* Phase 0 starts without one: the first barrier orders work before the replay too. */
	if (!g->phase || g->phase_used) {
		g->phase++;
		g->phase_used = false;
	}
	return RBLN_OK;
}

static rbln_status keep(struct rbln_graph *g, struct graph_keep k)
{
	if (!rbln_grow((void **)&g->kept, &g->cap_kept, g->nkept + 1, sizeof(*g->kept)))
		return rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "capturing a graph: out of host memory");
	g->kept[g->nkept++] = k;
	return RBLN_OK;
}

rbln_status rbln_graph_keep_shards(struct rbln_graph *g, struct rbln_shard *r, int n)
{
	int i;

	if (!rbln_grow((void **)&g->kept, &g->cap_kept, g->nkept + n, sizeof(*g->kept)))
		return rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "capturing a graph: out of host memory");
	for (i = 0; i < n; i++)
		if (r[i].block)
			keep(g, (struct graph_keep){ .dev = r[i].dev, .block = r[i].block });
	return RBLN_OK;
}

rbln_status rbln_graph_keep_peer(struct rbln_graph *g, struct rbln_dev *d, uint32_t handle)
{
	rbln_status st = keep(g, (struct graph_keep){ .dev = d, .peer = handle });

	if (st)
		rbln_peer_put(d, handle);
	return st;
}

rbln_status rbln_graph_capture_begin(int device)
{
	struct rbln_graph *g;
	struct rbln_ldev *l;
	int i;

	if (capturing)
		return rbln_fail(RBLN_ERROR_BUSY,
				 "rbln_graph_capture_begin: this thread captures on rbln:%d already",
				 capturing->device);
	l = rbln_ldev_get(device);
	if (!l)
		return rbln_last_status();
	pthread_once(&capture_once, capture_key_create);
	g = calloc(1, sizeof(*g));
	if (!g)
		return rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "rbln_graph_capture_begin: out of host memory");
	g->id = __atomic_add_fetch(&capture_ids, 1, __ATOMIC_RELAXED);
	g->device = l->index;
	g->nmembers = l->nmembers;
	for (i = 0; i < l->nmembers; i++)
		g->members[i].dev = l->members[i];
	capturing = g;
	pthread_setspecific(capture_key, g);
	return RBLN_OK;
}

/* A new job of @m in @phase starting at byte @off of its commands; NULL when out of memory. */
static struct graph_job *new_job(struct graph_member *m, uint32_t phase, uint32_t off)
{
	struct graph_job *job;

	if (!rbln_grow((void **)&m->jobs, &m->cap_jobs, m->njobs + 1, sizeof(*m->jobs)))
		return NULL;
	job = &m->jobs[m->njobs];
	memset(job, 0, sizeof(*job));
	/* Its objects: those of its ops, each once, then the command buffer. */
	job->bos = malloc((m->nbos + 1) * sizeof(*job->bos));
	if (!job->bos)
		return NULL;
	job->va = m->cmd->va + off;
	job->phase = phase;
	m->njobs++;
	return job;
}

/*
 * Puts @m's commands in a buffer object of its device, a NOP after them,
 * and cuts them into jobs: at phase boundaries, and where the device's
 * command buffers end. A phase after the first without an op of @m gets
 * the NOP as its job.
 */
static rbln_status build_jobs(struct graph_member *m, uint32_t nphases)
{
	struct rbln_dev *d = m->dev;
	struct graph_job *job;
	struct rbln_drm_cmd c;
	size_t i = 0, j, k;
	rbln_status st;
	uint32_t h, p;

	st = rbln_host_buf_new(d, m->code_len + sizeof(struct rbln_pkt_nop), &m->cmd);
	if (st)
		return st;
	memcpy(m->cmd->cpu, m->code, m->code_len);
	rbln_drm_cmd_init(&c, (char *)m->cmd->cpu + m->code_len, sizeof(struct rbln_pkt_nop));
	rbln_drm_cmd_nop(&c);
	for (p = 0; p < nphases; p++) {
		if (p && (i == m->nops || m->ops[i].phase != p)) {
			job = new_job(m, p, m->code_len);
			if (!job)
				goto oom;
			job->len = sizeof(struct rbln_pkt_nop);
			job->bos[job->nbos++] = m->cmd->handle;
			continue;
		}
		while (i < m->nops && m->ops[i].phase == p) {
			job = new_job(m, p, m->ops[i].off);
			if (!job)
				goto oom;
			for (; i < m->nops && m->ops[i].phase == p &&
			       job->len + m->ops[i].len <= d->max_cmd; i++) {
				job->len += m->ops[i].len;
				for (j = 0; j < m->ops[i].nbos; j++) {
					h = m->bos[m->ops[i].bo0 + j];
					for (k = 0; k < job->nbos && job->bos[k] != h; k++)
						;
					if (k == job->nbos)
						job->bos[job->nbos++] = h;
				}
			}
			job->bos[job->nbos++] = m->cmd->handle;
		}
	}
	return RBLN_OK;
oom:
	return rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "capturing a graph: out of host memory");
}

/* The syncobjs member @i of @g waits with, one per other member. */
static rbln_status make_barriers(struct rbln_graph *g, int i)
{
	struct graph_member *m = &g->members[i];
	int j;

	for (j = 0; j < g->nmembers; j++)
		if (j != i && drmSyncobjCreate(rbln_drm_fd(m->dev->drm), 0, &m->barrier[j]))
			return rbln_fail(RBLN_ERROR_DEVICE, "capturing a graph: cannot create a syncobj: %s",
					 strerror(errno));
	return RBLN_OK;
}

rbln_status rbln_graph_capture_end(rbln_graph **graph)
{
	struct rbln_graph *g = capturing;
	struct graph_member *m;
	rbln_status st = RBLN_OK;
	int i;

	if (!graph)
		return rbln_fail(RBLN_ERROR_INVALID, "rbln_graph_capture_end: NULL graph");
	*graph = NULL;
	if (!g)
		return rbln_fail(RBLN_ERROR_INVALID,
				 "rbln_graph_capture_end: this thread is not capturing a graph");
	capturing = NULL;
	pthread_setspecific(capture_key, NULL);
	if (g->invalid) {
		st = rbln_fail(g->invalid, "rbln_graph_capture_end: the capture on rbln:%d was invalidated by %s",
			       g->device, g->why);
		graph_destroy(g);
		return st;
	}
	g->nphases = g->phase + 1;
	for (i = 0; i < g->nmembers && !st; i++) {
		m = &g->members[i];
		if (m->nops || g->nphases > 1)
			st = build_jobs(m, g->nphases);
		if (!st && g->nphases > 1)
			st = make_barriers(g, i);
		free(m->code);
		free(m->ops);
		free(m->bos);
		m->code = NULL;
		m->ops = NULL;
		m->bos = NULL;
	}
	if (st) {
		graph_destroy(g);
		return st;
	}
	pthread_mutex_lock(&graphs_lock);
	g->next = graphs;
	if (graphs)
		graphs->prev = g;
	graphs = g;
	pthread_mutex_unlock(&graphs_lock);
	*graph = g;
	return RBLN_OK;
}

/* Under graphs_lock: is @g a graph capture_end gave out and free has not taken back? */
static bool is_live(const struct rbln_graph *g)
{
	const struct rbln_graph *h;

	for (h = graphs; h; h = h->next)
		if (h == g)
			return true;
	return false;
}

int64_t rbln_graph_ops(const rbln_graph *graph)
{
	int64_t n;

	pthread_mutex_lock(&graphs_lock);
	n = graph && is_live(graph) ? graph->nops : -1;
	pthread_mutex_unlock(&graphs_lock);
	if (n < 0)
		return rbln_fail(RBLN_ERROR_INVALID, "rbln_graph_ops: not a live graph");
	return n;
}

static void note_point(struct graph_member *m, uint64_t point)
{
	uint64_t seen = __atomic_load_n(&m->last_point, __ATOMIC_RELAXED);

	while (seen < point &&
	       !__atomic_compare_exchange_n(&m->last_point, &seen, point, true, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED))
		;
}

/*
 * Submits member @i's jobs of phase @p; after phase 0 the first waits for
 * the newest job of every other member.
 */
static rbln_status replay_phase(struct rbln_graph *g, int i, uint32_t p, size_t *next)
{
	struct drm_rbln_sync waits[RBLN_MAX_MEMBERS];
	int fds[RBLN_MAX_MEMBERS], j, fd = rbln_drm_fd(g->members[i].dev->drm);
	struct graph_member *m = &g->members[i];
	uint32_t nwaits = 0;
	rbln_status st = RBLN_OK;
	uint64_t point;

	for (j = 0; j < g->nmembers; j++) {
		fds[j] = -1;
		if (p && j != i && !st)
			st = rbln_last_job_fence(g->members[j].dev, &fds[j]);
	}
	/* Under the member's lock: a concurrent replay of the graph imports into the same syncobjs. */
	pthread_mutex_lock(&m->dev->lock);
	for (j = 0; j < g->nmembers && !st; j++) {
		if (fds[j] < 0)
			continue;
		if (drmSyncobjImportSyncFile(fd, m->barrier[j], fds[j]))
			st = rbln_fail(RBLN_ERROR_DEVICE, "cannot import a fence: %s", strerror(errno));
		waits[nwaits++] = (struct drm_rbln_sync){ .handle = m->barrier[j] };
	}
	for (; *next < m->njobs && m->jobs[*next].phase == p && !st; ++*next) {
		st = rbln_submit_locked(m->dev, m->jobs[*next].va, m->jobs[*next].len,
					m->jobs[*next].bos, m->jobs[*next].nbos, waits, nwaits,
					&point);
		nwaits = 0;
		if (!st)
			note_point(m, point);
	}
	pthread_mutex_unlock(&m->dev->lock);
	for (j = 0; j < g->nmembers; j++)
		if (fds[j] >= 0)
			close(fds[j]);
	return st;
}

rbln_status rbln_graph_replay(rbln_graph *g)
{
	bool active = rbln_explain_active(), destroy;
	uint64_t start = active ? rbln_explain_now() : 0;
	size_t next[RBLN_MAX_MEMBERS] = { 0 };
	rbln_status st = RBLN_OK;
	uint32_t p;
	int i;

	pthread_mutex_lock(&graphs_lock);
	if (!g || !is_live(g)) {
		pthread_mutex_unlock(&graphs_lock);
		return rbln_fail(RBLN_ERROR_INVALID, "rbln_graph_replay: not a live graph");
	}
	g->busy++;
	pthread_mutex_unlock(&graphs_lock);

	st = rbln_capture_refuse(g->device, NULL, "rbln_graph_replay");
	for (p = 0; p < g->nphases && !st; p++)
		for (i = 0; i < g->nmembers && !st; i++)
			if (next[i] < g->members[i].njobs)
				st = replay_phase(g, i, p, &next[i]);
	if (!st && active)
		rbln_explain_graph_replay(g->nops, rbln_explain_now() - start);

	pthread_mutex_lock(&graphs_lock);
	destroy = !--g->busy && g->freed;
	pthread_mutex_unlock(&graphs_lock);
	if (destroy)
		graph_destroy(g);
	return st;
}

void rbln_graph_free(rbln_graph *g)
{
	bool destroy;

	if (!g)
		return;
	pthread_mutex_lock(&graphs_lock);
	if (!is_live(g)) {
		pthread_mutex_unlock(&graphs_lock);
		rbln_fail(RBLN_ERROR_INVALID, "rbln_graph_free: not a live graph (freed already?)");
		return;
	}
	if (g->prev)
		g->prev->next = g->next;
	else
		graphs = g->next;
	if (g->next)
		g->next->prev = g->prev;
	g->freed = true;
	destroy = !g->busy;
	pthread_mutex_unlock(&graphs_lock);
	if (destroy)
		graph_destroy(g);
}
