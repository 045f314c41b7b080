// SPDX-License-Identifier: GPL-2.0-only
/*
 * memviz_workload.c - a snapshot with history from librbln's own code, for
 * rbln-memviz's tests
 *
 * Usage: memviz_workload [--no-history] SNAPSHOT.json
 *
 * A small model's memory over memviz_device.c: weights loaded once, three
 * steps whose activations and temporaries come and go (some freed while a
 * job still uses them), a cache emptied below a live block, then the snapshot, with history
 * and stacks from the start (or none: the page's other case). Each phase is a function of its own, exported
 * (-rdynamic) and never inlined, so the sites have distinct names.
 */

#include <stdio.h>
#include <string.h>

#include "memviz_device.h"

#define KiB	1024ull
#define MiB	(1024ull * KiB)
#define LAYERS	4
#define TOKEN_BUFFERS	8

struct rbln_block *weights[LAYERS][2];

__attribute__((noinline)) void load_weights(void)
{
	for (int l = 0; l < LAYERS; l++) {
		weights[l][0] = memviz_alloc(3 * MiB + 100 * KiB);	/* a matrix: large pool */
		weights[l][1] = memviz_alloc(96 * KiB);			/* its bias: small pool */
	}
}

/* Out parameters: a returned call would be a tail call, and its frame gone from the site. */
__attribute__((noinline)) void attention_scratch(int step, struct rbln_block **out)
{
	*out = memviz_alloc((uint64_t)(700 + 150 * step) * KiB);
}

__attribute__((noinline)) void layer_activation(int l, struct rbln_block **out)
{
	*out = memviz_alloc(1536 * KiB + (uint64_t)l * 64 * KiB);
}

__attribute__((noinline)) void forward_step(int step, struct rbln_block **kept)
{
	struct rbln_block *act[LAYERS];

	for (int l = 0; l < LAYERS; l++) {
		struct rbln_block *scratch;

		attention_scratch(step, &scratch);
		layer_activation(l, &act[l]);
		memviz_free(scratch, l % 2);
	}
	/* the last activation is the step's output; the others were temporaries */
	for (int l = 0; l < LAYERS - 1; l++)
		memviz_free(act[l], true);
	*kept = act[LAYERS - 1];
	if (step == 1)
		memviz_finish_jobs();
}

/* Past what a step needs: empty_cache gives it back (an expandable segment unmaps it). */
__attribute__((noinline)) void logits(struct rbln_block **out)
{
	*out = memviz_alloc(24 * MiB);
}

/* Small-pool temporaries that make the small segment grow by several maps... */
__attribute__((noinline)) void token_buffers(struct rbln_block *out[TOKEN_BUFFERS])
{
	for (int i = 0; i < TOKEN_BUFFERS; i++)
		out[i] = memviz_alloc(1 * MiB);
}

/* ...and one kept above them: empty_cache unmaps their maps below it, a hole. */
__attribute__((noinline)) void sampled_tokens(struct rbln_block **out)
{
	*out = memviz_alloc(1 * MiB);
}

int main(int argc, char **argv)
{
	struct rbln_block *out[3], *big, *tokens[TOKEN_BUFFERS], *sampled;
	bool history = !(argc == 3 && !strcmp(argv[1], "--no-history"));

	if (argc != (history ? 2 : 3)) {
		fprintf(stderr, "usage: memviz_workload [--no-history] SNAPSHOT.json\n");
		return 2;
	}
	if (history && rbln_memory_record_history(0, true, true, 100000))
		goto fail;
	load_weights();
	for (int step = 0; step < 3; step++)
		forward_step(step, &out[step]);
	logits(&big);
	token_buffers(tokens);
	sampled_tokens(&sampled);
	for (int i = 0; i < TOKEN_BUFFERS; i++)
		memviz_free(tokens[i], false);
	memviz_free(big, false);
	memviz_free(out[0], false);
	memviz_free(weights[0][0], false);
	memviz_finish_jobs();
	memviz_empty_cache();
	if (rbln_memory_dump_snapshot(0, argv[argc - 1]))
		goto fail;
	return 0;
fail:
	fprintf(stderr, "memviz_workload: %s\n", rbln_last_error());
	return 1;
}
