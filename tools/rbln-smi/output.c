// SPDX-License-Identifier: GPL-2.0-only
/*
 * output.c - rbln-smi's text output: the device and process tables, and
 * the detailed query (-q)
 */

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <string.h>

#include "smi.h"

#define MIB		(UINT64_C(1) << 20)
#define TABLE_WIDTH	96	/* the device table's width, bars included */
/* Room for any PCI address (a 32-bit domain: 00000000:00:03.0), as nvidia-smi. */
#define BUS_ID_WIDTH	16

/* Bytes the way the tables show them: "24MiB", "512KiB", "1.5MiB", "N/A". */
static const char *fmt_mib(char *buf, size_t size, uint64_t bytes)
{
	if (bytes == SMI_UNKNOWN)
		snprintf(buf, size, "N/A");
	else if (bytes % MIB == 0)
		snprintf(buf, size, "%" PRIu64 "MiB", bytes / MIB);
	else if (bytes < MIB)
		snprintf(buf, size, "%" PRIu64 "KiB", (bytes + 1023) / 1024);
	else
		snprintf(buf, size, "%.1fMiB", (double)bytes / MIB);
	return buf;
}

/* Bytes with their exact value: "24 MiB (25165824 bytes)". */
static const char *fmt_bytes(char *buf, size_t size, uint64_t bytes)
{
	char mib[32];

	if (bytes == SMI_UNKNOWN)
		snprintf(buf, size, "N/A");
	else
		snprintf(buf, size, "%s (%" PRIu64 " bytes)", fmt_mib(mib, sizeof(mib), bytes),
			 bytes);
	return buf;
}

static const char *fmt_u64(char *buf, size_t size, uint64_t v)
{
	if (v == SMI_UNKNOWN)
		snprintf(buf, size, "N/A");
	else
		snprintf(buf, size, "%" PRIu64, v);
	return buf;
}

static const char *fmt_seconds(char *buf, size_t size, uint64_t ns)
{
	if (ns == SMI_UNKNOWN)
		snprintf(buf, size, "N/A");
	else
		snprintf(buf, size, "%" PRIu64 ".%03" PRIu64 " s", ns / 1000000000,
			 ns / 1000000 % 1000);
	return buf;
}

static const char *fmt_util(char *buf, size_t size, const struct smi_device *d)
{
	if (d->utilization < 0)
		snprintf(buf, size, "N/A");
	else
		snprintf(buf, size, "%.0f%%", d->utilization);
	return buf;
}

static const char *health_label(enum smi_health h)
{
	switch (h) {
	case SMI_HEALTH_OK:
		return "OK";
	case SMI_HEALTH_RESET:
		return "Reset";
	default:
		return "Unknown";
	}
}

static const char *fmt_time(char *buf, size_t size, const struct timespec *ts)
{
	struct tm tm;

	if (!localtime_r(&ts->tv_sec, &tm) || !strftime(buf, size, "%a %b %e %H:%M:%S %Y", &tm))
		snprintf(buf, size, "%lld", (long long)ts->tv_sec);
	return buf;
}

static bool shown(const struct smi_view *v, unsigned int index)
{
	return v->only < 0 || (unsigned int)v->only == index;
}

/* "| text...   |", padded to the table's width. */
static void box_line(FILE *out, const char *fmt, ...)
{
	char text[TABLE_WIDTH + 1];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text) - 4, fmt, ap);
	va_end(ap);
	fprintf(out, "| %-*s |\n", TABLE_WIDTH - 4, text);
}

static void rule(FILE *out, char fill, bool columns)
{
	/* Column bars of the device table, at these offsets. */
	static const int bars[] = { 0, 6, 17, 28, 47, 69, 76, 85, TABLE_WIDTH - 1 };
	unsigned int b = 0;
	int i;

	for (i = 0; i < TABLE_WIDTH; i++) {
		if (b < sizeof(bars) / sizeof(bars[0]) && i == bars[b]) {
			b++;
			if (i == 0 || i == TABLE_WIDTH - 1)
				fputc(fill == '=' ? '|' : '+', out);
			else
				fputc(columns ? '+' : fill, out);
		} else {
			fputc(fill, out);
		}
	}
	fputc('\n', out);
}

