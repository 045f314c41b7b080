// SPDX-License-Identifier: MIT
/*
 * quickstart - the torch.rbln examples, in C with librbln
 *
 *   with torch.rbln.device(0): x = torch.randn(2, 2, device="rbln:0")
 *   with torch.rbln.device_of(tensor): new = torch.zeros(3, device="rbln")
 *   cpu = t.to("cpu", non_blocking=True); torch.rbln.synchronize()
 *   torch.rbln.memory_stats() before and after the device first uses a tensor
 *   torch.rbln.empty_cache()
 */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include <rbln/rbln.h>

#define CHECK(expr) do { \
		if (!(expr)) { \
			fprintf(stderr, "quickstart: %s: %s\n", #expr, rbln_last_error()); \
			exit(1); \
		} \
	} while (0)

static void print_memory(const char *when)
{
	struct rbln_memory_stats s;
	const char *key;
	int64_t value;
	size_t i;

	CHECK(rbln_memory_stats(-1, &s) == RBLN_OK);
	printf("memory_stats() %s:\n", when);
	for (i = 0; rbln_memory_stats_entry(&s, i, &key, &value); i++)
		if (value)
			printf("  %-26s %" PRId64 "\n", key, value);
}

int main(void)
{
	int64_t shape2[2] = { 2, 2 }, shape1[1] = { 3 }, big[2] = { 1024, 1024 };
	rbln_tensor *x, *tensor, *new_tensor, *cpu, *weights;
	rbln_device_guard guard;
	float values[4];
	int dev;

	printf("is_available() = %s, device_count() = %d\n",
	       rbln_is_available() ? "true" : "false", rbln_device_count());
	if (!rbln_is_available()) {
		printf("no RBLN device: %s\n", rbln_last_error());
		return 0;
	}

	/* with torch.rbln.device(0): x = torch.randn(2, 2, device="rbln:0") */
	guard = rbln_device_enter(0);
	x = rbln_tensor_rand(shape2, 2, RBLN_F32, 1, rbln_current_device());
	CHECK(x);
	rbln_device_exit(&guard);

	/* tensor = torch.tensor([2, 64], device="rbln:1") */
	CHECK(rbln_device_parse(rbln_device_count() > 1 ? "rbln:1" : "rbln:0", &dev) == RBLN_OK);
	tensor = rbln_tensor_full(shape1, 1, RBLN_I32, 64, dev);
	CHECK(tensor);
	/* with torch.rbln.device_of(tensor): torch.zeros(3, device="rbln") */
	guard = rbln_device_enter_of(tensor);
	new_tensor = rbln_tensor_zeros(shape1, 1, RBLN_F32, rbln_current_device());
	CHECK(new_tensor);
	printf("new_tensor is on rbln:%d, like tensor\n", rbln_tensor_device(new_tensor));
	rbln_device_exit(&guard);

	/* cpu = x.to("cpu", non_blocking=True); torch.rbln.synchronize() */
	CHECK(rbln_tensor_materialize(x) == RBLN_OK);
	cpu = rbln_tensor_to(x, RBLN_CPU, true);
	CHECK(cpu);
	CHECK(rbln_synchronize(0) == RBLN_OK);
	CHECK(rbln_tensor_read(cpu, values, sizeof(values)) == RBLN_OK);
	printf("x = [[%.4f, %.4f], [%.4f, %.4f]]\n", values[0], values[1], values[2],
	       values[3]);

	/* Lazy allocation: 4 MiB created on the device live in host memory... */
	CHECK(rbln_set_device(0) == RBLN_OK);
	weights = rbln_tensor_zeros(big, 2, RBLN_F32, 0);
	CHECK(weights);
	print_memory("after creating a 4 MiB tensor");
	/* ...until the device first needs them. */
	CHECK(rbln_tensor_materialize(weights) == RBLN_OK);
	print_memory("after its first device use");

	rbln_tensor_free(weights);
	rbln_tensor_free(cpu);
	rbln_tensor_free(x);
	printf("memory_allocated() = %" PRId64 ", memory_reserved() = %" PRId64
	       " after freeing (cached)\n", rbln_memory_allocated(0), rbln_memory_reserved(0));
	CHECK(rbln_empty_cache(0) == RBLN_OK);
	printf("memory_reserved() = %" PRId64 " after empty_cache()\n", rbln_memory_reserved(0));

	rbln_tensor_free(new_tensor);
	rbln_tensor_free(tensor);
	return 0;
}
