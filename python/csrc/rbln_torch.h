// SPDX-License-Identifier: MIT
/*
 * rbln_torch.h - what the parts of torch.rbln's extension share
 *
 * A storage on an rbln device is a librbln tensor: its DataPtr's data and
 * context are the rbln_tensor, which the storage frees. librbln's caching
 * allocator thus holds every byte torch tensors hold, and memory_stats()
 * counts them.
 */
#pragma once

#include <ATen/ATen.h>
#include <c10/core/Allocator.h>

#include <string>
#include <time.h>

extern "C" {
#include <rbln/rbln.h>
}

namespace rbln_torch {

/* The allocator registered for the rbln device. */
c10::Allocator *allocator();

/* Throws a torch error carrying librbln's last message. */
[[noreturn]] void fail(const char *what);

/* The librbln dtype of @type; false when the ISA has none. */
bool to_rbln_dtype(at::ScalarType type, rbln_dtype *out);

/* The librbln tensor an rbln tensor's storage is (NULL for an empty one). */
static inline rbln_tensor *storage_tensor(const at::Tensor &t)
{
	return static_cast<rbln_tensor *>(t.storage().data_ptr().get_context());
}

/* A storage that owns @t (a new librbln tensor), and a tensor of @t's shape on it. */
at::Tensor wrap(rbln_tensor *t, at::ScalarType type);

/*
 * @tensor as a librbln tensor, when librbln can run on it: contiguous, in
 * a dtype of the ISA, and covering its whole storage. Owns a view when
 * the storage's tensor has another shape or dtype.
 */
class Operand {
public:
	explicit Operand(const at::Tensor &tensor);
	~Operand();
	Operand(const Operand &) = delete;
	Operand &operator=(const Operand &) = delete;

	explicit operator bool() const { return t_ != nullptr; }
	rbln_tensor *get() const { return t_; }

private:
	rbln_tensor *t_ = nullptr;
	bool owned_ = false;
};

/*
 * While alive, librbln attributes this thread's host bounces to @op and,
 * in explain regions with_stack, everything to the Python call site.
 * Nested ones keep the outermost's op and site.
 */
class Attribution {
public:
	explicit Attribution(const char *op);
	~Attribution();
	Attribution(const Attribution &) = delete;
	Attribution &operator=(const Attribution &) = delete;

private:
	void apply() const;

	Attribution *outer_;
	std::string op_, site_;
};

static inline uint64_t now_ns()
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/*
 * The CPU fallback running on this thread: its copies are host bounces,
 * as librbln's own CPU ops count them. Inputs that come from device
 * memory send the results back there at once.
 */
struct Fallback {
	std::string op;
	bool from_device = false;
};
extern thread_local Fallback *fallback_now;

/* Runs @op on the CPU, its rbln tensors moved there and back (boxed fallback). */
void cpu_fallback(const c10::OperatorHandle &op, torch::jit::Stack *stack);

} // namespace rbln_torch