static void device_row(FILE *out, const struct smi_device *d)
{
	char used[32], total[32], mem[48], util[16], resets[24], node[16];

	snprintf(mem, sizeof(mem), "%8s / %8s", fmt_mib(used, sizeof(used), d->mem_used),
		 fmt_mib(total, sizeof(total), d->mem_total));
	snprintf(node, sizeof(node), "accel%u", d->minor);
	fprintf(out, "| %3u | %-8s | %-8s | %-*.*s | %19s | %4s | %6s | %-7s |\n",
		d->index, smi_device_name(d), node, BUS_ID_WIDTH, BUS_ID_WIDTH, d->bus_id, mem,
		fmt_util(util, sizeof(util), d),
		fmt_u64(resets, sizeof(resets), d->reset_count), health_label(d->health));
}

static void header(FILE *out, const struct smi_snapshot *s)
{
	char when[64];

	fprintf(out, "%s\n", fmt_time(when, sizeof(when), &s->wall));
	rule(out, '-', false);
	box_line(out, "rbln-smi %-20s Driver: %-16s Driver version: %s", RBLN_SMI_VERSION,
		 s->driver_loaded ? SMI_DRIVER : "not loaded",
		 s->driver_version[0] ? s->driver_version : "N/A");
}

int smi_print_table(FILE *out, const struct smi_view *v)
{
	const struct smi_snapshot *s = v->snap;
	char mem[32], busy[32];
	size_t i, n = 0;

	header(out, s);
	rule(out, '-', true);
	fprintf(out, "| %3s | %-8s | %-8s | %-*s | %19s | %4s | %6s | %-7s |\n", "NPU", "Name",
		"Node", BUS_ID_WIDTH, "Bus-Id", "Memory-Usage", "Util", "Resets", "Health");
	rule(out, '=', true);
	for (i = 0; i < s->ndevices; i++) {
		if (!shown(v, s->devices[i].index))
			continue;
		device_row(out, &s->devices[i]);
		n++;
	}
	if (!n) {
		rule(out, '-', true);
		box_line(out, "%s", !s->driver_loaded ? "The rbln driver is not loaded." :
			 v->only >= 0 && s->ndevices ? "No such rbln device." :
			 "No rbln devices were found.");
	}
	rule(out, '-', n > 0);

	fputc('\n', out);
	rule(out, '-', false);
	box_line(out, "Processes:");
	box_line(out, " %3s  %8s  %-24s  %14s  %16s", "NPU", "PID", "Process name",
		 "Device memory", "Engine time");
	rule(out, '=', false);
	n = 0;
	for (i = 0; i < s->nprocs; i++) {
		const struct smi_process *p = &s->procs[i];

		if (!shown(v, p->dev_index))
			continue;
		box_line(out, " %3u  %8d  %-24.24s  %14s  %16s", p->dev_index, (int)p->pid,
			 p->name, fmt_mib(mem, sizeof(mem), p->device.total),
			 fmt_seconds(busy, sizeof(busy), p->engine_ns));
		n++;
	}
	if (!n)
		box_line(out, " No running processes found");
	if (s->procs_skipped)
		box_line(out, " %zu process%s of other users not shown: their fdinfo is not readable",
			 s->procs_skipped, s->procs_skipped == 1 ? "" : "es");
	rule(out, '-', false);
	return ferror(out) ? -EIO : 0;
}

static int print_param(const char *name, const char *value, void *arg)
{
	fprintf(arg, "    %-26s : %s\n", name, value);
	return 0;
}

static void region_line(FILE *out, const char *label, const struct smi_region *r)
{
	char t[32], s[32], a[32], res[32];

	fprintf(out, "            %-18s : %s total, %s shared, %s active, %s resident\n", label,
		fmt_mib(t, sizeof(t), r->total), fmt_mib(s, sizeof(s), r->shared),
		fmt_mib(a, sizeof(a), r->active), fmt_mib(res, sizeof(res), r->resident));
}

