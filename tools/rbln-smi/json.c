// SPDX-License-Identifier: GPL-2.0-only
/*
 * json.c - rbln-smi --json: one document per snapshot, as described by
 * docs/rbln-smi-schema.json (schema_version 3)
 *
 * Sizes are bytes and times nanoseconds, as exact integers; a value that
 * could not be read is null.
 */

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "smi.h"

#define SMI_SCHEMA_VERSION	3

/* Builds a tree, remembering whether any allocation failed. */
struct builder {
	bool failed;
};

/* Adds @val (NULL for a JSON null when @null_ok) to @obj under @key. */
static void put_value(struct builder *b, json_object *obj, const char *key, json_object *val,
		      bool null_ok)
{
	if (!obj || (!val && !null_ok)) {
		b->failed = true;
		json_object_put(val);
		return;
	}
	if (json_object_object_add(obj, key, val)) {
		b->failed = true;
		json_object_put(val);
	}
}

static void put(struct builder *b, json_object *obj, const char *key, json_object *val)
{
	put_value(b, obj, key, val, false);
}

static void put_u64(struct builder *b, json_object *obj, const char *key, uint64_t v)
{
	put_value(b, obj, key, v == SMI_UNKNOWN ? NULL : json_object_new_uint64(v),
		  v == SMI_UNKNOWN);
}

static void put_string(struct builder *b, json_object *obj, const char *key, const char *s)
{
	put(b, obj, key, json_object_new_string(s));
}

static void append(struct builder *b, json_object *array, json_object *val)
{
	if (!array || !val || json_object_array_add(array, val)) {
		b->failed = true;
		json_object_put(val);
	}
}

static json_object *region(struct builder *b, const struct smi_region *r)
{
	json_object *o = json_object_new_object();

	put_u64(b, o, "total", r->total);
	put_u64(b, o, "shared", r->shared);
	put_u64(b, o, "active", r->active);
	put_u64(b, o, "resident", r->resident);
	return o;
}

static json_object *device(struct builder *b, const struct smi_device *d)
{
	json_object *o = json_object_new_object(), *mem, *util, *ctx;
	char pct[16];

	put(b, o, "index", json_object_new_uint64(d->index));
	put(b, o, "minor", json_object_new_uint64(d->minor));
	put_string(b, o, "node", d->node);
	put_string(b, o, "name", smi_device_name(d));
	put_string(b, o, "bus", smi_device_bus(d));
	put_string(b, o, "bus_id", d->bus_id);
	put_string(b, o, "subsystem", d->subsystem);
	put(b, o, "emulated", json_object_new_boolean(d->emulated));

	mem = json_object_new_object();
	put_u64(b, mem, "total", d->mem_total);
	put_u64(b, mem, "used", d->mem_used);
	put_u64(b, mem, "free", d->mem_total == SMI_UNKNOWN || d->mem_used == SMI_UNKNOWN ||
		d->mem_used > d->mem_total ? SMI_UNKNOWN : d->mem_total - d->mem_used);
	put(b, o, "memory", mem);

	util = json_object_new_object();
	if (d->utilization >= 0) {
		snprintf(pct, sizeof(pct), "%.1f", d->utilization);
		put(b, util, "percent", json_object_new_double_s(d->utilization, pct));
	} else {
		put_value(b, util, "percent", NULL, true);
	}
	put_u64(b, util, "interval_ns", d->interval_ns ? d->interval_ns : SMI_UNKNOWN);
	put(b, o, "utilization", util);

	put_u64(b, o, "busy_ns", d->busy_ns);
	put_u64(b, o, "num_rings", d->num_rings);
	put_u64(b, o, "reset_count", d->reset_count);
	ctx = json_object_new_object();
	put_u64(b, ctx, "total", d->contexts_total);
	put_u64(b, ctx, "used", d->contexts_used);
	put_u64(b, ctx, "steals", d->context_steals);
	put(b, o, "contexts", ctx);
	put_string(b, o, "health", smi_health_name(d->health));
	return o;
}

