// SPDX-License-Identifier: MIT
/*
 * fallback.cpp - ops the NPU cannot run, and what explain() learns of them
 *
 * A boxed fallback runs every op without an rbln kernel on the CPU:
 * inputs move to the host and results back through the kernels' copies,
 * which librbln records as host bounces, attributed here to the op. The
 * op counts as a CPU fallback. In explain regions with_stack, records
 * carry the user's Python call site, the first frame outside torch and
 * torch.rbln, found only while such a region is open.
 */

#include <Python.h>

#include <ATen/native/CPUFallback.h>
#include <string>

#include "rbln_torch.h"

namespace rbln_torch {

/* "file.py:12" of the innermost Python frame outside torch, or "". */
static std::string python_site()
{
	std::string site;
	PyGILState_STATE gil;
	PyFrameObject *f;

	if (!Py_IsInitialized())
		return site;
	gil = PyGILState_Ensure();
	f = PyEval_GetFrame();
	Py_XINCREF(f);
	while (f && site.empty()) {
		PyCodeObject *code = PyFrame_GetCode(f);
		const char *file = PyUnicode_AsUTF8(code->co_filename);
		PyFrameObject *back;

		if (file && !strstr(file, "/torch/") && !strstr(file, "/torch_rbln/"))
			site = std::string(file) + ":" + std::to_string(PyFrame_GetLineNumber(f));
		Py_DECREF(code);
		back = PyFrame_GetBack(f);
		Py_DECREF(f);
		f = back;
	}
	Py_XDECREF(f);
	PyErr_Clear();
	PyGILState_Release(gil);
	return site;
}

/* The innermost live Attribution of this thread. */
static thread_local Attribution *current;

Attribution::Attribution(const char *op) : outer_(current)
{
	/* Nested (a fallback's copies): the outermost names the work. */
	if (outer_) {
		op_ = outer_->op_;
		site_ = outer_->site_;
	} else {
		op_ = op ? op : "";
		if (rbln_explain_wants_sites())
			site_ = python_site();
	}
	current = this;
	/* A device op outside regions with stacks: nothing to tell librbln. */
	if (!op_.empty() || !site_.empty())
		apply();
}

Attribution::~Attribution()
{
	current = outer_;
	if (op_.empty() && site_.empty())
		return;
	if (outer_)
		outer_->apply();
	else
		rbln_explain_attribute(nullptr, nullptr);
}

void Attribution::apply() const
{
	rbln_explain_attribute(op_.empty() ? nullptr : op_.c_str(),
			       site_.empty() ? nullptr : site_.c_str());
}

thread_local Fallback *fallback_now;

/* As on every device: one op's tensors on two rbln devices is an error, not a copy. */
static void check_one_device(const c10::OperatorHandle &op, const torch::jit::Stack *stack)
{
	size_t n = op.schema().arguments().size();
	std::optional<c10::Device> seen;

	auto check = [&](const at::Tensor &t) {
		if (!t.defined() || !t.is_privateuseone())
			return;
		if (!seen)
			seen = t.device();
		TORCH_CHECK(*seen == t.device(),
			    "Expected all tensors to be on the same device, but found at least two devices, ",
			    *seen, " and ", t.device(), "! (in ", op.schema().name(), ")");
	};
	for (size_t i = stack->size() - n; i < stack->size(); i++) {
		const c10::IValue &v = (*stack)[i];

		if (v.isTensor())
			check(v.toTensor());
		else if (v.isTensorList())
			for (const at::Tensor &t : v.toTensorList().vec())
				check(t);
	}
}

void cpu_fallback(const c10::OperatorHandle &op, torch::jit::Stack *stack)
{
	const c10::OperatorName &name = op.schema().operator_name();
	Fallback fb{ name.overload_name.empty() ? name.name : name.name + "." + name.overload_name };
	Fallback *outer = fallback_now;
	uint64_t start = now_ns();
	Attribution attr(fb.op.c_str());

	check_one_device(op, stack);
	fallback_now = &fb;
	try {
		at::native::cpu_fallback(op, stack);
	} catch (...) {
		fallback_now = outer;
		throw;
	}
	fallback_now = outer;
	rbln_explain_record_fallback(fb.op.c_str(), now_ns() - start);
}

} // namespace rbln_torch
