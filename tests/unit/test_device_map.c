// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_device_map - RBLN_DEVICE_MAP and RBLN_NPUS_PER_DEVICE
 * (runtime/rbln_device_map.c), natively: every accepted form gives the
 * groups, unused devices and origin it should, every rejection its exact
 * message and no group.
 */

#include <stdio.h>
#include <string.h>

#include "kselftest_harness.h"
#include "rbln_device_map.h"

#define MAX_MEMBERS	16	/* librbln's RBLN_MAX_MEMBERS */

static struct rbln_device_map m;
static char groups[512], unused[256];

/* Renders the result as "[0,1],[2,3]" and "4,5" for comparisons. */
static void render(void)
{
	size_t n = 0;
	int g, k;

	groups[0] = unused[0] = '\0';
	for (g = 0; g < m.ngroups; g++) {
		n += snprintf(groups + n, sizeof(groups) - n, "%s[", g ? "," : "");
		for (k = m.start[g]; k < m.start[g + 1]; k++)
			n += snprintf(groups + n, sizeof(groups) - n, "%s%d",
				      k > m.start[g] ? "," : "", m.member[k]);
		n += snprintf(groups + n, sizeof(groups) - n, "]");
	}
	n = 0;
	for (k = 0; k < m.nunused; k++)
		n += snprintf(unused + n, sizeof(unused) - n, "%s%d", k ? "," : "", m.unused[k]);
}

static int build(const char *map, const char *npus, int nphysical)
{
	int ret = rbln_device_map_build(&m, map, npus, nphysical, MAX_MEMBERS);

	render();
	return ret;
}

#define ACCEPTS(map, npus, nphys, want_groups, want_unused) do {		\
		ASSERT_EQ(0, build(map, npus, nphys)) TH_LOG("%s", m.error);	\
		EXPECT_STREQ(want_groups, groups);				\
		EXPECT_STREQ(want_unused, unused);				\
		EXPECT_STREQ("", m.error);					\
	} while (0)

#define REJECTS(map, npus, nphys, message) do {				\
		EXPECT_EQ(-1, build(map, npus, nphys));				\
		EXPECT_STREQ(message, m.error);					\
		EXPECT_EQ(0, m.ngroups);					\
		EXPECT_EQ(0, m.nunused);					\
		EXPECT_STREQ("", m.origin);					\
	} while (0)

TEST(neither_variable_is_one_to_one)
{
	ACCEPTS(NULL, NULL, 3, "[0],[1],[2]", "");
	EXPECT_STREQ("one logical device per physical device", m.origin);
	/* Empty values are unset, like an empty RBLN_VISIBLE_DEVICES. */
	ACCEPTS("", "", 2, "[0],[1]", "");
	ACCEPTS(NULL, NULL, 0, "", "");
}

TEST(npus_per_device_groups_consecutive_devices)
{
	ACCEPTS(NULL, "2", 4, "[0,1],[2,3]", "");
	EXPECT_STREQ("RBLN_NPUS_PER_DEVICE=2", m.origin);
	ACCEPTS(NULL, "1", 3, "[0],[1],[2]", "");
	ACCEPTS(NULL, "4", 4, "[0,1,2,3]", "");
	ACCEPTS(NULL, " 2\n", 4, "[0,1],[2,3]", "");
	ACCEPTS(NULL, "16", 16, "[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]", "");
}

TEST(npus_per_device_leftovers_are_unused)
{
	ACCEPTS(NULL, "2", 5, "[0,1],[2,3]", "4");
	ACCEPTS(NULL, "3", 4, "[0,1,2]", "3");
	ACCEPTS(NULL, "4", 7, "[0,1,2,3]", "4,5,6");
}

TEST(map_names_the_groups)
{
	ACCEPTS("[0,1],[2,3]", NULL, 4, "[0,1],[2,3]", "");
	EXPECT_STREQ("RBLN_DEVICE_MAP=\"[0,1],[2,3]\"", m.origin);
	/* Members keep the map's order: it is the shard order. */
	ACCEPTS("[1,0]", NULL, 2, "[1,0]", "");
	ACCEPTS("[3],[0,2]", NULL, 4, "[3],[0,2]", "1");
	ACCEPTS("[2,3]", NULL, 4, "[2,3]", "0,1");
	ACCEPTS("[00,01]", NULL, 2, "[0,1]", "");
	ACCEPTS("[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15],[16]", NULL, 17,
		"[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15],[16]", "");
}

TEST(map_tolerates_white_space)
{
	ACCEPTS(" [ 0 , 1 ] ,\t[2,3]\n", NULL, 4, "[0,1],[2,3]", "");
	ACCEPTS("[0]  ,  [1]", NULL, 2, "[0],[1]", "");
}