static json_object *process(struct builder *b, const struct smi_snapshot *s,
			    const struct smi_process *p)
{
	json_object *o = json_object_new_object(), *clients = json_object_new_array();
	json_object *faults = json_object_new_array();
	size_t i;

	put(b, o, "pid", json_object_new_int64(p->pid));
	put_string(b, o, "name", p->name);
	put(b, o, "device", json_object_new_uint64(p->dev_index));
	put_string(b, o, "node", s->devices[p->dev_index].node);
	for (i = 0; i < p->nclients; i++)
		append(b, clients, json_object_new_uint64(p->clients[i]));
	put(b, o, "clients", clients);
	for (i = 0; i < p->nclients; i++) {
		json_object *f;

		if (!p->faults[i].kind[0])
			continue;
		f = json_object_new_object();
		put(b, f, "client", json_object_new_uint64(p->clients[i]));
		put_string(b, f, "kind", p->faults[i].kind);
		put(b, f, "address", json_object_new_uint64(p->faults[i].addr));
		append(b, faults, f);
	}
	put(b, o, "faults", faults);
	put(b, o, "engine_ns", json_object_new_uint64(p->engine_ns));
	put(b, o, "device_memory", region(b, &p->device));
	put(b, o, "host_memory", region(b, &p->host));
	return o;
}

static int add_param(const char *name, const char *value, void *arg)
{
	void **ctx = arg;
	struct builder *b = ctx[0];

	put_string(b, ctx[1], name, value);
	return 0;
}

static json_object *driver(struct builder *b, const struct smi_snapshot *s)
{
	json_object *o = json_object_new_object(), *params = json_object_new_object();
	void *ctx[2] = { b, params };

	put_string(b, o, "name", SMI_DRIVER);
	put(b, o, "loaded", json_object_new_boolean(s->driver_loaded));
	if (s->driver_version[0])
		put_string(b, o, "version", s->driver_version);
	else
		put_value(b, o, "version", NULL, true);
	/* Parameters that cannot be listed are left out, as unreadable ones are. */
	if (s->driver_loaded)
		smi_for_each_param(add_param, ctx);
	put(b, o, "parameters", params);
	return o;
}

static json_object *document(struct builder *b, const struct smi_view *v)
{
	const struct smi_snapshot *s = v->snap;
	json_object *o = json_object_new_object();
	json_object *devs = json_object_new_array(), *procs = json_object_new_array();
	char when[48];
	struct tm tm;
	size_t i;

	if (gmtime_r(&s->wall.tv_sec, &tm) &&
	    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm)) {
		snprintf(when + strlen(when), sizeof(when) - strlen(when), ".%03ldZ",
			 s->wall.tv_nsec / 1000000);
	} else {
		b->failed = true;
		when[0] = '\0';
	}

	put(b, o, "schema_version", json_object_new_int(SMI_SCHEMA_VERSION));
	put_string(b, o, "rbln_smi_version", RBLN_SMI_VERSION);
	put_string(b, o, "timestamp", when);
	put(b, o, "driver", driver(b, s));
	for (i = 0; i < s->ndevices; i++)
		if (v->only < 0 || (unsigned int)v->only == s->devices[i].index)
			append(b, devs, device(b, &s->devices[i]));
	put(b, o, "devices", devs);
	for (i = 0; i < s->nprocs; i++)
		if (v->only < 0 || (unsigned int)v->only == s->procs[i].dev_index)
			append(b, procs, process(b, s, &s->procs[i]));
	put(b, o, "processes", procs);
	put(b, o, "processes_skipped", json_object_new_uint64(s->procs_skipped));
	return o;
}

int smi_print_json(FILE *out, const struct smi_view *v)
{
	int flags = JSON_C_TO_STRING_NOSLASHESCAPE;
	struct builder b = { false };
	const char *text;
	json_object *doc;
	int ret = 0;

	doc = document(&b, v);
	if (b.failed || !doc) {
		json_object_put(doc);
		return -ENOMEM;
	}
	/* A loop prints one document per line (JSON Lines). */
	flags |= v->loop ? JSON_C_TO_STRING_PLAIN : JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED;
	text = json_object_to_json_string_ext(doc, flags);
	if (!text)
		ret = -ENOMEM;
	else if (fprintf(out, "%s\n", text) < 0 || ferror(out))
		ret = -EIO;
	json_object_put(doc);
	return ret;
}
