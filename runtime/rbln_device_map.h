/* SPDX-License-Identifier: MIT */
/*
 * rbln_device_map.h - how physical devices group into logical ones
 *
 * A pure function of RBLN_DEVICE_MAP, RBLN_NPUS_PER_DEVICE and the number
 * of visible physical devices, apart from the registry so that every
 * accepted and rejected configuration can be tested without a device.
 */
#ifndef RBLN_DEVICE_MAP_H
#define RBLN_DEVICE_MAP_H

/* Physical devices a map can name: the registry's limit. */
#define RBLN_DEVICE_MAP_MAX 64

struct rbln_device_map {
	/* Logical device g's members, in shard order: member[start[g]..start[g + 1]). */
	int ngroups;
	int start[RBLN_DEVICE_MAP_MAX + 1];
	int member[RBLN_DEVICE_MAP_MAX];
	/* Physical devices in no group, ascending: unreachable. */
	int nunused;
	int unused[RBLN_DEVICE_MAP_MAX];
	/* What defined the grouping, for people: 'RBLN_NPUS_PER_DEVICE=2'. */
	char origin[160];
	/* Why the configuration was rejected; "" when it was not. */
	char error[256];
};

/*
 * Groups @nphysical (0..RBLN_DEVICE_MAP_MAX) physical devices into logical
 * ones of at most @max_members each. @map is RBLN_DEVICE_MAP ("[0,1],[2,3]":
 * groups by physical index, white space allowed between tokens) and @npus
 * RBLN_NPUS_PER_DEVICE (consecutive groups of that many); NULL or "" means
 * unset. With neither, each physical device is a logical one. With both,
 * the map defines the groups and each must have @npus members.
 *
 * Returns 0, or -1 with @m->error naming what is wrong and no group.
 */
int rbln_device_map_build(struct rbln_device_map *m, const char *map, const char *npus,
			  int nphysical, int max_members);

#endif