static void query_device(FILE *out, const struct smi_snapshot *s, const struct smi_device *d)
{
	char buf[96], free_b[96];
	size_t i, n = 0;

	fprintf(out, "\nNPU %u\n", d->index);
	fprintf(out, "    %-26s : %s\n", "Name", smi_device_name(d));
	fprintf(out, "    %-26s : %s\n", "Accel node", d->node);
	fprintf(out, "    %-26s : %u\n", "Minor", d->minor);
	fprintf(out, "    %-26s : %s\n", "Bus-Id", d->bus_id);
	fprintf(out, "    %-26s : %s\n", "Bus", d->subsystem);
	fprintf(out, "    %-26s : %s/" SMI_SYSFS_ACCEL "/accel%u\n", "Sysfs", smi_sysfs, d->minor);
	fprintf(out, "    %-26s : %s\n", "Emulated", d->emulated ? "Yes" : "No");
	fprintf(out, "    %-26s : %s\n", "Health", health_label(d->health));
	fprintf(out, "    Memory\n");
	fprintf(out, "        %-22s : %s\n", "Total", fmt_bytes(buf, sizeof(buf), d->mem_total));
	fprintf(out, "        %-22s : %s\n", "Used", fmt_bytes(buf, sizeof(buf), d->mem_used));
	fprintf(out, "        %-22s : %s\n", "Free",
		d->mem_total == SMI_UNKNOWN || d->mem_used == SMI_UNKNOWN ||
		d->mem_used > d->mem_total ? "N/A" :
		fmt_bytes(free_b, sizeof(free_b), d->mem_total - d->mem_used));
	fprintf(out, "    Utilization\n");
	fprintf(out, "        %-22s : %s\n", "NPU", fmt_util(buf, sizeof(buf), d));
	if (d->interval_ns)
		fprintf(out, "        %-22s : %" PRIu64 " ms\n", "Interval",
			d->interval_ns / 1000000);
	else
		fprintf(out, "        %-22s : N/A\n", "Interval");
	fprintf(out, "        %-22s : %s\n", "Busy time", fmt_seconds(buf, sizeof(buf), d->busy_ns));
	fprintf(out, "    %-26s : %s\n", "Rings", fmt_u64(buf, sizeof(buf), d->num_rings));
	fprintf(out, "    %-26s : %s\n", "Reset count", fmt_u64(buf, sizeof(buf), d->reset_count));
	fprintf(out, "    Contexts\n");
	fprintf(out, "        %-22s : %s\n", "Total", fmt_u64(buf, sizeof(buf), d->contexts_total));
	fprintf(out, "        %-22s : %s\n", "In use", fmt_u64(buf, sizeof(buf), d->contexts_used));
	fprintf(out, "        %-22s : %s\n", "Steals", fmt_u64(buf, sizeof(buf), d->context_steals));

	fprintf(out, "    Processes\n");
	for (i = 0; i < s->nprocs; i++) {
		const struct smi_process *p = &s->procs[i];
		size_t c, f;

		if (p->dev_index != d->index)
			continue;
		n++;
		fprintf(out, "        %-22s : %d\n", "PID", (int)p->pid);
		fprintf(out, "            %-18s : %s\n", "Process name", p->name);
		fprintf(out, "            %-18s : ", "DRM clients");
		for (c = 0; c < p->nclients; c++)
			fprintf(out, "%s%" PRIu64, c ? ", " : "", p->clients[c]);
		fputc('\n', out);
		fprintf(out, "            %-18s : ", "Banned clients");
		for (c = 0, f = 0; c < p->nclients; c++)
			if (p->faults[c].kind[0])
				fprintf(out, "%s%" PRIu64 " (%s at %#" PRIx64 ")", f++ ? ", " : "",
					p->clients[c], p->faults[c].kind, p->faults[c].addr);
		fputs(f ? "\n" : "None\n", out);
		region_line(out, "Device memory", &p->device);
		region_line(out, "Host memory", &p->host);
		fprintf(out, "            %-18s : %s\n", "Engine time",
			fmt_seconds(buf, sizeof(buf), p->engine_ns));
	}
	if (!n)
		fprintf(out, "        None\n");
}

int smi_print_query(FILE *out, const struct smi_view *v)
{
	const struct smi_snapshot *s = v->snap;
	char when[64];
	size_t i;
	int ret;

	fprintf(out, "==============================NPU QUERY==============================\n");
	fprintf(out, "%-30s : %s\n", "Timestamp", fmt_time(when, sizeof(when), &s->wall));
	fprintf(out, "%-30s : %s\n", "rbln-smi version", RBLN_SMI_VERSION);
	fprintf(out, "%-30s : %s\n", "Driver", s->driver_loaded ? SMI_DRIVER " (loaded)" :
		SMI_DRIVER " (not loaded)");
	fprintf(out, "%-30s : %s\n", "Driver version",
		s->driver_version[0] ? s->driver_version : "N/A");
	fprintf(out, "%-30s : %zu\n", "Attached NPUs", s->ndevices);
	if (s->procs_skipped)
		fprintf(out, "%-30s : %zu (their fdinfo is not readable)\n",
			"Processes not inspected", s->procs_skipped);
	if (s->driver_loaded) {
		fprintf(out, "Module parameters\n");
		ret = smi_for_each_param(print_param, out);
		if (ret)
			fprintf(out, "    N/A (%s)\n", strerror(-ret));
	}
	for (i = 0; i < s->ndevices; i++)
		if (shown(v, s->devices[i].index))
			query_device(out, s, &s->devices[i]);
	return ferror(out) ? -EIO : 0;
}
