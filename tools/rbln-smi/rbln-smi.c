// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln-smi - show rbln NPUs and the processes using them
 *
 * In the spirit of nvidia-smi: a device table (memory, utilization, resets,
 * health), a process table (device memory and engine time of each process
 * holding an rbln node), every detail of a device with -q, JSON with
 * --json, and a refreshing view with -l. It reads sysfs and /proc only and
 * needs no privileges: processes of other users, whose fdinfo the kernel
 * does not show, are counted as not shown. See rbln-smi(1).
 */

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>		/* isfinite() */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "smi.h"

#define MAX_SAMPLE_MS	60000
#define MAX_LOOP_S	86400.0

struct options {
	bool query;
	bool json;
	const char *id;		/* -i, or NULL */
	double loop_s;		/* 0: print once */
	unsigned int sample_ms;
};

/* Set by SIGINT/SIGTERM during -l: the loop ends after the current frame. */
static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: rbln-smi [OPTION]...\n"
		"Show the rbln NPUs of this machine and the processes using them.\n"
		"\n"
		"  -q, --query           every detail of each device (or of the one of -i)\n"
		"  -i, --id DEVICE       only this device: its index, its accel node (accel0,\n"
		"                        /dev/accel/accel0) or its bus id (rbln_emu0,\n"
		"                        0000:00:03.0 or 00:03.0)\n"
		"  -j, --json            print JSON (schema: rbln-smi-schema.json)\n"
		"  -l, --loop SECONDS    print again every SECONDS until interrupted\n"
		"  -s, --sample-ms MS    measure utilization over MS milliseconds before the\n"
		"                        first output (default: 200; 0: do not measure)\n"
		"  -h, --help            this text\n"
		"  -V, --version         the version\n"
		"\n"
		"Exit status: 0 success; 1 the rbln driver is not loaded or drives no device;\n"
		"2 usage error; 3 no device matches -i; 4 error reading /proc or sysfs, or\n"
		"writing the output.\n");
}