TEST(both_set_must_agree)
{
	ACCEPTS("[1,0],[3,2]", "2", 4, "[1,0],[3,2]", "");
	EXPECT_STREQ("RBLN_DEVICE_MAP=\"[1,0],[3,2]\" (RBLN_NPUS_PER_DEVICE=2 agrees)", m.origin);
	ACCEPTS("[0,1]", "2", 3, "[0,1]", "2");
	REJECTS("[0,1],[2]", "2", 4,
		"RBLN_DEVICE_MAP=\"[0,1],[2]\": logical device 1 has 1 member but RBLN_NPUS_PER_DEVICE=2");
	REJECTS("[0,1,2,3]", "2", 4,
		"RBLN_DEVICE_MAP=\"[0,1,2,3]\": logical device 0 has 4 members but RBLN_NPUS_PER_DEVICE=2");
	/* A bad RBLN_NPUS_PER_DEVICE is named even with a good map. */
	REJECTS("[0,1]", "two", 2, "RBLN_NPUS_PER_DEVICE=\"two\" is not a number");
}

TEST(map_bad_syntax)
{
	REJECTS("[0,1", NULL, 4, "RBLN_DEVICE_MAP=\"[0,1\": logical device 0's group has no ']'");
	REJECTS("[0],[1 ", NULL, 4,
		"RBLN_DEVICE_MAP=\"[0],[1 \": logical device 1's group has no ']'");
	REJECTS("[0,", NULL, 4, "RBLN_DEVICE_MAP=\"[0,\": logical device 0's group has no ']'");
	REJECTS("[0,1]]", NULL, 4, "RBLN_DEVICE_MAP=\"[0,1]]\": unbalanced ']' at \"]\"");
	REJECTS("]", NULL, 4, "RBLN_DEVICE_MAP=\"]\": unbalanced ']' at \"]\"");
	REJECTS("[0],]", NULL, 4, "RBLN_DEVICE_MAP=\"[0],]\": unbalanced ']' at \"]\"");
	REJECTS("0,1", NULL, 4, "RBLN_DEVICE_MAP=\"0,1\": expected '[' at \"0,1\"");
	REJECTS("   ", NULL, 4, "RBLN_DEVICE_MAP=\"   \": no group");
	REJECTS("[0 1]", NULL, 4, "RBLN_DEVICE_MAP=\"[0 1]\": expected ',' or ']' at \"1]\"");
	REJECTS("[1.5]", NULL, 4, "RBLN_DEVICE_MAP=\"[1.5]\": expected ',' or ']' at \".5]\"");
	REJECTS("[0][1]", NULL, 4,
		"RBLN_DEVICE_MAP=\"[0][1]\": unexpected \"[1]\" after logical device 0's group");
	REJECTS("[0],[1]x", NULL, 4,
		"RBLN_DEVICE_MAP=\"[0],[1]x\": unexpected \"x\" after logical device 1's group");
	REJECTS("[0],", NULL, 4, "RBLN_DEVICE_MAP=\"[0],\": trailing ','");
	REJECTS("[[0]]", NULL, 4,
		"RBLN_DEVICE_MAP=\"[[0]]\": expected a physical device index at \"[0]]\"");
}

TEST(map_empty_groups)
{
	REJECTS("[]", NULL, 4, "RBLN_DEVICE_MAP=\"[]\": logical device 0's group is empty");
	REJECTS("[0],[ ]", NULL, 4, "RBLN_DEVICE_MAP=\"[0],[ ]\": logical device 1's group is empty");
	REJECTS("[0,]", NULL, 4,
		"RBLN_DEVICE_MAP=\"[0,]\": expected a physical device index at \"]\"");
	REJECTS("[,0]", NULL, 4,
		"RBLN_DEVICE_MAP=\"[,0]\": expected a physical device index at \",0]\"");
	REJECTS("[0,,1]", NULL, 4,
		"RBLN_DEVICE_MAP=\"[0,,1]\": expected a physical device index at \",1]\"");
}

TEST(map_non_numbers)
{
	REJECTS("[a]", NULL, 4, "RBLN_DEVICE_MAP=\"[a]\": \"a\" is not a physical device index");
	REJECTS("[0,one]", NULL, 4,
		"RBLN_DEVICE_MAP=\"[0,one]\": \"one\" is not a physical device index");
	REJECTS("[-1]", NULL, 4, "RBLN_DEVICE_MAP=\"[-1]\": \"-1\" is not a physical device index");
	REJECTS("[+1]", NULL, 4, "RBLN_DEVICE_MAP=\"[+1]\": \"+1\" is not a physical device index");
	REJECTS("[0x1]", NULL, 4, "RBLN_DEVICE_MAP=\"[0x1]\": expected ',' or ']' at \"x1]\"");
}

