// SPDX-License-Identifier: MIT
/*
 * rbln_device_map.c - RBLN_DEVICE_MAP and RBLN_NPUS_PER_DEVICE
 *
 * A mistake in either variable rejects the whole configuration rather than
 * guessing: a program silently running on a different grouping than the
 * one asked for would shard its tensors wrongly without a word.
 */

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rbln_device_map.h"

/* Messages quote this much of a value or of the text after an error. */
#define QUOTE	64
#define REST	16

struct parser {
	struct rbln_device_map *m;
	const char *map;
	int nphysical, max_members;
	int owner[RBLN_DEVICE_MAP_MAX];	/* logical device of each physical one; -1: none */
};

static int vfail(struct rbln_device_map *m, size_t at, const char *fmt, va_list ap)
{
	vsnprintf(m->error + at, sizeof(m->error) - at, fmt, ap);
	m->ngroups = 0;
	m->start[0] = 0;
	m->nunused = 0;
	m->origin[0] = '\0';
	return -1;
}

static int fail(struct rbln_device_map *m, const char *fmt, ...)
{
	va_list ap;
	int ret;

	va_start(ap, fmt);
	ret = vfail(m, 0, fmt, ap);
	va_end(ap);
	return ret;
}

/* A rejection of the map: the message starts with the variable and its value. */
static int map_fail(struct parser *ps, const char *fmt, ...)
{
	struct rbln_device_map *m = ps->m;
	int at, ret;
	va_list ap;

	at = snprintf(m->error, sizeof(m->error), "RBLN_DEVICE_MAP=\"%.*s%s\": ", QUOTE,
		      ps->map, strlen(ps->map) > QUOTE ? "..." : "");
	va_start(ap, fmt);
	ret = vfail(m, at, fmt, ap);
	va_end(ap);
	return ret;
}

static const char *skip_space(const char *p)
{
	while (isspace((unsigned char)*p))
		p++;
	return p;
}

/* Adds the physical device whose decimal index starts @p to logical device @g. */
static int add_member(struct parser *ps, const char *p, size_t len, int g, int *size)
{
	struct rbln_device_map *m = ps->m;
	int idx = 0;
	size_t i;

	/* Saturates: anything past the limit is no device at all. */
	for (i = 0; i < len && idx <= RBLN_DEVICE_MAP_MAX; i++)
		idx = idx * 10 + (p[i] - '0');
	if (idx >= ps->nphysical)
		return map_fail(ps, "physical device %.*s does not exist (%d physical device%s)",
				(int)(len < QUOTE ? len : QUOTE), p, ps->nphysical,
				ps->nphysical == 1 ? "" : "s");
	if (ps->owner[idx] == g)
		return map_fail(ps, "physical device %d is twice in logical device %d", idx, g);
	if (ps->owner[idx] >= 0)
		return map_fail(ps, "physical device %d is in logical devices %d and %d", idx,
				ps->owner[idx], g);
	if (*size == ps->max_members)
		return map_fail(ps, "logical device %d has more than %d members", g,
				ps->max_members);
	ps->owner[idx] = g;
	m->member[m->start[g] + (*size)++] = idx;
	return 0;
}

/* '[' idx (',' idx)* ']' (',' '[' ... ']')*, white space between tokens. */
static int parse_map(struct parser *ps)
{
	struct rbln_device_map *m = ps->m;
	const char *p = skip_space(ps->map);
	int g = 0;

	if (!*p)
		return map_fail(ps, "no group");
	m->start[0] = 0;
	for (;;) {
		int size = 0;

		if (*p == ']')
			return map_fail(ps, "unbalanced ']' at \"%.*s\"", REST, p);
		if (*p != '[')
			return map_fail(ps, "expected '[' at \"%.*s\"", REST, p);
		p = skip_space(p + 1);
		if (*p == ']')
			return map_fail(ps, "logical device %d's group is empty", g);
		for (;;) {
			size_t len;

			p = skip_space(p);
			if (!*p)
				return map_fail(ps, "logical device %d's group has no ']'", g);
			len = strspn(p, "0123456789");
			if (!len) {
				len = strcspn(p, ",[] \t\n\v\f\r");
				if (!len)
					return map_fail(ps, "expected a physical device index at \"%.*s\"",
							REST, p);
				return map_fail(ps, "\"%.*s\" is not a physical device index",
						(int)(len < REST ? len : REST), p);
			}
			if (add_member(ps, p, len, g, &size))
				return -1;
			p = skip_space(p + len);
			if (*p == ']')
				break;
			if (!*p)
				return map_fail(ps, "logical device %d's group has no ']'", g);
			if (*p != ',')
				return map_fail(ps, "expected ',' or ']' at \"%.*s\"", REST, p);
			p++;
		}
		m->start[g + 1] = m->start[g] + size;
		g++;
		p = skip_space(p + 1);
		if (!*p)
			break;
		if (*p == ']')
			return map_fail(ps, "unbalanced ']' at \"%.*s\"", REST, p);
		if (*p != ',')
			return map_fail(ps, "unexpected \"%.*s\" after logical device %d's group",
					REST, p, g - 1);
		p = skip_space(p + 1);
		if (!*p)
			return map_fail(ps, "trailing ','");
	}
	m->ngroups = g;
	return 0;
}

