// SPDX-License-Identifier: MIT
/*
 * rbln_json.c - building JSON with json-c where any step may fail
 */

#include <json.h>

#include "rbln_internal.h"

bool rbln_json_add(struct json_object *obj, const char *key, struct json_object *val)
{
	if (!val)
		return false;
	if (json_object_object_add(obj, key, val)) {
		json_object_put(val);
		return false;
	}
	return true;
}

bool rbln_json_push(struct json_object *a, struct json_object *val)
{
	if (!val)
		return false;
	if (json_object_array_add(a, val)) {
		json_object_put(val);
		return false;
	}
	return true;
}