TEST(map_unknown_ids)
{
	REJECTS("[0,1],[2,4]", NULL, 4,
		"RBLN_DEVICE_MAP=\"[0,1],[2,4]\": physical device 4 does not exist (4 physical devices)");
	REJECTS("[1]", NULL, 1,
		"RBLN_DEVICE_MAP=\"[1]\": physical device 1 does not exist (1 physical device)");
	/* Far past any integer: no overflow, the digits as written. */
	REJECTS("[123456789012345678901234567890]", NULL, 4,
		"RBLN_DEVICE_MAP=\"[123456789012345678901234567890]\": physical device 123456789012345678901234567890 does not exist (4 physical devices)");
	REJECTS("[0]", NULL, 0,
		"RBLN_DEVICE_MAP=\"[0]\": physical device 0 does not exist (0 physical devices)");
}

TEST(map_overlaps)
{
	REJECTS("[0,1],[1,2]", NULL, 4,
		"RBLN_DEVICE_MAP=\"[0,1],[1,2]\": physical device 1 is in logical devices 0 and 1");
	REJECTS("[3],[0],[2,3]", NULL, 4,
		"RBLN_DEVICE_MAP=\"[3],[0],[2,3]\": physical device 3 is in logical devices 0 and 2");
	REJECTS("[0,0]", NULL, 4, "RBLN_DEVICE_MAP=\"[0,0]\": physical device 0 is twice in logical device 0");
	REJECTS("[1],[2,0,2]", NULL, 4,
		"RBLN_DEVICE_MAP=\"[1],[2,0,2]\": physical device 2 is twice in logical device 1");
}

TEST(map_groups_too_large)
{
	REJECTS("[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]", NULL, 17,
		"RBLN_DEVICE_MAP=\"[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]\": logical device 0 has more than 16 members");
	/* The limit is the caller's. */
	EXPECT_EQ(-1, rbln_device_map_build(&m, "[0,1],[2,3,4]", NULL, 5, 2));
	EXPECT_STREQ("RBLN_DEVICE_MAP=\"[0,1],[2,3,4]\": logical device 1 has more than 2 members",
		     m.error);
}

TEST(npus_per_device_rejections)
{
	REJECTS(NULL, "two", 4, "RBLN_NPUS_PER_DEVICE=\"two\" is not a number");
	REJECTS(NULL, "2x", 4, "RBLN_NPUS_PER_DEVICE=\"2x\" is not a number");
	REJECTS(NULL, " ", 4, "RBLN_NPUS_PER_DEVICE=\" \" is not a number");
	REJECTS(NULL, "0x2", 4, "RBLN_NPUS_PER_DEVICE=\"0x2\" is not a number");
	REJECTS(NULL, "99999999999999999999", 4,
		"RBLN_NPUS_PER_DEVICE=\"99999999999999999999\" is not a number");
	REJECTS(NULL, "0", 4,
		"RBLN_NPUS_PER_DEVICE=0: a logical device needs at least 1 physical device");
	REJECTS(NULL, "-2", 4,
		"RBLN_NPUS_PER_DEVICE=-2: a logical device needs at least 1 physical device");
	REJECTS(NULL, "5", 4, "RBLN_NPUS_PER_DEVICE=5 is more than the 4 physical devices");
	REJECTS(NULL, "2", 1, "RBLN_NPUS_PER_DEVICE=2 is more than the 1 physical device");
	REJECTS(NULL, "17", 32,
		"RBLN_NPUS_PER_DEVICE=17: a logical device has at most 16 physical devices");
}

TEST(long_values_are_cut_in_messages)
{
	char map[200], want[256];
	int n = 0, i;

	for (i = 0; i < 30; i++)
		n += snprintf(map + n, sizeof(map) - n, "%s[%d]", i ? "," : "", i);
	snprintf(map + n, sizeof(map) - n, ",[");
	snprintf(want, sizeof(want),
		 "RBLN_DEVICE_MAP=\"%.64s...\": logical device 30's group has no ']'", map);
	REJECTS(map, NULL, 40, want);
}

TEST(bad_arguments)
{
	REJECTS(NULL, NULL, RBLN_DEVICE_MAP_MAX + 1, "cannot group 65 physical devices by at most 16");
	REJECTS(NULL, NULL, -1, "cannot group -1 physical devices by at most 16");
	EXPECT_EQ(-1, rbln_device_map_build(&m, NULL, NULL, 2, 0));
	EXPECT_STREQ("cannot group 2 physical devices by at most 0", m.error);
}

TEST(a_rejection_clears_an_earlier_result)
{
	ACCEPTS(NULL, "2", 5, "[0,1],[2,3]", "4");
	REJECTS("[0,0]", NULL, 5, "RBLN_DEVICE_MAP=\"[0,0]\": physical device 0 is twice in logical device 0");
	ACCEPTS(NULL, NULL, 2, "[0],[1]", "");
}

TEST_HARNESS_MAIN
