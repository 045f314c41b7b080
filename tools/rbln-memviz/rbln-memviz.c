// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln-memviz - a memory snapshot of librbln as one self-contained HTML page
 *
 * The page (memviz.html, compiled in) parses the snapshot with the
 * browser's JSON.parse and draws it: this program only checks that the file
 * looks like a snapshot, so that a wrong file is refused here rather than
 * as a blank page, and embeds it. The page fetches nothing: it opens
 * offline and can be mailed around. See rbln-memviz(1).
 */

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memviz_page.h"	/* page_head, page_tail: memviz.html split where the snapshot goes */

enum {
	EXIT_OK = 0,
	EXIT_BAD_INPUT = 1,	/* unreadable, not a snapshot, or the page could not be written */
	EXIT_USAGE = 2,
};

/* Real snapshots nest five deep; a limit keeps the bracket stack fixed. */
#define MAX_DEPTH 64

static const char *prog = "rbln-memviz";

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: %s SNAPSHOT.json [-o OUT.html]\n"
		"Turn a librbln memory snapshot (rbln_memory_dump_snapshot) into one\n"
		"self-contained HTML page: allocated memory over the history, stacked by\n"
		"allocation site, and the segments at a chosen moment.\n"
		"\n"
		"  -o, --output=FILE  write the page to FILE (default: standard output)\n"
		"  -h, --help         show this help\n"
		"  -V, --version      show the version\n"
		"\n"
		"Exit status: 0 ok; 1 the snapshot cannot be read or is not one, or the\n"
		"page cannot be written; 2 usage error.\n", prog);
}

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL, *p;
	size_t cap = 0, n = 0, got;

	if (!f)
		return NULL;
	errno = 0;
	do {
		if (n == cap) {
			cap = cap ? 2 * cap : 1 << 16;
			p = realloc(buf, cap);
			if (!p) {
				free(buf);
				fclose(f);
				errno = ENOMEM;
				return NULL;
			}
			buf = p;
		}
		got = fread(buf + n, 1, cap - n, f);
		n += got;
	} while (got);
	if (ferror(f)) {
		int err = errno ? errno : EIO;	/* EISDIR for a directory */

		free(buf);
		fclose(f);
		errno = err;
		return NULL;
	}
	fclose(f);
	*len = n;
	return buf;
}

static size_t skip_space(const char *s, size_t n, size_t i)
{
	while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
		i++;
	return i;
}

/*
 * A light check that @s is a JSON object with a "segments" list: strings
 * end, brackets balance, nothing follows the object. The page's JSON.parse
 * is the real parser; this only turns away what is plainly not a snapshot.
 * NULL if it passes, else why not.
 */
static const char *check_snapshot(const char *s, size_t n)
{
	char stack[MAX_DEPTH];
	bool expect_key = false, segments = false, key_is_segments = false;
	size_t i = skip_space(s, n, 0), depth = 0, start;

	if (i == n)
		return "is empty";
	if (s[i] != '{')
		return "is not a JSON object";
	for (; i < n; i++) {
		char c = s[i];

		if (c == '\0')
			return "has a NUL byte: not JSON";
		if (c == '"') {
			start = ++i;
			while (i < n && s[i] != '"') {
				if ((unsigned char)s[i] < 0x20)
					return "has a control character in a string: not JSON";
				i += s[i] == '\\' ? 2 : 1;
			}
			if (i >= n)
				return "ends inside a string: not JSON";
			if (depth == 1 && expect_key) {
				key_is_segments = i - start == 8 && !memcmp(s + start, "segments", 8);
				expect_key = false;
			}
		} else if (c == '{' || c == '[') {
			if (depth == MAX_DEPTH)
				return "nested too deeply for a snapshot";
			stack[depth++] = c == '{' ? '}' : ']';
			expect_key = depth == 1;
		} else if (c == '}' || c == ']') {
			if (!depth || stack[depth - 1] != c)
				return "has unbalanced brackets: not JSON";
			if (--depth == 0)
				break;
		} else if (c == ',' && depth == 1) {
			expect_key = true;
		} else if (c == ':' && depth == 1 && key_is_segments) {
			i = skip_space(s, n, i + 1);
			if (i == n || s[i] != '[')
				return "has \"segments\" that is not a list: not a memory snapshot";
			segments = true;
			key_is_segments = false;
			i--;	/* the loop opens the list */
		}
	}
	if (depth)
		return "ends before its object does: not JSON";
	if (skip_space(s, n, i + 1) != n)
		return "has text after its object: not JSON";
	if (!segments)
		return "has no \"segments\": not a memory snapshot";
	return NULL;
}

/*
 * The snapshot goes into a <script> element, which ends at the first
 * "</script": every '<' becomes the JSON escape \u003c, which can only
 * stand inside a string of valid JSON, where it means the same.
 */
static void write_escaped(FILE *out, const char *s, size_t n)
{
	const char *lt;

	while ((lt = memchr(s, '<', n))) {
		fwrite(s, 1, (size_t)(lt - s), out);
		fputs("\\u003c", out);
		n -= (size_t)(lt - s) + 1;
		s = lt + 1;
	}
	fwrite(s, 1, n, out);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 }
	};
	const char *output = NULL, *why;
	size_t len;
	FILE *out;
	char *json;
	int c, err;

	while ((c = getopt_long(argc, argv, "o:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			output = optarg;
			break;
		case 'h':
			usage(stdout);
			return EXIT_OK;
		case 'V':
			printf("%s %s\n", prog, RBLN_MEMVIZ_VERSION);
			return EXIT_OK;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "%s: %s\n", prog, optind == argc ? "no snapshot given" :
			"one snapshot at a time");
		usage(stderr);
		return EXIT_USAGE;
	}

	json = read_file(argv[optind], &len);
	if (!json) {
		fprintf(stderr, "%s: cannot read %s: %s\n", prog, argv[optind], strerror(errno));
		return EXIT_BAD_INPUT;
	}
	why = check_snapshot(json, len);
	if (why) {
		fprintf(stderr, "%s: %s %s\n", prog, argv[optind], why);
		free(json);
		return EXIT_BAD_INPUT;
	}

	out = output ? fopen(output, "w") : stdout;
	if (!out) {
		fprintf(stderr, "%s: cannot write %s: %s\n", prog, output, strerror(errno));
		free(json);
		return EXIT_BAD_INPUT;
	}
	fwrite(page_head, 1, sizeof(page_head), out);
	write_escaped(out, json, len);
	fwrite(page_tail, 1, sizeof(page_tail), out);
	free(json);
	err = ferror(out) ? EIO : 0;
	if (fclose(out) && !err)
		err = errno;
	if (err) {
		fprintf(stderr, "%s: cannot write %s: %s\n", prog, output ? output : "the page",
			strerror(err));
		if (output)
			unlink(output);
		return EXIT_BAD_INPUT;
	}
	return EXIT_OK;
}