static int parse_npus(struct rbln_device_map *m, const char *npus, int nphysical,
		      int max_members, int *out)
{
	char *end;
	long n;

	errno = 0;
	n = strtol(npus, &end, 10);
	if (end == npus || *skip_space(end) || errno)
		return fail(m, "RBLN_NPUS_PER_DEVICE=\"%.*s%s\" is not a number", QUOTE, npus,
			    strlen(npus) > QUOTE ? "..." : "");
	if (n < 1)
		return fail(m, "RBLN_NPUS_PER_DEVICE=%ld: a logical device needs at least 1 physical device",
			    n);
	if (n > max_members)
		return fail(m, "RBLN_NPUS_PER_DEVICE=%ld: a logical device has at most %d physical devices",
			    n, max_members);
	if (n > nphysical)
		return fail(m, "RBLN_NPUS_PER_DEVICE=%ld is more than the %d physical device%s", n,
			    nphysical, nphysical == 1 ? "" : "s");
	*out = (int)n;
	return 0;
}

int rbln_device_map_build(struct rbln_device_map *m, const char *map, const char *npus,
			  int nphysical, int max_members)
{
	struct parser ps = { .m = m, .map = map, .nphysical = nphysical,
			     .max_members = max_members };
	int i, g, n = 0;

	m->error[0] = '\0';
	if (nphysical < 0 || nphysical > RBLN_DEVICE_MAP_MAX || max_members < 1)
		return fail(m, "cannot group %d physical devices by at most %d", nphysical,
			    max_members);
	if (map && !*map)
		map = NULL;
	if (npus && !*npus)
		npus = NULL;
	if (npus && parse_npus(m, npus, nphysical, max_members, &n))
		return -1;

	for (i = 0; i < nphysical; i++)
		ps.owner[i] = -1;
	if (map) {
		if (parse_map(&ps))
			return -1;
		for (g = 0; n && g < m->ngroups; g++)
			if (m->start[g + 1] - m->start[g] != n)
				return map_fail(&ps, "logical device %d has %d member%s but RBLN_NPUS_PER_DEVICE=%d",
						g, m->start[g + 1] - m->start[g],
						m->start[g + 1] - m->start[g] == 1 ? "" : "s", n);
		if (n)
			snprintf(m->origin, sizeof(m->origin),
				 "RBLN_DEVICE_MAP=\"%.*s%s\" (RBLN_NPUS_PER_DEVICE=%d agrees)", QUOTE,
				 map, strlen(map) > QUOTE ? "..." : "", n);
		else
			snprintf(m->origin, sizeof(m->origin), "RBLN_DEVICE_MAP=\"%.*s%s\"", QUOTE,
				 map, strlen(map) > QUOTE ? "..." : "");
	} else {
		int per = n ? n : 1;

		m->ngroups = nphysical / per;
		for (g = 0; g <= m->ngroups; g++)
			m->start[g] = g * per;
		for (i = 0; i < m->ngroups * per; i++) {
			m->member[i] = i;
			ps.owner[i] = i / per;
		}
		if (n)
			snprintf(m->origin, sizeof(m->origin), "RBLN_NPUS_PER_DEVICE=%d", n);
		else
			snprintf(m->origin, sizeof(m->origin), "%s",
				 "one logical device per physical device");
	}

	m->nunused = 0;
	for (i = 0; i < nphysical; i++)
		if (ps.owner[i] < 0)
			m->unused[m->nunused++] = i;
	return 0;
}