static int parse_options(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{ "query", no_argument, NULL, 'q' },
		{ "id", required_argument, NULL, 'i' },
		{ "json", no_argument, NULL, 'j' },
		{ "loop", required_argument, NULL, 'l' },
		{ "sample-ms", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned long ms;
	char *end;
	int c;

	*o = (struct options){ .sample_ms = 200 };
	while ((c = getopt_long(argc, argv, "qi:jl:s:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'q':
			o->query = true;
			break;
		case 'i':
			if (!*optarg)
				goto bad;
			o->id = optarg;
			break;
		case 'j':
			o->json = true;
			break;
		case 'l':
			errno = 0;
			o->loop_s = strtod(optarg, &end);
			if (errno || end == optarg || *end || !isfinite(o->loop_s) ||
			    o->loop_s < 0.1 || o->loop_s > MAX_LOOP_S)
				goto bad;
			break;
		case 's':
			errno = 0;
			ms = strtoul(optarg, &end, 10);
			if (errno || end == optarg || *end || *optarg == '-' || ms > MAX_SAMPLE_MS)
				goto bad;
			o->sample_ms = (unsigned int)ms;
			break;
		case 'h':
			usage(stdout);
			return 1;
		case 'V':
			printf("rbln-smi %s\n", RBLN_SMI_VERSION);
			return 1;
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "rbln-smi: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return -EINVAL;
	}
	return 0;
bad:
	fprintf(stderr, "rbln-smi: invalid value '%s' for -%c%s\n", optarg, c,
		c == 'l' ? " (seconds, 0.1 to 86400)" :
		c == 's' ? " (milliseconds, 0 to 60000)" : "");
	return -EINVAL;
}

/* Sleeps @ms milliseconds, or less when interrupted. */
static void sleep_ms(double ms)
{
	long long ns = (long long)(ms * 1e6);
	struct timespec ts = {
		.tv_sec = (time_t)(ns / 1000000000),
		.tv_nsec = (long)(ns % 1000000000),
	};

	while (!interrupted && nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/*
 * Prints one frame of @cur: returns an smi_exit code. @report: say on
 * stderr why there is nothing to show (not in a loop, where the frame says
 * it).
 */
static int frame(const struct options *o, const struct smi_snapshot *cur, bool report)
{
	struct smi_view v = { .snap = cur, .only = -1, .loop = o->loop_s > 0 };
	int status = SMI_EXIT_OK, ret;

	if (!cur->driver_loaded) {
		if (report)
			fprintf(stderr, "rbln-smi: the rbln driver is not loaded (no %s/%s); "
				"load it with: modprobe rbln\n", smi_sysfs, SMI_SYSFS_MODULE);
		status = SMI_EXIT_NO_DEVICE;
	} else if (!cur->ndevices) {
		if (report)
			fprintf(stderr, "rbln-smi: no rbln devices found: the rbln driver is "
				"loaded but drives no device\n");
		status = SMI_EXIT_NO_DEVICE;
	} else if (o->id) {
		v.only = smi_resolve(cur, o->id);
		if (v.only < 0) {
			if (report)
				fprintf(stderr, "rbln-smi: no rbln device '%s' (indexes 0 to %zu)\n",
					o->id, cur->ndevices - 1);
			v.only = INT_MAX;	/* show none */
			status = SMI_EXIT_BAD_INDEX;
		}
	}

	/* JSON always says what there is; text only when there is something. */
	if (o->json)
		ret = smi_print_json(stdout, &v);
	else if (status != SMI_EXIT_OK && report)
		ret = 0;
	else if (o->query)
		ret = smi_print_query(stdout, &v);
	else
		ret = smi_print_table(stdout, &v);
	if (!ret && fflush(stdout))
		ret = -errno;
	if (ret) {
		fprintf(stderr, "rbln-smi: cannot print: %s\n", strerror(-ret));
		return SMI_EXIT_ERROR;
	}
	return status;
}

static int take(struct smi_snapshot *s, bool with_procs)
{
	int ret = smi_snapshot_take(s, with_procs);

	if (ret)
		fprintf(stderr, "rbln-smi: cannot read the devices%s: %s\n",
			with_procs ? " and processes" : "", strerror(-ret));
	return ret;
}

int main(int argc, char **argv)
{
	struct smi_snapshot prev, cur;
	bool have_prev = false, tty;
	struct options o;
	int ret, status;

	ret = parse_options(argc, argv, &o);
	if (ret)
		return ret > 0 ? SMI_EXIT_OK : SMI_EXIT_USAGE;

	if (o.loop_s > 0) {
		struct sigaction sa = { .sa_handler = on_signal };

		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGINT, &sa, NULL) || sigaction(SIGTERM, &sa, NULL)) {
			fprintf(stderr, "rbln-smi: sigaction: %s\n", strerror(errno));
			return SMI_EXIT_ERROR;
		}
	}
	tty = isatty(STDOUT_FILENO);

	if (o.sample_ms) {
		if (take(&prev, false))
			return SMI_EXIT_ERROR;
		have_prev = true;
		/* Nothing to measure on no device, unless one may come. */
		if (prev.ndevices || o.loop_s > 0)
			sleep_ms(o.sample_ms);
	}

	for (;;) {
		if (take(&cur, true)) {
			status = SMI_EXIT_ERROR;
			break;
		}
		smi_derive(&cur, have_prev ? &prev : NULL);
		if (have_prev)
			smi_snapshot_free(&prev);
		prev = cur;
		have_prev = true;

		if (o.loop_s > 0 && tty && !o.json)
			fputs("\033[H\033[2J", stdout);	/* refresh in place */
		status = frame(&o, &cur, o.loop_s <= 0);
		if (o.loop_s <= 0 || status == SMI_EXIT_ERROR)
			break;
		status = SMI_EXIT_OK;
		sleep_ms(o.loop_s * 1000);
		if (interrupted)
			break;
		if (!o.json)
			fputc('\n', stdout);
	}
	if (have_prev)
		smi_snapshot_free(&prev);
	return status;
}
